"""Adversarial tests of transformations composed with each other.

Every test checks a composition (grad / jvp / vmap / jit nested two and three
deep, control flow under transformations, custom rules, callbacks, random keys,
indexed updates, pytrees) against an independent oracle: the same computation
without the transformation (eager, a Python loop), NumPy, or central finite
differences in float64.
"""
import dataclasses
import functools
import itertools
import typing

import numpy as np
import pytest

import rune
from rune import nx

from compiled import jitted_only, precompiled
from oracles import fd_grad
from rune.core import trace as core_trace

F64 = nx.float64
RNG = np.random.default_rng(0)


def A(x, dtype=np.float64):
    return nx.asarray(np.asarray(x, dtype=dtype))


def N(x):
    return np.asarray(x)


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(N(a), N(b), rtol=rtol, atol=atol)


@pytest.fixture(autouse=True)
def _own_random_stream(request):
    """Each test draws its data from its own seeded stream, so selecting or reordering
    tests never changes another test's inputs."""
    global RNG
    import zlib
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()))
    yield


def ran():
    return rune.stats()["callbacks_run"]


def usable():
    """rune is back to eager mode and a fresh computation works."""
    assert core_trace.current() is core_trace.EVAL
    x = A([1.0, 2.0])
    close(rune.grad(lambda v: nx.sum(v * v))(x), [2.0, 4.0])
    close(rune.jit(lambda v: v + 1)(x), [2.0, 3.0])


# ---------------------------------------------------------------- a test function with a dense Hessian
#   f(w) = sum(sin(w) * c) + (w . w)^2 / 4
#   grad = cos(w) c + (w . w) w
#   H    = diag(-sin(w) c) + (w . w) I + 2 w w^T

C = RNG.normal(size=4)


def f_rune(w, c=None):
    c = A(C) if c is None else c
    return nx.sum(nx.sin(w) * c) + nx.sum(w * w) ** 2 / 4


def f_np(w, c=C):
    return np.sum(np.sin(w) * c) + np.sum(w * w) ** 2 / 4


def g_np(w, c=C):
    return np.cos(w) * c + np.sum(w * w) * w


def h_np(w, c=C):
    return np.diag(-np.sin(w) * c) + np.sum(w * w) * np.eye(len(w)) + 2 * np.outer(w, w)


W = RNG.normal(size=(3, 4)) * 0.7   # a batch of three points
V = RNG.normal(size=(3, 4))         # a batch of tangents


def test_oracle_is_right():
    close(g_np(W[0]), fd_grad(f_np, W[0]), rtol=1e-7, atol=1e-8)
    close(h_np(W[0]), np.stack([fd_grad(lambda w: g_np(w)[i], W[0]) for i in range(4)]),
          rtol=1e-6, atol=1e-7)


g = rune.grad
j = rune.jit
vm = rune.vmap

PER_EXAMPLE_GRAD = {
    "vmap(grad)": lambda: vm(g(f_rune)),
    "jit(vmap(grad))": lambda: j(vm(g(f_rune))),
    "vmap(jit(grad))": lambda: vm(j(g(f_rune))),
    "vmap(grad(jit))": lambda: vm(g(j(f_rune))),
    "jit(vmap(jit(grad(jit))))": lambda: j(vm(j(g(j(f_rune))))),
    "vmap(vmap(grad)) on [B,1,n]": None,
}


@pytest.mark.parametrize("name", [k for k, v in PER_EXAMPLE_GRAD.items() if v])
def test_per_example_gradient_compositions(name):
    out = PER_EXAMPLE_GRAD[name]()(A(W))
    close(out, np.stack([g_np(w) for w in W]))


def test_vmap_vmap_grad_and_in_axes_1():
    out = vm(vm(g(f_rune)))(A(W[:, None, :]))
    close(out[:, 0], np.stack([g_np(w) for w in W]))
    out = vm(g(f_rune), in_axes=1, out_axes=1)(A(W.T))
    close(out, np.stack([g_np(w) for w in W]).T)


GRAD_OF_MAPPED = {
    "grad(vmap)": lambda: g(lambda ws: nx.sum(vm(f_rune)(ws))),
    "grad(jit(vmap))": lambda: g(j(lambda ws: nx.sum(vm(f_rune)(ws)))),
    "jit(grad(vmap))": lambda: j(g(lambda ws: nx.sum(vm(f_rune)(ws)))),
    "grad(vmap(jit))": lambda: g(lambda ws: nx.sum(vm(j(f_rune))(ws))),
    "jit(grad(jit(vmap(jit))))": lambda: j(g(j(lambda ws: nx.sum(vm(j(f_rune))(ws))))),
}


@pytest.mark.parametrize("name", list(GRAD_OF_MAPPED))
def test_gradient_of_mapped_compositions(name):
    close(GRAD_OF_MAPPED[name]()(A(W)), np.stack([g_np(w) for w in W]))


def _hvp(w, v):
    return rune.jvp(g(f_rune), (w,), (v,))[1]


HVP = {
    "jvp(grad)": lambda: _hvp,
    "jit(jvp(grad))": lambda: j(_hvp),
    "jvp(jit(grad))": lambda: (lambda w, v: rune.jvp(j(g(f_rune)), (w,), (v,))[1]),
    "jvp(grad(jit))": lambda: (lambda w, v: rune.jvp(g(j(f_rune)), (w,), (v,))[1]),
    "grad(jvp) (reverse over forward)": lambda: (
        lambda w, v: g(lambda u: rune.jvp(f_rune, (u,), (v,))[1])(w)),
    "grad(jit(jvp))": lambda: (lambda w, v: g(j(lambda u: rune.jvp(f_rune, (u,), (v,))[1]))(w)),
    "jvp(jvp) contracted": lambda: (
        lambda w, v: nx.stack([rune.jvp(lambda u: rune.jvp(f_rune, (u,), (v,))[1], (w,),
                                        (A(np.eye(4)[i]),))[1] for i in range(4)])),
}


@pytest.mark.parametrize("name", list(HVP))
def test_hessian_vector_product_compositions(name):
    w, v = W[0], V[0]
    close(HVP[name]()(A(w), A(v)), h_np(w) @ v)


MAPPED_HVP = {
    "vmap(jvp(grad))": lambda: vm(_hvp),
    "jit(vmap(jvp(grad)))": lambda: j(vm(_hvp)),
    "vmap(jit(jvp(grad)))": lambda: vm(j(_hvp)),
    "vmap(jvp(jit(grad)))": lambda: vm(lambda w, v: rune.jvp(j(g(f_rune)), (w,), (v,))[1]),
    "vmap(grad(jvp))": lambda: vm(lambda w, v: g(lambda u: rune.jvp(f_rune, (u,), (v,))[1])(w)),
    "jvp(vmap(grad))": lambda: (lambda ws, vs: rune.jvp(vm(g(f_rune)), (ws,), (vs,))[1]),
    "jvp(jit(vmap(grad)))": lambda: (lambda ws, vs: rune.jvp(j(vm(g(f_rune))), (ws,), (vs,))[1]),
}


@pytest.mark.parametrize("name", list(MAPPED_HVP))
def test_batched_hessian_vector_products(name):
    close(MAPPED_HVP[name]()(A(W), A(V)), np.stack([h_np(w) @ v for w, v in zip(W, V)]))


def test_vmap_over_tangents_only():
    w = A(W[0])
    out = vm(lambda v: _hvp(w, v))(A(V))
    close(out, V @ h_np(W[0]).T)
    out = j(vm(lambda v: _hvp(w, v)))(A(V))
    close(out, V @ h_np(W[0]).T)


HESSIANS = {
    "hessian": lambda: rune.hessian(f_rune),
    "jit(hessian)": lambda: j(rune.hessian(f_rune)),
    "hessian(jit)": lambda: rune.hessian(j(f_rune)),
    "jacfwd(jacrev)": lambda: rune.jacfwd(rune.jacrev(f_rune)),
    "jacrev(jacfwd)": lambda: rune.jacrev(rune.jacfwd(f_rune)),
    "jacrev(jacrev)": lambda: rune.jacrev(rune.jacrev(f_rune)),
    "jacfwd(grad)": lambda: rune.jacfwd(g(f_rune)),
    "jacrev(jit(grad))": lambda: rune.jacrev(j(g(f_rune))),
}


@pytest.mark.parametrize("name", list(HESSIANS))
def test_hessian_compositions(name):
    close(HESSIANS[name]()(A(W[1])), h_np(W[1]))


def test_vmapped_and_jitted_hessians():
    expected = np.stack([h_np(w) for w in W])
    close(vm(rune.hessian(f_rune))(A(W)), expected)
    close(j(vm(rune.hessian(f_rune)))(A(W)), expected)
    close(vm(j(rune.hessian(f_rune)))(A(W)), expected)


def test_grad_of_grad_scalar_compositions():
    h = lambda x: nx.sin(x) * x ** 3  # noqa: E731
    x0 = 0.7
    d2 = -np.sin(x0) * x0 ** 3 + 6 * np.cos(x0) * x0 ** 2 + 6 * np.sin(x0) * x0
    d3 = (-np.cos(x0) * x0 ** 3 - 9 * np.sin(x0) * x0 ** 2 + 18 * np.cos(x0) * x0 + 6 * np.sin(x0))
    x = nx.scalar(x0, F64)
    for f2 in (g(g(h)), j(g(g(h))), g(j(g(h))), g(g(j(h))), j(g(j(g(j(h)))))):
        close(f2(x), d2)
    close(g(g(g(h)))(x), d3)
    close(j(g(g(g(h))))(x), d3)
    xs = A([0.1, 0.7, -1.3])
    expected = [(-np.sin(t) * t ** 3 + 6 * np.cos(t) * t ** 2 + 6 * np.sin(t) * t) for t in N(xs)]
    close(vm(g(g(h)))(xs), expected)
    close(j(vm(g(g(h))))(xs), expected)
    close(vm(j(g(g(h))))(xs), expected)
    # forward over reverse over forward
    t = rune.jvp(g(lambda y: rune.jvp(h, (y,), (nx.scalar(1.0, F64),))[1]), (x,),
                 (nx.scalar(1.0, F64),))[1]
    close(t, d3)


def test_perturbation_confusion_under_vmap_and_jit():
    # d/dx [x * d/dy (x * y)] = 2x, per lane; confusing the perturbations gives x or 3x
    fn = lambda x: x * g(lambda y: x * y)(nx.scalar(3.0, F64))  # noqa: E731
    xs = A([1.0, 2.0, -0.5])
    close(vm(g(fn))(xs), 2 * N(xs))
    close(j(vm(g(fn)))(xs), 2 * N(xs))
    close(vm(j(g(fn)))(xs), 2 * N(xs))
    # jvp version: d/dx [x * (d/dy x*y)] via forward inside reverse
    fn2 = lambda x: x * rune.jvp(lambda y: x * y, (nx.scalar(3.0, F64),), (nx.scalar(1.0, F64),))[1]  # noqa
    close(vm(g(fn2))(xs), 2 * N(xs))
    close(vm(lambda x: rune.jvp(fn2, (x,), (nx.scalar(1.0, F64),))[1])(xs), 2 * N(xs))


def test_jvp_of_vmap_with_unbatched_arguments_and_out_axes():
    ws, c = A(W), A(C)
    fn = vm(lambda w, c: nx.sin(w) * c, in_axes=(0, None), out_axes=1)
    out, tan = rune.jvp(fn, (ws, c), (A(V), A(np.ones(4))))
    close(out, (np.sin(W) * C).T)
    close(tan, (np.cos(W) * C * V + np.sin(W)).T)
    out2, tan2 = j(lambda a, b, ta, tb: rune.jvp(fn, (a, b), (ta, tb)))(ws, c, A(V), A(np.ones(4)))
    close(out2, out)
    close(tan2, tan)



# ---------------------------------------------------------------- every order, two and three deep
# Each wrapper turns f: R^n -> R into another such function. Its "real" form uses the
# transformation; its reference form computes the same mathematics another way: grad by
# forward mode over a basis, jvp by reverse mode and a dot product, vmap by a Python
# sum over the lanes, jit by not compiling. A final grad of the whole stack is compared.

def _wrap(kind, f, real):
    if kind == "grad":
        if real:
            return lambda w: nx.sum(nx.sin(g(f)(w)))
        return lambda w: nx.sum(nx.sin(nx.stack([rune.jvp(f, (w,), (A(e),))[1] for e in np.eye(w.shape[0])])))
    if kind == "jvp":
        if real:
            return lambda w: rune.jvp(f, (w,), (nx.cos(w),))[1] + f(w)
        return lambda w: nx.sum(g(f)(w) * nx.cos(w)) + f(w)
    if kind == "vmap":
        if real:
            return lambda w: nx.sum(vm(lambda a: f(w * a))(A([1.0, -0.5])))
        return lambda w: f(w * 1.0) + f(w * -0.5)
    return j(f) if real else f


def _scan_base(w):
    return rune.scan(lambda c, x: (nx.tanh(c * w[0] + x * w[1]) + w[2] * c, c * x), w[2], A(XS))[1].sum()


_KINDS = ["grad", "jvp", "vmap", "jit"]
_STACKS = ([("dense", k) for d in (2, 3) for k in itertools.product(_KINDS, repeat=d)] +
           [("scan", k) for k in itertools.product(_KINDS, repeat=2)] +
           [("scan", k) for k in itertools.product(_KINDS, repeat=3) if "jit" in k and "vmap" in k])


def _stack(base, kinds):
    """The function `kinds` deep over `base` with the transformations (real) and without."""
    f0 = (lambda w: f_rune(w, A(C[:3]))) if base == "dense" else _scan_base
    real, ref = f0, f0
    for k in kinds:
        real, ref = _wrap(k, real, True), _wrap(k, ref, False)
    return real, ref


STACK_POINT = [0.3, -0.6, 0.2]


@pytest.mark.parametrize("base,kinds", _STACKS, ids=[f"{b}-{'.'.join(k)}" for b, k in _STACKS])
def test_every_nesting_order(base, kinds):
    real, ref = _stack(base, kinds)
    w = A(STACK_POINT)
    close(real(w), ref(w))
    close(g(real)(w), g(ref)(w))


# ---------------------------------------------------------------- scan / cond / while under transformations

XS = RNG.normal(size=5) * 0.5


def scan_loss(w, xs):
    """c_{t+1} = tanh(w0 * c_t + w1 * x_t) + w2 * c_t * x_t ; sum of ys = c^2 * w0."""
    def step(c, x):
        c2 = nx.tanh(w[0] * c + w[1] * x) + w[2] * c * x
        return c2, c2 * c2 * w[0]
    c, ys = rune.scan(step, nx.scalar(0.3, F64), xs)
    return c + nx.sum(ys)


def loop_loss_np(w, xs):
    c, total = 0.3, 0.0
    for x in xs:
        c = np.tanh(w[0] * c + w[1] * x) + w[2] * c * x
        total += c * c * w[0]
    return c + total


def loop_loss(w, xs):
    """The same computation as scan_loss, as a Python loop of eager ops."""
    c, total = nx.scalar(0.3, F64), nx.scalar(0.0, F64)
    for i in range(xs.shape[0]):
        c = nx.tanh(w[0] * c + w[1] * xs[i]) + w[2] * c * xs[i]
        total = total + c * c * w[0]
    return c + total


W3 = np.array([0.8, -0.6, 0.3])


def test_scan_value_matches_loop():
    close(scan_loss(A(W3), A(XS)), loop_loss_np(W3, XS))
    close(j(scan_loss)(A(W3), A(XS)), loop_loss_np(W3, XS))


def test_grad_of_scan_matches_finite_differences():
    fd = fd_grad(lambda w: loop_loss_np(w, XS), W3)
    for fn in (g(scan_loss), j(g(scan_loss)), g(j(scan_loss))):
        close(fn(A(W3), A(XS)), fd, rtol=1e-7, atol=1e-9)
    fdx = fd_grad(lambda xs: loop_loss_np(W3, xs), XS)
    close(g(scan_loss, argnums=1)(A(W3), A(XS)), fdx, rtol=1e-7, atol=1e-9)


def test_hessian_of_scan_matches_loop_and_fd():
    expected = rune.hessian(loop_loss)(A(W3), A(XS))
    fdh = np.stack([fd_grad(lambda w: N(g(loop_loss)(A(w), A(XS)))[i], W3) for i in range(3)])
    close(expected, fdh, rtol=1e-6, atol=1e-8)
    for fn in (rune.hessian(scan_loss), j(rune.hessian(scan_loss)), rune.jacrev(rune.jacrev(scan_loss)),
               rune.jacrev(rune.jacfwd(scan_loss))):
        close(fn(A(W3), A(XS)), expected, rtol=1e-9, atol=1e-11)


def test_grad_grad_of_scan_scalar():
    def fs(a):
        c, _ = rune.scan(lambda c, x: (nx.sin(c * a + x), None), nx.scalar(0.1, F64), A(XS))
        return c

    def fl(a):
        c = 0.1
        for x in XS:
            c = np.sin(c * a + x)
        return c
    a0 = 0.9
    d1 = fd_grad(lambda a: fl(a[()]), np.array(a0))
    close(g(fs)(nx.scalar(a0, F64)), d1, rtol=1e-7)
    d2 = fd_grad(lambda a: float(g(fs)(nx.scalar(float(a), F64))), np.array(a0))
    for f2 in (g(g(fs)), j(g(g(fs))), g(j(g(fs)))):
        close(f2(nx.scalar(a0, F64)), d2, rtol=1e-6)
    # per-lane second derivative of the scan
    as_ = np.array([0.9, -0.4, 1.5])
    expected = [float(g(g(fs))(nx.scalar(a, F64))) for a in as_]
    close(vm(g(g(fs)))(A(as_)), expected)
    close(j(vm(g(g(fs))))(A(as_)), expected)


def test_reverse_scan_under_vmap_and_grad():
    def fs(w, xs):
        c, ys = rune.scan(lambda c, x: (c * w + x, c), nx.scalar(1.0, F64), xs, reverse=True)
        return c, ys

    def fl(w, xs):
        c, ys = 1.0, [None] * len(xs)
        for i in reversed(range(len(xs))):
            ys[i] = c
            c = c * w + xs[i]
        return c, np.array(ys)

    ws = np.array([0.5, 1.1])
    X = RNG.normal(size=(2, 4))
    c, ys = vm(fs)(A(ws), A(X))
    for i in range(2):
        ce, yse = fl(ws[i], X[i])
        close(c[i], ce)
        close(ys[i], yse)
    gw = vm(g(lambda w, xs: fs(w, xs)[0] + nx.sum(fs(w, xs)[1] ** 2)))(A(ws), A(X))
    for i in range(2):
        close(gw[i], fd_grad(lambda w: fl(w[()], X[i])[0] + np.sum(fl(w[()], X[i])[1] ** 2), np.array(ws[i])),
              rtol=1e-7)


SCAN_AXES = [(0, 0), (0, None), (None, 0), (1, 1)]


@pytest.mark.parametrize("init_axis,xs_axis", SCAN_AXES)
def test_vmap_of_scan_batched_and_unbatched_carry_and_xs(init_axis, xs_axis):
    B = 3
    inits = RNG.normal(size=(B, 2))
    xss = RNG.normal(size=(B, 4, 2))
    init_arg = inits if init_axis == 0 else (inits[0] if init_axis is None else inits.T)
    xs_arg = xss if xs_axis == 0 else (xss[0] if xs_axis is None else np.moveaxis(xss, 0, 1))

    def fs(c0, xs):
        return rune.scan(lambda c, x: (nx.sin(c) + x * c, nx.sum(c * x)), c0, xs)

    def fl(c0, xs):
        c, ys = c0, []
        for x in xs:
            ys.append(np.sum(c * x))
            c = np.sin(c) + x * c
        return c, np.array(ys)

    for fn in (vm(fs, in_axes=(init_axis, xs_axis)), j(vm(fs, in_axes=(init_axis, xs_axis)))):
        c, ys = fn(A(init_arg), A(xs_arg))
        for b in range(B):
            ce, ye = fl(inits[b] if init_axis is not None else inits[0],
                        xss[b] if xs_axis is not None else xss[0])
            close(c[b], ce)
            close(ys[b], ye)


def test_vmap_of_scan_closing_over_batched_value():
    B = 3
    ks = RNG.normal(size=B)

    def fs(k):
        c, ys = rune.scan(lambda c, x: (c * k + x, c * k), nx.scalar(0.0, F64), A(XS))
        return c, ys

    c, ys = vm(fs)(A(ks))
    for b in range(B):
        ce, ye = 0.0, []
        for x in XS:
            ye.append(ce * ks[b])
            ce = ce * ks[b] + x
        close(c[b], ce)
        close(ys[b], ye)


def _cond_fn(p, x, y):
    return rune.cond(p, lambda a, b: nx.sin(a) * b, lambda a, b: a - nx.cos(b) * 2, x, y)


def _cond_np(p, x, y):
    return np.sin(x) * y if p else x - np.cos(y) * 2


def _cond_call(args, axes):
    """The lanes (p, x, y) as vmap takes them: whole along a batched axis, lane 0 where unbatched."""
    call = [a if ax == 0 else a[0] for a, ax in zip(args, axes)]
    return [A(call[0], np.bool_)] + [A(c) for c in call[1:]]


COND_AXES = [(0, 0, 0), (0, None, None), (None, 0, 0), (None, 0, None), (0, None, 0)]
GRAD_COND_AXES = [(0, 0, 0), (None, 0, 0), (0, 0, None)]


@pytest.mark.parametrize("axes", COND_AXES)
def test_vmap_of_cond_batched_and_unbatched_predicate(axes):
    B = 4
    ps = np.array([True, False, True, False])
    xs, ys = RNG.normal(size=B), RNG.normal(size=B)
    args = [ps, xs, ys]
    call = _cond_call(args, axes)
    expected = [_cond_np(*[a[b] if ax == 0 else a[0] for a, ax in zip(args, axes)]) for b in range(B)]
    for fn in (vm(_cond_fn, in_axes=axes), j(vm(_cond_fn, in_axes=axes)), vm(j(_cond_fn), in_axes=axes)):
        close(fn(*call), expected)


@pytest.mark.parametrize("axes", GRAD_COND_AXES)
def test_grad_of_vmapped_cond_and_vmapped_grad_of_cond(axes):
    B = 4
    ps = np.array([True, False, False, True])
    xs, ys = RNG.normal(size=B), RNG.normal(size=B)
    args = [ps, xs, ys]
    call = _cond_call(args, axes)

    def lane(b):
        return [a[b] if ax == 0 else a[0] for a, ax in zip(args, axes)]

    # vmap(grad): per-lane derivative with respect to x
    dx = [(np.cos(x) * y if p else 1.0) for p, x, y in map(lane, range(B))]
    close(vm(g(_cond_fn, argnums=1), in_axes=axes)(*call), dx)
    close(j(vm(g(_cond_fn, argnums=1), in_axes=axes))(*call), dx)
    # grad(sum(vmap)): derivative with respect to the (maybe shared) y
    dy_lanes = [(np.sin(x) if p else 2 * np.sin(y)) for p, x, y in map(lane, range(B))]
    dy = np.array(dy_lanes) if axes[2] == 0 else np.sum(dy_lanes)
    got = g(lambda *a: nx.sum(vm(_cond_fn, in_axes=axes)(*a)), argnums=2)(*call)
    close(got, dy)


def test_switch_with_batched_index_out_of_range_clamps():
    branches = [lambda x: x + 1, lambda x: x * 10, lambda x: -x]
    idx = np.array([-3, 0, 1, 2, 7], np.int32)
    xs = np.arange(5.0)
    out = vm(lambda i, x: rune.switch(i, branches, x))(A(idx, np.int32), A(xs))
    expected = [[xs[b] + 1, xs[b] * 10, -xs[b]][min(max(idx[b], 0), 2)] for b in range(5)]
    close(out, expected)
    out = j(vm(lambda i, x: rune.switch(i, branches, x)))(A(idx, np.int32), A(xs))
    close(out, expected)


def _collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def test_while_loop_inside_vmap_inside_jit_with_batched_predicate():
    def steps(n):
        def body(s):
            k, m = s
            m2 = nx.where(m % 2 == 0, m // 2, 3 * m + 1)
            return k + 1, m2
        return rune.while_loop(lambda s: s[1] != 1, body, (nx.scalar(0, nx.int32), n))[0]

    ns = np.array([1, 6, 7, 27, 2], np.int32)
    expected = [_collatz_steps(int(n)) for n in ns]
    for fn in (vm(steps), j(vm(steps)), vm(j(steps)), j(vm(j(steps)))):
        assert N(fn(A(ns, np.int32))).tolist() == expected


def test_while_loop_under_vmap_unbatched_predicate_batched_payload():
    def f(x, n):
        return rune.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 1.5 + 1.0), (0, x))[1]

    xs = np.array([1.0, -2.0, 0.5])
    out = vm(f, in_axes=(0, None))(A(xs), nx.scalar(4, nx.int32))
    e = xs.copy()
    for _ in range(4):
        e = e * 1.5 + 1.0
    close(out, e)
    close(j(vm(f, in_axes=(0, None)))(A(xs), nx.scalar(4, nx.int32)), e)


def test_jvp_of_while_loop_and_vmap_of_it():
    def f(x):
        # Newton iterations for sqrt(2) starting at x; then times x
        def body(s):
            i, y = s
            return i + 1, 0.5 * (y + x * x / y)
        return rune.while_loop(lambda s: s[0] < 6, body, (0, x))[1]
    # y converges to |x|, so its derivative is sign(x)
    x = nx.scalar(1.7, F64)
    out, t = rune.jvp(f, (x,), (nx.scalar(1.0, F64),))
    close(out, 1.7)

    def fl(x):
        return functools.reduce(lambda y, _: 0.5 * (y + x * x / y), range(6), x)
    close(t, fd_grad(lambda a: fl(a[()]), np.array(1.7)), rtol=1e-7)
    xs = np.array([1.7, 0.3, 4.0])
    outs, ts = vm(lambda x: rune.jvp(f, (x,), (nx.scalar(1.0, F64),)))(A(xs))
    close(ts, [fd_grad(lambda a: fl(a[()]), np.array(v)) for v in xs], rtol=1e-6)
    outs2, ts2 = j(vm(lambda x: rune.jvp(f, (x,), (nx.ones_like(x),))))(A(xs))
    close(ts2, ts)


def test_vmap_fori_loop_with_batched_dynamic_upper_bound():
    def f(n, x):
        return rune.fori_loop(0, n, lambda i, c: c * 2.0 + nx.astype(i, F64), x)

    ns = np.array([0, 1, 3, 5], np.int32)
    xs = np.array([1.0, 2.0, -1.0, 0.5])

    def ref(n, x):
        for i in range(n):
            x = x * 2.0 + i
        return x
    expected = [ref(n, x) for n, x in zip(ns, xs)]
    close(vm(f)(A(ns, np.int32), A(xs)), expected)
    close(j(vm(f))(A(ns, np.int32), A(xs)), expected)
    close(vm(j(f))(A(ns, np.int32), A(xs)), expected)


def test_fori_loop_static_bounds_grad_and_zero_trips():
    def f(x, n):
        return rune.fori_loop(0, n, lambda i, c: nx.sin(c) * x, x)

    def fl(x, n):
        c = x
        for _ in range(n):
            c = np.sin(c) * x
        return c
    for n in (0, 1, 4):
        close(f(nx.scalar(0.8, F64), n), fl(0.8, n))
        close(g(f)(nx.scalar(0.8, F64), n), fd_grad(lambda a: fl(a[()], n), np.array(0.8)), rtol=1e-7)
        close(vm(g(f), in_axes=(0, None))(A([0.8, -0.2]), n),
              [fd_grad(lambda a: fl(a[()], n), np.array(v)) for v in (0.8, -0.2)], rtol=1e-7)
    # lower > upper is zero trips
    close(f(nx.scalar(0.8, F64), -2), 0.8)


def test_scan_inside_cond_inside_scan_with_grad():
    xs = RNG.normal(size=(4, 3))
    xs[0], xs[1] = np.abs(xs[0]), -np.abs(xs[1])  # both branches are taken

    def inner(c, row, w):
        return rune.scan(lambda a, x: (a * w + nx.sin(x), None), c, row)[0]

    def outer(w):
        def step(c, row):
            c2 = rune.cond(nx.sum(row) > 0, lambda c, r: inner(c, r, w), lambda c, r: c - w * nx.sum(r), c, row)
            return c2, c2
        c, ys = rune.scan(step, nx.scalar(0.5, F64), A(xs))
        return c + nx.sum(ys * ys)

    def outer_np(w):
        c, tot = 0.5, 0.0
        for row in xs:
            if row.sum() > 0:
                for x in row:
                    c = c * w + np.sin(x)
            else:
                c = c - w * row.sum()
            tot += c * c
        return c + tot

    assert any(r.sum() > 0 for r in xs) and any(r.sum() <= 0 for r in xs)
    w0 = 0.7
    close(outer(nx.scalar(w0, F64)), outer_np(w0))
    d = fd_grad(lambda a: outer_np(a[()]), np.array(w0))
    for fn in (g(outer), j(g(outer)), g(j(outer))):
        close(fn(nx.scalar(w0, F64)), d, rtol=1e-7)
    ws = np.array([0.7, -0.3, 1.1])
    close(vm(g(outer))(A(ws)), [fd_grad(lambda a: outer_np(a[()]), np.array(v)) for v in ws], rtol=1e-7)
    d2 = fd_grad(lambda a: float(g(outer)(nx.scalar(float(a), F64))), np.array(w0), eps=1e-5)
    close(g(g(outer))(nx.scalar(w0, F64)), d2, rtol=1e-6)


def test_grad_through_cond_inside_scan_with_weight_vector():
    xs = RNG.normal(size=6)

    def f(w):
        def step(c, x):
            c2 = rune.cond(x > 0, lambda c: c * w[0] + x, lambda c: nx.tanh(c * w[1]) - x, c)
            return c2, None
        return rune.scan(step, nx.scalar(0.4, F64), A(xs))[0]

    def fnp(w):
        c = 0.4
        for x in xs:
            c = c * w[0] + x if x > 0 else np.tanh(c * w[1]) - x
        return c
    w0 = np.array([0.9, 1.3])
    d = fd_grad(fnp, w0)
    close(g(f)(A(w0)), d, rtol=1e-7)
    close(j(g(f))(A(w0)), d, rtol=1e-7)
    close(rune.jacfwd(f)(A(w0)), d, rtol=1e-7)
    hs = rune.hessian(f)(A(w0))
    fdh = np.stack([fd_grad(lambda w: N(g(f)(A(w)))[i], w0) for i in range(2)])
    close(hs, fdh, rtol=1e-6, atol=1e-8)
    Ws = np.array([[0.9, 1.3], [1.1, -0.5]])
    close(vm(g(f))(A(Ws)), np.stack([fd_grad(fnp, w) for w in Ws]), rtol=1e-7)


# ---------------------------------------------------------------- custom rules and callbacks

class Solver:
    """The seed's solver: u(theta) solves (theta^2 + 1) u = 1; counts solves and adjoints."""

    def __init__(self):
        self.solves = 0
        self.adjoints = 0

    def solve(self, theta):
        self.solves += 1
        t = theta.item()
        return nx.scalar(1.0 / (t * t + 1.0), F64)

    def adjoint(self, theta, u, ct):
        self.adjoints += 1
        t, u, ct = theta.item(), u.item(), ct.item()
        return nx.scalar(-2.0 * t * u * ct / (t * t + 1.0), F64)

    def state_fn(self):
        @rune.custom_vjp
        def state(theta):
            u = rune.callback(self.solve, theta, like=theta)

            def pullback(ct):
                return rune.callback(self.adjoint, theta, u, ct, like=theta)
            return u, pullback
        return state


def u_np(t):
    return 1.0 / (t * t + 1.0)


def du_np(t):
    return -2.0 * t / (t * t + 1.0) ** 2


THETAS = np.array([-1.0, 0.0, 0.5, 2.0])


def test_custom_vjp_with_callbacks_inside_vmap_inside_jit_counts():
    s = Solver()
    state = s.state_fn()
    f = j(vm(state))
    close(f(A(THETAS)), u_np(THETAS))
    assert (s.solves, s.adjoints) == (4, 0)
    close(f(A(THETAS)), u_np(THETAS))
    assert (s.solves, s.adjoints) == (8, 0)
    assert ran() == 8


def test_per_example_grad_of_custom_vjp_with_callbacks():
    s = Solver()
    state = s.state_fn()
    for k, fn in enumerate((vm(g(state)), j(vm(g(state))), vm(j(g(state))))):
        close(fn(A(THETAS)), du_np(THETAS))
        assert (s.solves, s.adjoints) == (4 * (k + 1), 4 * (k + 1)), fn
    s.solves = s.adjoints = 0
    # grad of the sum of the mapped state: one solve and one adjoint per lane
    gsum = g(lambda t: nx.sum(vm(state)(t)))
    close(gsum(A(THETAS)), du_np(THETAS))
    assert (s.solves, s.adjoints) == (4, 4)
    jg = j(gsum)
    jg(A(THETAS))
    close(jg(A(THETAS)), du_np(THETAS))
    assert (s.solves, s.adjoints) == (12, 12)


def test_seed_scan_of_custom_vjp_under_vmap_counts():
    s = Solver()
    state = s.state_fn()

    def loss(thetas):
        total, _ = rune.scan(lambda acc, t: (acc + state(t), t), nx.scalar(0.0, F64), thetas)
        return total
    T = np.stack([THETAS, THETAS * 0.5 + 0.1])
    out = vm(g(loss))(A(T))
    close(out, du_np(T))
    assert (s.solves, s.adjoints) == (8, 8)
    out = j(vm(g(loss)))(A(T))
    close(out, du_np(T))
    assert (s.solves, s.adjoints) == (16, 16)


def _batched_state(calls):
    """The seed's state with vmap_method="batched" callbacks that log ("s"|"a", shape)."""
    def solve(theta):
        calls.append(("s", np.asarray(theta).shape))
        t = np.asarray(theta)
        return nx.asarray(1.0 / (t * t + 1.0))

    def adjoint(theta, u, ct):
        calls.append(("a", np.asarray(theta).shape))
        t, u, ct = np.asarray(theta), np.asarray(u), np.asarray(ct)
        return nx.asarray(-2.0 * t * u * ct / (t * t + 1.0))

    @rune.custom_vjp
    def state(theta):
        u = rune.callback(solve, theta, like=theta, vmap_method="batched")
        return u, lambda ct: rune.callback(adjoint, theta, u, ct, like=theta, vmap_method="batched")

    return state


def test_custom_vjp_batched_vmap_method_runs_once_per_evaluation():
    calls = []
    state = _batched_state(calls)
    close(j(vm(g(state)))(A(THETAS)), du_np(THETAS))
    assert calls == [("s", (4,)), ("a", (4,))]


def test_second_order_through_custom_vjp_with_nx_pullback():
    @rune.custom_vjp
    def cube(x):
        return x ** 3, lambda ct: ct * 3 * x ** 2

    x = nx.scalar(1.3, F64)
    close(g(cube)(x), 3 * 1.3 ** 2)
    close(g(g(cube))(x), 6 * 1.3)
    close(j(g(g(cube)))(x), 6 * 1.3)
    close(vm(g(g(cube)))(A([1.0, -2.0])), [6.0, -12.0])
    close(rune.jacrev(vm(g(cube)))(A([1.0, -2.0])), np.diag([6.0, -12.0]))


def test_custom_vjp_rule_is_used_not_the_forward_ops():
    # forward is x*2, but the rule says the derivative is 7: the rule must win everywhere
    @rune.custom_vjp
    def f(x):
        return x * 2, lambda ct: ct * 7

    xs = A([1.0, 2.0, 3.0])
    close(vm(g(f))(xs), [7.0, 7.0, 7.0])
    close(g(lambda x: nx.sum(vm(f)(x)))(xs), [7.0, 7.0, 7.0])
    close(j(g(lambda x: nx.sum(j(vm(f))(x))))(xs), [7.0, 7.0, 7.0])
    close(g(lambda w: rune.scan(lambda c, x: (c + f(x * w), None), nx.scalar(0.0, F64), xs)[0])(
        nx.scalar(1.0, F64)), 7 * 6)
    # vjp pullback of the vmapped function on a non-ones cotangent
    _, pull = rune.vjp(vm(f), xs)
    close(pull(A([1.0, 10.0, 100.0]))[0], [7.0, 70.0, 700.0])


def test_custom_vjp_with_two_args_one_unbatched_under_vmap():
    @rune.custom_vjp
    def mul(a, b):
        return a * b, lambda ct: (ct * b, ct * a * 3)  # b's rule deliberately wrong: 3x

    As, b = A([1.0, 2.0, 3.0]), nx.scalar(0.5, F64)
    # gradient w.r.t. shared b of the sum over lanes = 3 * sum(a)
    close(g(lambda b: nx.sum(vm(mul, in_axes=(0, None))(As, b)))(b), 3 * 6.0)
    close(j(g(lambda b: nx.sum(vm(mul, in_axes=(0, None))(As, b))))(b), 3 * 6.0)
    ga, gb = g(lambda a, b: nx.sum(vm(mul, in_axes=(0, None))(a, b)), argnums=(0, 1))(As, b)
    close(ga, [0.5, 0.5, 0.5])
    close(gb, 18.0)
    # per-lane gradient w.r.t. the shared b: the lane's own cotangent (no summation)
    close(vm(g(mul, argnums=1), in_axes=(0, None))(As, b), [3.0, 6.0, 9.0])


def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return nx.log1p(nx.exp(x)), t * nx.sigmoid(x) * 3.0  # 3x the true derivative: the rule must win


softplus = rune.custom_jvp(lambda x: nx.log1p(nx.exp(x)), _softplus_jvp)


def test_custom_jvp_inside_scan_under_jvp():
    xs = RNG.normal(size=5)

    def f(w):
        return rune.scan(lambda c, x: (c + softplus(w * x), None), nx.scalar(0.0, F64), A(xs))[0]

    w0 = 0.6
    expected_t = 3.0 * np.sum(xs / (1 + np.exp(-w0 * xs)))
    out, t = rune.jvp(f, (nx.scalar(w0, F64),), (nx.scalar(1.0, F64),))
    close(out, np.sum(np.log1p(np.exp(w0 * xs))))
    close(t, expected_t)
    _, t2 = j(lambda w: rune.jvp(f, (w,), (nx.ones_like(w),)))(nx.scalar(w0, F64))
    close(t2, expected_t)
    ws = np.array([0.6, -1.0, 2.0])
    ts = vm(lambda w: rune.jvp(f, (w,), (nx.ones_like(w),))[1])(A(ws))
    close(ts, [3.0 * np.sum(xs / (1 + np.exp(-w * xs))) for w in ws])
    close(rune.jacfwd(f)(nx.scalar(w0, F64)), expected_t)
    # jvp of vmap of the scan
    _, tv = rune.jvp(vm(f), (A(ws),), (A(np.ones(3)),))
    close(tv, ts)


def test_custom_jvp_under_vmap_with_unbatched_argument():
    def rule(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return x * y, tx * y + ty * x * 5.0  # y's part deliberately 5x

    mul = rune.custom_jvp(lambda x, y: x * y, rule)
    xs, y = A([1.0, 2.0, 3.0]), nx.scalar(2.0, F64)
    # jvp with respect to y (unbatched) inside vmap
    t = vm(lambda x: rune.jvp(lambda y: mul(x, y), (y,), (nx.ones_like(y),))[1])(xs)
    close(t, 5.0 * N(xs))
    # jvp outside vmap, tangents for both
    _, t = rune.jvp(lambda a, b: vm(mul, in_axes=(0, None))(a, b), (xs, y), (A([1.0, 1.0, 1.0]), nx.scalar(1.0, F64)))
    close(t, 2.0 + 5.0 * N(xs))
    _, t = j(lambda a, b: rune.jvp(lambda a, b: vm(mul, in_axes=(0, None))(a, b), (a, b),
                                  (nx.ones_like(a), nx.ones_like(b))))(xs, y)
    close(t, 2.0 + 5.0 * N(xs))


def test_checkpoint_inside_scan_under_grad_and_vmap():
    xs = RNG.normal(size=6)

    @rune.checkpoint
    def cell(c, x, w):
        return nx.tanh(c * w + x) * nx.cos(x * w)

    def f(w):
        return rune.scan(lambda c, x: (cell(c, x, w), c), nx.scalar(0.2, F64), A(xs))

    def loss(w):
        c, ys = f(w)
        return c + nx.sum(ys ** 2)

    def fnp(w):
        c, tot = 0.2, 0.0
        for x in xs:
            tot += c * c
            c = np.tanh(c * w + x) * np.cos(x * w)
        return c + tot
    w0 = 0.9
    d = fd_grad(lambda a: fnp(a[()]), np.array(w0))
    for fn in (g(loss), j(g(loss)), g(j(loss))):
        close(fn(nx.scalar(w0, F64)), d, rtol=1e-7)
    ws = np.array([0.9, -0.4])
    close(vm(g(loss))(A(ws)), [fd_grad(lambda a: fnp(a[()]), np.array(v)) for v in ws], rtol=1e-7)
    d2 = fd_grad(lambda a: float(g(loss)(nx.scalar(float(a), F64))), np.array(w0), eps=1e-5)
    close(g(g(loss))(nx.scalar(w0, F64)), d2, rtol=1e-6)
    close(rune.jvp(g(loss), (nx.scalar(w0, F64),), (nx.scalar(1.0, F64),))[1], d2, rtol=1e-6)


def test_checkpoint_with_callback_inside_scan_under_grad_runs_once_per_row():
    count = [0]

    def host_scale(x):
        count[0] += 1
        return x * 0 + 2.0

    @rune.checkpoint
    def cell(c, x):
        k = rune.callback(host_scale, rune.stop_gradient(x), like=x)
        return nx.sin(c) * k + x

    def loss(x0):
        return rune.scan(lambda c, x: (cell(c, x), None), x0, A(XS))[0]

    def fnp(c):
        for x in XS:
            c = np.sin(c) * 2.0 + x
        return c
    close(g(loss)(nx.scalar(0.3, F64)), fd_grad(lambda a: fnp(a[()]), np.array(0.3)), rtol=1e-7)
    assert count[0] == len(XS)
    count[0] = 0
    j(g(loss))(nx.scalar(0.3, F64))
    assert count[0] == len(XS)


def _logging_identity(log, name):
    """A host identity named `name` that appends its name to `log` when it runs."""
    def host(x):
        log.append(name)
        return x
    host.__name__ = name
    return host


def test_callbacks_in_cond_branches_only_taken_branch_runs():
    log = []

    def tag(name):
        return _logging_identity(log, name)

    def f(p, x):
        return rune.cond(p, lambda x: rune.callback(tag("T"), x, like=x) * 2,
                         lambda x: rune.callback(tag("F"), x, like=x) - 1, x)

    x = A([1.0, 2.0])
    close(f(nx.asarray(True), x), [2.0, 4.0])
    assert log == ["T"]
    log.clear()
    jf = j(f)
    close(jf(nx.asarray(False), x), [0.0, 1.0])
    close(jf(nx.asarray(True), x), [2.0, 4.0])
    assert log == ["F", "T"]
    log.clear()
    # unbatched predicate under vmap: only the taken branch, once per lane
    X = A(np.arange(6.0).reshape(3, 2))
    for fn in (vm(f, in_axes=(None, 0)), j(vm(f, in_axes=(None, 0))), vm(j(f), in_axes=(None, 0))):
        close(fn(nx.asarray(False), X), N(X) - 1)
        assert log == ["F"] * 3, fn
        log.clear()
    # unbatched predicate under vmap with "batched" method: once
    def fb(p, x):
        return rune.cond(p, lambda x: rune.callback(tag("T"), x, like=x, vmap_method="batched"),
                         lambda x: rune.callback(tag("F"), x, like=x, vmap_method="batched"), x)
    close(j(vm(fb, in_axes=(None, 0)))(nx.asarray(True), X), X)
    assert log == ["T"]
    log.clear()
    # a cond inside a scan: each row runs only its branch
    ps = A([True, False, False, True], np.bool_)
    rune.scan(lambda c, p: (f(p, c), None), A([1.0, 1.0]), ps)
    assert log == ["T", "F", "F", "T"]
    log.clear()
    j(lambda ps: rune.scan(lambda c, p: (f(p, c), None), A([1.0, 1.0]), ps))(ps)
    assert log == ["T", "F", "F", "T"]


def test_callback_with_pytree_args_and_results_under_jit_vmap():
    seen = []

    def host(d, pair):
        seen.append(1)
        a, (b, n) = d["a"], pair
        assert isinstance(n, nx.Array) and n.dtype == nx.int32
        return {"sum": a + b, "parts": [a * 2, np.asarray(n).item() + 0.5]}

    def f(a, b, n):
        out = rune.callback(host, {"a": a}, (b, n),
                            like={"sum": a, "parts": [a, rune.Spec((), F64)]})
        return out["sum"] * out["parts"][0] + out["parts"][1]

    a, b, n = A([1.0, 2.0]), A([3.0, 4.0]), nx.scalar(3, nx.int32)
    expected = (N(a) + N(b)) * N(a) * 2 + 3.5
    close(f(a, b, n), expected)
    jf = j(f)
    close(jf(a, b, n), expected)
    close(jf(a, b, n), expected)
    assert len(seen) == 3
    seen.clear()
    Am, Bm = A(np.arange(6.0).reshape(3, 2)), A(np.ones((3, 2)))
    out = j(vm(f, in_axes=(0, 0, None)))(Am, Bm, n)
    close(out, (N(Am) + 1) * N(Am) * 2 + 3.5)
    assert len(seen) == 3


def test_callback_under_jit_called_twice_counts_and_order():
    log = []

    def mk(name):
        def host(x):
            log.append(name)
            return x + 1
        host.__name__ = name
        return host

    @j
    def f(x):
        a = rune.callback(mk("a"), x, like=x)
        rune.callback(mk("unused"), x, like=x)  # result unused: must still run
        b = rune.callback(mk("b"), a * 2, like=x)
        return b

    x = A([1.0])
    close(f(x), [5.0])
    close(f(x), [5.0])
    assert log == ["a", "unused", "b"] * 2
    assert ran() == 6
    log.clear()
    # the same inside vmap inside jit: per lane, and lanes in order within each callback
    vf = j(vm(f))
    close(vf(A([[1.0], [2.0]])), [[5.0], [7.0]])
    assert log == ["a", "a", "unused", "unused", "b", "b"]


def test_callback_scan_rows_under_jit_twice():
    n = [0]

    def host(x):
        n[0] += 1
        return x * 2

    f = j(lambda xs: rune.scan(lambda c, x: (c + rune.callback(host, x, like=x), None), nx.scalar(0.0, F64), xs)[0])
    close(f(A(XS)), 2 * XS.sum())
    close(f(A(XS)), 2 * XS.sum())
    assert n[0] == 2 * len(XS)
    n[0] = 0
    # under vmap: rows x lanes
    close(j(vm(f))(A(np.stack([XS, XS]))), [2 * XS.sum()] * 2)
    assert n[0] == 2 * len(XS)


def test_callback_on_stop_gradient_input_under_grad_and_jvp():
    def host(x):
        return x * 0 + 3.0

    def f(x):
        k = rune.callback(host, rune.stop_gradient(x), like=x)
        return nx.sum(k * x * x)

    x = A([1.0, 2.0])
    close(g(f)(x), 6.0 * N(x))
    close(j(g(f))(x), 6.0 * N(x))
    close(vm(g(f))(A([[1.0, 2.0], [3.0, 4.0]])), 6.0 * np.array([[1.0, 2.0], [3.0, 4.0]]))
    close(rune.jvp(f, (x,), (A([1.0, 0.0]),))[1], 6.0)
    with pytest.raises(rune.NotDifferentiableError):
        g(lambda x: nx.sum(rune.callback(host, x, like=x)))(x)
    usable()


# ---------------------------------------------------------------- random keys

def test_random_split_inside_scan_matches_python_loop():
    key = nx.random.key(42)

    def step(k, _):
        k, sub = nx.random.split(k)[0], nx.random.split(k)[1]
        return k, nx.random.uniform(sub, (3,), F64)

    def loop(k):
        out = []
        for _ in range(4):
            ks = nx.random.split(k)
            k, sub = ks[0], ks[1]
            out.append(N(nx.random.uniform(sub, (3,), F64)))
        return k, np.stack(out)

    k_end, draws = rune.scan(step, key, None, length=4)
    ke, de = loop(key)
    assert N(k_end).tolist() == N(ke).tolist()
    close(draws, de, rtol=0, atol=0)
    k2, d2 = j(lambda k: rune.scan(step, k, None, length=4))(key)
    assert N(k2).tolist() == N(ke).tolist()
    close(d2, de, rtol=0, atol=0)


def test_random_under_vmap_and_jit_matches_per_key_draws():
    keys = nx.random.split(nx.random.key(7), 5)
    expected = np.stack([N(nx.random.normal(keys[i], (4,), F64)) for i in range(5)])
    for fn in (vm(lambda k: nx.random.normal(k, (4,), F64)), j(vm(lambda k: nx.random.normal(k, (4,), F64))),
               vm(j(lambda k: nx.random.normal(k, (4,), F64)))):
        close(fn(keys), expected, rtol=0, atol=0)
    # keys on axis 1
    close(vm(lambda k: nx.random.normal(k, (4,), F64), in_axes=1)(keys.T), expected, rtol=0, atol=0)
    # fold_in with batched data and a shared key
    base = nx.random.key(3)
    idx = nx.arange(4, dtype=nx.uint32)
    exp_f = np.stack([N(nx.random.uniform(nx.random.fold_in(base, i), (2,))) for i in range(4)])
    close(vm(lambda i: nx.random.uniform(nx.random.fold_in(base, i), (2,)))(idx), exp_f, rtol=0, atol=0)
    close(j(vm(lambda i: nx.random.uniform(nx.random.fold_in(base, i), (2,))))(idx), exp_f, rtol=0, atol=0)
    # split under vmap
    exp_s = np.stack([N(nx.random.split(keys[i], 3)) for i in range(5)])
    assert N(vm(lambda k: nx.random.split(k, 3))(keys)).tolist() == exp_s.tolist()


def test_random_split_inside_scan_inside_vmap():
    keys = nx.random.split(nx.random.key(11), 3)

    def walk(k):
        def step(c, _):
            k, x = c
            ks = nx.random.split(k)
            x = x + nx.random.normal(ks[1], (), F64)
            return (ks[0], x), x
        return rune.scan(step, (k, nx.scalar(0.0, F64)), None, length=5)[1]

    expected = np.stack([N(walk(keys[i])) for i in range(3)])
    close(vm(walk)(keys), expected, rtol=0, atol=1e-15)
    close(j(vm(walk))(keys), expected, rtol=0, atol=1e-15)
    # bernoulli and randint too
    exp_b = np.stack([N(nx.random.bernoulli(keys[i], 0.3, (6,))) for i in range(3)])
    assert N(vm(lambda k: nx.random.bernoulli(k, 0.3, (6,)))(keys)).tolist() == exp_b.tolist()
    exp_r = np.stack([N(nx.random.randint(keys[i], (6,), 0, 10)) for i in range(3)])
    assert N(j(vm(lambda k: nx.random.randint(k, (6,), 0, 10)))(keys)).tolist() == exp_r.tolist()


def test_random_with_traced_key_under_grad():
    # reparameterisation: d/dmu sum(mu + sigma * eps) = n, d/dsigma = sum(eps)
    key = nx.random.key(5)
    eps = N(nx.random.normal(key, (8,), F64))

    def f(p, k):
        return nx.sum(p[0] + p[1] * nx.random.normal(k, (8,), F64))

    close(g(f)(A([0.5, 2.0]), key), [8.0, eps.sum()])
    close(j(g(f))(A([0.5, 2.0]), key), [8.0, eps.sum()])
    ks = nx.random.split(key, 3)
    out = vm(g(f), in_axes=(None, 0))(A([0.5, 2.0]), ks)
    close(out[:, 1], [N(nx.random.normal(ks[i], (8,), F64)).sum() for i in range(3)])


# ---------------------------------------------------------------- indexed updates and gathers

def test_at_set_add_with_traced_index_under_grad_jit_vmap():
    x = A([1.0, 2.0, 3.0, 4.0])

    def f(x, i, v):
        y = x.at[i].set(v * v)
        y = y.at[i + 1].add(v * 3)
        return nx.sum(y * y)

    def fnp(x, i, v):
        y = x.copy()
        y[i] = v * v
        y[i + 1] += v * 3
        return np.sum(y * y)

    i, v = nx.scalar(1, nx.int32), nx.scalar(1.5, F64)
    close(f(x, i, v), fnp(N(x), 1, 1.5))
    for fn in (g(f, argnums=(0, 2)), j(g(f, argnums=(0, 2))), g(j(f), argnums=(0, 2))):
        gx, gv = fn(x, i, v)
        close(gx, fd_grad(lambda a: fnp(a, 1, 1.5), N(x)), rtol=1e-7, atol=1e-8)
        close(gv, fd_grad(lambda a: fnp(N(x), 1, a[()]), np.array(1.5)), rtol=1e-7)
    # batched indices, batched and unbatched x
    I = A([0, 2, 1], np.int32)
    Vs = A([0.5, -1.0, 2.0])
    X = A(RNG.normal(size=(3, 4)))
    for fn in (vm(f, in_axes=(0, 0, 0)), j(vm(f, in_axes=(0, 0, 0)))):
        close(fn(X, I, Vs), [fnp(N(X)[b], int(N(I)[b]), float(N(Vs)[b])) for b in range(3)])
    close(vm(f, in_axes=(None, 0, 0))(x, I, Vs),
          [fnp(N(x), int(N(I)[b]), float(N(Vs)[b])) for b in range(3)])
    close(j(vm(f, in_axes=(None, 0, None)))(x, I, Vs[0]),
          [fnp(N(x), int(N(I)[b]), float(N(Vs)[0])) for b in range(3)])
    gx = vm(g(f), in_axes=(0, 0, 0))(X, I, Vs)
    for b in range(3):
        close(gx[b], fd_grad(lambda a: fnp(a, int(N(I)[b]), float(N(Vs)[b])), N(X)[b]), rtol=1e-7, atol=1e-8)
    gv = j(vm(g(f, argnums=2), in_axes=(None, 0, 0)))(x, I, Vs)
    close(gv, [fd_grad(lambda a: fnp(N(x), int(N(I)[b]), a[()]), np.array(float(N(Vs)[b])))
               for b in range(3)], rtol=1e-7)


def test_at_add_with_duplicate_array_indices_under_grad_and_vmap():
    idx = np.array([0, 2, 0, 3, 0])

    def f(x, v):
        return nx.sum(nx.sin(x.at[A(idx, np.int32)].add(v)))

    def fnp(x, v):
        y = x.copy()
        np.add.at(y, idx, v)
        return np.sum(np.sin(y))

    x, v = RNG.normal(size=4), RNG.normal(size=5)
    close(f(A(x), A(v)), fnp(x, v))
    gx, gv = g(f, argnums=(0, 1))(A(x), A(v))
    close(gx, fd_grad(lambda a: fnp(a, v), x), rtol=1e-7, atol=1e-8)
    close(gv, fd_grad(lambda a: fnp(x, a), v), rtol=1e-7, atol=1e-8)
    Vs = RNG.normal(size=(2, 5))
    out = vm(g(f, argnums=1), in_axes=(None, 0))(A(x), A(Vs))
    for b in range(2):
        close(out[b], fd_grad(lambda a: fnp(x, a), Vs[b]), rtol=1e-7, atol=1e-8)


def test_at_set_2d_row_with_batched_index_under_vmap_jit():
    def f(M, i, row):
        return M.at[i].set(row)

    M = RNG.normal(size=(3, 4, 5))
    I = np.array([3, 0, 2])
    R = RNG.normal(size=(3, 5))

    def ref(b):
        m = M[b].copy()
        m[I[b]] = R[b]
        return m
    expected = np.stack([ref(b) for b in range(3)])
    close(vm(f)(A(M), A(I, np.int32), A(R)), expected)
    close(j(vm(f))(A(M), A(I, np.int32), A(R)), expected)
    # rows on axis 1 of the batch
    close(vm(f, in_axes=(2, 0, 1))(A(np.moveaxis(M, 0, 2)), A(I, np.int32), A(R.T)), expected)


def test_integer_array_indexing_under_grad_and_vmap_with_batched_indices():
    X = RNG.normal(size=(3, 5))
    I = np.array([[0, 4, 4], [1, 1, 2], [3, 0, 2]])

    def f(x, i):
        return nx.sum(x[i] ** 3)

    def fnp(x, i):
        return np.sum(x[i] ** 3)
    for fn in (vm(f), j(vm(f)), vm(j(f))):
        close(fn(A(X), A(I, np.int32)), [fnp(X[b], I[b]) for b in range(3)])
    for fn in (vm(g(f)), j(vm(g(f))), vm(j(g(f)))):
        gx = fn(A(X), A(I, np.int32))
        for b in range(3):
            close(gx[b], fd_grad(lambda a: fnp(a, I[b]), X[b]), rtol=1e-7, atol=1e-8)
    # shared x, batched indices, gradient w.r.t. x of the sum over lanes
    x = X[0]
    gx = g(lambda x: nx.sum(vm(f, in_axes=(None, 0))(x, A(I, np.int32))))(A(x))
    close(gx, fd_grad(lambda a: sum(fnp(a, I[b]) for b in range(3)), x), rtol=1e-7, atol=1e-8)


def test_gather_on_inner_axis_with_batched_matrix_and_indices():
    X = RNG.normal(size=(2, 3, 4))   # batch, rows, cols
    I = np.array([[3, 0], [1, 1]])   # batch, k

    def f(m, i):
        return m[:, i]              # (rows, k)
    expected = np.stack([X[b][:, I[b]] for b in range(2)])
    close(vm(f)(A(X), A(I, np.int32)), expected)
    close(j(vm(f))(A(X), A(I, np.int32)), expected)
    # batch on a middle axis of m and on the last axis of i
    close(vm(f, in_axes=(1, 1))(A(np.moveaxis(X, 0, 1)), A(I.T, np.int32)), expected)
    # negative indices
    In = I - 4
    close(vm(f)(A(X), A(In, np.int32)), expected)
    # take along a middle axis
    expected_t = np.stack([np.take(X[b], I[b], axis=1) for b in range(2)])
    close(vm(lambda m, i: nx.take(m, i, axis=1))(A(X), A(I, np.int32)), expected_t)
    gx = vm(g(lambda m, i: nx.sum(f(m, i) ** 2)))(A(X), A(I, np.int32))
    for b in range(2):
        close(gx[b], fd_grad(lambda a: np.sum(a[:, I[b]] ** 2), X[b]), rtol=1e-7, atol=1e-8)


def test_dynamic_slice_and_update_with_batched_starts():
    X = RNG.normal(size=(3, 6))
    S = np.array([0, 2, 4], np.int32)
    out = vm(lambda x, s: nx.dynamic_slice(x, (s,), (2,)))(A(X), A(S, np.int32))
    close(out, np.stack([X[b, S[b]:S[b] + 2] for b in range(3)]))
    out = j(vm(lambda x, s: nx.dynamic_update_slice(x, nx.zeros((2,), F64), (s,))))(A(X), A(S, np.int32))
    e = X.copy()
    for b in range(3):
        e[b, S[b]:S[b] + 2] = 0
    close(out, e)
    gx = vm(g(lambda x, s: nx.sum(nx.dynamic_slice(x, (s,), (2,)) ** 2)))(A(X), A(S, np.int32))
    e = np.zeros_like(X)
    for b in range(3):
        e[b, S[b]:S[b] + 2] = 2 * X[b, S[b]:S[b] + 2]
    close(gx, e)


# ---------------------------------------------------------------- contractions and reductions under vmap

def test_matmul_under_vmap_with_batch_on_different_axes():
    a = RNG.normal(size=(3, 4, 5))   # batch on axis 0
    b = RNG.normal(size=(5, 3, 2))   # batch on axis 1
    expected = np.stack([a[i] @ b[:, i] for i in range(3)])
    for fn in (vm(nx.matmul, in_axes=(0, 1)), j(vm(nx.matmul, in_axes=(0, 1))),
               vm(lambda x, y: nx.einsum("ij,jk->ik", x, y), in_axes=(0, 1))):
        close(fn(A(a), A(b)), expected)
    close(vm(nx.matmul, in_axes=(0, 1), out_axes=2)(A(a), A(b)), np.moveaxis(expected, 0, 2))
    # only one side batched, on its last axis
    c = RNG.normal(size=(4, 5))
    expected = np.stack([c @ b[:, i] for i in range(3)])
    close(vm(nx.matmul, in_axes=(None, 1))(A(c), A(b)), expected)
    d = RNG.normal(size=(2, 4, 3))
    expected = np.stack([d[:, :, i] @ c for i in range(3)])
    close(vm(nx.matmul, in_axes=(2, None))(A(d), A(c)), expected)


def test_einsum_with_its_own_batch_dims_under_vmap():
    a = RNG.normal(size=(2, 3, 4, 5))  # einsum batch b=2, vmap batch on axis 1 (3)
    b = RNG.normal(size=(5, 2, 6, 3))  # vmap batch on axis 3
    expected = np.stack([np.einsum("bij,bjk->bik", a[:, v], np.transpose(b[..., v], (1, 0, 2)))
                         for v in range(3)])
    fn = lambda x, y: nx.einsum("bij,jbk->bik", x, y)  # noqa: E731
    close(vm(fn, in_axes=(1, 3))(A(a), A(b)), expected)
    close(j(vm(fn, in_axes=(1, 3)))(A(a), A(b)), expected)
    # nested vmap over the einsum batch too
    close(vm(vm(lambda x, y: nx.einsum("ij,jk->ik", x, y), in_axes=(0, 1)), in_axes=(1, 3))(A(a), A(b)),
          expected)
    # gradient through it
    ga = g(lambda x: nx.sum(vm(fn, in_axes=(1, 3))(x, A(b)) ** 2))(A(a))
    fnp = lambda x: np.sum(np.stack([np.einsum("bij,jbk->bik", x[:, v], b[..., v]) for v in range(3)]) ** 2)  # noqa
    close(ga, fd_grad(fnp, a), rtol=1e-6, atol=1e-7)


def test_dot_general_contracting_the_vmapped_neighbour_axes():
    x = RNG.normal(size=(4, 3, 5))
    y = RNG.normal(size=(5, 4))
    # per lane (axis 1 of x): x[:, v, :] (4,5) . y (5,4) contracting 5 -> (4,4); and also tensordot
    expected = np.stack([x[:, v, :] @ y for v in range(3)])
    close(vm(lambda a: nx.dot_general(a, A(y), (((1,), (0,)), ((), ()))), in_axes=1)(A(x)), expected)
    close(vm(lambda a: nx.tensordot(a, A(y), axes=1), in_axes=1, out_axes=-1)(A(x)),
          np.moveaxis(expected, 0, -1))
    # vdot / outer / inner under vmap
    u, w = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 3))
    close(vm(nx.vdot, in_axes=(0, 1))(A(u), A(w)), np.einsum("bi,ib->b", u, w))
    close(vm(nx.outer, in_axes=(0, 1))(A(u), A(w)), np.stack([np.outer(u[b], w[:, b]) for b in range(3)]))
    close(vm(nx.inner, in_axes=(0, 1))(A(u), A(w)), np.einsum("bi,ib->b", u, w))


REDUCTIONS = [
    ("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min), ("prod", np.prod),
    ("var", np.var), ("std", np.std),
]


KEEPDIMS_AXES = [(0, 1), (1, 2), (2, -1), (1, 0)]


def _keepdims_reduction(name):
    return lambda a: getattr(nx, name)(a, axis=1, keepdims=True)


@pytest.mark.parametrize("name,npf", REDUCTIONS)
@pytest.mark.parametrize("in_axis,out_axis", KEEPDIMS_AXES)
def test_keepdims_reductions_under_vmap_with_out_axes(name, npf, in_axis, out_axis):
    x = RNG.normal(size=(3, 4, 5))
    fn = _keepdims_reduction(name)
    lanes = [npf(np.take(x, b, axis=in_axis), axis=1, keepdims=True) for b in range(x.shape[in_axis])]
    expected = np.moveaxis(np.stack(lanes), 0, out_axis)
    close(vm(fn, in_axes=in_axis, out_axes=out_axis)(A(x)), expected)
    close(j(vm(fn, in_axes=in_axis, out_axes=out_axis))(A(x)), expected)


def test_other_keepdims_reductions_under_vmap():
    x = RNG.normal(size=(3, 4, 5))
    lse = lambda a: np.log(np.sum(np.exp(a), axis=0, keepdims=True))  # noqa: E731
    close(vm(lambda a: nx.logsumexp(a, axis=0, keepdims=True), in_axes=2, out_axes=1)(A(x)),
          np.moveaxis(np.stack([lse(x[..., b]) for b in range(5)]), 0, 1))
    close(vm(lambda a: nx.argmax(a, axis=-1, keepdims=True), in_axes=1, out_axes=1)(A(x)),
          np.moveaxis(np.stack([np.argmax(x[:, b], axis=-1, keepdims=True) for b in range(4)]), 0, 1),
          rtol=0, atol=0)
    close(vm(lambda a: nx.argmin(a, axis=0), in_axes=2)(A(x)),
          np.stack([np.argmin(x[..., b], axis=0) for b in range(5)]), rtol=0, atol=0)
    close(vm(lambda a: nx.any(a > 1.0, axis=(0, 1), keepdims=True), in_axes=1, out_axes=2)(A(x)),
          np.moveaxis(np.stack([np.any(x[:, b] > 1.0, axis=(0, 1), keepdims=True) for b in range(4)]), 0, 2))
    # softmax along an axis under vmap, and its gradient
    sm = lambda a: np.exp(a) / np.sum(np.exp(a), axis=0, keepdims=True)  # noqa: E731
    close(vm(lambda a: nx.softmax(a, axis=0), in_axes=1, out_axes=1)(A(x)),
          np.moveaxis(np.stack([sm(x[:, b]) for b in range(4)]), 0, 1))
    gv = vm(g(lambda a: nx.sum(nx.softmax(a, axis=0) * A(np.arange(3.0))[:, None])), in_axes=2, out_axes=2)(A(x))
    for b in range(5):
        close(gv[..., b], fd_grad(lambda a: np.sum(sm(a) * np.arange(3.0)[:, None]), x[..., b]),
              rtol=1e-6, atol=1e-8)


def test_grad_of_reductions_with_keepdims_under_vmap():
    x = RNG.normal(size=(3, 4, 5))

    def f(a):
        m = nx.max(a, axis=1, keepdims=True)
        return nx.sum((a - m) ** 2 * nx.mean(a, axis=0, keepdims=True))

    def fnp(a):
        m = np.max(a, axis=1, keepdims=True)
        return np.sum((a - m) ** 2 * np.mean(a, axis=0, keepdims=True))
    out = vm(g(f), in_axes=1, out_axes=1)(A(x))
    for b in range(4):
        close(out[:, b], fd_grad(fnp, x[:, b]), rtol=1e-6, atol=1e-8)
    close(j(vm(g(f), in_axes=1, out_axes=1))(A(x)), out)


# Regression (found by this file): vmap wrapped an out-of-range out_axes modulo the rank.
def test_vmap_out_axes_out_of_range_raises():
    with pytest.raises((ValueError, rune.RuneError)):
        vm(lambda a: a, out_axes=5)(nx.ones((4, 3)))
    with pytest.raises((ValueError, rune.RuneError)):
        vm(lambda a: nx.sum(a, keepdims=True), out_axes=2)(nx.ones((4, 3)))
    with pytest.raises((ValueError, rune.RuneError)):
        vm(lambda a: nx.sum(a, keepdims=True), out_axes=-3)(nx.ones((4, 3)))


# ---------------------------------------------------------------- pytree carries

class State(typing.NamedTuple):
    pos: object
    vel: object
    steps: object


@dataclasses.dataclass
class Params:
    k: object
    damping: object


rune.tree.register(Params)


def _simulate(params, s0, n=6, dt=0.1):
    def step(s, _):
        acc = -params.k * s.pos - params.damping * s.vel
        vel = s.vel + dt * acc
        pos = s.pos + dt * vel
        return State(pos, vel, s.steps + 1), nx.sum(pos * pos)
    s, energy = rune.scan(step, s0, None, length=n)
    return s, energy


def _simulate_np(k, d, pos, vel, n=6, dt=0.1):
    es = []
    for _ in range(n):
        acc = -k * pos - d * vel
        vel = vel + dt * acc
        pos = pos + dt * vel
        es.append(np.sum(pos * pos))
    return pos, vel, np.array(es)


def _s0():
    return State(A([1.0, -0.5]), A([0.0, 0.3]), nx.scalar(0, nx.int32))


def test_namedtuple_carry_and_dataclass_params_through_scan_grad_jit():
    p = Params(nx.scalar(2.0, F64), nx.scalar(0.3, F64))
    s, e = _simulate(p, _s0())
    assert isinstance(s, State) and int(s.steps) == 6
    pos, vel, es = _simulate_np(2.0, 0.3, np.array([1.0, -0.5]), np.array([0.0, 0.3]))
    close(s.pos, pos)
    close(e, es)
    sj, ej = j(_simulate, static_argnums=(2,))(p, _s0(), 6)
    assert isinstance(sj, State)
    close(sj.vel, vel)

    def loss(p):
        s, e = _simulate(p, _s0())
        return nx.sum(e) + nx.sum(s.vel ** 2)

    def loss_np(kd):
        pos, vel, es = _simulate_np(kd[0], kd[1], np.array([1.0, -0.5]), np.array([0.0, 0.3]))
        return np.sum(es) + np.sum(vel ** 2)
    d = fd_grad(loss_np, np.array([2.0, 0.3]))
    for fn in (g(loss), j(g(loss)), g(j(loss))):
        gp = fn(p)
        assert isinstance(gp, Params)
        close([float(gp.k), float(gp.damping)], d, rtol=1e-7)


def test_vmap_with_pytree_in_axes_prefix_over_dataclass_and_namedtuple():
    ks = np.array([1.0, 2.0, 3.0])
    p = Params(A(ks), nx.scalar(0.3, F64))
    # map over k only (damping shared), state shared
    s, e = vm(_simulate, in_axes=(Params(0, None), None))(p, _s0())
    assert isinstance(s, State)
    for b in range(3):
        pos, vel, es = _simulate_np(ks[b], 0.3, np.array([1.0, -0.5]), np.array([0.0, 0.3]))
        close(s.pos[b], pos)
        close(e[b], es)
    assert N(s.steps).tolist() == [6, 6, 6]
    # map over the state's pos rows too, with a NamedTuple prefix
    P0 = A(RNG.normal(size=(3, 2)))
    s0 = State(P0, A([0.0, 0.3]), nx.scalar(0, nx.int32))
    s, e = j(vm(_simulate, in_axes=(Params(0, None), State(0, None, None))))(p, s0)
    for b in range(3):
        pos, vel, es = _simulate_np(ks[b], 0.3, N(P0)[b], np.array([0.0, 0.3]))
        close(s.vel[b], vel)
    # per-example gradient w.r.t. the dataclass
    gp = vm(g(lambda p, s0: nx.sum(_simulate(p, s0)[1])), in_axes=(Params(0, None), None))(p, _s0())
    assert isinstance(gp, Params) and gp.k.shape == (3,) and gp.damping.shape == (3,)
    for b in range(3):
        d = fd_grad(lambda kd: np.sum(_simulate_np(kd[0], kd[1], np.array([1.0, -0.5]),
                                                   np.array([0.0, 0.3]))[2]), np.array([ks[b], 0.3]))
        close([float(gp.k[b]), float(gp.damping[b])], d, rtol=1e-7)


def test_while_loop_and_cond_with_dataclass_carry_under_vmap():
    @dataclasses.dataclass
    class Acc:
        total: object
        count: object
    rune.tree.register(Acc)

    def f(limit):
        def body(a):
            t = rune.cond(a.count % 2 == 0, lambda t: t + 1.0, lambda t: t * 2.0, a.total)
            return Acc(t, a.count + 1)
        return rune.while_loop(lambda a: a.total < limit, body, Acc(nx.scalar(0.0, F64), nx.scalar(0, nx.int32)))

    def ref(limit):
        t, c = 0.0, 0
        while t < limit:
            t = t + 1.0 if c % 2 == 0 else t * 2.0
            c += 1
        return t, c
    lims = np.array([0.0, 1.0, 5.0, 20.0])
    out = j(vm(f))(A(lims))
    assert isinstance(out, Acc)
    close(out.total, [ref(l)[0] for l in lims])
    assert N(out.count).tolist() == [ref(l)[1] for l in lims]


def test_cond_returning_namedtuple_under_grad_and_vmap():
    def f(p, x):
        s = rune.cond(p, lambda x: State(x * 2, x ** 2, nx.scalar(1, nx.int32)),
                      lambda x: State(-x, nx.sin(x), nx.scalar(2, nx.int32)), x)
        return nx.sum(s.pos + s.vel)
    ps = A([True, False], np.bool_)
    X = A([[1.0, 2.0], [0.5, -1.0]])
    gx = vm(g(f, argnums=1))(ps, X)
    close(gx[0], 2 + 2 * N(X)[0])
    close(gx[1], -1 + np.cos(N(X)[1]))


# ---------------------------------------------------------------- closures over outer tracers

def test_grad_of_scan_whose_step_closes_over_a_vmapped_value():
    xs = RNG.normal(size=5)
    As = np.array([0.5, -1.0, 2.0])

    def per_lane(a):
        def loss(w):
            return rune.scan(lambda c, x: (nx.tanh(c * w + a * x), None), nx.scalar(0.1, F64), A(xs))[0]
        return g(loss)(nx.scalar(0.8, F64))

    def ref(a, w):
        c = 0.1
        for x in xs:
            c = np.tanh(c * w + a * x)
        return c
    expected = [fd_grad(lambda w: ref(a, w[()]), np.array(0.8)) for a in As]
    for fn in (vm(per_lane), j(vm(per_lane)), vm(j(per_lane))):
        close(fn(A(As)), expected, rtol=1e-7)
    # and the mixed derivative d/da d/dw through the closure
    mixed = g(lambda a: per_lane(a))(nx.scalar(0.5, F64))
    close(mixed, fd_grad(lambda a: float(per_lane(nx.scalar(float(a), F64))), np.array(0.5), eps=1e-5), rtol=1e-6)


def test_nested_scan_inner_closes_over_outer_carry_and_weight():
    X = RNG.normal(size=(3, 4))

    def f(w):
        def outer(c, row):
            inner, _ = rune.scan(lambda d, x: (d * c + x * w, None), nx.scalar(0.0, F64), row)
            return c + nx.sin(inner), inner
        c, ys = rune.scan(outer, nx.scalar(0.5, F64), A(X))
        return c * nx.sum(ys)

    def fnp(w):
        c, ys = 0.5, []
        for row in X:
            d = 0.0
            for x in row:
                d = d * c + x * w
            ys.append(d)
            c = c + np.sin(d)
        return c * sum(ys)
    close(f(nx.scalar(0.7, F64)), fnp(0.7))
    d = fd_grad(lambda a: fnp(a[()]), np.array(0.7))
    close(g(f)(nx.scalar(0.7, F64)), d, rtol=1e-7)
    close(vm(g(f))(A([0.7, 0.2])), [d, fd_grad(lambda a: fnp(a[()]), np.array(0.2))], rtol=1e-7)
    close(rune.jvp(f, (nx.scalar(0.7, F64),), (nx.scalar(1.0, F64),))[1], d, rtol=1e-7)
    d2 = fd_grad(lambda a: float(g(f)(nx.scalar(float(a), F64))), np.array(0.7), eps=1e-5)
    close(rune.hessian(f)(nx.scalar(0.7, F64)), d2, rtol=1e-6)


def test_cond_and_while_bodies_closing_over_grad_and_vmap_tracers():
    def f(w, a):
        c = rune.cond(a > 0, lambda x: x * w * a, lambda x: x - w, nx.scalar(2.0, F64))
        n = rune.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * w + a), (0, c))[1]
        return n

    def fnp(w, a):
        c = 2.0 * w * a if a > 0 else 2.0 - w
        for _ in range(3):
            c = c * w + a
        return c
    As = np.array([1.5, -0.5, 0.25])
    # forward-mode through while (reverse is not supported for while_loop)
    tw = vm(lambda a: rune.jvp(lambda w: f(w, a), (nx.scalar(0.9, F64),), (nx.scalar(1.0, F64),))[1])(A(As))
    close(tw, [fd_grad(lambda w: fnp(w[()], a), np.array(0.9)) for a in As], rtol=1e-7)
    tw = j(vm(lambda a: rune.jacfwd(lambda w: f(w, a))(nx.scalar(0.9, F64))))(A(As))
    close(tw, [fd_grad(lambda w: fnp(w[()], a), np.array(0.9)) for a in As], rtol=1e-7)


def test_grad_of_while_loop_raises_cleanly_and_rune_stays_usable():
    with pytest.raises(rune.NotDifferentiableError):
        g(lambda w: rune.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] * w), (0, w))[1])(
            nx.scalar(1.0, F64))
    usable()
    with pytest.raises(rune.NotDifferentiableError):
        j(vm(g(lambda w, n: rune.fori_loop(0, n, lambda i, c: c * w, w)), in_axes=(0, None)))(
            A([1.0, 2.0]), nx.scalar(3, nx.int32))
    usable()


# ---------------------------------------------------------------- jit static args, retracing, caching

def test_jit_with_static_args_inside_vmap_and_grad():
    calls = []

    @j
    def power(x, n):
        calls.append(n)
        return x ** n
    power_s = j(lambda x, n: x ** n, static_argnums=1)
    xs = A([1.0, 2.0, 3.0])
    close(vm(lambda x: power_s(x, 3))(xs), N(xs) ** 3)
    close(j(vm(lambda x: power_s(x, 2)))(xs), N(xs) ** 2)
    close(vm(g(lambda x: power_s(x, 3)))(xs), 3 * N(xs) ** 2)
    close(power_s(xs, 4), N(xs) ** 4)
    close(power_s(xs, 2), N(xs) ** 2)
    # static_argnames, passed by keyword, inside vmap
    scale = j(lambda x, *, k: x * k, static_argnames="k")
    close(vm(lambda x: scale(x, k=5.0))(xs), 5 * N(xs))
    close(scale(xs, k=2.0), 2 * N(xs))
    close(scale(xs, k=3.0), 3 * N(xs))


def test_jit_retracing_inside_python_loops():
    rune.reset_stats()
    f = j(lambda x: nx.sum(nx.sin(x) * 2))
    for n in (1, 2, 3, 2, 1, 3):
        x = A(np.arange(float(n)))
        close(f(x), 2 * np.sin(np.arange(float(n))).sum())
    assert rune.stats()["compiles"] == 3
    # dtypes are part of the signature
    close(f(nx.arange(3, dtype=nx.float32)), 2 * np.sin(np.arange(3.0, dtype=np.float32)).sum(), rtol=1e-6)
    # a static python value changes per iteration
    h = j(lambda x, k: x * k + k, static_argnums=1)
    for k in range(4):
        close(h(A([1.0, 2.0]), float(k)), np.array([1.0, 2.0]) * k + k)
    # a weak python scalar vs a concrete array of the same dtype
    m = j(lambda x, y: x * y)
    close(m(A([1.0, 2.0]), 2.0), [2.0, 4.0])
    close(m(A([1.0, 2.0]), nx.scalar(3.0, F64)), [3.0, 6.0])
    close(m(A([1.0, 2.0]), 2.0), [2.0, 4.0])


def test_jit_called_eagerly_then_traced_through_then_eagerly():
    f = j(lambda x: nx.sum(x ** 3))
    x = A([1.0, 2.0])
    close(f(x), 9.0)
    close(g(f)(x), 3 * N(x) ** 2)
    close(vm(f)(A([[1.0, 2.0], [3.0, 4.0]])), [9.0, 91.0])
    close(f(x), 9.0)
    close(j(g(f))(x), 3 * N(x) ** 2)
    close(f(A([2.0, 2.0])), 16.0)


def test_jit_inside_scan_body_and_cond_branch():
    cell = j(lambda c, x: nx.tanh(c * 0.5 + x))
    out = rune.scan(lambda c, x: (cell(c, x), c), nx.scalar(0.1, F64), A(XS))
    c = 0.1
    ys = []
    for x in XS:
        ys.append(c)
        c = np.tanh(c * 0.5 + x)
    close(out[0], c)
    close(out[1], ys)
    gb = j(lambda x: x * 3)
    close(rune.cond(nx.asarray(True), gb, lambda x: x, A([1.0])), [3.0])
    close(g(lambda w: rune.scan(lambda c, x: (cell(c, x * w), None), nx.scalar(0.1, F64), A(XS))[0])(
        nx.scalar(1.0, F64)),
        fd_grad(lambda w: functools.reduce(lambda c, x: np.tanh(c * 0.5 + x * w[()]), XS, 0.1), np.array(1.0)),
        rtol=1e-7)


def test_jit_pytree_outputs_and_aliased_arguments():
    f = j(lambda a, b: {"s": a + b, "t": (a * b, None)})
    x = A([1.0, 2.0])
    out = f(x, x)
    close(out["s"], [2.0, 4.0])
    assert out["t"][1] is None
    out = f(x, A([3.0, 4.0]))
    close(out["t"][0], [3.0, 8.0])
    gx = g(lambda a: nx.sum(f(a, a)["t"][0]))(x)
    close(gx, 2 * N(x))


# ---------------------------------------------------------------- errors inside nested transformations

class Boom(Exception):
    pass


def test_python_error_in_scan_step_under_vmap_grad_jit_leaves_rune_usable():
    def step(c, x):
        raise Boom("step")

    with pytest.raises(Boom):
        j(vm(g(lambda w: rune.scan(step, w, A(XS))[0])))(A([1.0, 2.0]))
    usable()
    with pytest.raises(Boom):
        g(lambda w: rune.cond(w > 0, lambda w: rune.scan(step, w, A(XS))[0], lambda w: w, w))(nx.scalar(1.0, F64))
    usable()


def test_callback_error_inside_jit_vmap_scan_then_next_call_works():
    fail = [True]
    n = [0]

    def host(x):
        n[0] += 1
        if fail[0] and n[0] == 3:
            raise Boom("third call")
        return x * 2

    f = j(vm(lambda xs: rune.scan(lambda c, x: (c + rune.callback(host, x, like=x), None),
                                  nx.scalar(0.0, F64), xs)[0]))
    X = A(np.stack([XS, XS * 2]))
    before = rune.stats()
    with pytest.raises(rune.CallbackError) as info:
        f(X)
    assert isinstance(info.value.__cause__, Boom)
    assert "host" in str(info.value)
    assert core_trace.current() is core_trace.EVAL
    fail[0] = False
    close(f(X), 2 * N(X).sum(axis=1))
    close(f(X), 2 * N(X).sum(axis=1))
    assert rune.stats()["traces"] - before["traces"] == 1
    usable()


def test_callback_error_in_pullback_during_backward_pass_under_jit():
    def bad_adjoint(x, ct):
        raise Boom("adjoint")

    @rune.custom_vjp
    def f(x):
        y = x * 2
        return y, lambda ct: rune.callback(bad_adjoint, x, ct, like=x)

    with pytest.raises(rune.CallbackError):
        j(g(lambda x: nx.sum(vm(f)(x))))(A([1.0, 2.0]))
    usable()
    with pytest.raises(rune.CallbackError):
        g(lambda x: rune.scan(lambda c, v: (c + f(v), None), nx.scalar(0.0, F64), x)[0])(A([1.0, 2.0]))
    usable()


def test_shape_errors_inside_nested_transformations():
    with pytest.raises(rune.ShapeError):
        vm(lambda x: rune.scan(lambda c, r: (nx.stack([c, c]), None), x, A(XS))[0])(A([1.0, 2.0]))
    usable()
    with pytest.raises((rune.ShapeError, rune.TreeError)):
        j(vm(lambda p, x: rune.cond(p, lambda x: x, lambda x: x[:1], x)))(
            A([True, False], np.bool_), A([[1.0, 2.0], [3.0, 4.0]]))
    usable()
    with pytest.raises(rune.ShapeError):
        g(lambda x: rune.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1][None]), (0, x))[1])(
            nx.scalar(1.0, F64))
    usable()


def test_concretization_error_inside_jit_inside_grad_inside_vmap():
    def f(x):
        if x > 0:  # a traced value in Python control flow
            return x
        return -x

    with pytest.raises(rune.ConcretizationError):
        vm(g(j(f)))(A([1.0, -2.0]))
    usable()
    with pytest.raises(rune.ConcretizationError):
        j(lambda x: rune.scan(lambda c, v: (c + float(v), None), 0.0, x)[0])(A(XS))
    usable()


def test_failed_trace_is_not_cached_and_counters_unchanged():
    def f(x):
        if x.shape[0] == 3:
            raise Boom("bad shape")
        return x * 2
    jf = j(f)
    close(jf(A([1.0, 2.0])), [2.0, 4.0])
    before = rune.stats()
    with pytest.raises(Boom):
        jf(A([1.0, 2.0, 3.0]))
    after = rune.stats()
    assert {k: after[k] for k in ("traces", "compiles")} == {k: before[k] for k in ("traces", "compiles")}
    with pytest.raises(Boom):
        jf(A([1.0, 2.0, 3.0]))
    close(jf(A([5.0, 6.0])), [10.0, 12.0])
    usable()


def test_error_in_custom_vjp_pullback_under_vmap_grad():
    @rune.custom_vjp
    def f(x):
        return x * 2, lambda ct: (ct, ct)  # two cotangents for one argument

    with pytest.raises(rune.TreeError):
        vm(g(f))(A([1.0, 2.0]))
    usable()

    @rune.custom_vjp
    def h(x):
        return x * 2, lambda ct: ct[:1]  # wrong shape

    with pytest.raises(rune.ShapeError):
        g(lambda x: nx.sum(h(x)))(A([1.0, 2.0]))
    usable()


# ---------------------------------------------------------------- more custom rules, callbacks and loops

def test_custom_vjp_with_pytree_and_integer_arguments_under_vmap_grad_scan():
    @rune.custom_vjp
    def pick(params, idx):
        w, b = params["w"], params["b"]
        y = w[idx] * 2 + b

        def pullback(ct):
            c = ct["y"]
            return {"w": nx.zeros_like(w).at[idx].add(c * 2), "b": c}, None
        return {"y": y, "z": (y * 0 + 1.0,)}, pullback

    P = {"w": A([1.0, 2.0, 3.0]), "b": nx.scalar(0.5, F64)}
    I = A([0, 2, 2], np.int32)
    out = pick(P, nx.scalar(1, nx.int32))
    close(out["y"], 4.5)
    gp = vm(g(lambda p, i: pick(p, i)["y"]), in_axes=(None, 0))(P, I)
    close(gp["w"], [[2, 0, 0], [0, 0, 2], [0, 0, 2]])
    close(gp["b"], [1, 1, 1])
    for fn in (g(lambda p: nx.sum(vm(lambda i: pick(p, i)["y"])(I))),
               j(g(lambda p: nx.sum(vm(lambda i: pick(p, i)["y"])(I))))):
        gp = fn(P)
        close(gp["w"], [2, 0, 4])
        close(gp["b"], 3)
    gp = g(lambda p: rune.scan(lambda c, i: (c + pick(p, i)["y"], None), nx.scalar(0.0, F64),
                               A([0, 1, 1, 2], np.int32))[0])(P)
    close(gp["w"], [2, 4, 2])
    close(gp["b"], 4)
    Pb = {"w": A([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), "b": nx.scalar(0.5, F64)}
    gp = g(lambda p: nx.sum(vm(lambda p, i: pick(p, i)["y"], in_axes=({"w": 0, "b": None}, 0))(
        p, A([0, 2], np.int32))))(Pb)
    close(gp["w"], [[2, 0, 0], [0, 0, 2]])
    close(gp["b"], 2)


def test_custom_vjp_closing_over_vmapped_and_outer_grad_values():
    def outer(a):
        @rune.custom_vjp
        def scaled(x):
            return x * a, lambda ct: ct * a * 10  # rule: 10a (true: a)
        return g(scaled)(nx.scalar(1.0, F64))

    close(vm(outer)(A([1.0, 2.0, 3.0])), [10, 20, 30])
    close(j(vm(outer))(A([1.0, 2.0, 3.0])), [10, 20, 30])
    # the enclosing grad sees the pullback's computation: d/da (10 a) = 10
    close(g(outer)(nx.scalar(2.0, F64)), 10)

    @rune.custom_vjp
    def cube(x):
        return x ** 3, lambda ct: ct * 3 * x ** 2
    # d/da [d/dx cube(x a)] = d/da 3 x^2 a^3 = 9 x^2 a^2
    close(g(lambda a: g(lambda x: cube(x * a))(nx.scalar(1.5, F64)))(nx.scalar(2.0, F64)), 9 * 1.5 ** 2 * 4)
    close(rune.jvp(g(cube), (nx.scalar(1.5, F64),), (nx.scalar(1.0, F64),))[1], 9.0)


def test_custom_jvp_whose_function_runs_a_callback_counts():
    count = [0]

    def host(x):
        count[0] += 1
        return x * 2

    @rune.custom_jvp
    def doubled(x):
        return rune.callback(host, x, like=x)

    @doubled.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return doubled(x), t * 2

    x = A([1.0, 2.0])
    out, t = rune.jvp(doubled, (x,), (nx.ones_like(x),))
    close(out, [2, 4])
    close(t, [2, 2])
    assert count[0] == 1
    f = j(lambda x: rune.jvp(doubled, (x,), (nx.ones_like(x),)))
    f(x)
    f(x)
    assert count[0] == 3
    count[0] = 0
    vm(lambda x: rune.jvp(doubled, (x,), (nx.ones_like(x),)))(A([1.0, 2.0, 3.0]))
    assert count[0] == 3
    count[0] = 0
    _, t = rune.jvp(vm(doubled), (A([1.0, 2.0, 3.0]),), (A([1.0, 1.0, 1.0]),))
    close(t, [2, 2, 2])
    assert count[0] == 3
    count[0] = 0
    d = rune.jacfwd(lambda w: rune.scan(lambda c, x: (c + doubled(x * w), None), nx.scalar(0.0, F64),
                                        A([1.0, 2.0]))[0])(nx.scalar(1.0, F64))
    close(d, 6.0)
    assert count[0] == 2


def test_nested_vmap_callback_counts_order_and_batched_shapes():
    log = []

    def host(x):
        log.append(float(x))
        return x * 2

    X = A(np.arange(6.0).reshape(2, 3))
    close(vm(vm(lambda x: rune.callback(host, x, like=x)))(X), 2 * N(X))
    assert log == [0, 1, 2, 3, 4, 5] and ran() == 6
    log.clear()
    close(j(vm(vm(lambda x: rune.callback(host, x, like=x)), in_axes=1))(X), 2 * N(X).T)
    assert log == [0, 3, 1, 4, 2, 5] and ran() == 12
    shapes = []

    def hb(x, y):
        shapes.append((np.asarray(x).shape, np.asarray(y).shape))
        return x * 2 + y

    out = vm(vm(lambda x, y: rune.callback(hb, x, y, like=x, vmap_method="batched"), in_axes=(0, None)),
             in_axes=(None, 0))(A(np.arange(3.0)), A(np.arange(2.0)))
    close(out, 2 * np.arange(3.0)[None, :] + np.arange(2.0)[:, None])
    assert shapes == [((2, 3), (2, 3))] and ran() == 13


def test_host_callback_that_itself_uses_rune_transformations():
    def host(x):
        return rune.jit(g(lambda v: nx.sum(v ** 3)))(x)

    X = A([[1.0, 2.0], [3.0, 4.0]])
    close(j(vm(lambda x: rune.callback(host, x, like=x)))(X), 3 * N(X) ** 2)
    out = g(lambda w: rune.scan(lambda c, x: (c + w * rune.callback(host, x, like=x), None),
                                nx.scalar(0.0, F64), A([1.0, 2.0]))[0])(nx.scalar(1.0, F64))
    close(out, 3 + 12)
    usable()


def test_escaped_tracers_raise_and_leave_rune_usable():
    leaked = []
    j(lambda x: (leaked.append(x), x * 2)[1])(A(1.0))
    vm(lambda x: (leaked.append(x), x * 2)[1])(A([1.0, 2.0]))
    g(lambda x: (leaked.append(x), x * 2)[1])(nx.scalar(1.0, F64))
    for t in leaked:
        with pytest.raises(rune.RuneError):
            t + 1
        with pytest.raises(rune.RuneError):
            vm(lambda y: y * t)(A([1.0, 2.0]))
        with pytest.raises(rune.RuneError):
            g(lambda y: y * t)(nx.scalar(2.0, F64))
        usable()


def test_jvp_and_jacfwd_of_vmapped_while_with_batched_predicate():
    def f(w):
        def body(s):
            return s[0] + 1, s[1] + nx.abs(s[2][1]) + 0.5, s[2] * 1.1
        return rune.while_loop(lambda s: s[1] < 4.0 + w[0], body, (0, nx.scalar(0.0, F64), w))

    def ref(w, t):
        k, y, v, ty, tv = 0, 0.0, w.copy(), 0.0, t.copy()
        while y < 4.0 + w[0]:
            k, y, ty = k + 1, y + abs(v[1]) + 0.5, ty + np.sign(v[1]) * tv[1]
            v, tv = v * 1.1, tv * 1.1
        return k, y, v, ty, tv

    Wb = np.array([[0.5, 1.0], [2.0, -0.3], [-1.0, 0.1]])
    T = np.array([[1.0, 0.5], [0.0, 2.0], [1.0, 1.0]])
    (ks, ys, vs), (_, tys, tvs) = rune.jvp(vm(f), (A(Wb),), (A(T),))
    for b in range(3):
        k, y, v, ty, tv = ref(Wb[b], T[b])
        assert int(ks[b]) == k
        close(ys[b], y)
        close(vs[b], v)
        close(tys[b], ty)
        close(tvs[b], tv)
    jac = rune.jacfwd(lambda w: vm(f)(w)[1])(A(Wb))
    for b in range(3):  # only lane b's row of w moves lane b
        _, _, _, ty0, _ = ref(Wb[b], np.array([1.0, 0.0]))
        _, _, _, ty1, _ = ref(Wb[b], np.array([0.0, 1.0]))
        close(jac[b, b], [ty0, ty1])
        close(np.delete(N(jac)[b], b, axis=0), np.zeros((2, 2)))


def test_vmap_of_scan_with_batched_cond_and_while_in_the_step():
    xs = RNG.normal(size=5)

    def f(w):
        def step(c, x):
            c = rune.cond(c[0] > x, lambda c: (c[0] * w[0], c[1] + 1.0), lambda c: (c[0] + w[1], c[1] * w[2]), c)
            c = (rune.while_loop(lambda v: v < 1.0, lambda v: v * 2.0 + 0.01, nx.abs(c[0])), c[1])
            return c, c[0] * c[1]
        return rune.scan(step, (w[3], nx.scalar(1.0, F64)), A(xs))

    def ref(w):
        c0, c1, ys = w[3], 1.0, []
        for x in xs:
            if c0 > x:
                c0, c1 = c0 * w[0], c1 + 1.0
            else:
                c0, c1 = c0 + w[1], c1 * w[2]
            c0 = abs(c0)
            while c0 < 1.0:
                c0 = c0 * 2.0 + 0.01
            ys.append(c0 * c1)
        return c0, c1, np.array(ys)

    Wb = RNG.normal(size=(4, 4))
    for fn in (vm(f), j(vm(f))):
        (c0, c1), ys = fn(A(Wb))
        for b in range(4):
            e0, e1, eys = ref(Wb[b])
            close(c0[b], e0)
            close(c1[b], e1)
            close(ys[b], eys)


# ---------------------------------------------------------------- forward-over-reverse inside closures, aux, pullbacks

def test_jvp_of_grad_of_a_closure_and_grad_of_jvp_of_a_closure():
    # h(x) = d/dy [sin(x y) x] at y=1 = x^2 cos(x);  h'(x) = 2x cos x - x^2 sin x
    h = lambda x: g(lambda y: nx.sin(x * y) * x)(nx.scalar(1.0, F64))  # noqa: E731
    xs = np.array([0.3, -1.1, 2.0])
    dh = 2 * xs * np.cos(xs) - xs ** 2 * np.sin(xs)
    close(vm(lambda x: rune.jvp(h, (x,), (nx.ones_like(x),))[1])(A(xs)), dh)
    close(j(vm(g(h)))(A(xs)), dh)
    # k(x) = x * d/dt [sin(x t) t] at t=0.7 along x = x^2 (cos(0.7 x) 0.7 + sin(0.7 x) / x)... checked by FD
    k = lambda x: rune.jvp(lambda y: nx.sin(x * y) * y, (nx.scalar(0.7, F64),), (x,))[1] * x  # noqa: E731
    kn = lambda x: (x * np.cos(0.7 * x) * 0.7 + np.sin(0.7 * x)) * x * x  # noqa: E731
    close(vm(g(k))(A(xs)), [fd_grad(lambda a: kn(a[()]), np.array(v)) for v in xs], rtol=1e-7)


def test_grad_of_jvp_of_scan_and_hessian_with_argnums_of_fori():
    xs = RNG.normal(size=5)

    def f(w):
        return rune.jvp(lambda u: rune.scan(lambda c, x: (nx.sin(c * u[0]) + x * u[1], c), u[2], A(xs)),
                        (w,), (nx.ones_like(w),))

    def tangent_np(w, eps=1e-6):
        def run(u):
            c, ys = u[2], []
            for x in xs:
                ys.append(c)
                c = np.sin(c * u[0]) + x * u[1]
            return c + np.sum(ys)
        return (run(w + eps) - run(w - eps)) / (2 * eps)

    w0 = np.array([0.8, 0.4, 0.2])
    (c, ys), (tc, tys) = f(A(w0))
    close(tc + nx.sum(tys), tangent_np(w0), rtol=1e-7)
    gw = g(lambda w: (lambda o: o[1][0] + nx.sum(o[1][1]))(f(w)))(A(w0))
    close(gw, fd_grad(lambda w: tangent_np(w, 1e-4), w0), rtol=1e-4, atol=1e-6)

    def fl(w, k):
        return rune.fori_loop(0, 3, lambda i, c: c * w + k, nx.scalar(1.0, F64))
    (hww, hwk), (hkw, hkk) = j(rune.hessian(fl, argnums=(0, 1)))(nx.scalar(0.5, F64), nx.scalar(2.0, F64))
    # f = w^3 + k (w^2 + w + 1)
    close([hww, hwk, hkw, hkk], [6 * 0.5 + 2 * 2.0, 2 * 0.5 + 1, 2 * 0.5 + 1, 0.0])


def test_aux_outputs_through_jit_vmap_value_and_grad_jvp_and_vjp():
    X = A(RNG.normal(size=(3, 4)))
    (v, aux), gr = j(vm(rune.value_and_grad(lambda w: (nx.sum(nx.sin(w) ** 2), {"w2": w * 2}), has_aux=True)))(X)
    close(v, np.sum(np.sin(N(X)) ** 2, axis=1))
    close(aux["w2"], 2 * N(X))
    close(gr, 2 * np.sin(N(X)) * np.cos(N(X)))
    out, t, aux = vm(lambda w, tw: rune.jvp(lambda w: (nx.sin(w) * 2, {"c": nx.cos(w)}), (w,), (tw,), has_aux=True))(
        X, X * 2)
    close(t, 2 * np.cos(N(X)) * 2 * N(X))
    close(aux["c"], np.cos(N(X)))

    def h(w):
        out, pull, aux = rune.vjp(lambda w: (nx.sin(w) * nx.sum(w), nx.cos(w)), w, has_aux=True)
        return pull(aux)[0] + out
    Xn = N(X)

    def h_np(w):
        s = np.sum(w)
        return np.cos(w) * np.cos(w) * s + np.sum(np.cos(w) * np.sin(w)) + np.sin(w) * s
    close(j(vm(h))(X), np.stack([h_np(w) for w in Xn]))


def test_vmapped_and_jitted_pullbacks():
    x = A(RNG.normal(size=4))
    out, pull = rune.vjp(lambda x: nx.sin(x) * nx.sum(x), x)
    J = np.diag(np.cos(N(x)) * np.sum(N(x))) + np.sin(N(x))[:, None]
    cts = RNG.normal(size=(3, 4))
    close(vm(lambda c: pull(c)[0])(A(cts)), cts @ J)
    close(j(lambda c: pull(c)[0])(A(cts[0])), cts[0] @ J)
    close(j(vm(lambda c: pull(c)[0]))(A(cts)), cts @ J)
    # second order through a pullback created inside grad
    def f(x):
        _, pb = rune.vjp(lambda z: nx.sin(z) * nx.sum(z * z), x)
        return nx.sum(pb(nx.cos(x))[0] ** 2)

    def f_np(x):
        s = np.sum(x * x)
        ct = np.cos(x)
        v = ct * np.cos(x) * s + 2 * x * np.sum(ct * np.sin(x))
        return np.sum(v ** 2)
    close(g(f)(x), fd_grad(f_np, N(x)), rtol=1e-6, atol=1e-8)
    close(vm(g(f))(A(cts)), np.stack([fd_grad(f_np, c) for c in cts]), rtol=1e-6, atol=1e-8)


def test_while_inside_scan_under_vmap_and_jvp():
    xs = RNG.normal(size=5)

    def f(w):
        def step(c, x):
            v = rune.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1] * w[0] + x), (0, c))[1]
            return v, v
        return rune.scan(step, w[1], A(xs))

    def f_np(w):
        c, ys = w[1], []
        for x in xs:
            c = (c * w[0] + x) * w[0] + x
            ys.append(c)
        return c, np.array(ys)
    Wb = RNG.normal(size=(3, 2))
    c, ys = vm(f)(A(Wb))
    for b in range(3):
        ce, ye = f_np(Wb[b])
        close(c[b], ce)
        close(ys[b], ye)
    _, (tc, tys) = vm(lambda w: rune.jvp(f, (w,), (nx.ones_like(w),)))(A(Wb))
    for b in range(3):
        close(tc[b], fd_grad(lambda w: f_np(w)[0], Wb[b]).sum(), rtol=1e-7)


def test_checkpointed_custom_vjp_with_callbacks_counts():
    s = Solver()
    state = s.state_fn()
    ck = rune.checkpoint(state)
    close(g(ck)(nx.scalar(0.5, F64)), du_np(0.5))
    assert (s.solves, s.adjoints) == (1, 1)  # an effectful checkpoint is not recomputed
    s.solves = s.adjoints = 0
    loss = lambda t: rune.scan(lambda acc, th: (acc + ck(th), None), nx.scalar(0.0, F64), t)[0]  # noqa: E731
    f = j(g(loss))
    f(A(THETAS))
    close(f(A(THETAS)), du_np(THETAS))
    assert (s.solves, s.adjoints) == (8, 8)
    s.solves = s.adjoints = 0
    close(g(rune.checkpoint(loss))(A(THETAS)), du_np(THETAS))
    assert (s.solves, s.adjoints) == (4, 4)
    s.solves = s.adjoints = 0
    # jacrev of the mapped state: one solve per lane, one adjoint per (output row, lane)
    close(rune.jacrev(vm(state))(A(THETAS)), np.diag(du_np(THETAS)))
    assert (s.solves, s.adjoints) == (4, 16)


def test_callbacks_run_in_program_order_under_jit_and_vmap():
    log = []

    def mk(tag):
        return _logging_identity(log, tag)

    def f(x):
        x = rune.callback(mk("a"), x, like=x)
        x, _ = rune.scan(lambda c, r: (rune.callback(mk("b"), c + r, like=c), None), x, A([1.0, 2.0]))
        x = rune.cond(x > 0, lambda v: rune.callback(mk("c"), v, like=v), lambda v: v, x)
        return rune.callback(mk("d"), x * 2, like=x)

    x = nx.scalar(0.5, F64)
    close(f(x), 7.0)
    assert log == ["a", "b", "b", "c", "d"]
    log.clear()
    jf = j(f)
    close(jf(x), 7.0)
    close(jf(x), 7.0)
    assert log == ["a", "b", "b", "c", "d"] * 2
    log.clear()
    close(j(vm(f))(A([0.5, 1.0])), [7.0, 8.0])
    assert log == ["a", "a", "b", "b", "b", "b", "c", "c", "d", "d"]


def test_static_argument_retrace_counts_under_jit_of_grad():
    def f(x, n):
        return rune.fori_loop(0, n, lambda i, c: nx.sin(c) * x, x)
    jg = j(g(f), static_argnums=1)
    before = rune.stats()["traces"]
    for n in (1, 2, 3, 2, 1, 3, 3):
        out = jg(nx.scalar(0.8, F64), n)
        close(out, N(g(f)(nx.scalar(0.8, F64), n)))
    assert rune.stats()["traces"] - before == 3


def test_batched_callbacks_through_scan_vmap_and_grad_run_once_per_row():
    calls = []
    state = _batched_state(calls)

    def loss(thetas):
        return rune.scan(lambda acc, t: (acc + state(t), None), nx.scalar(0.0, F64), thetas)[0]

    T = np.stack([THETAS, THETAS * 0.5 + 0.1, THETAS - 1])
    per_row = [("s", (3,))] * 4 + [("a", (3,))] * 4
    for fn, arg in ((vm(g(loss)), T), (j(vm(g(loss))), T), (g(lambda T: nx.sum(vm(loss)(T))), T),
                    (vm(g(loss), in_axes=1, out_axes=1), T.T)):
        calls.clear()
        out = fn(A(arg))
        close(out, du_np(arg))
        assert calls == per_row
    calls.clear()
    close(vm(vm(g(state)))(A(T)), du_np(T))
    assert calls == [("s", (3, 4)), ("a", (3, 4))]


def test_identical_callbacks_are_never_merged():
    log = []

    def host(x):
        log.append(1)
        return x

    j(lambda x: rune.callback(host, x, like=x) + rune.callback(host, x, like=x))(nx.ones(2))
    assert len(log) == 2
    log.clear()
    j(vm(lambda x: rune.callback(host, x, like=x, vmap_method="batched") +
          rune.callback(host, x, like=x, vmap_method="batched")))(nx.ones((3, 2)))
    assert len(log) == 2
    log.clear()
    j(lambda x: rune.scan(lambda c, r: (c + rune.callback(host, r, like=r) * 0 + rune.callback(host, r, like=r) * 0,
                                        None), nx.zeros(2), x)[0])(nx.ones((3, 2)))
    assert len(log) == 6


def test_grad_of_cond_with_custom_vjp_callbacks_runs_only_the_taken_branch():
    s = Solver()
    state = s.state_fn()
    f = lambda p, t: rune.cond(p, state, lambda t: t * 0.5, t)  # noqa: E731
    for p in (True, False):
        for fn in (g(f, argnums=1), j(g(f, argnums=1))):
            s.solves = s.adjoints = 0
            close(fn(nx.asarray(p), nx.scalar(0.5, F64)), du_np(0.5) if p else 0.5)
            assert (s.solves, s.adjoints) == ((1, 1) if p else (0, 0))
        s.solves = s.adjoints = 0
        close(vm(g(f, argnums=1), in_axes=(None, 0))(nx.asarray(p), A(THETAS)),
              du_np(THETAS) if p else 0.5 * np.ones(4))
        assert (s.solves, s.adjoints) == ((4, 4) if p else (0, 0))
    s.solves = s.adjoints = 0
    expected = np.where(THETAS > 0, du_np(THETAS), 0.5)
    close(g(lambda t: rune.scan(lambda c, x: (c + f(x > 0, x), None), nx.scalar(0.0, F64), t)[0])(A(THETAS)),
          expected)
    assert (s.solves, s.adjoints) == (2, 2)
    s.solves = s.adjoints = 0
    # a batched predicate: each lane runs its own branch's callbacks only
    close(vm(g(f, argnums=1))(A(THETAS > 0, np.bool_), A(THETAS)), expected)
    assert (s.solves, s.adjoints) == (2, 2)


# ---------------------------------------------------------------- rune bugs found by this file
# Open ones are strict xfails (reason starts with BUG:); fixed ones stay as regression tests.

# Regression (found by this file): vmap over a size-0 axis failed in the per-lane loop rule and in
# sequential callbacks (nx.stack of an empty list).
def test_vmap_over_an_empty_batch():
    empty = nx.zeros((0, 3), F64)
    idx = nx.zeros((0,), nx.int32)
    assert vm(lambda x, i: x.at[i].set(1.0))(empty, idx).shape == (0, 3)
    assert vm(lambda x, s: nx.dynamic_slice(x, (s,), (2,)))(empty, idx).shape == (0, 2)
    assert vm(lambda x: rune.callback(lambda v: v, x, like=x))(empty).shape == (0, 3)


# Regression (found by this file): the VJP of x.at[idx].set(v) with duplicate indices credited every
# duplicate update while the forward pass (and the JVP) keep only the last one.
def test_at_set_with_duplicate_indices_gradient_matches_forward():
    x = A([0.1, 0.2, 0.3, 0.4])
    idx = A([3, 3], np.int32)

    def f(v):
        return nx.sum(nx.sin(x.at[idx].set(v)))

    v = A([0.5, 0.7])
    close(f(v), np.sum(np.sin([0.1, 0.2, 0.3, 0.7])))       # the last update wins
    _, t = rune.jvp(f, (v,), (A([1.0, 0.0]),))
    close(t, 0.0)                                             # v[0] is overwritten: no effect
    close(g(f)(v), [0.0, np.cos(0.7)])                        # so its gradient must be 0


def test_at_multiply_min_max_with_duplicate_indices():
    x = A([1.0, 2.0, 3.0, 4.0])
    i = A([1, 1], np.int32)
    close(x.at[i].multiply(A([2.0, 3.0])), [1.0, 12.0, 3.0, 4.0])
    close(x.at[i].min(A([0.5, 1.5])), [1.0, 0.5, 3.0, 4.0])
    close(x.at[i].max(A([5.0, 3.0])), [1.0, 5.0, 3.0, 4.0])


# Regression (found by this file): out-of-bounds indices in x.at[idx].set/add were clamped onto a
# real element instead of being dropped as in JAX.
def test_at_set_out_of_bounds_index_is_dropped():
    x = A(np.arange(8.0).reshape(2, 4))
    out = x.at[A([0, 2], np.int32), 1].set(-9.0)
    close(out, [[0, -9, 2, 3], [4, 5, 6, 7]])
    out = vm(lambda r, i: r.at[i].add(100.0))(x, A([1, 4], np.int32))
    close(out, [[0, 101, 2, 3], [4, 5, 6, 7]])


# Regression (found by this file): a cond whose branch holds a callback was not effectful, so jit's
# dead-code elimination dropped it when its results were unused.
@pytest.mark.parametrize("where", ["top level", "switch", "under vmap", "inside scan"])
def test_callback_in_cond_branch_with_unused_result_still_runs_under_jit(where):
    log = []

    def host(x):
        log.append(1)
        return x

    def logged(p, x):
        rune.cond(p, lambda x: rune.callback(host, x, like=x), lambda x: x, x)  # result unused
        return x * 2

    x = A([1.0, 2.0])
    p = nx.asarray(True)
    logged(p, x)
    assert log == [1]  # eagerly it runs
    log.clear()
    if where == "top level":
        j(logged)(p, x)
        assert log == [1]
    elif where == "switch":
        j(lambda i, x: (rune.switch(i, [lambda x: x, lambda x: rune.callback(host, x, like=x)], x), x)[1])(
            nx.scalar(1, nx.int32), x)
        assert log == [1]
    elif where == "under vmap":
        j(vm(logged, in_axes=(None, 0)))(p, nx.ones((3, 2), F64))
        assert log == [1, 1, 1]
    else:
        # a scan run for its logging only: its results are unused too
        j(lambda xs: (rune.scan(lambda c, r: (logged(r > 1, c), None), x, xs), xs * 2)[1])(A([0.0, 2.0, 3.0]))
        assert log == [1, 1]


# Regression (found by this file): checkpoint recomputed a cond holding a callback in the backward pass.
def test_checkpoint_of_cond_with_callback_runs_it_once_under_grad():
    n = [0]

    def host(x):
        n[0] += 1
        return x * 0 + 2.0

    @rune.checkpoint
    def cell(x):
        k = rune.cond(x > 0, lambda v: rune.callback(host, v, like=v), lambda v: v * 0 + 1.0,
                      rune.stop_gradient(x))
        return nx.sin(x) * k

    close(g(cell)(nx.scalar(0.5, F64)), 2 * np.cos(0.5))
    assert n[0] == 1
    n[0] = 0
    g(lambda w: rune.scan(lambda c, x: (c + cell(x * w), None), nx.scalar(0.0, F64), A([0.5, 1.0, 1.5]))[0])(
        nx.scalar(1.0, F64))
    assert n[0] == 3


# Regression (found by this file): the batched while ran a callback in cond_fn twice per lane per
# iteration.
def test_callback_in_while_cond_under_vmap_runs_once_per_lane_per_iteration():
    log = []

    def host(x):
        log.append(float(x))
        return x

    def f(lim):
        return rune.while_loop(lambda c: rune.callback(host, c, like=c) < lim, lambda c: c + 1.0,
                               nx.scalar(0.0, F64))

    f(nx.scalar(2.0, F64))
    assert log == [0.0, 1.0, 2.0]
    log.clear()
    close(vm(f)(A([2.0, 2.0])), [2.0, 2.0])   # both lanes stop together: nothing extra to run
    assert sorted(log) == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]


# Regression (found by this file): collections.OrderedDict was not a pytree.
def test_ordered_dict_is_a_pytree_under_grad_and_vmap():
    import collections
    od = collections.OrderedDict([("b", A([1.0, 2.0, 3.0])), ("a", nx.scalar(10.0, F64))])
    gd = g(lambda d: nx.sum(d["b"]) * d["a"])(od)
    close(gd["a"], 6.0)
    close(gd["b"], [10.0, 10.0, 10.0])
    close(vm(lambda d: d["a"] + d["b"], in_axes=(collections.OrderedDict([("b", 0), ("a", None)]),))(od),
          [11.0, 12.0, 13.0])


# Regression (found by this file): derivatives of x ** n of order > n were 0 * inf = NaN at x = 0.
def test_higher_derivatives_of_integer_powers_at_zero():
    z = nx.scalar(0.0, F64)
    with np.errstate(divide="ignore", invalid="ignore"):
        close(g(lambda x: x ** 0)(z), 0.0)
        close(rune.hessian(lambda x: x ** 1)(z), 0.0)
        close(g(g(g(lambda x: x ** 2)))(z), 0.0)
        close(vm(g(g(g(lambda x: x ** 2))))(A([0.0, 1.0])), [0.0, 0.0])
        close(rune.jvp(lambda x: x ** 0, (z,), (nx.scalar(1.0, F64),))[1], 0.0)


# Regression (found by this file): nx.random.key(seed) called int(seed), so traced seeds raised.
def test_random_key_from_a_traced_seed_under_vmap_and_jit():
    seeds = nx.arange(3, dtype=nx.int32)
    expected = np.stack([N(nx.random.uniform(nx.random.key(s), (2,))) for s in range(3)])
    close(vm(lambda s: nx.random.uniform(nx.random.key(s), (2,)))(seeds), expected, rtol=0, atol=0)
    close(j(lambda s: nx.random.uniform(nx.random.key(s), (2,)))(nx.scalar(1, nx.int32)), expected[1],
          rtol=0, atol=0)


# Regression (found by this file): rune.stop_gradient took only an array, not a pytree.
def test_stop_gradient_of_a_pytree_under_grad():
    x = A([1.0, 2.0])
    close(g(lambda x: nx.sum(rune.stop_gradient({"a": x, "b": (x,)})["a"] * x))(x), [1.0, 2.0])


def test_take_with_small_integer_indices_under_vmap():
    X = np.arange(400.0).reshape(40, 10)
    I = (np.arange(80) % 10).astype(np.int8).reshape(40, 2)
    close(nx.take(A(np.arange(200.0)), A([1, -1], np.int8)), [1.0, 199.0])
    close(vm(lambda x, i: nx.take(x, i))(A(X), A(I, np.int8)), np.stack([X[b][I[b]] for b in range(40)]))
    close(vm(lambda x, i: nx.take(x, i))(A(X), A(I, np.uint8)), np.stack([X[b][I[b]] for b in range(40)]))


def test_dynamic_slice_negative_start_wraps_like_jax():
    x = nx.arange(10.0, dtype=F64)
    close(nx.dynamic_slice(x, (-2,), (2,)), [8.0, 9.0])
    close(nx.dynamic_update_slice(x, -nx.ones((2,), F64), (-3,)), [0, 1, 2, 3, 4, 5, 6, -1, -1, 9])
    close(vm(lambda s: nx.dynamic_slice(x, (s,), (2,)))(A([-2, 1], np.int32)), [[8.0, 9.0], [1.0, 2.0]])


WEAK_CARRIES = [(0, nx.float32), (0.0, nx.bfloat16), (0, nx.float16)]


def _weak_carry_sum(init):
    return lambda xs: rune.scan(lambda c, x: (c + x, None), init, xs)[0]


@pytest.mark.parametrize("init,dtype", WEAK_CARRIES)
def test_weak_scan_carry_takes_the_dtype_the_loop_would_give(init, dtype):
    xs = nx.asarray(np.array([0.5, 1.5, 2.0]), dtype)
    c = init
    for k in range(3):
        c = c + xs[k]
    assert c.dtype == dtype
    for fn in (_weak_carry_sum(init),
               j(_weak_carry_sum(init)),
               lambda xs: vm(lambda r: rune.scan(lambda c, x: (c + x, None), init, r)[0])(xs[None])[0]):
        out = fn(xs)
        assert out.dtype == dtype
        close(out.astype(F64), N(c.astype(F64)))


def test_einsum_with_ellipsis_under_vmap():
    x = RNG.normal(size=(2, 3, 4, 4))
    close(nx.einsum("...ij,...jk->...ik", A(x), A(x)), np.einsum("...ij,...jk->...ik", x, x))
    close(vm(lambda a: nx.einsum("...ii->...i", a), in_axes=1)(A(x)),
          np.stack([np.einsum("...ii->...i", x[:, b]) for b in range(3)]))


# ---------------------------------------------------------------- placement under transformations (two host devices)
# RUNE_HOST_DEVICES is read at import, so these run in one child process; each check
# reports the device its result lies on (or the error it raised).

_DEVICE_SCRIPT = r'''
import json
import numpy as np
import rune
from rune import nx
F64 = nx.float64
vm, g, j = rune.vmap, rune.grad, rune.jit
x1 = nx.place(nx.asarray(np.array([0.3, 0.6, 0.2])), "cpu:1")
M1 = nx.place(nx.asarray(np.array([[0.3, 0.6, 0.2], [0.1, 0.5, 0.4]])), "cpu:1")
s1 = nx.place(nx.scalar(0.5, F64), "cpu:1")
i1 = nx.place(nx.asarray(np.array([0, 2], np.int32)), "cpu:1")
checks = {
    "grad sin": lambda: g(lambda x: nx.sum(nx.sin(x)))(x1),
    "jit vmap grad": lambda: j(vm(g(lambda x: nx.sum(nx.sin(x) * x))))(M1),
    "hessian": lambda: rune.hessian(lambda x: nx.sum(nx.sin(x) * x))(x1),
    "jacrev": lambda: rune.jacrev(nx.sin)(x1),
    "grad scan": lambda: g(lambda w: rune.scan(lambda c, x: (nx.sin(c) * w + x * 2.0, None), s1, x1)[0])(s1),
    "vmap grad cond": lambda: vm(g(lambda w: rune.cond(w > 0.3, lambda w: w * 3.0, lambda w: w * w, w)))(x1),
    "vmap while": lambda: vm(lambda w: rune.while_loop(lambda c: c < 2.0, lambda c: c * 1.5 + 0.1, w))(x1),
    "vmap grad custom_vjp": lambda: vm(g(rune.custom_vjp(lambda x: (x * 2, lambda ct: ct * 3))))(x1),
    "grad checkpoint": lambda: g(lambda x: nx.sum(rune.checkpoint(lambda x: nx.sin(x) * 2.0)(x)))(x1),
    "vmap grad gather": lambda: vm(g(lambda x, i: x[i] * 2.0), in_axes=(None, 0))(x1, i1),
    "vmap callback": lambda: vm(lambda x: rune.callback(lambda v: v * 2, x, like=x))(x1),
    "grad x / 2": lambda: g(lambda x: nx.sum(x / 2))(x1),
    "grad x ** 2": lambda: g(lambda x: nx.sum(x ** 2))(x1),
    "jvp x ** 3": lambda: rune.jvp(lambda x: x ** 3, (x1,), (x1,))[1],
    "grad mean": lambda: g(nx.mean)(x1),
    "vmap grad var": lambda: vm(g(nx.var))(M1),
    "jit grad std": lambda: j(g(nx.std))(x1),
    "scan with python float init": lambda: rune.scan(lambda c, x: (c + x, c), 0.0, x1)[0],
}
results = {}
for name, fn in checks.items():
    try:
        results[name] = str(fn().device)
    except Exception as e:
        results[name] = f"{type(e).__name__}: {e}"
print(json.dumps(results))
'''

# Regressions (found by this file): derivative rules of a binary op with a Python-scalar operand
# (x / 2, x ** 2, mean/var/std) built arrays on the default device, and a Python-scalar scan carry
# was made on the default device instead of with the xs it meets.
_DEVICE_CHECKS = ["grad sin", "jit vmap grad", "hessian", "jacrev", "grad scan", "vmap grad cond",
                  "vmap while", "vmap grad custom_vjp", "grad checkpoint", "vmap grad gather", "vmap callback",
                  "grad x / 2", "grad x ** 2", "jvp x ** 3", "grad mean", "vmap grad var", "jit grad std",
                  "scan with python float init"]


@pytest.fixture(scope="module")
def two_device_results():
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, RUNE_HOST_DEVICES="2")
    env.pop("RUNE_DEFAULT_DEVICE", None)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, "-c", _DEVICE_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120, cwd=repo)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", _DEVICE_CHECKS)
def test_results_stay_on_the_device_of_the_inputs(name, two_device_results):
    assert two_device_results[name] == "cpu:1"


# ---------------------------------------------------------------- the kernels of the tests above, compiled in batches

def _jitted_calls():
    """The outermost jit of the table-driven tests (a jit inside another transformation
    is traced through and compiles nothing of its own), on arguments of the tests'
    shapes and dtypes: compiled together before the file's first test. (Eager scans
    compile their bodies as they run; those are left to the tests.)"""
    tables = [(PER_EXAMPLE_GRAD, (A(W),)), (GRAD_OF_MAPPED, (A(W),)), (HVP, (A(W[0]), A(V[0]))),
              (MAPPED_HVP, (A(W), A(V))), (HESSIANS, (A(W[1]),))]
    calls = [(make(), args) for table, args in tables for make in table.values() if make is not None]
    calls += [(_stack(base, kinds)[0], (A(STACK_POINT),)) for base, kinds in _STACKS]
    x = A(np.zeros((3, 4, 5)))
    calls += [(j(vm(_keepdims_reduction(name), in_axes=i, out_axes=o)), (x,))
              for name, _ in REDUCTIONS for i, o in KEEPDIMS_AXES]
    lanes = [np.zeros(4, bool), np.zeros(4), np.zeros(4)]
    calls += [(j(vm(_cond_fn, in_axes=axes)), _cond_call(lanes, axes)) for axes in COND_AXES]
    calls += [(j(vm(g(_cond_fn, argnums=1), in_axes=axes)), _cond_call(lanes, axes)) for axes in GRAD_COND_AXES]
    calls += [(j(_weak_carry_sum(init)), (nx.asarray(np.zeros(3), dtype),)) for init, dtype in WEAK_CARRIES]
    return jitted_only(calls)


_kernels = precompiled(_jitted_calls)
