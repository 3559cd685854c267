"""Forward mode: dual numbers on the interpreter stack.

A JVPTracer holds a primal (a value of the parent interpreter) and a tangent;
a tangent of None is a symbolic zero, so work on constants costs nothing.
Rules (`jvp_rules`, registered where each primitive is defined) are plain
`nx` code run in the parent interpreter.
"""
from ...core import trace as _trace
from ...core.primitive import jvp_rules
from ...core.staging import stage
from ...core.trace import Interpreter, PrimalTracer
from ...errors import NotDifferentiableError


class JVPTracer(PrimalTracer):
    __slots__ = ()
    tangent = property(lambda self: self.data)


class JVPInterpreter(Interpreter):
    def __init__(self):
        self.parent = _trace.current()

    def lift(self, x, tangent):
        return JVPTracer(self, x, tangent)

    def process(self, prim, args, params):
        primals, tangents = self.unpack(args)
        if all(t is None for t in tangents):
            return self.in_parent(_trace.bind, prim, *primals, **params)
        rule = jvp_rules.get(prim)
        if rule is None:
            raise NotDifferentiableError(f"{prim.name} has no forward-mode (JVP) rule")
        out, tangent = self.in_parent(rule, primals, tangents, **params)
        if prim.multiple_results:
            return [JVPTracer(self, o, t) if t is not None else o for o, t in zip(out, tangent)]
        return JVPTracer(self, out, tangent) if tangent is not None else out


def jvp_flat(f, primals, tangents):
    """Push `tangents` (None = zero) through the flat function `f`."""
    interp = JVPInterpreter()
    ins = [interp.lift(p, t) if t is not None else p for p, t in zip(primals, tangents)]
    with _trace.using(interp):
        outs = f(*ins)
    pairs = [interp.part(o) for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


def jvp_program(program, nonzero):
    """A program taking (primals..., tangents of the `nonzero` inputs...) and returning
    (outputs..., tangents of the outputs that can be nonzero), and that output mask.
    """
    n = len(program.invars)
    in_avals = program.in_avals
    tangent_avals = [a.strong() for a, nz in zip(in_avals, nonzero) if nz]
    out_mask = []

    def f(*args):
        primals, given = args[:n], iter(args[n:])
        tangents = [next(given) if nz else None for nz in nonzero]
        outs, touts = jvp_flat(lambda *xs: program(*xs), primals, tangents)
        out_mask.extend(t is not None for t in touts)
        return list(outs) + [t for t in touts if t is not None]

    prog = stage(f, in_avals + tangent_avals)
    return prog, out_mask
