"""checkpoint (remat) checked by what it does: the same values and derivatives,
the forward's primitives evaluated again in the backward pass (and only there),
and the Python body traced once. Evaluations are counted by wrapping the host
backend's implementation of one primitive: no callbacks, no printed programs."""
import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu.backend import IMPLS
from rune.core.prims import P

F64 = nx.float64
XN = np.array([0.3, -1.2, 2.0])
X = nx.asarray(XN)


@pytest.fixture
def evals(monkeypatch):
    """evals(name) -> a list that grows by one each time the host backend evaluates
    primitive `name` (eagerly, or in a plan built afterwards). Plans run their
    stretches on NumPy here (RUNE_CC=none), so that compiled loop bodies count too:
    recomputation is a property of the program, not of how a stretch runs."""
    monkeypatch.setenv("RUNE_CC", "none")
    def watch(name):
        real = IMPLS[name]
        calls = []

        def counted(*args, **params):
            calls.append(np.shape(args[0]))
            return real(*args, **params)

        monkeypatch.setitem(IMPLS, name, counted)
        monkeypatch.setattr(P[name], "impls", {})  # resolved again, from the patched table
        return calls
    return watch


def _counted_f():
    traced = [0]

    def f(x):
        traced[0] += 1  # the Python body: runs when f is traced, not when its program is replayed
        return nx.sum(nx.exp(nx.sin(x)) * x)
    return f, traced


def _grad_np(x):
    x = np.asarray(x)
    return np.exp(np.sin(x)) * (1 + x * np.cos(x))


def test_checkpoint_recomputes_the_forward_in_the_backward_pass(evals):
    f, traced = _counted_f()
    sins = evals("sin")
    np.testing.assert_allclose(np.asarray(rune.grad(f)(X)), _grad_np(XN), rtol=1e-12)
    assert len(sins) == 1  # plain reverse mode keeps sin(x) on the tape

    sins.clear()
    np.testing.assert_allclose(np.asarray(rune.grad(rune.checkpoint(f))(X)), _grad_np(XN), rtol=1e-12)
    assert len(sins) == 2  # once forward, once recomputed for the backward pass
    assert traced == [2]  # the recompute replays the staged program; Python ran once per call

    sins.clear()
    np.testing.assert_allclose(np.asarray(rune.checkpoint(f)(X)), np.sum(np.exp(np.sin(XN)) * XN), rtol=1e-12)
    assert len(sins) == 1  # no derivative asked: no recompute


def test_the_recompute_happens_when_the_pullback_runs(evals):
    f, _ = _counted_f()
    sins = evals("sin")
    out, pullback = rune.vjp(rune.checkpoint(f), X)
    assert len(sins) == 1
    (g,) = pullback(nx.ones((), F64))
    assert len(sins) == 2
    np.testing.assert_allclose(np.asarray(g), _grad_np(XN), rtol=1e-12)
    pullback(nx.ones((), F64))
    assert len(sins) == 3  # every backward pass recomputes: nothing but the inputs was kept

    sins.clear()
    _, plain_pullback = rune.vjp(f, X)
    plain_pullback(nx.ones((), F64))
    assert len(sins) == 1  # without checkpoint the backward pass reads the saved value


def test_checkpoint_inside_a_scan_recomputes_each_row(evals):
    f, _ = _counted_f()
    rows = nx.asarray(np.array([[0.1, 0.2], [0.3, -0.4], [1.5, 0.5]]))

    def loss(w, step):
        return rune.scan(lambda c, r: (c + step(r * w), None), nx.zeros((), F64), rows)[0]

    sins = evals("sin")
    w = nx.asarray(np.array(0.7))
    plain = rune.grad(lambda v: loss(v, f))(w)
    forward_only = len(sins)
    sins.clear()
    remat = rune.grad(lambda v: loss(v, rune.checkpoint(f)))(w)
    np.testing.assert_allclose(np.asarray(remat), np.asarray(plain), rtol=1e-12)
    assert forward_only == len(rows)  # one sin per row, saved as a residual
    assert len(sins) == 2 * len(rows)  # and again per row in the reverse scan


def test_checkpoint_values_under_every_transformation():
    f, _ = _counted_f()
    ck = rune.checkpoint(f)
    expected = _grad_np(XN)
    for g in (rune.grad(ck), rune.jit(rune.grad(ck)), rune.grad(rune.jit(ck))):
        np.testing.assert_allclose(np.asarray(g(X)), expected, rtol=1e-12)
    rows = nx.asarray(np.stack([XN, 2 * XN]))
    np.testing.assert_allclose(np.asarray(rune.vmap(rune.grad(ck))(rows)),
                               np.stack([expected, _grad_np(2 * XN)]), rtol=1e-12)
    hess = rune.hessian(ck)(X)
    np.testing.assert_allclose(np.asarray(hess), np.asarray(rune.hessian(f)(X)), rtol=1e-12)
    _, t = rune.jvp(ck, (X,), (nx.ones_like(X),))
    np.testing.assert_allclose(float(t), expected.sum(), rtol=1e-12)


def test_checkpoint_of_several_arguments_and_a_pytree_output(evals):
    @rune.checkpoint
    def f(x, y):
        s = nx.sin(x * y)
        return {"a": nx.sum(s), "b": (nx.sum(s * y),)}

    sins = evals("sin")
    loss = lambda x, y: (lambda o: o["a"] + o["b"][0])(f(x, y))
    gx, gy = rune.grad(loss, argnums=(0, 1))(X, X)
    x = XN
    c = np.cos(x * x)
    np.testing.assert_allclose(np.asarray(gx), c * x * (1 + x), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gy), c * x * (1 + x) + np.sin(x * x), rtol=1e-12)
    assert len(sins) == 2
