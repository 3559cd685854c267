"""Lowering a stretch: compiled units where the target renders, op by op elsewhere.

A stretch is split into runs of one `Run` kind: equations the fuser lowers and
the target's renderer renders (`fuse.lowerable` asks the target's codegen
dialect) become one compiled stretch per run (its kernels and a driver); a
library primitive (`dot_general`: BLAS through NumPy, cuBLAS through CuPy, the
backend's `library` table) is a `LibraryCall` step between compiled runs, so
its elementwise epilogue starts the next kernel; movement NumPy does as a view
runs after a compiled run as a `ViewStep`; the rest stays op by op (a NumPy
`Stretch` on the host), with the same results. A cheap elementwise value a
later compiled run reads is recomputed there rather than stored
(`_recomputed_across`). Without a C compiler (none found, or `RUNE_CC=none`)
every host stretch stays NumPy. A stretch on a GPU lowers the same way, into
the backend's compiled stretch (`backend.compiled_stretch`: CUDA kernels); a
node the CUDA dialect cannot render is known when planning and stays op by op.
For another target (`plan(target="cuda")`), every lowered run is a
`TargetStretch` holding that dialect's kernels.

Compilation is deferred to a stretch's first run, or done for everything
pending at once by `compile_pending()` (a test suite or a program building
many plans pays one compiler run per batch instead of one per stretch).

Threads may plan and run at once: rendering is a pure function of the
kernels (the dialect holds no per-kernel state), the pending set has its
lock, and one thread compiles at a time while a thread whose stretch is in
that batch waits for it rather than compiling it again.
"""
import enum

from ..base.tuning import COMPILE_MIN_OPS, COMPILE_MIN_SIZE
from ..base import config
from ..backends import backend_for
from ..core.primitive import Lowering
from ..core.prims import P
from ..core.devices import get_device
from ..base.stats import COUNTERS
from . import fuse
from .target import TargetStretch, dialect

_HOST = backend_for(get_device("cpu"))


class Run(enum.Enum):
    """How a run of equations of one stretch is carried out."""
    OP_BY_OP = "op by op"   # the backend's implementations one by one (a NumPy stretch on the host)
    FUSED = "fused"         # kernels of one compiled stretch
    LIBRARY = "library"     # one backend library call per equation
    VIEWS = "views"         # movement after a fused run, done as NumPy views


# A compiled call has a fixed cost of a few microseconds (the ctypes call, one
# pointer read per array) that NumPy spends on about as many tiny ops, so a
# stretch whose values (read or written) are all small and that has few ops runs
# faster op by op (a scan row of scalars, a cached `x + 1`). RUNE_COMPILE_MIN_SIZE
# is the element count from which a stretch is always compiled; the tests set it to 0
# so that every pattern goes through the compiler.
DEFAULT_MIN_SIZE = COMPILE_MIN_SIZE
_MIN_OPS = COMPILE_MIN_OPS


def compile_min_size():
    """RUNE_COMPILE_MIN_SIZE (default `DEFAULT_MIN_SIZE`): read once per plan, which
    passes it to each `lower` call (lowering itself never reads the environment)."""
    return config.compile_min_size(DEFAULT_MIN_SIZE)


def _worth_compiling(ops, min_size):
    if len(ops) >= _MIN_OPS or min_size <= 0:
        return True
    # the largest value read or written: a reduction of a large array to a scalar is large work
    return max(v.aval.size for eqn, _, _ in ops for v in (*eqn.inputs, *eqn.outputs)) >= min_size


def _builder(backend, device, ops, min_size):
    """fn(eqns, unit) -> the compiled step of a fused run on `device`, or None where
    the stretch stays op by op: no dialect or compiler for the platform, or a
    small host stretch."""
    if backend.dialect is None or backend.compiler() is None:
        return None
    if backend is _HOST:
        if not _worth_compiling(ops, min_size):
            return None
        return lambda eqns, unit: backend.compiled_stretch(eqns, unit, None)
    # A GPU launch costs about what one op by op costs, so every lowerable run is compiled.
    return lambda eqns, unit: backend.compiled_stretch(eqns, unit, device)


def lower(ops, constants, live_out, avals, numpy_stretch, device, target=None, min_size=DEFAULT_MIN_SIZE):
    """Steps for one stretch `ops` [(eqn, ins, outs)]; `live_out`: slots read after it.
    `device`: where the stretch runs compiled (None: op by op). `target`: a
    target this process need not have ("cuda"; rune/compiler/target.py) every
    lowerable run is planned for, or None for `device`. `min_size`: the element
    count from which a host stretch is always compiled (the plan passes
    `compile_min_size()`)."""
    backend, build = _HOST, None
    if target is None and device is not None:
        backend = backend_for(device)
        build = _builder(backend, device, ops, min_size)
    if target is None and build is None:
        return [numpy_stretch(ops)]
    renderer = dialect(target) if target is not None else backend.dialect
    runs, current, kind = [], [], None
    for op in ops:
        k = _run_kind(op, constants, backend, renderer)
        if current and k is not kind:
            runs.append((kind, current))
            current = []
        current.append(op)
        kind = k
    if current:
        runs.append((kind, current))
    runs = [part for kind, run in runs
            for part in (_split_views(run) if kind is Run.FUSED else [(kind, run)])]
    runs = _recomputed_across(_views_into_readers(runs, live_out), live_out)
    steps = []
    for k, (kind, run) in enumerate(runs):
        if kind is Run.OP_BY_OP:
            steps.append(numpy_stretch(run))
        elif kind is Run.LIBRARY:
            steps.extend(LibraryCall(*op, backend.library[op[0].prim.ir_op]) for op in run)
        elif kind is Run.VIEWS:
            steps.append(ViewStep(numpy_stretch(run)))
        else:
            produced = {s for _, _, outs in run for s in outs}
            later = set(live_out)
            for _, other in runs[:k] + runs[k + 1:]:
                made = {s for _, _, outs in other for s in outs}   # a value recomputed there is not read
                later.update(s for _, ins, _ in other for s in ins if s not in made)
            unit = fuse.fuse(run, constants, produced & later, avals, backend.to_host,
                             renderer.stores_shared_costly)
            if target is not None:
                steps.append(TargetStretch(target, [e for e, _, _ in run], unit))
            else:
                step = build([e for e, _, _ in run], unit)
                steps.append(numpy_stretch(run) if step is None else step)
    return steps


def _run_kind(op, constants, backend, renderer):
    """The `Run` kind of one equation [(eqn, ins, outs)] on `backend`, rendered by `renderer`."""
    eqn, ins, _ = op
    if not fuse.lowerable(eqn, ins, constants, renderer, backend.to_host):
        return Run.OP_BY_OP
    if eqn.prim.lowering is Lowering.LIBRARY:
        if fuse.outer_product(eqn):
            return Run.FUSED
        return Run.LIBRARY if eqn.prim.ir_op in backend.library else Run.OP_BY_OP
    return Run.FUSED


def _recomputed_across(runs, live_out):
    """Cheap elementwise ops whose values a compiled run hands to later compiled runs
    (residuals kept for a backward pass across the matmuls between) recomputed
    at the start of each later run that reads them, from operands that cross
    anyway, instead of being stored and loaded back: a GELU's forward then stores
    its input and tanh, not every product on the way. Only where every reader is a
    compiled run and the value does not leave the stretch."""
    runs = [(kind, list(run)) for kind, run in runs]
    readers = {}      # slot -> positions of the runs reading it
    made_in = {}      # slot -> position of the run producing it
    for j, (kind, run) in enumerate(runs):
        for _, ins, outs in run:
            for s in ins:
                readers.setdefault(s, set()).add(j)
            made_in.update(dict.fromkeys(outs, j))
    moved = {}        # slot -> runs it is recomputed in
    front = {}        # run -> how many ops are recomputed at its start
    for k, (kind, run) in enumerate(runs):
        if kind is not Run.FUSED:
            continue
        for op in run:
            eqn, ins, outs = op
            if (eqn.prim.lowering is not Lowering.ELEMENTWISE or eqn.prim.ir_op in fuse.COSTLY_OPS
                    or len(outs) != 1 or outs[0] in live_out):
                continue
            later = {j for j in readers.get(outs[0], ()) if j != k}
            if not later or any(j < k or runs[j][0] is not Run.FUSED for j in later):
                continue

            def crosses(s, j):   # an operand run j can read: made before run k, or crossing anyway
                if s in moved:
                    return j in moved[s]
                return made_in.get(s, -1) != k or bool(readers.get(s, set()) - {k})
            if not all(crosses(s, j) for s in ins for j in later):
                continue
            moved[outs[0]] = later
            for j in later:   # at the start of run j, after those recomputed there before it
                runs[j][1].insert(front.get(j, 0), op)
                front[j] = front.get(j, 0) + 1
    return runs


def _views_into_readers(runs, live_out):
    """Movement ops of a views step whose only reader is one later compiled run,
    moved to the start of that run: its kernels then read through them in place,
    where a view handed to a compiled run (a transposed gradient on its way to the
    optimizer's update) is first copied contiguous. Views a library call or the
    caller reads stay (BLAS reads transposed operands in place)."""
    runs = [(kind, list(run)) for kind, run in runs]
    readers = {}   # slot -> positions of the runs reading it
    for j, (_, run) in enumerate(runs):
        for _, ins, _ in run:
            for s in ins:
                readers.setdefault(s, set()).add(j)
    for k, (kind, run) in enumerate(runs):
        if kind is not Run.VIEWS:
            continue
        target = {}   # id(op) -> the run it moves to
        for op in reversed(run):   # an op read by this step's own ops moves only with them
            into = set()
            for s in op[2]:
                if s in live_out:
                    into.add(None)
                for j in readers.get(s, ()):
                    if j != k:
                        into.add(j)
                        continue
                    for other in (o for o in run if s in o[1]):
                        into.add(target.get(id(other)))
            if len(into) == 1:
                j = next(iter(into))
                if j is not None and j > k and runs[j][0] is Run.FUSED:
                    target[id(op)] = j
        for op in reversed([op for op in run if id(op) in target]):
            runs[target[id(op)]][1].insert(0, op)
        run[:] = [op for op in run if id(op) not in target]
    return [(kind, run) for kind, run in runs if run]


# Movement NumPy does as a view: free there, a strided copy in a kernel.
_FREE_VIEWS = frozenset(P[name] for name in ("transpose", "reshape", "broadcast_to", "slice", "rev"))


def _split_views(run):
    """A fused run as [(FUSED, computing ops), (VIEWS, movement read by nothing in it)].

    A transpose or reshape whose result only leaves the run (an output, or the
    operand of a matmul after it) would be a copy in a kernel but is a view in
    NumPy (and BLAS reads transposed operands in place): it runs after the
    kernels as a NumPy view."""
    kept, peeled = list(run), []
    changed = True
    while changed:
        changed = False
        reads = {s for _, ins, _ in kept for s in ins}
        for op in reversed(kept):
            if op[0].prim in _FREE_VIEWS and not set(op[2]) & reads:
                kept.remove(op)
                peeled.insert(0, op)
                changed = True
                break
    return [part for part in ((Run.FUSED, kept), (Run.VIEWS, peeled)) if part[1]]


class ViewStep:
    """Movement ops run as NumPy views after a compiled run (no copy, no kernel)."""
    profile_kind = "views"   # how rune.profile names this step
    kernels = ()
    plans = ()
    takes_donations = False

    def __init__(self, stretch):
        self.stretch, self.eqns = stretch, stretch.eqns

    def reads(self):
        return self.stretch.reads()

    def writes(self):
        return self.stretch.writes()

    def run(self, env):
        self.stretch.execute(env)   # views cost no kernel launch

    def describe(self):
        return "views " + self.stretch.describe()


class LibraryCall:
    """One primitive run by the backend's library function (BLAS through NumPy)."""
    profile_kind = "library"   # how rune.profile names this step
    kernels = ()
    plans = ()
    takes_donations = False

    def __init__(self, eqn, ins, outs, fn):
        self.eqns = [eqn]
        self.fn, self.params = fn, eqn.params
        self.ins, self.out = ins, outs[0]

    def reads(self):
        return tuple(dict.fromkeys(self.ins))

    def writes(self):
        return (self.out,)

    def run(self, env):
        env[self.out] = self.fn(*[env[i] for i in self.ins], **self.params)
        COUNTERS["kernels_launched"] += 1

    def describe(self):
        return f"library call {self.eqns[0].prim.name} ({self.fn.__module__}.{self.fn.__name__})"
