"""NumPy's RuntimeWarnings stay inside rune where rune means the special value it
computes (a masked logit's -inf, the zero cotangent of where's unused branch,
a loss scale at the top of float32, a cube that saturates tanh): each op runs
here with warnings as errors and its value is checked against NumPy. A user's
own NumPy calls keep warning."""
import warnings

import numpy as np
import pytest

import rune
from rune import nn, nx

INF, NAN = np.inf, np.nan


@pytest.fixture(autouse=True)
def warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def np_log_softmax(x):
    with np.errstate(all="ignore"):
        finite = x[np.isfinite(x)]
        return x - finite.max() - np.log(np.exp(x - finite.max()).sum())


def test_cross_entropy_of_logits_masked_with_minus_inf_is_their_softmax_loss():
    logits = np.array([[-INF, -INF, 0.0, 1.0], [2.0, -INF, 0.5, -1.0]], np.float32)
    labels = np.array([2, 0], np.int32)
    want = [-np_log_softmax(logits[i].astype(np.float64))[labels[i]] for i in range(2)]
    for f in (nn.cross_entropy, rune.jit(nn.cross_entropy)):
        np.testing.assert_allclose(np.asarray(f(nx.asarray(logits), nx.asarray(labels))), want, rtol=1e-6)
    grad = rune.grad(lambda l: nx.sum(nn.cross_entropy(l, nx.asarray(labels))))(nx.asarray(logits))
    with np.errstate(all="ignore"):
        p = np.exp(np.stack([np_log_softmax(r.astype(np.float64)) for r in logits]))
    np.testing.assert_allclose(np.asarray(grad), p - np.eye(4)[labels], rtol=1e-6, atol=1e-7)


def test_gradients_through_where_and_norms_at_zero_are_quiet():
    x = np.array([0.0, 2.0], np.float32)
    g = rune.grad(lambda x: nx.sum(nx.where(x > 0, nx.log(x), 0.0)))(nx.asarray(x))
    # as JAX: the unused branch's partial (1/0 = inf) times its zero cotangent is NaN
    np.testing.assert_array_equal(np.asarray(g), [NAN, 0.5])
    g = rune.grad(lambda x: nx.sqrt(nx.sum(x * x)))(nx.zeros(2))
    assert np.isnan(np.asarray(g)).all()
    _, tangent = rune.jvp(lambda x: nx.where(x > 0, nx.log(x), 0.0), (nx.asarray(x),), (nx.ones(2),))
    np.testing.assert_array_equal(np.asarray(tangent), [0.0, 0.5])     # where selects the zero tangent


def test_a_loss_scale_at_the_top_of_float32_stays_without_overflowing():
    scale = nn.DynamicLossScale(initial=3e38, period=1, factor=2)
    grown = scale.adjust(nx.asarray(True))
    assert float(grown.loss_scale) == np.float32(3e38)                 # 6e38 is not a float32
    small = nn.DynamicLossScale(initial=1e38, period=1, factor=3)
    assert float(small.adjust(nx.asarray(True)).loss_scale) == np.float32(1e38) * np.float32(3)
    assert float(rune.jit(lambda s: s.adjust(nx.asarray(True)))(scale).loss_scale) == np.float32(3e38)


def test_gelu_of_large_half_precision_inputs_saturates_quietly():
    x = np.array([-60.0, -41.0, -3.0, 0.5, 41.0, 60.0], np.float16)
    xd = x.astype(np.float64)
    want = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))
    for f in (nn.gelu, rune.jit(nn.gelu)):
        got = f(nx.asarray(x))
        assert got.dtype == np.float16
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=2e-3, atol=1e-3)
    g = rune.grad(lambda v: nx.sum(nn.gelu(v)))(nx.asarray(np.array([-50.0, 50.0], np.float32)))
    np.testing.assert_allclose(np.asarray(g), [0.0, 1.0], atol=1e-6)


def test_special_values_through_rune_s_own_semantics_are_quiet():
    special = np.array([INF, -INF, NAN, 0.0, -0.0, 3e38, -3e38, 2.5], np.float32)
    ints = np.array([7, -7, 0, -2 ** 31], np.int32)
    zeros = np.zeros(4, np.int32)
    cases = [
        (lambda x: nx.astype(x, nx.int32), special),           # NaN and out of range to int (float_semantics)
        (lambda x: nx.astype(x, nx.float16), special),         # overflow to inf
        (lambda x: nx.astype(x, nx.bfloat16), special),
        (lambda x: nx.log(x), special),                        # log(0), log(-x)
        (lambda x: nx.exp(x), special),                        # overflow
        (lambda x: x / 0.0, special),
        (lambda x: nx.floor_divide(x, nx.asarray(zeros)), ints),   # integer division by zero
        (lambda x: nx.remainder(x, nx.asarray(zeros)), ints),
        (lambda x: x // -1, ints),                             # int32 min // -1
        (lambda x: nx.log_softmax(x), np.array([-INF, 0.0, 1.0], np.float32)),
        (lambda x: nx.logsumexp(x), np.array([-INF, -INF], np.float32)),
        (lambda x: nn.softplus(x), special),
        (lambda x: nn.log_sigmoid(x), special),
        (lambda x: nn.elu(x), special),
        (lambda x: nx.sigmoid(x), special),
    ]
    for fn, x in cases:
        eager = np.asarray(fn(nx.asarray(x)))
        jitted = np.asarray(rune.jit(fn)(nx.asarray(x)))
        np.testing.assert_allclose(jitted, eager, rtol=1e-6)           # (kernels' log may differ by an ulp)
    labels = nx.asarray(np.array([5, -1], np.int32))                 # out of range: NaN rows and zero rows
    assert np.isnan(np.asarray(nn.Embedding(nx.random.key(0), 3, 2)(labels))).all()
    np.testing.assert_array_equal(np.asarray(nn.one_hot(labels, 3)), np.zeros((2, 3)))


def test_a_user_s_own_numpy_warnings_are_untouched():
    before = np.geterr()
    nx.log(nx.zeros(2))
    rune.grad(lambda x: nx.sum(nx.where(x > 0, nx.log(x), 0.0)))(nx.zeros(2))
    assert np.geterr() == before
    with pytest.raises(RuntimeWarning, match="divide by zero"):
        np.log(np.zeros(2))
