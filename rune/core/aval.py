"""Abstract values: what a transformation knows about an array.

An aval is shape, dtype, device and whether the value is a weak Python scalar.
A device of None means "placed with whatever it meets" (Python scalars).
"""
import math
import operator

from .. import tree
from .devices import get_device
from ..errors import ShapeError, UsageError
from .dtypes import dtype as to_dtype


class Aval:
    __slots__ = ("shape", "dtype", "device", "weak", "_hash")

    def __init__(self, shape, dtype, device=None, weak=False):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device
        self.weak = weak
        self._hash = hash((self.shape, dtype, device, weak))

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def update(self, shape=None, dtype=None, device=None, weak=None):
        return Aval(self.shape if shape is None else shape,
                    self.dtype if dtype is None else dtype,
                    self.device if device is None else device,
                    self.weak if weak is None else weak)

    def strong(self):
        return self if not self.weak else Aval(self.shape, self.dtype, self.device, False)

    def __eq__(self, other):
        return (isinstance(other, Aval) and self._hash == other._hash and self.shape == other.shape
                and self.dtype == other.dtype and self.device == other.device
                and self.weak == other.weak)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"

    def describe(self):
        where = f" on {self.device}" if self.device is not None else ""
        return f"{self.dtype.name}{list(self.shape)}{where}"


_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
          "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
          "uint16": "u16", "uint32": "u32", "uint64": "u64", "bool": "bool"}


def short_dtype(dtype):
    return _SHORT.get(dtype.name, dtype.name)


def normalize_shape(where, shape):
    """`shape` (an int or a sequence of ints) as a tuple of non-negative Python
    ints: the one check every function that takes a shape goes through, so
    `zeros((2.0,))` and `uniform(key, (-1,))` are refused where the user wrote them."""
    if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
        return shape  # the common case, kept cheap
    try:
        dims = (_index(shape),) if not hasattr(shape, "__iter__") or getattr(shape, "ndim", 1) == 0 \
            else tuple(_index(d) for d in shape)
    except TypeError:
        raise UsageError(f"{where}: a shape is an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ShapeError(f"{where}: shape {dims} has a negative dimension; dimensions must be >= 0")
    return dims


def _index(d):
    """`d` as a Python int if it is an integer (Python, NumPy, a 0-d integer array);
    TypeError for anything else, bools and floats included."""
    if isinstance(d, bool) or getattr(d, "dtype", None) is not None and d.dtype.kind == "b":
        raise TypeError
    return operator.index(d)


class Spec:
    """The shape, dtype and placement of one callback result."""
    __slots__ = ("shape", "dtype", "device")

    def __init__(self, shape, dtype, device=None):
        self.shape = normalize_shape("Spec", shape)
        self.dtype = to_dtype(dtype)
        self.device = None if device is None else get_device(device)

    def __repr__(self):
        return f"Spec({self.shape}, {self.dtype.name}, device={self.device})"


tree.register(Spec, lambda s: ((), (s.shape, s.dtype, s.device)), lambda aux, _: Spec(*aux))
