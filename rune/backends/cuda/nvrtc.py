"""Compiling CUDA units with NVRTC through cuda-bindings (no GPU or driver needed).

`compile_unit(source, arch="sm_90")` returns the cubin (or PTX with
`ptx=True`). `compiler(arch)` is the CUDA platform's `Compiler`
(rune/backends/base.py) for one GPU architecture: rune's compile pipeline
(rune/backends/pipeline.py) builds cubins through it into rune's disk cache,
keyed by the source, the NVRTC version, the flags, the architecture and the
header folder, and loads them as `rune.backends.cuda.module.Module`s. NVRTC
carries no copy of cuda_fp16.h / cuda_bf16.h: they come from the CUDA runtime's
headers, found as CuPy finds them (`include_dir`). Exactly rune's flags: never
--use_fast_math (the dialect relies on CUDA's IEEE functions, NaN tests and
denormals), --fmad=false, and no -ftz (CuPy's own compile path would add it,
flushing float32 subnormals). cuda-bindings is imported on first use, so
importing rune never needs it.
"""
import functools
import os
import re

from ...base.tuning import NVRTC_UNITS_PER_RUN
from ...errors import CompileError
from .. import disk_cache
from ..base import Binary, Compiler, SourceRejected

OPTIONS = ("-std=c++17", "--fmad=false", "--diag-suppress=177,550")  # fmad off: a*b+c rounds twice, as C with -ffp-contract=off
BATCH = NVRTC_UNITS_PER_RUN   # units per NVRTC program when many are built at once


class NvrtcError(CompileError):
    """NVRTC is missing, or rejected a unit (the message holds its source and log)."""


class KernelCompileError(NvrtcError, SourceRejected):
    """NVRTC rejected a unit of rendered kernels (`log`: NVRTC's messages)."""


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


def _owned_buffer(size):
    """A writable buffer of `size` bytes that belongs to rune alone, for NVRTC to write
    its log, PTX or cubin into. Never a `bytes` object: CPython shares small ones across
    the whole process (`b" " * 1` is the interpreter's one-byte singleton), so C writing
    into one would change that value for every user of it."""
    return bytearray(max(int(size), 1))


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
        log = _owned_buffer(size)
        nvrtc.nvrtcGetProgramLog(prog, log)
        log = bytes(log).decode(errors="replace").rstrip("\x00 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            which = ", ".join(kernels) if kernels else name
            raise KernelCompileError(f"NVRTC could not compile {which} for {arch} ({' '.join(opts)}):\n"
                                     f"{log}\n--- source ---\n{_excerpt(source, log)}", log)
        if ptx:
            _, size = nvrtc.nvrtcGetPTXSize(prog)
            out = _owned_buffer(size)
            _check(nvrtc.nvrtcGetPTX(prog, out), "get PTX")
        else:
            _, size = nvrtc.nvrtcGetCUBINSize(prog)
            out = _owned_buffer(size)
            _check(nvrtc.nvrtcGetCUBIN(prog, out), "get cubin")
        return bytes(out)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


class NvrtcCompiler(Compiler):
    """NVRTC for one GPU architecture (`arch`, "sm_90"), with rune's OPTIONS and `extra`
    options: cubins of CUDA units (rune/codegen/cuda.py)."""
    platform = "cuda"
    suffix = ".cubin"
    batch = BATCH

    def __init__(self, arch, extra=()):
        self.arch, self.extra = arch, tuple(extra)
        self.name = f"NVRTC {version()}"
        self.identity = "\0".join(("cuda-cubin", version(), arch, " ".join((*OPTIONS, *self.extra)),
                                   include_dir()))

    def key(self, source):
        return disk_cache.key(self.identity, source)

    def compile(self, source, names=()):
        cubin = compile_unit(source, arch=self.arch, kernels=names, options=self.extra)
        return Binary(cubin)

    def load(self, path, data=None):
        from .module import Module   # CuPy: only to load what was compiled
        return Module(path, data)

    def symbols(self, unit):
        return tuple(ln.name for k in unit[2] for ln in k.launches)

    def blame(self, log):
        return {int(n) for n in re.findall(r"\((\d+)\): (?:catastrophic )?error", log)}


_COMPILERS = {}


def compiler(arch, extra=()):
    """The NvrtcCompiler of `arch` (one per architecture and options, so that the
    units compiled with it batch together); raises NvrtcError where NVRTC or the
    CUDA headers are missing."""
    found = _COMPILERS.get((arch, tuple(extra)))
    if found is None:
        found = _COMPILERS.setdefault((arch, tuple(extra)), NvrtcCompiler(arch, extra))
    return found
