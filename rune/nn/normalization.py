"""Normalisation layers: `LayerNorm`, `RMSNorm`."""
from .. import nx
from ..errors import ShapeError
from . import functional
from .layer_helpers import in_dtype_of
from .module import Module

__all__ = ["LayerNorm", "RMSNorm"]


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
        out = x * nx.rsqrt(nx.mean(x * x, axis=axes, keepdims=True) + self.eps)
        return out if self.weight is None else out * self.weight

