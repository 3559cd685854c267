"""Backends: one per device platform. A backend knows nothing of traces."""
from ..errors import DeviceError


def has_cuda_backend():
    """Whether rune ships a CUDA backend module (CuPy itself is checked separately)."""
    import importlib.util
    try:
        return importlib.util.find_spec(__name__ + ".cuda.backend") is not None
    except ModuleNotFoundError:  # no rune.backends.cuda package at all
        return False


def backend_for(device):
    """The backend module that holds arrays on `device`."""
    if device.platform == "cpu":
        from .cpu import backend
        return backend
    try:
        from .cuda import backend
    except ImportError as e:
        raise DeviceError(f"device {device} needs CuPy (pip install 'rune[cuda]'): {e}") from e
    return backend
