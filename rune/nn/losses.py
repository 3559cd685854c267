"""Losses (optax's names and per-example results, PyTorch's options where optax
has none), each with `reduction=`: "none" (the default: one loss per example,
or per element for the element-wise ones, as optax), "sum", or "mean" (over
the examples counted: those not ignored or masked out, as PyTorch).

Element-wise: squared_error, l2_loss, absolute_error, huber_loss,
smooth_l1_loss, sigmoid_binary_cross_entropy, binary_cross_entropy. Per example
(over the last axis): kl_divergence, cosine_similarity, cosine_distance,
nll_loss; `cross_entropy` (with label smoothing) is in functional.

Everything is a composite of `rune.nx` functions: it works under jit, grad
and vmap with no rules of its own.
"""
from .. import nx
from ..errors import ArgumentError, ShapeError

__all__ = ["absolute_error", "binary_cross_entropy", "cosine_distance", "cosine_similarity", "huber_loss",
           "kl_divergence", "l2_loss", "nll_loss", "sigmoid_binary_cross_entropy", "smooth_l1_loss",
           "squared_error"]


def _mean(losses, counted):
    if counted is None:
        return nx.mean(losses)
    return nx.sum(losses) / nx.sum(nx.astype(counted, losses.dtype))


_REDUCTIONS = {"none": lambda losses, counted: losses,
               "sum": lambda losses, counted: nx.sum(losses),
               "mean": _mean}


def _reduce(who, losses, reduction, counted=None):
    """losses reduced as `reduction` says; counted (bools shaped like losses)
    marks the entries a mean divides by (the others are 0 in losses)."""
    if reduction not in _REDUCTIONS:
        raise ArgumentError(f"{who}: reduction must be one of {sorted(_REDUCTIONS)}, got {reduction!r}")
    return _REDUCTIONS[reduction](losses, counted)


def _pair(who, predictions, targets):
    predictions = nx.asarray(predictions)
    if targets is None:
        return predictions, nx.zeros_like(predictions)
    targets = nx.asarray(targets)
    if targets.shape != predictions.shape:
        raise ShapeError(f"{who}: targets of shape {targets.shape} do not match predictions of shape "
                         f"{predictions.shape}")
    return predictions, targets


# ---------------------------------------------------------------- regression

def squared_error(predictions, targets=None, reduction="none"):
    """(predictions - targets) ** 2 element by element (targets default to 0);
    the mean is PyTorch's mse_loss."""
    p, t = _pair("squared_error", predictions, targets)
    return _reduce("squared_error", nx.square(p - t), reduction)


def l2_loss(predictions, targets=None, reduction="none"):
    """0.5 * (predictions - targets) ** 2 (optax.l2_loss)."""
    p, t = _pair("l2_loss", predictions, targets)
    return _reduce("l2_loss", 0.5 * nx.square(p - t), reduction)


def absolute_error(predictions, targets=None, reduction="none"):
    """|predictions - targets| element by element; the mean is PyTorch's l1_loss."""
    p, t = _pair("absolute_error", predictions, targets)
    return _reduce("absolute_error", nx.abs(p - t), reduction)


def _huber(p, t, delta):
    error = nx.abs(p - t)
    quadratic = nx.minimum(error, delta)
    return 0.5 * nx.square(quadratic) + delta * (error - quadratic)


def huber_loss(predictions, targets=None, delta=1.0, reduction="none"):
    """0.5 * e ** 2 where |e| <= delta, delta * (|e| - delta / 2) beyond, e the
    error (optax.huber_loss, PyTorch's huber_loss)."""
    p, t = _pair("huber_loss", predictions, targets)
    return _reduce("huber_loss", _huber(p, t, delta), reduction)


def smooth_l1_loss(predictions, targets=None, beta=1.0, reduction="none"):
    """PyTorch's smooth_l1_loss: huber_loss(delta=beta) / beta, so 0.5 * e ** 2 / beta
    near 0 and |e| - beta / 2 beyond beta; beta = 0 is the absolute error."""
    p, t = _pair("smooth_l1_loss", predictions, targets)
    losses = nx.abs(p - t) if beta == 0 else _huber(p, t, beta) / beta
    return _reduce("smooth_l1_loss", losses, reduction)


# ---------------------------------------------------------------- binary classification

def sigmoid_binary_cross_entropy(logits, labels, reduction="none"):
    """-(labels * log(sigmoid(logits)) + (1 - labels) * log(1 - sigmoid(logits))),
    element by element, computed from the logits without overflow
    (optax.sigmoid_binary_cross_entropy, PyTorch's binary_cross_entropy_with_logits);
    labels are probabilities in [0, 1]."""
    x, y = _pair("sigmoid_binary_cross_entropy", logits, labels)
    # log(1 + exp(-|x|)) + max(x, 0) - x * y: softplus(x) - x * y in a form that never overflows
    losses = nx.maximum(x, 0) - x * y + nx.log1p(nx.exp(-nx.abs(x)))
    return _reduce("sigmoid_binary_cross_entropy", losses, reduction)


def binary_cross_entropy(probabilities, labels, reduction="none"):
    """-(labels * log(p) + (1 - labels) * log(1 - p)) element by element, each log
    floored at -100 as PyTorch's binary_cross_entropy does (so p = 0 or 1 gives
    a finite loss); prefer sigmoid_binary_cross_entropy on logits."""
    p, y = _pair("binary_cross_entropy", probabilities, labels)
    log_p = nx.maximum(nx.log(p), -100.0)
    log_not_p = nx.maximum(nx.log1p(-p), -100.0)
    return _reduce("binary_cross_entropy", -(y * log_p + (1 - y) * log_not_p), reduction)


# ---------------------------------------------------------------- distributions and directions

def kl_divergence(log_predictions, targets, axis=-1, reduction="none"):
    """sum(targets * (log(targets) - log_predictions)) over `axis`, per example:
    KL(targets || predictions) with the predictions given as log-probabilities
    (optax.kl_divergence; PyTorch's kl_div summed over the axis, so its
    "batchmean" is this with reduction="mean"). A target of 0 adds 0."""
    log_q, p = _pair("kl_divergence", log_predictions, targets)
    positive = p > 0
    # log(targets) only where they are positive: log(0) = -inf would make 0 * -inf = NaN,
    # in the value and in the gradient
    log_p = nx.log(nx.where(positive, p, nx.ones_like(p)))
    terms = nx.where(positive, p * (log_p - log_q), -p * log_q)
    return _reduce("kl_divergence", nx.sum(terms, axis=axis), reduction)


def _unit(x, axis, epsilon):
    """x / max(||x||, epsilon) along axis."""
    norm_sq = nx.sum(nx.square(x), axis=axis, keepdims=True)
    return x * nx.rsqrt(nx.maximum(norm_sq, epsilon * epsilon)) if epsilon else x / nx.sqrt(norm_sq)


def cosine_similarity(predictions, targets, epsilon=0.0, axis=-1, reduction="none"):
    """<p, t> / (max(||p||, epsilon) * max(||t||, epsilon)) over `axis`, per example
    (optax.cosine_similarity; PyTorch's F.cosine_similarity with eps=epsilon).
    With epsilon = 0 a zero vector gives NaN."""
    p, t = _pair("cosine_similarity", predictions, targets)
    similarity = nx.sum(_unit(p, axis, epsilon) * _unit(t, axis, epsilon), axis=axis)
    return _reduce("cosine_similarity", similarity, reduction)


def cosine_distance(predictions, targets, epsilon=0.0, axis=-1, reduction="none"):
    """1 - cosine_similarity (optax.cosine_distance), a loss to minimise."""
    p, t = _pair("cosine_distance", predictions, targets)
    distance = 1 - nx.sum(_unit(p, axis, epsilon) * _unit(t, axis, epsilon), axis=axis)
    return _reduce("cosine_distance", distance, reduction)


# ---------------------------------------------------------------- classification from log-probabilities

def _pick(who, scores, labels, what="scores"):
    """scores[..., labels] per example (the class axis last) as a select, never a
    product with one-hot (a score of -inf times 0 would be NaN), and the mask
    of labels in range."""
    scores, labels = nx.asarray(scores), nx.asarray(labels)
    if labels.dtype.kind not in "iu":
        raise ArgumentError(f"{who}: labels must be integer class indices, got {labels.dtype.name}")
    if labels.shape != scores.shape[:-1]:
        raise ShapeError(f"{who}: labels of shape {labels.shape} do not match {what} of shape {scores.shape} "
                         f"(expected labels of shape {scores.shape[:-1]}: the classes are the last axis)")
    classes = scores.shape[-1]
    hot = nx.equal(nx.expand_dims(labels, -1), nx.arange(classes, dtype=labels.dtype, device=labels.device))
    picked = nx.sum(nx.where(hot, scores, nx.zeros_like(scores)), axis=-1)
    return picked, nx.logical_and(labels >= 0, labels < classes)


def nll_loss(log_probs, labels, ignore_index=-100, reduction="none"):
    """-log_probs[..., label] per example (PyTorch's nll_loss with the classes as the
    last axis): 0 for examples whose label is ignore_index, which a "mean" does not
    count; any other label outside [0, classes) gives NaN, never a silent 0."""
    picked, valid = _pick("nll_loss", log_probs, labels, "log_probs")
    labels = nx.asarray(labels)
    kept = labels != ignore_index
    losses = nx.where(valid, -picked, nx.full_like(picked, float("nan")))
    losses = nx.where(kept, losses, nx.zeros_like(losses))
    return _reduce("nll_loss", losses, reduction, counted=kept)
