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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    import weakref
    host._pool.clear()
    first = host._result_buffer(n, f32)
    was_first = weakref.ref(first)
    view = first[:10]
    del first
    second = host._result_buffer(n, f32)
    assert second is not was_first()   # a view still reads the first buffer
    del view
    third = host._result_buffer(n, f32)
    assert third is was_first() and third is not second
    assert sum(b.nbytes for b in host._pool) <= host.POOL_MAX_BYTES
    host._pool.clear()
