"""NumPy's bincount, digitize and histograms (histogram, histogram2d, histogramdd, histogram_bin_edges).

bincount and the histograms are scatter-adds (out-of-range positions go to one past the end, which the
scatter drops); their length is static: eagerly it is computed from the values, under jit it comes from
`length=` / the number of bins.
"""
import builtins

import numpy as np

from ..core import dtypes as dt
from ..core.trace import Tracer
from ..errors import ArgumentError, DTypeError, ShapeError
from . import ops
from .exact_math import compiled_when_eager
from .host_values import concrete
from .searching import searchsorted
from .surface_operands import _iota, _is_traced_or_array, _scatter_add

__all__ = ["bincount", "digitize", "histogram", "histogram2d", "histogram_bin_edges", "histogramdd"]


def bincount(x, weights=None, minlength=0, *, length=None):
    """How often each non-negative integer occurs in `x` (or the sum of `weights` at each).

    x: a 1-d array of non-negative integers (or bools). weights: an array of x's shape, summed per value
    instead of counting (the result keeps its dtype). minlength: the least result length. length: the result's
    length, fixed (values at or past it are dropped): needed under jit, where the largest value is not known.
    Counts are int32.
    """
    x = ops.asarray(x)
    if x.ndim != 1:
        raise ShapeError(f"bincount: x must be 1-d, got shape {x.shape}")
    if x.dtype.kind not in "biu":
        raise DTypeError(f"bincount: x must be non-negative integers, got {x.dtype.name}")
    if length is None:
        host = concrete("bincount", x, "x (pass length= for a fixed result length)")
        if host.size and host.min() < 0:
            raise ArgumentError(f"bincount: x must be non-negative, got {host.min()}")
        length = builtins.max(int(host.max()) + 1 if host.size else 0, int(minlength))
    length = int(length)
    if length < 0:
        raise ArgumentError(f"bincount: length must be non-negative, got {length}")
    if weights is None:
        values = ops.constant_like(np.ones((), np.int32), x)
    else:
        values = ops.constant_like(weights, x)
        if values.shape != x.shape:
            raise ShapeError(f"bincount: weights of shape {values.shape} must have x's shape {x.shape}")
    return _scatter_add(length, ops.astype(x, dt.int64 if x.dtype in (dt.int64, dt.uint64, dt.uint32)
                                           else dt.int32), values, x)


def digitize(x, bins, right=False):
    """The index of the bin each element of `x` falls in.

    x: a real array. bins: a 1-d monotonic array (increasing or decreasing). right: bins include their right
    edge (else their left). Indices are int32, 0 below the first edge and len(bins) past the last.
    """
    x = ops.asarray(x)
    b = ops.constant_like(bins, x)
    if b.ndim != 1:
        raise ShapeError(f"digitize: bins must be 1-d, got shape {b.shape}")
    if dt.is_complex(x.dtype) or dt.is_complex(b.dtype):
        raise DTypeError("digitize: complex numbers have no order")
    if not isinstance(b, Tracer):
        d = np.diff(np.asarray(b).astype(np.float64))
        if not ((d >= 0).all() or (d <= 0).all()):
            raise ArgumentError("digitize: bins must be monotonically increasing or decreasing")
    side = "left" if right else "right"
    up = searchsorted(b, x, side=side)
    if b.shape[0] < 2:
        return up
    down = ops.subtract(b.shape[0], searchsorted(ops.flip(b), x, side=side))
    increasing = ops.less_equal(ops.take(b, 0), ops.take(b, -1))
    return ops.where(increasing, up, down)


def _edge_dtype(a):
    return a.dtype if dt.is_float(a.dtype) else dt.to_inexact(a.dtype)


def _uniform_edges(name, a, bins, range):
    """(edges, edge_at, lo, hi) of `bins` equal bins over `range` (a's min and max when None); edge_at(k) is
    edge k computed from k (the same arithmetic as `edges`, so bitwise the same values, and no gather: a
    gather indexed by values derived from the reductions made the fused kernel quadratic)."""
    work = _edge_dtype(a)
    if range is not None:
        lo, hi = range
        if not _is_traced_or_array(lo) and not _is_traced_or_array(hi):
            if not (np.isfinite(lo) and np.isfinite(hi)):
                raise ArgumentError(f"{name}: range must be finite, got {range}")
            if lo > hi:
                raise ArgumentError(f"{name}: range must be (min, max) with min <= max, got {range}")
        lo, hi = (ops.astype(ops.constant_like(v, a), work) for v in (lo, hi))
    elif a.size == 0:
        lo, hi = (ops.constant_like(np.asarray(v, dtype=work), a) for v in (0, 1))
    else:
        lo, hi = ops.astype(ops.min(a), work), ops.astype(ops.max(a), work)
    same = ops.equal(lo, hi)
    lo, hi = ops.where(same, ops.subtract(lo, work.type(0.5)), lo), ops.where(same, ops.add(hi, work.type(0.5)), hi)
    step = ops.divide(ops.subtract(hi, lo), work.type(bins))

    def edge_at(k):
        # np.linspace's arithmetic: k * step + lo, the last edge `hi` exactly.
        return ops.where(ops.equal(k, bins), hi, ops.add(ops.multiply(ops.astype(k, work), step), lo))
    return edge_at(_iota(bins + 1, a)), edge_at, lo, hi


def _bin_count_of(name, a, bins, range):
    """An int number of bins, or a NumPy estimator name (eagerly: the count NumPy's estimator gives)."""
    if isinstance(bins, str):
        host = concrete(name, a, f"a (bins={bins!r} depends on its values; pass an int number of bins)")
        try:
            return len(np.histogram_bin_edges(host.astype(np.float64), bins, range)) - 1
        except ValueError as e:
            raise ArgumentError(f"{name}: bins={bins!r}: {e}") from None
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        if bins < 1:
            raise ArgumentError(f"{name}: bins must be a positive int, got {bins}")
        return int(bins)
    return None


def _bins_1d(name, a, bins, range):
    """(edges, bin index of each element of the flat `a`, with len(edges) - 1 for the ones outside)."""
    a = ops.reshape(a, (-1,))
    if dt.is_complex(a.dtype):
        raise DTypeError(f"{name}: complex numbers have no order")
    count = _bin_count_of(name, a, bins, range)
    work = _edge_dtype(a)
    if count is not None:
        edges, edge_at, lo, hi = _uniform_edges(name, a, count, range)
        af = ops.astype(a, work)
        # NumPy's computation: the bin from the scaled offset, corrected by one against the edges.
        f = ops.multiply(ops.subtract(af, lo), ops.divide(work.type(count), ops.subtract(hi, lo)))
        # NaN fails both comparisons and lands in bin 0 (then outside `inside`).
        f = ops.where(ops.greater_equal(f, work.type(0)), ops.minimum(f, work.type(count - 1)), work.type(0))
        i = ops.astype(ops.floor(f), dt.int32)
        i = ops.subtract(i, ops.astype(ops.less(af, edge_at(i)), dt.int32))
        up = ops.logical_and(ops.greater_equal(af, edge_at(ops.add(i, 1))), ops.not_equal(i, count - 1))
        i = ops.add(i, ops.astype(up, dt.int32))
        inside = ops.logical_and(ops.greater_equal(af, lo), ops.less_equal(af, hi))
        return edges, ops.where(inside, i, count)
    edges = ops.constant_like(bins, a)
    if edges.ndim != 1 or edges.shape[0] < 2:
        raise ShapeError(f"{name}: bins must be an int or a 1-d array of at least 2 edges, got shape {edges.shape}")
    if not isinstance(edges, Tracer) and (np.diff(np.asarray(edges).astype(np.float64)) < 0).any():
        raise ArgumentError(f"{name}: bin edges must increase monotonically")
    count = edges.shape[0] - 1
    a, e = ops.promote(name, a, edges)
    i = ops.subtract(searchsorted(e, a, side="right"), 1)
    last = ops.take(e, -1)
    i = ops.where(ops.equal(a, last), count - 1, i)
    inside = ops.logical_and(ops.greater_equal(a, ops.take(e, 0)), ops.less_equal(a, last))
    return edges, ops.where(inside, i, count)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bin edges `histogram` uses.

    a: a real array (flattened). bins: a number of equal bins, a NumPy estimator name ('auto', 'fd', ...:
    eagerly only, since the count depends on the values), or the increasing edges themselves. range: (min, max)
    of the equal bins (default: a's). weights: accepted for NumPy, unused. Integers give float edges.
    """
    a = ops.reshape(ops.asarray(a), (-1,))
    count = _bin_count_of("histogram_bin_edges", a, bins, range)
    if count is None:
        return ops.constant_like(bins, a)
    return _uniform_edges("histogram_bin_edges", a, count, range)[0]


def histogram(a, bins=10, range=None, density=None, weights=None):
    """The histogram of `a`: (counts, edges).

    a: a real array (flattened). bins, range: as in histogram_bin_edges (values outside the range are not
    counted; the last bin includes its right edge). density: return the probability density (each count over
    the total and its bin's width). weights: an array of a's shape, summed per bin instead of counting.
    Counts are int32 (weights keep their dtype).
    """
    a = ops.asarray(a)
    count = _bin_count_of("histogram", a, bins, range)
    if count is not None and weights is None and _static_range(range):
        # About 40 elementwise passes: eagerly, on large arrays, one compiled plan (as exact_math's).
        hist, edges = _equal_bins_histogram(ops.reshape(a, (-1,)), bins=count,
                                            range=None if range is None else tuple(map(float, range)))
        n = count
    else:
        edges, index = _bins_1d("histogram", a, count if count is not None else bins, range)
        n = edges.shape[0] - 1
        hist = _hist_counts("histogram", a, index, n, weights)
    if density:
        hist = _normalised(hist, [ops.subtract(ops.slice_in_dim(edges, 1, n + 1), ops.slice_in_dim(edges, 0, n))])
    return hist, edges


def _static_range(range):
    return range is None or (len(range) == 2 and not any(_is_traced_or_array(v) for v in range))


@compiled_when_eager
def _equal_bins_histogram(a, *, bins, range):
    edges, index = _bins_1d("histogram", a, bins, range)
    return _hist_counts("histogram", a, index, bins, None), edges


def _hist_counts(name, a, index, length, weights):
    if weights is None:
        values = ops.constant_like(np.ones((), np.int32), a)
    else:
        values = ops.constant_like(weights, a)
        if values.shape != a.shape:
            raise ShapeError(f"{name}: weights of shape {values.shape} must have the sample's shape {a.shape}")
        values = ops.reshape(values, (-1,))
    return _scatter_add(length, index, values, a)


def _normalised(hist, widths):
    """A density: each bin's count over the total and over its volume (the product of its widths)."""
    work = widths[0].dtype
    hist = ops.astype(hist, work) if not dt.is_inexact(hist.dtype) else hist
    total = ops.sum(hist)
    for k, w in enumerate(widths):
        shape = [1] * hist.ndim
        shape[k] = w.shape[0]
        hist = ops.divide(hist, ops.reshape(w, tuple(shape)))
    return ops.divide(hist, total)


def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """The D-dimensional histogram of N points: (counts of shape (bins_0, ..., bins_D-1), [edges per dimension]).

    sample: an (N, D) array, or a sequence of D 1-d arrays of N values. bins: an int for every dimension, or a
    sequence of D ints / edge arrays. range: a sequence of D (min, max) pairs or Nones. density, weights: as in
    histogram.
    """
    if isinstance(sample, (list, tuple)):
        sample = ops.stack([ops.asarray(s) for s in sample], axis=-1)
    sample = ops.asarray(sample)
    if sample.ndim == 1:
        sample = ops.reshape(sample, (-1, 1))
    if sample.ndim != 2:
        raise ShapeError(f"histogramdd: sample must be (N, D) points, got shape {sample.shape}")
    d = sample.shape[1]
    per_dim = bins if isinstance(bins, (list, tuple)) else [bins] * d
    ranges = range if range is not None else [None] * d
    if len(per_dim) != d or len(ranges) != d:
        raise ShapeError(f"histogramdd: bins and range need one entry per dimension ({d}), got "
                         f"{len(per_dim)} and {len(ranges)}")
    edges, flat, size = [], None, 1
    for k in reversed(builtins.range(d)):
        e, i = _bins_1d("histogramdd", ops.take(sample, k, axis=1), per_dim[k], ranges[k])
        n = e.shape[0] - 1
        part = ops.where(ops.equal(i, n), -(2 ** 30), ops.multiply(i, size))   # outside: a negative sum, dropped
        flat = part if flat is None else ops.add(flat, part)
        edges.insert(0, e)
        size *= n
    counts = [e.shape[0] - 1 for e in edges]
    hist = ops.reshape(_hist_counts("histogramdd", ops.take(sample, 0, axis=1), flat, size, weights), tuple(counts))
    hist = ops.astype(hist, edges[0].dtype) if not dt.is_inexact(hist.dtype) else hist   # NumPy's: float counts
    if density:
        hist = _normalised(hist, [ops.subtract(ops.slice_in_dim(e, 1, n + 1), ops.slice_in_dim(e, 0, n))
                                  for e, n in zip(edges, counts)])
    return hist, edges


def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """The 2-d histogram of the points (x[i], y[i]): (counts, x edges, y edges).

    x, y: 1-d arrays of one length. bins: an int, [int, int], one edge array for both, or [x edges, y edges].
    range: [(xmin, xmax), (ymin, ymax)]. density, weights: as in histogram.
    """
    x, y = ops.asarray(x), ops.asarray(y)
    if x.ndim != 1 or x.shape != y.shape:
        raise ShapeError(f"histogram2d: x and y must be 1-d of one length, got shapes {x.shape} and {y.shape}")
    if not isinstance(bins, (int, np.integer, str)):
        if not isinstance(bins, (list, tuple)) or len(bins) != 2:
            bins = [bins, bins]
    hist, edges = histogramdd(ops.stack(ops.promote("histogram2d", x, y), axis=1), bins, range, density, weights)
    return hist, edges[0], edges[1]
