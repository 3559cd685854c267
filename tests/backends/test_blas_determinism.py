"""A matrix product's bits depend on its operands' shapes alone, not on the thread count
(rune/backends/cpu/batched_matmul.py): every shape class of product rune sends to BLAS
(matrix-vector, vector-matrix, dot, gemm square, skinny, tall, large K, transposed
operands, a stack of large products, a stack of small ones, an im2col convolution), in
float32, float64 and complex, eager and jitted, gives the same bits on 1, 2 and 3
threads (3 oversubscribes a two-core machine), and values close to float64 NumPy.

OpenBLAS threaded itself changed them (0.3.31: a float64 300x301x300 product gave four
different results on 1-4 threads, a 2**16 float64 dot and a gemv others on 2 or 3). The
thread count is pinned by the thread policy's functions (rune/backends/cpu/threads.py) and OpenBLAS's
own count set to it, so that a product left to OpenBLAS would thread."""
import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu import threads

THREADS = (1, 2, 3)


@pytest.fixture(scope="module", autouse=True)
def every_product_may_thread():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(threads, "BLAS_MIN_WORK", 1)
        yield


def at_threads(k, fn, *args):
    """The leaves of fn(*args) as NumPy arrays, with the policy, the OpenMP runtime and
    OpenBLAS all at `k` threads."""
    blas, omp = threads.openblas(), threads._openmp
    with pytest.MonkeyPatch.context() as mp:
        for name in ("parallel_threads", "num_threads"):
            mp.setattr(threads, name, lambda: k)
        mp.setattr(threads, "free_cpus", lambda pool=None: k)
        saved = [(lib, lib.get()) for lib in (blas, omp) if lib is not None]
        for lib, _ in saved:
            lib.set(k)
        try:
            return [np.asarray(leaf) for leaf in rune.tree.leaves(fn(*args))]
        finally:
            for lib, have in saved:
                lib.set(have)


def _random(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


# name: (left shape, right shape, how they multiply); each over OpenBLAS's own threading threshold
PRODUCTS = {
    "gemv A @ x": ((700, 600), (600,), nx.matmul),
    "vecmat y @ A": ((600,), (600, 700), nx.matmul),
    "gemv transposed A.T @ x": ((600, 700), (600,), lambda a, b: nx.matmul(a.T, b)),
    "dot": (((1 << 17) + 3,), ((1 << 17) + 3,), nx.dot),
    "gemm K in (Q, 2Q)": ((160, 301), (301, 160), nx.matmul),
    "gemm K large": ((37, 1000), (1000, 37), nx.matmul),
    "gemm tall": ((3000, 40), (40, 24), nx.matmul),
    "gemm skinny K huge": ((8, 20000), (20000, 8), nx.matmul),
    "few outputs, K cut in blocks (a covariance)": ((10, 20000), (10, 20000), lambda a, b: nx.matmul(a, b.T)),
    "gemm transposed left": ((301, 160), (301, 160), lambda a, b: nx.matmul(a.T, b)),
    "gemm transposed right": ((160, 301), (160, 301), lambda a, b: nx.matmul(a, b.T)),
    "stack of large products": ((3, 150, 150), (3, 150, 150), nx.matmul),
    "stack of small products": ((64, 40, 40), (64, 40, 40), nx.matmul),      # complex: over 8192 * 4 each
    "stack of smaller products": ((64, 30, 30), (64, 30, 30), nx.matmul),    # one BLAS thread each, any dtype
    "einsum contracting two axes": ((40, 30, 50), (30, 50, 60), lambda a, b: nx.einsum("ikl,klj->ij", a, b)),
}
NUMPY = {"dot": np.dot, "few outputs, K cut in blocks (a covariance)": lambda a, b: a @ b.T, "gemv transposed A.T @ x": lambda a, b: a.T @ b,
         "gemm transposed left": lambda a, b: a.T @ b, "gemm transposed right": lambda a, b: a @ b.T,
         "einsum contracting two axes": lambda a, b: np.einsum("ikl,klj->ij", a, b)}
DTYPES = {"float32": (np.float32, 2e-5), "float64": (np.float64, 1e-12), "complex64": (np.complex64, 2e-5),
          "complex128": (np.complex128, 1e-12)}


def _products(operands):
    return {name: PRODUCTS[name][2](a, b) for name, (a, b) in operands.items()}


def _conv(x, w):
    return nx.conv(x, w)   # 1-d: im2col and one BLAS product of 2024 x 700 by 700 x 16


@pytest.fixture(scope="module")
def jitted():
    return rune.jit(_products), rune.jit(_conv)


def _assert_bits_equal(got, want, what):
    differ = {}
    for name, g, w in zip(sorted(PRODUCTS), got, want):
        g, w = np.atleast_1d(g), np.atleast_1d(w)
        same = (g.view(np.uint8) == w.view(np.uint8)).reshape(g.shape + (-1,)).all(-1)
        if not same.all():
            differ[name] = tuple(int(i) for i in np.argwhere(~same)[0])
    assert not differ, f"{what}: bits differ (product: first index) {differ}"


def _assert_close(got, want, rtol, what):
    scale = np.maximum(np.abs(want), 1)
    err = np.abs(got.astype(want.dtype) - want) / scale
    assert err.max() <= rtol * 64, f"{what}: relative error {err.max():.3g}"   # sums of up to 2**17 terms


@pytest.mark.cc
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_every_product_shape_gives_the_same_bits_on_1_2_and_3_threads(jitted, mode, dtype):
    numpy_dtype, rtol = DTYPES[dtype]
    rng = np.random.default_rng(31)
    data = {name: (_random(rng, s, numpy_dtype), _random(rng, t, numpy_dtype))
            for name, (s, t, _) in PRODUCTS.items()}
    fn = jitted[0] if mode == "jit" else _products
    args = {name: (nx.asarray(a), nx.asarray(b)) for name, (a, b) in data.items()}
    results = {k: at_threads(k, fn, args) for k in THREADS}
    for k in THREADS[1:]:
        _assert_bits_equal(results[k], results[1], f"{mode} {dtype} on {k} threads against 1")
    wide = np.complex128 if np.dtype(numpy_dtype).kind == "c" else np.float64
    for name, got in zip(sorted(PRODUCTS), results[1]):
        a, b = (x.astype(wide) for x in data[name])
        _assert_close(got, NUMPY.get(name, np.matmul)(a, b), rtol, f"{mode} {dtype} {name}")


@pytest.mark.cc
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_an_im2col_convolution_gives_the_same_bits_on_1_2_and_3_threads(jitted, mode):
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((4, 512, 100)), rng.standard_normal((7, 100, 16))
    fn = jitted[1] if mode == "jit" else _conv
    results = {k: at_threads(k, fn, nx.asarray(x), nx.asarray(w))[0] for k in THREADS}
    for k in THREADS[1:]:
        np.testing.assert_array_equal(results[k].view(np.uint8), results[1].view(np.uint8), f"{mode} conv, {k} threads")
    windows = np.lib.stride_tricks.sliding_window_view(x, 7, axis=1)          # (N, out, C, window)
    want = np.einsum("nock,kcp->nop", windows, w)
    np.testing.assert_allclose(results[1], want, rtol=1e-10, atol=1e-10)


@pytest.mark.cc
def test_products_too_small_for_threads_keep_their_bits_while_blas_has_threads(monkeypatch):
    """Under BLAS_MIN_WORK a product is NumPy's one call: BLAS is still held at one
    thread for it, as OpenBLAS would thread a 2**17 dot, a 700x600 gemv or a 37x1000x37
    gemm on its own."""
    monkeypatch.setattr(threads, "BLAS_MIN_WORK", 1 << 22)
    rng = np.random.default_rng(7)
    names = ("dot", "gemv A @ x", "gemm K large")   # 2**17 + 3, 420000 and 1369000 multiply-adds
    data = {name: (nx.asarray(_random(rng, PRODUCTS[name][0], np.float64)),
                   nx.asarray(_random(rng, PRODUCTS[name][1], np.float64))) for name in names}
    results = {k: at_threads(k, _products, data) for k in THREADS}
    for k in THREADS[1:]:
        for name, got, want in zip(sorted(names), results[k], results[1]):
            assert got.tobytes() == want.tobytes(), f"{name} on {k} threads against 1"
