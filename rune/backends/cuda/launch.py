"""Loading a unit of rendered CUDA kernels and launching them.

A unit is `(name, source, kernels)` as the CUDA dialect renders it
(rune/backends/cuda/dialect.py, `CudaDialect.unit`): one translation unit and,
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

The unit (after the dialect's prelude) is one `cupy.RawModule` compiled by
NVRTC; CuPy caches the binary on disk, keyed by source, options and GPU
architecture. `load` returns `run(buffers)`, which launches every kernel on
the current stream of the current GPU (`load_many`: many units, one module); a unit NVRTC rejects is a
`KernelCompileError` naming its kernels, with the numbered source and NVRTC's log.
"""
import cupy
import numpy as np

from ...errors import RuneError

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
    try:  # CuPy compiles on the first function looked up
        module = cupy.RawModule(code=code, options=tuple(options))
        loaded = [[_Kernel(module, k) for k in kernels] for _, _, kernels in units]
    except cupy.cuda.compiler.CompileException as e:
        numbered = "\n".join(f"{i + 1:5d} {ln}" for i, ln in enumerate(code.splitlines()))
        names = "; ".join(f"unit {name} (kernels {', '.join(k.name for k in kernels)})"
                          for name, _, kernels in units)
        raise KernelCompileError(
            f"NVRTC could not compile CUDA {names} with options {' '.join(options)}:\n"
            f"{e.get_message()}\n--- source ---\n{numbered}") from e
    return [_launcher(name, kernels) for (name, _, _), kernels in zip(units, loaded)]


def _launcher(name, loaded):
    def run(buffers):
        for k in loaded:
            k.run(buffers)
    run.unit = name
    return run
