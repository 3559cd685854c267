"""rune's public API against its documented public API (README, docs/): control flow.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, close, f32, f64, mentions_shape


# ---------------------------------------------------------------- control flow

def test_scan_cumsum():
    xs = np.array([1.0, 2.0, 3.0, 4.0])
    c, ys = rune.scan(lambda c, x: (c + x, c + x), nx.scalar(0.0, nx.float64), nx.array(xs))
    assert c.item() == 10.0
    close(ys, np.cumsum(xs))


def test_scan_traces_step_once():
    calls = []
    def step(c, x):
        calls.append(1)
        return c + x, c
    rune.scan(step, nx.scalar(0.0, nx.float32), nx.arange(5.0))
    assert len(calls) == 1


def test_scan_reverse():
    xs = np.array([1.0, 2.0, 3.0])
    c, ys = rune.scan(lambda c, x: (c + x, c + x), nx.scalar(0.0, nx.float64), nx.array(xs), reverse=True)
    close(ys, np.cumsum(xs[::-1])[::-1])
    assert c.item() == 6.0


def test_scan_length_without_xs():
    c, ys = rune.scan(lambda c, _: (c * 2.0, c), nx.scalar(1.0, nx.float32), None, length=4)
    assert c.item() == 16.0 and ys.tolist() == [1.0, 2.0, 4.0, 8.0]


def test_scan_pytree_carry_and_xs():
    xs = (nx.arange(3.0), nx.ones((3, 2)))
    (a, b), ys = rune.scan(lambda c, x: ((c[0] + x[0], c[1] + x[1]), {"s": x[0] * 2.0}),
                           (nx.array(0.0), nx.zeros((2,))), xs)
    assert a.item() == 3.0 and b.tolist() == [3.0, 3.0] and ys["s"].tolist() == [0.0, 2.0, 4.0]


def test_scan_ys_none():
    c, ys = rune.scan(lambda c, x: (c + x, None), nx.array(0.0), nx.arange(3.0))
    assert ys is None and c.item() == 3.0


def test_scan_python_float_init():
    c, _ = rune.scan(lambda c, x: (c + x, None), 0.0, nx.arange(4.0))
    assert float(c) == 6.0


def test_scan_grad_through_closure():
    w = f64(2.0)
    def loss(w):
        c, _ = rune.scan(lambda c, x: (c + w * x, None), nx.zeros((1,), dtype=nx.float64), nx.array(np.array([[1.0], [2.0], [3.0]])))
        return c.sum()
    assert rune.grad(loss)(w).tolist() == [6.0]


def test_scan_grad_wrt_init_and_xs():
    def loss(c0, xs):
        c, ys = rune.scan(lambda c, x: (c * x, c), c0, xs)
        return c + ys.sum()
    xs = f64(2.0, 3.0)
    gc, gx = rune.grad(loss, argnums=(0, 1))(nx.scalar(1.0, nx.float64), xs)
    # c = c0*x0*x1; ys = [c0, c0*x0]
    assert abs(gc.item() - (6.0 + 1.0 + 2.0)) < 1e-12
    close(gx, [3.0 + 1.0, 2.0], rtol=1e-12)


def test_scan_carry_shape_mismatch_error_names_leaf_and_shapes():
    init = {"weight": nx.zeros((2,)), "bias_leaf": nx.zeros((7,))}
    with pytest.raises(rune.RuneError) as ei:
        rune.scan(lambda c, x: ({"weight": c["weight"], "bias_leaf": nx.zeros((11,))}, None), init, nx.arange(3.0))
    m = str(ei.value)
    assert "bias_leaf" in m, m
    assert mentions_shape(m, (7,)) and mentions_shape(m, (11,)), m


def test_scan_carry_dtype_mismatch_error():
    with pytest.raises(rune.RuneError) as ei:
        rune.scan(lambda c, x: (c.astype(nx.float64), None), nx.zeros((2,)), nx.arange(3.0))
    assert "float64" in str(ei.value) and "float32" in str(ei.value)


def test_scan_carry_structure_mismatch_error():
    with pytest.raises(rune.RuneError):
        rune.scan(lambda c, x: ((c, c), None), nx.zeros((2,)), nx.arange(3.0))


def test_scan_length_mismatch_error():
    with pytest.raises(rune.RuneError):
        rune.scan(lambda c, x: (c, x), nx.array(0.0), nx.arange(3.0), length=5)


def test_scan_under_jit_matches_eager():
    f = lambda xs: rune.scan(lambda c, x: (c * 0.5 + x, nx.sin(c)), nx.array(1.0), xs)
    xs = nx.linspace(0.0, 1.0, 6)
    e, j = f(xs), rune.jit(f)(xs)
    close(j[0], A(e[0]))
    close(j[1], A(e[1]))


def test_scan_under_vmap():
    xs = nx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = rune.vmap(lambda row: rune.scan(lambda c, x: (c + x, None), nx.array(0.0), row)[0])(xs)
    assert out.tolist() == [3.0, 12.0]


def test_cond_basic():
    x = f32(2.0)
    assert rune.cond(True, lambda a: a + 1.0, lambda a: a - 1.0, x).tolist() == [3.0]
    assert rune.cond(nx.array(False), lambda a: a + 1.0, lambda a: a - 1.0, x).tolist() == [1.0]


def test_cond_multiple_and_no_operands():
    assert rune.cond(True, lambda a, b: a * b, lambda a, b: a + b, f32(2.0), f32(3.0)).tolist() == [6.0]
    assert float(rune.cond(False, lambda: nx.array(1.0), lambda: nx.array(2.0))) == 2.0


def test_cond_under_jit_traced_pred():
    g = rune.jit(lambda x: rune.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: -a, x))
    assert g(f32(3.0)).tolist() == [6.0] and g(f32(-3.0)).tolist() == [3.0]


def test_cond_grad():
    f = lambda x: rune.cond(x > 0, lambda a: a * a, lambda a: -a * 3.0, x)
    assert float(rune.grad(f)(nx.scalar(2.0, nx.float64))) == 4.0
    assert float(rune.grad(f)(nx.scalar(-2.0, nx.float64))) == -3.0


def test_cond_vmap_batched_pred():
    out = rune.vmap(lambda x: rune.cond(x > 0, lambda a: a * 2.0, lambda a: a * 0.0, x))(f32(1.0, -1.0, 3.0))
    assert out.tolist() == [2.0, 0.0, 6.0]


def test_cond_branch_mismatch_raises():
    with pytest.raises(rune.RuneError):
        rune.cond(True, lambda a: a, lambda a: nx.zeros((3,)), nx.zeros((2,)))


def test_cond_pytree_output():
    r = rune.cond(True, lambda a: (a, {"k": a * 2.0}), lambda a: (a * 0.0, {"k": a}), f32(1.0))
    assert r[0].tolist() == [1.0] and r[1]["k"].tolist() == [2.0]


def test_while_loop():
    r = rune.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2.0), (nx.array(0), nx.array(1.0)))
    assert int(r[0]) == 10 and float(r[1]) == 1024.0


def test_while_loop_under_jit():
    g = rune.jit(lambda n: rune.while_loop(lambda i: i < n, lambda i: i + 3, nx.array(0)))
    assert int(g(nx.array(10))) == 12


def test_fori_loop():
    r = rune.fori_loop(0, 5, lambda i, acc: acc + i, nx.array(0))
    assert int(r) == 10


def test_fori_loop_float_body_and_jit():
    g = rune.jit(lambda x: rune.fori_loop(1, 4, lambda i, v: v * i.astype(nx.float32), x))
    assert g(f32(1.0)).tolist() == [6.0]


def test_fori_loop_grad_with_static_bounds():
    g = rune.grad(lambda x: rune.fori_loop(0, 3, lambda i, v: v * x, nx.scalar(1.0, nx.float64)))(nx.scalar(2.0, nx.float64))
    assert abs(float(g) - 12.0) < 1e-12
