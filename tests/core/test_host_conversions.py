"""Converting arrays to host values never drops a derivative, and `np.asarray`
views of an immutable Array stay read-only for good.

Under eager grad/jvp/vjp, float(), int(), complex(), operator.index(),
math.* (through float()), np.float64/np.asarray (through __array__), .item()
and .tolist() of a value being differentiated raise NotDifferentiableError, as
JAX's ConcretizationTypeError: returning the value would drop the derivative
silently. Values without one (constants, inputs not differentiated,
stop_gradient's) still convert, and bool() (a branch) works on either.
"""
import math
import operator

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx

CONVERSIONS = {
    "float()": float,
    "int()": int,
    "complex()": complex,
    "operator.index": operator.index,
    "math.sin": math.sin,
    "math.floor": math.floor,
    "np.float64": np.float64,
    "np.asarray": np.asarray,
    ".item()": lambda v: v.item(),
    ".tolist()": lambda v: v.tolist(),
}
# The name each conversion's error gives (math.* and NumPy's go through float() / __array__).
NAMED = {"math.sin": "float()", "math.floor": "float()", "np.float64": "np.asarray", "np.asarray": "np.asarray",
         "operator.index": "index"}


def _in_every_derivative(fn, x):
    """fn(x) run on a value being differentiated under eager grad, jvp and vjp."""
    yield "grad", lambda: rune.grad(lambda v: nx.sum(v * 0) + 0 * fn(v))(x)
    yield "jvp", lambda: rune.jvp(fn, (x,), (nx.ones_like(x),))
    yield "vjp", lambda: rune.vjp(fn, x)


@pytest.mark.parametrize("name", CONVERSIONS)
def test_converting_a_differentiated_value_raises(name):
    convert = CONVERSIONS[name]
    x = nx.asarray(np.float32(2.0))
    for how, run in _in_every_derivative(lambda v: convert(v), x):
        with pytest.raises(rune.NotDifferentiableError) as info:
            run()
        message = str(info.value)
        assert NAMED.get(name, name) in message and "stop_gradient" in message, (how, message)
        assert "derivative" in message and "float32[]" in message


def test_converting_a_batched_value_under_eager_vmap_raises():
    xs = nx.asarray(np.arange(3, dtype=np.float32))
    for convert in (float, int, lambda v: v.item(), np.asarray, math.exp):
        with pytest.raises(rune.ConcretizationError, match="vmap"):
            rune.vmap(lambda v: v * convert(v))(xs)


@pytest.mark.parametrize("name", CONVERSIONS)
def test_values_without_a_derivative_still_convert(name):
    convert = CONVERSIONS[name]
    value = np.int32(3) if name == "operator.index" else np.float32(3.0)
    c = nx.asarray(value)
    want = convert(value)
    assert convert(c) == want   # outside any transformation

    def f(x, c):   # c is an input that is not differentiated; stop_gradient(x) has no derivative
        assert convert(c) == want
        if name != "operator.index":   # (x is a float)
            assert convert(rune.stop_gradient(x)) == convert(np.float32(1.5))
        return x * x * 2
    g = rune.grad(f)(nx.asarray(np.float32(1.5)), c)
    assert float(g) == 6.0   # d/dx 2x^2 at 1.5
    primal, tangent = rune.jvp(lambda x: f(x, c), (nx.asarray(np.float32(1.5)),), (nx.asarray(np.float32(1.0)),))
    assert (float(primal), float(tangent)) == (4.5, 6.0)


def test_branches_on_differentiated_values_still_work():
    def f(x):
        if x > 0:   # a comparison has no derivative
            return x * x
        return -x
    assert float(rune.grad(f)(nx.asarray(np.float32(3.0)))) == 6.0
    assert float(rune.grad(f)(nx.asarray(np.float32(-3.0)))) == -1.0
    # bool() of the differentiated value itself decides a branch; it drops nothing
    assert float(rune.grad(lambda x: x * 3 if x else x)(nx.asarray(np.float32(2.0)))) == 3.0


def test_stop_gradient_is_the_way_to_take_the_value():
    # d/dx [x * c] with c = float(stop_gradient(x)) held constant: c, where float(x) raised
    x = nx.asarray(np.float32(2.5))
    assert float(rune.grad(lambda v: v * float(rune.stop_gradient(v)))(x)) == 2.5
    assert float(rune.grad(lambda v: v * math.sin(rune.stop_gradient(v)))(x)) == pytest.approx(math.sin(2.5))
    # and nx functions keep the derivative: d/dx x sin(x) = sin x + x cos x
    got = float(rune.grad(lambda v: v * nx.sin(v))(x))
    assert got == pytest.approx(math.sin(2.5) + 2.5 * math.cos(2.5), rel=1e-6)


# ---------------------------------------------------------------- read-only views

VIEWED = {
    "f64": np.arange(6.0).reshape(2, 3),
    "bf16": np.arange(6.0).astype(ml_dtypes.bfloat16),
    "c64": np.array([1 + 2j, 3j], np.complex64),
    "bool-0d": np.array(True),
    "i8-empty": np.zeros((0, 2), np.int8),
}


@pytest.mark.parametrize("name", VIEWED)
def test_asarray_views_stay_read_only_for_good(name):
    host = VIEWED[name]
    x = nx.asarray(host)
    captured = rune.jit(lambda a: a + x)   # a jitted function holding x as a constant
    views = [np.asarray(x), np.asarray(x).view(), np.array(x, copy=False)]
    if x.ndim:
        views += [np.asarray(x.T), np.asarray(x[..., ::-1])]   # eager views of x's buffer
    for v in views:
        assert not v.flags.writeable
        with pytest.raises(ValueError):
            v.setflags(write=True)
        with pytest.raises(ValueError):
            v[...] = 0
    np.testing.assert_array_equal(np.asarray(x), host)
    np.testing.assert_array_equal(np.asarray(captured(nx.zeros_like(x))), host + np.zeros_like(host))
    assert np.asarray(x).dtype == host.dtype and np.asarray(x).shape == host.shape


def test_a_copy_is_writable_and_leaves_the_array_alone():
    x = nx.asarray(np.arange(3.0))
    mine = np.array(x)              # NumPy's default copy
    mine[0] = 9
    other = np.asarray(x, dtype=np.float32)   # a conversion is a copy too
    other[1] = 9
    assert mine.flags.writeable and np.asarray(x).tolist() == [0.0, 1.0, 2.0]


def test_a_read_only_view_shares_the_buffer():
    x = nx.asarray(np.arange(4.0))
    a, b = np.asarray(x), np.asarray(x)
    assert np.shares_memory(a, b) and a.ctypes.data == b.ctypes.data   # no copy per conversion
