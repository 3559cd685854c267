"""NumPy's unique and set functions: unique, union1d, intersect1d, setdiff1d and setxor1d.

They sort, mark the first element of each run of equal values and gather the marked ones: exact eagerly
(the count is read from the values), `size=` / `fill_value=` under jit as JAX.
"""
import numpy as np

from ..core import dtypes as dt
from ..core.trace import Tracer
from ..errors import ArgumentError, ConcretizationError, DTypeError
from . import ops
from .buffers import Array
from .host_values import concrete
from .searching import searchsorted
from .sorting import argsort, cumsum, sort
from .surface_operands import _iota, _scatter_add

__all__ = ["intersect1d", "setdiff1d", "setxor1d", "union1d", "unique"]


def _runs(s, equal_nan=True):
    """For a sorted 1-d s: True at the first element of each run of equal values (NaNs one run if equal_nan)."""
    if s.shape[0] == 0:
        return ops.constant_like(np.zeros(0, bool), s)
    head, tail = ops.slice_in_dim(s, 1, s.shape[0]), ops.slice_in_dim(s, 0, s.shape[0] - 1)
    new = ops.not_equal(head, tail)
    if equal_nan and dt.is_inexact(s.dtype):
        new = ops.logical_and(new, ops.logical_not(ops.logical_and(ops.isnan(head), ops.isnan(tail))))
    return ops.concatenate([ops.constant_like(np.ones(1, bool), s), new])


def _selected(name, keep, size):
    """The positions where `keep` holds, in order, and which of them are real: exactly as many as hold
    (eagerly, size None), else the first `size` (padded; a fixed shape, so it runs under jit)."""
    if size is None:
        if isinstance(keep, Tracer) and keep.concrete() is None:
            raise ConcretizationError(
                f"{name}: the number of results depends on the values, which are not known while tracing (inside "
                f"jit, vmap or a scan/cond/while body); pass size= (and fill_value=) to fix it, or use nx.where")
        pos = np.flatnonzero(concrete(name, keep))
        return ops.constant_like(pos.astype(np.int32), keep), None
    size = int(size)
    if size < 0:
        raise ArgumentError(f"{name}: size must be non-negative, got {size}")
    n = keep.shape[0]
    order = argsort(ops.astype(ops.logical_not(keep), dt.int8)) if n else ops.constant_like(np.zeros(0, np.int32), keep)
    if size > n:
        order = ops.pad(order, (0, size - n))
    order = ops.slice_in_dim(order, 0, size)
    valid = ops.less(_iota(size, keep), ops.sum(ops.astype(keep, dt.int32)))
    return order, valid


def _filled(values, valid, fill_value, default):
    if valid is None:
        return values
    fill = default if fill_value is None else ops.constant_like(fill_value, values, values.dtype)
    return ops.where(valid, values, fill)


def _flat(name, ar):
    x = ops.reshape(ops.asarray(ar), (-1,))
    if dt.is_complex(x.dtype):
        raise DTypeError(f"{name}: complex numbers have no order, got {x.dtype.name}")
    return x


def _sorted_runs(name, x, equal_nan=True, positions=True):
    """(the sorting positions or None when not asked for, x sorted, where a run of equal values starts)."""
    if not x.shape[0]:
        return ops.constant_like(np.zeros(0, np.int32), x), x, _runs(x, equal_nan)
    if not positions:   # the values alone sort several times faster than their positions
        s = sort(x)
        return None, s, _runs(s, equal_nan)
    perm = argsort(x)
    s = ops.take(x, perm)
    return perm, s, _runs(s, equal_nan)


def _first_or_zero(s):
    return ops.take(s, 0) if s.shape[0] else ops.constant_like(np.zeros((), s.dtype), s)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           size=None, fill_value=None, sorted=True):
    """The sorted distinct values of `ar`, with where they first occur, the inverse and the counts if asked.

    ar: an array (flattened; with `axis`, the distinct slices along it, eagerly only). return_index,
    return_inverse, return_counts: also return those (int32; the inverse has ar's shape). equal_nan: NaNs are one
    value (else each is distinct). size: return exactly that many values (the first ones, padded with
    fill_value, default the smallest value; padded counts are 0): a fixed shape, needed under jit; without it
    `ar` must be concrete. sorted: accepted for NumPy (the values are always sorted).
    """
    wants = (return_index, return_inverse, return_counts)
    if axis is not None:
        return _unique_axis(ar, axis, wants, equal_nan, size)
    a = ops.asarray(ar)
    if not any(wants) and size is None and type(a) is Array and a.device.platform == "cpu" \
            and a.dtype.kind in "biu":
        # Integers on the host, nothing traced and only the values asked for: NumPy's own
        # unique (hashing where NumPy has it: 1e6 int32 in 14 ms against 27 ms to sort
        # them), whose values are exactly the sorted path's (integers have no -0 or NaN).
        return ops.constant_like(np.unique(np.asarray(a).reshape(-1)), a)
    x = _flat("unique", a)
    perm, s, new = _sorted_runs("unique", x, equal_nan, positions=return_index or return_inverse)
    pos, valid = _selected("unique", new, size)
    n_out = pos.shape[0]
    values = _filled(ops.take(s, pos) if x.shape[0] else ops.reshape(s, (0,)) if not n_out else
                     ops.broadcast_to(_first_or_zero(s), (n_out,)), valid, fill_value, _first_or_zero(s))
    if not any(wants):
        return values
    out = [values]
    zero_i = ops.constant_like(np.zeros((), np.int32), x)
    if return_index:
        first = ops.take(perm, pos) if x.shape[0] else ops.broadcast_to(zero_i, (n_out,))
        out.append(first if valid is None else ops.where(valid, first, zero_i))
    run = ops.subtract(cumsum(ops.astype(new, dt.int32)), 1) if x.shape[0] else zero_i
    if return_inverse:
        inverse = ops.take(run, argsort(perm)) if x.shape[0] else ops.constant_like(np.zeros(0, np.int32), x)
        out.append(ops.reshape(inverse, a.shape))
    if return_counts:
        out.append(_scatter_add(n_out, run, ops.constant_like(np.ones((), np.int32), x), x) if x.shape[0]
                   else ops.broadcast_to(zero_i, (n_out,)))
    return tuple(out)


def _unique_axis(ar, axis, wants, equal_nan, size):
    """unique along an axis: the distinct slices, found on the host; the slices are gathered (differentiable)."""
    if size is not None:
        raise ArgumentError("unique: size= is not supported with axis= (use axis=None, or reshape)")
    a = ops.asarray(ar)
    ax = ops.normalize_axis("unique", axis, a.ndim)
    host = concrete("unique", a, "ar")
    _, first, inverse, counts = np.unique(host, return_index=True, return_inverse=True, return_counts=True,
                                          axis=ax, equal_nan=equal_nan)
    const = lambda v: ops.constant_like(np.asarray(v).astype(np.int32), a)  # noqa: E731
    values = ops.take(a, const(first), axis=ax)
    extra = [const(first), const(inverse.reshape(-1)), const(counts)]
    out = [values] + [e for e, w in zip(extra, wants) if w]
    return values if len(out) == 1 else tuple(out)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted distinct values found in either array.

    ar1, ar2: arrays (flattened). size, fill_value: a fixed result length, padded (needed under jit; see unique).
    """
    x1, x2 = ops.promote("union1d", _flat("union1d", ar1), _flat("union1d", ar2))
    return unique(ops.concatenate([x1, x2]), size=size, fill_value=fill_value)


def _membership(name, ar1, ar2, assume_unique):
    """The flattened, promoted operands, ar1 sorted, the first of each run in it, and whether each is in ar2."""
    x1, x2 = ops.promote(name, _flat(name, ar1), _flat(name, ar2))
    perm, s, new = _sorted_runs(name, x1)
    member = _isin(s, x2)
    return x1, x2, perm, s, new, member


def _isin(s, x2):
    if s.shape[0] == 0 or x2.shape[0] == 0:
        return ops.constant_like(np.zeros(s.shape[0], bool), s)
    # The sorted second operand holds v iff v equals the element at v's insertion point.
    sorted2 = sort(x2)
    at = ops.take(sorted2, ops.clip(searchsorted(sorted2, s), 0, x2.shape[0] - 1))
    return ops.equal(at, s)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None, fill_value=None):
    """The sorted distinct values found in both arrays.

    ar1, ar2: arrays (flattened). assume_unique: accepted (the result is the same). return_indices: also return
    where each value first occurs in ar1 and in ar2 (int32). size, fill_value: a fixed result length, padded
    (needed under jit; see unique).
    """
    x1, x2, perm, s, new, member = _membership("intersect1d", ar1, ar2, assume_unique)
    pos, valid = _selected("intersect1d", ops.logical_and(new, member), size)
    values = _filled(ops.take(s, pos) if s.shape[0] else _empty_or_fill(s, pos), valid, fill_value,
                     _first_or_zero(s))
    if not return_indices:
        return values
    zero = ops.constant_like(np.zeros((), np.int32), x1)
    i1 = ops.take(perm, pos) if s.shape[0] else ops.broadcast_to(zero, pos.shape)
    if x2.shape[0]:
        perm2 = argsort(x2)
        i2 = ops.take(perm2, ops.clip(searchsorted(ops.take(x2, perm2), values), 0, x2.shape[0] - 1))
    else:
        i2 = ops.broadcast_to(zero, pos.shape)
    if valid is not None:
        i1, i2 = ops.where(valid, i1, zero), ops.where(valid, i2, zero)
    return values, i1, i2


def _empty_or_fill(s, pos):
    return ops.broadcast_to(_first_or_zero(s), pos.shape)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct values of ar1 that are not in ar2 (with assume_unique: ar1's own order).

    ar1, ar2: arrays (flattened). assume_unique: ar1's values are distinct; they are kept in their order.
    size, fill_value: a fixed result length, padded (fill default 0; needed under jit; see unique).
    """
    if assume_unique:
        x1, x2 = ops.promote("setdiff1d", _flat("setdiff1d", ar1), _flat("setdiff1d", ar2))
        s, keep = x1, ops.logical_not(_isin_any_order(x1, x2))
    else:
        _, _, _, s, new, member = _membership("setdiff1d", ar1, ar2, assume_unique)
        keep = ops.logical_and(new, ops.logical_not(member))
    pos, valid = _selected("setdiff1d", keep, size)
    zero = ops.constant_like(np.zeros((), s.dtype), s)
    return _filled(ops.take(s, pos) if s.shape[0] else ops.broadcast_to(zero, pos.shape), valid, fill_value, zero)


def _isin_any_order(x1, x2):
    if x1.shape[0] == 0:
        return ops.constant_like(np.zeros(0, bool), x1)
    return _isin(x1, x2)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct values found in exactly one of the arrays.

    ar1, ar2: arrays (flattened). assume_unique: accepted (the result is the same). size, fill_value: a fixed
    result length, padded (fill default: the smallest value; needed under jit; see unique).
    """
    x1, x2 = ops.promote("setxor1d", _flat("setxor1d", ar1), _flat("setxor1d", ar2))
    both = ops.concatenate([x1, x2])
    _, s, new = _sorted_runs("setxor1d", both, positions=False)
    keep = ops.logical_and(new, ops.not_equal(_isin_any_order(s, x1), _isin_any_order(s, x2)))
    pos, valid = _selected("setxor1d", keep, size)
    return _filled(ops.take(s, pos) if s.shape[0] else _empty_or_fill(s, pos), valid, fill_value,
                   _first_or_zero(s))
