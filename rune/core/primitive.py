"""Primitives and the rule tables keyed by them.

A primitive is a name and a few flags; everything it means lives in tables:
its abstract rule here, its eager implementations in the backends (keyed by
name, since backends know nothing of the core), and its JVP, VJP and batching
rules in tables here too, filled by the module that defines the primitive. A
primitive the compiler lowers declares how (`declare_lowering`: elementwise IR
op, movement, reduction, library call, ...) where it is defined; one that
declares nothing runs op by op.
"""
import enum


class Primitive:
    __slots__ = ("name", "multiple_results", "effectful", "impls", "lowering", "ir_op")

    def __init__(self, name, multiple_results=False, effectful=False):
        self.name = name
        self.multiple_results = multiple_results
        # An effectful primitive (a callback, or a loop whose body holds one)
        # is never removed or duplicated by an optimization.
        self.effectful = effectful
        self.impls = {}  # device name -> eager implementation on it, resolved on first use
        # How a compiler lowers it (`declare_lowering`); None: never lowered, it runs op by op.
        self.lowering = None
        self.ir_op = None     # its name in the kernel IR or the backends' library (declared with it)

    def __repr__(self):
        return self.name


# primitive -> fn(*avals, **params) -> aval (or list of avals)
abstract_rules = {}

# Primitives that only call a program on their operands (custom rules, checkpoints):
# primitive -> fn(params) -> (program, how many of its outputs the call returns, or
# None for all). Plans inline them; their other rules say what the call means to
# each transformation.
calls = {}

# Higher-order primitives evaluate themselves on concrete arrays (their bodies are
# programs): primitive -> fn(*arrays, **params). Backends never see these.
eval_rules = {}

# The transformations' rule tables. They live here, below nx, so that the module
# defining a primitive (an nx family module, rune.transforms.control, ...) registers all of
# its rules; the interpreters (rune.transforms.autodiff, rune.transforms.batching) only read them.
# primitive -> fn(primals, tangents, **params) -> (primal_out, tangent_out);
# tangents may be None (zero). Multiple-result primitives return lists.
jvp_rules = {}
# primitive -> fn(ct, ins, out, wants, **params) -> cotangent per input (None =
# zero); `wants` marks the inputs whose cotangents are needed, so rules skip the
# rest. Multiple-result primitives get and return lists.
vjp_rules = {}
# Primitives whose outputs carry no derivative at all (stop_gradient, floor, ...):
# their results are constants to the tape, so no cotangent ever reaches what
# consumes them, and they need no VJP rule.
no_derivative = set()
# primitive -> fn(values, batch_axes, size, **params) -> (outputs, output batch axes)
batch_rules = {}


def primitive(name, multiple_results=False, effectful=False):
    return Primitive(name, multiple_results, effectful)


class Lowering(enum.Enum):
    """How a primitive lowers into fused kernels (rune/compiler/fuse.py)."""
    ELEMENTWISE = "elementwise"   # one kernel IR node per point, fused with its neighbours
    MOVEMENT = "movement"         # index arithmetic on later loads (a view), no compute
    REDUCE = "reduce"             # a kernel with an inner loop over the reduced axes
    LIBRARY = "library"           # a call to the backend's library (BLAS), a step of its own
    SCATTER = "scatter"           # a copy of the operand updated in a kernel of its own
    INDEXED = "indexed"           # loads at runtime indices, or values of the point's index


def declare_lowering(prim, kind, op=None):
    """Declare how `prim` lowers (a `Lowering`). `op` (default: its name) is what the
    layers below call it: the kernel IR op an elementwise primitive or a reduction
    becomes, the backend's library entry a library call runs. Whether a target can
    render that op for given dtypes is the target's renderer's to say."""
    prim.lowering = Lowering(kind)
    prim.ir_op = op or prim.name
    return prim


def is_effectful(prim, params):
    """Whether an equation must be kept and run exactly once, in order."""
    if prim.effectful:
        return True
    for value in params.values():
        for v in value if isinstance(value, tuple) else (value,):  # cond keeps a tuple of branches
            if getattr(v, "effectful", False):   # a nested Program with effects
                return True
    return False
