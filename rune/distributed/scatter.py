"""Collectives for sharding: `reduce_scatter` and `all_gather`, each the other's transpose.

`reduce_scatter(tree, op, axis)` reduces every rank's tree leaf by leaf and hands
rank r the r-th of `size()` equal blocks of each leaf along `axis`; a leaf whose
`axis` does not divide by `size()` is padded with zeros at its end first, so every
rank's block has ceil(n / size) rows (the last ranks' blocks end in padding).
`all_gather(tree, axis, length)` is its inverse: every rank's blocks concatenated
in rank order along `axis`, cut to `length` rows (the padding dropped).

Both are effectful primitives run by a plan's callback step, as `all_reduce` is
(rune/distributed/collectives.py: `Collective.program`), so they work eagerly and
inside `jit`, each run exactly once per call, in program order. Derivatives follow
the same convention as `all_reduce` (the derivative of the sum over ranks):
`all_gather`'s transpose is `reduce_scatter(ct, "sum")` and `reduce_scatter`'s
is `all_gather` ("mean": divided by `size()`).

On the host the ranks' blocks travel as one flat, padded buffer per dtype through
MPI. reduce_scatter sums in RANK ORDER, ((x0 + x1) + x2) + ..., computed here
from an `Alltoall` of the blocks, not by MPI's `Reduce_scatter_block`: MPICH's
`Allreduce` (what `all_reduce` and so an unsharded data-parallel step use) sums
in rank order at 2 and 3 ranks for every size, but its `Reduce_scatter_block`
switches to a pairwise algorithm past about a megabyte that sums rank r's block
starting from rank r ((x0 + x2) + x1 on rank 0 of 3), which would make sharded
and unsharded runs differ in the last bit. The Alltoall moves the same bytes as
that pairwise exchange. "max" and "min" fold with NumPy's NaN-propagating
maximum and minimum, as `all_reduce` does. Gathers move raw bytes (MPI
`Allgather`), so any dtype arrives bit for bit.

On GPUs the blocks go through the device's Communicator (NCCL; see
rune/distributed/nccl_sharding.py), queued with the device's own work; NCCL does
not promise a reduction order, so GPU runs match an unsharded run to rounding,
not to the bit.
"""
import numpy as np

from .. import tree as pytree
from ..backends import backend_for
from ..core.primitive import abstract_rules, calls, eval_rules, primitive
from ..core.trace import aval_of, bind
from ..errors import ArgumentError, DTypeError, NotDifferentiableError, UsageError
from ..transforms.autodiff.jvp import jvp_rules
from ..transforms.autodiff.vjp import vjp_rules
from ..transforms.batching import batch_rules
from . import host, runtime
from .blocks import blocks, by_dtype, flat_if, flat_layout, out_shape, rows_first, split_reduced
from .collectives import OPS, Collective, run_by_device

reduce_scatter_p = primitive("reduce_scatter", multiple_results=True, effectful=True)
all_gather_p = primitive("all_gather_blocks", multiple_results=True, effectful=True)


class ShardCollective(Collective):
    """A reduce-scatter or gather over a list of leaves. `op` is the reduction (None
    for a gather); `layouts[i]` is leaf i's (axis, rows of the whole leaf, the whole
    leaf's shape where it travels flattened, else None: `flat_layout`); `paths` name
    the leaves in errors."""
    __slots__ = ("op", "layouts", "paths")

    def __init__(self, kind, op, layouts, in_avals, out_avals, structure=None, paths=None):
        super().__init__(kind, tuple(layouts), in_avals, out_avals, structure)
        self.op, self.layouts = op, tuple(layouts)
        self.paths = paths or [""] * len(self.layouts)
        axes = {layout[0] for layout in self.layouts}
        axis = axes.pop() if len(axes) == 1 else sorted(axes)
        self.name = f"{kind}(op={op!r}, axis={axis})" if op else f"{kind}(axis={axis})"

    def __call__(self, arrays):
        group = runtime.initialize()
        if group.size > 1:
            # The path joins the shape where there is one, so a mismatch names the leaf.
            detail = [f"{a.dtype.name}{list(a.shape)} ({a.device.platform})" + (f" at {p}" if p else "")
                      for a, p in zip(arrays, self.paths)]
            runtime.agree(group, self.name, detail, _structure_text(self.structure))
        out = run_by_device(arrays, lambda device, index, raws: self._run_blocks(
            group, device, raws, [self.layouts[i] for i in index]))
        group.seq += 1
        return out

    def split(self, groups):
        """This reduce-scatter cut into one per group of leaf indices (rune/compiler/overlap.py's
        buckets): each element is folded on its own, in rank order, whatever buffer carries
        it. Gathers stay whole (None): their results are parameters, not gradients."""
        if self.kind != "reduce_scatter":
            return None
        return [ShardCollective(self.kind, self.op, [self.layouts[i] for i in g], [self.in_avals[i] for i in g],
                                [self.out_avals[i] for i in g], self.structure, [self.paths[i] for i in g])
                for g in groups]

    def _run_blocks(self, group, device, raws, layouts):
        if group.size == 1:   # a group of one: each rank's block is the whole leaf
            return [r.reshape(out_shape(self.kind, r.shape, layout, 1)) for r, layout in zip(raws, layouts)]
        backend = backend_for(device)
        if backend.communicator(device) is None:   # no collective library of its own (the host): MPI
            run = host_reduce_scatter if self.kind == "reduce_scatter" else host_all_gather
            raws = [backend.to_host(r) for r in raws]
            out = run(group, raws, self.op, layouts) if self.op else run(group, raws, layouts)
            return [backend.adopt(o, device) for o in out]
        from . import nccl_sharding
        run = nccl_sharding.reduce_scatter if self.kind == "reduce_scatter" else nccl_sharding.all_gather
        return run(group, raws, self.op, layouts, device) if self.op else run(group, raws, layouts, device)


def _structure_text(structure):
    from .collectives import _structure_text as text
    return text(structure)


for _p in (reduce_scatter_p, all_gather_p):
    abstract_rules[_p] = lambda *avals, fn: list(fn.out_avals)
    eval_rules[_p] = lambda *arrays, fn: fn(list(arrays))
    calls[_p] = lambda params: (params["fn"].program, None)


# ---------------------------------------------------------------- host (MPI)

def _fold(received, op, xp=np):
    """received (size, K): every rank's contribution to this rank's block, folded in
    rank order: ((r0 + r1) + r2) + ... as MPICH's Allreduce adds."""
    acc = received[0].copy()
    combine = {"sum": xp.add, "mean": xp.add, "max": xp.maximum, "min": xp.minimum}[op]
    for k in range(1, received.shape[0]):
        combine(acc, received[k], out=acc)
    return acc


def host_reduce_scatter(group, raws, op, layouts):
    """This rank's reduced block of each leaf (NumPy arrays), the leaves of one dtype
    travelling as one (size, K) buffer of blocks through one MPI Alltoall."""
    size = group.size
    out = [None] * len(raws)
    for dtype, index in by_dtype(raws):
        work = host.work_dtype(dtype, op)
        parts = [rows_first(flat_if(np.asarray(raws[i]), layouts[i]).astype(work, copy=False), *layouts[i][:2], size)
                 for i in index]
        send = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
        received = np.empty_like(send)
        if send.size:
            group.comm.Alltoall(send, received)
        mine = _fold(received, op)
        if op == "mean":
            mine /= mine.dtype.type(size)
        split_reduced(mine, index, parts, raws, layouts, size, dtype, out)
    return out


def host_all_gather(group, raws, layouts):
    """Every rank's block of each leaf concatenated along its axis in rank order and
    cut to the leaf's rows (NumPy arrays): raw bytes, one MPI Allgather for all."""
    size = group.size
    parts = [np.ascontiguousarray(np.moveaxis(np.asarray(r), axis, 0)).reshape(-1).view(np.uint8)
             for r, (axis, _, _) in zip(raws, layouts)]
    mine = np.concatenate(parts) if len(parts) > 1 else parts[0]
    every = np.empty((size, mine.size), np.uint8)
    if mine.size:
        group.comm.Allgather(mine, every)
    out, start = [], 0
    for r, part, layout in zip(raws, parts, layouts):
        axis, n, _ = layout
        rows = np.ascontiguousarray(every[:, start:start + part.size]).view(r.dtype)
        start += part.size
        moved = (size * r.shape[axis],) + tuple(s for d, s in enumerate(r.shape) if d != axis)
        out.append(np.moveaxis(rows.reshape(moved)[:n], 0, axis).reshape(out_shape("all_gather", r.shape, layout,
                                                                                     size)))
    return out


# ---------------------------------------------------------------- binding

def _bind(prim, kind, op, leaves, layouts, structure=None, paths=None):
    size = runtime.initialize().size
    in_avals = [aval_of(x) for x in leaves]
    out_avals = [a.update(shape=out_shape(kind, a.shape, layout, size)) for a, layout in zip(in_avals, layouts)]
    fn = ShardCollective(kind, op, layouts, in_avals, out_avals, structure, paths)
    return bind(prim, *leaves, fn=fn)


def _leaves(tree, what):
    """The tree's leaves as arrays or tracers, their paths, and its structure."""
    from .. import nx
    pairs, structure = pytree.flatten_with_paths(tree)
    leaves = [x if hasattr(x, "aval") else nx.asarray(x) for _, x in pairs]
    return leaves, [p for p, _ in pairs], structure


def _axis(axis, leaf, path, what):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ArgumentError(f"{what}: axis must be an int, got {axis!r}")
    if leaf.ndim == 0:
        raise ArgumentError(f"{what}: the leaf at {path or 'the root'} is 0-d; there is no axis {axis} "
                            f"(reshape it to (1,) first)")
    if not -leaf.ndim <= axis < leaf.ndim:
        raise ArgumentError(f"{what}: axis {axis} is out of range for the leaf at {path or 'the root'} of "
                            f"shape {tuple(leaf.shape)}")
    return int(axis) % leaf.ndim


def reduce_scatter(tree, op="sum", axis=0):
    """Every rank's `tree` reduced leaf by leaf (op "sum", "mean", "max" or "min"), and
    of each leaf only this rank's block along `axis`: rank r gets rows
    [r * b, (r + 1) * b) with b = ceil(n / size()), the leaf padded with zeros at the
    end of `axis` when `size()` does not divide its n rows.

    The sum is taken in rank order, as `all_reduce` takes it, so a block of the
    result is bit for bit that block of `all_reduce(tree, op)` (host arrays). Every
    rank passes the same structure, shapes and dtypes; `all_gather(blocks, axis,
    length=n)` puts the leaves back together.
    """
    if op not in OPS:
        raise ArgumentError(f"reduce_scatter: op must be one of {OPS}, got {op!r}")
    leaves, paths, structure = _leaves(tree, "reduce_scatter")
    if not leaves:
        return tree
    layouts = []
    for leaf, path in zip(leaves, paths):
        try:
            host.work_dtype(np.dtype(leaf.dtype), op)
        except DTypeError as e:
            raise DTypeError(str(e).replace("all_reduce:", f"reduce_scatter: the leaf at {path or 'the root'}:", 1)) from None
        ax = _axis(axis, leaf, path, "reduce_scatter")
        layouts.append((ax, leaf.shape[ax], None))
    return pytree.unflatten(structure, _bind(reduce_scatter_p, "reduce_scatter", op, leaves, layouts,
                                             structure, paths))


def all_gather(tree, axis=0, length=None):
    """Every rank's `tree` concatenated leaf by leaf along `axis`, in rank order (every
    rank passes the same shapes, so `axis` becomes `size()` times longer), then cut
    to its first `length` rows when `length` is given: the inverse of
    `reduce_scatter(..., axis)` for leaves of `length` rows, padding dropped.

    `length` is an int for every leaf, or a tree of ints matching `tree`.
    """
    leaves, paths, structure = _leaves(tree, "all_gather")
    if not leaves:
        return tree
    size = runtime.initialize().size
    lengths = _lengths(length, structure, len(leaves))
    layouts = []
    for leaf, path, n in zip(leaves, paths, lengths):
        ax = _axis(axis, leaf, path, "all_gather")
        rows = leaf.shape[ax] * size
        if n is None:
            n = rows
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n <= rows \
                or blocks(n, size) != leaf.shape[ax]:
            raise ArgumentError(f"all_gather: length {n!r} for the leaf at {path or 'the root'} does not fit "
                                f"{size} blocks of {leaf.shape[ax]} rows (it needs ceil(length / {size}) == "
                                f"{leaf.shape[ax]})")
        layouts.append((ax, int(n), None))
    return pytree.unflatten(structure, _bind(all_gather_p, "all_gather", None, leaves, layouts, structure, paths))


def _lengths(length, structure, count):
    if length is None or isinstance(length, (int, np.integer)):
        return [length] * count
    values = pytree.leaves(length)
    if len(values) != count:
        raise ArgumentError(f"all_gather: length must be an int or a tree of ints like the tree's "
                            f"{count} leaves, got {len(values)} values")
    return values


def scatter_leaves(leaves, op):
    """reduce_scatter of whole leaves, each flattened (flat_layout): this rank's 1-d
    block of each reduced leaf."""
    return _bind(reduce_scatter_p, "reduce_scatter", op, leaves, [flat_layout(x.shape) for x in leaves])


def gather_leaves(blocks_, shapes):
    """The inverse of scatter_leaves: every rank's 1-d blocks gathered into leaves of
    `shapes` (the padding dropped)."""
    return _bind(all_gather_p, "all_gather", None, blocks_, [flat_layout(s) for s in shapes])


# ---------------------------------------------------------------- derivative rules

def _no_derivative(fn, mode):
    return NotDifferentiableError(
        f"rune.distributed: {fn.name} has no derivative rule, but a {mode} flows through it "
        f"(reduce_scatter differentiates for op 'sum' and 'mean')")


def _jvp(primals, tangents, *, fn):
    """Linear: one collective carries the primals and the nonzero tangents."""
    if fn.op in ("max", "min"):
        raise _no_derivative(fn, "tangent")
    nonzero = [i for i, t in enumerate(tangents) if t is not None]
    leaves = list(primals) + [tangents[i] for i in nonzero]
    layouts = list(fn.layouts) + [fn.layouts[i] for i in nonzero]
    prim = reduce_scatter_p if fn.kind == "reduce_scatter" else all_gather_p
    outs = _bind(prim, fn.kind, fn.op, leaves, layouts)
    n = len(primals)
    touts = [None] * n
    for k, i in enumerate(nonzero):
        touts[i] = outs[n + k]
    return outs[:n], touts


def _wanted(cts, outs, wants):
    from ..nx.creation import zeros_like
    index = [i for i, w in enumerate(wants) if w]
    return index, [cts[i] if cts[i] is not None else zeros_like(outs[i]) for i in index]


def _reduce_scatter_vjp(cts, ins, outs, wants, *, fn):
    """The transpose of a reduce-scatter is a gather of the cotangent blocks (divided by
    size() for "mean")."""
    if fn.op in ("max", "min"):
        raise _no_derivative(fn, "cotangent")
    index, full = _wanted(cts, outs, wants)
    result = [None] * len(wants)
    if not full:
        return result
    gathered = _bind(all_gather_p, "all_gather", None, full, [fn.layouts[i] for i in index])
    size = runtime.initialize().size
    for i, g in zip(index, gathered):
        result[i] = g / size if fn.op == "mean" else g
    return result


def _all_gather_vjp(cts, ins, outs, wants, *, fn):
    """The transpose of a gather is the reduce-scatter (sum) of the cotangents."""
    index, full = _wanted(cts, outs, wants)
    result = [None] * len(wants)
    if full:
        for i, s in zip(index, _bind(reduce_scatter_p, "reduce_scatter", "sum", full,
                                     [fn.layouts[i] for i in index])):
            result[i] = s
    return result


def _batch(values, dims, size, *, fn):
    raise UsageError(f"rune.distributed: {fn.name} cannot run under vmap on batched values: a "
                     f"collective runs once per process, not once per lane. Call it outside vmap "
                     f"(on the stacked result)")


for _p, _vjp in ((reduce_scatter_p, _reduce_scatter_vjp), (all_gather_p, _all_gather_vjp)):
    jvp_rules[_p] = _jvp
    vjp_rules[_p] = _vjp
    batch_rules[_p] = _batch
