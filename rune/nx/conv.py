"""Convolution and windowed reductions (pooling): two primitives and the `nx`
functions that bind them.

`conv` is `lax.conv_general_dilated` with the feature groups made an explicit
leading axis: x (G, N, *spatial, C) and w (G, *window, C, O) give
(G, N, *out, O), one ungrouped convolution per group. That one form is closed
under every rule: the derivative with respect to either operand is again a
conv of this form (JAX's transposition formulas, with lhs dilation for
strides), and vmap folds a batch into N, into O or into G. `nx.conv` maps the
user's NHWC input and HWIO kernel with `feature_group_count` onto it.

`reduce_window` reduces each window of an operand with "max" or "sum" (the
padding holds the reduction's identity). Both are library calls to a backend
(im2col and a matmul; strided views), never fused elementwise work.
Their derivative and batching rules are in rune/conv_rules.py.
"""
import numpy as np

from ..core.aval import Aval
from ..core.primitive import abstract_rules, primitive
from ..core.trace import bind, common_device
from ..codegen.windows import dilate, window_count
from ..errors import ArgumentError, DTypeError, ShapeError
from . import ops

conv_p = primitive("conv")
reduce_window_p = primitive("reduce_window")
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

def conv(x, w, strides=None, padding="VALID", dilation=None, feature_group_count=1):
    """N-d convolution (cross-correlation, as lax.conv_general_dilated), NHWC input and HWIO kernel.

    x: the input (N, *spatial, C_in). w: the kernel (*window, C_in / groups, C_out); the two promote to one
    dtype. strides: window steps per spatial axis (default 1). padding: "VALID", "SAME" or (low, high) pairs.
    dilation: the kernel's dilation (rhs dilation, default 1). feature_group_count: channel groups (C_in and
    C_out split into that many groups, group g of the output seeing group g of the input; C_in for a depthwise
    conv). Returns (N, *out, C_out).
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
    padding = pads("conv", padding, x.shape[1:-1], w.shape[:-2], strides, dilation)
    if groups == 1:   # a unit group axis: reshapes only, no transposes for a plan to carry
        xg, wg = ops.reshape(x, (1,) + x.shape), ops.reshape(w, (1,) + w.shape)
    else:
        # (N, *S, G*C) -> (G, N, *S, C); (*K, C, G*O) -> (G, *K, C, O)
        xg = ops.moveaxis(ops.reshape(x, x.shape[:-1] + (groups, c_in // groups)), -2, 0)
        wg = ops.moveaxis(ops.reshape(w, w.shape[:-1] + (groups, c_out // groups)), -2, 0)
    out = bind(conv_p, xg, wg, strides=strides, padding=padding, lhs_dilation=(1,) * nd,
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

