"""Sharded data parallelism: ZeRO-1/2 (`sharded(optimizer)`) and ZeRO-3 / FSDP
(`fully_shard(module)`), on the collectives of rune/distributed/scatter.py.

Every leaf is sharded the same way: flattened, padded with zeros to a multiple of
`size()`, and cut into `size()` equal blocks; rank r keeps block r (`block_of`).

- `sharded(optimizer, stage=2)` wraps an optax-shaped transformation. Its state is
  the inner optimizer's state for this rank's blocks only (1/size of it). `update`
  takes this rank's LOCAL gradients (not averaged) and returns whole updates:
  the mean gradient's block arrives by `reduce_scatter` (stage 2; stage 1 takes
  its block of an `all_reduce`), the inner optimizer updates the blocks, and the
  blocks of the updates are all-gathered. So it drops into a jitted step where
  `all_reduce(grads, "mean")` and the plain optimizer were, and the parameters
  stay bit for bit those of that unsharded step (sums in rank order, see
  scatter.py), for transformations that act elementwise (sgd, adam, adamw,
  rmsprop, lion, adagrad, schedules, masks given as trees). Those that read a
  leaf's shape or a norm over leaves (adafactor, lamb, clip_by_block_rms, masks
  computed from shapes, optim.clip_by_global_norm) would see flat blocks: use
  `clip_by_global_norm` below, which sums the squares over every rank's blocks.
- `fully_shard(module)` keeps the module's parameters as blocks (a `FullyShard`,
  a pytree whose leaves are this rank's blocks). Called, it gathers them
  (`all_gather`), rebuilds the module and runs it; by default inside
  `rune.checkpoint`, so the gathered parameters are not kept for the backward
  pass but gathered again there (`reshard_after_forward=False` keeps them). Its
  gradients are blocks: `all_gather`'s transpose reduce-scatters them (summed
  over ranks) as each module's backward ends. `sharded(optimizer)` updates them
  in place (the sum divided by size(): the mean), and every other leaf as above.
  Wrap the blocks of a model, then the model (FSDP2's `fully_shard` order): a
  module already wrapped stays as it is inside the outer one, which gathers
  only the rest. (The block of the sum arrives in the parameter's dtype before
  the division, so half-precision parameters match the unsharded mean, taken in
  float32, to rounding; float32 parameters, nn.Policy's default, bit for bit.)
"""
import numpy as np

from .. import nx, tree
from ..errors import DistributedError, UsageError
from ..optim import GradientTransformation
from . import runtime
from .collectives import all_reduce
from .blocks import blocks
from .scatter import gather_leaves, scatter_leaves


def block_of(x, rank, size):
    """Rank `rank`'s block of leaf `x`: its elements, flattened and padded with zeros to
    a multiple of `size`, rows [rank * b, (rank + 1) * b) for b = ceil(x.size / size)."""
    flat = nx.reshape(x, (-1,))
    b = blocks(flat.shape[0], size)
    pad = b * size - flat.shape[0]
    if pad:
        flat = nx.concatenate([flat, nx.zeros((pad,), flat.dtype)])
    return flat[rank * b:(rank + 1) * b]


def _group():
    group = runtime.initialize()
    return group.rank, group.size


# ---------------------------------------------------------------- FSDP: fully_shard

def _is_fully_shard(x):
    return isinstance(x, FullyShard)


class FullyShard:
    """A module whose parameters live as this rank's blocks (see the module's docstring).

    `blocks` are the pytree's children: this rank's block of each of the module's
    parameters, and each module inside it already wrapped (a FullyShard of its own),
    in the module's leaf order. The rest (how to rebuild the module, the leaves'
    shapes, the group size) is static.
    """
    __slots__ = ("blocks", "_layout")

    def __init__(self, blocks_, layout):
        self.blocks = tuple(blocks_)
        self._layout = layout   # (module structure, ((shape, size) or None per child), paths, size, reshard)

    @property
    def size(self):
        return self._layout[3]

    def gather(self):
        """The module, its parameters gathered from every rank (a DistributedError in a
        group of another size than the one it was sharded for)."""
        structure, shapes, paths, size, _ = self._layout
        group = runtime.initialize()
        if group.size != size:
            where = next((p for p, s in zip(paths, shapes) if s is not None), "")
            raise DistributedError(
                f"rune.distributed: rank {group.rank} of {group.size} calls a fully_shard module sharded for "
                f"{size} processes (its parameter at {where or 'the root'} holds 1/{size} on each): use it in "
                f"the group it was sharded in, or load it with rune.load(like=...) in this one")
        own = [i for i, s in enumerate(shapes) if s is not None]
        full = gather_leaves([self.blocks[i] for i in own], [shapes[i][0] for i in own]) if own else []
        children = list(self.blocks)
        for i, g in zip(own, full):
            children[i] = g
        return tree.unflatten(structure, children)

    def __call__(self, *args, **kwargs):
        if not self._layout[4]:
            return self.gather()(*args, **kwargs)
        # Gathered inside a checkpoint: the backward pass runs the gather again instead of
        # keeping the whole parameters alive from the forward pass to the backward.
        from ..transforms.autodiff.api import checkpoint
        leaves, structure = tree.flatten((args, kwargs))
        arrays = [i for i, x in enumerate(leaves) if hasattr(x, "aval") or isinstance(x, np.ndarray)]
        layout = self._layout

        def run(blocks_, values):
            filled = list(leaves)   # the other arguments (flags, sizes) stay Python values
            for i, v in zip(arrays, values):
                filled[i] = v
            a, k = tree.unflatten(structure, filled)
            return FullyShard(blocks_, layout).gather()(*a, **k)
        return checkpoint(run)(self.blocks, [leaves[i] for i in arrays])

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"{name!r}: a fully_shard module holds its parameters as blocks; read "
                             f"module.gather().{name} for the whole module's field")

    def __repr__(self):
        structure, shapes, _, size, _ = self._layout
        n = sum(1 for s in shapes if s is not None)
        return f"FullyShard({n} parameters in blocks of 1/{size}: {structure!r})"


def _flatten_fs(fs):
    return fs.blocks, fs._layout


def _unflatten_fs(layout, children):
    return FullyShard(children, layout)


def _keys_fs(layout, n):
    return [f".blocks[{i}]" for i in range(n)]


tree.register(FullyShard, _flatten_fs, _unflatten_fs, keys=_keys_fs)


def fully_shard(module, reshard_after_forward=True):
    """`module` with its parameters kept as this rank's blocks: a `FullyShard`, called as
    the module is (see the module's docstring). Modules inside it already wrapped
    are kept as they are; every rank wraps the same module (built alike)."""
    rank, size = _group()
    pairs, structure = tree.flatten_with_paths(module, is_leaf=_is_fully_shard)
    children, shapes, paths = [], [], []
    for path, leaf in pairs:
        paths.append(path)
        if _is_fully_shard(leaf):
            children.append(leaf)
            shapes.append(None)
            continue
        x = nx.asarray(leaf)
        children.append(block_of(x, rank, size))
        shapes.append((tuple(x.shape), int(x.size)))
    return FullyShard(children, (structure, tuple(shapes), tuple(paths), size, bool(reshard_after_forward)))


def _sharded_flags(params):
    """For each leaf of `params` (tree.leaves order): whether it is a block of a
    FullyShard (already sharded) rather than a whole leaf."""
    flags = []
    for x in tree.leaves(params, is_leaf=_is_fully_shard):
        if _is_fully_shard(x):
            shapes = x._layout[1]
            for child, shape in zip(x.blocks, shapes):
                flags.extend([True] if shape is not None else _sharded_flags(child))
        else:
            flags.append(False)
    return flags


# ---------------------------------------------------------------- ZeRO-1/2: sharded

class ShardedState:
    """The state of a `sharded` optimizer: the inner optimizer's state for this rank's
    blocks (`inner`, the pytree's one child) and, static, which of its leaves are
    blocks and of what whole leaf (`layout`: per leaf of `inner`, the whole leaf's
    shape or None for a leaf every rank holds whole, such as a step count; then the
    group size). Checkpoints read the layout to save each rank's blocks and to
    reshard them on load (rune/distributed/sharded_checkpoints.py)."""
    __slots__ = ("inner", "layout")

    def __init__(self, inner, layout):
        self.inner, self.layout = inner, layout

    def __repr__(self):
        return f"ShardedState(1/{self.layout[1]} of {self.inner!r})"


tree.register(ShardedState, lambda s: ((s.inner,), s.layout), lambda layout, c: ShardedState(c[0], layout),
              keys=lambda layout, n: [".inner"])


def _state_layout(params, inner):
    """Which leaves of an inner optimizer state are blocks of which parameter: a state
    leaf is a block of parameter P when its path ends with P's path (optax-shaped
    states mirror the parameters: mu, nu, trace) and its shape is P's block's. A
    FullyShard's blocks count as parameters of their whole shape."""
    rank, size = _group()
    wholes = {}
    for (path, leaf), whole in zip(tree.flatten_with_paths(params)[0], _whole_shapes(params)):
        wholes[path] = whole
    out = []
    for path, leaf in tree.flatten_with_paths(inner)[0]:
        match = None
        for p, whole in wholes.items():
            n = int(np.prod(whole, dtype=np.int64))
            if path.endswith(p) and tuple(getattr(leaf, "shape", ())) == (blocks(n, size),) and \
                    (match is None or len(p) > len(match[0])):
                match = (p, whole)
        out.append(None if match is None else match[1])
    return (tuple(out), size)


def _whole_shapes(params):
    """The whole shape of each leaf of `params` (a FullyShard's blocks: their parameters')."""
    shapes = []
    for x in tree.leaves(params, is_leaf=_is_fully_shard):
        if _is_fully_shard(x):
            for child, shape in zip(x.blocks, x._layout[1]):
                shapes.extend([shape[0]] if shape is not None else _whole_shapes(child))
        else:
            shapes.append(tuple(getattr(x, "shape", ())))
    return shapes


class WholeLeaf:
    """A leaf of `whole_view`: the shape, dtype, ndim and size of a whole parameter."""
    __slots__ = ("shape", "dtype", "ndim", "size")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype
        self.ndim, self.size = len(self.shape), int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self):
        return f"WholeLeaf({self.shape}, {self.dtype})"


def whole_view(params):
    """`params` (with fully_shard modules or not) with every leaf a `WholeLeaf` of its
    whole parameter's shape: for functions of the parameters' shapes, such as a
    weight-decay mask `lambda p: tree.map(lambda x: x.ndim >= 2, p)`, which would see
    only flat blocks inside `sharded`: with `flags = fn(whole_view(params))`,
    `sharded(optim.adamw(..., mask=lambda blocks: flags))` masks by the whole shapes
    (a function returning the tree: a FullyShard at its root is callable, and a
    callable mask is called)."""
    leaves, structure = tree.flatten(params)
    return tree.unflatten(structure, [WholeLeaf(shape, x.dtype) for x, shape in zip(leaves, _whole_shapes(params))])


def block_layout(tree_):
    """Per leaf of `tree_` (tree.leaves order): the whole leaf's shape where the leaf is
    this rank's block of it (inside a FullyShard or a ShardedState), else None; and the
    group size the blocks are for (None when the tree holds no blocks)."""
    out, sizes = [], set()
    for x in tree.leaves(tree_, is_leaf=lambda n: _is_fully_shard(n) or isinstance(n, ShardedState)):
        if _is_fully_shard(x):
            sizes.add(x.size)
            for child, shape in zip(x.blocks, x._layout[1]):
                if shape is not None:
                    out.append(shape[0])
                else:
                    inner, inner_sizes = block_layout(child)
                    out.extend(inner)
                    sizes.update(inner_sizes or ())
        elif isinstance(x, ShardedState):
            sizes.add(x.layout[1])
            out.extend(x.layout[0])
        else:
            out.append(None)
    return out, (sizes or None)


def sharded(optimizer, stage=2):
    """`optimizer` (an optax-shaped transformation) with its state sharded over the
    ranks: ZeRO-1 (`stage=1`: the mean gradient by all_reduce, each rank updating its
    block) or ZeRO-2 (`stage=2`: each rank receives only its block of the mean
    gradient, by reduce_scatter). Leaves of `fully_shard` modules are blocks already
    and are updated as such (ZeRO-3). `update(local_grads, state, params)` returns
    whole updates for `optim.apply_updates` (see the module's docstring)."""
    if stage not in (1, 2):
        raise UsageError(f"sharded: stage must be 1 (optimizer state) or 2 (and gradients), got {stage!r}; "
                         f"parameters are sharded by wrapping modules in fully_shard")

    def blocks_of(params):
        rank, size = _group()
        leaves, structure = tree.flatten(params)
        flags = _sharded_flags(params)
        return tree.unflatten(structure, [x if f else block_of(nx.asarray(x), rank, size)
                                          for x, f in zip(leaves, flags)])

    def init(params):
        inner = optimizer.init(blocks_of(params))
        return ShardedState(inner, _state_layout(params, inner))

    def update(grads, state, params=None):
        rank, size = _group()
        leaves, structure = tree.flatten(grads)
        flags = _sharded_flags(grads)
        whole = [i for i, f in enumerate(flags) if not f]
        mean = [None] * len(leaves)
        for i, f in enumerate(flags):
            if f:   # a FullyShard's gradient block: the sum over ranks, from all_gather's transpose
                mean[i] = leaves[i] / size
        if whole:
            if stage == 2:
                got = scatter_leaves([leaves[i] for i in whole], "mean")
            else:
                got = [block_of(g, rank, size) for g in all_reduce([leaves[i] for i in whole], "mean")]
            for i, g in zip(whole, got):
                mean[i] = g
        inner_params = None if params is None else blocks_of(params)
        updates, inner = optimizer.update(tree.unflatten(structure, mean), state.inner, inner_params)
        out = tree.leaves(updates)
        if whole:
            for i, u in zip(whole, gather_leaves([out[i] for i in whole], [leaves[i].shape for i in whole])):
                out[i] = u
        return tree.unflatten(structure, out), ShardedState(inner, state.layout)

    return GradientTransformation(init, update)


def clip_by_global_norm(max_norm):
    """optim.clip_by_global_norm for the blocks `sharded` hands its inner optimizer:
    the squares are summed over this rank's blocks, then over the ranks (all_reduce),
    so every rank scales by the norm of the whole gradient (equal to the unsharded
    norm up to the order of the sum). Padding is zero and adds nothing."""
    def init(params):
        return ()

    def update(updates, state, params=None):
        leaves = tree.leaves(updates)
        local = sum(nx.sum(nx.square(nx.astype(u, nx.float32) if u.dtype in (nx.float16, nx.bfloat16) else u))
                    for u in leaves)
        norm = nx.sqrt(all_reduce(local, "sum"))
        factor = nx.where(norm <= max_norm, 1.0, max_norm / nx.maximum(norm, 1e-30))
        return tree.map(lambda u: u * factor.astype(u.dtype), updates), state
    return GradientTransformation(init, update)
