"""Which examples this rank trains on in an epoch."""
import numpy as np

from ..errors import ArgumentError
from . import runtime


def shard(n, epoch=0, seed=0):
    """This rank's indices into a data set of `n` examples for `epoch`.

    Every rank draws the same permutation of range(n) from (seed, epoch), so
    the shards are disjoint, and reshuffled each epoch identically everywhere.
    Each rank gets n // size() indices: when size() does not divide n, the
    last n % size() examples of that epoch's permutation are dropped (other
    ones each epoch). Equal counts keep every rank making the same number of
    steps, hence the same collectives; a rank with one batch more would wait
    forever for the others.
    """
    for name, value in (("n", n), ("epoch", epoch), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ArgumentError(f"shard: {name} must be a non-negative int, got {value!r}")
    group = runtime.initialize()
    order = np.random.default_rng([int(seed), int(epoch)]).permutation(int(n))
    return rank_share(order, group.rank, group.size)


def rank_share(order, rank, size):
    """Rank `rank`'s part of `order` (a sequence every rank holds alike) among `size` ranks.

    The ranks take consecutive, disjoint parts of len(order) // size items each:
    the last len(order) % size items go to no rank, so every rank gets as many.
    """
    per = len(order) // size
    return order[rank * per:(rank + 1) * per]
