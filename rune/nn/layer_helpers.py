"""Helpers the layers share: keys split into a list, PyTorch's default
initialisation, an input cast to a layer's dtype, per-axis arguments."""
import math

from .. import nx
from ..errors import DTypeError, ShapeError


def split_keys(key, n):
    keys = nx.random.split(key, n)
    return [keys[i] for i in range(n)]


def fan_in_uniform(key, shape, fan_in, dtype):
    """PyTorch's default for Linear and Conv weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
    return nx.random.uniform(key, shape, nx.dtype(dtype), -bound, bound)


def init_or_default(init, key, shape, fan_in, dtype):
    return fan_in_uniform(key, shape, fan_in, dtype) if init is None else init(key, shape, dtype)


def in_dtype_of(where, x, param):
    """The input `x` in the dtype of the layer's parameter `param` (under a policy,
    the compute dtype its parameters were cast to): int ids or float64 data given
    to a float32 layer compute in float32 and give float32, as the layer's own
    arithmetic would, not in NumPy's promoted dtype. Complex inputs to a real
    layer are refused (a cast would drop their imaginary part)."""
    x = nx.asarray(x)
    if param is None or x.dtype == param.dtype:
        return x
    if nx.isdtype(x.dtype, "complex floating") and not nx.isdtype(param.dtype, "complex floating"):
        raise DTypeError(f"{where}: expected a real input for its {nx.dtype(param.dtype).name} parameters, "
                         f"got {nx.dtype(x.dtype).name} of shape {x.shape}")
    return nx.astype(x, param.dtype)


def per_axis(name, what, value, n):
    value = (value,) * n if isinstance(value, int) else tuple(value)
    if len(value) != n:
        raise ShapeError(f"{name}: {what} needs {n} entries (one per spatial axis), got {value}")
    return value

