"""`Array`: an immutable n-d array on one device, the concrete value under every trace.

It lives in core because the eval interpreter makes one for every result;
`rune.nx` exports it. `_raw` is the backend buffer (NumPy on the host), which
only the device's backend (`rune.backends`) touches.
"""
import ml_dtypes
import numpy as np

from ..backends import backend_for
from ..base import memory
from .devices import get_device, transfer
from ..errors import ShapeError
from . import arraylike as _arraylike
from .arraylike import ArrayLike
from .aval import Aval


class Array(ArrayLike):
    """A concrete array: a backend buffer, its device, and whether its dtype is weak.

    Converting to host values: `float(x)`, `int(x)`, `complex(x)`, `operator.index(x)`,
    `x.item()`, `x.tolist()` and `np.asarray(x)` give `x`'s values. Under eager `grad`,
    `jvp` and `vjp` a value being differentiated is a tracer, not an Array, and every
    one of these conversions (`.item()` and `.tolist()` included, as in JAX) raises
    `NotDifferentiableError` instead of returning values without their derivative:
    compute with `rune.nx` functions, or convert `rune.stop_gradient(x)` to drop the
    derivative on purpose. Inputs not being differentiated stay Arrays and convert.
    `bool(x)` (an `if`) works on either: a branch carries no derivative.

    `np.asarray(x)` is a read-only view of the buffer, for good: its base is a
    read-only export of the buffer (`read_only_view`), so NumPy refuses
    `setflags(write=True)` on it and on every view made from it.
    """
    # `_shared`, set only once the buffer is lent to or borrowed from foreign code
    # (DLPack, __cuda_array_interface__), keeps it from being donated (jit/donation.py).
    __slots__ = ("_raw", "device", "weak", "_aval", "_shared")

    def __init__(self, raw, device, weak=False):
        self._raw = raw
        self.device = device
        self.weak = weak
        self._aval = None

    @property
    def shape(self):
        return self._raw.shape

    @property
    def dtype(self):
        return self._raw.dtype

    @property
    def aval(self):
        if self._aval is None:
            self._aval = Aval(self._raw.shape, self._raw.dtype, self.device, self.weak)
        return self._aval

    def _host(self):
        if self.device.platform == "cpu":
            return np.asarray(self._raw)
        return transfer(self._raw, self.device, get_device("cpu"))

    def item(self):
        if self._raw.size != 1:
            raise ShapeError(f"converting an array to a Python scalar needs exactly one element, "
                             f"got shape {self.shape}")
        return self._host().item()

    def tolist(self):
        return self._host().tolist()

    def concrete(self):
        return self

    # NumPy's ufuncs and functions on a rune array run rune.nx's where rune has one for
    # the call (a rune array results, as from the array's methods), else NumPy's own on
    # the values (rune.nx.numpy_dispatch)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _arraylike.ops.numpy_concrete_ufunc(_arraylike.ops.namespace, ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _arraylike.ops.numpy_concrete_function(_arraylike.ops.namespace, func, types, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        host = self._host()
        if dtype is not None and np.dtype(dtype) != host.dtype:
            return host.astype(dtype)
        if copy:
            return np.array(host, copy=True)
        return read_only_view(host)

    def __bool__(self): return bool(self.item())
    def __float__(self): return float(self.item())
    def __int__(self): return int(self.item())
    def __index__(self):
        if self.dtype.kind not in "iu" or self.ndim:
            raise TypeError(f"only integer scalar arrays can be used as an index, got {self.aval.describe()}")
        return int(self.item())
    def __complex__(self): return complex(self.item())

    def __repr__(self):
        body = np.array2string(self._host(), separator=", ", prefix="Array(")
        where = "" if self.device == _HOST0 else f", device={self.device}"
        return f"Array({body}, dtype={self.dtype.name}{where})"

    def __format__(self, spec):
        if self._raw.ndim == 0:
            return format(self.item(), spec)
        return format(str(self), spec)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device),
                                    ("copy", copy)) if v is not None}
        self._shared = True
        return self._raw.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._raw.__dlpack_device__()

    @property
    def __cuda_array_interface__(self):
        # GPU arrays only (an AttributeError hides it on the host), so that
        # cupy.asarray, Numba and PyTorch take the buffer without a copy.
        interface = self._raw.__cuda_array_interface__
        self._shared = True
        return interface

    def block_until_ready(self):
        backend_for(self.device).synchronize(self.device)
        return self

    def read_scalar(self):
        """The value as a Python scalar for the host to decide with (a loop
        predicate, a branch index): a read that waits for the device, counted in
        `rune.stats()["scalar_reads"]`."""
        return backend_for(self.device).read_scalar(self._raw)

    # Pickling and copying keep what makes an Array more than its values: the
    # device (by name, so it resolves in the loading process) and weakness.
    def __reduce__(self):
        return (_rebuild, (self._host(), self.device.name, self.weak))

    def __copy__(self):
        return self  # immutable: a shallow copy may share everything

    def __deepcopy__(self, memo):
        return Array(self._raw.copy(), self.device, self.weak)


# rune.memory_stats (rune/base/memory.py): once counting starts, every Array counts its
# buffer's bytes when made and takes them off when it goes. Until then Array has no
# __del__ and its plain __init__, so counting costs nothing unless asked for.
def _counting_init(self, raw, device, weak=False):
    self._raw = raw
    self.device = device
    self.weak = weak
    self._aval = None
    memory.allocated(device.name, raw.nbytes)


def _counting_del(self, _freed=memory.freed):
    try:
        nbytes = self._raw.nbytes
    except Exception:   # donated (a DeletedBuffer): its bytes came off when the call took it
        return
    _freed(self.device.name, nbytes)


def _start_counting():
    """Install the counting methods; the Arrays alive now as [(device name, bytes)]."""
    import gc
    live = []
    for obj in gc.get_objects():
        if type(obj) is Array:
            try:
                live.append((obj.device.name, obj._raw.nbytes))
            except Exception:   # donated
                pass
    Array.__init__, Array.__del__ = _counting_init, _counting_del
    return live


memory.on_start(_start_counting)


# Dtypes a memoryview cannot describe (ml_dtypes'), exported as unsigned
# integers of their size and viewed back.
_BUFFER_AS = {np.dtype(ml_dtypes.bfloat16): np.dtype(np.uint16)}


def read_only_view(raw):
    """A view of the host buffer `raw` that no one can make writable.

    NumPy lets a view's WRITEABLE flag be set back to True whenever some base
    under it is writable, and an Array's own buffer is (its writability is left
    alone: kernels and donation own it, and a flag set on every Array made would
    cost the cached jit call more than this costs NumPy's conversions). So the
    view is built on a read-only buffer export of `raw`, which no flag can undo;
    it shares `raw`'s memory, shape and strides (no copy).
    """
    stand_in = _BUFFER_AS.get(raw.dtype)
    view = np.asarray(memoryview(raw if stand_in is None else raw.view(stand_in)).toreadonly())
    return view if stand_in is None else view.view(raw.dtype)


def _rebuild(host, device_name, weak=False):
    host_device = get_device("cpu")
    dst = get_device(device_name)
    return Array(host if dst == host_device else transfer(host, host_device, dst), dst, weak)


_HOST0 = get_device("cpu")


def from_foreign(obj, device):
    """An Array on `device` holding a foreign array `obj` (NumPy, CuPy, a DLPack
    producer): its buffer itself where `device`'s backend can take it without a
    copy, else a copy (`Backend.from_foreign`)."""
    return Array(backend_for(device).from_foreign(obj, device), device)

