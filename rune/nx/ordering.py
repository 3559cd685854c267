"""NumPy's relatives of sort: partition/argpartition (the sorted axis, which NumPy's contract
allows), lexsort and sort_complex.
"""
import numpy as np

from ..core import dtypes as dt
from ..core.trace import Tracer
from ..errors import ArgumentError, DTypeError, ShapeError
from . import ops
from .buffers import Array
from .host_values import concrete
from .shapes import take_along_axis
from .sorting import argsort, sort
from .surface_operands import _is_traced_or_array

__all__ = ["argpartition", "partition", "lexsort", "sort_complex"]


def _check_kth(name, kth, n):
    ks = np.atleast_1d(np.asarray(kth))
    if ks.dtype.kind not in "iu":
        raise DTypeError(f"{name}: kth must be integers, got {ks.dtype}")
    if ks.size and not ((ks >= -n).all() and (ks < n).all()):
        raise ArgumentError(f"{name}: kth {kth} is out of range for an axis of length {n}")


def _partition_operand(name, a, kth, axis):
    a = ops.asarray(a)
    if isinstance(kth, (Array, Tracer)):
        kth = concrete(name, kth, "kth")
    if axis is None:
        a, axis = ops.reshape(a, (-1,)), 0
    if a.ndim == 0:
        raise ShapeError(f"{name}: expected an array of at least 1 dimension, got a 0-d array")
    ax = ops.normalize_axis(name, axis, a.ndim)
    _check_kth(name, kth, a.shape[ax])
    return a, ax


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """`a` rearranged along `axis` so that each `kth` position holds what a sort puts there, smaller ones before.

    rune returns the fully sorted axis, one of the arrangements NumPy's contract allows (NumPy leaves the order
    within each side unspecified). a: an array. kth: an int or a sequence of ints (positions, negative from the
    end). axis: an int, or None for the flattened array. kind, order: accepted for NumPy (order must be None).
    """
    a, ax = _partition_operand("partition", a, kth, axis)
    return sort(a, axis=ax)


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """The positions that partition `a` along `axis` at `kth` (see partition: rune's are the stable argsort).

    a: an array. kth: an int or a sequence of ints. axis: an int, or None for the flattened array. kind, order:
    accepted for NumPy (order must be None). Indices are int32.
    """
    a, ax = _partition_operand("argpartition", a, kth, axis)
    return argsort(a, axis=ax)


def lexsort(keys, axis=-1):
    """The positions that sort by several keys: the last key is the primary one, ties broken by the one before.

    keys: a sequence of arrays of one shape, or an array whose first axis indexes the keys. axis: the axis sorted
    along (-1 by default). Indices are int32; the sort is stable.
    """
    if _is_traced_or_array(keys) or isinstance(keys, np.ndarray):
        keys = ops.asarray(keys)
        if keys.ndim == 0:
            raise ShapeError("lexsort: keys must hold at least one key, got a 0-d array")
        keys = [ops.squeeze(k, 0) for k in ops.split(keys, keys.shape[0], 0)] if keys.shape[0] else []
    keys = [ops.asarray(k) for k in keys]
    if not keys:
        raise ShapeError("lexsort: expected at least one key, got none")
    shape = keys[0].shape
    if any(k.shape != shape for k in keys):
        raise ShapeError(f"lexsort: all keys must have one shape, got {[k.shape for k in keys]}")
    if not shape:
        raise ShapeError("lexsort: keys must have at least 1 dimension, got 0-d keys")
    ax = ops.normalize_axis("lexsort", axis, len(shape))
    order = argsort(keys[0], axis=ax)
    for k in keys[1:]:   # each later key re-sorts stably: earlier keys break its ties
        order = take_along_axis(order, argsort(take_along_axis(k, order, ax), axis=ax), ax)
    return order


# NumPy's sort_complex: 8/16-bit integers become complex64, every other real dtype complex128.
_COMPLEX64_FROM = (dt.int8, dt.int16, dt.uint8, dt.uint16)


def sort_complex(a):
    """`a` sorted along its last axis by real part, then imaginary part; the result is complex.

    a: an array of at least 1 dimension (real arrays become complex64 from 8/16-bit integers, complex128 from
    every other real dtype, as NumPy's).
    """
    a = ops.asarray(a)
    if a.ndim == 0:
        raise ShapeError("sort_complex: expected an array of at least 1 dimension, got a 0-d array")
    want = dt.complex64 if a.dtype in _COMPLEX64_FROM else dt.complex128
    if not dt.is_complex(a.dtype):
        return ops.astype(sort(a, axis=-1), want)
    return take_along_axis(a, lexsort((ops.imag(a), ops.real(a)), axis=-1), -1)
