"""The standard's array-manipulation functions rune lacked, as composites of
existing primitives (so every transformation, jit and every backend get them
with no new rules): take_along_axis, tril/triu, roll, repeat, tile, unstack,
meshgrid, diff, vecdot, matrix_transpose, count_nonzero.

Static facts (masks of a triangle, the flat offsets of take_along_axis, the
gather indices of repeat) are built with NumPy from the shapes and enter as
constants placed with the operand.
"""
import builtins

import numpy as np

from ..core.trace import Tracer
from ..errors import ArgumentError, IndexingError, ShapeError
from ..core import dtypes as dt
from . import ops
from .host_values import concrete


def take_along_axis(x, indices, axis=-1):
    """Elements of `x` at `indices` along `axis`, the other axes broadcast (np.take_along_axis).

    x: an array. indices: an integer array of x's rank; negative indices count from the end, out-of-range ones
    are clamped (as every gather in rune, and JAX's). axis: the axis indexed (-1 by default).
    """
    x = ops.asarray(x)
    idx = ops.constant_like(indices, x)
    if idx.dtype.kind not in "iu":
        raise ArgumentError(f"take_along_axis: indices must be integers, got {idx.dtype.name}")
    if idx.ndim != x.ndim:
        raise ShapeError(f"take_along_axis: indices of shape {idx.shape} must have the rank of x "
                         f"{x.shape}")
    a = ops.normalize_axis("take_along_axis", axis, x.ndim)
    n = x.shape[a]
    if n == 0 and idx.shape[a]:
        raise IndexingError(f"take_along_axis: cannot take from the empty axis {axis} of shape {x.shape}")
    shape = list(ops.broadcast_shapes("take_along_axis", tuple(d for i, d in enumerate(x.shape) if i != a),
                                      tuple(d for i, d in enumerate(idx.shape) if i != a)))
    x = ops.broadcast_to(x, tuple(shape[:a]) + (n,) + tuple(shape[a:]))
    out_shape = tuple(shape[:a]) + (idx.shape[a],) + tuple(shape[a:])
    idx = ops.broadcast_to(idx, out_shape)
    if idx.dtype.kind == "i":
        idx = ops.where(ops.less(idx, 0), ops.add(idx, idx.dtype.type(n)), idx)
    idx = ops.astype(ops.clip(idx, 0, builtins.max(n - 1, 0)), dt.int64 if x.size >= 2 ** 31 else dt.int32)
    # The flat position of (i0, ..., idx, ..., ik) in x: idx * stride(a) plus
    # the fixed offset of the other coordinates (a static table).
    strides = np.cumprod((x.shape[1:] + (1,))[::-1])[::-1]
    offsets = np.zeros(out_shape, np.int64)
    for i, d in enumerate(out_shape):
        if i != a:
            offsets = offsets + (np.arange(d) * strides[i]).reshape((d,) + (1,) * (len(out_shape) - i - 1))
    flat = ops.add(ops.multiply(idx, idx.dtype.type(strides[a])), ops.constant_like(offsets.astype(idx.dtype), x))
    return ops.take(ops.reshape(x, (-1,)), flat, axis=0)


def _triangle(name, x, k, lower):
    x = ops.asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"{name}: expected an array of at least 2 dimensions, got shape {x.shape}")
    n, m = x.shape[-2:]
    keep = np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)
    return ops.where(ops.constant_like(keep, x), x, x.dtype.type(0))


def tril(x, k=0):
    """The lower triangle of the last two axes (from diagonal `k` on down), zeros above.

    x: an array of at least 2 dimensions. k: the diagonal (0 the main one, positive above, negative below).
    """
    return _triangle("tril", x, k, True)


def triu(x, k=0):
    """The upper triangle of the last two axes (from diagonal `k` on up), zeros below.

    x: an array of at least 2 dimensions. k: the diagonal (0 the main one, positive above, negative below).
    """
    return _triangle("triu", x, k, False)


def roll(x, shift, axis=None):
    """Elements of `x` shifted by `shift` along `axis`, wrapping around.

    x: an array. shift: an int, or one int per axis. axis: an int or a tuple of ints; None shifts the
    flattened array, then reshapes it back.
    """
    x = ops.asarray(x)
    if axis is None:
        return ops.reshape(roll(ops.reshape(x, (-1,)), shift, 0), x.shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    shifts = (shift,) * len(axes) if isinstance(shift, int) else tuple(shift)
    if len(shifts) != len(axes):
        raise ShapeError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    for s, a in zip(shifts, axes):
        a = ops.normalize_axis("roll", a, x.ndim)
        n = x.shape[a]
        if n == 0 or int(s) % n == 0:
            continue
        s = int(s) % n
        x = ops.concatenate([ops.slice_in_dim(x, n - s, n, axis=a), ops.slice_in_dim(x, 0, n - s, axis=a)], a)
    return x


def repeat(x, repeats, axis=None):
    """Each element of `x` repeated `repeats` times along `axis`.

    x: an array. repeats: an int, or one count per element along `axis`; counts set the result's shape, so
    they must be concrete (not traced). axis: the axis; None repeats over the flattened array.
    """
    x = ops.asarray(x)
    if axis is None:
        x, axis = ops.reshape(x, (-1,)), 0
    a = ops.normalize_axis("repeat", axis, x.ndim)
    n = x.shape[a]
    if isinstance(repeats, Tracer):
        repeats = concrete("repeat", repeats, "repeats")
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iu" or counts.ndim > 1 or (counts.ndim == 1 and counts.size not in (1, n)):
        raise ShapeError(f"repeat: repeats must be an int or {n} ints (one per element along axis {axis}), "
                         f"got {repeats!r}")
    if (counts < 0).any():
        raise ArgumentError(f"repeat: repeats must be non-negative, got {counts.tolist()}")
    index = np.repeat(np.arange(n, dtype=np.int32), np.broadcast_to(counts.reshape(-1), (n,)))
    return ops.take(x, ops.constant_like(index, x), axis=a)


def tile(x, repetitions):
    """`x` repeated `repetitions` times along each axis (np.tile).

    x: an array. repetitions: an int or a sequence of non-negative ints; a leading 1 pads the shorter of
    `repetitions` and x's shape.
    """
    x = ops.asarray(x)
    reps = (repetitions,) if isinstance(repetitions, int) else tuple(int(r) for r in repetitions)
    if builtins.any(r < 0 for r in reps):
        raise ArgumentError(f"tile: repetitions must be non-negative, got {reps}")
    nd = builtins.max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    x = ops.reshape(x, (1,) * (nd - x.ndim) + x.shape)
    # (r0, d0, r1, d1, ...) broadcast, then merged pairwise.
    expanded = ops.reshape(x, tuple(v for d in x.shape for v in (1, d)))
    expanded = ops.broadcast_to(expanded, tuple(v for r, d in zip(reps, x.shape) for v in (r, d)))
    return ops.reshape(expanded, tuple(r * d for r, d in zip(reps, x.shape)))


def unstack(x, axis=0):
    """The slices of `x` along `axis`, as a tuple.

    x: an array. axis: the axis split into slices (0 by default).
    """
    x = ops.asarray(x)
    a = ops.normalize_axis("unstack", axis, x.ndim)
    return tuple(ops.squeeze(ops.slice_in_dim(x, i, i + 1, axis=a), a) for i in range(x.shape[a]))


def meshgrid(*xs, indexing="xy"):
    """Coordinate grids from 1-d arrays: one array per input, each of the shape of all of them together.

    xs: 1-d arrays (promoted to one dtype). indexing: "xy" (the first two axes exchanged, as NumPy's default)
    or "ij" (matrix indexing).
    """
    if indexing not in ("xy", "ij"):
        raise ArgumentError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [ops.asarray(v) for v in ops._operands(xs)]
    for v in xs:
        if v.ndim != 1:
            raise ShapeError(f"meshgrid: expected 1-d arrays, got shape {v.shape}")
    if len({v.dtype for v in xs}) > 1:
        xs = ops.promote("meshgrid", *xs)
    shape = [v.shape[0] for v in xs]
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, v in enumerate(xs):
        at = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(xs) > 1 else i
        view = [1] * len(xs)
        view[at] = v.shape[0]
        out.append(ops.broadcast_to(ops.reshape(v, view), tuple(shape)))
    return out


def diff(x, axis=-1, n=1, prepend=None, append=None):
    """The `n`-th forward difference along `axis` (x[i+1] - x[i]; for bools, x[i+1] != x[i]).

    x: an array. axis: the axis (-1 by default). n: how many times the difference is taken (1 by default).
    prepend, append: values (scalars or arrays) joined to `x` along `axis` before differencing.
    """
    x = ops.asarray(x)
    a = ops.normalize_axis("diff", axis, x.ndim)
    if n < 0:
        raise ArgumentError(f"diff: n must be non-negative, got {n}")
    parts = [v for v in (prepend, x, append) if v is not None]
    if len(parts) > 1:
        parts = [ops.constant_like(v, x) for v in parts]
        parts = [v if v.ndim else ops.broadcast_to(v, x.shape[:a] + (1,) + x.shape[a + 1:]) for v in parts]
        x = ops.concatenate(parts, a)
    for _ in range(n):
        m = x.shape[a]
        hi, lo = ops.slice_in_dim(x, 1, m, axis=a), ops.slice_in_dim(x, 0, builtins.max(m - 1, 0), axis=a)
        x = ops.not_equal(hi, lo) if x.dtype == dt.bool_ else ops.subtract(hi, lo)
    return x


def vecdot(x1, x2, axis=-1):
    """The dot product sum(conj(x1) * x2) of vectors along `axis`, broadcast over the other axes.

    x1, x2: arrays of at least one dimension, promoted to one dtype; the result keeps it (a uint8 product is
    uint8, as in the standard). axis: the axis of the vectors (-1 by default).
    """
    x1, x2 = ops.promote("vecdot", x1, x2)
    x1, x2 = ops.asarray(x1), ops.asarray(x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ShapeError("vecdot: operands must have at least one dimension")
    if not (-builtins.min(x1.ndim, x2.ndim) <= axis < 0 or 0 <= axis < builtins.min(x1.ndim, x2.ndim)):
        raise ShapeError(f"vecdot: axis {axis} is out of range for shapes {x1.shape} and {x2.shape}")
    a1, a2 = axis % x1.ndim if axis >= 0 else axis, axis % x2.ndim if axis >= 0 else axis
    if x1.shape[a1] != x2.shape[a2]:
        raise ShapeError(f"vecdot: axis {axis} has size {x1.shape[a1]} in {x1.shape} and {x2.shape[a2]} "
                         f"in {x2.shape}")
    x1, x2 = ops.moveaxis(x1, a1, -1), ops.moveaxis(x2, a2, -1)
    # The standard keeps the operands' dtype (a uint8 dot product is uint8, as matmul's).
    # x1 conjugated (the standard's vecdot: sum(conj(x1) * x2)); a real array is its own conjugate.
    return ops.sum(ops.multiply(ops.conj(x1), x2), -1, dtype=x1.dtype)


def matrix_transpose(x):
    """`x` with its last two axes exchanged.

    x: an array of at least 2 dimensions.
    """
    x = ops.asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose: expected an array of at least 2 dimensions, got shape {x.shape}")
    return ops.swapaxes(x, -1, -2)


def count_nonzero(x, axis=None, keepdims=False):
    """How many elements are nonzero, as int32 (the default integer dtype).

    x: an array. axis: an int, a tuple of ints, or None (all axes). keepdims: keep each reduced axis with size 1.
    """
    x = ops.asarray(x)
    return ops.sum(ops.astype(ops.not_equal(x, x.dtype.type(0)), dt.default_int), axis, keepdims)
