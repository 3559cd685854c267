"""Normalisation layers: `LayerNorm`, `RMSNorm`, `BatchNorm` (running statistics
as state, synced across processes on request), `GroupNorm`, `InstanceNorm`.
Inputs are channels-last: (N, *spatial, C)."""
from .. import nx
from ..errors import ArgumentError, ShapeError
from . import functional
from .layer_helpers import in_dtype_of
from .module import Module, field, update_state

__all__ = ["LayerNorm", "RMSNorm", "BatchNorm", "GroupNorm", "InstanceNorm"]


def _normalised_axes(name, shape, x):
    axes = tuple(range(-len(shape), 0))
    if x.ndim < len(shape) or tuple(x.shape[-len(shape):]) != shape:
        raise ShapeError(f"{name}(shape={shape}): expected an input ending in axes {shape}, got shape {x.shape}")
    return axes


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) over the trailing axes `shape`, times weight plus
    bias (both of that shape; PyTorch's eps and affine defaults)."""
    weight: object
    bias: object
    shape: tuple
    eps: float

    def __init__(self, shape, eps=1e-5, use_weight=True, use_bias=True, dtype=nx.float32):
        self.shape = (int(shape),) if isinstance(shape, int) else tuple(shape)
        self.eps = float(eps)
        self.weight = nx.ones(self.shape, nx.dtype(dtype)) if use_weight else None
        self.bias = nx.zeros(self.shape, nx.dtype(dtype)) if use_bias else None

    def __call__(self, x):
        param = self.weight if self.weight is not None else self.bias
        x = in_dtype_of(f"LayerNorm(shape={self.shape})", x, param)
        axes = _normalised_axes("LayerNorm", self.shape, x)
        return functional.layer_norm(x, self.weight, self.bias, axis=axes, eps=self.eps)


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) over the trailing axes `shape`, times weight
    (Zhang & Sennrich 2019; Flax's eps)."""
    weight: object
    shape: tuple
    eps: float

    def __init__(self, shape, eps=1e-6, use_weight=True, dtype=nx.float32):
        self.shape = (int(shape),) if isinstance(shape, int) else tuple(shape)
        self.eps = float(eps)
        self.weight = nx.ones(self.shape, nx.dtype(dtype)) if use_weight else None

    def __call__(self, x):
        x = in_dtype_of(f"RMSNorm(shape={self.shape})", x, self.weight)
        axes = _normalised_axes("RMSNorm", self.shape, x)
        wide = functional.statistics_dtype(x.dtype)   # float32 for 16-bit floats, as LayerNorm
        xw = nx.astype(x, wide)
        out = nx.astype(xw * nx.rsqrt(nx.mean(xw * xw, axis=axes, keepdims=True) + self.eps), x.dtype)
        return out if self.weight is None else out * self.weight



def _affine(num_features, use_weight, use_bias, dtype):
    """(weight, bias): ones and zeros of (num_features,), or None where not used."""
    return (nx.ones((num_features,), nx.dtype(dtype)) if use_weight else None,
            nx.zeros((num_features,), nx.dtype(dtype)) if use_bias else None)


def _scale_shift(y, weight, bias):
    y = y if weight is None else y * weight
    return y if bias is None else y + bias


def _channels_last(where, x, channels, min_ndim):
    if x.ndim < min_ndim or x.shape[-1] != channels:
        lead = "(N, *spatial, {})" if min_ndim > 2 else "(N, ..., {})"
        raise ShapeError(f"{where}: expected an input {lead.format(channels)} with at least {min_ndim} axes, "
                         f"got shape {x.shape}")


def _batch_moments(x, axes, sync):
    """Mean and (biased) variance of `x` over `axes`, keepdims; with `sync`, over
    the union of every process's batch (rune.distributed.all_reduce of the sums
    and counts: two passes, the second over the centred values, so a large mean
    does not cancel the variance's digits)."""
    if not sync:
        mean = nx.mean(x, axis=axes, keepdims=True)
        return mean, nx.mean(nx.square(x - mean), axis=axes, keepdims=True)
    from .. import distributed
    count = 1
    for a in axes:
        count *= x.shape[a]
    total, n = distributed.all_reduce((nx.sum(x, axis=axes, keepdims=True), nx.asarray(float(count), x.dtype)))
    mean = total / n
    return mean, distributed.all_reduce(nx.sum(nx.square(x - mean), axis=axes, keepdims=True)) / n


class BatchNorm(Module):
    """Batch normalisation (Ioffe & Szegedy 2015) over every axis but the last
    (channels) of an (N, *spatial, C) or (N, C) input.

    Training mode: normalises with the batch's mean and biased variance and
    updates the running statistics, `running = momentum * running + (1 -
    momentum) * batch` (Flax's and Equinox's convention: momentum=0.99 keeps 99%
    of the old value; PyTorch's momentum=0.1 is 0.9 here, and PyTorch's running
    variance takes the unbiased batch variance). The update is returned by
    `nn.apply(model, x)`. Evaluation mode (`model.eval()`): normalises with the
    running statistics. `sync=True` takes the batch statistics over every
    process of `rune.distributed` (PyTorch's SyncBatchNorm), for data-parallel
    training with small per-process batches."""
    weight: object
    bias: object
    running_mean: object = field(state=True)
    running_var: object = field(state=True)
    num_features: int
    momentum: float
    eps: float
    training: bool
    sync: bool

    def __init__(self, num_features, momentum=0.99, eps=1e-5, use_weight=True, use_bias=True, sync=False,
                 training=True, dtype=nx.float32):
        if not 0.0 <= momentum <= 1.0:
            raise ArgumentError(f"BatchNorm: momentum must be in [0, 1] (the share of the old running value "
                                f"kept each step), got {momentum}")
        self.num_features, self.momentum, self.eps = int(num_features), float(momentum), float(eps)
        self.weight, self.bias = _affine(self.num_features, use_weight, use_bias, dtype)
        self.running_mean = nx.zeros((self.num_features,), nx.dtype(dtype))
        self.running_var = nx.ones((self.num_features,), nx.dtype(dtype))
        self.training, self.sync = bool(training), bool(sync)

    def __call__(self, x):
        where = f"BatchNorm(num_features={self.num_features})"
        x = in_dtype_of(where, x, self.running_mean)
        _channels_last(where, x, self.num_features, 2)
        axes = tuple(range(x.ndim - 1))
        wide = functional.statistics_dtype(x.dtype)   # float32 for 16-bit floats, as LayerNorm
        xw = nx.astype(x, wide)
        if self.training:
            mean, var = _batch_moments(xw, axes, self.sync)
            keep, dtype = self.momentum, self.running_mean.dtype
            flat = lambda t: nx.astype(nx.reshape(nx.stop_gradient(t), (self.num_features,)), dtype)  # noqa: E731
            update_state(self, running_mean=keep * self.running_mean + (1 - keep) * flat(mean),
                         running_var=keep * self.running_var + (1 - keep) * flat(var))
        else:
            mean, var = (nx.astype(nx.stop_gradient(s), wide) for s in (self.running_mean, self.running_var))
        y = nx.astype((xw - mean) * nx.rsqrt(var + self.eps), x.dtype)
        return _scale_shift(y, self.weight, self.bias)


class GroupNorm(Module):
    """Group normalisation (Wu & He 2018): the C channels of an (N, *spatial, C)
    input split into `num_groups` groups, each example's group normalised over
    its spatial axes and channels together, then a per-channel weight and bias.
    No running statistics: the same in training and evaluation."""
    weight: object
    bias: object
    num_groups: int
    num_channels: int
    eps: float

    def __init__(self, num_groups, num_channels, eps=1e-5, use_weight=True, use_bias=True, dtype=nx.float32):
        if num_groups < 1 or num_channels % num_groups:
            raise ShapeError(f"GroupNorm: num_channels {num_channels} must divide into num_groups {num_groups}")
        self.num_groups, self.num_channels, self.eps = int(num_groups), int(num_channels), float(eps)
        self.weight, self.bias = _affine(self.num_channels, use_weight, use_bias, dtype)

    def __call__(self, x):
        where = f"GroupNorm(num_groups={self.num_groups}, num_channels={self.num_channels})"
        param = self.weight if self.weight is not None else self.bias
        x = in_dtype_of(where, x, param)
        _channels_last(where, x, self.num_channels, 2)
        grouped = nx.reshape(x, x.shape[:-1] + (self.num_groups, self.num_channels // self.num_groups))
        axes = tuple(range(1, x.ndim - 1)) + (-1,)     # spatial axes and the channels of a group
        y = nx.reshape(functional.layer_norm(grouped, axis=axes, eps=self.eps), x.shape)
        return _scale_shift(y, self.weight, self.bias)


class InstanceNorm(Module):
    """Instance normalisation (Ulyanov et al. 2016): each channel of each example
    of an (N, *spatial, C) input normalised over its spatial axes, then a
    per-channel weight and bias (on by default as in Flax; PyTorch's
    InstanceNorm defaults to affine=False: use_weight=False, use_bias=False).
    GroupNorm with one channel per group."""
    weight: object
    bias: object
    num_features: int
    eps: float

    def __init__(self, num_features, eps=1e-5, use_weight=True, use_bias=True, dtype=nx.float32):
        self.num_features, self.eps = int(num_features), float(eps)
        self.weight, self.bias = _affine(self.num_features, use_weight, use_bias, dtype)

    def __call__(self, x):
        where = f"InstanceNorm(num_features={self.num_features})"
        param = self.weight if self.weight is not None else self.bias
        x = in_dtype_of(where, x, param)
        _channels_last(where, x, self.num_features, 3)
        y = functional.layer_norm(x, axis=tuple(range(1, x.ndim - 1)), eps=self.eps)
        return _scale_shift(y, self.weight, self.bias)
