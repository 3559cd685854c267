"""Every op of the op table (tests/op_table.py) under jit: the compiled plan gives the
eager result (same dtype, same values) with the shapes and dtypes of its traced
program, and runs on compiled kernels wherever the compiler lowers its primitives.

The samples are the table's `covering` selection (tests/op_table_selection.py): each
op under jit for every dtype combination and every layout of its samples, each once
(a sample repeating both is left out: its kernels would be compiled for nothing; the
eager test, tests/nx/test_ops.py, runs every sample against NumPy).
"""
import numpy as np
import pytest

import rune

from compiled import assert_compiled_where_lowerable
from op_table import assert_traced_avals
from op_table_selection import assert_covers, close, covering, samples, to_rune

JIT = covering(samples())


@pytest.fixture(scope="module")
def compiled_table():
    """Plan every jit case first and compile all their kernels in a few batched
    compiler runs (one run per test would cost ~0.1 s each)."""
    from rune.backends import compile_pending
    plans = []  # held until compiled: a plan nobody holds is not compiled
    for param in JIT:
        case, sample = param.values
        try:
            plans.append(rune.jit(lambda *a: case.fn(*a, **sample.kwargs)).plan(*to_rune(sample.args)))
        except Exception:
            pass  # the test itself reports it
    compile_pending()


def test_the_jit_samples_cover_every_op_dtype_combination_and_layout_of_the_table():
    full = samples()
    assert_covers(JIT, full)
    assert len(JIT) < 0.75 * len(full)   # the repeats are gone


@pytest.mark.parametrize("case,sample", JIT)
def test_jit_matches_eager(case, sample, compiled_table):
    args = to_rune(sample.args)
    eager = case.fn(*args, **sample.kwargs)   # Python floats as given: jit widens them exactly too
    fn = lambda *a: case.fn(*a, **sample.kwargs)  # noqa: E731
    if not case.traced:  # a data-dependent shape: refused under jit, pointing to where/size=
        with pytest.raises(rune.ConcretizationError, match="where"):
            rune.jit(fn)(*args)
        return
    jf = rune.jit(fn)
    compiled = jf(*args)
    assert_traced_avals(fn, args, compiled, "jit")
    close(case, compiled, eager)
    assert_compiled_where_lowerable(jf.plan(*args))
