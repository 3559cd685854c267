"""The host backend: NumPy arrays and an implementation per primitive.

`BACKEND` is the `rune.backends.base.Backend` of every host device (the
protocol is written down there). `IMPLS` maps primitive names to functions of
raw NumPy values: the table of rune/backends/array_impls.py on NumPy. Every
host device runs the same functions, and plans run them for stretches on the
host. The module-level `to_host`, `from_host`, `stack` and `empty` are the
backend's own methods, kept for older callers.
"""
import functools

import numpy as np

from ...base import config
from . import threads
from ...codegen.c import CDialect
from ..array_impls import make_impls, numpy_quiet
from ..base import Backend
from . import batched_matmul, blas_pool, compiler as c_compiler
from .stretch import CKernels


def to_host(raw):
    return raw


def from_host(host, device):
    # A move between distinct host devices is a real copy, so that no two
    # devices ever share a buffer.
    return np.array(host, copy=True)


def stack(rows, aval):
    """Rows of a loop's output stacked along a new leading axis."""
    return np.stack(rows)


def empty(aval):
    """The stacked output of a loop that ran zero times."""
    return np.empty((0,) + aval.shape[1:], aval.dtype)


@functools.cache
def _special():
    # SciPy takes a fifth of a second to import: only pay for it when erf or
    # sigmoid is first used.
    from scipy import special
    return special


class CpuBackend(Backend):
    """Every host device: NumPy buffers; host devices are distinct places that
    happen to share memory, so a copy between them is a real copy."""
    platform = "cpu"
    dialect = CDialect()

    def to_host(self, raw):
        return to_host(raw)

    def from_host(self, host, device):
        return from_host(host, device)

    def copy(self, raw, src, dst):
        return np.array(raw, copy=True)

    def adopt(self, host, device):
        return host   # nothing else holds it: no copy needed to keep devices apart

    def from_foreign(self, obj, device):
        """NumPy arrays and scalars, host DLPack producers, and CuPy arrays
        (copied off their GPU); anything else NumPy can read."""
        if isinstance(obj, (np.ndarray, np.generic)):
            return np.asarray(obj)
        if hasattr(obj, "__cuda_array_interface__") and hasattr(obj, "get"):
            return obj.get()  # a CuPy array: its host copy
        if hasattr(obj, "__dlpack__") and _is_host_dlpack(obj):
            return np.from_dlpack(obj)
        return np.asarray(obj)

    def holds(self, obj):
        """NumPy arrays and host DLPack producers."""
        return isinstance(obj, (np.ndarray, np.generic)) or (hasattr(obj, "__dlpack__") and _is_host_dlpack(obj))

    def full(self, shape, value, dtype, device):
        return np.full(shape, value, dtype)

    def iota(self, shape, dtype, dimension, device):
        line = np.arange(shape[dimension], dtype=dtype)
        return np.broadcast_to(line.reshape((-1,) + (1,) * (len(shape) - dimension - 1)), shape)

    def empty(self, aval):
        return empty(aval)

    def stack(self, rows, aval):
        return stack(rows, aval)

    def device_count(self):
        """The host devices (RUNE_HOST_DEVICES, default 1)."""
        return config.host_devices()

    def compiler(self, device=None):
        """The C compiler stretches are built with (`RUNE_CC`, else cc/gcc/clang on
        PATH; the same for every host device), or None: then plans run their
        stretches on NumPy."""
        return c_compiler.find()

    def compile(self, compiler, prelude, units):
        """Rendered C units (name, source, kernels) built into shared libraries
        through the compile pipeline and loaded with ctypes: one entry function each."""
        return c_compiler.build(compiler, prelude, units)

    def kernels_for(self, device, props):
        """The CKernels of the C compiler (one for every host device): stretches become one
        compiled C entry each (built on first run); the host renders for no device
        properties (`props` is unused)."""
        compiler = self.compiler(device)
        if compiler is None:
            return None
        return self.shared_kernels(compiler, lambda: CKernels(self, compiler))


def _is_host_dlpack(obj):
    try:
        return obj.__dlpack_device__()[0] == 1  # kDLCPU
    except Exception:  # a producer that cannot say where it lives is not read as host memory
        return False


BACKEND = CpuBackend()
# matrix products on threads of rune's own, their bits independent of how many (batched_matmul.py)
IMPLS = CpuBackend.IMPLS = make_impls(
    np, BACKEND, special=_special, quiet=numpy_quiet,
    matmul=lambda a, b: batched_matmul.matmul(a, b, c_compiler.find()))
# BLAS's parallel work goes onto the kernels' OpenMP pool now, at import: OpenBLAS's setter must
# come before other threads are inside BLAS (RUNE_BLAS_POOL=0 leaves it alone)
threads.route_blas_with(lambda: blas_pool.route(c_compiler.find()))
CpuBackend.library = {name: IMPLS[name] for name in ("dot_general", "conv", "reduce_window")}
