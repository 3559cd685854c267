"""Checkpoints of sharded state across MPI processes (tests/distributed/mpi/sharding_worker.py):
saved on 3 processes, resumed on 2 with every leaf whole as saved; a save failing on one
rank leaves the previous save whole; a missing shard is a DistributedError on every rank."""
import os

import pytest

from test_distributed_mpi import launch
from test_sharding_mpi import WORKER, _ok

pytestmark = pytest.mark.mpi


def test_saved_on_three_resumed_on_two_and_a_failed_save_keeps_the_last(tmp_path):
    folder = str(tmp_path)
    rc, out = launch(3, WORKER, "save", folder, timeout=120)
    assert rc == 0, out[-4000:]
    assert sorted(os.listdir(tmp_path / "ckpt" / open(tmp_path / "ckpt" / "current").read().strip())) == [
        "manifest.json", "rank-0-of-3.safetensors", "rank-1-of-3.safetensors", "rank-2-of-3.safetensors"]
    rc, out = launch(2, WORKER, "load,failed-save,missing", folder, timeout=120)
    assert rc == 0, out[-4000:]
    _ok(out, 2, "load,failed-save,missing")
