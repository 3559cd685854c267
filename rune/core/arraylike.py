"""Operators shared by concrete arrays and tracers.

Both `nx.Array` and every `Tracer` inherit these, so user code written against
arrays runs unchanged under every transformation. The methods call the public
`nx` functions; nx is built on core, so it hands them over by calling
`register_functions` once, when `rune.nx` is imported.
"""
from ..errors import ArgumentError, UsageError


class _Unregistered:
    def __getattr__(self, name):
        raise UsageError("array operators need rune.nx: import rune first")


ops = _Unregistered()  # the nx functions the operators call


def register_functions(functions):
    """Make `functions` (an object with the nx functions as attributes, plus
    `getitem`, `IndexUpdater`, `place` and `namespace`, the rune.nx module itself)
    what the array operators call."""
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
    # Comparing with None is an identity test (False for ==, True for !=), as in
    # JAX: code like `if x == None` or `x in (None, ...)` must not fail.
    def __eq__(self, o): return NotImplemented if o is None else ops.equal(self, o)
    def __ne__(self, o): return NotImplemented if o is None else ops.not_equal(self, o)
    __hash__ = None

    def __getitem__(self, idx): return ops.getitem(self, idx)

    # ---- the Array API standard's additions
    def __setitem__(self, idx, value):
        raise UsageError("rune arrays are immutable: x[idx] = v cannot write into x; use "
                         "x = x.at[idx].set(v), which returns the updated array")
    def __lshift__(self, o): return ops.left_shift(self, o)
    def __rlshift__(self, o): return ops.left_shift(o, self)
    def __rshift__(self, o): return ops.right_shift(self, o)
    def __rrshift__(self, o): return ops.right_shift(o, self)
    def __array_namespace__(self, api_version=None):
        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ArgumentError(f"__array_namespace__: unsupported api_version {api_version!r}")
        return ops.namespace
    def to_device(self, device, /, stream=None):
        return ops.place(self, device)
    @property
    def mT(self): return ops.swapaxes(self, -1, -2) if self.ndim >= 2 else _no_matrix(self)

    @property
    def at(self): return ops.IndexUpdater(self)

    @property
    def T(self): return ops.transpose(self)

    # Methods take ndarray's parameters, in its order: NumPy's functions
    # (np.sum(x), np.argmax(x), np.clip(x, 0, 1), ...) call them with keywords.
    def astype(self, dtype): return ops.astype(self, dtype)
    def reshape(self, *shape, order="C"):
        if order != "C":
            raise ArgumentError(f"reshape: only order='C' is supported, got {order!r}")
        return ops.reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
    def transpose(self, *axes): return ops.transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))
    def flatten(self): return ops.reshape(self, (-1,))
    def squeeze(self, axis=None): return ops.squeeze(self, axis)
    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
        return ops.sum(self, axis, keepdims, dtype=dtype, out=out, initial=initial, where=where)
    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
        return ops.prod(self, axis, keepdims, dtype=dtype, out=out, initial=initial, where=where)
    def max(self, axis=None, out=None, keepdims=False, initial=None, where=None):
        return ops.max(self, axis, keepdims, out=out, initial=initial, where=where)
    def min(self, axis=None, out=None, keepdims=False, initial=None, where=None):
        return ops.min(self, axis, keepdims, out=out, initial=initial, where=where)
    def any(self, axis=None, out=None, keepdims=False, *, where=None):
        return ops.any(self, axis, keepdims, out=out, where=where)
    def all(self, axis=None, out=None, keepdims=False, *, where=None):
        return ops.all(self, axis, keepdims, out=out, where=where)
    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
        return ops.mean(self, axis, keepdims, dtype=dtype, out=out, where=where)
    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
        return ops.var(self, axis, keepdims, ddof, dtype=dtype, out=out, where=where)
    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
        return ops.std(self, axis, keepdims, ddof, dtype=dtype, out=out, where=where)
    def argmax(self, axis=None, out=None, *, keepdims=False):
        ops.check_out("argmax", out)
        return ops.argmax(self, axis, keepdims=keepdims)
    def argmin(self, axis=None, out=None, *, keepdims=False):
        ops.check_out("argmin", out)
        return ops.argmin(self, axis, keepdims=keepdims)
    def clip(self, min=None, max=None, out=None):
        ops.check_out("clip", out)
        return ops.clip(self, min, max)
    def round(self, decimals=0, out=None):
        ops.check_out("round", out)
        return ops.round(self, decimals)
    def dot(self, o): return ops.dot(self, o)

    # ---- the rest of jax.Array's methods and properties (NumPy's signatures; they call rune.nx's functions)
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.aval.size * self.dtype.itemsize)
    real = property(lambda self: ops.real(self))
    imag = property(lambda self: ops.imag(self))
    @property
    def flat(self):
        raise UsageError("rune arrays do not implement arr.flat (NumPy's writable flat iterator), as JAX's do "
                         "not; use arr.ravel() or arr.flatten()")
    def conj(self): return ops.conj(self)
    def conjugate(self): return ops.conj(self)
    def copy(self, order="C"): return _nx("copy")(self, order)
    def ravel(self, order="C"):
        if order not in ("C", "K", "A"):
            raise ArgumentError(f"ravel: only order='C' is supported, got {order!r}")
        return ops.ravel(self)
    def swapaxes(self, axis1, axis2): return ops.swapaxes(self, axis1, axis2)
    def take(self, indices, axis=None, out=None, mode=None):
        ops.check_out("take", out)
        return _take(self, indices, axis, mode)
    def repeat(self, repeats, axis=None): return _nx("repeat")(self, repeats, axis)
    def cumsum(self, axis=None, dtype=None, out=None): return _nx("cumsum")(self, axis, dtype, out)
    def cumprod(self, axis=None, dtype=None, out=None): return _nx("cumprod")(self, axis, dtype, out)
    def sort(self, axis=-1, kind=None, order=None, *, stable=True, descending=False):
        _no_order("sort", order)
        return _nx("sort")(self, axis, descending=descending, stable=stable is not False)
    def argsort(self, axis=-1, kind=None, order=None, *, stable=True, descending=False):
        _no_order("argsort", order)
        return _nx("argsort")(self, axis, descending=descending, stable=stable is not False)
    def argpartition(self, kth, axis=-1, kind="introselect", order=None):
        return _nx("argpartition")(self, kth, axis, kind, order)
    def searchsorted(self, v, side="left", sorter=None): return _nx("searchsorted")(self, v, side=side, sorter=sorter)
    def nonzero(self, *, size=None, fill_value=None): return _nx("nonzero")(self, size=size, fill_value=fill_value)
    def compress(self, condition, axis=None, out=None): return _nx("compress")(condition, self, axis, out=out)
    def choose(self, choices, out=None, mode="raise"): return _nx("choose")(self, choices, out, mode)
    def diagonal(self, offset=0, axis1=0, axis2=1): return _nx("diagonal")(self, offset, axis1, axis2)
    def trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
        return _nx("trace")(self, offset, axis1, axis2, dtype, out)
    def ptp(self, axis=None, out=None, keepdims=False): return _nx("ptp")(self, axis, out, keepdims)
    def view(self, dtype=None, type=None):
        if type is not None:
            raise ArgumentError("view: type= is not supported (rune has one array type)")
        return self if dtype is None else _bit_view(self, dtype)


def _nx(name):
    """The rune.nx function `name` (looked up at call time: the families of nx register after core)."""
    return getattr(ops.namespace, name)


def _bit_view(x, dtype):
    """x's bytes read as `dtype` (ndarray.view): on the host, so only for a concrete x; rune has no bitcast
    primitive, so a traced x raises."""
    import numpy as np
    host = x.concrete()
    if host is None:
        from ..errors import ConcretizationError
        raise ConcretizationError(f"view: the bits of a traced {x.aval.describe()} cannot be reinterpreted "
                                  f"as {dtype} under a transformation; call view outside jit/vmap")
    try:
        out = np.ascontiguousarray(host).view(np.dtype(dtype))
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"view: cannot read {x.aval.describe()} as {dtype}: {e}") from None
    return ops.place(ops.asarray(out), x.device)


def _take(x, indices, axis, mode):
    """x.take in NumPy's modes, or rune's gather (None: negative indices count from the end, then clamped, as
    JAX). "clip": into [0, n - 1], negative ones to 0 (NumPy's); "wrap": modulo the length; "raise" (NumPy's
    default, which np.take passes): concrete indices are checked here."""
    if mode is None:
        return ops.take(x, indices, axis)
    n = x.size if axis is None else x.shape[ops.normalize_axis("take", axis, x.ndim)]
    idx = ops.asarray(indices) if not hasattr(indices, "aval") else indices
    if mode == "clip":
        return ops.take(x, ops.clip(idx, 0, max(n - 1, 0)), axis)
    if mode == "wrap":
        return ops.take(x, ops.remainder(idx, max(n, 1)), axis)
    if mode != "raise":
        raise ArgumentError(f"take: mode must be 'clip', 'wrap' or 'raise', got {mode!r}")
    host = idx.concrete()
    if host is None:
        raise ArgumentError("take: mode='raise' checks the indices, which are traced here; under jit use "
                            "mode='clip' (rune's gathers clamp) or mode='wrap'")
    import numpy as np
    bad = np.asarray(host)[(np.asarray(host) < -n) | (np.asarray(host) >= n)]
    if bad.size:
        from ..errors import IndexingError
        raise IndexingError(f"take: index {bad.flat[0]} is out of bounds for axis {axis} with size {n}")
    return ops.take(x, idx, axis)


def _no_order(name, order):
    # (stable=None, which np.sort/np.argsort pass, is stable: rune's sorts always are unless told otherwise)
    if order is not None:
        raise ArgumentError(f"{name}: order= (field names of structured arrays) is not supported; got {order!r}")


def _no_matrix(x):
    from ..errors import ShapeError
    raise ShapeError(f"mT: expected an array of at least 2 dimensions, got shape {x.shape}")


def _in_place(name, op):
    """x op= y rebinds x to the result, which must keep x's dtype and shape (the
    standard's rule: an in-place operator never changes what x is)."""
    def method(self, o):
        out = op(self, o)
        if out.dtype != self.dtype or out.shape != self.shape:
            from ..errors import DTypeError
            raise DTypeError(f"x {name} y would change x from {self.aval.describe()} to "
                             f"{out.aval.describe()}; write x = x {name[:-1]} y to rebind x to the new array")
        return out
    return method


for _name, _symbol, _fn in (("add", "+=", "add"), ("sub", "-=", "subtract"), ("mul", "*=", "multiply"),
                            ("truediv", "/=", "divide"), ("floordiv", "//=", "floor_divide"),
                            ("mod", "%=", "remainder"), ("pow", "**=", "power"), ("matmul", "@=", "matmul"),
                            ("and", "&=", "bitwise_and"), ("or", "|=", "bitwise_or"),
                            ("xor", "^=", "bitwise_xor"), ("lshift", "<<=", "left_shift"),
                            ("rshift", ">>=", "right_shift")):
    setattr(ArrayLike, f"__i{_name}__", _in_place(_symbol, lambda x, y, _f=_fn: getattr(ops, _f)(x, y)))
