"""Where a jit plan does movement (rune/compiler/lower.py): as NumPy views where a
library call (BLAS reads transposed operands in place) or the caller reads them,
inside the compiled run that reads them where it is their only reader (its kernels
read through them in place instead of being handed a copy)."""
import numpy as np
import pytest

import rune
from rune import nx

pytestmark = pytest.mark.cc


def _kinds(plan):
    return [step.describe().split(" ")[0] for step in plan.steps]


def test_a_transpose_only_a_later_compiled_run_reads_moves_into_it():
    def f(x, w):
        y = nx.exp(x)
        t = nx.transpose(y)            # read only by the last run, past the matmul
        z = y @ w
        return nx.sum(z) + t * 2

    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((96, 64)).astype(np.float32), rng.standard_normal((64, 96)).astype(np.float32)
    plan = rune.jit(f).plan(nx.asarray(x), nx.asarray(w))
    assert "views" not in _kinds(plan), plan
    y = np.exp(x)
    want = np.sum(y @ w) + y.T * 2
    np.testing.assert_allclose(np.asarray(rune.jit(f)(nx.asarray(x), nx.asarray(w))), want, rtol=1e-5)


def test_a_transpose_a_matmul_reads_stays_a_view():
    def f(x, w):
        y = nx.exp(x)
        return nx.transpose(y) @ w

    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
    plan = rune.jit(f).plan(nx.asarray(x), nx.asarray(w))
    assert _kinds(plan) == ["compiled", "views", "library"], plan
    np.testing.assert_allclose(np.asarray(rune.jit(f)(nx.asarray(x), nx.asarray(w))),
                               np.exp(x.astype(np.float64)).T @ w, rtol=1e-4, atol=1e-4)
