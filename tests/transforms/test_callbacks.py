"""Tests of host callbacks and custom derivative rules.

Callbacks are effects: counted with a Python counter and with
rune.stats()['callbacks_run'], ordered by a log they append to. Custom rules are
checked against exact formulas and against the pullback they supply.
"""
import numpy as np
import pytest

import rune
from rune import nx
from rune.core import trace as _trace

F64 = nx.float64


def f64(x):
    return nx.asarray(np.asarray(x, dtype=np.float64))


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def ran():
    return rune.stats()["callbacks_run"]


class Recorder:
    """Host functions that log (tag, value) and return their argument (times `scale`)."""

    def __init__(self):
        self.log = []

    def fn(self, tag, scale=1.0):
        def host(x):
            assert isinstance(x, nx.Array)  # concrete, on the host
            self.log.append((tag, np.asarray(x).tolist()))
            return x * scale
        host.__name__ = f"host_{tag}"
        return host

    def tags(self):
        return [t for t, _ in self.log]


# ---------------------------------------------------------------- counts

def _two_callbacks(rec):
    def f(x):
        y = rune.callback(rec.fn("a", 2.0), x, like=x)
        return rune.callback(rec.fn("b", 2.0), y + 1, like=x)
    return f


def test_no_callback_runs_at_trace_time():
    rec = Recorder()
    f = _two_callbacks(rec)
    x = f64(1.5)
    program = rune.trace(f)(x)
    assert repr(program).count("callback") == 2
    jf = rune.jit(f)
    jf.trace(x)
    jf.plan(x)
    assert rec.log == [] and ran() == 0


def test_once_per_call_eagerly():
    rec = Recorder()
    f = _two_callbacks(rec)
    out = f(f64(1.5))
    close(out, (1.5 * 2 + 1) * 2)
    assert rec.log == [("a", 1.5), ("b", 4.0)]
    assert ran() == 2
    f(f64(0.5))
    assert len(rec.log) == 4 and ran() == 4


def test_once_per_call_under_jit():
    rec = Recorder()
    jf = rune.jit(_two_callbacks(rec))
    for k in range(1, 4):
        close(jf(f64(1.5)), 8.0)
        assert len(rec.log) == 2 * k and ran() == 2 * k
    assert rune.stats()["traces"] == 1 and rune.stats()["cache_hits"] == 2
    assert rec.tags() == ["a", "b"] * 3


def test_once_per_row_inside_scan_eager_and_jit():
    count = [0]

    def host(v):
        count[0] += 1
        return v

    xs = f64(np.arange(7.0))

    def f(xs):
        c, ys = rune.scan(lambda c, x: (c + rune.callback(host, x, like=x), c), f64(0.0), xs)
        return c

    close(f(xs), 21.0)
    assert count[0] == 7 and ran() == 7
    jf = rune.jit(f)
    jf(xs)
    jf(xs)
    assert count[0] == 21 and ran() == 21


# ---------------------------------------------------------------- program order

def test_program_order_eager_scan_and_jit():
    rec = Recorder()

    def f(xs):
        def step(c, x):
            rune.callback(rec.fn("pre"), x, like=x)
            c = rune.callback(rec.fn("post"), c + x, like=c)
            return c, c
        c, _ = rune.scan(step, f64(0.0), xs)
        return rune.callback(rec.fn("end"), c, like=c)

    xs = f64([1.0, 2.0, 3.0])
    expected = [("pre", 1.0), ("post", 1.0), ("pre", 2.0), ("post", 3.0), ("pre", 3.0),
                ("post", 6.0), ("end", 6.0)]
    close(f(xs), 6.0)
    assert rec.log == expected
    rec.log.clear()
    close(rune.jit(f)(xs), 6.0)
    assert rec.log == expected


def test_program_order_in_cond_branches():
    rec = Recorder()

    def g(p, x):
        def t(x):
            a = rune.callback(rec.fn("t1"), x, like=x)
            return rune.callback(rec.fn("t2"), a * 2, like=x)

        def f(x):
            return rune.callback(rec.fn("f1"), x * 3, like=x)

        rune.callback(rec.fn("before"), x, like=x)
        out = rune.cond(p, t, f, x)
        rune.callback(rec.fn("after"), out, like=x)
        return out

    x = f64(2.0)
    for run in (g, rune.jit(g)):
        rec.log.clear()
        close(run(True, x), 4.0)
        assert rec.log == [("before", 2.0), ("t1", 2.0), ("t2", 4.0), ("after", 4.0)]
        rec.log.clear()
        close(run(False, x), 6.0)
        assert rec.log == [("before", 2.0), ("f1", 6.0), ("after", 6.0)]


# ---------------------------------------------------------------- like= and result checks

def test_like_with_array_tracer_spec_and_pytree():
    x = f64(2.0)
    assert rune.callback(lambda v: v + 1, x, like=x).dtype == F64

    def with_tracer(x):
        y = x * 2
        return rune.callback(lambda v: v + 1, y, like=y)

    close(rune.jit(with_tracer)(x), 5.0)
    out = rune.callback(lambda v: np.ones((2, 3), np.float32), x, like=rune.Spec((2, 3), nx.float32))
    assert out.shape == (2, 3) and out.dtype == nx.float32
    like = {"a": x, "b": (rune.Spec((2,), nx.float32), rune.Spec((), nx.int32))}

    def host(v):
        return {"a": v, "b": (np.zeros((2,), np.float32), 7)}

    for run in (lambda x: rune.callback(host, x, like=like), rune.jit(lambda x: rune.callback(host, x, like=like))):
        out = run(x)
        close(out["a"], 2.0)
        assert out["b"][0].dtype == nx.float32 and out["b"][0].shape == (2,)
        assert out["b"][1].dtype == nx.int32 and int(out["b"][1]) == 7


def test_python_scalar_results_accepted():
    x = f64(2.0)
    out = rune.callback(lambda v: 3.0, x, like=x)
    assert out.dtype == F64 and float(out) == 3.0
    out = rune.callback(lambda v: 3, x, like=x)
    assert out.dtype == F64 and float(out) == 3.0
    out = rune.callback(lambda v: 5, x, like=rune.Spec((), nx.int32))
    assert out.dtype == nx.int32 and int(out) == 5
    out = rune.jit(lambda v: rune.callback(lambda u: u.item() * 2.0, v, like=v))(x)
    assert out.dtype == F64 and float(out) == 4.0


@pytest.mark.parametrize("bad, what", [
    (lambda v: np.ones((2,), np.float64), "shape"),
    (lambda v: np.ones((), np.float32), "dtype"),
    (lambda v: (v, v), "structure"),
    (lambda v: None, "structure"),
    (lambda v: "text", "str"),
])
def test_wrong_results_raise_callback_error(bad, what):
    bad.__name__ = "my_bad_host"
    x = f64(2.0)
    for run in (lambda x: rune.callback(bad, x, like=x),
                rune.jit(lambda x: rune.callback(bad, x, like=x) + 1)):
        with pytest.raises(rune.CallbackError) as info:
            run(x)
        assert "my_bad_host" in str(info.value)
        assert what in str(info.value)
        assert isinstance(info.value, rune.RuneError)
    assert _trace.current() is _trace.EVAL


def test_out_of_range_python_int_result_is_callback_error():
    with pytest.raises(rune.CallbackError):
        rune.callback(lambda v: 2 ** 40, f64(1.0), like=rune.Spec((), nx.int32))


def test_host_fn_returning_nx_asarray_of_numpy_float64_scalar():
    x = f64([1.0, 2.0, 3.0])
    out = rune.callback(lambda v: nx.asarray(np.sum(np.asarray(v))), x, like=rune.Spec((), F64))
    assert out.dtype == F64 and float(out) == 6.0


# ---------------------------------------------------------------- failures

class Boom(Exception):
    pass


def test_exception_in_fn_is_chained_callback_error():
    def exploding_host(v):
        raise Boom("kaboom")

    x = f64(1.0)
    runs = [lambda x: rune.callback(exploding_host, x, like=x),
            rune.jit(lambda x: rune.callback(exploding_host, x, like=x) * 2),
            lambda x: rune.scan(lambda c, r: (c + rune.callback(exploding_host, r, like=r), None),
                                x, f64([1.0, 2.0]))[0]]
    for run in runs:
        with pytest.raises(rune.CallbackError) as info:
            run(x)
        assert isinstance(info.value.__cause__, Boom)
        assert "exploding_host" in str(info.value)
        assert "kaboom" in str(info.value)
        assert isinstance(info.value, RuntimeError)
        assert _trace.current() is _trace.EVAL


def test_next_call_works_after_failure():
    fail = [True]
    count = [0]

    def flaky(v):
        count[0] += 1
        if fail[0]:
            raise ZeroDivisionError("nope")
        return v

    def f(xs):
        return rune.scan(lambda c, x: (c + rune.callback(flaky, x, like=x), None), f64(0.0), xs)[0]

    jf = rune.jit(f)
    ok = rune.jit(lambda x: x * 3)
    xs = f64([0.3, -0.5])
    with pytest.raises(rune.CallbackError):
        jf(xs)
    assert _trace.current() is _trace.EVAL
    # an unrelated jitted function and eager ops still work
    close(ok(xs), [0.9, -1.5])
    close(xs * 2, [0.6, -1.0])
    fail[0] = False
    before = dict(rune.stats())
    close(jf(xs), -0.2)  # the same jitted function now works, from its cache
    after = rune.stats()
    assert after["traces"] == before["traces"]
    assert after["cache_hits"] == before["cache_hits"] + 1
    assert after["callbacks_run"] == before["callbacks_run"] + 2
    # and under grad
    fail[0] = True
    with pytest.raises(rune.CallbackError):
        rune.grad(lambda a: f(xs) * a)(f64(1.5))
    fail[0] = False
    close(rune.grad(lambda a: f(xs) * a)(f64(1.5)), -0.2)
    assert _trace.current() is _trace.EVAL


# ---------------------------------------------------------------- differentiation

def test_grad_or_jvp_through_callback_raises():
    x = f64(2.0)

    def f(x):
        return rune.callback(lambda v: v, x, like=x) * x

    with pytest.raises(rune.NotDifferentiableError) as info:
        rune.grad(f)(x)
    assert "custom_vjp" in str(info.value)
    with pytest.raises(rune.NotDifferentiableError) as info:
        rune.jvp(f, (x,), (f64(1.0),))
    assert "custom_jvp" in str(info.value)
    with pytest.raises(rune.NotDifferentiableError):
        rune.jit(rune.grad(f))(x)
    assert _trace.current() is _trace.EVAL


def test_derivatives_fine_when_callback_does_not_depend_on_input():
    count = [0]

    def host(v):
        count[0] += 1
        return v * v

    x, y = f64(2.0), f64(3.0)

    def f(x, y):
        return rune.callback(host, y, like=y) * x

    close(rune.grad(f)(x, y), 9.0)
    out, t = rune.jvp(lambda x: f(x, y), (x,), (f64(1.0),))
    close(out, 18.0)
    close(t, 9.0)
    close(rune.jit(rune.grad(f))(x, y), 9.0)
    assert count[0] == 3
    # a callback on an integer value inside a differentiated function
    g = rune.grad(lambda x: x * rune.callback(lambda i: i + 1, nx.scalar(3, nx.int32),
                                              like=rune.Spec((), nx.int32)))(x)
    close(g, 4.0)


def test_callback_with_unused_result_depending_on_input_is_fine_under_grad():
    rec = Recorder()
    x = f64(2.0)

    def f(x):
        rune.callback(rec.fn("side"), x, like=x)
        return x * x

    close(rune.grad(f)(x), 4.0)
    close(rune.jit(rune.grad(f))(x), 4.0)
    assert rec.log == [("side", 2.0), ("side", 2.0)]


def test_callback_on_stop_gradient_value_under_grad():
    x = f64(2.0)

    def f(x):
        return rune.callback(lambda v: v, rune.stop_gradient(x), like=x) * x

    _, t = rune.jvp(f, (x,), (f64(1.0),))
    close(t, 2.0)
    close(rune.grad(f)(x), 2.0)


def test_unused_callback_is_not_removed_by_dce_under_jit():
    rec = Recorder()

    def f(x):
        rune.callback(rec.fn("unused"), x, like=x)
        return x * 2

    jf = rune.jit(f)
    close(jf(f64(2.0)), 4.0)
    close(jf(f64(3.0)), 6.0)
    assert rec.log == [("unused", 2.0), ("unused", 3.0)]
    assert "callback" in repr(jf.trace(f64(2.0)))
    assert "callback" in repr(jf.plan(f64(2.0)))


def test_checkpoint_does_not_duplicate_callbacks():
    count = [0]

    def host(v):
        count[0] += 1
        return v

    def f(x):
        return nx.sin(x) * rune.callback(host, f64(2.0), like=x)

    x = f64(0.7)
    try:
        g = rune.grad(rune.checkpoint(f))(x)
    except rune.RuneError:
        return  # refusing to rematerialize an effect would also be acceptable
    close(g, 2.0 * np.cos(0.7))
    assert count[0] == 1


# ---------------------------------------------------------------- the seed pattern

def _seed():
    counts = {"solves": 0, "adjoints": 0}

    def solve(theta):
        counts["solves"] += 1
        t = theta.item()
        return nx.scalar(1.0 / (t * t + 1.0), nx.float64)

    def adjoint(theta, u, ct):
        counts["adjoints"] += 1
        t, u, ct = theta.item(), u.item(), ct.item()
        return nx.scalar(-2.0 * t * u * ct / (t * t + 1.0), nx.float64)

    @rune.custom_vjp
    def state(theta):
        u = rune.callback(solve, theta, like=theta)

        def pullback(ct):
            return rune.callback(adjoint, theta, u, ct, like=theta)

        return u, pullback

    def loss(thetas):
        total, _ = rune.scan(lambda acc, theta: (acc + state(theta), theta),
                             nx.scalar(0.0, nx.float64), thetas)
        return total

    return counts, loss


def test_seed_pattern_counts_and_gradient():
    counts, loss = _seed()
    thetas = f64([-1.0, 0.0, 0.5, 2.0])
    program = rune.trace(rune.grad(loss))(thetas)    # staging runs no callback
    assert "callback" in repr(program)
    assert counts == {"solves": 0, "adjoints": 0} and ran() == 0
    g = rune.grad(loss)(thetas)
    assert counts == {"solves": 4, "adjoints": 4}
    assert ran() == 8
    exact = [-2.0 * t / (t * t + 1.0) ** 2 for t in thetas.tolist()]
    assert np.max(np.abs(np.asarray(g) - exact)) < 1e-12
    counts["solves"] = counts["adjoints"] = 0
    step = rune.jit(rune.grad(loss))
    close(step(thetas), exact)
    close(step(thetas), exact)
    assert counts == {"solves": 8, "adjoints": 8}
    # the forward alone runs only the solves
    counts["solves"] = counts["adjoints"] = 0
    close(loss(thetas), sum(1.0 / (t * t + 1.0) for t in thetas.tolist()))
    assert counts == {"solves": 4, "adjoints": 0}


# ---------------------------------------------------------------- custom_vjp

def test_wrong_custom_pullback_is_what_grad_returns():
    @rune.custom_vjp
    def wrong(x):
        return nx.sin(x), lambda ct: ct * 100.0

    x = f64(0.7)
    close(wrong(x), np.sin(0.7))
    close(rune.grad(wrong)(x), 100.0)
    close(rune.jit(lambda x: rune.grad(wrong)(x))(x), 100.0)
    close(rune.grad(lambda x: wrong(x) * 2.0)(x), 200.0)


def test_pullback_closing_over_intermediates():
    @rune.custom_vjp
    def triple_exp(x):
        e = nx.exp(x)
        s = e * 3
        return s, lambda ct: ct * s

    x = f64(0.7)
    close(rune.grad(triple_exp)(x), 3 * np.exp(0.7))
    close(rune.jit(lambda v: rune.grad(triple_exp)(v))(x), 3 * np.exp(0.7))
    ts = f64([0.1, 0.2, -0.3])

    def loss(ts):
        return rune.scan(lambda c, t: (c + triple_exp(t) * t, None), f64(0.0), ts)[0]

    exact = 3 * np.exp(np.asarray(ts)) * (np.asarray(ts) + 1)  # d/dt (3 e^t t)
    close(rune.grad(loss)(ts), exact)
    close(rune.jit(rune.grad(loss))(ts), exact)
    close(rune.grad(rune.jit(loss))(ts), exact)


def test_multi_argument_custom_vjp_with_none_cotangent():
    @rune.custom_vjp
    def mul(a, b):
        return a * b, lambda ct: (ct * b, None)

    a, b = f64(0.7), f64(1.3)
    ga, gb = rune.grad(mul, argnums=(0, 1))(a, b)
    close(ga, 1.3)
    close(gb, 0.0)
    assert gb.dtype == F64 and gb.shape == ()

    @rune.custom_vjp
    def affine(p, z):
        out = p["w"] * z + p["b"]
        return out, lambda ct: ({"w": ct * z, "b": ct}, ct * p["w"])

    gp, gz = rune.grad(affine, argnums=(0, 1))({"w": a, "b": b}, f64(2.0))
    close(gp["w"], 2.0)
    close(gp["b"], 1.0)
    close(gz, 0.7)


def test_cotangent_shape_mismatch_raises():
    @rune.custom_vjp
    def badshape(a):
        return a * 2, lambda ct: nx.stack([ct, ct])

    with pytest.raises(rune.ShapeError) as info:
        rune.grad(badshape)(f64(0.7))
    assert "badshape" in str(info.value)

    @rune.custom_vjp
    def badcount(a, b):
        return a * b, lambda ct: (ct,)

    with pytest.raises(rune.TreeError):
        rune.grad(badcount)(f64(0.7), f64(1.0))
    assert _trace.current() is _trace.EVAL


def test_custom_vjp_under_jvp_raises():
    @rune.custom_vjp
    def f(x):
        return nx.sin(x), lambda ct: ct * nx.cos(x)

    with pytest.raises(rune.NotDifferentiableError) as info:
        rune.jvp(f, (f64(0.7),), (f64(1.0),))
    assert "custom_jvp" in str(info.value)
    assert _trace.current() is _trace.EVAL


def test_custom_jvp_used_by_jvp_and_errors_under_grad():
    def rule(primals, tangents):
        (x,), (t,) = primals, tangents
        return nx.sin(x), nx.cos(x) * t * 10.0

    f = rune.custom_jvp(lambda x: nx.sin(x), rule)
    x = f64(0.7)
    close(f(x), np.sin(0.7))
    out, t = rune.jvp(f, (x,), (f64(1.0),))
    close(out, np.sin(0.7))
    close(t, np.cos(0.7) * 10.0)
    out, t = rune.jit(lambda v: rune.jvp(f, (v,), (f64(2.0),)))(x)
    close(t, np.cos(0.7) * 20.0)
    with pytest.raises(rune.NotDifferentiableError) as info:
        rune.grad(f)(x)
    assert "custom_vjp" in str(info.value)
    assert _trace.current() is _trace.EVAL


def test_trace_shows_custom_vjp_call_and_its_backward_program_only_when_differentiated():
    @rune.custom_vjp
    def scaled(x):
        e = nx.exp(x)
        return e * 3, lambda ct: nx.tanh(ct * e)

    text = repr(rune.trace(scaled)(f64(0.7)))
    assert "custom_vjp_call" in text and "fwd=" in text and "scaled" in text
    assert "tanh" not in text  # a plain call never stages the pullback
    text = repr(rune.trace(rune.grad(lambda x: nx.sum(scaled(x))))(f64(0.7)))
    assert "tanh" in text  # the backward program's own operation


def test_custom_rules_take_keyword_arguments_at_their_positions():
    @rune.custom_vjp
    def f(x, y):
        return x * y, lambda ct: (ct * y * 10.0, ct * x)

    assert float(rune.grad(lambda a: f(a, y=f64(3.0)))(f64(2.0))) == 30.0  # the rule's cotangent
    assert float(rune.grad(lambda b: f(f64(2.0), y=b))(f64(3.0))) == 2.0
    g = rune.custom_jvp(lambda x, scale: x * scale, lambda p, t: (p[0] * p[1], t[0] * p[1] * 5.0))
    _, t = rune.jvp(lambda x: g(x, scale=f64(2.0)), (f64(1.0),), (f64(1.0),))
    assert float(t) == 10.0
