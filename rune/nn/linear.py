"""Dense layers: `Linear` (y = x @ weight + bias) and `MLP` (Linear layers with an
activation between them)."""
from .. import nx
from ..errors import ArgumentError, ShapeError
from . import functional
from .layer_helpers import in_dtype_of, init_or_default, split_keys
from .module import Module

__all__ = ["Linear", "MLP"]


class Linear(Module):
    """y = x @ weight + bias over the last axis of x; weight (in, out)."""
    weight: object
    bias: object
    in_features: int
    out_features: int

    def __init__(self, key, in_features, out_features, use_bias=True, dtype=nx.float32, weight_init=None,
                 bias_init=None):
        wkey, bkey = split_keys(key, 2)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = init_or_default(weight_init, wkey, (self.in_features, self.out_features), self.in_features, dtype)
        self.bias = init_or_default(bias_init, bkey, (self.out_features,), self.in_features, dtype) if use_bias else None

    def __call__(self, x):
        where = f"Linear(in_features={self.in_features}, out_features={self.out_features})"
        x = in_dtype_of(where, x, self.weight)
        if x.ndim < 1 or x.shape[-1] != self.in_features:
            raise ShapeError(f"{where}: expected an input whose last axis is {self.in_features}, got shape {x.shape}")
        y = x @ self.weight
        return y if self.bias is None else y + self.bias



class MLP(Module):
    """Linear layers of the given sizes ([in, hidden..., out]) with `activation`
    (relu by default) between them (not after the last)."""
    layers: tuple
    activation: object

    def __init__(self, key, sizes, activation=functional.relu, use_bias=True, dtype=nx.float32):
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) < 2:
            raise ArgumentError(f"MLP: sizes must list at least an input and an output size, got {sizes}")
        keys = split_keys(key, len(sizes) - 1)
        self.layers = tuple(Linear(k, a, b, use_bias, dtype) for k, a, b in zip(keys, sizes[:-1], sizes[1:]))
        self.activation = activation

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.layers[-1](x)
