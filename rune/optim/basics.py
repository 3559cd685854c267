"""The pieces optimizers are chained from: the transformation type, `chain`,
scaling by the learning rate, momentum, weight decay, clipping, moving
averages, and `apply_updates` (optax's `transform`, `combine`, `clipping` and
`update` modules), and `masked` (a transformation on some leaves only)."""
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import nx, tree
from ..errors import ArgumentError, TreeError
from .schedules import as_schedule


class GradientTransformation(NamedTuple):
    init: Callable
    update: Callable


class EmptyState(NamedTuple):
    pass


class TraceState(NamedTuple):
    trace: Any


class ScaleByScheduleState(NamedTuple):
    count: Any


class MaskedNode(NamedTuple):
    """Stands in for a masked-out leaf in the trees a masked transformation sees:
    an empty container, so those leaves have no state and no update there."""


class MaskedState(NamedTuple):
    inner_state: Any


class EmaState(NamedTuple):
    count: Any
    ema: Any


def _count_like(params):
    """A step counter (int32 scalar) on the parameters' device."""
    leaves = tree.leaves(params)
    device = getattr(leaves[0], "device", None) if leaves else None
    return nx.zeros((), nx.int32, device)


def _map(f, *trees):
    return tree.map(f, *trees)


_HALF = (nx.float16, nx.bfloat16)


def _wide(x):
    """`x` in the dtype optimizer arithmetic runs in: float32 for half-precision
    values, else its own. In bfloat16, 0.999 rounds to 1 (so 1 - b2 ** t is 0 and
    Adam divides by zero) and eps = 1e-8 to 0 in float16; states and updates are
    still stored in their own dtypes."""
    return nx.astype(x, nx.float32) if x.dtype in _HALF else x


def _like(new, old):
    """`new` stored in `old`'s dtype (a state or an update keeps its dtype)."""
    return nx.astype(new, old.dtype)


def _zeros(params, dtype=None):
    """Zeros like every leaf of `params`, in `dtype` when given."""
    dtype = None if dtype is None else nx.dtype(dtype)
    return _map(lambda p: nx.zeros_like(p, dtype), params)


def _stateless(update):
    """A transformation with no state from update(updates, params) -> updates."""
    return GradientTransformation(lambda params: EmptyState(),
                                  lambda updates, state, params=None: (update(updates, params), state))


def _need_params(who, params):
    if params is None:
        raise ArgumentError(f"{who}: update needs the params, call update(grads, state, params)")


def _moment(g, m, decay, order):
    """decay * m + (1 - decay) * g ** order, in the wide dtype."""
    g = _wide(g)
    return decay * _wide(m) + (1 - decay) * (g if order == 1 else nx.square(g))


def _debias(moment, decay, count):
    """moment / (1 - decay ** count): the bias correction of a moving average started at 0."""
    return moment / (1 - decay ** count.astype(moment.dtype))


# ---------------------------------------------------------------- combining

def chain(*transforms):
    """Apply `transforms` in order; the state is the tuple of their states."""
    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(updates, state, params=None):
        if len(state) != len(transforms):
            raise TreeError(f"chain: a state of {len(state)} parts for {len(transforms)} transformations")
        new = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params)
            new.append(s)
        return updates, tuple(new)
    return GradientTransformation(init, update)


def apply_updates(params, updates):
    """params + updates, leaf by leaf, each result in its parameter's dtype."""
    return _map(lambda p, u: p + u.astype(p.dtype), params, updates)


def incremental_update(new_tensors, old_tensors, step_size):
    """step_size * new + (1 - step_size) * old, leaf by leaf, in old's dtypes
    (optax.incremental_update): a moving average of parameters (Polyak
    averaging) is `ema_params = incremental_update(params, ema_params, 1 - decay)`
    after each step."""
    return _map(lambda new, old: _like(step_size * _wide(new) + (1 - step_size) * _wide(old), old),
                new_tensors, old_tensors)


# ---------------------------------------------------------------- masks

def _flags(who, mask, tree_):
    """One Python bool per leaf of tree_: mask is a tree of bools shaped like
    tree_ (or a prefix of it), or a function of tree_ giving one."""
    mask = mask(tree_) if callable(mask) else mask
    flags = tree.prefix_broadcast(mask, tree_, f"{who}'s mask")
    for flag in flags:
        if not isinstance(flag, (bool, np.bool_)):
            raise ArgumentError(f"{who}: the mask must hold Python bools (one per leaf, or per subtree), "
                                f"got a {type(flag).__name__}: {flag!r}")
    return [bool(f) for f in flags]


def _hide(tree_, flags):
    """tree_ with its leaves whose flag is False replaced by MaskedNode()."""
    if tree_ is None:
        return None
    leaves, structure = tree.flatten(tree_)
    return structure.unflatten([x if keep else MaskedNode() for x, keep in zip(leaves, flags)])


def _merge(updates, inner, flags):
    """updates with the leaves whose flag is True taken from inner (a hidden tree)."""
    leaves, structure = tree.flatten(updates)
    chosen = iter(tree.leaves(inner))
    return structure.unflatten([next(chosen) if keep else u for u, keep in zip(leaves, flags)])


def _masked(who, inner, flags_of):
    def init(params):
        return MaskedState(inner.init(_hide(params, flags_of(params))))

    def update(updates, state, params=None):
        flags = flags_of(updates)
        new, inner_state = inner.update(_hide(updates, flags), state.inner_state, _hide(params, flags))
        return _merge(updates, new, flags), MaskedState(inner_state)
    return GradientTransformation(init, update)


def masked(inner, mask):
    """`inner` applied to the leaves `mask` marks True; the other leaves' updates
    pass through unchanged, and `inner` keeps no state for them (optax.masked).

    mask: a tree of Python bools with the parameters' structure (or a prefix of
        it: one bool for a whole subtree), or a function of the parameters (and,
        at each update, of the updates, which have their structure and shapes)
        giving one, such as `lambda params: rune.tree.map(lambda p: p.ndim > 1, params)`
        to decay weight matrices but not biases and norm scales.
    """
    return _masked("masked", inner, lambda tree_: _flags("masked", mask, tree_))


# ---------------------------------------------------------------- scaling

def scale(step_size):
    """Multiply every update by step_size (a number)."""
    return _stateless(lambda updates, params: _map(lambda u: _like(_wide(u) * step_size, u), updates))


def scale_by_learning_rate(learning_rate, flip_sign=True):
    """Multiply by -learning_rate(step) (a descent step; +learning_rate with
    flip_sign=False); learning_rate is a number or a schedule."""
    schedule = as_schedule(learning_rate)
    sign = -1 if flip_sign else 1

    def init(params):
        return ScaleByScheduleState(_count_like(params))

    def update(updates, state, params=None):
        rate = schedule(state.count)

        def step(u):
            wide = _wide(u)
            # A scheduled rate (an array) is taken in the update's arithmetic dtype; a
            # number stays a weak scalar.
            r = nx.astype(rate, wide.dtype) if hasattr(rate, "dtype") else rate
            return _like(wide * (sign * r), u)
        return _map(step, updates), ScaleByScheduleState(state.count + 1)
    return GradientTransformation(init, update)


def trace(decay, nesterov=False):
    """Momentum: t = g + decay * t_prev; the update is t, or g + decay * t with
    Nesterov's correction (optax.trace)."""
    def init(params):
        return TraceState(_zeros(params))

    def update(updates, state, params=None):
        t = _map(lambda g, t: _wide(g) + decay * _wide(t), updates, state.trace)
        out = _map(lambda g, t: _wide(g) + decay * t, updates, t) if nesterov else t
        return _map(_like, out, updates), TraceState(_map(_like, t, state.trace))
    return GradientTransformation(init, update)


def ema(decay, debias=True, accumulator_dtype=None):
    """The updates replaced by their exponential moving average
    e = decay * e_prev + (1 - decay) * u, divided by 1 - decay ** t when debias
    (optax.ema); the average is kept in accumulator_dtype (default: each
    parameter's dtype). For a moving average of the parameters themselves, see
    `incremental_update`."""
    def init(params):
        return EmaState(_count_like(params), _zeros(params, accumulator_dtype))

    def update(updates, state, params=None):
        count = state.count + 1
        new = _map(lambda u, e: _moment(u, e, decay, 1), updates, state.ema)
        out = _map(lambda e: _debias(e, decay, count), new) if debias else new
        return _map(_like, out, updates), EmaState(count, _map(_like, new, state.ema))
    return GradientTransformation(init, update)


def add_decayed_weights(weight_decay, mask=None):
    """Add weight_decay * params to the updates (decoupled weight decay when it
    comes after the adaptive scaling, as in AdamW); `mask` (a tree of bools or a
    function of the params giving one) limits it to the leaves marked True, as
    `masked` does."""
    def update(updates, params):
        _need_params("add_decayed_weights (weight decay)", params)
        return _map(lambda u, p: _like(_wide(u) + weight_decay * _wide(p), u), updates, params)
    decay = _stateless(update)
    return decay if mask is None else masked(decay, mask)


# ---------------------------------------------------------------- clipping

def clip(max_delta):
    """Each update clipped to [-max_delta, max_delta], element by element (optax.clip)."""
    return _stateless(lambda updates, params: _map(lambda u: nx.clip(u, -max_delta, max_delta), updates))


def _sum_of_squares(u):
    """sum(u ** 2), half-precision values summed in float32 (their squares overflow float16 quickly)."""
    wide = u if u.dtype in (nx.float32, nx.float64) else nx.astype(u, nx.float32)
    return nx.sum(nx.square(wide))


def clip_by_global_norm(max_norm):
    """Scale every update by max_norm / ||updates|| when that norm (over the whole
    tree) exceeds max_norm."""
    def update(updates, params):
        norm = nx.sqrt(sum(_sum_of_squares(u) for u in tree.leaves(updates)))
        factor = nx.where(norm <= max_norm, 1.0, max_norm / nx.maximum(norm, 1e-30))
        return _map(lambda u: u * factor.astype(u.dtype), updates)
    return _stateless(update)


def clip_by_block_rms(threshold):
    """Each leaf divided by max(1, rms(leaf) / threshold), so no leaf's root mean
    square exceeds threshold (optax.clip_by_block_rms, Adafactor's update clipping)."""
    def clip_leaf(u):
        wide = _wide(u)
        rms = nx.sqrt(nx.mean(nx.square(wide)))
        return _like(wide / nx.maximum(1.0, rms / threshold), u)
    return _stateless(lambda updates, params: _map(clip_leaf, updates))
