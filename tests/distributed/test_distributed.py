"""rune.distributed in one process (a run of size 1): the API contract, errors, the
rules under jit / grad / vmap, shard, and import safety. The multi-process
behaviour is in test_distributed_mpi.py."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import rune
import rune.distributed as dist
from rune import nx
from rune.distributed import runtime

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository


def test_signatures_and_defaults():
    sig = {name: str(inspect.signature(getattr(dist, name))) for name in dist.__all__}
    assert sig == {"initialize": "()", "rank": "()", "size": "()", "local_rank": "()", "barrier": "()",
                   "all_reduce": "(tree, op='sum')", "broadcast": "(tree, root=0)",
                   "all_gather": "(x, axis=0)", "shard": "(n, epoch=0, seed=0)"}
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
    from rune.distributed import nccl
    assert nccl.available() in (True, False)


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
    with pytest.raises(rune.ArgumentError, match="leaf 0 is 0-d"):
        dist.all_gather(nx.asarray(1.0))
    with pytest.raises(rune.ArgumentError, match=r"axis 2 is out of range for leaf 0 of shape \(2, 3\)"):
        dist.all_gather(nx.ones((2, 3)), axis=2)
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
    """A host array that answers `.data.ptr` as a CuPy array does (what nccl.py hands NCCL)."""

    @property
    def data(self):
        return type("Memory", (), {"ptr": self.ctypes.data})()


def _emulated_cupy(size):
    """Modules standing in for cupy, cupy.cuda and cupy.cuda.nccl: NumPy arrays, and
    communicators of `size` ranks, one per thread, whose MAX and MIN compare with `>`
    and `<` (a NaN wins or loses by order: what NCCL and MPI promise about NaN)."""
    import threading
    import types

    wrap = lambda f: (lambda *a, **k: np.asarray(f(*a, **k)).view(_DeviceArray))
    cupy = types.ModuleType("cupy")
    for name in ("ascontiguousarray", "concatenate", "isnan", "where", "empty"):
        setattr(cupy, name, wrap(getattr(np, name)))
    cupy.uint8 = np.uint8
    cuda = types.ModuleType("cupy.cuda")
    cuda.Device = type("Device", (), {"__init__": lambda self, i: None, "__enter__": lambda self: self,
                                      "__exit__": lambda self, *e: None})
    cuda.get_current_stream = lambda: types.SimpleNamespace(ptr=0)
    lib = types.ModuleType("cupy.cuda.nccl")
    for name, t in (("FLOAT32", np.float32), ("FLOAT64", np.float64), ("INT32", np.int32),
                    ("INT64", np.int64), ("UINT8", np.uint8), ("INT8", np.int8), ("UINT32", np.uint32),
                    ("UINT64", np.uint64), ("FLOAT16", np.float16)):
        setattr(lib, f"NCCL_{name}", np.dtype(t))
    lib.NCCL_SUM, lib.NCCL_MAX, lib.NCCL_MIN = "sum", "max", "min"
    cupy.cuda, cuda.nccl = cuda, lib
    meeting, buffers = threading.Barrier(size), {}

    class Communicator:
        def __init__(self, rank):
            self.rank = rank

        def allReduce(self, send, recv, count, dtype, op, stream):
            view = lambda ptr: np.ctypeslib.as_array((np.ctypeslib.as_ctypes_type(dtype) * count).from_address(ptr))
            buffers[self.rank] = view(send).copy()
            meeting.wait()
            acc = buffers[0].copy()
            for r in range(1, size):
                b = buffers[r]
                acc = acc + b if op == "sum" else np.where(b > acc if op == "max" else b < acc, b, acc)
            meeting.wait()
            view(recv)[:] = acc

    return cupy, Communicator


@pytest.mark.parametrize("op", ["max", "min"])
def test_the_nccl_path_propagates_nan_like_nx_max(monkeypatch, op):
    import threading
    from rune.distributed import nccl
    cupy, Communicator = _emulated_cupy(2)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cupy.cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.nccl", cupy.cuda.nccl)
    local = threading.local()
    monkeypatch.setattr(nccl, "communicator", lambda group, index: local.comm)
    # rank r alone has a NaN at index r; both have one at index 2; index 3 has none
    inputs = [np.array([np.nan, 1.0, np.nan, 4.0]), np.array([2.0, np.nan, np.nan, -1.0])]
    results = {}

    def rank(r):
        local.comm = Communicator(r)
        group = type("Group", (), {"rank": r, "size": 2})()
        for dtype in (np.float32, np.float64, np.float16, np.int32):
            leaf = np.nan_to_num(inputs[r], nan=7.0).astype(dtype) if dtype == np.int32 else inputs[r].astype(dtype)
            results[r, np.dtype(dtype)] = np.asarray(nccl.all_reduce(group, [leaf.view(_DeviceArray)], op, 0)[0])

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for dtype in (np.float32, np.float64, np.float16):
        want = getattr(np, op)(np.stack(inputs).astype(dtype), axis=0)   # NaN wherever any rank has one
        for r in range(2):
            got = results[r, np.dtype(dtype)]
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, want)
    ints = np.stack([np.nan_to_num(x, nan=7.0).astype(np.int32) for x in inputs])
    np.testing.assert_array_equal(results[0, np.dtype(np.int32)], getattr(np, op)(ints, axis=0))


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
    from rune.distributed import nccl
    from rune.errors import DeviceError
    assert nccl.available() == bool(getattr(cupy_nccl, "available", True))
    if not nccl.available():   # CuPy imports without libnccl: a DeviceError, not an AttributeError later
        with pytest.raises(DeviceError, match="no NCCL library"):
            nccl._nccl()
