"""rune's float semantics where array modules disagree, composed of exact elementwise ops.

Written against an array module `xp` (NumPy on the host, CuPy on a GPU), so
every backend gives the same bits without relying on what its module does
with an edge case. Each step below is exact or one IEEE rounding that both
modules perform alike (fmod, trunc, floor, comparisons, +, -, /, in-range casts,
float32 -> float16 rounding to nearest even). The compiled kernels spell the
same rules in C (rune/codegen/expressions.py: `_convert`; the helpers of rune/codegen/helpers.py).

- float -> integer (`to_integer`): NaN -> 0, above the type's range -> its
  maximum, below it -> its minimum (0 for unsigned types), otherwise
  truncation toward zero: XLA's convert and CUDA's cvt.rzi.sat.
- float floor division and remainder (`floor_divmod`): NumPy's npy_divmod,
  which gives Python's signs: the remainder takes the divisor's sign and the
  quotient is floor((x - x mod y) / y), snapped to an integer, so
  `1.0 // 0.1 == 9.0` and `inf // 3.0` is NaN; `x // 0` is `x / 0` and
  `x % 0` NaN. 16-bit floats compute in float32 and round once.
- to float16 and bfloat16 (`to_half`): one rounding to nearest even of the
  exact value (never twice, through float32). A NaN stays NaN; a bfloat16 one
  is the quiet 0x7fc0 with the sign of the source (0xffc0 negative).
"""
import ml_dtypes
import numpy as np

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
BOOL = np.dtype(bool)


def is_float(dtype):
    return dtype.kind == "f" or dtype == BF16


def widened(dtype):
    """The type a float computes in: float32 for the 16-bit floats."""
    return F32 if dtype.itemsize == 2 else dtype


def _as(xp, v, dtype):
    """An operand as an array of `dtype` on `xp`; eager dispatch passes literals as
    NumPy scalars, which would meet device arrays on the left of an operator."""
    return v.astype(dtype, copy=False) if isinstance(v, xp.ndarray) else xp.asarray(v, dtype=dtype)


def to_integer(xp, x, dtype):
    """Float (or complex: its real part) `x` converted to the integer `dtype`:
    NaN -> 0, saturating at the type's bounds, truncating toward zero inside."""
    if x.dtype.kind == "c":
        x = x.real
    x = x.astype(widened(x.dtype), copy=False)   # exact: 16-bit floats widen to float32
    info = np.iinfo(dtype)
    # Both bounds are powers of two (or 0), exact in float32 and float64; the
    # maximum itself may not be (float32(2**31 - 1) is 2**31), so it is selected.
    above = float(2 ** (info.bits - 1) if info.min else 2 ** info.bits)
    t = xp.trunc(x)
    high, low = t >= above, t < info.min
    inside = xp.where(high | low | xp.isnan(t), x.dtype.type(0), t).astype(dtype)
    return xp.where(high, dtype.type(info.max), xp.where(low, dtype.type(info.min), inside))


def cast(xp, x, dtype):
    """`x` converted to `dtype` by rune's rules: the modules' own casts where they are
    exact, one IEEE rounding, or wrap (integer to integer); computed where those are
    undefined or differ (NaN and out-of-range floats to integers, double rounding
    into 16-bit floats). Call it with floating-point warnings silenced."""
    x = xp.asarray(x)
    if dtype == BOOL and (is_float(x.dtype) or x.dtype.kind in "biuc"):
        return xp.asarray(x != 0)
    if dtype.kind in "iu" and (is_float(x.dtype) or x.dtype.kind == "c"):
        return to_integer(xp, x, dtype)
    if dtype.itemsize == 2 and is_float(dtype) and x.dtype.kind != "c":
        return to_half(xp, x, dtype)
    return x.astype(dtype)


def floor_divmod(xp, x, y, dtype, *, want):
    """Float floor division (`want="floordiv"`) or remainder (`want="rem"`) of
    `x` and `y` in `dtype`, NumPy's npy_divmod step by step."""
    wide = widened(dtype)
    x, y = _as(xp, x, wide), _as(xp, y, wide)
    mod = xp.fmod(x, y)                        # exact; NaN where x is infinite or y is 0
    nonzero = mod != 0                         # NaN counts as nonzero, as in C
    # The remainder takes the divisor's sign (Python's), moving the quotient down by one.
    shifted = nonzero & ((y < 0) != (mod < 0))
    if want == "rem":
        out = xp.where(shifted, mod + y, xp.where(nonzero, mod, xp.copysign(wide.type(0), y)))
    else:
        quotient = x / y
        div = (x - mod) / y                    # very nearly an integer
        div = xp.where(shifted, div - 1, div)
        fl = xp.floor(div)
        fl = xp.where(div - fl > 0.5, fl + 1, fl)   # snapped to the nearest integer
        fl = xp.where(div != 0, fl, xp.copysign(wide.type(0), quotient))
        out = xp.where(y == 0, quotient, fl)
    return narrowed(xp, xp.asarray(out), dtype)


def narrowed(xp, x, dtype):
    """A float32/float64 result rounded to `dtype` (itself where it is one)."""
    if x.dtype == dtype:
        return x
    if dtype.itemsize == 2:
        return to_half(xp, x, dtype)
    return x.astype(dtype)


def _bf16_from_f32(xp, x):
    """float32 -> bfloat16 by its bits: round to nearest even, NaN -> quiet NaN of its sign."""
    u = x.view(np.uint32)
    sign = u & np.uint32(0x80000000)
    nan = (u & np.uint32(0x7fffffff)) > np.uint32(0x7f800000)
    rounded = (u + np.uint32(0x7fff) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    bits = xp.where(nan, (sign | np.uint32(0x7fc00000)) >> np.uint32(16), rounded)
    return bits.astype(np.uint16).view(BF16)


def _f32_round_to_odd(xp, x):
    """float64 -> float32 rounded to odd: truncated, with the last bit set when
    inexact. Rounding that once more to 10 or fewer significant bits (float16,
    bfloat16) gives the float64's own rounding: no double-rounding error."""
    r = x.astype(F32)
    u = r.view(np.uint32)
    inexact = (r.astype(F64) != x) & ~xp.isnan(x)
    # bits - 1 moves toward zero, bits + 1 away, whatever the sign
    step = xp.where(xp.abs(r.astype(F64)) > xp.abs(x), np.uint32(0xffffffff), np.uint32(1))
    fix = inexact & ((u & np.uint32(1)) == 0)
    return xp.where(fix, u + step, u).astype(np.uint32).view(F32)


def _f32_round_to_odd_from_int(xp, x):
    """An integer array as float32 rounded to odd (see `_f32_round_to_odd`), computed
    on its magnitude in uint64: 24 leading bits kept, the last one set when any
    dropped bit was."""
    negative = x < 0
    m = x.astype(np.uint64)
    m = xp.where(negative, ~m + np.uint64(1), m)      # two's complement: |int64 min| is 2**63
    # frexp of the float64 may round up to the next power of two: then one bit
    # fewer is kept, which is still enough for one exact rounding afterwards.
    _, e = xp.frexp(m.astype(F64))
    shift = xp.maximum(e - 24, 0).astype(np.uint64)
    kept = m >> shift
    sticky = (kept << shift) != m
    kept = kept | sticky.astype(np.uint64)
    value = xp.ldexp(kept.astype(F32), shift.astype(np.int32))   # exact: 24 bits, scaled
    return xp.where(negative, -value, value)


def to_half(xp, x, dtype):
    """`x` (any real dtype) rounded once to float16 or bfloat16."""
    src = x.dtype
    if src == dtype:
        return x
    if src.kind in "iu" and src.itemsize == 8:
        x = _f32_round_to_odd_from_int(xp, x)
    elif src.kind in "iu" and src.itemsize == 4:
        x = _f32_round_to_odd(xp, x.astype(F64))      # exact in float64
    elif src == F64:
        return _half_from_f64(xp, x, dtype)
    else:
        x = x.astype(F32, copy=False)                 # bool, narrow ints, float16, bfloat16: exact
    return _half_from_f32(xp, x, dtype)


def _half_from_f32(xp, x, dtype):
    if dtype == BF16:
        return _bf16_from_f32(xp, x)
    return x.astype(F16)


# float32's smallest normal, and per 16-bit type the power of two that scales its
# smallest subnormal to 1: 2**-133 for bfloat16, 2**-24 for float16.
_F32_TINY = float(np.finfo(np.float32).tiny)
_SUBNORMAL_SCALE = {BF16: 2.0 ** 133, F16: 2.0 ** 24}


def _half_from_f64(xp, x, dtype):
    """float64 -> float16/bfloat16 rounded once, never forming a float32 subnormal:
    CuPy compiles every kernel with -ftz=true, so on an eager GPU path such a value
    (in a conversion too) would flush to zero. Below float32's smallest normal the
    result is computed in float64 and integers alone: the 16-bit type's subnormal
    (or smallest normal) steps are multiples of 2**-133 (bfloat16) or 2**-24
    (float16), so `rint(|x| * scale)` (exact scaling, one rounding to nearest even)
    is the magnitude's bits, 0x80 being bfloat16's smallest normal 2**-126."""
    small = xp.abs(x) < _F32_TINY                     # False for NaN
    r = _f32_round_to_odd(xp, xp.where(small, F64.type(0), x))
    wide = _half_from_f32(xp, r, dtype).view(np.uint16)
    magnitude = xp.where(small, xp.abs(x), F64.type(0))   # in range for the integer cast
    sign = xp.signbit(x).astype(np.uint16) << np.uint16(15)
    tiny = sign | xp.rint(magnitude * _SUBNORMAL_SCALE[dtype]).astype(np.uint16)
    return xp.where(small, tiny, wide).view(dtype)
