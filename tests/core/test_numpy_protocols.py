"""NumPy's functions on traced values run rune's (NEP 13 / NEP 18 on tracers) or
raise naming the function: never a NumPy array that has dropped the derivative.
Derivatives are checked against central finite differences of NumPy's own
function on float64 values; concrete arrays keep NumPy's behaviour."""
import numpy as np
import pytest

import rune
from rune import nx

from compiled import precompiled
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
    (lambda x: np.real_if_close(x), "numpy.real_if_close"),   # (not in jax.numpy either)
    (lambda x: np.exp(x, out=np.zeros(3)), "numpy.exp"),
    (lambda x: np.add.reduceat(x, [0, 1]), "numpy.add.reduceat"),
    (lambda x: np.exp(x, where=np.array([True, False, True])), "numpy.exp"),
    (lambda x: np.shares_memory(x, x), "numpy.shares_memory"),   # (not in jax.numpy either)
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


def test_numpy_on_concrete_arrays_runs_runes_functions_where_rune_has_them():
    x = nx.asarray(X)
    for got, want in ((np.exp(x), np.exp(X)), (np.dot(x, W), np.dot(X, W)), (np.median(x), np.median(X)),
                      (np.hstack([x, W]), np.hstack([X, W])), (np.cbrt(x), np.cbrt(X))):
        assert isinstance(got, nx.Array), type(got)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    assert type(np.asarray(x)) is np.ndarray
    # an ndarray meeting a rune array by an operator or a ufunc gives a rune array
    assert isinstance(W + x, nx.Array) and isinstance(W @ x, nx.Array) and isinstance(np.add(W, x), nx.Array)
    # a call rune has no counterpart for runs NumPy's own on the values
    out = np.exp(x, out=np.zeros_like(X))
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, np.exp(X))
    np.testing.assert_array_equal(np.real_if_close(x), np.real_if_close(X))
    # arguments rune's function lacks go to the array's method, as NumPy's own calls it
    assert isinstance(np.sum(x, axis=0), nx.Array) and isinstance(np.std(x, where=X > 0), nx.Array)
    with pytest.raises(rune.errors.IndexingError):   # np.take's default: out of bounds raises
        np.take(x, 99)


# NumPy's own arguments, bound to NumPy's signature and passed to rune by meaning:
# values on data with a tie (so the order of ties shows), compared with NumPy's
# output exactly, under jit and vmap; derivatives on X (no ties) under grad.
V = np.array([3.0, 1.0, 2.0, 1.0])
ARGUMENT_CASES = {
    # (NumPy's kind= by position was rune's descending=)
    "sort kind by position": lambda x: np.sort(x, 0, "quicksort"),
    "sort kind keyword": lambda x: np.sort(x, axis=-1, kind="heapsort"),
    "sort stable keyword": lambda x: np.sort(x, stable=True),
    "argsort kind by position": lambda x: np.argsort(x, 0, "stable"),
    "argsort mergesort keyword": lambda x: np.argsort(x, kind="mergesort"),
    "argsort default": lambda x: np.argsort(x, axis=0),
    # (NumPy's array `a` was rune's axis `a`)
    "swapaxes by position": lambda x: np.swapaxes(np.reshape(x, (1, 2, 2)), 0, 2),
    "swapaxes keywords": lambda x: np.swapaxes(a=np.reshape(x, (2, 2)), axis1=1, axis2=0),
    "clip a_min a_max keywords": lambda x: np.clip(x, a_min=1.5, a_max=2.5),
    "tile": lambda x: np.tile(x, 2),
    "diff n by position": lambda x: np.diff(x, 2, 0),
    "take keywords": lambda x: np.take(x, indices=np.array([3, 0]), axis=0),
    "cumsum dtype keyword": lambda x: np.cumsum(x, axis=0, dtype=np.float32),
    "where": lambda x: np.where(x > 1.5, x, -x),
}


@pytest.mark.parametrize("name", list(ARGUMENT_CASES))
def test_numpy_arguments_mean_what_they_mean_to_numpy(name):
    f = ARGUMENT_CASES[name]
    want = f(V)
    for got in (rune.jit(f)(nx.asarray(V)), rune.vmap(f)(nx.asarray(np.stack([V, V])))[1]):
        # (indices are rune's default int, int32 as in JAX, where NumPy's are int64)
        assert np.dtype(got.dtype) == want.dtype or np.dtype(got.dtype).kind == want.dtype.kind == "i"
        np.testing.assert_array_equal(np.asarray(got), want)
    if want.dtype == np.float64:  # the derivative of a weighted sum, against NumPy's by differences
        def loss(x):
            return np.sum(np.sin(f(x)) * np.arange(1.0, want.size + 1).reshape(want.shape))
        fd = fd_grad(lambda v: _value(loss, v), np.array([3.0, 1.0, 2.0, 0.5]))
        got = rune.grad(loss)(nx.asarray(np.array([3.0, 1.0, 2.0, 0.5])))
        np.testing.assert_allclose(np.asarray(got), fd, rtol=1e-6, atol=1e-8)


def test_numpy_argsort_indices_are_numpy_stable_ones_under_grad():
    # the indices chosen inside grad decide which elements the derivative reaches
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    f = lambda x: np.sum(np.take(x, np.argsort(x, 0, "stable")) * w)
    got = rune.grad(f)(nx.asarray(V))
    want = np.zeros(4)
    want[np.argsort(V, kind="stable")] = w  # d/dx[i] is the weight at x[i]'s sorted place
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("call, match", [
    (lambda x: np.sort(x, kind="bogus"), r"numpy\.sort: kind must be one of"),
    (lambda x: np.sort(x, order="f"), r"numpy\.sort: its argument order='f'"),
    (lambda x: np.argsort(x, order="f"), r"numpy\.argsort: its argument order='f'"),  # (np.pad's modes all run now)
    (lambda x: np.place(x, x > 1, 0.0), r"numpy\.place: its argument mask="),
    (lambda x: np.add(x, x, dtype=np.int32), r"numpy\.add: dtype=.*int32"),
    (lambda x: np.sqrt(x, dtype=np.int64), r"numpy\.sqrt: dtype=.*int64"),
])
def test_numpy_argument_rune_cannot_honour_raises_naming_it(call, match):
    with pytest.raises(rune.RuneError, match=match):
        rune.jit(call)(nx.asarray(V))


I8 = np.array([100, 120, -128], np.int8)
DTYPE_CASES = {
    # dtype= picks NumPy's loop: the inputs are cast to it before computing
    "add int8 as int32": (lambda x: np.add(x, x, dtype=np.int32), I8),
    "multiply int8 scalar as int16": (lambda x: np.multiply(x, 3, dtype=np.int16), I8),
    "negative int8 as float64": (lambda x: np.negative(x, dtype=np.float64), I8),
    "divide float32 as float64": (lambda x: np.divide(x, 3, dtype=np.float64),
                                  np.array([1.0, 2.0, 10.0], np.float32)),
    "sqrt float64 as float32": (lambda x: np.sqrt(x, dtype=np.float32), np.array([2.0, 3.0, 1e-50])),
    "less with bool output": (lambda x: np.less(x, 110, dtype=bool), I8),
    "add.outer int8 as int32": (lambda x: np.add.outer(x, x, dtype=np.int32), I8),
    "add.reduce int8 as int16": (lambda x: np.add.reduce(x, dtype=np.int16), I8),
}


@pytest.mark.parametrize("name", list(DTYPE_CASES))
def test_numpy_ufunc_dtype_computes_in_that_dtype(name):
    f, v = DTYPE_CASES[name]
    want = f(v)
    got = rune.jit(f)(nx.asarray(v))
    assert np.dtype(got.dtype) == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)
    if v.dtype.kind == "f":  # the primal under jvp too, and the derivative in the loop's dtype
        out, t = rune.jvp(f, (nx.asarray(v),), (nx.asarray(np.ones_like(v)),))
        assert np.dtype(out.dtype) == want.dtype and np.dtype(t.dtype) == want.dtype
        np.testing.assert_array_equal(np.asarray(out), want)


_kernels = precompiled(lambda: [*((rune.grad(f), (nx.asarray(X),)) for f in CASES.values()),
                                *((f, (nx.asarray(V),)) for f in ARGUMENT_CASES.values()),
                                *((f, (nx.asarray(v),)) for f, v in DTYPE_CASES.values())])
