"""Operators shared by concrete arrays and tracers.

Both `nx.Array` and every `Tracer` inherit these, so user code written against
arrays runs unchanged under every transformation. The methods call the public
`nx` functions; nx is built on core, so it hands them over by calling
`register_functions` once, when `rune.nx` is imported.
"""
from ..errors import UsageError


class _Unregistered:
    def __getattr__(self, name):
        raise UsageError("array operators need rune.nx: import rune first")


ops = _Unregistered()  # the nx functions the operators call


def register_functions(functions):
    """Make `functions` (an object with the nx functions as attributes, plus
    `getitem` and `IndexUpdater`) what the array operators call."""
    global ops
    ops = functions


class ArrayLike:
    __slots__ = ()
    __array_priority__ = 100  # NumPy defers `ndarray + Array` to us

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: self.aval.size)

    def __len__(self):
        if not self.shape:
            raise UsageError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise UsageError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __add__(self, o): return ops.add(self, o)
    def __radd__(self, o): return ops.add(o, self)
    def __sub__(self, o): return ops.subtract(self, o)
    def __rsub__(self, o): return ops.subtract(o, self)
    def __mul__(self, o): return ops.multiply(self, o)
    def __rmul__(self, o): return ops.multiply(o, self)
    def __truediv__(self, o): return ops.divide(self, o)
    def __rtruediv__(self, o): return ops.divide(o, self)
    def __floordiv__(self, o): return ops.floor_divide(self, o)
    def __rfloordiv__(self, o): return ops.floor_divide(o, self)
    def __mod__(self, o): return ops.remainder(self, o)
    def __rmod__(self, o): return ops.remainder(o, self)
    def __pow__(self, o): return ops.power(self, o)
    def __rpow__(self, o): return ops.power(o, self)
    def __matmul__(self, o): return ops.matmul(self, o)
    def __rmatmul__(self, o): return ops.matmul(o, self)
    def __neg__(self): return ops.negative(self)
    def __pos__(self): return self
    def __abs__(self): return ops.abs(self)
    def __invert__(self): return ops.invert(self)
    def __and__(self, o): return ops.bitwise_and(self, o)
    def __rand__(self, o): return ops.bitwise_and(o, self)
    def __or__(self, o): return ops.bitwise_or(self, o)
    def __ror__(self, o): return ops.bitwise_or(o, self)
    def __xor__(self, o): return ops.bitwise_xor(self, o)
    def __rxor__(self, o): return ops.bitwise_xor(o, self)
    def __lt__(self, o): return ops.less(self, o)
    def __le__(self, o): return ops.less_equal(self, o)
    def __gt__(self, o): return ops.greater(self, o)
    def __ge__(self, o): return ops.greater_equal(self, o)
    def __eq__(self, o): return ops.equal(self, o)
    def __ne__(self, o): return ops.not_equal(self, o)
    __hash__ = None

    def __getitem__(self, idx): return ops.getitem(self, idx)

    @property
    def at(self): return ops.IndexUpdater(self)

    @property
    def T(self): return ops.transpose(self)

    def astype(self, dtype): return ops.astype(self, dtype)
    def reshape(self, *shape):
        return ops.reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
    def transpose(self, *axes): return ops.transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))
    def flatten(self): return ops.reshape(self, (-1,))
    def squeeze(self, axis=None): return ops.squeeze(self, axis)
    def sum(self, axis=None, keepdims=False): return ops.sum(self, axis, keepdims=keepdims)
    def mean(self, axis=None, keepdims=False): return ops.mean(self, axis, keepdims=keepdims)
    def prod(self, axis=None, keepdims=False): return ops.prod(self, axis, keepdims=keepdims)
    def max(self, axis=None, keepdims=False): return ops.max(self, axis, keepdims=keepdims)
    def min(self, axis=None, keepdims=False): return ops.min(self, axis, keepdims=keepdims)
    def argmax(self, axis=None, keepdims=False): return ops.argmax(self, axis, keepdims=keepdims)
    def argmin(self, axis=None, keepdims=False): return ops.argmin(self, axis, keepdims=keepdims)
    def any(self, axis=None, keepdims=False): return ops.any(self, axis, keepdims=keepdims)
    def all(self, axis=None, keepdims=False): return ops.all(self, axis, keepdims=keepdims)
    def var(self, axis=None, keepdims=False, ddof=0): return ops.var(self, axis, keepdims=keepdims, ddof=ddof)
    def std(self, axis=None, keepdims=False, ddof=0): return ops.std(self, axis, keepdims=keepdims, ddof=ddof)
    def clip(self, min=None, max=None): return ops.clip(self, min, max)
    def dot(self, o): return ops.dot(self, o)
