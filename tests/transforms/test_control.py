"""Tests of staged control flow: scan, cond, switch, while_loop, fori_loop.

Oracles: a Python loop over NumPy values, central finite differences in
float64, the gradient of the same loop unrolled in Python, and the eager path
(for jit).
"""
import numpy as np
import pytest

import rune
from rune import nx

from compiled import precompiled
from oracles import fd_grad
from rune.core import trace as _trace

F64 = nx.float64


def f64(x):
    return nx.asarray(np.asarray(x, dtype=np.float64))


def close(a, b, tol=1e-9):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ---------------------------------------------------------------- scan: values

def _step(c, x):
    return c * nx.cos(x) + nx.sin(c) * 0.5, c * x


def _loop(c, xs):
    ys = []
    for x in xs:
        c, y = c * np.cos(x) + np.sin(c) * 0.5, c * x
        ys.append(y)
    return c, np.stack(ys)


def test_scan_matches_python_loop():
    xs = np.linspace(-1.0, 2.0, 12).reshape(6, 2)
    c0 = np.array([0.3, -0.7])
    c, ys = rune.scan(_step, f64(c0), f64(xs))
    ec, eys = _loop(c0, xs)
    assert c.dtype == F64 and c.shape == (2,)
    assert ys.shape == (6, 2) and ys.dtype == F64
    close(c, ec, 1e-12)
    close(ys, eys, 1e-12)


def test_scan_reverse_matches_reversed_loop():
    xs = np.array([1.0, 2.0, 3.0, 4.0])
    c, ys = rune.scan(lambda c, x: (c * 10 + x, c), f64(0.0), f64(xs), reverse=True)
    # Python loop from the last row to the first; ys[i] is the y of row i.
    ec, eys = 0.0, [None] * 4
    for i in reversed(range(4)):
        eys[i] = ec
        ec = ec * 10 + xs[i]
    close(c, ec)
    close(ys, eys)
    assert float(c) == 4321.0


def test_scan_reverse_gradient_matches_unrolled_and_fd():
    xs = np.array([0.3, -0.5, 1.1, 0.8])

    def scanned(a):
        c, ys = rune.scan(lambda c, x: (nx.sin(c * a) + x, c * c), f64(0.4), f64(xs), reverse=True)
        return c + ys.sum()

    def unrolled(a):
        c, total = f64(0.4), 0.0
        for x in xs[::-1]:
            total = total + c * c
            c = nx.sin(c * a) + float(x)
        return c + total

    a = 0.9
    close(scanned(f64(a)), unrolled(f64(a)), 1e-12)
    g = rune.grad(scanned)(f64(a))
    close(g, rune.grad(unrolled)(f64(a)), 1e-12)
    close(g, fd_grad(lambda v: float(scanned(f64(v))), a), 1e-6)


def test_scan_pytrees_for_carry_xs_and_ys():
    a = np.array([1.0, 2.0, 3.0])
    b = np.arange(6.0).reshape(3, 2) + 1.0

    def step(c, x):
        new = {"s": c["s"] + x["a"], "p": c["p"] * x["b"][0]}
        return new, (x["a"] * 2, {"q": c["s"]})

    init = {"s": f64(0.0), "p": f64(np.ones(2))}
    c, (y0, y1) = rune.scan(step, init, {"a": f64(a), "b": [f64(b)]})
    assert set(c) == {"s", "p"} and set(y1) == {"q"}
    s, p, qs = 0.0, np.ones(2), []
    for i in range(3):
        qs.append(s)
        s, p = s + a[i], p * b[i]
    close(c["s"], s)
    close(c["p"], p)
    close(y0, a * 2)
    close(y1["q"], qs)


def test_scan_ys_none():
    xs = np.array([1.0, 2.0, 3.5])
    c, ys = rune.scan(lambda c, x: (c + x, None), f64(0.5), f64(xs))
    assert ys is None
    close(c, 0.5 + xs.sum())


def test_scan_length_without_xs():
    c, ys = rune.scan(lambda c, _: (c * 2.0, c), f64(1.0), None, length=5)
    close(c, 32.0)
    close(ys, [1.0, 2.0, 4.0, 8.0, 16.0])


def test_scan_length_disagreeing_with_xs_raises():
    with pytest.raises(rune.ShapeError):
        rune.scan(lambda c, x: (c, x), f64(0.0), f64(np.zeros(3)), length=5)
    with pytest.raises(rune.ShapeError):
        rune.scan(lambda c, x: (c, x), f64(0.0), None)


def test_scan_step_python_body_runs_once_for_1000_rows():
    calls = []
    w = f64([0.5, -0.3])

    def step(c, x):
        calls.append(1)
        return c * nx.tanh(x * w) + w, c.sum()

    xs = f64(np.linspace(-1, 1, 2000).reshape(1000, 2))
    c, ys = rune.scan(step, f64(np.zeros(2)), xs)
    assert len(calls) == 1
    assert ys.shape == (1000,)
    # Python oracle.
    ec, ew = np.zeros(2), np.array([0.5, -0.3])
    ey = []
    for x in np.asarray(xs):
        ey.append(ec.sum())
        ec = ec * np.tanh(x * ew) + ew
    close(c, ec, 1e-10)
    close(ys, ey, 1e-10)
    # Under grad the step is still staged once per scan call.
    calls.clear()
    rune.grad(lambda c0: rune.scan(step, c0, xs)[1].sum())(f64(np.zeros(2)))
    assert len(calls) == 1


# ---------------------------------------------------------------- scan: gradients

XS = np.array([[0.3, -0.2], [-0.5, 0.9], [1.1, 0.1], [0.4, -0.8], [-0.6, 0.7]])


def _scan_loss(w, c0, xs):
    def step(c, x):
        h = nx.tanh(c * w + x)
        return h, (h * h).sum()
    c, ys = rune.scan(step, c0, xs)
    return (c * c).sum() + ys.sum()


def _unrolled_loss(w, c0, xs):
    c, total = c0, 0.0
    for i in range(xs.shape[0]):
        c = nx.tanh(c * w + xs[i])
        total = total + (c * c).sum()
    return (c * c).sum() + total


@pytest.mark.parametrize("argnum", [0, 1, 2])
def test_scan_gradient_vs_finite_differences_and_unrolled(argnum):
    args = [np.array([0.7, -1.3]), np.array([0.2, 0.4]), XS]
    nx_args = [f64(a) for a in args]
    close(_scan_loss(*nx_args), _unrolled_loss(*nx_args), 1e-12)
    g = rune.grad(_scan_loss, argnums=argnum)(*nx_args)
    assert g.shape == args[argnum].shape and g.dtype == F64
    close(g, rune.grad(_unrolled_loss, argnums=argnum)(*nx_args), 1e-12)

    def numeric(v):
        full = [f64(a) for a in args]
        full[argnum] = f64(v)
        return float(_scan_loss(*full))

    close(g, fd_grad(numeric, args[argnum]), 1e-6)


def test_scan_gradient_reaches_closed_over_values():
    xs = f64(XS)
    bias = np.array([0.1, -0.2])

    def loss(w, b):
        def step(c, x):  # closes over w and b
            return nx.sin(c * w) + x + b, None
        c, _ = rune.scan(step, f64([0.5, 0.5]), xs)
        return (c * c).sum()

    gw, gb = rune.grad(loss, argnums=(0, 1))(f64([0.8, -0.4]), f64(bias))
    assert np.any(np.asarray(gw) != 0) and np.any(np.asarray(gb) != 0)
    close(gw, fd_grad(lambda v: float(loss(f64(v), f64(bias))), [0.8, -0.4]), 1e-6)
    close(gb, fd_grad(lambda v: float(loss(f64([0.8, -0.4]), f64(v))), bias), 1e-6)


def test_scan_jvp_matches_finite_differences():
    xs = f64([0.3, -0.5, 1.1])

    def f(a):
        c, ys = rune.scan(lambda c, x: (c * a + x, c * c), f64(1.0), xs)
        return c + ys.sum()

    out, t = rune.jvp(f, (f64(0.7),), (f64(1.0),))
    close(out, f(f64(0.7)))
    close(t, fd_grad(lambda v: float(f(f64(v))), 0.7), 1e-6)


def test_second_derivative_of_scan_matches_polynomial():
    xs = f64([0.3, -0.5, 1.1])

    def f(a):  # a^3 + 0.3 a^2 - 0.5 a + 1.1
        return rune.scan(lambda c, x: (c * a + x, None), f64(1.0), xs)[0]

    a = 0.7
    close(rune.grad(f)(f64(a)), 3 * a * a + 0.6 * a - 0.5, 1e-12)
    close(rune.grad(rune.grad(f))(f64(a)), 6 * a + 0.6, 1e-12)


# ---------------------------------------------------------------- scan: carry errors

def test_scan_carry_dtype_change_names_leaf_and_avals():
    init = {"a": f64(0.0), "b": nx.zeros((2,), dtype=nx.float32)}
    with pytest.raises(rune.ShapeError) as info:
        rune.scan(lambda c, x: ({"a": c["a"].astype(nx.float32), "b": c["b"]}, None), init,
                  f64([1.0, 2.0]))
    msg = str(info.value)
    assert "['a']" in msg
    assert "float64[]" in msg and "float32[]" in msg


def test_scan_carry_shape_change_names_leaf_and_avals():
    init = {"a": f64(0.0), "b": nx.zeros((2,), dtype=nx.float32)}
    with pytest.raises(rune.ShapeError) as info:
        rune.scan(lambda c, x: ({"a": c["a"], "b": nx.zeros((3,), dtype=nx.float32)}, None), init,
                  f64([1.0, 2.0]))
    msg = str(info.value)
    assert "['b']" in msg
    assert "float32[2]" in msg and "float32[3]" in msg


def test_scan_carry_structure_change_raises_tree_error():
    with pytest.raises(rune.TreeError):
        rune.scan(lambda c, x: ((c, c), None), f64(0.0), f64([1.0, 2.0]))
    with pytest.raises(rune.TreeError):
        rune.scan(lambda c, x: ([c[0], c[1]], None), (f64(0.0), f64(1.0)), f64([1.0, 2.0]))
    assert _trace.current() is _trace.EVAL
    close(rune.scan(lambda c, x: (c + x, None), f64(0.0), f64([1.0, 2.0]))[0], 3.0)


# ---------------------------------------------------------------- cond / switch

def _branches():
    traced = []

    def t(a, b):
        traced.append("true")
        return nx.sin(a) * b

    def f(a, b):
        traced.append("false")
        return nx.cos(a) + a * b

    return t, f, traced


def _cond_of(t, f):
    return lambda p, a, b: rune.cond(p > 0, t, f, a, b)


@pytest.mark.parametrize("p", [1.0, -1.0])
def test_cond_value_grad_jvp_vs_numpy(p):
    t, f, traced = _branches()
    a, b = 0.7, 1.9
    g = _cond_of(t, f)

    out = g(f64(p), f64(a), f64(b))
    assert sorted(traced) == ["false", "true"]  # both branches are traced
    if p > 0:
        value, da, db = np.sin(a) * b, np.cos(a) * b, np.sin(a)
    else:
        value, da, db = np.cos(a) + a * b, -np.sin(a) + b, a
    close(out, value, 1e-12)
    ga, gb = rune.grad(g, argnums=(1, 2))(f64(p), f64(a), f64(b))
    close(ga, da, 1e-12)
    close(gb, db, 1e-12)
    o, tang = rune.jvp(lambda a, b: g(f64(p), a, b), (f64(a), f64(b)), (f64(1.0), f64(2.0)))
    close(o, value, 1e-12)
    close(tang, da + 2 * db, 1e-12)
    # jit agrees with eager, both branch outcomes from one trace
    jg = rune.jit(g)
    close(jg(f64(p), f64(a), f64(b)), value, 1e-12)
    close(rune.jit(rune.grad(g, argnums=1))(f64(p), f64(a), f64(b)), da, 1e-12)


def test_cond_grad_reaches_closed_over_values_and_constant_branch():
    x = f64(0.7)
    close(rune.grad(lambda w: rune.cond(True, lambda a: a * w, lambda a: a + w, x))(f64(2.0)), 0.7)
    close(rune.grad(lambda w: rune.cond(False, lambda a: a * w, lambda a: a + w * w, x))(f64(2.0)),
          4.0)
    g = rune.grad(lambda a: rune.cond(a > 0, lambda a: f64(2.0), lambda a: a * a, a))(x)
    close(g, 0.0)


def test_cond_pytree_operands_and_results():
    x = f64(0.7)
    out = rune.cond(False, lambda d: (d["a"], d["b"] * 2), lambda d: (d["b"], d["a"] * 2),
                    {"a": x, "b": x + 1})
    assert isinstance(out, tuple)
    close(out[0], 1.7)
    close(out[1], 1.4)


def test_cond_branch_mismatch_errors():
    x = f64(0.7)
    with pytest.raises(rune.TreeError):
        rune.cond(True, lambda a: a, lambda a: (a, a), x)
    with pytest.raises(rune.ShapeError):
        rune.cond(True, lambda a: a, lambda a: nx.stack([a, a]), x)


@pytest.mark.parametrize("pred", [-1, nx.scalar(-3, nx.int32)], ids=["python", "array"])
def test_cond_negative_integer_predicate_is_true(pred):
    x = f64(1.0)
    close(rune.cond(pred, lambda a: a * 10, lambda a: -a, x), 10.0)


def test_cond_fractional_float_predicate_is_not_silently_false():
    x = f64(1.0)
    try:
        out = rune.cond(0.5, lambda a: a * 10, lambda a: -a, x)
    except TypeError:
        return  # refusing a float predicate is fine
    close(out, 10.0)


def test_switch_values_clamping_and_grad():
    branches = [lambda a: a, lambda a: a * a * a, lambda a: -a]
    a = 0.7
    expect = {-1: a, 0: a, 1: a ** 3, 2: -a, 5: -a}
    for i, e in expect.items():
        close(rune.switch(i, branches, f64(a)), e, 1e-12)
    jf = rune.jit(lambda i, x: rune.switch(i, branches, x))
    for i, e in expect.items():
        close(jf(nx.scalar(i, nx.int32), f64(a)), e, 1e-12)
    close(rune.grad(lambda x: rune.switch(1, branches, x))(f64(a)), 3 * a * a, 1e-12)


# ---------------------------------------------------------------- while / fori

def test_while_loop_values_match_python_loop():
    def body(c):
        return c[0] + 1, c[1] * 1.5 + c[0]

    i, v = rune.while_loop(lambda c: c[1] < 100.0, body, (nx.scalar(0, nx.int32), f64(1.0)))
    ei, ev = 0, 1.0
    while ev < 100.0:
        ei, ev = ei + 1, ev * 1.5 + ei
    assert int(i) == ei and i.dtype == nx.int32
    close(v, ev)
    # pytree carry, and the same under jit
    jw = rune.jit(lambda x: rune.while_loop(lambda s: s["i"] < 4,
                                            lambda s: {"i": s["i"] + 1, "v": s["v"] * 2},
                                            {"i": 0, "v": x}))
    out = jw(f64(0.7))
    assert int(out["i"]) == 4
    close(out["v"], 0.7 * 16)


def test_while_loop_jvp():
    def w(a):
        return rune.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * a, c[1] + 1),
                               (f64(1.0), nx.scalar(0, nx.int32)))[0]

    a = 0.7
    out, t = rune.jvp(w, (f64(a),), (f64(1.0),))
    close(out, a ** 3, 1e-12)
    close(t, 3 * a * a, 1e-12)
    out, t = rune.jit(lambda a: rune.jvp(w, (a,), (f64(2.0),)))(f64(a))
    close(t, 6 * a * a, 1e-12)


def test_while_loop_carry_change_raises():
    with pytest.raises(rune.ShapeError):
        rune.while_loop(lambda s: s < 4, lambda s: s.astype(nx.float32), f64(0.0))


def test_while_loop_vjp_raises_not_differentiable():
    def w(a):
        return rune.while_loop(lambda c: c < 3.0, lambda c: c * a, f64(0.5))

    with pytest.raises(rune.NotDifferentiableError) as info:
        rune.grad(w)(f64(1.5))
    assert isinstance(info.value, TypeError)
    assert "while_loop" in str(info.value)
    with pytest.raises(rune.NotDifferentiableError):
        rune.jit(rune.grad(w))(f64(1.5))
    assert _trace.current() is _trace.EVAL
    close(w(f64(1.5)), 0.5 * 1.5 ** 5)  # 0.5 * 1.5^k first reaches 3 at k = 5


def _fori_python(lo, hi, a):
    c = 1.0
    for i in range(lo, hi):
        c = c * a + i
    return c


FORI_BOUNDS = [(0, 4), (2, 7), (3, 3), (5, 2)]


def _fori(lo, hi):
    return lambda a: rune.fori_loop(lo, hi, lambda i, c: c * a + i, f64(1.0))


# The jitted cond and fori_loop gradients of the tests, compiled together before the
# file's first test (eager loops compile their bodies as they run).
_kernels = precompiled(lambda: [(_cond_of(*_branches()[:2]), (f64(1.0), f64(0.7), f64(1.9))),
                                (rune.grad(_cond_of(*_branches()[:2]), argnums=1), (f64(1.0), f64(0.7), f64(1.9))),
                                *((rune.grad(_fori(lo, hi)), (f64(0.7),)) for lo, hi in FORI_BOUNDS)])


@pytest.mark.parametrize("lo, hi", FORI_BOUNDS)
def test_fori_loop_static_bounds_values_and_grad(lo, hi):
    f = _fori(lo, hi)

    a = 0.7
    close(f(f64(a)), _fori_python(lo, hi, a), 1e-12)
    g = rune.grad(f)(f64(a))
    close(g, fd_grad(lambda v: _fori_python(lo, hi, float(v)), a), 1e-6)
    close(rune.jit(rune.grad(f))(f64(a)), g, 1e-12)
    # static bounds stage a scan (differentiable), not a while_loop
    text = repr(rune.trace(f)(f64(a)))
    assert "while_loop" not in text


@pytest.mark.parametrize("traced_bounds", [False, True], ids=["static", "traced"])
def test_fori_loop_index_widening_a_float32_carry_names_index_dtypes_and_fix(traced_bounds):
    # JAX's idiom: under NumPy's promotion rules, float32 + int32 is float64
    x = nx.ones((3,), nx.float32)

    def run(lo, hi):
        return rune.fori_loop(lo, hi, lambda i, v: v * 1.1 + i, x)
    with pytest.raises(rune.ShapeError) as info:
        if traced_bounds:
            rune.jit(run)(nx.scalar(0, nx.int32), nx.scalar(3, nx.int32))
        else:
            run(0, 3)
    msg = str(info.value)
    assert msg.startswith("fori_loop:")
    assert "float64 for the float32 carry" in msg and "(root)" in msg
    assert "`i` (int32)" in msg and "i.astype(v.dtype)" in msg
    # a carry in a tree: the leaf is named by its path; the suggested cast works
    tree = {"w": x, "n": nx.zeros((), nx.int32)}
    with pytest.raises(rune.ShapeError, match=r"carry leaf \['w'\]"):
        rune.fori_loop(0, 3, lambda i, c: {"w": c["w"] + i, "n": c["n"] + i}, tree)
    out = rune.fori_loop(0, 3, lambda i, v: v * 1.1 + i.astype(v.dtype), x)
    assert out.dtype == nx.float32
    np.testing.assert_allclose(np.asarray(out), ((1.0 * 1.1 + 0) * 1.1 + 1) * 1.1 + 2, rtol=1e-6)


def test_while_loop_carry_dtype_change_names_both_dtypes_and_the_cast():
    with pytest.raises(rune.ShapeError) as info:
        rune.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * 1.1 + s[0]),
                        (nx.scalar(0, nx.int32), nx.ones((2,), nx.float32)))
    msg = str(info.value)
    assert "[1]" in msg and "float32[2]" in msg and "float64[2]" in msg
    assert "astype(carry.dtype)" in msg


def test_fori_loop_traced_bounds_under_jit():
    calls = []

    def f(lo, hi, a):
        calls.append(1)
        return rune.fori_loop(lo, hi, lambda i, c: c * a + i, f64(1.0))

    jf = rune.jit(f)
    a = 0.7
    for lo, hi in [(0, 4), (2, 7), (3, 3), (5, 2)]:
        out = jf(nx.scalar(lo, nx.int32), nx.scalar(hi, nx.int32), f64(a))
        close(out, _fori_python(lo, hi, a), 1e-12)
    assert len(calls) == 1  # traced once: the bounds are traced values
    assert "while_loop" in repr(jf.trace(nx.scalar(0, nx.int32), nx.scalar(4, nx.int32), f64(a)))


# ---------------------------------------------------------------- jit and control flow

def test_jit_scan_grad_jit_and_jit_grad_equal_eager():
    xs = f64(XS)
    w, c0 = f64([0.7, -1.3]), f64([0.2, 0.4])
    eager = _scan_loss(w, c0, xs)
    close(rune.jit(_scan_loss)(w, c0, xs), eager, 1e-12)
    g = rune.grad(_scan_loss)(w, c0, xs)
    close(rune.grad(rune.jit(_scan_loss))(w, c0, xs), g, 1e-12)
    jg = rune.jit(rune.grad(_scan_loss))
    close(jg(w, c0, xs), g, 1e-12)
    close(jg(w, c0, xs), g, 1e-12)  # cached replay
    assert rune.stats()["cache_hits"] >= 1
    c, ys = rune.jit(lambda c0, xs: rune.scan(_step, c0, xs, reverse=True))(c0, xs)
    ec, eys = rune.scan(_step, c0, xs, reverse=True)
    close(c, ec, 1e-12)
    close(ys, eys, 1e-12)
