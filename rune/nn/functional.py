"""Neural-network functions: activations, losses, normalisation, dropout, pooling
and initialisers (JAX's `jax.nn` names and argument orders where they exist).

Everything here is a composite of `rune.nx` functions on arrays: it works
under jit, grad and vmap with no rules of its own. Randomness takes explicit
keys (`nx.random.key`). The activations that take more than one step (gelu,
silu, softplus, elu, log_sigmoid) compute float16 and bfloat16 inputs in
float32 and round once at the end, as softmax and the reductions do: the
result is nearer the exact one than a rounding after every step, and a fused
kernel does no 16-bit rounding in between.
"""
import math

import numpy as np

from .. import nx
from ..errors import ArgumentError, DTypeError, ShapeError
from ..nx.conversion import in_float32
from .losses import _pick, _reduce

# The ones nx already has are the same functions, not copies.
sigmoid = nx.sigmoid
softmax = nx.softmax
log_softmax = nx.log_softmax
logsumexp = nx.logsumexp


# ---------------------------------------------------------------- activations

def relu(x):
    """max(x, 0); its derivative at 0 is 0 (as jax.nn.relu)."""
    x = nx.asarray(x)
    return nx.where(nx.greater(x, 0), x, nx.zeros_like(x))


@in_float32
def gelu(x, approximate=True):
    """The Gaussian error linear unit: x * Phi(x). `approximate=True` (JAX's
    default) is the tanh form; False is the exact erf form."""
    x = nx.asarray(x)
    if approximate:
        # tanh is +-1 to every dtype's precision from |x| = 10 on (its argument is 43.7
        # there): the cube is taken of x clipped to that, so it never overflows
        # (float16's does from |x| = 41) and the values are unchanged
        xc = nx.clip(x, -10, 10)
        inner = math.sqrt(2 / math.pi) * (xc + 0.044715 * (xc * xc * xc))
        return 0.5 * x * (1 + nx.tanh(inner))
    return 0.5 * x * (1 + nx.erf(x * (1 / math.sqrt(2))))


@in_float32
def silu(x):
    """x * sigmoid(x) (also called swish)."""
    x = nx.asarray(x)
    return x * nx.sigmoid(x)


swish = silu


@in_float32
def softplus(x):
    """log(1 + exp(x)), without overflow for large |x|."""
    x = nx.asarray(x)
    return nx.maximum(x, 0) + nx.log1p(nx.exp(-nx.abs(x)))


def leaky_relu(x, negative_slope=0.01):
    """x where x >= 0, negative_slope * x elsewhere."""
    x = nx.asarray(x)
    return nx.where(nx.greater_equal(x, 0), x, negative_slope * x)


@in_float32
def elu(x, alpha=1.0):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere (expm1 of the clipped input,
    so the unused branch never overflows)."""
    x = nx.asarray(x)
    return nx.where(nx.greater(x, 0), x, alpha * nx.expm1(nx.minimum(x, 0)))


@in_float32
def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), finite for large |x|."""
    return -softplus(-nx.asarray(x))


# ---------------------------------------------------------------- encodings and losses

def one_hot(x, num_classes, dtype=nx.float32, axis=-1):
    """A new axis of length `num_classes` (at `axis`) that is 1 at each integer of
    `x` and 0 elsewhere; out-of-range integers give all zeros (as jax.nn.one_hot)."""
    x = nx.asarray(x)
    if x.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: expected integer class indices, got {x.dtype.name}")
    classes = nx.arange(num_classes, dtype=x.dtype, device=x.device)
    hot = nx.astype(nx.equal(nx.expand_dims(x, -1), classes), dtype)
    return hot if axis == -1 else nx.moveaxis(hot, -1, axis)


def cross_entropy(logits, labels, where=None, label_smoothing=0.0, reduction="none"):
    """Per-example softmax cross-entropy with integer labels (optax's
    `softmax_cross_entropy_with_integer_labels`): logsumexp(logits) - logits[label]
    over the last axis. Stable for logits of any magnitude.

    where: a bool mask shaped like `labels`; the examples it excludes get loss 0
        and are not counted by a "mean" (the usual way to skip padding labels such
        as -1). A label outside [0, classes) gives a NaN loss (as optax), never a
        silent 0, unless `where` excludes its example.
    label_smoothing: alpha in [0, 1]: the target is (1 - alpha) * one_hot(label) +
        alpha / classes (optax.smooth_labels, PyTorch's label_smoothing), so the loss
        is (1 - alpha) * -logp[label] + alpha * mean(-logp).
    reduction: "none" (per example), "sum" or "mean", as the losses in rune.nn.losses.
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    logits = nx.asarray(logits)
    logp = nx.log_softmax(logits, axis=-1)
    picked, valid = _pick("cross_entropy", logp, labels, "logits")
    losses = -picked
    if label_smoothing:
        losses = (1 - label_smoothing) * losses - label_smoothing * nx.mean(logp, axis=-1)
    # one_hot of an out-of-range label is all zeros, which would make its loss 0
    losses = nx.where(valid, losses, nx.full_like(losses, float("nan")))
    if where is not None:
        losses = nx.where(where, losses, nx.zeros_like(losses))
    return _reduce("cross_entropy", losses, reduction, counted=where)


# ---------------------------------------------------------------- normalisation and dropout

def statistics_dtype(dtype):
    """The dtype a normalisation computes its statistics in: float32 for 16-bit
    floats (as Flax's norms and torch.autocast do), else `dtype`. In float16 the
    backward pass through 1 / sqrt(var + eps) overflows once the variance is
    small (var^-1.5 passes 65504 below var ~ 6e-4: a GPT's residual stream at
    initialisation) and gives NaN gradients; the squares of values past 256
    overflow too."""
    dtype = nx.dtype(dtype)
    return nx.dtype(nx.float32) if dtype in (nx.dtype(nx.float16), nx.dtype(nx.bfloat16)) else dtype


def layer_norm(x, gamma=None, beta=None, axis=-1, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over `axis` (an int or a tuple), then times
    `gamma` and plus `beta` when given (both broadcast against x). The statistics
    and the normalisation of a float16 or bfloat16 `x` run in float32
    (`statistics_dtype`), the result rounded back to x's dtype before the affine."""
    x = nx.asarray(x)
    wide = statistics_dtype(x.dtype)
    xw = x if wide == x.dtype else nx.astype(x, wide)
    mean = nx.mean(xw, axis=axis, keepdims=True)
    centred = xw - mean
    var = nx.mean(centred * centred, axis=axis, keepdims=True)
    out = centred * nx.rsqrt(var + eps)
    out = out if wide == x.dtype else nx.astype(out, x.dtype)
    if gamma is not None:
        out = out * gamma
    if beta is not None:
        out = out + beta
    return out


def dropout(key, rate, x):
    """Each element of `x` zeroed with probability `rate`, the rest scaled by
    1 / (1 - rate) so the expectation is unchanged. `rate` is a Python float."""
    if not 0.0 <= rate < 1.0:
        raise ArgumentError(f"dropout: rate must be in [0, 1), got {rate}")
    x = nx.asarray(x)
    if rate == 0.0:
        return x
    keep = nx.random.bernoulli(key, 1.0 - rate, x.shape)
    return nx.where(keep, x / (1.0 - rate), nx.zeros_like(x))


# ---------------------------------------------------------------- pooling (NHWC)

def _window(name, x, window, strides):
    spatial = x.ndim - 2
    window = (window,) * spatial if isinstance(window, int) else tuple(window)
    strides = window if strides is None else ((strides,) * spatial if isinstance(strides, int)
                                              else tuple(strides))
    if len(window) != spatial or len(strides) != spatial:
        raise ShapeError(f"{name}: input of shape {x.shape} has {spatial} spatial axes, got window "
                         f"{window} and strides {strides}")
    return (1,) + window + (1,), (1,) + strides + (1,)


def max_pool(x, window, strides=None, padding="VALID"):
    """Max over `window` of each channel of an (N, *spatial, C) input; strides
    default to the window (non-overlapping pools)."""
    x = nx.asarray(x)
    dims, steps = _window("max_pool", x, window, strides)
    return nx.reduce_window(x, "max", dims, steps, padding)


def avg_pool(x, window, strides=None, padding="VALID"):
    """Mean over `window` of each channel of an (N, *spatial, C) input. With SAME
    padding the padded zeros count in the mean (as flax's default)."""
    x = nx.asarray(x)
    dims, steps = _window("avg_pool", x, window, strides)
    return nx.reduce_window(x, "sum", dims, steps, padding) / math.prod(dims)


# ---------------------------------------------------------------- initialisers

def _fans(shape):
    """(fan_in, fan_out) of a weight: dense (in, out) or a kernel (*spatial, in, out)."""
    if len(shape) < 1:
        raise ShapeError(f"initialiser: a weight needs at least one axis, got shape {shape}")
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _uniform(key, shape, dtype, limit):
    return nx.random.uniform(key, shape, dtype, -limit, limit)


def _normal(key, shape, dtype, std):
    return nx.random.normal(key, shape, dtype) * np.dtype(dtype).type(std)


def _fan_scaled(draw, scale, fan):
    """An initialiser drawing with spread sqrt(scale / fan(fan_in, fan_out))
    (a uniform's limit gets the extra sqrt(3) that gives it that variance)."""
    def init(key, shape, dtype=nx.float32):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        spread = math.sqrt(scale / fan(*_fans(shape)))
        return draw(key, shape, nx.dtype(dtype), spread * (math.sqrt(3) if draw is _uniform else 1))
    return init


glorot_uniform = _fan_scaled(_uniform, 2.0, lambda i, o: i + o)
glorot_normal = _fan_scaled(_normal, 2.0, lambda i, o: i + o)
he_uniform = _fan_scaled(_uniform, 2.0, lambda i, o: i)
he_normal = _fan_scaled(_normal, 2.0, lambda i, o: i)
lecun_uniform = _fan_scaled(_uniform, 1.0, lambda i, o: i)
lecun_normal = _fan_scaled(_normal, 1.0, lambda i, o: i)
xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal = (
    glorot_uniform, glorot_normal, he_uniform, he_normal)
for _f, _n in ((glorot_uniform, "glorot_uniform"), (glorot_normal, "glorot_normal"),
               (he_uniform, "he_uniform"), (he_normal, "he_normal"), (lecun_uniform, "lecun_uniform"),
               (lecun_normal, "lecun_normal")):
    _f.__name__ = _f.__qualname__ = _n
    _f.__doc__ = (f"{_n}(key, shape, dtype=float32): weights drawn from the key, with the variance "
                  f"of {_n.replace('_', ' ')} initialisation (fans from (in, out) or (*spatial, in, out)).")


def zeros(key, shape, dtype=nx.float32):
    """Zeros on the key's device (the key's bits are unused: the signature is the
    random initialisers')."""
    return nx.zeros(shape, dtype, key.device)


def ones(key, shape, dtype=nx.float32):
    """Ones on the key's device (the key's bits are unused: the signature is the
    random initialisers')."""
    return nx.ones(shape, dtype, key.device)


def normal(stddev=1e-2):
    """An initialiser drawing N(0, stddev^2) (as jax.nn.initializers.normal)."""
    def init(key, shape, dtype=nx.float32):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return _normal(key, shape, nx.dtype(dtype), stddev)
    return init


def truncated_normal(stddev=1e-2, lower=-2.0, upper=2.0):
    """An initialiser drawing stddev * z, z a standard normal truncated to
    [lower, upper] (bounds in units of stddev; PyTorch's trunc_normal_ with
    a = lower * std, b = upper * std; the spread of the result is a little
    below stddev: 0.88 stddev for the default +-2, where JAX divides by 0.88)."""
    def init(key, shape, dtype=nx.float32):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = nx.dtype(dtype)
        return nx.random.truncated_normal(key, lower, upper, shape, dtype) * np.dtype(dtype).type(stddev)
    return init


def orthogonal(scale=1.0, column_axis=-1):
    """An initialiser of (semi-)orthogonal weights (Saxe et al. 2014; as
    jax.nn.initializers.orthogonal): the axis `column_axis` against all the
    others flattened, the columns orthonormal when there are at least as many
    rows, else the rows; times `scale`. The Q of a normal matrix's QR, its
    columns' signs fixed by R's diagonal so the distribution is uniform (Haar)."""
    def init(key, shape, dtype=nx.float32):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if len(shape) < 2:
            raise ShapeError(f"orthogonal: a weight needs at least two axes, got shape {shape}")
        dtype = nx.dtype(dtype)
        axis = column_axis % len(shape)
        n_cols = shape[axis]
        n_rows = math.prod(shape) // n_cols
        tall = (max(n_rows, n_cols), min(n_rows, n_cols))
        q, r = nx.linalg.qr(nx.random.normal(key, tall, nx.float32 if dtype.itemsize < 4 else dtype))
        q = q * nx.sign(nx.diagonal(r))
        if n_rows < n_cols:
            q = nx.matrix_transpose(q)
        rest = shape[:axis] + shape[axis + 1:]
        q = nx.moveaxis(nx.reshape(q, rest + (n_cols,)), -1, axis)
        return nx.astype(q * scale, dtype)
    return init
