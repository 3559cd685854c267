"""How a leaf is cut into blocks, one per rank (rune/distributed/scatter.py's collectives,
on the host and on devices alike): rank r's block is rows [r * b, (r + 1) * b) of the
leaf along an axis, b = ceil(n / size), the leaf padded with zeros at the end of the
axis; a leaf that travels flattened (`flat_layout`) is cut the same way along its
elements. A layout is (axis, rows of the whole leaf, the whole leaf's shape where it
travels flattened, else None)."""
import numpy as np


def blocks(n, size):
    """Rows per rank when `n` rows are split among `size` ranks (the last padded)."""
    return -(-n // size)


def rows_first(x, axis, n, size, xp=np):
    """Leaf `x` (its `axis` of length n) as (size, block elements): row r is rank r's
    block, the leaf padded with zeros at the end of `axis` to size * blocks(n, size)."""
    x = xp.moveaxis(x, axis, 0)
    b = blocks(n, size)
    if b * size != n:
        pad = xp.zeros((b * size - n,) + x.shape[1:], x.dtype)
        x = xp.concatenate([x, pad])
    return xp.ascontiguousarray(x).reshape(size, b * int(np.prod(x.shape[1:], dtype=np.int64)))


def block_shape(shape, axis, n, size):
    """The shape of one rank's block of a leaf of `shape` (rows along `axis`: n)."""
    return tuple(blocks(n, size) if d == axis else s for d, s in enumerate(shape))


def flat_layout(shape):
    """The layout of a leaf of `shape` sharded flattened: its elements in a row,
    padded, cut into blocks (what ZeRO and fully_shard use). The collectives take
    the whole leaf in and give it out in its own shape, so a traced program never
    reshapes it: a sharded step computes its gradients as the unsharded one does."""
    return (0, int(np.prod(shape, dtype=np.int64)), tuple(shape))


def out_shape(kind, shape, layout, size):
    """The shape a collective gives for an input of `shape` and its `layout`."""
    axis, n, whole = layout
    if kind == "reduce_scatter":
        return (blocks(n, size),) if whole is not None else block_shape(shape, axis, n, size)
    return whole if whole is not None else tuple(n if d == axis else s for d, s in enumerate(shape))


def from_rows_first(flat, shape, axis, xp=np):
    """A block laid out rows-first (`flat`) back in a leaf's axis order, `shape` being
    the result's shape."""
    moved = (shape[axis],) + tuple(s for d, s in enumerate(shape) if d != axis)
    return xp.moveaxis(flat.reshape(moved), 0, axis)


def flat_if(x, layout):
    """`x` flattened when its layout says it travels so."""
    return x.reshape(-1) if layout[2] is not None else x


def by_dtype(arrays):
    """(dtype, [indices]) of `arrays` grouped by dtype, in first-seen order: the leaves of
    one dtype travel as one buffer."""
    groups = {}
    for i, a in enumerate(arrays):
        groups.setdefault(np.dtype(a.dtype), []).append(i)
    return groups.items()


def split_reduced(mine, index, parts, raws, layouts, size, dtype, out, xp=np):
    """This rank's reduced rows `mine` (the blocks of the leaves `index`, `parts` their
    rows-first sends, concatenated) cut back into each leaf's block, in the leaf's axis
    order and `dtype`, stored in `out`."""
    start = 0
    for i, part in zip(index, parts):
        piece = mine[start:start + part.shape[1]].astype(dtype, copy=False)
        start += part.shape[1]
        out[i] = from_rows_first(piece, out_shape("reduce_scatter", raws[i].shape, layouts[i], size),
                                 layouts[i][0], xp)
