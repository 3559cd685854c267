"""Layers that draw random numbers: `Dropout`."""
from .. import nx
from ..errors import ArgumentError, UsageError
from . import functional
from .module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """Zeroes each element with probability `rate` and scales the rest by
    1 / (1 - rate), drawing from the key given at call time.

    In training mode (the default, as PyTorch, Flax NNX and Equinox) a call
    without a key is an error: dropout that silently does nothing would train
    a different model. In evaluation mode (`model.eval()`, or training=False)
    the input comes back unchanged and the key is not needed."""
    rate: float
    training: bool

    def __init__(self, rate, training=True):
        if not 0.0 <= rate < 1.0:
            raise ArgumentError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.training = bool(training)

    def __call__(self, x, *, key=None):
        if not self.training or self.rate == 0.0:
            return nx.asarray(x)
        if key is None:
            raise UsageError(f"Dropout(rate={self.rate}) is in training mode and was called without a key: "
                             f"pass key= (a Sequential splits its key among its layers), or call "
                             f"model.eval() for evaluation")
        return functional.dropout(key, self.rate, x)
