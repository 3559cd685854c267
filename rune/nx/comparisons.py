"""NumPy's comparisons and type predicates: isclose/allclose, array_equal/array_equiv,
isposinf/isneginf, iscomplex/isreal(obj), issubdtype/promote_types on rune's lattice, and ndarray.
"""
import numpy as np

from ..core import dtypes as dt
from ..core.array import Array
from ..errors import DTypeError
from . import ops
from .mathfuncs import isinf, signbit
from .surface_operands import _array, exporter

__all__ = []
_public = exporter(__all__)


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
