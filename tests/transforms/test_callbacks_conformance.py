"""rune's public API against its documented public API (README, docs/): callbacks.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import runpy

import numpy as np
import pytest

import rune
from rune import nx

from api_support import counted_square, double_np, close, f32, f64, is_concrete, mentions_shape, stat


# ---------------------------------------------------------------- callbacks



def test_callback_eager_basic():
    x = f32(1.0, 2.0)
    r = rune.callback(double_np, x, like=x)
    assert isinstance(r, nx.Array) and r.dtype == nx.float32 and r.tolist() == [2.0, 4.0]


def test_callback_fn_can_use_item_and_numpy():
    def fn(a):
        return nx.scalar(a.item() + float(np.asarray(a)), nx.float64)
    r = rune.callback(fn, nx.scalar(1.5, nx.float64), like=nx.scalar(0.0, nx.float64))
    assert r.item() == 3.0


def test_callback_multiple_args():
    r = rune.callback(lambda a, b: np.asarray(a) + np.asarray(b), f32(1.0), f32(2.0), like=f32(0.0))
    assert r.tolist() == [3.0]


def test_callback_spec_like():
    r = rune.callback(lambda a: np.full((2, 2), np.asarray(a).sum(), np.float64), f32(1.0, 2.0),
                      like=rune.Spec((2, 2), nx.float64))
    assert r.shape == (2, 2) and r.dtype == nx.float64 and r.tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_callback_pytree_like():
    like = (rune.Spec((), nx.float32), {"v": rune.Spec((2,), nx.int32)})
    r = rune.callback(lambda a: (np.float32(1.5), {"v": np.array([1, 2], np.int32)}), f32(0.0), like=like)
    assert isinstance(r, tuple) and float(r[0]) == 1.5 and r[1]["v"].tolist() == [1, 2]
    assert r[1]["v"].dtype == nx.int32


def test_callback_python_scalar_result_allowed():
    r = rune.callback(lambda a: 2.5, f32(1.0), like=rune.Spec((), nx.float32))
    assert r.dtype == nx.float32 and float(r) == 2.5


def test_callback_nx_array_result_allowed():
    r = rune.callback(lambda a: nx.array([5.0, 6.0]), f32(1.0), like=rune.Spec((2,), nx.float32))
    assert r.tolist() == [5.0, 6.0]


def test_callback_wrong_shape_raises():
    with pytest.raises(rune.RuneError) as ei:
        rune.callback(lambda a: np.zeros((3,), np.float32), f32(1.0, 2.0), like=f32(0.0, 0.0))
    m = str(ei.value)
    assert mentions_shape(m, (3,)) and mentions_shape(m, (2,)), m


def test_callback_wrong_dtype_raises():
    with pytest.raises(rune.RuneError) as ei:
        rune.callback(lambda a: np.zeros((2,), np.float64), f32(1.0, 2.0), like=f32(0.0, 0.0))
    assert "float64" in str(ei.value) and "float32" in str(ei.value)


def test_callback_scalar_for_nonscalar_like_raises():
    with pytest.raises(rune.RuneError):
        rune.callback(lambda a: 1.0, f32(1.0, 2.0), like=f32(0.0, 0.0))


def test_callback_wrong_structure_raises():
    with pytest.raises(rune.RuneError):
        rune.callback(lambda a: (np.float32(1), np.float32(2)), f32(1.0), like=rune.Spec((), nx.float32))


def test_callback_requires_like_keyword():
    with pytest.raises(TypeError):
        rune.callback(double_np, f32(1.0))


def test_callback_never_runs_at_trace_time():
    calls = []
    def fn(a):
        calls.append(1)
        return np.asarray(a)
    f = lambda x: rune.callback(fn, x, like=x) + 1.0
    prog = rune.trace(f)(f32(1.0))
    assert calls == [] and isinstance(str(prog), str)
    g = rune.jit(f)
    g.trace(f32(1.0))
    assert calls == []
    g.plan(f32(1.0))
    assert calls == []


def test_callback_once_per_jit_call():
    calls = []
    def fn(a):
        calls.append(1)
        return np.asarray(a)
    g = rune.jit(lambda x: rune.callback(fn, x, like=x) * 2.0)
    assert g(f32(1.0)).tolist() == [2.0]
    assert len(calls) == 1
    g(f32(2.0))
    assert len(calls) == 2


def test_callback_once_per_scan_row_eager_and_jit():
    calls = []
    def fn(a):
        calls.append(float(np.asarray(a)))
        return np.asarray(a) * 2
    f = lambda xs: rune.scan(lambda c, x: (c + rune.callback(fn, x, like=x), None), nx.array(0.0), xs)[0]
    xs = f32(1.0, 2.0, 3.0, 4.0)
    assert float(f(xs)) == 20.0 and calls == [1.0, 2.0, 3.0, 4.0]
    calls.clear()
    assert float(rune.jit(f)(xs)) == 20.0 and calls == [1.0, 2.0, 3.0, 4.0]


def test_callback_program_order():
    log = []
    def a(v):
        log.append("a")
        return np.asarray(v)
    def b(v):
        log.append("b")
        return np.asarray(v)
    def f(x):
        y = rune.callback(a, x, like=x)
        rune.callback(b, x, like=x)          # result unused
        return y * 2.0
    f(f32(1.0))
    assert log == ["a", "b"]
    log.clear()
    rune.jit(f)(f32(1.0))
    assert log == ["a", "b"]


def test_callback_unused_result_not_removed_by_jit():
    calls = []
    def fn(v):
        calls.append(1)
        return np.asarray(v)
    def f(x):
        rune.callback(fn, x, like=x)
        return x * 3.0
    assert rune.jit(f)(f32(1.0)).tolist() == [3.0]
    assert len(calls) == 1


def test_callback_not_duplicated_when_result_used_twice():
    calls = []
    def fn(v):
        calls.append(1)
        return np.asarray(v)
    def f(x):
        y = rune.callback(fn, x, like=x)
        return y * 2.0 + nx.sin(y) + y
    rune.jit(f)(f32(1.0))
    assert len(calls) == 1
    calls.clear()
    f(f32(1.0))
    assert len(calls) == 1


def test_callback_not_deduplicated_when_called_twice():
    calls = []
    def fn(v):
        calls.append(1)
        return np.asarray(v)
    def f(x):
        return rune.callback(fn, x, like=x) + rune.callback(fn, x, like=x)
    assert rune.jit(f)(f32(1.0)).tolist() == [2.0]
    assert len(calls) == 2


def test_callback_counted_in_stats():
    rune.reset_stats()
    g = rune.jit(lambda x: rune.callback(double_np, x, like=x))
    g(f32(1.0)); g(f32(1.0))
    assert stat("callback") == 2


def test_callback_grad_raises_not_differentiable():
    with pytest.raises(rune.NotDifferentiableError) as ei:
        rune.grad(lambda x: rune.callback(double_np, x, like=x).sum())(f64(1.0))
    m = str(ei.value)
    assert "custom_vjp" in m and "custom_jvp" in m, m
    assert isinstance(ei.value, rune.RuneError)


def test_callback_jvp_raises_not_differentiable():
    with pytest.raises(rune.NotDifferentiableError):
        rune.jvp(lambda x: rune.callback(double_np, x, like=x), (f64(1.0),), (f64(1.0),))


def test_callback_jit_grad_raises_not_differentiable():
    with pytest.raises(rune.NotDifferentiableError):
        rune.jit(rune.grad(lambda x: rune.callback(double_np, x, like=x).sum()))(f64(1.0))


def test_callback_vmap_sequential_once_per_lane():
    shapes = []
    def fn(a):
        shapes.append(np.asarray(a).shape)
        return np.asarray(a) * 2
    xs = nx.array(np.arange(6, dtype=np.float32).reshape(3, 2))
    r = rune.vmap(lambda row: rune.callback(fn, row, like=row))(xs)
    assert shapes == [(2,), (2,), (2,)]
    close(r, np.arange(6, dtype=np.float32).reshape(3, 2) * 2)


def test_callback_vmap_batched_once_batch_leading():
    shapes = []
    def fn(a):
        shapes.append(np.asarray(a).shape)
        return np.asarray(a) * 2
    xs = nx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    r = rune.vmap(lambda c: rune.callback(fn, c, like=c, vmap_method="batched"), in_axes=1)(xs)
    assert shapes == [(3, 2)]
    close(r, np.arange(6, dtype=np.float32).reshape(2, 3).T * 2)


def test_callback_vmap_unbatched_arg_sequential():
    seen = []
    def fn(a, w):
        seen.append(np.asarray(w).shape)
        return np.asarray(a) * np.asarray(w)[0]
    r = rune.vmap(lambda row, w: rune.callback(fn, row, w, like=row), in_axes=(0, None))(f32(1.0, 2.0), f32(3.0))
    assert r.tolist() == [3.0, 6.0] and seen == [(1,), (1,)]


def test_callback_invalid_vmap_method_raises():
    with pytest.raises(rune.RuneError):
        rune.vmap(lambda r: rune.callback(double_np, r, like=r, vmap_method="bogus"))(f32(1.0, 2.0))


def _exploding_solver(a):
    raise ZeroDivisionError("solver diverged")


def test_callback_error_eager_chained_and_named():
    with pytest.raises(rune.CallbackError) as ei:
        rune.callback(_exploding_solver, f32(1.0), like=f32(0.0))
    assert isinstance(ei.value, rune.RuneError)
    assert isinstance(ei.value.__cause__, ZeroDivisionError)
    assert "_exploding_solver" in str(ei.value)


def test_callback_error_in_jit_and_next_call_works():
    flag = {"fail": True}
    def sometimes(a):
        if flag["fail"]:
            raise RuntimeError("transient")
        return np.asarray(a) + 1
    g = rune.jit(lambda x: rune.callback(sometimes, x, like=x) * 2.0)
    with pytest.raises(rune.CallbackError) as ei:
        g(f32(1.0))
    assert isinstance(ei.value.__cause__, RuntimeError) and "sometimes" in str(ei.value)
    flag["fail"] = False
    assert g(f32(1.0)).tolist() == [4.0]
    assert is_concrete(nx.sin(f32(1.0)))


def test_callback_error_in_scan_leaves_state_usable():
    def f(xs):
        return rune.scan(lambda c, x: (c + rune.callback(_exploding_solver, x, like=x), None), nx.array(0.0), xs)
    with pytest.raises(rune.CallbackError):
        f(f32(1.0, 2.0))
    assert is_concrete(nx.cos(f32(1.0)))
    c, _ = rune.scan(lambda c, x: (c + x, None), nx.array(0.0), f32(1.0, 2.0))
    assert float(c) == 3.0




def test_callback_under_custom_vjp_grad_runs_forward_once():
    calls = {"f": 0, "b": 0}
    sq = counted_square(calls)
    g = rune.grad(lambda x: sq(x).sum())(f64(3.0))
    assert g.tolist() == [6.0] and calls == {"f": 1, "b": 1}


def test_callback_inside_cond_runs_only_taken_branch():
    calls = []
    def fn(a):
        calls.append(1)
        return np.asarray(a)
    g = rune.jit(lambda x, p: rune.cond(p, lambda a: rune.callback(fn, a, like=a), lambda a: a * 0.0, x))
    g(f32(1.0), nx.array(False))
    assert calls == []
    g(f32(1.0), nx.array(True))
    assert calls == [1]


def test_callback_receives_host_values_inside_jit():
    seen = []
    def fn(a):
        seen.append(np.asarray(a).tolist())
        return np.asarray(a)
    rune.jit(lambda x: rune.callback(fn, x * 2.0, like=x))(f32(1.0, 2.0))
    assert seen == [[2.0, 4.0]]


def test_seed_example_output(capsys):
    runpy.run_path("/work/shared/seed/callbacks.py", run_name="__main__")
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["4 solves, 4 adjoint solves", "error below 1e-12: True", "8 solves, 8 adjoint solves"]
