"""The process group: launch detection, MPI start-up, and what happens when a rank fails.

`initialize()` looks for the variables an MPI launcher (`mpiexec`, `srun`)
sets; without them rune runs as one process of size 1 and never imports
mpi4py. With them, MPI starts (mpi4py), and three guards are installed so that
a fault on one rank ends every rank with a message instead of a hang:

- an exception that reaches the top level of any rank is printed with the
  rank's number and `MPI_Abort` ends every rank (the launcher kills them);
- before each collective the ranks exchange a small signature (which
  collective, its options, the shapes and dtypes of its leaves) with a
  non-blocking allgather; ranks that disagree raise `DistributedError` naming
  the ranks and what each passed;
- a rank that ends normally (the end of the script, `sys.exit`) tells the
  others how many collectives it completed; a rank that waits in a collective
  the leaver never joined raises `DistributedError` naming it.
"""
import atexit
import os
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
    node.Free()
    _previous_hook = sys.excepthook

    def abort_on_exception(etype, value, tb):
        note = (f"rune.distributed: rank {group.rank} of {group.size} raised {etype.__name__}: {value}\n"
                f"rune.distributed: aborting all {group.size} ranks\n")
        if _previous_hook is sys.__excepthook__:   # one write: the launcher forwards it whole
            sys.stderr.write("".join(traceback.format_exception(etype, value, tb)) + note)
        else:
            _previous_hook(etype, value, tb)
            sys.stderr.write(note)
        sys.stderr.flush()
        # MPI_Abort makes the launcher kill every rank, and it may do so before it has
        # forwarded what this rank just wrote: give it a moment.
        time.sleep(ABORT_GRACE_S)
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = abort_on_exception
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


def agree(group, what, detail):
    """Check that every rank is about to run the same collective on the same layout.

    `what` names the collective and its options; `detail` lists its leaves'
    shapes and dtypes (strings). One small non-blocking allgather of a
    signature; only on disagreement do the ranks exchange the full text.
    """
    text = what + "|" + ";".join(detail)
    sig = np.array([zlib.crc32(what.encode()), zlib.crc32(text.encode()),
                    zlib.adler32(text.encode()), len(detail)], np.int64)
    every = np.empty((group.size, sig.size), np.int64)
    wait(group, group.ctl.Iallgather(sig, every), what)
    if (every == sig).all():
        return
    others = group.ctl.allgather((what, detail))  # every rank got here: all saw the disagreement
    raise DistributedError(_disagreement(group, others))


def _disagreement(group, others):
    ranks = " vs ".join(f"rank {r}: {w}" for r, (w, _) in enumerate(others))
    if len({w for w, _ in others}) > 1:
        return (f"rune.distributed: ranks called different collectives at collective #{group.seq + 1} "
                f"({ranks}); every rank must call the same collectives in the same order")
    what, first = others[0]
    counts = {len(d) for _, d in others}
    if len(counts) > 1:
        per = ", ".join(f"rank {r} passed {len(d)} leaves" for r, (_, d) in enumerate(others))
        return f"rune.distributed: {what} at collective #{group.seq + 1}: {per}"
    for k in range(len(first)):
        seen = [d[k] for _, d in others]
        if len(set(seen)) > 1:
            per = ", ".join(f"rank {r} has {s}" for r, s in enumerate(seen))
            return (f"rune.distributed: {what} at collective #{group.seq + 1}: leaf {k} differs "
                    f"between ranks: {per}; every rank must pass the same shapes and dtypes")
    return f"rune.distributed: {what} at collective #{group.seq + 1}: ranks disagree"


def barrier(group):
    """Every rank waits here for the others (the signature exchange is the barrier: it
    completes only once every rank has contributed, and checks they all called barrier)."""
    if group.size > 1:
        agree(group, "barrier()", [])
        group.seq += 1
