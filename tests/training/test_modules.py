"""rune.nn's modules: each layer against the same computation written out in
NumPy with the same parameters, gradients against the functional form and
finite differences, the transformations (jit, vmap, checkpoint) over modules,
partition/combine with the optimizers, checkpoints, and gradient accumulation
(optim.MultiSteps) against a hand loop."""
import math

import numpy as np
import pytest

import rune
from rune import nn, nx, optim

from oracles import fd_grad

KEY = nx.random.key(0)
RNG = np.random.default_rng(0)


def a(x):
    return np.asarray(x, np.float64)


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(a(got), want, rtol=tol, atol=tol)


# ---------------------------------------------------------------- NumPy oracles

def np_conv(x, w, strides, pads, dilation, groups=1):
    """Cross-correlation of x (N, *S, C) with w (*K, C/groups, O), explicit (lo, hi) pads."""
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0)] + list(pads) + [(0, 0)])
    span = [(w.shape[i] - 1) * dilation[i] + 1 for i in range(nd)]
    out_sp = [(x.shape[1 + i] - span[i]) // strides[i] + 1 for i in range(nd)]
    cin, cout = w.shape[-2], w.shape[-1]
    out = np.zeros((x.shape[0], *out_sp, cout))
    for g in range(groups):
        xg = x[..., g * cin:(g + 1) * cin]
        og = slice(g * cout // groups, (g + 1) * cout // groups)
        for idx in np.ndindex(*w.shape[:nd]):
            sl = tuple(slice(idx[i] * dilation[i], idx[i] * dilation[i] + strides[i] * (out_sp[i] - 1) + 1,
                             strides[i]) for i in range(nd))
            out[..., og] += xg[(slice(None),) + sl] @ w[idx][:, og]
    return out


def same_pads(sizes, kernel, strides, dilation):
    """TensorFlow's SAME: output ceil(n / s), the odd pixel of padding after."""
    pads = []
    for n, k, s, d in zip(sizes, kernel, strides, dilation):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def np_softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_mha(m, x, ctx, mask):
    H = m.num_heads
    lin = lambda l, t: t @ a(l.weight) + a(l.bias)  # noqa: E731
    q, k, v = lin(m.q_proj, x), lin(m.k_proj, ctx), lin(m.v_proj, ctx)
    D = q.shape[-1] // H
    split = lambda t: t.reshape(t.shape[:-1] + (H, D))  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    s = np.einsum("nqhd,nkhd->nhqk", q, k) / np.sqrt(D)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    o = np.einsum("nhqk,nkhd->nqhd", np_softmax(s), v)
    return lin(m.out_proj, o.reshape(o.shape[:-2] + (H * D,)))


# ---------------------------------------------------------------- layers against NumPy

def test_linear_matches_numpy_and_pytorch_init_bounds():
    lin = nn.Linear(KEY, 5, 3)
    x = RNG.normal(size=(4, 2, 5)).astype(np.float32)
    close(lin(nx.asarray(x)), a(x) @ a(lin.weight) + a(lin.bias))
    bound = 1 / math.sqrt(5)
    assert lin.weight.shape == (5, 3) and lin.bias.shape == (3,) and lin.weight.dtype == np.float32
    assert np.abs(a(lin.weight)).max() <= bound and np.abs(a(lin.bias)).max() <= bound
    assert a(lin.weight).std() > bound / 4   # drawn, not zeros
    bare = nn.Linear(KEY, 5, 3, use_bias=False, weight_init=nn.lecun_normal)
    assert bare.bias is None
    close(bare(nx.asarray(x)), a(x) @ a(bare.weight))


@pytest.mark.parametrize("kernel,strides,padding,dilation,groups", [
    ((3,), 1, "SAME", 1, 1),
    ((3, 3), 2, "SAME", 1, 1),
    ((2, 3), 1, "VALID", (2, 1), 2),
    ((2, 2, 2), 1, ((1, 0), (0, 1), (1, 1)), 1, 1),
])
def test_conv_matches_numpy_in_1_to_3_dims(kernel, strides, padding, dilation, groups):
    nd = len(kernel)
    conv = nn.Conv(KEY, 4, 6, kernel, strides=strides, padding=padding, dilation=dilation, groups=groups)
    x = RNG.normal(size=(2,) + (7, 6, 5)[:nd] + (4,)).astype(np.float32)
    st = (strides,) * nd if isinstance(strides, int) else strides
    di = (dilation,) * nd if isinstance(dilation, int) else dilation
    pads = (same_pads(x.shape[1:-1], kernel, st, di) if padding == "SAME" else
            [(0, 0)] * nd if padding == "VALID" else padding)
    want = np_conv(a(x), a(conv.weight), st, pads, di, groups) + a(conv.bias)
    close(conv(nx.asarray(x)), want, 1e-4)
    close(conv(nx.asarray(x[0])), want[0], 1e-4)   # one image without the batch axis
    assert conv.weight.shape == kernel + (4 // groups, 6)
    assert np.abs(a(conv.weight)).max() <= 1 / math.sqrt(4 // groups * math.prod(kernel))


def test_embedding_layernorm_rmsnorm_match_numpy():
    emb = nn.Embedding(KEY, 7, 3)
    ids = np.array([[0, 6], [3, 3]], np.int32)
    np.testing.assert_array_equal(np.asarray(emb(nx.asarray(ids))), np.asarray(emb.weight)[ids])
    assert abs(a(nn.Embedding(KEY, 1000, 8).weight).std() - 1) < 0.05   # N(0, 1), as PyTorch

    x = RNG.normal(size=(3, 2, 4)).astype(np.float32)
    ln = nn.LayerNorm((2, 4)).replace(weight=nx.asarray(RNG.normal(size=(2, 4)).astype(np.float32)),
                                      bias=nx.asarray(RNG.normal(size=(2, 4)).astype(np.float32)))
    xd = a(x)
    mu = xd.mean((-2, -1), keepdims=True)
    var = ((xd - mu) ** 2).mean((-2, -1), keepdims=True)
    close(ln(nx.asarray(x)), (xd - mu) / np.sqrt(var + 1e-5) * a(ln.weight) + a(ln.bias))
    close(nn.LayerNorm(4)(nx.asarray(x)), np.asarray(nn.layer_norm(nx.asarray(x))))   # the functional form

    rms = nn.RMSNorm(4).replace(weight=nx.asarray(RNG.normal(size=4).astype(np.float32)))
    close(rms(nx.asarray(x)), xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + 1e-6) * a(rms.weight))


def test_dropout_uses_the_call_key_refuses_none_in_training_and_is_identity_in_eval():
    drop = nn.Dropout(0.5)
    x = RNG.normal(size=(200,)).astype(np.float32) + 3
    k = nx.random.key(3)
    got = a(drop(nx.asarray(x), key=k))
    np.testing.assert_array_equal(got, a(nn.dropout(k, 0.5, nx.asarray(x))))   # the functional form, same key
    kept = got != 0
    close(got[kept], 2 * a(x)[kept])
    assert 60 < kept.sum() < 140
    assert not np.array_equal(a(drop(nx.asarray(x), key=nx.random.key(4))), got)
    with pytest.raises(rune.UsageError, match="training mode and was called without a key"):
        drop(nx.asarray(x))           # was silently the identity
    np.testing.assert_array_equal(a(drop.eval()(nx.asarray(x))), a(x))
    np.testing.assert_array_equal(a(drop.eval()(nx.asarray(x), key=k)), a(x))
    np.testing.assert_array_equal(a(nn.Dropout(0.0)(nx.asarray(x))), a(x))   # nothing to draw
    with pytest.raises(rune.ArgumentError, match="rate"):
        nn.Dropout(1.0)


@pytest.mark.parametrize("causal,with_mask", [(False, False), (True, False), (True, True)])
def test_multi_head_attention_matches_numpy(causal, with_mask):
    mha = nn.MultiHeadAttention(KEY, 2, 8, context_features=6)
    x = RNG.normal(size=(3, 5, 8)).astype(np.float32)
    ctx = RNG.normal(size=(3, 5, 6)).astype(np.float32)
    mask = RNG.random((3, 5, 5)) < 0.7 if with_mask else None
    if mask is not None:
        mask[..., 0] = True   # every query sees something
    full = np.ones((5, 5), bool)
    want_mask = (np.tril(full) if causal else full) & (mask[:, None] if mask is not None else full)
    got = mha(nx.asarray(x), nx.asarray(ctx), mask=None if mask is None else nx.asarray(mask), causal=causal)
    close(got, np_mha(mha, a(x), a(ctx), want_mask), 1e-5)
    self_attn = nn.MultiHeadAttention(KEY, 4, 8)
    close(self_attn(nx.asarray(x)), np_mha(self_attn, a(x), a(x), None), 1e-5)


def test_mlp_and_sequential_compose_their_layers():
    mlp = nn.MLP(KEY, [4, 8, 8, 3], nn.relu)
    x = RNG.normal(size=(5, 4)).astype(np.float32)
    h = a(x)
    for i, layer in enumerate(mlp.layers):
        h = h @ a(layer.weight) + a(layer.bias)
        h = np.maximum(h, 0) if i < 2 else h
    close(mlp(nx.asarray(x)), h)

    seq = nn.Sequential([mlp.layers[0], nn.relu, nn.Dropout(0.5), mlp.layers[1], nx.tanh])
    assert isinstance(seq[1], nn.Lambda) and len(seq) == 5
    want = np.tanh(np.maximum(a(x) @ a(mlp.layers[0].weight) + a(mlp.layers[0].bias), 0)
                   @ a(mlp.layers[1].weight) + a(mlp.layers[1].bias))
    close(seq.eval()(nx.asarray(x)), want)              # evaluation mode: dropout is off
    with pytest.raises(rune.UsageError, match="without a key"):
        seq(nx.asarray(x))
    dropped = a(seq(nx.asarray(x), key=nx.random.key(1)))
    assert not np.allclose(dropped, want)               # a key reaches the dropout


# ---------------------------------------------------------------- pytree behaviour

def test_parameters_are_leaves_and_hyperparameters_static():
    lin = nn.Linear(KEY, 3, 2)
    paths = [p for p, _ in rune.tree.flatten_with_paths(lin)[0]]
    assert paths == [".weight", ".bias"]
    assert rune.tree.structure(lin) == rune.tree.structure(nn.Linear(nx.random.key(1), 3, 2))
    assert rune.tree.structure(lin) != rune.tree.structure(nn.Linear(KEY, 3, 2, use_bias=False))
    doubled = rune.tree.map(lambda p: p * 2, lin)
    assert type(doubled) is nn.Linear and doubled.in_features == 3
    close(doubled.weight, 2 * a(lin.weight))
    with pytest.raises(rune.UsageError, match="immutable"):
        lin.weight = lin.bias
    before = a(lin.bias)
    moved = lin.replace(bias=nx.zeros((2,)))
    close(moved.bias, np.zeros(2))
    close(lin.bias, before)   # the original is unchanged
    with pytest.raises(rune.TreeError, match="in_features is a hyperparameter"):
        lin.replace(in_features=nx.ones((3,)))
    assert nn.is_inexact_array(nx.ones((2,), nx.bfloat16)) and not nn.is_inexact_array(nx.ones((2,), nx.int32))
    assert nn.is_array(np.ones(2)) and not nn.is_array(3.0)


def test_a_user_module_with_a_generated_init():
    class Affine(nn.Module):
        scale: object
        shift: object
        name: str = "affine"

        def __call__(self, x):
            return x * self.scale + self.shift

    m = Affine(nx.asarray([2.0, 3.0]), nx.asarray(1.0))
    assert [p for p, _ in rune.tree.flatten_with_paths(m)[0]] == [".scale", ".shift"]
    close(m(nx.asarray([1.0, 1.0])), [3.0, 4.0])
    g = rune.grad(lambda m: nx.sum(m(nx.asarray([1.0, 2.0]))))(m)
    close(g.scale, [1.0, 2.0])
    close(g.shift, 2.0)
    with pytest.raises(rune.TreeError, match="hashable"):
        Affine(nx.asarray(1.0), nx.asarray(1.0), name=["not", "hashable"])
    with pytest.raises(rune.TreeError, match="Lambda"):
        class Bad(nn.Module):
            layers: list
        Bad([nn.Linear(KEY, 2, 2), "a string"])


def test_wrong_input_shapes_name_the_module_and_the_shapes():
    cases = [
        (nn.Linear(KEY, 784, 256), (32, 100), r"Linear\(in_features=784, out_features=256\).*784.*\(32, 100\)"),
        (nn.Conv(KEY, 3, 8, (3, 3)), (2, 8, 8, 1), r"Conv\(in_channels=3.*\(2, 8, 8, 1\)"),
        (nn.LayerNorm(16), (4, 8), r"LayerNorm\(shape=\(16,\)\).*\(4, 8\)"),
        (nn.MultiHeadAttention(KEY, 2, 8), (5, 6), r"MultiHeadAttention\(num_heads=2, features=8\).*\(5, 6\)"),
    ]
    for module, shape, pattern in cases:
        with pytest.raises(rune.ShapeError, match=pattern):
            module(nx.ones(shape))
    with pytest.raises(rune.DTypeError, match=r"Embedding.*float32"):
        nn.Embedding(KEY, 5, 2)(nx.ones((3,)))


def test_embedding_rows_of_out_of_range_ids_are_nan_eagerly_and_under_jit():
    # the oracle: NumPy's table rows, NaN where the id is outside [0, rows), as
    # cross_entropy gives NaN for an out-of-range label
    emb = nn.Embedding(KEY, 5, 2)
    ids = np.array([[7, -1], [0, 4]], np.int32)
    table = np.asarray(emb.weight)
    want = np.where(((ids >= 0) & (ids < 5))[..., None], table[np.clip(ids, 0, 4)], np.nan)
    np.testing.assert_array_equal(np.asarray(emb(nx.asarray(ids))), want)
    np.testing.assert_array_equal(np.asarray(rune.jit(lambda m, i: m(i))(emb, nx.asarray(ids))), want)
    # the gradient reaches only the rows of in-range ids
    g = rune.grad(lambda m: nx.sum(m(nx.asarray([1, 1, 3]))))(emb)
    np.testing.assert_array_equal(np.asarray(g.weight), [[0, 0], [2, 2], [0, 0], [1, 1], [0, 0]])
    # ids whose dtype cannot reach the row count are all in range
    wide = nn.Embedding(KEY, 300, 2)
    np.testing.assert_array_equal(np.asarray(wide(nx.asarray(np.array([255], np.uint8)))),
                                  np.asarray(wide.weight)[[255]])


def test_dtype_errors_of_attention_masks_are_dtype_errors():
    mha = nn.MultiHeadAttention(KEY, 2, 8)
    x = nx.ones((5, 8))
    with pytest.raises(rune.DTypeError, match=r"MultiHeadAttention\(num_heads=2, features=8\).*bool mask.*float32"):
        mha(x, mask=nx.ones((5, 5)))
    with pytest.raises(rune.ShapeError, match=r"MultiHeadAttention.*bool mask.*bool\[5\]"):
        mha(x, mask=nx.ones((5,), nx.bool))


def test_replace_decides_a_field_built_empty_by_the_value_it_is_given():
    class Stack(nn.Module):
        w: object
        sizes: tuple = ()

    m = Stack(nx.ones((2,)))
    sized = m.replace(sizes=(3, 4))
    # ints are hyperparameters, as when built with them: not leaves, part of the structure
    assert len(rune.tree.leaves(sized)) == 1
    assert rune.tree.structure(sized) == rune.tree.structure(Stack(nx.ones((2,)), (3, 4)))
    assert rune.tree.structure(sized) != rune.tree.structure(Stack(nx.ones((2,)), (3, 5)))
    close(rune.jit(lambda m: m.w * m.sizes[0])(sized), [3.0, 3.0])
    # arrays make it a parameter slot, again as when built with them
    held = m.replace(sizes=(nx.ones((1,)),))
    assert len(rune.tree.leaves(held)) == 2
    assert rune.tree.structure(held) == rune.tree.structure(Stack(nx.ones((2,)), (nx.ones((1,)),)))
    # a built parameter slot still stays one (filter trees keep the model's structure)
    spec = rune.tree.map(lambda _: True, nn.Linear(KEY, 3, 2)).replace(bias=False)
    assert rune.tree.structure(spec) == rune.tree.structure(rune.tree.map(lambda _: True, nn.Linear(KEY, 3, 2)))


# ---------------------------------------------------------------- gradients and transformations

def _functional_mlp(params, x):
    (w1, b1), (w2, b2) = params
    return nn.relu(x @ w1 + b1) @ w2 + b2


def test_grad_of_a_module_loss_equals_the_functional_grad():
    mlp = nn.MLP(KEY, [4, 6, 3], nn.relu)
    x = nx.asarray(RNG.normal(size=(8, 4)).astype(np.float32))
    y = nx.asarray(RNG.integers(0, 3, 8).astype(np.int32))
    g_mod = rune.grad(lambda m: nx.mean(nn.cross_entropy(m(x), y)))(mlp)
    params = [(l.weight, l.bias) for l in mlp.layers]
    g_fun = rune.grad(lambda p: nx.mean(nn.cross_entropy(_functional_mlp(p, x), y)))(params)
    assert isinstance(g_mod, nn.MLP)
    for layer, (gw, gb) in zip(g_mod.layers, g_fun):
        np.testing.assert_array_equal(a(layer.weight), a(gw))
        np.testing.assert_array_equal(a(layer.bias), a(gb))


def test_grad_of_a_module_matches_finite_differences():
    conv = nn.Conv(KEY, 2, 3, (2, 2), dtype=nx.float64)
    x = RNG.normal(size=(2, 4, 4, 2))
    loss = lambda w: nx.sum(nx.sin(conv.replace(weight=w)(nx.asarray(x))))  # noqa: E731
    got = rune.grad(loss)(conv.weight)
    want = fd_grad(lambda w: float(loss(nx.asarray(w))), a(conv.weight))
    np.testing.assert_allclose(a(got), want, rtol=1e-6, atol=1e-8)


def test_jit_and_vmap_over_a_batch_of_inputs():
    mlp = nn.MLP(KEY, [3, 5, 2], nn.gelu)
    xs = nx.asarray(RNG.normal(size=(6, 3)).astype(np.float32))
    eager = a(mlp(xs))
    call = rune.jit(lambda m, x: m(x))
    close(call(mlp, xs), eager)
    other = nn.MLP(nx.random.key(7), [3, 5, 2], nn.gelu)   # same structure, other parameters
    rune.reset_stats()
    close(call(other, xs), a(other(xs)))
    assert rune.stats()["traces"] == 0 and rune.stats()["cache_hits"] == 1   # hyperparameters key the cache
    call(nn.MLP(KEY, [3, 5, 2], nn.relu), xs)
    assert rune.stats()["traces"] == 1                    # another activation is another program
    one_at_a_time = rune.vmap(lambda x: mlp(x))(xs)
    close(one_at_a_time, eager)


def test_vmap_over_stacked_modules_is_an_ensemble():
    keys = nx.random.split(KEY, 3)
    members = [nn.Linear(keys[i], 4, 2) for i in range(3)]
    stacked = rune.tree.map(lambda *ps: nx.stack(ps), *members)
    assert stacked.weight.shape == (3, 4, 2) and stacked.in_features == 4
    x = nx.asarray(RNG.normal(size=(5, 4)).astype(np.float32))
    got = rune.vmap(lambda m, x: m(x), in_axes=(0, None))(stacked, x)
    close(got, np.stack([a(m(x)) for m in members]))
    built = rune.vmap(lambda k: nn.Linear(k, 4, 2))(keys)   # an ensemble made in one call
    np.testing.assert_array_equal(a(built.weight), a(stacked.weight))


def test_checkpoint_of_a_module_call_gives_the_same_grads():
    model = nn.Sequential(nn.Linear(KEY, 4, 8), nx.tanh, nn.LayerNorm(8), nn.Linear(nx.random.key(1), 8, 1))
    x = nx.asarray(RNG.normal(size=(5, 4)).astype(np.float32))
    plain = rune.grad(lambda m: nx.sum(m(x) ** 2))(model)
    remat = rune.grad(lambda m: nx.sum(rune.checkpoint(lambda m, x: m(x))(m, x) ** 2))(model)
    for p, q in zip(rune.tree.leaves(plain), rune.tree.leaves(remat)):
        close(q, a(p), 1e-6)


# ---------------------------------------------------------------- training pieces

def test_partition_combine_round_trip_and_frozen_parameters_stay():
    model = nn.Sequential(nn.Embedding(KEY, 10, 4), nn.Linear(nx.random.key(1), 4, 2))
    trainable, rest = nn.partition(model, nn.is_array)
    assert rune.tree.leaves(rest) == []
    assert rune.tree.structure(nn.combine(trainable, rest)) == rune.tree.structure(model)

    spec = rune.tree.map(lambda _: True, model)
    spec = spec.replace(layers=(False, spec.layers[1]))      # freeze the embedding
    trainable, frozen = nn.partition(model, spec)
    assert trainable.layers[0].weight is None and frozen.layers[1].weight is None
    back = nn.combine(trainable, frozen)
    for p, q in zip(rune.tree.leaves(back), rune.tree.leaves(model)):
        assert p is q

    ids = nx.asarray([[1, 2], [3, 4]], dtype=nx.int32)
    loss = lambda t: nx.sum(nn.combine(t, frozen)(ids) ** 2)  # noqa: E731
    opt = optim.adam(0.1)
    state = opt.init(trainable)
    grads = rune.grad(loss)(trainable)
    updates, state = opt.update(grads, state, trainable)
    stepped = nn.combine(optim.apply_updates(trainable, updates), frozen)
    np.testing.assert_array_equal(a(stepped.layers[0].weight), a(model.layers[0].weight))
    assert np.abs(a(stepped.layers[1].weight) - a(model.layers[1].weight)).min() > 0.05   # Adam's first step: 0.1


def test_save_and_load_a_module_through_like(tmp_path):
    model = nn.Sequential(nn.Conv(KEY, 1, 2, 3), nn.relu, nn.Linear(nx.random.key(1), 2, 3), nn.RMSNorm(3))
    path = tmp_path / "model.safetensors"
    rune.save(path, model)
    back = rune.load(path, like=rune.tree.map(nx.zeros_like, model))
    assert type(back) is nn.Sequential and back[1].fn is nn.relu and back[0].kernel_size == (3, 3)
    for p, q in zip(rune.tree.leaves(back), rune.tree.leaves(model)):
        np.testing.assert_array_equal(a(p), a(q))
    x = nx.asarray(RNG.normal(size=(1, 4, 4, 1)).astype(np.float32))
    np.testing.assert_array_equal(a(back(x)), a(model(x)))


def test_schedules_drive_an_optimizer_over_a_module_under_jit():
    model = nn.Linear(KEY, 3, 1)
    x = nx.asarray(np.random.default_rng(7).normal(size=(16, 3)).astype(np.float32))   # its own draws: any order
    y = x @ nx.asarray([[1.0], [-2.0], [0.5]])
    opt = optim.adam(optim.warmup_cosine(0.0, 0.1, 5, 100))

    @rune.jit
    def step(m, state):
        g = rune.grad(lambda m: nx.mean((m(x) - y) ** 2))(m)
        u, state = opt.update(g, state, m)
        return optim.apply_updates(m, u), state

    state = opt.init(model)
    first, _ = step(model, state)
    np.testing.assert_array_equal(a(first.weight), a(model.weight))   # warm-up starts at a rate of 0
    for _ in range(60):
        model, state = step(model, state)
    assert float(nx.mean((model(x) - y) ** 2)) < 0.05


def test_multisteps_equals_one_step_on_the_mean_gradient():
    k = 3
    params = {"w": nx.asarray(RNG.normal(size=(4,)).astype(np.float32)), "b": nx.asarray(0.5)}
    grads = [{"w": nx.asarray(RNG.normal(size=(4,)).astype(np.float32)), "b": nx.asarray(float(i))}
             for i in range(2 * k)]
    inner = optim.adam(0.1)
    multi = optim.MultiSteps(inner, k)
    state = multi.init(params)
    update = rune.jit(multi.update)

    ref_params, ref_state = params, inner.init(params)   # the hand loop: one adam step per k gradients
    p = params
    for i, g in enumerate(grads):
        u, state = update(g, state, p)
        p = optim.apply_updates(p, u)
        if (i + 1) % k:
            for leaf in rune.tree.leaves(u):
                np.testing.assert_array_equal(a(leaf), 0)
        else:
            mean = rune.tree.map(lambda *gs: sum(gs) / k, *grads[i + 1 - k:i + 1])
            ru, ref_state = inner.update(mean, ref_state, ref_params)
            ref_params = optim.apply_updates(ref_params, ru)
        for leaf, ref in zip(rune.tree.leaves(p), rune.tree.leaves(ref_params)):
            close(leaf, a(ref), 1e-6)
    assert int(state.gradient_step) == 2 and int(state.mini_step) == 0
    with pytest.raises(rune.ArgumentError, match="every_k"):
        optim.MultiSteps(inner, 0)


def test_collectives_carry_modules_inside_jit():
    import rune.distributed as dist
    dist.initialize()   # one process here; test_distributed_mpi.py trains the digits CNN module on two
    model = nn.Linear(KEY, 3, 2)
    x = nx.asarray(RNG.normal(size=(4, 3)).astype(np.float32))
    mean_grads = rune.jit(lambda m: dist.all_reduce(rune.grad(lambda m: nx.sum(m(x) ** 2))(m), "mean"))(model)
    plain = rune.grad(lambda m: nx.sum(m(x) ** 2))(model)
    assert type(mean_grads) is nn.Linear and mean_grads.out_features == 2
    for p, q in zip(rune.tree.leaves(mean_grads), rune.tree.leaves(plain)):
        close(p, a(q), 1e-6)
    assert type(dist.broadcast(model, root=0)) is nn.Linear
