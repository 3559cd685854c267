"""Every op of the op table (tests/op_table.py) under vmap: mapping over a stacked
batch gives the per-lane results of a Python loop, mapped over one array argument
(the mapped axis first, and last) and over every array argument at once.

A batching rule sees each argument's rank, unit and empty axes and the static
arguments (the layout), and the dtypes only through promotion (the dtype
combination), so the samples are the table's `covering` selection
(tests/op_table_selection.py): every layout and every dtype combination of each op's
samples; samples repeating both are left out.
"""
import numpy as np
import pytest

import rune
from rune import nx

from op_table_selection import assert_covers, close, covering, samples, to_rune


def _arrays(sample):
    return sum(isinstance(a, np.ndarray) for a in sample.args)


def _lanes(a):
    """Three lanes made of `a`'s own values (so index arguments stay in range)."""
    return [a, np.flip(a).copy(), np.roll(a, 1)]


def _stack(results):
    """Per-lane results (arrays, or lists of arrays) stacked along a new leading axis."""
    if isinstance(results[0], (list, tuple)):
        return [np.stack([np.asarray(r[j]) for r in results]) for j in range(len(results[0]))]
    return np.stack([np.asarray(r) for r in results])


def _mapped_one():
    return samples(lambda c, s: c.traced and _arrays(s) > 0)


def _mapped_every():
    return samples(lambda c, s: c.traced and _arrays(s) > 1)


VMAP = covering(_mapped_one())
VMAP_EVERY = covering(_mapped_every())


def test_the_vmap_samples_cover_every_layout_and_dtype_combination_of_the_table():
    for selected, full in ((VMAP, _mapped_one()), (VMAP_EVERY, _mapped_every())):
        assert_covers(selected, full)
        assert len(selected) < len(full)   # the repeats are gone


@pytest.mark.parametrize("case,sample", VMAP)
def test_vmap_matches_a_loop(case, sample):
    args = list(sample.args)
    k = next(i for i, a in enumerate(args) if isinstance(a, np.ndarray))
    lanes = _lanes(args[k])

    def f(x):
        full = to_rune(args)
        full[k] = x
        return case.fn(*full, **sample.kwargs)

    want = _stack([f(nx.asarray(lane)) for lane in lanes])
    batch = np.stack(lanes)
    close(case, rune.vmap(f)(nx.asarray(batch)), want)
    if batch.ndim > 1:  # the mapped axis last, results mapped to the last axis
        moved = np.moveaxis(batch, 0, -1)
        got = rune.vmap(f, in_axes=-1, out_axes=-1)(nx.asarray(moved))
        close(case, got, rune.tree.map(lambda w: np.moveaxis(w, 0, -1) if w.ndim > 1 else w, want))


@pytest.mark.parametrize("case,sample", VMAP_EVERY)
def test_vmap_of_every_array_argument_matches_a_loop(case, sample):
    mapped = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
    lanes = {i: _lanes(sample.args[i]) for i in mapped}

    def f(*xs):
        full = to_rune(sample.args)
        for i, x in zip(mapped, xs):
            full[i] = x
        return case.fn(*full, **sample.kwargs)

    want = _stack([f(*[nx.asarray(lanes[i][b]) for i in mapped]) for b in range(3)])
    got = rune.vmap(f)(*[nx.asarray(np.stack(lanes[i])) for i in mapped])
    close(case, got, want)
