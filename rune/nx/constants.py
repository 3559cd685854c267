"""Constants made on the device: binds of the `full` and `iota` primitives.

Used by creation functions, indexing, and every rule that needs zeros, ones,
positions or one-hots, so that no transformation builds an O(size) array on
the host and no staged program captures one (to a fuser they are index
arithmetic). `device=None` means the default device, as for creation.
"""
import numpy as np

from ..core.array import _HOST0, Array
from ..core.prims import P
from ..core.trace import bind, evaluate
from ..core.devices import current_default, get_device
from ..errors import ScalarOverflowError
from ..core import dtypes as dt


def _device(device):
    return current_default() if device is None else get_device(device)


def checked_scalar(name, value, dtype):
    """The Python scalar `value` as a NumPy scalar of `dtype`; one it cannot hold is a
    ScalarOverflowError naming `name`, never NumPy's OverflowError naming nothing."""
    try:
        return dtype.type(value)
    except OverflowError:
        raise ScalarOverflowError(f"{name}: the Python scalar {value} does not fit in {dtype.name}") from None


def host_convert(host, dtype):
    """The NumPy array `host` converted to `dtype` by rune's rule (the `convert`
    primitive, run now on the host: NaN into integers gives 0, out-of-range
    values saturate), whatever transformation is current: host data is a
    constant to every one of them."""
    return evaluate(P["convert"], Array(host, _HOST0), dtype=dtype)._raw


def host_cast(value, dtype, name="full"):
    """Host data `value` as a NumPy array of `dtype`. Floats into integers follow rune's
    conversion rule (`host_convert`: NaN gives 0, out-of-range values
    saturate), never NumPy's, which raises for some values and wraps others. A Python
    int that `dtype` cannot hold raises a ScalarOverflowError naming `name` (the
    function whose fill value it is: `full` for the fills that come here), as
    `nx.asarray` does, never NumPy's OverflowError naming nothing."""
    dtype = dt.dtype(dtype)
    if type(value) is int:
        return np.asarray(checked_scalar(name, value, dtype), dtype)
    host = np.asarray(value)
    if host.dtype.kind in "fc" and dtype.kind in "iu":
        return host_convert(host, dtype)
    try:
        return np.asarray(value, dtype)
    except OverflowError as e:  # Python ints in a sequence
        raise ScalarOverflowError(f"{name}: the Python integers in the {type(value).__name__} do not fit "
                                  f"in {dtype.name} ({e})") from None


def _scalar(value, dtype):
    """`value` as a NumPy scalar of `dtype` (`host_cast`'s conversion)."""
    return host_cast(value, dtype)[()]


def filled(shape, value, dtype, device=None):
    """`value` everywhere in `shape`."""
    return bind(P["full"], _scalar(value, dtype), shape=tuple(shape), device=_device(device))


def iota(shape, dtype=dt.int32, dimension=0, device=None, start=0):
    """`start` plus the index along `dimension`, for every element of `shape`."""
    return bind(P["iota"], _scalar(start, dtype), shape=tuple(shape), dimension=dimension,
                device=_device(device))
