"""Staged bodies kept between calls of eager control flow.

An eager `cond`, `switch`, `scan` or `while_loop` stages its functions, and
building the programs (and their plans, which the compiler keeps with each
program) costs far more than running them on small arrays. `staged(kind, fns, signature, build)` returns what `build()`
staged the last time the same functions were staged at the same signature
(input avals and tree structures, static parameters, the default device),
and builds it afresh when any function is not fingerprintable
(rune/core/fingerprint.py), so a result is reused only when every value the
functions reach is provably the same.

One entry per (functions' keys, signature): the rune Arrays a function reaches
are compared by identity, and a call whose arrays differ replaces the entry,
so at most one generation of captured arrays is kept alive per entry.
"""
import collections
import threading

from .devices import current_default
from .fingerprint import fingerprint

SIZE = 512  # entries kept, least recently used dropped first
REUSED, BUILT, UNKEPT = "reused", "built", "unkept"

_entries = collections.OrderedDict()  # key -> (ids of held objects, held objects, value)
_lock = threading.Lock()


def staged(kind, fns, signature, build):
    """(`build()`, or its result from an earlier call with the same `kind`,
    functions (by fingerprint) and hashable `signature`; how it was found:
    REUSED, BUILT (and kept for later calls), or UNKEPT (built, not kept))."""
    keys, held = [], []
    for f in fns:
        found = fingerprint(f)
        if found is None:
            return build(), UNKEPT
        keys.append(found[0])
        held.extend(found[1])
    key = (kind, tuple(keys), signature, current_default().name)
    ids = tuple(map(id, held))
    try:
        with _lock:
            entry = _entries.get(key)
            if entry is not None and entry[0] == ids:
                _entries.move_to_end(key)
                return entry[2], REUSED
    except TypeError:  # a value keyed by content turned out not to hash
        return build(), UNKEPT
    value = build()
    with _lock:
        _entries[key] = (ids, held, value)
        _entries.move_to_end(key)
        while len(_entries) > SIZE:
            _entries.popitem(last=False)
    return value, BUILT


def clear():
    """Forget every staged body."""
    with _lock:
        _entries.clear()
