"""NCCL: the collective library of CUDA devices (`CudaBackend.communicator`).

rune/distributed packs a tree's leaves into flat CuPy buffers (rune/distributed/nccl.py)
and hands them to an `NcclCommunicator`, the `rune.backends.base.Communicator` of
one GPU: what touches the GPU (its context, its current stream, the buffers'
addresses, NCCL itself) is here. Work is queued on the current CuPy stream of the
GPU, so it orders with the kernels that made the buffers. Importing this module
never imports CuPy: everything happens on first use.
"""
import numpy as np

from ...errors import DeviceError
from ..base import Communicator

# NCCL's element type for each dtype a reduction runs in, and how many of them make
# one element: complex numbers travel as pairs of floats (their sum, and so their
# mean, is the sum of each part; max and min have no order on complex numbers and
# are refused before, by rune.distributed, as on the host).
_TYPES = {"float32": ("FLOAT32", 1), "float64": ("FLOAT64", 1), "int8": ("INT8", 1), "uint8": ("UINT8", 1),
          "int32": ("INT32", 1), "uint32": ("UINT32", 1), "int64": ("INT64", 1), "uint64": ("UINT64", 1),
          "complex64": ("FLOAT32", 2), "complex128": ("FLOAT64", 2)}
# NCCL has no 16-bit integers: they reduce in 32 bits and wrap back on the cast, as
# the host's 16-bit sums wrap (exact while fewer than 65,536 ranks add).
_WIDER = {np.dtype(np.int16): np.dtype(np.int32), np.dtype(np.uint16): np.dtype(np.uint32)}


def library():
    """CuPy's NCCL module, or a DeviceError saying what to install."""
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


def element_type(work):
    """(the name of NCCL's element type, elements of it per element) for buffers of
    `work`, a dtype `reduce_dtype` returns."""
    return _TYPES[np.dtype(work).name]


def _cupy():
    import cupy
    return cupy


class NcclCommunicator(Communicator):
    """GPU `index`'s NCCL communicator (made by `connect`) and the GPU work around it."""

    def __init__(self, index):
        self.index = index
        self.comm = None   # the NcclCommunicator, once connected

    @property
    def xp(self):
        return _cupy()

    def check(self):
        library()

    def selected(self):
        return _cupy().cuda.Device(self.index)

    def where(self):
        """The GPU's PCI bus id (which names it whatever CUDA_VISIBLE_DEVICES each rank
        has) and how many GPUs this process sees."""
        cupy = _cupy()
        with cupy.cuda.Device(self.index) as gpu:
            return gpu.pci_bus_id, cupy.cuda.runtime.getDeviceCount()

    def connect(self, rank, size, share):
        """Rank 0 makes NCCL's unique id, `share` hands it to every rank (a few bytes, once)."""
        nccl = library()
        uid = share(nccl.get_unique_id() if rank == 0 else None)
        with self.selected():
            self.comm = nccl.NcclCommunicator(size, uid, rank)

    def reduce_dtype(self, work):
        return _WIDER.get(np.dtype(work), np.dtype(work))

    def _stream(self):
        return _cupy().cuda.get_current_stream().ptr

    def all_reduce(self, flat, op):
        nccl = library()
        name, lanes = element_type(flat.dtype)
        ops = {"sum": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}
        self.comm.allReduce(flat.data.ptr, flat.data.ptr, flat.size * lanes, getattr(nccl, "NCCL_" + name),
                            ops[op], self._stream())

    def broadcast(self, flat, root):
        self.comm.bcast(flat.data.ptr, flat.size, library().NCCL_UINT8, root, self._stream())

    def all_gather(self, mine, every):
        self.comm.allGather(mine.data.ptr, every.data.ptr, mine.size, library().NCCL_UINT8, self._stream())
