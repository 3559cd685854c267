"""The array functions users call.

Each function validates its arguments, promotes dtypes and binds primitives
(`rune.core.prims`); composites (mean, var, softmax, einsum, ...) are written
with other functions here, so transformations only ever see primitives.
"""
import builtins
import functools
import math
import string

import numpy as np

from ..core.prims import P, broadcast_shapes
from ..core import trace as _trace
from ..core.array import from_foreign
from ..core.trace import Tracer, bind, bind_binary, evaluate
from ..errors import ArgumentError, AxisError, DTypeError, ScalarOverflowError, ShapeError, UsageError
from ..core import dtypes as dt
from ..core.devices import get_device
from .buffers import Array, from_host, move
from .constants import checked_scalar as _literal, host_cast, host_convert, iota

_HOST0 = get_device("cpu")

_SCALARS = (bool, int, float, complex)
# Scalars that can stand as literals in an equation: Python's and NumPy's.
_LITERALS = frozenset(_SCALARS + tuple(np.dtype(d).type for d in dt.ALL))


# ---------------------------------------------------------------- conversion

def asarray(x, dtype=None, device=None):
    """`x` as an Array or tracer; NumPy arrays keep their dtype, Python scalars take rune's."""
    if isinstance(x, (Array, Tracer)):
        if dtype is not None and dt.dtype(dtype) != x.dtype:
            x = astype(x, dtype)
        if device is not None:
            x = move(x, get_device(device))
        return x
    if dtype is not None:
        dtype = dt.dtype(dtype)
    if type(x) in _SCALARS:  # exact types: np.float64 subclasses float but keeps its dtype
        target = dtype or dt.weak_dtype_of(x)
        host = np.asarray(_literal("asarray", x, target), target) if type(x) is int else host_cast(x, target)
    elif hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray):
        host = np.asarray(from_foreign(x, _HOST0)._raw)
        host = host if dtype is None else host.astype(dtype)
    else:
        if isinstance(x, tuple) and type(x) is not tuple:
            _check_tuple_subclass(x)
        if isinstance(x, (list, tuple)) and holds_arrays(x):
            return _stacked(x, dtype, device)
        try:
            host = np.asarray(x)
        except ValueError as e:
            if not isinstance(x, (list, tuple)):
                raise
            raise ShapeError(f"array: nested sequences must be rectangular, but "
                             f"{_ragged(x) or e}") from e
        if dtype is not None:
            host = host_convert(host, dtype)  # rune's cast rules, as `astype`
        elif not isinstance(x, (np.ndarray, np.generic)) or host.dtype not in dt.ALL:
            target = _default_for_kind(host.dtype, x)
            if host.dtype.kind in "iu" and target.kind in "iu" and host.size:
                info = np.iinfo(target)
                if host.min() < info.min or host.max() > info.max:
                    raise ScalarOverflowError(f"asarray: the integers in {type(x).__name__} do not fit "
                                              f"in {target.name} (from {host.min()} to {host.max()}); "
                                              f"pass dtype=nx.int64")
            host = host.astype(target)
    return from_host(np.array(host, copy=True) if host is x else host, device)


def holds_arrays(xs):
    """Whether the (nested) sequence `xs` holds a rune array or tracer."""
    return builtins.any(isinstance(e, (Array, Tracer)) for e in _flat(xs))


def _stacked(xs, dtype, device):
    """A (nested) sequence holding rune arrays or tracers as one array: its
    elements stacked, as JAX does, so derivatives flow through each one and
    device arrays stay on their device (going through NumPy would keep only
    the values). The dtype is the elements' common one, Python numbers among
    them weak: [x_bf16, 1.0] is bfloat16."""
    if dtype is None:
        keys = []
        for e in _flat(xs):
            if not isinstance(e, (Array, Tracer)) and type(e) not in _SCALARS:
                e = asarray(e)  # NumPy data keeps its dtype, strongly
            keys.append((dt.weak_dtype_of(e), True) if type(e) in _SCALARS else (e.dtype, e.weak))
        dtype, _ = dt.promote(dict.fromkeys(keys))  # each kind once: a long list is a short key
    if device is None:
        device = committed_device(list(_flat(xs)))
    where = _ragged(xs)
    if where:
        raise ShapeError(f"array: nested sequences must be rectangular, but {where}")

    def build(x):
        if isinstance(x, (list, tuple)) and holds_arrays(x):
            return concatenate([expand_dims(build(e), 0) for e in x])
        if isinstance(x, (Array, Tracer)):
            return asarray(astype(x, dtype), device=device)  # astype: a weak element becomes strong
        return asarray(x, dtype, device)
    return build(xs)


def _ragged(x, path=""):
    """Where nested lists stop being rectangular, in words (for the error), or ""."""
    for i, e in enumerate(x):
        found = _ragged(e, f"{path}[{i}]") if isinstance(e, (list, tuple)) else ""
        if found:
            return found
    shapes = [_shape_of(e) for e in x]  # each is rectangular by now
    for i, shape in enumerate(shapes):
        if shape != shapes[0]:
            return f"x{path}[{i}] has shape {shape} and x{path}[0] has shape {shapes[0]}"
    return ""


def _shape_of(x):
    """The shape of array data `x` (a rectangular nested sequence may hold arrays
    and tracers, which NumPy must not convert)."""
    if isinstance(x, (list, tuple)):
        return (len(x),) + (_shape_of(x[0]) if x else ())
    return tuple(x.shape) if isinstance(x, (Array, Tracer)) else np.shape(x)


def _check_tuple_subclass(x):
    """A tuple subclass that is not a pytree container reached here as a leaf:
    it would silently become one array. JAX refuses such leaves too."""
    from ..tree import _handler
    if _handler(type(x)) is None:
        raise UsageError(f"a {type(x).__qualname__} (a tuple subclass) is not an array, and rune.tree does "
                         f"not know it as a container of arrays: register it with rune.tree.register "
                         f"(or make it a NamedTuple)")


def _default_for_kind(np_dtype, source):
    """Lists of Python numbers take rune's defaults (float32, int32), as in JAX."""
    kinds = {"f": dt.float32, "i": dt.int32, "u": dt.uint32, "b": dt.bool_, "c": dt.complex64}
    if isinstance(source, (np.ndarray, np.generic)) and np_dtype in dt.ALL:
        return np_dtype
    if np_dtype.kind in kinds:
        return kinds[np_dtype.kind]
    raise DTypeError(f"cannot make an array of {type(source).__name__} with NumPy dtype {np_dtype}")


def array(x, dtype=None, device=None):
    """An Array holding `x` (a list, possibly of arrays, a NumPy array, a scalar, an Array).

    x: the data; lists of Python numbers take rune's defaults (float32, int32), NumPy arrays keep their dtype.
    dtype: the result's dtype (default: from `x`). device: where it is placed (default: the default device).
    """
    return asarray(x, dtype, device)


def committed_device(xs):
    """The device of the first rune array or tracer among `xs` (None if none).

    The placement rule: rune arrays are committed to their device, so operands
    on different devices are an error. NumPy arrays, lists and Python scalars
    are not (as JAX treats NumPy arrays): meeting rune arrays, they become
    arrays on this device; alone, on the default device.
    """
    for x in xs:
        if isinstance(x, (Array, Tracer)):
            return x.device
    return None


def operands(xs):
    """Each of `xs` as an Array or tracer; Python and NumPy values become arrays
    placed with the rune arrays among `xs` (see `committed_device`)."""
    device = committed_device(xs)
    return [x if isinstance(x, (Array, Tracer)) else asarray(x, device=device) for x in xs]


def tree_operands(tree_):
    """The leaves of a pytree as arrays or tracers, and its structure."""
    from .. import tree
    leaves, structure = tree.flatten(tree_)
    return operands(leaves), structure


def _flat(xs):
    for e in xs:
        if isinstance(e, (list, tuple)):
            yield from _flat(e)
        else:
            yield e


def _operand(x, device=None):
    if isinstance(x, (Array, Tracer, np.generic)) or type(x) in _SCALARS:
        return x
    return asarray(x, device=device)


def _operands(xs):
    """Each of `xs` as an operand of one operation: scalars stay literals, NumPy
    arrays and lists become arrays placed by `committed_device`'s rule."""
    device = committed_device(xs)
    return [_operand(x, device) for x in xs]


def promote(name, *xs):
    """Operands with one common dtype (NEP 50; Python scalars are weak literals)."""
    xs = _operands(xs)
    keys = []
    for x in xs:
        if type(x) in _SCALARS:
            keys.append((dt.weak_dtype_of(x), True))
        elif isinstance(x, np.generic):  # a NumPy scalar is strong (NEP 50)
            keys.append((dt.dtype(x.dtype), False))
        else:
            keys.append((x.dtype, x.weak))
    target, _ = dt.promote(keys)
    out = []
    for x, (d, _) in zip(xs, keys):
        if type(x) in _SCALARS or isinstance(x, np.generic):
            out.append(_literal(name, x, target) if d != target or type(x) in _SCALARS else x)
        elif d != target:
            out.append(bind(P["convert"], x, dtype=target))
        else:
            out.append(x)
    return out


def _dtype_of(x):
    return x.dtype if hasattr(x, "dtype") else dt.weak_dtype_of(x)


def _is_weak(x):
    """Whether `x` is weak: a Python scalar, or an array made of Python scalars alone."""
    return type(x) in _SCALARS or getattr(x, "weak", False)


def _all_weak(*xs):
    """Whether the operands `xs`, as given (before `promote` turns Python scalars into
    NumPy literals), are all weak: then a float they need is the default float."""
    return builtins.all(_is_weak(x) for x in xs)


# ---------------------------------------------------------------- elementwise

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


# ---------------------------------------------------------------- complex numbers

def _as_array(x):
    x = _operand(x)
    return x if isinstance(x, (Array, Tracer)) else asarray(x)


def real(x):
    """The real part (a real number is its own real part).

    x: an array or scalar; of complex64 the result is float32, of complex128 float64.
    """
    x = _as_array(x)
    return bind(P["real"], x) if dt.is_complex(x.dtype) else x


def imag(x):
    """The imaginary part (zeros for real numbers, as NumPy's).

    x: an array or scalar; of complex64 the result is float32, of complex128 float64.
    """
    x = _as_array(x)
    if dt.is_complex(x.dtype):
        return bind(P["imag"], x)
    return multiply(x, x.dtype.type(0)) if x.dtype != dt.bool_ else logical_and(x, False)


def conj(x):
    """The complex conjugate (a real number is its own).

    x: an array or scalar.
    """
    x = _as_array(x)
    return bind(P["conj"], x) if dt.is_complex(x.dtype) else x


def make_complex(re, im):
    """The complex array re + i im (parts promoted to one float dtype).

    re, im: arrays or scalars, broadcast together; integer parts become the promotion table's float for them
    (float32 for bool and 8/16-bit integers, float64 for 32/64-bit ones), float16/bfloat16 parts widen to
    float32 (complex64).
    """
    weak = _all_weak(re, im)
    re, im = promote("complex", re, im)
    d = _dtype_of(re)
    if dt.is_complex(d):
        raise DTypeError(f"make_complex: expected real parts, got {d.name}; take nx.real / nx.imag of them first")
    if not dt.is_float(d):
        target = dt.to_inexact(d, weak)
        re, im = astype(re, target), astype(im, target)
    elif d.itemsize == 2:   # float16/bfloat16 parts widen to complex64's float32
        re, im = astype(re, dt.float32), astype(im, dt.float32)
    if not isinstance(re, (Array, Tracer)) and not isinstance(im, (Array, Tracer)):
        re = asarray(re)
    return bind(P["complex"], re, im)


def abs(x):
    """|x|; of complex numbers, the modulus hypot(re, im) (a real dtype, as the standard says).

    x: an array or scalar of any dtype; the result keeps a real `x`'s dtype.
    """
    x = _as_array(x)
    if dt.is_complex(x.dtype):
        return _hypot(real(x), imag(x))
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


def angle(x):
    """The argument of a complex number, atan2(imag, real) (0 or pi for reals).

    x: an array or scalar.
    """
    x = _as_array(x)
    return atan2(imag(x), real(x))


def _hypot(x, y):
    return bind(P["hypot"], x, y)


def round(x, decimals=0):
    """`x` rounded to `decimals` decimal places (halves to even, as NumPy and JAX)."""
    x = _operand(x)
    if isinstance(x, (Array, Tracer)) and dt.is_complex(x.dtype):   # each part rounded on its own
        return make_complex(round(real(x), decimals), round(imag(x), decimals))
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


def astype(x, dtype):
    """`x` converted to `dtype` (a strong dtype from then on)."""
    dtype = dt.dtype(dtype)
    x = _operand(x)
    if not isinstance(x, (Array, Tracer)):
        return asarray(x, dtype)
    if x.dtype == dtype and not x.weak:
        return x
    if dt.is_complex(x.dtype) and not dt.is_complex(dtype) and dtype != dt.bool_:
        raise DTypeError(f"astype: casting {x.dtype.name} to {dtype.name} would drop the imaginary part; "
                         f"take nx.real(x) or nx.abs(x) first")
    return bind(P["convert"], x, dtype=dtype)


cast = astype


_stop_gradient = _any_unary("stop_gradient")


def stop_gradient(x):
    """`x` (an array or a pytree of them), through which no derivative flows."""
    if isinstance(x, (Array, Tracer)) or type(x) in _LITERALS or isinstance(x, np.ndarray):
        return _stop_gradient(x)
    from .. import tree
    return tree.map(_stop_gradient, x)


# ---------------------------------------------------------------- reductions

def normalize_axis(name, axis, ndim):
    if not -ndim <= axis < builtins.max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise AxisError(f"{name}: axis {axis} is out of range for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def _axes(name, axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    axes = tuple(normalize_axis(name, a, ndim) for a in axis)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{name}: repeated axis in {axis}")
    return axes


def _keep(x, out, axes, keepdims):
    if not keepdims:
        return out
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


_NARROW = {dt.bool_: dt.int32, dt.int8: dt.int32, dt.int16: dt.int32, dt.uint8: dt.uint32,
           dt.uint16: dt.uint32}


def _reduction(prim_name, accumulate_as=None):
    prim = P[prim_name]

    def op(x, axis=None, keepdims=False):
        x = asarray(x)
        axes = _axes(op.__name__, axis, x.ndim)
        if accumulate_as is not None and x.dtype in _NARROW:
            # The standard's rule: narrow ints sum in the default int of their
            # kind (uint8 -> uint32, int8 -> int32), bools in the default int.
            x = astype(x, _NARROW[x.dtype])
        if prim_name in ("reduce_max", "reduce_min") and dt.is_complex(x.dtype):
            raise DTypeError(f"{op.__name__}: complex numbers have no order; take the max of abs(x) "
                             f"or real(x), got {x.dtype.name}")
        if prim_name in ("reduce_max", "reduce_min") and builtins.any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{op.__name__}: reduction over an empty axis of shape {x.shape} has no identity")
        return _keep(x, bind(prim, x, axes=axes), axes, keepdims)
    return op


def _reduced_shape(shape, axes, keepdims):
    return tuple(1 if i in axes else d for i, d in enumerate(shape)) if keepdims else \
        tuple(d for i, d in enumerate(shape) if i not in axes)


sum = _reduction("reduce_sum", dt.int32)
prod = _reduction("reduce_prod", dt.int32)
max = _reduction("reduce_max")
min = _reduction("reduce_min")
sum.__name__, prod.__name__, max.__name__, min.__name__ = "sum", "prod", "max", "min"


def any(x, axis=None, keepdims=False):
    """Whether any element is true (False over an empty axis).

    x: an array of any dtype (nonzero is true). axis: an int, a tuple of ints, or None (all axes).
    keepdims: keep each reduced axis with size 1. dtype=, where= and out=None (rune arrays are
    immutable) are NumPy's keywords; initial= is refused (ArgumentError), as NumPy's any/all have none.
    """
    return not_equal(sum(astype(x, dt.bool_), axis, keepdims), 0)


def all(x, axis=None, keepdims=False):
    """Whether every element is true (True over an empty axis).

    x: an array of any dtype (nonzero is true). axis: an int, a tuple of ints, or None (all axes).
    keepdims: keep each reduced axis with size 1. dtype=, where= and out=None (rune arrays are
    immutable) are NumPy's keywords; initial= is refused (ArgumentError), as NumPy's any/all have none.
    """
    return equal(sum(logical_not(x), axis, keepdims), 0)


def _arg_reduction(prim_name):
    prim = P[prim_name]

    def op(x, axis=None, keepdims=False):
        x = asarray(x)
        if axis is None:
            if x.size == 0:
                raise ShapeError(f"{prim_name}: the array is empty, so it has no {prim_name[3:]}imum")
            flat = reshape(x, (-1,))
            out = bind(prim, flat, axis=0, index_dtype=dt.int32)
            return reshape(out, (1,) * x.ndim) if keepdims else out
        a = normalize_axis(prim_name, axis, x.ndim)
        if x.shape[a] == 0:
            raise ShapeError(f"{prim_name}: empty axis {axis} of shape {x.shape}")
        return _keep(x, bind(prim, x, axis=a, index_dtype=dt.int32), (a,), keepdims)
    op.__name__ = prim_name
    return op


argmax, argmin = _arg_reduction("argmax"), _arg_reduction("argmin")


def _in_float32(fn):
    """`fn` computed in float32 for float16/bfloat16 operands, rounded once to
    their dtype at the end, as XLA does. Their sums lose precision quickly and
    their element counts overflow (float16 ends at 65504), so neither a partial
    result nor a divisor ever passes through the low-precision dtype; the
    derivatives follow the same path (through the two conversions)."""
    @functools.wraps(fn)
    def run(x, *args, **kwargs):
        x = asarray(x)
        if x.dtype not in (dt.float16, dt.bfloat16):
            return fn(x, *args, **kwargs)
        return astype(fn(astype(x, dt.float32), *args, **kwargs), x.dtype)
    return run


@_in_float32
def mean(x, axis=None, keepdims=False):
    """The arithmetic mean over `axis`.

    x: an array (integers and bools are averaged in the promotion table's float for them: float32 for bool and
    8/16-bit integers, float64 for 32/64-bit ones; float16/bfloat16 accumulate in float32 and round once).
    axis: an int, a tuple of ints, or None (all axes). keepdims: keep each reduced axis with size 1. dtype= (of
    the computation and the result) and where= (only elements where it holds count) are NumPy's keywords; out=
    must be None (rune arrays are immutable).
    """
    if not dt.is_inexact(x.dtype):
        x = astype(x, dt.to_inexact(x.dtype))
    axes = _axes("mean", axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    return divide(sum(x, axes, keepdims), n)


@_in_float32
def var(x, axis=None, keepdims=False, ddof=0):
    """The variance over `axis`: mean(|x - mean(x)|**2) * n / (n - ddof).

    x: an array (integers as in `mean`; complex numbers give a real variance). axis: an int, a tuple of ints,
    or None (all axes). keepdims: keep each reduced axis with size 1. ddof: delta degrees of freedom (the
    standard's correction=). dtype=, where= and out=None as in `mean`.
    """
    if not dt.is_inexact(x.dtype):
        x = astype(x, dt.to_inexact(x.dtype))
    axes = _axes("var", axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    centered = subtract(x, mean(x, axes, keepdims=True))
    return divide(sum(_abs_squared(centered), axes, keepdims), n - ddof)


def _abs_squared(x):
    """|x|^2: x * x, or re^2 + im^2 for complex x (a real dtype, as NumPy's var of complex)."""
    if dt.is_complex(x.dtype):
        re, im = real(x), imag(x)
        return add(multiply(re, re), multiply(im, im))
    return multiply(x, x)


@_in_float32
def std(x, axis=None, keepdims=False, ddof=0):
    """The standard deviation over `axis`: sqrt(var(x, axis, keepdims, ddof)).

    x: an array (integers as in `mean`). axis: an int, a tuple of ints, or None (all axes). keepdims: keep each
    reduced axis with size 1. ddof: delta degrees of freedom (the standard's correction=). dtype=, where= and
    out=None as in `mean`.
    """
    return sqrt(var(x, axis, keepdims, ddof))


# ---------------------------------------------------------------- NumPy's reduction keywords
# np.sum(a), np.mean(a), ... call the array's methods with NumPy's keywords
# (dtype=, out=None, initial=, where=, ddof=); the methods pass them here.


def check_out(name, out):
    """NumPy's out=: only None, since arrays are immutable."""
    if out is not None:
        raise ArgumentError(f"{name}: out= must be None (rune arrays are immutable, so the result is "
                            f"returned instead), got {type(out).__name__}")


def _with_numpy_keywords(reduce, fill=None, combine=None):
    """`reduce(x, axis, keepdims)` that also takes NumPy's keywords: dtype= (of the
    accumulator and the result), initial= (a scalar that takes part, so an empty
    axis gives it; where `combine` joins it to a result), where= (elements where
    it is False do not take part: they become `fill`, else `initial`) and out=None."""
    name = reduce.__name__

    def op(x, axis=None, keepdims=False, *, dtype=None, out=None, initial=None, where=None):
        check_out(name, out)
        if dtype is None and initial is None and where is None:
            return reduce(x, axis, keepdims)
        x = asarray(x)
        if dtype is not None:
            x = astype(x, dtype)
        if initial is not None:
            if combine is None:
                raise ArgumentError(f"{name}: initial= is not an argument of {name}")
            initial = constant_like(initial, x, x.dtype)
            if initial.ndim:
                raise ShapeError(f"{name}: initial must be a scalar, got shape {initial.shape}")
        if where is not None:
            value = initial if fill is None else fill
            if value is None:
                raise ArgumentError(f"{name}: where= needs initial= (an axis where nothing is selected "
                                    f"has no {name}imum)")
            x = _select(_mask(name, where, x), x, value)
        axes = _axes(name, axis, x.ndim)
        if initial is None:
            out = reduce(x, axes, keepdims)
        elif builtins.any(x.shape[a] == 0 for a in axes):
            out = broadcast_to(initial, _reduced_shape(x.shape, axes, keepdims))
        else:
            out = combine(reduce(x, axes, keepdims), initial)
        # Small integers accumulate wider; NumPy's result has the dtype asked for.
        return out if dtype is None else astype(out, dtype)

    op.__name__ = name
    op.__doc__ = reduce.__doc__
    return op


def _mask(name, where, x):
    mask = astype(constant_like(where, x), dt.bool_)
    try:
        fits = broadcast_shapes(name, mask.shape, x.shape) == x.shape
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(f"{name}: where= of shape {mask.shape} does not broadcast to the array's {x.shape}")
    return mask


def _statistic_with_numpy_keywords(stat):
    """mean/var/std that also take dtype= (of the computation and the result),
    where= (only elements where it holds count) and out=None, as NumPy's."""
    name = stat.__name__

    def op(x, axis=None, keepdims=False, *args, dtype=None, out=None, where=None, **kwargs):
        check_out(name, out)
        if dtype is None and where is None:
            return stat(x, axis, keepdims, *args, **kwargs)
        x = asarray(x)
        if dtype is not None and dt.is_float(dt.dtype(dtype)):
            x = astype(x, dtype)
        if where is None:
            out = stat(x, axis, keepdims, *args, **kwargs)
        else:
            out = _masked_statistic(name, x, _mask(name, where, x), axis, keepdims, *args, **kwargs)
        return out if dtype is None else astype(out, dtype)

    op.__name__ = name
    op.__doc__ = stat.__doc__
    return op


def _masked_statistic(name, x, mask, axis, keepdims, ddof=0):
    low = x.dtype in (dt.float16, dt.bfloat16)  # accumulated in float32 and rounded once
    work = dt.float32 if low else dt.to_inexact(x.dtype)
    xw = astype(x, work)
    axes = _axes(name, axis, x.ndim)
    count = sum(astype(broadcast_to(mask, x.shape), work), axes, True)
    mu = divide(sum(xw, axes, True, where=mask), count)
    if name == "mean":
        out = mu
    else:
        out = divide(sum(_abs_squared(subtract(xw, mu)), axes, True, where=mask),
                     maximum(subtract(real(count), ddof), 0))
        out = sqrt(out) if name == "std" else out
    out = out if keepdims else reshape(out, _reduced_shape(x.shape, axes, False))
    return astype(out, x.dtype) if low else out


_select = where
sum = _with_numpy_keywords(sum, 0, add)
prod = _with_numpy_keywords(prod, 1, multiply)
max = _with_numpy_keywords(max, None, maximum)
min = _with_numpy_keywords(min, None, minimum)
amax, amin = max, min
any = _with_numpy_keywords(any, False)
all = _with_numpy_keywords(all, True)
mean, var, std = (_statistic_with_numpy_keywords(f) for f in (mean, var, std))


# Docstrings of the functions made by the factories above (no `def` holds them).
_INT_FLOAT = ("float32 for bool and 8/16-bit integers, float64 for 32/64-bit ones (the promotion table's float "
              "for them; a Python int gives float32)")
_FLOAT_X = f"x: an array or scalar; integers and bools are computed in {_INT_FLOAT}."
_REAL_FLOAT_X = _FLOAT_X + " Complex operands are refused."
_XY = ("x, y: arrays or scalars, broadcast together; dtypes promote by NEP 50 (a Python scalar is weak and "
       "never widens an array: float32 + 2.0 is float32).")
_INT_XY = _XY.replace("arrays or scalars", "integer (or bool) arrays or scalars")
_ORDERED_XY = _XY + " Complex numbers have no order and are refused."
_REDUCE = ("x: an array. axis: an int, a tuple of ints, or None (all axes). keepdims: keep each reduced axis "
           "with size 1. dtype=, initial= and where= are NumPy's keywords; out= must be None (rune arrays are "
           "immutable, so the result is returned).")
_ARG_REDUCE = ("x: an array. axis: an int, or None for the flattened array. keepdims: keep the reduced axis "
               "with size 1. The index is int32; of ties, the first.")
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
        (greater_equal, "x >= y, elementwise, as bools.", _ORDERED_XY),
        (sum, "The sum over `axis`; bools and narrow integers accumulate in int32 (uint8, uint16 in uint32).",
         _REDUCE),
        (prod, "The product over `axis`; bools and narrow integers accumulate in int32 (uint8, uint16 in uint32).",
         _REDUCE),
        (max, "The largest element over `axis` (also named amax); NaN if any is NaN.",
         _REDUCE + " An empty axis needs initial=; complex numbers are refused."),
        (min, "The smallest element over `axis` (also named amin); NaN if any is NaN.",
         _REDUCE + " An empty axis needs initial=; complex numbers are refused."),
        (argmax, "The index of the largest element over `axis`.", _ARG_REDUCE),
        (argmin, "The index of the smallest element over `axis`.", _ARG_REDUCE)):
    _f.__doc__ = f"{_summary}\n\n{_args}"


def _floating(x):
    x = asarray(x)
    return x if dt.is_float(x.dtype) else astype(x, dt.to_inexact(x.dtype))


@_in_float32
def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over `axis`, computed stably (the maximum is subtracted first).

    x: an array (integers as in `mean`). axis: an int, a tuple of ints, or None (all axes). keepdims: keep each
    reduced axis with size 1. An empty axis gives -inf.
    """
    x = _floating(x)
    axes = _axes("logsumexp", axis, x.ndim)
    if builtins.any(x.shape[a] == 0 for a in axes):  # the log of an empty sum
        return broadcast_to(constant_like(-np.inf, x, x.dtype), _reduced_shape(x.shape, axes, keepdims))
    top = stop_gradient(max(x, axes, keepdims=True))
    top = where(isfinite(top), top, 0)
    out = add(log(sum(exp(subtract(x, top)), axes, keepdims=True)), top)
    return out if keepdims else squeeze(out, axes)


def _softmax_input(name, x, axis):
    """`x` as floats, and whether it is empty: then the result is `x` itself (no
    element to normalise). The axis is checked here so errors name softmax."""
    x = _floating(x)
    _axes(name, axis, x.ndim)
    return x, x.size == 0


@_in_float32
def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, computed stably (the maximum is subtracted first).

    x: an array (integers as in `mean`). axis: the axis (or axes) normalized over, -1 by default.
    """
    x, empty = _softmax_input("softmax", x, axis)
    if empty:
        return x
    unnormalized = exp(subtract(x, stop_gradient(max(x, axis, keepdims=True))))
    return divide(unnormalized, sum(unnormalized, axis, keepdims=True))


@_in_float32
def log_softmax(x, axis=-1):
    """log(softmax(x)) along `axis`, computed stably.

    x: an array (integers as in `mean`). axis: the axis (or axes) normalized over, -1 by default.
    """
    x, empty = _softmax_input("log_softmax", x, axis)
    if empty:
        return x
    shifted = subtract(x, stop_gradient(max(x, axis, keepdims=True)))
    return subtract(shifted, log(sum(exp(shifted), axis, keepdims=True)))


# ---------------------------------------------------------------- shapes

def reshape(x, shape):
    """`x` with a new shape and the same elements in row-major order (no copy is visible: arrays are immutable).

    x: an array. shape: an int or a sequence of ints; at most one -1, inferred from the size.
    """
    x = asarray(x)
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    size = x.size
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: at most one -1 in the new shape, got {shape}")
    if -1 in shape:
        rest = math.prod(d for d in shape if d != -1)
        if rest == 0 or size % rest:
            raise ShapeError(f"reshape: cannot reshape {x.shape} into {shape}")
        shape = tuple(size // rest if d == -1 else d for d in shape)
    if math.prod(shape) != size or builtins.any(d < 0 for d in shape):
        raise ShapeError(f"reshape: cannot reshape an array of shape {x.shape} ({size} elements) into {shape}")
    if shape == x.shape:
        return x
    return bind(P["reshape"], x, shape=shape)


def transpose(x, axes=None):
    """`x` with its axes permuted.

    x: an array. axes: a permutation of range(x.ndim) (negative axes allowed); None reverses the axes.
    """
    x = asarray(x)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(
        normalize_axis("transpose", a, x.ndim) for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: axes {axes} are not a permutation of the {x.ndim} axes")
    if perm == tuple(range(x.ndim)):
        return x
    return bind(P["transpose"], x, perm=perm)


def moveaxis(x, source, destination):
    x = asarray(x)
    s = normalize_axis("moveaxis", source, x.ndim)
    d = normalize_axis("moveaxis", destination, x.ndim)
    perm = [i for i in range(x.ndim) if i != s]
    perm.insert(d, s)
    return transpose(x, perm)


def swapaxes(x, a, b):
    """`x` with axes `a` and `b` exchanged.

    x: an array. a, b: the two axes (negative counts from the end).
    """
    x = asarray(x)
    perm = list(range(x.ndim))
    a, b = normalize_axis("swapaxes", a, x.ndim), normalize_axis("swapaxes", b, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def expand_dims(x, axis):
    """`x` with new axes of size 1 inserted.

    x: an array. axis: an int or a tuple of ints, positions in the result (negative counts from its end).
    """
    x = asarray(x)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = x.ndim + len(axes)
    axes = sorted(normalize_axis("expand_dims", a, ndim) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, shape)


def squeeze(x, axis=None):
    """`x` without axes of size 1.

    x: an array. axis: an int or a tuple of ints to drop (each must have size 1, else ShapeError);
    None drops every axis of size 1.
    """
    x = asarray(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = _axes("squeeze", axis, x.ndim)
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise ShapeError(f"squeeze: axis {bad[0]} of shape {x.shape} has size {x.shape[bad[0]]}, not 1")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def broadcast_to(x, shape):
    """`x` broadcast to `shape` (NumPy's rules; the result is a new immutable array, not a view).

    x: an array or scalar. shape: the target shape, of at least x.ndim dimensions.
    """
    x = _operand(x)
    if not isinstance(x, (Array, Tracer)):
        x = asarray(x)
    shape = tuple(shape)
    if len(shape) < x.ndim or broadcast_shapes("broadcast_to", x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast shape {x.shape} to {shape}")
    if shape == x.shape:
        return x
    return bind(P["broadcast_to"], x, shape=shape)


def broadcast_arrays(*xs):
    """The arrays `xs` broadcast to their common shape, as a list.

    xs: any number of arrays or scalars.
    """
    xs = [asarray(x) for x in xs]
    shape = broadcast_shapes("broadcast_arrays", *(x.shape for x in xs))
    return [broadcast_to(x, shape) for x in xs]


def ravel(x):
    """`x` flattened to one dimension, in row-major order.

    x: an array.
    """
    return reshape(x, (-1,))


def concatenate(xs, axis=0):
    """The arrays `xs` joined along an existing axis.

    xs: a non-empty sequence of arrays of at least one dimension, promoted to one dtype, with equal shapes off
    `axis`. axis: the axis they are joined along (0 by default).
    """
    xs = list(xs)
    if not xs:
        raise ShapeError("concatenate: expected a non-empty sequence of arrays, got an empty one")
    xs = promote("concatenate", *xs)
    xs = [asarray(x) for x in xs]
    nd = xs[0].ndim
    if nd == 0:
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    a = normalize_axis("concatenate", axis, nd)
    for x in xs[1:]:
        if x.ndim != nd or builtins.any(x.shape[i] != xs[0].shape[i] for i in range(nd) if i != a):
            raise ShapeError(f"concatenate: shapes {xs[0].shape} and {x.shape} differ off axis {axis}")
    if len(xs) == 1:
        return xs[0]
    return bind(P["concatenate"], *xs, axis=a)


def stack(xs, axis=0):
    """The arrays `xs` joined along a new axis.

    xs: a non-empty sequence of arrays of one shape, promoted to one dtype. axis: the new axis's position in
    the result (0 by default).
    """
    xs = [asarray(x) for x in _operands(list(xs))]
    if not xs:
        raise ShapeError("stack: needs at least one array")
    shapes = {x.shape for x in xs}
    if len(shapes) > 1:
        raise ShapeError(f"stack: every array must have the same shape, got {sorted(shapes)}")
    a = normalize_axis("stack", axis, xs[0].ndim + 1)
    return concatenate([expand_dims(x, a) for x in xs], a)


def split(x, indices_or_sections, axis=0):
    """`x` cut into pieces along `axis`, as a list.

    x: an array. indices_or_sections: an int n (n equal pieces; ShapeError if the axis does not divide) or a
    sequence of cut points (clipped to the axis). axis: the axis cut (0 by default).
    """
    x = asarray(x)
    a = normalize_axis("split", axis, x.ndim)
    n = x.shape[a]
    if isinstance(indices_or_sections, int):
        if indices_or_sections <= 0 or n % indices_or_sections:
            raise ShapeError(f"split: axis {axis} of size {n} does not split into {indices_or_sections} equal parts")
        step = n // indices_or_sections
        bounds = list(range(0, n + 1, step)) if step else [0] * (indices_or_sections + 1)
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i), 0), n) for i in indices_or_sections] + [n]
    return [slice_in_dim(x, lo, hi, axis=a) for lo, hi in zip(bounds[:-1], bounds[1:])]


def slice_in_dim(x, start, limit, stride=1, axis=0):
    starts = [0] * x.ndim
    limits = list(x.shape)
    strides = [1] * x.ndim
    starts[axis], limits[axis], strides[axis] = start, builtins.max(limit, start), stride
    return _slice(x, starts, limits, strides)


def _slice(x, starts, limits, strides):
    if tuple(starts) == (0,) * x.ndim and tuple(limits) == x.shape and builtins.all(s == 1 for s in strides):
        return x
    return bind(P["slice"], x, starts=tuple(starts), limits=tuple(limits), strides=tuple(strides))


def flip(x, axis=None):
    """`x` with the order of its elements reversed along `axis`.

    x: an array. axis: an int, a tuple of ints, or None (every axis).
    """
    x = asarray(x)
    axes = _axes("flip", axis, x.ndim)
    return bind(P["rev"], x, axes=axes) if axes else x


def pad(x, pad_width, mode="constant", constant_values=0, *, stat_length=None, end_values=0,
        reflect_type="even"):
    """`x` padded along each axis, in one of np.pad's modes.

    x: an array. pad_width: n, (before, after), or one (before, after) pair per axis, in non-negative ints.
    mode: "constant" (the default), "edge", "reflect", "symmetric", "wrap", "linear_ramp", "maximum",
    "minimum", "mean", "median" or "empty" (zeros here), as np.pad and jnp.pad (rune.nx.padding).
    constant_values: the value of the new elements in mode "constant", converted to x's dtype: a scalar, or
    NumPy's (before, after) / one (before, after) pair per axis of scalars.
    stat_length: how many elements at each edge the statistic modes use (all by default; NumPy's forms).
    end_values: where linear_ramp starts (0 by default). reflect_type: "even" (the default) or "odd" for the
    reflect and symmetric modes.
    """
    x = asarray(x)
    # NumPy's forms: n, (n,), (before, after), ((before, after),) or one pair per axis.
    try:
        widths = np.asarray(pad_width)
        if widths.dtype.kind not in "iu":
            raise ValueError
        config = np.broadcast_to(widths, (x.ndim, 2)).tolist()
    except ValueError:
        config = None
    if config is None or builtins.any(lo < 0 or hi < 0 for lo, hi in config):
        raise ShapeError(f"pad: pad_width must be n, (before, after) or one (before, after) pair per axis "
                         f"of shape {x.shape}, in non-negative ints; got {pad_width!r}")
    per_axis = not isinstance(constant_values, (Array, Tracer)) and np.ndim(constant_values) > 0
    if not isinstance(mode, str) or mode != "constant" or per_axis:
        return _LATER["pad_mode"](x, config, mode, stat_length, end_values, reflect_type, constant_values)
    if type(constant_values) in _SCALARS:
        constant_values = _literal("pad", constant_values, x.dtype)
    value = constant_like(constant_values, x, x.dtype)
    return bind(P["pad"], x, value, config=tuple((int(lo), int(hi)) for lo, hi in config))


# Functions of modules built on this one that ops' functions hand over to (pad's modes other than constant,
# the nonzero of where(cond)): those modules register them when rune.nx is imported.
_LATER = {}


def constant_like(value, like, dtype=None):
    """`value` as an array operand of `like`: a rune array stays as it is (so a
    device mismatch is reported, never fixed silently); a Python or NumPy value
    becomes a constant placed with `like`, as a Python scalar would be."""
    if isinstance(value, (Array, Tracer)):
        return value if dtype is None else astype(value, dtype)
    return asarray(value, dtype, like.device)


def take(x, indices, axis=None):
    """Elements of `x` at `indices` along `axis` (JAX's take: out-of-bounds indices are clamped).

    x: an array. indices: an integer array or list (negative counts from the end); the result's shape puts
    indices' shape in place of `axis`. axis: an int, or None to index the flattened array.
    """
    x = asarray(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    axis = normalize_axis("take", axis, x.ndim)
    idx = constant_like(indices, x)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"take: indices must be integers, got {idx.dtype.name}")
    return bind(P["gather"], x, idx, axis=axis)


def dynamic_slice(x, start_indices, slice_sizes):
    """The window of `x` of size `slice_sizes` starting at `start_indices` (lax.dynamic_slice).

    x: an array. start_indices: one start per axis, ints or integer scalars that may be traced; negative
    counts from the end, and starts are clamped so the window fits, as in JAX. slice_sizes: one static size per
    axis.
    """
    x = asarray(x)
    starts = [constant_like(s, x, dt.int32) for s in start_indices]
    sizes = tuple(int(s) for s in slice_sizes)
    if len(starts) != x.ndim or len(sizes) != x.ndim:
        raise ShapeError(f"dynamic_slice: expected {x.ndim} start indices and sizes for shape {x.shape}, "
                         f"got {len(starts)} and {len(sizes)}")
    if builtins.any(not 0 <= z <= d for z, d in zip(sizes, x.shape)):
        raise ShapeError(f"dynamic_slice: slice sizes {sizes} do not fit in shape {x.shape}")
    return bind(P["dynamic_slice"], x, *starts, sizes=sizes)


def dynamic_update_slice(x, update, start_indices):
    """`x` with the window at `start_indices` replaced by `update` (lax.dynamic_update_slice).

    x: an array. update: an array of x's rank, no larger than `x`, converted to x's dtype. start_indices: one
    start
    per axis, ints or traced integer scalars; clamped so the window fits, as in JAX. The result is a new array:
    `x` is never modified.
    """
    x = asarray(x)
    update = astype(asarray(update), x.dtype)
    starts = [constant_like(s, x, dt.int32) for s in start_indices]
    if len(starts) != x.ndim or update.ndim != x.ndim:
        raise ShapeError(f"dynamic_update_slice: expected rank-{x.ndim} update and {x.ndim} starts, "
                         f"got update shape {update.shape} and {len(starts)} starts")
    if builtins.any(u > d for u, d in zip(update.shape, x.shape)):
        raise ShapeError(f"dynamic_update_slice: update of shape {update.shape} does not fit in {x.shape}")
    return bind(P["dynamic_update_slice"], x, update, *starts)


# ---------------------------------------------------------------- linear algebra

def dot_general(x, y, dimension_numbers):
    """The general tensor contraction of lax.dot_general.

    x, y: arrays, promoted to one dtype. dimension_numbers: ((x_contract, y_contract), (x_batch, y_batch)),
    tuples of axes; the result's axes are the batch axes, then x's free axes, then y's.
    """
    x, y = promote("dot_general", x, y)
    x, y = asarray(x), asarray(y)
    (lc, rc), (lb, rb) = dimension_numbers
    dims = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    for a, b in zip(dims[0][0] + dims[1][0], dims[0][1] + dims[1][1]):
        if x.shape[a] != y.shape[b]:
            raise ShapeError(f"dot_general: axis {a} of {x.shape} and axis {b} of {y.shape} differ")
    return bind(P["dot_general"], x, y, dims=dims)


def matmul(x, y):
    """The matrix product x @ y, batched over leading axes (NumPy's matmul).

    x, y: arrays of at least one dimension, promoted to one dtype; a 1-d operand is a vector (its axis is
    dropped from the result) and the leading batch axes broadcast.
    """
    x, y = promote("matmul", x, y)
    x, y = asarray(x), asarray(y)
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError("matmul: operands must have at least one dimension; use * for scalars")
    vx, vy = x.ndim == 1, y.ndim == 1
    if vx:
        x = reshape(x, (1, x.shape[0]))
    if vy:
        y = reshape(y, (y.shape[0], 1))
    if x.shape[-1] != y.shape[-2]:
        raise ShapeError(f"matmul: contracting dimensions differ: {x.shape} @ {y.shape} "
                         f"({x.shape[-1]} vs {y.shape[-2]})")
    if x.ndim > 2 and y.ndim == 2 and not vy:
        # a stack of rows times one matrix (a dense layer): one product over all the rows,
        # never the matrix broadcast to a batch (per-batch products, and a gradient
        # summed over that batch after them)
        return bind(P["dot_general"], x, y, dims=(((x.ndim - 1,), (0,)), ((), ())))
    batch = broadcast_shapes("matmul", x.shape[:-2], y.shape[:-2])
    if x.ndim > 2 or y.ndim > 2:
        x = broadcast_to(x, batch + x.shape[-2:])
        y = broadcast_to(y, batch + y.shape[-2:])
    nb = len(batch)
    out = bind(P["dot_general"], x, y, dims=(((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))))
    if vx:
        out = squeeze(out, -2)
    if vy:
        out = squeeze(out, -1)
    return out


def dot(x, y):
    """NumPy's dot: x * y for scalars, matmul(x, y) when y.ndim <= 2, else contracted over x's last axis.

    x, y: arrays or scalars; when y.ndim > 2 the contraction is with y's second-to-last axis.
    """
    x, y = (asarray(v) for v in _operands((x, y)))
    if x.ndim == 0 or y.ndim == 0:
        return multiply(x, y)
    if y.ndim <= 2:
        return matmul(x, y)
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 2,)), ((), ())))


def vdot(x, y):
    """sum(conj(x) * y) over the flattened arrays (NumPy's vdot conjugates its first argument).

    x, y: arrays of the same size.
    """
    return sum(multiply(conj(ravel(x)), ravel(y)))


def outer(x, y):
    """The outer product x[i] * y[j] of the flattened arrays, of shape (x.size, y.size).

    x, y: arrays or scalars.
    """
    return multiply(reshape(x, (-1, 1)), reshape(y, (1, -1)))


def inner(x, y):
    """The inner product over the last axes of `x` and `y` (NumPy's inner).

    x, y: arrays whose last axes have one size.
    """
    x, y = (asarray(v) for v in _operands((x, y)))
    return dot_general(x, y, (((x.ndim - 1,), (y.ndim - 1,)), ((), ())))


def tensordot(x, y, axes=2):
    """The sum of products over axes of `x` and `y` (NumPy's tensordot).

    x, y: arrays. axes: an int n (x's last n axes against y's first n), or a pair (x_axes, y_axes) of ints
    or sequences (negative counts from the end); 2 by default.
    """
    x, y = (asarray(v) for v in _operands((x, y)))
    if isinstance(axes, int):
        lc, rc = tuple(range(x.ndim - axes, x.ndim)), tuple(range(axes))
    else:
        lc, rc = (tuple(a) if not isinstance(a, int) else (a,) for a in axes)
        # Negative axes count from the end, as everywhere (the standard's tensordot allows them).
        lc = tuple(normalize_axis("tensordot", a, x.ndim) for a in lc)
        rc = tuple(normalize_axis("tensordot", a, y.ndim) for a in rc)
    return dot_general(x, y, ((lc, rc), ((), ())))


def einsum(spec, *operands):
    """Einstein summation over any number of operands, as pairwise dot_generals.

    spec: NumPy's subscripts ("ij,jk->ik"; "..." and implicit output allowed; a repeated index within one
    term takes a diagonal). operands: the arrays, one per term.
    """
    spec = spec.replace(" ", "")
    operands = [asarray(o) for o in _operands(operands)]
    if "." in spec:
        spec = _expand_ellipsis(spec, operands)
    if "->" in spec:
        lhs, out = spec.split("->")
    else:
        lhs = spec
        counts = {}
        for c in lhs.replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        out = "".join(sorted(c for c, k in counts.items() if k == 1))
    terms = lhs.split(",")
    unknown = set(out) - set("".join(terms))
    if unknown or len(set(out)) != len(out):
        raise ShapeError(f"einsum: the output {out!r} of {spec!r} must name distinct indices of the "
                         f"inputs" + (f" ({''.join(sorted(unknown))} appear in no input)" if unknown else ""))
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: {spec!r} names {len(terms)} operands, got {len(operands)}")
    for t, o in zip(terms, operands):
        if len(t) != o.ndim:
            raise ShapeError(f"einsum: term {t!r} names {len(t)} axes, operand has shape {o.shape}")
    pairs = [_einsum_diagonals(o, t) for o, t in zip(operands, terms)]
    operands, terms = [p[0] for p in pairs], [p[1] for p in pairs]
    acc, acc_t = operands[0], terms[0]
    for i in range(1, len(operands)):
        later = "".join(terms[i + 1:]) + out
        acc, acc_t = _einsum_pair(acc, acc_t, operands[i], terms[i], later)
    keep = [c for c in acc_t if c in out]
    drop = tuple(i for i, c in enumerate(acc_t) if c not in out)
    if drop:
        acc = sum(acc, drop)
    return transpose(acc, [keep.index(c) for c in out]) if keep else acc


def _expand_ellipsis(spec, operands):
    """The spec with each '...' replaced by letters for the axes it stands for
    (aligned from the right across operands, as NumPy does)."""
    lhs, arrow, out = spec.partition("->")
    terms = lhs.split(",")
    free = [c for c in string.ascii_letters if c not in spec]
    counts = [o.ndim - (len(t) - 3) if "..." in t else 0 for t, o in zip(terms, operands)]
    width = builtins.max(counts, default=0)
    letters = "".join(free[:width])
    terms = [t.replace("...", letters[width - k:]) for t, k in zip(terms, counts)]
    if arrow:
        out = out.replace("...", letters)
    else:
        single = [c for c in "".join(terms) if "".join(terms).count(c) == 1 and c not in letters]
        out = letters + "".join(sorted(single))
    return ",".join(terms) + "->" + out


def _einsum_diagonals(x, t):
    """An index repeated within one term takes the diagonal of those axes."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        p, q = t.index(c), t.index(c, t.index(c) + 1)
        n = x.shape[p]
        if x.shape[q] != n:
            raise ShapeError(f"einsum: index {c!r} in {t!r} names axes of sizes {n} and {x.shape[q]}")
        rest = [i for i in range(x.ndim) if i not in (p, q)]
        flat = reshape(transpose(x, rest + [p, q]), tuple(x.shape[i] for i in rest) + (n * n,))
        diagonal = multiply(iota((n,), dt.int32, 0, x.device), n + 1)
        x = bind(P["gather"], flat, diagonal, axis=len(rest))
        t = "".join(t[i] for i in rest) + c
    return x, t


def _einsum_pair(x, xt, y, yt, later):
    # Indices in neither the other operand nor later terms are summed right away.
    x, xt = _einsum_sum_private(x, xt, yt + later)
    y, yt = _einsum_sum_private(y, yt, xt + later)
    batch = [c for c in xt if c in yt and c in later]
    contract = [c for c in xt if c in yt and c not in later]
    dims = ((tuple(xt.index(c) for c in contract), tuple(yt.index(c) for c in contract)),
            (tuple(xt.index(c) for c in batch), tuple(yt.index(c) for c in batch)))
    out = dot_general(x, y, dims)
    out_t = "".join(batch) + "".join(c for c in xt if c not in batch and c not in contract) + \
        "".join(c for c in yt if c not in batch and c not in contract)
    return out, out_t


def _einsum_sum_private(x, xt, others):
    private = tuple(i for i, c in enumerate(xt) if c not in others)
    if not private:
        return x, xt
    return sum(x, private), "".join(c for i, c in enumerate(xt) if i not in private)


