"""rune's public API against its documented public API (README, docs/): jit.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, close, f32, f64, stat, stats


# ---------------------------------------------------------------- jit

def test_jit_basic():
    g = rune.jit(lambda x, y: nx.sin(x) * y + 1.0)
    x, y = np.array([0.1, 0.2], np.float32), np.array([3.0, 4.0], np.float32)
    r = g(nx.array(x), nx.array(y))
    assert isinstance(r, nx.Array) and r.dtype == nx.float32
    close(r, np.sin(x) * y + 1.0)


def test_jit_as_decorator_keeps_function():
    @rune.jit
    def f(x):
        return x * 2.0
    assert f(f32(1.0)).tolist() == [2.0]


def test_jit_traces_once_per_signature():
    calls = []
    def f(x):
        calls.append(1)
        return x * 2.0
    g = rune.jit(f)
    g(nx.ones((3,))); g(nx.ones((3,)))
    assert len(calls) == 1
    g(nx.ones((4,)))
    assert len(calls) == 2
    g(nx.ones((3,), dtype=nx.float64))
    assert len(calls) == 3
    g(nx.ones((3,)))
    assert len(calls) == 3


def test_jit_retraces_on_tree_structure():
    calls = []
    def f(t):
        calls.append(1)
        return rune.tree.map(lambda a: a + 1.0, t)
    g = rune.jit(f)
    g((f32(1.0), f32(2.0)))
    g([f32(1.0), f32(2.0)])
    g((f32(3.0), f32(4.0)))
    assert len(calls) == 2


def test_jit_python_side_effects_at_trace_time_only():
    log = []
    g = rune.jit(lambda x: (log.append("traced"), x + 1.0)[1])
    for _ in range(3):
        g(f32(1.0))
    assert log == ["traced"]


def test_jit_values_not_baked_in():
    g = rune.jit(lambda x: x * 2.0)
    assert g(f32(1.0)).tolist() == [2.0]
    assert g(f32(5.0)).tolist() == [10.0]


def test_jit_python_scalar_args_are_dynamic():
    g = rune.jit(lambda x, s: x * s)
    assert g(f32(1.0), 2.0).tolist() == [2.0]
    assert g(f32(1.0), 3.0).tolist() == [3.0]
    assert g(f32(1.0), 3.0).dtype == nx.float32


def test_jit_static_argnums():
    calls = []
    def f(x, n):
        calls.append(n)
        for _ in range(n):
            x = x * 2.0
        return x
    g = rune.jit(f, static_argnums=(1,))
    assert g(f32(1.0), 3).tolist() == [8.0]
    assert g(f32(1.0), 3).tolist() == [8.0]
    assert g(f32(1.0), 2).tolist() == [4.0]
    assert calls == [3, 2]


def test_jit_static_argnums_int():
    g = rune.jit(lambda x, n: x * n if n > 1 else x, static_argnums=1)
    assert g(f32(2.0), 3).tolist() == [6.0]


def test_jit_static_argnames():
    calls = []
    def f(x, mode="a"):
        calls.append(mode)
        return x + 1.0 if mode == "a" else x - 1.0
    g = rune.jit(f, static_argnames=("mode",))
    assert g(f32(1.0), mode="a").tolist() == [2.0]
    assert g(f32(1.0), mode="b").tolist() == [0.0]
    assert g(f32(1.0), mode="b").tolist() == [0.0]
    assert calls == ["a", "b"]


def test_jit_static_argnames_string():
    g = rune.jit(lambda x, k: x * k, static_argnames="k")
    assert g(f32(2.0), k=4).tolist() == [8.0]


def test_jit_static_argnames_passed_positionally():
    g = rune.jit(lambda x, k: x if k == "id" else -x, static_argnames="k")
    assert g(f32(2.0), "neg").tolist() == [-2.0]


def test_jit_kwargs_dynamic():
    g = rune.jit(lambda x, y=None: x + y)
    assert g(f32(1.0), y=f32(2.0)).tolist() == [3.0]
    assert g(f32(1.0), y=f32(5.0)).tolist() == [6.0]


def test_jit_donate_argnums_accepted():
    g = rune.jit(lambda x, y: x + y, donate_argnums=(0,))
    assert g(f32(1.0), f32(2.0)).tolist() == [3.0]


def test_jit_device_kw_cpu():
    g = rune.jit(lambda x: x + 1.0, device="cpu")
    r = g(f32(1.0))
    assert r.tolist() == [2.0] and str(r.device) == "cpu:0"


def test_jit_cache_hits_and_compiles_in_stats():
    g = rune.jit(lambda x: nx.exp(x) * 3.0 - 1.0)
    g(f32(0.0))
    rune.reset_stats()
    g(f32(0.0))
    assert stat("hit") >= 1
    assert stat("compile") == 0


def test_jit_grad_composition_same_results():
    f = lambda x: (nx.tanh(x) ** 2).sum()
    x = f64(0.3, -0.8)
    want = A(rune.grad(f)(x))
    close(rune.jit(rune.grad(f))(x), want, rtol=1e-13)
    close(rune.grad(rune.jit(f))(x), want, rtol=1e-13)
    close(rune.vmap(rune.jit(nx.sin))(x), np.sin(A(x)), rtol=1e-14)
    close(rune.jit(rune.vmap(nx.sin))(x), np.sin(A(x)), rtol=1e-14)


def test_jit_nested():
    inner = rune.jit(lambda x: x * 2.0)
    outer = rune.jit(lambda x: inner(x) + 1.0)
    assert outer(f32(1.0)).tolist() == [3.0]


def test_jit_closure_constant():
    w = f32(10.0)
    assert rune.jit(lambda x: x * w)(f32(2.0)).tolist() == [20.0]


def test_jit_float64_precision():
    x = np.array([0.1, 0.2, 0.3])
    r = rune.jit(lambda v: nx.exp(nx.sin(v)) / 3.0)(nx.array(x))
    assert r.dtype == nx.float64
    np.testing.assert_allclose(A(r), np.exp(np.sin(x)) / 3.0, rtol=1e-14)


def test_jit_reduction_and_matmul():
    a = np.random.RandomState(0).randn(4, 3)
    g = rune.jit(lambda m: (m @ m.T).sum(axis=1) + m.max())
    close(g(nx.array(a)), (a @ a.T).sum(1) + a.max(), rtol=1e-12)


def test_jit_integer_semantics_match_eager():
    g = rune.jit(lambda a, b: (a // b, a % b))
    q, r = g(nx.array([7, -7]), nx.array([2, 2]))
    assert q.tolist() == [3, -4] and r.tolist() == [1, 1]


@pytest.mark.parametrize("fn", [lambda x: float(x), lambda x: x.item(), lambda x: x * 2.0 if x > 0 else x],
                         ids=["float", "item", "if"])
def test_jit_concretization_error(fn):
    with pytest.raises(rune.ConcretizationError) as ei:
        rune.jit(fn)(nx.array(1.0))
    m = str(ei.value)
    assert "cond" in m and "static_argnums" in m and "callback" in m, m
    assert isinstance(ei.value, rune.RuneError)


def test_trace_concretization_error():
    with pytest.raises(rune.ConcretizationError):
        rune.trace(lambda x: x * 2.0 if x > 0 else x)(nx.array(1.0))


def test_jit_trace_returns_printable_program():
    g = rune.jit(lambda x: nx.sin(x) * 2.0)
    p = g.trace(f32(1.0))
    assert type(p).__name__ == "Program"
    s = str(p)
    assert "sin" in s


def test_jit_plan_printable():
    g = rune.jit(lambda x: nx.sin(x) * 2.0)
    p = g.plan(f32(1.0))
    s = str(p)
    assert isinstance(s, str) and "sin" in s


def test_jit_plan_shows_callback_step():
    def my_host_step(a):
        return np.asarray(a)
    s = str(rune.jit(lambda x: rune.callback(my_host_step, x, like=x) + 1.0).plan(f32(1.0)))
    assert "my_host_step" in s or "callback" in s.lower()


def test_rune_trace_program():
    p = rune.trace(lambda x, y: nx.exp(x) + y)(f32(1.0), f32(2.0))
    assert type(p).__name__ == "Program"
    s = str(p)
    assert "exp" in s and "add" in s


def test_trace_does_not_execute_or_change_stats():
    rune.reset_stats()
    before = stats()
    rune.trace(lambda x: x + 1.0)(f32(1.0))
    after = stats()
    assert after.get("callbacks_run", 0) == before.get("callbacks_run", 0)
