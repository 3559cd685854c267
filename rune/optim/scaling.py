"""The adaptive directions optimizers are made of (optax's `scale_by_*`): each
turns gradients into a direction, to be scaled by the learning rate after.

States keep each parameter's dtype (or the dtype asked for); the arithmetic
runs in float32 for half-precision values (`basics._wide`).
"""
from typing import Any, NamedTuple

import numpy as np

from .. import nx, tree
from .basics import (GradientTransformation, _count_like, _debias, _like, _map, _moment, _need_params,
                     _stateless, _wide, _zeros)


class ScaleByAdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


class ScaleByRmsState(NamedTuple):
    nu: Any


class ScaleByStddevState(NamedTuple):
    mu: Any
    nu: Any


class ScaleByRssState(NamedTuple):
    sum_of_squares: Any


class ScaleByLionState(NamedTuple):
    count: Any
    mu: Any


class FactoredState(NamedTuple):
    count: Any
    v_row: Any   # per leaf: the row means of the squared gradients (factored leaves), else a placeholder
    v_col: Any   # the column means likewise
    v: Any       # per leaf: the full second moment (unfactored leaves), else a placeholder


def scale_by_adam(b1=0.9, b2=0.999, eps=1e-8, mu_dtype=None):
    """Adam's direction m_hat / (sqrt(v_hat) + eps), with the bias corrections
    1 - b^t of the moment estimates (Kingma & Ba, Algorithm 1). The first moment
    is kept in `mu_dtype` (default: each parameter's dtype, as optax), the second
    in the parameter's dtype."""
    def init(params):
        return ScaleByAdamState(_count_like(params), _zeros(params, mu_dtype), _zeros(params))

    def update(updates, state, params=None):
        count = state.count + 1
        mu = _map(lambda g, m: _moment(g, m, b1, 1), updates, state.mu)
        nu = _map(lambda g, v: _moment(g, v, b2, 2), updates, state.nu)

        def direction(m, v, g):
            return _like(_debias(m, b1, count) / (nx.sqrt(_debias(v, b2, count)) + eps), g)
        return (_map(direction, mu, nu, updates),
                ScaleByAdamState(count, _map(_like, mu, state.mu), _map(_like, nu, state.nu)))
    return GradientTransformation(init, update)


def _rsqrt_eps(x, eps, eps_in_sqrt):
    """1 / sqrt(x + eps), or 1 / (sqrt(x) + eps)."""
    return nx.rsqrt(x + eps) if eps_in_sqrt else 1 / (nx.sqrt(x) + eps)


def _full(params, value):
    return _map(lambda p: nx.full_like(p, value), params)


def scale_by_rms(decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True):
    """RMSProp's direction g / sqrt(nu + eps) (or g / (sqrt(nu) + eps) with
    eps_in_sqrt=False, PyTorch's form), nu = decay * nu + (1 - decay) * g^2
    started at initial_scale (optax.scale_by_rms)."""
    def init(params):
        return ScaleByRmsState(_full(params, initial_scale))

    def update(updates, state, params=None):
        nu = _map(lambda g, v: _moment(g, v, decay, 2), updates, state.nu)
        out = _map(lambda g, v: _like(_wide(g) * _rsqrt_eps(v, eps, eps_in_sqrt), g), updates, nu)
        return out, ScaleByRmsState(_map(_like, nu, state.nu))
    return GradientTransformation(init, update)


def scale_by_stddev(decay=0.9, eps=1e-8, initial_scale=0.0, eps_in_sqrt=True):
    """Centred RMSProp's direction g / sqrt(nu - mu^2 + eps), mu and nu the moving
    averages of g and g^2 (optax.scale_by_stddev)."""
    def init(params):
        return ScaleByStddevState(_zeros(params), _full(params, initial_scale))

    def update(updates, state, params=None):
        mu = _map(lambda g, m: _moment(g, m, decay, 1), updates, state.mu)
        nu = _map(lambda g, v: _moment(g, v, decay, 2), updates, state.nu)

        def direction(g, m, v):
            return _like(_wide(g) * _rsqrt_eps(v - nx.square(m), eps, eps_in_sqrt), g)
        return (_map(direction, updates, mu, nu),
                ScaleByStddevState(_map(_like, mu, state.mu), _map(_like, nu, state.nu)))
    return GradientTransformation(init, update)


def scale_by_rss(initial_accumulator_value=0.1, eps=1e-7):
    """Adagrad's direction g / sqrt(s + eps), s the running sum of g^2 started at
    initial_accumulator_value, and 0 where s is 0 (optax.scale_by_rss)."""
    def init(params):
        return ScaleByRssState(_full(params, initial_accumulator_value))

    def update(updates, state, params=None):
        total = _map(lambda g, s: _wide(s) + nx.square(_wide(g)), updates, state.sum_of_squares)

        def direction(g, s):
            return _like(nx.where(s > 0, _wide(g) * nx.rsqrt(s + eps), 0.0), g)
        return _map(direction, updates, total), ScaleByRssState(_map(_like, total, state.sum_of_squares))
    return GradientTransformation(init, update)


def scale_by_lion(b1=0.9, b2=0.99, mu_dtype=None):
    """Lion's direction sign(b1 * m + (1 - b1) * g), then m = b2 * m + (1 - b2) * g
    (Chen et al. 2023, Algorithm 2; optax.scale_by_lion)."""
    def init(params):
        return ScaleByLionState(_count_like(params), _zeros(params, mu_dtype))

    def update(updates, state, params=None):
        out = _map(lambda g, m: _like(nx.sign(_moment(g, m, b1, 1)), g), updates, state.mu)
        mu = _map(lambda g, m: _like(_moment(g, m, b2, 1), m), updates, state.mu)
        return out, ScaleByLionState(state.count + 1, mu)
    return GradientTransformation(init, update)


def _norm(x):
    return nx.sqrt(nx.sum(nx.square(_wide(x))))


def scale_by_trust_ratio(min_norm=0.0, trust_coefficient=1.0, eps=0.0):
    """Each leaf's update times trust_coefficient * ||param|| / (||update|| + eps),
    or unchanged where either norm is 0: LARS/LAMB's layer-wise trust ratio
    (optax.scale_by_trust_ratio; norms floored at min_norm)."""
    def update(updates, params):
        _need_params("scale_by_trust_ratio (lamb)", params)

        def scale_leaf(u, p):
            p_norm, u_norm = nx.maximum(_norm(p), min_norm), nx.maximum(_norm(u), min_norm)
            ratio = trust_coefficient * p_norm / (u_norm + eps)
            ratio = nx.where(nx.logical_or(p_norm == 0, u_norm == 0), 1.0, ratio)
            return _like(_wide(u) * ratio, u)
        return _map(scale_leaf, updates, params)
    return _stateless(update)


def scale_by_param_block_rms(min_scale=1e-3):
    """Each leaf's update times max(rms(param), min_scale): Adafactor's step
    relative to the parameter's scale (optax.scale_by_param_block_rms)."""
    def update(updates, params):
        _need_params("scale_by_param_block_rms (adafactor)", params)

        def scale_leaf(u, p):
            rms = nx.sqrt(nx.mean(nx.square(_wide(p))))
            return _like(_wide(u) * nx.maximum(rms, min_scale), u)
        return _map(scale_leaf, updates, params)
    return _stateless(update)


def _factored_dims(shape, factored, min_dim_size_to_factor):
    """(d1, d0): the second largest and the largest axis of a leaf whose second
    moment is factored into row and column means, or None to keep it whole."""
    if not factored or len(shape) < 2:
        return None
    order = np.argsort(shape, kind="stable")
    if shape[order[-2]] < min_dim_size_to_factor:
        return None
    return int(order[-2]), int(order[-1])


def scale_by_factored_rms(factored=True, decay_rate=0.8, step_offset=0, min_dim_size_to_factor=128,
                          epsilon=1e-30):
    """Adafactor's direction (Shazeer & Stern 2018, Algorithms 4 and 5): g / sqrt(V),
    V the moving average of g^2 + epsilon with the rate 1 - t^(-decay_rate); for a
    leaf with two axes of at least min_dim_size_to_factor, V is the outer product
    of its row and column means divided by their mean, so the state is O(n + m)
    instead of O(nm) (optax.scale_by_factored_rms)."""
    def dims(p):
        return _factored_dims(tuple(p.shape), factored, min_dim_size_to_factor)

    def placeholder(p):
        return nx.zeros((1,), p.dtype, p.device)

    def init(params):
        def reduced(p, which):
            """Zeros of p's shape without axis d[which] (d0 for the row means, d1 for the columns)."""
            d = dims(p)
            if d is None:
                return placeholder(p)
            return nx.zeros(tuple(n for i, n in enumerate(p.shape) if i != d[which]), p.dtype, p.device)
        whole = _map(lambda p: nx.zeros_like(p) if dims(p) is None else placeholder(p), params)
        return FactoredState(_count_like(params), _map(lambda p: reduced(p, 1), params),
                             _map(lambda p: reduced(p, 0), params), whole)

    def update(updates, state, params=None):
        t = state.count - step_offset + 1

        def leaf(g, v_row, v_col, v):
            d = dims(g)
            wide = _wide(g)
            sq = nx.square(wide) + epsilon
            beta = 1.0 - nx.power(t.astype(wide.dtype), -float(decay_rate))   # 0 at the first step
            if d is None:
                new_v = beta * _wide(v) + (1 - beta) * sq
                return _like(wide * nx.rsqrt(new_v), g), v_row, v_col, _like(new_v, v)
            d1, d0 = d
            new_row = beta * _wide(v_row) + (1 - beta) * nx.mean(sq, axis=d0)
            new_col = beta * _wide(v_col) + (1 - beta) * nx.mean(sq, axis=d1)
            row_axis = d1 - 1 if d1 > d0 else d1   # d1's place once d0 is reduced away
            row_factor = nx.rsqrt(new_row / nx.mean(new_row, axis=row_axis, keepdims=True))
            out = wide * nx.expand_dims(row_factor, d0) * nx.expand_dims(nx.rsqrt(new_col), d1)
            return _like(out, g), _like(new_row, v_row), _like(new_col, v_col), v
        grads, structure = tree.flatten(updates)
        results = [leaf(*xs) for xs in zip(grads, *(tree.leaves(t) for t in state[1:]))]
        # the four results per leaf, put back as four trees of the updates' structure
        part = lambda i: structure.unflatten([r[i] for r in results])  # noqa: E731
        return part(0), FactoredState(state.count + 1, part(1), part(2), part(3))
    return GradientTransformation(init, update)

