"""Derivative and batching rules of `conv` and `reduce_window` (rune/nx/conv.py).

conv: linear in each operand; the cotangent of the input is a conv of the
cotangent with the flipped kernel (strides become lhs dilation), that of the
kernel a conv of the input with the cotangent (strides become kernel
dilation): JAX's `_conv_general_dilated_transpose_lhs/rhs`, written for the
grouped-first layout where every group is an ordinary conv.

reduce_window: each window's elements are read as an array with a window axis
for every axis — by a reshape when the windows tile the operand (pooling:
(c0, k0, c1, k1, ...)), else through a static index table (built with NumPy
from the shapes: (*out, *window)) — so the
tangent of a max is the tangent of the element(s) attaining it, ties sharing
equally as for `reduce_max`, and cotangents are written back (the inverse
reshape, or one scatter-add). Tiling windows of a few elements (2x2 pooling)
count their ties offset by offset instead (a strided slice each, elementwise
over the output) and divide each window's cotangent once: one kernel over the
output, one over the input, where a reduction over the interleaved window
axes would run a short inner loop per output. Those are ordinary nx
operations, so higher derivatives, jit and vmap of the rules come for free.
"""

import itertools
import math

import numpy as np

from .autodiff.jvp import jvp_rules
from .autodiff.vjp import vjp_rules
from .codegen.windows import dilate_pad, windows
from .batching import batch_rules, to_front
from .core.prims import P
from .core.trace import bind
from .nx import ops as nx
from .codegen.windows import dilate, window_count
from .nx.conv import conv_p, reduce_window_p
from .nx.creation import zeros, zeros_like


# ---------------------------------------------------------------- conv

def _sum_terms(terms):
    terms = [t for t in terms if t is not None]
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else nx.add(*terms)


def _conv_jvp(primals, tangents, **params):
    (x, w), (tx, tw) = primals, tangents
    out = bind(conv_p, x, w, **params)
    return out, _sum_terms([None if tx is None else bind(conv_p, tx, w, **params),
                            None if tw is None else bind(conv_p, x, tw, **params)])


def _conv_vjp(ct, ins, out, wants, *, strides, padding, lhs_dilation, rhs_dilation):
    x, w = ins
    if 0 in ct.shape or 0 in x.shape or 0 in w.shape:
        return tuple(zeros_like(v) if want else None for v, want in zip(ins, wants))
    nd = x.ndim - 3
    geometry = list(zip(x.shape[2:-1], w.shape[1:-2], ct.shape[2:-1], strides, padding,
                        lhs_dilation, rhs_dilation))
    ct_x = ct_w = None
    if wants[0]:
        pads = []
        for n, k, o, s, (lo, _), ld, rd in geometry:
            before = dilate(k, rd) - lo - 1
            pads.append((before, dilate(n, ld) + dilate(k, rd) - 1 - dilate(o, s) - before))
        # (G, *K, C, O) flipped in space, with in and out channels exchanged
        kernel = nx.swapaxes(nx.flip(w, tuple(range(1, 1 + nd))), -1, -2)
        ct_x = bind(conv_p, ct, kernel, strides=lhs_dilation, padding=tuple(pads),
                    lhs_dilation=strides, rhs_dilation=rhs_dilation)
    if wants[1]:
        pads = tuple((lo, dilate(o, s) - dilate(n, ld) + dilate(k, rd) - lo - 1)
                     for n, k, o, s, (lo, _), ld, rd in geometry)
        # Channels become the batch and examples the contracted features:
        # (G, C, *S, N) with the cotangent as kernel (G, *S_out, N, O) gives (G, C, *K, O).
        ct_w = bind(conv_p, nx.swapaxes(x, 1, -1), nx.moveaxis(ct, 1, -2), strides=rhs_dilation,
                    padding=pads, lhs_dilation=lhs_dilation, rhs_dilation=strides)
        ct_w = nx.moveaxis(ct_w, 1, -2)
    return ct_x, ct_w


def _conv_batch(values, dims, size, **params):
    (x, w), (dx, dw) = values, dims
    if dx is not None and dw is not None:
        # Every lane is its own set of groups: fold the batch into G.
        x, w = to_front(x, dx), to_front(w, dw)
        out = bind(conv_p, nx.reshape(x, (size * x.shape[1],) + x.shape[2:]),
                   nx.reshape(w, (size * w.shape[1],) + w.shape[2:]), **params)
        return nx.reshape(out, (size, x.shape[1]) + out.shape[1:]), 0
    if dx is not None:
        # The lanes are more examples: fold the batch into N.
        x = nx.moveaxis(x, dx, 1)                                 # (G, B, N, ...)
        out = bind(conv_p, nx.reshape(x, (x.shape[0], size * x.shape[2]) + x.shape[3:]), w, **params)
        return nx.reshape(out, (out.shape[0], size, x.shape[2]) + out.shape[2:]), 1
    # The lanes are more output channels: fold the batch into O.
    w = nx.moveaxis(w, dw, -2)                                    # (G, *K, C, B, O)
    out = bind(conv_p, x, nx.reshape(w, w.shape[:-2] + (size * w.shape[-1],)), **params)
    out = nx.reshape(out, out.shape[:-1] + (size, w.shape[-1]))
    return out, out.ndim - 2


jvp_rules[conv_p] = _conv_jvp
vjp_rules[conv_p] = _conv_vjp
batch_rules[conv_p] = _conv_batch


# ---------------------------------------------------------------- reduce_window

class _Indexed:
    """Windows read through a static index table: for every window position and
    offset, the flat index of the element of x it reads, or x.size for padding
    (out of bounds: gathers clamp it and it is masked, scatters drop it)."""

    def __init__(self, x, window, strides, padding, counts):
        shape, size = x.shape, x.size
        axes = tuple(range(len(shape)))
        flat = np.arange(size, dtype=np.int64).reshape(shape)
        padded = dilate_pad(flat, axes, (1,) * len(shape), padding, size)
        table = windows(padded, axes, window, strides, (1,) * len(shape), counts)
        table = np.ascontiguousarray(table).astype(np.int32 if size < 2 ** 31 - 1 else np.int64)
        self.x, self.shape = x, table.shape
        self.window_axes = tuple(range(len(shape), 2 * len(shape)))
        self.table = nx.constant_like(table, x)
        self.real = nx.constant_like(table < size, x)

    def expand(self, v):
        """v, shaped like the output, with a unit axis for each window axis."""
        return nx.reshape(v, v.shape + (1,) * v.ndim)

    def read(self, v):
        """v (shaped like x) at each window entry: (*out, *window)."""
        return bind(P["gather"], nx.reshape(v, (-1,)), self.table, axis=0)

    def write(self, values):
        """The sum into x's positions of values laid out (*out, *window)."""
        flat = bind(P["scatter"], zeros((self.x.size,), values.dtype, self.x.device), self.table, values,
                    axis=0, mode="add")
        return nx.reshape(flat, self.x.shape)


class _Tiled:
    """Windows that tile x (strides equal to the window, no padding): reading them
    is a reshape to (c0, k0, c1, k1, ...), each window axis after its position
    axis, and writing back is the inverse reshape (zeros where no window
    reaches). No transpose: the elementwise work of the rules then runs over
    x's own memory order."""

    def __init__(self, x, window, counts):
        self.x, self.window, self.counts = x, window, counts
        self.used = tuple(c * k for c, k in zip(counts, window))
        self.shape = tuple(d for pair in zip(counts, window) for d in pair)
        self.window_axes = tuple(range(1, 2 * len(window), 2))
        self.real = None

    def expand(self, v):
        """v, shaped like the output, with a unit axis after each position axis."""
        return nx.reshape(v, tuple(d for c in v.shape for d in (c, 1)))

    def read(self, v):
        if self.used != self.x.shape:
            v = nx._slice(v, [0] * v.ndim, self.used, [1] * v.ndim)
        return nx.reshape(v, self.shape)

    def write(self, values):
        back = nx.reshape(values, self.used)
        if self.used != self.x.shape:
            back = nx.pad(back, [(0, d - u) for d, u in zip(self.x.shape, self.used)])
        return back

    def offsets(self, v):
        """v (shaped like x) at each window offset: one strided slice per offset,
        each shaped like the output."""
        return [nx._slice(v, offset, tuple(o + (c - 1) * k + 1 for o, c, k in zip(offset, self.counts, self.window)),
                          self.window)
                for offset in itertools.product(*(range(k) for k in self.window))]


def _windows(x, window, strides, padding):
    counts = tuple(window_count(n, k, s, lo, hi) for n, k, s, (lo, hi) in zip(x.shape, window, strides, padding))
    if strides == window and all(p == (0, 0) for p in padding):
        return _Tiled(x, window, counts)
    return _Indexed(x, window, strides, padding, counts)


# Up to this many elements per tiling window, a max's ties are counted offset by
# offset (see the module docstring); larger windows reduce over their window axes.
_FEW_OFFSETS = 16


def _by_offsets(wins):
    return isinstance(wins, _Tiled) and math.prod(wins.window) <= _FEW_OFFSETS


def _tie_count(x, out, wins):
    """How many elements of each window attain its max (at least 1: a NaN window has none)."""
    hits = [nx.astype(nx.equal(part, out), x.dtype) for part in wins.offsets(x)]
    count = hits[0]
    for h in hits[1:]:
        count = nx.add(count, h)
    return nx.maximum(count, x.dtype.type(1))


def _max_weights(x, out, wins):
    """1 / (how many attain the max) at the entries that attain it, 0 elsewhere."""
    hits = nx.equal(wins.read(x), wins.expand(out))
    if wins.real is not None:
        hits = nx.logical_and(wins.real, hits)
    hits = nx.astype(hits, x.dtype)
    count = nx.maximum(nx.sum(hits, wins.window_axes, keepdims=True), x.dtype.type(1))
    return nx.divide(hits, count)


def _reduce_window_jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    out = bind(reduce_window_p, x, **params)
    if t is None:
        return out, None
    if params["op"] == "sum" or 0 in x.shape or 0 in out.shape:
        return out, bind(reduce_window_p, t, **params)
    wins = _windows(x, params["window"], params["strides"], params["padding"])
    if _by_offsets(wins):
        # the mean of the tied elements' tangents
        total = None
        for xs, ts in zip(wins.offsets(x), wins.offsets(t)):
            term = nx.where(nx.equal(xs, out), ts, zeros_like(ts))
            total = term if total is None else nx.add(total, term)
        return out, nx.divide(total, _tie_count(x, out, wins))
    weighted = nx.multiply(wins.read(t), _max_weights(x, out, wins))
    return out, nx.sum(weighted, wins.window_axes)


def _reduce_window_vjp(ct, ins, out, wants, *, op, window, strides, padding):
    x = ins[0]
    if 0 in x.shape or 0 in ct.shape:
        return (zeros_like(x),)
    wins = _windows(x, window, strides, padding)
    if op == "max" and _by_offsets(wins):
        # each window's cotangent shared by its tied maxima: divided once per window,
        # then selected where an element equals its window's max
        share = nx.broadcast_to(wins.expand(nx.divide(ct, _tie_count(x, out, wins))), wins.shape)
        hits = nx.equal(wins.read(x), nx.broadcast_to(wins.expand(out), wins.shape))
        return (wins.write(nx.where(hits, share, zeros_like(share))),)
    spread = nx.broadcast_to(wins.expand(ct), wins.shape)
    if op == "max":
        spread = nx.multiply(spread, _max_weights(x, out, wins))
    return (wins.write(spread),)


def _reduce_window_batch(values, dims, size, *, op, window, strides, padding):
    x = to_front(values[0], dims[0])
    return bind(reduce_window_p, x, op=op, window=(1,) + window, strides=(1,) + strides,
                padding=((0, 0),) + padding), 0


jvp_rules[reduce_window_p] = _reduce_window_jvp
vjp_rules[reduce_window_p] = _reduce_window_vjp
batch_rules[reduce_window_p] = _reduce_window_batch
