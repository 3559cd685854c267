"""custom_vjp / custom_jvp: nondiff_argnums (Python values pass through untraced),
a pullback staged only when a derivative is asked for, and the checks on what
the user's rule returns."""
import functools

import numpy as np
import pytest

import rune
from rune import nx
from rune.core import trace as _trace

F64 = nx.float64


def f64(*v):
    return nx.asarray(np.array(v, np.float64))


def close(x, expected, rtol=1e-12):
    np.testing.assert_allclose(np.asarray(x), expected, rtol=rtol)


# ---------------------------------------------------------------- nondiff_argnums

@functools.partial(rune.custom_vjp, nondiff_argnums=(1, 2, 3))
def repeat(x, fn, n, mode):
    # fn, n and mode must arrive as the Python values given: range(n) needs an int.
    assert callable(fn) and type(n) is int and mode in ("sum", "prod")
    y = x
    for _ in range(n):
        y = fn(y)
    return y, lambda ct: ct * float(n) * (10.0 if mode == "sum" else 100.0)  # bare: one diff arg


def test_custom_vjp_nondiff_python_values_pass_through_untraced():
    x = f64(0.5, 1.5)
    close(repeat(x, nx.sin, 2, "sum"), np.sin(np.sin([0.5, 1.5])))
    loss = lambda v, mode: nx.sum(repeat(v, nx.sin, 3, mode))
    close(rune.grad(loss)(x, "sum"), [30.0, 30.0])
    close(rune.grad(loss)(x, "prod"), [300.0, 300.0])
    close(rune.jit(rune.grad(loss), static_argnums=1)(x, "sum"), [30.0, 30.0])
    close(rune.vmap(rune.grad(lambda v: loss(v, "sum")))(x), [30.0, 30.0])
    close(rune.jit(lambda v: repeat(v, nx.cos, 1, "sum"))(x), np.cos([0.5, 1.5]))
    close(rune.grad(loss)(x, mode="sum"), [30.0, 30.0])  # keywords move to their positions


def test_custom_vjp_nondiff_in_the_middle_pullback_returns_the_others():
    @functools.partial(rune.custom_vjp, nondiff_argnums=1)
    def scale(x, k, y):
        return x * k + y, lambda ct: (ct * 7.0, ct * 11.0)  # one per differentiated argument

    gx, gy = rune.grad(lambda a, b: nx.sum(scale(a, 3, b)), argnums=(0, 1))(f64(1.0), f64(2.0))
    assert (float(gx), float(gy)) == (7.0, 11.0)
    assert float(scale(f64(1.0), 3, f64(2.0))) == 5.0


def test_custom_jvp_nondiff_arguments_come_first_to_the_rule():
    seen = []

    def rule(fn, n, primals, tangents):
        seen.append((fn, n))
        (x,), (t,) = primals, tangents
        return power(x, fn, n), t * float(n) * 10.0

    @functools.partial(rune.custom_jvp, nondiff_argnums=(1, 2))
    def power(x, fn, n):
        assert type(n) is int
        return fn(x) ** n

    power.defjvp(rule)
    x = f64(0.3)
    close(power(x, nx.exp, 2), np.exp(0.6))
    _, t = rune.jvp(lambda v: power(v, nx.exp, 2), (x,), (f64(1.0),))
    assert float(t) == 20.0 and seen == [(nx.exp, 2)]
    close(rune.vmap(lambda v: rune.jvp(lambda u: power(u, nx.exp, 3), (v,), (f64(1.0)[0],))[1])(f64(1.0, 2.0)),
          [30.0, 30.0])


@pytest.mark.parametrize("deco", [rune.custom_vjp, rune.custom_jvp])
def test_nondiff_argnums_are_checked(deco):
    if deco is rune.custom_vjp:
        f = deco(lambda x, k: (x * k, lambda ct: ct), nondiff_argnums=(2,))
    else:
        f = deco(lambda x, k: x * k, lambda p, t: (p[0], t[0]), nondiff_argnums=(2,))
    with pytest.raises(rune.ArgumentError, match=r"nondiff_argnums \(2,\) names argument 2.*2 positional"):
        f(f64(1.0), 2)
    with pytest.raises(rune.UsageError, match="nondiff_argnums must be an int or a tuple of ints"):
        deco(lambda x: x, nondiff_argnums=("k",))


# ---------------------------------------------------------------- the pullback is staged lazily

def _counted_square():
    runs = [0]

    @rune.custom_vjp
    def square(x):
        def pullback(ct):
            runs[0] += 1  # a Python side effect: counts every time the pullback is run or staged
            return ct * 2.0 * x
        return x * x, pullback
    return square, runs


def test_a_plain_call_never_runs_or_stages_the_pullback():
    square, runs = _counted_square()
    x = f64(1.0, 3.0)
    close(square(x), [1.0, 9.0])
    jitted = rune.jit(square)
    close(jitted(x), [1.0, 9.0])
    close(jitted(x), [1.0, 9.0])
    close(rune.vmap(square)(x), [1.0, 9.0])
    close(rune.jit(rune.vmap(square))(x), [1.0, 9.0])
    rune.trace(square)(x)
    assert runs[0] == 0
    close(rune.grad(lambda v: nx.sum(square(v)))(x), [2.0, 6.0])
    assert runs[0] == 1  # staged once for the one call under grad
    close(rune.jit(rune.grad(lambda v: nx.sum(square(v))))(x), [2.0, 6.0])
    close(rune.grad(lambda v: nx.sum(rune.vmap(square)(v)))(x), [2.0, 6.0])
    close(rune.vmap(rune.grad(lambda v: square(v)))(x), [2.0, 6.0])
    close(rune.jacrev(square)(x), np.diag([2.0, 6.0]))
    assert runs[0] == 5


def test_a_staged_plain_call_differentiated_later_stages_the_pullback_then():
    square, runs = _counted_square()
    loss = lambda v: rune.scan(lambda c, x: (c + square(x), None), f64(0.0)[0], v)[0]
    x = f64(1.0, 2.0, 3.0)
    close(loss(x), 14.0)
    assert runs[0] == 0
    close(rune.grad(loss)(x), [2.0, 4.0, 6.0])  # the scan body's program is differentiated
    assert runs[0] == 1
    close(rune.grad(rune.grad(lambda v: nx.sum(square(v))))(f64(2.0)[0]), 2.0)


def test_a_pullback_reading_a_traced_value_the_forward_does_not_use_is_refused():
    def loss(x, w):
        @rune.custom_vjp
        def f(x):
            return x * 2.0, lambda ct: ct * w
        return nx.sum(f(x))

    with pytest.raises(rune.NotDifferentiableError, match="forward computation does not use"):
        rune.jit(rune.grad(loss))(f64(1.0), f64(3.0))
    assert _trace.current() is _trace.EVAL
    assert float(rune.grad(loss)(f64(1.0), f64(3.0))) == 3.0  # a concrete w is a constant


# ---------------------------------------------------------------- what the rule returns

def test_custom_vjp_returning_a_bare_array_names_what_came():
    bare = rune.custom_vjp(lambda x: x * 2.0)
    with pytest.raises(rune.TreeError, match=r"pair \(out, pullback\).*got an array float64\[2\]") as e:
        bare(f64(1.0, 2.0))
    assert "Tracer" not in str(e.value)
    with pytest.raises(rune.TreeError, match=r"second element is an array float64\[1\].*not a function"):
        rune.custom_vjp(lambda x: (x, x))(f64(1.0))
    with pytest.raises(rune.TreeError, match="a tuple of 3 elements"):
        rune.custom_vjp(lambda x: (x, x, x))(f64(1.0))


def test_cotangent_dtype_must_equal_the_arguments():
    @rune.custom_vjp
    def f(x, p):
        return x * p["w"], lambda ct: (ct, {"w": nx.astype(ct, F64)})

    x32 = nx.ones((2,), nx.float32)
    with pytest.raises(rune.DTypeError, match=r"argument 1\['w'\] has dtype float64, but the argument "
                                              r"has dtype float32") as e:
        rune.grad(lambda x, p: nx.sum(f(x, p)), argnums=(0, 1))(x32, {"w": x32})
    assert isinstance(e.value, TypeError)

    @rune.custom_vjp
    def g(x):
        return x * 2.0, lambda ct: 3.0  # a Python scalar takes the argument's dtype
    assert rune.grad(lambda v: g(v))(nx.ones((), nx.float32)).dtype == nx.float32
    with pytest.raises(rune.ShapeError, match=r"argument 0 has shape \(5,\), but the argument has shape \(2,\)"):
        rune.grad(lambda v: nx.sum(rune.custom_vjp(lambda x: (x, lambda ct: nx.ones(5)))(v)))(x32)
