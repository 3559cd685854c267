"""NumPy's order statistics: median, percentile, quantile and their nan* forms.

They sort the reduced axes into one last axis (or, at static ranks, select them with the argselect
primitive, a partial sort) and gather the one or two elements around the wanted rank: the derivative
flows to those elements, weighted by the interpolation (and to q through the interpolation weight).
"""
import math

import numpy as np

from ..core import dtypes as dt
from ..core.aval import Aval
from ..core.primitive import abstract_rules, batch_rules, jvp_rules, no_derivative, primitive
from ..core.trace import Tracer, bind
from ..errors import ArgumentError, DTypeError, ShapeError
from . import ops
from .shapes import take_along_axis
from .sorting import sort
from .surface_operands import _index_dtype

__all__ = ["median", "percentile", "quantile", "nanmedian", "nanpercentile", "nanquantile"]


# argselect: the positions of the order statistics `kth` (static ranks) along the last axis, NaNs ranked
# last as in sort. A partial sort (introselect) on the backend, O(n) where sorting is O(n log n): the
# quantiles at static ranks gather through it. Its integer result carries no derivative; the gathered
# values do. Its implementation on an array module is rune/backends/xp/statistics.py (no lowering: compiled
# code runs it op by op, as argsort).
argselect_p = primitive("argselect")


def _argselect_abstract(x, *, kth, index_dtype):
    return Aval(x.shape[:-1] + (len(kth),), index_dtype, x.device)


def _argselect_batch(values, dims, size, *, kth, index_dtype):
    from .rule_helpers import to_front
    return bind(argselect_p, to_front(values[0], dims[0]), kth=kth, index_dtype=index_dtype), 0


abstract_rules[argselect_p] = _argselect_abstract
no_derivative.add(argselect_p)
jvp_rules[argselect_p] = lambda primals, tangents, **params: (bind(argselect_p, *primals, **params), None)
batch_rules[argselect_p] = _argselect_batch


def _static_quantile(x, qh, method, work):
    """Quantiles at host-known q (qh, float64, flat) of x's last axis: the one or two ranks around each are
    static, so a partial sort finds them (NumPy's way: positions in float64, the weight rounded to `work`)."""
    n = x.shape[-1]
    pos = qh * (n - 1)
    lo, hi = np.floor(pos).astype(np.int64), np.ceil(pos).astype(np.int64)
    if method == "nearest":
        lo = hi = np.round(pos).astype(np.int64)
    elif method == "lower":
        hi = lo
    elif method == "higher":
        lo = hi
    ranks = tuple(sorted(set(lo.tolist()) | set(hi.tolist())))
    where = {r: i for i, r in enumerate(ranks)}
    picked = take_along_axis(x, bind(argselect_p, x, kth=ranks, index_dtype=_index_dtype(n)), -1)
    picked = ops.astype(picked, work)

    def at(ks):
        return ops.take(picked, ops.constant_like(np.array([where[k] for k in ks], np.int32), x), axis=-1)
    below, above = at(lo.tolist()), at(hi.tolist())
    if method in ("lower", "higher", "nearest"):
        return below
    if method == "midpoint":
        return ops.multiply(ops.add(below, above), work.type(0.5))
    t = ops.constant_like((pos - lo).astype(work), x)
    step = ops.subtract(above, below)
    return ops.where(ops.greater_equal(t, work.type(0.5)),
                     ops.subtract(above, ops.multiply(step, ops.subtract(work.type(1), t))),
                     ops.add(below, ops.multiply(step, t)))


_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _to_last_axis(name, x, axis):
    """x with the reduced axes moved to one last axis, and the shape the result keeps (keepdims)."""
    axes = ops._axes(name, axis, x.ndim)
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = ops.transpose(x, rest + list(axes)) if x.ndim else x
    lead = tuple(x.shape[i] for i in rest)
    kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return ops.reshape(moved, lead + (math.prod(x.shape[i] for i in axes),)), lead, kept


def _q_operand(name, q, scale, work, like):
    """q as an array of the working dtype, checked to lie in [0, 1] where it is known."""
    host = None if isinstance(q, Tracer) else np.asarray(q)
    if host is not None:
        if host.dtype.kind not in "biuf":
            raise DTypeError(f"{name}: q must be real numbers, got {host.dtype}")
        h = host.astype(np.float64) / scale
        if h.size and not ((h >= 0).all() and (h <= 1).all()):
            raise ArgumentError(f"{name}: q must lie in [0, {scale:g}], got {host.tolist()}")
    q = ops.constant_like(q if host is None else host.astype(work), like)
    if not dt.is_float(q.dtype) and q.dtype.kind not in "biu":
        raise DTypeError(f"{name}: q must be real numbers, got {q.dtype.name}")
    q = ops.astype(q, work)
    return ops.divide(q, work.type(scale)) if scale != 1 else q


def _traced_quantile(x, q, lead, method, work, nan_aware):
    """Quantiles at traced q (or with NaNs ignored, whose count is per slice): sort, and gather at the ranks."""
    n = x.shape[-1]
    s = sort(x if dt.is_float(x.dtype) else x, axis=-1)
    qf = ops.reshape(q, (-1,))
    if nan_aware and dt.is_float(x.dtype):
        count = ops.sum(ops.astype(ops.logical_not(ops.isnan(x)), work), -1, True)
    else:
        count = work.type(n)
    pos = ops.multiply(qf, ops.subtract(count, work.type(1)))          # lead + (Q,) or (Q,)
    pos = ops.broadcast_to(pos, lead + (qf.shape[0],))
    last = n - 1
    lo_f = ops.floor(pos)

    def index(p):
        return ops.astype(ops.clip(p, 0, last), dt.int32)

    def at(p):
        return ops.astype(take_along_axis(s, index(p), -1), work)

    if method == "lower":
        out = at(lo_f)
    elif method == "higher":
        out = at(ops.ceil(pos))
    elif method == "nearest":
        out = at(ops.round(pos))
    else:
        below, above = at(lo_f), at(ops.ceil(pos))
        if method == "midpoint":
            out = ops.multiply(ops.add(below, above), work.type(0.5))
        else:
            t = ops.subtract(pos, lo_f)
            step = ops.subtract(above, below)
            # NumPy's lerp: from the nearer end, so t = 1 gives `above` exactly.
            out = ops.where(ops.greater_equal(t, work.type(0.5)),
                            ops.subtract(above, ops.multiply(step, ops.subtract(work.type(1), t))),
                            ops.add(below, ops.multiply(step, t)))
    return out


def _quantile(name, a, q, axis, method, keepdims, nan_aware, scale=1):
    if method not in _METHODS:
        raise ArgumentError(f"{name}: method must be one of {', '.join(_METHODS)}, got {method!r}")
    a = ops.asarray(a)
    if dt.is_complex(a.dtype):
        raise DTypeError(f"{name}: expected a real array (complex numbers have no order), got {a.dtype.name}")
    if a.size == 0:
        raise ShapeError(f"{name}: the array of shape {a.shape} is empty (no element to rank)")
    discrete = method in ("lower", "higher", "nearest")
    if a.dtype == dt.bool_:   # ranked as 0 and 1; lower/higher/nearest give bools back, as NumPy's
        out = _quantile(name, ops.astype(a, dt.uint8), q, axis, method, keepdims, nan_aware, scale)
        return ops.astype(out, dt.bool_) if discrete else out
    out_dtype = a.dtype if discrete or dt.is_float(a.dtype) else dt.to_inexact(a.dtype)
    work = dt.float32 if out_dtype in (dt.float16, dt.bfloat16) or not dt.is_float(out_dtype) and \
        dt.to_inexact(a.dtype) == dt.float32 else dt.to_inexact(out_dtype) if not dt.is_float(out_dtype) \
        else out_dtype
    static = not isinstance(q, Tracer) and not (nan_aware and dt.is_float(a.dtype))
    q_given, q = q, _q_operand(name, q, scale, work, a)   # (checks q first)
    # NumPy's ranks: q * (n - 1) in float64
    q_host = np.asarray(q_given).astype(np.float64).reshape(-1) / scale if static else None
    x, lead, kept = _to_last_axis(name, a, axis)
    if static:   # the ranks are known: a partial sort finds them
        out = ops.broadcast_to(_static_quantile(x, q_host, method, work), lead + (q_host.size,))
    else:
        out = _traced_quantile(x, q, lead, method, work, nan_aware)
    if dt.is_float(x.dtype) and not nan_aware:
        # NumPy: any NaN in a slice makes its quantiles NaN.
        out = ops.where(ops.any(ops.isnan(x), -1, True), work.type(np.nan), out)
    out = ops.astype(out, out_dtype)
    out = ops.moveaxis(out, -1, 0) if out.ndim > 1 else out
    return ops.reshape(out, tuple(q.shape) + (kept if keepdims else lead))


_Q_DOC = ("\n\na: a real array. q: {what} (a scalar or an array; the result has q's shape in front). axis: an int, "
          "a tuple of ints, or None (all axes). out: must be None. overwrite_input: accepted, ignored. method: "
          "linear (interpolated), lower, higher, nearest (round half to even) or midpoint. keepdims: keep each "
          "reduced axis with size 1. Integers interpolate in their float dtype (lower/higher/nearest keep it). "
          "The derivative flows to the one or two elements around the rank, by the interpolation weights.")


def _make_quantile(name, scale, nan_aware, summary):
    def op(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
           interpolation=None):
        ops.check_out(name, out)
        return _quantile(name, a, q, axis, interpolation or method, keepdims, nan_aware, scale)
    op.__name__ = name
    op.__doc__ = summary + _Q_DOC.format(what="percentages in [0, 100]" if scale == 100 else
                                         "probabilities in [0, 1]")
    return op


quantile = _make_quantile("quantile", 1, False, "The q-th quantiles over `axis` (NaN where a slice holds a NaN).")
percentile = _make_quantile("percentile", 100, False, "The q-th percentiles over `axis` (NaN where a slice "
                            "holds a NaN).")
nanquantile = _make_quantile("nanquantile", 1, True, "The q-th quantiles over `axis`, NaNs ignored.")
nanpercentile = _make_quantile("nanpercentile", 100, True, "The q-th percentiles over `axis`, NaNs ignored.")


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median over `axis` (the mean of the two middle elements for an even count; NaN if a slice holds NaN).

    a: a real array. axis: an int, a tuple of ints, or None. out: must be None. overwrite_input: ignored.
    keepdims: keep each reduced axis with size 1. The derivative flows to the middle element(s).
    """
    ops.check_out("median", out)
    return _quantile("median", a, 0.5, axis, "linear", keepdims, False)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median over `axis` of the elements that are not NaN (NaN for a slice of NaNs only).

    a: a real array. axis: an int, a tuple of ints, or None. out: must be None. overwrite_input: ignored.
    keepdims: keep each reduced axis with size 1.
    """
    ops.check_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "linear", keepdims, True)
