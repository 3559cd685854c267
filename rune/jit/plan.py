"""Plans: how a Program is evaluated (DESIGN 2.4).

A plan is a list of steps over a flat environment of raw backend arrays:
`CompiledStretch` (a run of first-order primitives fused into C kernels: one
compiled call, rune/jit/lower.py), `Stretch` (a run the compiler does not
lower, run by the NumPy backend), `Callback`, `Loop` (scan / while, with a nested plan for
the body), `Branch` (cond) and `Transfer`. Calls to custom rules and
checkpoints are inlined: a plan evaluates only their forward computation.
Every stretch without a callback is one unit; the compiler splits it only
around primitives it does not lower.
"""
from ..core.primitive import calls
from ..core.program import Literal
from ..devices import current_default
from ..nx.array import Array
from ..stats import COUNTERS
from .target import planning_target

class Plan:
    """Built in passes: linearise the program (calls inlined) into stretches of
    first-order equations and host steps; find which slots each step reads and
    which leave the plan; lower every stretch (rune/jit/lower.py: compiled C
    kernels on the host where a compiler is available, NumPy otherwise)."""

    def __init__(self, program):
        self.program = program
        self.slots = 0
        self.constants = {}   # slot -> raw value
        self.avals = {}       # slot -> aval
        self.steps = []
        self._ops = []        # the stretch being filled
        consts = [self._new_const(_raw(c), v.aval) for c, v in zip(program.consts, program.constvars)]
        self.in_slots = [self._new(v.aval) for v in program.invars]
        self.out_slots = self._emit(program, consts + self.in_slots)
        self._close_stretch()
        self.steps = self._lower(self.steps)
        self.out_avals = program.out_avals
        self.template = [None] * self.slots
        for s, v in self.constants.items():
            self.template[s] = v

    def _new(self, aval):
        self.slots += 1
        self.avals[self.slots - 1] = aval
        return self.slots - 1

    def _new_const(self, value, aval):
        s = self._new(aval)
        self.constants[s] = value
        return s

    def _emit(self, program, in_slots):
        """Add `program`'s equations reading from `in_slots`; returns its output slots."""
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
                outs = self._emit(inner, ins)
                outs = outs if keep is None else outs[:keep]
            elif eqn.prim.name in STEP_KINDS:
                self._close_stretch()
                outs = [self._new(v.aval) for v in eqn.outputs]
                self.steps.append(STEP_KINDS[eqn.prim.name](eqn, ins, outs))
            else:
                outs = [self._new(v.aval) for v in eqn.outputs]
                self._ops.append((eqn, ins, outs))
            where.update(zip(eqn.outputs, outs))
        return [slot(a) for a in program.outvars]

    def _close_stretch(self):
        if self._ops:
            self.steps.append(_Ops(self._ops))
            self._ops = []

    def _lower(self, steps):
        """Each stretch of equations as compiled and NumPy steps, knowing what is read after it."""
        from .lower import lower
        reads = [set(s for _, ins, _ in st.ops for s in ins) if type(st) is _Ops else set(st.ins)
                 for st in steps]
        lowered = []
        for k, st in enumerate(steps):
            if type(st) is not _Ops:
                lowered.append(st)
                continue
            live = set(self.out_slots)
            for j, r in enumerate(reads):
                if j != k:
                    live |= r
            on_host = all(_device(eqn.outputs[0].aval).platform == "cpu" and
                          all(_device(a.aval).platform == "cpu" for a in eqn.inputs)
                          for eqn, _, _ in st.ops)
            lowered.extend(lower(st.ops, self.constants, live, self.avals, Stretch, on_host))
        return lowered

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
        env = list(self.template)
        for s, a in zip(self.in_slots, args):
            env[s] = a
        for step in self.steps:
            step.run(env)
        return [env[s] for s in self.out_slots]

    def __repr__(self):
        lines = [f"Plan: {len(self.in_slots)} inputs, {len(self.out_slots)} outputs, "
                 f"{len(self.steps)} steps"]
        for i, step in enumerate(self.steps):
            lines.append(_indent(f"[{i}] {step.describe()}", 2))
        return "\n".join(lines)


class _Ops:
    """A stretch while the plan is being built: its equations, not yet lowered."""

    def __init__(self, ops):
        self.ops = ops


def _nested_plans(step):
    for attr in ("body", "cond"):
        if isinstance(getattr(step, attr, None), Plan):
            yield getattr(step, attr)
    yield from getattr(step, "branches", ())


def _indent(text, n):
    return "\n".join(" " * n + line for line in text.splitlines())


def _raw(value):
    return value._raw if isinstance(value, Array) else value


def _device(aval):
    return aval.device if aval.device is not None else current_default()


def _impl(eqn):
    from ..backends import backend_for
    device = next((a.aval.device for a in eqn.inputs if a.aval.device is not None), None)
    return backend_for(device or current_default()).IMPLS[eqn.prim.name]


class Stretch:
    """A run of first-order primitives evaluated by the NumPy backend.

    The run is written out once as a straight-line Python function over the
    plan's slots (one backend call per primitive, no per-op dispatch), kept
    readable in `source`. Used where the kernel compiler does not lower an
    op, and for every stretch when no C compiler is available.
    """

    def __init__(self, ops):
        self.eqns = [eqn for eqn, _, _ in ops]
        names = {}
        lines = ["def run(env):"]
        for k, (eqn, ins, outs) in enumerate(ops):
            names[f"{eqn.prim.name}_{k}"] = _impl(eqn)
            args = ", ".join(f"env[{i}]" for i in ins)
            if eqn.params:
                names[f"params_{k}"] = eqn.params
                args += f", **params_{k}"
            targets = ", ".join(f"env[{o}]" for o in outs)
            lines.append(f"    {targets}{',' if eqn.prim.multiple_results and len(outs) == 1 else ''} = "
                         f"{eqn.prim.name}_{k}({args})")
        self.source = "\n".join(lines)
        exec(compile(self.source, "<rune stretch>", "exec"), names)
        self._run = names["run"]

    def run(self, env):
        COUNTERS["kernels_launched"] += 1
        self._run(env)

    def describe(self):
        names = " ".join(e.prim.name for e in self.eqns)
        return f"stretch of {len(self.eqns)} ops: {names}\n{_indent(self.source, 2)}"


class CallbackStep:
    def __init__(self, eqn, ins, outs):
        self.fn = eqn.params["fn"]
        self.in_devices = [_device(a.aval) for a in eqn.inputs]
        self.ins, self.outs = ins, outs

    def run(self, env):
        arrays = [Array(env[i], d) for i, d in zip(self.ins, self.in_devices)]
        for o, r in zip(self.outs, self.fn(arrays)):
            env[o] = r._raw

    def describe(self):
        return f"callback {self.fn.name} ({len(self.ins)} in, {len(self.outs)} out)"


class ScanStep:
    def __init__(self, eqn, ins, outs):
        p = eqn.params
        self.body = program_plan(p["body"])
        self.params = (p["num_consts"], p["num_carry"], p["length"], p["reverse"])
        self.out_avals = [v.aval for v in eqn.outputs]
        self.ins, self.outs = ins, outs

    def run(self, env):
        result = run_scan(self.body, [env[i] for i in self.ins], *self.params, self.out_avals)
        for o, r in zip(self.outs, result):
            env[o] = r

    def describe(self):
        nc, nk, length, reverse = self.params
        return (f"loop scan (length {length}{', reverse' if reverse else ''}, {nk} carries), "
                f"step:\n{_indent(repr(self.body), 2)}")


class WhileStep:
    def __init__(self, eqn, ins, outs):
        p = eqn.params
        self.cond, self.body = program_plan(p["cond"]), program_plan(p["body"])
        self.counts = (p["num_cond_consts"], p["num_body_consts"])
        self.ins, self.outs = ins, outs

    def run(self, env):
        result = run_while(self.cond, self.body, [env[i] for i in self.ins], *self.counts)
        for o, r in zip(self.outs, result):
            env[o] = r

    def describe(self):
        return (f"loop while, cond:\n{_indent(repr(self.cond), 2)}\n  body:\n"
                f"{_indent(repr(self.body), 2)}")


class BranchStep:
    def __init__(self, eqn, ins, outs):
        self.branches = [program_plan(b) for b in eqn.params["branches"]]
        self.read = _reader(eqn.inputs[0].aval)
        self.ins, self.outs = ins, outs

    def run(self, env):
        index = self.read(env[self.ins[0]])
        result = self.branches[index].run([env[i] for i in self.ins[1:]])
        for o, r in zip(self.outs, result):
            env[o] = r

    def describe(self):
        return "branch cond:\n" + "\n".join(_indent(f"branch {k}: {b!r}", 2)
                                            for k, b in enumerate(self.branches))


class TransferStep:
    def __init__(self, eqn, ins, outs):
        from ..devices import transfer
        self.transfer = transfer
        self.src, self.dst = eqn.params["src"], eqn.params["device"]
        self.ins, self.outs = ins, outs

    def run(self, env):
        env[self.outs[0]] = self.transfer(env[self.ins[0]], self.src, self.dst)

    def describe(self):
        return f"transfer {self.src} -> {self.dst}"


# The host steps, by primitive name (the primitives live in modules above this one).
STEP_KINDS = {"callback": CallbackStep, "scan": ScanStep, "while_loop": WhileStep,
              "cond": BranchStep, "place": TransferStep}


def program_plan(program):
    """The plan of `program`, built once and kept with it (for another target: afresh)."""
    if planning_target() is not None:  # a loop body of a plan for another device
        return Plan(program)
    plan = program._plan
    if plan is None:
        plan = program._plan = Plan(program)
        COUNTERS["compiles"] += 1
    return plan


def _reader(aval):
    """The counted device-to-host read of a value the host decides with (a loop
    predicate, a branch index), on the backend that holds it."""
    return _xp(aval).read_scalar


def _xp(aval):
    from ..backends import backend_for
    return backend_for(_device(aval))


def run_scan(body, args, num_consts, num_carry, length, reverse, out_avals):
    """Run a scan on raw arrays: the body plan once per row."""
    consts = args[:num_consts]
    carry = args[num_consts:num_consts + num_carry]
    xs = args[num_consts + num_carry:]
    n_ys = len(out_avals) - num_carry
    rows = [[] for _ in range(n_ys)]
    order = range(length - 1, -1, -1) if reverse else range(length)
    run = body.run
    for i in order:
        outs = run(consts + carry + [x[i, ...] for x in xs])  # rows of 1-d xs stay 0-d arrays
        carry = outs[:num_carry]
        for r, y in zip(rows, outs[num_carry:]):
            r.append(y)
    ys = []
    for r, aval in zip(rows, out_avals[num_carry:]):
        if reverse:
            r.reverse()
        ys.append(_xp(aval).stack(r, aval) if r else _xp(aval).empty(aval))
    return list(carry) + ys


def run_while(cond, body, args, num_cond_consts, num_body_consts):
    cc = args[:num_cond_consts]
    bc = args[num_cond_consts:num_cond_consts + num_body_consts]
    carry = args[num_cond_consts + num_body_consts:]
    read = _reader(cond.out_avals[0])
    while read(cond.run(cc + carry)[0]):
        carry = body.run(bc + carry)
    return carry


def _wrap(raws, avals):
    return [Array(r, _device(a), a.weak) for r, a in zip(raws, avals)]


def run_scan_arrays(body, args, num_consts, num_carry, length, reverse, out_avals):
    """Eager scan: the same plan as under jit, on concrete Arrays."""
    raws = run_scan(body, [_raw(a) for a in args], num_consts, num_carry, length, reverse, out_avals)
    return _wrap(raws, out_avals)
