"""reduce_scatter and all_gather of blocks (rune/distributed/scatter.py) on device
arrays through their platform's Communicator (NCCL on CUDA GPUs; rune/backends/base.py),
the way rune/distributed/nccl.py runs all_reduce: packing, casting and NaN masks in
the buffers' own array module (`comm.xp`), the communicator moving flat buffers.

The blocks are laid out as on the host (blocks.rows_first: row r of a (size, K)
buffer is rank r's block of every leaf of one dtype), so device and host paths agree
on which rank holds which rows. A communicator with a `reduce_scatter(send, mine, op)`
(NCCL's ReduceScatter) moves 1/size of what an all_reduce does; one without it
reduces the whole (size, K) buffer with `all_reduce` and keeps its own row. The
library picks its own reduction order (rings, trees): sums match the host's rank
order to rounding, not bit for bit.
"""
import numpy as np

from . import nccl
from .blocks import by_dtype, flat_if, out_shape, rows_first, split_reduced


def _reduce_rows(comm, send, op, rank):
    """This rank's row of the (size, K) buffer `send` reduced over the ranks (op "sum", "max", "min")."""
    xp = comm.xp
    if hasattr(comm, "reduce_scatter"):
        mine = xp.empty(send.shape[1], send.dtype)
        comm.reduce_scatter(send, mine, op)
        return mine
    comm.all_reduce(send, op)
    return send[rank].copy()


def reduce_scatter(group, raws, op, layouts, device):
    comm = nccl.communicator(group, device)
    xp, size = comm.xp, group.size
    out = [None] * len(raws)
    with comm.selected():
        for dtype, index in by_dtype(raws):
            work = nccl.reduction(comm, dtype, op)
            parts = [rows_first(flat_if(raws[i], layouts[i]).astype(work, copy=False), *layouts[i][:2], size, xp)
                     for i in index]
            send = xp.ascontiguousarray(xp.concatenate(parts, axis=1))
            nans = nccl._nan_mask(xp, send, op)
            mine = _reduce_rows(comm, send, "sum" if op == "mean" else op, group.rank) if send.size \
                else xp.empty(send.shape[1], work)
            if nans is not None and nans.size:   # NaN wherever any rank had one, as nx.max
                mask = _reduce_rows(comm, xp.ascontiguousarray(nans), "max", group.rank)
                mine = xp.where(mask.astype(bool), mine.dtype.type(np.nan), mine)
            if op == "mean":
                mine /= mine.dtype.type(size)
            split_reduced(mine, index, parts, raws, layouts, size, dtype, out, xp)
    return out


def all_gather(group, raws, layouts, device):
    comm = nccl.communicator(group, device)
    xp, size = comm.xp, group.size
    out = []
    with comm.selected():
        parts = [xp.ascontiguousarray(xp.moveaxis(r, axis, 0)).reshape(-1).view(xp.uint8)
                 for r, (axis, _, _) in zip(raws, layouts)]
        mine = xp.concatenate(parts)
        every = xp.empty((size, mine.size), xp.uint8)
        if mine.size:
            comm.all_gather(mine, every)
        start = 0
        for r, part, layout in zip(raws, parts, layouts):
            axis, n, _ = layout
            rows = xp.ascontiguousarray(every[:, start:start + part.size]).view(r.dtype)
            start += part.size
            moved = (size * r.shape[axis],) + tuple(s for d, s in enumerate(r.shape) if d != axis)
            whole = xp.moveaxis(rows.reshape(moved)[:n], 0, axis)
            out.append(whole.reshape(out_shape("all_gather", r.shape, layout, size)))
    return out
