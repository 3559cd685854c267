"""rune's public API against its documented public API (README, docs/): more edge cases.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, counted_square, double_np, run_script, close, f32, f64, same_bits


# ---------------------------------------------------------------- more edge cases

def test_nx_mod_alias():
    assert nx.mod(nx.array([7, -7]), 3).tolist() == [1, 2]


def test_nx_bitwise_not_alias():
    assert nx.bitwise_not(nx.array([0], dtype=nx.int32)).tolist() == [-1]


def test_error_classes_builtin_bases():
    assert issubclass(rune.DeviceMismatchError, ValueError)
    assert issubclass(rune.CallbackError, Exception)


@pytest.mark.parametrize("thunk", [
    lambda: int(nx.array([1.0, 2.0])),
    lambda: float(nx.array([1.0, 2.0])),
    lambda: bool(nx.array([1.0, 2.0])),
], ids=["int", "float", "bool"])
def test_scalar_conversion_of_non_scalar_raises_rune_error(thunk):
    with pytest.raises(rune.RuneError) as ei:
        thunk()
    assert isinstance(ei.value, (TypeError, ValueError))


def test_int_negative_power_raises_rune_error():
    with pytest.raises(rune.RuneError) as ei:
        nx.array([2]) ** -1
    assert isinstance(ei.value, (TypeError, ValueError))


def test_len_of_0d_raises_rune_type_error():
    with pytest.raises(TypeError) as ei:
        len(nx.array(1.0))
    assert isinstance(ei.value, rune.RuneError)


def test_callback_non_callable_raises_rune_type_error():
    with pytest.raises(TypeError) as ei:
        rune.callback(3, f32(1.0), like=f32(1.0))
    assert isinstance(ei.value, rune.RuneError)


def test_jvp_tangent_dtype_mismatch_raises():
    # JAX: "primal and tangent arguments to jax.jvp do not match; dtypes must be equal"
    with pytest.raises(rune.RuneError):
        rune.jvp(nx.sin, (nx.ones((2,)),), (nx.ones((2,), dtype=nx.float64),))


def test_jvp_tangent_shape_mismatch_raises():
    with pytest.raises(rune.RuneError):
        rune.jvp(nx.sin, (nx.ones((2,)),), (nx.ones((3,)),))


def test_random_key_rejects_float_seed():
    with pytest.raises(rune.RuneError) as ei:
        nx.random.key(1.5)
    assert isinstance(ei.value, TypeError)


def test_random_randint_empty_range_gives_minval_like_jax():
    r = nx.random.randint(nx.random.key(0), (3,), 5, 2)
    assert r.tolist() == [5, 5, 5]


def test_numpy_scalar_is_strong_under_nep50():
    # NEP 50: NumPy scalars are not weak; only Python scalars are.
    assert (nx.ones((2,)) + np.float64(1.0)).dtype == nx.float64
    assert (nx.ones((2,), dtype=nx.int8) + np.int32(1)).dtype == nx.int32
    assert (nx.ones((2,), dtype=nx.float16) + np.float32(1)).dtype == nx.float32


def test_numpy_0d_array_is_strong():
    assert (nx.ones((2,)) + np.array(1.0)).dtype == nx.float64


def test_sum_of_bool_counts():
    r = nx.sum(nx.array([True, True, False]))
    assert np.issubdtype(A(r).dtype, np.integer) and int(r) == 2


def test_mean_of_int_is_float():
    r = nx.mean(nx.array([1, 2]))
    assert np.issubdtype(A(r).dtype, np.floating) and float(r) == 1.5


def test_np_asarray_with_dtype():
    a = np.asarray(nx.array([1.0, 2.0]), dtype=np.float64)
    assert a.dtype == np.float64 and a.tolist() == [1.0, 2.0]
    assert np.array(nx.array([1, 2])).tolist() == [1, 2]


def test_creation_positional_dtype():
    assert nx.zeros((2,), nx.float64).dtype == nx.float64
    assert nx.ones((2,), nx.int8).dtype == nx.int8
    assert nx.full((2,), 1, nx.float64).dtype == nx.float64


def test_linspace_endpoint_false():
    close(nx.linspace(0.0, 1.0, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False))


def test_random_low_precision_dtypes():
    for dt in (nx.float16, nx.bfloat16):
        assert nx.random.normal(nx.random.key(0), (4,), dt).dtype == dt
        assert nx.random.uniform(nx.random.key(0), (4,), dt).dtype == dt


def test_random_bernoulli_p_array_shape_none():
    b = nx.random.bernoulli(nx.random.key(0), nx.array([0.0, 1.0, 0.0]))
    assert b.shape == (3,) and b.tolist() == [False, True, False]


def test_random_uniform_array_bounds():
    u = nx.random.uniform(nx.random.key(0), (2,), nx.float32, nx.array([0.0, 10.0]), nx.array([1.0, 11.0]))
    a = A(u)
    assert 0 <= a[0] < 1 and 10 <= a[1] < 11


def test_random_key_is_array_usable_under_jit():
    g = rune.jit(lambda k: nx.random.split(k)[0])
    assert same_bits(g(nx.random.key(0)), nx.random.split(nx.random.key(0))[0])


def test_tree_leaves_of_array_is_itself():
    x = f32(1.0)
    assert rune.tree.leaves(x)[0] is x and len(rune.tree.leaves(x)) == 1


def test_einsum_diag_and_three_operands():
    m = np.arange(9, dtype=np.float32).reshape(3, 3)
    close(nx.einsum("ii->i", nx.array(m)), np.diag(m))
    close(nx.einsum("ij,jk,kl->il", nx.array(m), nx.array(m), nx.array(m)), m @ m @ m)


def test_index_with_nx_scalar():
    assert int(nx.arange(5)[nx.array(2)]) == 2


def test_jit_dynamic_index():
    g = rune.jit(lambda x, i: x[i])
    assert float(g(nx.arange(5.0), nx.array(3))) == 3.0
    assert float(g(nx.arange(5.0), nx.array(1))) == 1.0


def test_grad_through_indexing_and_gather_duplicates():
    g = rune.grad(lambda x: x[1] * 3.0)(f64(1.0, 2.0, 3.0))
    assert g.tolist() == [0.0, 3.0, 0.0]
    g = rune.grad(lambda x: x[nx.array([0, 0, 2])].sum())(f64(1.0, 2.0, 3.0))
    assert g.tolist() == [2.0, 0.0, 1.0]


def test_grad_through_at_set_and_add():
    g = rune.grad(lambda x: (x.at[0].set(5.0) * x).sum())(f64(1.0, 2.0))
    # out = [5*x0, x1*x1]
    assert g.tolist() == [5.0, 4.0]
    gv = rune.grad(lambda v: nx.zeros((3,), dtype=nx.float64).at[1].add(v * 2.0).sum())(nx.scalar(1.0, nx.float64))
    assert float(gv) == 2.0


def test_grad_with_non_differentiated_python_arg():
    assert float(rune.grad(lambda x, n: x * n)(2.0, 3)) == 3.0


def test_vmap_python_scalar_unbatched_arg():
    assert rune.vmap(lambda x, s: x * s, in_axes=(0, None))(f32(1.0, 2.0), 3.0).tolist() == [3.0, 6.0]


def test_vmap_unbatched_output_is_broadcast():
    out = rune.vmap(lambda x, w: w, in_axes=(0, None))(f32(1.0, 2.0, 3.0), f32(7.0, 8.0))
    assert out.shape == (3, 2)


def test_scan_zero_length():
    c, ys = rune.scan(lambda c, x: (c + x, x * 2.0), nx.array(1.0), nx.zeros((0,)))
    assert float(c) == 1.0 and ys.shape == (0,)


def test_fori_loop_traced_bounds_under_jit():
    g = rune.jit(lambda n: rune.fori_loop(0, n, lambda i, acc: acc + i, nx.array(0)))
    assert int(g(nx.array(4))) == 6
    assert int(g(nx.array(5))) == 10


def test_jvp_through_while_and_scan():
    f = lambda x: rune.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x), (nx.array(0), nx.scalar(1.0, nx.float64)))[1]
    _, t = rune.jvp(f, (nx.scalar(2.0, nx.float64),), (nx.scalar(1.0, nx.float64),))
    assert float(t) == 12.0
    g = lambda x: rune.scan(lambda c, _: (c * x, None), nx.scalar(1.0, nx.float64), None, length=3)[0]
    _, t = rune.jvp(g, (nx.scalar(2.0, nx.float64),), (nx.scalar(1.0, nx.float64),))
    assert float(t) == 12.0


def test_custom_vjp_dict_argument():
    @rune.custom_vjp
    def f(p):
        return p["a"] * p["b"], lambda ct: {"a": ct * 100.0, "b": None}
    g = rune.grad(lambda p: f(p).sum())({"a": f64(2.0), "b": f64(3.0)})
    assert g["a"].tolist() == [100.0] and g["b"].tolist() == [0.0]


def test_custom_vjp_wrong_cotangent_count_raises():
    @rune.custom_vjp
    def f(x, y):
        return x * y, lambda ct: ct          # should return 2 cotangents
    with pytest.raises(rune.RuneError):
        rune.grad(lambda x, y: f(x, y).sum())(f64(1.0), f64(2.0))


def test_custom_vjp_wrong_cotangent_shape_raises():
    @rune.custom_vjp
    def f(x):
        return x * 2.0, lambda ct: nx.zeros((5,), dtype=nx.float64)
    with pytest.raises(rune.RuneError):
        rune.grad(lambda x: f(x).sum())(f64(1.0, 2.0))


def test_jit_static_function_under_grad():
    g = rune.jit(lambda x, n: x ** n, static_argnums=1)
    assert float(rune.grad(lambda x: g(x, 3))(nx.scalar(2.0, nx.float64))) == 12.0


@pytest.mark.parametrize("fn", [lambda x: int(x), lambda x: bool(x), lambda x: np.asarray(x), lambda x: x.tolist()],
                         ids=["int", "bool", "np.asarray", "tolist"])
def test_jit_more_concretization_errors(fn):
    with pytest.raises(rune.ConcretizationError):
        rune.jit(fn)(nx.array(1.0))


def test_jit_static_unhashable_raises():
    with pytest.raises(rune.RuneError):
        rune.jit(lambda x, l: x, static_argnums=1)(nx.ones((2,)), [1, 2])


def test_grad_argnums_out_of_range_raises():
    with pytest.raises(rune.RuneError):
        rune.grad(lambda x: x * x, argnums=2)(1.0)


def test_cond_nonscalar_pred_raises():
    with pytest.raises(rune.RuneError):
        rune.cond(nx.array([True, False]), lambda: nx.ones(()), lambda: nx.zeros(()))


def test_while_loop_carry_change_raises():
    with pytest.raises(rune.RuneError):
        rune.while_loop(lambda c: c.sum() < 3, lambda c: nx.concatenate([c, c]), nx.ones((1,)))


def test_callback_pytree_args_on_host():
    seen = []
    def fn(d, n):
        seen.append((sorted(d), int(np.asarray(n))))
        return np.asarray(d["a"]) + np.asarray(d["b"])
    r = rune.callback(fn, {"a": f32(1.0), "b": f32(2.0)}, nx.array(4), like=f32(0.0))
    assert r.tolist() == [3.0] and seen == [(["a", "b"], 4)]
    seen.clear()
    rune.jit(lambda a: rune.callback(fn, {"a": a, "b": a}, nx.array(4), like=a))(f32(1.0))
    assert seen == [(["a", "b"], 4)]


def test_callback_python_int_result_for_float_like():
    r = rune.callback(lambda a: 3, f32(1.0), like=rune.Spec((), nx.float32))
    assert r.dtype == nx.float32 and float(r) == 3.0


def test_callback_grad_on_constant_input_is_fine():
    c = f64(5.0)
    g = rune.grad(lambda x: (x * rune.callback(double_np, c, like=c)).sum())(f64(1.0))
    assert g.tolist() == [10.0]


def test_callback_grad_with_stop_gradient_input():
    g = rune.grad(lambda x: (x * rune.callback(double_np, rune.stop_gradient(x), like=x)).sum())(f64(3.0))
    assert g.tolist() == [6.0]


def test_callback_jit_of_vmap_sequential_counts():
    calls = []
    def fn(a):
        calls.append(np.asarray(a).shape)
        return np.asarray(a) + 1
    g = rune.jit(rune.vmap(lambda r: rune.callback(fn, r, like=r)))
    xs = f32(1.0, 2.0, 3.0)
    assert g(xs).tolist() == [2.0, 3.0, 4.0] and calls == [(), (), ()]
    g(xs)
    assert len(calls) == 6


def test_callback_vmap_of_jit_sequential():
    calls = []
    def fn(a):
        calls.append(1)
        return np.asarray(a) * 3
    h = rune.jit(lambda r: rune.callback(fn, r, like=r))
    assert rune.vmap(h)(f32(1.0, 2.0)).tolist() == [3.0, 6.0] and len(calls) == 2


def test_callback_once_per_while_iteration_under_jit():
    calls = []
    def fn(a):
        calls.append(int(np.asarray(a)))
        return np.asarray(a)
    g = rune.jit(lambda n: rune.while_loop(lambda i: i < n, lambda i: rune.callback(fn, i, like=i) + 1, nx.array(0)))
    assert int(g(nx.array(3))) == 3 and calls == [0, 1, 2]


def test_callback_in_scan_under_vmap_counts():
    calls = []
    def fn(a):
        calls.append(1)
        return np.asarray(a)
    f = lambda xs: rune.scan(lambda c, x: (c + rune.callback(fn, x, like=x), None), nx.array(0.0), xs)[0]
    out = rune.vmap(f)(nx.array(np.arange(6, dtype=np.float32).reshape(2, 3)))
    assert out.tolist() == [3.0, 12.0] and len(calls) == 6


def test_callback_scan_grad_with_custom_vjp_counts_under_jit():
    calls = {"f": 0, "b": 0}
    sq = counted_square(calls)
    loss = lambda xs: rune.scan(lambda c, x: (c + sq(x), None), nx.scalar(0.0, nx.float64), xs)[0]
    step = rune.jit(rune.value_and_grad(loss))
    v, g = step(f64(1.0, 2.0, 3.0))
    assert float(v) == 14.0 and g.tolist() == [2.0, 4.0, 6.0]
    assert calls == {"f": 3, "b": 3}


def test_callback_error_message_names_lambda_or_function_in_jit():
    def solver_that_fails(a):
        raise ValueError("singular")
    g = rune.jit(lambda x: rune.callback(solver_that_fails, x, like=x))
    with pytest.raises(rune.CallbackError) as ei:
        g(f32(1.0))
    assert "solver_that_fails" in str(ei.value) and isinstance(ei.value.__cause__, ValueError)
    with pytest.raises(rune.CallbackError):
        g(f32(1.0))


CACHE_SCRIPT = r'''
import json, os
import rune
from rune import nx
g = rune.jit(lambda x: nx.sin(x) * 3.0 + nx.cos(x))
g(nx.ones((5,)))
files = [os.path.join(r, f) for r, _, fs in os.walk(os.environ["RUNE_CACHE_DIR"]) for f in fs]
print("@@RESULTS@@" + json.dumps({"files": len(files), "compiles": rune.stats()["compiles"]}))
'''


@pytest.mark.cc   # without a C compiler jit runs NumPy stretches: nothing is cached
def test_compile_cache_dir_is_used(tmp_path):
    r = run_script(CACHE_SCRIPT, RUNE_CACHE_DIR=str(tmp_path / "c"), RUNE_CACHE="1")
    assert r["files"] > 0, r


def test_compile_cache_off(tmp_path):
    r = run_script(CACHE_SCRIPT, RUNE_CACHE_DIR=str(tmp_path / "c"), RUNE_CACHE="0")
    assert r["files"] == 0, r


TRANSFER_SCRIPT = r'''
import json
import rune
from rune import nx
x = nx.ones((3,))
rune.reset_stats()
y = nx.place(x, "cpu:1")
print("@@RESULTS@@" + json.dumps(dict(rune.stats())))
'''


def test_host_device_transfer_counted():
    s = run_script(TRANSFER_SCRIPT, RUNE_HOST_DEVICES="2")
    assert any(v == 12 for k, v in s.items() if "bytes" in k), s


@pytest.mark.cc   # without a C compiler jit runs NumPy stretches: no kernel source
def test_jit_plan_shows_kernel_source():
    import re
    s = str(rune.jit(lambda x: nx.sin(x) * 2.0 + 1.0).plan(f32(1.0)))
    assert re.search(r"\b(rn_)?sinf?\s*\(", s), s   # rune's own math library: rn_sinf


def test_cond_mismatch_error_names_path():
    with pytest.raises(rune.RuneError) as ei:
        rune.cond(True, lambda: {"kappa_leaf": nx.zeros((2,))}, lambda: {"kappa_leaf": nx.zeros((3,))})
    assert "kappa_leaf" in str(ei.value)


def test_jvp_mismatch_error_names_path():
    with pytest.raises(rune.RuneError) as ei:
        rune.jvp(lambda d: d["alpha_leaf"], ({"alpha_leaf": nx.ones((3,))},), ({"alpha_leaf": nx.ones((4,))},))
    assert "alpha_leaf" in str(ei.value)


def test_vmap_mismatch_error_names_path():
    with pytest.raises(rune.RuneError) as ei:
        rune.vmap(lambda d: d["alpha_leaf"] + d["beta_leaf"])({"alpha_leaf": nx.ones((3,)), "beta_leaf": nx.ones((4,))})
    assert "beta_leaf" in str(ei.value)


def test_round_decimals():
    close(nx.round(nx.array([1.234, -5.678]), 2), [1.23, -5.68])


def test_jit_trace_with_static_args():
    g = rune.jit(lambda x, n: x * n, static_argnums=1)
    assert "mul" in str(g.trace(f32(1.0), 3))
