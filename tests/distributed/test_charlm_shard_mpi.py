"""examples/train_charlm.py --shard zero3 on 2 MPI processes (tiny sizes): it trains, and each
process prints its memory: half of what the parameters and AdamW's state take in one process."""
import os
import re
import sys

import numpy as np
import pytest

import rune
from rune import nx
from test_distributed_mpi import REPO, launch

pytestmark = pytest.mark.mpi
TINY = ("--steps", "4", "--log-every", "4", "--batch-size", "4", "--seq-len", "16", "--d-model", "16",
        "--layers", "1", "--max-chars", "20000", "--sample-chars", "0")


def _whole_bytes():
    """The bytes of the tiny model's parameters and AdamW state in one process (the oracle)."""
    sys.path.insert(0, os.path.join(REPO, "examples"))
    import train_charlm as charlm
    vocab = len(set(charlm.load_text(20000)))
    model = charlm.CharTransformer(nx.random.key(0), vocab, 16, 16, 4, 1)
    state = charlm.make_optimizer(1e-3, 4, 0.01)[0].init(model)
    return sum(np.asarray(x).nbytes for x in rune.tree.leaves((model, state)))


def test_charlm_with_shard_zero3_prints_the_memory_of_each_process(tmp_path):
    script = os.path.join(REPO, "examples", "train_charlm.py")
    rc, out = launch(2, script, *TINY, "--shard", "zero3", "--log", str(tmp_path / "log.jsonl"), timeout=120)
    assert rc == 0, out[-4000:]
    held = {int(r): float(v) * 2**20 for r, v in re.findall(
        r"process (\d) of 2, --shard zero3, parameters and optimizer state: cpu:0 ([0-9.]+) MiB", out)}
    assert sorted(held) == [0, 1] and len(re.findall(r"after 4 steps: cpu:0", out)) == 2, out
    half = _whole_bytes() / 2
    for r in (0, 1):   # printed to 1/1000 MiB; each leaf's padding adds a few bytes
        assert abs(held[r] - half) <= 0.02 * half + 1100, (held, half)
    assert len(re.findall(r"step +4  loss ([0-9.]+)", out)) == 2
    assert os.path.exists(tmp_path / "log.rank1.jsonl")   # each process its own log
