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

Units (after the dialect's prelude) go through rune's one compile pipeline
(rune/backends/pipeline.py) with the NVRTC compiler of the GPU's architecture
(rune/backends/cuda/nvrtc.py): cubins compiled with exactly rune's flags (CuPy's
own compile path would add `-ftz=true`, flushing float32 subnormals in arithmetic
and comparisons), kept in rune's disk kernel cache, and loaded as a `Module`
(rune/backends/cuda/module.py: a `cupy.RawModule(path=...)`, loaded on each GPU
when a kernel of it is first launched there). `launchers` returns one `run(buffers)` per unit, which launches
every kernel on the current stream of the current GPU; a unit NVRTC rejects gets
a `run` raising its `KernelCompileError`, naming its kernels, with the numbered
source and NVRTC's log. Compiling needs no GPU.
"""
import os
import tempfile

import cupy
import numpy as np

from ...errors import CompileError, RuneError
from .. import disk_cache, pipeline
from . import nvrtc
from .nvrtc import KernelCompileError  # noqa: F401  (where launch errors were raised before)

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
    """One kernel of a loaded unit: its functions (taken on the first launch, on the GPU
    then current), launch shapes and argument plan."""

    def __init__(self, program, kernel):
        self.program = program
        self.names = [(l.name, (int(l.grid),), (int(l.block),), int(l.shared)) for l in kernel.launches]
        self.launches = None
        self.scratch_shapes = [(np.dtype(dtype), int(count)) for dtype, count in kernel.scratch]
        self.plan = arguments(kernel)

    def run(self, buffers):
        launches = self.launches
        if launches is None:
            launches = self.launches = [(self.program.function(name), grid, block, shared)
                                        for name, grid, block, shared in self.names]
        scratch = [cupy.empty(n, dtype) for dtype, n in self.scratch_shapes]   # on the current GPU
        args = tuple(buffers[v] if kind == "buffer" else scratch[v] if kind == "scratch" else v
                     for kind, v in self.plan)
        for fn, grid, block, shared in launches:
            fn(grid, block, args, shared_mem=shared)


def launchers(compiler, prelude, units):
    """One `run(buffers)` per unit (name, source, kernels), in order: the units built
    through the compile pipeline with `compiler` (rune/backends/cuda/nvrtc.py)."""
    out = []
    for program, (name, _, kernels) in zip(pipeline.build(compiler, prelude, units), units):
        out.append(_failing(name, program) if isinstance(program, CompileError)
                   else _launcher(name, [_Kernel(program, k) for k in kernels]))
    return out


def load(prelude, unit, options=(), arch=None):
    """One unit compiled for `arch` (default: the current GPU's) with rune's NVRTC
    flags and `options`, and loaded; its `run(buffers)`, which raises the unit's
    KernelCompileError where NVRTC rejects it."""
    return launchers(_compiler(options, arch), prelude, [unit])[0]


def gpu_arch():
    """The current GPU's architecture, as NVRTC names it (sm_90 on an H100/H200)."""
    return f"sm_{cupy.cuda.Device().compute_capability}"


def cubin_path(code, options, kernels=(), arch=None):
    """(path, temporary): a file holding `code` compiled for `arch` (default: the
    current GPU's) with rune's NVRTC flags and `options`, from the disk cache, else
    compiled and stored there, or in a temporary file (for the caller to remove)
    when the cache is off or unwritable."""
    compiler = _compiler(options, arch)
    k = compiler.key(code)
    hit = pipeline.cached(compiler, k, ())
    if hit is not None:
        return hit.path, False
    cubin = pipeline.compile_source(compiler, code, tuple(kernels))
    stored = disk_cache.store_library(cubin, suffix=compiler.suffix)
    if stored is not None:
        disk_cache.store_entry(k, stored[0], stored[1], "")
        return stored[0], False
    fd, path = tempfile.mkstemp(prefix="rune-", suffix=".cubin")
    with os.fdopen(fd, "wb") as f:
        f.write(cubin)
    return path, True


def _compiler(options, arch):
    extra = tuple(o for o in options if not o.startswith("-I") and o not in nvrtc.OPTIONS)
    return nvrtc.compiler(arch or gpu_arch(), extra)


def _launcher(name, loaded):
    def run(buffers):
        for k in loaded:
            k.run(buffers)
    run.unit = name
    return run


def _failing(name, error):
    def run(buffers):
        raise error.with_traceback(None)
    run.unit = name
    return run
