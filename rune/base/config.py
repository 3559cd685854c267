"""The RUNE_* environment variables, each read and checked here and nowhere else.

A variable that is unset or empty takes its default; one set to something it
does not accept is an ArgumentError that names the variable, what it accepts
and what it holds, so a typo is never silently read as a default. Values are
read on each call (tests and long-lived processes may change them), which costs
a dictionary lookup.
"""
import os
import re
import shutil

from ..errors import ArgumentError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_DEVICE = re.compile(r"(cpu|cuda)(:\d+)?")


def _raw(name):
    raw = os.environ.get(name)
    return None if raw is None or not raw.strip() else raw


def _invalid(name, expected, raw):
    return ArgumentError(f"environment variable {name} must be {expected}, got {raw!r}")


def _flag(name, default):
    raw = _raw(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise _invalid(name, "0 or 1 (also true/false, yes/no, on/off)", raw)


def _integer(name, default, minimum):
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        value = None
    if value is None or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise _invalid(name, what, raw)
    return value


def cache_enabled():
    """RUNE_CACHE: whether compiled kernels are read from and written to disk (default 1)."""
    return _flag("RUNE_CACHE", True)


def cache_root():
    """RUNE_CACHE_DIR (made absolute), else ~/.cache/rune; None when there is no home
    folder to put it in (no HOME and no password entry, or a relative HOME)."""
    raw = _raw("RUNE_CACHE_DIR")
    if raw is not None:
        return os.path.abspath(os.path.expanduser(raw))
    home = os.environ.get("HOME")
    if not home:
        try:
            import pwd
            home = pwd.getpwuid(os.getuid()).pw_dir
        except (ImportError, KeyError, OSError):
            home = None
    if not home or not os.path.isabs(home):
        return None
    return os.path.join(home, ".cache", "rune")


def c_compiler():
    """RUNE_CC: "none" (no compilation), None (unset: the caller looks on PATH), or
    the absolute path of the executable it names (a name on PATH or a path)."""
    raw = _raw("RUNE_CC")
    if raw is None:
        return None
    choice = raw.strip()
    if choice.lower() == "none":
        return "none"
    path = shutil.which(choice)
    if path is None:
        why = ("is not an executable file" if os.path.exists(choice) else
               "names no file and nothing of that name is on PATH")
        raise ArgumentError(f"environment variable RUNE_CC must be a C compiler (a name on PATH or a path) "
                            f"or 'none', got {raw!r}, which {why}")
    return os.path.abspath(path)


def compile_min_size(default):
    """RUNE_COMPILE_MIN_SIZE: the element count from which a jit stretch is always compiled."""
    return _integer("RUNE_COMPILE_MIN_SIZE", default, 0)


def jit_cache_size():
    """RUNE_JIT_CACHE_SIZE: the most signatures one jitted function keeps (default 4096)."""
    return _integer("RUNE_JIT_CACHE_SIZE", 4096, 1)


def num_threads(default):
    """RUNE_NUM_THREADS: the most threads rune's kernels and BLAS calls use."""
    return _integer("RUNE_NUM_THREADS", default, 1)


def blas_pool():
    """RUNE_BLAS_POOL: whether NumPy's OpenBLAS runs its parallel work on the kernels'
    OpenMP threads (default 1; rune/backends/cpu/blas_pool.py)."""
    return _flag("RUNE_BLAS_POOL", True)


def check_threads():
    """RUNE_NUM_THREADS and RUNE_BLAS_POOL, checked when rune is imported (rune/backends/cpu/threads.py):
    they are first used by a large operation, perhaps long after a typo was made."""
    num_threads(1)
    blas_pool()


def host_devices():
    """RUNE_HOST_DEVICES: how many distinct host devices the host shows as (default 1)."""
    return _integer("RUNE_HOST_DEVICES", 1, 1)


def default_device():
    """RUNE_DEFAULT_DEVICE: the name of the process's default device, or None (unset).
    Only its form is checked here; whether the device exists is the devices' business."""
    raw = _raw("RUNE_DEFAULT_DEVICE")
    if raw is None:
        return None
    if not _DEVICE.fullmatch(raw.strip()):
        raise _invalid("RUNE_DEFAULT_DEVICE", "a device name: 'cpu', 'cuda', 'cpu:N' or 'cuda:N'", raw)
    return raw.strip()


def cuda_compile():
    """RUNE_CUDA_COMPILE: whether GPU stretches are compiled with NVRTC (default 1)."""
    return _flag("RUNE_CUDA_COMPILE", True)


def overlap():
    """RUNE_OVERLAP: whether jitted plans split collectives into a start and a wait with
    compute between them (rune/compiler/overlap.py; default 1)."""
    return _flag("RUNE_OVERLAP", True)


def debug_nans():
    """RUNE_DEBUG_NANS: whether a jitted call whose result holds a NaN is re-run op by
    op to name the primitive that made it (default 0; rune.debug.nans switches it)."""
    return _flag("RUNE_DEBUG_NANS", False)


_TRACEBACK_MODES = ("filtered", "full")


def traceback_mode():
    """RUNE_TRACEBACK: "filtered" (default: an error leaving rune.jit shows the user's
    frames only) or "full" (rune's own frames too)."""
    raw = _raw("RUNE_TRACEBACK")
    if raw is None:
        return "filtered"
    value = raw.strip().lower()
    if value not in _TRACEBACK_MODES:
        raise _invalid("RUNE_TRACEBACK", "'filtered' or 'full'", raw)
    return value
