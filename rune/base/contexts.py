"""How many contexts that change what an eager call means are open, in any thread.

A trace (`rune.core.trace.using`), a `default_device` block and an open
`rune.profile` each change how a call of compiled code must run, and reading
them costs two thread-local lookups and a list check: a fifth of a cached
jit call of one small op. This one process-wide count, zero while no such
context is open anywhere, lets that call (rune/compiler/api.py,
`Jitted._write_hot_call`) skip all three. A thread's own open context is
always counted (its increment happens before anything it runs inside), so a
zero is never wrong for the thread reading it; another thread's contexts only
send it down the full path.
"""
import threading

OPEN = [0]   # one cell, read without a call
_LOCK = threading.Lock()   # `+=` on a shared cell is not atomic across threads


def opened():
    with _LOCK:
        OPEN[0] += 1


def closed():
    with _LOCK:
        OPEN[0] -= 1
