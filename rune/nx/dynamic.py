"""Functions whose result's shape depends on the values of their operands
(nonzero, the unique_* family, boolean-mask indexing, repeat with array counts).

They run eagerly, and under grad/jvp/vmap-free eager differentiation, because
their operands are concrete there: the positions are computed on the host and
the values gathered with them as constants, so derivatives flow through the
gather. Under jit (or in a scan/cond body) the operand is abstract and the
result's shape is unknown, so they raise ConcretizationError pointing to the
fixed-shape alternatives (`nx.where`, `size=`), as JAX does.
"""
import collections

import numpy as np

from ..core import dtypes as dt
from . import ops
from .host_values import concrete

def _positions(x, name):
    """The flat positions of x's nonzero elements (host ints) and x as an array."""
    x = ops.asarray(x)
    host = concrete(name, x)
    return np.flatnonzero(host), x


def nonzero(x, *, size=None, fill_value=None):
    """The indices of the nonzero elements of `x`, one array per axis (row-major order).

    x: an array of at least one dimension. size: return exactly that many indices (the first ones, padded with
    fill_value): a fixed shape, so it also works under jit; without it, `x` must be concrete.
    fill_value: the padding index (0 by default).
    """
    x = ops.asarray(x)
    if x.ndim == 0:
        from ..errors import ShapeError
        raise ShapeError("nonzero: a 0-d array has no axes to index; use nx.atleast_1d or reshape it to (1,)")
    if size is not None:
        return _nonzero_sized(x, int(size), fill_value)
    flat, x = _positions(x, "nonzero")
    index_dtype = dt.int64 if x.size >= 2 ** 31 else dt.default_int
    return tuple(ops.constant_like(i.astype(index_dtype), x) for i in np.unravel_index(flat, x.shape))


def _nonzero_sized(x, size, fill_value):
    # The positions of the nonzero elements come first in a stable sort of
    # "is zero": a fixed-shape computation of the first `size` of them.
    from .sorting import argsort
    zero = ops.equal(ops.reshape(x, (-1,)), x.dtype.type(0))
    order = argsort(ops.astype(zero, dt.int8), stable=True)
    if size > x.size:
        order = ops.pad(order, (0, size - x.size))
    order = ops.slice_in_dim(order, 0, size)
    # A position holds a result when it is within x and the element there is nonzero.
    inside = ops.constant_like(np.arange(size) < x.size, x)
    taken = ops.logical_and(inside, ops.logical_not(ops.take(zero, order))) if x.size else inside
    out = []
    for coord in np.unravel_index(np.arange(x.size), x.shape):
        c = ops.take(ops.constant_like(coord.astype(np.int32), x), order) if x.size else order
        fill = 0 if fill_value is None else fill_value
        out.append(ops.where(taken, c, ops.constant_like(fill, x, c.dtype)))
    return tuple(out)


def boolean_mask(x, mask):
    """x[mask] for a boolean mask over x's leading axes: the selected elements
    in row-major order (the mask must be concrete; x may be differentiated)."""
    x = ops.asarray(x)
    m = concrete("boolean mask indexing", mask, "the mask")
    if m.ndim == 0:   # x[True] / x[False]: a new leading axis of length 1 or 0
        x, m = ops.expand_dims(x, 0), m.reshape(1)
    # An axis of length 0 in the mask selects nothing whatever x's length there (as the standard allows).
    if m.ndim > x.ndim or any(k not in (d, 0) for k, d in zip(m.shape, x.shape)):
        from ..errors import IndexingError
        raise IndexingError(f"boolean index of shape {m.shape} does not match the leading axes of the "
                            f"array's shape {x.shape}")
    lead = x.shape[:m.ndim]
    flat = ops.reshape(x, (int(np.prod(lead, dtype=np.int64)),) + x.shape[m.ndim:])
    return ops.take(flat, ops.constant_like(np.flatnonzero(m).astype(np.int32), x), axis=0)


UniqueAllResult = collections.namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = collections.namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = collections.namedtuple("UniqueInverseResult", "values inverse_indices")


def _unique(name, x):
    """Host facts of x's distinct values: the flat index of each one's first
    occurrence, the inverse (shaped like x) and the counts. NaNs are each
    distinct, as the standard asks."""
    x = ops.asarray(x)
    host = concrete(name, x).reshape(-1)
    _, first, inverse, counts = np.unique(host, return_index=True, return_inverse=True, return_counts=True,
                                          equal_nan=False)
    index_dtype = dt.int64 if x.size >= 2 ** 31 else dt.default_int
    const = lambda v: ops.constant_like(np.asarray(v).astype(index_dtype), x)  # noqa: E731
    values = ops.take(ops.reshape(x, (-1,)), const(first), axis=0)
    return values, const(first), const(inverse.reshape(x.shape)), const(counts)


def unique_values(x):
    """The distinct values of `x`, sorted (each NaN distinct).

    x: an array (any shape; the values are taken from the flattened array). The result's shape depends on the
    values, so `x` must be concrete: under jit this raises ConcretizationError.
    """
    return _unique("unique_values", x)[0]


def unique_counts(x):
    """The distinct values of `x`, sorted, and how often each occurs: (values, counts).

    x: an array (any shape; the values are taken from the flattened array). The result's shape depends on the
    values, so `x` must be concrete: under jit this raises ConcretizationError.
    """
    values, _, _, counts = _unique("unique_counts", x)
    return UniqueCountsResult(values, counts)


def unique_inverse(x):
    """The distinct values of `x`, sorted, and where each element of `x` is among them: (values, inverse_indices).

    x: an array (any shape; the values are taken from the flattened array). The result's shape depends on the
    values, so `x` must be concrete: under jit this raises ConcretizationError. inverse_indices has x's shape.
    """
    values, _, inverse, _ = _unique("unique_inverse", x)
    return UniqueInverseResult(values, inverse)


def unique_all(x):
    """The distinct values of `x`, sorted, with first indices, inverse and counts.

    The result is (values, indices, inverse_indices, counts); indices are flat positions.

    x: an array (any shape; the values are taken from the flattened array). The result's shape depends on the
    values, so `x` must be concrete: under jit this raises ConcretizationError.
    """
    return UniqueAllResult(*_unique("unique_all", x))
