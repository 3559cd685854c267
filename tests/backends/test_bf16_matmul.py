"""bfloat16 matrix products on rune's own kernel (rune/backends/cpu/bf16_gemm.py; CPUs with
AVX512-BF16, the others skip what needs it):
float32 sums rounded once, checked against float64 NumPy on the same bfloat16
values; no float32 copy of the operands (the old route cast both up and the result
down); the same bits on 1, 2 and 3 threads; eager, jitted and differentiated
products of rune.nx take it."""
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu import batched_matmul, bf16_gemm, compiler as c_compiler, threads

from test_blas_determinism import at_threads

pytestmark = pytest.mark.cc

BF16 = np.dtype(ml_dtypes.bfloat16)


def _bf16(rng, shape):
    return rng.standard_normal(shape).astype(BF16)


def _close_to_float64(out, a, b):
    """Within a bfloat16 rounding (2**-8 relative, and K float32 roundings) of the exact
    product of the bfloat16 values."""
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert out.dtype == BF16 and out.shape == exact.shape
    scale = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    bound = 2.0 ** -8 * np.abs(exact) + (a.shape[-1] + 1) * 2.0 ** -23 * scale + 1e-30
    assert (np.abs(out.astype(np.float64) - exact) <= bound).all()


def _kernel(a, b):
    out = bf16_gemm.matmul(a, b, c_compiler.find())
    if out is None:
        pytest.skip("no C compiler, or a CPU without AVX512-BF16 (products take the float32 route)")
    return out


# (a's shape, b's shape, how a and b are laid out): odd K, edges of the 8 x 32 and 16 x 16 blocks,
# rows read in place and packed, transposed operands, stacks with one and with several batch strides
CASES = {
    "one": ((1, 1), (1, 1), None),
    "odd K, ragged edges": ((37, 65), (65, 33), None),
    "rows in place and a packed rest": ((70, 33), (33, 70), None),
    "a 16-column panel": ((2, 3, 64, 64), (2, 3, 64, 16), None),
    "long K": ((8, 1001), (1001, 3), None),
    "transposed operands": ((65, 100), (50, 65), lambda a, b: (a.T, b.T)),
    "a weight's gradient (a transposed, a long odd K)": ((301, 40), (301, 24), lambda a, b: (a.T, b)),
    "attention heads (a non-collapsible stack)": ((4, 64, 3, 16), (4, 3, 16, 64),
                                                 lambda a, b: (a.transpose(0, 2, 1, 3), b)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bf16_product_is_the_float64_product_rounded(name):
    left, right, layout = CASES[name]
    rng = np.random.default_rng(len(name))
    a, b = _bf16(rng, left), _bf16(rng, right)
    if layout is not None:
        a, b = layout(a, b)
    _close_to_float64(_kernel(a, b), a, b)


def test_bf16_special_values_and_empty_products():
    a = np.array([[np.inf, 1.0, 2.0], [np.nan, 0.0, 1.0], [1.0, 1.0, 1.0]], BF16)
    b = np.array([[1.0], [1.0], [2.0]], BF16)
    out = _kernel(a, b).astype(np.float64)
    assert out[0, 0] == np.inf and np.isnan(out[1, 0]) and out[2, 0] == 4.0   # an odd K's last pair alone
    assert _kernel(np.ones((3, 0), BF16), np.ones((0, 4), BF16)).astype(np.float64).tolist() == [[0.0] * 4] * 3
    assert _kernel(np.ones((0, 5), BF16), np.ones((5, 4), BF16)).shape == (0, 4)


def test_bf16_product_makes_no_float32_copy():
    # The float32 route held a, b and the result in float32 (6 bytes per element of each beside
    # the bfloat16 result); the kernel holds the result and b packed (its own size again).
    rng = np.random.default_rng(1)
    a, b = _bf16(rng, (384, 384)), _bf16(rng, (384, 384))
    _kernel(a, b)   # built and loaded before measuring
    tracemalloc.start()
    try:
        out = batched_matmul.matmul(a, b, c_compiler.find())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.dtype == BF16
    assert peak < 2.5 * a.nbytes, peak


def test_bf16_product_bits_do_not_depend_on_the_thread_count(monkeypatch):
    monkeypatch.setattr(threads, "BLAS_MIN_WORK", 1)
    rng = np.random.default_rng(2)
    a, b = nx.asarray(_bf16(rng, (300, 129))), nx.asarray(_bf16(rng, (129, 200)))
    stack_a, stack_b = nx.asarray(_bf16(rng, (6, 70, 48))), nx.asarray(_bf16(rng, (6, 48, 16)))
    # a weight's gradient: one tile of the largest size, cut smaller for 2 and 3 threads
    xt, dy = nx.asarray(_bf16(rng, (1001, 40)).T), nx.asarray(_bf16(rng, (1001, 50)))
    assert bf16_gemm._tile(40, 50, 1, 1) == (48, 64) and bf16_gemm._tile(40, 50, 1, 3) == (16, 32)
    runs = [at_threads(k, lambda: (a @ b, stack_a @ stack_b, xt @ dy)) for k in (1, 2, 3)]
    for run in runs[1:]:
        for x, y in zip(runs[0], run):
            assert np.array_equal(x.view(np.uint16), y.view(np.uint16))


def test_nx_products_of_bf16_take_the_kernel_eagerly_jitted_and_differentiated():
    rng = np.random.default_rng(3)
    a, b = _bf16(rng, (2, 33, 40)), _bf16(rng, (40, 17))
    x, y = nx.asarray(a), nx.asarray(b)
    want = _kernel(a, np.broadcast_to(b, (2, 40, 17)))
    for out in (x @ y, rune.jit(lambda p, q: p @ q)(x, y), nx.einsum("bik,kj->bij", x, y)):
        assert out.dtype == nx.bfloat16
        assert np.array_equal(np.asarray(out).view(np.uint16), want.view(np.uint16))
    # d/dx sum(x @ y) = ones @ y.T, each row the sum of y's row: bfloat16 sums of 17 values
    grad = rune.grad(lambda p: (p @ y).astype(nx.float32).sum())(x)
    _close_to_float64(np.asarray(grad), np.ones((2, 33, 17), BF16), b.T)


def _conv_float64(x, w):
    """A SAME-padded stride-1 convolution (NHWC by HWIO) in float64 NumPy."""
    kh, kw = w.shape[:2]
    padded = np.pad(x.astype(np.float64), ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))   # N H W C kh kw
    return np.einsum("nhwcij,ijco->nhwo", windows, w.astype(np.float64))


def test_bf16_convolution_takes_the_kernel_without_a_float32_copy():
    # bfloat16 convolutions go through im2col patches and the host matmul: the patches
    # are no longer copied to float32 (the old route held them in bfloat16 and float32)
    rng = np.random.default_rng(4)
    x, w = _bf16(rng, (2, 24, 24, 16)), _bf16(rng, (3, 3, 16, 8))
    if not bf16_gemm.available(c_compiler.find()):
        pytest.skip("no C compiler, or a CPU without AVX512-BF16")
    conv = lambda: nx.conv(nx.asarray(x), nx.asarray(w), padding="SAME")
    conv()
    tracemalloc.start()
    try:
        out = conv()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    exact = _conv_float64(x, w)
    got = np.asarray(out)
    assert got.dtype == BF16
    assert np.abs(got.astype(np.float64) - exact).max() <= 2.0 ** -7 * np.abs(exact).max()
    patches = x.shape[0] * x.shape[1] * x.shape[2] * 9 * x.shape[3] * BF16.itemsize
    assert peak < 2 * patches, (peak, patches)
