"""Host callbacks: Python code run on concrete values inside traced and compiled code.

A callback is an effect: it never runs while tracing, runs exactly once per
evaluation in program order, and no optimization removes or duplicates it.
In a plan it runs as the compiler's callback step (rune/compiler/control_steps.py).
"""
import math
import reprlib

import numpy as np

from .. import tree
from .autodiff.jvp import jvp_rules
from ..backends import backend_for
from .autodiff.vjp import vjp_rules
from .batching import batch_rules, front, materialize
from ..core.aval import Aval, Spec
from ..core.primitive import abstract_rules, eval_rules, primitive
from ..core.trace import bind
from ..core.devices import HOST, current_default, get_device
from ..errors import ArgumentError, CallbackError, NotDifferentiableError, RuneError, UsageError
from ..nx import ops as nx
from ..nx.buffers import Array
from ..nx.creation import zeros
from ..nx.placement import place
from ..base.stats import COUNTERS

callback_p = primitive("callback", multiple_results=True, effectful=True)

VMAP_METHODS = ("sequential", "batched")


class HostFunction:
    """What a callback equation runs: the function and the declared result layout."""
    __slots__ = ("fn", "name", "in_struct", "out_struct", "out_avals", "host", "counts")

    def __init__(self, fn, in_struct, out_struct, out_avals, host, name=None, counts=True):
        self.fn, self.in_struct, self.out_struct = fn, in_struct, out_struct
        self.out_avals, self.host = out_avals, host
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.counts = counts  # a vmap wrapper's lanes count themselves

    def __repr__(self):
        return self.name

    def __call__(self, arrays):
        """Run on concrete Arrays; returns the validated result leaves as Arrays."""
        if self.host:
            arrays = [place(a, _HOST) if isinstance(a, Array) else a for a in arrays]
        else:
            _settle(arrays)
        args, kwargs = tree.unflatten(self.in_struct, arrays)
        try:
            result = self.fn(*args, **kwargs)
        except CallbackError:
            raise
        except Exception as e:
            raise CallbackError(f"callback {self.name} raised {type(e).__name__}: {e}") from e
        COUNTERS["callbacks_run"] += self.counts
        return self.check(result)

    def check(self, result):
        try:
            leaves, struct = tree.flatten(result)
        except RuneError as e:
            raise CallbackError(f"callback {self.name} returned {type(result).__name__}: {e}") from e
        if struct != self.out_struct:
            raise CallbackError(f"callback {self.name} returned structure {struct}, but like= "
                                f"declares {self.out_struct}")
        def where(k):  # the leaf's path, worked out only for an error message
            return lambda: f"callback {self.name} result{tree.flatten_with_paths(result)[0][k][0]}"
        return [_conform(where(k), leaf, aval) for k, (leaf, aval) in enumerate(zip(leaves, self.out_avals))]


    def over_lanes(self, batched, size):
        """This function under vmap, "sequential": called once per lane, in lane order."""
        def lanes(*leaves):
            results = [self([x[b] if m else x for x, m in zip(leaves, batched)]) for b in range(size)]
            if not results:  # an empty batch: no lane calls the function
                return [zeros((0,) + a.shape, a.dtype, a.device) for a in self.out_avals]
            return [nx.stack([r[k] for r in results]) for k in range(len(self.out_avals))]
        return self._batched(lanes, tree.structure((tuple(batched), {})), size, counts=False)

    def over_batch(self, size):
        """This function under vmap, "batched": called once, the batch axis leading everywhere."""
        return self._batched(self.fn, self.in_struct, size, counts=True)

    def _batched(self, fn, in_struct, size, counts):
        out_avals = [a.update(shape=(size,) + a.shape) for a in self.out_avals]
        out_struct = self.out_struct if counts else tree.structure([0] * len(out_avals))
        return HostFunction(fn, in_struct, out_struct, out_avals, self.host, self.name, counts)


_HOST = get_device(HOST)


# A Python scalar result may stand for an array of these dtype kinds (no lossy casts).
_PY_SCALAR_KINDS = {bool: "biuf", int: "iuf", float: "fV"}


def _conform(where, leaf, aval):
    """A result leaf checked against its declared aval and placed where it belongs;
    `where()` names the leaf in an error."""
    if type(leaf) in _PY_SCALAR_KINDS:
        if aval.dtype.kind not in _PY_SCALAR_KINDS[type(leaf)]:
            raise CallbackError(f"{where()}: expected {aval.dtype.name}, got the Python "
                                f"{type(leaf).__name__} {leaf!r}")
        try:
            if aval.dtype.kind in "fV":  # a number too large would become inf without a word
                with np.errstate(over="ignore"):
                    if np.isinf(aval.dtype.type(leaf)) and math.isfinite(leaf):
                        raise OverflowError("it would become inf")
            value = nx.asarray(leaf, aval.dtype)
        except (OverflowError, ValueError) as e:
            raise CallbackError(f"{where()}: {reprlib.repr(leaf)} does not fit in {aval.dtype.name} "
                                f"({e})") from e
    elif isinstance(leaf, (Array, np.ndarray, np.generic)) or hasattr(leaf, "__array__"):
        if isinstance(leaf, Array):
            value = leaf
        else:
            # Device data bound for its own platform (CuPy for a GPU) stays there;
            # anything else comes through the host, so that placing it is a counted transfer.
            device = aval.device if aval.device.platform != HOST and backend_for(aval.device).holds(leaf) else _HOST
            try:
                raw = backend_for(device).from_foreign(leaf, device)  # NumPy, CuPy, DLPack
            except Exception as e:
                raise CallbackError(f"{where()}: converting the {type(leaf).__name__} to an array raised "
                                    f"{type(e).__name__}: {e}") from e
            if raw.dtype != aval.dtype:  # object, complex, ... never reach nx.asarray
                raise CallbackError(f"{where()}: expected dtype {aval.dtype.name}, got {raw.dtype.name}")
            # A copy: the function may go on writing to the buffer it returned.
            value = (nx.asarray(np.asarray(raw)) if device is _HOST else
                     Array(backend_for(device).copy(raw, device, device), device))  # made on its own device
        if value.dtype != aval.dtype:
            raise CallbackError(f"{where()}: expected dtype {aval.dtype.name}, got {value.dtype.name}")
    else:
        raise CallbackError(f"{where()}: expected an array, got {type(leaf).__name__}")
    if value.shape != aval.shape:
        raise CallbackError(f"{where()}: expected shape {aval.shape}, got {value.shape}")
    return place(value, aval.device)


def _settle(arrays):
    """Wait for the work queued on the devices of a callback's arrays before the
    function reads them in place (host=False)."""
    for device in {a.device for a in arrays if isinstance(a, Array) and a.device.platform != HOST}:
        backend_for(device).synchronize(device)


def _aval_of_like(leaf):
    if isinstance(leaf, Spec):
        return Aval(leaf.shape, leaf.dtype, leaf.device or current_default())
    a = leaf.aval if hasattr(leaf, "aval") else nx.asarray(leaf).aval
    return a.strong()


def callback(fn, *args, like, host=True, vmap_method="sequential", **kwargs):
    """Call the host function `fn(*args, **kwargs)` on concrete values; `like` declares
    its results. Keyword arguments other than rune's own (`like`, `host`,
    `vmap_method`) go to `fn`; arrays among them are placed like `args`."""
    if vmap_method not in VMAP_METHODS:
        raise ArgumentError(f"callback: vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}")
    if not callable(fn):
        raise UsageError(f"callback: expected a callable host function, got {type(fn).__name__}")
    leaves, in_struct = nx.tree_operands((args, kwargs))
    like_leaves, out_struct = tree.flatten(like, is_leaf=lambda x: isinstance(x, Spec))
    out_avals = [_aval_of_like(l) for l in like_leaves]
    host_fn = HostFunction(fn, in_struct, out_struct, out_avals, host)
    outs = bind(callback_p, *leaves, fn=host_fn, vmap_method=vmap_method)
    return tree.unflatten(out_struct, outs)


abstract_rules[callback_p] = lambda *avals, fn, vmap_method: list(fn.out_avals)
eval_rules[callback_p] = lambda *args, fn, vmap_method: fn(list(args))


def _not_differentiable(fn, mode):
    return NotDifferentiableError(
        f"callback {fn.name} has no derivative, but a {mode} flows through it. Wrap the code "
        f"that calls it in rune.custom_vjp (reverse mode) or rune.custom_jvp (forward mode) "
        f"and supply the derivative yourself")


def _callback_jvp(primals, tangents, *, fn, vmap_method):
    raise _not_differentiable(fn, "tangent")


def _callback_vjp(cts, ins, outs, wants, *, fn, vmap_method):
    raise _not_differentiable(fn, "cotangent")


jvp_rules[callback_p] = _callback_jvp
vjp_rules[callback_p] = _callback_vjp


# ---------------------------------------------------------------- batching (vmap)

def _callback_batch(values, dims, size, *, fn, vmap_method):
    if vmap_method == "sequential":
        args = [front(v, d) for v, d in zip(values, dims)]
        host_fn = fn.over_lanes([d is not None for d in dims], size)
    else:
        args = [materialize(v, d, size) for v, d in zip(values, dims)]
        host_fn = fn.over_batch(size)
    outs = bind(callback_p, *args, fn=host_fn, vmap_method=vmap_method)
    return outs, [0] * len(outs)


batch_rules[callback_p] = _callback_batch
