"""`MultiHeadAttention`, the masks it takes, and its parts: `dot_product_attention`
(softmax(q k^T / sqrt(d)) v over heads, as `jax.nn.dot_product_attention` and
PyTorch's `scaled_dot_product_attention`) and `causal_mask`, for models that
project queries, keys and values their own way (GPT's one fused (d, 3d) matrix)."""
import math

import numpy as np

from .. import nx
from ..errors import DTypeError, ShapeError
from .linear import Linear
from .layer_helpers import split_keys
from .module import Module

__all__ = ["MultiHeadAttention", "causal_mask", "dot_product_attention"]


def causal_mask(length_q, length_k=None):
    """A bool (length_q, length_k) mask, True where query i may attend to key j,
    that is j <= i (length_k defaults to length_q): the lower triangle, as
    `torch.tril(torch.ones(L_q, L_k, dtype=bool))` and PyTorch's `is_causal=True`.
    It goes to `mask=` of `dot_product_attention` and `MultiHeadAttention`."""
    length_q = _length("causal_mask", "length_q", length_q)
    length_k = length_q if length_k is None else _length("causal_mask", "length_k", length_k)
    return nx.arange(length_q)[:, None] >= nx.arange(length_k)[None, :]


def _length(where, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ShapeError(f"{where}: expected {name} a length (an int >= 0), got {value!r}")
    return int(value)


def dot_product_attention(query, key, value, mask=None, *, causal=False, scale=None):
    """softmax(q k^T * scale) v, per head: query (*batch, L_q, heads, head_dim), key
    and value (*batch, L_k, heads, head_dim) (`jax.nn.dot_product_attention`'s
    layout) give (*batch, L_q, heads, head_dim). scale defaults to
    1 / sqrt(head_dim). mask: bools broadcastable to (*batch, heads, L_q, L_k), True
    where a query may attend to a key; causal=True also hides the later keys
    (`causal_mask`). A query whose keys are all hidden gets the mean of the values
    (its scores are all the same lowest finite number), not NaN. The arithmetic
    runs in the inputs' dtype (bfloat16 under a bfloat16 policy)."""
    where = "dot_product_attention"
    query, key, value = nx.asarray(query), nx.asarray(key), nx.asarray(value)
    if query.ndim < 3 or key.ndim < 3 or key.shape != value.shape or key.shape[-2:] != query.shape[-2:]:
        raise ShapeError(f"{where}: expected query (*batch, L_q, heads, head_dim) and key, value (*batch, L_k, "
                         f"heads, head_dim) of the same heads and head_dim, got query {query.shape}, key "
                         f"{key.shape}, value {value.shape}")
    lq, lk = query.shape[-3], key.shape[-3]
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    scores = nx.einsum("...qhd,...khd->...hqk", query, key) * scale
    allowed = causal_mask(lq, lk) if causal else None
    if mask is not None:
        mask = _bool_mask(where, "mask", mask, "broadcastable to (*batch, heads, L_q, L_k)")
        try:
            np.broadcast_shapes(mask.shape, scores.shape)
        except ValueError:
            raise ShapeError(f"{where}: expected mask= bools broadcastable to (*batch, heads, L_q, L_k) = "
                             f"{scores.shape}, got bool{list(mask.shape)}") from None
        allowed = mask if allowed is None else nx.logical_and(allowed, mask)
    if allowed is not None:
        scores = nx.where(allowed, scores, nx.finfo(scores.dtype).min)
    weights = nx.softmax(scores, axis=-1)
    return nx.einsum("...hqk,...khd->...qhd", weights, value)


def _mask_forms(batch, heads, lq, lk):
    """{ndim: (name, shape)} of the masks `mask=` takes, decided by the number of
    axes alone (never by comparing sizes: a (batch, L_k) padding mask and an
    (L_q, L_k) one have the same rank, and batch == L_q happens)."""
    nb = len(batch)
    return {nb + 3: ("(*batch, num_heads, L_q, L_k)", batch + (heads, lq, lk)),
            nb + 2: ("(*batch, L_q, L_k)", batch + (lq, lk)),
            2: ("(L_q, L_k)", (lq, lk))}


def _fits(shape, expected):
    return len(shape) == len(expected) and all(n in (1, e) for n, e in zip(shape, expected))


def _bool_mask(where, argument, mask, accepted):
    mask = nx.asarray(mask)
    if mask.dtype != nx.bool:
        raise DTypeError(f"{where}: expected {argument}= a bool mask of shape {accepted}, "
                         f"got {nx.dtype(mask.dtype).name}{list(mask.shape)}")
    return mask


def _attention_mask(where, mask, key_mask, causal, batch, heads, lq, lk):
    """Which scores stay, broadcastable to (*batch, num_heads, L_q, L_k), or None."""
    allowed = causal_mask(lq, lk) if causal else None
    if mask is not None:
        forms = _mask_forms(batch, heads, lq, lk)
        accepted = " or ".join(f"{name} = {shape}" for name, shape in reversed(forms.values()))
        mask = _bool_mask(where, "mask", mask, accepted)
        form = forms.get(mask.ndim)
        if form is None or not _fits(mask.shape, form[1]):
            raise ShapeError(f"{where}: expected mask= a bool mask of shape {accepted} (an axis of 1 broadcasts), "
                             f"got bool{list(mask.shape)}; a (*batch, L_k) padding mask of the keys goes in "
                             f"key_mask=")
        if mask.ndim == len(batch) + 2 and batch:
            mask = mask[..., None, :, :]   # one mask for every head
        allowed = mask if allowed is None else nx.logical_and(allowed, mask)
    if key_mask is not None:
        expected = batch + (lk,)
        accepted = f"(*batch, L_k) = {expected}"
        key_mask = _bool_mask(where, "key_mask", key_mask, accepted)
        if not _fits(key_mask.shape, expected):
            raise ShapeError(f"{where}: expected key_mask= a bool mask of shape {accepted} (an axis of 1 "
                             f"broadcasts), got bool{list(key_mask.shape)}")
        key_mask = key_mask[..., None, None, :]   # every head and every query
        allowed = key_mask if allowed is None else nx.logical_and(allowed, key_mask)
    return allowed


class MultiHeadAttention(Module):
    """Scaled dot-product attention over `num_heads` heads (Vaswani et al. 2017):
    softmax(q k^T / sqrt(head_dim)) v per head, with q from `x` (*batch, L_q,
    features) and k, v from `context` (*batch, L_k, context_features; default: x,
    self-attention), then an output projection back to `features`.

    Masks are bools, True where a query may attend to a key; `causal=True` also
    hides the later positions. `mask=` takes, told apart by its number of axes:
      (L_q, L_k)                        the same for every example and head;
      (*batch, L_q, L_k)                one per example, the same for every head;
      (*batch, num_heads, L_q, L_k)     one per example and head (Flax's form);
    any axis may be 1 to broadcast (Flax and Hugging Face's (B, 1, L_q, L_k)).
    `key_mask=` takes (*batch, L_k): which keys are real tokens (True) and which
    are padding (False), for every query and head. It is the complement of
    PyTorch's `key_padding_mask` (True there marks padding). Any other shape is a
    ShapeError: a 2-d mask is always (L_q, L_k), never guessed to be a
    (batch, L_k) padding mask from its sizes.
    """
    q_proj: Linear
    k_proj: Linear
    v_proj: Linear
    out_proj: Linear
    num_heads: int
    features: int

    def __init__(self, key, num_heads, features, context_features=None, use_bias=True, dtype=nx.float32):
        if features % num_heads:
            raise ShapeError(f"MultiHeadAttention: features {features} must divide by num_heads {num_heads}")
        context_features = features if context_features is None else context_features
        kq, kk, kv, ko = split_keys(key, 4)
        self.num_heads, self.features = int(num_heads), int(features)
        self.q_proj = Linear(kq, features, features, use_bias, dtype)
        self.k_proj = Linear(kk, context_features, features, use_bias, dtype)
        self.v_proj = Linear(kv, context_features, features, use_bias, dtype)
        self.out_proj = Linear(ko, features, features, use_bias, dtype)

    def __call__(self, x, context=None, *, mask=None, key_mask=None, causal=False):
        x = nx.asarray(x)
        context = x if context is None else nx.asarray(context)
        where = f"MultiHeadAttention(num_heads={self.num_heads}, features={self.features})"
        if x.ndim < 2 or x.shape[-1] != self.features:
            raise ShapeError(f"{where}: expected queries (..., length, {self.features}), got shape {x.shape}")
        if context.ndim < 2 or context.shape[-1] != self.k_proj.in_features:
            raise ShapeError(f"{where}: expected a context (..., length, {self.k_proj.in_features}), "
                             f"got shape {context.shape}")
        try:
            batch = tuple(np.broadcast_shapes(x.shape[:-2], context.shape[:-2]))
        except ValueError:
            raise ShapeError(f"{where}: the batch axes of the queries {x.shape} and the context "
                             f"{context.shape} do not broadcast") from None
        heads = lambda t: nx.reshape(t, t.shape[:-1] + (self.num_heads, self.features // self.num_heads))  # noqa: E731
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(context)), heads(self.v_proj(context))
        allowed = _attention_mask(where, mask, key_mask, causal, batch, self.num_heads, x.shape[-2],
                                  context.shape[-2])
        out = dot_product_attention(q, k, v, allowed)
        return self.out_proj(nx.reshape(out, out.shape[:-2] + (self.features,)))

