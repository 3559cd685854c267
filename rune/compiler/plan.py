"""Plans: how a Program is evaluated (DESIGN 2.4).

A plan is a list of steps over a flat environment of raw backend arrays:
`CompiledStretch` (a run of first-order primitives fused into C kernels: one
compiled call, rune/compiler/lower.py), `Stretch` (a run the compiler does not
lower, written out as one straight-line Python function over the backend's
implementations), and host steps: callbacks, loops (scan / while, with a
nested plan for the body), branches (cond) and transfers. Calls to custom
rules and checkpoints are inlined: a plan evaluates only their forward
computation.

Host steps are registered in `STEP_KINDS`, keyed by primitive, next to each
primitive's other rules (rune/control.py, rune/callback.py), so this module
knows no higher-order primitive. A plan is also the one evaluator of programs
on concrete arrays: eager scan, while, cond and calls run their bodies through
`run_program`, as jit does.
"""
from ..backends import backend_for
from ..core.prims import P
from ..core.primitive import calls
from ..core.program import Literal, dce
from ..core.trace import EVAL, current
from ..devices import current_default, transfer
from ..nx.array import Array, wrap_raws
from .. import profiler
from ..profiler import _OPEN as _PROFILES_OPEN  # never rebound: read without a call
from ..stats import COUNTERS
from .lower import lower
from .straight import straight_function
from .target import planning_target

# primitive -> step class `cls(eqn, in_slots, out_slots)` with `run(env)`,
# `describe()` and `ins`: the primitives a plan runs on the host between stretches.
STEP_KINDS = {}


class Plan:
    """Built in passes over `program` (dead code removed first, loop and branch
    bodies included):
      1. linearise: one flat list of first-order ops and host steps over slots,
         calls inlined;
      2. count uses: drop what nothing reads (outputs of inlined calls the
         caller ignores; effects stay), then how often each slot is read,
         plan outputs included;
      3. close stretches: consecutive first-order ops on one device (a stretch
         never spans two devices; a host step or a device change ends it);
      4. attach to each stretch its inputs and the values that escape it;
      5. lower: stretches to compiled or NumPy steps, host steps to theirs.
    """

    def __init__(self, program, compiled=True):
        program = dce(program)
        self.program = program
        self.compiled = compiled  # False: every stretch runs op by op (a plan run once)
        self.slots = 0
        self.constants = {}   # slot -> raw value
        self.avals = {}       # slot -> aval
        items = []            # pass 1 output: (step kind or None, eqn, ins, outs)
        consts = [self._new_const(_raw(c), v.aval) for c, v in zip(program.consts, program.constvars)]
        self.in_slots = [self._new(v.aval) for v in program.invars]
        self.out_slots = self._linearise(program, consts + self.in_slots, items)
        items = _drop_dead(items, self.out_slots)
        uses = _count_uses(items, self.out_slots)
        groups = _close_stretches(items)
        for g in groups:
            if type(g) is _Group:
                g.attach(uses)
        self.steps = self._lower(groups)
        self.out_avals = program.out_avals
        self.template = [None] * self.slots
        for s, v in self.constants.items():
            self.template[s] = v
        self._straight = None  # run() as one written function, when every step is a NumPy stretch

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
                inner, keep = call(eqn.params)
                outs = self._linearise(dce(inner), ins, items)
                outs = outs if keep is None else outs[:keep]
            else:
                outs = [self._new(v.aval) for v in eqn.outputs]
                items.append((STEP_KINDS.get(eqn.prim), eqn, ins, outs))
            where.update(zip(eqn.outputs, outs))
        return [slot(a) for a in program.outvars]

    def _lower(self, groups):
        """Pass 5: each stretch as compiled and NumPy steps, each host step as its own."""
        steps = []
        for g in groups:
            if type(g) is _Group:
                compile_on = g.device if self.compiled else None
                steps.extend(lower(g.ops, self.constants, g.escaping, self.avals, Stretch, compile_on))
            else:
                kind, eqn, ins, outs = g
                steps.append(kind(eqn, ins, outs))
        return steps

    @property
    def kernels(self):
        """The compiled kernels of this plan's stretches (nested plans included), in order."""
        out = []
        for step in self.steps:
            out.extend(getattr(step, "kernels", ()))
            for sub in _nested_plans(step):
                out.extend(sub.kernels)
        return out

    def run(self, args):
        """Evaluate on raw arrays (constants first as the program orders them)."""
        straight = self._straight
        if straight and not _PROFILES_OPEN:
            return straight(args)
        env = list(self.template)
        for s, a in zip(self.in_slots, args):
            env[s] = a
        if _PROFILES_OPEN:
            profiler.run_steps(self.steps, env)
        else:
            for step in self.steps:
                step.run(env)
        if straight is None:  # written on the second run, as a stretch is
            self._straight = _Writing if is_straight(self) else False
        elif straight is _Writing:
            self._straight = straight_function(self)
        return [env[s] for s in self.out_slots]

    def __repr__(self):
        lines = [f"Plan: {len(self.in_slots)} inputs, {len(self.out_slots)} outputs, "
                 f"{len(self.steps)} steps"]
        for i, step in enumerate(self.steps):
            lines.append(indent(f"[{i}] {step.describe()}", 2))
        return "\n".join(lines)


_Writing = 0  # a plan of NumPy stretches run once: the next run writes its function (falsy)


def is_straight(plan):
    """Whether `plan` can be written as straight lines (rune/compiler/straight.py):
    every step a NumPy stretch."""
    return all(type(st) is Stretch for st in plan.steps)


# ---------------------------------------------------------------- passes 2-4

def _drop_dead(items, out_slots):
    """`items` without the steps whose results nothing reads (walking back from
    the outputs); effectful steps always stay."""
    live, kept = set(out_slots), []
    for item in reversed(items):
        _, eqn, ins, outs = item
        if eqn.effectful or any(o in live for o in outs):
            kept.append(item)
            live.update(ins)
    kept.reverse()
    return kept


def _count_uses(items, out_slots):
    """Pass 2: slot -> how many times a step or the plan's outputs read it."""
    uses = {}
    for _, _, ins, _ in items:
        for s in ins:
            uses[s] = uses.get(s, 0) + 1
    for s in out_slots:
        uses[s] = uses.get(s, 0) + 1
    return uses


class _Group:
    """A stretch being built: first-order ops on one device, not yet lowered."""

    def __init__(self, device):
        self.device = device
        self.ops = []          # (eqn, ins, outs)
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


def _close_stretches(items):
    """Pass 3: consecutive first-order ops on one device become one `_Group`;
    host steps stay as they are, in order."""
    groups, open_ = [], None
    for item in items:
        kind, eqn, ins, outs = item
        if kind is not None:
            groups.append(item)
            open_ = None
            continue
        device = eqn_device(eqn)
        if open_ is None or open_.device != device:
            open_ = _Group(device)
            groups.append(open_)
        open_.ops.append((eqn, ins, outs))
    return groups


def eqn_device(eqn):
    """Where a first-order equation runs: its operands' device, else the device
    it makes a constant on, else the default device (as eager evaluation decides)."""
    for a in eqn.inputs:
        if a.aval.device is not None:
            return a.aval.device
    return eqn.params.get("device") or current_default()


# ---------------------------------------------------------------- steps

def _nested_plans(step):
    """The plans a host step runs (loop bodies, branches)."""
    return getattr(step, "plans", ())


def indent(text, n=2):
    """`text` with every line indented by `n` spaces (nested plans in a printout)."""
    return "\n".join(" " * n + line for line in text.splitlines())


def _raw(value):
    return value._raw if isinstance(value, Array) else value


def device_of(aval):
    """The device of a value with this aval (unplaced values lie on the default device)."""
    return aval.device if aval.device is not None else current_default()


class Stretch:
    """A run of first-order primitives evaluated by the backend op by op.

    The run is written out as a straight-line Python function over the plan's
    slots (one backend call per primitive, no per-op dispatch), kept readable
    in `source`. Writing it costs more than running the ops once, so a
    stretch's first run calls the implementations in a loop and later runs
    use the function (an eager cond or custom rule runs its plan once). Used
    where the kernel compiler does not lower an op, and for every stretch when
    no C compiler is available.
    """
    profile_kind = "numpy"   # how rune.profile names this step

    def __init__(self, ops):
        self.eqns = [eqn for eqn, _, _ in ops]
        self.ops = ops
        self.impls = []
        for eqn, _, _ in ops:
            device = eqn_device(eqn)
            self.impls.append(backend_for(device).impls(device)[eqn.prim.name])
        self._run = None
        self._ran_once = False
        self._source = None

    @property
    def source(self):
        if self._source is None:
            lines = ["def run(env):"]
            for k, (eqn, ins, outs) in enumerate(self.ops):
                args = ", ".join(f"env[{i}]" for i in ins)
                if eqn.params:
                    args += f", **params_{k}"
                targets = ", ".join(f"env[{o}]" for o in outs)
                lines.append(f"    {targets}{',' if eqn.prim.multiple_results and len(outs) == 1 else ''} = "
                             f"{eqn.prim.name}_{k}({args})")
            self._source = "\n".join(lines)
        return self._source

    def _written(self):
        names = {}
        for k, ((eqn, _, _), impl) in enumerate(zip(self.ops, self.impls)):
            names[f"{eqn.prim.name}_{k}"] = impl
            names[f"params_{k}"] = eqn.params
        exec(compile(self.source, "<rune stretch>", "exec"), names)
        return names["run"]

    def run(self, env):
        COUNTERS["kernels_launched"] += 1
        self.execute(env)

    def execute(self, env):
        """The ops run on `env`, uncounted (a view step after compiled kernels)."""
        if self._run is not None:
            self._run(env)
            return
        if self._ran_once:
            self._run = self._written()
            self._run(env)
            return
        self._ran_once = True
        for (eqn, ins, outs), impl in zip(self.ops, self.impls):
            out = impl(*[env[i] for i in ins], **eqn.params)
            if eqn.prim.multiple_results:
                for o, r in zip(outs, out):
                    env[o] = r
            else:
                env[outs[0]] = out

    def describe(self):
        names = " ".join(e.prim.name for e in self.eqns)
        return f"stretch of {len(self.eqns)} ops: {names}\n{indent(self.source, 2)}"


class TransferStep:
    """`place` between devices: a counted copy by the backends."""
    profile_kind = "transfer"   # how rune.profile names this step

    def __init__(self, eqn, ins, outs):
        self.src, self.dst = eqn.params["src"], eqn.params["device"]
        self.ins, self.outs = ins, outs

    def run(self, env):
        env[self.outs[0]] = transfer(env[self.ins[0]], self.src, self.dst)

    def describe(self):
        return f"transfer {self.src} -> {self.dst}"


STEP_KINDS[P["place"]] = TransferStep


def program_plan(program):
    """The plan of `program`, built once and kept with it (for another target: afresh)."""
    if planning_target() is not None:  # a loop body of a plan for another device
        return Plan(program)
    plan = program._plan
    if plan is None:
        plan = program._plan = Plan(program)
        COUNTERS["compiles"] += 1
    return plan


def stack_rows(rows, aval):
    """A loop's per-row outputs stacked along a new leading axis on their device."""
    backend = backend_for(device_of(aval))
    return backend.stack(rows, aval) if rows else backend.empty(aval)


def run_program(program, args):
    """Evaluate `program` once on concrete Arrays through a plan: the one
    evaluator of eager higher-order primitives (an eager cond's branch, a
    custom rule's forward). Such a program was just staged and may never run
    again, so its plan is not kept and its stretches run op by op: compiling
    (or loading) kernels for one run costs more than it saves. A program whose
    plan is already built (a loop body, a branch kept between eager calls)
    runs that plan."""
    plan = program._plan or Plan(program, compiled=False)
    return _wrap(plan.run([_raw(a) for a in args]), plan.out_avals)


def call_program(program, args):
    """`program` applied to `args` wherever it is called: on concrete arrays
    through its plan (the one evaluator), under a transformation by binding
    its equations again (which transforms them)."""
    if current() is EVAL:
        return run_program(program, args)
    return program(*args)


def _wrap(raws, avals):
    return wrap_raws(raws, avals)
