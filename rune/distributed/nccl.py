"""Collectives on device arrays through their platform's collective library (NCCL
on CUDA GPUs): the backend's `Communicator` (rune/backends/base.py), one per
device this process uses, connected on first use. Rank 0 makes the library's
unique id and MPI broadcasts it (a run of one process makes a communicator of
one rank, which is what the GPU check exercises).

Here leaves are packed into flat buffers on their device the way the host path
packs them (host.layout), NaN is propagated through max and min, and means are
divided; the communicator moves the flat buffers. Nothing here touches a
device's memory other than through the buffers' array module (`xp`).
"""
import numpy as np

from ..backends import backend_for
from ..errors import DeviceError
from . import runtime

_comms = {}   # Device -> its connected Communicator


def _link(device):
    """`device`'s Communicator (not yet connected), or a DeviceError where its platform has none."""
    link = backend_for(device).communicator(device)
    if link is None:
        raise DeviceError(f"rune.distributed: {device} has no collective library of its own")
    return link


def available(device):
    """Whether `device`'s platform has a collective library usable here."""
    try:
        return _link(device).available()
    except DeviceError:
        return False


def communicator(group, device):
    """`device`'s Communicator joined to the run (once per device)."""
    comm = _comms.get(device)
    if comm is None:
        comm = _link(device)
        comm.check()
        if group.comm is not None:   # several ranks: one device each, or a rune error naming them
            runtime.check_one_gpu_per_rank(group, device.index, *comm.where())
        comm.connect(group.rank, group.size,
                     lambda value: value if group.comm is None else group.comm.bcast(value, root=0))
        _comms[device] = comm
    return comm


def reduction(comm, dtype, op):
    """The dtype `op` reduces leaves of `dtype` in through `comm`; DTypeError where the
    op has no meaning for the dtype (host.work_dtype's rule, the same on every path)."""
    from .host import work_dtype
    return comm.reduce_dtype(work_dtype(np.dtype(dtype), op))


def _flat(xp, arrays, run, work):
    """The leaves `run` as `work` packed into one new buffer (host.layout: every leaf
    at a multiple of 16 bytes)."""
    from .host import pack
    return pack(xp, [xp.ascontiguousarray(arrays[i]).reshape(-1).astype(work, copy=False) for i in run], work)


def _split(flat, run, sizes, itemsize=None):
    """Leaf index -> its view in `flat`, the buffer of `run` packed by host.layout (for
    elements of `itemsize` bytes: flat's own by default)."""
    from .host import split
    return dict(zip(run, split(flat, sizes, itemsize)))


def _byte_runs(xp, arrays):
    """Per bucket of leaves: (their indices, their sizes in bytes, their bytes packed
    into one uint8 buffer by host.layout). Broadcast and gather move raw bytes, so every
    dtype (bfloat16 included) arrives bit for bit, and each leaf's view of the buffer
    starts at a multiple of 16 bytes: aligned for its dtype's loads."""
    from .host import _buckets, pack
    for run in _buckets(arrays, range(len(arrays))):
        parts = [xp.ascontiguousarray(arrays[i]).reshape(-1).view(xp.uint8) for i in run]
        yield run, [p.size for p in parts], pack(xp, parts, xp.uint8)


def _nan_mask(xp, flat, op):
    """Where this rank's floats are NaN (uint8), for a max or min; None otherwise.

    NCCL's MAX and MIN, like MPI's, do not promise to propagate NaN (a comparison
    with NaN is false, so the order of combining decides). The ranks also reduce
    this mask with MAX, a logical or, and put NaN wherever any rank had one:
    the result nx.max and nx.min give."""
    if op not in ("max", "min") or flat.dtype.kind != "f":
        return None
    return xp.isnan(flat).astype(xp.uint8)


def all_reduce(group, arrays, op, device):
    from .blocks import by_dtype
    from .host import _buckets
    comm = communicator(group, device)
    xp = comm.xp
    out = [None] * len(arrays)
    with comm.selected():
        for dtype, index in by_dtype(arrays):
            work = reduction(comm, dtype, op)
            for run in _buckets(arrays, index):
                sizes = [arrays[i].size for i in run]
                flat = _flat(xp, arrays, run, work)
                nans = _nan_mask(xp, flat, op)
                if flat.size:
                    comm.all_reduce(flat, "sum" if op == "mean" else op)
                if nans is not None and nans.size:
                    comm.all_reduce(nans, "max")
                    flat = xp.where(nans.astype(bool), flat.dtype.type(np.nan), flat)
                if op == "mean":
                    flat /= flat.dtype.type(group.size)
                flat = flat.astype(dtype, copy=False)
                for i, piece in _split(flat, run, sizes, work.itemsize).items():
                    out[i] = piece.reshape(arrays[i].shape)
    return out


def broadcast(group, arrays, root, device):
    comm = communicator(group, device)
    out = [None] * len(arrays)
    with comm.selected():
        for run, sizes, flat in _byte_runs(comm.xp, arrays):
            if flat.size:
                comm.broadcast(flat, root)
            for i, piece in _split(flat, run, sizes).items():
                out[i] = piece.view(arrays[i].dtype).reshape(arrays[i].shape)
    return out


def all_gather(group, arrays, axis, device):
    comm = communicator(group, device)
    xp = comm.xp
    out = [None] * len(arrays)
    with comm.selected():
        for run, sizes, mine in _byte_runs(xp, arrays):
            every = xp.empty((group.size, mine.size), xp.uint8)
            if mine.size:
                comm.all_gather(mine, every)
            rows = [_split(every[r], run, sizes) for r in range(group.size)]
            for i in run:
                parts = [row[i].view(arrays[i].dtype).reshape(arrays[i].shape) for row in rows]
                out[i] = xp.concatenate(parts, axis=axis[i])
    return out
