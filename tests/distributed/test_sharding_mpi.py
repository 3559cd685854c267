"""Sharded data parallelism across real MPI processes (tests/distributed/mpi/sharding_worker.py):
reduce_scatter and all_gather against NumPy, ZeRO-1/2/3 parameters (an MLP, the digits CNN) bit for
bit those of the unsharded data-parallel run after 20 steps, mismatched trees named by rank and leaf path."""
import os
import re

import pytest

from test_distributed_mpi import WORKERS, launch

pytestmark = pytest.mark.mpi
WORKER = os.path.join(WORKERS, "sharding_worker.py")


def _ok(out, n, what):
    """Every rank printed that it passed `what` (the ranks' lines may run together)."""
    assert sorted(re.findall(r"OK rank (\d) of (\d) " + re.escape(what), out)) == \
        [(str(r), str(n)) for r in range(n)], out[-4000:]


def test_collectives_and_zero_on_two_ranks():
    rc, out = launch(2, WORKER, "collectives,train-mlp,train-digits", timeout=180)
    assert rc == 0, out[-4000:]
    _ok(out, 2, "collectives,train-mlp,train-digits")
    for model in ("mlp", "digits"):   # the digits CNN of examples/train_digits.py
        digests = re.findall(model + r" parameters after 20 steps, unsharded and ZeRO-1/2/3: ([0-9a-f]{16})", out)
        assert len(digests) == 2 and len(set(digests)) == 1, out


def test_ranks_passing_different_shapes_name_rank_and_leaf():
    rc, out = launch(2, WORKER, "mismatch", timeout=60)
    assert rc != 0
    assert re.search(r"DistributedError: rune.distributed: reduce_scatter\(op='sum', axis=0\) at collective #1: "
                     r"leaf 0 differs between ranks: rank 0 has float32\[3, 2\] \(cpu\) at \['w'\], "
                     r"rank 1 has float32\[3, 3\] \(cpu\) at \['w'\]", out), out[-3000:]
