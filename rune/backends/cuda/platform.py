"""The CUDA platform as rune's registry knows it (rune/backends/__init__.py): all of
it is known without importing CuPy, which loading the backend does."""
from ...errors import DeviceError


def _load():
    try:
        from .backend import BACKEND
    except ImportError as e:
        raise DeviceError(f"device cuda needs CuPy (pip install 'rune[cuda]'): {e}") from e
    return BACKEND


def _dialect():
    from ...codegen.cuda import CudaDialect
    return CudaDialect()


def _absent():
    """Why CuPy lists no GPU, with what to install where the setup says
    (rune/backends/cuda/environment.py)."""
    try:
        from .environment import driver_problem
        found = driver_problem()
    except Exception:  # the diagnosis is a courtesy: never let it hide the error itself
        found = None
    return f"no GPU is visible: {found}" if found else "no GPU is visible (CuPy is missing or finds no device)"


def _emulator():
    from .emulator import Library
    return Library


def describe():
    """The registration of CUDA GPUs: DLPack's kDLCUDA, the CUDA dialect for plans."""
    return dict(load=_load, dlpack=(2,), dialect=_dialect, absent=_absent, emulator=_emulator,
                too_few=lambda n: f"only {n} GPU(s) are visible")
