"""Pooling layers over the spatial axes of an (N, *spatial, C) input: `MaxPool`,
`AvgPool` (windows, as `nn.max_pool`/`nn.avg_pool`), `AdaptiveAvgPool` (a
given output size, PyTorch's bins) and `GlobalAvgPool` (the mean over every
spatial axis)."""
from .. import nx
from ..errors import ShapeError
from . import functional
from .module import Module

__all__ = ["MaxPool", "AvgPool", "AdaptiveAvgPool", "GlobalAvgPool"]


def _spatial(where, x, min_spatial=1):
    x = nx.asarray(x)
    if x.ndim < 2 + min_spatial:
        raise ShapeError(f"{where}: expected an input (N, *spatial, C) with at least {min_spatial} spatial "
                         f"axis, got shape {x.shape}")
    return x


class _WindowPool(Module):
    """A reduction over each `window` of every channel (strides default to the window:
    non-overlapping pools; padding "VALID", "SAME" or (low, high) pairs), by the
    functional form a subclass names."""
    window: object
    strides: object
    padding: object

    def __init__(self, window, strides=None, padding="VALID"):
        self.window, self.padding = _static(window), _static(padding)
        self.strides = self.window if strides is None else _static(strides)

    def __call__(self, x):
        pool = type(self).pool
        return pool(_spatial(type(self).__name__, x), self.window, self.strides, self.padding)


class MaxPool(_WindowPool):
    """The max over each `window` of every channel (strides default to the
    window: non-overlapping pools; padding "VALID", "SAME" or (low, high) pairs)."""
    pool = staticmethod(functional.max_pool)


class AvgPool(_WindowPool):
    """The mean over each `window` of every channel (with "SAME" padding the
    padded zeros count in the mean, as Flax's default)."""
    pool = staticmethod(functional.avg_pool)


def _static(value):
    """Lists of a pooling argument as tuples (static fields are hashed by jit)."""
    if isinstance(value, list):
        return tuple(_static(v) for v in value)
    return value


def _adaptive_axis(x, axis, out):
    """The mean of `x` over PyTorch's adaptive bins along `axis`: bin i covers
    [floor(i * n / out), ceil((i + 1) * n / out)), so bins overlap when `out`
    does not divide n. One reshape when it does; else one slice per bin."""
    n = x.shape[axis]
    if n % out == 0:
        shape = x.shape[:axis] + (out, n // out) + x.shape[axis + 1:]
        return nx.mean(nx.reshape(x, shape), axis=axis + 1)
    bins = []
    for i in range(out):
        lo, hi = (i * n) // out, -(-((i + 1) * n) // out)
        index = (slice(None),) * axis + (slice(lo, hi),)
        bins.append(nx.mean(x[index], axis=axis, keepdims=True))
    return nx.concatenate(bins, axis=axis)


class AdaptiveAvgPool(Module):
    """Average pooling to a fixed spatial size `output_size` (an int for every
    spatial axis, or one entry per axis; None keeps an axis), whatever the input
    size: PyTorch's AdaptiveAvgPool1d/2d/3d bins. `AdaptiveAvgPool(1)` keeps
    the spatial axes with size 1; `GlobalAvgPool` drops them."""
    output_size: object

    def __init__(self, output_size):
        self.output_size = output_size if isinstance(output_size, int) else tuple(output_size)

    def __call__(self, x):
        x = _spatial("AdaptiveAvgPool", x)
        nd = x.ndim - 2
        sizes = (self.output_size,) * nd if not isinstance(self.output_size, tuple) else self.output_size
        if len(sizes) != nd or any(s is not None and (not isinstance(s, int) or s < 1) for s in sizes):
            raise ShapeError(f"AdaptiveAvgPool(output_size={self.output_size}): expected a positive size for each "
                             f"of the {nd} spatial axes of the input of shape {x.shape}")
        for axis, out in enumerate(sizes, start=1):
            if out is not None:
                x = _adaptive_axis(x, axis, out)
        return x


class GlobalAvgPool(Module):
    """The mean over every spatial axis: (N, *spatial, C) -> (N, C), or
    (N, 1, ..., 1, C) with keepdims=True."""
    keepdims: bool = False

    def __call__(self, x):
        x = _spatial("GlobalAvgPool", x)
        return nx.mean(x, axis=tuple(range(1, x.ndim - 1)), keepdims=self.keepdims)
