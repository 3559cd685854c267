"""Programs: the staged form of a function.

A program has input variables, captured constants (constvars with their
values), equations (primitive, input atoms, output vars, params) and output
atoms. Evaluating a program re-binds its equations, so evaluating it under an
interpreter transforms it.
"""
import itertools

from .aval import Aval
from .primitive import is_effectful
from .trace import bind


class Var:
    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval


class Literal:
    """A scalar constant written into an equation (a weak Python scalar)."""
    __slots__ = ("value", "aval")

    def __init__(self, value):
        self.value = value
        self.aval = Aval((), value.dtype, None, True)


class Eqn:
    __slots__ = ("prim", "inputs", "outputs", "params", "effectful")

    def __init__(self, prim, inputs, outputs, params):
        self.prim = prim
        self.inputs = inputs
        self.outputs = outputs
        self.params = params
        self.effectful = is_effectful(prim, params)


class Program:
    # weakly referable: the compiler keeps a program's plans by its identity, not on it
    __slots__ = ("invars", "outvars", "eqns", "constvars", "consts", "effectful", "__weakref__")

    def __init__(self, invars, outvars, eqns, constvars=(), consts=()):
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)
        self.constvars = list(constvars)
        self.consts = list(consts)
        self.effectful = any(e.effectful for e in self.eqns)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def closed(self):
        """This program with its constants turned into leading inputs, and those constants."""
        if not self.constvars:
            return self, []
        return Program(self.constvars + self.invars, self.outvars, self.eqns), list(self.consts)

    def __call__(self, *args):
        return eval_program(self, list(self.consts) + list(args))

    def __repr__(self):
        return render(self)


def eval_program(program, args):
    """Bind every equation of `program` on `args` (constants first, then inputs)."""
    env = {}
    for v, a in zip(program.constvars + program.invars, args):
        env[v] = a

    def read(atom):
        return atom.value if type(atom) is Literal else env[atom]

    for eqn in program.eqns:
        outs = bind(eqn.prim, *[read(a) for a in eqn.inputs], **eqn.params)
        if eqn.prim.multiple_results:
            for v, o in zip(eqn.outputs, outs):
                env[v] = o
        else:
            env[eqn.outputs[0]] = outs
    return [read(a) for a in program.outvars]


def reorder(program, in_order=None, out_order=None):
    """The same program with its inputs/outputs permuted (lists of old positions)."""
    invars = program.invars if in_order is None else [program.invars[i] for i in in_order]
    outvars = program.outvars if out_order is None else [program.outvars[i] for i in out_order]
    return Program(invars, outvars, program.eqns, program.constvars, program.consts)


# primitive -> fn(eqn, used_outputs) -> eqn: a higher-order primitive's dead-code
# rule, next to the primitive. It returns the equation with its bodies pruned
# (and the outputs and operands they no longer need dropped), effects kept.
# Without a rule an equation is kept whole.
dce_rules = {}


def dce(program, used=None):
    """Drop equations whose results are unused, inside loop and branch bodies
    too; effectful ones always stay. `used` marks the outputs to keep (all by
    default); the inputs stay as they are."""
    return _dce(program, used)[0]


def prune(program, used, keep_inputs):
    """`program` with only the outputs `used` marks and the inputs it still
    reads (or `keep_inputs` marks); returns (program, which inputs it kept)."""
    pruned, live = _dce(program, used)
    kept = [k or v in live for v, k in zip(program.invars, keep_inputs)]
    invars = [v for v, k in zip(program.invars, kept) if k]
    return Program(invars, pruned.outvars, pruned.eqns, pruned.constvars, pruned.consts), kept


def _dce(program, used):
    used = [True] * len(program.outvars) if used is None else used
    live = {v for v, u in zip(program.outvars, used) if u and type(v) is Var}
    kept = []
    for eqn in reversed(program.eqns):
        outs_used = [o in live for o in eqn.outputs]
        if eqn.effectful or any(outs_used):
            rule = dce_rules.get(eqn.prim)
            if rule is not None:
                eqn = rule(eqn, outs_used)
            kept.append(eqn)
            live.update(a for a in eqn.inputs if type(a) is Var)
    kept.reverse()
    outs = [v for v, u in zip(program.outvars, used) if u]
    return Program(program.invars, outs, kept, program.constvars, program.consts), live


# ---------------------------------------------------------------- printing

def render(program, indent=0):
    names = _Names()
    pad = " " * indent
    consts = " ".join(f"{names(v)}:{v.aval}" for v in program.constvars)
    ins = " ".join(f"{names(v)}:{v.aval}" for v in program.invars)
    head = f"{{ lambda {consts} ; {ins} ." if consts else f"{{ lambda {ins} ."
    lines = [pad + head]
    for eqn in program.eqns:
        outs = " ".join(f"{names(v)}:{v.aval}" for v in eqn.outputs) or "_"
        args = " ".join(_atom(names, a) for a in eqn.inputs)
        params = _params(eqn.params, indent + 4)
        lines.append(f"{pad}    {outs} = {eqn.prim.name}{params} {args}".rstrip())
    lines.append(f"{pad}  in ({', '.join(_atom(names, a) for a in program.outvars)}) }}")
    return "\n".join(lines)


def _atom(names, a):
    return repr(a.value.item()) if type(a) is Literal else names(a)


def _params(params, indent):
    if not params:
        return ""
    parts = []
    for k, v in params.items():
        if isinstance(v, Program):
            parts.append(f"{k}=\n{render(v, indent + 2)}\n{' ' * indent}")
        elif callable(v) and not isinstance(v, type):
            parts.append(f"{k}={getattr(v, '__name__', None) or repr(v)}")
        else:
            parts.append(f"{k}={v}")
    return "[" + ", ".join(parts) + "]"


class _Names:
    def __init__(self):
        self.names = {}
        self.counter = itertools.count()

    def __call__(self, v):
        if v not in self.names:
            self.names[v] = _name(next(self.counter))
        return self.names[v]


def _name(i):
    letters = "abcdefghijklmnopqrstuvwxyz"
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = letters[r] + s
    return s
