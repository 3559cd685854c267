"""Devices, the default device, and moving raw buffers between devices.

Host devices hold NumPy arrays; CUDA devices hold CuPy arrays. With
RUNE_HOST_DEVICES=N the host shows up as N distinct devices cpu:0..cpu:N-1, so
placement logic is exercised without a GPU.
"""
import contextlib
import threading

from ..base import config, contexts, profiler
from ..backends import backend_for, has_cuda_backend
from ..errors import DeviceError
from ..base.stats import COUNTERS


class Device:
    """One place an array can live: `cpu:N` or `cuda:N`.

    Tables of per-device entries key them by `name` (a str hashes in C, a
    Device in Python); `nd_name` keys a second entry per device where a table
    keeps two (eager dispatch: an implementation for n-d operands)."""
    __slots__ = ("platform", "index", "name", "nd_name", "_hash")

    def __init__(self, platform, index):
        self.platform = platform
        self.index = index
        self.name = f"{platform}:{index}"
        self.nd_name = f"{self.name}/n-d"
        self._hash = hash(self.name)

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return self is other or (isinstance(other, Device) and other.name == self.name)

    def __hash__(self):
        return self._hash

    def __reduce__(self):
        return (get_device, (self.name,))


def _host_count():
    return config.host_devices()


def _cuda_count():
    """The GPUs the CUDA backend sees (its `device_count`); none without one."""
    if not has_cuda_backend():
        return 0  # a GPU rune cannot compute on is not listed as a device
    try:
        backend = backend_for(Device("cuda", 0))  # loads the backend (and CuPy); it needs only the platform
    except Exception:  # no CuPy, or one that fails to load without a driver: the host is all there is
        return 0
    return backend.device_count()


_HOST = [Device("cpu", i) for i in range(_host_count())]
_CUDA = None  # probed on first use: importing rune never touches CUDA


def _cuda_devices():
    global _CUDA
    if _CUDA is None:
        _CUDA = [Device("cuda", i) for i in range(_cuda_count())]
    return _CUDA


def devices(platform=None):
    """Every device rune can use: the host devices, then each GPU CuPy sees."""
    found = list(_HOST) + list(_cuda_devices())
    return [d for d in found if platform is None or d.platform == platform]


def get_device(spec):
    """The Device named by `spec`: a Device, "cpu", "cuda", "cpu:1", "cuda:0"."""
    if isinstance(spec, Device):
        return spec
    if not isinstance(spec, str):
        raise DeviceError(f"expected a Device or a name like 'cpu' or 'cuda:0', got {spec!r}")
    platform, _, index = spec.partition(":")
    if platform not in ("cpu", "cuda") or (index and not index.isdigit()):
        raise DeviceError(f"unknown device {spec!r}; expected 'cpu', 'cuda', 'cpu:N' or 'cuda:N'")
    pool = _HOST if platform == "cpu" else _cuda_devices()
    i = int(index) if index else 0
    if i >= len(pool):
        if platform == "cuda":
            why = ("this build of rune has no CUDA backend yet" if not has_cuda_backend() else
                   _no_gpu_reason() if not pool else
                   f"only {len(pool)} GPU(s) are visible")
        else:
            why = f"only {len(pool)} host device(s) exist (set RUNE_HOST_DEVICES to have more)"
        raise DeviceError(f"device {spec!r} is not available: {why}")
    return pool[i]


def _no_gpu_reason():
    """Why CuPy lists no GPU, with what to install where the setup says (rune/backends/cuda/environment.py)."""
    try:
        from ..backends import gpu_setup_problem
        found = gpu_setup_problem()
    except Exception:  # the diagnosis is a courtesy: never let it hide the error itself
        found = None
    return f"no GPU is visible: {found}" if found else "no GPU is visible (CuPy is missing or finds no device)"


class _DefaultDevice(threading.local):
    def __init__(self):
        env = config.default_device()
        try:
            self.stack = [get_device(env) if env else _HOST[0]]
        except DeviceError as e:
            raise DeviceError(f"environment variable RUNE_DEFAULT_DEVICE={env!r}: {e}") from None


_default = _DefaultDevice()


def current_default():
    return _default.stack[-1]


@contextlib.contextmanager
def default_device(device):
    """Within the block, arrays are created on `device` unless told otherwise."""
    _default.stack.append(get_device(device))
    contexts.opened()
    try:
        yield _default.stack[-1]
    finally:
        _default.stack.pop()
        contexts.closed()


def transfer(raw, src, dst):
    """Copy a raw buffer from device `src` to device `dst` and count it: within a
    platform its backend copies directly, across platforms through the host."""
    COUNTERS["transfers"] += 1
    COUNTERS["bytes_moved"] += raw.nbytes
    if src.platform == "cpu" and dst.platform != "cpu":
        COUNTERS["host_to_device"] += 1
    elif src.platform != "cpu" and dst.platform == "cpu":
        COUNTERS["device_to_host"] += 1
    if profiler.active():
        with profiler.span("transfer", f"{src} -> {dst}", str(dst), raw.nbytes):
            return _copy(raw, src, dst)
    return _copy(raw, src, dst)


def _copy(raw, src, dst):
    if src.platform == dst.platform:
        return backend_for(dst).copy(raw, src, dst)
    return backend_for(dst).from_host(backend_for(src).to_host(raw), dst)
