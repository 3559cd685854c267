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
"""
import sys

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


def _argument_refs(raw):
    return sys.getrefcount(raw)


# References a call of `sole_owner` itself adds (its parameter, getrefcount's
# argument): measured, as interpreters differ in which they count.
_ARGUMENT_REFS = _argument_refs(object())


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
