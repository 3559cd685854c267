"""Checks that jit really compiled: shared by the op-table and compiler tests.

Tests of the compiler itself carry `pytest.mark.cc`: without a C compiler (none
installed, or RUNE_CC=none) jit runs NumPy stretches and they are skipped
(tests/conftest.py)."""
from rune.backends.cpu import compiler
from rune.compiler import fuse
from rune.compiler.plan import Stretch


def numpy_stretches(plan):
    """Every NumPy (not compiled) stretch of `plan`, nested plans included. Movement
    that NumPy does as a view after a compiled run (`ViewStep`) is not one: it is
    a deliberate zero-copy step, not something left uncompiled."""
    out = []
    for step in plan.steps:
        if type(step) is Stretch:
            out.append(step)
        for sub in step.plans:
            out.extend(numpy_stretches(sub))
    return out


def assert_compiled_where_lowerable(plan):
    """No primitive the compiler lowers was left to a NumPy stretch (when there is a compiler)."""
    if compiler.find() is None:
        return
    for st in numpy_stretches(plan):
        missed = [e.prim.name for e in st.eqns if fuse.lowerable(e)]
        assert not missed, f"ran on NumPy although the compiler lowers them: {missed}\n{plan!r}"
