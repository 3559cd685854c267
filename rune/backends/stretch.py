"""A compiled stretch: one fused unit of kernels, the plan step every platform runs.

`CompiledStretch` is built from a fused `Unit` (rune/compiler/fuse.py) and a
platform's `Kernels` (rune/backends/cpu/stretch.py for C, rune/backends/cuda/stretch.py
for CUDA), which says what differs between platforms: the dialect rendering the
unit, how units compile (the backend's `compile`, through rune/backends/pipeline.py),
and how one run addresses its buffers and launches. Building one needs no device.

Compilation is deferred to a stretch's first run, which compiles every stretch
built by then (a plan's stretches, its loop bodies') with it, or to
`compile_pending()`: one queue for every platform, whose units go through the
compile pipeline together (rune/backends/pipeline.py: many units to a compiler
run, whose fixed cost is paid per run, so a program planning many functions
before running them pays it once per batch; the runs on a pool of threads, as cc
and NVRTC release the GIL). One `compile_pending` runs at a time; a thread whose stretch is
in the batch being compiled waits for it rather than compiling it again.

Every plan step has the same protocol: `reads()` and `writes()` (the slots it
reads and writes), `run(env, donated=None)`, `describe()`, `kernels` (a tuple),
`plans` (the nested plans: none here) and `profile_kind`; a compiled stretch also
has `takes_donations` and `writes_in_place`. `donated` maps an output slot to a
raw buffer the output is written into (a donated argument's,
rune/compiler/donation.py) instead of a fresh one, on platforms that take them.
"""
import concurrent.futures
import threading
import weakref

from ..base import profiler
from ..codegen.kernel import contiguous_strides
from ..errors import CompileError
from ..base.stats import COUNTERS
from .pipeline import compile_threads

_PENDING = weakref.WeakSet()
_PENDING_LOCK = threading.Lock()   # guards _PENDING (a WeakSet is not safe to change while iterated)
_COMPILE_LOCK = threading.RLock()  # one compile at a time: a thread whose stretch another thread
#                                    is compiling waits for it instead of compiling it again


def compile_pending(batch=None, threads=None):
    """Compile every stretch built but not yet compiled, on every platform; the number
    compiled. Each platform's units go to its `compile_units` at once (its backend's
    `compile`: the pipeline looks them up in the disk cache, then compiles the rest
    many to a compiler run, on a pool of threads), or `batch` at a time; the platforms
    (or batches) are compiled on `threads` threads at once (None: `compile_threads()`).
    A call that raises CompileError leaves its stretches pending: each then compiles
    alone on its first run, and the one at fault says so."""
    with _COMPILE_LOCK:
        groups = {}
        with _PENDING_LOCK:
            for s in _PENDING:
                if s._launch is None:
                    groups.setdefault((s.platform, s.prelude), []).append(s)
        parts = [todo[k:k + (batch or len(todo))] for todo in groups.values()
                 for k in range(0, len(todo), batch or len(todo))]
        if not parts:
            return 0
        workers = min(len(parts), threads or compile_threads())
        labels = sorted({p[0].platform.label for p in parts})
        where = ", ".join(sorted({p[0].platform.device_name for p in parts}))
        with profiler.span("compile", f"{sum(map(len, parts))} {'/'.join(labels)} stretch(es)", where):
            if workers == 1:
                results = [_compile_part(p) for p in parts]
            else:
                with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="rune-compile") as pool:
                    results = list(pool.map(_compile_part, parts))
        done = 0
        for part, launches in zip(parts, results):
            if launches is None:
                continue
            with _PENDING_LOCK:
                for s, launch in zip(part, launches):
                    s._launch = launch
                    _PENDING.discard(s)
            done += len(part)
        return done


def _compile_part(part):
    """The launches of `part`'s units, compiled together; None where that raises."""
    try:
        return part[0].platform.compile_units(part[0].prelude, [s.source_unit for s in part])
    except CompileError:
        return None


class Kernels:
    """What one platform's compiled stretches share (one object per compiler and
    device, so that their units batch together): a platform subclasses it.

    label, device_name     for messages and rune.profile: "C", "cpu"; "CUDA", "cuda:0".
    rendered_for           how `describe` says what the kernels were rendered for.
    dialect, prelude       the codegen dialect rendering units, and its prelude.
    takes_donations        whether runs write outputs into donated buffers.
    compile_units(prelude, units)   one launch per rendered unit (the backend's `compile`).
    buffers(stretch)       the per-stretch state of a run: `run(launch, env, donated)`.
    describe_kernel(kernel)  the line `describe` heads a kernel's source with.
    stretch(eqns, unit, device)   a `CompiledStretch` of `unit` on these kernels.
    """
    label = device_name = rendered_for = ""
    dialect = None
    prelude = ""
    takes_donations = False

    def compile_units(self, prelude, units):
        raise NotImplementedError

    def buffers(self, stretch):
        raise NotImplementedError

    def describe_kernel(self, kernel):
        return f"kernel {kernel.name} over {list(kernel.shape)}:"

    def stretch(self, eqns, unit, device):
        """The `CompiledStretch` running `unit` with these kernels (`Backend.compiled_stretch`);
        raises NotImplementedError for a node the dialect has no rule for."""
        return CompiledStretch(eqns, unit, device, self)


class CompiledStretch:
    """A run of primitives fused into one unit of kernels for `device`, compiled for the
    platform `platform` (a platform's `Kernels`: C or CUDA)."""
    profile_kind = "kernel"   # how rune.profile names this step
    plans = ()                # no nested plans

    def __init__(self, eqns, unit, device, platform):
        self.eqns, self.unit, self.device, self.platform = eqns, unit, device, platform
        self.prelude = platform.prelude
        rendered = platform.dialect.render_unit(unit.kernels)
        self.name, self.text, self.kernels = rendered.name, rendered.source, tuple(rendered.kernels)
        self.kernel_count = len(self.kernels)   # counted as launched on every run
        self.inputs = [(b.index, s) for b, s in unit.inputs]
        self.outputs = [(b.index, s, b.shape, b.dtype) for b, s in unit.outputs]
        self.buffers = platform.buffers(self)   # how one run addresses the unit's buffers
        self._launch = None
        with _PENDING_LOCK:
            _PENDING.add(self)

    @property
    def source_unit(self):
        """(name, source, kernels) as the backend's `compile` takes it."""
        return self.name, self.text, self.kernels

    @property
    def takes_donations(self):
        """Whether `run` writes outputs into the donated buffers it is given (on a GPU)."""
        return self.platform.takes_donations

    def reads(self):
        return tuple(dict.fromkeys(s for _, s in self.inputs))

    def writes(self):
        return tuple(s for _, s, _, _ in self.outputs)

    def compile(self):
        """Compile and load the unit (once); a failure raises its CompileError."""
        with _COMPILE_LOCK:
            if self._launch is None:
                launch = self.platform.compile_units(self.prelude, [self.source_unit])[0]
                with _PENDING_LOCK:
                    self._launch = launch
                    _PENDING.discard(self)
        return self._launch

    def run(self, env, donated=None):
        launch = self._launch
        if launch is None:   # the first run: every stretch built by then compiles with it
            compile_pending()   # (or waits for the thread compiling this one)
            launch = self._launch or self.compile()
        self.buffers.run(launch, env, donated)
        COUNTERS["kernels_launched"] += self.kernel_count

    def writes_in_place(self, slot, out_slot):
        """Whether the output `out_slot` may be written into the buffer of the input
        `slot` while this stretch still reads it: the platform takes donated buffers,
        one elementwise kernel stores the output at each point's own position and reads
        the input only there, and no later kernel of the unit reads the input."""
        if not self.platform.takes_donations:
            return False
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
        names = " ".join(e.prim.name for e in self.eqns)
        n = len(self.kernels)
        lines = [f"compiled stretch {self.name} of {len(self.eqns)} ops ({names}){self.platform.rendered_for}: "
                 f"{n} {self.platform.label} kernel{'s' if n != 1 else ''}"]
        for k in self.kernels:
            lines.append(f"  {self.platform.describe_kernel(k)}")
            lines.extend("    " + ln for ln in k.source.splitlines())
        return "\n".join(lines)
