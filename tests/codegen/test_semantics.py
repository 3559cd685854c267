"""rune's own semantics where NumPy, ml_dtypes, CuPy and C disagree, pinned by value on
every path: eager (the array-module table on NumPy), jit (compiled C kernels), the
CUDA dialect (its kernels emulated on the CPU with g++, and compiled by NVRTC), and
eager and jit on a GPU (`cuda`-marked). Expected values come from pure Python
(exact integers and fractions, Python's own float `//` and `%`) or are written out
bit by bit; never from NumPy's or ml_dtypes' casts.

- float -> integer: NaN -> 0, saturating at the target's bounds, truncation toward zero.
- float `//` and `%`: Python's signs (NumPy's npy_divmod), `x // 0 == x / 0`.
- into float16 / bfloat16: one rounding to nearest even of the exact value.
- nextafter(x, y) with x == y gives y (C99, IEEE 754) in every float dtype, so
  nextafter(+0, -0) is -0 (NumPy's float16 loop gave +0 before NumPy 2.5).
"""
import math
import types
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx
from rune.backends import array_impls
from rune.backends.cpu.backend import BACKEND as CPU
from rune.backends.cuda import nvrtc
from rune.codegen.cuda import CudaDialect, DeviceProps
from rune.core.prims import P
from rune.core.trace import bind

import cuda_emu
from compiled import numpy_stretches, precompiled

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
FLOATS = [F16, BF16, F32, F64]
INTS = [np.dtype(f"{k}int{b}") for k in ("", "u") for b in (8, 16, 32, 64)]
SIGNIFICANT_BITS = {F16: 11, BF16: 8, F32: 24, F64: 53}
EMU_DIALECT = CudaDialect(device=DeviceProps(sm_count=2), block=64, blocks_per_sm=2, items_per_thread=2)

needs_gxx = pytest.mark.skipif(cuda_emu.CXX is None, reason="no g++ to build the CUDA emulation")
cuda = pytest.mark.cuda


def _cast_input(values, dtype):
    """Test inputs in `dtype` (how they are made does not matter: the oracles read
    back the stored values exactly)."""
    with np.errstate(all="ignore"):
        return np.array(values, np.float64).astype(dtype)


def _bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _jit_plan(fn, *args):
    """`fn` planned under jit with every op in a compiled C kernel."""
    plan = rune.jit(fn).plan(*[nx.asarray(a) for a in args])
    assert plan.kernels and all(k.target == "c" for k in plan.kernels), plan
    assert not numpy_stretches(plan), plan
    return plan


# ---------------------------------------------------------------- float -> integer

def int_oracle(v, dtype):
    """rune's float -> integer conversion of the exact value `v`, in Python integers."""
    info = np.iinfo(dtype)
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return info.max if v > 0 else info.min
    return min(max(math.trunc(v), info.min), info.max)


def _conversion_values(src):
    """NaN, infinities, zeros, fractions, the largest finite value, and for every
    integer type the values just inside and just outside each of its bounds, as
    far as `src` can hold them."""
    p, big = SIGNIFICANT_BITS[src], float(ml_dtypes.finfo(src).max)
    vals = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, -0.5, 0.99, -0.99, -1.5, 1.5, 7.0,
            big, -big, -1.0]
    for dst in INTS:
        info = np.iinfo(dst)
        k = info.bits - 1 if info.min else info.bits      # the exclusive upper bound is 2**k
        below, above = 2.0 ** k - 2.0 ** (k - p), 2.0 ** k + 2.0 ** (k + 1 - p)
        vals += [below, 2.0 ** k, above, info.max - 0.5, float(info.max)]
        if info.min:
            vals += [-2.0 ** k, -above, -(2.0 ** k) + 0.5, -(2.0 ** k) - 0.5]
    return [v for v in vals if math.isnan(v) or abs(v) <= big or math.isinf(v)]


def _conversion_case(src):
    x = _cast_input(_conversion_values(src), src)
    exact = [float(v) for v in x.astype(np.float64)]      # widening is exact
    want = {dst: np.array([int_oracle(v, dst) for v in exact], dst) for dst in INTS}
    return x, want


def _convert_all(a):
    return tuple(bind(P["convert"], a, dtype=dst) for dst in INTS)


def _converter(dst):
    return lambda a: bind(P["convert"], a, dtype=np.dtype(dst))


# The float -> int rule, written out for the cases NumPy, ml_dtypes and C each get their own way:
# (source dtype, value, target dtype, expected)
FLOAT_TO_INT_ANCHORS = [
        (F32, math.nan, "int32", 0), (F64, -math.nan, "uint64", 0), (BF16, math.nan, "int8", 0),
        (F32, 2147483647.0, "int32", 2147483647),      # float32(2**31 - 1) is 2**31
        (F32, 2147483647.0, "uint32", 2147483648),
        (F64, 2147483647.75, "int32", 2147483647), (F64, -2147483648.75, "int32", -2147483648),
        (F64, -2147483649.0, "int32", -2147483648), (F64, 2.0 ** 63, "int64", 2 ** 63 - 1),
        (F64, 2.0 ** 64, "uint64", 2 ** 64 - 1), (F64, 2.0 ** 64 - 2048, "uint64", 2 ** 64 - 2048),
        (F16, -0.5, "uint8", 0), (BF16, -1.5, "uint16", 0), (BF16, -1.5, "int16", -1),
        (F16, 300.75, "int8", 127), (F16, -300.75, "int8", -128), (F16, 300.75, "uint8", 255),
        (F16, math.inf, "uint64", 2 ** 64 - 1), (BF16, -math.inf, "int64", -2 ** 63),
        (F16, 65504.0, "int16", 32767), (F16, 65504.0, "uint16", 65504), (BF16, 3e9, "uint32", 3003121664),
        (F32, 0.99, "int64", 0), (F64, -0.0, "int8", 0),
]


@pytest.mark.cc
def test_float_to_int_anchors():
    for src, v, dst, want in FLOAT_TO_INT_ANCHORS:
        x = nx.asarray(_cast_input([v], src))
        dst = np.dtype(dst)
        fn = _converter(dst)
        _jit_plan(fn, x)
        eager, jitted = np.asarray(fn(x)), np.asarray(rune.jit(fn)(x))
        assert eager.tolist() == [want] and jitted.tolist() == [want], (src, v, dst, eager, jitted)


@pytest.mark.parametrize("src", FLOATS, ids=[d.name for d in FLOATS])
def test_float_to_int_eager(src):
    x, want = _conversion_case(src)
    for dst, got in zip(INTS, _convert_all(nx.asarray(x))):
        np.testing.assert_array_equal(np.asarray(got), want[dst], err_msg=f"{src.name} -> {dst.name}")
        assert np.asarray(got).dtype == dst


def test_arrays_made_with_an_integer_dtype_follow_the_rule():
    host = np.array([math.nan, 1e10, -1.5, -1e10, 2.9])
    assert nx.asarray(host, dtype=nx.int32).tolist() == [0, 2 ** 31 - 1, -1, -2 ** 31, 2]
    assert nx.asarray(host.tolist(), dtype=nx.uint8).tolist() == [0, 255, 0, 0, 2]
    assert nx.asarray(host, dtype=nx.int8).astype(nx.int16).tolist() == [0, 127, -1, -128, 2]


def test_complex_to_int_converts_the_real_part():
    z = nx.asarray(np.array([complex(300.5, 2), complex(-1.5, -1e30), complex(math.nan, 1)], np.complex128))
    assert np.asarray(bind(P["convert"], z, dtype=np.dtype("uint8"))).tolist() == [255, 0, 0]
    assert np.asarray(bind(P["convert"], z, dtype=np.dtype("int8"))).tolist() == [127, -1, 0]


@pytest.mark.cc
@pytest.mark.parametrize("src", FLOATS, ids=[d.name for d in FLOATS])
def test_float_to_int_compiled(src):
    x, want = _conversion_case(src)
    _jit_plan(_convert_all, x)
    for dst, got in zip(INTS, rune.jit(_convert_all)(nx.asarray(x))):
        np.testing.assert_array_equal(np.asarray(got), want[dst], err_msg=f"{src.name} -> {dst.name}")


# ---------------------------------------------------------------- float // and %

NAN, INF = math.nan, math.inf
# (x, y, x // y, x % y): Python's results where it has them (y != 0; checked below
# against Python itself), NumPy's documented x / 0 and NaN for y == 0.
DIVMOD_CASES = [
    (7.5, 2.0, 3.0, 1.5), (-7.5, 2.0, -4.0, 0.5), (7.5, -2.0, -4.0, -0.5), (-7.5, -2.0, 3.0, -1.5),
    (6.0, 3.0, 2.0, 0.0), (-6.0, 3.0, -2.0, 0.0), (6.0, -3.0, -2.0, -0.0), (-6.0, -3.0, 2.0, -0.0),
    (INF, 3.0, NAN, NAN), (-INF, 3.0, NAN, NAN), (INF, -3.0, NAN, NAN), (INF, INF, NAN, NAN),
    (1.0, INF, 0.0, 1.0), (-1.0, INF, -1.0, INF), (1.0, -INF, -1.0, -INF), (-1.0, -INF, 0.0, -1.0),
    (0.0, INF, 0.0, 0.0), (-0.0, INF, -0.0, 0.0),
    (0.0, 1.0, 0.0, 0.0), (-0.0, 1.0, -0.0, 0.0), (0.0, -1.0, -0.0, -0.0), (-0.0, -1.0, 0.0, -0.0),
    (0.5, 1.0, 0.0, 0.5), (-0.5, 1.0, -1.0, 0.5), (0.5, -1.0, -1.0, -0.5),
    (NAN, 1.0, NAN, NAN), (1.0, NAN, NAN, NAN),
    (1.0, 0.0, INF, NAN), (-1.0, 0.0, -INF, NAN), (1.0, -0.0, -INF, NAN), (0.0, 0.0, NAN, NAN),
    (INF, 0.0, INF, NAN), (NAN, 0.0, NAN, NAN),
]


def test_divmod_table_is_pythons():
    for x, y, q, r in DIVMOD_CASES:
        if y == 0:
            continue
        for got, want in ((x // y, q), (x % y, r)):
            assert _same_float(got, want), (x, y, got, want)


def _same_float(a, b):
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def _assert_floats(got, want, where):
    got = np.asarray(got).astype(np.float64).tolist()
    bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if not _same_float(g, w)]
    assert not bad, f"{where}: (index, got, want) {bad}"


def _divmod(a, b):
    return a // b, a % b


def _one_over_point_one(dtype):
    """1.0 // 0.1 with 0.1 rounded to `dtype`, exactly: 9 unless the rounded 0.1 is below 1/10."""
    tenth = Fraction(float(_cast_input([0.1], dtype)[0]))
    return float(math.floor(1 / tenth)), float(1 - math.floor(1 / tenth) * tenth)


def _divmod_inputs(dtype):
    xs = [c[0] for c in DIVMOD_CASES] + [1.0]
    ys = [c[1] for c in DIVMOD_CASES] + [0.1]
    q, r = _one_over_point_one(dtype)
    return _cast_input(xs, dtype), _cast_input(ys, dtype), [c[2] for c in DIVMOD_CASES] + [q], \
        [c[3] for c in DIVMOD_CASES] + [float(_cast_input([r], dtype)[0])]


def _floordiv(a, b):
    return a // b


def _one_and_a_tenth(dtype):
    return nx.asarray(_cast_input([1.0], dtype)), nx.asarray(_cast_input([0.1], dtype))


def test_one_floordiv_a_tenth_is_nine():
    for dtype in (F64, F32, BF16):
        assert _one_over_point_one(dtype)[0] == 9.0
        x, y = _one_and_a_tenth(dtype)
        assert np.asarray(x // y).tolist() == [9.0] and np.asarray(rune.jit(_floordiv)(x, y)).tolist() == [9.0]
    assert _one_over_point_one(F16)[0] == 10.0      # float16(0.1) is 0.0999755859375
    # a weak Python scalar divisor: float32 0.1 rounds up, so rune's 9.0 is Python's float64 answer too
    assert np.asarray(nx.asarray(1.0) // 0.1).tolist() == 1.0 // 0.1


@pytest.mark.parametrize("dtype", FLOATS, ids=[d.name for d in FLOATS])
def test_float_divmod_eager(dtype):
    x, y, q, r = _divmod_inputs(dtype)
    got_q, got_r = _divmod(nx.asarray(x), nx.asarray(y))
    assert np.asarray(got_q).dtype == dtype and np.asarray(got_r).dtype == dtype
    _assert_floats(got_q, q, f"{dtype.name} //")
    _assert_floats(got_r, r, f"{dtype.name} %")


def test_floordiv_with_a_scalar_operand():
    x = nx.asarray(np.array([INF, -INF, 7.5, -7.5], np.float32))
    _assert_floats(x // 3.0, [NAN, NAN, 2.0, -3.0], "array // scalar")
    _assert_floats(1.0 // x, [0.0, -1.0, 0.0, -1.0], "scalar // array")
    _assert_floats(x % 2.0, [NAN, NAN, 1.5, 0.5], "array % scalar")


@pytest.mark.cc
@pytest.mark.parametrize("dtype", FLOATS, ids=[d.name for d in FLOATS])
def test_float_divmod_compiled(dtype):
    x, y, q, r = _divmod_inputs(dtype)
    _jit_plan(_divmod, x, y)
    got_q, got_r = rune.jit(_divmod)(nx.asarray(x), nx.asarray(y))
    _assert_floats(got_q, q, f"{dtype.name} //")
    _assert_floats(got_r, r, f"{dtype.name} %")


def test_float_divmod_matches_python_on_random_values():
    rng = np.random.default_rng(0)
    x = np.round(rng.uniform(-100, 100, 2000), 3)
    y = np.round(rng.uniform(-10, 10, 2000), 2)
    y[y == 0] = 0.25
    q, r = _divmod(nx.asarray(x), nx.asarray(y))
    _assert_floats(q, [a // b for a, b in zip(x.tolist(), y.tolist())], "float64 //")
    _assert_floats(r, [a % b for a, b in zip(x.tolist(), y.tolist())], "float64 %")
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    exact = [math.floor(Fraction(float(a)) / Fraction(float(b))) for a, b in zip(x32, y32)]
    _assert_floats(nx.asarray(x32) // nx.asarray(y32), [float(v) for v in exact], "float32 //")


class _FloorFormulaModule(types.ModuleType):
    """NumPy with CuPy's float `//` and `%` (floor(x / y) formulas): rune's table must not use them."""

    def __init__(self):
        super().__init__("floor_formula_numpy")

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def floor_divide(x, y):
        return np.floor(np.true_divide(x, y)) if np.result_type(x, y).kind == "f" else np.floor_divide(x, y)

    @staticmethod
    def remainder(x, y):
        if np.result_type(x, y).kind == "f":
            return x - np.floor(np.true_divide(x, y)) * y
        return np.remainder(x, y)


def test_the_table_keeps_rune_rules_on_a_module_with_floor_formulas():
    """The array-module table (which CuPy eager runs) computes float `//`, `%` and
    float -> int from exact ops, whatever the module's own floor_divide does."""
    xp = _FloorFormulaModule()
    assert xp.floor_divide(np.array([1.0]), np.array([0.1]))[0] == 10.0    # the module's own answer
    impls = array_impls.make_impls(xp, CPU, special=lambda: None, quiet=array_impls.numpy_quiet)
    for dtype in (F64, F32):
        x, y, q, r = _divmod_inputs(dtype)
        _assert_floats(impls["floordiv"](x, y), q, f"{dtype.name} //")
        _assert_floats(impls["rem"](x, y), r, f"{dtype.name} %")
    x, want = _conversion_case(F32)
    for dst in INTS:
        np.testing.assert_array_equal(impls["convert"](x, dtype=dst), want[dst])


# ---------------------------------------------------------------- into float16 / bfloat16

def _half_bits(value, dtype):
    """The bits of exact rational `value` rounded once, to nearest even, to float16 or
    bfloat16 (overflow to infinity), computed on integers."""
    value = Fraction(value)
    p, emax, emin = (11, 15, -14) if dtype == F16 else (8, 127, -126)
    exp_bits = 5 if dtype == F16 else 8
    sign = 1 << (exp_bits + p - 1) if value < 0 else 0
    m = abs(value)
    if m == 0:
        return sign
    e = max(math.floor(math.log2(m)), emin)
    while Fraction(2) ** e > m and e > emin:
        e -= 1
    while Fraction(2) ** (e + 1) <= m:
        e += 1
    ulp = Fraction(2) ** (e - p + 1)
    n, rest = divmod(m / ulp, 1)
    n = int(n)
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2):
        n += 1
    if n == 2 ** p:          # carried into the next binade
        n, e = 2 ** (p - 1), e + 1
    if e > emax:
        return sign | (((1 << exp_bits) - 1) << (p - 1))
    if n < 2 ** (p - 1):     # subnormal
        return sign | n
    return sign | ((e - emin + 1) << (p - 1)) | (n - 2 ** (p - 1))


# (source dtype, value (exact: Fraction, int or float), target) -> expected bits from _half_bits,
# and the bits double rounding through float32 would give instead, where it differs.
HALF_CASES = [
    (F64, 1 + 2.0 ** -8 + 2.0 ** -40, BF16, 0x3f81), (F64, 1 + 2.0 ** -8, BF16, 0x3f80),
    (F64, 1 + 3 * 2.0 ** -8, BF16, 0x3f82), (F64, -(1 + 2.0 ** -8 + 2.0 ** -40), BF16, 0xbf81),
    (F64, (2 - 2.0 ** -8) * 2.0 ** 127, BF16, 0x7f80), (F64, (2 - 2.0 ** -8) * 2.0 ** 127 - 2.0 ** 87, BF16, 0x7f7f),
    (F64, 2.0 ** -134, BF16, 0x0000), (F64, 2.0 ** -134 + 2.0 ** -160, BF16, 0x0001),
    (F64, 1e300, BF16, 0x7f80), (F64, -1e-300, BF16, 0x8000),
    (F64, 1 + 2.0 ** -11 + 2.0 ** -40, F16, 0x3c01), (F64, 1 + 2.0 ** -11, F16, 0x3c00),
    (F64, 65520.0, F16, 0x7c00), (F64, 65520.0 - 2.0 ** -20, F16, 0x7bff),
    (F64, 2.0 ** -25 + 2.0 ** -60, F16, 0x0001), (F64, 2.0 ** -25, F16, 0x0000),
    (np.dtype("int32"), 2 ** 24 + 2 ** 16 + 1, BF16, 0x4b81), (np.dtype("int32"), 257, BF16, 0x4380),
    (np.dtype("int32"), 259, BF16, 0x4382), (np.dtype("int32"), -2 ** 31, BF16, 0xcf00),
    (np.dtype("uint32"), 2 ** 32 - 1, BF16, 0x4f80), (np.dtype("uint32"), 2 ** 31 + 2 ** 23 + 1, BF16, 0x4f01),
    (np.dtype("int64"), 2 ** 62 + 2 ** 54 + 1, BF16, 0x5e81), (np.dtype("int64"), -2 ** 63, BF16, 0xdf00),
    (np.dtype("int64"), 2 ** 62 + 2 ** 54, BF16, 0x5e80), (np.dtype("int64"), -(2 ** 40 + 2 ** 32 + 7), BF16, 0xd381),
    (np.dtype("uint64"), 2 ** 64 - 1, BF16, 0x5f80), (np.dtype("uint64"), 2 ** 63 + 2 ** 55 + 1, BF16, 0x5f01),
    (np.dtype("int16"), 32767, BF16, 0x4700), (np.dtype("uint8"), 255, BF16, 0x437f), (np.dtype("int16"), 257, BF16, 0x4380),
    (np.dtype("int32"), 2049, F16, 0x6800), (np.dtype("int32"), 2051, F16, 0x6802),
    (np.dtype("int32"), 65519, F16, 0x7bff), (np.dtype("int32"), 65520, F16, 0x7c00),
    (np.dtype("int64"), -2 ** 40, F16, 0xfc00), (np.dtype("uint64"), 2 ** 64 - 1, F16, 0x7c00),
    (BF16, 1 + 2.0 ** -7, F16, 0x3c08), (BF16, 3 * 2.0 ** -26, F16, 0x0001), (BF16, 2.0 ** -25, F16, 0x0000),
    (BF16, 2.0 ** 16, F16, 0x7c00), (BF16, 65280.0, F16, 0x7bf8), (BF16, -2.0 ** -30, F16, 0x8000),
    (F16, 1 + 2.0 ** -10, BF16, 0x3f80), (F16, 1 + 2.0 ** -8, BF16, 0x3f80), (F16, 1 + 3 * 2.0 ** -8, BF16, 0x3f82),
    (F16, 65504.0, BF16, 0x4780), (F16, 2.0 ** -24, BF16, 0x3380), (F16, -2.0 ** -24, BF16, 0xb380),
    (F32, 1 + 2.0 ** -8 + 2.0 ** -20, BF16, 0x3f81), (F32, 1 + 2.0 ** -8, BF16, 0x3f80),
    (F32, 1 + 2.0 ** -11 + 2.0 ** -20, F16, 0x3c01),
]


def _half_source(src, value):
    if src.kind in "iu":
        return np.array([value], src)
    x = _cast_input([value], src)
    assert Fraction(float(x[0])) == Fraction(value), (src, value)     # the input is exact
    return x


def test_half_oracle_agrees_with_the_written_bits():
    for src, value, dst, bits in HALF_CASES:
        assert _half_bits(Fraction(value), dst) == bits, (src, value, dst.name, hex(bits))


def _to_half(a, dst):
    return bind(P["convert"], a, dtype=dst)


@pytest.mark.cc
def test_conversions_into_16_bit_floats_round_once_eager_and_compiled():
    for src, value, dst, bits in HALF_CASES:
        x = nx.asarray(_half_source(src, value))
        fn = _converter(dst)
        _jit_plan(fn, x)
        eager, jitted = _bits(fn(x)), _bits(rune.jit(fn)(x))
        assert eager.tolist() == [bits] and jitted.tolist() == [bits], \
            (src.name, value, dst.name, hex(bits), hex(int(eager[0])), hex(int(jitted[0])))


def test_nan_into_bfloat16_is_the_quiet_nan_of_its_sign():
    for src in (F64, F32, F16):
        x = nx.asarray(np.array([np.nan, -np.nan], src))
        for got in (_to_half(x, BF16), rune.jit(_converter(BF16))(x)):
            assert _bits(got).tolist() == [0x7fc0, 0xffc0], src
    for src in (F64, F32, BF16):
        x = nx.asarray(_cast_input([np.nan], src))
        assert np.isnan(np.asarray(_to_half(x, F16)).astype(np.float64)).all()


INTEGER_CASTS = [(np.int32, 300, "int8", 44), (np.int32, -1, "uint8", 255), (np.uint64, 2 ** 64 - 1, "int64", -1),
                 (np.int64, 2 ** 40 + 5, "int32", 5), (np.int8, -128, "uint16", 65408), (np.bool_, True, "int16", 1)]


def test_integer_casts_wrap():
    for src, v, dst, want in INTEGER_CASTS:
        x = nx.asarray(np.array([v], src))
        f = _converter(dst)
        assert np.asarray(f(x)).tolist() == [want] and np.asarray(rune.jit(f)(x)).tolist() == [want], (src, v, dst)


NONZERO_FLOATS = np.array([np.nan, 0.0, -0.0, 1e-300, -np.inf], np.float64)


def test_float_to_bool_is_nonzero():
    x = nx.asarray(NONZERO_FLOATS)
    f = _converter(bool)
    assert np.asarray(f(x)).tolist() == [True, False, False, True, True]
    assert np.asarray(rune.jit(f)(x)).tolist() == [True, False, False, True, True]


def _nextafter_case(dtype):
    """Operands and the expected bits (as float64 values with their signs) of nextafter:
    equal operands give y, so signed zeros follow y; one step from zero is the smallest
    subnormal of the dtype, with y's sign."""
    tiny = {F16: 2.0 ** -24, BF16: 2.0 ** -133, F32: 2.0 ** -149, F64: 5e-324}[dtype]
    x = [0.0, -0.0, 0.0, -0.0, 1.0, 0.0, -0.0, math.nan, 2.0]
    y = [-0.0, 0.0, 0.0, -0.0, 1.0, 1.0, -1.0, 0.0, math.nan]
    want = [-0.0, 0.0, 0.0, -0.0, 1.0, tiny, -tiny, math.nan, math.nan]
    return np.array(x, dtype), np.array(y, dtype), want


def _assert_same_floats(got, want, what):
    got = np.asarray(got, np.float64).tolist()
    for g, w in zip(got, want, strict=True):
        assert (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w)), \
            f"{what}: {got} != {want}"


@pytest.mark.parametrize("dtype", FLOATS, ids=[d.name for d in FLOATS])
def test_nextafter_of_equal_operands_is_y_eager(dtype):
    x, y, want = _nextafter_case(dtype)
    _assert_same_floats(nx.nextafter(nx.asarray(x), nx.asarray(y)), want, f"eager {dtype.name}")


@pytest.mark.cc
@pytest.mark.parametrize("dtype", FLOATS, ids=[d.name for d in FLOATS])
def test_nextafter_of_equal_operands_is_y_compiled(dtype):
    x, y, want = _nextafter_case(dtype)
    _assert_same_floats(rune.jit(nx.nextafter)(x, y), want, f"jit {dtype.name}")


# ---------------------------------------------------------------- the CUDA dialect

def _cuda_programs():
    """(name, fn, args, check(outputs)) for every rule above, as CUDA stretches."""
    progs = []
    for src in FLOATS:
        x, want = _conversion_case(src)

        def check(outs, want=want, src=src):
            for dst, got in zip(INTS, outs):
                np.testing.assert_array_equal(got, want[dst], err_msg=f"{src.name} -> {dst.name}")
        progs.append((f"to_int_{src.name}", _convert_all, (x,), check))
        x, y, q, r = _divmod_inputs(src)

        def check_divmod(outs, q=q, r=r, src=src):
            _assert_floats(outs[0], q, f"{src.name} //")
            _assert_floats(outs[1], r, f"{src.name} %")
        progs.append((f"divmod_{src.name}", _divmod, (x, y), check_divmod))
    for dtype in FLOATS:
        x, y, want = _nextafter_case(dtype)
        progs.append((f"nextafter_{dtype.name}", lambda a, b: (nx.nextafter(a, b),), (x, y),
                      lambda outs, want=want, dtype=dtype: _assert_same_floats(outs[0], want, dtype.name)))
    for dst in (F16, BF16):
        for src in {c[0] for c in HALF_CASES if c[2] == dst}:
            cases = [c for c in HALF_CASES if c[0] == src and c[2] == dst]
            x = np.concatenate([_half_source(src, c[1]) for c in cases])

            def check_half(outs, cases=cases):
                assert _bits(outs[0]).tolist() == [c[3] for c in cases], cases
            progs.append((f"{src.name}_to_{dst.name}", lambda a, dst=dst: (_to_half(a, dst),), (x,), check_half))
    return progs


@pytest.fixture(scope="module")
def cuda_rendered():
    built = []
    for name, fn, args, check in _cuda_programs():
        plan = rune.jit(fn).plan(*args, target="cuda")
        rendered = cuda_emu.rerender(plan, EMU_DIALECT)
        assert rendered, f"{name}: no CUDA stretch"
        built.append((name, plan, rendered, args, check))
    return built


@needs_gxx
def test_cuda_dialect_emulated(cuda_rendered):
    units = [u for *_, rendered, _, _ in cuda_rendered for u in rendered.values()]
    library = cuda_emu.Library(EMU_DIALECT.prelude(), units)
    for name, plan, rendered, args, check in cuda_rendered:
        check(cuda_emu.run_plan(plan, list(args), library, rendered))


@pytest.mark.nvrtc
def test_cuda_dialect_compiles_with_nvrtc(cuda_rendered):
    texts = {text: kernels for *_, rendered, _, _ in cuda_rendered for text, kernels in rendered.values()}
    names = [ln.name for kernels in texts.values() for k in kernels for ln in k.launches]
    ptx = nvrtc.compile_unit(EMU_DIALECT.prelude() + "\n\n".join(texts), ptx=True, kernels=names).decode()
    assert all(f".entry {n}(" in ptx for n in names)


# ---------------------------------------------------------------- on a GPU

@cuda
@pytest.mark.parametrize("src", FLOATS, ids=[d.name for d in FLOATS])
def test_float_to_int_on_a_gpu(src):
    x, want = _conversion_case(src)
    a = nx.asarray(x, device="cuda")
    for outs in (_convert_all(a), rune.jit(_convert_all)(a)):
        for dst, got in zip(INTS, outs):
            assert got.device.platform == "cuda"
            np.testing.assert_array_equal(np.asarray(got), want[dst], err_msg=f"{src.name} -> {dst.name}")


@cuda
@pytest.mark.parametrize("dtype", FLOATS, ids=[d.name for d in FLOATS])
def test_float_divmod_on_a_gpu(dtype):
    x, y, q, r = _divmod_inputs(dtype)
    a, b = nx.asarray(x, device="cuda"), nx.asarray(y, device="cuda")
    for got_q, got_r in (_divmod(a, b), rune.jit(_divmod)(a, b)):
        assert got_q.device.platform == "cuda"
        _assert_floats(got_q, q, f"{dtype.name} //")
        _assert_floats(got_r, r, f"{dtype.name} %")


@cuda
def test_conversions_into_16_bit_floats_on_a_gpu():
    for src, value, dst, bits in HALF_CASES:
        x = nx.asarray(_half_source(src, value), device="cuda")
        for got in (_to_half(x, dst), rune.jit(lambda a, dst=dst: _to_half(a, dst))(x)):
            assert _bits(got).tolist() == [bits], (src.name, value, dst.name, hex(bits))


FILL_VALUES = [float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 2.7, -2.7, -0.5]
FILLED = {np.int32: [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2, -2, 0], np.uint8: [0, 255, 0, 255, 0, 2, 0, 0]}


def _fill(v, dtype):
    return lambda: nx.full((3,), v, dtype=dtype)


@pytest.mark.parametrize("make", ["asarray", "full", "full_array_fill", "full_under_jit"])
def test_scalars_and_fills_made_with_an_integer_dtype_follow_the_rule(make):
    values = FILL_VALUES
    for dtype, expected in FILLED.items():
        if make == "asarray":
            got = [int(nx.asarray(v, dtype=dtype)) for v in values]
        elif make == "full":
            got = [int(nx.full((2,), v, dtype=dtype)[1]) for v in values]
        elif make == "full_array_fill":
            got = np.asarray(nx.full((2, len(values)), np.array(values), dtype=dtype))[1].tolist()
        else:
            got = [int(rune.jit(_fill(v, dtype))()[2]) for v in values]
        assert got == expected, (make, dtype)


@pytest.mark.parametrize("make", ["asarray", "full", "full_like", "full_sequence_fill", "full_under_jit"])
def test_python_ints_an_integer_dtype_cannot_hold_raise_naming_the_function(make):
    # Python ints are checked, never wrapped (NumPy 2 and JAX raise OverflowError too); the
    # error is rune's, naming the function: floats saturate instead (the test above).
    name = "asarray" if make == "asarray" else "full"
    for value, dtype in [(300, nx.uint8), (-1, nx.uint8), (128, nx.int8), (2 ** 31, nx.int32), (2 ** 64, nx.uint64)]:
        make_it = {"asarray": lambda: nx.asarray(value, dtype=dtype),
                   "full": lambda: nx.full((2,), value, dtype),
                   "full_like": lambda: nx.full_like(nx.zeros((2,), dtype), value),
                   "full_sequence_fill": lambda: nx.full((2,), [value, 1], dtype),
                   "full_under_jit": lambda: rune.jit(lambda: nx.full((3,), value, dtype))()}[make]
        with pytest.raises(rune.ScalarOverflowError, match=rf"^{name}: .*{np.dtype(dtype).name}") as raised:
            make_it()
        assert make == "full_sequence_fill" or str(value) in str(raised.value)
    # the bounds themselves fit
    assert np.asarray(nx.full((2,), 255, nx.uint8)).tolist() == [255, 255]
    assert np.asarray(nx.full((2,), -128, nx.int8)).tolist() == [-128, -128]


def _jitted_calls():
    """The C-compiled calls of the tests above, compiled together before the file's first test."""
    calls = [(_converter(dst), (_cast_input([v], src),)) for src, v, dst, _ in FLOAT_TO_INT_ANCHORS]
    calls += [(_convert_all, (_conversion_case(src)[0],)) for src in FLOATS]
    calls += [(_floordiv, _one_and_a_tenth(dtype)) for dtype in (F64, F32, BF16)]
    calls += [(_divmod, _divmod_inputs(dtype)[:2]) for dtype in FLOATS]
    calls += [(_converter(dst), (_half_source(src, value),)) for src, value, dst, _ in HALF_CASES]
    calls += [(_converter(BF16), (np.array([np.nan, -np.nan], src),)) for src in (F64, F32, F16)]
    calls += [(_converter(dst), (np.array([v], src),)) for src, v, dst, _ in INTEGER_CASTS]
    calls += [(_converter(bool), (NONZERO_FLOATS,)), *((nx.nextafter, _nextafter_case(d)[:2]) for d in FLOATS)]
    calls += [(_fill(v, dtype), ()) for dtype in FILLED for v in FILL_VALUES]
    return [(fn, tuple(nx.asarray(a) for a in args)) for fn, args in calls]


_kernels = precompiled(_jitted_calls)
