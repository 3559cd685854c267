"""Random samples have the same bits everywhere, and the right distribution.

- Every sampler of rune.nx.random, eager (NumPy op by op) and under rune.jit (one
  compiled C stretch), bit for bit, for several keys, shapes and float dtypes.
- The CUDA kernels of normal, uniform, gumbel, exponential and truncated_normal,
  run on the CPU under tests/cuda_emu (and on a GPU where there is one), bit for
  bit with eager; NVRTC compiles them without a fused multiply-add.
- Distributions against SciPy (Kolmogorov-Smirnov at 1e5 samples with fixed keys,
  moments, frequencies), and the accuracy of exact_math's building blocks against
  float64 NumPy/SciPy and exact decimal logarithms and exponentials over dense grids.
- random.key's seed range and types.
"""
from decimal import Decimal, localcontext

import ml_dtypes
import numpy as np
import pytest
import scipy.special
import scipy.stats

import rune
from rune import nx
from rune.backends.cpu import compiler
from rune.backends.cuda import nvrtc
from rune.codegen.cuda import CudaDialect, DeviceProps
from rune.errors import ArgumentError, DTypeError, ScalarOverflowError, ShapeError, UsageError
from rune.backends.stretch import CompiledStretch
from rune.compiler.target import TargetStretch
from rune.nx import exact_math
from rune.backends import compile_pending

import cuda_emu

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.float16, BF16, np.float32, np.float64]
KEYS = [nx.random.key(s) for s in (0, 7, 2 ** 63 + 12345)]
SHAPES = [(), (7,), (2, 3, 17)]   # 0-d, 1-d and 3-d: the kernels are the same code for every shape
# (so float32's samplers are drawn in every shape, the other dtypes' in the 3-d one: each
# shape's kernels are a sampler's code again, and compiling them is most of this file's time)
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a):
    """An array's raw bits (so -0.0 and NaN payloads count)."""
    a = np.asarray(a)
    return a.view(UINT[a.itemsize]) if a.dtype.kind in "fV" or a.dtype == BF16 else a


def _assert_same_bits(got, want, where):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, where
    differ = _bits(got) != _bits(want)
    assert not differ.any(), \
        f"{where}: {differ.sum()} of {differ.size} differ, e.g. {got[differ][:4]} vs {want[differ][:4]}"


def _check_eager_matches_jit(name, jitted_samplers):
    """EAGER_AND_JIT[name] eager and jitted, for each key; the jitted program runs as
    compiled C kernels (only, unless its entry says otherwise)."""
    sample, only_kernels = EAGER_AND_JIT[name]
    jitted = jitted_samplers[name]
    plan = jitted.plan(KEYS[0])
    assert plan.kernels and all(k.target == "c" for k in plan.kernels)
    if only_kernels:
        assert all(type(s) is CompiledStretch for s in plan.steps), [type(s).__name__ for s in plan.steps]
    for i, k in enumerate(KEYS):
        got_all, want_all = rune.tree.leaves(jitted(k)), rune.tree.leaves(sample(k))
        assert len(got_all) == len(want_all)
        for j, (got, want) in enumerate(zip(got_all, want_all)):
            _assert_same_bits(got, want, f"{name}: key {i}, output {j}")


def _every_shape(draw, shapes=SHAPES):
    return lambda k: tuple(draw(k, s) for s in shapes)


def test_compilers_never_fuse_multiply_add():
    """What the exact samplers rely on: a * b + c rounds twice on every target."""
    assert "-ffp-contract=off" in compiler.FLAGS
    assert "--fmad=false" in nvrtc.OPTIONS


def _float_samplers(dtype):
    return _every_shape(lambda k, s: (
        nx.random.normal(k, s, dtype),
        nx.random.uniform(k, s, dtype),
        nx.random.uniform(k, s, dtype, -3.0, 7.5),
        nx.random.exponential(k, s, dtype),
        nx.random.gumbel(k, s, dtype),
        nx.random.truncated_normal(k, -1.5, 2.0, s, dtype),
        nx.random.truncated_normal(k, 2.5, np.inf, s, dtype)), SHAPES if dtype == np.float32 else SHAPES[-1:])


def _samplers_with_array_bounds(k):
    lower = np.array([-np.inf, -3.0, 0.0, 1.0, 4.0], np.float32)
    finite = lower[1:]
    return (nx.random.uniform(k, (3, 4), nx.float32, finite, nx.asarray(finite) + 0.5),
            nx.random.uniform(k, (2, 4), nx.float16, -5.0, nx.asarray(finite)),
            nx.random.truncated_normal(k, lower, lower + 0.5),
            nx.random.truncated_normal(k, lower, 6.0, (3, 5), nx.float64),
            nx.random.truncated_normal(k, -lower[1:], 9.0, (2, 4), nx.bfloat16))


def _discrete_samplers(k):
    logits = np.linspace(-2, 2, 3 * 11, dtype=np.float32).reshape(3, 11)
    return (
        *_every_shape(lambda k, s: (nx.random.bernoulli(k, 0.3, s),
                                    nx.random.randint(k, s, -5, 1000),
                                    nx.random.randint(k, s, 0, 7, nx.uint8)))(k),
        nx.random.categorical(k, logits),
        nx.random.categorical(k, logits.astype(np.float64), axis=0, shape=(5, 11)),
        nx.random.categorical(k, logits.astype(BF16), shape=(4, 3)),
        nx.random.split(k, 3),
        nx.random.fold_in(k, 12345),
        nx.random.choice(k, 10, (5,)),
        nx.random.choice(k, logits, (2, 2), axis=1),
        nx.random.choice(k, 11, (7,), p=np.linspace(0.0, 1.0, 11, dtype=np.float32)),
        nx.random.choice(k, 11, (3,), p=np.linspace(0.0, 1.0, 11)),
        nx.random.choice(k, 11, (4,), replace=False, p=np.linspace(0.0, 1.0, 11, dtype=np.float32)))


def _far_tail_samplers(k):
    return tuple(nx.random.truncated_normal(k, lo, hi, (3, 5), dtype)
                 for lo, hi, dtype in TAIL_INTERVALS + [(2.0, 3.0, BF16)])


# The programs the eager-and-jit tests check: name -> (sample(key), a tuple of arrays;
# whether its plan is compiled C stretches only)
EAGER_AND_JIT = {
    **{f"float samplers, {np.dtype(d).name}": (_float_samplers(d), True) for d in FLOATS},
    "array bounds": (_samplers_with_array_bounds, True),
    "discrete": (_discrete_samplers, False),   # a weighted choice without replacement sorts on the host
    "far tails": (_far_tail_samplers, True),
}


@pytest.fixture(scope="module")
def jitted_samplers():
    """EAGER_AND_JIT's programs jitted and planned, and all their kernels compiled in one
    batch (compiler runs shared among them, not one or more per test)."""
    jitted = {name: rune.jit(sample) for name, (sample, _) in EAGER_AND_JIT.items()}
    for j in jitted.values():
        j.plan(KEYS[0])   # held by its jitted function's cache until compiled
    compile_pending()
    return jitted


@pytest.mark.cc   # the jitted program must run as compiled C kernels
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_float_samplers_eager_and_jit_agree_bit_for_bit(dtype, jitted_samplers):
    _check_eager_matches_jit(f"float samplers, {np.dtype(dtype).name}", jitted_samplers)


@pytest.mark.cc   # the jitted program must run as compiled C kernels
def test_samplers_with_array_bounds_eager_and_jit_agree(jitted_samplers):
    _check_eager_matches_jit("array bounds", jitted_samplers)


@pytest.mark.cc   # the jitted program must run as compiled C kernels
def test_discrete_samplers_eager_and_jit_agree_bit_for_bit(jitted_samplers):
    _check_eager_matches_jit("discrete", jitted_samplers)


@pytest.mark.cc   # the jitted program must run as compiled C kernels
def test_permutations_eager_and_jit_agree():
    x = np.arange(3 * 13, dtype=np.float32).reshape(3, 13)
    jitted = rune.jit(lambda k: (nx.random.permutation(k, 13), nx.random.permutation(k, x, axis=1),
                                 nx.random.permutation(k, x, axis=1, independent=True)))
    assert jitted.plan(KEYS[0]).kernels
    for k in KEYS:
        for got, want in zip(jitted(k), (nx.random.permutation(k, 13), nx.random.permutation(k, x, axis=1),
                                         nx.random.permutation(k, x, axis=1, independent=True))):
            _assert_same_bits(got, want, "permutation")


def test_samplers_under_vmap_over_keys_draw_what_each_key_draws():
    keys = nx.random.split(KEYS[1], 4)
    batched = rune.jit(rune.vmap(lambda k: nx.random.normal(k, (9,))))(keys)
    for i in range(4):
        _assert_same_bits(batched[i], nx.random.normal(keys[i], (9,)), f"lane {i}")


# ---------------------------------------------------------------- CUDA, emulated

EMU_DIALECT = CudaDialect(device=DeviceProps(sm_count=2), block=64, blocks_per_sm=2, items_per_thread=2)


def _cuda_programs():
    return [
        ("normal", lambda k: (nx.random.normal(k, (37, 29)), nx.random.normal(k, (301,), nx.float64),
                              nx.random.normal(k, (), nx.float16), nx.random.normal(k, (33,), nx.bfloat16))),
        ("uniform", lambda k: (nx.random.uniform(k, (1001,)), nx.random.uniform(k, (5, 7), nx.float64, -2.0, 3.0),
                               nx.random.uniform(k, (301,), nx.float16, -1.0, 1.0))),
        ("log_based", lambda k: (nx.random.gumbel(k, (257,)), nx.random.exponential(k, (129,), nx.float64))),
        ("truncated", lambda k: (nx.random.truncated_normal(k, -0.5, 2.0, (300,)),
                                 nx.random.truncated_normal(k, 3.0, 4.0, (129,), nx.float64),
                                 nx.random.truncated_normal(k, -1.0, 1.0, (77,), nx.float16))),
    ]


@pytest.fixture(scope="module")
def cuda_plans():
    key = np.asarray(KEYS[2])
    plans = {}
    for name, fn in _cuda_programs():
        plan = rune.jit(fn).plan(key, target="cuda")
        plans[name] = (fn, plan, cuda_emu.rerender(plan, EMU_DIALECT))
    return key, plans


def _check_cuda(library, plans, where):
    key, plans = plans
    for name, (fn, plan, rendered) in plans.items():
        kernels = [k for _, ks in rendered.values() for k in ks]
        # every value comes out of CUDA kernels (no host step in between)
        assert kernels and all(type(s) is TargetStretch for s in plan.steps), name
        assert any(ln.grid > 1 for k in kernels for ln in k.launches), name
        got = cuda_emu.run_plan(plan, [key], library, rendered)
        for j, (g, want) in enumerate(zip(got, fn(nx.asarray(key)))):
            _assert_same_bits(g, want, f"{name} output {j} ({where})")


def _units(plans):
    return [u for _, _, rendered in plans[1].values() for u in rendered.values()]


@pytest.mark.cc   # builds the CUDA emulation with a C++ compiler
@pytest.mark.skipif(cuda_emu.CXX is None, reason="no g++ to build the CUDA emulation")
def test_cuda_kernels_draw_the_eager_bits_under_the_emulation(cuda_plans):
    _check_cuda(cuda_emu.Library(EMU_DIALECT.prelude(), _units(cuda_plans)), cuda_plans, "CUDA, emulated")


@pytest.mark.cuda
def test_cuda_kernels_draw_the_eager_bits_on_a_gpu(cuda_plans):
    cupy = pytest.importorskip("cupy")
    arch = f"sm_{cupy.cuda.Device().compute_capability}"
    library = cuda_emu.GpuLibrary(EMU_DIALECT.prelude(), _units(cuda_plans), arch)
    _check_cuda(library, cuda_plans, "on a GPU")


@pytest.mark.nvrtc
def test_nvrtc_compiles_the_samplers_without_fused_multiply_add(cuda_plans):
    _, plans = cuda_plans
    _, plan, _ = plans["normal"]
    source = CudaDialect().prelude() + "\n".join(k.source for k in plan.kernels)
    ptx = nvrtc.compile_unit(source, ptx=True).decode(errors="replace")
    # correctly rounded arithmetic, never fused, no approximate log and no flushing of subnormals
    assert "mul.rn.f32" in ptx and "div.rn.f32" in ptx and "sqrt.rn.f32" in ptx
    assert "fma.rn" not in ptx and "lg2" not in ptx and "ftz" not in ptx


# ---------------------------------------------------------------- distributions

N = 100_000


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_continuous_samplers_pass_kolmogorov_smirnov(dtype):
    k = nx.random.key(2024)
    draws = {
        "norm": nx.random.normal(k, (N,), dtype),
        "uniform": nx.random.uniform(k, (N,), dtype),
        "expon": nx.random.exponential(k, (N,), dtype),
        "gumbel_r": nx.random.gumbel(k, (N,), dtype),
    }
    for dist, x in draws.items():
        x = np.asarray(x)
        assert x.dtype == dtype and np.isfinite(x).all()
        assert scipy.stats.kstest(x.astype(np.float64), dist).pvalue > 1e-3, dist
    for lower, upper in [(-2.0, 2.0), (-0.5, np.inf), (3.0, 8.0), (-7.0, -6.5)]:
        x = np.asarray(nx.random.truncated_normal(k, lower, upper, (N,), dtype))
        assert x.dtype == dtype and (x > lower).all() and (x < upper).all()
        assert scipy.stats.kstest(x, scipy.stats.truncnorm(lower, upper).cdf).pvalue > 1e-3, (lower, upper)
    u = np.asarray(nx.random.uniform(k, (N,), dtype, -2.0, 5.0))
    assert u.min() >= -2.0 and u.max() < 5.0
    assert scipy.stats.kstest(u, scipy.stats.uniform(-2.0, 7.0).cdf).pvalue > 1e-3


def test_normal_tails_are_symmetric_and_bounded():
    z = np.asarray(nx.random.normal(nx.random.key(5), (N,)))
    assert abs(z.mean()) < 4 / np.sqrt(N) and abs(z.var() - 1) < 0.02
    # p in [2**-24, 1 - 2**-24]: |z| never beyond the quantile of 2**-24
    assert np.abs(z).max() <= -scipy.special.ndtri(2.0 ** -24) * (1 + 1e-6)
    # the draws' p and 1 - p are equally likely: the quantile is odd exactly
    p = np.float32((2 * np.arange(0, 2 ** 23, 9973) + 1) * 2.0 ** -24)
    _assert_same_bits(np.asarray(exact_math.ndtri(nx.asarray(1 - p))), -np.asarray(exact_math.ndtri(nx.asarray(p))),
                      "ndtri(1 - p) against -ndtri(p)")


def test_uniform_never_reaches_maxval():
    """With maxval two steps above minval, draws at or above the middle value would round
    to maxval: they take the value below it instead, for host and array bounds alike."""
    k = nx.random.key(6)
    for dtype in (np.float16, BF16, np.float32, np.float64):
        step = 2.0 ** -{np.float16: 10, BF16: 7, np.float32: 23, np.float64: 52}[dtype]
        lower, upper = np.asarray(1.0, dtype), np.asarray(1 + 2 * step, dtype)
        for lo, hi in ((lower, upper), (nx.asarray(lower), nx.asarray(upper))):
            x = np.asarray(nx.random.uniform(k, (1000,), dtype, lo, hi)).astype(np.float64)
            assert set(np.unique(x)) == {1.0, 1.0 + step}, dtype
    x = np.asarray(nx.random.uniform(k, (N,), np.float32, 0.0, 10.0))
    assert x.max() < 10.0


def test_truncated_normal_stays_strictly_inside_narrow_intervals():
    k = nx.random.key(4)
    for dtype in (np.float16, BF16, np.float32, np.float64):
        step = 2.0 ** -{np.float16: 10, BF16: 7, np.float32: 23, np.float64: 52}[dtype]
        lower, upper = np.asarray(1.0, dtype), np.asarray(1 + 2 * step, dtype)   # one value between
        x = np.asarray(nx.random.truncated_normal(k, lower, upper, (1000,), dtype))
        assert x.dtype == dtype and (x > lower).all() and (x < upper).all(), dtype
    with pytest.raises(ShapeError, match="do not broadcast to shape"):
        nx.random.truncated_normal(k, np.zeros(3), 1.0, (2,))


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=str)
def test_half_precision_normals_are_rounded_float32_normals(dtype):
    k = nx.random.key(11)
    half = np.asarray(nx.random.normal(k, (N // 10,), dtype))
    single = np.asarray(nx.random.normal(k, (N // 10,), np.float32))
    _assert_same_bits(half, single.astype(dtype), "16-bit normal against rounded float32 normal")
    u = np.asarray(nx.random.uniform(k, (N // 10,), dtype)).astype(np.float64)
    assert u.min() >= 0 and u.max() < 1
    assert scipy.stats.kstest(u, "uniform").pvalue > 1e-3


def test_bernoulli_and_randint_moments():
    k = nx.random.key(99)
    b = np.asarray(nx.random.bernoulli(k, 0.3, (N,)))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.3) < 4 * np.sqrt(0.21 / N)
    r = np.asarray(nx.random.randint(k, (N,), -3, 7))
    assert r.min() == -3 and r.max() == 6
    assert abs(r.mean() - 1.5) < 4 * np.sqrt(8.25 / N)            # discrete uniform on 10 values
    assert abs(r.var() - 8.25) < 0.15
    counts = np.bincount(r + 3, minlength=10)
    assert scipy.stats.chisquare(counts).pvalue > 1e-3


def test_choice_frequencies():
    k = nx.random.key(8)
    p = np.array([0.1, 0.0, 0.6, 0.3])
    drawn = np.asarray(nx.random.choice(k, 4, (N,), p=p))
    assert scipy.stats.chisquare(np.bincount(drawn, minlength=4)[[0, 2, 3]], p[[0, 2, 3]] * N).pvalue > 1e-3
    # without replacement: (first, second) = (i, j) with probability p_i p_j / (1 - p_i)
    keys = nx.random.split(k, 20_000)
    pairs = np.asarray(rune.vmap(lambda kk: nx.random.choice(kk, 4, (2,), replace=False, p=p))(keys))
    assert (pairs[:, 0] != pairs[:, 1]).all() and not (pairs == 1).any()
    cells = [(i, j) for i in (0, 2, 3) for j in (0, 2, 3) if i != j]
    observed = [np.sum((pairs[:, 0] == i) & (pairs[:, 1] == j)) for i, j in cells]
    expected = [p[i] * p[j] / (1 - p[i]) * len(pairs) for i, j in cells]
    assert scipy.stats.chisquare(observed, expected).pvalue > 1e-3
    # uniform without replacement: a full draw is a permutation; with replacement uniform counts
    np.testing.assert_array_equal(np.sort(np.asarray(nx.random.choice(k, 50, (50,), replace=False))), np.arange(50))
    x = np.arange(12.0).reshape(3, 4)
    rows = np.asarray(nx.random.choice(k, x, (2, 2), replace=False, axis=1))
    assert rows.shape == (3, 2, 2) and len(set(rows[0].ravel())) == 4     # four distinct columns...
    np.testing.assert_array_equal(rows - rows[0], np.broadcast_to([[[0]], [[4]], [[8]]], (3, 2, 2)))  # ...whole
    assert scipy.stats.chisquare(np.bincount(np.asarray(nx.random.choice(k, 7, (N,))), minlength=7)).pvalue > 1e-3


def test_choice_refuses_what_it_cannot_draw():
    k = nx.random.key(0)
    with pytest.raises(ArgumentError, match="cannot draw 6 values from 5 without replacement"):
        nx.random.choice(k, 5, (2, 3), replace=False)
    with pytest.raises(ArgumentError, match="empty population"):
        nx.random.choice(k, 0, (1,))
    with pytest.raises(ShapeError, match=r"shape \(5,\)"):
        nx.random.choice(k, 5, (2,), p=np.ones(4))
    with pytest.raises(UsageError, match="an int or an array"):
        nx.random.choice(k, 5.0)


def test_categorical_frequencies_follow_softmax():
    logits = np.array([0.0, 1.0, -1.0, 2.0, 0.5], np.float32)
    draws = np.asarray(nx.random.categorical(nx.random.key(3), logits, shape=(N,)))
    weights = np.exp(logits.astype(np.float64))
    expected = weights / weights.sum() * N
    assert scipy.stats.chisquare(np.bincount(draws, minlength=5), expected).pvalue > 1e-3


# ---------------------------------------------------------------- building blocks

def _ulps(got, want, dtype):
    """|got - want| in units of `dtype`'s spacing at `want` (want in float64 or better)."""
    want = np.asarray(want, np.float64)
    return np.abs(np.asarray(got, np.float64) - want) / np.spacing(np.abs(want).astype(dtype)).astype(np.float64)


def test_log_float32_within_one_ulp_over_every_binade():
    x = np.concatenate([np.geomspace(1.4e-45, 3.4e38, 300_000), np.linspace(0.5, 2.0, 200_001),
                        1 - np.geomspace(6e-8, 0.3, 20_000)]).astype(np.float32)
    x = x[x > 0]
    got = np.asarray(exact_math.log(nx.asarray(x)))
    assert got.dtype == np.float32
    assert _ulps(got, np.log(x.astype(np.float64)), np.float32).max() < 1


def test_log_float64_within_one_ulp_of_exact_logarithms():
    x = np.concatenate([np.geomspace(5e-324, 1.7e308, 3000), np.linspace(0.5, 2.0, 3001),
                        1 - np.geomspace(1e-16, 0.3, 500)])
    with localcontext() as context:
        context.prec = 40
        exact = np.array([float(Decimal(float(v)).ln()) for v in x])   # correctly rounded
    got = np.asarray(exact_math.log(nx.asarray(x)))
    assert _ulps(got, exact, np.float64).max() <= 1


def test_log_special_values_and_bounded_variant():
    x = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1.0, 2.0, 1e-40], np.float32)
    got = np.asarray(exact_math.log(nx.asarray(x)))
    np.testing.assert_array_equal(got[:6], [-np.inf, -np.inf, np.nan, np.inf, np.nan, np.nan])
    assert got[6] == 0 and got[7] == np.float32(np.log(2.0))
    assert abs(got[8] - np.log(1e-40)) < 1e-5 * 92
    # the bounded form (steps for [lo, hi] only) gives the same bits inside its range
    x = np.float32((np.arange(1, 4001) + 0.5) * 2.0 ** -12)
    _assert_same_bits(exact_math.log(nx.asarray(x), bounds=(2.0 ** -12, 1.0)), exact_math.log(nx.asarray(x)),
                      "bounded log")
    with pytest.raises(DTypeError, match="float32 or float64"):
        exact_math.log(nx.asarray(np.ones(3, np.float16)))


def test_ndtri_float32_within_a_few_ulp_on_every_sampled_p():
    p = np.float32((2 * np.arange(0, 2 ** 23, 29, dtype=np.float64) + 1) * 2.0 ** -24)  # the normal sampler's grid
    got = np.asarray(exact_math.ndtri(nx.asarray(p), lowest=2.0 ** -24))
    err = _ulps(got, scipy.special.ndtri(p.astype(np.float64)), np.float32)
    assert err.max() <= 6 and err.mean() < 1.2
    deep = np.geomspace(1e-38, 1e-6, 20_000).astype(np.float32)   # the far tail, unbounded form
    assert _ulps(np.asarray(exact_math.ndtri(nx.asarray(deep))), scipy.special.ndtri(deep.astype(np.float64)),
                 np.float32).max() <= 6


def test_ndtri_float64_close_to_scipy_and_special_values():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.random(100_000), np.geomspace(2.0 ** -53, 0.5, 20_000),
                        1 - np.geomspace(2.0 ** -53, 0.5, 2000), np.geomspace(1e-300, 1e-16, 2000)])
    err = _ulps(np.asarray(exact_math.ndtri(nx.asarray(p))), scipy.special.ndtri(p), np.float64)
    assert err.max() <= 8 and err.mean() < 1.5
    special = np.asarray(exact_math.ndtri(nx.asarray(np.array([0.0, 1.0, -0.5, 1.5, np.nan, 0.5]))))
    np.testing.assert_array_equal(special, [-np.inf, np.inf, np.nan, np.nan, np.nan, 0.0])


def test_exp_within_one_ulp():
    x = np.concatenate([np.linspace(-103.0, 88.72, 300_001), np.linspace(-1, 1, 100_001)]).astype(np.float32)
    got, want = np.asarray(exact_math.exp(nx.asarray(x))), np.exp(x.astype(np.float64))
    normal = want >= np.finfo(np.float32).tiny
    assert _ulps(got[normal], want[normal], np.float32).max() < 1
    assert np.abs(got[~normal] - want[~normal]).max() <= 2.0 ** -149      # subnormal results: within a step
    x = np.concatenate([np.linspace(-708.0, 709.7, 3001), np.linspace(-1, 1, 2001)])
    with localcontext() as context:
        context.prec = 40
        exact = np.array([float(Decimal(float(v)).exp()) for v in x])
    assert _ulps(np.asarray(exact_math.exp(nx.asarray(x))), exact, np.float64).max() <= 1
    special = np.asarray(exact_math.exp(nx.asarray(np.array([np.inf, -np.inf, np.nan, 1e3, -1e3, 0.0], np.float32))))
    np.testing.assert_array_equal(special, [np.inf, 0, np.nan, np.inf, 0, 1])


def _normal_cdf(x):
    """Phi(x) for x <= 0: exp(-x^2/2) exactly in decimal times SciPy's erfcx (Faddeeva's)."""
    with localcontext() as context:
        context.prec = 40
        return np.array([float(Decimal(0.5) * (-(Decimal(float(v)) ** 2) / 2).exp()
                               * Decimal(float(scipy.special.erfcx(-v / np.sqrt(2))))) for v in x])


def test_ndtr_relatively_accurate_far_into_the_lower_tail():
    x = -np.concatenate([np.linspace(0, 37.5, 3001), np.geomspace(1e-8, 1, 100)])
    rel = np.abs(np.asarray(exact_math.ndtr(nx.asarray(x))) / _normal_cdf(x) - 1)
    assert rel.max() < 4e-15
    x32 = x[x > -13].astype(np.float32)
    rel = np.abs(np.asarray(exact_math.ndtr(nx.asarray(x32))) / _normal_cdf(x32.astype(np.float64)) - 1)
    assert rel.max() < 1e-6
    up = np.linspace(0, 10, 1001)
    assert np.abs(np.asarray(exact_math.ndtr(nx.asarray(up))) - scipy.special.ndtr(up)).max() < 1e-15
    special = np.asarray(exact_math.ndtr(nx.asarray(np.array([-np.inf, np.inf, np.nan, 0.0, -50.0, 50.0]))))
    np.testing.assert_array_equal(special, [0, 1, np.nan, 0.5, 0, 1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_nextafter_matches_numpy(dtype):
    rng = np.random.default_rng(1)
    info = np.finfo(dtype)
    x = np.concatenate([rng.standard_normal(5000) * 10.0 ** rng.integers(-40, 38, 5000), 2.0 ** np.arange(-140, 120),
                        -2.0 ** np.arange(-140, 120), [0, -0.0, info.tiny, -info.tiny, info.smallest_subnormal,
                                                       np.inf, -np.inf, np.nan, info.max]]).astype(dtype)
    for toward in (np.inf, -np.inf, 0.0, np.nan):
        y = np.full_like(x, toward)
        with np.errstate(over="ignore"):
            want = np.nextafter(x, y)
        _assert_same_bits(exact_math.nextafter(nx.asarray(x), nx.asarray(y)), want, f"toward {toward}")


def test_nextafter_on_a_narrower_grid_matches_numpy_float16():
    x = np.concatenate([np.random.default_rng(2).standard_normal(3000), 2.0 ** np.arange(-24, 15), [0, 1, -1]])
    x = x.astype(np.float16)
    for toward in (np.inf, -np.inf):
        got = exact_math.nextafter(nx.asarray(x.astype(np.float32)), np.float32(toward), grid=np.float16)
        _assert_same_bits(got, np.nextafter(x, np.float16(toward)).astype(np.float32), f"toward {toward}")


def test_building_blocks_jit_matches_eager_on_special_values():
    x = np.array([0.0, -1.0, np.inf, np.nan, 1e-45, 3e38, 1.0, 0.3, 1 - 2 ** -24, 2 ** -24, -90, 89, -9.5], np.float32)
    f = lambda v: (exact_math.log(v), exact_math.ndtri(v), exact_math.exp(v), exact_math.ndtr(v),
                   exact_math.nextafter(v, np.float32(0)), exact_math.log(v.astype(nx.float64)),
                   exact_math.ndtri(v.astype(nx.float64)), exact_math.exp(v.astype(nx.float64) * 8),
                   exact_math.ndtr(v.astype(nx.float64) * 4))
    for got, want in zip(rune.jit(f)(x), f(nx.asarray(x))):
        _assert_same_bits(got, want, "building block")


# ---------------------------------------------------------------- keys

def test_key_accepts_every_64_bit_seed():
    def words(k):
        return [int(v) for v in np.asarray(k)]
    assert words(nx.random.key(-2 ** 63)) == [0x80000000, 0]
    assert words(nx.random.key(2 ** 64 - 1)) == words(nx.random.key(-1)) == [0xFFFFFFFF, 0xFFFFFFFF]
    assert words(nx.random.key(np.uint64(2 ** 64 - 1))) == [0xFFFFFFFF, 0xFFFFFFFF]
    assert words(nx.random.key(np.array(2 ** 40 + 3))) == [2 ** 8, 3]
    assert words(nx.random.key(np.int8(-2))) == [0xFFFFFFFF, 0xFFFFFFFE]


@pytest.mark.parametrize("seed", [2 ** 64, -2 ** 63 - 1, 10 ** 30, -(10 ** 30)])
def test_key_refuses_seeds_beyond_64_bits(seed):
    with pytest.raises(ScalarOverflowError, match=rf"random\.key.*\[-2\*\*63, 2\*\*64\).*{seed}") as e:
        nx.random.key(seed)
    assert isinstance(e.value, OverflowError)


@pytest.mark.parametrize("seed", [3.0, np.float32(1), True, np.bool_(False), "7", None, np.array([1, 2]),
                                  np.array(1.5)], ids=repr)
def test_key_refuses_seeds_that_are_not_integers(seed):
    with pytest.raises(UsageError, match="random.key: the seed must be an integer") as e:
        nx.random.key(seed)
    assert isinstance(e.value, TypeError)


def test_traced_seeds_wrap_as_their_64_bit_pattern():
    for seed in (np.int64(-5), np.uint64(2 ** 64 - 5), np.int32(123456)):
        _assert_same_bits(rune.jit(nx.random.key)(seed), nx.random.key(int(seed)), f"seed {seed!r}")
    with pytest.raises(UsageError, match="integer scalar"):
        rune.jit(nx.random.key)(np.float32(1))


@pytest.mark.parametrize("sampler", ["normal", "truncated_normal", "exponential", "gumbel"])
def test_eager_samplers_on_large_shapes_run_compiled_with_the_same_bits(monkeypatch, sampler):
    from rune.nx import exact_math
    monkeypatch.setattr(exact_math, "EAGER_COMPILE_SIZE", 1000)
    key = nx.random.key(11)
    draw = {"normal": lambda: nx.random.normal(key, (40, 50)),
            "truncated_normal": lambda: nx.random.truncated_normal(key, -1.5, 0.5, (40, 50)),
            "exponential": lambda: nx.random.exponential(key, (40, 50)),
            "gumbel": lambda: nx.random.gumbel(key, (40, 50))}[sampler]
    rune.reset_stats()
    compiled = np.asarray(draw())
    assert rune.stats()["traces"] >= 1            # the exact math ran as a jitted plan
    monkeypatch.setattr(exact_math, "_JIT", [])   # no compiler registered: op by op
    rune.reset_stats()
    op_by_op = np.asarray(draw())
    assert rune.stats()["traces"] == 0
    assert np.array_equal(compiled.view(np.uint32), op_by_op.view(np.uint32))


# ---------------------------------------------------------------- far tails, empty ranges, full ranges

# Intervals whose normal CDF underflows (or loses its precision) in the dtype: Phi(-14)
# is subnormal in float32, Phi(-20) and Phi(-39) are below float32's and float64's
# smallest values; and a two-sided wide interval, reaching into the upper tail.
TAIL_INTERVALS = [(14.0, 15.0, np.float32), (20.0, 30.0, np.float32), (-30.0, -20.0, np.float32),
                  (39.0, 40.0, np.float64), (-40.0, -39.0, np.float64), (100.0, np.inf, np.float64),
                  (-3.0, 4.0, np.float32), (-3.0, 4.0, np.float64)]


@pytest.mark.parametrize("lower, upper, dtype", TAIL_INTERVALS, ids=str)
def test_truncated_normal_far_tails_pass_kolmogorov_smirnov(lower, upper, dtype):
    x = np.asarray(nx.random.truncated_normal(nx.random.key(31), lower, upper, (N,), dtype))
    assert x.dtype == dtype and (x > lower).all() and (x < upper).all()
    want = scipy.stats.truncnorm(lower, upper)
    assert scipy.stats.kstest(x.astype(np.float64), want.cdf).pvalue > 1e-3
    # the mean to within 5 standard errors (SciPy's own moments are lost beyond ~40)
    mean = want.mean() if upper < 50 else 100.0 + 1 / 100.0 - 2 / 100.0 ** 3   # lo + 1/lo - 2/lo^3 + ...
    assert abs(x.astype(np.float64).mean() - mean) < 5 * want.std() / np.sqrt(N) + 1e-9 * abs(mean)


@pytest.mark.cc   # the jitted program must run as compiled C kernels
def test_truncated_normal_far_tails_eager_and_jit_agree_bit_for_bit(jitted_samplers):
    _check_eager_matches_jit("far tails", jitted_samplers)


def test_log_ndtr_and_ndtri_exp_against_scipy_far_beyond_underflow():
    for dtype, eps in ((np.float64, 2.0 ** -52), (np.float32, 2.0 ** -23)):
        x = np.concatenate([-np.geomspace(1e-3, 1e15, 300), np.linspace(0.01, 8, 50)]).astype(dtype)
        got = np.asarray(exact_math.log_ndtr(nx.asarray(x))).astype(np.float64)
        want = scipy.special.log_ndtr(x.astype(np.float64))
        assert (np.abs(got - want) <= 8 * eps * np.maximum(np.abs(want), 1e-300) + 2 * eps * (x > 0)).all(), dtype
        # the quantile of exp(y), straight from y: SciPy's ndtri_exp where it is exact (y >= -700),
        # beyond it the round trip through SciPy's log_ndtr
        y = -np.geomspace(1e-3, 700, 200).astype(dtype)
        got = np.asarray(exact_math.ndtri_exp(nx.asarray(y))).astype(np.float64)
        want = scipy.special.ndtri_exp(y.astype(np.float64))
        tail = y < -1e-2   # (nearer 0, 1 - exp(y) carries exp's absolute error, as ndtri's does)
        assert (np.abs(got - want)[tail] <= 8 * eps * np.maximum(np.abs(want[tail]), 1)).all(), dtype
        y = -np.geomspace(700, 1e30 if dtype is np.float32 else 1e200, 200).astype(dtype)
        x = np.asarray(exact_math.ndtri_exp(nx.asarray(y))).astype(np.float64)
        assert (np.abs(scipy.special.log_ndtr(x) / y.astype(np.float64) - 1) <= 8 * eps).all(), dtype
    special = np.asarray(exact_math.ndtri_exp(nx.asarray(np.array([0.0, -np.inf, 0.5, np.nan]))))
    assert special[0] == np.inf and special[1] == -np.inf and np.isnan(special[2:]).all()


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_uniform_with_an_empty_range_gives_minval(dtype):
    # JAX's uniform is max(minval, ...): maxval <= minval gives minval, never a value below it
    k = nx.random.key(8)
    for lo, hi in ((1.0, 1.0), (2.0, -3.0)):
        for bounds in ((lo, hi), (nx.asarray(np.full(3, lo, dtype)), nx.asarray(np.full(3, hi, dtype)))):
            x = np.asarray(nx.random.uniform(k, (3,), dtype, *bounds))
            assert x.dtype == dtype and (x == lo).all(), (lo, hi)
            x = np.asarray(rune.jit(lambda k, a, b: nx.random.uniform(k, (3,), dtype, a, b))(k, *bounds))
            assert (x == lo).all(), (lo, hi)


def test_randint_takes_jax_bounds_beyond_the_dtype():
    # JAX's randint: bounds are clipped into the dtype, and a maxval above its largest value
    # takes that value in (randint(k, s, 0, 256, uint8) covers the whole byte)
    k = nx.random.key(9)
    draw = lambda lo, hi, dtype: np.asarray(nx.random.randint(k, (N // 10,), lo, hi, dtype)).astype(np.int64)
    draw_jit = lambda lo, hi, dtype: np.asarray(rune.jit(
        lambda k, a, b: nx.random.randint(k, (N // 10,), a, b, dtype))(k, nx.asarray(lo), nx.asarray(hi)))
    assert set(draw(0, 256, nx.uint8)) == set(range(256))
    assert set(draw_jit(np.int32(0), np.int32(256), nx.uint8).tolist()) == set(range(256))
    assert set(draw(-300, 300, nx.int8)) == set(range(-128, 128))
    assert set(draw_jit(np.int32(-300), np.int32(300), nx.int8).tolist()) == set(range(-128, 128))
    assert set(draw(250, 10 ** 30, nx.uint8)) == set(range(250, 256))
    assert set(draw(-2 ** 70, -2 ** 31 + 3, nx.int32)) == {-2 ** 31, -2 ** 31 + 1, -2 ** 31 + 2}
    assert set(draw(300, 400, nx.uint8)) == {255}             # both clipped to 255, which maxval includes
    assert set(draw(-10, -5, nx.uint8)) == {0}                # both clipped to 0: empty, so minval
    full64 = draw(0, 2 ** 64, nx.uint64)
    assert full64.dtype == np.int64 and len(np.unique(full64)) == full64.size
    with pytest.raises(ShapeError, match=r"random\.randint: the bounds' shapes \(2,\)"):
        nx.random.randint(k, (4,), nx.asarray(np.array([0, 1])), 3)
    with pytest.raises(DTypeError, match=r"random\.randint: minval must be integers"):
        nx.random.randint(k, (4,), nx.asarray(np.array([1j])), 3)


_OTHER_DEVICE_SCRIPT = """
import numpy as np
from rune import nx
draws = {
    "uniform array bounds": lambda k, b: nx.random.uniform(k, (5,), nx.float32, b(1.0), b(2.0)),
    "uniform float16 array bounds": lambda k, b: nx.random.uniform(k, (5,), nx.float16, -5.0, b(2.0)),
    "truncated_normal": lambda k, b: nx.random.truncated_normal(k, 20.0, 30.0, (5,)),
    "truncated_normal array bounds": lambda k, b: nx.random.truncated_normal(k, b(-1.0), b(2.0), (5,), nx.float16),
}
for name, draw in draws.items():
    there = draw(nx.place(nx.random.key(3), "cpu:1"), lambda v: nx.place(nx.asarray(np.float32(v)), "cpu:1"))
    here = draw(nx.random.key(3), lambda v: nx.asarray(np.float32(v)))
    assert str(there.device) == "cpu:1", (name, there.device)
    assert np.asarray(there).tobytes() == np.asarray(here).tobytes(), name
print("ok")
"""


def test_samplers_with_a_key_on_another_device_draw_there():
    # the bounds' neighbours (exact_math.nextafter) are placed with the key, not on the default device
    import os
    import subprocess
    import sys
    env = dict(os.environ, RUNE_HOST_DEVICES="2")
    run = subprocess.run([sys.executable, "-c", _OTHER_DEVICE_SCRIPT], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
