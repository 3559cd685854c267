"""Functions on an array's shape and layout: reshape, transpose, broadcast,
concatenate/stack/split, slices, flip, pad, take, dynamic slices; and the
standard's manipulation functions built from them (take_along_axis, tril/triu,
roll, repeat, tile, unstack, meshgrid, diff, matrix_transpose). The functions
of NumPy's surface built on these (hstack, atleast_2d, rot90, ...) are in
rune/nx/shaping.py.

Static facts (masks of a triangle, the flat offsets of take_along_axis, the
gather indices of repeat) are built with NumPy from the shapes and enter as
constants placed with the operand.
"""
import builtins
import math

import numpy as np

from ..core.prims import P, broadcast_shapes
from ..core.trace import Tracer, bind
from ..errors import ArgumentError, AxisError, DTypeError, IndexingError, ShapeError
from ..core import dtypes as dt
from .buffers import Array
from .constants import checked_scalar as _literal
from .host_values import concrete
from .conversion import _SCALARS, _operand, _operands, asarray, astype, constant_like, promote
from .elementwise import add, clip, less, multiply, not_equal, subtract, where

def normalize_axis(name, axis, ndim):
    if not -ndim <= axis < builtins.max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise AxisError(f"{name}: axis {axis} is out of range for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def _axes(name, axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    axes = tuple(normalize_axis(name, a, ndim) for a in axis)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{name}: repeated axis in {axis}")
    return axes


def reshape(x, shape):
    """`x` with a new shape and the same elements in row-major order (no copy is visible: arrays are immutable).

    x: an array. shape: an int or a sequence of ints; at most one -1, inferred from the size.
    """
    x = asarray(x)
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    size = x.size
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: at most one -1 in the new shape, got {shape}")
    if -1 in shape:
        rest = math.prod(d for d in shape if d != -1)
        if rest == 0 or size % rest:
            raise ShapeError(f"reshape: cannot reshape {x.shape} into {shape}")
        shape = tuple(size // rest if d == -1 else d for d in shape)
    if math.prod(shape) != size or builtins.any(d < 0 for d in shape):
        raise ShapeError(f"reshape: cannot reshape an array of shape {x.shape} ({size} elements) into {shape}")
    if shape == x.shape:
        return x
    return bind(P["reshape"], x, shape=shape)


def transpose(x, axes=None):
    """`x` with its axes permuted.

    x: an array. axes: a permutation of range(x.ndim) (negative axes allowed); None reverses the axes.
    """
    x = asarray(x)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(
        normalize_axis("transpose", a, x.ndim) for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: axes {axes} are not a permutation of the {x.ndim} axes")
    if perm == tuple(range(x.ndim)):
        return x
    return bind(P["transpose"], x, perm=perm)


def moveaxis(x, source, destination):
    x = asarray(x)
    s = normalize_axis("moveaxis", source, x.ndim)
    d = normalize_axis("moveaxis", destination, x.ndim)
    perm = [i for i in range(x.ndim) if i != s]
    perm.insert(d, s)
    return transpose(x, perm)


def swapaxes(x, a, b):
    """`x` with axes `a` and `b` exchanged.

    x: an array. a, b: the two axes (negative counts from the end).
    """
    x = asarray(x)
    perm = list(range(x.ndim))
    a, b = normalize_axis("swapaxes", a, x.ndim), normalize_axis("swapaxes", b, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def expand_dims(x, axis):
    """`x` with new axes of size 1 inserted.

    x: an array. axis: an int or a tuple of ints, positions in the result (negative counts from its end).
    """
    x = asarray(x)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = x.ndim + len(axes)
    axes = sorted(normalize_axis("expand_dims", a, ndim) for a in axes)
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, shape)


def squeeze(x, axis=None):
    """`x` without axes of size 1.

    x: an array. axis: an int or a tuple of ints to drop (each must have size 1, else ShapeError);
    None drops every axis of size 1.
    """
    x = asarray(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = _axes("squeeze", axis, x.ndim)
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise ShapeError(f"squeeze: axis {bad[0]} of shape {x.shape} has size {x.shape[bad[0]]}, not 1")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def broadcast_to(x, shape):
    """`x` broadcast to `shape` (NumPy's rules; the result is a new immutable array, not a view).

    x: an array or scalar. shape: the target shape, of at least x.ndim dimensions.
    """
    x = _operand(x)
    if not isinstance(x, (Array, Tracer)):
        x = asarray(x)
    shape = tuple(shape)
    if len(shape) < x.ndim or broadcast_shapes("broadcast_to", x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast shape {x.shape} to {shape}")
    if shape == x.shape:
        return x
    return bind(P["broadcast_to"], x, shape=shape)


def broadcast_arrays(*xs):
    """The arrays `xs` broadcast to their common shape, as a list.

    xs: any number of arrays or scalars.
    """
    xs = [asarray(x) for x in xs]
    shape = broadcast_shapes("broadcast_arrays", *(x.shape for x in xs))
    return [broadcast_to(x, shape) for x in xs]


def ravel(x):
    """`x` flattened to one dimension, in row-major order.

    x: an array.
    """
    return reshape(x, (-1,))


def concatenate(xs, axis=0):
    """The arrays `xs` joined along an existing axis.

    xs: a non-empty sequence of arrays of at least one dimension, promoted to one dtype, with equal shapes off
    `axis`. axis: the axis they are joined along (0 by default).
    """
    xs = list(xs)
    if not xs:
        raise ShapeError("concatenate: expected a non-empty sequence of arrays, got an empty one")
    xs = promote("concatenate", *xs)
    xs = [asarray(x) for x in xs]
    nd = xs[0].ndim
    if nd == 0:
        raise ShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    a = normalize_axis("concatenate", axis, nd)
    for x in xs[1:]:
        if x.ndim != nd or builtins.any(x.shape[i] != xs[0].shape[i] for i in range(nd) if i != a):
            raise ShapeError(f"concatenate: shapes {xs[0].shape} and {x.shape} differ off axis {axis}")
    if len(xs) == 1:
        return xs[0]
    return bind(P["concatenate"], *xs, axis=a)


def stack(xs, axis=0):
    """The arrays `xs` joined along a new axis.

    xs: a non-empty sequence of arrays of one shape, promoted to one dtype. axis: the new axis's position in
    the result (0 by default).
    """
    xs = [asarray(x) for x in _operands(list(xs))]
    if not xs:
        raise ShapeError("stack: needs at least one array")
    shapes = {x.shape for x in xs}
    if len(shapes) > 1:
        raise ShapeError(f"stack: every array must have the same shape, got {sorted(shapes)}")
    a = normalize_axis("stack", axis, xs[0].ndim + 1)
    return concatenate([expand_dims(x, a) for x in xs], a)


def split(x, indices_or_sections, axis=0):
    """`x` cut into pieces along `axis`, as a list.

    x: an array. indices_or_sections: an int n (n equal pieces; ShapeError if the axis does not divide) or a
    sequence of cut points (clipped to the axis). axis: the axis cut (0 by default).
    """
    x = asarray(x)
    a = normalize_axis("split", axis, x.ndim)
    n = x.shape[a]
    if isinstance(indices_or_sections, int):
        if indices_or_sections <= 0 or n % indices_or_sections:
            raise ShapeError(f"split: axis {axis} of size {n} does not split into {indices_or_sections} equal parts")
        step = n // indices_or_sections
        bounds = list(range(0, n + 1, step)) if step else [0] * (indices_or_sections + 1)
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i), 0), n) for i in indices_or_sections] + [n]
    return [slice_in_dim(x, lo, hi, axis=a) for lo, hi in zip(bounds[:-1], bounds[1:])]


def slice_in_dim(x, start, limit, stride=1, axis=0):
    starts = [0] * x.ndim
    limits = list(x.shape)
    strides = [1] * x.ndim
    starts[axis], limits[axis], strides[axis] = start, builtins.max(limit, start), stride
    return _slice(x, starts, limits, strides)


def _slice(x, starts, limits, strides):
    if tuple(starts) == (0,) * x.ndim and tuple(limits) == x.shape and builtins.all(s == 1 for s in strides):
        return x
    return bind(P["slice"], x, starts=tuple(starts), limits=tuple(limits), strides=tuple(strides))


def flip(x, axis=None):
    """`x` with the order of its elements reversed along `axis`.

    x: an array. axis: an int, a tuple of ints, or None (every axis).
    """
    x = asarray(x)
    axes = _axes("flip", axis, x.ndim)
    return bind(P["rev"], x, axes=axes) if axes else x


def pad(x, pad_width, mode="constant", constant_values=0, *, stat_length=None, end_values=0,
        reflect_type="even"):
    """`x` padded along each axis, in one of np.pad's modes.

    x: an array. pad_width: n, (before, after), or one (before, after) pair per axis, in non-negative ints.
    mode: "constant" (the default), "edge", "reflect", "symmetric", "wrap", "linear_ramp", "maximum",
    "minimum", "mean", "median" or "empty" (zeros here), as np.pad and jnp.pad (rune.nx.padding).
    constant_values: the value of the new elements in mode "constant", converted to x's dtype: a scalar, or
    NumPy's (before, after) / one (before, after) pair per axis of scalars.
    stat_length: how many elements at each edge the statistic modes use (all by default; NumPy's forms).
    end_values: where linear_ramp starts (0 by default). reflect_type: "even" (the default) or "odd" for the
    reflect and symmetric modes.
    """
    x = asarray(x)
    # NumPy's forms: n, (n,), (before, after), ((before, after),) or one pair per axis.
    try:
        widths = np.asarray(pad_width)
        if widths.dtype.kind not in "iu":
            raise ValueError
        config = np.broadcast_to(widths, (x.ndim, 2)).tolist()
    except ValueError:
        config = None
    if config is None or builtins.any(lo < 0 or hi < 0 for lo, hi in config):
        raise ShapeError(f"pad: pad_width must be n, (before, after) or one (before, after) pair per axis "
                         f"of shape {x.shape}, in non-negative ints; got {pad_width!r}")
    per_axis = not isinstance(constant_values, (Array, Tracer)) and np.ndim(constant_values) > 0
    if not isinstance(mode, str) or mode != "constant" or per_axis:
        return _LATER["pad_mode"](x, config, mode, stat_length, end_values, reflect_type, constant_values)
    if type(constant_values) in _SCALARS:
        constant_values = _literal("pad", constant_values, x.dtype)
    value = constant_like(constant_values, x, x.dtype)
    return bind(P["pad"], x, value, config=tuple((int(lo), int(hi)) for lo, hi in config))


# Functions of modules built on this one that pad hands over to (its modes other than constant):
# rune.nx.padding registers them when rune.nx is imported.
_LATER = {}


def take(x, indices, axis=None):
    """Elements of `x` at `indices` along `axis` (JAX's take: out-of-bounds indices are clamped).

    x: an array. indices: an integer array or list (negative counts from the end); the result's shape puts
    indices' shape in place of `axis`. axis: an int, or None to index the flattened array.
    """
    x = asarray(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    axis = normalize_axis("take", axis, x.ndim)
    idx = constant_like(indices, x)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"take: indices must be integers, got {idx.dtype.name}")
    return bind(P["gather"], x, idx, axis=axis)


def dynamic_slice(x, start_indices, slice_sizes):
    """The window of `x` of size `slice_sizes` starting at `start_indices` (lax.dynamic_slice).

    x: an array. start_indices: one start per axis, ints or integer scalars that may be traced; negative
    counts from the end, and starts are clamped so the window fits, as in JAX. slice_sizes: one static size per
    axis.
    """
    x = asarray(x)
    starts = [constant_like(s, x, dt.int32) for s in start_indices]
    sizes = tuple(int(s) for s in slice_sizes)
    if len(starts) != x.ndim or len(sizes) != x.ndim:
        raise ShapeError(f"dynamic_slice: expected {x.ndim} start indices and sizes for shape {x.shape}, "
                         f"got {len(starts)} and {len(sizes)}")
    if builtins.any(not 0 <= z <= d for z, d in zip(sizes, x.shape)):
        raise ShapeError(f"dynamic_slice: slice sizes {sizes} do not fit in shape {x.shape}")
    return bind(P["dynamic_slice"], x, *starts, sizes=sizes)


def dynamic_update_slice(x, update, start_indices):
    """`x` with the window at `start_indices` replaced by `update` (lax.dynamic_update_slice).

    x: an array. update: an array of x's rank, no larger than `x`, converted to x's dtype. start_indices: one
    start
    per axis, ints or traced integer scalars; clamped so the window fits, as in JAX. The result is a new array:
    `x` is never modified.
    """
    x = asarray(x)
    update = astype(asarray(update), x.dtype)
    starts = [constant_like(s, x, dt.int32) for s in start_indices]
    if len(starts) != x.ndim or update.ndim != x.ndim:
        raise ShapeError(f"dynamic_update_slice: expected rank-{x.ndim} update and {x.ndim} starts, "
                         f"got update shape {update.shape} and {len(starts)} starts")
    if builtins.any(u > d for u, d in zip(update.shape, x.shape)):
        raise ShapeError(f"dynamic_update_slice: update of shape {update.shape} does not fit in {x.shape}")
    return bind(P["dynamic_update_slice"], x, update, *starts)


def take_along_axis(x, indices, axis=-1):
    """Elements of `x` at `indices` along `axis`, the other axes broadcast (np.take_along_axis).

    x: an array. indices: an integer array of x's rank; negative indices count from the end, out-of-range ones
    are clamped (as every gather in rune, and JAX's). axis: the axis indexed (-1 by default).
    """
    x = asarray(x)
    idx = constant_like(indices, x)
    if idx.dtype.kind not in "iu":
        raise ArgumentError(f"take_along_axis: indices must be integers, got {idx.dtype.name}")
    if idx.ndim != x.ndim:
        raise ShapeError(f"take_along_axis: indices of shape {idx.shape} must have the rank of x "
                         f"{x.shape}")
    a = normalize_axis("take_along_axis", axis, x.ndim)
    n = x.shape[a]
    if n == 0 and idx.shape[a]:
        raise IndexingError(f"take_along_axis: cannot take from the empty axis {axis} of shape {x.shape}")
    shape = list(broadcast_shapes("take_along_axis", tuple(d for i, d in enumerate(x.shape) if i != a),
                                      tuple(d for i, d in enumerate(idx.shape) if i != a)))
    x = broadcast_to(x, tuple(shape[:a]) + (n,) + tuple(shape[a:]))
    out_shape = tuple(shape[:a]) + (idx.shape[a],) + tuple(shape[a:])
    idx = broadcast_to(idx, out_shape)
    if idx.dtype.kind == "i":
        idx = where(less(idx, 0), add(idx, idx.dtype.type(n)), idx)
    idx = astype(clip(idx, 0, builtins.max(n - 1, 0)), dt.int64 if x.size >= 2 ** 31 else dt.int32)
    # The flat position of (i0, ..., idx, ..., ik) in x: idx * stride(a) plus
    # the fixed offset of the other coordinates (a static table).
    strides = np.cumprod((x.shape[1:] + (1,))[::-1])[::-1]
    offsets = np.zeros(out_shape, np.int64)
    for i, d in enumerate(out_shape):
        if i != a:
            offsets = offsets + (np.arange(d) * strides[i]).reshape((d,) + (1,) * (len(out_shape) - i - 1))
    flat = add(multiply(idx, idx.dtype.type(strides[a])), constant_like(offsets.astype(idx.dtype), x))
    return take(reshape(x, (-1,)), flat, axis=0)


def _triangle(name, x, k, lower):
    x = asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"{name}: expected an array of at least 2 dimensions, got shape {x.shape}")
    n, m = x.shape[-2:]
    keep = np.tri(n, m, k, dtype=bool) if lower else ~np.tri(n, m, k - 1, dtype=bool)
    return where(constant_like(keep, x), x, x.dtype.type(0))


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
    x = asarray(x)
    if axis is None:
        return reshape(roll(reshape(x, (-1,)), shift, 0), x.shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    shifts = (shift,) * len(axes) if isinstance(shift, int) else tuple(shift)
    if len(shifts) != len(axes):
        raise ShapeError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    for s, a in zip(shifts, axes):
        a = normalize_axis("roll", a, x.ndim)
        n = x.shape[a]
        if n == 0 or int(s) % n == 0:
            continue
        s = int(s) % n
        x = concatenate([slice_in_dim(x, n - s, n, axis=a), slice_in_dim(x, 0, n - s, axis=a)], a)
    return x


def repeat(x, repeats, axis=None):
    """Each element of `x` repeated `repeats` times along `axis`.

    x: an array. repeats: an int, or one count per element along `axis`; counts set the result's shape, so
    they must be concrete (not traced). axis: the axis; None repeats over the flattened array.
    """
    x = asarray(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    a = normalize_axis("repeat", axis, x.ndim)
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
    return take(x, constant_like(index, x), axis=a)


def tile(x, repetitions):
    """`x` repeated `repetitions` times along each axis (np.tile).

    x: an array. repetitions: an int or a sequence of non-negative ints; a leading 1 pads the shorter of
    `repetitions` and x's shape.
    """
    x = asarray(x)
    reps = (repetitions,) if isinstance(repetitions, int) else tuple(int(r) for r in repetitions)
    if builtins.any(r < 0 for r in reps):
        raise ArgumentError(f"tile: repetitions must be non-negative, got {reps}")
    nd = builtins.max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    x = reshape(x, (1,) * (nd - x.ndim) + x.shape)
    # (r0, d0, r1, d1, ...) broadcast, then merged pairwise.
    expanded = reshape(x, tuple(v for d in x.shape for v in (1, d)))
    expanded = broadcast_to(expanded, tuple(v for r, d in zip(reps, x.shape) for v in (r, d)))
    return reshape(expanded, tuple(r * d for r, d in zip(reps, x.shape)))


def unstack(x, axis=0):
    """The slices of `x` along `axis`, as a tuple.

    x: an array. axis: the axis split into slices (0 by default).
    """
    x = asarray(x)
    a = normalize_axis("unstack", axis, x.ndim)
    return tuple(squeeze(slice_in_dim(x, i, i + 1, axis=a), a) for i in range(x.shape[a]))


def meshgrid(*xs, indexing="xy"):
    """Coordinate grids from 1-d arrays: one array per input, each of the shape of all of them together.

    xs: 1-d arrays (promoted to one dtype). indexing: "xy" (the first two axes exchanged, as NumPy's default)
    or "ij" (matrix indexing).
    """
    if indexing not in ("xy", "ij"):
        raise ArgumentError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [asarray(v) for v in _operands(xs)]
    for v in xs:
        if v.ndim != 1:
            raise ShapeError(f"meshgrid: expected 1-d arrays, got shape {v.shape}")
    if len({v.dtype for v in xs}) > 1:
        xs = promote("meshgrid", *xs)
    shape = [v.shape[0] for v in xs]
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, v in enumerate(xs):
        at = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(xs) > 1 else i
        view = [1] * len(xs)
        view[at] = v.shape[0]
        out.append(broadcast_to(reshape(v, view), tuple(shape)))
    return out


def diff(x, axis=-1, n=1, prepend=None, append=None):
    """The `n`-th forward difference along `axis` (x[i+1] - x[i]; for bools, x[i+1] != x[i]).

    x: an array. axis: the axis (-1 by default). n: how many times the difference is taken (1 by default).
    prepend, append: values (scalars or arrays) joined to `x` along `axis` before differencing.
    """
    x = asarray(x)
    a = normalize_axis("diff", axis, x.ndim)
    if n < 0:
        raise ArgumentError(f"diff: n must be non-negative, got {n}")
    parts = [v for v in (prepend, x, append) if v is not None]
    if len(parts) > 1:
        parts = [constant_like(v, x) for v in parts]
        parts = [v if v.ndim else broadcast_to(v, x.shape[:a] + (1,) + x.shape[a + 1:]) for v in parts]
        x = concatenate(parts, a)
    for _ in range(n):
        m = x.shape[a]
        hi, lo = slice_in_dim(x, 1, m, axis=a), slice_in_dim(x, 0, builtins.max(m - 1, 0), axis=a)
        x = not_equal(hi, lo) if x.dtype == dt.bool_ else subtract(hi, lo)
    return x


def matrix_transpose(x):
    """`x` with its last two axes exchanged.

    x: an array of at least 2 dimensions.
    """
    x = asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"matrix_transpose: expected an array of at least 2 dimensions, got shape {x.shape}")
    return swapaxes(x, -1, -2)
