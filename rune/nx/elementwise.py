"""The elementwise functions users call (exp, add, where, clip, ...): each
checks its operands' dtypes, promotes them and binds one core primitive
(rune/core/prims.py); the factories below make most of them from the
primitive's name, and their docstrings are set in one table at the end."""
import builtins

import numpy as np

from ..core.prims import P
from ..core import trace as _trace
from ..core.trace import Tracer, bind, bind_binary, evaluate
from ..errors import ArgumentError, DTypeError
from ..core import dtypes as dt
from .buffers import Array
from .conversion import (_LITERALS, _SCALARS, _all_weak, _dtype_of, _operand, _operands, asarray, astype,
                         promote)

_FLOATS = frozenset(d for d in dt.ALL if dt.is_float(d))
_INEXACT = frozenset(d for d in dt.ALL if dt.is_inexact(d))


def _float_unary(prim_name, complex_ok=True):
    """A function of floats; `complex_ok`: also of complex numbers (exp, sqrt,
    sin, ...: NumPy's complex ufuncs), else complex operands are refused."""
    prim = P[prim_name]
    fast = _INEXACT if complex_ok else _FLOATS

    def op(x):
        if (type(x) is Array and x._raw.dtype in fast) or (isinstance(x, Tracer) and x.aval.dtype in fast):
            return bind(prim, x)  # already a float array: nothing to check or convert
        x = _operand(x)
        weak = _all_weak(x)   # read before asarray: a Python int is weak
        if not isinstance(x, (Array, Tracer)):
            x = asarray(x)
        if dt.is_complex(x.dtype):
            if not complex_ok:
                raise DTypeError(f"{op.__name__}: expected a real (not complex) operand, got {x.dtype.name}")
        elif not dt.is_float(x.dtype):
            x = bind(P["convert"], x, dtype=dt.to_inexact(x.dtype, weak))
        return bind(prim, x)
    op.__name__ = prim_name
    return op


def _any_unary(prim_name, allowed=None):
    prim = P[prim_name]

    def op(x):
        x = _operand(x)
        if not isinstance(x, (Array, Tracer)):
            x = asarray(x)
        if allowed is not None and x.dtype.kind not in allowed:
            raise DTypeError(f"{op.__name__}: expected {_KIND_WORDS[allowed]} operands, got {x.dtype.name}")
        return bind(prim, x)
    op.__name__ = prim_name
    return op


def _fast_dtypes(kinds, to_float):
    """Dtypes for which `array op array-of-same-dtype` needs no promotion or check."""
    return frozenset(d for d in dt.ALL if (kinds is None or d.kind in kinds)
                     and (not to_float or dt.is_float(d)))


def _binary(prim_name, kinds=None, to_float=False):
    prim = P[prim_name]
    same = _fast_dtypes(kinds, to_float)
    with_float = frozenset(d for d in same if dt.is_float(d))
    with_int = frozenset(d for d in same if d.kind in "iuf" or d == dt.bfloat16)
    scalar_ok = {float: with_float, int: with_int}
    # (Python type, dtype, value) -> the scalar as an operand of this op next to
    # an array of that dtype: a hit means the checks passed before (the cached
    # part of promotion).
    literals = {}

    def op(x, y):
        tx, ty = type(x), type(y)
        # Operands that already agree need no promotion: an array meeting an array
        # of its dtype, or a Python scalar that cannot widen it (dispatch is most
        # of the cost of small eager ops, so this is checked before `promote`).
        # Either way the operation is bound; the eval interpreter runs it now.
        if tx is Array or isinstance(x, Tracer):
            d = x._raw.dtype if tx is Array else x.aval.dtype
            if ty in scalar_ok:
                typed = literals.get((ty, d, y)) or _scalar_operand(literals, scalar_ok, d, y)
                if typed is not None:
                    return bind_binary(prim, x, typed)
            elif ty is Array or isinstance(y, Tracer):
                if (y._raw.dtype if ty is Array else y.aval.dtype) == d and d in same:
                    return bind_binary(prim, x, y)
        elif ty is Array or isinstance(y, Tracer):
            if tx in scalar_ok:
                d = y._raw.dtype if ty is Array else y.aval.dtype
                typed = literals.get((tx, d, x)) or _scalar_operand(literals, scalar_ok, d, x)
                if typed is not None:
                    return bind_binary(prim, typed, y)
        elif tx in _LITERALS and ty in _LITERALS and (tx not in _SCALARS or ty not in _SCALARS):
            return _literal_op(prim, op.__name__, x, y, kinds, to_float)
        weak = to_float and _all_weak(x, y)
        x, y = promote(op.__name__, x, y)
        d = _dtype_of(x)
        if kinds is not None and d.kind not in kinds:
            raise DTypeError(f"{op.__name__}: expected {_KIND_WORDS[kinds]} operands, got {d.name}")
        if to_float and not dt.is_inexact(d):
            target = dt.to_inexact(d, weak)
            x, y = astype(x, target), astype(y, target)
        if not isinstance(x, (Array, Tracer)) and not isinstance(y, (Array, Tracer)):
            x = asarray(x)
        return bind_binary(prim, x, y)
    op.__name__ = prim_name
    return op


def _literal_op(prim, name, x, y, kinds, to_float):
    """Arithmetic on scalar literals (as derivative rules do with a Python scalar
    operand) stays a literal: unplaced, weak, placed with whatever it meets later,
    as the Python scalar it came from would be. It is folded now, under every
    transformation (`evaluate`: the eval interpreter computes it on NumPy
    scalars, by the host's implementation of `prim`)."""
    weak = _all_weak(x, y)
    x, y = promote(name, x, y)
    d = x.dtype
    if kinds is not None and d.kind not in kinds:
        raise DTypeError(f"{name}: expected {_KIND_WORDS[kinds]} operands, got {d.name}")
    if to_float and not dt.is_inexact(d):
        target = dt.to_inexact(d, weak)
        x, y = target.type(x), target.type(y)
    return evaluate(prim, x, y)


def _scalar_operand(known, scalar_ok, dtype, value):
    """The Python scalar `value` as a NumPy scalar of `dtype`, when it may meet an
    array of `dtype` in this op without promotion (`scalar_ok`: Python type ->
    dtypes) and fits; else None (the general path promotes or reports it).
    Remembered in `known`, the op's own table: making one costs more than the
    rest of a small eager op. Zero is never remembered (0.0 and -0.0 are equal
    keys); a remembered zero would be falsy anyway."""
    kind = type(value)
    if dtype not in scalar_ok[kind] or not (kind is float or dtype in _ANY_SCALAR_FITS or _fits(dtype, value)):
        return None
    out = dtype.type(value)
    if value and len(known) < 4096:
        known[kind, dtype, value] = out
    return out


_ANY_SCALAR_FITS = frozenset(d for d in dt.ALL if d.kind == "f" or d == dt.bfloat16)


def _fits(dtype, value):
    """Whether a Python scalar converts to `dtype` without overflow (else the general path reports it)."""
    if type(value) is float or dtype.kind == "f" or dtype == dt.bfloat16:
        return True
    info = _IINFO.get(dtype)
    if info is None:
        info = _IINFO[dtype] = np.iinfo(dtype)
    return info.min <= value <= info.max


_IINFO = {}


_KIND_WORDS = {"biu": "bool or integer", "iu": "integer", "f": "float", "iufV": "real numeric (not bool or complex)",
               "iufcV": "numeric (not bool)", "biufV": "real (not complex)"}

exp, log, log1p, expm1 = (_float_unary(n) for n in ("exp", "log", "log1p", "expm1"))
sqrt, rsqrt, sin, cos, tan = (_float_unary(n) for n in ("sqrt", "rsqrt", "sin", "cos", "tan"))
tanh, sinh, cosh, asin, acos, atan = (_float_unary(n) for n in ("tanh", "sinh", "cosh", "asin", "acos", "atan"))
erf, sigmoid = _float_unary("erf", complex_ok=False), _float_unary("logistic", complex_ok=False)


def _integers_kept(fn):
    """floor/ceil/round of integers (and bools) are the integers themselves, in
    their own dtype, as the standard and NumPy 2 give (JAX gives float32)."""
    def op(x):
        if isinstance(x, (Array, Tracer)) and x.dtype.kind in "biu":
            return x
        if isinstance(x, np.ndarray) and x.dtype.kind in "biu" or type(x) in (int, bool):
            return asarray(x)
        return fn(x)
    op.__name__ = fn.__name__
    return op


floor = _integers_kept(_float_unary("floor", complex_ok=False))
ceil = _integers_kept(_float_unary("ceil", complex_ok=False))
_round = _integers_kept(_float_unary("round", complex_ok=False))
negative = _any_unary("neg", "iufcV")
# Arithmetic NumPy does in int8 for bools (bool // bool) or not at all (sign)
# is refused for bool operands, so a result's dtype is always its operands'.
_real_sign, _real_abs = _any_unary("sign", "iufV"), _any_unary("abs")
invert = _any_unary("not", "biu")
isnan, isfinite = _float_unary("isnan"), _float_unary("isfinite")
add, subtract, multiply = _binary("add"), _binary("sub", "iufcV"), _binary("mul")
divide = _binary("div", to_float=True)
floor_divide, remainder = _binary("floordiv", "iufV"), _binary("rem", "iufV")
power = _binary("pow", "iufcV")
# Complex numbers have no order: comparisons, maximum and minimum refuse them.
maximum, minimum = _binary("max", "biufV"), _binary("min", "biufV")
atan2 = _binary("atan2", "biufV", to_float=True)
bitwise_and, bitwise_or, bitwise_xor = (_binary(n, "biu") for n in ("and", "or", "xor"))
left_shift, right_shift = _binary("shift_left", "iu"), _binary("shift_right", "iu")
equal, not_equal, less = _binary("eq"), _binary("ne"), _binary("lt", "biufV")
less_equal, greater, greater_equal = _binary("le", "biufV"), _binary("gt", "biufV"), _binary("ge", "biufV")
for _f, _n in ((negative, "negative"), (invert, "invert"), (add, "add"), (subtract, "subtract"),
               (multiply, "multiply"), (divide, "divide"), (floor_divide, "floor_divide"),
               (remainder, "remainder"), (power, "power"), (maximum, "maximum"),
               (minimum, "minimum"), (bitwise_and, "bitwise_and"), (bitwise_or, "bitwise_or"),
               (bitwise_xor, "bitwise_xor"), (equal, "equal"), (not_equal, "not_equal"),
               (less, "less"), (less_equal, "less_equal"), (greater, "greater"),
               (greater_equal, "greater_equal"), (sigmoid, "sigmoid"), (left_shift, "left_shift"),
               (right_shift, "right_shift")):
    _f.__name__ = _n
arctan2 = atan2


def _parts(x):
    """The real and imaginary parts of complex `x`. The primitives are bound by name:
    rune/nx/complex.py defines them, and its functions and rules build on this module."""
    return bind(P["real"], x), bind(P["imag"], x)


def _as_array(x):
    x = _operand(x)
    return x if isinstance(x, (Array, Tracer)) else asarray(x)


def abs(x):
    """|x|; of complex numbers, the modulus hypot(re, im) (a real dtype, as the standard says).

    x: an array or scalar of any dtype; the result keeps a real `x`'s dtype.
    """
    x = _as_array(x)
    if dt.is_complex(x.dtype):
        re, im = _parts(x)
        return bind(P["hypot"], re, im)
    return _real_abs(x)


def sign(x):
    """-1, 0 or 1 (NaN for NaN); of complex numbers z / |z| (0 at 0), as the standard says.

    x: a numeric array or scalar (bools are refused).
    """
    x = _as_array(x)
    if not dt.is_complex(x.dtype):
        return _real_sign(x)
    r = abs(x)
    zero = equal(r, 0)
    return where(zero, x.dtype.type(0), divide(x, where(zero, r.dtype.type(1), r)))


def round(x, decimals=0):
    """`x` rounded to `decimals` decimal places (halves to even, as NumPy and JAX)."""
    x = _operand(x)
    if isinstance(x, (Array, Tracer)) and dt.is_complex(x.dtype):   # each part rounded on its own
        re, im = _parts(x)
        return bind(P["complex"], round(re, decimals), round(im, decimals))
    if decimals == 0:
        return _round(x)
    x = asarray(x) if not isinstance(x, (Array, Tracer)) else x
    if x.dtype.kind in "biu" and decimals >= 0:
        return x
    x = x if dt.is_float(x.dtype) else astype(x, dt.to_inexact(x.dtype))
    scale = 10.0 ** decimals
    return divide(_round(multiply(x, scale)), scale)


def logical_not(x):
    """Elementwise NOT of `x` read as booleans (nonzero is True).

    x: an array or scalar of any dtype; the result is bool.
    """
    return invert(astype(x, dt.bool_))


def logical_and(x, y):
    """Elementwise AND of `x` and `y` read as booleans (nonzero is True).

    x, y: arrays or scalars of any dtype, broadcast together; the result is bool.
    """
    return bitwise_and(astype(x, dt.bool_), astype(y, dt.bool_))


def logical_or(x, y):
    """Elementwise OR of `x` and `y` read as booleans (nonzero is True).

    x, y: arrays or scalars of any dtype, broadcast together; the result is bool.
    """
    return bitwise_or(astype(x, dt.bool_), astype(y, dt.bool_))


def logical_xor(x, y):
    """Elementwise exclusive OR of `x` and `y` read as booleans (nonzero is True).

    x, y: arrays or scalars of any dtype, broadcast together; the result is bool.
    """
    return bitwise_xor(astype(x, dt.bool_), astype(y, dt.bool_))


def square(x):
    """x * x, elementwise, in `x`'s dtype (integers stay integers).

    x: an array or scalar.
    """
    return multiply(x, x)


def reciprocal(x):
    """1 / x, elementwise; integers and bools are divided as in `divide` (float32 or float64).

    x: an array or scalar.
    """
    return divide(1, x)


def where(cond, x=None, y=None, /, *, size=None, fill_value=None):
    """Elements of `x` where `cond` holds, else of `y` (broadcast together).

    cond: the condition (converted to bool). x, y: the two sides; with neither, where(cond) is
    nonzero(cond, size=size, fill_value=fill_value), as in NumPy and JAX (size= fixes the number of results,
    so it also runs under jit; fill_value pads them).
    """
    if x is None and y is None:
        return _LATER["nonzero"](cond, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ArgumentError("where: give both x and y, or neither (where(cond) is nonzero(cond))")
    if size is not None or fill_value is not None:
        raise ArgumentError("where: size and fill_value apply only to the one-argument form where(cond)")
    cond, x, y = _operands((cond, x, y))
    x, y = promote("where", x, y)
    if type(cond) in _LITERALS:  # a scalar condition picks a side, placed with what it meets
        if type(x) in _LITERALS and type(y) in _LITERALS:
            return x if cond else y
        cond = np.bool_(cond)
    elif cond.dtype != dt.bool_:
        cond = astype(cond, dt.bool_)
    if not builtins.any(isinstance(v, (Array, Tracer)) for v in (cond, x, y)):
        x = asarray(x)
    return bind(P["select"], cond, x, y)


def clip(x, min=None, max=None):
    """`x` limited to [min, max] elementwise: maximum(x, min), then minimum(x, max).

    x: an array or scalar. min, max: the bounds (arrays or scalars broadcast with `x`); None leaves that
    side open. Dtypes promote as in maximum/minimum (a Python scalar bound never widens `x`).
    """
    x = _operand(x)
    # Checked here so a mismatch names clip, not the maximum/minimum it is made of.
    _trace.common_device("clip", [v.aval for v in (x, min, max) if isinstance(v, (Array, Tracer))])
    if min is not None:
        x = maximum(x, min)
    if max is not None:
        x = minimum(x, max)
    return x


_stop_gradient = _any_unary("stop_gradient")


def stop_gradient(x):
    """`x` (an array or a pytree of them), through which no derivative flows."""
    if isinstance(x, (Array, Tracer)) or type(x) in _LITERALS or isinstance(x, np.ndarray):
        return _stop_gradient(x)
    from .. import tree
    return tree.map(_stop_gradient, x)


# Functions of modules built on this one that where(cond) hands over to (nonzero):
# rune.nx.shaping registers it when rune.nx is imported.
_LATER = {}


# Docstrings of the functions made by the factories above (no `def` holds them).
_INT_FLOAT = ("float32 for bool and 8/16-bit integers, float64 for 32/64-bit ones (the promotion table's float "
              "for them; a Python int gives float32)")
_FLOAT_X = f"x: an array or scalar; integers and bools are computed in {_INT_FLOAT}."
_REAL_FLOAT_X = _FLOAT_X + " Complex operands are refused."
_XY = ("x, y: arrays or scalars, broadcast together; dtypes promote by NEP 50 (a Python scalar is weak and "
       "never widens an array: float32 + 2.0 is float32).")
_INT_XY = _XY.replace("arrays or scalars", "integer (or bool) arrays or scalars")
_ORDERED_XY = _XY + " Complex numbers have no order and are refused."
for _f, _summary, _args in (
        (exp, "e to the power `x`, elementwise.", _FLOAT_X),
        (log, "The natural logarithm, elementwise (NaN below 0, -inf at 0).", _FLOAT_X),
        (log1p, "log(1 + x), elementwise, accurate for small `x`.", _FLOAT_X),
        (expm1, "exp(x) - 1, elementwise, accurate for small `x`.", _FLOAT_X),
        (sqrt, "The square root, elementwise.", _FLOAT_X),
        (rsqrt, "1 / sqrt(x), elementwise.", _FLOAT_X),
        (sin, "The sine (of radians), elementwise.", _FLOAT_X),
        (cos, "The cosine (of radians), elementwise.", _FLOAT_X),
        (tan, "The tangent (of radians), elementwise.", _FLOAT_X),
        (tanh, "The hyperbolic tangent, elementwise.", _FLOAT_X),
        (sinh, "The hyperbolic sine, elementwise.", _FLOAT_X),
        (cosh, "The hyperbolic cosine, elementwise.", _FLOAT_X),
        (asin, "The inverse sine, in radians, elementwise (also named arcsin).", _FLOAT_X),
        (acos, "The inverse cosine, in radians, elementwise (also named arccos).", _FLOAT_X),
        (atan, "The inverse tangent, in radians, elementwise (also named arctan).", _FLOAT_X),
        (erf, "The error function, elementwise.", _REAL_FLOAT_X),
        (sigmoid, "The logistic function 1 / (1 + exp(-x)), elementwise.", _REAL_FLOAT_X),
        (floor, "The largest integer not above `x`, elementwise, in x's dtype.",
         "x: an array or scalar; integers and bools are returned as they are (NumPy 2's rule; JAX gives "
         "float32). Complex operands are refused."),
        (ceil, "The smallest integer not below `x`, elementwise, in x's dtype.",
         "x: an array or scalar; integers and bools are returned as they are (NumPy 2's rule; JAX gives "
         "float32). Complex operands are refused."),
        (negative, "-x, elementwise.", "x: a numeric array or scalar (bools are refused)."),
        (invert, "Bitwise NOT (logical NOT of bools), elementwise; also named bitwise_not and bitwise_invert.",
         "x: a bool or integer array or scalar."),
        (isnan, "Whether each element is NaN (for complex numbers: either part).",
         "x: an array or scalar; integers are never NaN."),
        (isfinite, "Whether each element is neither infinite nor NaN (for complex numbers: both parts).",
         "x: an array or scalar; integers are always finite."),
        (add, "x + y, elementwise.", _XY),
        (subtract, "x - y, elementwise.", _XY + " Bools are refused."),
        (multiply, "x * y, elementwise.", _XY),
        (divide, "x / y, elementwise (true division).",
         _XY + f" Integers and bools are divided in {_INT_FLOAT}."),
        (floor_divide, "x // y, elementwise: the quotient rounded towards -inf.",
         _ORDERED_XY + " Bools are refused."),
        (remainder, "x % y, elementwise, with the sign of `y` (Python's and NumPy's; also named mod).",
         _ORDERED_XY + " Bools are refused."),
        (power, "x ** y, elementwise (also named pow).", _XY + " Bools are refused."),
        (maximum, "The larger of `x` and `y`, elementwise (NaN if either is NaN).", _ORDERED_XY),
        (minimum, "The smaller of `x` and `y`, elementwise (NaN if either is NaN).", _ORDERED_XY),
        (atan2, "atan(x / y) in the quadrant of the point (y, x), in radians (NumPy's arctan2(x1, x2)).",
         _ORDERED_XY + f" Integers and bools are computed in {_INT_FLOAT}."),
        (bitwise_and, "x & y, elementwise (logical AND of bools).", _INT_XY),
        (bitwise_or, "x | y, elementwise (logical OR of bools).", _INT_XY),
        (bitwise_xor, "x ^ y, elementwise (logical XOR of bools).", _INT_XY),
        (left_shift, "x << y, elementwise (also named bitwise_left_shift).",
         _INT_XY.replace(" (or bool)", "")),
        (right_shift, "x >> y, elementwise, arithmetic for signed integers (also named bitwise_right_shift).",
         _INT_XY.replace(" (or bool)", "")),
        (equal, "x == y, elementwise, as bools.", _XY),
        (not_equal, "x != y, elementwise, as bools.", _XY),
        (less, "x < y, elementwise, as bools.", _ORDERED_XY),
        (less_equal, "x <= y, elementwise, as bools.", _ORDERED_XY),
        (greater, "x > y, elementwise, as bools.", _ORDERED_XY),
        (greater_equal, "x >= y, elementwise, as bools.", _ORDERED_XY)):
    _f.__doc__ = f"{_summary}\n\n{_args}"
