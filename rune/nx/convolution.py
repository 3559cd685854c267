"""Convolution and windowed reductions (pooling): two primitives, all their
rules, and the `nx` functions that bind them.

`conv` is `lax.conv_general_dilated` with the feature groups made an explicit
leading axis: x (G, N, *spatial, C) and w (G, *window, C, O) give
(G, N, *out, O), one ungrouped convolution per group. That one form is closed
under every rule: the derivative with respect to either operand is again a
conv of this form (JAX's transposition formulas, with lhs dilation for
strides), and vmap folds a batch into N, into O or into G. `nx.conv` maps the
user's NHWC input and HWIO kernel with `feature_group_count` onto it.

`reduce_window` reduces each window of an operand with "max" or "sum" (the
padding holds the reduction's identity). Both are library calls to a backend
(im2col and a matmul; strided views; rune/backends/cpu/conv.py), never fused
elementwise work.

conv's rules: linear in each operand; the cotangent of the input is a conv of
the cotangent with the flipped kernel (strides become lhs dilation), that of
the kernel a conv of the input with the cotangent (strides become kernel
dilation): JAX's `_conv_general_dilated_transpose_lhs/rhs`, written for the
grouped-first layout where every group is an ordinary conv.

reduce_window's rules: each window's elements are read as an array with a
window axis for every axis — by a reshape when the windows tile the operand
(pooling: (c0, k0, c1, k1, ...)), else through a static index table (built
with NumPy from the shapes: (*out, *window)) — so the tangent of a max is the
tangent of the element(s) attaining it, ties sharing equally as for
`reduce_max`, and cotangents are written back (the inverse reshape, or one
scatter-add). Tiling windows of a few elements (2x2 pooling) count their ties
offset by offset instead (a strided slice each, elementwise over the output)
and divide each window's cotangent once: one kernel over the output, one over
the input, where a reduction over the interleaved window axes would run a
short inner loop per output. Those are ordinary nx operations, so higher
derivatives, jit and vmap of the rules come for free.
"""
import itertools
import math

import numpy as np

from ..base.tuning import POOL_TIE_FEW_OFFSETS
from ..core.aval import Aval
from ..core.prims import P
from ..core.primitive import (Lowering, abstract_rules, batch_rules, declare_lowering, jvp_rules, primitive,
                              vjp_rules)
from ..core.trace import bind, common_device
from ..codegen.windows import dilate, dilate_pad, window_count, windows
from ..errors import ArgumentError, DTypeError, ShapeError
from . import ops
from .creation import zeros, zeros_like
from .rule_helpers import sum_terms, to_front

conv_p = declare_lowering(primitive("conv"), Lowering.LIBRARY)
reduce_window_p = declare_lowering(primitive("reduce_window"), Lowering.LIBRARY)
REDUCERS = ("max", "sum")


# ---------------------------------------------------------------- abstract rules

def _conv_abstract(x, w, *, strides, padding, lhs_dilation, rhs_dilation):
    device = common_device(conv_p, (x, w))
    spatial = tuple(window_count(n, k, s, lo, hi, ld, rd) for n, k, s, (lo, hi), ld, rd in
                    zip(x.shape[2:-1], w.shape[1:-2], strides, padding, lhs_dilation, rhs_dilation))
    return Aval(x.shape[:2] + spatial + (w.shape[-1],), x.dtype, device)


def _reduce_window_abstract(x, *, op, window, strides, padding):
    shape = tuple(window_count(n, k, s, lo, hi) for n, k, s, (lo, hi) in zip(x.shape, window, strides, padding))
    return x.update(shape=shape)


abstract_rules[conv_p] = _conv_abstract
abstract_rules[reduce_window_p] = _reduce_window_abstract


# ---------------------------------------------------------------- argument handling

def _ints(name, what, value, n, default):
    if value is None:
        return (default,) * n
    value = (value,) * n if isinstance(value, int) else tuple(value)
    if len(value) != n or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in value):
        raise ShapeError(f"{name}: {what} must be {n} positive integers, got {value}")
    return tuple(int(v) for v in value)


def pads(name, padding, sizes, windows, strides, dilations=None):
    """Explicit (lo, hi) pairs from "VALID", "SAME" (output size ceil(n / stride),
    the extra padding after, as lax.padtype_to_pads), one int for every side, or
    one int or (lo, hi) pair per axis."""
    n = len(sizes)
    dilations = dilations or (1,) * n
    if isinstance(padding, str):
        kind = padding.upper()
        if kind == "VALID":
            return ((0, 0),) * n
        if kind == "SAME":
            out = []
            for size, k, s, d in zip(sizes, windows, strides, dilations):
                total = max((-(-size // s) - 1) * s + dilate(k, d) - size, 0)
                out.append((total // 2, total - total // 2))
            return tuple(out)
        raise ArgumentError(f"{name}: padding must be 'VALID', 'SAME' or (low, high) pairs, got {padding!r}")
    if isinstance(padding, (int, np.integer)):
        padding = ((int(padding), int(padding)),) * n
    pairs = tuple((int(p), int(p)) if isinstance(p, (int, np.integer)) else tuple(int(v) for v in p)
                  for p in padding)
    if len(pairs) != n or any(len(p) != 2 for p in pairs):
        raise ShapeError(f"{name}: padding needs one (low, high) pair per spatial axis ({n}), got {padding}")
    return pairs


# ---------------------------------------------------------------- conv

def conv(x, w, strides=None, padding="VALID", dilation=None, feature_group_count=1, lhs_dilation=None):
    """N-d convolution (cross-correlation, as lax.conv_general_dilated), NHWC input and HWIO kernel.

    x: the input (N, *spatial, C_in). w: the kernel (*window, C_in / groups, C_out); the two promote to one
    dtype. strides: window steps per spatial axis (default 1). padding: "VALID", "SAME" or (low, high) pairs.
    dilation: the kernel's dilation (rhs dilation, default 1). feature_group_count: channel groups (C_in and
    C_out split into that many groups, group g of the output seeing group g of the input; C_in for a depthwise
    conv). lhs_dilation: the input's dilation (default 1): lhs_dilation - 1 zeros between neighbouring
    input elements, what a transposed convolution with those strides needs (with the kernel flipped; see
    nn.ConvTranspose); "SAME" padding is then computed for the dilated input. Returns (N, *out, C_out).
    """
    x, w = ops.promote("conv", x, w)
    x, w = ops.asarray(x), ops.asarray(w)
    if x.dtype.kind == "b":
        raise DTypeError("conv: expected numeric operands, got bool")
    nd = x.ndim - 2
    if nd < 1 or w.ndim != x.ndim:
        raise ShapeError(f"conv: expected an input (N, *spatial, C) with at least one spatial axis and a "
                         f"kernel (*window, C_in, C_out) of the same rank, got {x.shape} and {w.shape}")
    groups = int(feature_group_count)
    c_in, c_out = x.shape[-1], w.shape[-1]
    if groups < 1 or c_in != w.shape[-2] * groups or c_out % groups:
        raise ShapeError(f"conv: input channels {c_in} must equal kernel input channels {w.shape[-2]} x "
                         f"feature_group_count {groups}, and output channels {c_out} divide by it")
    strides = _ints("conv", "strides", strides, nd, 1)
    dilation = _ints("conv", "dilation", dilation, nd, 1)
    lhs_dilation = _ints("conv", "lhs_dilation", lhs_dilation, nd, 1)
    sizes = tuple(dilate(n, d) for n, d in zip(x.shape[1:-1], lhs_dilation))
    padding = pads("conv", padding, sizes, w.shape[:-2], strides, dilation)
    if groups == 1:   # a unit group axis: reshapes only, no transposes for a plan to carry
        xg, wg = ops.reshape(x, (1,) + x.shape), ops.reshape(w, (1,) + w.shape)
    else:
        # (N, *S, G*C) -> (G, N, *S, C); (*K, C, G*O) -> (G, *K, C, O)
        xg = ops.moveaxis(ops.reshape(x, x.shape[:-1] + (groups, c_in // groups)), -2, 0)
        wg = ops.moveaxis(ops.reshape(w, w.shape[:-1] + (groups, c_out // groups)), -2, 0)
    out = bind(conv_p, xg, wg, strides=strides, padding=padding, lhs_dilation=lhs_dilation,
               rhs_dilation=dilation)
    if groups == 1:
        return ops.reshape(out, out.shape[1:])
    # (G, N, *out, O) -> (N, *out, G*O)
    out = ops.moveaxis(out, 0, -2)
    return ops.reshape(out, out.shape[:-2] + (c_out,))


# ---------------------------------------------------------------- reduce_window

def reduce_window(x, op, window_dimensions, window_strides=None, padding="VALID"):
    """Each window of `x` reduced with `op` ("max" or "sum"), as lax.reduce_window.

    x: the array. op: the reduction, named instead of given as a function; its identity is the init value
    (-inf / the lowest integer for max, 0 for sum), which also fills the padding. window_dimensions,
    window_strides (default 1): one entry per axis of x. padding: "VALID", "SAME" or (low, high) pairs per axis.
    Max pooling: op="max"; average pooling: op="sum" divided by the window size.
    """
    x = ops.asarray(x)
    if op not in REDUCERS:
        raise ArgumentError(f"reduce_window: op must be one of {REDUCERS}, got {op!r}")
    window = _ints("reduce_window", "window_dimensions", window_dimensions, x.ndim, 1)
    strides = _ints("reduce_window", "window_strides", window_strides, x.ndim, 1)
    padding = pads("reduce_window", padding, x.shape, window, strides)
    if any(lo < 0 or hi < 0 for lo, hi in padding):
        raise ShapeError(f"reduce_window: padding must be non-negative, got {padding}")
    if op == "sum" and x.dtype.kind == "b":
        x = ops.astype(x, np.int32)
    return bind(reduce_window_p, x, op=op, window=window, strides=strides, padding=padding)


# ---------------------------------------------------------------- rules of conv

def _conv_jvp(primals, tangents, **params):
    (x, w), (tx, tw) = primals, tangents
    out = bind(conv_p, x, w, **params)
    return out, sum_terms(None if tx is None else bind(conv_p, tx, w, **params),
                          None if tw is None else bind(conv_p, x, tw, **params))


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
        kernel = ops.swapaxes(ops.flip(w, tuple(range(1, 1 + nd))), -1, -2)
        ct_x = bind(conv_p, ct, kernel, strides=lhs_dilation, padding=tuple(pads),
                    lhs_dilation=strides, rhs_dilation=rhs_dilation)
    if wants[1]:
        pads = tuple((lo, dilate(o, s) - dilate(n, ld) + dilate(k, rd) - lo - 1)
                     for n, k, o, s, (lo, _), ld, rd in geometry)
        # Channels become the batch and examples the contracted features:
        # (G, C, *S, N) with the cotangent as kernel (G, *S_out, N, O) gives (G, C, *K, O).
        ct_w = bind(conv_p, ops.swapaxes(x, 1, -1), ops.moveaxis(ct, 1, -2), strides=rhs_dilation,
                    padding=pads, lhs_dilation=lhs_dilation, rhs_dilation=strides)
        ct_w = ops.moveaxis(ct_w, 1, -2)
    return ct_x, ct_w


def _conv_batch(values, dims, size, **params):
    (x, w), (dx, dw) = values, dims
    if dx is not None and dw is not None:
        # Every lane is its own set of groups: fold the batch into G.
        x, w = to_front(x, dx), to_front(w, dw)
        out = bind(conv_p, ops.reshape(x, (size * x.shape[1],) + x.shape[2:]),
                   ops.reshape(w, (size * w.shape[1],) + w.shape[2:]), **params)
        return ops.reshape(out, (size, x.shape[1]) + out.shape[1:]), 0
    if dx is not None:
        # The lanes are more examples: fold the batch into N.
        x = ops.moveaxis(x, dx, 1)                                 # (G, B, N, ...)
        out = bind(conv_p, ops.reshape(x, (x.shape[0], size * x.shape[2]) + x.shape[3:]), w, **params)
        return ops.reshape(out, (out.shape[0], size, x.shape[2]) + out.shape[2:]), 1
    # The lanes are more output channels: fold the batch into O.
    w = ops.moveaxis(w, dw, -2)                                    # (G, *K, C, B, O)
    out = bind(conv_p, x, ops.reshape(w, w.shape[:-2] + (size * w.shape[-1],)), **params)
    out = ops.reshape(out, out.shape[:-1] + (size, w.shape[-1]))
    return out, out.ndim - 2


jvp_rules[conv_p] = _conv_jvp
vjp_rules[conv_p] = _conv_vjp
batch_rules[conv_p] = _conv_batch


# ---------------------------------------------------------------- rules of reduce_window

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
        self.table = ops.constant_like(table, x)
        self.real = ops.constant_like(table < size, x)

    def expand(self, v):
        """v, shaped like the output, with a unit axis for each window axis."""
        return ops.reshape(v, v.shape + (1,) * v.ndim)

    def read(self, v):
        """v (shaped like x) at each window entry: (*out, *window)."""
        return bind(P["gather"], ops.reshape(v, (-1,)), self.table, axis=0)

    def write(self, values):
        """The sum into x's positions of values laid out (*out, *window)."""
        flat = bind(P["scatter"], zeros((self.x.size,), values.dtype, self.x.device), self.table, values,
                    axis=0, mode="add")
        return ops.reshape(flat, self.x.shape)


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
        return ops.reshape(v, tuple(d for c in v.shape for d in (c, 1)))

    def read(self, v):
        if self.used != self.x.shape:
            v = ops._slice(v, [0] * v.ndim, self.used, [1] * v.ndim)
        return ops.reshape(v, self.shape)

    def write(self, values):
        back = ops.reshape(values, self.used)
        if self.used != self.x.shape:
            back = ops.pad(back, [(0, d - u) for d, u in zip(self.x.shape, self.used)])
        return back

    def offsets(self, v):
        """v (shaped like x) at each window offset: one strided slice per offset,
        each shaped like the output."""
        return [ops._slice(v, offset, tuple(o + (c - 1) * k + 1 for o, c, k in zip(offset, self.counts, self.window)),
                          self.window)
                for offset in itertools.product(*(range(k) for k in self.window))]


def _windows(x, window, strides, padding):
    counts = tuple(window_count(n, k, s, lo, hi) for n, k, s, (lo, hi) in zip(x.shape, window, strides, padding))
    if strides == window and all(p == (0, 0) for p in padding):
        return _Tiled(x, window, counts)
    return _Indexed(x, window, strides, padding, counts)


# Up to this many elements per tiling window, a max's ties are counted offset by
# offset (see the module docstring); larger windows reduce over their window axes.
_FEW_OFFSETS = POOL_TIE_FEW_OFFSETS


def _by_offsets(wins):
    return isinstance(wins, _Tiled) and math.prod(wins.window) <= _FEW_OFFSETS


def _tie_count(x, out, wins):
    """How many elements of each window attain its max (at least 1: a NaN window has none)."""
    hits = [ops.astype(ops.equal(part, out), x.dtype) for part in wins.offsets(x)]
    count = hits[0]
    for h in hits[1:]:
        count = ops.add(count, h)
    return ops.maximum(count, x.dtype.type(1))


def _max_weights(x, out, wins):
    """1 / (how many attain the max) at the entries that attain it, 0 elsewhere."""
    hits = ops.equal(wins.read(x), wins.expand(out))
    if wins.real is not None:
        hits = ops.logical_and(wins.real, hits)
    hits = ops.astype(hits, x.dtype)
    count = ops.maximum(ops.sum(hits, wins.window_axes, keepdims=True), x.dtype.type(1))
    return ops.divide(hits, count)


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
            term = ops.where(ops.equal(xs, out), ts, zeros_like(ts))
            total = term if total is None else ops.add(total, term)
        return out, ops.divide(total, _tie_count(x, out, wins))
    weighted = ops.multiply(wins.read(t), _max_weights(x, out, wins))
    return out, ops.sum(weighted, wins.window_axes)


def _reduce_window_vjp(ct, ins, out, wants, *, op, window, strides, padding):
    x = ins[0]
    if 0 in x.shape or 0 in ct.shape:
        return (zeros_like(x),)
    wins = _windows(x, window, strides, padding)
    if op == "max" and _by_offsets(wins):
        # each window's cotangent shared by its tied maxima: divided once per window,
        # then selected where an element equals its window's max
        share = ops.broadcast_to(wins.expand(ops.divide(ct, _tie_count(x, out, wins))), wins.shape)
        hits = ops.equal(wins.read(x), ops.broadcast_to(wins.expand(out), wins.shape))
        return (wins.write(ops.where(hits, share, zeros_like(share))),)
    spread = ops.broadcast_to(wins.expand(ct), wins.shape)
    if op == "max":
        spread = ops.multiply(spread, _max_weights(x, out, wins))
    return (wins.write(spread),)


def _reduce_window_batch(values, dims, size, *, op, window, strides, padding):
    x = to_front(values[0], dims[0])
    return bind(reduce_window_p, x, op=op, window=(1,) + window, strides=(1,) + strides,
                padding=((0, 0),) + padding), 0


jvp_rules[reduce_window_p] = _reduce_window_jvp
vjp_rules[reduce_window_p] = _reduce_window_vjp
batch_rules[reduce_window_p] = _reduce_window_batch
