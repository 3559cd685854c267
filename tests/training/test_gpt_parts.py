"""The pieces a GPT port needs beyond MultiHeadAttention: `nn.causal_mask`,
`nn.dot_product_attention` (attention over heads the caller projected itself)
and `Embedding.attend` (the output projection tied to the token embedding),
against NumPy float64 references and PyTorch's scaled_dot_product_attention."""
import numpy as np
import pytest

import rune
from rune import nn, nx
from rune.errors import DTypeError, ShapeError


def _np(x):
    return np.asarray(x, np.float64)


@pytest.mark.parametrize("lq, lk", [(4, 4), (3, 5), (5, 3), (1, 1)])
def test_causal_mask_is_the_lower_triangle(lq, lk):
    mask = nn.causal_mask(lq, lk)
    assert mask.dtype == nx.bool
    np.testing.assert_array_equal(np.asarray(mask), np.tril(np.ones((lq, lk), bool)))
    np.testing.assert_array_equal(np.asarray(nn.causal_mask(lq)), np.tril(np.ones((lq, lq), bool)))


def test_causal_mask_refuses_what_is_not_a_length():
    with pytest.raises(ShapeError, match=r"causal_mask: expected length_k a length \(an int >= 0\), got 2.5"):
        nn.causal_mask(3, 2.5)


def _reference_attention(q, k, v, allowed, scale):
    """softmax(q k^T * scale) v in float64, per batch and head, with a Python loop;
    hidden scores get -inf (a row with none allowed is not among the cases)."""
    q, k, v = _np(q), _np(k), _np(v)
    batch, lq, heads, _ = q.shape
    out = np.zeros_like(q)
    for b in range(batch):
        for h in range(heads):
            scores = q[b, :, h] @ k[b, :, h].T * scale
            scores = np.where(allowed[b, h], scores, -np.inf)
            weights = np.exp(scores - scores.max(-1, keepdims=True))
            out[b, :, h] = (weights / weights.sum(-1, keepdims=True)) @ v[b, :, h]
    return out


def _qkv(shape_q, shape_k, seed=0):
    keys = nx.random.split(nx.random.key(seed), 3)
    return (nx.random.normal(keys[0], shape_q), nx.random.normal(keys[1], shape_k),
            nx.random.normal(keys[2], shape_k))


def test_dot_product_attention_causal_and_masked_match_numpy():
    q, k, v = _qkv((2, 5, 3, 4), (2, 5, 3, 4))
    tril = np.tril(np.ones((5, 5), bool))
    everything = np.ones((2, 3, 5, 5), bool)
    np.testing.assert_allclose(_np(nn.dot_product_attention(q, k, v)),
                               _reference_attention(q, k, v, everything, 0.5), rtol=1e-5, atol=1e-6)
    causal = nn.dot_product_attention(q, k, v, causal=True)
    np.testing.assert_allclose(_np(causal), _reference_attention(q, k, v, everything & tril, 0.5),
                               rtol=1e-5, atol=1e-6)
    # a (batch, 1, 1, L_k) padding mask broadcast over heads and queries, with the causal one and a scale
    keep = np.array([[True] * 5, [True, True, True, False, False]])[:, None, None, :]
    out = nn.dot_product_attention(q, k, v, nx.asarray(keep), causal=True, scale=0.3)
    np.testing.assert_allclose(_np(out), _reference_attention(q, k, v, everything & tril & keep, 0.3),
                               rtol=1e-5, atol=1e-6)


def test_dot_product_attention_matches_torch_scaled_dot_product_attention():
    torch = pytest.importorskip("torch")
    q, k, v = _qkv((2, 6, 2, 8), (2, 6, 2, 8), seed=1)
    # torch's layout is (batch, heads, L, head_dim)
    t = [torch.tensor(np.asarray(a)).transpose(1, 2) for a in (q, k, v)]
    expected = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=True).transpose(1, 2).numpy()
    np.testing.assert_allclose(np.asarray(nn.dot_product_attention(q, k, v, causal=True)), expected,
                               rtol=1e-5, atol=1e-6)


def test_multi_head_attention_is_its_projections_around_dot_product_attention():
    layer = nn.MultiHeadAttention(nx.random.key(3), 2, 8)
    x = nx.random.normal(nx.random.key(4), (3, 5, 8))
    split = lambda t: nx.reshape(t, (3, 5, 2, 4))  # noqa: E731
    inner = nn.dot_product_attention(split(layer.q_proj(x)), split(layer.k_proj(x)), split(layer.v_proj(x)),
                                     causal=True)
    expected = layer.out_proj(nx.reshape(inner, (3, 5, 8)))
    np.testing.assert_array_equal(np.asarray(layer(x, causal=True)), np.asarray(expected))


def test_dot_product_attention_errors_name_the_shapes():
    q, k, v = _qkv((2, 5, 3, 4), (2, 5, 3, 4))
    with pytest.raises(ShapeError, match=r"of the same heads and head_dim, got query \(2, 5, 3, 4\), key "
                                         r"\(2, 5, 3, 2\)"):
        nn.dot_product_attention(q, k[..., :2], v[..., :2])
    with pytest.raises(ShapeError, match=r"broadcastable to \(\*batch, heads, L_q, L_k\) = \(2, 3, 5, 5\), "
                                         r"got bool\[2, 5\]"):
        nn.dot_product_attention(q, k, v, nx.ones((2, 5), nx.bool))
    with pytest.raises(DTypeError, match="mask"):
        nn.dot_product_attention(q, k, v, nx.ones((5, 5)))


def test_embedding_attend_is_the_product_with_the_transposed_table():
    table = nn.Embedding(nx.random.key(0), 7, 4)
    x = nx.random.normal(nx.random.key(1), (2, 3, 4))
    scores = table.attend(x)
    assert scores.shape == (2, 3, 7) and scores.dtype == nx.float32
    np.testing.assert_allclose(_np(scores), _np(x) @ _np(table.weight).T, rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match=r"Embedding\(num_embeddings=7, features=4\)\.attend: expected vectors "
                                         r"whose last axis is 4, got shape \(2, 5\)"):
        table.attend(nx.ones((2, 5)))


def test_tied_embedding_gradient_is_the_sum_of_lookup_and_read_out():
    """loss = sum(C * attend(lookup(ids))) with one table W: dL/dW is the read-out's
    C^T W[ids] plus the lookup's rows of C W scattered to their ids (a NumPy loop)."""
    table = nn.Embedding(nx.random.key(2), 6, 3)
    ids = np.array([[1, 4, 1], [0, 5, 2]], np.int32)
    c = np.asarray(nx.random.normal(nx.random.key(3), (2, 3, 6)))
    grad = rune.grad(lambda t: nx.sum(nx.asarray(c) * t.attend(t(nx.asarray(ids)))))(table)
    w, cc = _np(table.weight), c.astype(np.float64).reshape(-1, 6)
    rows = w[ids.reshape(-1)]
    expected = cc.T @ rows                      # through the read-out
    for i, token in enumerate(ids.reshape(-1)):  # through the lookup
        expected[token] += cc[i] @ w
    np.testing.assert_allclose(_np(grad.weight), expected, rtol=1e-5, atol=1e-5)


def test_embedding_attend_runs_under_the_policy_of_its_module():
    table = nn.Embedding(nx.random.key(4), 5, 8)
    x = nx.random.normal(nx.random.key(5), (3, 8))
    half = nn.Policy(param="float32", compute="bfloat16", output="float32").apply(table)
    scores = half.attend(x)
    assert scores.dtype == nx.float32
    rounded = lambda a: _np(nx.astype(nx.astype(a, nx.bfloat16), nx.float32))  # noqa: E731
    reference = rounded(x) @ rounded(table.weight).T   # bfloat16 operands, float32 sums, rounded once
    np.testing.assert_allclose(_np(scores), reference, rtol=1e-2, atol=1e-2)
    assert not np.array_equal(_np(scores), _np(table.attend(x)))   # it did run in bfloat16


def _np_layer_norm_and_grad(x, c, eps=1e-5):
    """LayerNorm over the last axis in float64, and the gradient of sum(c * LN(x)):
    (c - mean(c) - xhat * mean(c * xhat)) / sigma."""
    mean = x.mean(-1, keepdims=True)
    sigma = np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mean) / sigma
    grad = (c - c.mean(-1, keepdims=True) - xhat * (c * xhat).mean(-1, keepdims=True)) / sigma
    return xhat, grad


@pytest.mark.parametrize("compute", ["float16", "bfloat16"])
def test_layer_norm_of_a_small_residual_stream_has_finite_16_bit_gradients(compute):
    """A GPT's residual stream at initialisation (std ~0.02, variance ~4e-4): in float16
    the backward pass through rsqrt(var + eps) overflowed (var^-1.5 > 65504) and every
    gradient before the final LayerNorm was NaN. The statistics now run in float32."""
    norm = nn.Policy(param="float32", compute=compute, output="float32").apply(nn.LayerNorm(64))
    x = nx.astype(nx.random.normal(nx.random.key(6), (4, 64)) * 0.02, compute)
    c = nx.random.normal(nx.random.key(7), (4, 64))
    value, grad = rune.value_and_grad(lambda x: nx.sum(c * norm(x)))(x)
    expected, expected_grad = _np_layer_norm_and_grad(_np(x), _np(c))
    np.testing.assert_allclose(float(value), float(np.sum(_np(c) * expected)), rtol=2e-2, atol=0.1)
    assert grad.dtype == nx.dtype(compute) and np.isfinite(_np(grad)).all()
    np.testing.assert_allclose(_np(grad), expected_grad, rtol=3e-2, atol=0.05 * np.abs(expected_grad).max())


def test_rms_norm_of_large_float16_values_does_not_overflow():
    """Squares of float16 values past 256 overflow (65504): in float16 RMSNorm gave 0."""
    x = nx.asarray(np.array([[300.0, -400.0, 500.0, 100.0]], np.float16))
    out = nn.Policy(compute="float16", output="float32").apply(nn.RMSNorm(4))(x)
    xd = _np(x)
    np.testing.assert_allclose(_np(out), xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + 1e-6), rtol=2e-3)


def test_batch_norm_in_float16_has_finite_gradients_and_no_overflow():
    """BatchNorm had the same float16 defects: NaN gradients for small variances,
    and 0 for values past 256 (their squares overflow). Its statistics now run in float32."""
    norm = nn.Policy(param="float32", compute="float16", output="float32").apply(nn.BatchNorm(8))
    c = nx.random.normal(nx.random.key(9), (64, 8))

    def loss(x):
        out, new = nn.apply(norm, x)   # training mode: the batch's statistics, and the running ones updated
        return nx.sum(c * out), new

    for std in (0.02, 300.0):
        x = nx.astype(nx.random.normal(nx.random.key(8), (64, 8)) * std, nx.float16)
        (value, new), grad = rune.value_and_grad(loss, has_aux=True)(x)
        # over the batch axis: the layer norm of each channel's column
        expected, expected_grad = (a.T for a in _np_layer_norm_and_grad(_np(x).T, _np(c).T))
        np.testing.assert_allclose(float(value), float(np.sum(_np(c) * expected)), rtol=2e-2, atol=0.2)
        assert np.isfinite(_np(grad)).all()
        np.testing.assert_allclose(_np(grad) * std, expected_grad * std, rtol=3e-2,
                                   atol=0.05 * np.abs(expected_grad * std).max())
        assert new.running_mean.dtype == nx.float32
        np.testing.assert_allclose(_np(new.running_mean), 0.01 * _np(x).mean(0), rtol=1e-2, atol=1e-3 * std)
