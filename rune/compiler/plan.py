"""Plans: how a Program is evaluated (docs/design.md, "Programs and plans").

A plan is built from explicit inputs alone: `Plan(program, target, device)`,
where `target` is None (this process's devices) or a target this process need
not have ("cuda": an inspection, rune/compiler/target.py) and `device` is where
unplaced values lie (the default device the program was staged under). The
compiler keeps plans by those inputs (`plan_for`: a cache keyed by the
program's identity, the target and the device, dropped with the program), so
a loop body or branch is planned once per target and device.

A plan is a list of steps over a flat environment of raw backend arrays:
compiled stretches (a run of first-order primitives fused into kernels: one
compiled call, rune/compiler/lower.py and the backends' `compiled_stretch`),
NumPy `Stretch`es (a run the compiler does not lower, written out as one
straight-line Python function over the backend's implementations,
rune/compiler/steps.py), library calls, view steps, and host steps: callbacks,
loops (scan / while, with a nested plan for the body), branches (cond) and
transfers (rune/compiler/control_steps.py, registered in `STEP_KINDS` by
primitive); a collective's callback step is then split into a start and a wait
step with compute between them (rune/compiler/overlap.py). Calls to custom rules and checkpoints are inlined: a plan
evaluates only their forward computation.

The step protocol: every step has
  - `reads()`: the slots it reads (made before it);
  - `writes()`: the slots it writes;
  - `run(env)`: reads and writes `env` (a list of raw arrays by slot);
  - `takes_donations`: whether it writes outputs into donated buffers (a
    compiled stretch on a GPU). Such a step also has `run(env, donated)`, with
    `donated` {output slot: a donated buffer to write it into} or None, and
    `writes_in_place(slot, out_slot) -> bool`: whether the output may go into
    the buffer of the input `slot` while the step still reads it
    (rune/compiler/donation.py);
  - `describe()`: what it is, as text (the first line names it);
  - `kernels`: the compiled kernels it launches (a tuple; empty for host steps);
  - `plans`: the plans it runs (a tuple: a loop's body, a cond's branches);
  - `profile_kind`: how `rune.profile` names it (kernel, library, numpy, views,
    transfer, callback, scan, while, cond, collective start, collective wait).
Donation, the profiler and the walks over nested plans read steps through it.

A plan is also the one evaluator of programs on concrete arrays: eager scan,
while, cond, checkpoints and custom rules run their bodies through plans
(rune/compiler/eager.py), as jit does.
"""
import functools
import threading
import weakref

from ..core.primitive import calls
from ..core.program import Literal, dce
from ..nx.buffers import Array
from ..base import profiler
from ..base.profiler import _OPEN as _PROFILES_OPEN  # never rebound: read without a call
from ..base.stats import COUNTERS
from . import lower as _lower
from .overlap import split_collectives
from .control_steps import STEP_KINDS
from .steps import Op, Stretch, eqn_device, indent
from .straight import straight_function
from .target import dialect


class Planning:
    """The inputs a plan is built from besides its program: `target` (None: this
    process's devices) and `device` (where unplaced values lie). Host steps plan
    their bodies through `plan(program)`, for the same inputs."""
    __slots__ = ("target", "device")

    def __init__(self, target, device):
        self.target, self.device = target, device

    def plan(self, program):
        return plan_for(program, self.target, self.device)


class Plan:
    """Built in passes over `program` (dead code removed first, loop and branch
    bodies included):
      1. linearise: one flat list of first-order ops and host steps over slots
         (`Op` records), calls inlined;
      2. count uses: drop what nothing reads (outputs of inlined calls the
         caller ignores; effects stay), then how often each slot is read,
         plan outputs included;
      3. close stretches: consecutive first-order ops on one device (a stretch
         never spans two devices; a host step or a device change ends it);
      4. attach to each stretch its inputs and the values that escape it;
      5. lower: stretches to compiled or NumPy steps, host steps to theirs.

    `compiled=False`: every stretch runs op by op (a plan run once).
    """

    def __init__(self, program, target, device, compiled=True):
        if target is not None:
            dialect(target)  # an unknown target fails here, kernels or not
        program = dce(program)
        self.program = program
        self.target, self.device = target, device
        self.compiled = compiled
        self.slots = 0
        self.constants = {}   # slot -> raw value
        self.avals = {}       # slot -> aval
        items = []            # pass 1 output: Op records
        consts = [self._new_const(_raw(c), v.aval) for c, v in zip(program.consts, program.constvars)]
        self.in_slots = [self._new(v.aval) for v in program.invars]
        self.out_slots = self._linearise(program, consts + self.in_slots, items)
        items = _drop_dead(items, self.out_slots)
        uses = _count_uses(items, self.out_slots)
        groups = _close_stretches(items, device)
        for g in groups:
            if type(g) is _Group:
                g.attach(uses)
        self.steps = self._lower(groups, Planning(target, device))
        # collectives as a start and a wait, compute between them (rune/compiler/overlap.py)
        self.steps = split_collectives(self.steps, lambda: self._new(None))
        self.out_avals = program.out_avals
        self.template = [None] * self.slots
        for s, v in self.constants.items():
            self.template[s] = v
        # every step a NumPy stretch: the plan can be written as straight lines (straight.py)
        self.straight = all(type(st) is Stretch for st in self.steps)
        self._written = None  # run() as one written function, when `straight`

    def _new(self, aval):
        self.slots += 1
        self.avals[self.slots - 1] = aval
        return self.slots - 1

    def _new_const(self, value, aval):
        s = self._new(aval)
        self.constants[s] = value
        return s

    def _linearise(self, program, in_slots, items):
        """Pass 1: append `program`'s equations reading `in_slots` to `items`;
        returns its output slots."""
        where = dict(zip(program.constvars + program.invars, in_slots))

        def slot(atom):
            if type(atom) is Literal:
                return self._new_const(atom.value, atom.aval)
            return where[atom]

        for eqn in program.eqns:
            ins = [slot(a) for a in eqn.inputs]
            call = calls.get(eqn.prim)
            if call is not None:  # a plan evaluates only the called program: inline it
                inner, returned = call(eqn.params)
                outs = self._linearise(dce(inner), ins, items)
                outs = outs if returned is None else outs[:returned]
            else:
                outs = [self._new(v.aval) for v in eqn.outputs]
                items.append(Op(eqn, ins, outs))
            where.update(zip(eqn.outputs, outs))
        return [slot(a) for a in program.outvars]

    def _lower(self, groups, planning):
        """Pass 5: each stretch as compiled and NumPy steps, each host step as its own."""
        steps = []
        min_size = _lower.compile_min_size()   # read once per plan
        for g in groups:
            if type(g) is _Group:
                compile_on = g.device if self.compiled else None

                def numpy_stretch(ops, device=g.device):
                    return Stretch(ops, device)
                steps.extend(_lower.lower(
                    g.ops, self.constants, g.escaping, self.avals, numpy_stretch, compile_on,
                    target=self.target, min_size=min_size))
            else:
                steps.append(STEP_KINDS[g.eqn.prim](g, planning))
        return steps

    @property
    def kernels(self):
        """The compiled kernels of this plan's steps (nested plans included), in order."""
        out = []
        for step in self.steps:
            out.extend(step.kernels)
            for sub in step.plans:
                out.extend(sub.kernels)
        return out

    def run(self, args, donated=None):
        """Evaluate on raw arrays (constants first as the program orders them).
        `donated`: {id(step): {output slot: donated buffer}} (rune/compiler/donation.py)."""
        written = self._written
        if written and not _PROFILES_OPEN:
            return written(args)
        env = list(self.template)
        for s, a in zip(self.in_slots, args):
            env[s] = a
        if _PROFILES_OPEN:
            profiler.run_steps(self.steps, env, donated=donated)
        elif donated:
            for step in self.steps:
                given = donated.get(id(step))
                if given is None:
                    step.run(env)
                else:
                    step.run(env, given)
        else:
            for step in self.steps:
                step.run(env)
        if written is None:  # written on the second run, as a stretch is
            self._written = _WRITING if self.straight else False
        elif written is _WRITING:
            self._written = straight_function(self)
        return [env[s] for s in self.out_slots]

    def __repr__(self):
        lines = [f"Plan: {len(self.in_slots)} inputs, {len(self.out_slots)} outputs, "
                 f"{len(self.steps)} steps"]
        for i, step in enumerate(self.steps):
            lines.append(indent(f"[{i}] {step.describe()}", 2))
        return "\n".join(lines)


_WRITING = 0  # a plan of NumPy stretches run once: the next run writes its function (falsy)


# ---------------------------------------------------------------- passes 2-4

def _drop_dead(items, out_slots):
    """`items` without the steps whose results nothing reads (walking back from
    the outputs); effectful steps always stay."""
    live, kept = set(out_slots), []
    for op in reversed(items):
        if op.eqn.effectful or any(o in live for o in op.outs):
            kept.append(op)
            live.update(op.ins)
    kept.reverse()
    return kept


def _count_uses(items, out_slots):
    """Pass 2: slot -> how many times a step or the plan's outputs read it."""
    uses = {}
    for op in items:
        for s in op.ins:
            uses[s] = uses.get(s, 0) + 1
    for s in out_slots:
        uses[s] = uses.get(s, 0) + 1
    return uses


class _Group:
    """A stretch being built: first-order ops on one device, not yet lowered."""

    def __init__(self, device):
        self.device = device
        self.ops = []          # Op records
        self.inputs = []       # slots read here and made elsewhere (constants included)
        self.escaping = set()  # slots made here and read after it (or plan outputs)

    def attach(self, uses):
        """Pass 4: the stretch's inputs and the values that leave it (read more
        often than inside it: by later steps or as plan outputs)."""
        made, reads = set(), {}
        for _, ins, outs in self.ops:
            for s in ins:
                if s not in made and s not in reads:
                    self.inputs.append(s)
                reads[s] = reads.get(s, 0) + 1
            made.update(outs)
        self.escaping = {s for s in made if uses.get(s, 0) > reads.get(s, 0)}


def _close_stretches(items, default):
    """Pass 3: consecutive first-order ops on one device (`default` for unplaced
    values) become one `_Group`; host steps stay as they are (`Op`s), in order."""
    groups, open_ = [], None
    for op in items:
        if op.eqn.prim in STEP_KINDS:
            groups.append(op)
            open_ = None
            continue
        device = eqn_device(op.eqn, default)
        if open_ is None or open_.device != device:
            open_ = _Group(device)
            groups.append(open_)
        open_.ops.append(op)
    return groups


def _raw(value):
    return value._raw if isinstance(value, Array) else value


# ---------------------------------------------------------------- the compiler's plans

# id(program) -> {key: what is kept with it}: plans by (target, device name), and what
# eager evaluation keeps (rune/compiler/eager.py). An entry goes when its program
# is collected (the weak reference's callback runs before the id can be reused);
# looking one up costs no Python call.
KEPT = {}
_REFS = {}   # id(program) -> a weak reference to it, whose callback drops its entry
_KEPT_LOCK = threading.Lock()


def _forget(ref, key):
    KEPT.pop(key, None)
    _REFS.pop(key, None)


def kept_with(program, key):
    """What is kept with `program` under `key`, or None."""
    found = KEPT.get(id(program))
    return None if found is None else found.get(key)


def keep_with(program, key, value):
    """Keep `value` with `program` under `key` (while the program lives); returns
    what is kept there (the value another thread kept first, if one did)."""
    k = id(program)
    with _KEPT_LOCK:
        found = KEPT.get(k)
        if found is None:
            _REFS[k] = weakref.ref(program, functools.partial(_forget, key=k))
            found = KEPT[k] = {}
        return found.setdefault(key, value)


def plan_for(program, target, device):
    """The plan of `program` for `target` and `device`, built once and kept."""
    key = (target, device.name)   # a str hashes without a call into Python
    found = KEPT.get(id(program))
    plan = None if found is None else found.get(key)
    if plan is None:
        plan = keep_with(program, key, Plan(program, target, device))
        if target is None:
            COUNTERS["compiles"] += 1
    return plan


def forget_plans():
    """Drop every kept plan (and what eager evaluation kept)."""
    with _KEPT_LOCK:
        KEPT.clear()
        _REFS.clear()
