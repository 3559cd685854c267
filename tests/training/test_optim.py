"""rune.optim against the published update equations, written out in NumPy for
several steps (float64 parameters, so agreement is to rounding)."""
import math

import numpy as np
import pytest

import rune
from rune import nx, optim

STEPS = 5


def _problem():
    """Parameters (a nested tree) and a gradient per step (fixed, not from a loss,
    so the oracle needs no autodiff)."""
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((3, 4)), "layers": [rng.standard_normal(4), rng.standard_normal(())]}
    grads = [{"w": rng.standard_normal((3, 4)), "layers": [rng.standard_normal(4), rng.standard_normal(())]}
             for _ in range(STEPS)]
    return params, grads


def _leaves(t):
    return [np.asarray(x) for x in rune.tree.leaves(t)]


def _run(opt, params, grads, jit=False):
    params = rune.tree.map(nx.asarray, params)
    state = opt.init(params)

    def step(params, state, g):
        updates, state = opt.update(g, state, params)
        return optim.apply_updates(params, updates), state

    step = rune.jit(step) if jit else step
    history = []
    for g in grads:
        params, state = step(params, state, rune.tree.map(nx.asarray, g))
        history.append(_leaves(params))
    return history


def _oracle(params, grads, rule):
    """rule(p, g, slot, t) -> new p, for each leaf, t = 1, 2, ...; slot is a dict per leaf."""
    ps = _leaves(params)
    slots = [{} for _ in ps]
    history = []
    for t, g in enumerate(grads, start=1):
        ps = [rule(p, gi, s, t) for p, gi, s in zip(ps, _leaves(g), slots)]
        history.append(ps)
    return history


def _assert_same(got, want):
    for g_step, w_step in zip(got, want):
        for g, w in zip(g_step, w_step):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_sgd_plain_momentum_and_nesterov():
    params, grads = _problem()
    lr, mu = 0.1, 0.9
    _assert_same(_run(optim.sgd(lr), params, grads), _oracle(params, grads, lambda p, g, s, t: p - lr * g))

    def momentum(nesterov):
        def rule(p, g, s, t):
            s["v"] = g + mu * s.get("v", 0.0)
            return p - lr * (g + mu * s["v"] if nesterov else s["v"])
        return rule

    for nesterov in (False, True):
        opt = optim.sgd(lr, momentum=mu, nesterov=nesterov)
        want = _oracle(params, grads, momentum(nesterov))
        _assert_same(_run(opt, params, grads), want)
        _assert_same(_run(opt, params, grads, jit=True), want)


def _adam_rule(lr, b1, b2, eps, wd=0.0):
    def rule(p, g, s, t):
        s["m"] = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["v"] = b2 * s.get("v", 0.0) + (1 - b2) * g * g
        m_hat, v_hat = s["m"] / (1 - b1 ** t), s["v"] / (1 - b2 ** t)
        return p - lr * (m_hat / (np.sqrt(v_hat) + eps) + wd * p)
    return rule


def test_adam_with_bias_correction():
    params, grads = _problem()
    want = _oracle(params, grads, _adam_rule(0.01, 0.9, 0.999, 1e-8))
    _assert_same(_run(optim.adam(0.01), params, grads), want)
    _assert_same(_run(optim.adam(0.01), params, grads, jit=True), want)
    # The first step of Adam moves each coordinate by about the learning rate.
    first = np.abs(want[0][0] - _leaves(params)[0])
    np.testing.assert_allclose(first, 0.01, rtol=1e-4)
    odd = _oracle(params, grads, _adam_rule(0.003, 0.8, 0.99, 1e-3))
    _assert_same(_run(optim.adam(0.003, b1=0.8, b2=0.99, eps=1e-3), params, grads), odd)


def test_adamw_decays_weights_decoupled_from_the_gradient():
    params, grads = _problem()
    want = _oracle(params, grads, _adam_rule(0.01, 0.9, 0.999, 1e-8, wd=0.1))
    _assert_same(_run(optim.adamw(0.01, weight_decay=0.1), params, grads, jit=True), want)
    with pytest.raises(rune.ArgumentError, match="params"):
        opt = optim.adamw(0.01)
        opt.update(params, opt.init(rune.tree.map(nx.asarray, params)))


def test_clip_by_global_norm_in_a_chain():
    params, grads = _problem()
    max_norm = 1.5

    def rule_all(leaves_g):
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in leaves_g))
        return [g * min(1.0, max_norm / norm) for g in leaves_g]

    opt = optim.chain(optim.clip_by_global_norm(max_norm), optim.sgd(0.1))
    ps = _leaves(params)
    want = []
    for g in grads:
        ps = [p - 0.1 * c for p, c in zip(ps, rule_all(_leaves(g)))]
        want.append(ps)
    _assert_same(_run(opt, params, grads), want)
    small = rune.tree.map(lambda g: nx.asarray(g * 1e-3), grads[0])
    clipped, _ = optim.clip_by_global_norm(max_norm).update(small, optim.EmptyState())
    _assert_same([_leaves(clipped)], [_leaves(small)])  # below the norm: unchanged


def test_schedules():
    warm = optim.warmup_cosine(0.0, 1.0, warmup_steps=10, decay_steps=110, end_value=0.1)
    got = [float(warm(nx.asarray(s))) for s in (0, 5, 10, 60, 110, 200)]
    want = [0.0, 0.5, 1.0, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)), 0.1, 0.1]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    lin = optim.linear(1.0, 0.0, transition_steps=4, transition_begin=2)
    assert [float(lin(s)) for s in range(8)] == [1.0, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    assert optim.constant(0.3)(7) == 0.3
    cos = optim.cosine_decay(2.0, decay_steps=8, alpha=0.25)
    np.testing.assert_allclose([float(cos(s)) for s in (0, 4, 8, 12)],
                               [2.0, 2.0 * (0.75 * 0.5 + 0.25), 0.5, 0.5], rtol=1e-6)
    exp = optim.exponential_decay(1.0, transition_steps=2, decay_rate=0.5, transition_begin=1)
    np.testing.assert_allclose([float(exp(s)) for s in (0, 1, 2, 3, 5)], [1.0, 1.0, 0.5 ** 0.5, 0.5, 0.25],
                               rtol=1e-6)
    stairs = optim.exponential_decay(1.0, 2, 0.5, staircase=True)
    assert [float(stairs(s)) for s in (0, 1, 2, 3, 4)] == [1.0, 1.0, 0.5, 0.5, 0.25]
    # A schedule as the learning rate: step t (from 0) uses schedule(t).
    params, grads = _problem()
    sched = lambda step: 0.1 / (1.0 + nx.astype(step, nx.float64))  # noqa: E731  any function of the step
    want = _oracle(params, grads, lambda p, g, s, t: p - 0.1 / t * g)
    _assert_same(_run(optim.sgd(sched), params, grads, jit=True), want)


def test_state_lives_on_the_params_device_and_keeps_dtypes():
    params = {"w": nx.ones((2,), nx.float32), "b": nx.zeros((), nx.bfloat16)}
    state = optim.adamw(1e-3).init(params)
    for leaf in rune.tree.leaves(state):
        assert leaf.device == params["w"].device
    updates, _ = optim.adamw(1e-3).update(params, state, params)
    new = optim.apply_updates(params, updates)
    assert new["w"].dtype == np.float32 and new["b"].dtype == nx.bfloat16


def _adam_half_reference(p0, target, half, steps, lr, b1=0.9, b2=0.999, eps=1e-8):
    """optax's Adam equations in float64, the parameters stored in `half` after each
    step (as training half-precision parameters does); the gradient of
    0.5 * ||p - target||^2 is p - target, taken at the stored parameters."""
    p = p0.astype(half).astype(np.float64)
    m = v = np.zeros_like(p)
    history = []
    for t in range(1, steps + 1):
        g = (p.astype(half).astype(np.float64) - target).astype(half).astype(np.float64)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        update = -lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        p = (p + update).astype(half).astype(np.float64)
        history.append((update, p))
    return history


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
@pytest.mark.parametrize("mu_dtype", [None, "float32"])
def test_adam_on_half_precision_parameters_follows_the_float64_equations(half, mu_dtype):
    # In bfloat16, b2 = 0.999 rounds to 1, so bias corrections made in the
    # parameters' dtype divide by zero; float16 loses eps = 1e-8 to 0.
    dtype = getattr(nx, half)
    rng = np.random.default_rng(1)
    p0 = rng.uniform(-2, 2, 16)
    target = rng.uniform(-2, 2, 16)
    lr = 0.05
    want = _adam_half_reference(p0, target, dtype, 4, lr)
    opt = optim.adam(lr, mu_dtype=mu_dtype)
    params = nx.asarray(p0, dtype)
    state = opt.init(params)
    assert state[0].mu.dtype == (dtype if mu_dtype is None else nx.float32)
    assert state[0].nu.dtype == dtype
    for update_want, p_want in want:
        grads = params - nx.asarray(target, dtype)
        updates, state = opt.update(grads, state, params)
        params = optim.apply_updates(params, updates)
        assert updates.dtype == dtype and params.dtype == dtype
        u = np.asarray(updates.astype(nx.float64))
        assert np.all(np.isfinite(u)) and np.all(u != 0)
        # one rounding of the update to the half dtype, relative to its size
        np.testing.assert_allclose(u, update_want, rtol=2 ** -6, atol=1e-3 * lr)
        # the parameters: within one step of the half dtype's spacing
        spacing = np.spacing(np.abs(p_want).astype(dtype)).astype(np.float64)
        assert np.all(np.abs(np.asarray(params.astype(nx.float64)) - p_want) <= 2 * spacing + 1e-3 * lr)


@pytest.mark.parametrize("half", ["bfloat16", "float16"])
def test_momentum_and_adamw_on_half_precision_parameters(half):
    dtype = getattr(nx, half)
    p0 = np.array([1.0, -0.5, 0.25, 2.0])
    g = np.array([0.3, -0.2, 0.1, 0.4])
    lr, mu, wd = 0.1, 0.9, 0.01
    # sgd with momentum, two steps of the same gradient: t1 = g, t2 = g + mu * g
    opt = optim.sgd(lr, momentum=mu)
    params = nx.asarray(p0, dtype)
    state = opt.init(params)
    grads = nx.asarray(g, dtype)
    g_half = g.astype(dtype).astype(np.float64)
    for want in (-lr * g_half, -lr * (g_half + mu * g_half)):
        updates, state = opt.update(grads, state, params)
        assert updates.dtype == dtype
        np.testing.assert_allclose(np.asarray(updates.astype(nx.float64)), want, rtol=2 ** -7)
    # adamw's first step: the direction is sign(g) (m_hat / sqrt(v_hat) = g / |g|)
    opt = optim.adamw(lr, weight_decay=wd)
    params = nx.asarray(p0, dtype)
    updates, _ = opt.update(grads, opt.init(params), params)
    p_half = p0.astype(dtype).astype(np.float64)
    np.testing.assert_allclose(np.asarray(updates.astype(nx.float64)), -lr * (np.sign(g) + wd * p_half),
                               rtol=2 ** -7)
