"""NumPy's interpolation and mapping functions: interp, piecewise, apply_along_axis, apply_over_axes,
and the vector-matrix products matvec and vecmat.
"""
import numpy as np

from ..core import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError
from . import ops
from .creation import zeros_like
from .searching import searchsorted
from .sorting import argsort
from .surface_operands import _array, _const, exporter

__all__ = []
_public = exporter(__all__)


@_public
def interp(x, xp, fp, left=None, right=None, period=None):
    """The piecewise-linear interpolant through the points (xp, fp), evaluated at `x`.

    x: where to evaluate (any shape). xp: the increasing 1-d sample points (or, with period, any order). fp: the
    1-d values at xp (real or complex), as long as xp. left, right: the value below xp[0] and above xp[-1]
    (default fp[0] and fp[-1]). period: the period of x (then left and right are not allowed). The result has
    x's shape and the float (or complex) dtype of x, xp and fp by rune's promotion (NumPy gives float64).
    """
    weak = ops._all_weak(x, xp, fp)
    x, xp, fp = (_array(v) for v in (x, xp, fp))
    if xp.ndim != 1 or fp.ndim != 1:
        raise ShapeError(f"interp: xp and fp must be 1-d, got shapes {xp.shape} and {fp.shape}")
    if xp.shape != fp.shape:
        raise ShapeError(f"interp: xp and fp must have the same length, got {xp.shape[0]} and {fp.shape[0]}")
    if xp.shape[0] == 0:
        raise ShapeError("interp: xp and fp must not be empty")
    if dt.is_complex(x.dtype) or dt.is_complex(xp.dtype):
        raise DTypeError(f"interp: x and xp must be real, got {x.dtype.name} and {xp.dtype.name}")
    target, _ = dt.promote(((x.dtype, x.weak), (xp.dtype, xp.weak), (fp.dtype, fp.weak)))
    target = dt.to_inexact(target, weak)
    real = dt.real_dtype(target) if dt.is_complex(target) else target
    x, xp, fp = ops.astype(x, real), ops.astype(xp, real), ops.astype(fp, target)
    if period is not None:
        if left is not None or right is not None:
            raise ArgumentError("interp: left and right cannot be given with period")
        if period == 0:
            raise ArgumentError("interp: period must be nonzero")
        p = _const(x, abs(period))
        x, xp = ops.remainder(x, p), ops.remainder(xp, p)
        order = argsort(xp)
        xp, fp = ops.take(xp, order), ops.take(fp, order)
        xp = ops.concatenate([ops.subtract(xp[-1:], p), xp, ops.add(xp[:1], p)], 0)
        fp = ops.concatenate([fp[-1:], fp, fp[:1]], 0)
    n = xp.shape[0]
    if n == 1:
        inside = ops.add(ops.multiply(ops.astype(x, target), _const(fp, 0)), fp[0])
    else:
        i = ops.clip(searchsorted(xp, x, side="right"), 1, n - 1)
        x0, x1 = ops.take(xp, i - 1), ops.take(xp, i)
        f0, f1 = ops.take(fp, i - 1), ops.take(fp, i)
        width = ops.subtract(x1, x0)
        slope = ops.divide(ops.subtract(f1, f0), ops.astype(ops.where(ops.equal(width, 0), _const(width, 1), width),
                                                           target))
        inside = ops.add(f0, ops.multiply(slope, ops.astype(ops.subtract(x, x0), target)))
        inside = ops.where(ops.equal(x, x1), f1, inside)   # exactly at a sample point: its value
    low = fp[0] if left is None else ops.astype(_array(left), target)
    high = fp[-1] if right is None else ops.astype(_array(right), target)
    out = ops.where(ops.less(x, xp[0]), low, inside)
    return ops.where(ops.greater(x, xp[-1]), high, out)


@_public
def piecewise(x, condlist, funclist, *args, **kw):
    """A function defined piece by piece by conditions on `x`, as NumPy's piecewise.

    Where condlist[k] holds, funclist[k](x, *args, **kw) (or the value funclist[k]); one extra function is the
    default where no condition holds; elsewhere 0. Later conditions win where several hold, as NumPy's. Each
    function is evaluated on all of x (not only its piece), so it must not fail outside its piece.

    x: an array. condlist: a bool array, or a list of bool arrays broadcasting with x. funclist: functions or
    values, as many as the conditions or one more. The result has x's shape and dtype.
    """
    x = _array(x)
    if not isinstance(condlist, (list, tuple)) and np.ndim(condlist) in (0, x.ndim):
        condlist = [condlist]   # one condition (a list of conditions, or a stacked array, is iterated)
    conds = [ops.astype(_array(c), dt.bool_) for c in condlist]
    funcs = list(funclist)
    if len(funcs) == len(conds) + 1:
        conds.append(ops.logical_not(_any_of(conds, x)))
    elif len(funcs) != len(conds):
        raise ArgumentError(f"piecewise: funclist must have {len(conds)} or {len(conds) + 1} entries (one per "
                            f"condition, and an optional default), got {len(funcs)}")
    out = zeros_like(x)   # (x * 0 would be -0.0 or NaN where x is negative or not finite)
    for cond, f in zip(conds, funcs):
        value = f(x, *args, **kw) if callable(f) else f
        out = ops.where(cond, ops.astype(_array(value), x.dtype), out)
    return out


def _any_of(conds, x):
    hit = ops.not_equal(x, x) if x.dtype.kind == "b" else ops.less(x, x)
    for c in conds:
        hit = ops.logical_or(hit, c)
    return hit


@_public
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """`func1d` applied to each 1-d slice of `arr` along `axis`.

    The slices are mapped with vmap, so func1d is traced once; the axis is replaced by the dimensions of func1d's
    result.

    func1d: a function of a 1-d array (and *args, **kwargs) returning an array of a fixed shape. axis: the axis
    whose slices are passed. arr: the array.
    """
    from .transformations import vmap   # (rune.transforms.batching registers it: nx sits below that layer)
    arr = _array(arr)
    axis = ops.normalize_axis("apply_along_axis", axis, arr.ndim)
    fn = lambda v: _array(func1d(v, *args, **kwargs))   # noqa: E731
    for _ in range(arr.ndim - 1):   # one vmap per other axis, outermost first
        fn = vmap(fn)
    moved = ops.moveaxis(arr, axis, -1)
    out = fn(moved)
    extra = out.ndim - (arr.ndim - 1)
    # the result's own axes go where `axis` was
    lead = list(range(arr.ndim - 1))
    return ops.transpose(out, lead[:axis] + list(range(arr.ndim - 1, out.ndim)) + lead[axis:])


@_public
def apply_over_axes(func, a, axes):
    """`func(a, axis)` applied for each axis in turn, each result fed to the next.

    A result one rank short gets its axis back (length 1), so the rank stays a's.

    func: a function (array, axis) -> array of the same rank or one less. a: the array. axes: an axis or a
    sequence of axes.
    """
    a = _array(a)
    for axis in ((axes,) if isinstance(axes, (int, np.integer)) else axes):
        axis = ops.normalize_axis("apply_over_axes", axis, a.ndim)
        res = _array(func(a, axis))
        if res.ndim == a.ndim - 1:
            res = ops.expand_dims(res, axis)
        elif res.ndim != a.ndim:
            raise ShapeError(f"apply_over_axes: func must keep the rank ({a.ndim}) or drop one axis, got a "
                             f"result of rank {res.ndim}")
        a = res
    return a


@_public
def matvec(x1, x2):
    """The matrix-vector product x1 @ x2 over the last axes, batched and broadcast over the leading ones.

    x1: matrices (..., m, n). x2: vectors (..., n). Returns (..., m).
    """
    x1, x2 = _array(x1), _array(x2)
    if x1.ndim < 2 or x2.ndim < 1:
        raise ShapeError(f"matvec: expected matrices (..., m, n) and vectors (..., n), got shapes {x1.shape} "
                         f"and {x2.shape}")
    return ops.matmul(x1, ops.expand_dims(x2, -1))[..., 0]


@_public
def vecmat(x1, x2):
    """The vector-matrix product conj(x1) @ x2 over the last axes, batched and broadcast over the leading ones.

    x1: vectors (..., n) (conjugated if complex). x2: matrices (..., n, m). Returns (..., m).
    """
    x1, x2 = _array(x1), _array(x2)
    if x1.ndim < 1 or x2.ndim < 2:
        raise ShapeError(f"vecmat: expected vectors (..., n) and matrices (..., n, m), got shapes {x1.shape} "
                         f"and {x2.shape}")
    return ops.matmul(ops.expand_dims(ops.conj(x1), -2), x2)[..., 0, :]
