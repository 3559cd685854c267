"""Donated arguments: `jit(f, donate_argnums=...)` on a GPU.

A donated argument's buffer may hold one of the call's outputs of the same
shape and dtype instead of a fresh allocation, and the donated Array is
deleted: its buffer is replaced by `DeletedBuffer`, which raises on any use.
Host buffers are never reused (NumPy allocations are cheap; donation there is
a hint that changes nothing).

Which output goes where is decided once per plan (`reuse_plan`): an output of a
compiled device stretch (a step with `writes_in_place`) may take a donated
input's buffer when no later step and no plan output reads that input, and,
when the stretch itself still reads it, only where the stretch reads each
point before writing it (`writes_in_place`). While the plan runs under
`offered`, those stretches ask `buffer_for` for their outputs.
"""
import contextlib
import sys
import threading

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


class _Offer(threading.local):
    buffers = None   # (id(step), output slot) -> donated raw, while a plan runs


_OFFER = _Offer()
_END = float("inf")


def _argument_refs(raw):
    return sys.getrefcount(raw)


# References a call of `sole_owner` itself adds (its parameter, getrefcount's
# argument): measured, as interpreters differ in which they count.
_ARGUMENT_REFS = _argument_refs(object())


def _reads(step):
    """The slots `step` reads; None when it cannot say (nothing is reused before it)."""
    ops = getattr(step, "ops", None)
    if ops is None and hasattr(step, "stretch"):
        ops = step.stretch.ops
    if ops is not None:
        return {s for _, ins, _ in ops for s in ins}
    if hasattr(step, "inputs"):
        return {s for _, s in step.inputs}
    if hasattr(step, "ins"):
        return set(step.ins)
    return None


def reuse_plan(plan, slots):
    """{(id(step), output slot): donated input slot} for the donated input `slots` of `plan`."""
    last = {s: -1 for s in slots}
    for k, step in enumerate(plan.steps):
        reads = _reads(step)
        for s in slots:
            if reads is None or s in reads:
                last[s] = k
    for s in plan.out_slots:
        if s in last:
            last[s] = _END
    free = list(slots)
    chosen = {}
    for k, step in enumerate(plan.steps):
        if not hasattr(step, "writes_in_place"):
            continue
        for _, out, shape, dtype in step.outputs:
            for s in free:
                aval = plan.avals[s]
                if aval.shape != tuple(shape) or aval.dtype != dtype:
                    continue
                if last[s] < k or (last[s] == k and step.writes_in_place(s, out)):
                    chosen[id(step), out] = s
                    free.remove(s)
                    break
    return chosen


def donatable(array, known):
    """Whether `array`'s buffer may be given to a call's outputs: only `known` references
    hold it (`sole_owner`), and it was never lent to or borrowed from foreign code
    (DLPack, `__cuda_array_interface__`), whose views rune cannot count."""
    return not getattr(array, "_shared", False) and sole_owner(array._raw, known)


def sole_owner(raw, known):
    """Whether nothing but the caller's `known` references holds `raw`: no other
    Array, and no view made from it (a view keeps its base alive), sees the
    buffer, and it is no view itself."""
    return sys.getrefcount(raw) - _ARGUMENT_REFS <= known and getattr(raw, "base", None) is None


@contextlib.contextmanager
def offered(reuse, raws):
    """Run a plan with the donated `raws` (input slot -> raw) given out as `reuse` says."""
    outer = _OFFER.buffers
    _OFFER.buffers = {key: raws[s] for key, s in reuse.items() if s in raws}
    try:
        yield
    finally:
        _OFFER.buffers = outer


def buffer_for(step, out_slot):
    """The donated buffer `step` writes its output `out_slot` into, or None (allocate one)."""
    buffers = _OFFER.buffers
    if not buffers:
        return None
    return buffers.pop((id(step), out_slot), None)
