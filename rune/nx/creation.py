"""Creation functions: constants made on the device.

`zeros`, `ones`, `full`, `arange`, `linspace` and `eye` bind the `full` and
`iota` primitives, which the device's backend fills, and arithmetic on them:
nothing is built on the host, and under a transformation they are equations,
not captured O(size) constants. Float `arange` and `linspace` follow NumPy's
own formulas step for step, so they return NumPy's values exactly. Data given
by the user (`create`, a non-scalar fill) and the rare ranges NumPy computes
in other dtypes (complex, extended precision, integers beyond int32) are built
on the host and placed.
"""
import numpy as np

from ..core.aval import normalize_shape
from ..core.trace import Tracer
from ..errors import ShapeError
from ..core import dtypes as dt
from . import ops
from .buffers import Array, from_host
from .constants import filled, host_cast, iota


def _dtype(dtype, default=dt.float32):
    return default if dtype is None else dt.dtype(dtype)


def zeros(shape, dtype=None, device=None):
    """An array of `shape` filled with zeros, made on the device.

    shape: an int or a sequence of ints. dtype: float32 by default. device: where the array is made (a Device or
    a name such as "cuda:0"; default: the default device).
    """
    return filled(normalize_shape("zeros", shape), 0, _dtype(dtype), device)


def ones(shape, dtype=None, device=None):
    """An array of `shape` filled with ones, made on the device.

    shape: an int or a sequence of ints. dtype: float32 by default. device: where the array is made (a Device or
    a name such as "cuda:0"; default: the default device).
    """
    return filled(normalize_shape("ones", shape), 1, _dtype(dtype), device)


def full(shape, fill_value, dtype=None, device=None):
    """An array of `shape` filled with `fill_value`.

    shape: an int or a sequence of ints. fill_value: a scalar, an array that broadcasts to `shape`, or a
    (possibly traced) rune array. dtype: default fill_value's (rune's default for a Python scalar: float32,
    int32, bool, complex64). device: where the array is made (a Device or a name such as "cuda:0"; default: the
    default device).
    """
    if isinstance(fill_value, (Array, Tracer)) or (isinstance(fill_value, (list, tuple))
                                                   and ops.holds_arrays(fill_value)):
        fill = ops.asarray(fill_value, dtype, device)
        return ops.broadcast_to(fill, normalize_shape("full", shape))
    dtype = _dtype(dtype, dt.weak_dtype_of(fill_value) if isinstance(fill_value, (bool, int, float, complex))
                   else np.asarray(fill_value).dtype)
    shape = normalize_shape("full", shape)
    if np.ndim(fill_value) == 0:
        return filled(shape, fill_value, dtype, device)
    return from_host(np.broadcast_to(host_cast(fill_value, dtype), shape).copy(), device)  # a fill that broadcasts


def _like(x, dtype, device):
    """Shape, dtype and device of `x` (an array, a tracer, an aval, or array data)."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "device")):
        x = ops.asarray(x)
    return x.shape, (x.dtype if dtype is None else dt.dtype(dtype)), (x.device if device is None else device)


def zeros_like(x, dtype=None, device=None):
    """Zeros of the shape of `x`.

    x: an array (or array data) whose shape is copied. dtype, device: default to x's. The result is a new array:
    rune arrays are immutable, so nothing is shared with `x`.
    """
    shape, dtype, device = _like(x, dtype, device)
    return zeros(shape, dtype, device)


def ones_like(x, dtype=None, device=None):
    """Ones of the shape of `x`.

    x: an array (or array data) whose shape is copied. dtype, device: default to x's. The result is a new array:
    rune arrays are immutable, so nothing is shared with `x`.
    """
    shape, dtype, device = _like(x, dtype, device)
    return ones(shape, dtype, device)


def full_like(x, fill_value, dtype=None, device=None):
    """An array of the shape of `x` filled with `fill_value`.

    x: an array (or array data) whose shape is copied. dtype, device: default to x's. fill_value: a scalar, or
    an array that broadcasts to x's shape. The result is a new array: rune arrays are immutable, so nothing is
    shared with `x`.
    """
    shape, dtype, device = _like(x, dtype, device)
    return full(shape, fill_value, dtype, device)


def scalar(value, dtype=None, device=None):
    """A 0-d array holding `value` (rune's default dtype for its kind if `dtype` is None).

    value: a Python or NumPy scalar. dtype: the array's dtype. device: where the array is made (a Device or a
    name such as "cuda:0"; default: the default device).
    """
    return ops.asarray(value, dtype, device) if dtype is not None else ops.asarray(value, device=device)


def create(dtype, shape, data, device=None):
    """An array of `shape` and `dtype` filled from the flat sequence `data` (row-major).

    dtype: the array's dtype. shape: an int or a sequence of ints. data: exactly prod(shape) values (else
    ShapeError), built on the host and placed. device: where the array is made (a Device or a name such as
    "cuda:0"; default: the default device).
    """
    shape = normalize_shape("create", shape)
    flat = np.asarray(data, dt.dtype(dtype)).reshape(-1)
    if flat.size != int(np.prod(shape, dtype=np.int64)):
        raise ShapeError(f"create: shape {shape} needs {int(np.prod(shape))} elements, got {flat.size}")
    return from_host(flat.reshape(shape), device)


def arange(start, stop=None, step=1, dtype=None, device=None):
    """Evenly spaced values in [start, stop) with step `step` (NumPy's arange, value for value).

    start: the first value, or the end when `stop` is None (then the range starts at 0). stop: the end,
    excluded. step: the spacing (1 by default). dtype: int32 for int arguments, float32 when any is a float
    (NumPy gives int64/float64). device: where the array is made (a Device or a name such as "cuda:0"; default:
    the default device).
    """
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
    kinds = [np.asarray(v).dtype for v in (start, stop, step)]
    floating = all(k.kind in "iuf" and k.itemsize <= 8 for k in kinds) and any(k.kind == "f" for k in kinds)
    n = _arange_length(start, stop, step) if floating else None
    if n is None:
        # complex, extended precision, or a length NumPy refuses (with its own
        # error): NumPy builds these on the host
        return from_host(np.arange(start, stop, step).astype(dtype), device)
    return ops.astype(_float_arange(start, step, n, device), dtype)


_INT32 = np.iinfo(np.int32)


def _arange_length(start, stop, step):
    """NumPy's arange length, with the arguments' own arithmetic; None where
    NumPy raises (a zero step, or a count that is not finite)."""
    with np.errstate(all="ignore"):  # NumPy scalars: inf and nan lead to the host path and NumPy's error
        diff = stop - start
        count = diff / step if step != 0 else None  # Python floats raise ZeroDivisionError here, as in NumPy
    if count is None or not np.isfinite(count):
        return None
    if count == 0:  # start == stop, or an underflowed count: one element when it is +0
        return 1 if diff != 0 and not np.signbit(count) else 0
    return max(int(np.ceil(float(count))), 0)


def _float_arange(start, step, n, device):
    """NumPy's float `arange` (float64, whatever the arguments' types) made on
    the device, value for value: element 0 is `start`, element 1 `start + step`
    (in the arguments' own arithmetic), element i >= 2 `start + i * delta` with
    delta = element 1 - element 0. Written in few passes, since each one makes
    a fresh O(n) buffer when run eagerly."""
    first, second = np.float64(start), np.float64(start + step)
    head = ops.where(ops.equal(iota((2,), dt.int32, 0, device), 0), first, second)
    if n <= 2:
        return head[:n]
    filled = ops.add(ops.multiply(iota((n,), dt.float64, 0, device), second - first), first)
    return ops.concatenate([head, filled[2:]])


def linspace(start, stop, num=50, endpoint=True, dtype=None, device=None):
    """`num` evenly spaced values from `start` to `stop` (NumPy's linspace, value for value).

    start, stop: the ends. num: how many values (50 by default). endpoint: whether `stop` is the last value
    (True) or excluded. The values are NumPy's, computed in its working dtype (float64 for Python numbers, else
    the arguments' float dtype), then cast to `dtype` (float32 by default, where NumPy gives float64). device:
    where the array is made (a Device or a name such as "cuda:0"; default: the default device).
    """
    num, = normalize_shape("linspace", (num,))
    work = np.linspace(start, stop, 0).dtype  # NumPy's own promotion, Python scalars weak
    if work.kind != "f" or work.itemsize > 8:  # complex or extended precision
        return from_host(np.linspace(start, stop, num, endpoint=endpoint).astype(_dtype(dtype)), device)
    first, last = work.type(start), work.type(stop)
    div = num - 1 if endpoint else num
    delta = np.subtract(last, first, dtype=work)
    y = iota((num,), work, 0, device)  # as NumPy's arange(0, num) in the working dtype
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        step = delta / div if div > 0 else None
    if step is None:  # no step: 0 elements, or 1 with the endpoint
        y = ops.multiply(y, delta)
    elif step == 0:  # NumPy divides first here, so denormal steps are not lost
        y = ops.multiply(ops.divide(y, work.type(div)), delta)
    else:
        y = ops.multiply(y, step)
    y = ops.add(y, first)
    if endpoint and num > 1:
        y = ops.concatenate([y[:num - 1], filled((1,), last, work, device)])
    return ops.astype(y, _dtype(dtype))


def eye(n, m=None, k=0, dtype=None, device=None):
    """A 2-d array with ones on the `k`-th diagonal and zeros elsewhere.

    n: the number of rows. m: the number of columns (default `n`). k: the diagonal (0 the main one, positive
    above, negative below). dtype: float32 by default. device: where the array is made (a Device or a name such
    as "cuda:0"; default: the default device).
    """
    n, m = normalize_shape("eye", (n, n if m is None else m))
    rows = iota((n, m), dt.int32, 0, device)
    k = max(-n, min(m, int(k)))  # a diagonal outside the matrix: all zeros (and no int32 overflow)
    if k:
        rows = ops.add(rows, k)
    return ops.astype(ops.equal(rows, iota((n, m), dt.int32, 1, device)), _dtype(dtype))


def identity(n, dtype=None, device=None):
    """The `n` x `n` identity matrix.

    n: its size. dtype: float32 by default. device: where the array is made (a Device or a name such as
    "cuda:0"; default: the default device).
    """
    return eye(n, dtype=dtype, device=device)
