"""The CUDA backend: CuPy arrays on NVIDIA GPUs.

`BACKEND` is the `rune.backends.base.Backend` of every `cuda:N` device (the
protocol is written down there). Its primitive table is the one of
rune/backends/array_impls.py on CuPy; each function runs under its GPU's
context (`cupy.cuda.Device`), so arrays on `cuda:1` are computed on `cuda:1`.
Matmul is cuBLAS and the special functions are `cupyx.scipy.special`, both
through CuPy; convolution is im2col plus cuBLAS (CuPy 14 dropped cuDNN).
jit stretches on a GPU become `CompiledStretch`es (rune/backends/stretch.py;
`kernels_for`: the CUDA dialect's kernels for the GPU's `device_props`),
compiled by rune's own NVRTC call (`compiler`, rune/backends/cuda/nvrtc.py)
through the compile pipeline and disk cache every platform shares. Importing
this module imports CuPy; rune imports it only when a `cuda` device is first
used.
"""
import contextlib
import functools
import warnings

import cupy
import ml_dtypes
import numpy as np

from ...base import config
from ...errors import DeviceError, RuneWarning
from ...codegen.cuda import CudaDialect, DeviceProps
from ..array_impls import make_impls
from ..base import Backend
from . import launch, owned
from .stretch import CudaKernels

_KDL_CPU, _KDL_CUDA = 1, 2  # DLPack device types
_BF16 = np.dtype(ml_dtypes.bfloat16)

@functools.cache
def _special():
    from cupyx.scipy import special
    return special


def _gpu(device):
    return cupy.cuda.Device(device.index)


def _first_array(args):
    for a in args:
        if isinstance(a, cupy.ndarray):
            return a
    return None


def _event_on(stream):
    """An event recorded on `stream`: it completes after the work queued there so far."""
    event = cupy.cuda.Event(disable_timing=True)
    event.record(stream)
    return event


def _on_args_device(fn):
    """`fn` run on the GPU that holds its first array argument (the table plans
    read, shared by every GPU)."""
    def run(*args, **params):
        held = _first_array(args)
        if held is None:
            return fn(*args, **params)
        with held.device:
            return fn(*args, **params)
    return run


def _on_device(fn, index):
    def run(*args, **params):
        with cupy.cuda.Device(index):
            return fn(*args, **params)
    return run


class CudaBackend(Backend):
    """Every `cuda:N`: CuPy buffers, one table per GPU running on that GPU."""
    platform = "cuda"
    dialect = CudaDialect()   # for the default DeviceProps; a GPU's stretches render for its own

    def __init__(self):
        self._raw = make_impls(cupy, self, special=_special, cheap_reads=False)
        self.IMPLS = {name: _on_args_device(fn) for name, fn in self._raw.items()}
        self.library = {name: self.IMPLS[name] for name in ("dot_general", "conv", "reduce_window")}
        self._per_device = {}
        self._props = {}  # GPU index -> DeviceProps

    def impls(self, device):
        table = self._per_device.get(device.index)
        if table is None:
            table = self._per_device[device.index] = {
                name: _on_device(fn, device.index) for name, fn in self._raw.items()}
        return table

    def to_host(self, raw):
        with raw.device:
            return cupy.asnumpy(raw)  # waits for the work that produces raw

    def from_host(self, host, device):
        _refuse_bfloat16(host.dtype, device)
        with _gpu(device):
            return owned.uploaded(host)   # an allocation a donating call may take

    def copy(self, raw, src, dst):
        """GPU to GPU directly (peer copy where the GPUs allow it, else CuPy
        stages it on the device side); never through the host.

        CuPy queues the copy on the destination's stream, which knows nothing of the
        source's: it waits for the source's pending writes of `raw`, and the source's
        stream waits for the copy's read of it in turn, since `raw` (a contiguous
        temporary, or the caller's array once dropped) goes back to the source's pool
        when this returns and may be handed to the next kernel there."""
        with _gpu(src):
            raw = cupy.ascontiguousarray(raw)
            written = _event_on(cupy.cuda.get_current_stream())
        with _gpu(dst):
            stream = cupy.cuda.get_current_stream()
            stream.wait_event(written)
            out = cupy.copy(raw)  # allocated on the current GPU, copied over from the other
            read = _event_on(stream)
        with _gpu(src):
            cupy.cuda.get_current_stream().wait_event(read)
        return out

    def from_foreign(self, obj, device):
        """CuPy arrays and DLPack or `__cuda_array_interface__` producers on this
        GPU are taken as they are (zero copy); ones on another GPU are copied
        over, host ones (NumPy, CPU tensors) copied up."""
        if isinstance(obj, cupy.ndarray):
            return obj if obj.device.id == device.index else self.copy(obj, _Index(obj.device.id), device)
        where = _dlpack_device(obj)
        if where is not None and where[0] == _KDL_CUDA:
            with cupy.cuda.Device(where[1]):
                raw = cupy.from_dlpack(obj)
            return raw if where[1] == device.index else self.copy(raw, _Index(where[1]), device)
        if hasattr(obj, "__cuda_array_interface__"):
            with _gpu(device):
                raw = cupy.asarray(obj)
            return raw if raw.device.id == device.index else self.copy(raw, _Index(raw.device.id), device)
        if where is not None and where[0] == _KDL_CPU:
            return self.from_host(np.from_dlpack(obj), device)
        return self.from_host(np.asarray(obj), device)

    def holds(self, obj):
        """CuPy arrays, `__cuda_array_interface__` producers and DLPack producers
        of any device but the host's."""
        if hasattr(obj, "__cuda_array_interface__"):
            return True
        where = _dlpack_device(obj)   # None: not a DLPack producer, host data
        return where is not None and where[0] != _KDL_CPU

    def full(self, shape, value, dtype, device):
        _refuse_bfloat16(np.dtype(dtype), device)
        with _gpu(device):
            out = cupy.empty(shape, dtype)
            out[...] = value  # a 0-d device value is copied on the GPU, never read by the host
            return out

    def iota(self, shape, dtype, dimension, device):
        with _gpu(device):
            line = cupy.arange(shape[dimension], dtype=dtype)
            return cupy.broadcast_to(line.reshape((-1,) + (1,) * (len(shape) - dimension - 1)), shape)

    def empty(self, aval):
        # An aval without a device (a loop's, planned under the default device) is
        # made on the current GPU.
        with _gpu(aval.device) if aval.device is not None else contextlib.nullcontext():
            return cupy.empty((0,) + aval.shape[1:], aval.dtype)

    def stack(self, rows, aval):
        with rows[0].device:
            return cupy.stack(rows)

    def synchronize(self, device):
        _gpu(device).synchronize()

    def device_count(self):
        """The GPUs CuPy sees (0 without a driver or a GPU)."""
        try:
            return cupy.cuda.runtime.getDeviceCount()
        except Exception:  # no driver, or a driver without a GPU: none here
            return 0

    def compiler(self, device=None):
        """The NVRTC compiler (rune/backends/cuda/nvrtc.py) for the architecture of
        `device` (default: GPU 0): plans compile their CUDA stretches. None (op by op,
        as the host without a C compiler) with RUNE_CUDA_COMPILE=0, or where NVRTC or
        the cuda_fp16.h every unit includes is not installed (nvidia-cuda-runtime)."""
        if not config.cuda_compile():
            return None
        return _nvrtc_compiler(self.device_props(device if device is not None else _Index(0)).arch)

    def device_props(self, device):
        """The `DeviceProps` launch shapes are chosen from, read from the GPU once."""
        props = self._props.get(device.index)
        if props is None:
            p = cupy.cuda.runtime.getDeviceProperties(device.index)
            props = self._props[device.index] = DeviceProps(
                p["multiProcessorCount"], p["maxThreadsPerBlock"], f"sm_{p['major']}{p['minor']}")
        return props

    def kernels_for(self, device, props):
        """The CudaKernels running stretches on `device` rendered for `props` (default: the
        GPU's own), one per GPU, properties and NVRTC compiler; None where NVRTC is
        missing: stretches then run op by op."""
        props = self.device_props(device) if props is None else props
        compiler = _nvrtc_compiler(props.arch)
        if compiler is None:
            return None
        where = (device.index, props.sm_count, props.max_threads_per_block, props.arch, compiler)
        return self.shared_kernels(where, lambda: CudaKernels(
            device.index, props, lambda prelude, units: self.compile(compiler, prelude, units)))

    def uploader(self, device):
        """Pinned host memory and a side stream (rune/backends/cuda/upload.py)."""
        from .upload import PinnedUploader
        return PinnedUploader(device)

    def communicator(self, device):
        """NCCL on this GPU (rune/backends/cuda/nccl.py), not yet connected."""
        from .nccl import NcclCommunicator
        return NcclCommunicator(device.index)

    def compile(self, compiler, prelude, units):
        """Units of CUDA kernels (see `rune.backends.cuda.launch`) compiled through the
        compile pipeline with `compiler` (an NVRTC compiler: one cubin per batch, in
        rune's disk cache) and loaded as CuPy modules: one launcher per unit."""
        return launch.launchers(compiler, prelude, units)


_NO_NVRTC = []   # why NVRTC could not be had, once known: GPU stretches then run op by op


def _nvrtc_compiler(arch):
    """The NVRTC compiler for `arch`, or None where NVRTC or the CUDA headers are missing.
    A library that cannot be loaded (cuda-bindings raises DynamicLibNotFoundError, a
    RuntimeError, where libnvrtc is not found) is missing too: GPU jit runs op by op
    after one warning naming it, and the loader is not searched again."""
    if _NO_NVRTC:
        return None
    from . import nvrtc
    try:
        return nvrtc.compiler(arch)
    except nvrtc.NvrtcError:
        return None
    except Exception as e:  # the NVRTC library itself does not load: whatever the reason, op by op
        _NO_NVRTC.append(e)
        warnings.warn(f"rune: NVRTC could not be loaded ({type(e).__name__}: {e}); jitted GPU code runs "
                      f"op by op, uncompiled. Install the NVRTC library of your CUDA major "
                      f"(pip install 'rune[cuda]', or 'rune[cuda12]' for a CUDA 12 driver)",
                      RuneWarning, stacklevel=2)
        return None


@functools.cache
def _bfloat16_problem():
    from .environment import bfloat16_problem
    return bfloat16_problem()


def _refuse_bfloat16(dtype, device):
    """A DeviceError naming the fix where CuPy cannot hold bfloat16 (NumPy < 2.1.2),
    before CuPy fails with a bare 'unsupported type'."""
    if dtype == _BF16 and _bfloat16_problem():
        raise DeviceError(f"cannot put a bfloat16 array on {getattr(device, 'name', device)}: "
                          f"{_bfloat16_problem()}")


def nvrtc_options():
    """The flags rendered CUDA units compile with (rune/backends/cuda/nvrtc.py)."""
    from . import nvrtc
    return (f"-I{nvrtc.include_dir()}", *nvrtc.OPTIONS)


class _Index:
    """A stand-in Device for a GPU known only by its index (a foreign array's)."""
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def _dlpack_device(obj):
    try:
        return tuple(obj.__dlpack_device__())
    except Exception:  # not a DLPack producer, or one that cannot say where it lives
        return None


BACKEND = CudaBackend()
