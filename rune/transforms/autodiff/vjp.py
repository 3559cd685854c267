"""Reverse mode: a tape of primitive applications, walked backwards.

A VJPTracer holds a primal (a value of the parent interpreter) and its slot on
the tape. The backward pass calls each node's rule (`vjp_rules`, registered
where each primitive is defined) — ordinary `nx` code, so it
runs (and is itself differentiated, staged or batched) in whatever interpreter
is current when the pullback is called.
"""
from ...core import trace as _trace
from ...core.closure import split_residuals
from ...core.primitive import no_derivative, vjp_rules
from ...core.staging import StagingInterpreter
from ...core.trace import Interpreter, PrimalTracer
from ...errors import NotDifferentiableError
from ...nx import ops

# Higher-order primitives change their forward pass to emit residuals:
# primitive -> (fwd(primals, tracked, **params) -> (outs, res),
#               bwd(cts, res, tracked, **params) -> cotangent per input)
vjp_forward = {}


def differentiable(aval):
    return aval.dtype.kind in "fc" or aval.dtype.name == "bfloat16"


class VJPTracer(PrimalTracer):
    __slots__ = ()
    slot = property(lambda self: self.data)


class Node:
    __slots__ = ("prim", "params", "in_slots", "ins", "outs", "out_slots", "res")

    def __init__(self, prim, params, in_slots, ins, outs, out_slots, res):
        self.prim, self.params, self.in_slots, self.ins = prim, params, in_slots, ins
        self.outs, self.out_slots, self.res = outs, out_slots, res


class VJPInterpreter(Interpreter):
    def __init__(self):
        self.parent = _trace.current()
        self.tape = []
        self.slots = 0

    def new_input(self, primal):
        self.slots += 1
        return VJPTracer(self, primal, self.slots)

    def process(self, prim, args, params):
        ins, in_slots = self.unpack(args)
        if prim in no_derivative or all(s is None for s in in_slots):
            return self.in_parent(_trace.bind, prim, *ins, **params)
        forward = vjp_forward.get(prim)
        if forward is not None:
            tracked = [s is not None for s in in_slots]
            outs, res = self.in_parent(forward[0], ins, tracked, **params)
        else:
            if prim not in vjp_rules:
                raise NotDifferentiableError(f"{prim.name} has no reverse-mode (VJP) rule")
            outs, res = self.in_parent(_trace.bind, prim, *ins, **params), None
        many = prim.multiple_results
        out_list = outs if many else [outs]
        out_slots, wrapped = [], []
        for o in out_list:
            if differentiable(o.aval if hasattr(o, "aval") else _trace.aval_of(o)):
                self.slots += 1
                out_slots.append(self.slots)
                wrapped.append(VJPTracer(self, o, self.slots))
            else:
                out_slots.append(None)
                wrapped.append(o)
        self.tape.append(Node(prim, params, in_slots, ins, outs, out_slots, res))
        return wrapped if many else wrapped[0]

    def backward(self, out_slots, cts, in_slots):
        """Cotangents of the tape inputs `in_slots` given `cts` of `out_slots`."""
        acc = {}
        for s, ct in zip(out_slots, cts):
            if s is not None and ct is not None:
                acc[s] = ct if s not in acc else ops.add(acc[s], ct)
        for node in reversed(self.tape):
            node_cts = [acc.pop(s, None) if s is not None else None for s in node.out_slots]
            if all(c is None for c in node_cts):
                continue
            forward = vjp_forward.get(node.prim)
            if forward is not None:
                tracked = [s is not None for s in node.in_slots]
                in_cts = forward[1](node_cts, node.res, tracked, **node.params)
            else:
                wants = [s is not None for s in node.in_slots]
                ct = node_cts if node.prim.multiple_results else node_cts[0]
                in_cts = vjp_rules[node.prim](ct, node.ins, node.outs, wants, **node.params)
            for s, c in zip(node.in_slots, in_cts):
                if s is not None and c is not None:
                    acc[s] = c if s not in acc else ops.add(acc[s], c)
        return [acc.get(s) for s in in_slots]


def vjp_flat(f, primals, tracked):
    """Run flat `f` recording a tape; returns (outs, pullback(cts) -> in cts or None)."""
    interp = VJPInterpreter()
    ins = [interp.new_input(p) if t else p for p, t in zip(primals, tracked)]
    in_slots = [x.slot if t else None for x, t in zip(ins, tracked)]
    with _trace.using(interp):
        outs = f(*ins)
    pairs = [interp.part(o) for o in outs]
    out_slots = [s for _, s in pairs]

    def pullback(cts):
        return interp.backward(out_slots, cts, in_slots)

    return [p for p, _ in pairs], pullback, out_slots


def vjp_program(program, tracked):
    """Split `program` into a forward program and a backward program (docs/design.md, "Reverse mode").

    forward: inputs -> outputs + residuals.
    backward: residuals + one cotangent per output -> one cotangent per
    tracked input (zeros where nothing flowed).
    Returns (forward, backward, number of residuals, which outputs are tracked).
    The forward pass is staged under a tape; the backward pass is staged from
    the tape, and the forward values it reads are captured: those are the
    residuals.
    """
    from ...nx import creation
    fwd = StagingInterpreter()
    args = [fwd.new_input(a) for a in program.in_avals]
    with _trace.using(fwd):
        outs, pullback, out_slots = vjp_flat(lambda *xs: program(*xs), args, tracked)
    out_avals = [fwd.atom(o).aval for o in outs]

    bwd = StagingInterpreter()
    cts = [bwd.new_input(a.strong()) for a in out_avals]
    with _trace.using(bwd):
        in_cts = pullback(cts)
        in_cts = [c if c is not None else creation.zeros_like(a)
                  for c, a, t in zip(in_cts, program.in_avals, tracked) if t]
    bwd_program, res_values = split_residuals(bwd.build(in_cts))
    out_tracked = [s is not None for s in out_slots]
    fwd_program = fwd.build(list(outs) + res_values)
    return fwd_program, bwd_program, len(res_values), out_tracked
