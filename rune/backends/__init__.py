"""Backends: one per device platform. A backend knows nothing of traces.

`base.py` writes down the protocol every backend implements (`cpu/backend.py`,
`cuda/backend.py`), the small protocols beside it (`Uploader`: asynchronous
host-to-device copies; `Communicator`: collectives between ranks) and the
`Compiler` / `Program` protocol of their kernel toolchains; `pipeline.py` is the
one compile pipeline (keys, rune's disk cache in `disk_cache.py`, batches on a
thread pool) every platform builds through; `stretch.py` is the one compiled
plan step and its pending queue, with each platform's buffer addressing and
launch in `cpu/stretch.py` and `cuda/stretch.py`.

Platforms are registered, not named in code outside this package: each
built-in one describes itself in `<platform>/platform.py` (a `Platform`: how to
load its backend, and what rune knows of it without loading it), found here
when rune is imported; `register_platform` adds another (a plugin, a test).
Devices, placement, callbacks, the data Loader and the collectives ask the
registry and the backends, never a platform by name.
"""
import importlib

from ..errors import DeviceError
from .owned import owner_of  # noqa: F401  (donation asks who owns a buffer)

# The platforms shipped with rune, each a package here with a `platform.py`: the host first.
BUILT_IN = ("cpu", "cuda")


class Platform:
    """What rune knows of a device platform before (or without) loading its backend.

    name        the platform's device names: "<name>" and "<name>:N".
    load()      its `Backend` (rune/backends/base.py), made on first use; raises
                DeviceError (or ImportError) where it cannot load here, which
                gives the platform no devices.
    dlpack      the DLPack device types whose buffers lie in its memory (for
                `nx.from_dlpack`).
    dialect()   its kernel dialect without a device (plans for it as a target,
                rune/compiler/target.py), or None: no such plans.
    absent()    why it shows no device here (for the error naming one).
    too_few(n)  why its device N >= n does not exist when n of them do.
    emulator()  the class that builds its dialect's kernels for the host and runs them
                (`jitted.emulate`, rune/compiler/emulation.py), or None.
    """
    __slots__ = ("name", "load", "dlpack", "dialect", "absent", "too_few", "emulator")

    def __init__(self, name, load, *, dlpack=(), dialect=None, absent=None, too_few=None, emulator=None):
        self.name, self.load, self.dlpack = name, load, tuple(dlpack)
        self.dialect, self.emulator = dialect, emulator
        self.absent = absent or (lambda: f"no {name} device is visible")
        self.too_few = too_few or (lambda n: f"only {n} {name} device(s) exist")

    def __repr__(self):
        return f"<rune platform {self.name}>"


_PLATFORMS = {}   # name -> Platform, in registration order
_BACKENDS = {}    # name -> its Backend, loaded on first use
_VERSION = [0]    # bumped by every (un)registration: rune.core.devices re-lists its devices


def register_platform(name, load, **known):
    """Make `name` a device platform (see `Platform` for `load` and the keywords);
    a platform of that name registered before is replaced."""
    if not name.isidentifier() or name != name.lower():
        raise DeviceError(f"register_platform: a platform name is a lowercase identifier "
                          f"(device names are '<name>:N'), got {name!r}")
    _PLATFORMS[name] = Platform(name, load, **known)
    _BACKENDS.pop(name, None)
    _VERSION[0] += 1
    return _PLATFORMS[name]


def unregister_platform(name):
    """Forget a platform `register_platform` added (its devices are no longer listed)."""
    if name in BUILT_IN:
        raise DeviceError(f"unregister_platform: {name!r} is built into rune")
    _PLATFORMS.pop(name, None)
    _BACKENDS.pop(name, None)
    _VERSION[0] += 1


def platforms():
    """The registered platforms' names, the host first."""
    return list(_PLATFORMS)


def platform(name):
    """The registered `Platform` called `name`, or None."""
    return _PLATFORMS.get(name)


def registry_version():
    """A number that changes whenever a platform is registered or forgotten."""
    return _VERSION[0]


def _discover():
    for name in BUILT_IN:
        describe = importlib.import_module(f"{__name__}.{name}.platform").describe
        register_platform(name, **describe())


def host_block(shape, dtype):
    """Host memory a pool keeps and reuses by liveness (rune/backends/cpu/blocks.py)."""
    from .cpu.blocks import Block
    return Block(shape, dtype)


def backend_for(device):
    """The `Backend` (see `rune.backends.base`) that holds arrays on `device`."""
    backend = _BACKENDS.get(device.platform)
    if backend is None:
        backend = _load(device.platform, device)
    return backend


def _load(name, device):
    found = _PLATFORMS.get(name)
    if found is None:
        raise DeviceError(f"device {device}: no platform {name!r} is registered "
                          f"(registered: {', '.join(_PLATFORMS)})")
    backend = _BACKENDS[name] = found.load()
    return backend


def device_count(platform):
    """How many devices of `platform` ("cpu", "cuda", ...) exist here: 0 for a platform
    that is not registered or whose backend cannot load (CUDA without CuPy)."""
    backend = _BACKENDS.get(platform)
    if backend is None:
        if platform not in _PLATFORMS:
            return 0
        try:
            backend = _load(platform, platform)
        except Exception:  # no CuPy, or one that fails to load without a driver: no devices
            return 0
    return backend.device_count()


def platform_of_dlpack(kind):
    """The registered platform whose memory DLPack device type `kind` names, or None."""
    for found in _PLATFORMS.values():
        if kind in found.dlpack:
            return found.name
    return None


def compile_pending():
    """Compile every fused stretch built but not yet compiled, on every platform
    (many units to a compiler run, the runs on a thread pool); the number compiled."""
    from .stretch import compile_pending as pending
    return pending()


def kernel_dialect(target):
    """The renderer of kernels for `target` (a platform's name, such as "cuda"), usable
    without its device (planning for it from shapes alone); None for a target rune
    cannot render so."""
    found = _PLATFORMS.get(target)
    return None if found is None or found.dialect is None else found.dialect()


def emulator_for(target):
    """The class building `target`'s kernels for the host (`Library(prelude, units)`,
    rune/backends/cuda/emulator), for `jitted.emulate(target=...)`."""
    found = _PLATFORMS.get(target)
    if found is None or found.emulator is None:
        named = " or ".join(f'"{p.name}"' for p in _PLATFORMS.values() if p.emulator is not None)
        raise DeviceError(f"emulate(target={target!r}): rune emulates no kernels for this target; "
                          f"expected {named}")
    return found.emulator()


def target_names():
    """The targets `kernel_dialect` renders for (for messages)."""
    return [name for name, found in _PLATFORMS.items() if found.dialect is not None]


_discover()
