"""Loading a unit of rendered CUDA kernels and launching them.

A unit is `(name, source, kernels)`: the CUDA C source of one stretch and, in
launch order, one `KernelLaunch` per kernel (or any object with the same
attributes): its `name` in the source, its `grid` and `block` (ints or
tuples), the bytes of dynamic `shared` memory, the bytes of global `scratch`
it needs (a per-unit buffer kept between calls, passed after the buffers),
the positions of the unit's `buffers` it takes, in its parameter order, and
its `scalars` as (value, C type) pairs. Scalars are passed as NumPy scalars of
exactly the parameter's C type: CuPy copies a scalar's bytes into the
argument buffer, so an `int` where the kernel reads `long long` reads garbage.

The unit is one `cupy.RawModule` compiled with NVRTC (CuPy caches the binary
on disk, keyed by source, options and GPU architecture); `load` returns a
callable `run(buffers)` launching every kernel on the current stream.
"""
import dataclasses

import cupy
import numpy as np

from ...errors import RuneError

# The C type of a kernel parameter -> the NumPy scalar type passed for it.
SCALAR_TYPES = {
    "int": np.int32, "int32_t": np.int32, "unsigned int": np.uint32, "uint32_t": np.uint32,
    "long long": np.int64, "int64_t": np.int64, "unsigned long long": np.uint64,
    "uint64_t": np.uint64, "float": np.float32, "double": np.float64,
}

# IEEE semantics, as the C dialect: no fast math.
NVRTC_OPTIONS = ("--std=c++17",)


@dataclasses.dataclass(frozen=True)
class KernelLaunch:
    name: str
    grid: object
    block: object
    buffers: tuple = ()
    scalars: tuple = ()
    shared: int = 0
    scratch: int = 0


def scalar_args(scalars, kernel):
    """Each (value, C type) as the NumPy scalar of that exact type."""
    out = []
    for value, ctype in scalars:
        kind = SCALAR_TYPES.get(ctype)
        if kind is None:
            raise RuneError(f"kernel {kernel}: scalar parameter of C type {ctype!r} has no launch "
                            f"type; expected one of {sorted(SCALAR_TYPES)}")
        out.append(kind(value))
    return out


def _dims(d):
    return tuple(d) if isinstance(d, (tuple, list)) else (int(d),)


def load(prelude, unit, options=NVRTC_OPTIONS):
    name, source, kernels = unit
    module = cupy.RawModule(code=prelude + "\n" + source, options=tuple(options))
    plans = []
    for k in kernels:
        plans.append((module.get_function(k.name), _dims(k.grid), _dims(k.block), tuple(k.buffers),
                      scalar_args(k.scalars, k.name), int(k.shared), int(k.scratch)))
    scratch_bytes = max((p[6] for p in plans), default=0)
    scratch = []  # allocated on the first call, on the GPU of that call

    def run(buffers):
        if scratch_bytes and not scratch:
            scratch.append(cupy.empty(scratch_bytes, np.uint8))
        for fn, grid, block, picks, scalars, shared, needs_scratch in plans:
            args = [buffers[i] for i in picks] + ([scratch[0]] if needs_scratch else []) + scalars
            fn(grid, block, tuple(args), shared_mem=shared)
    run.unit = name
    return run
