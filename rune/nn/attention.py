"""`MultiHeadAttention` and the masks it takes."""
import math

import numpy as np

from .. import nx
from ..errors import DTypeError, ShapeError
from .linear import Linear
from .layer_helpers import split_keys
from .module import Module

__all__ = ["MultiHeadAttention"]


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
    allowed = nx.arange(lq)[:, None] >= nx.arange(lk)[None, :] if causal else None
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
        scores = nx.einsum("...qhd,...khd->...hqk", q, k) * (1.0 / math.sqrt(self.features // self.num_heads))
        allowed = _attention_mask(where, mask, key_mask, causal, batch, self.num_heads, x.shape[-2],
                                  context.shape[-2])
        if allowed is not None:
            scores = nx.where(allowed, scores, nx.finfo(scores.dtype).min)
        weights = nx.softmax(scores, axis=-1)
        out = nx.einsum("...hqk,...khd->...qhd", weights, v)
        return self.out_proj(nx.reshape(out, out.shape[:-2] + (self.features,)))

