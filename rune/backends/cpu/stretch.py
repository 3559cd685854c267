"""A fused run of primitives compiled to C: one shared-library entry per stretch.

Compilation is deferred to a stretch's first run, or done for everything
pending at once by `compile_pending()` (a test suite or a program building
many plans pays one compiler run per batch instead of one per stretch). One
thread compiles at a time; a thread whose stretch is in that batch waits for it
rather than compiling it again.
"""
import ctypes
import sys
import threading
import weakref

import numpy as np

from ... import profiler
from ...codegen.render import CDialect
from ...stats import COUNTERS
from . import compiler as c_compiler

_DIALECT = CDialect()
_PENDING = weakref.WeakSet()
_PENDING_LOCK = threading.Lock()   # guards _PENDING (a WeakSet is not safe to change while iterated)
_COMPILE_LOCK = threading.Lock()   # one compile_pending at a time


def compile_pending():
    """Compile every stretch built but not yet compiled, many to a compiler run."""
    with _COMPILE_LOCK:
        with _PENDING_LOCK:
            todo = [s for s in _PENDING if s._fn is None]
        by_compiler = {}
        for s in todo:
            by_compiler.setdefault(id(s.compiler), []).append(s)
        for group in by_compiler.values():
            with profiler.span("compile", f"{len(group)} C stretch(es), "
                               f"{sum(len(s.kernels) for s in group)} kernels", "cpu"):
                fns = c_compiler.build(group[0].compiler, _DIALECT.prelude(),
                                      [(s.name, s.text, [k.name for k in s.kernels]) for s in group])
            with _PENDING_LOCK:
                for s, fn in zip(group, fns):
                    s._fn = fn
                    _PENDING.discard(s)
        return len(todo)


class CompiledStretch:
    """A run of primitives compiled to C kernels, called through one entry point.

    The pointer array is built once: intermediates are allocated here and kept;
    each call writes its inputs' and outputs' addresses into it. An output is the
    last call's array where nothing else holds it any more, else a fresh one."""
    profile_kind = "kernel"   # how rune.profile names this step

    def __init__(self, eqns, unit, compiler):
        self.eqns = eqns
        self.unit = unit
        self.compiler = compiler
        self.name, self.text, self.kernels = _DIALECT.unit(unit.kernels)
        self.inputs = [(b.index, s) for b, s in unit.inputs]
        self.outputs = [(b.index, s, b.shape, b.dtype) for b, s in unit.outputs]
        self.ptrs = (ctypes.c_void_p * max(len(unit.buffers), 1))()
        self.temps = []
        for b in unit.buffers:
            if b.role == "tmp":
                t = np.empty(b.shape, b.dtype)
                self.temps.append(t)
                self.ptrs[b.index] = t.ctypes.data
        self._fn = None
        self._last = [None] * len(self.outputs)   # each output's array of the last call
        # ctypes releases the GIL during the call: two threads running this stretch
        # at once would share its pointer array and intermediates.
        self._lock = threading.Lock()
        with _PENDING_LOCK:
            _PENDING.add(self)

    def run(self, env):
        fn = self._fn
        if fn is None:   # the first run: every stretch built by then compiles with it
            compile_pending()   # (or waits for the thread compiling this one)
            fn = self._fn
        ptrs = self.ptrs
        keep = []
        with self._lock:
            for b, s in self.inputs:
                a = env[s]
                if type(a) is not np.ndarray or not a.flags.c_contiguous:
                    a = np.ascontiguousarray(a)
                    keep.append(a)
                ptrs[b] = a.ctypes.data
            last = self._last
            for k, (b, s, shape, dtype) in enumerate(self.outputs):
                o = last[k]
                # the last call's array again where nothing else holds it (no caller, no
                # view: only `last`, `o` and getrefcount's argument): a fresh one costs an
                # allocation and, for large ones, the page faults of new memory every call
                if o is None or sys.getrefcount(o) > 3:
                    o = last[k] = np.empty(shape, dtype)
                env[s] = o
                ptrs[b] = o.ctypes.data
            fn(ptrs)
        COUNTERS["kernels_launched"] += len(self.kernels)

    def describe(self):
        names = " ".join(e.prim.name for e in self.eqns)
        lines = [f"compiled stretch {self.name} of {len(self.eqns)} ops ({names}): "
                 f"{len(self.kernels)} C kernel{'s' if len(self.kernels) != 1 else ''}"]
        for k in self.kernels:
            lines.append(f"  kernel {k.name} over {list(k.shape)}:")
            lines.extend("    " + ln for ln in k.source.splitlines())
        return "\n".join(lines)
