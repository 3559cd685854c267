"""rune.nn layers at their edges: the mask shapes MultiHeadAttention takes
(against attention written out in NumPy), inputs of another dtype than the
layer's parameters, and field names that would collide with the Module machinery."""
import numpy as np
import pytest

import rune
from rune import nn, nx

KEY = nx.random.key(3)
RNG = np.random.default_rng(7)


def a(x):
    return np.asarray(x, np.float64)


def np_attention(m, x, ctx, allowed):
    """Multi-head attention in float64 with a full (B, H, L_q, L_k) bool mask."""
    H = m.num_heads
    lin = lambda l, t: t @ a(l.weight) + a(l.bias)  # noqa: E731
    q, k, v = lin(m.q_proj, x), lin(m.k_proj, ctx), lin(m.v_proj, ctx)
    D = q.shape[-1] // H
    split = lambda t: t.reshape(t.shape[:-1] + (H, D))  # noqa: E731
    s = np.einsum("bqhd,bkhd->bhqk", split(q), split(k)) / np.sqrt(D)
    s = np.where(allowed, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bkhd->bqhd", w, split(v))
    return lin(m.out_proj, o.reshape(o.shape[:-2] + (H * D,)))


B, H, LQ, LK, F = 4, 2, 4, 6, 8      # batch == L_q: the case a padding mask was misread in


def _masks():
    """(name, mask=, key_mask=, causal, the full (B, H, L_q, L_k) mask they mean)."""
    pad = RNG.random((B, LK)) < 0.6
    pad[:, 0] = True                                  # every query sees a key
    per_head = RNG.random((B, H, LQ, LK)) < 0.6
    per_head[..., 0] = True
    per_example = per_head[:, 0]
    shared = per_head[0, 0]
    causal = np.tril(np.ones((LQ, LK), bool))
    full = lambda m: np.broadcast_to(m, (B, H, LQ, LK))  # noqa: E731
    return [
        ("key padding", None, pad, False, full(pad[:, None, None, :])),
        ("(L_q, L_k)", shared, None, False, full(shared)),
        ("(B, L_q, L_k)", per_example, None, False, full(per_example[:, None])),
        ("(B, H, L_q, L_k)", per_head, None, False, per_head),
        ("(B, 1, L_q, L_k)", per_example[:, None], None, False, full(per_example[:, None])),
        ("all at once", per_example[:, None], pad, True,
         full(per_example[:, None]) & full(pad[:, None, None, :]) & causal),
    ]


@pytest.mark.parametrize("case", _masks(), ids=lambda c: c[0])
def test_attention_masks_of_each_accepted_shape_match_numpy(case):
    _, mask, key_mask, causal, allowed = case
    mha = nn.MultiHeadAttention(KEY, H, F, context_features=5)
    x = RNG.normal(size=(B, LQ, F)).astype(np.float32)
    ctx = RNG.normal(size=(B, LK, 5)).astype(np.float32)
    got = mha(nx.asarray(x), nx.asarray(ctx), causal=causal,
              mask=None if mask is None else nx.asarray(mask),
              key_mask=None if key_mask is None else nx.asarray(key_mask))
    assert got.shape == (B, LQ, F)
    np.testing.assert_allclose(a(got), np_attention(mha, a(x), a(ctx), allowed), rtol=1e-5, atol=1e-5)


def test_attention_masks_of_other_shapes_are_errors_naming_the_argument_and_the_shapes():
    mha = nn.MultiHeadAttention(KEY, 2, 8)
    x = nx.ones((3, 4, 8))                              # batch 3, L_q = L_k = 4
    # a PyTorch-style (batch, L_k) padding mask given as mask=: refused, pointed to key_mask=
    with pytest.raises(rune.ShapeError, match=r"mask=.*\(L_q, L_k\) = \(4, 4\).*\(\*batch, num_heads, L_q, L_k\) = "
                                              r"\(3, 2, 4, 4\).*got bool\[3, 4\].*key_mask="):
        mha(x, mask=nx.ones((3, 4), nx.bool))
    with pytest.raises(rune.ShapeError, match=r"mask=.*got bool\[1, 3, 2, 4, 4\]"):
        mha(x, mask=nx.ones((1, 3, 2, 4, 4), nx.bool))
    with pytest.raises(rune.ShapeError, match=r"mask=.*got bool\[3, 3, 4, 4\]"):   # heads 3, not 2
        mha(x, mask=nx.ones((3, 3, 4, 4), nx.bool))
    with pytest.raises(rune.ShapeError, match=r"key_mask=.*\(\*batch, L_k\) = \(3, 4\).*got bool\[4\]"):
        mha(x, key_mask=nx.ones((4,), nx.bool))
    with pytest.raises(rune.DTypeError, match=r"key_mask=.*bool mask.*int32\[3, 4\]"):
        mha(x, key_mask=nx.ones((3, 4), nx.int32))
    # unbatched queries take (L_q, L_k) and (num_heads, L_q, L_k)
    one = nx.asarray(RNG.normal(size=(4, 8)).astype(np.float32))
    head_mask = np.tril(np.ones((2, 4, 4), bool))
    np.testing.assert_allclose(a(mha(one, mask=nx.asarray(head_mask))),
                               a(mha(one[None], mask=nx.asarray(head_mask[None])))[0], rtol=1e-6, atol=1e-6)


def test_layers_compute_in_their_parameter_dtype_whatever_the_input_dtype():
    lin = nn.Linear(KEY, 5, 3)
    ids = RNG.integers(-4, 5, (2, 5)).astype(np.int64)
    got = lin(nx.asarray(ids))
    assert got.dtype == np.float32
    want = ids.astype(np.float32) @ np.asarray(lin.weight) + np.asarray(lin.bias)   # NumPy in float32
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
    assert rune.jit(lambda m, x: m(x))(lin, nx.asarray(ids)).dtype == np.float32
    data = RNG.normal(size=(2, 5))                                                  # float64 data
    assert lin(nx.asarray(data)).dtype == np.float32
    np.testing.assert_allclose(np.asarray(lin(nx.asarray(data))),
                               data.astype(np.float32) @ np.asarray(lin.weight) + np.asarray(lin.bias),
                               rtol=1e-6, atol=1e-6)
    # the gradient with respect to the input keeps the input's dtype
    assert rune.grad(lambda x: nx.sum(lin(x)))(nx.asarray(data)).dtype == np.float64

    conv = nn.Conv(KEY, 2, 3, (2, 2), padding="VALID")
    image = RNG.integers(0, 3, (1, 3, 3, 2)).astype(np.int32)
    got = conv(nx.asarray(image))
    assert got.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(conv(nx.asarray(image.astype(np.float32)))),
                               rtol=1e-6, atol=1e-6)
    for norm in (nn.LayerNorm(4), nn.RMSNorm(4)):
        counts = nx.asarray(np.array([[1, 2, 3, 4]], np.int32))
        out = norm(counts)
        assert out.dtype == np.float32
        np.testing.assert_array_equal(np.asarray(out), np.asarray(norm(nx.astype(counts, nx.float32))))
    # under a policy the inputs meet the parameters in the compute dtype
    half = nn.Policy(compute="float16", output="float16").apply(lin)
    assert half(nx.asarray(ids)).dtype == np.float16
    with pytest.raises(rune.DTypeError, match=r"Linear\(in_features=5, out_features=3\).*real input.*complex64"):
        lin(nx.ones((2, 5), nx.complex64))


@pytest.mark.parametrize("name,why", [("policy", "property"), ("replace", "method"), ("_children", "machinery")])
def test_a_field_named_like_the_module_machinery_is_refused_when_the_class_is_defined(name, why):
    with pytest.raises(rune.UsageError, match=rf"Agent: a field cannot be named '{name}'.*{why}.*rename"):
        type("Agent", (nn.Module,), {"__annotations__": {name: object, "value": object}})
    class Agent(nn.Module):            # the same model with its field renamed works
        policy_net: nn.Linear

        def __call__(self, x):
            return self.policy_net(x)
    agent = Agent(nn.Linear(KEY, 2, 2))
    assert agent(nx.ones((2,))).shape == (2,) and agent.policy is None
