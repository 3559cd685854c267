"""Data-parallel runs over many processes and machines: MPI for host arrays and
start-up, NCCL (CuPy) for GPU arrays (docs/design.md, "Many processes").

Launch a script with `mpiexec -n N python script.py`; run plainly, it is one
process of size 1 and every collective is the identity. Importing rune never
imports mpi4py: MPI starts in `initialize()` (or the first call that needs it).
In a launched run of several ranks, importing rune makes an uncaught exception
on any rank end every rank, even before MPI starts (see runtime.py).

Sharded data parallelism (ZeRO-1/2/3, FSDP): `reduce_scatter` and `all_gather`
(scatter.py), `sharded(optimizer)` and `fully_shard(module)` (zero.py), and
checkpoints of sharded state through rune.save / rune.load (sharded_checkpoints.py).
"""
from .collectives import all_reduce, broadcast
from .scatter import all_gather, reduce_scatter
from .runtime import guard_launch as _guard_launch
from .runtime import initialize as _initialize
from .sharding import shard
from .zero import FullyShard, clip_by_global_norm, fully_shard, sharded, whole_view
from . import sharded_checkpoints as _sharded_checkpoints   # noqa: F401  (rune.save/load of sharded state)

_guard_launch()


def initialize():
    """Join the run started by an MPI launcher (`mpiexec -n N`), or a run of one
    process when there is none. Idempotent; the other functions call it too."""
    _initialize()


def rank():
    """This process's rank, 0 .. size() - 1."""
    return _initialize().rank


def size():
    """How many processes the run has."""
    return _initialize().size


def local_rank():
    """This process's rank among those on its machine (`device()` picks its GPU by it)."""
    return _initialize().local_rank


def device():
    """This process's device: GPU `cuda:(local_rank() % the GPUs it sees)`, one per rank
    (NCCL needs that; two ranks on one GPU are a DistributedError), or the host without one."""
    from .runtime import device as _device
    return _device(_initialize())


def barrier():
    """Wait until every rank gets here."""
    from .runtime import barrier as _barrier
    _barrier(_initialize())


__all__ = ["initialize", "rank", "size", "local_rank", "device", "barrier", "all_reduce", "broadcast",
           "all_gather", "reduce_scatter", "shard", "sharded", "fully_shard", "FullyShard", "clip_by_global_norm",
           "whole_view"]
