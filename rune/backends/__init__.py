"""Backends: one per device platform. A backend knows nothing of traces."""
from ..errors import DeviceError


def has_cuda_backend():
    """Whether rune ships a CUDA backend module (CuPy itself is checked separately)."""
    import importlib.util
    try:
        return importlib.util.find_spec(__name__ + ".cuda.backend") is not None
    except ModuleNotFoundError:  # no rune.backends.cuda package at all
        return False


_BACKENDS = {}  # platform -> Backend, loaded on first use


def backend_for(device):
    """The `Backend` (see `rune.backends.base`) that holds arrays on `device`."""
    backend = _BACKENDS.get(device.platform)
    if backend is None:
        backend = _BACKENDS[device.platform] = _load(device)
    return backend


def _load(device):
    if device.platform == "cpu":
        from .cpu.backend import BACKEND
        return BACKEND
    try:
        from .cuda.backend import BACKEND
    except ImportError as e:
        raise DeviceError(f"device {device} needs CuPy (pip install 'rune[cuda]'): {e}") from e
    return BACKEND


def compile_pending():
    """Compile every fused stretch built but not yet compiled, on every platform
    loaded so far (many units to a compiler run); the number compiled."""
    from .cpu.stretch import compile_pending as host_pending
    done = host_pending()
    if "cuda" in _BACKENDS:
        from .cuda.stretch import compile_pending as cuda_pending
        done += cuda_pending()
    return done


def kernel_dialect(target):
    """The renderer of kernels for `target` ("cuda"), usable without its device
    (planning for it from shapes alone); None for a target rune cannot render."""
    if target == "cuda":
        from ..codegen.cuda import CudaDialect
        return CudaDialect()
    return None
