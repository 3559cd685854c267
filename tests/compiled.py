"""Checks that jit really compiled: shared by the op-table and compiler tests."""
from rune.jit import fuse
from rune.jit.plan import Plan, Stretch, _nested_plans


def numpy_stretches(plan):
    """Every NumPy (not compiled) stretch of `plan`, nested plans included."""
    out = []
    for step in plan.steps:
        if type(step) is Stretch:
            out.append(step)
        for sub in _nested_plans(step):
            out.extend(numpy_stretches(sub))
    return out


def assert_compiled_where_lowerable(plan):
    """No primitive the compiler lowers was left to a NumPy stretch."""
    for st in numpy_stretches(plan):
        missed = [e.prim.name for e in st.eqns if fuse.lowerable(e)]
        assert not missed, f"ran on NumPy although the compiler lowers them: {missed}\n{plan!r}"
