"""Run under mpiexec by tests/test_distributed_mpi.py: one rank misbehaves (argv[1] says how)."""
import os
import sys

import rune.distributed as dist
from rune import nx

dist.initialize()
mode, r = sys.argv[1], dist.rank()
dist.all_reduce(nx.ones(2))            # one collective that every rank completes
if mode == "raise" and r == 1:
    raise ValueError("boom on purpose")
if mode == "shape":
    dist.all_reduce({"w": nx.zeros((3, r + 2))})
if mode == "dtype":
    dist.all_gather(nx.zeros((2,), dtype="float32" if r == 0 else "int32"))
if mode == "exit" and r == 1:
    sys.exit(0)
if mode == "kill" and r == 1:
    os._exit(0)                        # no Python clean-up: the launcher sees the process vanish
dist.all_reduce(nx.ones(3))
print("rank", r, "done", flush=True)
