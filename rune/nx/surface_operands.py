"""Operand helpers shared by the NumPy-surface families (elementwise_math, comparisons, calculus,
histograms, sets, ...): their __all__ builder, the coercions of operands to arrays, and the
scatter-add that counts (bincount, the histograms, unique's counts).
"""
import numpy as np

from ..core import dtypes as dt
from ..core.array import Array
from ..core.trace import Tracer
from . import ops
from .creation import zeros


def exporter(names):
    """A decorator that appends each function's name to `names` (a family module's __all__)."""
    def public(fn):
        names.append(fn.__name__)
        return fn
    return public


def _array(x):
    """`x` as an operand array (Python scalars become weak arrays)."""
    return x if isinstance(x, (Array, Tracer)) else ops.asarray(x)


def _const(x, value):
    """`value` as a scalar of `x`'s dtype (a strong literal that does not promote)."""
    return np.asarray(value).astype(x.dtype)[()] if x.dtype != dt.bfloat16 else x.dtype.type(value)


def _is_traced_or_array(v):
    return isinstance(v, (Array, Tracer))


def _index_dtype(n):
    return dt.int64 if n >= 2 ** 31 else dt.default_int


def _iota(n, like, dtype=None):
    """0, 1, ..., n-1 as a constant placed with `like`."""
    return ops.constant_like(np.arange(n, dtype=dtype or np.int32), like)


def _scatter_add(length, index, values, like):
    """A length-`length` array with values[i] added at index[i]; indices outside [0, length) are dropped."""
    index = ops.reshape(index, (-1,))
    inside = ops.logical_and(ops.greater_equal(index, 0), ops.less(index, length))
    index = ops.astype(ops.where(inside, index, length), _index_dtype(length + 1))
    values = ops.broadcast_to(values, index.shape)
    return ops.bind(ops.P["scatter"], zeros((length,), values.dtype, like.device), index, values, axis=0,
                    mode="add")
