"""NumPy's differences and calculus helpers: unwrap, ediff1d, gradient (first- or second-order edges),
trapezoid and cross.
"""
import builtins
import math

import numpy as np

from ..core import dtypes as dt
from ..core.array import Array
from ..core.trace import Tracer
from ..errors import ArgumentError, DTypeError, ShapeError
from . import ops
from .creation import zeros_like
from .mathfuncs import _float_operand
from .shapes import diff
from .sorting import cumsum
from .surface_operands import _array, _const, exporter

__all__ = []
_public = exporter(__all__)


@_public
def unwrap(p, discont=None, axis=-1, period=2 * math.pi):
    """`p` with its jumps along `axis` reduced modulo `period` (phase unwrapping, as NumPy's).

    Each jump between neighbours of at least `discont` is replaced by its remainder into [-period/2, period/2].

    p: a real array. discont: the jumps left alone are those below it (default period / 2; smaller values
    act as period / 2). axis: the axis to unwrap along. period: the period of the values (2 pi by default).
    The result has the dtype of p and period by rune's promotion: integers stay integers with an integer
    period (as NumPy's), and compute in their float with a float one.
    """
    weak = ops._all_weak(p)
    p = _array(p)
    if dt.is_complex(p.dtype) or p.dtype.kind == "b":
        raise DTypeError(f"unwrap: expected a real numeric array p, got {p.dtype.name}")
    axis = ops.normalize_axis("unwrap", axis, p.ndim)
    if discont is None:
        discont = period / 2
    if p.dtype.kind in "iu" and isinstance(period, (int, np.integer)):
        high, rest = builtins.divmod(int(period), 2)
        ambiguous = rest == 0
        p = ops.astype(p, dt.int64) if p.dtype.kind == "u" else p   # (differences may be negative)
    else:
        p = p if dt.is_float(p.dtype) else ops.astype(p, dt.to_inexact(p.dtype, weak))
        high, ambiguous = period / 2, True
    dd = diff(p, axis=axis)
    ddmod = ops.add(ops.remainder(ops.add(dd, _const(p, high)), _const(p, period)), _const(p, -high))
    if ambiguous:   # a jump of exactly +period/2 stays positive (the remainder would make it -period/2)
        ddmod = ops.where(ops.logical_and(ops.equal(ddmod, _const(p, -high)), ops.greater(dd, 0)),
                          _const(p, high), ddmod)
    correct = ops.where(ops.less(ops.abs(dd), discont), _const(p, 0), ops.subtract(ddmod, dd))
    head = ops.slice_in_dim(zeros_like(p), 0, builtins.min(1, p.shape[axis]), axis=axis)
    return ops.add(p, ops.concatenate([head, cumsum(correct, axis=axis)], axis))


@_public
def ediff1d(x, to_end=None, to_begin=None):
    """The differences of consecutive elements of the flattened `x`, with `to_begin` and `to_end` around them.

    x: an array. to_end, to_begin: values (scalars or arrays) to put after and before the differences; they
    take x's dtype.
    """
    x = ops.reshape(_array(x), (-1,))
    parts = [diff(x)]
    if to_begin is not None:
        parts.insert(0, ops.reshape(ops.astype(_array(to_begin), x.dtype), (-1,)))
    if to_end is not None:
        parts.append(ops.reshape(ops.astype(_array(to_end), x.dtype), (-1,)))
    return ops.concatenate(parts, 0) if len(parts) > 1 else parts[0]


def _spacings(name, f, varargs, axes):
    """One spacing per axis: a Python/0-d scalar or a 1-d coordinate array of the axis' length."""
    if not varargs:
        return [1.0] * len(axes)
    if len(varargs) == 1 and not (isinstance(varargs[0], (Array, Tracer, np.ndarray)) and np.ndim(varargs[0]) == 1
                                  and len(axes) > 1):
        varargs = varargs * len(axes)
    if len(varargs) != len(axes):
        raise ArgumentError(f"{name}: expected one spacing or one per axis ({len(axes)}), got {len(varargs)}")
    out = []
    for a, h in zip(axes, varargs):
        if np.ndim(h) == 1 or (isinstance(h, (Array, Tracer)) and h.ndim == 1):
            h = _array(h)
            if h.shape[0] != f.shape[a]:
                raise ShapeError(f"{name}: the coordinates of axis {a} have length {h.shape[0]}, expected "
                                 f"the axis' length {f.shape[a]}")
        elif np.ndim(h) != 0:
            raise ShapeError(f"{name}: a spacing must be a scalar or 1-d coordinates, got shape {np.shape(h)}")
        out.append(h)
    return out


def _along(x, start, stop, axis):
    return ops.slice_in_dim(x, start, stop if stop is not None else x.shape[axis], axis=axis)


def _coords_shape(h, axis, ndim):
    return ops.reshape(h, tuple(-1 if i == axis else 1 for i in range(ndim)))


def _gradient_axis(f, h, axis, edge_order):
    """NumPy's second-order accurate differences along `axis`: central inside, one-sided at the ends."""
    n = f.shape[axis]
    if n < edge_order + 1:
        raise ShapeError(f"gradient: axis {axis} has {n} elements; edge_order={edge_order} needs at least "
                         f"{edge_order + 1}")
    if isinstance(h, (Array, Tracer)) and h.ndim == 1:
        d = diff(ops.astype(h, f.dtype) if not dt.is_inexact(h.dtype) else h)
        d = _coords_shape(d, axis, f.ndim)
    else:
        d = None
        h = float(h) if not isinstance(h, (Array, Tracer)) else h
    s = lambda a, b: _along(f, a, b, axis)   # noqa: E731
    if d is None:   # uniform spacing
        twice = h * 2.0 if isinstance(h, float) else ops.multiply(h, 2.0)   # (a Python float stays weak)
        inner = ops.divide(ops.subtract(s(2, None), s(0, n - 2)), twice)
        if edge_order == 1:
            first = ops.divide(ops.subtract(s(1, 2), s(0, 1)), h)
            last = ops.divide(ops.subtract(s(n - 1, n), s(n - 2, n - 1)), h)
        else:
            first = ops.divide(ops.add(ops.add(ops.multiply(s(0, 1), -1.5), ops.multiply(s(1, 2), 2.0)),
                                       ops.multiply(s(2, 3), -0.5)), h)
            last = ops.divide(ops.add(ops.add(ops.multiply(s(n - 3, n - 2), 0.5), ops.multiply(s(n - 2, n - 1), -2.0)),
                                      ops.multiply(s(n - 1, n), 1.5)), h)
    else:
        dd = lambda a, b: _along(d, a, b, axis)   # noqa: E731
        h1, h2 = dd(0, n - 2), dd(1, n - 1)
        total = ops.add(h1, h2)
        a = ops.negative(ops.divide(h2, ops.multiply(h1, total)))
        b = ops.divide(ops.subtract(h2, h1), ops.multiply(h1, h2))
        c = ops.divide(h1, ops.multiply(h2, total))
        inner = ops.add(ops.add(ops.multiply(a, s(0, n - 2)), ops.multiply(b, s(1, n - 1))), ops.multiply(c, s(2, n)))
        if edge_order == 1:
            first = ops.divide(ops.subtract(s(1, 2), s(0, 1)), dd(0, 1))
            last = ops.divide(ops.subtract(s(n - 1, n), s(n - 2, n - 1)), dd(n - 2, n - 1))
        else:
            first = _one_sided(s(0, 1), s(1, 2), s(2, 3), dd(0, 1), dd(1, 2), forward=True)
            last = _one_sided(s(n - 3, n - 2), s(n - 2, n - 1), s(n - 1, n), dd(n - 3, n - 2), dd(n - 2, n - 1),
                              forward=False)
    return ops.concatenate([first, inner, last], axis)


def _one_sided(y0, y1, y2, h1, h2, forward):
    """NumPy's second-order one-sided difference at the first (`forward`) or last point of uneven spacing."""
    total = ops.add(h1, h2)
    if forward:
        a = ops.negative(ops.divide(ops.add(ops.multiply(h1, 2.0), h2), ops.multiply(h1, total)))
        b = ops.divide(total, ops.multiply(h1, h2))
        c = ops.negative(ops.divide(h1, ops.multiply(h2, total)))
    else:
        a = ops.divide(h2, ops.multiply(h1, total))
        b = ops.negative(ops.divide(total, ops.multiply(h1, h2)))
        c = ops.divide(ops.add(ops.multiply(h2, 2.0), h1), ops.multiply(h2, total))
    return ops.add(ops.add(ops.multiply(a, y0), ops.multiply(b, y1)), ops.multiply(c, y2))


@_public
def gradient(x, *varargs, axis=None, edge_order=1):
    """The gradient of the sampled function `x` along each axis (NumPy's gradient).

    Second-order central differences inside, first- or second-order one-sided ones at the ends.

    x: an array (integers and bools compute in their float). varargs: the spacing, one for all axes or one per
    axis, each a scalar or the 1-d coordinates along its axis (default 1). axis: an axis or a tuple of axes
    (default: all). edge_order: 1 or 2. Returns an array for one axis, else a tuple of arrays (one per axis).
    """
    x = _float_operand(x)
    if edge_order not in (1, 2):
        raise ArgumentError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    axes = ops._axes("gradient", axis, x.ndim)
    spacings = _spacings("gradient", x, varargs, axes)
    out = tuple(_gradient_axis(x, h, a, edge_order) for a, h in zip(axes, spacings))
    return out[0] if len(out) == 1 else out


@_public
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of `y` along `axis` by the trapezoidal rule.

    y: an array (integers and bools compute in their float). x: the sample points (1-d along the axis, or
    broadcasting with y); None: equally spaced by `dx`. dx: the spacing when x is None. axis: the axis.
    """
    y = _float_operand(y)
    axis = ops.normalize_axis("trapezoid", axis, y.ndim)
    n = y.shape[axis]
    if x is None:
        d = dx
    else:
        x = _array(x)
        if x.ndim == 1:
            if x.shape[0] != n:
                raise ShapeError(f"trapezoid: x has length {x.shape[0]}, expected y's axis length {n}")
            d = _coords_shape(diff(x), axis, y.ndim)
        else:
            d = diff(x, axis=axis)
    mids = ops.add(_along(y, 1, None, axis), _along(y, 0, builtins.max(n - 1, 0), axis))
    return ops.sum(ops.divide(ops.multiply(d, mids), 2.0), axis=axis)


def _vector_components(name, v, axis, which):
    v = _array(v)
    if v.ndim == 0:
        raise ShapeError(f"cross: {which} must have at least one dimension, got a scalar")
    axis = ops.normalize_axis(name, axis, v.ndim)
    v = ops.moveaxis(v, axis, -1)
    if v.shape[-1] not in (2, 3):
        raise ShapeError(f"cross: the vectors of {which} must have 2 or 3 components, got {v.shape[-1]}")
    return [v[..., i] for i in range(v.shape[-1])]


@_public
def cross(x1, x2, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of the 3-vectors (or 2-vectors: the z component alone) of `x1` and `x2`, broadcast.

    x1, x2: arrays whose vectors lie along axisa and axisb (2 or 3 components each; a 2-vector has z = 0).
    axisc: the axis of the result's vectors. axis: if given, it overrides all three.
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    x1, x2 = (_array(v) for v in ops.promote("cross", x1, x2))
    if x1.dtype.kind == "b":
        raise DTypeError("cross: expected numeric operands, got bool")
    u = _vector_components("cross", x1, axisa, "x1")
    v = _vector_components("cross", x2, axisb, "x2")
    if len(u) == 2 and len(v) == 2:
        return ops.subtract(ops.multiply(u[0], v[1]), ops.multiply(u[1], v[0]))
    zero = lambda w: ops.multiply(w[0], 0)   # noqa: E731
    u = u + [zero(u)] * (3 - len(u))
    v = v + [zero(v)] * (3 - len(v))
    out = ops.stack([ops.subtract(ops.multiply(u[1], v[2]), ops.multiply(u[2], v[1])),
                     ops.subtract(ops.multiply(u[2], v[0]), ops.multiply(u[0], v[2])),
                     ops.subtract(ops.multiply(u[0], v[1]), ops.multiply(u[1], v[0]))], -1)
    return ops.moveaxis(out, -1, ops.normalize_axis("cross", axisc, out.ndim))
