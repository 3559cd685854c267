"""Tests of rune.jit: results equal eager, the signature cache, trace-time
semantics, programs and plans, and recovery after failures."""
import numpy as np
import pytest

import rune
from rune import nx
from rune.core import trace as _trace

F64 = nx.float64


def f64(x):
    return nx.asarray(np.asarray(x, dtype=np.float64))


def f32(x):
    return nx.asarray(np.asarray(x, dtype=np.float32))


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def counts():
    s = rune.stats()
    return s["traces"], s["cache_hits"]


# ---------------------------------------------------------------- results equal eager

def _chain(x, y):
    return nx.tanh(x * y + 1.0) - nx.exp(-x) / (1.0 + y * y)


def _reduce(x, y):
    return {"sum": (x * y).sum(axis=0), "max": nx.max(x - y, axis=1), "mean": nx.mean(x)}


def _mat(x, y):
    return nx.where(x > 0, nx.matmul(x, y.T), -x) + nx.log1p(nx.abs(y))


def _index(x, y):
    return x[1:, ::2] * y[0, 1] + nx.concatenate([x, y], axis=1)[1:, 0][:, None]


@pytest.mark.parametrize("fn", [_chain, _reduce, _mat, _index])
def test_jit_equals_eager(fn):
    rng = np.random.default_rng(0)
    x, y = f64(rng.normal(size=(3, 3))), f64(rng.normal(size=(3, 3)))
    eager = fn(x, y)
    jf = rune.jit(fn)
    for _ in range(2):
        got = jf(x, y)
        e_leaves, e_struct = rune.tree.flatten(eager)
        g_leaves, g_struct = rune.tree.flatten(got)
        assert e_struct == g_struct
        for e, g in zip(e_leaves, g_leaves):
            assert e.shape == g.shape and e.dtype == g.dtype
            close(g, e, 1e-13)
    assert counts() == (1, 1)


def test_jit_float32_and_weak_scalars_keep_dtypes():
    x = f32([1.0, -2.0, 3.0])
    out = rune.jit(lambda x, s: x * s + 2.0)(x, 0.5)
    assert out.dtype == nx.float32
    close(out, np.array([2.5, 1.0, 3.5], np.float32))


# ---------------------------------------------------------------- the cache

def test_retrace_rules_shape_dtype_and_hits():
    jf = rune.jit(lambda x, y: x * y + 1)
    a, b = f32([1.0, 2.0, 3.0]), f32([2.0, 2.0, 2.0])
    jf(a, b)
    assert counts() == (1, 0)
    jf(b, a)                        # same signature: cache hit
    assert counts() == (1, 1)
    jf(f32([1.0, 2.0]), f32([3.0, 4.0]))   # new shape: retrace
    assert counts() == (2, 1)
    jf(a.astype(F64), b)            # new dtype: retrace
    assert counts() == (3, 1)
    jf(a.astype(F64), b)
    assert counts() == (3, 2)
    close(jf(a, b), [3.0, 5.0, 7.0])
    assert counts() == (3, 3)


def test_retrace_on_static_argnums_value_change():
    calls = []

    def f(x, n):
        calls.append(n)
        return x * n

    jf = rune.jit(f, static_argnums=1)
    a = f32([1.0, 2.0])
    close(jf(a, 2), [2.0, 4.0])
    close(jf(a, 2), [2.0, 4.0])
    assert counts() == (1, 1)
    close(jf(a, 3), [3.0, 6.0])
    assert counts() == (2, 1)
    assert calls == [2, 3]
    neg = rune.jit(lambda x, n: x * n, static_argnums=-1)
    close(neg(a, 5), [5.0, 10.0])


def test_static_argnames():
    def f(x, *, mode):
        return x * 2 if mode == "double" else x * 3

    jf = rune.jit(f, static_argnames="mode")
    a = f32([1.0, 2.0])
    close(jf(a, mode="double"), [2.0, 4.0])
    close(jf(a, mode="triple"), [3.0, 6.0])
    close(jf(a, mode="double"), [2.0, 4.0])
    assert counts() == (2, 1)
    deco = rune.jit(static_argnames=("power",))(lambda x, power: x ** power)
    close(deco(a, power=3), [1.0, 8.0])


def test_unhashable_static_argument_raises():
    jf = rune.jit(lambda x, s: x, static_argnums=1)
    with pytest.raises(rune.RuneError):
        jf(f32([1.0]), [1, 2])


def test_retrace_on_aliasing():
    jf = rune.jit(lambda x, y: x * y)
    a, b = f32([1.0, 2.0]), f32([3.0, 4.0])
    close(jf(a, a), [1.0, 4.0])
    assert counts() == (1, 0)
    close(jf(a, b), [3.0, 8.0])       # same avals, different aliasing: retrace
    assert counts() == (2, 0)
    close(jf(b, b), [9.0, 16.0])
    close(jf(b, a), [3.0, 8.0])
    assert counts() == (2, 2)


def test_python_side_effects_happen_at_trace_time_only(capsys):
    calls = []

    def f(x):
        calls.append(1)
        print("tracing f")
        return x + 1

    jf = rune.jit(f)
    a = f32([1.0])
    for _ in range(3):
        close(jf(a), [2.0])
    assert len(calls) == 1
    assert capsys.readouterr().out.count("tracing f") == 1
    jf(f32([1.0, 2.0]))   # a new signature traces again
    assert len(calls) == 2


# ---------------------------------------------------------------- concretization

@pytest.mark.parametrize("read", [
    lambda x: float(x),
    lambda x: x.item(),
    lambda x: bool(x),
    lambda x: x * 2 if x > 0 else x,
    lambda x: int(x),
], ids=["float", "item", "bool", "if", "int"])
def test_reading_traced_value_raises_concretization_error(read):
    with pytest.raises(rune.ConcretizationError) as info:
        rune.jit(read)(nx.scalar(1.0, nx.float32))
    err = info.value
    assert isinstance(err, TypeError) and isinstance(err, rune.RuneError)
    msg = str(err)
    for hint in ("cond", "static_argnums", "callback"):
        assert hint in msg
    assert _trace.current() is _trace.EVAL
    assert counts()[1] == 0


def test_static_argument_can_be_read():
    jf = rune.jit(lambda x, t: x * 2 if t > 0 else x, static_argnums=1)
    close(jf(f32([1.0]), 1.0), [2.0])
    close(jf(f32([1.0]), -1.0), [1.0])


# ---------------------------------------------------------------- under transformations

def _loss(x):
    return (nx.sin(x) * x + nx.exp(x * 0.5)).sum()


def test_jit_under_grad_jvp_and_outer_jit():
    x = f64([0.3, -1.2, 2.0])
    t = f64([1.0, 0.5, -2.0])
    g = rune.grad(_loss)(x)
    close(g, np.cos(np.asarray(x)) * np.asarray(x) + np.sin(np.asarray(x)) +
          0.5 * np.exp(0.5 * np.asarray(x)))
    close(rune.grad(rune.jit(_loss))(x), g)
    close(rune.jit(rune.grad(_loss))(x), g)
    out, tang = rune.jvp(rune.jit(_loss), (x,), (t,))
    close(out, _loss(x))
    close(tang, np.dot(np.asarray(g), np.asarray(t)))
    close(rune.hessian(rune.jit(_loss))(x), rune.hessian(_loss)(x))
    inner = rune.jit(lambda y: y * 2)
    rune.reset_stats()
    outer = rune.jit(lambda y: inner(y) + 1)
    close(outer(x), np.asarray(x) * 2 + 1)
    assert rune.stats()["traces"] == 1  # the inner jit is traced through


# ---------------------------------------------------------------- programs and plans

def test_trace_returns_printable_program():
    jf = rune.jit(lambda x, y: nx.sin(x) * y + 1.0)
    prog = jf.trace(f32([1.0, 2.0]), f32([3.0, 4.0]))
    assert isinstance(prog, rune.Program)
    text = repr(prog)
    assert "sin" in text and "mul" in text and "add" in text
    assert "f32[2]" in text
    assert len(prog.invars) == 2 and len(prog.outvars) == 1


def test_plan_lists_stretches_and_callback_step():
    def host_solver(v):
        return v * 0.5

    def f(x):
        y = nx.sin(x) * 2.0
        z = rune.callback(host_solver, y, like=y)
        return nx.exp(z) + 1.0

    x = f64([0.1, 0.2])
    jf = rune.jit(f)
    plan = jf.plan(x)
    text = repr(plan)
    assert text.count("stretch") >= 2
    assert "callback host_solver" in text
    lines = [l.strip() for l in text.splitlines()]
    first_stretch = next(i for i, l in enumerate(lines) if "stretch" in l)
    cb = next(i for i, l in enumerate(lines) if "callback" in l)
    last_stretch = max(i for i, l in enumerate(lines) if "stretch" in l)
    assert first_stretch < cb < last_stretch
    close(jf(x), np.exp(np.sin(np.asarray(x))) + 1.0)


def test_plan_lists_loop_and_branch_steps():
    xs = f64([1.0, 2.0, 3.0])
    scan_plan = repr(rune.jit(lambda xs: rune.scan(lambda c, x: (c + nx.sin(x), c), f64(0.0), xs))
                     .plan(xs))
    assert "loop scan" in scan_plan and "length 3" in scan_plan and "sin" in scan_plan
    while_plan = repr(rune.jit(lambda x: rune.while_loop(lambda c: c.sum() < 10, lambda c: c * 2, x))
                      .plan(xs))
    assert "loop while" in while_plan
    cond_plan = repr(rune.jit(lambda p, x: rune.cond(p, lambda x: x, lambda x: -x, x))
                     .plan(True, xs))
    assert "branch" in cond_plan


# ---------------------------------------------------------------- pytrees

def test_jit_pytree_arguments_and_results():
    def f(params, batch):
        out = params["w"] * batch[0] + params["b"]
        return {"out": out, "extra": (batch[1].sum(), None), "list": [out * 2]}

    params = {"w": f32([1.0, 2.0]), "b": f32([0.5, 0.5])}
    batch = (f32([3.0, 4.0]), f32([1.0, 1.0, 1.0]))
    eager = f(params, batch)
    got = rune.jit(f)(params, batch)
    assert rune.tree.structure(got) == rune.tree.structure(eager)
    close(got["out"], eager["out"])
    close(got["extra"][0], 3.0)
    assert got["extra"][1] is None
    close(got["list"][0], eager["list"][0])
    # keyword arguments, dynamic
    jk = rune.jit(lambda x, y=None: x * 2 if y is None else x + y)
    a, b = f32([1.0, 2.0]), f32([3.0, 4.0])
    close(jk(a, y=b), [4.0, 6.0])
    close(jk(x=a, y=b), [4.0, 6.0])
    close(jk(a), [2.0, 4.0])


# ---------------------------------------------------------------- failures

def test_user_exception_leaves_rune_usable():
    def broken(x):
        x * 2  # some traced work before the failure
        raise KeyError("mine")

    jb = rune.jit(broken)
    a = f32([1.0, 2.0])
    with pytest.raises(KeyError):
        jb(a)
    assert _trace.current() is _trace.EVAL
    close(a + 1, [2.0, 3.0])
    close(rune.grad(lambda x: (x * x).sum())(a), [2.0, 4.0])
    with pytest.raises(KeyError):    # not cached as a success
        jb(a)
    ok = rune.jit(lambda x: x - 1)
    close(ok(a), [0.0, 1.0])
    close(ok(a), [0.0, 1.0])
    assert rune.stats()["cache_hits"] >= 1


def test_failed_trace_leaves_counters_unchanged():
    def broken(x):
        raise KeyError("mine")

    before = rune.stats()
    with pytest.raises(KeyError):
        rune.jit(broken)(f32([1.0]))
    assert rune.stats() == before


def test_jit_of_custom_vjp_function():
    @rune.custom_vjp
    def f(x):
        return nx.sin(x), lambda ct: ct * 100.0

    x = f64(0.7)
    close(rune.jit(f)(x), np.sin(0.7))
    close(rune.jit(rune.grad(f))(x), 100.0)


def test_jit_of_grad_of_jit():
    x = f64([0.3, -1.2, 2.0])
    close(rune.jit(rune.grad(rune.jit(_loss)))(x), rune.grad(_loss)(x))


def test_jvp_of_jit_of_custom_jvp_function():
    f = rune.custom_jvp(lambda x: nx.sin(x),
                        lambda p, t: (nx.sin(p[0]), nx.cos(p[0]) * t[0] * 10.0))
    x = f64(0.7)
    _, t = rune.jvp(rune.jit(f), (x,), (f64(1.0),))
    close(t, np.cos(0.7) * 10.0)


def test_an_escaped_tracer_is_named_as_such():
    box = []
    rune.jit(lambda x: box.append(x) or x)(nx.ones(2))  # the tracer leaks into `box`
    for use in (lambda: rune.jit(lambda y: y + box[0])(nx.ones(2)),
                lambda: rune.scan(lambda c, x: (c + box[0], None), nx.zeros(2), nx.ones((3, 2))),
                lambda: nx.ones(2) + box[0]):
        with pytest.raises(rune.RuneError, match="escaped"):
            use()
    np.testing.assert_array_equal(np.asarray(nx.ones(2) + 1), [2.0, 2.0])  # still usable
