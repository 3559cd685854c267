"""`nx.fft`: the standard's FFT extension — so far only its real-valued helpers
(fftfreq, rfftfreq, fftshift, ifftshift). The transforms themselves (fft, rfft,
...) return complex arrays and wait for rune's complex dtypes."""
import numpy as np

from ..errors import ArgumentError
from . import dtypes as dt
from . import ops
from .manipulation import roll


def _frequencies(name, values, d, dtype, device):
    if d == 0:
        raise ArgumentError(f"fft.{name}: the sample spacing d must be nonzero")
    dtype = dt.default_float if dtype is None else dt.dtype(dtype)
    return ops.asarray(np.asarray(values / (d * 1.0), np.float64).astype(dtype), device=device)


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an n-point DFT: [0, 1, ..., n/2 - 1, -n/2, ..., -1] / (d n)."""
    if not isinstance(n, (int, np.integer)) or n <= 0:
        raise ArgumentError(f"fft.fftfreq: n must be a positive int, got {n!r}")
    return _frequencies("fftfreq", np.fft.fftfreq(int(n)), d, dtype, device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an n-point real DFT: [0, 1, ..., n // 2] / (d n)."""
    if not isinstance(n, (int, np.integer)) or n <= 0:
        raise ArgumentError(f"fft.rfftfreq: n must be a positive int, got {n!r}")
    return _frequencies("rfftfreq", np.fft.rfftfreq(int(n)), d, dtype, device)


def _shift(x, axes, sign):
    x = ops.asarray(x)
    axes = tuple(range(x.ndim)) if axes is None else ((axes,) if isinstance(axes, int) else tuple(axes))
    shifts = tuple(sign * (x.shape[a] // 2) for a in axes)
    return roll(x, shifts, axes) if axes else x


def fftshift(x, /, *, axes=None):
    """The zero frequency moved to the centre (a roll by n // 2 along each axis)."""
    return _shift(x, axes, 1)


def ifftshift(x, /, *, axes=None):
    """The inverse of fftshift (a roll by -(n // 2))."""
    return _shift(x, axes, -1)
