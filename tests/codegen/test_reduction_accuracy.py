"""Compiled float sums stay accurate however long the row: against float64 NumPy.

A running float32 sum of n elements drifts by up to about n * 2**-24 relative (for
2**24 copies of 0.1f, half a percent); compiled sums add blocks of elements into a
wide accumulator, so their error is that of one block. Exact reductions (integers,
argmax) are unchanged."""
import shutil

import numpy as np
import pytest

import rune
from rune import nx

pytestmark = pytest.mark.cc   # the sums under test are the compiled kernels'


def _compiled(f, *args):
    """f jitted, its plan checked to run the reduction as a compiled kernel."""
    jitted = rune.jit(f)
    assert jitted.plan(*args).kernels, "the reduction did not go through the compiler"
    return jitted


def _rel(got, want):
    got, want = np.asarray(got).astype(np.complex128), np.asarray(want).astype(np.complex128)
    return float(np.max(np.abs(got - want) / np.abs(want)))


TENTHS = np.full(1 << 24, 0.1, np.float32)


@pytest.mark.parametrize("reduce", [nx.sum, nx.mean], ids=["sum", "mean"])
def test_float32_sum_and_mean_of_2_24_elements_within_1e_6_of_float64(reduce):
    wide = TENTHS.astype(np.float64)
    want = wide.sum() if reduce is nx.sum else wide.mean()
    x = nx.asarray(TENTHS)
    assert _rel(_compiled(reduce, x)(x), want) < 1e-6
    u = np.random.default_rng(0).random(1 << 24, dtype=np.float32)
    want = u.astype(np.float64).sum() if reduce is nx.sum else u.astype(np.float64).mean()
    assert _rel(_compiled(reduce, nx.asarray(u))(nx.asarray(u)), want) < 1e-6


def test_sum_of_squares_of_1e7_normals_within_1e_5_of_float64():
    x = np.random.default_rng(1).standard_normal(10_000_000).astype(np.float32)
    f = _compiled(lambda v: nx.sum(v * v), nx.asarray(x))
    assert _rel(f(nx.asarray(x)), np.sum(x.astype(np.float64) ** 2)) < 1e-5


@pytest.mark.parametrize("axes,shape", [((0,), (1 << 22, 4)), ((1,), (4, 1 << 22)), ((0, 2), (1024, 3, 4096))],
                         ids=["leading", "last", "outer_and_last"])
def test_every_output_of_a_reduction_over_some_axes_is_as_accurate(axes, shape):
    x = (np.float32(0.1) + np.random.default_rng(2).random(shape, dtype=np.float32) * np.float32(1e-3))
    want = x.astype(np.float64).mean(axis=axes)
    got = _compiled(lambda v: nx.mean(v, axis=axes), nx.asarray(x))(nx.asarray(x))
    assert got.shape == want.shape and _rel(got, want) < 1e-6


def test_complex64_sums_are_blocked_too():
    rng = np.random.default_rng(3)
    z = (np.float32(0.1) + rng.random(1 << 22, dtype=np.float32)
         + 1j * (np.float32(0.2) + rng.random(1 << 22, dtype=np.float32))).astype(np.complex64)
    got = _compiled(nx.sum, nx.asarray(z))(nx.asarray(z))
    assert got.dtype == np.complex64 and _rel(got, z.astype(np.complex128).sum()) < 1e-6


def test_float16_and_bfloat16_sums_accumulate_wider_than_their_dtype():
    h = np.full(1 << 16, 0.1, np.float16)   # 6553.6 after 65536 adds; a float16 running sum stalls at 256
    got = _compiled(nx.sum, nx.asarray(h))(nx.asarray(h))
    assert got.dtype == np.float16 and got == np.float16(h.astype(np.float64).sum())
    b = nx.asarray(h).astype(nx.bfloat16)
    got = _compiled(nx.sum, b)(b)
    want = np.asarray(b).astype(np.float64).sum()
    assert got.dtype == nx.bfloat16 and abs(float(got) - want) / want < 2 ** -8


def test_nan_and_infinity_propagate_through_the_blocks():
    for special in (np.nan, np.inf, -np.inf):
        x = np.ones(1 << 20, np.float32)
        x[777_777] = special
        got = _compiled(nx.sum, nx.asarray(x))(nx.asarray(x))
        np.testing.assert_array_equal(np.asarray(got), np.sum(x))
    x = np.full(1 << 20, 3e38, np.float32)   # the float32 total overflows as NumPy's does
    assert np.isposinf(np.asarray(_compiled(nx.sum, nx.asarray(x))(nx.asarray(x))))


def test_integer_sums_stay_exact_and_wrap_as_numpy():
    x = np.random.default_rng(4).integers(-2 ** 31, 2 ** 31, 1 << 20, dtype=np.int64).astype(np.int32)
    got = _compiled(lambda v: nx.sum(v, dtype=nx.int32), nx.asarray(x))(nx.asarray(x))
    assert got.dtype == np.int32 and int(got) == int(np.sum(x, dtype=np.int32))
    got = _compiled(nx.sum, nx.asarray(x.astype(np.int64)))(nx.asarray(x.astype(np.int64)))
    assert int(got) == int(x.astype(np.int64).sum())


def test_argmax_beside_a_blocked_sum_keeps_the_first_extreme():
    x = np.random.default_rng(5).random((3, 100_000), dtype=np.float32)
    x[0, [10, 70_000]] = 2.0        # a tie: the first wins
    x[1, [90_000, 95_000]] = np.nan  # the first NaN wins
    x[2, -1] = 5.0
    f = _compiled(lambda v: (nx.argmax(v, axis=1), nx.sum(v, axis=1)), nx.asarray(x))
    arg, total = f(nx.asarray(x))
    np.testing.assert_array_equal(np.asarray(arg), np.argmax(x, axis=1))
    finite = [0, 2]
    assert _rel(np.asarray(total)[finite], x[finite].astype(np.float64).sum(axis=1)) < 1e-6
    assert np.isnan(np.asarray(total)[1])


# ---------------------------------------------------------------- the CUDA dialect, emulated

@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to build the CUDA emulation")
def test_cuda_sums_are_blocked_per_thread_under_every_strategy():
    """2**18 copies of 0.1f under each strategy of a 4-SM GPU's dialect, run by the CPU
    emulation of CUDA (the emulation runs every GPU thread in turn, so the size is
    what the test costs). Sequential float32 partials per thread miss the bound (one
    thread per row: ~3e-3; a block per row: ~1e-5)."""
    pytest.importorskip("cupy")
    import cuda_emu
    from rune.codegen.cuda import CudaDialect, DeviceProps
    x = np.full(1 << 18, 0.1, np.float32)
    programs = {"full": (nx.sum, x), "rows": (lambda v: nx.sum(v, axis=1), x.reshape(2, -1))}
    rendered = {}
    for pid, (fn, arg) in programs.items():
        plan = rune.jit(fn).plan(rune.Spec(arg.shape, arg.dtype), target="cuda")
        for strategy in ("thread", "block", "split"):
            dialect = CudaDialect(DeviceProps(sm_count=4), reduce_strategy=strategy)
            rendered[pid, strategy] = plan, cuda_emu.rerender(plan, dialect)
    library = cuda_emu.Library(CudaDialect().prelude(), [u for _, r in rendered.values() for u in r.values()])
    for (pid, strategy), (plan, units) in rendered.items():
        fn, arg = programs[pid]
        assert [k.strategy for _, ks in units.values() for k in ks] == [strategy]
        (got,) = cuda_emu.run_plan(plan, [arg], library, units)
        want = np.asarray(fn(arg.astype(np.float64)))
        assert _rel(got, want) < 5e-7, (pid, strategy, _rel(got, want))


def test_a_large_reduction_to_a_scalar_compiles_under_the_default_threshold(monkeypatch):
    """Small stretches run on NumPy; a stretch counts as large by what it reads too,
    so a sum of 2**20 elements (a scalar result) gets the compiled, blocked kernel."""
    monkeypatch.delenv("RUNE_COMPILE_MIN_SIZE", raising=False)
    assert rune.jit(nx.sum).plan(nx.ones(1 << 20)).kernels
    assert not rune.jit(nx.sum).plan(nx.ones(100)).kernels
