"""Debugging: printing values inside traced code, finding the op that made a NaN.

- `print(fmt, *args, **kwargs)`: `fmt.format(...)` of the concrete values, printed
  when the program runs (eagerly, under jit, in a scan or while body, under grad
  and vmap), in program order. It is a host callback (rune.callback) with no
  results: an effect that no optimization removes. Under vmap it prints once per
  batch element, in order, each with that element's values (as jax.debug.print).
  Under grad and jvp it prints the primal values (no derivative flows through a
  print).
- `nans(True)`: every jitted call whose result holds a NaN is run again op by op,
  and a NanError names the first primitive that made a NaN from operands without
  one and the user's line that called it (also RUNE_DEBUG_NANS=1 at import).
  `with nans(): ...` switches it on for a block.

Errors leaving a jitted function show the user's frames only; RUNE_TRACEBACK=full
shows rune's own too (rune/base/tracebacks.py).
"""
import builtins
import sys

import numpy as np

from . import tree
from .compiler import nan_check
from .compiler.nan_check import NanError
from .errors import UsageError
from .nx.ops import stop_gradient
from .transforms.callback import callback

__all__ = ["print", "nans", "nans_enabled", "NanError"]


def print(fmt, *args, **kwargs):
    """Print `fmt.format(*args, **kwargs)` with the arrays among them as NumPy
    arrays, when the program runs (see the module's doc)."""
    if not isinstance(fmt, str):
        raise UsageError(f"rune.debug.print: expected a format string first, got {type(fmt).__name__}")
    # Arrays go through the callback (traced values become concrete there); the
    # rest (Python numbers, strings) is closed over as it is.
    leaves, struct = tree.flatten((args, kwargs))
    arrays = [k for k, x in enumerate(leaves) if hasattr(x, "aval") or isinstance(x, np.ndarray)]

    def show(*values):
        filled = list(leaves)
        for k, v in zip(arrays, values):
            filled[k] = np.asarray(v)
        a, kw = tree.unflatten(struct, filled)
        builtins.print(fmt.format(*a, **kw), file=sys.stdout, flush=True)
        return ()

    callback(show, *[stop_gradient(leaves[k]) for k in arrays], like=())


class nans:
    """`nans(True)` switches NaN debugging on for the process (False: off); as a
    context manager, `with nans():` switches it on for the block and restores the
    setting before it."""

    def __init__(self, enabled=True):
        self._before = nan_check.enable(enabled)
        self._enabled = bool(enabled)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        nan_check.enable(self._before)
        return False

    def __repr__(self):
        return f"rune.debug.nans({self._enabled})"


def nans_enabled():
    """Whether NaN debugging is on (RUNE_DEBUG_NANS=1 or nans(True))."""
    return nan_check.SWITCH.on
