"""NumPy's functions on traced values run rune's (NEP 13 / NEP 18 on tracers) or
raise naming the function: never a NumPy array that has dropped the derivative.
Derivatives are checked against central finite differences of NumPy's own
function on float64 values; concrete arrays keep NumPy's behaviour."""
import numpy as np
import pytest

import rune
from rune import nx

from oracles import fd_grad

X = np.array([0.5, -1.2, 2.0])
W = np.array([0.3, -0.7, 1.1])

# f(x) written with NumPy's functions, for a float64 vector x; the same code runs
# on a NumPy array (the oracle) and on a rune tracer (under grad).
CASES = {
    "exp": lambda x: np.sum(np.exp(x) * W),
    "sin": lambda x: np.sum(np.sin(x) ** 2),
    "sum": lambda x: np.sum(x * x * W),
    "dot": lambda x: np.dot(x, W) ** 2,
    "where": lambda x: np.sum(np.where(x > 0, x * x, np.sin(x))),
    "mean axis": lambda x: np.mean(np.outer(x, W), axis=0)[1],
    "max keepdims": lambda x: np.max(x * W, keepdims=True)[0],
    "clip": lambda x: np.sum(np.clip(x, -1.0, 1.0) * W),
    "concatenate": lambda x: np.sum(np.concatenate([x, x * W]) ** 2),
    "add.reduce": lambda x: np.add.reduce(x * x),
    "multiply.outer": lambda x: np.sum(np.multiply.outer(x, W) ** 2),
    "ndarray op tracer": lambda x: np.sum((W + x) * (W @ x)),
    "einsum": lambda x: np.einsum("i,i,i", x, x, W),
}


def _value(f, v):
    return float(f(np.asarray(v, np.float64)))


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_function_on_a_traced_value_is_differentiated(name):
    f = CASES[name]
    want = fd_grad(lambda v: _value(f, v), X)
    assert np.any(np.abs(want) > 1e-3)
    got = rune.grad(f)(nx.asarray(X))
    assert isinstance(got, nx.Array) and got.dtype == nx.float64
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-8)
    # the same under jit (staged tracers) and through jit
    np.testing.assert_allclose(np.asarray(rune.jit(rune.grad(f))(nx.asarray(X))), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(rune.grad(rune.jit(f))(nx.asarray(X))), want, rtol=1e-6, atol=1e-8)


def test_numpy_ufunc_under_vmap_and_jvp():
    rows = np.array([[0.1, 0.2], [-0.3, 0.4], [1.0, -2.0]])
    got = rune.vmap(lambda r: np.exp(r) * np.cos(r))(nx.asarray(rows))
    np.testing.assert_allclose(np.asarray(got), np.exp(rows) * np.cos(rows), rtol=1e-12)
    _, t = rune.jvp(lambda x: np.tanh(x), (nx.asarray(X),), (nx.asarray(W),))
    np.testing.assert_allclose(np.asarray(t), W / np.cosh(X) ** 2, rtol=1e-12)


@pytest.mark.parametrize("call, name", [
    (lambda x: np.fmod(x, 2.0), "numpy.fmod"),
    (lambda x: np.linalg.norm(x), "numpy.linalg.norm"),
    (lambda x: np.exp(x, out=np.zeros(3)), "numpy.exp"),
    (lambda x: np.add.reduceat(x, [0, 1]), "numpy.add.reduceat"),
    (lambda x: np.exp(x, where=np.array([True, False, True])), "numpy.exp"),
    (lambda x: np.median(x), "numpy.median"),
])
def test_numpy_function_rune_lacks_raises_naming_it(call, name):
    with pytest.raises(rune.RuneError, match=name.replace(".", r"\.")):
        rune.grad(lambda x: nx.sum(call(x)))(nx.asarray(X))
    with pytest.raises(rune.RuneError, match=name.replace(".", r"\.")):
        rune.jit(call)(nx.asarray(X))


def test_numpy_asarray_of_a_differentiated_value_raises():
    with pytest.raises(rune.NotDifferentiableError, match="derivative"):
        rune.grad(lambda x: nx.sum(np.asarray(x)))(nx.asarray(X))
    with pytest.raises(rune.NotDifferentiableError):
        rune.grad(lambda x: nx.sum(nx.asarray(np.array([x[0], x[1]]))))(nx.asarray(X))
    # without a derivative to lose (stop_gradient), NumPy may read the values
    g = rune.grad(lambda x: nx.sum(x) * float(np.asarray(rune.stop_gradient(x)).sum()))(nx.asarray(X))
    np.testing.assert_allclose(np.asarray(g), np.full(3, X.sum()), rtol=1e-12)


def test_numpy_metadata_functions_read_tracers():
    def f(x):
        assert np.shape(x) == (3,) and np.ndim(x) == 1 and np.size(x) == 3 and not np.iscomplexobj(x)
        return nx.sum(x * x)
    np.testing.assert_allclose(np.asarray(rune.grad(f)(nx.asarray(X))), 2 * X, rtol=1e-12)
    rune.jit(f)(nx.asarray(X))


def test_numpy_on_concrete_arrays_is_unchanged():
    x = nx.asarray(X)
    out = np.exp(x)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, np.exp(X))
    assert type(np.asarray(x)) is np.ndarray
    np.testing.assert_array_equal(np.dot(x, W), np.dot(X, W))
    # an ndarray meeting a rune array by an operator gives a rune array
    assert isinstance(W + x, nx.Array) and isinstance(W @ x, nx.Array)
