"""Mixed precision: the dtypes a Policy gives at each module boundary, the loss
scale's rules against a Python loop of jmp's rules, float16 training that needs
loss scaling, and a bfloat16 run on scikit-learn's digits against float32."""
import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nn, nx, optim

BF16 = np.dtype(ml_dtypes.bfloat16)
KEY = nx.random.key(0)
RNG = np.random.default_rng(0)


def a(x):
    return np.asarray(x, np.float64)


# ---------------------------------------------------------------- policies

def test_a_policy_casts_at_the_module_boundary():
    seen = []
    model = nn.Sequential(nn.Embedding(KEY, 10, 8), nn.Linear(nx.random.key(1), 8, 8),
                          lambda h: seen.append(h.dtype) or h, nn.Linear(nx.random.key(2), 8, 3))
    policy = nn.Policy(param="float32", compute="bfloat16", output="float32")
    mixed = policy.apply(model.replace(layers=rune.tree.map(lambda p: nx.astype(p, nx.float16), model.layers)))
    assert mixed.policy == policy and model.policy is None
    assert {p.dtype for p in rune.tree.leaves(mixed)} == {np.dtype(np.float32)}   # params in the param dtype

    ids = nx.asarray([[1, 2, 3], [4, 5, 6]], dtype=nx.int32)    # integers are never cast
    out = mixed(ids)
    assert seen == [BF16] and out.dtype == np.float32
    reference = a(model(ids))
    np.testing.assert_allclose(a(out), reference, rtol=0.05, atol=0.05)
    assert not np.array_equal(a(out), reference)       # it did run in bfloat16

    grads = rune.grad(lambda m: nx.sum(m(ids)))(mixed)
    assert {g.dtype for g in rune.tree.leaves(grads)} == {np.dtype(np.float32)}
    assert rune.jit(lambda m, x: m(x))(mixed, ids).dtype == np.float32
    assert nn.Policy(compute="bfloat16", output="bfloat16").apply(model)(ids).dtype == BF16


def test_policy_casts_only_floating_arrays_and_checks_its_dtypes():
    policy = nn.Policy(compute="float16")
    tree = {"f": nx.ones((2,), nx.float64), "i": nx.ones((2,), nx.int32), "s": 3}
    cast = policy.cast_to_compute(tree)
    assert cast["f"].dtype == np.float16 and cast["i"].dtype == np.int32 and cast["s"] == 3
    assert policy.cast_to_param(tree)["f"].dtype == np.float32
    with pytest.raises(rune.ArgumentError, match="compute must be a floating dtype"):
        nn.Policy(compute="int32")
    with pytest.raises(rune.UsageError, match="nn.Module"):
        policy.apply(lambda x: x)


# ---------------------------------------------------------------- dynamic loss scaling

def jmp_rules(scale, counter, finite, period, factor, minimum):
    """jmp.DynamicLossScale.adjust written as a Python loop body."""
    if finite:
        if counter == period - 1:
            grown = float(scale) * factor
            scale = grown if grown <= float(np.finfo(np.float32).max) else scale
        counter = (counter + 1) % period
    else:
        scale = max(minimum, scale / factor)
        counter = 0
    return np.float32(scale), counter


@pytest.mark.parametrize("initial", [2.0 ** 4, 2.0 ** 127])   # the second cannot grow: it would overflow
def test_loss_scale_grows_shrinks_and_resets_by_jmps_rules(initial):
    flags = [True] * 7 + [False] + [True] * 2 + [False] * 6 + [True] * 4
    scale = nn.DynamicLossScale(initial=initial, period=3, factor=2, min_loss_scale=1.0)
    adjust = rune.jit(lambda s, f: s.adjust(f))
    want_scale, want_counter = np.float32(initial), 0
    for f in flags:
        scale = adjust(scale, nx.asarray(f))
        want_scale, want_counter = jmp_rules(want_scale, want_counter, f, 3, 2.0, 1.0)
        assert float(scale.loss_scale) == want_scale and int(scale.counter) == want_counter
        assert scale.loss_scale.dtype == np.float32 and scale.period == 3


def test_unscale_all_finite_and_select_tree_skip_a_bad_step():
    scale = nn.DynamicLossScale(initial=2.0 ** 10)
    grads = {"w": nx.asarray([2.0 ** 11, -2.0 ** 10]), "b": nx.asarray(np.float16(2.0 ** 9))}
    un = scale.unscale(grads)
    np.testing.assert_array_equal(a(un["w"]), [2.0, -1.0])
    assert un["b"].dtype == np.float16 and float(un["b"]) == 0.5
    assert a(scale.scale(nx.asarray(np.float16(3.0)))) == 3 * 2 ** 10
    assert bool(nn.all_finite(grads))
    bad = {"w": nx.asarray([1.0, np.inf]), "b": grads["b"]}
    assert not bool(nn.all_finite(bad)) and not bool(nn.all_finite({"x": nx.asarray([np.nan])}))
    new, old = {"p": nx.asarray([1.0])}, {"p": nx.asarray([0.0])}
    assert float(nn.select_tree(nn.all_finite(bad), new, old)["p"][0]) == 0.0
    assert float(nn.select_tree(nn.all_finite(grads), new, old)["p"][0]) == 1.0
    with pytest.raises(rune.DTypeError, match=r"select_tree: expected a bool scalar.*float32\[\]"):
        nn.select_tree(nx.asarray(1.0), new, old)
    with pytest.raises(rune.ShapeError, match=r"select_tree: expected a bool scalar.*bool\[2\]"):
        nn.select_tree(nx.asarray([True, False]), new, old)


def _fp16_regression(loss_scale, steps):
    """A float16-compute linear regression whose loss carries a small weight (2^-20,
    as an auxiliary term's would): its per-element gradients lie below float16's
    smallest subnormal. Returns the losses, the first step's parameters and the
    final loss scale."""
    x = nx.asarray(RNG.normal(size=(64, 4)).astype(np.float16))
    y = x @ nx.asarray([[1.0], [-1.0], [0.5], [2.0]], dtype=nx.float16)
    model = nn.Policy(compute="float16", output="float16").apply(nn.Linear(KEY, 4, 1))
    opt = optim.adam(0.05)
    weight = 2.0 ** -20

    def loss(m):
        return weight * nx.mean((m(x) - y) ** 2)

    @rune.jit
    def step(m, state, scale):
        if scale is None:
            grads = rune.grad(loss)(m)
            finite = nn.all_finite(grads)
        else:
            grads = scale.unscale(rune.grad(lambda m: scale.scale(loss(m)))(m))
            finite = nn.all_finite(grads)
            scale = scale.adjust(finite)
        updates, new_state = opt.update(grads, state, m)
        m, state = nn.select_tree(finite, (optim.apply_updates(m, updates), new_state), (m, state))
        return m, state, scale

    state, losses, first = opt.init(model), [], None
    for i in range(steps):
        model, state, loss_scale = step(model, state, loss_scale)
        first = model if i == 0 else first
        losses.append(float(nx.mean(nx.astype(model(x) - y, nx.float32) ** 2)))
    return losses, first, loss_scale


# Infinities meet zeros in the skipped steps' products: NumPy says so, rune then skips the step.
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_float16_gradients_underflow_without_loss_scaling_and_train_with_it():
    losses, _, _ = _fp16_regression(None, 40)
    assert losses[-1] == losses[0]                       # every gradient flushed to zero: nothing moves
    scaled, _, final = _fp16_regression(nn.DynamicLossScale(initial=2.0 ** 15, period=10), 40)
    assert scaled[-1] < scaled[0] / 10
    assert np.isfinite(float(final.loss_scale))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_an_overflowing_loss_scale_skips_steps_and_comes_down():
    start = nn.DynamicLossScale(initial=2.0 ** 40, period=1000)
    scaled, first, final = _fp16_regression(start, 60)
    reference = nn.Linear(KEY, 4, 1)
    np.testing.assert_array_equal(a(first.weight), a(reference.weight))   # the inf step was skipped
    assert float(final.loss_scale) <= 2.0 ** 15         # halved until the scaled float16 loss is finite
    assert scaled[-1] < scaled[0] / 10


# ---------------------------------------------------------------- bfloat16 on the digits

def _digits():
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (digits.images.reshape(-1, 64) / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(labels))   # examples/train_digits.py's split
    n_test = int(len(labels) * 0.2)
    test, train = order[:n_test], order[n_test:]
    return images[train], labels[train], images[test], labels[test]


def _train_digits(policy, data, epochs=8, batch=64):
    x_train, y_train, x_test, y_test = data
    model = nn.MLP(nx.random.key(0), [64, 64, 10], nn.relu)
    model = model if policy is None else policy.apply(model)
    opt = optim.adam(1e-2)

    @rune.jit
    def step(m, state, x, y):
        grads = rune.grad(lambda m: nx.mean(nn.cross_entropy(m(x), y)))(m)
        updates, state = opt.update(grads, state, m)
        return optim.apply_updates(m, updates), state

    state, shuffle = opt.init(model), np.random.default_rng(1)
    for _ in range(epochs):
        order = shuffle.permutation(len(y_train))
        for b in range(len(y_train) // batch):
            rows = order[b * batch:(b + 1) * batch]
            model, state = step(model, state, nx.asarray(x_train[rows]), nx.asarray(y_train[rows]))
    hits = nx.argmax(model(nx.asarray(x_test)), axis=-1) == nx.asarray(y_test)
    return float(nx.mean(nx.astype(hits, nx.float32))), model


def test_bfloat16_compute_reaches_the_float32_accuracy_on_digits():
    data = _digits()
    acc32, model32 = _train_digits(None, data)
    acc16, model16 = _train_digits(nn.Policy(compute="bfloat16"), data)
    assert acc32 > 0.95
    assert abs(acc16 - acc32) <= 0.005, (acc16, acc32)
    assert model16.layers[0].weight.dtype == np.float32
    assert not np.array_equal(a(model16.layers[0].weight), a(model32.layers[0].weight))   # it ran in bfloat16
