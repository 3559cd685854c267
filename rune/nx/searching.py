"""searchsorted, as a comparison count: the insertion point of v in a sorted
x1 is how many elements of x1 are below it (left) or not above it (right).
A composite of comparisons and a sum, O(len(x1) * v.size) work but with a fixed
shape: it runs under jit and vmap on every backend with no new rules (an
integer result carries no derivative)."""
from ..errors import ArgumentError, ShapeError
from ..core import dtypes as dt
from . import ops


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Where each element of `x2` would be inserted into the sorted 1-d `x1` to keep it sorted.

    x1: a 1-d array, sorted ascending (or see sorter). x2: the values to place (any shape; the result has its
    shape, int32). side: "left" puts a value before equal elements, "right" after them. sorter: positions that
    sort x1, if x1 itself is not sorted.
    """
    if side not in ("left", "right"):
        raise ArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    x1, x2 = (ops.asarray(v) for v in ops._operands((x1, x2)))
    if x1.ndim != 1:
        raise ShapeError(f"searchsorted: x1 must be 1-d, got shape {x1.shape}")
    if sorter is not None:
        x1 = ops.take(x1, ops.constant_like(sorter, x1))
    x1, x2 = ops.promote("searchsorted", x1, x2)
    below = ops.less if side == "left" else ops.less_equal
    hits = below(ops.reshape(x1, (1,) * x2.ndim + x1.shape), ops.expand_dims(x2, -1))
    return ops.sum(ops.astype(hits, dt.default_int), -1)
