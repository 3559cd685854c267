"""Containers: `Sequential` (layers applied in order) and `Lambda` (a function as
a layer)."""
import functools
import inspect

from ..errors import UsageError
from .layer_helpers import split_keys
from .module import Module

__all__ = ["Sequential", "Lambda"]


class Lambda(Module):
    """A function as a layer (of a Sequential): it holds no parameters."""
    fn: object

    def __call__(self, x):
        return self.fn(x)


@functools.lru_cache(maxsize=None)
def _takes_key(cls):
    return "key" in inspect.signature(cls.__call__).parameters


class Sequential(Module):
    """Layers applied in order; plain functions among them are wrapped in Lambda.
    A key given at call time is split among the layers that take one (Dropout)."""
    layers: tuple

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = layers[0]
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise UsageError(f"Sequential: layer {i} is a {type(layer).__name__}, not a module or a function")
        self.layers = tuple(layer if isinstance(layer, Module) else Lambda(layer) for layer in layers)

    def __call__(self, x, *, key=None):
        keys = [None] * len(self.layers) if key is None else split_keys(key, len(self.layers))
        for layer, k in zip(self.layers, keys):
            x = layer(x, key=k) if _takes_key(type(layer)) else layer(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self):
        return len(self.layers)

