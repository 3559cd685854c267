"""Layers that draw random numbers: `Dropout`."""
from .. import nx
from ..errors import ArgumentError
from . import functional
from .module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """Zeroes each element with probability `rate` and scales the rest by
    1 / (1 - rate), drawing from the key given at call time; with key=None (for
    evaluation) the input comes back unchanged."""
    rate: float

    def __init__(self, rate):
        if not 0.0 <= rate < 1.0:
            raise ArgumentError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = float(rate)

    def __call__(self, x, *, key=None):
        if key is None:
            return nx.asarray(x)
        return functional.dropout(key, self.rate, x)

