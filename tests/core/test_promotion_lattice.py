"""rune's one promotion lattice (rune/core/dtypes.py; README's table), by value.

The oracles are independent of rune: NumPy's `np.result_type` for every strong
pair without bfloat16 (rune's lattice is NumPy's there), "bfloat16 meets bool
and ints exactly as float16 does", the README table written out literally
below, and values computed by NumPy (in float64, or in the promoted dtype).
"""
import itertools

import numpy as np
import pytest

import rune
from rune import nx

from op_table import ALL_DTYPES, BF16, BOOL, C64, C128, F16, F32, F64, I8, I16, I32, I64, INTS, SHORT, U8, \
    U16, U32, U64

DTYPES = ALL_DTYPES + (C64, C128)
INTS_AND_BOOL = (BOOL,) + INTS
INEXACT = (F16, BF16, F32, F64, C64, C128)

# README: bool and each int meeting each float or complex dtype (strong operands).
INT_MEETS_INEXACT = {  # columns: f16, bf16, f32, f64, c64, c128
    BOOL: (F16, BF16, F32, F64, C64, C128),
    I8: (F16, BF16, F32, F64, C64, C128),
    U8: (F16, BF16, F32, F64, C64, C128),
    I16: (F32, F32, F32, F64, C64, C128),
    U16: (F32, F32, F32, F64, C64, C128),
    I32: (F64, F64, F64, F64, C128, C128),
    U32: (F64, F64, F64, F64, C128, C128),
    I64: (F64, F64, F64, F64, C128, C128),
    U64: (F64, F64, F64, F64, C128, C128),
}
# README: an array meeting a Python bool, int, float, complex (weak scalars).
WEAK = {  # None: the array's own dtype
    BOOL: (BOOL, I32, F32, C64),
    **{d: (None, None, F32, C64) for d in (I8, U8, I16, U16)},
    **{d: (None, None, F64, C128) for d in (I32, U32, I64, U64)},
    **{d: (None, None, None, C64) for d in (F16, BF16, F32)},
    F64: (None, None, None, C128),
    C64: (None, None, None, None),
    C128: (None, None, None, None),
}
SCALARS = (True, 3, 0.5, 0.5j)
# README: the float an operation of integers alone computes in (/, exp, sqrt, mean, var, ...).
INTS_FLOAT = {BOOL: F32, I8: F32, U8: F32, I16: F32, U16: F32, I32: F64, U32: F64, I64: F64, U64: F64}


def oracle(a, b):
    """The strong pair's dtype, from NumPy (bfloat16: as float16 against bool and ints)."""
    if BF16 not in (a, b):
        return np.result_type(a, b)
    other = b if a == BF16 else a
    if other in INTS_AND_BOOL:
        with_f16 = np.result_type(F16, other)
        return BF16 if with_f16 == F16 else with_f16
    if other == F16:
        return F32   # neither 16-bit float holds the other
    return BF16 if other == BF16 else np.result_type(F32, other)   # bfloat16 sits under float32


def extremes(d):
    """Values at the edge of what `d` holds (for int64/uint64: what float64 holds exactly), so a
    float too narrow for them would show in the result."""
    if d == BOOL:
        return np.array([True, False, True])
    if d in INTS:
        info = np.iinfo(d)
        top = min(int(info.max), 2 ** 53 - 1)
        return np.array([max(int(info.min), -(2 ** 53 - 1)), top, top - 1]).astype(d)
    if d in (C64, C128):
        return np.array([0.5 + 1j, -1.5, 2j]).astype(d)
    return np.array([0.5, -1.5, 2.0]).astype(d)


def zeros(d):
    return np.zeros(3, d)


PAIRS = list(itertools.product(DTYPES, DTYPES))


def test_the_readme_table_is_the_lattice():
    for i, row in INT_MEETS_INEXACT.items():
        for f, want in zip(INEXACT, row):
            assert oracle(i, f) == want == nx.result_type(i, f) == nx.result_type(f, i), (i, f)
    for a, b in PAIRS:
        assert nx.result_type(a, b) == oracle(a, b), (a, b)


def test_every_pair_by_value_eager_and_under_jit():
    # x + zeros(y's dtype) is x exactly in the promoted dtype: a float that could not hold every
    # value of an int (int16 in float16, int32 in float32) would round the extremes
    xs = [nx.asarray(extremes(d)) for d in DTYPES]
    zs = [nx.asarray(zeros(d)) for d in DTYPES]
    idx = list(itertools.product(range(len(DTYPES)), range(len(DTYPES))))
    jitted = rune.jit(lambda xs, zs: [nx.add(xs[i], zs[j]) for i, j in idx])
    for how, outs in (("eager", [nx.add(xs[i], zs[j]) for i, j in idx]), ("jit", jitted(xs, zs))):
        for (i, j), out in zip(idx, outs):
            a, b = DTYPES[i], DTYPES[j]
            want = oracle(a, b)
            assert out.dtype == want, (how, a, b)
            ref = extremes(a).astype(want)
            np.testing.assert_array_equal(np.asarray(out), ref, err_msg=f"{how} {a} + {b}")
            if a in INTS:   # and the integers themselves survive
                assert np.real(np.asarray(out)).astype(np.float64).tolist() == \
                    extremes(a).astype(np.float64).tolist(), (how, a, b)


def test_every_weak_scalar_by_value():
    for d, row in WEAK.items():
        for scalar, want in zip(SCALARS, row):
            want = d if want is None else want
            x = extremes(d) // 2 if d in INTS else extremes(d)   # ints: room for + 3
            out = nx.asarray(x) + scalar
            assert out.dtype == want and (scalar + nx.asarray(x)).dtype == want, (d, scalar)
            assert nx.result_type(d, scalar) == want
            ref = x.astype(want) + np.asarray(scalar).astype(want)
            np.testing.assert_array_equal(np.asarray(out), ref, err_msg=f"{d} + {scalar!r}")


def test_weak_scalars_alone_take_the_defaults():
    for a, b, want in ((True, False, BOOL), (True, 3, I32), (3, 0.5, F32), (0.5, 1j, C64), (3, 1j, C64)):
        assert nx.add(a, b).dtype == want and nx.result_type(a, b) == want
    # a Python int is weak: float functions of it give the default float, float32
    for out in (nx.exp(2), nx.divide(1, 2), nx.log2(8), nx.atan2(1, 2), nx.hypot(3, 4), nx.sqrt(True)):
        assert out.dtype == F32
    np.testing.assert_allclose(np.asarray(nx.divide(1, 2)), 0.5)


def _positive(d):
    """Nonzero values of `d`, the largest it holds (to 2**53) among them."""
    if d == BOOL:
        return np.array([True, True])
    top = min(int(np.iinfo(d).max), 2 ** 53 - 1)
    return np.array([top, top - 1, 1, 7]).astype(d)


# name -> (rune's function of one array, NumPy's in float64)
FLOAT_FUNCTIONS = {
    "divide": (lambda v: nx.divide(v, v[::-1]), lambda w: w / w[::-1]),
    "atan2": (lambda v: nx.atan2(v, v[::-1]), lambda w: np.arctan2(w, w[::-1])),
    "mean": (nx.mean, np.mean), "var": (nx.var, np.var), "std": (nx.std, np.std),
    "sqrt": (nx.sqrt, np.sqrt), "log": (nx.log, np.log), "log1p": (nx.log1p, np.log1p),
    "tanh": (nx.tanh, np.tanh)}


def test_float_functions_of_ints_compute_in_the_ints_float_eager_and_under_jit():
    xs = {d: nx.asarray(_positive(d)) for d in INTS_AND_BOOL}
    names = [n for n in FLOAT_FUNCTIONS]

    def every(xs):
        return {(d, n): FLOAT_FUNCTIONS[n][0](x) for d, x in xs.items() for n in names
                if not (d == BOOL and n in ("divide", "atan2"))}   # bool / bool is refused
    for how, outs in (("eager", every(xs)), ("jit", rune.jit(every)(xs))):
        for (d, name), out in outs.items():
            want = INTS_FLOAT[d]
            assert out.dtype == want, (how, name, d)
            ref = FLOAT_FUNCTIONS[name][1](_positive(d).astype(np.float64))
            np.testing.assert_allclose(np.asarray(out).astype(np.float64), ref, atol=0,
                                       rtol=2e-7 if want == F32 else 1e-15, err_msg=f"{how} {name} of {d}")


def test_int64_true_division_is_exact_to_float64_rounding():
    n = 1700000000123456789
    x = nx.asarray([n], dtype=nx.int64)
    exact = np.float64(n)   # n rounded once to float64: off by 21; float32 was off by 7.6e9
    for out in (x / 1, rune.jit(lambda v: v / 1)(x), nx.divide(x, nx.asarray([1], dtype=nx.int64)),
                nx.mean(x), nx.asarray([n], dtype=nx.uint64) / 1):
        assert out.dtype == F64
        assert np.asarray(out).reshape(-1)[0] == exact
    assert abs(int(np.asarray(x / 1)[0]) - n) <= 128   # half float64's spacing at 1.7e18


def test_exp_log_of_int64_match_numpy_in_float64():
    v = np.array([3, 40, 700], np.int64)
    x = nx.asarray(v)
    for fn, ref in ((nx.exp, np.exp), (nx.log, np.log), (nx.log10, np.log10), (nx.tanh, np.tanh),
                    (nx.sqrt, np.sqrt), (nx.expm1, np.expm1)):
        out = fn(x)
        assert out.dtype == F64, fn.__name__
        np.testing.assert_allclose(np.asarray(out), ref(v.astype(np.float64)), rtol=1e-15, atol=0)
    square = nx.asarray(np.array([(2 ** 26 + 1) ** 2], np.int64))
    assert np.asarray(nx.sqrt(square))[0] == 2 ** 26 + 1   # float32 would round the square off by 2**27


def test_linalg_and_fft_of_int64_compute_in_float64():
    m = np.array([[2 ** 30 + 1, 3], [5, 7]], np.int64)
    norm = nx.linalg.vector_norm(nx.asarray(m[0]))
    assert norm.dtype == F64
    np.testing.assert_allclose(np.asarray(norm), np.linalg.norm(m[0].astype(np.float64)), rtol=1e-15)
    spectrum = nx.fft.fft(nx.asarray(m[0]))
    assert spectrum.dtype == C128
    np.testing.assert_allclose(np.asarray(spectrum), np.fft.fft(m[0].astype(np.float64)), rtol=1e-15)
    assert nx.fft.rfft(nx.asarray(m[0])).dtype == C128
    assert nx.fft.rfft(nx.asarray(m[0].astype(np.int16))).dtype == C64


# ---------------------------------------------------------------- properties

def test_promotion_is_commutative():
    for a, b in PAIRS:
        assert nx.result_type(a, b) == nx.result_type(b, a), (a, b)
        for s in SCALARS:
            assert nx.result_type(a, b, s) == nx.result_type(s, b, a), (a, b, s)


@pytest.mark.parametrize("group", [INTS_AND_BOOL, INEXACT], ids=["ints", "floats"])
def test_promotion_is_associative_within_integers_and_within_floats(group):
    for a, b, c in itertools.product(group, repeat=3):
        left = nx.result_type(nx.result_type(a, b), c)
        assert left == nx.result_type(a, nx.result_type(b, c)) == nx.result_type(a, b, c), (a, b, c)


def test_many_operands_join_in_any_order():
    # Pairwise, mixing integers with floats is not associative (nor in NumPy):
    assert nx.result_type(nx.result_type(I8, U8), F16) == F32
    assert nx.result_type(I8, nx.result_type(U8, F16)) == F16
    # so an operation of many operands joins the integers first, then the floats: order-free
    assert nx.result_type(I8, U8, F16) == F32 == nx.result_type(F16, U8, I8)
    for triple in itertools.combinations_with_replacement(DTYPES, 3):
        assert len({nx.result_type(*p) for p in itertools.permutations(triple)}) == 1, triple
    arrays = [nx.asarray(np.array([-128, 1], I8)), nx.asarray(np.array([255, 2], U8)),
              nx.asarray(np.array([0.5, 3], F16))]
    for order in itertools.permutations(arrays):
        out = nx.concatenate(order)
        assert out.dtype == F32
        assert sorted(np.asarray(out).tolist()) == [-128, 0.5, 1, 2, 3, 255]


@pytest.mark.parametrize("d", INTS_AND_BOOL, ids=[SHORT[d] for d in INTS_AND_BOOL])
def test_float16_and_bfloat16_meet_ints_alike(d):
    f16, bf16 = nx.result_type(F16, d), nx.result_type(BF16, d)
    assert (f16, bf16) in ((F16, BF16), (F32, F32), (F64, F64))
    x = extremes(d)
    for f in (F16, BF16):   # and the one that stays 16-bit holds the ints exactly
        out = np.asarray(nx.asarray(x) + nx.asarray(zeros(f)))
        assert out.astype(np.float64).tolist() == x.astype(np.float64).tolist(), (d, f)
