"""rune.optim's further optimizers, masks, parameter groups, averages and
schedules, each against its paper's equations written out in NumPy (float64,
several steps), and against torch.optim where it has the same rule."""
import math

import numpy as np
import pytest
from test_optim import _assert_same, _leaves, _oracle, _problem, _run

import rune
from rune import nx, optim

from compiled import precompiled


def _check(opt, rule, jit=False):
    params, grads = _problem()
    _assert_same(_run(opt, params, grads, jit=jit), _oracle(params, grads, rule))


def _ema(s, name, decay, x):
    s[name] = decay * s.get(name, 0.0) + (1 - decay) * x
    return s[name]


# ---------------------------------------------------------------- update rules

def _rmsprop_rule(lr, decay, eps, centered=False, momentum=0.0, eps_in_sqrt=True):
    def rule(p, g, s, t):
        v = _ema(s, "v", decay, g * g)
        if centered:
            v = v - _ema(s, "m", decay, g) ** 2
        d = g / (np.sqrt(v + eps) if eps_in_sqrt else np.sqrt(v) + eps)
        s["b"] = momentum * s.get("b", 0.0) + d
        return p - lr * s["b"]
    return rule


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("momentum", [None, 0.9])
def test_rmsprop_follows_its_equations(centered, momentum):
    opt = optim.rmsprop(0.01, decay=0.8, eps=1e-3, momentum=momentum, centered=centered)
    _check(opt, _rmsprop_rule(0.01, 0.8, 1e-3, centered, momentum or 0.0), jit=centered)


def test_adagrad_follows_its_equations():
    def rule(p, g, s, t):
        s["sum"] = s.get("sum", 0.1) + g * g
        return p - 0.5 * g / np.sqrt(s["sum"] + 1e-7)
    _check(optim.adagrad(0.5), rule, jit=True)


def test_lion_follows_the_paper():
    lr, b1, b2, wd = 0.01, 0.9, 0.99, 0.1

    def rule(p, g, s, t):   # Chen et al. 2023, Algorithm 2
        c = b1 * s.get("m", 0.0) + (1 - b1) * g
        s["m"] = b2 * s.get("m", 0.0) + (1 - b2) * g
        return p - lr * (np.sign(c) + wd * p)
    _check(optim.lion(lr, weight_decay=wd), rule, jit=True)


def test_lamb_follows_the_paper():
    lr, b1, b2, eps, wd = 0.02, 0.9, 0.999, 1e-6, 0.01

    def rule(p, g, s, t):   # You et al. 2020, Algorithm 2 (phi the identity)
        m, v = _ema(s, "m", b1, g), _ema(s, "v", b2, g * g)
        r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wd * p
        p_norm, r_norm = np.linalg.norm(p), np.linalg.norm(r)
        return p - lr * (p_norm / r_norm if p_norm > 0 and r_norm > 0 else 1.0) * r
    _check(optim.lamb(lr, weight_decay=wd), rule, jit=True)


def test_adafactor_follows_the_paper():
    lr, d = 0.1, 1.0
    eps1, eps2 = 1e-30, 1e-3

    def rule(p, g, s, t):   # Shazeer & Stern 2018, Algorithms 4 (matrices) and 5 (vectors)
        beta = 1 - t ** -0.8
        sq = g * g + eps1
        if p.ndim == 2:    # factored: row and column sums, V = R C / (1^T R)
            s["R"] = beta * s.get("R", 0.0) + (1 - beta) * sq.sum(axis=1)
            s["C"] = beta * s.get("C", 0.0) + (1 - beta) * sq.sum(axis=0)
            v = np.outer(s["R"], s["C"]) / s["R"].sum()
        else:
            v = s["V"] = beta * s.get("V", 0.0) + (1 - beta) * sq
        u = g / np.sqrt(v)
        u = u / max(1.0, np.sqrt(np.mean(u * u)) / d)
        alpha = max(eps2, np.sqrt(np.mean(p * p))) * lr
        return p - alpha * u
    # the (3, 4) weight is factored once its second-largest axis reaches min_dim_size_to_factor
    opt = optim.adafactor(lr, min_dim_size_to_factor=3)
    _check(opt, rule, jit=True)
    state = opt.init(rune.tree.map(nx.asarray, _problem()[0]))[0]
    assert state.v_row["w"].shape == (3,) and state.v_col["w"].shape == (4,) and state.v["w"].shape == (1,)
    assert state.v["layers"][0].shape == (4,)


def test_clip_ema_and_incremental_update():
    delta = 0.5
    _check(optim.chain(optim.clip(delta), optim.sgd(0.1)), lambda p, g, s, t: p - 0.1 * np.clip(g, -delta, delta))

    def debiased(p, g, s, t):
        return p - 0.1 * _ema(s, "e", 0.9, g) / (1 - 0.9 ** t)
    _check(optim.chain(optim.ema(0.9), optim.sgd(0.1)), debiased, jit=True)
    _check(optim.chain(optim.ema(0.9, debias=False), optim.sgd(0.1)), lambda p, g, s, t: p - 0.1 * _ema(s, "e", 0.9, g))
    # Polyak averaging of the parameters
    params, grads = _problem()
    new, old = rune.tree.map(nx.asarray, grads[0]), rune.tree.map(nx.asarray, params)
    want = [0.2 * n + 0.8 * o for n, o in zip(_leaves(grads[0]), _leaves(params))]
    _assert_same([_leaves(optim.incremental_update(new, old, 0.2))], [want])


# ---------------------------------------------------------------- against torch.optim

def _torch_run(make, params, grads):
    torch = pytest.importorskip("torch")
    ps = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in _leaves(params)]
    opt = make(ps)
    history = []
    for g in grads:
        for p, gi in zip(ps, _leaves(g)):
            p.grad = torch.tensor(gi, dtype=torch.float64)
        opt.step()
        history.append([p.detach().numpy().copy() for p in ps])
    return history


TORCH_SAME_RULE = {
    "sgd nesterov": (lambda: optim.sgd(0.1, momentum=0.9, nesterov=True),
                     lambda T, ps: T.SGD(ps, 0.1, momentum=0.9, nesterov=True)),
    "rmsprop": (lambda: optim.rmsprop(0.01, decay=0.9, eps=1e-4, eps_in_sqrt=False),
                lambda T, ps: T.RMSprop(ps, 0.01, alpha=0.9, eps=1e-4)),
    "rmsprop centered momentum": (
        lambda: optim.rmsprop(0.01, decay=0.9, eps=1e-4, momentum=0.5, centered=True, eps_in_sqrt=False),
        lambda T, ps: T.RMSprop(ps, 0.01, alpha=0.9, eps=1e-4, momentum=0.5, centered=True)),
    "adagrad": (lambda: optim.adagrad(0.3, initial_accumulator_value=0.1, eps=0.0),
                lambda T, ps: T.Adagrad(ps, 0.3, initial_accumulator_value=0.1, eps=0.0)),
    "adamw": (lambda: optim.adamw(0.01, weight_decay=0.1),
              lambda T, ps: T.AdamW(ps, 0.01, weight_decay=0.1)),
}


@pytest.mark.parametrize("name", sorted(TORCH_SAME_RULE))
def test_same_steps_as_torch_optim(name):
    torch = pytest.importorskip("torch")
    ours, theirs = TORCH_SAME_RULE[name]
    params, grads = _problem()
    _assert_same(_run(ours(), params, grads), _torch_run(lambda ps: theirs(torch.optim, ps), params, grads))


# ---------------------------------------------------------------- masks and groups

def _matrices(params):
    return rune.tree.map(lambda p: p.ndim >= 2, params)


def test_a_weight_decay_mask_decays_only_the_leaves_it_marks():
    lr, wd = 0.01, 0.1
    params, grads = _problem()
    decays = [p.ndim >= 2 for p in _leaves(params)]

    def rule(p, g, s, t):
        m, v = _ema(s, "m", 0.9, g), _ema(s, "v", 0.999, g * g)
        d = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        return p - lr * (d + (wd * p if p.ndim >= 2 else 0.0))
    want = _oracle(params, grads, rule)
    assert decays == [False, False, True]   # leaves in key order: layers[0], layers[1], w
    _assert_same(_run(optim.adamw(lr, weight_decay=wd, mask=_matrices), params, grads, jit=True), want)
    # the same mask as a tree of bools, and as a prefix (one bool for the whole "layers" list)
    mask = {"w": True, "layers": False}
    _assert_same(_run(optim.adamw(lr, weight_decay=wd, mask=mask), params, grads), want)


def test_masked_leaves_pass_through_and_hold_no_state():
    params, grads = _problem()
    opt = optim.masked(optim.sgd(0.1, momentum=0.9), {"w": False, "layers": [True, False]})
    state = opt.init(rune.tree.map(nx.asarray, params))
    assert len(rune.tree.leaves(state)) == 2   # the momentum of layers[0] and the step count

    def rule(p, g, s, t):
        if p.ndim != 1:            # masked out (all but layers[0]): the gradient itself is the update
            return p + g
        s["v"] = g + 0.9 * s.get("v", 0.0)
        return p - 0.1 * s["v"]
    _assert_same(_run(opt, params, grads, jit=True), _oracle(params, grads, rule))
    with pytest.raises(rune.ArgumentError, match="Python bools"):
        optim.masked(optim.sgd(0.1), lambda p: rune.tree.map(lambda x: x > 0, p)).init(
            rune.tree.map(nx.asarray, params))


def test_multi_transform_updates_each_group_with_its_own_optimizer():
    params, grads = _problem()
    labels = {"w": "adam", "layers": ["sgd", "frozen"]}
    opt = optim.multi_transform({"adam": optim.adam(0.01), "sgd": optim.sgd(0.1, momentum=0.5),
                                 "frozen": optim.scale(0.0)}, labels)
    adam_w = _run(optim.adam(0.01), {"w": params["w"]}, [{"w": g["w"]} for g in grads])
    sgd_b = _run(optim.sgd(0.1, momentum=0.5), params["layers"][0], [g["layers"][0] for g in grads])
    want = [[b[0], params["layers"][1], a[0]] for a, b in zip(adam_w, sgd_b)]   # leaves in key order
    _assert_same(_run(opt, params, grads, jit=True), want)
    # labels from a function of the params
    by_rank = optim.multi_transform({"matrix": optim.adam(0.01), "vector": optim.sgd(0.1, momentum=0.5),
                                     "scalar": optim.scale(0.0)},
                                    lambda p: rune.tree.map(lambda x: ["scalar", "vector", "matrix"][x.ndim], p))
    _assert_same(_run(by_rank, params, grads), want)
    with pytest.raises(rune.ArgumentError, match="'lion' have no transformation"):
        optim.multi_transform({"adam": optim.adam(0.01)}, {"w": "adam", "layers": "lion"}).init(
            rune.tree.map(nx.asarray, params))


def test_a_masked_state_saves_and_loads(tmp_path):
    params = rune.tree.map(nx.asarray, _problem()[0])
    opt = optim.adamw(0.01, mask=_matrices)
    state = opt.update(params, opt.init(params), params)[1]
    rune.save(str(tmp_path / "s.safetensors"), state)
    back = rune.load(str(tmp_path / "s.safetensors"), like=state)
    assert rune.tree.structure(back) == rune.tree.structure(state)
    _assert_same([_leaves(back)], [_leaves(state)])
    # by class names, which stay rune.optim's (as in files saved before it became a package)
    classes = (optim.MaskedState, optim.MaskedNode, optim.ScaleByAdamState, optim.EmptyState,
               optim.ScaleByScheduleState)
    assert {cls.__module__ for cls in classes} == {"rune.optim"}
    back = rune.load(str(tmp_path / "s.safetensors"), classes=classes)
    assert rune.tree.structure(back) == rune.tree.structure(state)


# ---------------------------------------------------------------- schedules

ONE_CYCLE_STEPS, ONE_CYCLE_PEAK = 20, 1.0
SCHEDULES = {
    "piecewise": lambda: optim.piecewise_constant(1.0, {4: 0.5, 2: 0.1}),
    "joined": lambda: optim.join_schedules([optim.linear(0.0, 1.0, 4), optim.cosine_decay(1.0, 4)], [4]),
    "floor": lambda: optim.exponential_decay(1.0, 1, 0.5, end_value=0.2),
    "cosine one-cycle": lambda: optim.cosine_onecycle(ONE_CYCLE_STEPS, ONE_CYCLE_PEAK),
    "linear one-cycle": lambda: optim.linear_onecycle(ONE_CYCLE_STEPS, ONE_CYCLE_PEAK),
}


def _traced(schedule):
    return lambda s: schedule(s)


# The schedules' jitted steps, compiled together before the file's first test.
_kernels = precompiled(lambda: [(_traced(make()), (nx.asarray(0, nx.int32),)) for make in SCHEDULES.values()])


def _values(schedule, steps):
    eager = [float(schedule(s)) for s in steps]
    traced = rune.jit(_traced(schedule))
    np.testing.assert_allclose([float(traced(nx.asarray(s, nx.int32))) for s in steps], eager, rtol=1e-6)
    return eager


def test_piecewise_and_joined_schedules():
    np.testing.assert_allclose(_values(SCHEDULES["piecewise"](), range(6)), [1, 1, 0.1, 0.1, 0.05, 0.05], rtol=1e-6)
    want = [s / 4 for s in range(4)] + [0.5 * (1 + math.cos(math.pi * min(s, 4) / 4)) for s in range(5)]
    np.testing.assert_allclose(_values(SCHEDULES["joined"](), range(9)), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_values(SCHEDULES["floor"](), range(5)), [1.0, 0.5, 0.25, 0.2, 0.2], rtol=1e-6)
    with pytest.raises(rune.ArgumentError, match="non-negative"):
        optim.piecewise_constant(1.0, {3: -1.0})
    with pytest.raises(rune.ArgumentError, match="2 schedules need 1 boundaries"):
        optim.join_schedules([optim.constant(1.0)] * 2, [1, 2])


def test_one_cycle_schedules():
    steps, peak, div, final = ONE_CYCLE_STEPS, ONE_CYCLE_PEAK, 25.0, 1e4
    start, low = peak / div, peak / (div * final)

    def cosine(a, b, pct):
        return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1)

    up = int(0.3 * steps)
    want = [cosine(start, peak, s / up) if s < up else cosine(peak, low, (s - up) / (steps - up)) if s < steps
            else low for s in range(steps + 3)]
    np.testing.assert_allclose(_values(SCHEDULES["cosine one-cycle"](), range(steps + 3)), want, rtol=1e-5)
    knots = [(0, start), (6, peak), (17, start), (20, low)]   # pct_start 0.3, pct_final 0.85
    want = list(np.interp(range(steps + 3), *zip(*knots)))
    np.testing.assert_allclose(_values(SCHEDULES["linear one-cycle"](), range(steps + 3)), want, rtol=1e-5)
    # as the learning rate of an optimizer: step t (from 0) uses schedule(t)
    sched = optim.cosine_onecycle(4, 0.5)
    rates = [float(sched(t)) for t in range(5)]
    _check(optim.sgd(sched), lambda p, g, s, t: p - rates[t - 1] * g, jit=True)


# ---------------------------------------------------------------- half precision

HALF_CASES = {
    "rmsprop": lambda: optim.rmsprop(0.01, momentum=0.9, centered=True),
    "adagrad": lambda: optim.adagrad(0.05),
    "lion": lambda: optim.lion(0.01, weight_decay=0.1),
    "lamb": lambda: optim.lamb(0.01, weight_decay=0.01),
    "adafactor": lambda: optim.adafactor(0.05, min_dim_size_to_factor=2),
}


@pytest.mark.parametrize("name", sorted(HALF_CASES))
def test_bfloat16_parameters_keep_their_dtype_and_follow_float32(name):
    # In bfloat16, 0.999 is 1 and 1e-8 vanishes next to 1: the arithmetic runs in float32,
    # states and updates stay bfloat16. The reference: the same steps on float32
    # parameters rounded to bfloat16 after each step.
    rng = np.random.default_rng(2)
    p0 = rng.uniform(-1, 1, (4, 3))
    grads = [rng.standard_normal((4, 3)) for _ in range(3)]
    opt = HALF_CASES[name]()
    lr = 0.05
    half, ref = nx.asarray(p0, nx.bfloat16), nx.asarray(nx.asarray(p0, nx.bfloat16), nx.float32)
    s_half, s_ref = opt.init(half), opt.init(ref)
    assert all(leaf.dtype in (nx.bfloat16, nx.int32) for leaf in rune.tree.leaves(s_half))
    for g in grads:
        g_half = nx.asarray(g, nx.bfloat16)
        u_half, s_half = opt.update(g_half, s_half, half)
        u_ref, s_ref = opt.update(nx.astype(g_half, nx.float32), s_ref, ref)
        assert u_half.dtype == nx.bfloat16
        half = optim.apply_updates(half, u_half)
        ref = nx.astype(nx.astype(optim.apply_updates(ref, u_ref), nx.bfloat16), nx.float32)
        got, want = np.asarray(nx.astype(half, nx.float32)), np.asarray(ref)
        spacing = np.spacing(np.abs(want).astype(nx.bfloat16)).astype(np.float32)
        assert np.all(np.abs(got - want) <= 2 * spacing + lr * 2 ** -5), (got, want)
