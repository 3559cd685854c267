"""Backends: one per device platform. A backend knows nothing of traces.

`base.py` writes down the protocol every backend implements (`cpu/backend.py`,
`cuda/backend.py`) and the `Compiler` / `Program` protocol of their kernel
toolchains; `pipeline.py` is the one compile pipeline (keys, rune's disk cache
in `disk_cache.py`, batches on a thread pool) both platforms build through;
`stretch.py` is the one compiled plan step and its pending queue, with each
platform's buffer addressing and launch in `cpu/stretch.py` and
`cuda/stretch.py`.
"""
from ..errors import DeviceError


def has_cuda_backend():
    """Whether rune ships a CUDA backend module (CuPy itself is checked separately)."""
    import importlib.util
    try:
        return importlib.util.find_spec(__name__ + ".cuda.backend") is not None
    except ModuleNotFoundError:  # no rune.backends.cuda package at all
        return False


from .owned import owner_of  # noqa: E402,F401  (donation asks who owns a buffer)

_BACKENDS = {}  # platform -> Backend, loaded on first use


def host_block(shape, dtype):
    """Host memory a pool keeps and reuses by liveness (rune/backends/cpu/blocks.py)."""
    from .cpu.blocks import Block
    return Block(shape, dtype)


def gpu_setup_problem():
    """What in this machine's CUDA setup keeps CuPy from seeing a GPU, with the fix
    (rune/backends/cuda/environment.py), or None."""
    from .cuda.environment import driver_problem
    return driver_problem()


def backend_for(device):
    """The `Backend` (see `rune.backends.base`) that holds arrays on `device`."""
    backend = _BACKENDS.get(device.platform)
    if backend is None:
        backend = _BACKENDS[device.platform] = _load(device.platform, device)
    return backend


def device_count(platform):
    """How many devices of `platform` ("cpu", "cuda") exist here: 0 for a platform
    whose backend cannot load (no CuPy)."""
    backend = _BACKENDS.get(platform)
    if backend is None:
        if platform == "cuda" and not has_cuda_backend():
            return 0
        try:
            backend = _BACKENDS[platform] = _load(platform, platform)
        except DeviceError:
            return 0
    return backend.device_count()


def _load(platform, device):
    if platform == "cpu":
        from .cpu.backend import BACKEND
        return BACKEND
    try:
        from .cuda.backend import BACKEND
    except ImportError as e:
        raise DeviceError(f"device {device} needs CuPy (pip install 'rune[cuda]'): {e}") from e
    return BACKEND


def compile_pending():
    """Compile every fused stretch built but not yet compiled, on every platform
    (many units to a compiler run, the runs on a thread pool); the number compiled."""
    from .stretch import compile_pending as pending
    return pending()


def kernel_dialect(target):
    """The renderer of kernels for `target` ("cuda"), usable without its device
    (planning for it from shapes alone); None for a target rune cannot render."""
    if target == "cuda":
        from ..codegen.cuda import CudaDialect
        return CudaDialect()
    return None
