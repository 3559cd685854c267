"""rune's public API against its documented public API (README, docs/): jacobians on pytrees, kwargs.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import numpy as np
import pytest

import rune
from rune import nx

from api_support import close, f32, f64, same_bits


# ---------------------------------------------------------------- jacobians on pytrees, kwargs

def test_jacrev_dict_input():
    J = rune.jacrev(lambda d: d["a"] * 2.0)({"a": f64(1.0, 2.0)})
    close(J["a"], 2.0 * np.eye(2))


def test_jacfwd_dict_input():
    J = rune.jacfwd(lambda d: d["a"] * 2.0)({"a": f64(1.0, 2.0)})
    close(J["a"], 2.0 * np.eye(2))


def test_jacobian_dict_output():
    for jac in (rune.jacrev, rune.jacfwd):
        J = jac(lambda a: {"o": a * 2.0})(f64(1.0, 2.0))
        close(J["o"], 2.0 * np.eye(2))


def test_jacrev_tuple_input_gives_tuple():
    x = f64(1.0, 2.0)
    J = rune.jacrev(lambda t: t[0] * t[1])((x, x))
    assert isinstance(J, tuple) and len(J) == 2
    close(J[0], np.diag([1.0, 2.0]))
    assert J[0].dtype == nx.float64


def test_jacobians_argnums_tuple():
    x = f64(1.0, 2.0)
    Jf = rune.jacfwd(lambda a, b: a * b, argnums=(0, 1))(x, x)
    Jr = rune.jacrev(lambda a, b: a * b, argnums=(0, 1))(x, x)
    H = rune.hessian(lambda a, b: (a * a * b).sum(), argnums=(0, 1))(x, x)
    close(Jf[1], np.diag([1.0, 2.0]))
    close(Jr[0], np.diag([1.0, 2.0]))
    close(H[0][1], np.diag([2.0, 4.0]))


def test_hessian_dict_input():
    H = rune.hessian(lambda d: (d["a"] ** 3).sum())({"a": f64(1.0, 2.0)})
    close(H["a"]["a"], np.diag([6.0, 12.0]))


def test_vmap_keyword_arguments():
    assert rune.vmap(lambda a, b: a + b)(f32(1.0, 2.0), b=f32(3.0, 4.0)).tolist() == [4.0, 6.0]


def test_grad_keyword_arguments_not_differentiated():
    assert rune.grad(lambda a, b: (a * b).sum())(f64(1.0, 2.0), b=f64(3.0, 4.0)).tolist() == [3.0, 4.0]


def test_jacobian_and_jvp_has_aux():
    J, aux = rune.jacrev(lambda a: (a * 2.0, "aux"), has_aux=True)(f64(1.0))
    assert aux == "aux"
    J, aux = rune.jacfwd(lambda a: (a * 2.0, "aux"), has_aux=True)(f64(1.0))
    _, _, aux = rune.jvp(lambda a: (a * 2.0, "aux"), (f64(1.0),), (f64(1.0),), has_aux=True)
    assert aux == "aux"


def test_vjp_has_aux():
    out, pb, aux = rune.vjp(lambda a: (a * 2.0, {"k": 1}), f64(1.0), has_aux=True)
    assert aux == {"k": 1} and pb(f64(1.0))[0].tolist() == [2.0]


def test_vmap_out_axes_tuple():
    a, b = rune.vmap(lambda r: (r, r), out_axes=(0, 1))(nx.ones((3, 2)))
    assert a.shape == (3, 2) and b.shape == (2, 3)


def test_scan_body_concretization_error():
    with pytest.raises(rune.ConcretizationError):
        rune.scan(lambda c, v: (c + float(v), None), nx.array(0.0), nx.arange(3.0))


def test_fori_loop_empty_range_returns_init():
    assert int(rune.fori_loop(5, 2, lambda i, v: v + 1, nx.array(7))) == 7


def test_array_list_with_out_of_range_int_raises():
    with pytest.raises(OverflowError):
        nx.array([2 ** 40, 1])


def test_array_out_of_range_int_is_rune_error():
    with pytest.raises(OverflowError) as ei:
        nx.array(2 ** 40)
    assert isinstance(ei.value, rune.RuneError)


def test_jit_weak_and_strong_scalars_traced_apart():
    h = nx.ones((2,), dtype=nx.float16)
    g = rune.jit(lambda a, s: a * s)
    assert g(h, 2.0).dtype == nx.float16
    assert g(h, nx.array(2.0)).dtype == nx.float32
    assert g(h, 3.0).dtype == nx.float16 and g(h, 3.0).tolist() == [3.0, 3.0]


def test_jit_none_argument():
    assert rune.jit(lambda a, b: a if b is None else a + b)(f32(1.0), None).tolist() == [1.0]


def test_random_fold_in_traced_data_matches_eager():
    g = rune.jit(lambda k, d: nx.random.fold_in(k, d))
    assert same_bits(g(nx.random.key(0), nx.array(3)), nx.random.fold_in(nx.random.key(0), 3))


def test_jacfwd_runs_forward_callback_once():
    calls = []
    def host_sin(a):
        calls.append(1)
        return np.sin(np.asarray(a))
    f = lambda x: rune.callback(host_sin, x, like=x)
    g = rune.custom_jvp(f, lambda p, t: (f(p[0]), nx.cos(p[0]) * t[0]))
    J = rune.jacfwd(g)(f64(0.1, 0.2, 0.3, 0.4))
    close(J, np.diag(np.cos([0.1, 0.2, 0.3, 0.4])), rtol=1e-12)
    assert len(calls) == 1


def test_scan_step_traced_once_under_jacfwd():
    calls = []
    def step(c, x):
        calls.append(1)
        return c + x * c, c
    rune.jacfwd(lambda v: rune.scan(step, nx.scalar(1.0, nx.float64), v)[1])(f64(1.0, 2.0, 3.0))
    assert len(calls) == 1


def test_scan_step_traced_once_under_grad_vmap_jit():
    calls = []
    def step(c, x):
        calls.append(1)
        return c + x * c, c
    xs = f64(1.0, 2.0, 3.0)
    for run in (lambda: rune.grad(lambda v: rune.scan(step, nx.scalar(1.0, nx.float64), v)[0])(xs),
                lambda: rune.vmap(lambda v: rune.scan(step, nx.scalar(1.0, nx.float64), v)[0])(nx.ones((2, 3), dtype=nx.float64)),
                lambda: rune.jit(rune.grad(lambda v: rune.scan(step, nx.scalar(1.0, nx.float64), v)[0]))(xs),
                lambda: rune.jvp(lambda v: rune.scan(step, nx.scalar(1.0, nx.float64), v)[0], (xs,), (xs,))):
        calls.clear()
        run()
        assert len(calls) == 1
