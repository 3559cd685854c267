"""NumPy's averages and spreads: ptp, average (weighted), cov (fweights, aweights, ddof, bias, rowvar)
and corrcoef.
"""
import builtins
import math

import numpy as np

from ..core import dtypes as dt
from ..errors import DTypeError, ShapeError
from . import ops

__all__ = ["average", "corrcoef", "cov", "ptp"]


def ptp(a, axis=None, out=None, keepdims=False):
    """The range (maximum - minimum) over `axis`.

    a: a numeric array (bools are refused, as by NumPy). axis: an int, a tuple of ints, or None. out: must be
    None. keepdims: keep each reduced axis with size 1.
    """
    ops.check_out("ptp", out)
    a = ops.asarray(a)
    if a.dtype == dt.bool_:
        raise DTypeError("ptp: bools have no difference (max - min); cast to an integer dtype first")
    return ops.subtract(ops.max(a, axis, keepdims), ops.min(a, axis, keepdims))


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """The weighted mean over `axis`: sum(a * weights) / sum(weights).

    a: an array. axis: an int, a tuple of ints, or None (all axes). weights: an array of a's shape, or (with an
    int or tuple axis) of the shape of those axes of a; None weighs every element 1. returned: also return the
    sum of the weights, broadcast to the result's shape. keepdims: keep each reduced axis with size 1.
    """
    a = ops.asarray(a)
    axes = ops._axes("average", axis, a.ndim)
    if weights is None:
        avg = ops.mean(a, axes, keepdims)
        scale = ops.constant_like(np.asarray(math.prod(a.shape[i] for i in axes), avg.dtype), avg)
    else:
        w = ops.constant_like(weights, a)
        if w.shape != a.shape:
            if axis is None:
                raise ShapeError(f"average: weights of shape {w.shape} differ from a's {a.shape}: pass the axis "
                                 f"they apply to")
            want = tuple(a.shape[i] for i in axes)
            if w.shape != want:
                raise ShapeError(f"average: weights of shape {w.shape} do not fit axis {axis} of a's shape "
                                 f"{a.shape} (expected {want})")
            order = sorted(range(len(axes)), key=lambda k: axes[k])
            w = ops.transpose(w, order) if len(axes) > 1 else w
            w = ops.broadcast_to(ops.reshape(w, tuple(d if i in axes else 1 for i, d in enumerate(a.shape))),
                                 a.shape)
        a, w = ops.promote("average", a, w)
        if not dt.is_inexact(a.dtype):
            a, w = ops.astype(a, dt.to_inexact(a.dtype)), ops.astype(w, dt.to_inexact(a.dtype))
        scale = ops.sum(w, axes, keepdims)
        avg = ops.divide(ops.sum(ops.multiply(a, w), axes, keepdims), scale)
    if returned:
        return avg, ops.broadcast_to(ops.astype(scale, avg.dtype), avg.shape)
    return avg



# ---------------------------------------------------------------- covariance

def _variables(name, m, rowvar):
    m = ops.asarray(m)
    if m.ndim > 2:
        raise ShapeError(f"{name}: expected a 1-d or 2-d array of variables, got shape {m.shape}")
    x = ops.reshape(m, (1, -1)) if m.ndim < 2 else m
    return ops.transpose(x) if not rowvar and x.shape[0] != 1 else x


def _weights(name, w, n, like, integer):
    w = ops.constant_like(w, like)
    if w.ndim != 1 or w.shape[0] != n:
        raise ShapeError(f"{name}: weights must be 1-d of length {n} (one per observation), got shape {w.shape}")
    if integer and w.dtype.kind not in "biu":
        raise DTypeError(f"{name}: fweights must be integers, got {w.dtype.name}")
    return w


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    """The covariance matrix of the variables in `m` (and `y`).

    m: a 1-d or 2-d array, one variable per row (per column when rowvar is False). y: more variables, stacked
    below m's. bias: normalise by N (else N - 1). ddof: overrides bias (N - ddof). fweights: integer frequency
    weights per observation. aweights: observation weights. dtype: of the result (default: m's float).
    A single variable gives a 0-d result.
    """
    x = _variables("cov", m, rowvar)
    if y is not None:
        yv = _variables("cov", y, rowvar)
        if yv.shape[1] != x.shape[1]:
            raise ShapeError(f"cov: y has {yv.shape[1]} observations, m has {x.shape[1]}")
        x = ops.concatenate(ops.promote("cov", x, yv), axis=0)
    work = dt.dtype(dtype) if dtype is not None else (x.dtype if dt.is_inexact(x.dtype) else dt.to_inexact(x.dtype))
    x = ops.astype(x, work)
    if ddof is None:
        ddof = 0 if bias else 1
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = ops.astype(_weights("cov", fweights, n, x, True), work)
    if aweights is not None:
        aw = ops.astype(_weights("cov", aweights, n, x, False), work)
        w = aw if w is None else ops.multiply(w, aw)
    if w is None:
        mean = ops.mean(x, 1, True)
        fact = work.type(builtins.max(n - ddof, 0))
        xw = ops.subtract(x, mean)
        xt = xw
    else:
        wsum = ops.sum(w)
        mean = ops.divide(ops.sum(ops.multiply(x, w), 1, True), wsum)
        if ddof == 0:
            fact = wsum
        elif aweights is None:
            fact = ops.subtract(wsum, ddof)
        else:
            fact = ops.subtract(wsum, ops.divide(ops.multiply(ddof, ops.sum(ops.multiply(w, aw))), wsum))
        fact = ops.maximum(ops.real(fact), 0)
        xw = ops.subtract(x, mean)
        xt = ops.multiply(xw, w)
    c = ops.matmul(xw, ops.transpose(ops.conj(xt)) if dt.is_complex(work) else ops.transpose(xt))
    c = ops.divide(c, fact)
    return ops.squeeze(c) if c.shape[0] == 1 else c


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """The Pearson correlation coefficients of the variables in `x` (and `y`): cov / outer(std, std).

    x, y, rowvar, dtype: as in cov. Values are clipped to [-1, 1] (each part, for complex numbers).
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return ops.divide(c, c)
    k = c.shape[0]
    d = ops.take(ops.reshape(c, (-1,)), ops.constant_like(np.arange(k, dtype=np.int32) * (k + 1), c))
    std = ops.sqrt(ops.real(d))
    c = ops.divide(ops.divide(c, ops.reshape(std, (k, 1))), ops.reshape(std, (1, k)))
    if dt.is_complex(c.dtype):
        return ops.make_complex(ops.clip(ops.real(c), -1, 1), ops.clip(ops.imag(c), -1, 1))
    return ops.clip(c, -1, 1)
