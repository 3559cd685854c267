"""rune.nn against formulas written out in NumPy/SciPy, finite differences,
and the transformations (jit, vmap, grad) on the same functions."""
import math

import numpy as np
import pytest
import scipy.special

import rune
from rune import nn, nx

from oracles import fd_grad

X = np.array([-30.0, -3.0, -1.0, -0.25, 0.0, 0.5, 2.0, 40.0])

ACTIVATIONS = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "gelu_tanh": (nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "gelu_exact": (lambda x: nn.gelu(x, approximate=False), lambda x: x * scipy.special.ndtr(x)),
    "silu": (nn.silu, lambda x: x * scipy.special.expit(x)),
    "sigmoid": (nn.sigmoid, scipy.special.expit),
    "softplus": (nn.softplus, lambda x: np.logaddexp(x, 0)),
    "leaky_relu": (lambda x: nn.leaky_relu(x, 0.1), lambda x: np.where(x >= 0, x, 0.1 * x)),
    "elu": (lambda x: nn.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(np.minimum(x, 0)))),
    "log_sigmoid": (nn.log_sigmoid, lambda x: -np.logaddexp(0, -x)),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activations_match_their_formulas_and_derivatives(name):
    fn, ref = ACTIVATIONS[name]
    got = fn(nx.asarray(X))
    assert got.dtype == np.float64
    np.testing.assert_allclose(np.asarray(got), ref(X), rtol=1e-12, atol=1e-12)  # 1 + erf cancels far left, as in JAX
    assert fn(nx.asarray(X.astype(np.float32))).dtype == np.float32
    smooth = X[X != 0]  # relu has a kink at 0
    g = rune.grad(lambda x: nx.sum(fn(x)))(nx.asarray(smooth))
    np.testing.assert_allclose(np.asarray(g), fd_grad(lambda x: np.sum(ref(x)), smooth), rtol=1e-6, atol=1e-8)


ROUNDED_ONCE = ("gelu_tanh", "gelu_exact", "silu", "softplus", "elu", "log_sigmoid")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", ROUNDED_ONCE)
def test_16_bit_activations_are_their_float32_values_rounded_once(name, dtype):
    fn, ref = ACTIVATIONS[name]
    x = np.random.default_rng(3).uniform(-6, 6, 2000).astype(np.float32).astype(dtype)
    wide = np.asarray(fn(nx.asarray(x.astype(np.float32))))   # float32's function, NumPy's rounding
    eager = np.asarray(fn(nx.asarray(x)))
    assert eager.dtype == x.dtype and eager.tobytes() == wide.astype(dtype).tobytes()
    assert np.asarray(rune.jit(fn)(nx.asarray(x))).tobytes() == eager.tobytes()
    # one rounding: within half an ulp of the exact value, and float32's error (where 1 + tanh
    # or 1 + erf cancels, |x| float32 ulps); a rounding after every step is off by several ulps
    exact, x64 = ref(x.astype(np.float64)), x.astype(np.float64)
    ulp = np.spacing(np.abs(exact).astype(dtype)).astype(np.float64)
    f32_error = 4 * np.finfo(np.float32).eps * (np.abs(exact) + np.abs(x64))
    assert (np.abs(eager.astype(np.float64) - exact) <= 0.5 * ulp + f32_error + 1e-30).all()
    # the derivative takes the same path: float32's, rounded once
    grad = rune.grad(lambda v: nx.sum(fn(v).astype(np.float32)))
    g = np.asarray(grad(nx.asarray(x)))
    assert g.dtype == x.dtype
    assert g.tobytes() == np.asarray(grad(nx.asarray(x.astype(np.float32)))).astype(dtype).tobytes()
    assert np.asarray(rune.jit(grad)(nx.asarray(x))).tobytes() == g.tobytes()


def test_relu_derivative_at_zero_is_zero_as_jax():
    assert float(rune.grad(nn.relu)(nx.asarray(0.0))) == 0.0


def test_softmax_family_are_the_nx_functions():
    assert nn.softmax is nx.softmax and nn.log_softmax is nx.log_softmax and nn.logsumexp is nx.logsumexp


def test_one_hot():
    labels = np.array([[0, 2], [3, 5]], np.int32)  # 5 is out of range: all zeros
    got = nn.one_hot(nx.asarray(labels), 4)
    assert got.dtype == np.float32 and got.shape == (2, 2, 4)
    np.testing.assert_array_equal(np.asarray(got), (labels[..., None] == np.arange(4)).astype(np.float32))
    moved = nn.one_hot(nx.asarray(labels), 4, dtype=nx.int32, axis=0)
    assert moved.shape == (4, 2, 2) and moved.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(moved), np.moveaxis(labels[..., None] == np.arange(4), -1, 0))
    with pytest.raises(rune.DTypeError):
        nn.one_hot(nx.asarray([0.5]), 3)


def _np_cross_entropy(logits, labels):
    top = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    return lse - np.take_along_axis(logits, labels[..., None], -1)[..., 0]


def test_cross_entropy_matches_numpy_and_its_gradient_is_softmax_minus_one_hot():
    rng = np.random.default_rng(0)
    logits, labels = rng.standard_normal((5, 7)), rng.integers(0, 7, 5).astype(np.int32)
    got = nn.cross_entropy(nx.asarray(logits), nx.asarray(labels))
    assert got.shape == (5,)
    np.testing.assert_allclose(np.asarray(got), _np_cross_entropy(logits, labels), rtol=1e-12)
    g = rune.grad(lambda z: nx.sum(nn.cross_entropy(z, nx.asarray(labels))))(nx.asarray(logits))
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(g), p - np.eye(7)[labels], rtol=1e-10, atol=1e-12)


def test_cross_entropy_is_stable_at_huge_logits():
    logits = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4], [1e4, 1e4, -1e4]], np.float32)
    labels = np.array([0, 0, 1], np.int32)
    got = np.asarray(nn.cross_entropy(nx.asarray(logits), nx.asarray(labels)))
    np.testing.assert_allclose(got, [0.0, 2e4, math.log(2)], rtol=1e-6)
    g = np.asarray(rune.grad(lambda z: nx.sum(nn.cross_entropy(z, nx.asarray(labels))))(nx.asarray(logits)))
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g, [[0, 0, 0], [-1, 0, 1], [0.5, -0.5, 0]], atol=1e-6)


def test_cross_entropy_mask_and_transformations():
    rng = np.random.default_rng(1)
    logits, labels = rng.standard_normal((3, 4, 5)), rng.integers(0, 5, (3, 4)).astype(np.int32)
    mask = rng.random((3, 4)) < 0.5
    want = np.where(mask, _np_cross_entropy(logits, labels), 0.0)
    args = (nx.asarray(logits), nx.asarray(labels), nx.asarray(mask))
    np.testing.assert_allclose(np.asarray(nn.cross_entropy(*args)), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(rune.jit(nn.cross_entropy)(*args)), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(rune.vmap(nn.cross_entropy)(*args)), want, rtol=1e-12)
    g = rune.grad(lambda z: nx.sum(nn.cross_entropy(z, args[1], args[2])))(args[0])
    assert np.all(np.asarray(g)[~mask] == 0)
    with pytest.raises(rune.ShapeError, match="labels"):
        nn.cross_entropy(args[0], nx.asarray(labels[:, :2]))


def test_cross_entropy_of_a_label_outside_the_classes_is_nan_not_zero():
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((4, 3))
    labels = np.array([1, 3, -1, 0], np.int32)  # 3 and -1 are no class of 3
    got = np.asarray(nn.cross_entropy(nx.asarray(logits), nx.asarray(labels)))
    assert np.isnan(got[1]) and np.isnan(got[2])
    ok = [0, 3]
    np.testing.assert_allclose(got[ok], _np_cross_entropy(logits[ok], labels[ok]), rtol=1e-12)
    jitted = np.asarray(rune.jit(nn.cross_entropy)(nx.asarray(logits), nx.asarray(labels)))
    np.testing.assert_array_equal(np.isnan(jitted), [False, True, True, False])
    # a mask that excludes the padding labels gives their examples 0, the others their loss
    mask = labels >= 0
    masked = np.asarray(nn.cross_entropy(nx.asarray(logits), nx.asarray(np.where(mask, labels, -1)),
                                         nx.asarray(mask)))
    np.testing.assert_allclose(masked, [_np_cross_entropy(logits[:1], labels[:1])[0], np.nan, 0.0,
                                        _np_cross_entropy(logits[3:], labels[3:])[0]], rtol=1e-12)


def test_layer_norm():
    rng = np.random.default_rng(2)
    x, gamma, beta = rng.standard_normal((4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * gamma + beta
    got = nn.layer_norm(nx.asarray(x), nx.asarray(gamma), nx.asarray(beta))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10)
    plain = nn.layer_norm(nx.asarray(x), axis=(0, 1), eps=0.0)
    np.testing.assert_allclose(np.asarray(plain), (x - x.mean()) / x.std(), rtol=1e-10)
    w = rng.standard_normal((4, 6))
    g = rune.grad(lambda x: nx.sum(nn.layer_norm(x, nx.asarray(gamma)) * w))(nx.asarray(x))
    ref = lambda x: np.sum((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * gamma * w)  # noqa: E731
    np.testing.assert_allclose(np.asarray(g), fd_grad(ref, x), rtol=1e-5, atol=1e-7)


def test_dropout():
    key = nx.random.key(0)
    x = nx.ones((200, 100))
    assert nn.dropout(key, 0.0, x) is x
    y = np.asarray(nn.dropout(key, 0.25, x))
    kept = y != 0
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.75)}
    assert abs(kept.mean() - 0.75) < 0.01  # 20000 draws: 4 standard deviations is 0.012
    np.testing.assert_array_equal(np.asarray(nn.dropout(key, 0.25, x)), y)  # a pure function of the key
    np.testing.assert_array_equal(np.asarray(rune.jit(nn.dropout, static_argnums=1)(key, 0.25, x)), y)
    g = rune.grad(lambda x: nx.sum(nn.dropout(key, 0.25, x)))(x)
    np.testing.assert_array_equal(np.asarray(g), y)  # the mask, scaled
    with pytest.raises(rune.ArgumentError):
        nn.dropout(key, 1.0, x)


@pytest.mark.parametrize("name,kind,variance", [
    ("glorot_uniform", "uniform", lambda i, o: 2 / (i + o)), ("glorot_normal", "normal", lambda i, o: 2 / (i + o)),
    ("he_uniform", "uniform", lambda i, o: 2 / i), ("he_normal", "normal", lambda i, o: 2 / i),
    ("lecun_uniform", "uniform", lambda i, o: 1 / i), ("lecun_normal", "normal", lambda i, o: 1 / i)])
def test_initialisers_have_their_variance(name, kind, variance):
    init = getattr(nn, name)
    w = init(nx.random.key(3), (3, 3, 16, 32))  # a conv kernel: fans include the window
    assert w.shape == (3, 3, 16, 32) and w.dtype == np.float32
    a = np.asarray(w)
    want = variance(9 * 16, 9 * 32)
    assert abs(a.var() / want - 1) < 0.05  # 4608 draws
    if kind == "uniform":
        assert np.abs(a).max() <= math.sqrt(3 * want)
    assert init(nx.random.key(3), (4, 5), nx.float64).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(init(nx.random.key(3), (3, 3, 16, 32))), a)


def test_zeros_ones_and_normal_initialisers():
    key = nx.random.key(0)
    assert np.asarray(nn.zeros(key, (2, 3))).tolist() == [[0.0] * 3] * 2
    assert nn.ones(key, 4, nx.int32).dtype == np.int32
    assert abs(np.asarray(nn.normal(0.5)(key, (10000,))).std() - 0.5) < 0.02


def test_pools_match_numpy():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 6, 4, 3))
    blocks = x.reshape(2, 3, 2, 2, 2, 3)
    np.testing.assert_allclose(np.asarray(nn.max_pool(nx.asarray(x), 2)), blocks.max((2, 4)))
    np.testing.assert_allclose(np.asarray(nn.avg_pool(nx.asarray(x), (2, 2))), blocks.mean((2, 4)))
    assert nn.max_pool(nx.asarray(x), 3, strides=1, padding="SAME").shape == (2, 6, 4, 3)
