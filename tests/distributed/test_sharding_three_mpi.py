"""Sharding on three MPI processes, where the order of a sum shows in its bits and no
parameter count divides: reduce_scatter against NumPy's rank-order sums, and 20 steps of
an MLP and the char transformer, unsharded and ZeRO-1/2/3, bit for bit; and checkpoints of
sharded state: saved on 3 processes, resumed on 2 with every leaf whole as saved, a save
failing on one rank leaves the previous save whole, a missing shard is a DistributedError
on every rank (tests/distributed/mpi/sharding_worker.py). One launch of 3 processes runs
the checks and the save; one of 2 resumes it."""
import os
import re

import pytest

from test_distributed_mpi import launch
from test_sharding_mpi import WORKER, _ok

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    """(return code, output, the checkpoints' folder) of the launch on 3 processes."""
    folder = tmp_path_factory.mktemp("sharded")
    rc, out = launch(3, WORKER, "collectives,train,save", str(folder), timeout=300)
    return rc, out, folder


def test_collectives_and_zero_on_three_ranks(three_ranks):
    rc, out, _ = three_ranks
    assert rc == 0, out[-4000:]
    _ok(out, 3, "collectives")
    _ok(out, 3, "train")
    for model in ("mlp", "charlm"):
        digests = re.findall(model + r" parameters after 20 steps, unsharded and ZeRO-1/2/3: ([0-9a-f]{16})", out)
        assert len(digests) == 3 and len(set(digests)) == 1, out


def test_saved_on_three_resumed_on_two_and_a_failed_save_keeps_the_last(three_ranks):
    rc, out, folder = three_ranks
    assert rc == 0, out[-4000:]
    _ok(out, 3, "save")
    assert sorted(os.listdir(folder / "ckpt" / open(folder / "ckpt" / "current").read().strip())) == [
        "manifest.json", "rank-0-of-3.safetensors", "rank-1-of-3.safetensors", "rank-2-of-3.safetensors"]
    rc, out = launch(2, WORKER, "load,failed-save,missing", str(folder), timeout=120)
    assert rc == 0, out[-4000:]
    for what in ("load", "failed-save", "missing"):
        _ok(out, 2, what)
