"""The optimizers: chains of the pieces in `basics` and `scaling`, with optax's
argument names and defaults (where rune's design names them, its own)."""
from .basics import add_decayed_weights, chain, clip_by_block_rms, ema, scale, scale_by_learning_rate, trace
from .scaling import (scale_by_adam, scale_by_factored_rms, scale_by_lion, scale_by_param_block_rms,
                      scale_by_rms, scale_by_rss, scale_by_stddev, scale_by_trust_ratio)


def _with_decay(direction, weight_decay, mask, learning_rate, *after):
    """direction, then weight_decay * params (only on mask's leaves, skipped when
    0), then `after`, then the descent step by learning_rate."""
    decay = (add_decayed_weights(weight_decay, mask),) if weight_decay else ()
    return chain(direction, *decay, *after, scale_by_learning_rate(learning_rate))


def sgd(learning_rate, momentum=None, nesterov=False):
    """Stochastic gradient descent, with momentum (heavy ball, or Nesterov's) when
    momentum is set and not 0; PyTorch's SGD with dampening 0."""
    if momentum:
        return chain(trace(momentum, nesterov), scale_by_learning_rate(learning_rate))
    return scale_by_learning_rate(learning_rate)


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, mu_dtype=None):
    """Adam (Kingma & Ba 2015); `mu_dtype` as in `scale_by_adam`."""
    return chain(scale_by_adam(b1, b2, eps, mu_dtype), scale_by_learning_rate(learning_rate))


def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4, mu_dtype=None, mask=None):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019): the step is
    -learning_rate * (adam direction + weight_decay * params); `mask` (a tree of
    bools or a function of the params) limits the decay to the leaves it marks
    True, as optax.adamw's mask."""
    return _with_decay(scale_by_adam(b1, b2, eps, mu_dtype), weight_decay, mask, learning_rate)


def rmsprop(learning_rate, decay=0.9, eps=1e-8, momentum=None, centered=False, initial_scale=0.0,
            eps_in_sqrt=True, nesterov=False):
    """RMSProp (Hinton's lecture 6e; Graves 2013 when centered): g / sqrt(nu + eps)
    with nu the moving average of g^2 (minus the squared moving average of g when
    centered), then momentum when set (optax.rmsprop). eps_in_sqrt=False puts eps
    outside the root, as PyTorch's RMSprop does."""
    scaler = scale_by_stddev if centered else scale_by_rms
    momentum = (trace(momentum, nesterov),) if momentum else ()
    return chain(scaler(decay, eps, initial_scale, eps_in_sqrt), *momentum, scale_by_learning_rate(learning_rate))


def adagrad(learning_rate, initial_accumulator_value=0.1, eps=1e-7):
    """Adagrad (Duchi et al. 2011): g / sqrt(sum of all g^2 so far + eps) (optax.adagrad)."""
    return chain(scale_by_rss(initial_accumulator_value, eps), scale_by_learning_rate(learning_rate))


def lion(learning_rate, b1=0.9, b2=0.99, weight_decay=0.0, mask=None, mu_dtype=None):
    """Lion (Chen et al. 2023): -learning_rate * (sign(b1 * m + (1 - b1) * g) +
    weight_decay * params); a learning rate 3-10x smaller than AdamW's suits it."""
    return _with_decay(scale_by_lion(b1, b2, mu_dtype), weight_decay, mask, learning_rate)


def lamb(learning_rate, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, mask=None):
    """LAMB (You et al. 2020, Algorithm 2): Adam's direction plus weight_decay *
    params, scaled per leaf by ||params|| / ||that|| (the trust ratio)."""
    return _with_decay(scale_by_adam(b1, b2, eps), weight_decay, mask, learning_rate, scale_by_trust_ratio())


def adafactor(learning_rate=None, min_dim_size_to_factor=128, decay_rate=0.8, decay_offset=0,
              multiply_by_parameter_scale=True, clipping_threshold=1.0, momentum=None,
              weight_decay_rate=None, eps=1e-30, factored=True, weight_decay_mask=None):
    """Adafactor (Shazeer & Stern 2018), as optax.adafactor: the factored
    second-moment direction, each leaf clipped to an RMS of clipping_threshold,
    times learning_rate (None: 1) and the parameter's RMS (floored at 1e-3),
    with optional momentum (an EMA of the updates) and weight decay."""
    parts = [scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor, eps)]
    if clipping_threshold is not None:
        parts.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        parts.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        parts.append(scale_by_param_block_rms())
    if momentum is not None:
        parts.append(ema(momentum, debias=False))
    if weight_decay_rate is not None:
        parts.append(add_decayed_weights(weight_decay_rate, weight_decay_mask))
    parts.append(scale(-1))
    return chain(*parts)
