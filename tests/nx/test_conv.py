"""conv and reduce_window beyond the op table: second derivatives, transformations
of derivatives, tie-sharing, and the errors users see."""
import importlib

import numpy as np
import pytest

import rune
from rune import nn, nx

from compiled import precompiled
from op_table import _np_conv


def _hvp_check(f, args, argnums):
    rng = np.random.default_rng(0)
    grad = rune.grad(f, argnums=argnums)
    us = [nx.asarray(rng.standard_normal(args[i].shape)) for i in argnums]
    primals = [args[i] for i in argnums]

    def g(*p):
        full = list(args)
        for i, v in zip(argnums, p):
            full[i] = v
        return grad(*full)

    _, hvp = rune.jvp(g, primals, us)
    eps = 1e-5
    plus = g(*[p + eps * u for p, u in zip(primals, us)])
    minus = g(*[p - eps * u for p, u in zip(primals, us)])
    for h, a, b in zip(hvp, plus, minus):
        np.testing.assert_allclose(np.asarray(h), (np.asarray(a) - np.asarray(b)) / (2 * eps), rtol=1e-5, atol=1e-6)


def test_second_derivatives_of_conv_match_finite_differences():
    rng = np.random.default_rng(1)
    x, w = nx.asarray(rng.standard_normal((2, 5, 5, 2))), nx.asarray(rng.standard_normal((3, 3, 2, 3)))
    f = lambda x, w: nx.sum(nx.tanh(nx.conv(x, w, strides=2, padding="SAME")))  # noqa: E731
    _hvp_check(f, [x, w], (0, 1))


def test_second_derivatives_of_pooling_match_finite_differences():
    x = nx.asarray(np.random.default_rng(2).standard_normal((2, 6, 6, 2)))
    for pool in (nn.max_pool, nn.avg_pool):
        _hvp_check(lambda x: nx.sum(nx.sin(pool(x, 3, strides=2, padding="SAME")) ** 2), [x], (0,))


def test_grad_under_jit_and_vmap_of_the_kernel_gradient():
    rng = np.random.default_rng(3)
    xs = nx.asarray(rng.standard_normal((3, 2, 6, 6, 4)))
    w = nx.asarray(rng.standard_normal((3, 3, 2, 4)))
    loss = lambda w, x: nx.sum(nx.conv(x, w, padding=[(1, 0), (2, 1)], dilation=(2, 1), feature_group_count=2) ** 2)  # noqa: E731
    per_example = [np.asarray(rune.grad(loss)(w, xs[i])) for i in range(3)]
    np.testing.assert_allclose(np.asarray(rune.vmap(rune.grad(loss), in_axes=(None, 0))(w, xs)),
                               np.stack(per_example), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(rune.jit(rune.grad(loss))(w, xs[0])), per_example[0], rtol=1e-10)


def test_transposed_strides_agree_with_a_loop():
    # The input cotangent of a strided conv is a conv with lhs dilation: check the
    # pullback against the adjoint identity <ct, conv(x)> = <pullback(ct), x>.
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 7, 8, 2)), rng.standard_normal((2, 3, 2, 2))
    out, pullback = rune.vjp(lambda x: nx.conv(x, nx.asarray(w), strides=(3, 2), padding=[(2, 1), (0, 2)]),
                             nx.asarray(x))
    ct = rng.standard_normal(out.shape)
    (cx,) = pullback(nx.asarray(ct))
    want = _np_conv(x, w, strides=(3, 2), padding=[(2, 1), (0, 2)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-12)
    assert np.sum(ct * want) == pytest.approx(np.sum(np.asarray(cx) * x), rel=1e-12)


def test_max_pool_ties_share_the_gradient_as_reduce_max():
    x = nx.asarray(np.array([[1.0, 3.0, 3.0, 0.0]]))
    g = rune.grad(lambda x: nx.sum(nx.reduce_window(x, "max", (1, 2), (1, 2))))(x)
    assert np.asarray(g).tolist() == [[0.0, 1.0, 1.0, 0.0]]
    g = rune.grad(lambda x: nx.sum(nx.reduce_window(x, "max", (1, 4))))(nx.asarray(np.array([[3.0, 1.0, 3.0, 3.0]])))
    assert np.asarray(g).tolist() == [[1 / 3, 0.0, 1 / 3, 1 / 3]]


def test_padding_forms_agree():
    x, w = nx.asarray(np.arange(2 * 5 * 5 * 1.0).reshape(2, 5, 5, 1)), nx.ones((3, 3, 1, 2))
    same = np.asarray(nx.conv(x, w, padding="SAME"))
    for form in (1, [1, 1], [(1, 1), (1, 1)], ((1, 1), 1)):
        np.testing.assert_array_equal(np.asarray(nx.conv(x, w, padding=form)), same)


def test_errors_name_what_was_expected():
    x, w = nx.ones((1, 4, 4, 3)), nx.ones((3, 3, 2, 4))
    with pytest.raises(rune.ShapeError, match="input channels 3"):
        nx.conv(x, w)
    with pytest.raises(rune.ShapeError, match="rank"):
        nx.conv(nx.ones((4, 3)), nx.ones((3, 4)))
    with pytest.raises(rune.ArgumentError, match="padding"):
        nx.conv(x, nx.ones((3, 3, 3, 4)), padding="FULL")
    with pytest.raises(rune.ShapeError, match="strides"):
        nx.conv(x, nx.ones((3, 3, 3, 4)), strides=(1, 0))
    with pytest.raises(rune.ArgumentError, match="'max' or|one of"):
        nx.reduce_window(x, "mean", (1, 2, 2, 1))
    with pytest.raises(rune.ShapeError, match="window_dimensions"):
        nx.reduce_window(x, "max", (2, 2))
    with pytest.raises(rune.ShapeError, match="spatial"):
        nn.max_pool(x, (2, 2, 2))


@pytest.mark.parametrize("op", ["max", "sum"])
@pytest.mark.parametrize("window", [(1, 2, 2, 1), (1, 6, 6, 1)])
def test_small_and_large_windows_agree_with_a_loop(op, window):
    # The host combines a pooling window's few offsets pass by pass and reduces
    # large windows (global pooling here, 36 elements) over the strided view:
    # both against the op table's direct loop, NaN propagation included.
    from op_table import _np_reduce_window
    x = np.random.default_rng(5).standard_normal((2, 6, 6, 3)).astype(np.float32)
    x[0, 1, 1, 0] = np.nan
    got = nx.reduce_window(nx.asarray(x), op, window, window, padding="SAME")
    np.testing.assert_allclose(np.asarray(got), _np_reduce_window(x, op, window, window, "SAME"), rtol=1e-6)


def _np_max_pool_vjp(x, ct, k):
    """Tiled max pooling's cotangent with ties sharing equally, window by window."""
    out = np.zeros_like(x)
    n, h, w, c = x.shape
    for b, i, j, ch in np.ndindex(n, h // k, w // k, c):
        win = x[b, i * k:(i + 1) * k, j * k:(j + 1) * k, ch]
        hits = win == win.max()
        out[b, i * k:(i + 1) * k, j * k:(j + 1) * k, ch] = np.where(hits, ct[b, i, j, ch] / max(hits.sum(), 1), 0)
    return out


@pytest.mark.parametrize("shape", [(2, 4, 6, 3), (1, 5, 7, 2)], ids=["tiled", "cropped"])
def test_tiled_max_pool_derivatives_by_offsets_agree_with_numpy_and_the_window_reduction(shape, monkeypatch):
    # Tiled pooling counts a window's ties offset by offset (strided slices); the
    # general rule reduces over window axes. Small integers make many ties; a NaN
    # window (no element equals its max) gets no cotangent.
    rules = importlib.import_module("rune.nx.convolution")
    rng = np.random.default_rng(6)
    x = rng.integers(0, 3, shape).astype(np.float64)
    x[0, 0, 0, 0] = np.nan
    f = lambda x: nn.max_pool(x, 2)  # noqa: E731
    out = np.asarray(f(nx.asarray(x)))
    ct = rng.standard_normal(out.shape)
    t = rng.standard_normal(shape)

    def derivatives():
        vjp = lambda x, ct: rune.vjp(f, x)[1](ct)[0]  # noqa: E731
        jvp = lambda x, t: rune.jvp(f, (x,), (t,))[1]  # noqa: E731
        args = (nx.asarray(x), nx.asarray(ct)), (nx.asarray(x), nx.asarray(t))
        return [np.asarray(g(*a)) for g, a in ((vjp, args[0]), (rune.jit(vjp), args[0]),
                                               (jvp, args[1]), (rune.jit(jvp), args[1]))]

    by_offsets = derivatives()
    monkeypatch.setattr(rules, "_FEW_OFFSETS", 0)
    by_reduction = derivatives()
    used = tuple(d - d % 2 for d in shape[1:3])
    want = np.zeros_like(x)
    want[:, :used[0], :used[1]] = _np_max_pool_vjp(x[:, :used[0], :used[1]], ct, 2)
    for got, old in zip(by_offsets[:2], by_reduction[:2]):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
        np.testing.assert_allclose(got, old, rtol=1e-14, atol=0)
    # the tangent is <the cotangent map, t>: each window's mean over its tied maxima
    tangent = np.zeros_like(out)
    for b, i, j, ch in np.ndindex(*out.shape):
        win = (b, slice(2 * i, 2 * i + 2), slice(2 * j, 2 * j + 2), ch)
        hits = x[win] == x[win].max()   # all False in the NaN window
        tangent[b, i, j, ch] = (t[win] * hits).sum() / max(hits.sum(), 1)
    for got, old in zip(by_offsets[2:], by_reduction[2:]):
        np.testing.assert_allclose(got, tangent, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got, old, rtol=1e-12, atol=1e-15)


CONV_DTYPES = [np.float32, np.float64]
GEOMETRIES = [
    dict(x=(2, 8, 8, 16), w=(3, 3, 16, 32), padding="SAME"),                       # blocks of 8 pixels
    dict(x=(3, 7, 11, 3), w=(2, 3, 3, 5), strides=(2, 1), padding=[(1, 2), (0, 1)]),  # a row's tail
    dict(x=(2, 9, 7, 4), w=(3, 2, 2, 6), dilation=(2, 3), feature_group_count=2),
    dict(x=(4, 6, 7, 1), w=(3, 3, 1, 4), padding="SAME", dilation=(1, 2)),         # one input channel
    dict(x=(2, 3, 3, 2), w=(3, 3, 2, 4)),                                          # one output pixel
    dict(x=(1, 5, 5, 2), w=(3, 3, 2, 200), padding="SAME"),                        # too many channels: BLAS
]


def _conv_case(geometry, dtype):
    """x, w, the conv's parameters, the conv and a loss of it."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(geometry["x"]).astype(dtype)
    w = rng.standard_normal(geometry["w"]).astype(dtype)
    params = {k: v for k, v in geometry.items() if k not in ("x", "w")}
    f = lambda x, w: nx.conv(x, w, **params)  # noqa: E731
    return x, w, params, f, lambda x, w: nx.sum(nx.sin(f(x, w)))


def _conv_gradients():
    """The jitted gradient of each geometry's loss: its stretches' kernels compile together
    before the tests (the direct convs' loop nests are built as they first run)."""
    for geometry in GEOMETRIES:
        for dtype in CONV_DTYPES:
            x, w, _, _, loss = _conv_case(geometry, dtype)
            yield rune.grad(loss, (0, 1)), (nx.asarray(x), nx.asarray(w))


_kernels = precompiled(lambda: list(_conv_gradients()))


@pytest.mark.parametrize("dtype", CONV_DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=["same", "strided-tail", "dilated-groups", "one-channel",
                                                     "one-pixel", "wide"])
def test_direct_conv_agrees_with_a_loop_and_blas(geometry, dtype, monkeypatch):
    # Convs with enough work run as a compiled direct loop nest: forced here for
    # small shapes, forward and both cotangents (the input's is a conv; the
    # kernel's a conv reading x and the output's cotangent in their own layouts),
    # against the op table's loop and against im2col + BLAS.
    from rune.backends.cpu import conv as host_conv
    x, w, params, f, loss = _conv_case(geometry, dtype)

    def run():
        return [np.asarray(f(nx.asarray(x), nx.asarray(w)))] + [
            np.asarray(g) for g in rune.jit(rune.grad(loss, (0, 1)))(nx.asarray(x), nx.asarray(w))]

    ran = []
    run_direct = host_conv._run_direct
    monkeypatch.setattr(host_conv, "_run_direct", lambda *a: ran.append(a[-1]) or run_direct(*a))
    monkeypatch.setattr(host_conv, "DIRECT_MIN_WORK", 0)
    direct = run()
    monkeypatch.setattr(host_conv, "DIRECT_MIN_WORK", float("inf"))
    blas = run()
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(direct[0], _np_conv(x, w, **params), **tol)
    for got, want in zip(direct, blas):
        np.testing.assert_allclose(got, want, **tol)
    from rune.backends.cpu.compiler import find
    if find() is not None:   # which ran direct (200 output channels: only the input's cotangent)
        g = params.get("feature_group_count", 1)
        want = {(g,) + x.shape[:-1] + (x.shape[-1] // g,)}                          # the input's cotangent
        if w.shape[-1] <= 128:
            want |= {(g, x.shape[0]) + direct[0].shape[1:-1] + (w.shape[-1] // g,),   # the forward
                     (g, w.shape[-2]) + w.shape[:-2] + (w.shape[-1] // g,)}          # the kernel's cotangent
        assert want <= set(ran), ran
