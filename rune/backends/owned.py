"""Device memory whose readers rune can count by liveness: an `Owner` per allocation.

A donated argument's buffer may receive a call's outputs only if nothing else
can read it (rune/compiler/donation.py). Reference counts cannot tell
(they are an interpreter detail), and GPU arrays take no weak references, so
the memory rune allocates for its own results is owned by an `Owner`: every
array over the allocation holds it, through its memory object (a view shares
that object, a DLPack export holds the array). Whether anything other than a
given array can read the allocation is then whether the owner outlives that
array: a defined semantic of Python. A platform subclasses `Owner`
(rune/backends/cuda/owned.py); memory no `Owner` holds is never reused.
"""


class Owner:
    """The owner of one allocation `memory`: it lives while any array over the
    allocation does. `array(shape, dtype, strides)` is a new array over the
    allocation, held by this owner (a platform's subclass makes it)."""
    __slots__ = ("memory", "__weakref__")

    def __init__(self, memory):
        self.memory = memory

    def array(self, shape, dtype, strides):
        raise NotImplementedError


def owner_of(raw):
    """The `Owner` of the allocation `raw` lies in at offset 0, or None (memory rune
    did not allocate, or allocated otherwise: never reused)."""
    mem = getattr(getattr(raw, "data", None), "mem", None)   # CuPy: MemoryPointer -> memory
    owner = getattr(mem, "_owner", None)
    if not isinstance(owner, Owner) or raw.data.ptr != owner.memory.ptr:
        return None
    return owner
