"""Loading a unit of rendered CUDA kernels and launching them.

A unit is `(name, source, kernels)` as the CUDA dialect renders it
(rune/codegen/cuda.py, `CudaDialect.unit`): one translation unit and,
in run order, its kernels. A kernel has

- `launches`: what to run, in order, each with an `extern "C" __global__`
  function `name`, a 1-d `grid` and `block`, `shared` (dynamic shared bytes);
- `args`, the same for every launch: `("buffer", i)` for the unit's buffer i,
  `("scratch", k)` for the kernel's scratch buffer k, `("scalar", value,
  C type)` for a value passed by copy;
- `scratch`: [(dtype, element count)] device buffers the launcher takes from
  CuPy's memory pool for each run and gives back after it (they need no initial
  value; the pool is ordered by the stream, so a later run reusing the memory
  runs after this one's kernels).

Scalars are passed as NumPy scalars of exactly their parameter's C type: CuPy
copies a scalar's bytes into the argument buffer, so a Python int where the
kernel reads `long long` is read as garbage.

The units (after the dialect's prelude) are one program that rune compiles
itself with NVRTC (rune/backends/cuda/nvrtc.py) into a cubin for the GPU's
architecture, with exactly rune's flags: CuPy's own compile path would add
`-ftz=true`, flushing float32 subnormals in arithmetic and comparisons. The
cubin goes into rune's disk kernel cache (RUNE_CACHE_DIR, keyed by source,
flags, NVRTC version and architecture; `disk_cache_hits` counts hits) and is
loaded as a `cupy.RawModule(path=...)`. `load` returns `run(buffers)`, which launches every kernel on
the current stream of the current GPU (`load_many`: many units, one module); a unit NVRTC rejects is a
`KernelCompileError` naming its kernels, with the numbered source and NVRTC's log.
"""
import os
import tempfile

import cupy
import numpy as np

from ...errors import RuneError
from ...stats import COUNTERS
from .. import disk_cache

# The C type of a kernel parameter -> the NumPy scalar type passed for it.
SCALAR_TYPES = {
    "int": np.int32, "int32_t": np.int32, "unsigned int": np.uint32, "uint32_t": np.uint32,
    "long long": np.int64, "int64_t": np.int64, "unsigned long long": np.uint64,
    "uint64_t": np.uint64, "float": np.float32, "double": np.float64,
}


def scalar(value, ctype, kernel):
    """`value` as the NumPy scalar of the C type `ctype`."""
    kind = SCALAR_TYPES.get(ctype)
    if kind is None:
        raise RuneError(f"kernel {kernel}: scalar parameter of C type {ctype!r} has no launch "
                        f"type; expected one of {sorted(SCALAR_TYPES)}")
    return kind(value)


class KernelCompileError(RuneError, RuntimeError):
    """NVRTC rejected a unit of rendered kernels."""


def arguments(kernel):
    """What each launch of `kernel` is passed, in parameter order: ("buffer", i),
    ("scratch", k) or ("scalar", NumPy scalar of the parameter's exact C type)."""
    plan = []
    for arg in kernel.args:
        if arg[0] == "scalar":
            plan.append(("scalar", scalar(arg[1], arg[2], kernel.launches[0].name)))
        else:
            plan.append((arg[0], int(arg[1])))
    return plan


class _Kernel:
    """One kernel of a loaded unit: its functions, launch shapes and argument plan."""

    def __init__(self, module, kernel):
        self.launches = [(module.get_function(l.name), (int(l.grid),), (int(l.block),), int(l.shared))
                         for l in kernel.launches]
        self.scratch_shapes = [(np.dtype(dtype), int(count)) for dtype, count in kernel.scratch]
        self.plan = arguments(kernel)

    def run(self, buffers):
        scratch = [cupy.empty(n, dtype) for dtype, n in self.scratch_shapes]   # on the current GPU
        args = tuple(buffers[v] if kind == "buffer" else scratch[v] if kind == "scratch" else v
                     for kind, v in self.plan)
        for fn, grid, block, shared in self.launches:
            fn(grid, block, args, shared_mem=shared)


def load(prelude, unit, options=()):
    """The unit compiled and loaded; returns `run(buffers)` (see the module docstring)."""
    return load_many(prelude, [unit], options)[0]


def load_many(prelude, units, options=()):
    """Many units compiled as one NVRTC program and loaded as one module (NVRTC's
    fixed cost paid once); one `run(buffers)` each, in order. Units with the same
    name (the same source) are compiled once."""
    texts = list({name: source for name, source, _ in units}.values())
    code = prelude + "\n" + "\n\n".join(texts)
    names = [k.name for _, _, kernels in units for k in kernels]
    path, temporary = cubin_path(code, options, names)
    module = cupy.RawModule(path=path)
    loaded = [[_Kernel(module, k) for k in kernels] for _, _, kernels in units]  # reads the file
    if temporary:
        os.unlink(path)
    return [_launcher(name, kernels) for (name, _, _), kernels in zip(units, loaded)]


def gpu_arch():
    """The current GPU's architecture, as NVRTC names it (sm_90 on an H100/H200)."""
    return f"sm_{cupy.cuda.Device().compute_capability}"


def cubin_path(code, options, kernels=(), arch=None):
    """(path, temporary): a file holding `code` compiled for `arch` (default: the
    current GPU's) with rune's NVRTC flags and `options`, from the disk cache, else
    compiled and stored there, or in a temporary file (for the caller to remove once
    loaded) when the cache is off or unwritable."""
    from . import nvrtc
    arch = arch or gpu_arch()
    extra = tuple(o for o in options if not o.startswith("-I") and o not in nvrtc.OPTIONS)
    k = disk_cache.key("cuda-cubin", code, " ".join((*nvrtc.OPTIONS, *extra)), nvrtc.version(), arch)
    hit = disk_cache.lookup(k) if disk_cache.enabled() else None
    if hit is not None:
        COUNTERS["disk_cache_hits"] += 1
        return hit[0], False
    try:
        cubin = nvrtc.compile_unit(code, arch=arch, kernels=kernels, options=extra)
    except nvrtc.NvrtcError as e:
        raise KernelCompileError(str(e)) from e
    stored = disk_cache.store_library(cubin, suffix=".cubin") if disk_cache.enabled() else None
    if stored is not None:
        disk_cache.store_entry(k, stored[0], stored[1], "")
        return stored[0], False
    fd, path = tempfile.mkstemp(prefix="rune-", suffix=".cubin")
    with os.fdopen(fd, "wb") as f:
        f.write(cubin)
    return path, True


def _launcher(name, loaded):
    def run(buffers):
        for k in loaded:
            k.run(buffers)
    run.unit = name
    return run
