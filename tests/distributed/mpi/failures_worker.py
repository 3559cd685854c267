"""Run under mpiexec by tests/distributed/test_distributed_mpi.py: one rank misbehaves (argv[1] says how).

argv[1] may name several mismatched layouts, comma-separated ("structure,shape,dtype"):
each is a DistributedError on every rank before any data moves (so the next collective is
still #2); all but the last are caught and printed ("rank R <mode>: DistributedError: ..."),
the last ends the run.
"""
import os
import sys
import time

import rune
import rune.distributed as dist
from rune import nx
from rune.distributed import runtime

mode = sys.argv[1]
if mode.startswith("raise-before-start") and runtime.launch_variable()[1] == "1":
    raise ValueError("boom before any collective")   # MPI has not started on any rank yet
if mode == "raise-before-start-busy":
    time.sleep(600)                    # the others are busy (not yet in MPI start-up) when rank 1 fails
dist.initialize()
r = dist.rank()
dist.all_reduce(nx.ones(2))            # one collective that every rank completes
if mode == "raise" and r == 1:
    raise ValueError("boom on purpose")
MISMATCHES = {
    "shape": lambda: dist.all_reduce({"w": nx.zeros((3, r + 2))}),
    "dtype": lambda: dist.all_gather(nx.zeros((2,), dtype="float32" if r == 0 else "int32")),
    # the same shapes and dtypes under different keys
    "structure": lambda: dist.all_reduce({"w": nx.zeros(2), "b" if r == 0 else "bias": nx.zeros(3)}),
}
mismatches = [m for m in mode.split(",") if m in MISMATCHES]
for m in mismatches[:-1]:
    try:
        MISMATCHES[m]()
    except rune.DistributedError as e:
        print(f"rank {r} {m}: {type(e).__name__}: {e}", flush=True)
    else:
        print(f"rank {r} {m}: raised nothing", flush=True)
if mismatches:
    MISMATCHES[mismatches[-1]]()
if mode == "exit" and r == 1:
    sys.exit(0)
if mode == "kill" and r == 1:
    os._exit(0)                        # no Python clean-up: the launcher sees the process vanish
dist.all_reduce(nx.ones(3))
print("rank", r, "done", flush=True)
