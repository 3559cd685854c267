"""NumPy's window functions (hanning, hamming, blackman, bartlett, kaiser) and spaced values
(logspace, geomspace).
"""
import builtins
import math

import numpy as np

from ..core import dtypes as dt
from ..core.array import Array
from ..core.trace import Tracer
from ..errors import ArgumentError
from . import ops
from .creation import arange
from .elementwise_math import i0
from .surface_operands import _array, _const, exporter

__all__ = []
_public = exporter(__all__)


def _window_length(name, M):
    if isinstance(M, (Array, Tracer)) or not isinstance(M, (int, np.integer)) or isinstance(M, bool):
        raise ArgumentError(f"{name}: M must be a Python int (the window's length is static), got {M!r}")
    return int(M)


def _window(name, M, body):
    """A length-M window computed in float64 by `body(n, M)` (n: 0, 1, ..., M - 1) and returned in the
    default float (float32, as rune's creation functions; NumPy gives float64)."""
    M = _window_length(name, M)
    if M < 1:
        return ops.astype(arange(0, dtype=dt.float64), dt.default_float)
    if M == 1:
        return ops.astype(ops.asarray(np.ones(1)), dt.default_float)
    return ops.astype(body(arange(M, dtype=dt.float64), M), dt.default_float)


def _cosines(weights):
    """The window sum of weights[k] * cos(2 pi k n / (M - 1)) (Hann, Hamming, Blackman)."""
    def body(n, M):
        out = ops.multiply(n, 0.0)
        for k, w in enumerate(weights):
            term = ops.cos(ops.multiply(n, 2 * math.pi * k / (M - 1))) if k else ops.add(ops.multiply(n, 0.0), 1.0)
            out = ops.add(out, ops.multiply(term, w))
        return out
    return body


def _window_function(name, what, body):
    def window(M):
        return _window(name, M, body)
    window.__name__ = name
    window.__doc__ = (f"The {what} window of length `M`, in the default float (float32; NumPy gives float64).\n\n"
                      "M: the number of points (a Python int; 0 or fewer gives an empty array).")
    return window


hanning = _window_function("hanning", "Hann", _cosines((0.5, -0.5)))
hamming = _window_function("hamming", "Hamming", _cosines((0.54, -0.46)))
blackman = _window_function("blackman", "Blackman", _cosines((0.42, -0.5, 0.08)))
bartlett = _window_function(
    "bartlett", "Bartlett (triangular)",
    lambda n, M: ops.subtract(1.0, ops.abs(ops.divide(ops.subtract(ops.multiply(n, 2.0), M - 1), float(M - 1)))))
__all__ += ["hanning", "hamming", "blackman", "bartlett"]


@_public
def kaiser(M, beta):
    """The Kaiser window of length `M` and shape `beta`, in the default float (float32; NumPy gives float64).

    M: the number of points (a Python int). beta: the shape parameter (a number or a scalar array; 0 gives a
    rectangle, larger values narrow the window).
    """
    def body(n, M):
        alpha = (M - 1) / 2.0
        ratio = ops.divide(ops.subtract(n, alpha), alpha)
        b = ops.astype(_array(beta), dt.float64)
        return ops.divide(i0(ops.multiply(b, ops.sqrt(ops.clip(ops.subtract(1.0, ops.multiply(ratio, ratio)), 0.0)))),
                          i0(b))
    return _window("kaiser", M, body)


def _spaced(name, start, stop, num, endpoint, dtype, axis, transform):
    """`transform(t, lo, hi)` of the fractions t = 0, 1/d, 2/d, ... (d = num - 1 with the endpoint, else num;
    1 exactly at the endpoint) and the ends in float64 (complex128 for complex ends), arrays broadcast, the
    new axis at `axis`; cast to `dtype` (default: the float or complex dtype of start and stop by rune's
    promotion, float32 for Python numbers)."""
    num = _count(name, num)
    weak = ops._all_weak(start, stop)
    start, stop = (_array(v) for v in ops.promote(name, start, stop))
    target = dt.dtype(dtype) if dtype is not None else dt.to_inexact(start.dtype, weak)
    work = dt.complex128 if dt.is_complex(start.dtype) else dt.float64
    lo, hi = ops.astype(start, work), ops.astype(stop, work)
    div = (num - 1) if endpoint else num
    t = ops.divide(arange(num, dtype=dt.float64), float(builtins.max(div, 1)))
    out = transform(ops.reshape(t, (num,) + (1,) * lo.ndim), lo, hi)
    out = ops.moveaxis(out, 0, ops.normalize_axis(name, axis, out.ndim))
    return ops.astype(out, target)


def _at_ends(t, lo, hi, values):
    """`values`, with `lo` itself where t is 0 and `hi` where t is 1 (start and stop exactly, as NumPy's)."""
    return ops.where(ops.equal(t, 0.0), lo, ops.where(ops.equal(t, 1.0), hi, values))


def _count(name, num):
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 0:
        raise ArgumentError(f"{name}: num must be a non-negative Python int, got {num!r}")
    return int(num)


@_public
def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop, num): `num` values spaced evenly on a log scale.

    start, stop: the exponents of the ends (real or complex numbers or arrays, broadcast). num: how many values.
    endpoint: whether base ** stop is the last. base: the base of the log scale (a number). dtype: the result's dtype
    (default: the float of start and stop, float32 for Python numbers; NumPy gives float64). axis: where the new
    axis goes when start or stop are arrays.
    """
    def transform(t, lo, hi):
        exponents = _at_ends(t, lo, hi, ops.add(lo, ops.multiply(t, ops.subtract(hi, lo))))
        return ops.power(_const(exponents, base), exponents)
    return _spaced("logspace", start, stop, num, endpoint, dtype, axis, transform)


@_public
def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """`num` values spaced evenly on a log scale from `start` to `stop` (a geometric progression).

    The ends are exactly start and stop.

    start, stop: the nonzero ends (real ends of opposite signs give NaN between them, as NumPy's; complex ends
    follow the principal branch of the log), numbers or arrays, broadcast. num, endpoint, dtype, axis: as
    logspace.
    """
    def transform(t, lo, hi):
        # lo * (hi / lo) ** t, through the principal log: real ends of opposite signs give NaN inside,
        # as NumPy's; complex ends follow the principal branch.
        return _at_ends(t, lo, hi, ops.multiply(lo, ops.exp(ops.multiply(t, ops.log(ops.divide(hi, lo))))))
    for end in (start, stop):
        if not isinstance(end, Tracer) and np.any(np.asarray(end) == 0):
            raise ArgumentError("geomspace: a geometric sequence cannot include zero (start or stop is 0)")
    return _spaced("geomspace", start, stop, num, endpoint, dtype, axis, transform)
