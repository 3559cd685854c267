"""np.pad's modes beyond "constant" (edge, reflect, symmetric, wrap, linear_ramp, maximum, minimum, mean,
median, empty), as composites: one axis after another (as NumPy, so corners take what the earlier axes'
padding put there), each a concatenation of the axis with its two new parts.

Edge, wrap and the even reflections are gathers at a static index map (np.pad of the positions themselves),
exact for every dtype; the odd reflections mirror chunks about the edge (2 * edge - mirror), as NumPy;
linear_ramp and the statistics broadcast a value computed from the edge or from `stat_length` elements.
"""
import numpy as np

from ..core import dtypes as dt
from ..errors import ArgumentError, ShapeError
from . import ops, shapes

_INDEX_MODES = ("edge", "wrap", "reflect", "symmetric")
_STAT_MODES = ("maximum", "minimum", "mean", "median")
MODES = ("constant", "empty", "linear_ramp") + _INDEX_MODES + _STAT_MODES


def pad_with_mode(x, config, mode, stat_length=None, end_values=0, reflect_type="even", constant_values=0):
    """`x` padded by `config` ((before, after) per axis) in one of np.pad's modes other than constant, or
    constant with a value per side and axis."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ArgumentError(f"pad: mode must be one of {', '.join(MODES)}; got {mode!r} (constant_values "
                            f"and the other options are keyword arguments)")
    if reflect_type not in ("even", "odd"):
        raise ArgumentError(f"pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    if mode == "empty":   # NumPy leaves the new elements undefined; rune gives zeros, as JAX
        return ops.pad(x, config)
    if mode == "constant":
        values = _per_axis("constant_values", constant_values, x.ndim, lambda v: np.ndim(v) == 0)
        for a, ((lo, hi), (before, after)) in enumerate(zip(config, values)):
            x = ops.pad(x, _one_side(x.ndim, a, lo, 0), constant_values=before)
            x = ops.pad(x, _one_side(x.ndim, a, 0, hi), constant_values=after)
        return x
    stats = _per_axis("stat_length", stat_length, x.ndim, lambda v: v is None or int(v) > 0)
    ends = _per_axis("end_values", end_values, x.ndim, lambda v: np.ndim(v) == 0)
    for a, (lo, hi) in enumerate(config):
        if not lo and not hi:
            continue
        if x.shape[a] == 0:
            raise ShapeError(f"pad: cannot pad the empty axis {a} of shape {x.shape} in mode {mode!r} "
                             f"(only 'constant' and 'empty' can)")
        if mode in _INDEX_MODES:
            x = _by_index(x, a, lo, hi, mode, reflect_type)
        elif mode == "linear_ramp":
            x = _linear_ramp(x, a, lo, hi, ends[a])
        else:
            x = _by_statistic(x, a, lo, hi, mode, stats[a])
    return x


def _one_side(ndim, a, lo, hi):
    return [(lo, hi) if i == a else (0, 0) for i in range(ndim)]


def _per_axis(name, value, ndim, valid):
    """NumPy's forms of a per-axis (before, after) option (v, (v,), (before, after) or one pair per axis)."""
    try:
        pairs = np.broadcast_to(np.asarray(value, dtype=object), (ndim, 2)).tolist()
    except ValueError:
        pairs = None
    if pairs is None or not all(valid(v) for pair in pairs for v in pair):
        raise ArgumentError(f"pad: {name} must be a scalar, (before, after) or one (before, after) pair per "
                            f"axis of the {ndim}-d operand; got {value!r}")
    return pairs


def _joined(x, a, before, after):
    parts = [p for p in (before, x, after) if p is not None]
    return ops.concatenate(parts, a) if len(parts) > 1 else x


def _by_index(x, a, lo, hi, mode, reflect_type):
    n = x.shape[a]
    if reflect_type == "odd" and mode in ("reflect", "symmetric") and n > 1:
        return _odd_reflection(x, a, lo, hi, include_edge=mode == "symmetric")
    index = np.pad(np.arange(n), (lo, hi), mode=mode)
    return ops.take(x, ops.constant_like(index.astype(np.int32), x), axis=a)


def _odd_reflection(x, a, lo, hi, include_edge):
    """NumPy's odd reflection: chunks of at most a period, each mirrored about the current edge (2 * edge -
    mirror), so every chunk continues the trend of the one before (numpy's _set_reflect_both, functionally)."""
    period, e = x.shape[a], int(include_edge)
    while lo or hi:
        have = x.shape[a]
        # The longest mirror that repeats the original whole: whole periods (symmetric), or whole periods less
        # the shared edge element (reflect).
        length = have // period * period if include_edge else (have - 1) // (period - 1) * (period - 1)
        parts = [None, x, None]
        if lo:
            k = min(length, lo)
            mirror = ops.flip(ops.slice_in_dim(x, 1 - e, k + 1 - e, axis=a), a)
            parts[0] = ops.subtract(ops.multiply(_edge(x, a, True), 2), mirror)
            lo -= k
        if hi:
            k = min(length, hi)
            mirror = ops.flip(ops.slice_in_dim(x, have - 1 + e - k, have - 1 + e, axis=a), a)
            parts[2] = ops.subtract(ops.multiply(_edge(x, a, False), 2), mirror)
            hi -= k
        x = _joined(x, a, parts[0], parts[2])
    return x


def _edge(x, a, first):
    n = x.shape[a]
    return ops.slice_in_dim(x, 0, 1, axis=a) if first else ops.slice_in_dim(x, n - 1, n, axis=a)


def _broadcast_along(v, x, a, width):
    return ops.broadcast_to(v, x.shape[:a] + (width,) + x.shape[a + 1:])


def _to_dtype(v, dtype, to_int=ops.round):
    """A float result back in x's dtype: for ints, rounded (np.pad's mean and median) or floored (its
    ramps, np.linspace's rule)."""
    if dt.is_int(dtype) and not dt.is_int(v.dtype):
        v = to_int(v)
    return ops.astype(v, dtype)


def _linear_ramp(x, a, lo, hi, ends):
    work = x if dt.is_inexact(x.dtype) else ops.astype(x, dt.float64)
    parts = []
    for width, end, first in ((lo, ends[0], True), (hi, ends[1], False)):
        if not width:
            parts.append(None)
            continue
        edge = _edge(work, a, first)
        # From the end value towards the edge (np.linspace(end, edge, width, endpoint=False)).
        t = np.arange(width) / width
        shape = [1] * x.ndim
        shape[a] = width
        t = ops.constant_like((t if first else t[::-1]).reshape(shape).astype(work.dtype), work)
        ramp = ops.add(end, ops.multiply(ops.subtract(edge, end), t))
        parts.append(_to_dtype(ramp, x.dtype, ops.floor))
    return _joined(x, a, parts[0], parts[1])


def _statistic(mode, part, a):
    if mode == "maximum":
        return ops.max(part, a, keepdims=True)
    if mode == "minimum":
        return ops.min(part, a, keepdims=True)
    if mode == "mean":
        return ops.mean(part, a, keepdims=True)
    from .order_statistics import median   # the family module that owns sort-based statistics
    return median(part, axis=a, keepdims=True)


def _by_statistic(x, a, lo, hi, mode, stat):
    n = x.shape[a]
    parts = []
    for width, length, first in ((lo, stat[0], True), (hi, stat[1], False)):
        if not width:
            parts.append(None)
            continue
        k = n if length is None else min(int(length), n)
        part = ops.slice_in_dim(x, 0, k, axis=a) if first else ops.slice_in_dim(x, n - k, n, axis=a)
        parts.append(_broadcast_along(_to_dtype(_statistic(mode, part, a), x.dtype), x, a, width))
    return _joined(x, a, parts[0], parts[1])


shapes._LATER["pad_mode"] = pad_with_mode   # what nx.pad calls for a mode other than "constant"
