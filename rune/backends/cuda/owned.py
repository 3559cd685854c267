"""GPU allocations with an `Owner` (rune/backends/owned.py): the outputs of compiled
stretches and arrays copied up from the host, which a later call may take as a
donated buffer once nothing else can read them.

The allocation comes from CuPy's memory pool (`cupy.cuda.alloc`); the arrays
over it see it as `UnownedMemory` whose owner is a `CupyOwner` holding that
pooled allocation, so the memory goes back to the pool when the last array
over it, and with it the owner, is gone.
"""
import math

import cupy
import numpy as np

from ..owned import Owner


class CupyOwner(Owner):
    __slots__ = ()

    def array(self, shape, dtype, strides=None):
        memory = self.memory
        unowned = cupy.cuda.UnownedMemory(memory.ptr, memory.mem.size, self, memory.device_id)
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(unowned, 0), strides)


def empty(shape, dtype):
    """A new C-contiguous array on the current GPU, its allocation owned."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0:
        return cupy.empty(shape, dtype)   # nothing to reuse
    return CupyOwner(cupy.cuda.alloc(nbytes)).array(shape, dtype)


def uploaded(host):
    """`host` (a NumPy array) copied to the current GPU, its allocation owned."""
    out = empty(host.shape, host.dtype)
    if out.size:
        out.set(np.asarray(host, order="C"))
    return out
