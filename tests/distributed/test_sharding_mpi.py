"""Sharded data parallelism across real MPI processes (tests/distributed/mpi/sharding_worker.py):
reduce_scatter and all_gather against NumPy, ZeRO-1/2/3 parameters (an MLP, the digits CNN) bit for
bit those of the unsharded data-parallel run after 20 steps, mismatched trees named by rank and leaf path.
One launch of 2 processes runs every check; each test reads its own."""
import os
import re

import pytest

from test_distributed_mpi import WORKERS, launch

pytestmark = pytest.mark.mpi
WORKER = os.path.join(WORKERS, "sharding_worker.py")


def _ok(out, n, what):
    """Every rank printed that it passed the check `what` (the ranks' lines may run together)."""
    assert sorted(re.findall(r"OK rank (\d) of (\d) " + re.escape(what) + " passed", out)) == \
        [(str(r), str(n)) for r in range(n)], out[-4000:]


@pytest.fixture(scope="module")
def two_ranks():
    """(return code, output) of one launch on 2 processes: the mismatch first (collective #1;
    it moves no data, so the rest run as in a launch of their own), then the collectives
    and the MLP and the digits CNN trained unsharded and ZeRO-1/2/3."""
    return launch(2, WORKER, "mismatch,collectives,train-mlp,train-digits", timeout=240)


def test_collectives_and_zero_on_two_ranks(two_ranks):
    rc, out = two_ranks
    assert rc == 0, out[-4000:]
    for what in ("collectives", "train-mlp", "train-digits"):
        _ok(out, 2, what)
    for model in ("mlp", "digits"):   # the digits CNN of examples/train_digits.py
        digests = re.findall(model + r" parameters after 20 steps, unsharded and ZeRO-1/2/3: ([0-9a-f]{16})", out)
        assert len(digests) == 2 and len(set(digests)) == 1, out


def test_ranks_passing_different_shapes_name_rank_and_leaf(two_ranks):
    _, out = two_ranks
    raised = re.findall(r"rank (\d) raised DistributedError: rune.distributed: reduce_scatter\(op='sum', axis=0\) "
                        r"at collective #1: leaf 0 differs between ranks: rank 0 has float32\[3, 2\] \(cpu\) at "
                        r"\['w'\], rank 1 has float32\[3, 3\] \(cpu\) at \['w'\]", out)
    assert sorted(raised) == ["0", "1"], out[-3000:]   # on every rank
    _ok(out, 2, "mismatch")
