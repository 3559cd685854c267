"""Lowering a stretch: compiled C units where the compiler can, NumPy elsewhere.

A stretch on the host is split into runs of equations the compiler lowers
(`fuse.lowerable`) and runs it does not; each lowered run becomes one
`CompiledStretch` (one shared library entry: its kernels and a driver), the
others stay NumPy `Stretch`es, with the same results. A library primitive
(`dot_general`: BLAS through NumPy, the backend's `library` table) is a
`LibraryCall` step between compiled runs, so its elementwise epilogue starts
the next kernel; a cheap elementwise value a later compiled run reads is
recomputed there rather than stored (`_recomputed_across`). Without a C compiler (none found, or `RUNE_CC=none`) every
stretch stays NumPy. A stretch on a GPU lowers the same way, into the
backend's compiled stretch (`backend.compiled_stretch`: CUDA kernels, with
cuBLAS through CuPy as its library; None where the backend cannot render the
run, which then stays op by op); its backend compiles it on first run.

Compilation is deferred to a stretch's first run, or done for everything
pending at once by `compile_pending()` (a test suite or a program building
many plans pays one compiler run per batch instead of one per stretch).

Threads may plan and run at once: rendering is a pure function of the
kernels (the dialect holds no per-kernel state), the pending set has its
lock, and one thread compiles at a time while a thread whose stretch is in
that batch waits for it rather than compiling it again.
"""
from .. import config
from ..backends import backend_for, compile_pending  # noqa: F401  (compile_pending: re-exported for plans' users)
from ..devices import get_device
from ..stats import COUNTERS
from . import fuse
from .target import TargetStretch, planning_target

_HOST = backend_for(get_device("cpu"))


# A compiled call has a fixed cost of a few microseconds (the ctypes call, one
# pointer read per array) that NumPy spends on about as many tiny ops, so a
# stretch whose values (read or written) are all small and that has few ops runs
# faster op by op (a scan row of scalars, a cached `x + 1`). RUNE_COMPILE_MIN_SIZE
# is the element count from which a stretch is always compiled; the tests set it to 0
# so that every pattern goes through the compiler.
_MIN_SIZE = 4096
_MIN_OPS = 16


def _worth_compiling(ops):
    min_size = config.compile_min_size(_MIN_SIZE)
    if len(ops) >= _MIN_OPS or min_size <= 0:
        return True
    # the largest value read or written: a reduction of a large array to a scalar is large work
    return max(v.aval.size for eqn, _, _ in ops for v in (*eqn.inputs, *eqn.outputs)) >= min_size


def _host_builder(ops):
    compiler = _HOST.compiler()
    if compiler is None or not _worth_compiling(ops):
        return None
    return lambda eqns, unit: _HOST.compiled_stretch(eqns, unit, None)


def _device_builder(backend, device):
    # A GPU launch costs about what one op by op costs, so every lowerable run is compiled.
    if backend.compiler() is None:
        return None
    return lambda eqns, unit: backend.compiled_stretch(eqns, unit, device)


def lower(ops, constants, live_out, avals, numpy_stretch, device):
    """Steps for one stretch `ops` [(eqn, ins, outs)]; `live_out`: slots read after it.
    `device`: where the stretch runs compiled (None: op by op). Inside
    `planning_for(target)` (rune/compiler/target.py) every lowerable run is planned for it."""
    target = planning_target()
    backend, build = _HOST, None
    if target is None and device is not None:
        backend = backend_for(device)
        build = _host_builder(ops) if backend is _HOST else _device_builder(backend, device)
    if target is None and build is None:
        return [numpy_stretch(ops)]
    runs, current, flag = [], [], None
    for op in ops:
        ok = fuse.lowerable(op[0], op[1], constants)
        if ok and fuse.PRIM_CLASS.get(op[0].prim.name) == fuse.LIBRARY:
            ok = "library" if op[0].prim.name in backend.library else False
        if current and ok != flag:
            runs.append((flag, current))
            current = []
        current.append(op)
        flag = ok
    if current:
        runs.append((flag, current))
    runs = [part for ok, run in runs for part in (_split_views(run) if ok is True else [(ok, run)])]
    runs = _recomputed_across(runs, live_out)
    steps = []
    for k, (ok, run) in enumerate(runs):
        if not ok:
            steps.append(numpy_stretch(run))
            continue
        if ok == "library":
            steps.extend(LibraryCall(*op, backend.library[op[0].prim.name]) for op in run)
            continue
        if ok == "views":
            steps.append(ViewStep(numpy_stretch(run)))
            continue
        produced = {s for _, _, outs in run for s in outs}
        later = set(live_out)
        for _, other in runs[:k] + runs[k + 1:]:
            made = {s for _, _, outs in other for s in outs}   # a value recomputed there is not read
            later.update(s for _, ins, _ in other for s in ins if s not in made)
        unit = fuse.fuse(run, constants, produced & later, avals)
        if target is not None:
            steps.append(TargetStretch(target, [e for e, _, _ in run], unit))
        else:
            step = build([e for e, _, _ in run], unit)
            steps.append(numpy_stretch(run) if step is None else step)
    return steps


def _recomputed_across(runs, live_out):
    """Cheap elementwise ops whose values a compiled run hands to later compiled runs
    (residuals kept for a backward pass across the matmuls between) recomputed
    at the start of each later run that reads them, from operands that cross
    anyway, instead of being stored and loaded back: a GELU's forward then stores
    its input and tanh, not every product on the way. Only where every reader is a
    compiled run and the value does not leave the stretch."""
    runs = [(ok, list(run)) for ok, run in runs]
    readers = {}      # slot -> positions of the runs reading it
    made_in = {}      # slot -> position of the run producing it
    for j, (ok, run) in enumerate(runs):
        for _, ins, outs in run:
            for s in ins:
                readers.setdefault(s, set()).add(j)
            made_in.update(dict.fromkeys(outs, j))
    moved = {}        # slot -> runs it is recomputed in
    front = {}        # run -> how many ops are recomputed at its start
    for k, (ok, run) in enumerate(runs):
        if ok is not True:
            continue
        for op in run:
            eqn, ins, outs = op
            if (fuse.PRIM_CLASS.get(eqn.prim.name) != fuse.ELEMENTWISE or eqn.prim.name in fuse._COSTLY
                    or len(outs) != 1 or outs[0] in live_out):
                continue
            later = {j for j in readers.get(outs[0], ()) if j != k}
            if not later or any(j < k or runs[j][0] is not True for j in later):
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


# Movement NumPy does as a view: free there, a strided copy in a kernel.
_FREE_VIEWS = frozenset({"transpose", "reshape", "broadcast_to", "slice", "rev"})


def _split_views(run):
    """A lowered run as [(True, computing ops), ("views", movement read by nothing in it)].

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
            if op[0].prim.name in _FREE_VIEWS and not set(op[2]) & reads:
                kept.remove(op)
                peeled.insert(0, op)
                changed = True
                break
    return [part for part in ((True, kept), ("views", peeled)) if part[1]]


class ViewStep:
    """Movement ops run as NumPy views after a compiled run (no copy, no kernel)."""
    profile_kind = "views"   # how rune.profile names this step

    def __init__(self, stretch):
        self.stretch, self.eqns = stretch, stretch.eqns

    def run(self, env):
        self.stretch.execute(env)   # views cost no kernel launch

    def describe(self):
        return "views " + self.stretch.describe()


class LibraryCall:
    """One primitive run by the backend's library function (BLAS through NumPy)."""
    profile_kind = "library"   # how rune.profile names this step

    def __init__(self, eqn, ins, outs, fn):
        self.eqns = [eqn]
        self.fn, self.params = fn, eqn.params
        self.ins, self.out = ins, outs[0]

    def run(self, env):
        env[self.out] = self.fn(*[env[i] for i in self.ins], **self.params)
        COUNTERS["kernels_launched"] += 1

    def describe(self):
        return f"library call {self.eqns[0].prim.name} ({self.fn.__module__}.{self.fn.__name__})"
