"""Python and NumPy protocols on arrays: pickling and copying, NumPy's functions
on rune arrays, comparisons with None, and values rune must refuse to convert.

Tests that need two host devices run in a child process (tests/host_devices.py).
"""
import copy
import pickle

import numpy as np
import pytest

import rune
from rune import nx

from host_devices import TWO, run_two_devices_tests, two_devices


def _weak_array():
    x = rune.jit(lambda a: a * 2)(1.5)  # a Python scalar argument gives a weak result
    assert isinstance(x, nx.Array)
    return x


# ---------------------------------------------------------------- pickle and copy

ROUND_TRIPS = {
    "pickle": lambda x: pickle.loads(pickle.dumps(x)),
    "deepcopy": copy.deepcopy,
    "copy": copy.copy,
}


@pytest.mark.parametrize("how", ROUND_TRIPS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int8", "bool"])
def test_round_trip_gives_an_equal_array(how, dtype):
    host = (np.arange(6).reshape(2, 3) % 3).astype(nx.dtype(dtype))
    x = nx.asarray(host)
    y = ROUND_TRIPS[how](x)
    assert type(y) is nx.Array
    assert y.dtype == x.dtype and y.shape == x.shape and y.device == x.device and y.weak == x.weak
    np.testing.assert_array_equal(np.asarray(y), host)
    assert np.asarray(y.at[0, 0].set(1)).tolist()[0][0] == 1  # a whole Array, `.at` and all


@pytest.mark.parametrize("how", ROUND_TRIPS)
def test_round_trip_keeps_weak_type(how):
    x = _weak_array()
    y = ROUND_TRIPS[how](x)
    assert y.weak == x.weak
    assert (y + np.float16(1)).dtype == (x + np.float16(1)).dtype


def test_deepcopy_inside_a_pytree_is_independent_of_the_original():
    params = {"w": nx.ones((2, 2)), "b": [nx.zeros(2)]}
    again = copy.deepcopy(params)
    assert type(again["w"]) is nx.Array and type(again["b"][0]) is nx.Array
    assert again["w"]._raw is not params["w"]._raw
    np.testing.assert_array_equal(np.asarray(again["w"]), np.ones((2, 2)))


@two_devices
def test_two_devices_pickle_and_copy_keep_the_device():
    x = nx.place(nx.arange(4.0), "cpu:1")
    for how, round_trip in ROUND_TRIPS.items():
        y = round_trip(x)
        assert str(y.device) == "cpu:1", how
        np.testing.assert_array_equal(np.asarray(y), np.arange(4.0))


@pytest.mark.skipif(TWO, reason="this process already has two host devices")
def test_protocols_with_two_host_devices():
    run_two_devices_tests(__file__)


# ---------------------------------------------------------------- comparisons with None

def test_comparing_with_none_is_an_identity_test():
    x = nx.arange(3.0)
    assert (x == None) is False and (x != None) is True  # noqa: E711
    assert (None == x) is False and (None != x) is True  # noqa: E711
    assert x not in (None,) and [None, x].index(x) == 1
    seen = []

    def f(a):
        seen.append((a == None, a != None))  # noqa: E711
        return a * 2

    np.testing.assert_array_equal(np.asarray(rune.jit(f)(x)), [0.0, 2.0, 4.0])
    rune.grad(lambda a: nx.sum(f(a)))(x)
    rune.vmap(f)(x)
    assert seen == [(False, True)] * 3
    np.testing.assert_array_equal(np.asarray(x == x), [True] * 3)  # arrays still compare elementwise


# ---------------------------------------------------------------- values that are not arrays

class Pair(tuple):
    """A tuple subclass that is neither a NamedTuple nor registered."""


@pytest.mark.parametrize("call", [
    lambda p: nx.asarray(p),
    lambda p: nx.sum(p),
    lambda p: nx.arange(2.0) + p,
    lambda p: rune.jit(lambda t: t)(p),
    lambda p: rune.grad(lambda t: nx.sum(t[0]))(p),
    lambda p: rune.vmap(lambda t: t)(p),
], ids=["asarray", "sum", "operator", "jit", "grad", "vmap"])
def test_an_unregistered_tuple_subclass_is_not_taken_as_an_array(call):
    with pytest.raises(rune.UsageError, match=r"Pair \(a tuple subclass\).*rune\.tree\.register") as info:
        call(Pair((nx.arange(2.0), nx.arange(2.0))))
    assert isinstance(info.value, TypeError)


def test_a_registered_tuple_subclass_is_a_container():
    class Registered(tuple):
        pass

    rune.tree.register(Registered, lambda t: (list(t), None), lambda aux, ch: Registered(ch))
    out = rune.jit(lambda t: t[0] + t[1])(Registered((nx.arange(2.0), nx.ones(2))))
    np.testing.assert_array_equal(np.asarray(out), [1.0, 2.0])


# ---------------------------------------------------------------- NumPy's functions on rune arrays

A = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5) / 3
MASK = (np.arange(24).reshape(2, 3, 4) % 3) != 0

NUMPY_CALLS = [
    (np.sum, {}), (np.sum, dict(axis=1)), (np.sum, dict(axis=(0, 2), keepdims=True)),
    (np.sum, dict(dtype=np.float64)), (np.sum, dict(initial=10.0, axis=0)), (np.sum, dict(where=MASK)),
    (np.prod, dict(axis=2)), (np.prod, dict(initial=2.0, where=MASK, axis=1)),
    (np.max, {}), (np.max, dict(axis=1, keepdims=True)), (np.max, dict(initial=1.5)),
    (np.max, dict(where=MASK, initial=-100.0, axis=2)), (np.amax, dict(axis=0)),
    (np.min, dict(axis=-1)), (np.min, dict(initial=-9.0, axis=(1, 2))), (np.amin, {}),
    (np.mean, {}), (np.mean, dict(axis=(0, 1))), (np.mean, dict(dtype=np.float64, axis=2)),
    (np.mean, dict(where=MASK, axis=1)),
    (np.std, {}), (np.std, dict(ddof=1, axis=2)), (np.std, dict(where=MASK, axis=0, keepdims=True)),
    (np.var, dict(axis=1)), (np.var, dict(ddof=1, where=MASK, axis=2)),
    (np.argmax, {}), (np.argmax, dict(axis=1)), (np.argmin, dict(axis=2, keepdims=True)),
    (np.any, dict(axis=0)), (np.all, dict(where=MASK)), (np.any, dict(where=MASK, axis=2)),
    (np.clip, dict(a_min=-1.0, a_max=1.0)), (np.round, dict(decimals=1)),
    (np.reshape, dict(shape=(4, 6))), (np.transpose, {}), (np.squeeze, {}),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own, for all-masked slices
@pytest.mark.parametrize("fn,kwargs", NUMPY_CALLS,
                         ids=[f"{f.__name__}-{'-'.join(k)}" for f, k in NUMPY_CALLS])
def test_numpy_functions_dispatch_to_the_array_methods(fn, kwargs):
    expected = fn(A, **kwargs)
    got = fn(nx.asarray(A), **kwargs)
    assert isinstance(got, nx.Array), type(got)  # computed by rune, not by NumPy on a copy
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(expected, np.float64), rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's float16 product overflows, as ours
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float64, np.float16, bool])
def test_numpy_dtype_sets_the_accumulator_and_result(dtype):
    ints = np.arange(-30, 30, dtype=np.int32).reshape(6, 10) * 7
    for fn in (np.sum, np.prod):
        got, expected = fn(nx.asarray(ints), axis=1, dtype=dtype), fn(ints, axis=1, dtype=dtype)
        assert got.dtype == expected.dtype
        if np.dtype(dtype).kind == "f":   # inexact products round in rune's order, not NumPy's (docs/design.md)
            np.testing.assert_allclose(np.asarray(got), expected, rtol=4 * np.finfo(dtype).eps)
        else:
            np.testing.assert_array_equal(np.asarray(got), expected)
    if np.dtype(dtype).kind == "f":
        got, expected = np.mean(nx.asarray(ints), axis=0, dtype=dtype), np.mean(ints, axis=0, dtype=dtype)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-3)


def test_initial_over_empty_axes_and_low_precision_where():
    empty = np.zeros((0, 3), np.float32)
    for fn, init in ((np.max, -2.0), (np.min, 4.0), (np.sum, 1.5), (np.prod, 3.0)):
        np.testing.assert_array_equal(np.asarray(fn(nx.asarray(empty), axis=0, initial=init)),
                                      fn(empty, axis=0, initial=init))
    ones = nx.ones(3000, dtype=nx.bfloat16)
    assert float(np.mean(ones, where=np.arange(3000) % 2 == 0)) == 1.0
    np.testing.assert_allclose(float(np.sum(ones, where=np.ones(3000, bool), dtype=np.float32)), 3000.0)


def test_numpy_functions_work_under_transformations():
    x = nx.asarray(A)
    np.testing.assert_allclose(np.asarray(rune.jit(lambda a: np.sum(a, axis=1, initial=1.0))(x)),
                               np.sum(A, axis=1, initial=1.0), rtol=1e-6)
    g = rune.grad(lambda a: np.mean(a * a, where=MASK))(x)
    np.testing.assert_allclose(np.asarray(g), 2 * A * MASK / MASK.sum(), rtol=1e-5, atol=1e-7)
    rows = rune.vmap(lambda a: np.max(a, initial=0.0))(x)
    np.testing.assert_allclose(np.asarray(rows), np.max(A, axis=(1, 2), initial=0.0))


def test_out_and_unknown_keywords_are_clear_errors():
    x = nx.asarray(A)
    for fn in (np.sum, np.max, np.mean, np.std, np.argmax, np.any):
        with pytest.raises(rune.ArgumentError, match=rf"{fn.__name__}: out= must be None"):
            fn(x, out=np.zeros(()))
    with pytest.raises(rune.ArgumentError, match="where= needs initial="):
        np.max(x, where=MASK)
    with pytest.raises(rune.ShapeError, match="initial must be a scalar"):
        np.sum(x, initial=np.ones(2))
    with pytest.raises(rune.ShapeError, match=r"where= of shape \(5,\) does not broadcast"):
        np.sum(x, where=np.ones(5, bool))


# ---------------------------------------------------------------- NumPy arrays meet rune arrays where they are

MEETINGS = {
    "add": lambda x, n, m: x + n,
    "radd": lambda x, n, m: n + x,
    "list": lambda x, n, m: x * [1.0, 2.0, 3.0],
    "where": lambda x, n, m: nx.where(n > 0, x, n),
    "clip": lambda x, n, m: nx.clip(x, n * 0, n),
    "matmul": lambda x, n, m: x @ m,
    "dot": lambda x, n, m: nx.dot(m, x),
    "einsum": lambda x, n, m: nx.einsum("i,ij->j", x, m),
    "stack": lambda x, n, m: nx.stack([n, x]),
    "concatenate": lambda x, n, m: nx.concatenate([n, x]),
    "np.sum where": lambda x, n, m: np.sum(x, where=n > 0),
    "grad": lambda x, n, m: rune.grad(lambda a, b: nx.sum(a * b))(x, n),
    "vmap": lambda x, n, m: rune.vmap(lambda a, b: a * b)(x, n),
    "jit": lambda x, n, m: rune.jit(lambda a, b, c: a * b + c)(x, n, 1.0),
}


@two_devices
@pytest.mark.parametrize("name", MEETINGS)
def test_two_devices_numpy_operands_are_placed_with_the_rune_array(name):
    x = nx.place(nx.asarray(np.array([1.0, 2.0, 3.0], np.float32)), "cpu:1")
    n, m = np.ones(3, np.float32), np.eye(3, dtype=np.float32)
    rune.reset_stats()
    got = MEETINGS[name](x, n, m)
    assert str(got.device) == "cpu:1"
    plain = MEETINGS[name](nx.asarray(np.asarray(x)), n, m)  # the same on the default device
    assert str(plain.device) == "cpu:0"
    np.testing.assert_allclose(np.asarray(got), np.asarray(plain))
    assert rune.stats()["transfers"] == 0  # built there, not moved there


@two_devices
def test_two_devices_rune_arrays_on_different_devices_still_mismatch():
    x = nx.place(nx.arange(3.0), "cpu:1")
    for call in (lambda: x + nx.arange(3.0), lambda: nx.where(x > 0, x, nx.zeros(3)),
                 lambda: nx.stack([x, nx.ones(3)]), lambda: nx.dot(x, nx.ones(3))):
        with pytest.raises(rune.DeviceMismatchError):
            call()
