"""Collectives on GPU (CuPy) arrays through NCCL.

One NCCL communicator per GPU this process uses; rank 0 makes its unique id
and MPI broadcasts it (a run of one process makes a communicator of one rank,
which is what the GPU check exercises). Work is queued on the current CuPy
stream of the arrays' device, so it orders with the kernels that made them.
Importing this module never imports CuPy: everything happens on first use.
"""
import numpy as np

from ..errors import DeviceError
from . import runtime

_comms = {}   # CUDA device index -> NcclCommunicator


def available():
    """Whether CuPy can reach an NCCL library here."""
    try:
        _nccl()
    except DeviceError:
        return False
    return True


def _nccl():
    try:
        from cupy.cuda import nccl
    except Exception as e:
        raise DeviceError(f"rune.distributed: arrays on a GPU travel through NCCL, but cupy.cuda.nccl "
                          f"cannot be imported ({type(e).__name__}: {e}); install a CuPy built with NCCL "
                          f"or place the arrays on the host") from e
    # CuPy 14 imports its nccl module whether or not libnccl loads, and says which in `available`.
    if not getattr(nccl, "available", True):
        raise DeviceError("rune.distributed: arrays on a GPU travel through NCCL, but CuPy found no NCCL "
                          "library (pip install nvidia-nccl-cu13, matching CuPy's CUDA), or place the "
                          "arrays on the host")
    return nccl


def communicator(group, device_index):
    comm = _comms.get(device_index)
    if comm is None:
        import cupy
        nccl = _nccl()
        if group.comm is not None:   # several ranks: one GPU each, or a rune error naming them
            with cupy.cuda.Device(device_index) as gpu:
                runtime.check_one_gpu_per_rank(group, device_index, gpu.pci_bus_id,
                                               cupy.cuda.runtime.getDeviceCount())
        uid = nccl.get_unique_id() if group.rank == 0 else None
        if group.comm is not None:
            uid = group.comm.bcast(uid, root=0)   # a few bytes, once: pickling is fine here
        with cupy.cuda.Device(device_index):
            comm = nccl.NcclCommunicator(group.size, uid, group.rank)
        _comms[device_index] = comm
    return comm


# NCCL's element type for each dtype a reduction runs in, and how many of them make
# one element: complex numbers travel as pairs of floats (their sum, and so their
# mean, is the sum of each part; max and min have no order on complex numbers and
# are refused first, by host.work_dtype, as on the host).
_TYPES = {"float32": ("FLOAT32", 1), "float64": ("FLOAT64", 1), "int8": ("INT8", 1), "uint8": ("UINT8", 1),
          "int32": ("INT32", 1), "uint32": ("UINT32", 1), "int64": ("INT64", 1), "uint64": ("UINT64", 1),
          "complex64": ("FLOAT32", 2), "complex128": ("FLOAT64", 2)}
# NCCL has no 16-bit integers: they reduce in 32 bits and wrap back on the cast, as
# the host's 16-bit sums wrap (exact while fewer than 65,536 ranks add).
_WIDER = {np.dtype(np.int16): np.dtype(np.int32), np.dtype(np.uint16): np.dtype(np.uint32)}


def reduction(dtype, op):
    """How `op` reduces leaves of `dtype` over NCCL: (the dtype it runs in, the name of
    NCCL's element type, elements of that type per element). DTypeError where the
    op has no meaning for the dtype (host.work_dtype's rule, the same on every path)."""
    from .host import work_dtype
    work = work_dtype(np.dtype(dtype), op)
    work = _WIDER.get(work, work)
    name, lanes = _TYPES[work.name]
    return work, name, lanes


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


def _byte_runs(cupy, arrays):
    """Per bucket of leaves: (their indices, their sizes in bytes, their bytes packed
    into one uint8 buffer by host.layout). Broadcast and gather move raw bytes, so every
    dtype (bfloat16 included) arrives bit for bit, and each leaf's view of the buffer
    starts at a multiple of 16 bytes: aligned for its dtype's loads."""
    from .host import _buckets, pack
    for run in _buckets(arrays, range(len(arrays))):
        parts = [cupy.ascontiguousarray(arrays[i]).reshape(-1).view(cupy.uint8) for i in run]
        yield run, [p.size for p in parts], pack(cupy, parts, cupy.uint8)


def _nan_mask(cupy, flat, op):
    """Where this rank's floats are NaN (uint8), for a max or min; None otherwise.

    NCCL's MAX and MIN, like MPI's, do not promise to propagate NaN (a comparison
    with NaN is false, so the order of combining decides). The ranks also reduce
    this mask with MAX, a logical or, and put NaN wherever any rank had one:
    the result nx.max and nx.min give."""
    if op not in ("max", "min") or flat.dtype.kind != "f":
        return None
    return cupy.isnan(flat).astype(cupy.uint8)


def all_reduce(group, arrays, op, device_index):
    import cupy
    from .host import _buckets, _by_dtype
    nccl = _nccl()
    comm = communicator(group, device_index)
    ops = {"sum": nccl.NCCL_SUM, "mean": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}
    out = [None] * len(arrays)
    with cupy.cuda.Device(device_index):
        stream = cupy.cuda.get_current_stream().ptr
        for dtype, index in _by_dtype(arrays):
            work, name, lanes = reduction(dtype, op)
            for run in _buckets(arrays, index):
                sizes = [arrays[i].size for i in run]
                flat = _flat(cupy, arrays, run, work)
                nans = _nan_mask(cupy, flat, op)
                if flat.size:
                    comm.allReduce(flat.data.ptr, flat.data.ptr, flat.size * lanes, getattr(nccl, "NCCL_" + name),
                                   ops[op], stream)
                if nans is not None and nans.size:
                    comm.allReduce(nans.data.ptr, nans.data.ptr, nans.size, nccl.NCCL_UINT8, nccl.NCCL_MAX,
                                   stream)
                    flat = cupy.where(nans.astype(bool), flat.dtype.type(np.nan), flat)
                if op == "mean":
                    flat /= flat.dtype.type(group.size)
                flat = flat.astype(dtype, copy=False)
                for i, piece in _split(flat, run, sizes, work.itemsize).items():
                    out[i] = piece.reshape(arrays[i].shape)
    return out


def broadcast(group, arrays, root, device_index):
    import cupy
    nccl = _nccl()
    comm = communicator(group, device_index)
    out = [None] * len(arrays)
    with cupy.cuda.Device(device_index):
        stream = cupy.cuda.get_current_stream().ptr
        for run, sizes, flat in _byte_runs(cupy, arrays):
            if flat.size:
                comm.bcast(flat.data.ptr, flat.size, nccl.NCCL_UINT8, root, stream)
            for i, piece in _split(flat, run, sizes).items():
                out[i] = piece.view(arrays[i].dtype).reshape(arrays[i].shape)
    return out


def all_gather(group, arrays, axis, device_index):
    import cupy
    nccl = _nccl()
    comm = communicator(group, device_index)
    out = [None] * len(arrays)
    with cupy.cuda.Device(device_index):
        stream = cupy.cuda.get_current_stream().ptr
        for run, sizes, mine in _byte_runs(cupy, arrays):
            every = cupy.empty((group.size, mine.size), cupy.uint8)
            if mine.size:
                comm.allGather(mine.data.ptr, every.data.ptr, mine.size, nccl.NCCL_UINT8, stream)
            rows = [_split(every[r], run, sizes) for r in range(group.size)]
            for i in run:
                parts = [row[i].view(arrays[i].dtype).reshape(arrays[i].shape) for row in rows]
                out[i] = cupy.concatenate(parts, axis=axis[i])
    return out

