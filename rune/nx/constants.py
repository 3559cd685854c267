"""Constants made on the device: binds of the `full` and `iota` primitives.

Used by creation functions, indexing, and every rule that needs zeros, ones,
positions or one-hots, so that no transformation builds an O(size) array on
the host and no staged program captures one (to a fuser they are index
arithmetic). `device=None` means the default device, as for creation.
"""
import numpy as np

from ..core.prims import P
from ..core.trace import bind
from ..devices import current_default, get_device
from . import dtypes as dt


def _device(device):
    return current_default() if device is None else get_device(device)


def _scalar(value, dtype):
    """`value` as a NumPy scalar of `dtype`, converted as NumPy's `full` would."""
    return np.full((), value, dt.dtype(dtype))[()]


def filled(shape, value, dtype, device=None):
    """`value` everywhere in `shape`."""
    return bind(P["full"], _scalar(value, dtype), shape=tuple(shape), device=_device(device))


def iota(shape, dtype=dt.int32, dimension=0, device=None, start=0):
    """`start` plus the index along `dimension`, for every element of `shape`."""
    return bind(P["iota"], _scalar(start, dtype), shape=tuple(shape), dimension=dimension,
                device=_device(device))
