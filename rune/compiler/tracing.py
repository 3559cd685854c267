"""`rune.trace`: the Program a function of pytrees stages, without running it
(as JAX's make_jaxpr). Staging itself is core's (rune/core/staging.py).
"""
from .. import tree
from ..core.staging import abstract, stage_pytree


def stage_tree(f, args, kwargs=None):
    """Stage `f(*args, **kwargs)` at the avals of the pytree `args`.

    Returns (program, out_structure): the program takes the flat leaves of
    `(args, kwargs)` and returns the flat leaves of the result.
    """
    leaves, in_struct = tree.flatten((args, kwargs or {}))
    return stage_pytree(lambda a, k: f(*a, **k), [abstract(x) for x in leaves], in_struct)


def trace(f):
    """`trace(f)(*args)` returns the Program `f` stages at the avals of `args` (like make_jaxpr)."""
    def traced(*args, **kwargs):
        program, _ = stage_tree(f, args, kwargs)
        return program
    return traced
