"""The process group: launch detection, MPI start-up, and what happens when a rank fails.

`initialize()` looks for the variables an MPI launcher (`mpiexec`, `srun`)
sets; without them rune runs as one process of size 1 and never imports
mpi4py. With them, MPI starts (mpi4py). Three guards make a fault on one rank
end every rank with a message instead of a hang:

- an exception that reaches the top level of any rank is printed with the
  rank's number, then every rank is ended: by `MPI_Abort` once MPI runs, and
  before that (a rank failing before its first collective, while the others
  wait in MPI start-up for it) by the rank killing itself with a signal, which
  makes the launcher kill every rank. This guard is installed when
  `rune.distributed` is imported in a launched run of several ranks;
- before each collective the ranks exchange a small signature (which
  collective, its options, the structure of its tree, the shapes and dtypes
  of its leaves) with a non-blocking allgather; ranks that disagree raise
  `DistributedError` naming the ranks and what each passed;
- a rank that ends normally (the end of the script, `sys.exit`) tells the
  others how many collectives it completed; a rank that waits in a collective
  the leaver never joined raises `DistributedError` naming it.
"""
import atexit
import os
import signal
import socket
import sys
import time
import traceback
import zlib

import numpy as np

from ..errors import DistributedError

# (rank variable, size variable, node-local rank variable) set by common launchers.
_LAUNCHERS = (
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),                     # MPICH (hydra), Intel MPI
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),  # Open MPI
    ("PMIX_RANK", None, None),                                       # PMIx launchers
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK"),      # MVAPICH
)

_EXIT_TAG = 0x52554E  # the notice a rank sends when it ends normally
ABORT_GRACE_S = 0.5   # between a failing rank's last words and MPI_Abort


class _Group:
    """This process's place in the run: rank, size and the MPI handles (None when alone)."""

    def __init__(self):
        self.rank, self.size, self.local_rank = 0, 1, 0
        self.node = 0        # the rank of its node's first process: which ranks share a machine
        self.MPI = None
        self.comm = None     # data collectives
        self.ctl = None      # signatures, exit notices (a duplicate: never mixed with data)
        self.bye = None      # the barrier at exit (its own: a rank may still wait in a signature)
        self.seq = 0         # collectives completed by this rank
        self.exited = {}     # rank -> collectives it completed before it ended


_group = None


def launch_variable():
    """The launcher variable found in the environment as (name, value), or None."""
    for rank_var, _, _ in _LAUNCHERS:
        if rank_var in os.environ:
            return rank_var, os.environ[rank_var]
    return None


def launch_size():
    """The number of ranks the launcher says the run has; None when it does not say."""
    for rank_var, size_var, _ in _LAUNCHERS:
        if rank_var in os.environ:
            size = os.environ.get(size_var or "", "")
            return int(size) if size.isdigit() else None
    return None


_previous_hook = None


def guard_launch():
    """In a launched run of several ranks, make an exception that reaches the top level
    of this rank end the whole run (see the module's docstring). Idempotent."""
    global _previous_hook
    if launch_variable() is None or launch_size() == 1 or sys.excepthook is _end_run:
        return
    _previous_hook = sys.excepthook
    sys.excepthook = _end_run


def _end_run(etype, value, tb):
    group = _group if _group is not None and _group.MPI is not None else None
    if group is not None:
        rank, size = group.rank, group.size
    else:
        rank, size = launch_variable()[1], launch_size() or "?"
    note = (f"rune.distributed: rank {rank} of {size} raised {etype.__name__}: {value}\n"
            f"rune.distributed: aborting all {size} ranks\n")
    if _previous_hook is sys.__excepthook__ or _previous_hook is None:   # one write: the launcher forwards it whole
        sys.stderr.write("".join(traceback.format_exception(etype, value, tb)) + note)
    else:
        _previous_hook(etype, value, tb)
        sys.stderr.write(note)
    sys.stderr.flush()
    # Ending every rank makes the launcher kill them all, and it may do so before it
    # has forwarded what this rank just wrote: give it a moment.
    time.sleep(ABORT_GRACE_S)
    if group is not None:
        group.MPI.COMM_WORLD.Abort(1)
    # MPI has not started here, so there is no MPI_Abort; the others may be waiting for
    # this rank in MPI_Init, which a plain non-zero exit leaves them doing forever. A
    # rank killed by a signal makes the launcher (MPICH's hydra, Open MPI) end them all.
    if hasattr(signal, "SIGKILL"):
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(1)


def initialize():
    """Join the run: MPI when launched by an MPI launcher, a group of one otherwise.

    Idempotent; every other function of `rune.distributed` calls it on first use."""
    global _group
    if _group is not None:
        return _group
    group = _Group()
    found = launch_variable()
    if found is not None:
        _start_mpi(group, found)
    _group = group
    return group


def _start_mpi(group, found):
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(
            f"rune.distributed: this process was started by an MPI launcher ({found[0]}={found[1]}), "
            f"but mpi4py cannot be imported ({e}). Install it with: pip install 'rune[distributed]' "
            f"(mpi4py and the mpich wheel, whose mpiexec to launch with)") from e
    group.MPI = MPI
    group.comm = MPI.COMM_WORLD.Dup()
    group.ctl = MPI.COMM_WORLD.Dup()
    group.bye = MPI.COMM_WORLD.Dup()
    group.rank, group.size = group.comm.Get_rank(), group.comm.Get_size()
    # The rank among the processes of this node (which GPU to use): asked of MPI
    # itself, since not every launcher sets a variable for it.
    node = group.comm.Split_type(MPI.COMM_TYPE_SHARED, key=group.rank)
    group.local_rank = node.Get_rank()
    group.node = node.bcast(group.rank, root=0)
    node.Free()
    guard_launch()   # (already there when rune.distributed was imported in this launch)
    atexit.register(_leave, group)


def _leave(group):
    """At a normal exit: tell every other rank, then wait until all have ended too."""
    notice = np.array([group.seq], np.int64)
    sends = [group.ctl.Isend(notice, dest=r, tag=_EXIT_TAG) for r in range(group.size) if r != group.rank]
    done = group.bye.Ibarrier()
    # Waits as long as the others run (a rank may still be evaluating or saving);
    # a rank stuck in a collective this one never joins aborts the run.
    while not done.Test():
        time.sleep(1e-3)
    group.MPI.Request.Waitall(sends)
    for r in range(group.size):   # collect every notice, so none is left in flight at MPI_Finalize
        if r != group.rank and r not in group.exited:
            group.ctl.Recv(np.empty(1, np.int64), source=r, tag=_EXIT_TAG)


def _check_exits(group, what):
    status = group.MPI.Status()
    while group.ctl.Iprobe(source=group.MPI.ANY_SOURCE, tag=_EXIT_TAG, status=status):
        buf = np.empty(1, np.int64)
        group.ctl.Recv(buf, source=status.Get_source(), tag=_EXIT_TAG)
        group.exited[status.Get_source()] = int(buf[0])
    for r, completed in sorted(group.exited.items()):
        if completed <= group.seq:   # it ended before joining this collective: it never will
            raise DistributedError(
                f"rune.distributed: rank {r} of {group.size} exited after {completed} collectives, while "
                f"rank {group.rank} waits in collective #{group.seq + 1} ({what}): every rank must call "
                f"the same collectives in the same order")


def wait(group, request, what):
    """Complete a non-blocking request, watching for ranks that ended meanwhile."""
    start = None
    while not request.Test():
        _check_exits(group, what)
        # Ranks in step arrive within microseconds: spin for the first millisecond, then
        # yield the core (the cores may be shared) but stay awake up to 50 ms; a longer
        # wait (another rank evaluating, saving) polls once a millisecond.
        if start is None:
            start = time.perf_counter()
        waited = time.perf_counter() - start
        if waited > 1e-3:
            time.sleep(0 if waited < 0.05 else 1e-3)


def agree(group, what, detail, structure=""):
    """Check that every rank is about to run the same collective on the same layout.

    `what` names the collective and its options; `structure` is its tree's
    structure (text); `detail` lists its leaves' shapes and dtypes (strings).
    One small non-blocking allgather of a signature; only on disagreement do
    the ranks exchange the full text.
    """
    text = what + "|" + structure + "|" + ";".join(detail)
    sig = np.array([zlib.crc32(what.encode()), zlib.crc32(text.encode()),
                    zlib.adler32(text.encode()), len(detail)], np.int64)
    every = np.empty((group.size, sig.size), np.int64)
    wait(group, group.ctl.Iallgather(sig, every), what)
    if (every == sig).all():
        return
    others = group.ctl.allgather((what, structure, detail))  # every rank got here: all saw the disagreement
    raise DistributedError(_disagreement(group, others))


def _disagreement(group, others):
    ranks = " vs ".join(f"rank {r}: {w}" for r, (w, _, _) in enumerate(others))
    if len({w for w, _, _ in others}) > 1:
        return (f"rune.distributed: ranks called different collectives at collective #{group.seq + 1} "
                f"({ranks}); every rank must call the same collectives in the same order")
    what, _, first = others[0]
    if len({s for _, s, _ in others}) > 1:
        per = ", ".join(f"rank {r} passed {s}" for r, (_, s, _) in enumerate(others))
        return (f"rune.distributed: {what} at collective #{group.seq + 1}: the ranks passed trees of "
                f"different structures: {per}; every rank must pass the same structure")
    counts = {len(d) for _, _, d in others}
    if len(counts) > 1:
        per = ", ".join(f"rank {r} passed {len(d)} leaves" for r, (_, _, d) in enumerate(others))
        return f"rune.distributed: {what} at collective #{group.seq + 1}: {per}"
    for k in range(len(first)):
        seen = [d[k] for _, _, d in others]
        if len(set(seen)) > 1:
            per = ", ".join(f"rank {r} has {s}" for r, s in enumerate(seen))
            return (f"rune.distributed: {what} at collective #{group.seq + 1}: leaf {k} differs "
                    f"between ranks: {per}; every rank must pass the same shapes and dtypes")
    return f"rune.distributed: {what} at collective #{group.seq + 1}: ranks disagree"


def gpu_index(local_rank, count):
    """The GPU, among the `count` this process sees, that the rank `local_rank` of its
    node uses: `local_rank % count`. That is cuda:local_rank while a node runs no more
    ranks than it has GPUs, and every rank's cuda:0 where the launcher gives each rank
    one GPU of its own (CUDA_VISIBLE_DEVICES set per rank)."""
    if count < 1:
        raise DistributedError(f"rune.distributed: rank {local_rank} of this node has no GPU to use "
                               f"(CuPy sees none); place its arrays on the host")
    return local_rank % count


def device(group):
    """This rank's device: GPU cuda:gpu_index(local rank, GPUs seen) where rune sees a
    GPU, else the host."""
    from ..core.devices import devices
    gpus = devices("cuda")
    return gpus[gpu_index(group.local_rank, len(gpus))] if gpus else devices("cpu")[0]


def check_one_gpu_per_rank(group, index, gpu, count):
    """Before an NCCL communicator is made on this rank's GPU `index` (`gpu`: the GPU's
    PCI bus id, which names it whatever CUDA_VISIBLE_DEVICES each rank has; `count`: the
    GPUs this rank sees): every rank learns where the others are, and two ranks on one
    GPU raise DistributedError on every rank, naming them (NCCL itself fails with its
    raw "Duplicate GPU detected", or hangs)."""
    where = ((group.node, socket.gethostname()), gpu, index, group.local_rank, count)
    message = shared_gpu(group.ctl.allgather(where))
    if message:
        raise DistributedError(message)


def shared_gpu(places):
    """What is wrong when two ranks use one GPU, or None. `places[r]` is rank r's
    ((node, its host name), GPU id, device index, local rank, GPUs it sees); the node
    is MPI's (the processes sharing memory), since machines may share a host name and
    identical machines share PCI bus ids."""
    first = {}
    for rank, ((node, name), gpu, index, _, count) in enumerate(places):
        other = first.setdefault((node, gpu), rank)
        if other == rank:
            continue
        node = name
        head = (f"rune.distributed: rank {other} (on cuda:{places[other][2]}) and rank {rank} (on cuda:{index}) "
                f"both use the GPU at PCI {gpu} of node {node}, but NCCL needs a GPU per rank")
        picks = {r: gpu_index(places[r][3], places[r][4]) for r in (other, rank)}
        if picks[other] == picks[rank]:
            return (f"{head}: node {node} shows them {count} GPU(s) for more ranks; launch at most "
                    f"{count} rank(s) per node there")
        return (f"{head}: place each rank's arrays on rune.distributed.device(), GPU "
                f"cuda:(local_rank() % GPUs seen): " + ", ".join(f"cuda:{g} for rank {r}" for r, g in picks.items()))
    return None


def barrier(group):
    """Every rank waits here for the others (the signature exchange is the barrier: it
    completes only once every rank has contributed, and checks they all called barrier)."""
    if group.size > 1:
        agree(group, "barrier()", [])
        group.seq += 1
