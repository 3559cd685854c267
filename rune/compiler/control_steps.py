"""Plan steps of the higher-order primitives: loops, branches and callbacks.

`STEP_KINDS` maps each primitive a plan runs on the host between stretches to
its step class, `cls(op, planning)`: `op` is the equation over slots
(rune/compiler/steps.py), `planning` the plan's inputs (`planning.plan(program)`
gives a body's plan for the same target and device, from the compiler's cache;
`planning.device` is where unplaced values lie). Every step follows the step
protocol of rune/compiler/plan.py.

`ScanLoop` and `WhileLoop` run a loop on raw arrays over the body's plans; the
steps here and eager evaluation (rune/compiler/eager.py) share them. A body of
NumPy stretches only is written, from the loop's second run, as one Python
function (rune/compiler/straight.py).
"""
from ..backends import backend_for
from ..transforms.callback import callback_p
from ..transforms.control import cond_p, scan_p, while_p
from ..core.prims import P
from ..nx.buffers import Array
from ..base.profiler import _OPEN as _PROFILES_OPEN  # never rebound: read without a call
from ..base.stats import COUNTERS
from .steps import TransferStep, device_of, indent
from .straight import straight_lines

_WRITE_NEXT = ""  # a loop run once whose body can be written (falsy: not written yet)


def stack_rows(rows, aval, default):
    """A loop's per-row outputs stacked along a new leading axis on their device."""
    device = device_of(aval, default)
    backend = backend_for(device)
    return backend.stack(rows, aval) if rows else backend.empty(aval)


class ScanLoop:
    """A scan on raw arrays: the body's plan once per row (eagerly and in plans);
    unplaced ys are stacked on `device`.

    A body of NumPy stretches only is written, from the loop's second run, as
    one Python function over the rows (as `WhileLoop` writes a while loop)."""

    def __init__(self, body, num_consts, num_carry, device):
        self.body, self.nc, self.nk, self.device = body, num_consts, num_carry, device
        self.written = None  # None: not run yet; False: cannot be written; else the function

    def run(self, args, length, reverse, out_avals):
        nc, nk = self.nc, self.nk
        consts, carry, xs = args[:nc], args[nc:nc + nk], args[nc + nk:]
        order = range(length - 1, -1, -1) if reverse else range(length)
        written = self.written
        if written and not _PROFILES_OPEN:
            carry, rows = written(consts, carry, xs, order)
        else:
            if written is None:
                self.written = _WRITE_NEXT if self.body.straight else False
            elif written is _WRITE_NEXT:
                self.written = self._write(len(xs), len(out_avals) - nk)
            rows = [[] for _ in range(len(out_avals) - nk)]
            run = self.body.run
            for i in order:
                outs = run(consts + carry + [x[i, ...] for x in xs])  # rows of 1-d xs stay 0-d arrays
                carry = outs[:nk]
                for r, y in zip(rows, outs[nk:]):
                    r.append(y)
        if reverse:
            for r in rows:
                r.reverse()
        return list(carry) + [stack_rows(r, aval, self.device) for r, aval in zip(rows, out_avals[nk:])]

    def _write(self, nxs, nys):
        names = {"COUNTERS": COUNTERS}
        cs, ks, xs = ([f"{p}{k}" for k in range(n)] for p, n in (("c", self.nc), ("k", self.nk), ("x", nxs)))
        rows = [f"r{k}" for k in range(nxs)]
        step, new = straight_lines(self.body, cs + ks + rows, "B", names, scalars=True)
        lines = ["def loop(consts, carry, xs, order):"]
        lines += [f"    {', '.join(v)}, = {a}" for v, a in ((cs, "consts"), (ks, "carry"), (xs, "xs")) if v]
        lines += [f"    ys{k} = []" for k in range(nys)]
        lines += ["    for i in order:"] + [f"        {r} = {x}[i, ...]" for r, x in zip(rows, xs)]
        lines += ["        " + line for line in step]
        lines += [f"        ys{k}.append({y})" for k, y in enumerate(new[self.nk:])]  # before the carry moves on
        if ks:
            lines.append(f"        {', '.join(ks)}, = {', '.join(new[:self.nk])},")
        lines.append(f"    COUNTERS['kernels_launched'] += {len(self.body.steps)} * len(order)")
        lines.append(f"    return [{''.join(k + ', ' for k in ks)}], [{''.join(f'ys{k}, ' for k in range(nys))}]")
        exec(compile("\n".join(lines), "<rune scan>", "exec"), names)
        return names["loop"]


class WhileLoop:
    """A while loop of a cond plan and a body plan on raw arrays; the predicate
    (on `where`) is read back, counted, once per test.

    Plans of NumPy stretches only are written, from the loop's second run, as
    one Python function `loop(cond_consts, body_consts, carry, read)`: each test
    and step a few lines over local variables instead of two plan runs (writing
    costs more than a short loop run once). Not while a profile is open: it
    times each step."""

    def __init__(self, cond, body, num_cond_consts, num_body_consts, where):
        self.cond, self.body = cond, body
        self.ncc, self.nbc = num_cond_consts, num_body_consts
        self.read = backend_for(where).read_scalar
        self.written = None  # None: not run yet; False: cannot be written; else the function

    def run(self, args):
        ncc, nbc = self.ncc, self.nbc
        cc, bc, carry = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
        written = self.written
        if written and not _PROFILES_OPEN:
            return written(cc, bc, carry, self.read)
        if written is None:
            self.written = _WRITE_NEXT if carry and self.cond.straight and self.body.straight else False
        elif written is _WRITE_NEXT:
            self.written = self._write(len(carry))
        cond, body, read = self.cond.run, self.body.run, self.read
        while read(cond(cc + carry)[0]):
            carry = body(bc + carry)
        return carry

    def _write(self, ncarry):
        names = {"COUNTERS": COUNTERS}
        cc, bc, xs = ([f"{p}{k}" for k in range(n)] for p, n in (("c", self.ncc), ("b", self.nbc), ("x", ncarry)))
        test, (pred,) = straight_lines(self.cond, cc + xs, "C", names, read_only=True, scalars=True)
        step, new = straight_lines(self.body, bc + xs, "B", names, scalars=True)
        lines = ["def loop(cc, bc, carry, read):"]
        lines += [f"    {', '.join(v)}, = {a}" for v, a in ((cc, "cc"), (bc, "bc"), (xs, "carry")) if v]
        lines += ["    steps = 0", "    try:", "        while True:"] + ["            " + line for line in test]
        lines += [f"            if not read({pred}):", "                break"]
        lines += ["            " + line for line in step]
        lines += [f"            {', '.join(xs)}, = {', '.join(new)},", "            steps += 1"]
        lines += ["    finally:  # the stretches run, counted once",
                  f"        COUNTERS['kernels_launched'] += {len(self.cond.steps)} * (steps + 1) + "
                  f"{len(self.body.steps)} * steps"]
        lines += [f"    return [{', '.join(xs)}]"]
        exec(compile("\n".join(lines), "<rune while>", "exec"), names)
        return names["loop"]


class _HostStep:
    """What the host steps share: the slots read and written, no kernels of their
    own, no donated buffers."""
    kernels = ()
    plans = ()
    takes_donations = False

    def __init__(self, op):
        self.ins, self.outs = tuple(op.ins), tuple(op.outs)

    def reads(self):
        return self.ins

    def writes(self):
        return self.outs


class ScanStep(_HostStep):
    """A scan in a plan: a host loop over rows running the body's plan."""
    profile_kind = "scan"   # how rune.profile names this step

    def __init__(self, op, planning):
        super().__init__(op)
        p = op.eqn.params
        self.body = planning.plan(p["body"])
        self.plans = (self.body,)
        self.params = (p["num_consts"], p["num_carry"], p["length"], p["reverse"])
        self.loop = ScanLoop(self.body, p["num_consts"], p["num_carry"], planning.device)
        self.out_avals = [v.aval for v in op.eqn.outputs]

    def run(self, env):
        _, _, length, reverse = self.params
        for o, r in zip(self.outs, self.loop.run([env[i] for i in self.ins], length, reverse, self.out_avals)):
            env[o] = r

    def describe(self):
        nc, nk, length, reverse = self.params
        return (f"loop scan (length {length}{', reverse' if reverse else ''}, {nk} carries), "
                f"step:\n{indent(repr(self.body))}")


class WhileStep(_HostStep):
    """A while loop in a plan: the cond and body plans, run on the host."""
    profile_kind = "while"   # how rune.profile names this step

    def __init__(self, op, planning):
        super().__init__(op)
        p = op.eqn.params
        self.cond, self.body = planning.plan(p["cond"]), planning.plan(p["body"])
        self.plans = (self.cond, self.body)
        self.loop = WhileLoop(self.cond, self.body, p["num_cond_consts"], p["num_body_consts"],
                              device_of(p["cond"].out_avals[0], planning.device))

    def run(self, env):
        for o, r in zip(self.outs, self.loop.run([env[i] for i in self.ins])):
            env[o] = r

    def describe(self):
        return (f"loop while, cond:\n{indent(repr(self.cond))}\n  body:\n"
                f"{indent(repr(self.body))}")


class BranchStep(_HostStep):
    """A cond in a plan: the index read back (counted), then that branch's plan."""
    profile_kind = "cond"   # how rune.profile names this step

    def __init__(self, op, planning):
        super().__init__(op)
        self.branches = self.plans = tuple(planning.plan(b) for b in op.eqn.params["branches"])
        self.read = backend_for(device_of(op.eqn.inputs[0].aval, planning.device)).read_scalar

    def run(self, env):
        index = self.read(env[self.ins[0]])
        for o, r in zip(self.outs, self.branches[index].run([env[i] for i in self.ins[1:]])):
            env[o] = r

    def describe(self):
        return "branch cond:\n" + "\n".join(indent(f"branch {k}: {b!r}")
                                            for k, b in enumerate(self.branches))


class CallbackStep(_HostStep):
    """A callback in a plan: its operands as Arrays on their devices, its results back as raws."""
    profile_kind = "callback"   # how rune.profile names this step

    def __init__(self, op, planning):
        super().__init__(op)
        self.fn = op.eqn.params["fn"]
        self.in_devices = [device_of(a.aval, planning.device) for a in op.eqn.inputs]

    def run(self, env):
        arrays = [Array(env[i], d) for i, d in zip(self.ins, self.in_devices)]
        for o, r in zip(self.outs, self.fn(arrays)):
            env[o] = r._raw

    def describe(self):
        return f"callback {self.fn.name} ({len(self.ins)} in, {len(self.outs)} out)"


# primitive -> the step class a plan runs it with (on the host, between stretches).
STEP_KINDS = {
    scan_p: ScanStep,
    while_p: WhileStep,
    cond_p: BranchStep,
    callback_p: CallbackStep,
    P["place"]: TransferStep,
}
