"""Dtype promotion against NumPy 2 (NEP 50), with rune's documented differences.

Strong operands (arrays) promote as `np.result_type` says; bfloat16 follows
rune's rules (bf16 + f16 -> f32, bf16 + f32 -> f32, bf16 + f64 -> f64, and
against bool and ints exactly as float16: bf16 + int8/uint8 -> bf16,
+ int16/uint16 -> f32, + 32/64-bit ints -> f64). Weak Python scalars never
widen an array of their kind or a higher one (f32 * 2.0 is f32, i8 + 1 is
i8); a Python float meeting a bool/8/16-bit int array gives float32 (NumPy:
float64), one meeting a 32/64-bit int array float64 (as NumPy), and a Python
int meeting a bool array gives int32 (NumPy: int64); a Python bool takes the
other side's dtype. (The whole table: tests/core/test_promotion_lattice.py.)
"""
import itertools
import warnings

import numpy as np
import pytest

import rune
from rune import nx

from compiled import precompiled
from op_table import ALL_DTYPES, BF16, BOOL, F16, F32, F64, I8, I16, I32, I64, INTS, SHORT, U8, U16, \
    U32, U64, is_float

BINARY = [nx.add, nx.multiply, nx.subtract, nx.maximum]


def _values(d):
    """Small values every dtype holds exactly; bools for bool."""
    return np.array([True, False, True]) if d == BOOL else np.array([1, 2, 3]).astype(d)


def strong_expected(a, b):
    if BF16 in (a, b):
        other = b if a == BF16 else a
        if other == F16 or other == F32:
            return F32
        if other == F64:
            return F64
        if other == BF16:
            return BF16
        # bool and ints: NumPy's answer for float16, with bfloat16 in float16's place
        with_f16 = np.result_type(F16, other)
        return BF16 if with_f16 == F16 else with_f16
    return np.result_type(a, b)


def _pid(a, b):
    return f"{SHORT[a]}-{SHORT[b]}"


PAIRS = list(itertools.product(ALL_DTYPES, ALL_DTYPES))


@pytest.mark.parametrize("a,b", PAIRS, ids=[_pid(a, b) for a, b in PAIRS])
def test_strong_pairs(a, b):
    x, y = nx.asarray(_values(a)), nx.asarray(_values(b))
    want = strong_expected(a, b)
    if BF16 not in (a, b):
        assert want == np.result_type(a, b)
    out = nx.add(x, y)
    assert out.dtype == want
    # The value is NumPy's sum computed in the promoted dtype.
    ref = np.add(_values(a).astype(want), _values(b).astype(want))
    np.testing.assert_array_equal(np.asarray(out).astype(F64), ref.astype(F64))
    # Every binary op, where and concatenate promote the same way.
    for op in (nx.multiply, nx.maximum, nx.equal):
        res = op(x, y)
        assert res.dtype == (BOOL if op is nx.equal else want), op.__name__
    cond = nx.asarray(np.array([True, False, True]))
    assert nx.where(cond, x, y).dtype == want
    assert nx.concatenate([x, y]).dtype == want


def test_strong_promotion_is_symmetric():
    for a, b in PAIRS:
        assert nx.add(nx.asarray(_values(a)), nx.asarray(_values(b))).dtype == \
            nx.add(nx.asarray(_values(b)), nx.asarray(_values(a))).dtype


@pytest.mark.parametrize("a,b,want", [
    (BF16, F16, F32), (BF16, F32, F32), (BF16, F64, F64), (BF16, I8, BF16), (BF16, I64, F64),
    (BF16, U32, F64), (BF16, I16, F32), (BF16, U8, BF16), (BF16, BOOL, BF16), (BF16, BF16, BF16), (U8, I8, I16), (U32, I32, I64),
    (U64, I64, F64), (I32, F32, F64), (I16, F16, F32), (I8, F16, F16), (U16, I16, I32),
    (BOOL, I8, I8), (BOOL, F16, F16),
], ids=lambda v: SHORT.get(v, str(v)) if isinstance(v, np.dtype) else str(v))
def test_named_pairs(a, b, want):
    assert nx.add(nx.asarray(_values(a)), nx.asarray(_values(b))).dtype == want
    assert nx.multiply(nx.asarray(_values(b)), nx.asarray(_values(a))).dtype == want


# ---------------------------------------------------------------- weak Python scalars

def weak_expected(d, scalar):
    """rune's rule for a Python scalar meeting an array of dtype `d`."""
    if isinstance(scalar, bool):
        return d
    if isinstance(scalar, int):
        return I32 if d == BOOL else d
    if is_float(d):
        return d
    return F32 if d == BOOL or d.itemsize <= 2 else F64  # the ints' float (float64 from 32 bits up)


def numpy_weak(d, scalar):
    """NumPy 2's answer, where it exists (ml_dtypes' bfloat16 is left to rune's rule)."""
    if d == BF16:
        return None
    return np.result_type(np.zeros(1, d), scalar)


SCALARS = [True, 2, 2.5]
WEAK = list(itertools.product(ALL_DTYPES, SCALARS))


@pytest.mark.parametrize("d,scalar", WEAK, ids=[f"{SHORT[d]}-{type(s).__name__}" for d, s in WEAK])
def test_weak_scalar_meets_array(d, scalar):
    x = nx.asarray(_values(d))
    want = weak_expected(d, scalar)
    np_want = numpy_weak(d, scalar)
    if np_want is not None:
        # Same as NumPy except the documented defaults: float32 (not float64) for a float
        # meeting bools or 8/16-bit ints, int32 (not int64) for an int meeting bools.
        differs = (isinstance(scalar, float) and not is_float(d) and d.itemsize <= 2) or \
            (type(scalar) is int and d == BOOL)
        assert (want == np_want) != differs, (want, np_want)
    for op in BINARY:
        if op is nx.subtract and d == BOOL and isinstance(scalar, bool):
            continue  # NumPy has no bool subtraction either (see test_errors)
        assert op(x, scalar).dtype == want, (op.__name__, "array first")
        assert op(scalar, x).dtype == want, (op.__name__, "scalar first")
    assert (x * scalar).dtype == want and (scalar * x).dtype == want
    assert nx.where(nx.asarray(np.array([True, False, True])), x, scalar).dtype == want
    assert nx.where(nx.asarray(np.array([True, False, True])), scalar, x).dtype == want
    assert nx.less(x, scalar).dtype == BOOL
    # The value: the scalar converted to the result dtype, then NumPy's op.
    ref = np.multiply(_values(d).astype(want), np.asarray(scalar).astype(want))
    np.testing.assert_array_equal(np.asarray(x * scalar).astype(F64), ref.astype(F64))


def test_weak_scalar_examples_from_the_design():
    f32 = nx.asarray(np.ones(3, F32))
    i8 = nx.asarray(np.ones(3, np.int8))
    assert (f32 * 2.0).dtype == F32
    assert (i8 + 1).dtype == I8
    assert (i8 * 2.5).dtype == F32
    assert (nx.asarray(np.ones(3, F16)) * 2.0).dtype == F16
    assert (nx.asarray(np.ones(3, F64)) + 1).dtype == F64
    assert (nx.asarray(np.ones(3, BF16)) + 1).dtype == BF16
    assert (nx.asarray(np.ones(3, BF16)) * 0.5).dtype == BF16
    assert (nx.asarray(np.ones(3, np.uint8)) + 200).dtype == np.uint8
    assert (nx.asarray(np.ones(3, np.bool_)) + True).dtype == BOOL


def test_weak_scalars_compare_in_the_promoted_dtype():
    i8 = nx.asarray(np.array([1, 2, 3], np.int8))
    np.testing.assert_array_equal(np.asarray(nx.less(i8, 2.5)), [True, True, False])
    np.testing.assert_array_equal(np.asarray(i8 == 2), [False, True, False])
    u8 = nx.asarray(np.array([250, 1], np.uint8))
    np.testing.assert_array_equal(np.asarray(u8 + 10), np.array([250, 1], np.uint8) + 10)  # wraps


TOO_BIG = [(np.int8, 300), (np.int8, -129), (np.uint8, -1), (np.uint8, 256), (np.int32, 2 ** 40)]


@pytest.mark.parametrize("d,value", TOO_BIG, ids=[f"{np.dtype(d).name}-{v}" for d, v in TOO_BIG])
def test_weak_scalar_that_does_not_fit_raises_in_where(d, value):
    arr = nx.asarray(np.ones(3, d))
    with pytest.raises(rune.DTypeError, match=str(value)):
        nx.where(nx.asarray(np.array([True, False, True])), arr, value)
    with pytest.raises(OverflowError):  # NumPy 2 refuses the same literals
        np.asarray(arr) + value


@pytest.mark.parametrize("d,value", TOO_BIG, ids=[f"{np.dtype(d).name}-{v}" for d, v in TOO_BIG])
def test_weak_scalar_that_does_not_fit_raises_in_binary_ops(d, value):
    arr = nx.asarray(np.ones(3, d))
    with pytest.raises(rune.DTypeError, match=str(value)):
        arr + value
    with pytest.raises(rune.DTypeError, match=str(value)):
        value * arr


def test_large_python_int_meets_int64():
    i64 = nx.asarray(np.ones(2, np.int64))
    assert (i64 + 2 ** 40).tolist() == [2 ** 40 + 1] * 2


def test_weak_float_that_overflows_a_narrow_float_is_inf_like_numpy():
    f16 = np.ones(2, F16)
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = f16 * 1e6
        out = nx.asarray(f16) * 1e6
    assert out.dtype == F16 == ref.dtype
    np.testing.assert_array_equal(np.asarray(out), ref)


@pytest.mark.parametrize("a,b,want", [
    (2, 3.5, F32), (1, True, I32), (True, False, BOOL), (2.0, 3.0, F32), (2, 3, I32), (1.5, True, F32),
], ids=str)
def test_two_weak_scalars(a, b, want):
    # With no array to meet, Python scalars take rune's defaults (float32, int32), never float64.
    for op in (nx.add, nx.multiply, nx.maximum):
        out = op(a, b)
        assert out.dtype == want, op.__name__
    assert nx.where(True, a, b).dtype == want
    np.testing.assert_array_equal(np.asarray(nx.add(a, b)), np.asarray(a + b).astype(want))


def test_python_scalar_conversions_take_rune_defaults():
    assert nx.asarray(2.0).dtype == F32
    assert nx.asarray(2).dtype == I32
    assert nx.asarray(True).dtype == BOOL
    assert nx.asarray([1.0, 2.0]).dtype == F32
    assert nx.asarray(2.0, dtype=nx.float64).dtype == F64
    assert nx.sin(2).dtype == F32
    assert nx.sqrt(nx.asarray(np.arange(3, dtype=np.int64))).dtype == F64
    assert nx.mean(nx.asarray(np.arange(3, dtype=np.int64))).dtype == F64
    assert nx.divide(nx.asarray(np.arange(3, dtype=np.int16)), 2).dtype == F32
    # NumPy arrays keep their dtype, even float64 and int64.
    assert (nx.asarray(np.ones(2)) + 1.0).dtype == F64
    assert (nx.asarray(np.ones(2, np.int64)) + 1).dtype == I64


@pytest.mark.parametrize("d", INTS + (BOOL,), ids=lambda d: SHORT[d])
def test_float_ops_on_int_arrays_give_the_ints_float(d):
    # float32 holds every bool and 8/16-bit int exactly, float64 every 32-bit one (and int64 to 2**53)
    want = F32 if d == BOOL or d.itemsize <= 2 else F64
    x = nx.asarray(_values(d))
    for op in (nx.sin, nx.exp, nx.sqrt, nx.log1p, nx.sigmoid, nx.mean, nx.var):
        assert op(x).dtype == want, op.__name__
    if d != BOOL:
        assert nx.divide(x, x).dtype == want
        assert nx.atan2(x, x).dtype == want


# Every elementwise function, reduction and product, at every dtype: what runs (eagerly and under jit)
# has the dtype and shape its traced program promises, or the call is refused
# with a rune error. (NumPy's bool // bool is int8, its bfloat16 matmul float32.)
UNARY_FUNCTIONS = [
    "sum", "prod", "max", "min", "argmax", "any", "all", "mean", "var", "std", "logsumexp", "softmax",
    "log_softmax", "negative", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
    "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan", "erf", "sigmoid", "floor", "ceil", "round",
    "invert", "isnan", "isfinite", "square", "reciprocal", "logical_not"]
BINARY_FUNCTIONS = [
    "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "maximum", "minimum",
    "atan2", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor", "matmul",
    "dot"]


def _calls(d):
    """(name, fn, args, traced aval) of every function above on dtype `d` that traces
    (the rest are refused for `d`, with a rune error)."""
    x = nx.asarray(_values(d))
    out = []
    for name in UNARY_FUNCTIONS + BINARY_FUNCTIONS:
        fn, args = getattr(nx, name), (x,) if name in UNARY_FUNCTIONS else (x, x)
        try:
            out.append((name, fn, args, rune.trace(fn)(*args).out_avals[0]))
        except rune.RuneError:
            continue  # refused for this dtype
    return out


def _all_at_once(calls):
    """Every call of `calls` (each takes the same array, once or twice) as one function
    of that array returning their results: one jit program per dtype, whose kernels
    compile in far fewer and shorter units than a program per function would (~900)."""
    return lambda x: tuple(fn(*[x] * len(args)) for _, fn, args, _ in calls)


_kernels = precompiled(lambda: [(_all_at_once(_calls(d)), (nx.asarray(_values(d)),)) for d in ALL_DTYPES])


@pytest.mark.parametrize("d", ALL_DTYPES, ids=[SHORT[d] for d in ALL_DTYPES])
def test_run_time_dtypes_are_the_traced_ones(d):
    calls = _calls(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        eager = [fn(*args) for _, fn, args, _ in calls]
        jitted = rune.jit(_all_at_once(calls))(nx.asarray(_values(d)))
    wrong = []
    for how, outs in (("eager", eager), ("jit", jitted)):
        for (name, _, _, aval), out in zip(calls, outs, strict=True):
            if (out.dtype, out.shape) != (aval.dtype, aval.shape):
                wrong.append(f"{how} {name}: {out.dtype}{list(out.shape)}, traced {aval.dtype}{list(aval.shape)}")
    assert not wrong, wrong
