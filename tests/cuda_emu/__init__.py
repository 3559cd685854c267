"""The CUDA emulation as the tests use it: rune's own (rune/backends/cuda/emulator:
the kernels built for the host with g++; rune/compiler/emulation.py: the plan
runner behind `jitted.emulate`), and `GpuLibrary`, the same interface over a real
GPU, with which ci/gpu-check compares a GPU's bits to the emulation's."""
import os
import tempfile

import numpy as np

from rune.backends.cuda.emulator import Library, MisalignedAccess, compiler  # noqa: F401
from rune.compiler.emulation import rerender, run_plan, run_unit, stretches  # noqa: F401

CXX = compiler()


class GpuLibrary:
    """The same units compiled by rune's NVRTC path to one cubin and run on a GPU with CuPy
    (bfloat16 arrays through ml_dtypes, as CuPy 14 holds them)."""

    def __init__(self, prelude, units, arch):
        import cupy
        from rune.backends.cuda import nvrtc
        self.cupy = cupy
        texts = list(dict.fromkeys(text for text, _ in units))
        cubin = nvrtc.compile_unit(prelude + "\n\n".join(texts), arch=arch)
        self.folder = tempfile.mkdtemp(prefix="rune-cubin-")
        path = os.path.join(self.folder, "unit.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        self.module = cupy.RawModule(path=path)

    def upload(self, a):
        """A copy on the GPU that starts as far past a 16-byte boundary as the host array
        does: a view with an offset stays one."""
        shift = a.ctypes.data % 16 if a.flags.c_contiguous else 0
        a = np.ascontiguousarray(a)
        room = self.cupy.empty(a.nbytes + 16, self.cupy.uint8)
        buf = room[shift:shift + a.nbytes].view(a.dtype).reshape(a.shape)
        buf.set(a)
        return buf

    def alloc(self, dtype, shape):
        buf = self.cupy.empty(shape, dtype)
        buf.reshape(-1).view(self.cupy.uint8).fill(0xA5)
        return buf

    def download(self, buf, dtype, shape):
        return buf.get().reshape(shape)

    def launch(self, launch, grid, block, buffers):
        self.module.get_function(launch.name)((grid,), (block,), tuple(buffers))
