"""Checks that jit really compiled, shared by the op-table and compiler tests, and
`precompiled`: a test file's jitted calls compiled in a few batched compiler runs.

Tests of the compiler itself carry `pytest.mark.cc`: without a C compiler (none
installed, or RUNE_CC=none) jit runs NumPy stretches and they are skipped
(tests/conftest.py)."""
import pytest

import rune
from rune.backends import compile_pending
from rune.backends.cpu import compiler
from rune.compiler import fuse
from rune.compiler.api import Jitted
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


def precompile(calls):
    """Plan each `(function, args)` of `calls` under jit (a function already jitted is
    planned as it is) and compile all their kernels together: a few batched compiler
    runs instead of one run (~0.1 s) per test. The tests then jit the same functions on
    arguments of the same shapes and dtypes and find the kernels loaded (the compile
    pipeline keeps every unit it built by its source's key, rune/backends/pipeline.py).
    A call that cannot be planned is skipped: the test making it reports its error.
    The number of calls planned."""
    plans = []   # held until compiled: a plan nobody holds is not compiled
    for fn, args in calls:
        try:
            plans.append((fn if isinstance(fn, Jitted) else rune.jit(fn)).plan(*args))
        except Exception:   # noqa: BLE001 (whatever it is, the test reports it)
            pass
    compile_pending()
    return len(plans)


def jitted_only(calls):
    """The `(function, args)` of `calls` whose function is a jit: a transformation of a
    jit runs eagerly and traces the jit through, compiling nothing of its own."""
    return [(fn, args) for fn, args in calls if isinstance(fn, Jitted)]


def precompiled(calls):
    """A module fixture (autouse) compiling the kernels of `calls()` (see `precompile`)
    before the first test of the file: `_kernels = precompiled(lambda: [(fn, args), ...])`
    at the top level of a test file. A test that checks compiling itself (counts
    compiler runs, or that its call compiles) keeps its functions out of `calls`."""
    @pytest.fixture(scope="module", autouse=True)
    def _precompiled():
        precompile(calls())
    return _precompiled
