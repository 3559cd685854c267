"""Elementwise math, comparisons, windows and calculus helpers of NumPy's surface (cbrt, isclose, gradient, ...).

Every function here is a composite of rune.nx's primitives, so it runs under
jit, vmap and the derivative transforms on every backend with no rules of its
own; where NumPy's special values (NaN, infinities, signed zeros) differ from
the plain formula, the composite selects them explicitly. Results follow rune's
promotion lattice (README "Dtype promotion"): integer and bool operands of a
float function compute in the promotion table's float for them.
"""
import builtins
import math

import ml_dtypes
import numpy as np

from ..core import dtypes as dt
from ..core.array import Array
from ..core.trace import Tracer
from ..errors import ArgumentError, AxisError, DTypeError, ShapeError, UsageError
from . import ops
from .shapes import diff
from .creation import arange, zeros_like
from .exact_math import compiled_when_eager
from .searching import searchsorted
from .sorting import argsort, cumsum
from .mathfuncs import _float_operand, copysign, isinf, log2, logaddexp, nextafter, signbit, trunc

__all__ = []


def _public(fn):
    __all__.append(fn.__name__)
    return fn


def _array(x):
    """`x` as an operand array (Python scalars become weak arrays)."""
    return x if isinstance(x, (Array, Tracer)) else ops.asarray(x)


def _real_float(name, x):
    """`x` as a real float operand (ints and bools in their float); complex refused."""
    x = _float_operand(x)
    if dt.is_complex(x.dtype):
        raise DTypeError(f"{name}: expected a real (not complex) operand, got {x.dtype.name}")
    return x


def _real_pair(name, x, y, floats=True):
    """`x, y` promoted together (NEP 50); complex refused; with `floats`, ints and bools
    become the promotion table's float for them."""
    weak = ops._all_weak(x, y)
    x, y = (_array(v) for v in ops.promote(name, x, y))
    d = x.dtype
    if dt.is_complex(d):
        raise DTypeError(f"{name}: expected real (not complex) operands, got {d.name}")
    if floats and not dt.is_float(d):
        target = dt.to_inexact(d, weak)
        x, y = ops.astype(x, target), ops.astype(y, target)
    return x, y


def _const(x, value):
    """`value` as a scalar of `x`'s dtype (a strong literal that does not promote)."""
    return np.asarray(value).astype(x.dtype)[()] if x.dtype != dt.bfloat16 else x.dtype.type(value)


# ---------------------------------------------------------------- elementwise math

@_public
def around(x, decimals=0):
    """`x` rounded to `decimals` decimal places, halves to even (NumPy's around, the same as round).

    x: an array or scalar. decimals: how many decimal places (negative: tens, hundreds, ...). Integers keep
    their dtype (rounded to tens, hundreds, ... by negative decimals), as NumPy's.
    """
    x = _array(x)
    if x.dtype.kind in "biu":
        if decimals >= 0:
            return x
        # the float64 quotient of an integer by a power of ten rounds ties exactly as NumPy's integer rounding
        return ops.astype(ops.round(ops.astype(x, dt.float64), decimals), x.dtype)
    return ops.round(x, decimals)


@_public
def rint(x):
    """`x` rounded to the nearest integer, halves to even; integers and bools give their float (as NumPy).

    x: an array or scalar (complex numbers: each part rounded).
    """
    x = _float_operand(x)
    if dt.is_complex(x.dtype):   # each part, as NumPy's
        return ops.make_complex(ops.round(ops.real(x)), ops.round(ops.imag(x)))
    return ops.round(x)


@_public
def fabs(x):
    """The absolute value of each element as a float (ints and bools give their float).

    x: a real array or scalar (complex numbers are refused, as NumPy's fabs does).
    """
    return ops.abs(_real_float("fabs", x))


@_public
def cbrt(x):
    """The real cube root, elementwise (negative for negative x; cbrt(-8) = -2).

    x: a real array or scalar; integers and bools compute in their float.
    """
    return ops.bind(ops.P["cbrt"], _real_float("cbrt", x))   # a core primitive (rune/base/vocabulary.py)


_DEG = 180 / math.pi


def _scaled(name, factor):
    def op(x):
        x = _real_float(name, x)
        return ops.multiply(x, _const(x, factor))
    op.__name__ = name
    return op


deg2rad = radians = _scaled("deg2rad", 1 / _DEG)
rad2deg = degrees = _scaled("rad2deg", _DEG)
radians.__doc__ = deg2rad.__doc__ = ("Angles in degrees converted to radians (also named radians).\n\n"
                                     "x: a real array or scalar; integers and bools compute in their float.")
degrees.__doc__ = rad2deg.__doc__ = ("Angles in radians converted to degrees (also named degrees).\n\n"
                                     "x: a real array or scalar; integers and bools compute in their float.")
__all__ += ["deg2rad", "radians", "rad2deg", "degrees"]


@_public
def exp2(x):
    """2 ** x, elementwise.

    x: an array or scalar; integers and bools compute in their float, complex numbers stay complex.
    """
    x = _float_operand(x)
    return ops.power(_const(x, 2), x)


@_public
def logaddexp2(x, y):
    """log2(2**x + 2**y), elementwise, computed stably.

    x, y: real arrays or scalars, broadcast and promoted together; integers and bools compute in their float.
    """
    x, y = _real_pair("logaddexp2", x, y)
    # NumPy's form: the larger operand plus log2(1 + 2**-|x - y|), exact in the larger one (scaling
    # both by ln 2 first, as log(2**x + 2**y) would, loses the result's low bits near 0). A NaN
    # difference (a NaN operand, or infinities of opposite signs) falls through to NaN or the infinity.
    d = ops.subtract(x, y)
    larger = ops.where(ops.greater(d, 0), x, y)
    out = ops.add(larger, ops.multiply(ops.log1p(exp2(ops.negative(ops.abs(d)))), _const(x, 1 / math.log(2))))
    # Ties (infinities of one sign included) are x + 1 exactly, with the slope shared as it is elsewhere.
    tie = ops.add(ops.add(ops.multiply(x, _const(x, 0.5)), ops.multiply(y, _const(x, 0.5))), _const(x, 1))
    return ops.where(ops.equal(x, y), tie, out)


def _bools_as_int8(x, y):
    """Bool operands of an integer-valued division as int8 (NumPy's loop for them)."""
    if x.dtype.kind == "b":
        return ops.astype(x, dt.int8), ops.astype(y, dt.int8)
    return x, y


@_public
def divmod(x, y):
    """(x // y, x % y) elementwise: the floored quotient and the remainder with the sign of `y`.

    x, y: real arrays or scalars, broadcast and promoted together (bools divide as int8, as NumPy's).
    """
    x, y = _bools_as_int8(*_real_pair("divmod", x, y, floats=False))
    return ops.floor_divide(x, y), ops.remainder(x, y)


true_divide = ops.divide
__all__.append("true_divide")


@_public
def float_power(x, y):
    """x ** y computed in float64 (complex128 for complex operands), as NumPy's float_power.

    x, y: arrays or scalars, broadcast together; whatever their dtypes, the result is float64 or complex128.
    """
    x, y = (_array(v) for v in ops.promote("float_power", x, y))
    target = dt.complex128 if dt.is_complex(x.dtype) else dt.float64
    return ops.power(ops.astype(x, target), ops.astype(y, target))


def _lexicographic(larger):
    """Whether x is at least (`larger`) or at most y in NumPy's order of complex numbers: by the real
    parts, then the imaginary ones."""
    first, then = (ops.greater, ops.greater_equal) if larger else (ops.less, ops.less_equal)

    def at_least(x, y):
        xr, yr = ops.real(x), ops.real(y)
        ties = ops.logical_and(ops.equal(xr, yr), then(ops.imag(x), ops.imag(y)))
        return ops.logical_or(first(xr, yr), ties)
    return at_least


def _nan_ignoring(name, pick, larger):
    def op(x, y):
        x, y = (_array(v) for v in ops.promote(name, x, y))
        out = ops.where(_lexicographic(larger)(x, y), x, y) if dt.is_complex(x.dtype) else pick(x, y)
        if not dt.is_inexact(x.dtype):
            return out
        # A NaN operand (a complex one: either part) gives the other one (NaN only if both are), where
        # maximum gives NaN.
        return ops.where(ops.isnan(x), y, ops.where(ops.isnan(y), x, out))
    op.__name__ = name
    op.__doc__ = (f"The elementwise {'larger' if larger else 'smaller'} of `x` and `y`, ignoring NaNs: "
                  f"a NaN gives the other operand (NaN only where both are NaN), unlike "
                  f"{'maximum' if larger else 'minimum'}.\n\n"
                  "x, y: arrays or scalars, broadcast and promoted together; complex numbers are ordered by their "
                  "real parts, then their imaginary parts (as NumPy's).")
    return op


fmax = _nan_ignoring("fmax", ops.maximum, True)
fmin = _nan_ignoring("fmin", ops.minimum, False)
__all__ += ["fmax", "fmin"]


@_public
def fmod(x, y):
    """The C remainder of x / y, elementwise: x - trunc(x / y) * y, with the sign of `x` (remainder has `y`'s).

    x, y: real arrays or scalars, broadcast and promoted together (bools divide as int8, as NumPy's). Integer
    division by zero gives 0, as NumPy; float division by zero gives NaN.
    """
    x, y = _bools_as_int8(*_real_pair("fmod", x, y, floats=False))
    # The remainder of the magnitudes is the same as C's fmod of them (exact); the sign is x's.
    if dt.is_float(x.dtype):
        return copysign(ops.remainder(ops.abs(x), ops.abs(y)), x)
    if x.dtype.kind == "u":
        return ops.remainder(x, y)
    # Signed: the magnitudes as unsigned (|-128| fits uint8, not int8), the sign put back.
    unsigned = np.dtype(f"uint{8 * x.dtype.itemsize}")
    r = ops.astype(ops.remainder(ops.astype(ops.abs(x), unsigned), ops.astype(ops.abs(y), unsigned)), x.dtype)
    return ops.where(ops.less(x, 0), ops.negative(r), r)


def _pow2(e, like):
    """2 ** e (an integer array) in the float dtype of `like`, exactly (pow of 2 to a whole power is)."""
    return ops.power(_const(like, 2), ops.astype(e, like.dtype))


def _wide(x):
    """float16 and bfloat16 compute in float32 (exact for the scaling by powers of two done here)."""
    return ops.astype(x, dt.float32) if x.dtype in (dt.float16, dt.bfloat16) else x


def _normalized(w):
    """(mantissa, exponent, regular) of the float array w: w = mantissa * 2 ** exponent with
    0.5 <= |mantissa| < 1 where w is finite and nonzero (`regular`); elsewhere w itself and 0.
    Every step is exact: the scaling by 2 ** -e moves each value toward [0.5, 1), never out of range
    (it is done in two halves, so subnormal inputs scale up without overflowing the power)."""
    regular = ops.logical_and(ops.isfinite(w), ops.not_equal(w, 0))
    safe = ops.where(regular, w, _const(w, 1))
    # log2 is within an ulp, so its floor can be one off near powers of two: corrected below by comparing
    e = ops.astype(ops.add(ops.floor(ops.stop_gradient(log2(ops.abs(safe)))), _const(w, 1)), dt.int32)
    half = ops.floor_divide(e, 2)
    m = ops.multiply(ops.multiply(safe, _pow2(ops.negative(half), w)), _pow2(ops.subtract(half, e), w))
    big, small = ops.greater_equal(ops.abs(m), _const(w, 1)), ops.less(ops.abs(m), _const(w, 0.5))
    m = ops.where(big, ops.multiply(m, _const(w, 0.5)), ops.where(small, ops.multiply(m, _const(w, 2)), m))
    e = ops.subtract(ops.add(e, ops.astype(big, dt.int32)), ops.astype(small, dt.int32))
    return ops.where(regular, m, w), ops.where(regular, e, 0), regular


@_public
def ldexp(x, e):
    """x * 2 ** e, elementwise, rounded once as NumPy's.

    Results in the subnormal range are exact to the last bit, and the power never overflows where the product is in
    range.

    x: a real array or scalar (integers and bools compute in their float). e: an integer array or scalar,
    broadcast with x.
    """
    x = _real_float("ldexp", x)
    e = _array(e)
    if e.dtype.kind not in "iu":
        raise DTypeError(f"ldexp: expected an integer exponent e, got {e.dtype.name}")
    w = _wide(x)
    info = ml_dtypes.finfo(w.dtype)
    m, ex, _ = _normalized(w)
    # (clipped before narrowing to int32: 2**40 must not wrap; beyond 4 * maxexp every result is 0 or inf)
    if e.dtype.itemsize > 2:   # (int8/int16 exponents fit as they are)
        bound = 4 * info.maxexp
        e = ops.minimum(e, e.dtype.type(bound)) if e.dtype.kind == "u" else ops.clip(e, -bound, bound)
    total = ops.add(ex, ops.astype(e, dt.int32))
    # m * 2**first is exact and normal; the second factor (a power of two in range, or the rest of an
    # overflow) makes the only rounding, as one multiplication of the exact value would.
    first = ops.clip(total, info.minexp + 1, info.maxexp - 1)
    rest = ops.clip(ops.subtract(total, first), -(info.nmant + 3), info.nmant + 3)
    out = ops.multiply(ops.multiply(m, _pow2(first, w)), _pow2(rest, w))
    return ops.astype(out, x.dtype)


@_public
def frexp(x):
    """The mantissa and exponent of each element, as NumPy's frexp.

    x = mantissa * 2 ** exponent with 0.5 <= |mantissa| < 1; 0, inf and NaN give themselves and exponent 0.

    x: a real array or scalar (integers and bools compute in their float). The exponent is int32.
    """
    x = _real_float("frexp", x)
    m, e, _ = _normalized(_wide(x))
    return ops.astype(m, x.dtype), e


@_public
def spacing(x):
    """The distance from each element to the next float of larger magnitude, as NumPy's spacing.

    Negative for negative x; NaN for infinities and NaNs. float16 follows the float32 and float64 rule (NumPy's
    float16 spacing of a negative number is positive and one binade smaller).

    x: a real array or scalar (integers and bools compute in their float).
    """
    x = _real_float("spacing", x)
    # away from zero; -0.0 counts as positive (NumPy's spacing(-0.0) is the smallest positive subnormal)
    toward = ops.where(ops.less(x, 0), _const(x, -np.inf), _const(x, np.inf))
    return ops.subtract(nextafter(x, toward), x)


@_public
def modf(x):
    """(fractional part, integral part) of each element, both with the sign of `x` (modf(inf) = (0, inf)).

    x: a real array or scalar (integers and bools compute in their float).
    """
    x = _real_float("modf", x)
    whole = trunc(x)
    # the sign of x also on zero fractions (modf(-8.0) = (-0.0, -8.0)) and at infinities
    frac = copysign(ops.where(isinf(x), _const(x, 0), ops.subtract(x, whole)), x)
    return frac, whole


@_public
def heaviside(x, h0):
    """The Heaviside step: 0 where x < 0, 1 where x > 0, `h0` where x == 0, NaN where x is NaN.

    x, h0: real arrays or scalars, broadcast and promoted together (integers and bools compute in their float).
    """
    x, h0 = _real_pair("heaviside", x, h0)
    step = ops.where(ops.greater(x, 0), _const(x, 1), _const(x, 0))
    out = ops.where(ops.equal(x, 0), h0, step)
    return ops.where(ops.isnan(x), x, out)


@_public
def sinc(x):
    """sin(pi x) / (pi x), elementwise, and 1 at x = 0 (the normalised sinc, as NumPy's).

    x: an array or scalar; integers and bools compute in their float, complex numbers stay complex.
    """
    x = _float_operand(x)
    zero = ops.equal(x, 0)
    y = ops.multiply(ops.where(zero, _const(x, 1), x), _const(x, math.pi))
    return ops.where(zero, _const(x, 1), ops.divide(ops.sin(y), y))


def _chbevl(x, coefficients):
    """Clenshaw's sum of the Chebyshev series `coefficients` at x (Cephes' chbevl, as NumPy's i0)."""
    b0, b1, b2 = ops.multiply(x, 0), ops.multiply(x, 0), None
    for c in coefficients:
        b2 = b1
        b1 = b0
        b0 = ops.add(ops.subtract(ops.multiply(x, b1), b2), _const(x, c))
    return ops.multiply(ops.subtract(b0, b2), _const(x, 0.5))


# Cephes' Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x) on (8, inf).
_I0_A = (-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
         1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
         -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
         9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
         -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
         1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
         -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
         1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
         -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
         1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
_I0_B = (-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
         3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
         1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
         -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
         7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
         -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
         3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
         2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
         8.04490411014108831608e-1)


@_public
@compiled_when_eager   # ~200 elementwise steps: one compiled plan on large concrete arrays
def i0(x):
    """The modified Bessel function of the first kind of order 0, elementwise (NumPy's i0, Cephes' series).

    x: a real array or scalar (integers and bools compute in their float).
    """
    x = _real_float("i0", x)
    w = _wide(x)
    a = ops.abs(w)
    small = ops.less_equal(a, _const(w, 8))
    inner = _chbevl(ops.subtract(ops.multiply(a, _const(w, 0.5)), _const(w, 2)), _I0_A)
    big = ops.where(small, _const(w, 8), a)   # keeps 32/x finite on the other branch
    outer = ops.divide(_chbevl(ops.subtract(ops.divide(_const(w, 32), big), _const(w, 2)), _I0_B), ops.sqrt(big))
    return ops.astype(ops.multiply(ops.exp(a), ops.where(small, inner, outer)), x.dtype)


@_public
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """`x` with NaN and infinities replaced by finite numbers.

    NaN becomes `nan`, +inf `posinf` and -inf `neginf` (default: the dtype's largest and smallest finite values);
    complex numbers are treated part by part; integers and bools are unchanged.

    x: an array or scalar. copy: accepted for NumPy's signature (rune arrays are immutable, so never in place).
    nan, posinf, neginf: the replacement values (Python numbers).
    """
    x = _array(x)
    if dt.is_complex(x.dtype):
        parts = [nan_to_num(p, nan=nan, posinf=posinf, neginf=neginf) for p in (ops.real(x), ops.imag(x))]
        return ops.make_complex(*parts)
    if not dt.is_float(x.dtype):
        return x
    big = float(ml_dtypes.finfo(x.dtype).max)
    x = ops.where(ops.isnan(x), _const(x, nan), x)
    x = ops.where(ops.logical_and(isinf(x), ops.greater(x, 0)), _const(x, big if posinf is None else posinf), x)
    return ops.where(ops.logical_and(isinf(x), ops.less(x, 0)), _const(x, -big if neginf is None else neginf), x)


# ---------------------------------------------------------------- integer functions

# Euclid's steps needed at most for each width: consecutive Fibonacci numbers are the worst case.
_EUCLID_STEPS = {1: 12, 2: 24, 4: 47, 8: 93}


def _integer_pair(name, x, y):
    x, y = (_array(v) for v in ops.promote(name, x, y))
    if x.dtype.kind not in "iu":
        raise DTypeError(f"{name}: expected integer operands, got {x.dtype.name}")
    return x, y


@_public
def gcd(x, y):
    """The greatest common divisor of |x| and |y|, elementwise (gcd(0, 0) = 0).

    x, y: integer arrays or scalars, broadcast and promoted together.
    """
    x, y = _integer_pair("gcd", x, y)
    a, b = ops.abs(x), ops.abs(y)
    a, b = ops.broadcast_arrays(a, b)
    # Euclid's algorithm, unrolled for its worst case: once b is 0 the steps leave a as it is.
    for _ in range(_EUCLID_STEPS[x.dtype.itemsize]):
        zero = ops.equal(b, 0)
        a, b = ops.where(zero, a, b), ops.where(zero, b, ops.remainder(a, ops.where(zero, _const(b, 1), b)))
    return a


@_public
def lcm(x, y):
    """The least common multiple of |x| and |y|, elementwise (0 where either is 0).

    x, y: integer arrays or scalars, broadcast and promoted together.
    """
    x, y = _integer_pair("lcm", x, y)
    g = gcd(x, y)
    a = ops.abs(x)
    safe = ops.where(ops.equal(g, 0), _const(g, 1), g)
    return ops.abs(ops.multiply(ops.floor_divide(a, safe), ops.abs(y)))


@_public
def bitwise_count(x):
    """The number of 1 bits in |x|, elementwise, as uint8 (NumPy's bitwise_count).

    x: an integer or bool array or scalar.
    """
    x = _array(x)
    if x.dtype.kind == "b":
        x = ops.astype(x, dt.uint8)
    if x.dtype.kind not in "iu":
        raise DTypeError(f"bitwise_count: expected an integer or bool operand, got {x.dtype.name}")
    unsigned = np.dtype(f"uint{8 * x.dtype.itemsize}")
    v = ops.astype(ops.abs(x) if x.dtype.kind == "i" else x, unsigned)
    bits = 8 * x.dtype.itemsize

    def mask(pattern):
        return unsigned.type(int(pattern * (bits // 8), 16))

    # The classic parallel count: pairs, nibbles, then bytes summed by a multiply.
    v = ops.subtract(v, ops.bitwise_and(ops.right_shift(v, unsigned.type(1)), mask("55")))
    v = ops.add(ops.bitwise_and(v, mask("33")), ops.bitwise_and(ops.right_shift(v, unsigned.type(2)), mask("33")))
    v = ops.bitwise_and(ops.add(v, ops.right_shift(v, unsigned.type(4))), mask("0f"))
    if bits > 8:
        v = ops.right_shift(ops.multiply(v, mask("01")), unsigned.type(bits - 8))
    return ops.astype(v, dt.uint8)


# ---------------------------------------------------------------- comparisons and predicates

def _close_operands(name, a, b):
    """a, b promoted together into an inexact dtype (integers compare in their float)."""
    weak = ops._all_weak(a, b)
    a, b = (_array(v) for v in ops.promote(name, a, b))
    if not dt.is_inexact(a.dtype):
        target = dt.to_inexact(a.dtype, weak)
        a, b = ops.astype(a, target), ops.astype(b, target)
    return a, b


@_public
def isclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether |x - y| <= atol + rtol * |y|, elementwise, as a bool array.

    Infinities are close only to themselves; NaN to nothing, or to NaN with equal_nan.

    x, y: arrays or scalars, broadcast and promoted together. rtol, atol: the relative and absolute
    tolerances (non-negative). equal_nan: whether NaN is close to NaN.
    """
    x, y = _close_operands("isclose", x, y)
    real = dt.real_dtype(x.dtype) if dt.is_complex(x.dtype) else x.dtype
    bound = ops.add(ops.multiply(ops.abs(y), np.asarray(rtol).astype(real)[()]), np.asarray(atol).astype(real)[()])
    near = ops.logical_and(ops.less_equal(ops.abs(ops.subtract(x, y)), bound), ops.isfinite(y))
    out = ops.logical_or(near, ops.equal(x, y))
    if equal_nan:
        out = ops.logical_or(out, ops.logical_and(ops.isnan(x), ops.isnan(y)))
    return out


@_public
def allclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of `x` is close to `y` (`isclose`), as a bool scalar array.

    x, y: arrays or scalars, broadcast together. rtol, atol, equal_nan: as isclose.
    """
    return ops.all(isclose(x, y, rtol, atol, equal_nan))


def _false():
    return ops.asarray(False)


@_public
def array_equal(a1, a2, equal_nan=False):
    """Whether `a1` and `a2` have the same shape and elements, as a bool scalar array (False for other shapes).

    a1, a2: arrays or scalars. equal_nan: whether NaNs compare equal (for complex: either part NaN).
    """
    a1, a2 = _array(a1), _array(a2)
    if a1.shape != a2.shape:
        return _false()
    same = ops.equal(a1, a2)
    if equal_nan and (dt.is_inexact(a1.dtype) or dt.is_inexact(a2.dtype)):
        same = ops.logical_or(same, ops.logical_and(_any_nan(a1), _any_nan(a2)))
    return ops.all(same)


def _any_nan(x):
    return ops.isnan(x) if dt.is_inexact(x.dtype) else ops.not_equal(x, x)


@_public
def array_equiv(a1, a2):
    """Whether `a1` and `a2` broadcast together and are equal elementwise, as a bool scalar array.

    a1, a2: arrays or scalars (shapes that do not broadcast give False).
    """
    a1, a2 = _array(a1), _array(a2)
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return _false()
    return ops.all(ops.equal(a1, a2))


def _infinite_with_sign(name, negative):
    def op(x):
        x = _array(x)
        if dt.is_complex(x.dtype):
            raise DTypeError(f"{name}: expected a real (not complex) operand, got {x.dtype.name}")
        return ops.logical_and(isinf(x), signbit(x) if negative else ops.logical_not(signbit(x)))
    op.__name__ = name
    op.__doc__ = (f"Whether each element is {'-' if negative else '+'}inf, as a bool array.\n\n"
                  "x: a real array or scalar (complex numbers are refused, as NumPy's).")
    return op


isneginf = _infinite_with_sign("isneginf", True)
isposinf = _infinite_with_sign("isposinf", False)
__all__ += ["isneginf", "isposinf"]


@_public
def iscomplex(x):
    """Whether each element has a nonzero imaginary part, as a bool array (all False for real dtypes).

    x: an array or scalar.
    """
    x = _array(x)
    if dt.is_complex(x.dtype):
        return ops.not_equal(ops.imag(x), 0)
    return ops.not_equal(x, x) if x.dtype.kind == "b" else ops.less(x, x)   # all False (NaN too), shaped like x


@_public
def isreal(x):
    """Whether each element has a zero imaginary part, as a bool array (all True for real dtypes).

    x: an array or scalar.
    """
    return ops.logical_not(iscomplex(x))


def _dtype_of_object(x):
    d = getattr(x, "dtype", None)
    return dt.dtype(d) if d is not None else np.asarray(x).dtype


@_public
def iscomplexobj(x):
    """Whether `x` has a complex dtype (a Python bool; it reads the dtype, not the values).

    x: an array, a scalar or anything NumPy makes an array of.
    """
    return np.dtype(_dtype_of_object(x)).kind == "c"


@_public
def isrealobj(x):
    """Whether `x` does not have a complex dtype (a Python bool; it reads the dtype, not the values).

    x: an array, a scalar or anything NumPy makes an array of.
    """
    return not iscomplexobj(x)


def _as_dtype_or_class(name, value, which):
    if value in _ABSTRACT:
        return value
    try:
        return dt.dtype(value)
    except Exception:
        raise DTypeError(f"{name}: {which} must be a dtype, a scalar type or an abstract NumPy class such as "
                         f"np.floating, got {value!r}") from None


_ABSTRACT = (np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact,
             np.floating, np.complexfloating, np.flexible, np.character)


@_public
def issubdtype(arg1, arg2):
    """Whether dtype `arg1` is `arg2` or below it in NumPy's type hierarchy (a Python bool).

    bfloat16 is a floating type, as in JAX.

    arg1, arg2: dtypes (rune's, NumPy's, their names or scalar types), or for arg2 an abstract NumPy class
    (np.floating, np.integer, np.number, np.inexact, ...).
    """
    first = _as_dtype_or_class("issubdtype", arg1, "arg1")
    second = _as_dtype_or_class("issubdtype", arg2, "arg2")
    if isinstance(first, np.dtype) and first == dt.bfloat16:
        if isinstance(second, np.dtype):
            return second == dt.bfloat16
        return issubclass(np.float16, second)   # bfloat16 sits where float16 does: a floating type
    if isinstance(second, np.dtype) and second == dt.bfloat16:
        return False
    return bool(np.issubdtype(first, second))


@_public
def promote_types(type1, type2):
    """The dtype two strong operands of `type1` and `type2` promote to, by rune's promotion lattice.

    README "Dtype promotion"; where NumPy's table differs, rune's applies.

    type1, type2: dtypes (rune's, NumPy's, their names or scalar types).
    """
    try:
        a, b = dt.dtype(type1), dt.dtype(type2)
    except Exception:
        raise DTypeError(f"promote_types: expected two dtypes rune has, got {type1!r} and {type2!r}") from None
    return dt.promote(((a, False), (b, False)))[0]


ndarray = Array
__all__.append("ndarray")


# ---------------------------------------------------------------- bits

def _bitorder(name, bitorder):
    if bitorder not in ("big", "little"):
        raise ArgumentError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}")
    weights = [1 << (7 - i) for i in range(8)]
    return weights if bitorder == "big" else weights[::-1]


@_public
def packbits(x, axis=None, bitorder="big"):
    """The elements of `x` (nonzero: 1) packed eight to a uint8 along `axis`.

    The flattened array if axis is None; the last byte is padded with zero bits.

    x: a bool or integer array. axis: the axis to pack along (None: flatten first). bitorder: "big" (the first
    element is the highest bit) or "little".
    """
    x = _array(x)
    if x.dtype.kind not in "biu":
        raise DTypeError(f"packbits: expected x to be a bool or integer array, got {x.dtype.name}")
    weights = _bitorder("packbits", bitorder)
    if axis is None:
        x, axis = ops.reshape(x, (-1,)), 0
    axis = ops.normalize_axis("packbits", axis, x.ndim)
    bits = ops.astype(ops.not_equal(x, 0), dt.uint8)
    n = x.shape[axis]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, -n % 8)
    bits = ops.moveaxis(ops.pad(bits, pad), axis, -1)
    groups = ops.reshape(bits, bits.shape[:-1] + (bits.shape[-1] // 8, 8))
    packed = ops.sum(ops.multiply(groups, np.asarray(weights, np.uint8)), axis=-1, dtype=dt.uint8)
    return ops.moveaxis(packed, -1, axis)


@_public
def unpackbits(x, axis=None, count=None, bitorder="big"):
    """The bits of the uint8 array `x`, eight elements per byte along `axis`, as uint8 zeros and ones.

    The flattened array if axis is None.

    x: a uint8 array. axis: the axis to unpack along (None: flatten first). count: how many bits to keep along
    the axis (None: all; negative: drop that many from the end; beyond the bits: pad with zeros).
    bitorder: "big" (the highest bit first) or "little".
    """
    x = _array(x)
    if x.dtype != dt.uint8:
        raise DTypeError(f"unpackbits: expected x to be a uint8 array, got {x.dtype.name}")
    weights = _bitorder("unpackbits", bitorder)
    if axis is None:
        x, axis = ops.reshape(x, (-1,)), 0
    axis = ops.normalize_axis("unpackbits", axis, x.ndim)
    moved = ops.moveaxis(x, axis, -1)
    shifts = np.asarray([w.bit_length() - 1 for w in weights], np.uint8)
    bits = ops.bitwise_and(ops.right_shift(ops.expand_dims(moved, -1), shifts), np.uint8(1))
    bits = ops.reshape(bits, moved.shape[:-1] + (moved.shape[-1] * 8,))
    total = bits.shape[-1]
    if count is not None:
        if not isinstance(count, (int, np.integer)):
            raise ArgumentError(f"unpackbits: count must be an int or None, got {count!r}")
        keep = builtins.max(total + count, 0) if count < 0 else count
        if keep <= total:
            bits = ops.slice_in_dim(bits, 0, keep, axis=-1)
        else:
            bits = ops.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return ops.moveaxis(bits, -1, axis)


# ---------------------------------------------------------------- differences and calculus

@_public
def unwrap(p, discont=None, axis=-1, period=2 * math.pi):
    """`p` with its jumps along `axis` reduced modulo `period` (phase unwrapping, as NumPy's).

    Each jump between neighbours of at least `discont` is replaced by its remainder into [-period/2, period/2].

    p: a real array. discont: the jumps left alone are those below it (default period / 2; smaller values
    act as period / 2). axis: the axis to unwrap along. period: the period of the values (2 pi by default).
    The result has the dtype of p and period by rune's promotion: integers stay integers with an integer
    period (as NumPy's), and compute in their float with a float one.
    """
    weak = ops._all_weak(p)
    p = _array(p)
    if dt.is_complex(p.dtype) or p.dtype.kind == "b":
        raise DTypeError(f"unwrap: expected a real numeric array p, got {p.dtype.name}")
    axis = ops.normalize_axis("unwrap", axis, p.ndim)
    if discont is None:
        discont = period / 2
    if p.dtype.kind in "iu" and isinstance(period, (int, np.integer)):
        high, rest = builtins.divmod(int(period), 2)
        ambiguous = rest == 0
        p = ops.astype(p, dt.int64) if p.dtype.kind == "u" else p   # (differences may be negative)
    else:
        p = p if dt.is_float(p.dtype) else ops.astype(p, dt.to_inexact(p.dtype, weak))
        high, ambiguous = period / 2, True
    dd = diff(p, axis=axis)
    ddmod = ops.add(ops.remainder(ops.add(dd, _const(p, high)), _const(p, period)), _const(p, -high))
    if ambiguous:   # a jump of exactly +period/2 stays positive (the remainder would make it -period/2)
        ddmod = ops.where(ops.logical_and(ops.equal(ddmod, _const(p, -high)), ops.greater(dd, 0)),
                          _const(p, high), ddmod)
    correct = ops.where(ops.less(ops.abs(dd), discont), _const(p, 0), ops.subtract(ddmod, dd))
    head = ops.slice_in_dim(zeros_like(p), 0, builtins.min(1, p.shape[axis]), axis=axis)
    return ops.add(p, ops.concatenate([head, cumsum(correct, axis=axis)], axis))


@_public
def ediff1d(x, to_end=None, to_begin=None):
    """The differences of consecutive elements of the flattened `x`, with `to_begin` and `to_end` around them.

    x: an array. to_end, to_begin: values (scalars or arrays) to put after and before the differences; they
    take x's dtype.
    """
    x = ops.reshape(_array(x), (-1,))
    parts = [diff(x)]
    if to_begin is not None:
        parts.insert(0, ops.reshape(ops.astype(_array(to_begin), x.dtype), (-1,)))
    if to_end is not None:
        parts.append(ops.reshape(ops.astype(_array(to_end), x.dtype), (-1,)))
    return ops.concatenate(parts, 0) if len(parts) > 1 else parts[0]


def _spacings(name, f, varargs, axes):
    """One spacing per axis: a Python/0-d scalar or a 1-d coordinate array of the axis' length."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and not (isinstance(varargs[0], (Array, Tracer, np.ndarray)) and np.ndim(varargs[0]) == 1
                                  and len(axes) > 1):
        varargs = varargs * len(axes)
    if len(varargs) != len(axes):
        raise ArgumentError(f"{name}: expected one spacing or one per axis ({len(axes)}), got {len(varargs)}")
    out = []
    for a, h in zip(axes, varargs):
        if np.ndim(h) == 1 or (isinstance(h, (Array, Tracer)) and h.ndim == 1):
            h = _array(h)
            if h.shape[0] != f.shape[a]:
                raise ShapeError(f"{name}: the coordinates of axis {a} have length {h.shape[0]}, expected "
                                 f"the axis' length {f.shape[a]}")
        elif np.ndim(h) != 0:
            raise ShapeError(f"{name}: a spacing must be a scalar or 1-d coordinates, got shape {np.shape(h)}")
        out.append(h)
    return out


def _along(x, start, stop, axis):
    return ops.slice_in_dim(x, start, stop if stop is not None else x.shape[axis], axis=axis)


def _coords_shape(h, axis, ndim):
    return ops.reshape(h, tuple(-1 if i == axis else 1 for i in range(ndim)))


def _gradient_axis(f, h, axis, edge_order):
    """NumPy's second-order accurate differences along `axis`: central inside, one-sided at the ends."""
    n = f.shape[axis]
    if n < edge_order + 1:
        raise ShapeError(f"gradient: axis {axis} has {n} elements; edge_order={edge_order} needs at least "
                         f"{edge_order + 1}")
    if isinstance(h, (Array, Tracer)) and h.ndim == 1:
        d = diff(ops.astype(h, f.dtype) if not dt.is_inexact(h.dtype) else h)
        d = _coords_shape(d, axis, f.ndim)
    else:
        d = None
        h = float(h) if not isinstance(h, (Array, Tracer)) else h
    s = lambda a, b: _along(f, a, b, axis)   # noqa: E731
    if d is None:   # uniform spacing
        twice = h * 2.0 if isinstance(h, float) else ops.multiply(h, 2.0)   # (a Python float stays weak)
        inner = ops.divide(ops.subtract(s(2, None), s(0, n - 2)), twice)
        if edge_order == 1:
            first = ops.divide(ops.subtract(s(1, 2), s(0, 1)), h)
            last = ops.divide(ops.subtract(s(n - 1, n), s(n - 2, n - 1)), h)
        else:
            first = ops.divide(ops.add(ops.add(ops.multiply(s(0, 1), -1.5), ops.multiply(s(1, 2), 2.0)),
                                       ops.multiply(s(2, 3), -0.5)), h)
            last = ops.divide(ops.add(ops.add(ops.multiply(s(n - 3, n - 2), 0.5), ops.multiply(s(n - 2, n - 1), -2.0)),
                                      ops.multiply(s(n - 1, n), 1.5)), h)
    else:
        dd = lambda a, b: _along(d, a, b, axis)   # noqa: E731
        h1, h2 = dd(0, n - 2), dd(1, n - 1)
        total = ops.add(h1, h2)
        a = ops.negative(ops.divide(h2, ops.multiply(h1, total)))
        b = ops.divide(ops.subtract(h2, h1), ops.multiply(h1, h2))
        c = ops.divide(h1, ops.multiply(h2, total))
        inner = ops.add(ops.add(ops.multiply(a, s(0, n - 2)), ops.multiply(b, s(1, n - 1))), ops.multiply(c, s(2, n)))
        if edge_order == 1:
            first = ops.divide(ops.subtract(s(1, 2), s(0, 1)), dd(0, 1))
            last = ops.divide(ops.subtract(s(n - 1, n), s(n - 2, n - 1)), dd(n - 2, n - 1))
        else:
            first = _one_sided(s(0, 1), s(1, 2), s(2, 3), dd(0, 1), dd(1, 2), forward=True)
            last = _one_sided(s(n - 3, n - 2), s(n - 2, n - 1), s(n - 1, n), dd(n - 3, n - 2), dd(n - 2, n - 1),
                              forward=False)
    return ops.concatenate([first, inner, last], axis)


def _one_sided(y0, y1, y2, h1, h2, forward):
    """NumPy's second-order one-sided difference at the first (`forward`) or last point of uneven spacing."""
    total = ops.add(h1, h2)
    if forward:
        a = ops.negative(ops.divide(ops.add(ops.multiply(h1, 2.0), h2), ops.multiply(h1, total)))
        b = ops.divide(total, ops.multiply(h1, h2))
        c = ops.negative(ops.divide(h1, ops.multiply(h2, total)))
    else:
        a = ops.divide(h2, ops.multiply(h1, total))
        b = ops.negative(ops.divide(total, ops.multiply(h1, h2)))
        c = ops.divide(ops.add(ops.multiply(h2, 2.0), h1), ops.multiply(h2, total))
    return ops.add(ops.add(ops.multiply(a, y0), ops.multiply(b, y1)), ops.multiply(c, y2))


@_public
def gradient(x, *varargs, axis=None, edge_order=1):
    """The gradient of the sampled function `x` along each axis (NumPy's gradient).

    Second-order central differences inside, first- or second-order one-sided ones at the ends.

    x: an array (integers and bools compute in their float). varargs: the spacing, one for all axes or one per
    axis, each a scalar or the 1-d coordinates along its axis (default 1). axis: an axis or a tuple of axes
    (default: all). edge_order: 1 or 2. Returns an array for one axis, else a tuple of arrays (one per axis).
    """
    x = _float_operand(x)
    if edge_order not in (1, 2):
        raise ArgumentError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    axes = ops._axes("gradient", axis, x.ndim)
    spacings = _spacings("gradient", x, varargs, axes)
    out = tuple(_gradient_axis(x, h, a, edge_order) for a, h in zip(axes, spacings))
    return out[0] if len(out) == 1 else out


@_public
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of `y` along `axis` by the trapezoidal rule.

    y: an array (integers and bools compute in their float). x: the sample points (1-d along the axis, or
    broadcasting with y); None: equally spaced by `dx`. dx: the spacing when x is None. axis: the axis.
    """
    y = _float_operand(y)
    axis = ops.normalize_axis("trapezoid", axis, y.ndim)
    n = y.shape[axis]
    if x is None:
        d = dx
    else:
        x = _array(x)
        if x.ndim == 1:
            if x.shape[0] != n:
                raise ShapeError(f"trapezoid: x has length {x.shape[0]}, expected y's axis length {n}")
            d = _coords_shape(diff(x), axis, y.ndim)
        else:
            d = diff(x, axis=axis)
    mids = ops.add(_along(y, 1, None, axis), _along(y, 0, builtins.max(n - 1, 0), axis))
    return ops.sum(ops.divide(ops.multiply(d, mids), 2.0), axis=axis)


def _vector_components(name, v, axis, which):
    v = _array(v)
    if v.ndim == 0:
        raise ShapeError(f"cross: {which} must have at least one dimension, got a scalar")
    axis = ops.normalize_axis(name, axis, v.ndim)
    v = ops.moveaxis(v, axis, -1)
    if v.shape[-1] not in (2, 3):
        raise ShapeError(f"cross: the vectors of {which} must have 2 or 3 components, got {v.shape[-1]}")
    return [v[..., i] for i in range(v.shape[-1])]


@_public
def cross(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of the 3-vectors (or 2-vectors: the z component alone) of `x1` and `x2`, broadcast.

    x1, x2: arrays whose vectors lie along axisa and axisb (2 or 3 components each; a 2-vector has z = 0).
    axisc: the axis of the result's vectors. axis: if given, it overrides all three.
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    x1, x2 = (_array(v) for v in ops.promote("cross", x1, x2))
    if x1.dtype.kind == "b":
        raise DTypeError("cross: expected numeric operands, got bool")
    u = _vector_components("cross", x1, axisa, "x1")
    v = _vector_components("cross", x2, axisb, "x2")
    if len(u) == 2 and len(v) == 2:
        return ops.subtract(ops.multiply(u[0], v[1]), ops.multiply(u[1], v[0]))
    zero = lambda w: ops.multiply(w[0], 0)   # noqa: E731
    u = u + [zero(u)] * (3 - len(u))
    v = v + [zero(v)] * (3 - len(v))
    out = ops.stack([ops.subtract(ops.multiply(u[1], v[2]), ops.multiply(u[2], v[1])),
                     ops.subtract(ops.multiply(u[2], v[0]), ops.multiply(u[0], v[2])),
                     ops.subtract(ops.multiply(u[0], v[1]), ops.multiply(u[1], v[0]))], -1)
    return ops.moveaxis(out, -1, ops.normalize_axis("cross", axisc, out.ndim))


# ---------------------------------------------------------------- windows and spaced values

def _window_length(name, M):
    if isinstance(M, (Array, Tracer)) or not isinstance(M, (int, np.integer)) or isinstance(M, bool):
        raise ArgumentError(f"{name}: M must be a Python int (the window's length is static), got {M!r}")
    return int(M)


def _window(name, M, body):
    """A length-M window computed in float64 by `body(n, M)` (n: 0, 1, ..., M - 1) and returned in the
    default float (float32, as rune's creation functions; NumPy gives float64)."""
    M = _window_length(name, M)
    if M < 1:
        return ops.astype(arange(0, dtype=dt.float64), dt.default_float)
    if M == 1:
        return ops.astype(ops.asarray(np.ones(1)), dt.default_float)
    return ops.astype(body(arange(M, dtype=dt.float64), M), dt.default_float)


def _cosines(weights):
    """The window sum of weights[k] * cos(2 pi k n / (M - 1)) (Hann, Hamming, Blackman)."""
    def body(n, M):
        out = ops.multiply(n, 0.0)
        for k, w in enumerate(weights):
            term = ops.cos(ops.multiply(n, 2 * math.pi * k / (M - 1))) if k else ops.add(ops.multiply(n, 0.0), 1.0)
            out = ops.add(out, ops.multiply(term, w))
        return out
    return body


def _window_function(name, what, body):
    def window(M):
        return _window(name, M, body)
    window.__name__ = name
    window.__doc__ = (f"The {what} window of length `M`, in the default float (float32; NumPy gives float64).\n\n"
                      "M: the number of points (a Python int; 0 or fewer gives an empty array).")
    return window


hanning = _window_function("hanning", "Hann", _cosines((0.5, -0.5)))
hamming = _window_function("hamming", "Hamming", _cosines((0.54, -0.46)))
blackman = _window_function("blackman", "Blackman", _cosines((0.42, -0.5, 0.08)))
bartlett = _window_function(
    "bartlett", "Bartlett (triangular)",
    lambda n, M: ops.subtract(1.0, ops.abs(ops.divide(ops.subtract(ops.multiply(n, 2.0), M - 1), float(M - 1)))))
__all__ += ["hanning", "hamming", "blackman", "bartlett"]


@_public
def kaiser(M, beta):
    """The Kaiser window of length `M` and shape `beta`, in the default float (float32; NumPy gives float64).

    M: the number of points (a Python int). beta: the shape parameter (a number or a scalar array; 0 gives a
    rectangle, larger values narrow the window).
    """
    def body(n, M):
        alpha = (M - 1) / 2.0
        ratio = ops.divide(ops.subtract(n, alpha), alpha)
        b = ops.astype(_array(beta), dt.float64)
        return ops.divide(i0(ops.multiply(b, ops.sqrt(ops.clip(ops.subtract(1.0, ops.multiply(ratio, ratio)), 0.0)))),
                          i0(b))
    return _window("kaiser", M, body)


def _spaced(name, start, stop, num, endpoint, dtype, axis, transform):
    """`transform(t, lo, hi)` of the fractions t = 0, 1/d, 2/d, ... (d = num - 1 with the endpoint, else num;
    1 exactly at the endpoint) and the ends in float64 (complex128 for complex ends), arrays broadcast, the
    new axis at `axis`; cast to `dtype` (default: the float or complex dtype of start and stop by rune's
    promotion, float32 for Python numbers)."""
    num = _count(name, num)
    weak = ops._all_weak(start, stop)
    start, stop = (_array(v) for v in ops.promote(name, start, stop))
    target = dt.dtype(dtype) if dtype is not None else dt.to_inexact(start.dtype, weak)
    work = dt.complex128 if dt.is_complex(start.dtype) else dt.float64
    lo, hi = ops.astype(start, work), ops.astype(stop, work)
    div = (num - 1) if endpoint else num
    t = ops.divide(arange(num, dtype=dt.float64), float(builtins.max(div, 1)))
    out = transform(ops.reshape(t, (num,) + (1,) * lo.ndim), lo, hi)
    out = ops.moveaxis(out, 0, ops.normalize_axis(name, axis, out.ndim))
    return ops.astype(out, target)


def _at_ends(t, lo, hi, values):
    """`values`, with `lo` itself where t is 0 and `hi` where t is 1 (start and stop exactly, as NumPy's)."""
    return ops.where(ops.equal(t, 0.0), lo, ops.where(ops.equal(t, 1.0), hi, values))


def _count(name, num):
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 0:
        raise ArgumentError(f"{name}: num must be a non-negative Python int, got {num!r}")
    return int(num)


@_public
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop, num): `num` values spaced evenly on a log scale.

    start, stop: the exponents of the ends (real or complex numbers or arrays, broadcast). num: how many values.
    endpoint: whether base ** stop is the last. base: the base of the log scale (a number). dtype: the result's dtype
    (default: the float of start and stop, float32 for Python numbers; NumPy gives float64). axis: where the new
    axis goes when start or stop are arrays.
    """
    def transform(t, lo, hi):
        exponents = _at_ends(t, lo, hi, ops.add(lo, ops.multiply(t, ops.subtract(hi, lo))))
        return ops.power(_const(exponents, base), exponents)
    return _spaced("logspace", start, stop, num, endpoint, dtype, axis, transform)


@_public
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """`num` values spaced evenly on a log scale from `start` to `stop` (a geometric progression).

    The ends are exactly start and stop.

    start, stop: the nonzero ends (real ends of opposite signs give NaN between them, as NumPy's; complex ends
    follow the principal branch of the log), numbers or arrays, broadcast. num, endpoint, dtype, axis: as
    logspace.
    """
    def transform(t, lo, hi):
        # lo * (hi / lo) ** t, through the principal log: real ends of opposite signs give NaN inside,
        # as NumPy's; complex ends follow the principal branch.
        return _at_ends(t, lo, hi, ops.multiply(lo, ops.exp(ops.multiply(t, ops.log(ops.divide(hi, lo))))))
    for end in (start, stop):
        if not isinstance(end, Tracer) and np.any(np.asarray(end) == 0):
            raise ArgumentError("geomspace: a geometric sequence cannot include zero (start or stop is 0)")
    return _spaced("geomspace", start, stop, num, endpoint, dtype, axis, transform)


# ---------------------------------------------------------------- interpolation and mapping

@_public
def interp(x, xp, fp, left=None, right=None, period=None):
    """The piecewise-linear interpolant through the points (xp, fp), evaluated at `x`.

    x: where to evaluate (any shape). xp: the increasing 1-d sample points (or, with period, any order). fp: the
    1-d values at xp (real or complex), as long as xp. left, right: the value below xp[0] and above xp[-1]
    (default fp[0] and fp[-1]). period: the period of x (then left and right are not allowed). The result has
    x's shape and the float (or complex) dtype of x, xp and fp by rune's promotion (NumPy gives float64).
    """
    weak = ops._all_weak(x, xp, fp)
    x, xp, fp = (_array(v) for v in (x, xp, fp))
    if xp.ndim != 1 or fp.ndim != 1:
        raise ShapeError(f"interp: xp and fp must be 1-d, got shapes {xp.shape} and {fp.shape}")
    if xp.shape != fp.shape:
        raise ShapeError(f"interp: xp and fp must have the same length, got {xp.shape[0]} and {fp.shape[0]}")
    if xp.shape[0] == 0:
        raise ShapeError("interp: xp and fp must not be empty")
    if dt.is_complex(x.dtype) or dt.is_complex(xp.dtype):
        raise DTypeError(f"interp: x and xp must be real, got {x.dtype.name} and {xp.dtype.name}")
    target, _ = dt.promote(((x.dtype, x.weak), (xp.dtype, xp.weak), (fp.dtype, fp.weak)))
    target = dt.to_inexact(target, weak)
    real = dt.real_dtype(target) if dt.is_complex(target) else target
    x, xp, fp = ops.astype(x, real), ops.astype(xp, real), ops.astype(fp, target)
    if period is not None:
        if left is not None or right is not None:
            raise ArgumentError("interp: left and right cannot be given with period")
        if period == 0:
            raise ArgumentError("interp: period must be nonzero")
        p = _const(x, abs(period))
        x, xp = ops.remainder(x, p), ops.remainder(xp, p)
        order = argsort(xp)
        xp, fp = ops.take(xp, order), ops.take(fp, order)
        xp = ops.concatenate([ops.subtract(xp[-1:], p), xp, ops.add(xp[:1], p)], 0)
        fp = ops.concatenate([fp[-1:], fp, fp[:1]], 0)
    n = xp.shape[0]
    if n == 1:
        inside = ops.add(ops.multiply(ops.astype(x, target), _const(fp, 0)), fp[0])
    else:
        i = ops.clip(searchsorted(xp, x, side="right"), 1, n - 1)
        x0, x1 = ops.take(xp, i - 1), ops.take(xp, i)
        f0, f1 = ops.take(fp, i - 1), ops.take(fp, i)
        width = ops.subtract(x1, x0)
        slope = ops.divide(ops.subtract(f1, f0), ops.astype(ops.where(ops.equal(width, 0), _const(width, 1), width),
                                                           target))
        inside = ops.add(f0, ops.multiply(slope, ops.astype(ops.subtract(x, x0), target)))
        inside = ops.where(ops.equal(x, x1), f1, inside)   # exactly at a sample point: its value
    low = fp[0] if left is None else ops.astype(_array(left), target)
    high = fp[-1] if right is None else ops.astype(_array(right), target)
    out = ops.where(ops.less(x, xp[0]), low, inside)
    return ops.where(ops.greater(x, xp[-1]), high, out)


@_public
def piecewise(x, condlist, funclist, *args, **kw):
    """A function defined piece by piece by conditions on `x`, as NumPy's piecewise.

    Where condlist[k] holds, funclist[k](x, *args, **kw) (or the value funclist[k]); one extra function is the
    default where no condition holds; elsewhere 0. Later conditions win where several hold, as NumPy's. Each
    function is evaluated on all of x (not only its piece), so it must not fail outside its piece.

    x: an array. condlist: a bool array, or a list of bool arrays broadcasting with x. funclist: functions or
    values, as many as the conditions or one more. The result has x's shape and dtype.
    """
    x = _array(x)
    if not isinstance(condlist, (list, tuple)) and np.ndim(condlist) in (0, x.ndim):
        condlist = [condlist]   # one condition (a list of conditions, or a stacked array, is iterated)
    conds = [ops.astype(_array(c), dt.bool_) for c in condlist]
    funcs = list(funclist)
    if len(funcs) == len(conds) + 1:
        conds.append(ops.logical_not(_any_of(conds, x)))
    elif len(funcs) != len(conds):
        raise ArgumentError(f"piecewise: funclist must have {len(conds)} or {len(conds) + 1} entries (one per "
                            f"condition, and an optional default), got {len(funcs)}")
    out = zeros_like(x)   # (x * 0 would be -0.0 or NaN where x is negative or not finite)
    for cond, f in zip(conds, funcs):
        value = f(x, *args, **kw) if callable(f) else f
        out = ops.where(cond, ops.astype(_array(value), x.dtype), out)
    return out


def _any_of(conds, x):
    hit = ops.not_equal(x, x) if x.dtype.kind == "b" else ops.less(x, x)
    for c in conds:
        hit = ops.logical_or(hit, c)
    return hit


@_public
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """`func1d` applied to each 1-d slice of `arr` along `axis`.

    The slices are mapped with vmap, so func1d is traced once; the axis is replaced by the dimensions of func1d's
    result.

    func1d: a function of a 1-d array (and *args, **kwargs) returning an array of a fixed shape. axis: the axis
    whose slices are passed. arr: the array.
    """
    from .transformations import vmap   # (rune.transforms.batching registers it: nx sits below that layer)
    arr = _array(arr)
    axis = ops.normalize_axis("apply_along_axis", axis, arr.ndim)
    fn = lambda v: _array(func1d(v, *args, **kwargs))   # noqa: E731
    for _ in range(arr.ndim - 1):   # one vmap per other axis, outermost first
        fn = vmap(fn)
    moved = ops.moveaxis(arr, axis, -1)
    out = fn(moved)
    extra = out.ndim - (arr.ndim - 1)
    # the result's own axes go where `axis` was
    lead = list(range(arr.ndim - 1))
    return ops.transpose(out, lead[:axis] + list(range(arr.ndim - 1, out.ndim)) + lead[axis:])


@_public
def apply_over_axes(func, a, axes):
    """`func(a, axis)` applied for each axis in turn, each result fed to the next.

    A result one rank short gets its axis back (length 1), so the rank stays a's.

    func: a function (array, axis) -> array of the same rank or one less. a: the array. axes: an axis or a
    sequence of axes.
    """
    a = _array(a)
    for axis in ((axes,) if isinstance(axes, (int, np.integer)) else axes):
        axis = ops.normalize_axis("apply_over_axes", axis, a.ndim)
        res = _array(func(a, axis))
        if res.ndim == a.ndim - 1:
            res = ops.expand_dims(res, axis)
        elif res.ndim != a.ndim:
            raise ShapeError(f"apply_over_axes: func must keep the rank ({a.ndim}) or drop one axis, got a "
                             f"result of rank {res.ndim}")
        a = res
    return a


@_public
def matvec(x1, x2):
    """The matrix-vector product x1 @ x2 over the last axes, batched and broadcast over the leading ones.

    x1: matrices (..., m, n). x2: vectors (..., n). Returns (..., m).
    """
    x1, x2 = _array(x1), _array(x2)
    if x1.ndim < 2 or x2.ndim < 1:
        raise ShapeError(f"matvec: expected matrices (..., m, n) and vectors (..., n), got shapes {x1.shape} "
                         f"and {x2.shape}")
    return ops.matmul(x1, ops.expand_dims(x2, -1))[..., 0]


@_public
def vecmat(x1, x2):
    """The vector-matrix product conj(x1) @ x2 over the last axes, batched and broadcast over the leading ones.

    x1: vectors (..., n) (conjugated if complex). x2: matrices (..., n, m). Returns (..., m).
    """
    x1, x2 = _array(x1), _array(x2)
    if x1.ndim < 1 or x2.ndim < 2:
        raise ShapeError(f"vecmat: expected vectors (..., n) and matrices (..., n, m), got shapes {x1.shape} "
                         f"and {x2.shape}")
    return ops.matmul(ops.expand_dims(ops.conj(x1), -2), x2)[..., 0, :]
