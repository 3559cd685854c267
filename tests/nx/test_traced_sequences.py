"""Python lists and tuples holding traced values are differentiated: nx stacks
their elements (as JAX does) instead of converting them through NumPy, which
kept the values only and made every derivative through them silently 0.
Each form is checked against central finite differences of the same function."""
import numpy as np
import pytest

import rune
from rune import nx

from oracles import fd_grad

X = np.array([0.3, -1.2, 0.8])


def _x():
    return nx.asarray(X)  # float64: finite differences to ~1e-9


# Each f(a, b) takes two float64 scalars and returns a float64 scalar; a list of
# traced values goes into an nx function or operator somewhere in it.
FORMS = {
    "asarray": lambda a, b: nx.sum(nx.asarray([a, b * b]) * nx.asarray([2.0, 3.0], nx.float64)),
    "array": lambda a, b: nx.sum(nx.array((a * b, b)) ** 2),
    "sum": lambda a, b: nx.sum([a, a * b]),
    "mean": lambda a, b: nx.mean([a * a, b]),
    "max": lambda a, b: nx.max([a * 3.0, b]),
    "dot": lambda a, b: nx.dot([a, b], [b, 3.0]),
    "where": lambda a, b: nx.sum(nx.where([True, False], [a, b], [b * b, a])),
    "concatenate": lambda a, b: nx.sum(nx.concatenate([[a, b], _x()]) ** 2),
    "stack": lambda a, b: nx.sum(nx.stack([[a, b], [b, 1.0]]) ** 3),
    "array * list": lambda a, b: nx.sum(nx.asarray(X[:2]) * [a, b * b]),
    "list + array": lambda a, b: nx.sum(([a, b] + nx.asarray(X[:2])) ** 2),
    "tuple - array": lambda a, b: nx.sum(nx.exp((a, b) - nx.asarray(X[:2]))),
    "at set": lambda a, b: nx.sum(_x().at[0:2].set([a, b * a]) ** 2),
    "at add": lambda a, b: nx.sum(_x().at[1:].add([b, a]) ** 2),
    "at set array index": lambda a, b: nx.sum(_x().at[nx.asarray([2, 0])].set([a, b]) ** 2),
    "nested": lambda a, b: nx.sum(nx.asarray([[a, 1.0], [2.0, b]]) @ nx.asarray([[a], [b]])),
    "floats and traced": lambda a, b: nx.sum(nx.asarray([a, 2.0, b, -1.5]) ** 2),
    "full": lambda a, b: nx.sum(nx.full((3, 2), [a, b * b]) * nx.asarray(X)[:, None]),
    "nested with arrays": lambda a, b: nx.sum(nx.asarray([_x() * a, [b, 1.0, a]]) ** 2),
}
POINT = (0.7, -1.3)


def _fd(f):
    def scalar(v):
        return float(f(*(nx.asarray(float(e), nx.float64) for e in v)))
    return fd_grad(scalar, np.array(POINT))


def _args():
    return tuple(nx.asarray(p, nx.float64) for p in POINT)


@pytest.mark.parametrize("name", list(FORMS))
def test_grad_through_a_list_of_traced_values_matches_finite_differences(name):
    f = FORMS[name]
    want = _fd(f)
    assert np.any(np.abs(want) > 1e-3)  # a derivative of 0 would pass for the wrong reason
    got = rune.grad(f, argnums=(0, 1))(*_args())
    np.testing.assert_allclose([float(g) for g in got], want, rtol=1e-6, atol=1e-8)
    # staged: jit around grad, and grad through jit
    got_jit = rune.jit(rune.grad(f, argnums=(0, 1)))(*_args())
    np.testing.assert_allclose([float(g) for g in got_jit], want, rtol=1e-6, atol=1e-8)
    got_through = rune.grad(rune.jit(f), argnums=(0, 1))(*_args())
    np.testing.assert_allclose([float(g) for g in got_through], want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["asarray", "where", "at set", "nested"])
def test_jvp_and_vjp_through_a_list_of_traced_values(name):
    f = FORMS[name]
    want = _fd(f)
    tangents = (nx.asarray(1.0, nx.float64), nx.asarray(-2.0, nx.float64))
    _, t = rune.jvp(f, _args(), tangents)
    np.testing.assert_allclose(float(t), want[0] - 2.0 * want[1], rtol=1e-6, atol=1e-8)
    _, pullback = rune.vjp(f, *_args())
    ct = pullback(nx.asarray(1.0, nx.float64))
    np.testing.assert_allclose([float(c) for c in ct], want, rtol=1e-6, atol=1e-8)


def test_vector_valued_list_under_jacfwd_and_jacrev():
    # d/d(a, b) of [a * b, sin(a), b] is [[b, a], [cos a, 0], [0, 1]]
    def f(v):
        return nx.asarray([v[0] * v[1], nx.sin(v[0]), v[1]])
    v = nx.asarray([0.4, 1.7], nx.float64)
    a, b = 0.4, 1.7
    want = np.array([[b, a], [np.cos(a), 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(np.asarray(rune.jacfwd(f)(v)), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(rune.jacrev(f)(v)), want, rtol=1e-12)


def test_list_of_arrays_keeps_values_and_the_elements_dtype():
    a32 = nx.asarray([1.5, 2.5], nx.float32)
    bf = nx.asarray(1.5, nx.bfloat16)
    # Python numbers beside arrays are weak: they never widen the arrays' dtype
    assert nx.asarray([bf, 1.0, 2]).dtype == nx.bfloat16
    assert nx.asarray([a32, [1.0, 2]]).dtype == nx.float32
    i32 = nx.asarray(3, nx.int32)
    assert nx.asarray([i32, 4]).dtype == nx.int32
    # a weak float meeting int32 gives int32's float, float64 (as i32 * 0.5 does); int16's is float32
    assert nx.asarray([i32, 0.5]).dtype == nx.float64
    assert nx.asarray([nx.asarray(3, nx.int16), 0.5]).dtype == nx.float32
    # arrays among themselves promote as NumPy does
    f64 = nx.asarray([0.25, 0.5], nx.float64)
    mixed = nx.asarray([a32, f64])
    assert mixed.dtype == nx.float64 and not mixed.weak
    np.testing.assert_array_equal(np.asarray(mixed), np.array([[1.5, 2.5], [0.25, 0.5]]))
    np.testing.assert_array_equal(np.asarray(nx.asarray([bf, 1.0, 2])).astype(np.float64), [1.5, 1.0, 2.0])
    # NumPy data beside arrays keeps its dtype (strong)
    assert nx.asarray([a32, np.array([1.0, 2.0])]).dtype == nx.float64
    # dtype= wins
    assert nx.asarray([a32, f64], nx.float16).dtype == nx.float16
    # a weak scalar array (from a Python number) becomes a strong element
    weak = nx.asarray(2.0) * 1.0
    assert not nx.asarray([weak, weak]).weak


def test_ragged_list_of_arrays_names_where():
    with pytest.raises(rune.ShapeError, match=r"x\[1\] has shape \(2,\) and x\[0\] has shape \(\)"):
        nx.asarray([nx.asarray(1.0), nx.asarray([1.0, 2.0])])
    with pytest.raises(rune.ShapeError, match="rectangular"):
        rune.grad(lambda a: nx.sum(nx.asarray([[a, a], [a]])))(nx.asarray(1.0))
