"""Donated arguments: `jit(f, donate_argnums=...)` on a GPU.

A donated argument's buffer may hold one of the call's outputs of the same
shape and dtype instead of a fresh allocation, and the donated Array is
deleted: its buffer is replaced by `DeletedBuffer`, which raises on any use.
Host buffers are never reused (NumPy allocations are cheap; donation there is
a hint that changes nothing).

Which output goes where is decided once per plan (`reuse_plan`), from the step
protocol (rune/compiler/plan.py): an output a step `writes()` may take a donated
input's buffer when the step `takes_donations` (a compiled device stretch),
no later step `reads()` that input and
no plan output is it, and, when the step itself still reads it, only where the
step reads each point before writing it (`writes_in_place`). Each call then
hands the plan the buffers per step (`by_step`), which passes each step its
own as a `run` argument.

Which donated buffers may be written (`take`) is decided by liveness, never by
reference counts (an interpreter detail): only an allocation rune made with an
`Owner` (rune/backends/owned.py: a GPU stretch's outputs, arrays copied up from
the host), never lent to foreign code, whose owner is gone once the call lets go
of the donated array's handle on it: then no other Array, view or capsule can
read it, and the call holds the one new handle on it.
"""
import weakref

from ..backends import owner_of
from ..base import memory
from ..errors import UsageError


class DeletedBuffer:
    """What a donated Array holds after the call it was donated to: any use raises."""
    __slots__ = ("where",)

    def __init__(self, where):
        self.where = where

    def _deleted(self, *_):
        raise UsageError(f"this Array was donated to {self.where} and deleted: its buffer now holds "
                         f"an output of that call; use the call's result instead of the donated argument")

    def __getattr__(self, name):
        self._deleted()

    __array__ = __len__ = __iter__ = __bool__ = __float__ = __int__ = __index__ = _deleted
    __getitem__ = _deleted

    def __repr__(self):
        return f"<buffer deleted by {self.where}>"


_END = float("inf")


def reuse_plan(plan, slots):
    """{(id(step), output slot): donated input slot} for the donated input `slots` of `plan`."""
    last = {s: -1 for s in slots}
    for k, step in enumerate(plan.steps):
        reads = step.reads()
        for s in slots:
            if s in reads:
                last[s] = k
    for s in plan.out_slots:
        if s in last:
            last[s] = _END
    free = list(slots)
    chosen = {}
    for k, step in enumerate(plan.steps):
        if not step.takes_donations:
            continue
        for out in step.writes():
            made = plan.avals[out]
            for s in free:
                aval = plan.avals[s]
                if aval.shape != made.shape or aval.dtype != made.dtype:
                    continue
                if last[s] < k or (last[s] == k and step.writes_in_place(s, out)):
                    chosen[id(step), out] = s
                    free.remove(s)
                    break
    return chosen


def by_step(reuse, raws):
    """{id(step): {output slot: donated raw}}: the donated `raws` (input slot -> raw)
    given out as `reuse` (`reuse_plan`) says, as `Plan.run` takes them."""
    given = {}
    for (step, out), s in reuse.items():
        if s in raws:
            given.setdefault(step, {})[out] = raws[s]
    return given


def take(leaves, raws, positions, where):
    """Delete the donated leaves at `positions` of a call's `leaves` (each `_raw`
    becomes a `DeletedBuffer` naming the call `where`); {position: buffer} for
    those whose memory the call's outputs may take, the buffer being the new
    `raws[position]` (the call's only handle on that memory). Never taken: a buffer
    lent to or borrowed from foreign code (DLPack, `__cuda_array_interface__`,
    whose views rune cannot see), one passed at two positions, one rune did not
    allocate with an owner, and one another Array, view or capsule still reads."""
    taken = {}
    for i in positions:
        leaf = leaves[i]
        lent = getattr(leaf, "_shared", False)
        memory.freed(leaf.device.name, leaf._raw.nbytes)   # rune.memory_stats: the outputs count it again
        leaf._raw = DeletedBuffer(where)
        if not lent and sum(r is raws[i] for r in raws) == 1:
            buffer = _sole_handle(raws, i)
            if buffer is not None:
                taken[i] = buffer
    return taken


def _sole_handle(raws, i):
    """`raws[i]` (its leaf deleted) replaced by a new array over the same owned
    memory; that array where nothing else can read the memory, else None."""
    owner = owner_of(raws[i])
    if owner is None or raws[i].base is not None:
        return None
    raw = raws[i]
    shape, dtype, strides = raw.shape, raw.dtype, raw.strides
    memory, renew = owner.memory, type(owner)
    alive = weakref.ref(owner)
    raws[i] = raw = owner = None   # the call's own references: whatever holds the owner now reads the memory
    owner = alive()
    sole = owner is None
    if sole:
        owner = renew(memory)   # the memory outlived every array over it: the call's alone
    raws[i] = owner.array(shape, dtype, strides)
    return raws[i] if sole else None
