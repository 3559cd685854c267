"""Tests of rune.jit: results equal eager, the signature cache, trace-time
semantics, programs and plans, and recovery after failures."""
from typing import NamedTuple

import numpy as np
import pytest

import rune
from rune import nn, nx
from rune.core import trace as _trace
from rune.core.aval import Aval

from compiled import precompiled

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


EQUAL_EAGER = [_chain, _reduce, _mat, _index]


def _xy():
    rng = np.random.default_rng(0)
    return f64(rng.normal(size=(3, 3))), f64(rng.normal(size=(3, 3)))


# (The tests of the signature cache count traces and hits of their own jit: their
# kernels are left to them.)
_kernels = precompiled(lambda: [(fn, _xy()) for fn in EQUAL_EAGER])


@pytest.mark.parametrize("fn", EQUAL_EAGER)
def test_jit_equals_eager(fn):
    x, y = _xy()
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


class _Scaled(nn.Module):
    w: object
    b: object
    power: int  # static: part of the signature

    def __call__(self, x):
        return (x * self.w + self.b) ** self.power


class _State(NamedTuple):
    count: object
    moments: dict


def _update(model, state, x):
    y = model(x)
    new = rune.tree.map(lambda p: p * 0.5 + y.mean(), model)
    moments = {"m": state.moments["m"] * 0.9 + y, "v": [v + 1 for v in state.moments["v"]]}
    return new, _State(state.count + 1, moments), y.sum()


def _start():
    model = _Scaled(w=f32([1.0, 2.0]), b=f32([0.5, -0.5]), power=2)
    return model, _State(f32(0.0), {"m": f32([0.0, 0.0]), "v": [f32([1.0, 1.0])]}), f32([0.25, 0.75])


def _same_as_eager(got, want):
    assert rune.tree.structure(got) == rune.tree.structure(want)
    for g, w in zip(rune.tree.leaves(got), rune.tree.leaves(want)):
        # eager arithmetic on a Python scalar stays one; jit returns it as a weak array
        assert g.aval.weak if type(w) in (int, float) else g.aval == w.aval
        close(g, w, 1e-6)


def test_pytree_calls_with_the_last_signature_hit_the_cache():
    # A training loop: module, NamedTuple, dict and list arguments, each call fed
    # the last one's results (new arrays, the same structure).
    jf, eager = rune.jit(_update), _start()
    model, state, x = eager
    for _ in range(6):
        model, state, out = jf(model, state, x)
        eager = _update(*eager[:2], x)
        _same_as_eager((model, state, out), eager)
    assert counts() == (1, 5) and len(jf.cache) == 1
    assert jf._match is not None  # the later calls were matched, not flattened


def test_pytree_calls_retrace_on_any_signature_change():
    jf = rune.jit(_update)
    model, state, x = _start()
    for _ in range(3):
        jf(model, state, x)
    assert jf._match is not None  # calls of this signature are matched against it
    changed = {
        "static field": (model.replace(power=3), state, x),
        "tree structure": (model, state._replace(moments={**state.moments, "v": [f32([1.0, 1.0]), f32([2.0])]}),
                           x),
        "list for tuple": (model, state._replace(moments={**state.moments, "v": (f32([1.0, 1.0]),)}), x),
        "dtype": (model, state, f64([0.25, 0.75])),
        "shape": (model, state._replace(moments={**state.moments, "m": f32([[0.0, 0.0]])}), x),
        "weak type": (model, state._replace(count=rune.jit(lambda: 0.0)()), x),
        "aliasing": (model, state._replace(moments={"m": x, "v": [x]}), x),
        "python scalar": (model, state._replace(count=0), x),  # a weak int32 leaf, converted: not matched
    }
    traces = counts()[0]  # jf's first trace, and the weak scalar's
    for what, args in changed.items():
        for _ in range(2):  # traced, then hit
            _same_as_eager(jf(*args), _update(*args))
            traces_now, _ = counts()
            assert traces_now == traces + 1, what
            _same_as_eager(jf(model, state, x), _update(model, state, x))  # the first signature hits again
            assert counts()[0] == traces + 1, what
        traces += 1
    assert len(jf.cache) == 1 + len(changed)


def test_pytree_call_with_a_bad_leaf_names_it_after_a_matched_call():
    jf = rune.jit(_update)
    model, state, x = _start()
    for _ in range(3):
        jf(model, state, x)
    with pytest.raises(rune.DTypeError, match=r"args\[1\]\.count has type str"):
        jf(model, state._replace(count="zero"), x)
    _same_as_eager(jf(model, state, x), _update(model, state, x))


def _mixed_outputs(t, s):
    return {"a": t[0] * 2, "b": (t[1] > 0, t[1].astype(nx.int32)), "s": s * 2, "c": 3}


def test_pytree_outputs_carry_the_avals_of_their_buffers():
    # Outputs are given their avals from the plan (fed back, they key the next
    # call): each must be the one its buffer and placement give.
    jf = rune.jit(_mixed_outputs)
    args = ((f32([1.0, 2.0]), f64([[1.0], [-1.0]])), 2.0)
    for _ in range(3):
        got = jf(*args)
        for g in rune.tree.leaves(got):
            assert g.aval == Aval(g.shape, g.dtype, g.device, g.weak)
        _same_as_eager(got, _mixed_outputs(*args))
        args = ((got["a"], got["b"][1].astype(nx.float64)), got["s"])


@pytest.mark.parametrize("variant", range(9))
def test_structure_matcher_agrees_with_flatten(variant):
    # jit matches arguments with `Structure.matcher`: the same answer as
    # flattening and comparing structures, and each rebuilds (`unflatten`) alike.
    model, state, x = _start()
    base = ([model, state, None, (x,)], {"k": x})
    variants = [
        base,
        ([model, state, None, (x,)], {"k": x * 2}),                               # new leaves
        ([model.replace(power=3), state, None, (x,)], {"k": x}),                  # a static field
        ([model, state, None, [x]], {"k": x}),                                    # list for tuple
        ([model, state, None, (x, x)], {"k": x}),                                 # a longer tuple
        ([model, state, 1.0, (x,)], {"k": x}),                                    # a leaf for None
        ([model, state, None, (x,)], {"j": x}),                                   # another key
        ([model, state, None, (x,)], {"k": (x,)}),                                # a container for a leaf
        ([model, state._replace(count=0.5), None, (x,)], {"k": x}),               # a leaf of another type
    ]
    tree = variants[variant]
    struct = rune.tree.structure(base)
    flat, flat_struct = rune.tree.flatten(tree)
    expected = flat if flat_struct == struct and all(type(v) is nx.Array for v in flat) else None
    match = None
    for _ in range(10):  # compiled once asked for often enough
        match = match or struct.matcher(nx.Array)
    got = match(tree)
    assert (got is None) == (expected is None)
    if expected is not None:
        assert len(got) == len(expected) and all(g is e for g, e in zip(got, expected))
    for _ in range(3):  # folded once, then by the compiled builder
        rebuilt = flat_struct.unflatten(flat)
        assert rune.tree.structure(rebuilt) == flat_struct
        assert all(a is b for a, b in zip(rune.tree.leaves(rebuilt), flat))


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


# ---------------------------------------------------------------- static keys, caches, methods

def test_static_values_equal_across_types_trace_apart():
    # 1 == 1.0 == True and they hash alike, yet each gives its own dtype eagerly.
    f = lambda x, s: x * s[0] if isinstance(s, tuple) else x * s  # noqa: E731
    jf = rune.jit(f, static_argnums=1)
    x = nx.asarray(np.array([1, 2], np.int32))
    for s in (1, 1.0, True, (1,), (1.0,), (True,)):
        eager, got = f(x, s), jf(x, s)
        assert got.dtype == eager.dtype, s
        close(got, eager)
    assert counts() == (6, 0)
    jf(x, 1.0)
    assert counts() == (6, 1)


def test_one_cache_entry_per_signature():
    jf = rune.jit(lambda x, y: x * y)
    a, b = f32([1.0, 2.0]), f32([3.0, 4.0])
    jf(a, b)
    jf(a, 2.0)        # a Python scalar: keyed by its (weak) aval, not by how it was passed
    jf(a, f32(2.0))
    jf(a, b)
    assert len(jf.cache) == 3 and counts() == (3, 1)
    # a weak float32 Array holds a rounded value, a Python float its exact one (staged as a
    # weak float64 that the function sees as float32): each has its own entry
    weak = rune.jit(lambda: 2.0)()
    assert weak.weak and weak.dtype == np.float32
    jf(a, weak)
    jf(a, weak)                      # the fast key finds it
    assert len(jf.cache) == 4 and counts() == (5, 2)


def test_cache_is_bounded_least_recently_used_first():
    jf = rune.jit(lambda x: x + 1)
    jf.cache_size = 3
    xs = [f32(np.arange(n)) for n in range(1, 6)]
    for x in xs[:3]:
        jf(x)
    jf(xs[0])                  # recently used: stays
    jf(xs[3])                  # evicts xs[1], the least recently used
    assert len(jf.cache) == 3 and counts() == (4, 1)
    jf(xs[0])
    assert counts() == (4, 2)
    jf(xs[1])                  # traced again
    assert counts() == (5, 2) and len(jf.cache) == 3
    close(jf(xs[4]), np.arange(5) + 1)
    assert len(jf.cache) == 3


def test_cache_size_from_the_environment(monkeypatch):
    from rune.compiler import api
    monkeypatch.setenv("RUNE_JIT_CACHE_SIZE", "7")
    assert api._env_cache_size() == 7
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("RUNE_JIT_CACHE_SIZE", bad)
        with pytest.raises(rune.ArgumentError, match="RUNE_JIT_CACHE_SIZE"):
            api._env_cache_size()
    assert rune.jit(lambda x: x).cache_size == api.CACHE_SIZE


def test_clear_cache_and_clear_caches():
    jf, jg = rune.jit(lambda x: x * 2), rune.jit(lambda x: x * 3)
    a = f32([1.0])
    jf(a), jg(a)
    jf.clear_cache()
    assert not jf.cache and jg.cache
    close(jf(a), [2.0])
    assert counts() == (3, 0)
    rune.clear_caches()
    assert not jf.cache and not jg.cache
    close(jg(a), [3.0])
    assert counts() == (4, 0)
    assert "clear_caches" in rune.__all__


class _Scaler:
    """Hashable by value: a static `self`."""

    def __init__(self, k):
        self.k = k

    def __hash__(self):
        return hash(self.k)

    def __eq__(self, other):
        return isinstance(other, _Scaler) and other.k == self.k

    @rune.jit(static_argnums=0)
    def scale(self, x):
        return x * self.k

    @rune.jit
    def plain(self, x):
        return x * self.k


def test_jit_on_methods_static_self():
    x = f32([1.0, 2.0])
    close(_Scaler(2.0).scale(x), [2.0, 4.0])
    close(_Scaler(3.0).scale(x), [3.0, 6.0])   # another self: traced apart
    close(_Scaler(2.0).scale(x), [2.0, 4.0])   # an equal self: a hit
    assert counts() == (2, 1)
    assert _Scaler.scale(_Scaler(2.0), x) is not None and counts() == (2, 2)  # unbound: self passed
    bound = _Scaler(2.0).scale
    assert bound.__name__ == "scale" and "f32[2]" in repr(bound.trace(x))
    assert len(bound.plan(x).steps) == 1
    bound.clear_cache()
    assert not _Scaler.scale.cache


def test_jit_on_methods_of_a_pytree_and_an_unusable_self():
    import dataclasses

    @dataclasses.dataclass
    class Linear:
        w: object

        @rune.jit
        def __call__(self, x):
            return x * self.w

    rune.tree.register(Linear)
    x = f32([1.0, 2.0])
    close(Linear(f32([3.0, 4.0]))(x), [3.0, 8.0])
    close(Linear(f32([5.0, 6.0]))(x), [5.0, 12.0])  # the weights are traced: no retrace
    assert counts() == (1, 1)
    with pytest.raises(rune.RuneError, match=r"plain.*args\[0\].*_Scaler.*static"):
        _Scaler(2.0).plain(x)


def test_bad_static_arguments_raise_at_jit_time():
    def one(x):
        return x

    with pytest.raises(rune.ArgumentError, match=r"one.*static_argnums=3"):
        rune.jit(one, static_argnums=3)
    with pytest.raises(rune.ArgumentError, match=r"one.*static_argnums=-2"):
        rune.jit(one, static_argnums=-2)
    with pytest.raises(rune.ArgumentError, match=r"one.*'y'"):
        rune.jit(one, static_argnames="y")
    with pytest.raises(rune.ArgumentError, match=r"one.*'1'"):
        rune.jit(one, static_argnums="1")
    with pytest.raises(rune.UsageError):
        rune.jit(3)
    # a function taking *args or **kwargs may be given any position or name
    jv = rune.jit(lambda *xs: xs[0] * xs[2], static_argnums=2)
    close(jv(f32([1.0]), None, 3), [3.0])
    jk = rune.jit(lambda x, **kw: x * kw["n"], static_argnames="n")
    close(jk(f32([1.0]), n=4), [4.0])


def test_non_array_output_names_function_and_path():
    def labelled(x):
        return {"value": x, "tags": [x, "fine"]}

    with pytest.raises(rune.RuneError, match=r"labelled.*output\['tags'\]\[1\].*str"):
        rune.jit(labelled)(f32([1.0]))
    with pytest.raises(rune.RuneError, match=r"output has type str"):
        rune.jit(lambda x: "done")(f32([1.0]))
    assert counts() == (0, 0)


def test_outputs_keep_weak_type_as_eager():
    h = nx.asarray(np.ones(3, np.float16))
    cases = [(lambda x: x * 2, (1.0,)), (lambda x: x, (2.0,)), (lambda: 2.0, ()),
             (lambda x: (x * 2.0, 3), (h,)), (lambda x: (x + 1) * 0.5, (nx.asarray(2.0),))]
    for fn, args in cases:
        jf = rune.jit(fn)
        for _ in range(2):  # traced, then cached
            for e, g in zip(rune.tree.leaves(fn(*args)), rune.tree.leaves(jf(*args))):
                assert (g + h).dtype == (e + h).dtype
                close(g + h, e + h)
    weak = rune.jit(lambda x: x * 2)(1.0)
    assert (rune.jit(lambda y: y + 1)(weak) + h).dtype == nx.float16  # a weak Array argument


def test_a_python_float_argument_keeps_its_exact_value_where_eager_does():
    # NumPy is the oracle: int32 + 0.798 computes with float64(0.798), not float32(0.798)
    ints = np.array([-2, -20, 7], np.int32)
    q = 0.798
    got = rune.jit(lambda x, s: x + s)(nx.asarray(ints), q)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(got), ints + q)
    table = np.random.default_rng(3).standard_normal((3, 5))
    got = rune.jit(lambda x, s: nx.quantile(x, s, axis=1))(nx.asarray(table), 0.3)
    np.testing.assert_array_equal(np.asarray(got), np.quantile(table, 0.3, axis=1))
    # alone it is float32, as the same float is eagerly
    for fn in (lambda s: nx.multiply(s, 2.0), nx.sin, nx.negative):
        got, eager = rune.jit(fn)(q), fn(q)
        assert got.dtype == np.float32 == eager.dtype
        assert np.asarray(got).tobytes() == np.asarray(eager).tobytes()
    np.testing.assert_array_equal(np.asarray(rune.jit(lambda s: s * 2.0)(q)), np.float32(q) * np.float32(2))


def test_a_spec_without_a_target_is_refused_naming_the_argument():
    jf = rune.jit(lambda x, y: x + y)
    with pytest.raises(rune.ArgumentError, match=r"target=\"cuda\".*Spec\(\(3,\).*at args\[1\]"):
        jf.plan(f32([1.0, 2.0, 3.0]), rune.Spec((3,), np.float32))
    assert jf.plan(rune.Spec((3,), np.float32), rune.Spec((3,), np.float32), target="cuda").kernels


def test_a_python_int_argument_is_checked_and_widened_as_eagerly():
    # eagerly a Python int that does not fit the array's dtype raises (NumPy 2 as well);
    # under jit it must not wrap silently, and a wide one meeting int64 stays exact
    add = rune.jit(lambda x, n: x + n)
    small = nx.asarray(np.array([1, 2, 3], np.int8))
    for n in (300, -129):
        with pytest.raises(rune.ScalarOverflowError, match=f"add: the Python scalar {n} does not fit in int8"):
            add(small, n)
        with pytest.raises(OverflowError):
            np.array([1, 2, 3], np.int8) + n   # NumPy's own rule, the oracle
    np.testing.assert_array_equal(np.asarray(add(small, 100)), np.array([1, 2, 3], np.int8) + 100)
    with pytest.raises(rune.ScalarOverflowError, match="does not fit in uint8"):
        add(nx.asarray(np.array([1, 2], np.uint8)), -1)
    wide = np.array([1, -5, 7], np.int64)
    got = add(nx.asarray(wide), 2 ** 40)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(got), wide + 2 ** 40)
    # the weak int32 the function sees itself: a value past int32 is refused, as nx.asarray(2**40) is
    with pytest.raises(rune.ScalarOverflowError, match="asarray: the Python scalar 1099511627776 does not fit in int32"):
        rune.jit(lambda n: n * 2)(2 ** 40)
    assert int(rune.jit(lambda n: n * 2)(7)) == 14
