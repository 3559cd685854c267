"""The host's part of a compiled stretch (rune/backends/stretch.py): C kernels
called through one entry point per unit, `<name>_run(void **buffers)`.

`CKernels` renders units with the C dialect and compiles them through the
backend's `compile` (the system C compiler, rune/backends/cpu/compiler.py).
`PointerArray` is one stretch's run state: the pointer array is built once,
intermediates are allocated with it and kept; each call writes its inputs' and
outputs' addresses into it. Each output is a fresh array over memory kept from
call to call (`Blocks`, rune/backends/cpu/blocks.py): a block whose last array
is gone (no caller, view, memoryview or DLPack capsule holds it), else a new
one. Host runs take no donated buffers (NumPy allocations are cheap).
"""
import ctypes
import threading
import weakref

import numpy as np

from ..stretch import Kernels
from .address import address
from .blocks import Blocks


class CKernels(Kernels):
    """The C stretches of one compiler: rendered by the C dialect, built by `backend.compile`."""
    label, device_name = "C", "cpu"

    def __init__(self, backend, compiler):
        self.backend, self.compiler = backend, compiler
        self.dialect = backend.dialect
        self.prelude = self.dialect.prelude()

    def compile_units(self, prelude, units):
        return self.backend.compile(self.compiler, prelude, units)

    def buffers(self, stretch):
        return PointerArray(stretch)


class PointerArray:
    """One C stretch's buffers: the pointer array its entry point reads, and its intermediates."""

    def __init__(self, stretch):
        unit = stretch.unit
        self.inputs, self.outputs = stretch.inputs, stretch.outputs
        self.ptrs = (ctypes.c_void_p * max(len(unit.buffers), 1))()
        self.temps = []
        for b in unit.buffers:
            if b.role == "tmp":
                t = np.empty(b.shape, b.dtype)
                self.temps.append(t)
                self.ptrs[b.index] = address(t)
        # Each output's memory: a large fresh array costs the page faults of new memory
        # every call; a reused block keeps its address, already in place.
        self._takes = [Blocks(shape, dtype).take for _, _, shape, dtype in self.outputs]
        self._placed = [None] * len(self.outputs)   # the address each output's pointer holds
        # Each input's array of the last call, weakly: a training step passes the same
        # arrays (parameters, constants) call after call, and their addresses stay in
        # place. An array keeps its address while it lives, and a dead one's weakref
        # answers None.
        self._seen = [None] * len(self.inputs)
        # ctypes releases the GIL during the call: two threads running this stretch
        # at once would share its pointer array and intermediates.
        self._lock = threading.Lock()

    def run(self, fn, env, donated=None):
        ptrs = self.ptrs
        keep = []
        with self._lock:
            seen = self._seen
            for j, (b, s) in enumerate(self.inputs):
                a = env[s]
                r = seen[j]
                if r is not None and r() is a:
                    continue   # the array of the last call: its address is in place
                if type(a) is not np.ndarray or not a.flags.c_contiguous:
                    a = np.ascontiguousarray(a)
                    keep.append(a)
                    seen[j] = None
                else:
                    seen[j] = weakref.ref(a)
                ptrs[b] = address(a)
            placed = self._placed
            for k, (b, s, _, _) in enumerate(self.outputs):
                o, at = self._takes[k]()
                if placed[k] != at:
                    ptrs[b] = placed[k] = at
                env[s] = o
            fn(ptrs)
