"""The interpreter stack, programs, program-level transforms and derivative APIs."""
import numpy as np
import pytest

import rune
from rune import nx

from oracles import fd_grad
from rune.transforms.autodiff.jvp import jvp_program
from rune.transforms.autodiff.vjp import vjp_program
from rune.core import trace as core_trace
from rune.core.program import dce

f64 = nx.float64


def test_grad_matches_finite_differences_on_a_composite():
    f = lambda x: nx.sum(nx.tanh(x) * nx.exp(-x * x) + nx.log1p(x * x))
    x = np.array([0.3, -1.2, 2.0, 0.0])
    np.testing.assert_allclose(np.asarray(rune.grad(f)(nx.asarray(x))), fd_grad(lambda v: f(nx.asarray(v)), x), rtol=1e-7, atol=1e-9)


def test_grad_of_grad_and_perturbation_confusion():
    x = nx.scalar(1.5, f64)
    np.testing.assert_allclose(float(rune.grad(rune.grad(lambda x: x ** 4))(x)), 12 * 1.5 ** 2)
    # d/dx [x * d/dy (x*y)] = d/dx x^2 = 2x; confusing the two perturbations gives a wrong answer.
    g = rune.grad(lambda x: x * rune.grad(lambda y: x * y)(nx.scalar(3.0, f64)))(x)
    assert float(g) == pytest.approx(3.0)


def test_python_control_flow_on_values_under_eager_grad():
    def f(x):   # a comparison (no derivative) decides; float(x) would drop x's derivative and raises
        return x * x if x > 0 else -x
    assert float(rune.grad(f)(nx.scalar(2.0, f64))) == 4.0
    assert float(rune.grad(f)(nx.scalar(-2.0, f64))) == -1.0


def test_argnums_has_aux_pytrees_and_unused_inputs():
    def f(params, x, unused):
        return nx.sum(params["w"] * x + params["b"]), {"aux": x * 2}
    params = {"w": nx.asarray([1.0, 2.0], f64), "b": nx.scalar(0.5, f64)}
    x = nx.asarray([3.0, 4.0], f64)
    (gp, gx, gu), aux = rune.grad(f, argnums=(0, 1, 2), has_aux=True)(params, x, nx.ones(3, f64))
    np.testing.assert_allclose(np.asarray(gp["w"]), [3.0, 4.0])
    assert float(gp["b"]) == 2.0
    np.testing.assert_allclose(np.asarray(gx), [1.0, 2.0])
    np.testing.assert_array_equal(np.asarray(gu), np.zeros(3))
    np.testing.assert_allclose(np.asarray(aux["aux"]), [6.0, 8.0])
    (value, aux2), g = rune.value_and_grad(f, has_aux=True)(params, x, None)
    assert float(value) == pytest.approx(1 * 3 + 2 * 4 + 1.0)


def test_grad_errors():
    with pytest.raises(rune.DTypeError, match="float"):
        rune.grad(lambda x: nx.sum(x))(nx.arange(3))
    with pytest.raises(rune.ShapeError, match="vjp"):
        rune.grad(lambda x: x * 2)(nx.ones(3))
    assert isinstance(rune.DTypeError("x"), TypeError)


def test_vjp_pullback_is_reusable_and_jvp_agrees():
    f = lambda x: nx.sin(x) * nx.sum(x)
    x = nx.asarray([0.1, 0.7, -0.4], f64)
    out, pull = rune.vjp(f, x)
    u = nx.asarray([0.3, -1.0, 2.0], f64)
    v = nx.asarray([1.0, 0.5, -0.25], f64)
    (ct1,), (ct2,) = pull(v), pull(v)
    np.testing.assert_array_equal(np.asarray(ct1), np.asarray(ct2))
    _, tan = rune.jvp(f, (x,), (u,))
    # <v, J u> computed both ways
    assert float(nx.sum(v * tan)) == pytest.approx(float(nx.sum(ct1 * u)), rel=1e-12)


def test_jacobians_and_hessian_against_finite_differences():
    f = lambda x: nx.stack([nx.sum(x ** 3), nx.prod(x), x[0] * x[1]])
    x = nx.asarray([0.5, -1.5, 2.0], f64)
    jf, jr = rune.jacfwd(f)(x), rune.jacrev(f)(x)
    np.testing.assert_allclose(np.asarray(jf), np.asarray(jr), rtol=1e-12)
    fd = np.stack([fd_grad(lambda y, k=k: f(nx.asarray(y))[k], np.asarray(x)) for k in range(3)])
    np.testing.assert_allclose(np.asarray(jf), fd, rtol=1e-6, atol=1e-8)
    h = rune.hessian(lambda x: nx.sum(nx.sin(x) * x[0]))(x)
    g = lambda y: rune.grad(lambda z: nx.sum(nx.sin(z) * z[0]))(y)
    fd_h = np.stack([fd_grad(lambda y, k=k: g(nx.asarray(y))[k], np.asarray(x)) for k in range(3)])
    np.testing.assert_allclose(np.asarray(h), fd_h, rtol=1e-6, atol=1e-7)


def test_stop_gradient_and_checkpoint():
    x = nx.asarray([1.0, 2.0], f64)
    g = rune.grad(lambda x: nx.sum(x * rune.stop_gradient(x)))(x)
    np.testing.assert_allclose(np.asarray(g), [1.0, 2.0])
    f = lambda x: nx.sum(nx.exp(nx.sin(x)) * x)
    np.testing.assert_allclose(np.asarray(rune.grad(rune.checkpoint(f))(x)), np.asarray(rune.grad(f)(x)))
    # That the forward is recomputed in the backward pass is checked by behaviour in test_checkpoint.py.


def test_trace_prints_program_and_concretization_error():
    prog = rune.trace(lambda x, y: nx.sum(x * y + 1.0))(nx.ones(3), nx.ones(3))
    text = repr(prog)
    assert "mul" in text and "add" in text and "reduce_sum" in text and "f32[3]" in text
    with pytest.raises(rune.ConcretizationError, match="cond"):
        rune.trace(lambda x: x * 2 if x > 0 else x)(nx.scalar(1.0))
    with pytest.raises(TypeError):
        rune.trace(lambda x: float(x))(nx.scalar(1.0))
    assert core_trace.current() is core_trace.EVAL


def test_stack_restored_when_user_code_raises():
    def bad(x):
        raise KeyError("boom")
    for transform in (rune.grad, rune.trace, lambda f: lambda x: rune.jvp(f, (x,), (x,))):
        with pytest.raises(KeyError):
            transform(bad)(nx.scalar(1.0))
        assert core_trace.current() is core_trace.EVAL
    assert float(nx.scalar(2.0) * 3) == 6.0


def test_staging_captures_outer_values_and_dce_keeps_effects():
    w = nx.asarray([1.0, 2.0])
    prog = rune.trace(lambda x: x * w)(nx.ones(2))
    assert len(prog.constvars) == 1 and prog.consts[0] is w
    log = []
    prog = rune.trace(lambda x: (rune.callback(lambda v: log.append(1) or v, x, like=x), x * 2)[1])(nx.ones(2))
    pruned = dce(prog)
    assert [e.prim.name for e in pruned.eqns] == ["callback", "mul"]
    assert log == []  # never run while tracing
    prog2 = rune.trace(lambda x: (nx.sin(x), x * 2)[1])(nx.ones(2))
    assert [e.prim.name for e in dce(prog2).eqns] == ["mul"]


def _two_output_program():
    w = nx.asarray([0.5, -1.0], f64)
    return rune.trace(lambda x, y: (nx.sin(x) * y * w, nx.sum(x * x) + y[0]))(
        nx.ones(2, f64), nx.ones(2, f64)), w


def test_vjp_program_splits_forward_and_backward():
    prog, w = _two_output_program()
    closed, consts = prog.closed()
    x, y = np.array([0.3, 1.1]), np.array([2.0, -0.5])
    fwd, bwd, num_res, out_tracked = vjp_program(closed, [False, True, True])
    outs = fwd(*consts, nx.asarray(x), nx.asarray(y))
    assert len(outs) == 2 + num_res and out_tracked == [True, True]
    np.testing.assert_allclose(np.asarray(outs[0]), np.sin(x) * y * np.asarray(w))
    ct0, ct1 = np.array([1.0, 2.0]), 3.0
    cx, cy = bwd(*outs[2:], nx.asarray(ct0), nx.scalar(ct1, f64))
    np.testing.assert_allclose(np.asarray(cx), ct0 * np.cos(x) * y * np.asarray(w) + ct1 * 2 * x)
    np.testing.assert_allclose(np.asarray(cy), ct0 * np.sin(x) * np.asarray(w) + np.array([ct1, 0.0]))


def test_jvp_program_pushes_tangents():
    prog, w = _two_output_program()
    closed, consts = prog.closed()
    x, y, tx = np.array([0.3, 1.1]), np.array([2.0, -0.5]), np.array([1.0, -2.0])
    jp, out_mask = jvp_program(closed, [False, True, False])
    assert out_mask == [True, True]
    p0, p1, t0, t1 = jp(*consts, nx.asarray(x), nx.asarray(y), nx.asarray(tx))
    np.testing.assert_allclose(np.asarray(t0), np.cos(x) * tx * y * np.asarray(w))
    assert float(t1) == pytest.approx(float(np.sum(2 * x * tx)))
