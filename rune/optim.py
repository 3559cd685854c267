"""Optimizers as optax-shaped gradient transformations.

A transformation is a pair `init(params) -> state` and
`update(grads, state, params=None) -> (updates, state)` over pytrees; `chain`
composes them, and `apply_updates(params, updates)` adds the result to the
parameters. States are pytrees of arrays made with `zeros_like` of the
parameters, so they live where the parameters live, and everything is plain
`nx` code: a whole training step (loss, gradient, update) jits as one function.

The optimizers are chains of small pieces, as in optax:
sgd = trace (momentum) + scale by -learning_rate; adam = scale_by_adam + scale
by -learning_rate; adamw adds the decoupled weight decay before the scaling.
A learning rate is a number or a schedule: any function of the step count
(0 for the first update), such as `warmup_cosine` below.
"""
import math
from typing import Any, Callable, NamedTuple

from . import nx, tree
from .errors import ArgumentError, TreeError


class GradientTransformation(NamedTuple):
    init: Callable
    update: Callable


class EmptyState(NamedTuple):
    pass


class TraceState(NamedTuple):
    trace: Any


class ScaleByAdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


class ScaleByScheduleState(NamedTuple):
    count: Any


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


# ---------------------------------------------------------------- schedules

def constant(value):
    """The same learning rate at every step."""
    return lambda step: value


def linear(init_value, end_value, transition_steps, transition_begin=0):
    """From init_value to end_value linearly over transition_steps steps, starting
    at step transition_begin (optax.linear_schedule)."""
    if transition_steps <= 0:
        return constant(init_value)

    def schedule(step):
        done = nx.clip(nx.asarray(step) - transition_begin, 0, transition_steps).astype(nx.float32)
        return init_value + (end_value - init_value) * (done / transition_steps)
    return schedule


def warmup_cosine(init_value, peak_value, warmup_steps, decay_steps, end_value=0.0):
    """Linear warm-up from init_value to peak_value over warmup_steps, then a
    cosine decay to end_value reached at decay_steps (which counts the warm-up
    steps, as optax.warmup_cosine_decay_schedule)."""
    if decay_steps <= warmup_steps:
        raise ArgumentError(f"warmup_cosine: decay_steps ({decay_steps}) must exceed warmup_steps "
                            f"({warmup_steps})")
    warm = linear(init_value, peak_value, warmup_steps)
    span = decay_steps - warmup_steps

    def schedule(step):
        step = nx.asarray(step)
        t = nx.clip(step - warmup_steps, 0, span).astype(nx.float32) / span
        cosine = end_value + (peak_value - end_value) * 0.5 * (1 + nx.cos(math.pi * t))
        return nx.where(step < warmup_steps, warm(step), cosine)
    return schedule


def cosine_decay(init_value, decay_steps, alpha=0.0):
    """init_value * ((1 - alpha) * (1 + cos(pi * t / decay_steps)) / 2 + alpha), with t
    held at decay_steps afterwards (optax.cosine_decay_schedule)."""
    def schedule(step):
        t = nx.clip(nx.asarray(step), 0, decay_steps).astype(nx.float32) / decay_steps
        return init_value * ((1 - alpha) * 0.5 * (1 + nx.cos(math.pi * t)) + alpha)
    return schedule


def exponential_decay(init_value, transition_steps, decay_rate, transition_begin=0, staircase=False):
    """init_value * decay_rate ** ((step - transition_begin) / transition_steps), the
    exponent floored with staircase, and held at 0 before transition_begin."""
    def schedule(step):
        t = nx.maximum(nx.asarray(step) - transition_begin, 0).astype(nx.float32) / transition_steps
        return init_value * nx.power(nx.asarray(decay_rate, nx.float32), nx.floor(t) if staircase else t)
    return schedule


constant_schedule, linear_schedule, warmup_cosine_decay_schedule = constant, linear, warmup_cosine
cosine_decay_schedule = cosine_decay


def _schedule(learning_rate):
    return learning_rate if callable(learning_rate) else constant(learning_rate)


# ---------------------------------------------------------------- building blocks

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


def scale_by_learning_rate(learning_rate):
    """Multiply by -learning_rate(step): a descent step."""
    schedule = _schedule(learning_rate)

    def init(params):
        return ScaleByScheduleState(_count_like(params))

    def update(updates, state, params=None):
        rate = schedule(state.count)

        def step(u):
            wide = _wide(u)
            # A scheduled rate (an array) is taken in the update's arithmetic dtype; a
            # number stays a weak scalar.
            r = nx.astype(rate, wide.dtype) if hasattr(rate, "dtype") else rate
            return nx.astype(wide * -r, u.dtype)
        return _map(step, updates), ScaleByScheduleState(state.count + 1)
    return GradientTransformation(init, update)


def trace(decay, nesterov=False):
    """Momentum: t = g + decay * t_prev; the update is t, or g + decay * t with
    Nesterov's correction (optax.trace)."""
    def init(params):
        return TraceState(_map(nx.zeros_like, params))

    def update(updates, state, params=None):
        t = _map(lambda g, t: _wide(g) + decay * _wide(t), updates, state.trace)
        out = _map(lambda g, t: _wide(g) + decay * t, updates, t) if nesterov else t
        return (_map(lambda o, g: nx.astype(o, g.dtype), out, updates),
                TraceState(_map(lambda t, t_prev: nx.astype(t, t_prev.dtype), t, state.trace)))
    return GradientTransformation(init, update)


def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, mu_dtype=None):
    """Adam's direction m_hat / (sqrt(v_hat) + eps), with the bias corrections
    1 - b^t of the moment estimates (Kingma & Ba, Algorithm 1). The first moment
    is kept in `mu_dtype` (default: each parameter's dtype, as optax), the second
    in the parameter's dtype; the arithmetic runs in float32 for half-precision
    values."""
    mu_dtype = None if mu_dtype is None else nx.dtype(mu_dtype)

    def init(params):
        mu = _map(lambda p: nx.zeros_like(p, mu_dtype), params)
        return ScaleByAdamState(_count_like(params), mu, _map(nx.zeros_like, params))

    def update(updates, state, params=None):
        count = state.count + 1
        mu = _map(lambda g, m: b1 * _wide(m) + (1 - b1) * _wide(g), updates, state.mu)
        nu = _map(lambda g, v: b2 * _wide(v) + (1 - b2) * nx.square(_wide(g)), updates, state.nu)

        def direction(m, v, g):
            t = count.astype(m.dtype)
            d = (m / (1 - b1 ** t)) / (nx.sqrt(v / (1 - b2 ** t)) + eps)
            return nx.astype(d, g.dtype)
        store = lambda new, old: nx.astype(new, old.dtype)  # noqa: E731
        return (_map(direction, mu, nu, updates),
                ScaleByAdamState(count, _map(store, mu, state.mu), _map(store, nu, state.nu)))
    return GradientTransformation(init, update)


def add_decayed_weights(weight_decay):
    """Add weight_decay * params to the updates (decoupled weight decay when it
    comes after the adaptive scaling, as in AdamW)."""
    def init(params):
        return EmptyState()

    def update(updates, state, params=None):
        if params is None:
            raise ArgumentError("add_decayed_weights (adamw): update needs the params, "
                                "call update(grads, state, params)")
        return _map(lambda u, p: nx.astype(_wide(u) + weight_decay * _wide(p), u.dtype), updates, params), state
    return GradientTransformation(init, update)


def clip_by_global_norm(max_norm):
    """Scale every update by max_norm / ||updates|| when that norm (over the whole
    tree) exceeds max_norm."""
    def init(params):
        return EmptyState()

    def update(updates, state, params=None):
        # Half-precision squares are summed in float32 (they overflow float16 quickly).
        wide = [u if u.dtype in (nx.float32, nx.float64) else nx.astype(u, nx.float32)
                for u in tree.leaves(updates)]
        norm = nx.sqrt(sum(nx.sum(nx.square(u)) for u in wide))
        factor = nx.where(norm <= max_norm, 1.0, max_norm / nx.maximum(norm, 1e-30))
        return _map(lambda u: u * factor.astype(u.dtype), updates), state
    return GradientTransformation(init, update)


# ---------------------------------------------------------------- optimizers

def sgd(learning_rate, momentum=0.0, nesterov=False):
    """Stochastic gradient descent, with (Nesterov) momentum when momentum > 0."""
    if momentum:
        return chain(trace(momentum, nesterov), scale_by_learning_rate(learning_rate))
    return scale_by_learning_rate(learning_rate)


def adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8, mu_dtype=None):
    """Adam (Kingma & Ba 2015); `mu_dtype` as in `scale_by_adam`."""
    return chain(scale_by_adam(b1, b2, eps, mu_dtype), scale_by_learning_rate(learning_rate))


def adamw(learning_rate, b1=0.9, b2=0.999, eps=1e-8, weight_decay=1e-4, mu_dtype=None):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019): the step is
    -learning_rate * (adam direction + weight_decay * params)."""
    return chain(scale_by_adam(b1, b2, eps, mu_dtype), add_decayed_weights(weight_decay),
                 scale_by_learning_rate(learning_rate))


def apply_updates(params, updates):
    """params + updates, leaf by leaf, each result in its parameter's dtype."""
    return _map(lambda p, u: p + u.astype(p.dtype), params, updates)


# ---------------------------------------------------------------- gradient accumulation

class MultiStepsState(NamedTuple):
    mini_step: Any        # gradients accumulated since the last inner update (int32)
    gradient_step: Any    # inner updates made (int32)
    inner_opt_state: Any
    acc_grads: Any        # the mean of the gradients accumulated so far


def MultiSteps(opt, every_k):  # noqa: N802  (optax's name)
    """`opt` applied to the mean of every `every_k` consecutive gradients
    (optax.MultiSteps with use_grad_mean): each call adds its gradients to the
    running mean; every k-th call hands the mean to `opt` and returns its update,
    the others return zero updates and leave `opt`'s state (so its step count
    and schedules) untouched. The choice is made with `nx.where`, never a Python
    branch on values, so a step with accumulation jits as one function."""
    every_k = int(every_k)
    if every_k < 1:
        raise ArgumentError(f"MultiSteps: every_k must be a positive integer, got {every_k}")

    def init(params):
        count = _count_like(params)
        return MultiStepsState(count, count, opt.init(params), _map(nx.zeros_like, params))

    def update(updates, state, params=None):
        k = state.mini_step

        def mean(g, acc):
            g, wide = _wide(g), _wide(acc)
            steps = nx.astype(k, wide.dtype)
            return nx.astype((g + steps * wide) / (steps + 1), acc.dtype)
        acc = _map(mean, updates, state.acc_grads)
        emit = k == every_k - 1
        inner_updates, inner_state = opt.update(acc, state.inner_opt_state, params)
        keep = lambda new, old: nx.where(emit, new, old)  # noqa: E731
        return (_map(lambda u: nx.where(emit, u, nx.zeros_like(u)), inner_updates),
                MultiStepsState(nx.where(emit, nx.zeros_like(k), k + 1),
                                state.gradient_step + nx.astype(emit, k.dtype),
                                _map(keep, inner_state, state.inner_opt_state),
                                _map(lambda a: nx.where(emit, nx.zeros_like(a), a), acc)))
    return GradientTransformation(init, update)
