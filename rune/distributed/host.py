"""Collectives on host (NumPy) buffers through MPI's buffer interface: no pickling.

Leaves of one dtype travel together: they are packed into one flat buffer
(up to `BUCKET_BYTES`; a larger tree makes several buckets, a leaf larger than
a bucket goes alone and uncopied), so a tree of a hundred gradients costs one
or a few MPI calls. Every packed leaf starts at a multiple of `ALIGN` bytes
and every bucket's size is one (`layout`), so each leaf handed back as a view
of a bucket is aligned for its dtype, on the host and on a GPU (nccl.py packs
the same way) alike. Reductions of float16 and bfloat16 run in float32 (MPI has
no such types; summing in float32 also loses less); broadcasts and gathers
move raw bytes, so any dtype travels bit for bit.
"""
import weakref

import numpy as np

from ..backends import host_block
from ..errors import DTypeError
from ..core import dtypes as dt
from .blocks import by_dtype

BUCKET_BYTES = 1 << 27   # 128 MiB: bounds the extra memory of packing

# The memory of large reductions' results is recycled once nothing can read the
# last result made in it (a training loop reduces same-shaped gradients every
# step): a fresh 100 MB buffer costs its page faults, about a sixth of the
# reduction itself. Each result is a fresh array over a kept `Block`, whose
# weakref says whether anything still holds it (rune/backends/cpu/blocks.py).
POOL_MIN_BYTES = 1 << 16
POOL_MAX_BYTES = 1 << 29  # at most this much memory kept for reuse
_pool = []   # [block, a weakref to the array last handed out over it], least recently used first


SCRATCH_MAX_BYTES = 1 << 28
_scratch = {}   # (leaf sizes, dtype) -> the packing buffer of the last reduction of that layout


def _packed(arrays, run, work):
    """The leaves `run` as one flat `work` buffer laid out by `layout`, packed into a
    reused scratch buffer (only this call reads it; MPI is slower on fresh memory than
    on warm pages) whose padding stays zero."""
    sizes = [arrays[i].size for i in run]
    key = (tuple(sizes), work)
    buf = _scratch.pop(key, None)
    starts, size = layout(sizes, work.itemsize)
    if buf is None:
        buf = np.zeros(size, work)
    _scratch[key] = buf
    while sum(b.nbytes for b in _scratch.values()) > SCRATCH_MAX_BYTES:
        del _scratch[next(iter(_scratch))]   # the least recently used layout first
    for i, start, n in zip(run, starts, sizes):
        buf[start:start + n] = arrays[i].reshape(-1)
    return buf


def _result_buffer(size, dtype):
    """A fresh flat array of `size` elements, over the memory of an earlier one that
    nothing holds any more (no caller, view, memoryview or DLPack capsule), or new."""
    nbytes = size * dtype.itemsize
    if nbytes < POOL_MIN_BYTES:
        return np.empty(size, dtype)
    for k, (block, handed) in enumerate(_pool):
        if block.size == size and block.dtype == dtype and handed() is None:
            del _pool[k]
            break
    else:
        block = host_block(size, dtype)
    buf = block.view(np.ndarray)
    _pool.append([block, weakref.ref(buf)])
    while sum(b.nbytes for b, _ in _pool) > POOL_MAX_BYTES:
        del _pool[0]   # an array still over it keeps it alive
    return buf


# Where packed leaves start, and what a bucket's size is a multiple of, in bytes:
# a view of a bucket must be aligned for its dtype's loads (on a GPU, a float32
# read at byte 6 faults with cudaErrorMisalignedAddress and the CUDA context is
# lost), and 16 bytes also keeps vector loads of every dtype on their fast path.
# all_gather's rows (rank r's bucket at r times its size) start aligned too.
ALIGN = 16


def layout(sizes, itemsize):
    """Where leaves of `sizes` elements of `itemsize` bytes lie when packed one after
    another: (each leaf's start, the buffer's size), in elements. Every start, and the
    size, is a multiple of ALIGN bytes (`itemsize` divides ALIGN for every dtype rune has)."""
    per = ALIGN // itemsize
    starts, end = [], 0
    for n in sizes:
        starts.append(end)
        end += -(-n // per) * per
    return starts, end


def pack(xp, parts, dtype):
    """Flat arrays of `dtype` (NumPy or CuPy: `xp`) packed by `layout` into one new
    buffer, zeros between them; one concatenation (one kernel on a GPU)."""
    per = ALIGN // np.dtype(dtype).itemsize
    pad = xp.zeros(per, dtype)
    pieces = []
    for p in parts:
        pieces.append(p)
        if p.size % per:
            pieces.append(pad[:per - p.size % per])
    return xp.concatenate(pieces)


def split(flat, sizes, itemsize=None):
    """The leaves of `sizes` elements in `flat`, a buffer packed by `layout` for elements
    of `itemsize` bytes (flat's own by default; a reduction's result is cast from the
    dtype it was packed in): views."""
    starts, _ = layout(sizes, itemsize or flat.dtype.itemsize)
    return [flat[start:start + n] for start, n in zip(starts, sizes)]


def _buckets(arrays, index):
    """Split the leaves `index` into runs of at most BUCKET_BYTES packed (a larger leaf alone)."""
    run, size = [], 0
    for i in index:
        n = -(-arrays[i].nbytes // ALIGN) * ALIGN
        if run and size + n > BUCKET_BYTES:
            yield run
            run, size = [], 0
        run.append(i)
        size += n
    if run:
        yield run



def work_dtype(dtype, op):
    """The dtype a reduction `op` of `dtype` leaves runs in; DTypeError when it has no meaning."""
    if dtype == np.bool_:
        if op in ("sum", "mean"):
            raise DTypeError(f"all_reduce: op {op!r} needs numbers, got a bool leaf (use 'max' for "
                             f"logical or, 'min' for logical and)")
        return np.dtype(np.uint8)
    if op == "mean" and dtype.kind not in "fcV":
        raise DTypeError(f"all_reduce: op 'mean' needs floating leaves, got {dtype.name}; "
                         f"use op 'sum' and divide")
    if op in ("max", "min") and dtype.kind == "c":
        raise DTypeError(f"all_reduce: op {op!r} has no order on complex leaves ({dtype.name})")
    return np.dtype(np.float32) if dtype in (np.float16, dt.bfloat16) else dtype


# MPI's MAX and MIN compare with < and >, so a NaN wins or loses by the order the
# ranks are combined in. For floating leaves rune reduces with NumPy's maximum and
# minimum instead, which propagate NaN as nx.max and nx.min do: one user-defined
# MPI operation per (op, dtype), made on first use.
_nan_ops = {}


def _nan_propagating(MPI, op, dtype):
    key = (op, dtype)
    if key not in _nan_ops:
        ufunc = np.maximum if op == "max" else np.minimum

        def combine(inbuf, inoutbuf, datatype):
            acc = np.frombuffer(inoutbuf, dtype)
            ufunc(np.frombuffer(inbuf, dtype), acc, out=acc)

        _nan_ops[key] = MPI.Op.Create(combine, commute=True)
    return _nan_ops[key]


def _mpi_op(MPI, op, work):
    """The MPI operation that reduces `work` buffers for `op`."""
    if op in ("max", "min") and work.kind == "f":
        return _nan_propagating(MPI, op, work)
    return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]


def all_reduce(group, arrays, op):
    """Every rank's `arrays` reduced elementwise; a list of new NumPy arrays."""
    out = [None] * len(arrays)
    for dtype, index in by_dtype(arrays):
        work = work_dtype(dtype, op)
        reduce_op = _mpi_op(group.MPI, op, work)
        for run in _buckets(arrays, index):
            sizes = [arrays[i].size for i in run]
            if sum(sizes) == 0:
                flat = np.empty(0, work)
            else:
                if len(run) == 1:   # one leaf: reduce straight from its own buffer
                    send = np.ascontiguousarray(arrays[run[0]]).reshape(-1).astype(work, copy=False)
                else:
                    send = _packed(arrays, run, work)
                # Into a separate buffer: MPICH's in-place reduction copies, twice as slow.
                flat = _result_buffer(send.size, send.dtype)
                group.comm.Allreduce(send, flat, op=reduce_op)
            if op == "mean":
                flat /= flat.dtype.type(group.size)
            flat = flat.astype(dtype, copy=False)
            for i, piece in zip(run, split(flat, sizes, work.itemsize)):
                out[i] = piece.reshape(arrays[i].shape)
    return out


def _as_bytes(a):
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def broadcast(group, arrays, root):
    """`root`'s arrays on every rank (bit for bit)."""
    out = [None] * len(arrays)
    for run in _buckets(arrays, range(len(arrays))):
        sizes = [arrays[i].nbytes for i in run]
        if group.rank == root:
            flat = pack(np, [_as_bytes(arrays[i]) for i in run], np.uint8)
        else:
            flat = np.empty(layout(sizes, 1)[1], np.uint8)
        if flat.size:
            group.comm.Bcast(flat, root=root)
        for i, piece in zip(run, split(flat, sizes)):
            out[i] = piece.view(arrays[i].dtype).reshape(arrays[i].shape)
    return out


def all_gather(group, arrays, axis):
    """Every rank's arrays concatenated along `axis` (rank order), bit for bit."""
    out = [None] * len(arrays)
    for run in _buckets(arrays, range(len(arrays))):
        sizes = [arrays[i].nbytes for i in run]
        mine = pack(np, [_as_bytes(arrays[i]) for i in run], np.uint8)
        every = np.empty((group.size, mine.size), np.uint8)
        if mine.size:
            group.comm.Allgather(mine, every)
        rows = [split(every[r], sizes) for r in range(group.size)]
        for k, i in enumerate(run):
            parts = [row[k].view(arrays[i].dtype).reshape(arrays[i].shape) for row in rows]
            out[i] = np.concatenate(parts, axis=axis[i])
    return out
