"""Sharding on three MPI processes, where the order of a sum shows in its bits and no
parameter count divides: reduce_scatter against NumPy's rank-order sums, and 20 steps of
an MLP and the char transformer, unsharded and ZeRO-1/2/3, bit for bit
(tests/distributed/mpi/sharding_worker.py)."""
import re

import pytest

from test_distributed_mpi import launch
from test_sharding_mpi import WORKER, _ok

pytestmark = pytest.mark.mpi


def test_collectives_and_zero_on_three_ranks():
    rc, out = launch(3, WORKER, "collectives,train", timeout=180)
    assert rc == 0, out[-4000:]
    _ok(out, 3, "collectives,train")
    for model in ("mlp", "charlm"):
        digests = re.findall(model + r" parameters after 20 steps, unsharded and ZeRO-1/2/3: ([0-9a-f]{16})", out)
        assert len(digests) == 3 and len(set(digests)) == 1, out
