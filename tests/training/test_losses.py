"""rune.nn's losses against torch.nn.functional: values for every reduction,
gradients (rune.grad against torch autograd) for "sum" and "mean", and the
same values and gradients under jit; all in float64."""
import numpy as np
import pytest

import rune
from rune import nn, nx

torch = pytest.importorskip("torch")
F = torch.nn.functional

REDUCTIONS = ("none", "sum", "mean")


def _reduced(values, reduction):
    return {"none": values, "sum": values.sum(), "mean": values.mean()}[reduction]


def _unreduced(f):
    """A torch function with no reduction argument, given one."""
    return lambda *args, reduction: _reduced(f(*args), reduction)


def _kl_div(log_q, p, reduction):
    # PyTorch's "batchmean" is the mean over examples of their summed KL
    per_example = F.kl_div(log_q, p, reduction="none").sum(-1)
    return per_example if reduction == "none" else F.kl_div(log_q, p, reduction={"sum": "sum",
                                                                                  "mean": "batchmean"}[reduction])


def _inputs(seed):
    """Arrays for each kind of argument (float64, a few examples of 5 classes)."""
    rng = np.random.default_rng(seed)
    predictions = rng.standard_normal((4, 5))
    targets = rng.standard_normal((4, 5)) * 1.5
    probabilities = rng.uniform(0.05, 0.95, (4, 5))
    distribution = rng.dirichlet(np.ones(5), 4)
    distribution[0, 1] = 0.0   # a target of 0 adds 0 (and no NaN to the gradient)
    distribution[0] /= distribution[0].sum()
    labels = rng.integers(0, 5, 4).astype(np.int64)
    labels[1] = -100           # ignored
    return dict(predictions=predictions, targets=targets, probabilities=probabilities,
                log_q=np.log(rng.dirichlet(np.ones(5), 4)), distribution=distribution,
                log_probs=np.log(rng.dirichlet(np.ones(5), 4)), labels=labels)


# name: (rune's loss with reduction=, torch's with reduction=, argument kinds; the first is differentiated)
CASES = {
    "squared_error": (nn.squared_error, F.mse_loss, ("predictions", "targets")),
    "l2_loss": (nn.l2_loss, lambda p, t, reduction: 0.5 * F.mse_loss(p, t, reduction=reduction),
                ("predictions", "targets")),
    "absolute_error": (nn.absolute_error, F.l1_loss, ("predictions", "targets")),
    "huber_loss": (lambda p, t, reduction: nn.huber_loss(p, t, delta=0.7, reduction=reduction),
                   lambda p, t, reduction: F.huber_loss(p, t, reduction=reduction, delta=0.7),
                   ("predictions", "targets")),
    "smooth_l1_loss": (lambda p, t, reduction: nn.smooth_l1_loss(p, t, beta=0.7, reduction=reduction),
                       lambda p, t, reduction: F.smooth_l1_loss(p, t, reduction=reduction, beta=0.7),
                       ("predictions", "targets")),
    "sigmoid_binary_cross_entropy": (nn.sigmoid_binary_cross_entropy, F.binary_cross_entropy_with_logits,
                                     ("targets", "probabilities")),
    "binary_cross_entropy": (nn.binary_cross_entropy, F.binary_cross_entropy, ("probabilities", "probabilities")),
    "kl_divergence": (nn.kl_divergence, _kl_div, ("log_q", "distribution")),
    "cosine_similarity": (lambda p, t, reduction: nn.cosine_similarity(p, t, epsilon=1e-8, reduction=reduction),
                          _unreduced(lambda p, t: F.cosine_similarity(p, t, dim=-1, eps=1e-8)),
                          ("predictions", "targets")),
    "cosine_distance": (lambda p, t, reduction: nn.cosine_distance(p, t, epsilon=1e-8, reduction=reduction),
                        _unreduced(lambda p, t: 1 - F.cosine_similarity(p, t, dim=-1, eps=1e-8)),
                        ("predictions", "targets")),
    "nll_loss": (nn.nll_loss, F.nll_loss, ("log_probs", "labels")),
    "cross_entropy label_smoothing ignored": (
        lambda z, y, reduction: nn.cross_entropy(z, y, where=y >= 0, label_smoothing=0.1, reduction=reduction),
        lambda z, y, reduction: F.cross_entropy(z, y, label_smoothing=0.1, reduction=reduction),
        ("predictions", "labels")),
}


def _torch(fn, arrays, reduction):
    """torch's value and the gradient of its first argument (for a reduced value)."""
    ts = [torch.tensor(a, requires_grad=i == 0 and reduction != "none") for i, a in enumerate(arrays)]
    value = fn(*ts, reduction=reduction)
    if reduction == "none":
        return value.detach().numpy(), None
    value.backward()
    return value.detach().numpy(), ts[0].grad.numpy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_loss_matches_torch_in_value_and_gradient(name):
    ours, theirs, kinds = CASES[name]
    inputs = _inputs(0)
    arrays = [inputs[k] for k in kinds]
    args = [nx.asarray(a) for a in arrays]
    for reduction in REDUCTIONS:
        value, grad = _torch(theirs, arrays, reduction)
        np.testing.assert_allclose(np.asarray(ours(*args, reduction=reduction)), value, rtol=1e-12, atol=1e-14)
        if grad is None:
            continue
        loss = lambda x, *rest: ours(x, *rest, reduction=reduction)  # noqa: E731
        np.testing.assert_allclose(np.asarray(rune.grad(loss)(*args)), grad, rtol=1e-10, atol=1e-14)
        if reduction == "mean":   # one compiled program per loss: its value and gradient
            v, g = rune.jit(rune.value_and_grad(loss))(*args)
            np.testing.assert_allclose(float(v), value, rtol=1e-12)
            np.testing.assert_allclose(np.asarray(g), grad, rtol=1e-10, atol=1e-14)


def test_binary_cross_entropy_at_certain_probabilities_is_finite_as_in_torch():
    p, y = np.array([0.0, 1.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0, 0.0])
    got = np.asarray(nn.binary_cross_entropy(nx.asarray(p), nx.asarray(y)))
    want = F.binary_cross_entropy(torch.tensor(p), torch.tensor(y), reduction="none").numpy()
    np.testing.assert_array_equal(got, want)   # 0, 0, 100, 100: each log floored at -100
    big = nx.asarray([-800.0, 800.0])
    np.testing.assert_allclose(np.asarray(nn.sigmoid_binary_cross_entropy(big, nx.asarray([1.0, 0.0]))),
                               [800.0, 800.0])


def test_the_losses_say_what_was_wrong():
    x = nx.zeros((2, 3))
    with pytest.raises(rune.ArgumentError, match="reduction must be one of"):
        nn.squared_error(x, x, reduction="avg")
    with pytest.raises(rune.ShapeError, match=r"targets of shape \(3,\) do not match predictions of shape"):
        nn.huber_loss(x, nx.zeros(3))
    with pytest.raises(rune.ShapeError, match="do not match log_probs"):
        nn.nll_loss(x, nx.zeros(3, nx.int32))
    with pytest.raises(rune.ArgumentError, match="label_smoothing must be in"):
        nn.cross_entropy(x, nx.zeros(2, nx.int32), label_smoothing=1.5)
    # a label out of range (and not ignored) is NaN, not a silent 0
    assert np.isnan(np.asarray(nn.nll_loss(x, nx.asarray([0, 7])))[1])
