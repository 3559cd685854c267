"""rune.nx as a Python Array API standard namespace (2024.12): the version,
`__array_namespace_info__`, the dtype functions (finfo, iinfo, isdtype,
can_cast, result_type), the constants, the standard's names beside NumPy's,
and the standard's keywords where they differ from NumPy's (`copy=` on
asarray/astype/reshape, `correction=` on var/std).

Everything here is a thin layer over rune.nx.ops; the functions it wraps keep
their NumPy-style signatures for rune's own code.
"""
import builtins
import math

import ml_dtypes
import numpy as np

from ..core.trace import Tracer
from ..errors import ArgumentError, DTypeError
from ..core import dtypes as dt
from . import ops

__array_api_version__ = "2024.12"

e, pi, inf, nan = math.e, math.pi, math.inf, math.nan
newaxis = None


# ---------------------------------------------------------------- dtype functions

class finfo_object:
    """Machine limits of a floating dtype, as Python floats (the standard's finfo_object)."""

    def __init__(self, dtype):
        info = ml_dtypes.finfo(dt.real_dtype(dtype))
        # A complex dtype reports its parts' float dtype (the standard's finfo_object.dtype).
        self.bits, self.dtype = int(info.bits), dt.real_dtype(dtype)
        self.eps, self.max, self.min = float(info.eps), float(info.max), float(info.min)
        self.smallest_normal = float(info.smallest_normal)

    def __repr__(self):
        return f"finfo(dtype={self.dtype.name}, bits={self.bits}, eps={self.eps}, max={self.max})"


class iinfo_object:
    """Limits of an integer dtype (the standard's iinfo_object)."""

    def __init__(self, dtype):
        info = np.iinfo(dtype)
        self.bits, self.max, self.min, self.dtype = int(info.bits), int(info.max), int(info.min), dtype

    def __repr__(self):
        return f"iinfo(dtype={self.dtype.name}, min={self.min}, max={self.max})"


def _dtype_of(x):
    return x.dtype if isinstance(x, (ops.Array, Tracer)) else dt.dtype(x)


def finfo(type):
    """Limits of a floating dtype (eps, max, min, smallest_normal, bits), as Python floats.

    type: a float or complex dtype, or an array of one; a complex dtype reports its parts' float dtype's
    limits (and that dtype), as the standard says.
    """
    d = _dtype_of(type)
    if not dt.is_inexact(d):
        raise DTypeError(f"finfo: expected a floating or complex dtype, got {d.name}")
    return finfo_object(d)


def iinfo(type):
    """Limits of an integer dtype (min, max, bits).

    type: an integer dtype, or an array of one.
    """
    d = _dtype_of(type)
    if not dt.is_int(d):
        raise DTypeError(f"iinfo: expected an integer dtype, got {d.name}")
    return iinfo_object(d)


_KINDS = {
    "bool": lambda d: d == dt.bool_,
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": dt.is_float,
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iuc" or dt.is_float(d),
}


def isdtype(dtype, kind):
    """Whether `dtype` is of `kind`.

    dtype: a dtype. kind: a dtype, one of the standard's kind names ('bool', 'signed integer',
    'unsigned integer', 'integral', 'real floating', 'complex floating', 'numeric'), or a tuple of those.
    """
    dtype = dt.dtype(dtype)
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ArgumentError(f"isdtype: unknown kind {kind!r}; expected a dtype or one of {sorted(_KINDS)}")
        return _KINDS[kind](dtype)
    return dtype == dt.dtype(kind)


def result_type(*arrays_and_dtypes):
    """The dtype the standard's promotion gives these arrays, dtypes and Python scalars.

    arrays_and_dtypes: at least one array, dtype or Python scalar; scalars are weak (NEP 50): they never widen
    an array's dtype within a kind.
    """
    if not arrays_and_dtypes:
        raise ArgumentError("result_type: expected at least one array or dtype")
    keys = []
    for v in arrays_and_dtypes:
        if isinstance(v, (ops.Array, Tracer)):
            keys.append((v.dtype, v.weak))
        elif type(v) in (bool, int, float, complex):
            keys.append((dt.weak_dtype_of(v), True))
        else:
            keys.append((dt.dtype(v), False))
    return dt.promote(keys)[0]


def can_cast(from_, to, /):
    """Whether promotion allows `from_` to become `to` (the two promote to `to` itself).

    from_: a dtype or an array. to: a dtype. True when no value would change kind or lose range.
    """
    src, dst = _dtype_of(from_), dt.dtype(to)
    return dt.promote(((src, False), (dst, False)))[0] == dst


# ---------------------------------------------------------------- namespace info

class _Info:
    """What `__array_namespace_info__()` returns: facts about this namespace."""

    def capabilities(self):
        # Both work eagerly (and under grad); under jit they raise
        # ConcretizationError, as every data-dependent shape must.
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        from ..core.devices import current_default
        return current_default()

    def devices(self):
        from ..core.devices import devices
        return list(devices())

    def default_dtypes(self, *, device=None):
        out = {"real floating": dt.default_float, "integral": dt.default_int, "indexing": dt.default_int}
        out["complex floating"] = dt.default_complex
        return out

    def dtypes(self, *, device=None, kind=None):
        names = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float32", "float64", "complex64", "complex128")
        table = {n: dt.dtype(n) for n in names if n in dt._BY_NAME}
        if kind is None:
            return table
        return {n: d for n, d in table.items() if isdtype(d, kind)}


def __array_namespace_info__():
    """The standard's inspection object: capabilities(), default_device(), devices(), default_dtypes(), dtypes().
    """
    return _Info()


# ---------------------------------------------------------------- the standard's keywords

def asarray(obj, dtype=None, device=None, copy=None):
    """`obj` as an Array (NumPy arrays keep their dtype, Python scalars and lists take rune's defaults).

    obj: an Array, a NumPy array, a DLPack producer, a scalar or nested sequences. dtype: the result's dtype.
    device: where it is placed (default: the default device, or where a rune array lies). copy: rune arrays
    are immutable, so sharing a buffer is never observable: copy=True always gives a fresh buffer (a NumPy
    source may then change without effect); copy=False is refused only where a copy cannot be avoided (a dtype
    conversion, a Python sequence).
    """
    if copy is False:
        same = isinstance(obj, (ops.Array, Tracer)) and (dtype is None or dt.dtype(dtype) == obj.dtype)
        if not same and not (isinstance(obj, np.ndarray) and (dtype is None or np.dtype(dtype) == obj.dtype)):
            raise ValueError("asarray: copy=False, but making this array needs a copy (a conversion of "
                             "dtype or of a Python object)")
    return ops.asarray(obj, dtype, device)


def astype(x, dtype, copy=True, device=None):
    """`x` converted to `dtype` (a strong dtype from then on), then placed on `device` if given.

    x: an array. dtype: the target dtype; complex to real is refused (take real or abs first). copy: no
    visible effect, since arrays are immutable. device: where the result is placed (default: where `x` lies).
    """
    out = ops.astype(x, dtype)
    if device is not None:
        from .placement import place
        out = place(out, device)
    return out


def reshape(x, shape, copy=None):
    """`x` with a new shape and the same elements in row-major order.

    x: an array. shape: an int or a sequence of ints, with at most one -1. copy: no visible effect, since
    arrays are immutable.
    """
    return ops.reshape(x, shape)


def _with_correction(stat):
    name = stat.__name__

    def op(x, axis=None, keepdims=False, ddof=0, *, correction=None, **kwargs):
        """The standard's `correction=` (NumPy's ddof); with N - correction <= 0 the result is NaN."""
        x = ops.asarray(x)
        c = ddof if correction is None else correction
        out = stat(x, axis, keepdims, c, **kwargs)
        axes = ops._axes(name, axis, x.ndim)
        if math.prod(x.shape[a] for a in axes) - c <= 0:
            out = ops.add(out, out.dtype.type(math.nan))     # no degrees of freedom left
        return out
    op.__name__ = name
    op.__doc__ = stat.__doc__
    return op


var, std = _with_correction(ops.var), _with_correction(ops.std)


def permute_dims(x, /, axes):
    """`x` with its axes permuted (the standard's name for transpose).

    x: an array. axes: a permutation of range(x.ndim).
    """
    return ops.transpose(x, axes)


def broadcast_shapes(*shapes):
    """The shape that `shapes` broadcast to, by NumPy's rules (ShapeError if they do not).

    shapes: any number of shapes (sequences of ints).
    """
    return ops.broadcast_shapes("broadcast_shapes", *(tuple(s) for s in shapes))


def isin(x1, x2, /, *, invert=False):
    """Whether each element of `x1` occurs in `x2` (a comparison of every pair).

    x1: an array. x2: the values looked for (any shape). invert: return the negation (elements not in `x2`).
    """
    x1, x2 = (ops.asarray(v) for v in ops._operands((x1, x2)))
    hits = ops.any(ops.equal(ops.expand_dims(x1, -1), ops.reshape(x2, (1,) * x1.ndim + (-1,))), -1)
    return ops.logical_not(hits) if invert else hits


bitwise_left_shift, bitwise_right_shift, bitwise_invert = ops.left_shift, ops.right_shift, ops.invert


def empty(shape, *, dtype=None, device=None):
    """An array of `shape` (zeros: arrays are immutable, so contents are never left undefined).

    shape: an int or a sequence of ints. dtype: float32 by default. device: default: the default device.
    """
    from .creation import zeros
    return zeros(shape, dtype, device)


def empty_like(x, /, *, dtype=None, device=None):
    """An array of the shape of `x` (zeros: arrays are immutable, so contents are never undefined).

    x: an array. dtype, device: default to x's.
    """
    from .creation import zeros_like
    return zeros_like(x, dtype, device)


def concat(arrays, /, *, axis=0):
    """The arrays joined along an existing axis (the standard's name for concatenate).

    arrays: a non-empty sequence of arrays, promoted to one dtype. axis: the axis they are joined along;
    None joins the flattened arrays.
    """
    if axis is None:
        return ops.concatenate([ops.reshape(ops.asarray(a), (-1,)) for a in ops._operands(list(arrays))], 0)
    return ops.concatenate(arrays, axis)


def moveaxis(x, source, destination):
    """`x` with axes moved to new positions (the others keep their order).

    x: an array. source, destination: ints or equal-length tuples of distinct axes.
    """
    x = ops.asarray(x)
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ArgumentError(f"moveaxis: source {source} and destination {destination} differ in length")
    src = [ops.normalize_axis("moveaxis", a, x.ndim) for a in src]
    dst = [ops.normalize_axis("moveaxis", a, x.ndim) for a in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ArgumentError(f"moveaxis: repeated axis in source {source} or destination {destination}")
    rest = [a for a in range(x.ndim) if a not in src]
    perm = [None] * x.ndim
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(rest)
    return ops.transpose(x, [p if p is not None else next(it) for p in perm])
