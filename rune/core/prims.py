"""The primitive set (in the spirit of JAX's lax) and its abstract rules.

Elementwise primitives broadcast their operands NumPy-style; operands already
share one dtype (the `nx` layer promotes). Every public `nx` function is a bind
of one of these or a composite of them, so the JVP, VJP, batching and kernel
tables only ever cover this list. Each declares how a compiler lowers it
(`declare_lowering`): an elementwise kernel IR op of the same name, a
movement, a reduction, a library call, an indexed load or an update.
"""
import functools

import numpy as np

from ..base import vocabulary
from ..errors import ShapeError
from .aval import Aval
from .primitive import Lowering, abstract_rules, declare_lowering, primitive
from .trace import common_device

BOOL = np.dtype(bool)

# The elementwise primitives are declared in rune/base/vocabulary.py, one entry each.
UNARY, BINARY, COMPARE, PREDICATE = vocabulary.UNARY, vocabulary.BINARY, vocabulary.COMPARE, vocabulary.PREDICATE
REDUCE = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")

P = {}  # name -> Primitive, for `from .prims import P` users
for _name in UNARY + BINARY + COMPARE + PREDICATE + REDUCE + (
        "select", "convert", "argmax", "argmin", "broadcast_to", "reshape", "transpose", "slice",
        "rev", "pad", "concatenate", "gather", "scatter", "dynamic_slice",
        "dynamic_update_slice", "dot_general", "random_bits", "place", "iota", "full"):
    P[_name] = primitive(_name)

# How each lowers into fused kernels (rune/compiler/fuse.py); `place` (a copy
# between devices) is never lowered.
_LOWERINGS = {
    Lowering.ELEMENTWISE: UNARY + BINARY + COMPARE + PREDICATE + ("select", "convert"),
    Lowering.MOVEMENT: ("broadcast_to", "reshape", "transpose", "slice", "rev", "pad", "concatenate",
                        "full"),
    Lowering.REDUCE: REDUCE + ("argmax", "argmin"),
    Lowering.LIBRARY: ("dot_general",),
    Lowering.SCATTER: ("scatter", "dynamic_update_slice"),
    Lowering.INDEXED: ("gather", "dynamic_slice", "random_bits", "iota"),
}
for _kind, _names in _LOWERINGS.items():
    for _name in _names:
        declare_lowering(P[_name], _kind)


@functools.lru_cache(maxsize=4096)
def broadcast_shapes(name, *shapes):
    """The NumPy broadcast of `shapes`, or a ShapeError naming the operation."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        dims = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0} - {1}
        if len(dims) > 1:
            raise ShapeError(f"{name}: shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                             f"do not broadcast together")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _elementwise(out_dtype):
    def rule(*avals, _prim):
        shape = broadcast_shapes(_prim.name, *(a.shape for a in avals))
        dtype = out_dtype or avals[-1].dtype
        weak = all(a.weak for a in avals) and out_dtype is None
        return Aval(shape, dtype, common_device(_prim, avals), weak)
    return rule


def _register_elementwise(names, out_dtype=None):
    rule = _elementwise(out_dtype)
    for n in names:
        prim = P[n]
        abstract_rules[prim] = functools.partial(rule, _prim=prim)


_register_elementwise(UNARY + BINARY + ("select",))
_register_elementwise(COMPARE + PREDICATE, BOOL)


def _rule(name):
    def register(fn):
        abstract_rules[P[name]] = fn
        return fn
    return register


@_rule("convert")
def _convert(x, *, dtype):
    return Aval(x.shape, dtype, x.device, False)


def _reduced(x, axes):
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


for _name in REDUCE:
    abstract_rules[P[_name]] = lambda x, *, axes: Aval(_reduced(x, axes), x.dtype, x.device, x.weak)


@_rule("argmax")
def _argmax(x, *, axis, index_dtype):
    return Aval(_reduced(x, (axis,)), index_dtype, x.device)


abstract_rules[P["argmin"]] = _argmax


@_rule("broadcast_to")
def _broadcast_to(x, *, shape):
    return x.update(shape=shape)


@_rule("reshape")
def _reshape(x, *, shape):
    return x.update(shape=shape)


@_rule("transpose")
def _transpose(x, *, perm):
    return x.update(shape=tuple(x.shape[p] for p in perm))


@_rule("slice")
def _slice(x, *, starts, limits, strides):
    return x.update(shape=tuple(len(range(s, l, st)) for s, l, st in zip(starts, limits, strides)))


@_rule("rev")
def _rev(x, *, axes):
    return x


@_rule("pad")
def _pad(x, value, *, config):
    common_device(P["pad"], (x, value))
    return x.update(shape=tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, config)))


@_rule("concatenate")
def _concatenate(*xs, axis):
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return Aval(shape, xs[0].dtype, common_device(P["concatenate"], xs), all(x.weak for x in xs))


@_rule("gather")
def _gather(x, idx, *, axis):
    device = common_device(P["gather"], (x, idx))
    return Aval(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype, device, x.weak)


@_rule("scatter")
def _scatter(x, idx, updates, *, axis, mode):
    return x.update(device=common_device(P["scatter"], (x, idx, updates)))


@_rule("dynamic_slice")
def _dynamic_slice(x, *starts, sizes):
    return x.update(shape=sizes, device=common_device(P["dynamic_slice"], (x,) + starts))


@_rule("dynamic_update_slice")
def _dynamic_update_slice(x, update, *starts):
    return x.update(device=common_device(P["dynamic_update_slice"], (x, update) + starts))


@_rule("dot_general")
def _dot_general(x, y, *, dims):
    (lc, rc), (lb, rb) = dims
    batch = tuple(x.shape[i] for i in lb)
    lfree = tuple(d for i, d in enumerate(x.shape) if i not in lc and i not in lb)
    rfree = tuple(d for i, d in enumerate(y.shape) if i not in rc and i not in rb)
    return Aval(batch + lfree + rfree, x.dtype, common_device(P["dot_general"], (x, y)))


@_rule("random_bits")
def _random_bits(key, *, shape, width):
    # A batch of keys (..., 2) draws one block per key (vmap over keys).
    return Aval(key.shape[:-1] + tuple(shape), np.dtype(f"uint{width}"), key.device)


# Constants made on the device. Their one operand is a scalar (a literal in
# practice) that fixes the dtype; shape and device are params, the device as
# the Array they stand for would carry it. Under a trace they are equations,
# never captured host arrays: index arithmetic to a fuser.

def _scalar_operand(name, x):
    if x.shape != ():
        raise ShapeError(f"{name}: the operand must be a scalar, got shape {x.shape}")


@_rule("iota")
def _iota(start, *, shape, dimension, device):
    """`start` plus the index along `dimension`, broadcast to `shape`."""
    _scalar_operand("iota", start)
    return Aval(shape, start.dtype, device)


@_rule("full")
def _full(value, *, shape, device):
    """The scalar `value` broadcast to `shape`."""
    _scalar_operand("full", value)
    return Aval(shape, value.dtype, device)


@_rule("place")
def _place(x, *, src, device):
    return x.update(device=device)
