"""NumPy's elementwise math beyond the standard's: rounding (around, rint), fabs, cbrt, the degree
conversions, exp2/logaddexp2, divmod, float_power, fmax/fmin, fmod, ldexp/frexp, spacing, modf,
heaviside, sinc, i0 and nan_to_num.
"""
import math

import ml_dtypes
import numpy as np

from ..core import dtypes as dt
from ..errors import DTypeError
from . import ops
from .exact_math import compiled_when_eager
from .mathfuncs import _float_operand, copysign, isinf, log2, nextafter, trunc
from .surface_operands import _array, _const, exporter

__all__ = []
_public = exporter(__all__)


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
