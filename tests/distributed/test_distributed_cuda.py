"""The NCCL path on one GPU: a communicator of one rank, every collective on CuPy
arrays against NumPy (for the GPU check; skipped without a GPU and CuPy), bfloat16
included (CuPy 14 holds ml_dtypes' bfloat16 arrays)."""
import ml_dtypes
import numpy as np
import pytest

from rune.core.devices import Device
from rune.distributed import nccl, runtime

GPU = Device("cuda", 0)

pytestmark = pytest.mark.cuda


@pytest.fixture
def cupy():
    cp = pytest.importorskip("cupy")
    if not nccl.available(GPU):
        pytest.skip("CuPy without NCCL")
    return cp


def _leaves(cp):
    host = [np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(4.0), np.arange(5, dtype=np.int32),
            np.ones((2, 2), np.float16), np.zeros((0, 3), np.float32),
            np.float32(2.5).reshape(()), np.array([1.5, -2.0, 3.25, 2.0 ** -7], ml_dtypes.bfloat16)]
    return host, [cp.asarray(h) for h in host]


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_all_reduce_of_one_rank_is_the_identity(cupy, op):
    group = runtime.initialize()
    host, dev = _leaves(cupy)
    keep = [k for k, h in enumerate(host) if op != "mean" or h.dtype.kind in "fV"]
    out = nccl.all_reduce(group, [dev[k] for k in keep], op, GPU)
    for k, o in zip(keep, out):
        got = cupy.asnumpy(o)
        assert got.dtype == host[k].dtype and got.shape == host[k].shape
        assert got.tobytes() == host[k].tobytes()


def test_broadcast_and_all_gather_move_bits(cupy):
    group = runtime.initialize()
    host, dev = _leaves(cupy)
    for o, h in zip(nccl.broadcast(group, dev, 0, GPU), host):
        assert cupy.asnumpy(o).tobytes() == h.tobytes()
    gathered = nccl.all_gather(group, dev[:4], [0] * 4, GPU)
    for o, h in zip(gathered, host):
        assert cupy.asnumpy(o).tobytes() == h.tobytes()


def _model_state():
    """Mixed dtypes: packed without padding, a bfloat16 bias of 3 put the float32 weight
    at byte 6 of the bucket, the int64 at byte 70; int16, uint16 and complex had no NCCL type."""
    g = np.random.default_rng(5)
    ints = lambda shape: g.integers(-9, 10, shape)
    return [ints(3).astype(ml_dtypes.bfloat16), ints((4, 4)).astype(np.float32), ints(1).astype(np.int64),
            ints(5).astype(bool), (ints(3) + 1j * ints(3)).astype(np.complex64), ints(2).astype(np.float32),
            ints((3, 1)).astype(np.int16), ints(4).astype(np.uint16) + 9, (ints(2) - 1j).astype(np.complex128)]


def test_mixed_trees_come_back_aligned_and_every_dtype_reduces(cupy):
    group = runtime.initialize()
    host = _model_state()
    dev = [cupy.asarray(h) for h in host]
    for moved in (nccl.broadcast(group, dev, 0, GPU), nccl.all_gather(group, dev, [0] * len(dev), GPU)):
        for o, h in zip(moved, host):
            assert o.data.ptr % 16 == 0, (o.dtype, o.data.ptr % 16)
            # a kernel reads each leaf (a misaligned one ends the CUDA context here)
            assert cupy.asnumpy(o.copy()).tobytes() == h.tobytes()
    numbers = [k for k, h in enumerate(host) if h.dtype != np.bool_]
    for o, k in zip(nccl.all_reduce(group, [dev[k] for k in numbers], "sum", GPU), numbers):
        assert cupy.asnumpy(o.copy()).tobytes() == host[k].tobytes()
