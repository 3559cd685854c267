"""rune.distributed in one process (a run of size 1): the API contract, errors, the
rules under jit / grad / vmap, shard, and import safety. The multi-process
behaviour is in test_distributed_mpi.py."""
import contextlib
import inspect
import os
import re
import socket
import subprocess
import sys

import numpy as np
import pytest

import rune
import rune.distributed as dist
from rune import nx
from rune.core import dtypes as dt
from rune.distributed import runtime

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository


def test_signatures_and_defaults():
    sig = {name: str(inspect.signature(getattr(dist, name))) for name in dist.__all__}
    assert sig == {"initialize": "()", "rank": "()", "size": "()", "local_rank": "()", "device": "()",
                   "barrier": "()",
                   "all_reduce": "(tree, op='sum')", "broadcast": "(tree, root=0)",
                   "all_gather": "(tree, axis=0, length=None)", "reduce_scatter": "(tree, op='sum', axis=0)",
                   "shard": "(n, epoch=0, seed=0)", "sharded": "(optimizer, stage=2)",
                   "fully_shard": "(module, reshard_after_forward=True)", "FullyShard": "(blocks_, layout)",
                   "clip_by_global_norm": "(max_norm)", "whole_view": "(params)"}
    assert issubclass(rune.DistributedError, rune.RuneError) and issubclass(rune.DistributedError, RuntimeError)


def test_a_plain_run_is_one_process_and_never_imports_mpi4py():
    code = ("import sys, rune, rune.distributed as d; d.initialize(); d.barrier(); "
            "assert (d.rank(), d.size(), d.local_rank()) == (0, 1, 0); "
            "d.all_reduce(rune.nx.ones(2)); "
            "assert 'mpi4py' not in sys.modules and 'cupy' not in sys.modules, sorted(sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MV2_"))}
    env["PYTHONPATH"] = REPO
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_launch_without_mpi4py_is_a_clear_error():
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import rune.distributed as d\n"
            "try:\n    d.initialize()\nexcept rune.DistributedError as e:\n    print(e)\n")
    env = dict(os.environ, PMI_RANK="1", PMI_SIZE="2", PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, "-c", "import rune\n" + code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "started by an MPI launcher (PMI_RANK=1)" in done.stdout, done.stdout + done.stderr
    assert "pip install 'rune[distributed]'" in done.stdout


def test_the_nccl_path_is_import_safe():
    from rune.core.devices import Device
    from rune.distributed import nccl
    assert nccl.available(Device("cuda", 0)) in (True, False)
    assert nccl.available(Device("cpu", 0)) is False   # the host has no library of its own: MPI


def _tree():
    return {"w": nx.asarray(np.arange(6, dtype=np.float32).reshape(2, 3)), "n": nx.asarray(np.int32(4)),
            "h": nx.asarray(np.ones(3, np.float16)), "e": nx.zeros((0, 2))}


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_collectives_of_one_process_are_the_identity(op):
    t = _tree()
    for got, want in zip(rune.tree.leaves(dist.all_reduce(t, op)), rune.tree.leaves(t)):
        assert got.dtype == want.dtype and np.array_equal(np.asarray(got), np.asarray(want))
    assert np.array_equal(np.asarray(dist.all_reduce(t["w"], "mean")), np.asarray(t["w"]))
    assert np.array_equal(np.asarray(dist.broadcast(t)["w"]), np.asarray(t["w"]))
    assert np.array_equal(np.asarray(dist.all_gather(t["w"], -1)), np.asarray(t["w"]))


def test_argument_errors_name_what_was_expected():
    with pytest.raises(rune.ArgumentError, match=r"op must be one of \('sum', 'mean', 'max', 'min'\), got 'avg'"):
        dist.all_reduce(nx.ones(2), "avg")
    with pytest.raises(rune.DTypeError, match="op 'mean' needs floating leaves, got int32"):
        dist.all_reduce({"n": nx.asarray(np.int32(1))}, "mean")
    with pytest.raises(rune.DTypeError, match="op 'sum' needs numbers, got a bool leaf"):
        dist.all_reduce(nx.asarray([True]))
    with pytest.raises(rune.ArgumentError, match=r"root must be a rank in \[0, 1\), got 1"):
        dist.broadcast(nx.ones(2), root=1)
    with pytest.raises(rune.ArgumentError, match="the leaf at the root is 0-d"):
        dist.all_gather(nx.asarray(1.0))
    with pytest.raises(rune.ArgumentError, match=r"axis 2 is out of range for the leaf at \['w'\] of shape \(2, 3\)"):
        dist.all_gather({"w": nx.ones((2, 3))}, axis=2)
    with pytest.raises(rune.ArgumentError, match="shard: n must be a non-negative int, got -1"):
        dist.shard(-1)


def test_jit_keeps_every_collective_once_in_order():
    group = runtime.initialize()

    def f(x):
        dist.all_reduce(x, "max")            # its result is unused: still runs
        return dist.all_reduce(x * 2.0, "sum")

    jitted = rune.jit(f)
    jitted(nx.ones(3))
    before = group.seq
    out = jitted(nx.ones(3))
    assert group.seq - before == 2 and np.array_equal(np.asarray(out), np.full(3, 2.0, np.float32))
    assert "all_reduce" in repr(rune.trace(f)(nx.ones(3)))


def test_derivatives_follow_the_psum_convention_for_one_process():
    w = nx.asarray(np.array([1.0, -2.0, 3.0]))
    g = rune.grad(lambda w: nx.sum(dist.all_reduce(w, "mean") ** 2))(w)
    assert np.allclose(np.asarray(g), 2 * np.asarray(w))
    g = rune.jit(rune.grad(lambda w: nx.sum(dist.all_gather(w * 3.0) + dist.broadcast(w))))(w)
    assert np.allclose(np.asarray(g), 4.0)
    _, t = rune.jvp(lambda w: dist.all_reduce(w * w, "sum"), (w,), (nx.ones(3, dtype="float64"),))
    assert np.allclose(np.asarray(t), 2 * np.asarray(w))
    with pytest.raises(rune.NotDifferentiableError, match=r"all_reduce\(op='max'\) has no derivative rule"):
        rune.grad(lambda w: nx.sum(dist.all_reduce(w, "max")))(w)


def test_vmap_over_a_collective_is_a_clear_error():
    with pytest.raises(rune.UsageError, match="cannot run under vmap on batched values"):
        rune.vmap(lambda x: dist.all_reduce(x))(nx.ones((4, 2)))
    # an unbatched operand is no lane's: the collective runs once
    out = rune.vmap(lambda x: x + dist.all_reduce(nx.ones(2)))(nx.ones((4, 2)))
    assert np.array_equal(np.asarray(out), np.full((4, 2), 2.0, np.float32))


def test_shard_of_one_process_is_a_per_epoch_permutation():
    a, b = dist.shard(50, 0, 1), dist.shard(50, 1, 1)
    assert sorted(a.tolist()) == sorted(b.tolist()) == list(range(50))
    assert not np.array_equal(a, b) and np.array_equal(a, dist.shard(50, 0, 1))
    assert not np.array_equal(a, dist.shard(50, 0, 2))


def test_large_result_buffers_are_recycled_only_once_unreferenced():
    from rune.distributed import host
    f32 = np.dtype(np.float32)
    n = host.POOL_MIN_BYTES // 4
    host._pool.clear()

    def where(a):
        return a.__array_interface__["data"][0]

    first = host._result_buffer(n, f32)
    at = where(first)
    view = first[:10]
    del first
    second = host._result_buffer(n, f32)
    assert where(second) != at   # a view still reads the first buffer's memory
    del view
    third = host._result_buffer(n, f32)
    assert where(third) == at and where(third) != where(second)
    assert sum(block.nbytes for block, _ in host._pool) <= host.POOL_MAX_BYTES
    host._pool.clear()


# ---------------------------------------------------------------- the NCCL path, emulated on the host

class _DeviceArray(np.ndarray):
    """A host array that answers `.data.ptr` as a CuPy array does (what the CUDA communicator,
    rune/backends/cuda/nccl.py, hands NCCL)."""

    @property
    def data(self):
        return type("Memory", (), {"ptr": self.ctypes.data})()


# NCCL's element types (the names cupy.cuda.nccl gives them) as NumPy dtypes.
_NCCL_TYPES = {"FLOAT32": np.float32, "FLOAT64": np.float64, "INT32": np.int32, "INT64": np.int64,
               "UINT8": np.uint8, "INT8": np.int8, "UINT32": np.uint32, "UINT64": np.uint64,
               "FLOAT16": np.float16}


def _gpu_concatenate(parts, axis=0):
    """np.concatenate refusing what a GPU kernel cannot read: an element its size does
    not align (CUDA ends the context with cudaErrorMisalignedAddress)."""
    for p in parts:
        if p.ctypes.data % p.dtype.itemsize:
            raise AssertionError(f"a kernel reads a misaligned {p.dtype} view (address % {p.dtype.itemsize} "
                                 f"= {p.ctypes.data % p.dtype.itemsize})")
    return np.concatenate(parts, axis=axis)


def _emulated_cupy(size):
    """Modules standing in for cupy, cupy.cuda and cupy.cuda.nccl: NumPy arrays, and
    communicators of `size` ranks, one per thread, whose MAX and MIN compare with `>`
    and `<` (a NaN wins or loses by order: what NCCL and MPI promise about NaN)."""
    import threading
    import types

    wrap = lambda f: (lambda *a, **k: np.asarray(f(*a, **k)).view(_DeviceArray))
    cupy = types.ModuleType("cupy")
    for name, f in (("ascontiguousarray", np.ascontiguousarray), ("concatenate", _gpu_concatenate),
                    ("isnan", np.isnan), ("where", np.where), ("empty", np.empty), ("zeros", np.zeros)):
        setattr(cupy, name, wrap(f))
    cupy.uint8 = np.uint8
    cuda = types.ModuleType("cupy.cuda")
    cuda.Device = type("Device", (), {"__init__": lambda self, i: None, "__enter__": lambda self: self,
                                      "__exit__": lambda self, *e: None})
    cuda.get_current_stream = lambda: types.SimpleNamespace(ptr=0)
    lib = types.ModuleType("cupy.cuda.nccl")
    for name, t in _NCCL_TYPES.items():
        setattr(lib, f"NCCL_{name}", np.dtype(t))
    lib.NCCL_SUM, lib.NCCL_MAX, lib.NCCL_MIN = "sum", "max", "min"
    cupy.cuda, cuda.nccl = cuda, lib
    meeting, buffers = threading.Barrier(size, timeout=20), {}   # a rank that failed breaks it for the others

    def view(ptr, count, dtype):
        return np.ctypeslib.as_array((np.ctypeslib.as_ctypes_type(dtype) * count).from_address(ptr))

    class Communicator:
        def __init__(self, rank):
            self.rank = rank

        def _exchange(self, mine):
            """Every rank's `mine`, in rank order (each rank's copy)."""
            buffers[self.rank] = mine.copy()
            meeting.wait()
            every = [buffers[r] for r in range(size)]
            meeting.wait()
            return every

        def allReduce(self, send, recv, count, dtype, op, stream):
            every = self._exchange(view(send, count, dtype))
            acc = every[0]
            for b in every[1:]:
                acc = acc + b if op == "sum" else np.where(b > acc if op == "max" else b < acc, b, acc)
            view(recv, count, dtype)[:] = acc

        def bcast(self, buf, count, dtype, root, stream):
            view(buf, count, dtype)[:] = self._exchange(view(buf, count, dtype))[root]

        def allGather(self, send, recv, count, dtype, stream):
            view(recv, count * size, dtype)[:] = np.concatenate(self._exchange(view(send, count, dtype)))

    return cupy, Communicator


def _on_emulated_ranks(monkeypatch, size, work):
    """{rank: work(group)} with nccl.py and the CUDA communicator running on `size`
    emulated ranks, one thread each."""
    import threading
    from rune.backends.cuda.nccl import NcclCommunicator
    from rune.distributed import nccl
    cupy, Communicator = _emulated_cupy(size)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cupy.cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", cupy.cuda.nccl)
    local = threading.local()
    monkeypatch.setattr(nccl, "communicator", lambda group, index: local.comm)

    def connected(r):
        comm = NcclCommunicator(0)
        comm.comm = Communicator(r)
        return comm
    results, errors = {}, []

    def rank(r):
        local.comm = connected(r)
        try:
            results[r] = work(type("Group", (), {"rank": r, "size": size})())
        except BaseException as e:   # noqa: BLE001  (raised again in the test's thread)
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    if errors:
        raise errors[0]
    assert sorted(results) == list(range(size)), "a rank did not finish"
    return results


@pytest.mark.parametrize("op", ["max", "min"])
def test_the_nccl_path_propagates_nan_like_nx_max(monkeypatch, op):
    from rune.distributed import nccl
    # rank r alone has a NaN at index r; both have one at index 2; index 3 has none
    inputs = [np.array([np.nan, 1.0, np.nan, 4.0]), np.array([2.0, np.nan, np.nan, -1.0])]
    dtypes = (np.float32, np.float64, np.float16, np.int32)

    def work(group):
        got = {}
        for dtype in dtypes:
            x = inputs[group.rank]
            leaf = np.nan_to_num(x, nan=7.0).astype(dtype) if dtype == np.int32 else x.astype(dtype)
            got[np.dtype(dtype)] = np.asarray(nccl.all_reduce(group, [leaf.view(_DeviceArray)], op, 0)[0])
        return got

    results = _on_emulated_ranks(monkeypatch, 2, work)
    for dtype in dtypes[:3]:
        want = getattr(np, op)(np.stack(inputs).astype(dtype), axis=0)   # NaN wherever any rank has one
        for r in range(2):
            got = results[r][np.dtype(dtype)]
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, want)
    ints = np.stack([np.nan_to_num(x, nan=7.0).astype(np.int32) for x in inputs])
    np.testing.assert_array_equal(results[0][np.dtype(np.int32)], getattr(np, op)(ints, axis=0))


# A model's state as a tree of mixed dtypes: a bfloat16 bias of 3 put the float32
# weight after it at byte 6 of the packed bytes, an int64 at byte 70.
def _mixed_tree(rank):
    g = np.random.default_rng(40 + rank)
    ints = lambda shape: g.integers(-9, 10, shape)
    return [ints(3).astype(dt.bfloat16), ints((4, 4)).astype(np.float32), np.int64(ints(())).reshape(()),
            ints(5).astype(bool), (ints(3) + 1j * ints(3)).astype(np.complex64), ints(2).astype(np.float32),
            ints(1).astype(np.float16), (ints((3, 1)) * 3500).astype(np.int16), g.integers(0, 256, 7).astype(np.uint8),
            (ints(1) - 2j).astype(np.complex128), (g.integers(0, 10, 3) * 7000).astype(np.uint16),
            np.zeros((0, 2), np.int32), ints((2, 2)).astype(dt.bfloat16)]   # 16-bit sums of two ranks wrap


def _address(a):
    return a.__array_interface__["data"][0]


def test_packed_leaves_and_buckets_start_on_16_bytes(monkeypatch):
    from rune.distributed import host, nccl
    leaves = _mixed_tree(0)
    for bucket in (host.BUCKET_BYTES, 64):   # one bucket; then several (and leaves alone in theirs)
        monkeypatch.setattr(host, "BUCKET_BYTES", bucket)
        seen = []
        for run, sizes, flat in nccl._byte_runs(np, leaves):
            assert flat.size % 16 == 0 and _address(flat) % 16 == 0, (run, flat.size)
            for i, piece in nccl._split(flat, run, sizes).items():
                assert (_address(piece) - _address(flat)) % 16 == 0, (i, leaves[i].dtype)
                got = piece.view(leaves[i].dtype).reshape(leaves[i].shape)
                assert got.tobytes() == leaves[i].tobytes(), i
                seen.append(i)
        assert sorted(seen) == list(range(len(leaves)))
    # reductions pack one dtype: each leaf at a multiple of 16 bytes too, the padding zero
    f32 = [np.arange(n, dtype=np.float32) + n for n in (3, 5, 1, 4)]
    flat = host._packed(f32, range(4), np.dtype(np.float32))
    starts, size = host.layout([3, 5, 1, 4], 4)
    assert starts == [0, 4, 12, 16] and size == 20 == flat.size
    assert np.array_equal(flat, np.concatenate([np.pad(a, (0, -a.size % 4)) for a in f32]))
    assert [p.tolist() for p in host.split(flat, [3, 5, 1, 4])] == [a.tolist() for a in f32]


def test_the_nccl_path_moves_mixed_trees_aligned_and_bit_for_bit(monkeypatch):
    """broadcast and all_gather of a tree of mixed dtypes on 2 emulated ranks: every leaf
    comes back at a multiple of 16 bytes with the bits NumPy gives."""
    from rune.distributed import nccl
    trees = [_mixed_tree(r) for r in range(2)]
    gatherable = [k for k, a in enumerate(trees[0]) if a.ndim]

    def work(group):
        dev = [a.view(_DeviceArray) for a in trees[group.rank]]
        return (nccl.broadcast(group, dev, 1, 0),
                nccl.all_gather(group, [dev[k] for k in gatherable], [a.ndim - 1 for a in dev if a.ndim], 0))

    for sent, gathered in _on_emulated_ranks(monkeypatch, 2, work).values():
        for got, want in zip(sent, trees[1]):
            assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
            assert _address(got) % 16 == 0, (got.dtype, _address(got) % 16)
        for got, k in zip(gathered, gatherable):
            want = np.concatenate([t[k] for t in trees], axis=trees[0][k].ndim - 1)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), k


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_the_nccl_path_reduces_every_dtype_the_host_path_does(monkeypatch, op):
    """int16, uint16 and complex among them: each dtype's reduction over 2 emulated ranks
    against NumPy's, in the dtypes the host path works in; where the host refuses an op
    (mean of integers, max of complex), NCCL refuses it with the same error."""
    from rune.backends.cuda.nccl import NcclCommunicator, element_type
    from rune.distributed import host, nccl
    trees = [_mixed_tree(r) for r in range(2)]
    ok = []
    for k, leaf in enumerate(trees[0]):
        try:
            want_work = host.work_dtype(leaf.dtype, op)
        except rune.DTypeError as e:
            with pytest.raises(rune.DTypeError, match=re.escape(str(e))):
                nccl.reduction(NcclCommunicator(0), leaf.dtype, op)
            continue
        work = nccl.reduction(NcclCommunicator(0), leaf.dtype, op)
        name, lanes = element_type(work)
        assert name in _NCCL_TYPES and np.dtype(_NCCL_TYPES[name]).itemsize * lanes == work.itemsize
        assert work.kind == want_work.kind and work.itemsize >= want_work.itemsize
        ok.append(k)

    def work(group):
        return nccl.all_reduce(group, [trees[group.rank][k].view(_DeviceArray) for k in ok], op, 0)

    results = _on_emulated_ranks(monkeypatch, 2, work)
    for j, k in enumerate(ok):
        stack = np.stack([t[k] for t in trees])
        wide = stack.astype(host.work_dtype(stack.dtype, op))
        want = {"sum": lambda: wide.sum(0), "mean": lambda: wide.sum(0) / wide.dtype.type(2),
                "max": lambda: wide.max(0), "min": lambda: wide.min(0)}[op]()
        want = np.asarray(want).astype(stack.dtype)
        for r in range(2):
            got = np.asarray(results[r][j])
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (op, stack.dtype, got, want)


def test_nccl_has_an_element_type_for_every_reduction_of_every_dtype():
    """The table against the host path's dtypes, and the names against CuPy's nccl module."""
    from rune.backends.cuda.nccl import NcclCommunicator, element_type
    from rune.core import dtypes as dtypes_
    from rune.distributed import host, nccl
    real = None
    try:
        from cupy.cuda import nccl as real
    except Exception:   # no CuPy here: the emulation's names (NCCL's) are checked alone
        pass
    if real is not None and not getattr(real, "available", False):
        real = None     # CuPy without libnccl defines none of NCCL's names
    for dtype in dtypes_.ALL:
        for op in ("sum", "mean", "max", "min"):
            try:
                host.work_dtype(dtype, op)
            except rune.DTypeError:
                continue
            name, _ = element_type(nccl.reduction(NcclCommunicator(0), dtype, op))
            assert name in _NCCL_TYPES and (real is None or hasattr(real, "NCCL_" + name)), (dtype, op, name)


# ---------------------------------------------------------------- one GPU per rank

def test_each_rank_takes_the_gpu_of_its_local_rank_among_those_it_sees():
    assert [runtime.gpu_index(r, 4) for r in range(6)] == [0, 1, 2, 3, 0, 1]
    assert [runtime.gpu_index(r, 1) for r in range(3)] == [0, 0, 0]   # a GPU per rank, set by the launcher
    with pytest.raises(rune.DistributedError, match="rank 2 of this node has no GPU"):
        runtime.gpu_index(2, 0)
    want = (rune.devices("cuda") or rune.devices("cpu"))[0]   # a run of one: local rank 0
    assert dist.device() == want


def _places(*gpus):
    """Each rank's (node, PCI id, device index, local rank, GPUs seen) for ranks on one node."""
    return [((0, "node7"), pci, index, rank, seen) for rank, (pci, index, seen) in enumerate(gpus)]


def test_two_ranks_on_one_gpu_are_found_whatever_index_names_it():
    assert runtime.shared_gpu(_places(("0000:3B:00.0", 0, 2), ("0000:5E:00.0", 1, 2))) is None
    # CUDA_VISIBLE_DEVICES per rank: both say cuda:0, two GPUs
    assert runtime.shared_gpu(_places(("0000:3B:00.0", 0, 1), ("0000:5E:00.0", 0, 1))) is None
    # two identical machines (the same PCI ids), even under one host name: MPI tells the nodes apart
    assert runtime.shared_gpu([((0, "a"), "0000:3B:00.0", 0, 0, 1), ((1, "a"), "0000:3B:00.0", 0, 0, 1)]) is None
    # one GPU named by two indices (each rank sees the GPUs in another order)
    message = runtime.shared_gpu(_places(("0000:5E:00.0", 1, 2), ("0000:3B:00.0", 1, 2),
                                         ("0000:5E:00.0", 0, 2)))
    assert message.startswith("rune.distributed: rank 0 (on cuda:1) and rank 2 (on cuda:0) both use the GPU "
                              "at PCI 0000:5E:00.0 of node node7"), message
    assert "cuda:0 for rank 0, cuda:0 for rank 2" not in message


def test_two_ranks_on_one_gpu_are_a_rune_error_before_nccl_makes_a_communicator(monkeypatch):
    """nccl.communicator on a rank whose GPU another rank already uses: a DistributedError
    naming both ranks, the GPU and each rank's GPU, before NCCL makes a communicator
    (whose own error is "Duplicate GPU detected")."""
    import types
    from rune.backends.cuda.nccl import NcclCommunicator
    from rune.core.devices import Device
    from rune.distributed import nccl
    cupy, _ = _emulated_cupy(1)
    gpu = types.SimpleNamespace(pci_bus_id="0000:3B:00.0")
    cupy.cuda.Device = lambda index: contextlib.nullcontext(gpu)
    cupy.cuda.runtime = types.SimpleNamespace(getDeviceCount=lambda: 2)

    def duplicate(*args):
        raise RuntimeError("NCCL_ERROR_INVALID_USAGE: Duplicate GPU detected")

    cupy.cuda.nccl.NcclCommunicator, cupy.cuda.nccl.get_unique_id = duplicate, lambda: b"id"
    for name, module in (("cupy", cupy), ("cupy.cuda", cupy.cuda), ("cupy.cuda.nccl", cupy.cuda.nccl)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(nccl, "_comms", {})
    monkeypatch.setattr(nccl, "_link", lambda device: NcclCommunicator(device.index))   # not the real CuPy's backend
    cases = [(2, re.escape("place each rank's arrays on rune.distributed.device(), GPU cuda:(local_rank() % "
                           "GPUs seen): cuda:0 for rank 0, cuda:1 for rank 1")),
             (1, "node .* shows them 1 GPU\\(s\\) for more ranks; launch at most 1 rank\\(s\\) per node")]
    for seen, advice in cases:
        cupy.cuda.runtime.getDeviceCount = lambda: seen
        rank0 = ((0, socket.gethostname()), "0000:3B:00.0", 0, 0, seen)
        ctl = types.SimpleNamespace(allgather=lambda mine: [rank0, mine])
        group = types.SimpleNamespace(rank=1, size=2, local_rank=1, node=0, comm=types.SimpleNamespace(bcast=None),
                                      ctl=ctl)
        with pytest.raises(rune.DistributedError) as raised:
            nccl.communicator(group, Device("cuda", 0))
        message = str(raised.value)
        assert "rank 0 (on cuda:0) and rank 1 (on cuda:0) both use the GPU at PCI 0000:3B:00.0 of node" in message
        assert re.search(advice, message), message


def test_a_launched_rank_that_raises_before_mpi_starts_kills_itself():
    # Under a launcher of two ranks the others may wait for this one in MPI start-up:
    # a plain exit status would leave them there, a death by signal makes the launcher
    # end them. Run plainly, the same error is an ordinary exit.
    code = "import rune\nraise ValueError('boom')"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MV2_"))}
    plain = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=120)
    assert plain.returncode == 1 and "rune.distributed" not in plain.stderr
    launched = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(env, PMI_RANK="1", PMI_SIZE="2"),
                              capture_output=True, text=True, timeout=120)
    assert launched.returncode == -9, launched.stderr
    assert "ValueError: boom" in launched.stderr and "rank 1 of 2 raised ValueError" in launched.stderr


def test_nccl_is_available_only_where_cupy_loads_an_nccl_library():
    cupy_nccl = pytest.importorskip("cupy.cuda.nccl")
    from rune.backends.cuda import nccl
    from rune.errors import DeviceError
    assert nccl.NcclCommunicator(0).available() == bool(getattr(cupy_nccl, "available", True))
    if not nccl.NcclCommunicator(0).available():   # CuPy without libnccl: a DeviceError, not an AttributeError later
        with pytest.raises(DeviceError, match="no NCCL library"):
            nccl.library()
