"""Communication overlapped with compute across 2 MPI processes: a jitted data-parallel
step and a ZeRO-2 step give bit for bit the parameters of the synchronous plans
(RUNE_OVERLAP=0); the worker is tests/distributed/mpi/overlap_worker.py."""
import os
import re

import pytest

from test_distributed_mpi import WORKERS, launch

pytestmark = pytest.mark.mpi


def test_overlapped_data_parallel_steps_match_the_synchronous_ones():
    rc, out = launch(2, os.path.join(WORKERS, "overlap_worker.py"), timeout=120)
    assert rc == 0, out[-4000:]
    assert sorted(re.findall(r"OK rank (\d) of 2 overlap", out)) == ["0", "1"], out
