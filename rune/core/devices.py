"""Devices, the default device, and moving raw buffers between devices.

A device is a registered platform's (rune/backends/__init__.py) and an index:
host devices hold NumPy arrays, CUDA devices CuPy arrays, another platform
what its backend makes. With RUNE_HOST_DEVICES=N the host shows up as N
distinct devices cpu:0..cpu:N-1, so placement logic is exercised without a GPU.
"""
import contextlib
import threading

from ..base import config, contexts, profiler
from ..backends import backend_for, device_count, platform, platform_of_dlpack, platforms, registry_version
from ..errors import DeviceError
from ..base.stats import COUNTERS


HOST = "cpu"   # the platform whose buffers are NumPy arrays: where every transfer may pass


class Device:
    """One place an array can live: `<platform>:N` (`cpu:N`, `cuda:N`).

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


# The host's devices exist from import on (every module may ask for "cpu"); another
# platform's are probed on first use: importing rune never touches a GPU.
_HOST = [Device(HOST, i) for i in range(_host_count())]
_POOLS = {HOST: _HOST}   # platform -> its devices, for the registry's version in _SEEN
_SEEN = [registry_version()]


_NAMED = {}   # a name get_device resolved -> its Device, for the registry's version in _SEEN


def _pool(platform):
    """The devices of a registered `platform` (its backend's `device_count`)."""
    if _SEEN[0] != registry_version():   # a platform was registered or forgotten: list again
        _POOLS.clear()
        _NAMED.clear()
        _POOLS[HOST] = _HOST
        _SEEN[0] = registry_version()
    pool = _POOLS.get(platform)
    if pool is None:
        pool = _POOLS[platform] = [Device(platform, i) for i in range(device_count(platform))]
    return pool


def devices(platform=None):
    """Every device rune can use: the host devices, then each registered platform's
    (each GPU CuPy sees)."""
    names = platforms() if platform is None else [p for p in platforms() if p == platform]
    return [d for name in names for d in _pool(name)]


def get_device(spec):
    """The Device named by `spec`: a Device, "cpu", "cuda", "cpu:1", "cuda:0" (a
    registered platform's name, and an index)."""
    if isinstance(spec, Device):
        return spec
    if not isinstance(spec, str):
        raise DeviceError(f"expected a Device or a name like 'cpu' or 'cuda:0', got {spec!r}")
    found = _NAMED.get(spec)   # a name met before (most are): no parsing
    if found is not None and _SEEN[0] == registry_version():
        return found
    name, _, index = spec.partition(":")
    known = platform(name)
    if known is None or (index and not index.isdigit()):
        names = platforms()
        raise DeviceError(f"unknown device {spec!r}; expected {', '.join(repr(n) for n in names)} or one of "
                          f"them with an index, such as '{names[0]}:N'")
    pool = _pool(name)
    i = int(index) if index else 0
    if i >= len(pool):
        why = known.too_few(len(pool)) if pool else known.absent()
        raise DeviceError(f"device {spec!r} is not available: {why}")
    _NAMED[spec] = pool[i]
    return pool[i]


def device_of_dlpack(kind, index):
    """The device a DLPack producer's buffer lies on, from its `__dlpack_device__()`
    (the host's first device for host memory, which every host device can hold)."""
    name = platform_of_dlpack(kind)
    if name is None:
        raise DeviceError(f"from_dlpack: unsupported DLPack device type {kind}; the registered platforms "
                          f"hold types {sorted(t for p in platforms() for t in platform(p).dlpack)}")
    return get_device(HOST if name == HOST else f"{name}:{index}")


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
    if src.platform == HOST and dst.platform != HOST:
        COUNTERS["host_to_device"] += 1
    elif src.platform != HOST and dst.platform == HOST:
        COUNTERS["device_to_host"] += 1
    if profiler.active():
        with profiler.span("transfer", f"{src} -> {dst}", str(dst), raw.nbytes):
            return _copy(raw, src, dst)
    return _copy(raw, src, dst)


def _copy(raw, src, dst):
    if src.platform == dst.platform:
        return backend_for(dst).copy(raw, src, dst)
    return backend_for(dst).from_host(backend_for(src).to_host(raw), dst)
