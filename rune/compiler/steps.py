"""The plan steps the planner makes itself: NumPy stretches and transfers.

Each follows the step protocol written down in rune/compiler/plan.py. `Op` is
the record a plan's first pass makes of one equation: the equation and the
slots it reads and writes; it unpacks as `(eqn, ins, outs)`.
"""
from typing import NamedTuple

from ..backends import backend_for
from ..core.program import Eqn
from ..core.devices import transfer
from ..base.stats import COUNTERS


class Op(NamedTuple):
    """One equation of a plan over slots."""
    eqn: Eqn
    ins: list    # the slots it reads, one per input
    outs: list   # the slots it writes, one per output


def indent(text, n=2):
    """`text` with every line indented by `n` spaces (nested plans in a printout)."""
    return "\n".join(" " * n + line for line in text.splitlines())


def eqn_device(eqn, default):
    """Where a first-order equation runs: its operands' device, else the device
    it makes a constant on, else `default` (the device unplaced values lie on,
    as eager evaluation decides)."""
    for a in eqn.inputs:
        if a.aval.device is not None:
            return a.aval.device
    return eqn.params.get("device") or default


def device_of(aval, default):
    """The device of a value with this aval (unplaced values lie on `default`)."""
    return aval.device if aval.device is not None else default


def _reads_of(ops):
    """The slots `ops` read that they do not make first, in order."""
    made, reads = set(), {}
    for _, ins, outs in ops:
        for s in ins:
            if s not in made:
                reads[s] = None
        made.update(outs)
    return tuple(reads)


class Stretch:
    """A run of first-order primitives on `device` evaluated by its backend op by op.

    The run is written out as a straight-line Python function over the plan's
    slots (one backend call per primitive, no per-op dispatch), kept readable
    in `source`. Writing it costs more than running the ops once, so a
    stretch's first run calls the implementations in a loop and later runs
    use the function (an eager cond or custom rule runs its plan once). Used
    where the kernel compiler does not lower an op, and for every stretch when
    no C compiler is available.
    """
    profile_kind = "numpy"   # how rune.profile names this step
    kernels = ()
    plans = ()
    takes_donations = False

    def __init__(self, ops, device):
        self.eqns = [eqn for eqn, _, _ in ops]
        self.ops = ops
        self.device = device
        impls = backend_for(device).impls(device)
        self.impls = [impls[eqn.prim.name] for eqn in self.eqns]
        self._run = None
        self._ran_once = False
        self._source = None

    def reads(self):
        return _reads_of(self.ops)

    def writes(self):
        return tuple(s for _, _, outs in self.ops for s in outs)

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
    kernels = ()
    plans = ()
    takes_donations = False

    def __init__(self, op, planning):
        eqn = op.eqn
        self.src, self.dst = eqn.params["src"], eqn.params["device"]
        self.ins, self.outs = tuple(op.ins), tuple(op.outs)

    def reads(self):
        return self.ins

    def writes(self):
        return self.outs

    def run(self, env):
        env[self.outs[0]] = transfer(env[self.ins[0]], self.src, self.dst)

    def describe(self):
        return f"transfer {self.src} -> {self.dst}"
