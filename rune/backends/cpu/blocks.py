"""Host memory reused from call to call, decided by liveness, never by reference counts.

A large fresh output costs the page faults of new memory on every call, so
rune keeps the memory of some results (a compiled stretch's outputs, a host
collective's results) and writes the next call's result into it, but only
once nothing can read the previous result any more. Whether that is so is
decided by whether an object is alive, which Python defines; reference counts
are an interpreter detail (3.14 borrows references on its stack and counts
fewer).

The memory is a `Block`. Each call hands out a fresh array over it
(`block.view(np.ndarray)`) and keeps only a weak reference to that array.
NumPy sets a view's base to the first array up the chain that owns its data
or is of another type, so every view, `np.asarray`, memoryview or DLPack
capsule made from a handed-out array keeps that array alive, never the
block alone: while the weak reference answers, someone may read the memory.
"""
import weakref

import numpy as np

from .address import address


class Block(np.ndarray):
    """Memory a pool keeps: an ndarray subclass owning its data, so that NumPy stops
    at the array handed out over it when it collapses a view's chain of bases."""


class Blocks:
    """The blocks of one shape and dtype: `take()` returns a fresh array over a block
    whose previously handed-out array is gone, else over a new block, and the
    block's address. At most `keep` blocks stay with the pool (two: a loop whose
    result feeds its next call, or a caller holding the last result while making
    the next, alternates between two); an older block lives on with its array."""
    __slots__ = ("shape", "dtype", "keep", "held")

    def __init__(self, shape, dtype, keep=2):
        self.shape, self.dtype, self.keep = shape, dtype, keep
        self.held = []   # per block: [the block, its address, a weakref to its array handed out]

    def take(self, _view=np.ndarray.view, _plain=np.ndarray, _ref=weakref.ref):
        for entry in self.held:
            if entry[2]() is None:
                break
        else:
            entry = self._new()
        out = _view(entry[0], _plain)
        entry[2] = _ref(out)
        return out, entry[1]

    def _new(self):
        block = Block(self.shape, self.dtype)
        entry = [block, address(block), None]
        if len(self.held) >= self.keep:
            del self.held[0]
        self.held.append(entry)
        return entry
