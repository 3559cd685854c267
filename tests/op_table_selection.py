"""Which samples of the op table (tests/op_table.py) the transformation tests run, and
the helpers they share (tests/transforms/test_op_jit.py, test_op_vmap.py, test_op_grad.py).

The eager test (tests/nx/test_ops.py) runs every sample against NumPy. A transformation
sees less of a sample than its values: jit compiles kernels specialised to each
argument's shape and dtype, vmap's batching rules move axes by the arguments' ranks
and static arguments. So the jit and vmap tests run a `covering` selection: every
sample that checks something no sample before it checks (`features`), so each op is
checked under the transformation for every dtype combination of its samples and for
every layout (argument shapes with the static arguments) of its samples; samples
repeating both a dtype combination and a layout already checked are left out (the
op table's jit kernels compile once per distinct unit, so each left out is a unit
not compiled on a cold cache).
"""
import numpy as np
import pytest

from op_table import TABLE, is_inexact, widest
from rune import nx


def to_rune(args):
    return [nx.asarray(a) if isinstance(a, (np.ndarray, np.generic)) else a for a in args]


def samples(select=lambda case, sample: True):
    """pytest params (case, sample), in table order, of the samples without a known bug."""
    return [pytest.param(c, s, id=f"{c.name}:{s.id}") for c in TABLE for s in c.samples
            if not s.bug and select(c, s)]


def _dtype(a):
    """A NumPy value's dtype; a Python scalar (a weak value) as its type, apart from them."""
    return a.dtype.name if isinstance(a, (np.ndarray, np.generic)) else f"python {type(a).__name__}"


def _layout(a):
    return a.shape if isinstance(a, np.ndarray) else "scalar"


def features(case, sample):
    """What running `sample` through a transformation checks: the op's dtype combination
    (the arguments' dtypes, a Python scalar as its type, and dtype-valued static
    arguments such as astype's target) and the op's layout (each argument's shape
    with the static arguments: axes, keepdims, index expressions)."""
    static = sorted(sample.kwargs.items())
    dtypes = tuple(map(_dtype, sample.args)) + tuple((k, v.name) for k, v in static if isinstance(v, np.dtype))
    return {(case.name, "dtypes", dtypes), (case.name, "layout", tuple(map(_layout, sample.args)), repr(static))}


def covering(params, features=features):
    """The params, in order, that each add a feature none before them has: every
    feature of the whole list stays checked, repeats of the same check go."""
    seen, kept = set(), []
    for p in params:
        new = features(*p.values) - seen
        if new:
            seen |= new
            kept.append(p)
    return kept


def assert_covers(selected, full):
    """`selected` checks, for each op of `full`, each dtype combination and each layout
    `full` checks (read off the samples directly, not through `features`)."""
    def checked(params):
        out = set()
        for p in params:
            case, sample = p.values
            kw = sorted(sample.kwargs.items())
            out.add((case.name, tuple(str(getattr(a, "dtype", type(a))) for a in sample.args),
                     tuple(str(v) for _, v in kw if isinstance(v, np.dtype))))
            out.add((case.name, tuple(getattr(a, "shape", None) for a in sample.args), repr(kw)))
        return out
    assert checked(selected) == checked(full)
    assert {p.values[0].name for p in selected} == {p.values[0].name for p in full}


def close(case, got, want):
    """`got` equals `want` in shape and dtype, and in value within the case's tolerance."""
    if isinstance(want, (list, tuple)):  # split, broadcast_arrays
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            close(case, g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if is_inexact(want.dtype):
        rtol, atol = case.tolerance(want.dtype)
        wide = widest(want.dtype)
        np.testing.assert_allclose(got.astype(wide), want.astype(wide), rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
