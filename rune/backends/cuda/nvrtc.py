"""Compiling CUDA units with NVRTC through cuda-bindings (no GPU or driver needed).

`compile_unit(source, arch="sm_90")` returns the cubin (or PTX with
`ptx=True`). NVRTC carries no copy of cuda_fp16.h / cuda_bf16.h: they come
from the CUDA runtime's headers, found as CuPy finds them (`include_dir`).
Never --use_fast_math: the dialect relies on CUDA's IEEE functions, NaN
tests and denormals. cuda-bindings is imported on first use, so importing
rune never needs it.
"""
import functools
import os
import re

from ...errors import RuneError

OPTIONS = ("-std=c++17", "--fmad=false", "--diag-suppress=177,550")  # fmad off: a*b+c rounds twice, as C with -ffp-contract=off


class NvrtcError(RuneError):
    """NVRTC is missing, or rejected a unit (the message holds its source and log)."""


@functools.lru_cache(maxsize=1)
def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise NvrtcError("compiling CUDA kernels needs cuda-bindings and nvidia-cuda-nvrtc "
                         "(pip install 'rune[cuda]')") from e
    return nvrtc


def available():
    """Whether NVRTC can be loaded here (cuda-bindings, its NVRTC library and the CUDA headers)."""
    try:
        _nvrtc().nvrtcVersion()
        include_dir()
    except Exception:  # a probe: whatever keeps NVRTC from loading means "not here"
        return False
    return True


@functools.lru_cache(maxsize=1)
def include_dir():
    """The folder holding cuda_fp16.h: where cuda-pathfinder finds the CUDA runtime's
    headers (a CUDA toolkit, CUDA_PATH, conda or the nvidia-cuda-runtime wheel, as CuPy
    14 looks), else the first `nvidia-*` wheel that carries them."""
    for folder in (_pathfinder_headers(), *_wheel_header_dirs()):
        if folder and os.path.exists(os.path.join(folder, "cuda_fp16.h")):
            return folder
    raise NvrtcError("cuda_fp16.h not found (looked through cuda-pathfinder and the nvidia-* wheels): "
                     "install a CUDA toolkit or nvidia-cuda-runtime")


def _pathfinder_headers():
    try:
        from cuda import pathfinder
        return pathfinder.find_nvidia_header_directory("cudart")
    except Exception:  # no cuda-pathfinder, or it found nothing: the wheels are the fallback
        return None


def _wheel_header_dirs():
    try:
        import nvidia
    except ImportError:
        return []
    return [os.path.join(root, sub, "include") for root in nvidia.__path__ for sub in sorted(os.listdir(root))]


def version():
    nvrtc = _nvrtc()
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def _check(result, what):
    err = result[0] if isinstance(result, tuple) else result
    if err != _nvrtc().nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcError(f"NVRTC {what} failed: {err!r}")
    return result[1:] if isinstance(result, tuple) and len(result) > 1 else None


def _excerpt(source, log, context=30, whole=400):
    """The numbered source: all of it when short, else the lines around each error the log names."""
    lines = source.splitlines()
    marks = sorted({int(m) for m in re.findall(r"\((\d+)\): (?:catastrophic )?error", log)})
    if len(lines) <= whole or not marks:
        keep = range(len(lines))
    else:
        keep = sorted({i for m in marks for i in range(max(m - 1 - context, 0), min(m + context, len(lines)))})
    out, last = [], -1
    for i in keep:
        if i != last + 1:
            out.append("  ...")
        out.append(f"{i + 1:5d} {lines[i]}")
        last = i
    return "\n".join(out)


def compile_unit(source, arch="sm_90", name="rune_unit.cu", kernels=(), ptx=False, options=()):
    """The cubin (or PTX) of CUDA C++ `source` for `arch`. On a compile error raises
    NvrtcError naming `kernels` (or the unit), with the numbered source and NVRTC's log."""
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(err, "create program")
    try:
        target = arch.replace("sm_", "compute_") if ptx else arch
        opts = [f"--gpu-architecture={target}", f"-I{include_dir()}", *OPTIONS, *options]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        log = log.decode(errors="replace").rstrip("\x00 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            which = ", ".join(kernels) if kernels else name
            raise NvrtcError(f"NVRTC could not compile {which} for {arch} ({' '.join(opts)}):\n"
                             f"{log}\n--- source ---\n{_excerpt(source, log)}")
        if ptx:
            _, size = nvrtc.nvrtcGetPTXSize(prog)
            out = b" " * size
            _check(nvrtc.nvrtcGetPTX(prog, out), "get PTX")
        else:
            _, size = nvrtc.nvrtcGetCUBINSize(prog)
            out = b" " * size
            _check(nvrtc.nvrtcGetCUBIN(prog, out), "get cubin")
        return out
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
