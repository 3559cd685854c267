"""rune's public API against its documented public API (README, docs/): autodiff.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import math

import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, close, f32, f64


# ---------------------------------------------------------------- autodiff

def test_grad_basic():
    close(rune.grad(lambda x: (x ** 2).sum())(f64(1.0, 2.0)), [2.0, 4.0])


def test_grad_python_float_input():
    assert float(rune.grad(lambda x: x * x)(3.0)) == 6.0


def test_grad_scalar_array():
    g = rune.grad(nx.sin)(nx.scalar(0.5, nx.float64))
    assert g.shape == () and abs(g.item() - math.cos(0.5)) < 1e-14


def test_grad_argnums_int_and_tuple():
    f = lambda x, y: (x * y ** 2).sum()
    x, y = f64(2.0), f64(3.0)
    assert rune.grad(f, argnums=1)(x, y).tolist() == [12.0]
    g = rune.grad(f, argnums=(0, 1))(x, y)
    assert isinstance(g, tuple) and len(g) == 2
    assert g[0].tolist() == [9.0] and g[1].tolist() == [12.0]
    assert rune.grad(f, 1)(x, y).tolist() == [12.0]


def test_grad_has_aux():
    g, aux = rune.grad(lambda x: ((x ** 2).sum(), {"v": x * 3.0}), has_aux=True)(f64(1.0))
    assert g.tolist() == [2.0] and aux["v"].tolist() == [3.0]


def test_grad_dict_input():
    g = rune.grad(lambda p: (p["w"] * p["x"]).sum())({"w": f64(2.0), "x": f64(5.0)})
    assert g["w"].tolist() == [5.0] and g["x"].tolist() == [2.0]


def test_grad_keeps_dtype():
    assert rune.grad(lambda x: (x * x).sum())(nx.ones((2,))).dtype == nx.float32


def test_grad_non_scalar_output_raises():
    with pytest.raises(rune.RuneError) as ei:
        rune.grad(lambda x: x * 2.0)(f64(1.0, 2.0))
    assert isinstance(ei.value, (TypeError, ValueError))
    assert "scalar" in str(ei.value).lower()


def test_grad_integer_input_raises():
    with pytest.raises(rune.RuneError) as ei:
        rune.grad(lambda x: (x * x).sum())(nx.array([1, 2]))
    assert isinstance(ei.value, (TypeError, ValueError))


def test_grad_python_control_flow_eager():
    f = lambda x: x * x if x > 0 else -x
    assert float(rune.grad(f)(3.0)) == 6.0
    assert float(rune.grad(f)(-3.0)) == -1.0


def test_grad_of_grad():
    g2 = rune.grad(rune.grad(nx.sin))(nx.scalar(0.3, nx.float64))
    assert abs(g2.item() + math.sin(0.3)) < 1e-14


def test_grad_third_order():
    g3 = rune.grad(rune.grad(rune.grad(lambda x: x ** 4)))(nx.scalar(2.0, nx.float64))
    assert abs(g3.item() - 48.0) < 1e-12


def test_grad_closure_over_other_grad_tracer():
    # perturbation confusion: d/dx [x * d/dy (x + y)] = 1
    f = lambda x: x * rune.grad(lambda y: x + y)(nx.scalar(1.0, nx.float64))
    assert rune.grad(f)(nx.scalar(2.0, nx.float64)).item() == 1.0


def test_value_and_grad():
    v, g = rune.value_and_grad(lambda x: (x ** 3).sum())(f64(2.0))
    assert v.item() == 8.0 and g.tolist() == [12.0]


def test_value_and_grad_has_aux_and_argnums():
    (v, aux), g = rune.value_and_grad(lambda x, y: ((x * y).sum(), "tag"), argnums=1, has_aux=True)(f64(2.0), f64(3.0))
    assert v.item() == 6.0 and aux == "tag" and g.tolist() == [2.0]


def test_vjp_single_primal_returns_tuple():
    out, pb = rune.vjp(lambda x: x * 2.0, f64(1.0, 2.0))
    assert out.tolist() == [2.0, 4.0]
    cts = pb(f64(1.0, 1.0))
    assert isinstance(cts, tuple) and len(cts) == 1
    assert cts[0].tolist() == [2.0, 2.0]


def test_vjp_two_primals():
    out, pb = rune.vjp(lambda x, y: x * y, f64(2.0), f64(5.0))
    cx, cy = pb(f64(1.0))
    assert cx.tolist() == [5.0] and cy.tolist() == [2.0]


def test_vjp_pytree_primal_and_output():
    out, pb = rune.vjp(lambda p: (p["a"] * 2.0, p["a"] + p["b"]), {"a": f64(1.0), "b": f64(2.0)})
    (ct,) = pb((f64(1.0), f64(1.0)))
    assert ct["a"].tolist() == [3.0] and ct["b"].tolist() == [1.0]


def test_vjp_pullback_reusable():
    out, pb = rune.vjp(nx.sin, f64(0.0))
    assert pb(f64(1.0))[0].tolist() == [1.0]
    assert pb(f64(2.0))[0].tolist() == [2.0]


def test_jvp():
    out, t = rune.jvp(lambda x: nx.sin(x) * 2.0, (f64(0.0),), (f64(1.0),))
    assert out.tolist() == [0.0] and t.tolist() == [2.0]


def test_jvp_two_primals_and_pytree_out():
    out, t = rune.jvp(lambda x, y: {"p": x * y}, (f64(2.0), f64(3.0)), (f64(1.0), f64(0.0)))
    assert out["p"].tolist() == [6.0] and t["p"].tolist() == [3.0]


def test_jvp_accepts_lists():
    out, t = rune.jvp(lambda x: x * x, [f64(3.0)], [f64(1.0)])
    assert t.tolist() == [6.0]


def test_jacfwd_jacrev():
    f = lambda x: nx.stack([x[0] * x[1], nx.sin(x[2])])
    x = f64(1.0, 2.0, 0.5)
    want = np.array([[2.0, 1.0, 0.0], [0.0, 0.0, math.cos(0.5)]])
    for jac in (rune.jacfwd, rune.jacrev):
        J = jac(f)(x)
        assert J.shape == (2, 3)
        close(J, want, rtol=1e-12)


def test_jac_argnums():
    f = lambda x, y: x * y
    close(rune.jacrev(f, argnums=1)(f64(1.0, 2.0), f64(3.0, 4.0)), np.diag([1.0, 2.0]))
    close(rune.jacfwd(f, argnums=1)(f64(1.0, 2.0), f64(3.0, 4.0)), np.diag([1.0, 2.0]))


def test_hessian():
    H = rune.hessian(lambda x: (x ** 3).sum())(f64(1.0, 2.0))
    close(H, np.diag([6.0, 12.0]), rtol=1e-12)


def test_stop_gradient():
    g = rune.grad(lambda x: (rune.stop_gradient(x) * x).sum())(f64(3.0))
    assert g.tolist() == [3.0]
    assert rune.stop_gradient(f64(2.0)).tolist() == [2.0]


def test_checkpoint_same_gradient():
    f = lambda x: nx.sin(nx.cos(x)).sum()
    x = f64(0.3, 0.9)
    close(rune.grad(rune.checkpoint(f))(x), A(rune.grad(f)(x)), rtol=1e-14)
    close(rune.checkpoint(f)(x), A(f(x)), rtol=1e-14)


def test_checkpoint_decorator_multiple_args():
    @rune.checkpoint
    def f(x, y):
        return (x * nx.exp(y)).sum()
    g = rune.grad(f, argnums=(0, 1))(f64(2.0), f64(0.0))
    assert g[0].tolist() == [1.0] and g[1].tolist() == [2.0]


# ---------------------------------------------------------------- vmap

def test_vmap_default_axis0():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    close(rune.vmap(lambda r: r.sum())(nx.array(x)), x.sum(1))


def test_vmap_in_axes_none():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    w = np.array([1.0, 10.0], np.float32)
    close(rune.vmap(lambda r, w: (r * w).sum(), in_axes=(0, None))(nx.array(x), nx.array(w)), (x * w).sum(1))


def test_vmap_in_axes_1_and_out_axes_1():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    close(rune.vmap(lambda c: c * 2.0, in_axes=1)(nx.array(x)), (x * 2).T)
    close(rune.vmap(lambda r: r * 2.0, out_axes=1)(nx.array(x)), (x * 2).T)


def test_vmap_in_axes_negative():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    close(rune.vmap(lambda c: c.sum(), in_axes=-1)(nx.array(x)), x.sum(0))


def test_vmap_tuple_output_and_pytree_in_axes():
    x = nx.array(np.arange(6, dtype=np.float32).reshape(3, 2))
    out = rune.vmap(lambda d: (d["a"].sum(), d["b"] * 1.0), in_axes=({"a": 0, "b": None},))({"a": x, "b": f32(5.0)})
    assert out[0].tolist() == [1.0, 5.0, 9.0] and out[1].shape == (3, 1)


def test_vmap_nested():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    close(rune.vmap(rune.vmap(lambda v: v.sum()))(nx.array(x)), x.sum(-1))


def test_vmap_matmul():
    a = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    m = np.random.RandomState(1).randn(3, 3).astype(np.float32)
    close(rune.vmap(lambda v, m: m @ v, in_axes=(0, None))(nx.array(a), nx.array(m)), a @ m.T, rtol=1e-5, atol=1e-5)


def test_vmap_size_mismatch_raises():
    with pytest.raises(rune.RuneError) as ei:
        rune.vmap(lambda a, b: a + b)(nx.ones((3,)), nx.ones((4,)))
    assert isinstance(ei.value, ValueError)
    assert "3" in str(ei.value) and "4" in str(ei.value)


def test_vmap_of_grad_and_grad_of_vmap():
    x = np.array([0.1, 0.5, 0.9])
    close(rune.vmap(rune.grad(nx.sin))(nx.array(x)), np.cos(x), rtol=1e-14)
    close(rune.grad(lambda v: rune.vmap(nx.sin)(v).sum())(nx.array(x)), np.cos(x), rtol=1e-14)


def test_vmap_python_bool_raises_concretization():
    with pytest.raises(rune.ConcretizationError):
        rune.vmap(lambda x: x if x > 0 else -x)(f32(1.0, -2.0))
