"""Staging: record a function's primitives into a Program.

Any value the staging interpreter meets that is not its own tracer (a concrete
array, another interpreter's tracer) is captured as a constant of the program
and reported, so a caller can pass it explicitly (closure conversion: this is
how a scan step's closed-over weights become operands that `grad` reaches).

User values (Python numbers a function returns, example arguments) become
arrays through `nx.asarray`, which nx registers with core
(`arraylike.register_functions`): core imports nothing above it. `rune.trace`,
staging a user's function of pytrees, is the compiler's (rune/compiler/tracing.py).
"""
import numpy as np

from .. import tree
from . import arraylike as _arraylike
from .aval import Aval
from .primitive import abstract_rules
from .program import Eqn, Literal, Program, Var
from .trace import Interpreter, Tracer, aval_of, current, using


class StagedTracer(Tracer):
    __slots__ = ("var",)

    def __init__(self, interp, var):
        self.interp = interp
        self.aval = var.aval
        self.var = var


class StagingInterpreter(Interpreter):
    def __init__(self):
        self.parent = current()
        self.invars = []
        self.eqns = []
        self.constvars = []
        self.consts = []
        self._captured = {}  # id(value) -> Var

    def new_input(self, aval):
        var = Var(aval)
        self.invars.append(var)
        return StagedTracer(self, var)

    def atom(self, x):
        if isinstance(x, StagedTracer) and x.interp is self:
            return x.var
        if isinstance(x, np.generic):
            return Literal(x)
        var = self._captured.get(id(x))
        if var is None:
            aval = aval_of(x)
            var = Var(aval)
            self._captured[id(x)] = var
            self.constvars.append(var)
            self.consts.append(x)  # keeps x alive, so its id stays unique
        return var

    def process(self, prim, args, params):
        inputs = [self.atom(a) for a in args]
        out = abstract_rules[prim](*[a.aval for a in inputs], **params)
        if prim.multiple_results:
            outvars = [Var(a) for a in out]
            self.eqns.append(Eqn(prim, inputs, outvars, params))
            return [StagedTracer(self, v) for v in outvars]
        var = Var(out)
        self.eqns.append(Eqn(prim, inputs, [var], params))
        return StagedTracer(self, var)

    def build(self, outs):
        outvars = [self.atom(o) if not isinstance(o, (int, float, bool)) else
                   self.atom(_as_array(o)) for o in outs]
        return Program(self.invars, outvars, self.eqns, self.constvars, self.consts)


def _as_array(x):
    return _arraylike.ops.asarray(x)


def stage(f, in_avals):
    """Stage `f` on flat inputs of `in_avals`; returns the Program.

    `f` takes and returns flat lists. The program's constants are the outer
    values `f` captured.
    """
    interp, outs = _stage_open(f, in_avals)
    return interp.build(outs)


def _stage_open(f, in_avals):
    interp = StagingInterpreter()
    args = [interp.new_input(a) for a in in_avals]
    with using(interp):
        outs = f(*args)
    return interp, outs


def stage_pytree(f, in_avals, in_struct=None, flatten=tree.flatten):
    """Stage a function of pytrees: `f(*tree.unflatten(in_struct, xs))` (or
    `f(*xs)` without `in_struct`) on flat inputs `xs` of `in_avals`.

    Returns (program, the result's structure); the program returns the result's
    leaves as `flatten` (which returns (leaves, structure), and runs while
    staging, so it may check or convert them) lists them.
    """
    interp, leaves, structure = stage_pytree_open(f, in_avals, in_struct, flatten)
    return interp.build(leaves), structure


def stage_pytree_open(f, in_avals, in_struct=None, flatten=tree.flatten):
    """`stage_pytree` that leaves the staging open: returns (the staging
    interpreter, the result's leaves, its structure). `interpreter.build(leaves)`
    makes the program; more can be staged into it first (a custom rule's
    pullback, whose residuals are the forward values it reads)."""
    structure = []

    def flat_f(*xs):
        out_leaves, s = flatten(f(*(xs if in_struct is None else tree.unflatten(in_struct, xs))))
        structure.append(s)
        return out_leaves

    interp, leaves = _stage_open(flat_f, in_avals)
    return interp, leaves, structure[0]


def abstract(x):
    """The aval a staged input takes for example value `x`."""
    if isinstance(x, Aval):
        return x
    if isinstance(x, (bool, int, float)):
        return _arraylike.ops.asarray(x).aval.update(weak=True)
    spec = getattr(x, "aval", None)
    if spec is None:
        return _arraylike.ops.asarray(x).aval
    return spec
