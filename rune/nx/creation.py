"""Creation functions: constants made on the device.

`zeros`, `ones`, `full`, integer `arange` and `eye` bind the `full` and `iota`
primitives, which the device's backend fills: nothing is built on the host,
and under a transformation they are equations, not captured O(size) constants.
Data given by the user (`create`, a non-scalar fill, float `arange`,
`linspace`, whose rounding NumPy defines) is built on the host and placed.
"""
import numpy as np

from ..core.aval import normalize_shape
from ..core.trace import Tracer
from ..errors import ShapeError
from . import dtypes as dt
from . import ops
from .array import Array, from_host
from .constants import filled, iota


def _dtype(dtype, default=dt.float32):
    return default if dtype is None else dt.dtype(dtype)


def zeros(shape, dtype=None, device=None):
    return filled(normalize_shape("zeros", shape), 0, _dtype(dtype), device)


def ones(shape, dtype=None, device=None):
    return filled(normalize_shape("ones", shape), 1, _dtype(dtype), device)


def full(shape, fill_value, dtype=None, device=None):
    if isinstance(fill_value, (Array, Tracer)):
        fill = ops.asarray(fill_value, dtype, device)
        return ops.broadcast_to(fill, normalize_shape("full", shape))
    dtype = _dtype(dtype, dt.weak_dtype_of(fill_value) if isinstance(fill_value, (bool, int, float, complex))
                   else np.asarray(fill_value).dtype)
    shape = normalize_shape("full", shape)
    if np.ndim(fill_value) == 0:
        return filled(shape, fill_value, dtype, device)
    return from_host(np.full(shape, fill_value, dtype), device)  # a fill that broadcasts


def _like(x, dtype, device):
    """Shape, dtype and device of `x` (an array, a tracer, an aval, or array data)."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "device")):
        x = ops.asarray(x)
    return x.shape, (x.dtype if dtype is None else dt.dtype(dtype)), (x.device if device is None else device)


def zeros_like(x, dtype=None, device=None):
    shape, dtype, device = _like(x, dtype, device)
    return zeros(shape, dtype, device)


def ones_like(x, dtype=None, device=None):
    shape, dtype, device = _like(x, dtype, device)
    return ones(shape, dtype, device)


def full_like(x, fill_value, dtype=None, device=None):
    shape, dtype, device = _like(x, dtype, device)
    return full(shape, fill_value, dtype, device)


def scalar(value, dtype=None, device=None):
    """A 0-d array holding `value` (rune's default dtype for its kind if `dtype` is None)."""
    return ops.asarray(value, dtype, device) if dtype is not None else ops.asarray(value, device=device)


def create(dtype, shape, data, device=None):
    """An array of `shape` and `dtype` filled from the flat sequence `data` (row-major)."""
    shape = normalize_shape("create", shape)
    flat = np.asarray(data, dt.dtype(dtype)).reshape(-1)
    if flat.size != int(np.prod(shape, dtype=np.int64)):
        raise ShapeError(f"create: shape {shape} needs {int(np.prod(shape))} elements, got {flat.size}")
    return from_host(flat.reshape(shape), device)


def arange(start, stop=None, step=1, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        is_float = any(isinstance(v, float) for v in (start, stop, step))
        dtype = dt.float32 if is_float else dt.int32
    dtype = dt.dtype(dtype)
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
           for v in (start, stop, step)) and step != 0:
        values = range(int(start), int(stop), int(step))
        if not values or (_INT32.min <= min(values[0], values[-1]) and max(values[0], values[-1]) <= _INT32.max):
            out = iota((len(values),), dt.int32, 0, device)  # exact: every value fits int32
            if step != 1:
                out = ops.multiply(out, int(step))
            if start != 0:
                out = ops.add(out, int(start))
            return out if dtype == dt.int32 else ops.astype(out, dtype)
    return from_host(np.arange(start, stop, step).astype(dtype), device)


_INT32 = np.iinfo(np.int32)


def linspace(start, stop, num=50, endpoint=True, dtype=None, device=None):
    num, = normalize_shape("linspace", (num,))
    return from_host(np.linspace(start, stop, num, endpoint=endpoint).astype(_dtype(dtype)), device)


def eye(n, m=None, k=0, dtype=None, device=None):
    n, m = normalize_shape("eye", (n, n if m is None else m))
    rows = iota((n, m), dt.int32, 0, device)
    if k:
        rows = ops.add(rows, int(k))
    return ops.astype(ops.equal(rows, iota((n, m), dt.int32, 1, device)), _dtype(dtype))


def identity(n, dtype=None, device=None):
    return eye(n, dtype=dtype, device=device)
