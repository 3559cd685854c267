"""rune's public API against its documented public API (README, docs/): custom rules.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import numpy as np
import pytest

import rune
from rune import nx

from api_support import close, f64


# ---------------------------------------------------------------- custom rules

def test_custom_vjp_single_arg_bare_cotangent():
    @rune.custom_vjp
    def f(x):
        def pullback(ct):
            return ct * 10.0
        return x * 1.0, pullback
    x = f64(1.0, 2.0)
    assert f(x).tolist() == [1.0, 2.0]
    assert rune.grad(lambda x: f(x).sum())(x).tolist() == [10.0, 10.0]


def test_custom_vjp_own_ops_not_differentiated():
    @rune.custom_vjp
    def f(x):
        return nx.sin(x), lambda ct: ct * 7.0
    assert rune.grad(lambda x: f(x).sum())(f64(0.3)).tolist() == [7.0]


def test_custom_vjp_two_args_tuple_and_none_zero():
    @rune.custom_vjp
    def mul(x, y):
        def pullback(ct):
            return ct * y, None
        return x * y, pullback
    gx, gy = rune.grad(lambda x, y: mul(x, y).sum(), argnums=(0, 1))(f64(2.0), f64(3.0))
    assert gx.tolist() == [3.0] and gy.tolist() == [0.0]


def test_custom_vjp_call_returns_out_only():
    @rune.custom_vjp
    def f(x, y):
        return x + y, lambda ct: (ct, ct)
    r = f(f64(1.0), f64(2.0))
    assert isinstance(r, nx.Array) and r.tolist() == [3.0]


def test_custom_vjp_vjp_api():
    @rune.custom_vjp
    def f(x):
        return x * 2.0, lambda ct: ct * 5.0
    out, pb = rune.vjp(f, f64(1.0))
    assert out.tolist() == [2.0] and pb(f64(1.0))[0].tolist() == [5.0]


def test_custom_vjp_residuals_and_second_order():
    @rune.custom_vjp
    def cube(x):
        def pullback(ct):
            return ct * 3.0 * x ** 2
        return x ** 3, pullback
    x = nx.scalar(2.0, nx.float64)
    assert float(rune.grad(cube)(x)) == 12.0
    assert float(rune.grad(rune.grad(cube))(x)) == 12.0   # 6x


def test_custom_vjp_hessian_enclosing_sees_forward():
    @rune.custom_vjp
    def cube(x):
        return x ** 3, lambda ct: ct * 3.0 * x ** 2
    H = rune.hessian(lambda v: cube(v).sum())(f64(1.0, 2.0))
    close(H, np.diag([6.0, 12.0]), rtol=1e-12)


def test_custom_vjp_jvp_raises_clear_error():
    @rune.custom_vjp
    def f(x):
        return x * 2.0, lambda ct: ct
    with pytest.raises(rune.RuneError) as ei:
        rune.jvp(f, (f64(1.0),), (f64(1.0),))
    assert "custom_vjp" in str(ei.value) or "forward" in str(ei.value).lower() or "jvp" in str(ei.value)


def test_custom_vjp_under_vmap_and_jit():
    @rune.custom_vjp
    def f(x):
        return nx.sin(x), lambda ct: ct * 4.0
    x = f64(0.1, 0.2)
    close(rune.vmap(f)(x), np.sin([0.1, 0.2]), rtol=1e-14)
    close(rune.jit(f)(x), np.sin([0.1, 0.2]), rtol=1e-14)
    assert rune.jit(rune.grad(lambda v: f(v).sum()))(x).tolist() == [4.0, 4.0]
    assert rune.vmap(rune.grad(f))(x).tolist() == [4.0, 4.0]


def test_custom_vjp_inside_scan_grad():
    @rune.custom_vjp
    def f(x):
        u = x * x
        return u, lambda ct: ct * 2.0 * x
    def loss(xs):
        c, _ = rune.scan(lambda c, x: (c + f(x), None), nx.scalar(0.0, nx.float64), xs)
        return c
    close(rune.grad(loss)(f64(1.0, 2.0, 3.0)), [2.0, 4.0, 6.0], rtol=1e-14)


def test_custom_jvp():
    def f(x):
        return nx.sin(x)
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), t * 100.0
    g = rune.custom_jvp(f, f_jvp)
    x = f64(0.5)
    close(g(x), np.sin([0.5]), rtol=1e-14)
    out, tan = rune.jvp(g, (x,), (f64(2.0),))
    close(out, np.sin([0.5]), rtol=1e-14)
    assert tan.tolist() == [200.0]
    assert rune.jacfwd(lambda v: g(v))(x).tolist() == [[100.0]]


def test_custom_jvp_reverse_mode_uses_rule_or_raises():
    g = rune.custom_jvp(nx.sin, lambda p, t: (nx.sin(p[0]), t[0] * 100.0))
    try:
        r = rune.grad(lambda v: g(v).sum())(f64(0.5))
    except rune.RuneError:
        return
    assert r.tolist() == [100.0]


def test_custom_jvp_two_args_and_vmap():
    g = rune.custom_jvp(lambda x, y: x * y, lambda p, t: (p[0] * p[1], t[0] * 2.0 + t[1] * 3.0))
    _, tan = rune.jvp(g, (f64(5.0), f64(7.0)), (f64(1.0), f64(1.0)))
    assert tan.tolist() == [5.0]
    assert rune.vmap(g)(f64(1.0, 2.0), f64(3.0, 4.0)).tolist() == [3.0, 8.0]
