"""vmap: a batch interpreter on the same stack, and a batching rule per primitive.

A BatchTracer holds a value of the parent interpreter and the axis along which
it is batched (None: the same for every lane). Rules receive values and batch
axes and return batched results; most first move the batch axis to the front.
Primitives without a rule fall back to a loop over lanes (correct, slower).
The rules of the core first-order primitives are here; every other primitive
registers its own in `batch_rules` where it is defined.
"""
import functools

import numpy as np

from .. import tree
from ..core import trace as _trace
from ..core.prims import BINARY, COMPARE, PREDICATE, P, REDUCE, UNARY
from ..core.primitive import abstract_rules, batch_rules
from ..core.staging import stage
from ..core.trace import Interpreter, Tracer, bind
from ..errors import ShapeError, TreeError
from ..nx import ops
from ..nx.creation import arange, zeros
from ..nx.index_math import clamped, from_end, in_bounds, window_start
from ..nx.rule_helpers import elementwise_batch, to_front


class BatchTracer(Tracer):
    __slots__ = ("value", "bdim")

    def __init__(self, interp, value, bdim):
        self.interp = interp
        self.value = value
        self.bdim = bdim
        a = _trace.aval_of(value)
        self.aval = a.update(shape=a.shape[:bdim] + a.shape[bdim + 1:])

    def parts(self):
        return self.value, self.bdim


class BatchInterpreter(Interpreter):
    def __init__(self, size):
        self.parent = _trace.current()
        self.size = size

    def process(self, prim, args, params):
        values, dims = self.unpack(args)
        if all(d is None for d in dims):
            return self.in_parent(bind, prim, *values, **params)
        rule = batch_rules.get(prim, functools.partial(loop_rule, prim))
        outs, out_dims = self.in_parent(rule, values, dims, self.size, **params)
        if prim.multiple_results:
            return [BatchTracer(self, o, d) if d is not None else o for o, d in zip(outs, out_dims)]
        return BatchTracer(self, outs, out_dims) if out_dims is not None else outs


# ---------------------------------------------------------------- helpers

def _ndim(x):
    return x.ndim if hasattr(x, "ndim") else 0


def front(x, d):
    """`x` with its batch axis first, if it has one."""
    return x if d is None else to_front(x, d)


def materialize(x, d, size):
    """`x` batched at axis 0 (broadcast if it was the same for every lane)."""
    if d is not None:
        return to_front(x, d)
    x = x if hasattr(x, "shape") else ops.asarray(x)
    return ops.broadcast_to(ops.expand_dims(x, 0), (size,) + tuple(x.shape))


def lane(x, d, b):
    return x if d is None else ops.squeeze(ops.slice_in_dim(x, b, b + 1, axis=d), d)


def loop_rule(prim, values, dims, size, **params):
    """Any primitive, batched by running it once per lane and stacking."""
    if size == 0:  # no lane runs: empty results of the shapes one lane would give
        lane_avals = []
        for v, d in zip(values, dims):
            a = _trace.aval_of(v)
            lane_avals.append(a if d is None else a.update(shape=a.shape[:d] + a.shape[d + 1:]))
        out = abstract_rules[prim](*lane_avals, **params)
        outs = [zeros((0,) + a.shape, a.dtype, a.device) for a in (out if prim.multiple_results else [out])]
        return (outs, [0] * len(outs)) if prim.multiple_results else (outs[0], 0)
    results = [bind(prim, *[lane(v, d, b) for v, d in zip(values, dims)], **params)
               for b in range(size)]
    if prim.multiple_results:
        outs = [ops.stack([r[k] for r in results]) for k in range(len(results[0]))]
        return outs, [0] * len(outs)
    return ops.stack(results), 0


# ---------------------------------------------------------------- elementwise

def _elementwise_rule(prim):
    return lambda values, dims, size, **params: elementwise_batch(prim, values, dims, size, **params)


for _name in UNARY + BINARY + COMPARE + PREDICATE + ("select", "convert", "place"):
    batch_rules[P[_name]] = _elementwise_rule(P[_name])


def _front_rule(prim, shift_params):
    """Unary structural primitives: move the batch axis first, then adjust params."""
    def rule(values, dims, size, **params):
        x = to_front(values[0], dims[0])
        return bind(prim, x, *values[1:], **shift_params(params, size)), 0
    batch_rules[prim] = rule


def _shift_axes(params, size):
    return {**params, "axes": tuple(a + 1 for a in params["axes"])}


for _name in REDUCE + ("rev",):
    _front_rule(P[_name], _shift_axes)
_front_rule(P["argmax"], lambda p, size: {**p, "axis": p["axis"] + 1})
_front_rule(P["argmin"], lambda p, size: {**p, "axis": p["axis"] + 1})
_front_rule(P["reshape"], lambda p, size: {"shape": (size,) + tuple(p["shape"])})
_front_rule(P["transpose"], lambda p, size: {"perm": (0,) + tuple(a + 1 for a in p["perm"])})
_front_rule(P["slice"], lambda p, size: {"starts": (0,) + p["starts"], "limits": (size,) + p["limits"],
                                         "strides": (1,) + p["strides"]})


def _broadcast_rule(values, dims, size, *, shape):
    x = to_front(values[0], dims[0])
    x = ops.reshape(x, (size,) + (1,) * (len(shape) - x.ndim + 1) + tuple(x.shape[1:]))
    return bind(P["broadcast_to"], x, shape=(size,) + tuple(shape)), 0


batch_rules[P["broadcast_to"]] = _broadcast_rule


def _random_bits_rule(values, dims, size, *, shape, width):
    # Keys batched first draw a block per key, each the bits that key draws alone.
    return bind(P["random_bits"], to_front(values[0], dims[0]), shape=shape, width=width), 0


batch_rules[P["random_bits"]] = _random_bits_rule


def _lanes(values, dims, size, ndim):
    """A batched scalar operand, shaped (size, 1, ..., 1) to broadcast over a lane."""
    return ops.reshape(to_front(values[0], dims[0]), (size,) + (1,) * ndim)


def _full_rule(values, dims, size, *, shape, device):
    return ops.broadcast_to(_lanes(values, dims, size, len(shape)), (size,) + tuple(shape)), 0


def _iota_rule(values, dims, size, *, shape, dimension, device):
    start = _lanes(values, dims, size, len(shape))
    index = bind(P["iota"], start.dtype.type(0), shape=(size,) + tuple(shape), dimension=dimension + 1,
                 device=device)
    return ops.add(index, start), 0


batch_rules[P["full"]] = _full_rule
batch_rules[P["iota"]] = _iota_rule


def _pad_rule(values, dims, size, *, config):
    if dims[1] is not None:
        return loop_rule(P["pad"], values, dims, size, config=config)
    x = to_front(values[0], dims[0])
    return bind(P["pad"], x, values[1], config=((0, 0),) + tuple(config)), 0


batch_rules[P["pad"]] = _pad_rule


def _concat_rule(values, dims, size, *, axis):
    xs = [materialize(v, d, size) for v, d in zip(values, dims)]
    return bind(P["concatenate"], *xs, axis=axis + 1), 0


batch_rules[P["concatenate"]] = _concat_rule


def _lane_offsets(idx, n, size, drop=False):
    """Per-lane indices (batched first) into `n`, offset by lane * n: indices into
    the batch folded into the indexed axis. Out-of-bounds indices are clamped (as a
    gather does) or, with `drop`, sent past the end (so a scatter drops them)."""
    idx = ops.astype(idx, np.int32)  # narrow index dtypes cannot hold idx + lane * n
    idx = from_end(idx, n)
    offsets = ops.reshape(arange(size, dtype=idx.dtype, device=idx.device) * n,
                         (size,) + (1,) * (idx.ndim - 1))
    if drop:
        return ops.where(in_bounds(idx, n), ops.add(idx, offsets), idx.dtype.type(size * n))
    return ops.add(clamped(idx, n), offsets)


def _fold(x, axis, size):
    """x batched first, `axis` (of a lane) moved next to the batch and merged into it."""
    x = ops.moveaxis(x, axis + 1, 1)
    return ops.reshape(x, (size * x.shape[1],) + tuple(x.shape[2:])), x.shape


def _gather_rule(values, dims, size, *, axis):
    (x, idx), (dx, di) = values, dims
    if di is None:
        return bind(P["gather"], to_front(x, dx), idx, axis=axis + 1), 0
    if dx is None:
        return bind(P["gather"], x, idx, axis=axis), axis + di
    # Both batched: fold the batch into the gathered axis, offsetting each lane's indices.
    flat, shape = _fold(to_front(x, dx), axis, size)
    idx = to_front(idx, di)
    out = bind(P["gather"], flat, _lane_offsets(idx, shape[1], size), axis=0)
    # out: (B, idx..., rest...) where rest = pre-axis dims then post-axis dims
    k = idx.ndim - 1
    perm = [0] + list(range(1 + k, 1 + k + axis)) + list(range(1, 1 + k)) + \
        list(range(1 + k + axis, out.ndim))
    return ops.transpose(out, perm), 0


batch_rules[P["gather"]] = _gather_rule


def _scatter_rule(values, dims, size, *, axis, mode):
    (x, idx, upd), (dx, di, du) = values, dims
    x, upd = materialize(x, dx, size), materialize(upd, du, size)
    if di is None:
        return bind(P["scatter"], x, idx, upd, axis=axis + 1, mode=mode), 0
    # Batched indices: fold the batch into the scattered axis, as for gather.
    flat, shape = _fold(x, axis, size)
    idx = to_front(idx, di)
    k = idx.ndim - 1
    # A lane's updates are (pre..., idx..., post...); the folded scatter wants (idx..., pre..., post...).
    perm = [0] + list(range(1 + axis, 1 + axis + k)) + list(range(1, 1 + axis)) + \
        list(range(1 + axis + k, upd.ndim))
    out = bind(P["scatter"], flat, _lane_offsets(idx, shape[1], size, drop=True), ops.transpose(upd, perm),
               axis=0, mode=mode)
    return ops.moveaxis(ops.reshape(out, shape), 1, axis + 1), 0


batch_rules[P["scatter"]] = _scatter_rule


def _dynamic_slice_rule(values, dims, size, *, sizes):
    if any(d is not None for d in dims[1:]):
        # Batched starts: one batched gather per axis, of the clamped window.
        x = materialize(values[0], dims[0], size)
        for axis, (start, d, width) in enumerate(zip(values[1:], dims[1:], sizes)):
            n = x.shape[axis + 1]
            start = ops.astype(materialize(start, d, size), np.int32)
            first = window_start(start, n, width)
            window = ops.add(ops.reshape(first, (size, 1)), arange(width, dtype=first.dtype, device=first.device))
            x, _ = _gather_rule([x, window], [0, 0], size, axis=axis)
        return x, 0
    x = to_front(values[0], dims[0])
    zero = np.int32(0)
    return bind(P["dynamic_slice"], x, zero, *values[1:], sizes=(size,) + tuple(sizes)), 0


def _dus_rule(values, dims, size):
    if any(d is not None for d in dims[2:]):
        return loop_rule(P["dynamic_update_slice"], values, dims, size)
    x, upd = materialize(values[0], dims[0], size), materialize(values[1], dims[1], size)
    return bind(P["dynamic_update_slice"], x, upd, np.int32(0), *values[2:]), 0


batch_rules[P["dynamic_slice"]] = _dynamic_slice_rule
batch_rules[P["dynamic_update_slice"]] = _dus_rule


def _dot_general_rule(values, bdims, size, *, dims):
    (x, y), (dx, dy) = values, bdims
    (lc, rc), (lb, rb) = dims
    up = lambda axes: tuple(a + 1 for a in axes)  # noqa: E731
    if dx is not None and dy is not None:
        x, y = to_front(x, dx), to_front(y, dy)
        new = ((up(lc), up(rc)), ((0,) + up(lb), (0,) + up(rb)))
        return bind(P["dot_general"], x, y, dims=new), 0
    if dx is not None:
        x = to_front(x, dx)
        new = ((up(lc), rc), (up(lb), rb))
        return bind(P["dot_general"], x, y, dims=new), len(lb)
    y = to_front(y, dy)
    new = ((lc, up(rc)), (lb, up(rb)))
    x_free = x.ndim - len(lc) - len(lb)
    return bind(P["dot_general"], x, y, dims=new), len(lb) + x_free


batch_rules[P["dot_general"]] = _dot_general_rule


# ---------------------------------------------------------------- programs

def closed_batched(program, batched, size):
    """`batch_program` of `program`, closed: (program, the values it captured)."""
    return batch_program(program, batched, size).closed()


def batch_program(program, batched, size):
    """`program` over a batch: inputs marked in `batched` carry a leading batch
    axis; every output is batched at axis 0."""
    in_avals = [a.update(shape=(size,) + a.shape) if b else a
                for a, b in zip(program.in_avals, batched)]

    def f(*args):
        interp = BatchInterpreter(size)
        ins = [BatchTracer(interp, a, 0) if b else a for a, b in zip(args, batched)]
        with _trace.using(interp):
            outs = program(*ins)
        return [materialize(*interp.part(o), size) for o in outs]

    return stage(f, in_avals)


# ---------------------------------------------------------------- vmap

def _normalize_axis(axis, x, where):
    nd = _ndim(x)
    if axis is None:
        return None
    if not isinstance(axis, int):
        raise TreeError(f"vmap: {where} must be an int or None, got {axis!r}")
    if nd == 0:
        raise ShapeError(f"vmap: cannot map over axis {axis} of a scalar ({where})")
    if not -nd <= axis < nd:
        raise ShapeError(f"vmap: axis {axis} is out of range for {where} of rank {nd}")
    return axis % nd


def vmap(f, in_axes=0, out_axes=0, axis_size=None):
    """Map `f` over an axis of its arguments (JAX semantics for in_axes/out_axes and axis_size).

    axis_size: the mapped size, needed where in_axes maps no argument (every output is then `axis_size`
    copies); where arguments are mapped, it must equal their axis's size.
    """
    @functools.wraps(f)
    def mapped(*args, **kwargs):
        axes_prefix = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        if isinstance(axes_prefix, tuple) and len(axes_prefix) != len(args):
            raise TreeError(f"vmap: in_axes has {len(axes_prefix)} entries for {len(args)} arguments")
        # Keyword arguments are always mapped over their leading axis (as in JAX).
        everything = (args, kwargs)
        leaves, struct = tree.flatten(everything)
        paths = [p for p, _ in tree.flatten_with_paths(everything)[0]]
        axes = tree.prefix_broadcast((axes_prefix, 0), everything, "vmap in_axes")
        # Mapped leaves become arrays; unmapped ones pass as they are (a Python
        # scalar stays weak).
        device = ops.committed_device(leaves)  # NumPy arguments meet rune arrays on their device
        leaves = [x if a is None or hasattr(x, "aval") else ops.asarray(x, device=device)
                  for x, a in zip(leaves, axes)]
        axes = [_normalize_axis(a, x, f"argument {p or '(root)'}") for a, x, p in zip(axes, leaves, paths)]
        sizes = {(p, x.shape[a]) for a, x, p in zip(axes, leaves, paths) if a is not None}
        if axis_size is not None:
            sizes.add(("axis_size", _checked_axis_size(axis_size)))
        if not sizes:
            raise ShapeError("vmap: in_axes maps no argument; map one, or pass axis_size= to give the size")
        if len({s for _, s in sizes}) > 1:
            listing = ", ".join(f"{p or '(root)'}: {s}" for p, s in sorted(sizes))
            raise ShapeError(f"vmap: mapped axes have different sizes ({listing})")
        size = sizes.pop()[1]
        interp = BatchInterpreter(size)
        ins = [BatchTracer(interp, x, a) if a is not None else x for x, a in zip(leaves, axes)]
        with _trace.using(interp):
            a, k = tree.unflatten(struct, ins)
            out = f(*a, **k)
        out_leaves, out_struct = tree.flatten(out)
        o_axes = tree.prefix_broadcast(out_axes, out, "vmap out_axes")
        results = []
        for o, a in zip(out_leaves, o_axes):
            value, d = interp.part(o)
            if a is None:
                if d is not None:
                    raise ShapeError("vmap: out_axes is None for an output that depends on the mapped axis")
                results.append(value)
                continue
            v = materialize(value, d, size)
            results.append(ops.moveaxis(v, 0, _normalize_axis(a, v, "out_axes")))
        return tree.unflatten(out_struct, results)

    return mapped


def _checked_axis_size(axis_size):
    if isinstance(axis_size, bool) or not isinstance(axis_size, (int, np.integer)) or axis_size < 0:
        raise ShapeError(f"vmap: axis_size must be a non-negative int, got {axis_size!r}")
    return int(axis_size)


# nx's composites (vectorize, apply_along_axis) call vmap through nx.transformations: nx sits below this layer.
from ..nx import transformations as _nx_transformations  # noqa: E402
_nx_transformations.register(vmap=vmap)
