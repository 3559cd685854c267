"""Index normalisation, written once: negative indices count from the end (as
in NumPy and JAX); then gathers clamp into bounds and scatters drop what falls
outside. Indexing, the batching rules of gather/scatter/dynamic_slice and the
scatter VJP all use these (the host backend's NumPy versions sit in
`rune.backends.cpu.backend`, with the same meaning)."""
from . import ops


def from_end(idx, n):
    """`idx` with negative entries counted from the end of an axis of length `n`."""
    return ops.where(ops.less(idx, 0), ops.add(idx, n), idx)


def in_bounds(idx, n):
    """Where the (already normalised) `idx` lies in an axis of length `n`."""
    return ops.logical_and(ops.greater_equal(idx, 0), ops.less(idx, n))


def clamped(idx, n):
    """The (already normalised) `idx` clamped into an axis of length `n`, as gathers read."""
    return ops.clip(idx, 0, max(n - 1, 0))


def window_start(start, n, width):
    """The first index of a `width`-long window at `start`: from the end, then
    clamped so the window fits (dynamic_slice, as in JAX)."""
    return ops.clip(from_end(start, n), 0, n - width)
