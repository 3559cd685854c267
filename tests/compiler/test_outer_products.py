"""A dot_general contracting nothing (a batch of outer products: per-example
gradients under vmap) is fused as an elementwise product under jit, and runs
as one broadcast multiply eagerly: the values of a one-deep matrix product."""
import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx

pytestmark = pytest.mark.cc

CASES = [((5,), (7,), (((), ()), ((), ()))),
         ((3, 4), (3, 6), (((), ()), ((0,), (0,)))),
         ((4, 3, 2), (2, 5, 3), (((), ()), ((1,), (2,)))),
         ((4, 3, 2), (2, 5, 3), (((), ()), ((1, 2), (2, 0))))]


def _matmul_reference(a, b, dims):
    """The product as NumPy's matmul of one-deep matrices, batch axes first."""
    (_, _), (lb, rb) = dims
    fa = [i for i in range(a.ndim) if i not in lb]
    fb = [i for i in range(b.ndim) if i not in rb]
    at = np.transpose(a, list(lb) + fa)
    bt = np.transpose(b, list(rb) + fb)
    batch = at.shape[:len(lb)]
    m, n = int(np.prod(at.shape[len(lb):])), int(np.prod(bt.shape[len(rb):]))
    out = np.matmul(at.reshape(batch + (m, 1)), bt.reshape(batch + (1, n)))
    return out.reshape(batch + at.shape[len(lb):] + bt.shape[len(rb):])


@pytest.mark.parametrize("sa, sb, dims", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_outer_products_compile_to_a_kernel_with_matmuls_values(monkeypatch, sa, sb, dims, dtype):
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "0")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(sa).astype(dtype), rng.standard_normal(sb).astype(dtype)
    f = rune.jit(lambda u, v: nx.dot_general(u, v, dims))
    plan = f.plan(nx.asarray(a), nx.asarray(b))
    assert [s.describe().split(" ")[0] for s in plan.steps] == ["compiled"], plan
    want = _matmul_reference(a, b, dims)
    np.testing.assert_array_equal(np.asarray(f(nx.asarray(a), nx.asarray(b))), want)
    np.testing.assert_array_equal(np.asarray(nx.dot_general(nx.asarray(a), nx.asarray(b), dims)), want)


@pytest.mark.parametrize("dtype", [np.int32, bool, np.float16, ml_dtypes.bfloat16])
def test_eager_outer_products_of_other_dtypes_keep_matmuls_values(dtype):
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((3, 4)) * 3).astype(dtype), (rng.standard_normal((3, 6)) * 3).astype(dtype)
    dims = (((), ()), ((0,), (0,)))
    got = np.asarray(nx.dot_general(nx.asarray(a), nx.asarray(b), dims))
    wide = np.float32 if np.dtype(dtype).itemsize == 2 and np.dtype(dtype).kind != "i" else dtype
    want = _matmul_reference(a.astype(wide), b.astype(wide), dims).astype(dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


def test_per_example_gradients_under_jit_are_eagers():
    rng = np.random.default_rng(2)
    w = nx.asarray(rng.standard_normal((20, 8)).astype(np.float32) * 0.1)
    xs = nx.asarray(rng.standard_normal((16, 20)).astype(np.float32))

    def loss(w, x):
        return nx.sum(nx.tanh(x @ w) ** 2)
    per_example = rune.vmap(rune.grad(loss), in_axes=(None, 0))
    eager = np.asarray(per_example(w, xs))
    np.testing.assert_array_equal(np.asarray(rune.jit(per_example)(w, xs)), eager)
    loop = np.stack([np.asarray(rune.grad(loss)(w, xs[i])) for i in range(16)])
    np.testing.assert_allclose(eager, loop, rtol=1e-5, atol=1e-6)
