"""Primitives and the rule tables keyed by them.

A primitive is a name and a few flags; everything it means lives in tables:
its abstract rule here, its eager implementations in the backends (keyed by
name, since backends know nothing of the core), and its JVP, VJP and batching
rules next to the transformations.
"""


class Primitive:
    __slots__ = ("name", "multiple_results", "effectful", "impls")

    def __init__(self, name, multiple_results=False, effectful=False):
        self.name = name
        self.multiple_results = multiple_results
        # An effectful primitive (a callback, or a loop whose body holds one)
        # is never removed or duplicated by an optimization.
        self.effectful = effectful
        self.impls = {}  # device name -> eager implementation on it, resolved on first use

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

def primitive(name, multiple_results=False, effectful=False):
    return Primitive(name, multiple_results, effectful)


def is_effectful(prim, params):
    """Whether an equation must be kept and run exactly once, in order."""
    if prim.effectful:
        return True
    for value in params.values():
        for v in value if isinstance(value, tuple) else (value,):  # cond keeps a tuple of branches
            if getattr(v, "effectful", False):   # a nested Program with effects
                return True
    return False
