"""A jit stretch on a GPU: one fused unit of CUDA kernels, launched in order.

`CudaCompiledStretch` is the CUDA counterpart of the host's `CompiledStretch`
(rune/compiler/lower.py): built from a fused `Unit` (rune/compiler/fuse.py), it renders
the unit with the CUDA dialect for the GPU's properties (SM count, threads per
block, architecture), and on its first run compiles it once with NVRTC
(`CudaBackend.compile`, one `cupy.RawModule`). Each run then launches the
kernels in order on the current stream of its GPU: inputs are the plan's
device arrays (made contiguous where they are strided views; a contiguous view
is passed as it is, whatever its alignment), outputs are fresh `cupy.empty`
arrays, or a donated argument's buffer (rune/compiler/donation.py). Intermediates
and scratch are taken from CuPy's memory pool for the run and given back when
it ends (cheap after the first run; the pool is ordered by the stream), so a
function holding many cached plans holds no device memory for them. Building
one needs no GPU: the launch shapes and argument lists are fixed at
construction.

Compilation waits for a stretch's first run, which compiles every stretch
built by then (a plan's stretches, its loop bodies') with it, or for
`compile_pending()`: many units to an NVRTC program, whose fixed cost is paid
per program, so a program planning many functions before running them pays it
once per batch; the batches compile on a pool of threads (NVRTC releases the GIL).
"""
import concurrent.futures
import os
import threading
import weakref

import cupy

from ...compiler import donation
from ...codegen.kernel import contiguous_strides, describe_launched
from ... import profiler
from ...stats import COUNTERS
from . import launch
from ...codegen.cuda import CudaDialect


_PENDING = weakref.WeakSet()
_PENDING_LOCK = threading.Lock()   # guards _PENDING (a WeakSet is not safe to change while iterated)
_COMPILE_LOCK = threading.Lock()   # one compile at a time: a thread whose stretch another thread
                                   # is compiling waits for it instead of compiling it again
BATCH = 200  # units per NVRTC program in compile_pending
MAX_COMPILE_THREADS = 16


def compile_threads():
    """How many NVRTC programs compile at once: one per CPU this process may use, at
    most MAX_COMPILE_THREADS (NVRTC releases the GIL while it compiles)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:   # no affinity on this platform
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_COMPILE_THREADS))


def compile_pending(batch=BATCH, threads=None):
    """Compile every CUDA stretch built but not yet compiled, `batch` units to an
    NVRTC program, the programs on `threads` threads at once (None: `compile_threads()`);
    returns how many were compiled. A batch NVRTC rejects is left pending: each of its
    stretches then compiles alone on its first run, and the one that fails says so."""
    with _COMPILE_LOCK:
        groups = {}
        with _PENDING_LOCK:
            for s in _PENDING:
                if s._launch is None:
                    groups.setdefault((s.index, s.prelude), []).append(s)
        parts = [(index, prelude, todo[k:k + batch]) for (index, prelude), todo in groups.items()
                 for k in range(0, len(todo), batch)]
        if not parts:
            return 0
        workers = min(len(parts), threads or compile_threads())
        devices = ", ".join(sorted({f"cuda:{index}" for index, _, _ in parts}))
        with profiler.span("compile", f"{sum(len(p) for _, _, p in parts)} CUDA stretch(es), "
                                      f"{len(parts)} NVRTC program(s)", devices):
            if workers == 1:
                results = [_compile_batch(*p) for p in parts]
            else:
                with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="rune-nvrtc") as pool:
                    results = list(pool.map(lambda p: _compile_batch(*p), parts))
        done = 0
        for (_, _, part), runs in zip(parts, results):
            if runs is None:
                continue
            COUNTERS["kernels_compiled"] += 1
            with _PENDING_LOCK:
                for s, run in zip(part, runs):
                    s._launch = run
                    _PENDING.discard(s)
            done += len(part)
        return done


def _compile_batch(index, prelude, part):
    """One NVRTC program of `part`'s units for GPU `index` (the current device is per
    thread, so each worker selects it): their launchers, or None where NVRTC rejects it."""
    try:
        with cupy.cuda.Device(index):
            return part[0]._compile_units(prelude, [s.source_unit for s in part])
    except launch.KernelCompileError:
        return None


class CudaCompiledStretch:
    """A run of primitives fused into CUDA kernels for one GPU (`device`, a rune
    Device of platform "cuda"); `props` are its `DeviceProps`."""
    profile_kind = "kernel"   # how rune.profile names this step

    def __init__(self, eqns, unit, device, props, compile_units):
        self.eqns, self.unit, self.device, self.props = eqns, unit, device, props
        dialect = CudaDialect(props)
        self.prelude = dialect.prelude()
        self.name, self.text, self.kernels = dialect.unit(unit.kernels)
        self.arguments = [launch.arguments(k) for k in self.kernels]
        self.inputs = [(b.index, s) for b, s in unit.inputs]
        self.outputs = [(b.index, s, b.shape, b.dtype) for b, s in unit.outputs]
        self.temps = [(b.index, b.shape, b.dtype) for b in unit.buffers if b.role == "tmp"]
        self._compile_units = compile_units   # (prelude, units) -> [run(buffers)]
        self._launch = None
        self._constants = {}                # slot -> (host constant, its copy on the GPU)
        with _PENDING_LOCK:
            _PENDING.add(self)

    @property
    def source_unit(self):
        """(name, source, kernels) as the launcher loads it."""
        return self.name, self.text, self.kernels

    @property
    def index(self):
        return 0 if self.device is None else self.device.index

    def compile(self):
        """Compile and load the unit (once); a failure names the kernels with NVRTC's log."""
        with _COMPILE_LOCK:
            if self._launch is None:
                with cupy.cuda.Device(self.index):
                    launched = self._compile_units(self.prelude, [self.source_unit])[0]
                COUNTERS["kernels_compiled"] += 1
                with _PENDING_LOCK:
                    self._launch = launched
                    _PENDING.discard(self)
        return self._launch

    def run(self, env):
        run = self._launch
        if run is None:  # the first run: every stretch built by then compiles with it
            compile_pending()
            run = self._launch or self.compile()
        with cupy.cuda.Device(self.index):
            buffers = [None] * len(self.unit.buffers)
            for b, shape, dtype in self.temps:   # back to CuPy's pool when the run ends
                buffers[b] = cupy.empty(shape, dtype)
            for b, s in self.inputs:
                a = env[s]
                if type(a) is not cupy.ndarray:
                    a = self._uploaded(s, a)
                elif not a.flags.c_contiguous:
                    a = cupy.ascontiguousarray(a)  # a view made between stretches
                buffers[b] = a
            for b, s, shape, dtype in self.outputs:
                o = donation.buffer_for(self, s)
                env[s] = buffers[b] = cupy.empty(shape, dtype) if o is None else o
            run(buffers)
        COUNTERS["kernels_launched"] += len(self.kernels)

    def _uploaded(self, slot, host):
        """A host value read as an input (a plan constant): copied up once, then reused."""
        kept = self._constants.get(slot)
        if kept is None or kept[0] is not host:
            kept = self._constants[slot] = (host, cupy.ascontiguousarray(cupy.asarray(host)))
        return kept[1]

    def writes_in_place(self, slot, out_slot):
        """Whether the output `out_slot` may be written into the buffer of the input
        `slot` while this stretch still reads it: one elementwise kernel stores the
        output at each point's own position and reads the input only there, and no
        later kernel of the unit reads the input."""
        ins = [b for b, s in self.inputs if s == slot]
        outs = [b for b, s, _, _ in self.outputs if s == out_slot]
        if len(ins) != 1 or len(outs) != 1:
            return False
        stores = [(j, st) for j, k in enumerate(self.unit.kernels) for st in k.stores
                  if st.buffer.index == outs[0]]
        if len(stores) != 1:
            return False
        j, store = stores[0]
        kernel = self.unit.kernels[j]
        if kernel.reduce_shape or store.strides is not None or store.offset or store.dynamic:
            return False
        own = contiguous_strides(kernel.shape)
        for ld in kernel.loads:
            if ld.buffer.index == ins[0] and (ld.strides != own or ld.offset or ld.guard or ld.dynamic
                                              or ld.inner or ld.buffer.shape != kernel.shape):
                return False
        return not any(ld.buffer.index == ins[0] for k in self.unit.kernels[j + 1:] for ld in k.loads)

    def describe(self):
        return describe_launched("cuda stretch", self.name, self.eqns, self.kernels, f" for {self.props}")

