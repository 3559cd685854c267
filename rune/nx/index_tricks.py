"""Index helpers and index-based selection of the NumPy surface (diag, tril_indices, put, select, insert, ...).

Every function is a composite of existing primitives (gather, scatter, select,
iota, reductions), so jit, vmap, the derivatives and every backend come with no
new rules. Static facts (the positions a diagonal, a triangle, a deletion or an
insertion touches) are computed with NumPy from the shapes and enter as
constants placed with the operand.

Data-dependent shapes (extract, flatnonzero, argwhere, compress, delete and
insert with array positions) are exact eagerly, take a static `size=` (and
`fill_value=`) to run under jit as in JAX, and otherwise raise
ConcretizationError naming the argument.
"""
import builtins
import operator

import numpy as np

from ..core import dtypes as dt
from ..core.trace import Tracer
from ..errors import ArgumentError, ConcretizationError, DTypeError, IndexingError, ShapeError
from . import ops
from .buffers import Array
from .constants import iota
from .host_values import concrete

__all__ = ["argwhere", "choose", "compress", "delete", "diag", "diag_indices", "diag_indices_from", "diagflat",
           "diagonal", "extract", "fill_diagonal", "flatnonzero", "insert", "ix_", "mask_indices", "put",
           "put_along_axis", "ravel_multi_index", "select", "trace", "tri", "tril_indices", "tril_indices_from",
           "triu_indices", "triu_indices_from", "unravel_index", "vander"]


# ---------------------------------------------------------------- helpers

def _index_dtype(size):
    """rune's index dtype: the default int, int64 only where positions outgrow it."""
    return dt.int64 if size >= 2 ** 31 else dt.default_int


def _const(values, like):
    """Host positions as an index array placed with `like`."""
    values = np.asarray(values)
    return ops.constant_like(values.astype(_index_dtype(builtins.max(values.size, 1))), like)


def _static_int(name, what, value):
    """A Python int argument (a shape, a count, a diagonal), or ArgumentError naming it."""
    if isinstance(value, Tracer) and value.concrete() is None:
        raise ConcretizationError(f"{name}: {what} must be a static int (it sets the result's shape), "
                                  f"got a traced {value.aval.describe()}")
    try:
        return operator.index(value if not isinstance(value, (Array, Tracer, np.ndarray))
                              else np.asarray(concrete(name, value, what)).item())
    except (TypeError, ValueError):  # (a float, or an array of several values)
        raise ArgumentError(f"{name}: {what} must be an int, got {value!r}") from None


def _is_traced(x):
    return isinstance(x, Tracer) and x.concrete() is None


def _host_positions(name, what, value):
    """A concrete integer (or bool) index argument as a NumPy array, or ConcretizationError naming it."""
    if isinstance(value, slice):
        return value
    host = concrete(name, value, what) if isinstance(value, (Array, Tracer)) else np.asarray(value)
    if host.dtype.kind not in "iub" and host.size:
        raise DTypeError(f"{name}: {what} must be integers, got {host.dtype.name}")
    return host


def _axis_or_flat(name, x, axis):
    """x and the axis worked on: None flattens x first (NumPy's axis=None)."""
    x = ops.asarray(x)
    if axis is None:
        return ops.reshape(x, (-1,)), 0
    return x, ops.normalize_axis(name, axis, x.ndim)


def _first_true(mask, size):
    """The positions of the first `size` true elements of the 1-d bool `mask` and
    where a position holds one: a fixed-shape computation (a stable sort of "is
    false"), so it runs under jit and vmap."""
    from .sorting import argsort
    n = mask.shape[0]
    order = argsort(ops.astype(ops.logical_not(mask), dt.int8), stable=True) if n else \
        ops.constant_like(np.zeros(0, np.int32), mask)
    if size > n:
        order = ops.pad(order, (0, size - n))
    order = ops.slice_in_dim(order, 0, size)
    inside = ops.constant_like(np.arange(size) < n, mask)
    valid = ops.logical_and(inside, ops.take(mask, order)) if n else inside
    return order, valid


def _static_size(name, size):
    if size is None:
        return None
    size = _static_int(name, "size", size)
    if size < 0:
        raise ArgumentError(f"{name}: size must be non-negative, got {size}")
    return size


def _check_mode(name, mode, allowed):
    if mode not in allowed:
        raise ArgumentError(f"{name}: mode must be one of {allowed}, got {mode!r}")


def _refuse_inplace(name, inplace):
    if inplace:
        raise ArgumentError(f"{name}: rune arrays are immutable, so {name} cannot modify its argument in "
                            f"place; pass inplace=False and use the returned array (as in JAX)")


# ---------------------------------------------------------------- diagonals

def _diagonal_positions(n, m, offset):
    """The (row, column) positions of diagonal `offset` of an n x m matrix."""
    rows = np.arange(builtins.max(0, -offset), builtins.max(0, builtins.min(n, m - offset)))
    return rows, rows + offset


def diagonal(x, offset=0, axis1=0, axis2=1):
    """The diagonal `offset` of the matrices in axes `axis1` and `axis2`, as a last axis (np.diagonal).

    x: an array of at least 2 dimensions. offset: the diagonal (0 the main one, positive above, negative
    below). axis1, axis2: the two distinct axes of the matrices (0 and 1 by default); the other axes come first.
    """
    x = ops.asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"diagonal: x must have at least 2 dimensions, got shape {x.shape}")
    a1, a2 = (ops.normalize_axis("diagonal", a, x.ndim) for a in (axis1, axis2))
    if a1 == a2:
        raise ArgumentError(f"diagonal: axis1 and axis2 must be different axes, got {axis1} and {axis2}")
    offset = _static_int("diagonal", "offset", offset)
    x = ops.transpose(x, [i for i in range(x.ndim) if i not in (a1, a2)] + [a1, a2])
    n, m = x.shape[-2:]
    rows, cols = _diagonal_positions(n, m, offset)
    flat = ops.reshape(x, x.shape[:-2] + (n * m,))
    return ops.take(flat, _const(rows * m + cols, x), axis=-1)


def trace(x, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum along diagonal `offset` of the matrices in axes `axis1`, `axis2` (np.trace).

    x: an array of at least 2 dimensions. offset, axis1, axis2: as in `diagonal`. dtype: of the sum and the
    result (default: sum's, so bool and narrow integers sum in int32, other dtypes keep theirs). out: None only.
    """
    ops.check_out("trace", out)
    return ops.sum(diagonal(x, offset, axis1, axis2), -1, dtype=dtype)


def diag(x, k=0):
    """The k-th diagonal of a 2-d `x`, or a 2-d array with the 1-d `x` on its k-th diagonal (np.diag).

    x: a 1-d or 2-d array. k: the diagonal (0 the main one, positive above, negative below).
    """
    x = ops.asarray(x)
    k = _static_int("diag", "k", k)
    if x.ndim == 2:
        return diagonal(x, k)
    if x.ndim != 1:
        raise ShapeError(f"diag: x must be 1-d or 2-d, got shape {x.shape}")
    n = x.shape[0] + builtins.abs(k)
    if x.shape[0] == 0:
        return ops.broadcast_to(ops.constant_like(np.zeros((), x.dtype), x), (n, n))
    # Element (i, j) lies on diagonal k when j - i == k, and holds x[min(i, j)]
    # there: a gather and a select over iotas, which fuse (no O(n^2) constant).
    i, j = iota((n, n), dt.int32, 0, x.device), iota((n, n), dt.int32, 1, x.device)
    picked = ops.take(x, ops.minimum(ops.minimum(i, j), x.shape[0] - 1))
    return ops.where(ops.equal(ops.subtract(j, i), k), picked, x.dtype.type(0))


def diagflat(x, k=0):
    """A 2-d array with the flattened `x` on its k-th diagonal (np.diagflat).

    x: an array (any shape; flattened). k: the diagonal (0 the main one, positive above, negative below).
    """
    return diag(ops.reshape(ops.asarray(x), (-1,)), k)


def diag_indices(n, ndim=2):
    """The indices of the main diagonal of an n x ... x n array: `ndim` copies of arange(n) (np.diag_indices).

    n: the length of each axis. ndim: the number of axes (2 by default). The indices are int32.
    """
    n = _static_int("diag_indices", "n", n)
    ndim = _static_int("diag_indices", "ndim", ndim)
    if n < 0 or ndim < 0:
        raise ArgumentError(f"diag_indices: n and ndim must be non-negative, got n={n}, ndim={ndim}")
    idx = iota((n,), dt.default_int, 0, None)
    return (idx,) * ndim


def diag_indices_from(x):
    """diag_indices for `x`: x must have at least 2 dimensions, all of one length (np.diag_indices_from).

    x: an array (only its shape is read).
    """
    shape = ops.asarray(x).shape if not hasattr(x, "shape") else tuple(x.shape)
    if len(shape) < 2:
        raise ShapeError(f"diag_indices_from: x must have at least 2 dimensions, got shape {shape}")
    if len(set(shape)) != 1:
        raise ShapeError(f"diag_indices_from: all the axes of x must have the same length, got shape {shape}")
    return diag_indices(shape[0], len(shape))


def fill_diagonal(x, val, wrap=False, *, inplace=True):
    """`x` with its main diagonal set to `val` (np.fill_diagonal, returning a new array as jnp's).

    x: an array of at least 2 dimensions (all of one length beyond 2 dimensions). val: a scalar or an array,
    flattened and repeated as needed along the diagonal. wrap: for a tall 2-d matrix, start the diagonal again
    every n + 1 rows (as NumPy's). inplace: must be False: rune arrays are immutable (as in JAX).
    """
    _refuse_inplace("fill_diagonal", inplace)
    x = ops.asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"fill_diagonal: x must have at least 2 dimensions, got shape {x.shape}")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise ShapeError(f"fill_diagonal: beyond 2 dimensions all the axes of x must have the same length, "
                         f"got shape {x.shape}")
    # NumPy's positions in the flattened array: every (sum of the strides)-th element, up to `end`.
    step = x.shape[1] + 1 if x.ndim == 2 else 1 + int(np.cumprod(x.shape[:-1]).sum())
    end = builtins.min(x.shape[1] * x.shape[1] if x.ndim == 2 and not wrap else x.size, x.size)
    val = ops.reshape(ops.constant_like(val, x, x.dtype), (-1,))
    if val.size == 0 or end == 0:
        return x
    flat = ops.reshape(x, (-1,))
    if _is_traced(x):
        # Staged: position p is on the diagonal when p % step == 0 and p < end, and takes
        # val[(p // step) % val.size]; a gather and a select over an iota fuse with the
        # rest (2000 x 2000 float64 under jit: 6.6 ms, against 14.6 ms for a scatter).
        p = iota((x.size,), dt.int64 if x.size >= 2 ** 31 else dt.int32, 0, x.device)
        on = ops.logical_and(ops.equal(ops.remainder(p, step), 0), ops.less(p, end))
        out = ops.where(on, ops.take(val, ops.remainder(ops.floor_divide(p, step), val.size)), flat)
    else:
        # Eager: one scatter of the O(diagonal) static positions, a copy and a few writes
        # (2000 x 2000 float64: 11 ms, NumPy's 14; the select takes 98 ms in separate passes).
        positions = np.arange(0, end, step)
        out = _scatter_set(flat, _const(positions, x), ops.take(val, _const(np.arange(positions.size) % val.size, x)))
    return ops.reshape(out, x.shape)


# ---------------------------------------------------------------- triangles

def tri(N, M=None, k=0, dtype=None):
    """An N x M array with ones at and below diagonal `k`, zeros above (np.tri).

    N: rows. M: columns (default N). k: the diagonal (0 the main one, positive above, negative below).
    dtype: float32 by default (NumPy: float64), as rune's eye.
    """
    n = _static_int("tri", "N", N)
    m = n if M is None else _static_int("tri", "M", M)
    k = _static_int("tri", "k", k)
    if n < 0 or m < 0:
        raise ArgumentError(f"tri: N and M must be non-negative, got N={n}, M={m}")
    k = builtins.max(-n, builtins.min(m, k))  # (no int32 overflow for a far diagonal)
    rows = ops.add(iota((n, m), dt.int32, 0, None), k)
    keep = ops.greater_equal(rows, iota((n, m), dt.int32, 1, None))
    return ops.astype(keep, dt.float32 if dtype is None else dt.dtype(dtype))


def _triangle_indices(name, n, k, m, lower):
    n = _static_int(name, "n", n)
    m = n if m is None else _static_int(name, "m", m)
    k = _static_int(name, "k", k)
    if n < 0 or m < 0:
        raise ArgumentError(f"{name}: n and m must be non-negative, got n={n}, m={m}")
    rows, cols = (np.tril_indices if lower else np.triu_indices)(n, k, m)
    dtype = _index_dtype(builtins.max(n, m))
    return ops.asarray(rows.astype(dtype)), ops.asarray(cols.astype(dtype))


def tril_indices(n, k=0, m=None):
    """The (rows, columns) indices of the lower triangle of an n x m matrix, from diagonal `k` down (np.tril_indices).

    n: rows. k: the diagonal (0 the main one, positive above, negative below). m: columns (default n).
    The indices are int32.
    """
    return _triangle_indices("tril_indices", n, k, m, True)


def triu_indices(n, k=0, m=None):
    """The (rows, columns) indices of the upper triangle of an n x m matrix, from diagonal `k` up (np.triu_indices).

    n: rows. k: the diagonal (0 the main one, positive above, negative below). m: columns (default n).
    The indices are int32.
    """
    return _triangle_indices("triu_indices", n, k, m, False)


def _from_matrix(name, x, k, lower):
    shape = tuple(x.shape) if hasattr(x, "shape") else ops.asarray(x).shape
    if len(shape) != 2:
        raise ShapeError(f"{name}: x must be 2-d, got shape {shape}")
    return _triangle_indices(name, shape[0], k, shape[1], lower)


def tril_indices_from(x, k=0):
    """tril_indices for the 2-d `x`'s shape (np.tril_indices_from).

    x: a 2-d array (only its shape is read). k: the diagonal (0 the main one, positive above, negative below).
    """
    return _from_matrix("tril_indices_from", x, k, True)


def triu_indices_from(x, k=0):
    """triu_indices for the 2-d `x`'s shape (np.triu_indices_from).

    x: a 2-d array (only its shape is read). k: the diagonal (0 the main one, positive above, negative below).
    """
    return _from_matrix("triu_indices_from", x, k, False)


def mask_indices(n, mask_func, k=0, *, size=None):
    """The indices (rows, columns) where `mask_func(ones((n, n)), k)` is nonzero (np.mask_indices).

    n: the matrix size. mask_func: a function such as nx.triu or nx.tril, called with an n x n int32 array of
    ones and `k`. k: passed to mask_func. size: a fixed number of indices, padded with 0 (as nonzero's size=):
    needed under jit, where the mask is traced (as in JAX).
    """
    n = _static_int("mask_indices", "n", n)
    if not callable(mask_func):
        raise ArgumentError(f"mask_indices: mask_func must be a function such as nx.triu, got {mask_func!r}")
    from .dynamic import nonzero
    mask = ops.asarray(mask_func(ops.asarray(np.ones((n, n), np.int32)), k))
    if size is None:  # (under jit mask_func's result is staged, so its values are unknown, as in JAX)
        concrete("mask_indices", mask, "the mask mask_func returns")
    return nonzero(ops.not_equal(mask, mask.dtype.type(0)), size=size)


# ---------------------------------------------------------------- selection

def select(condlist, choicelist, default=0):
    """Elementwise, the element of the first choice whose condition holds, else `default` (np.select).

    condlist: a sequence of bool arrays. choicelist: as many arrays (promoted to one dtype), broadcast with
    the conditions. default: where no condition holds (a scalar or an array).
    """
    if not isinstance(condlist, (list, tuple)) or not isinstance(choicelist, (list, tuple)):
        raise ArgumentError(f"select: condlist and choicelist must be sequences of arrays, got "
                            f"{type(condlist).__name__} and {type(choicelist).__name__}")
    if len(condlist) != len(choicelist):
        raise ArgumentError(f"select: condlist and choicelist must have the same length, got {len(condlist)} "
                            f"and {len(choicelist)}")
    if not condlist:
        raise ArgumentError("select: condlist and choicelist must not be empty")
    conds = [ops.asarray(c) for c in ops._operands(condlist)]
    for i, c in enumerate(conds):
        if c.dtype != dt.bool_:
            raise DTypeError(f"select: condlist[{i}] must be a bool array, got {c.dtype.name}")
    # The choices and the default share one dtype (a Python scalar default is weak, as in JAX).
    *choices, out = ops.promote("select", *choicelist, default)
    choices = [ops.asarray(c) for c in choices]
    if type(out) not in (bool, int, float, complex) and not isinstance(out, np.generic):
        out = ops.asarray(out)
    # The first condition that holds wins: fold from the last choice to the first.
    for c, v in zip(reversed(conds), reversed(choices)):
        out = ops.where(c, v, out)
    return out


def choose(x, choices, out=None, mode="raise"):
    """Elementwise, the element of choices[x] (np.choose; x and the choices broadcast together).

    x: an integer array of choice numbers. choices: a sequence of arrays (promoted to one dtype), or an array
    whose first axis numbers them. out: None
    only. mode: "raise" (every number must be in range; checked where `x` is concrete, refused when traced),
    "wrap" (taken modulo the count) or "clip" (clamped into range).
    """
    ops.check_out("choose", out)
    _check_mode("choose", mode, ("raise", "wrap", "clip"))
    if isinstance(choices, (Array, Tracer, np.ndarray)):  # an array: its first axis numbers the choices
        from .shapes import unstack
        choices = unstack(ops.asarray(choices)) if ops.asarray(choices).ndim else ()
    if not isinstance(choices, (list, tuple)) or not choices:
        raise ArgumentError(f"choose: choices must be a non-empty sequence of arrays (or an array of at least one "
                            f"dimension), got {type(choices).__name__}")
    choices = [ops.asarray(c) for c in (ops.promote("choose", *choices) if len(choices) > 1 else choices)]
    a = ops.constant_like(x, choices[0])
    if a.dtype.kind not in "iu":
        raise DTypeError(f"choose: x must be integers, got {a.dtype.name}")
    n = len(choices)
    if mode == "raise":
        if _is_traced(a):
            raise ConcretizationError("choose: with mode='raise' the choice numbers x must be concrete to be "
                                      "checked, but x is traced; pass mode='clip' or mode='wrap'")
        host = concrete("choose", a, "x")
        if host.size and (host.min() < 0 or host.max() >= n):
            raise IndexingError(f"choose: x holds choice numbers from {host.min()} to {host.max()}, outside "
                                f"[0, {n}) for {n} choices")
    elif mode == "wrap":
        a = ops.remainder(a, a.dtype.type(n))
    # (clip, and raise after the check: a number past the last picks the last choice)
    out = choices[-1]
    for i in range(n - 2, -1, -1):
        out = ops.where(ops.less_equal(a, a.dtype.type(i)) if i == 0 else ops.equal(a, a.dtype.type(i)),
                        choices[i], out)
    return ops.broadcast_to(out, ops.broadcast_shapes("choose", a.shape, *(c.shape for c in choices)))


def _sized_select(name, x, mask, axis, size, fill_value):
    """The slices of `x` along `axis` where the 1-d `mask` holds, padded to `size` with `fill_value`."""
    at, valid = _first_true(mask, size)
    if x.shape[axis] == 0:
        picked = ops.broadcast_to(ops.constant_like(np.zeros((), x.dtype), x),
                                  x.shape[:axis] + (size,) + x.shape[axis + 1:])
    else:
        picked = ops.take(x, at, axis=axis)
    fill = ops.constant_like(0 if fill_value is None else fill_value, x, x.dtype)
    shape = (1,) * axis + (size,) + (1,) * (x.ndim - axis - 1)
    return ops.where(ops.reshape(valid, shape), picked, fill)


def compress(cond, x, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of `x` along `axis` where the 1-d `cond` holds (np.compress; NumPy names them condition, a).

    cond: a 1-d array (nonzero entries select); it may be shorter than the axis (the rest is not
    selected), not longer. x: an array. axis: the axis; None works on the flattened array. size: a fixed
    number of slices, padded with `fill_value` (0 by default): needed under jit, where `cond` is traced;
    without it `cond` must be concrete. out: None only.
    """
    ops.check_out("compress", out)
    return _compress("compress", cond, x, axis, size, fill_value)


def _compress(name, cond, x, axis, size, fill_value):
    x, ax = _axis_or_flat(name, x, axis)
    cond = cond if isinstance(cond, (Array, Tracer)) else np.asarray(cond)
    if cond.ndim != 1:
        raise ShapeError(f"{name}: cond must be 1-d, got shape {cond.shape}")
    n = x.shape[ax]
    if cond.shape[0] > n:
        raise ShapeError(f"{name}: cond has {cond.shape[0]} entries, more than the {n} of axis {axis} "
                         f"of x's shape {x.shape}")
    size = _static_size(name, size)
    if size is None:
        host = concrete(name, cond, "cond")
        return ops.take(x, _const(np.flatnonzero(host), x), axis=ax)
    cond = ops.constant_like(cond, x)
    mask = ops.not_equal(cond, cond.dtype.type(0)) if cond.dtype != dt.bool_ else cond
    if cond.shape[0] < n:
        mask = ops.pad(mask, (0, n - cond.shape[0]))
    return _sized_select(name, x, mask, ax, size, fill_value)


def extract(cond, x, *, size=None, fill_value=0):
    """The elements of `x` where `cond` is nonzero, flattened (np.extract; NumPy names them condition, arr).

    cond: an array with no more elements than x (both flattened). x: an array. size: a fixed number of
    results, padded with `fill_value` (0 by default): needed under jit, where `cond` is traced.
    """
    # (a NumPy condition stays on the host: reshaping it under jit would stage it)
    flat = ops.reshape(cond, (-1,)) if isinstance(cond, (Array, Tracer)) else np.reshape(np.asarray(cond), -1)
    return _compress("extract", flat, x, None, size, fill_value)


def _concrete_unless_sized(name, x, size):
    """x as an array; without size= its values set the result's shape, so it must be concrete."""
    x = ops.asarray(x)
    if size is None:
        concrete(name, x, "x")
    return x


def flatnonzero(x, *, size=None, fill_value=None):
    """The positions of the nonzero elements of the flattened `x`, int32 (np.flatnonzero).

    x: an array. size, fill_value: a fixed number of results padded with fill_value (as nonzero's): needed
    under jit, where `x` is traced.
    """
    from .dynamic import nonzero
    x = _concrete_unless_sized("flatnonzero", x, size)
    return nonzero(ops.reshape(x, (-1,)), size=size, fill_value=fill_value)[0]


def argwhere(x, *, size=None, fill_value=None):
    """The indices of the nonzero elements of `x`, one row per element, int32 (np.argwhere).

    x: an array; a 0-d one gives shape (0 or 1, 0). size, fill_value: a fixed number of rows padded with
    fill_value (as nonzero's): needed under jit, where `x` is traced.
    """
    from .dynamic import nonzero
    x = _concrete_unless_sized("argwhere", x, size)
    coords = nonzero(ops.reshape(x, (1,)) if x.ndim == 0 else x, size=size, fill_value=fill_value)
    rows = ops.stack(coords, axis=-1)
    return ops.slice_in_dim(rows, 0, 0, axis=1) if x.ndim == 0 else rows


def ix_(*args):
    """Open-mesh index arrays from 1-d sequences: the k-th of n has shape 1 x .. len x .. 1 (np.ix_).

    args: 1-d integer arrays (they keep their dtype) or bool masks (turned into their positions: they must be
    concrete).
    """
    out = []
    for k, a in enumerate(args):
        a = ops.asarray(a)
        if a.ndim != 1:
            raise ShapeError(f"ix_: argument {k} must be 1-d, got shape {a.shape}")
        if a.dtype == dt.bool_:
            a = _const(np.flatnonzero(concrete("ix_", a, f"the mask argument {k}")), a)
        elif a.dtype.kind not in "iu" and a.size:
            raise DTypeError(f"ix_: argument {k} must be integers or bools, got {a.dtype.name}")
        elif a.size == 0:
            a = ops.astype(a, dt.default_int)
        out.append(ops.reshape(a, (1,) * k + (a.shape[0],) + (1,) * (len(args) - k - 1)))
    return tuple(out)


# ---------------------------------------------------------------- updates

def _scatter_set(flat, positions, values):
    """The 1-d `flat` with `positions` set to `values` (a position == flat.size is dropped)."""
    return ops.bind(ops.P["scatter"], flat, positions, values, axis=0, mode="set")


def put(x, ind, v, mode=None, *, inplace=True):
    """`x` with the elements at the flat positions `ind` set to `v` (np.put, returning a new array as jnp's).

    x: an array. ind: integer positions in the flattened `x` (negative ones count from the end). v: the values,
    flattened and repeated as needed, cast to x's dtype. mode: None or "fill" drops positions out of range (as
    JAX), "clip" clamps them, "wrap" takes them modulo the size; "raise" checks them (they must be concrete).
    inplace: must be False: rune arrays are immutable (as in JAX).
    """
    _refuse_inplace("put", inplace)
    _check_mode("put", mode, (None, "fill", "clip", "wrap", "raise"))
    x = ops.asarray(x)
    ind = ops.reshape(ops.constant_like(ind, x), (-1,))
    if ind.dtype.kind not in "iu":
        raise DTypeError(f"put: ind must be integers, got {ind.dtype.name}")
    v = ops.reshape(ops.constant_like(v, x, x.dtype), (-1,))
    if ind.size == 0 or v.size == 0:
        return x
    if v.size != ind.size:  # NumPy repeats v over the positions
        v = ops.take(v, _const(np.arange(ind.size) % v.size, x))
    n = x.size
    ind = _widened(ind, n)
    if mode == "raise":
        host = concrete("put", ind, "ind (mode='raise' checks it; pass mode='clip' or 'wrap' under jit)")
        if host.min() < -n or host.max() >= n:
            raise IndexingError(f"put: ind holds positions from {host.min()} to {host.max()}, outside "
                                f"[-{n}, {n}) for x of shape {x.shape}")
    if mode == "clip":
        ind = ops.clip(ind, 0, builtins.max(n - 1, 0))
    elif mode == "wrap":
        ind = ops.remainder(ind, ind.dtype.type(n))
    else:
        ind = ops.where(ops.less(ind, 0), ops.add(ind, ind.dtype.type(n)), ind)
        ind = ops.where(ops.logical_and(ops.greater_equal(ind, 0), ops.less(ind, n)), ind, ind.dtype.type(n))
    ind = ops.astype(ind, _index_dtype(n + 1))
    return ops.reshape(_scatter_set(ops.reshape(x, (-1,)), ind, v), x.shape)


def _widened(ind, n):
    """Integer positions in a signed dtype that holds them and `n` (int32, or int64 for 64-bit and uint32
    positions or sizes past int32), so range checks see them before any narrowing."""
    wide = ind.dtype.itemsize == 8 or ind.dtype == dt.uint32 or n >= 2 ** 31 - 1
    return ops.astype(ind, dt.int64 if wide else dt.int32)


def put_along_axis(x, indices, values, axis, inplace=True, mode=None):
    """`x` with the elements at `indices` along `axis` set to `values`, as a new array (jnp.put_along_axis).

    x: an array. indices: an integer array of x's rank, broadcast with x in the other axes (negative ones
    count from the end; out-of-range ones are dropped, or clamped with mode="clip"). values: broadcast to
    indices' shape, cast to x's dtype. axis: the axis (None: the flattened x). inplace: must be False:
    rune arrays are immutable (as in JAX). mode: None or "fill" (drop) or "clip".
    """
    _refuse_inplace("put_along_axis", inplace)
    _check_mode("put_along_axis", mode, (None, "fill", "clip"))
    x0 = ops.asarray(x)
    x, ax = _axis_or_flat("put_along_axis", x0, axis)
    idx = ops.constant_like(indices, x)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"put_along_axis: indices must be integers, got {idx.dtype.name}")
    if idx.ndim != x.ndim:
        raise ShapeError(f"put_along_axis: indices of shape {idx.shape} must have the rank of x "
                         f"{x.shape}" + (" (flattened: axis=None)" if axis is None else ""))
    from .shapes import take_along_axis
    n = x.shape[ax]
    idx = _widened(idx, x.size)
    idx = ops.where(ops.less(idx, 0), ops.add(idx, idx.dtype.type(n)), idx)
    inside = ops.logical_and(ops.greater_equal(idx, 0), ops.less(idx, n))
    if mode == "clip":
        idx, inside = ops.clip(idx, 0, builtins.max(n - 1, 0)), None
    idx = ops.astype(idx, _index_dtype(x.size + 1))  # (out-of-range ones are dropped through `inside`)
    # The flat position of each target: take_along_axis of the positions of x.
    where_ = ops.reshape(iota((x.size,), idx.dtype, 0, x.device), x.shape)
    positions = take_along_axis(where_, idx, ax)
    if inside is not None:
        positions = ops.where(ops.broadcast_to(inside, positions.shape), positions, idx.dtype.type(x.size))
    vals = ops.constant_like(values, x, x.dtype)
    try:
        vals = ops.broadcast_to(vals, positions.shape)
    except ShapeError as e:
        raise ShapeError(f"put_along_axis: values of shape {vals.shape} do not broadcast to the shape "
                         f"{positions.shape} of the indices") from e
    flat = _scatter_set(ops.reshape(x, (-1,)), ops.reshape(positions, (-1,)), ops.reshape(vals, (-1,)))
    return ops.reshape(flat, x0.shape)


# ---------------------------------------------------------------- flat and multi-indices

def _dims(name, dims):
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    dims = tuple(_static_int(name, "dims", d) for d in dims)
    if builtins.any(d < 0 for d in dims):
        raise ArgumentError(f"{name}: the dimensions must be non-negative, got {dims}")
    return dims


def _order(name, order):
    if order not in ("C", "F"):
        raise ArgumentError(f"{name}: order must be 'C' or 'F', got {order!r}")
    return order


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """The flat positions of the coordinates `multi_index` in an array of shape `dims` (np.ravel_multi_index).

    multi_index: one integer array per dimension (broadcast together). dims: the shape. mode: "raise" (the
    coordinates must be in range: checked where they are concrete, refused when traced, as in JAX), "wrap"
    (modulo each dimension) or "clip" (clamped into range); a tuple gives one mode per dimension. order: "C"
    (row-major) or "F" (column-major). The result is int32 (int64 for sizes past 2**31).
    """
    name = "ravel_multi_index"
    dims = _dims(name, dims)
    _order(name, order)
    if not isinstance(multi_index, (list, tuple)) or len(multi_index) != len(dims):
        raise ArgumentError(f"{name}: multi_index must be a sequence of {len(dims)} integer arrays (one per "
                            f"dimension of {dims}), got {type(multi_index).__name__}"
                            + (f" of {len(multi_index)}" if isinstance(multi_index, (list, tuple)) else ""))
    modes = tuple(mode) if isinstance(mode, (list, tuple)) else (mode,) * len(dims)
    if len(modes) != len(dims):
        raise ArgumentError(f"{name}: {len(modes)} modes for {len(dims)} dimensions")
    for m in modes:
        _check_mode(name, m, ("raise", "wrap", "clip"))
    coords = [ops.asarray(c) for c in ops._operands(multi_index)]
    for i, c in enumerate(coords):
        if c.dtype.kind not in "iu":
            raise DTypeError(f"{name}: multi_index[{i}] must be integers, got {c.dtype.name}")
    coords = ops.broadcast_arrays(*coords) if len(coords) > 1 else coords
    index_dtype = _index_dtype(int(np.prod(dims, dtype=np.int64)))
    out = None
    axes = range(len(dims)) if order == "C" else reversed(range(len(dims)))
    for i in axes:
        c, d, m = coords[i], dims[i], modes[i]  # (the mode applies in c's own dtype, before any narrowing)
        if m == "raise":
            if _is_traced(c):
                raise ConcretizationError(f"{name}: with mode='raise' the coordinates must be concrete to be "
                                          f"checked, but multi_index[{i}] is traced; pass mode='clip' or 'wrap'")
            host = concrete(name, c, f"multi_index[{i}]")
            if host.size and (host.min() < 0 or host.max() >= d):
                raise IndexingError(f"{name}: multi_index[{i}] holds {host.min()} to {host.max()}, outside "
                                    f"[0, {d}) for dims {dims}")
        elif m == "wrap":
            c = ops.remainder(c, c.dtype.type(d)) if d else c
        else:
            c = ops.clip(c, 0, builtins.max(d - 1, 0))
        c = ops.astype(c, index_dtype)
        out = c if out is None else ops.add(ops.multiply(out, index_dtype.type(d)), c)
    if out is None:  # dims == (): the one position of a 0-d array
        return ops.asarray(np.zeros((), index_dtype))
    return out


def unravel_index(indices, shape, order="C"):
    """The coordinates in an array of `shape` of the flat positions `indices`, one array per dimension.

    indices: an integer array (or int) of flat positions; negative ones count from the end and out-of-range
    ones are clamped, as JAX's (NumPy raises). shape: the array's shape. order: "C" (row-major) or "F"
    (column-major). The coordinates have the dtype of `indices` (int32 for a Python int).
    """
    name = "unravel_index"
    shape = _dims(name, shape)
    _order(name, order)
    idx = ops.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{name}: indices must be integers, got {idx.dtype.name}")
    size = int(np.prod(shape, dtype=np.int64))
    if size == 0:
        raise ShapeError(f"{name}: cannot unravel into the empty shape {shape}")
    work = idx if size < np.iinfo(idx.dtype.type).max else ops.astype(idx, dt.int64)
    if work.dtype.kind == "i":
        work = ops.where(ops.less(work, 0), ops.add(work, work.dtype.type(size)), work)
    work = ops.clip(work, 0, size - 1)
    out = [None] * len(shape)
    axes = reversed(range(len(shape))) if order == "C" else range(len(shape))
    for i in axes:
        d = work.dtype.type(shape[i])
        out[i] = ops.astype(ops.remainder(work, d), idx.dtype)
        work = ops.floor_divide(work, d)
    return tuple(out)


# ---------------------------------------------------------------- insert and delete

def _positions_along(name, what, obj, n):
    """The positions `obj` (an int, a slice, ints, a bool mask) picks along an axis of length n, on the host."""
    host = _host_positions(name, what, obj)
    if isinstance(host, slice):
        return np.arange(*host.indices(n)), False
    if host.dtype == bool:
        if host.shape != (n,):
            raise ShapeError(f"{name}: a bool mask obj must have the axis' length {n}, got shape {host.shape}")
        return np.flatnonzero(host), False
    if host.ndim > 1:
        raise ShapeError(f"{name}: obj must be an int, a slice or a 1-d sequence of ints, got shape {host.shape}")
    return host.astype(np.int64), host.ndim == 0


def delete(x, obj, axis=None, *, assume_unique_indices=False):
    """`x` without the entries `obj` along `axis` (np.delete).

    x: an array. obj: an int, a slice, a sequence of ints (negative ones count from the end; repeats count
    once) or a bool mask of the axis' length. axis: the axis; None works on the flattened array.
    assume_unique_indices: obj holds distinct in-range ints, so the result's length is known from obj's
    length alone: then obj may be traced (under jit), as JAX's.
    """
    x, ax = _axis_or_flat("delete", x, axis)
    n = x.shape[ax]
    if _is_traced(obj) and not isinstance(obj, slice):
        if not assume_unique_indices:
            raise ConcretizationError("delete: obj is traced, and the result's length depends on its values; "
                                      "pass assume_unique_indices=True (obj then holds distinct in-range "
                                      "ints) or a concrete obj")
        drop = ops.reshape(ops.astype(obj, dt.int32), (-1,))
        drop = ops.where(ops.less(drop, 0), ops.add(drop, n), drop)
        keep = _scatter_set(ops.constant_like(np.ones(n, bool), x), drop,
                            ops.constant_like(np.zeros(drop.shape, bool), x))
        at, _ = _first_true(keep, n - drop.shape[0])
        return ops.take(x, at, axis=ax)
    positions, _ = _positions_along("delete", "obj", obj, n)
    if positions.size and (positions.min() < -n or positions.max() >= n):
        raise IndexingError(f"delete: obj holds positions from {positions.min()} to {positions.max()}, outside "
                            f"[-{n}, {n}) for axis {axis} of length {n}")
    keep = np.ones(n, bool)
    keep[positions] = False
    return ops.take(x, _const(np.flatnonzero(keep), x), axis=ax)


def insert(x, obj, values, axis=None):
    """`x` with `values` inserted before the positions `obj` along `axis` (np.insert).

    x: an array. obj: an int (values inserted there as a block), a slice or a sequence of ints (one position
    per inserted slice; positions are those of x, from 0 to its length), or a bool mask. The result's length
    depends only on obj's shape, so an integer obj may be traced (under jit): its positions are then clamped
    into [-len, len] where NumPy would raise. values: broadcast to the inserted slices, cast to x's dtype.
    axis: the axis; None works on the flattened array.
    """
    x, ax = _axis_or_flat("insert", x, axis)
    n = x.shape[ax]
    vals = ops.constant_like(values, x, x.dtype)
    vals = ops.reshape(vals, (1,) * (x.ndim - vals.ndim) + vals.shape) if vals.ndim < x.ndim else vals
    if _is_traced(obj):
        if obj.dtype.kind not in "iu" or obj.ndim > 1:
            raise DTypeError(f"insert: a traced obj must be an int or a 1-d array of ints, got {obj.aval.describe()}")
        at = ops.reshape(_widened(obj, n), (-1,))
        at = ops.astype(ops.clip(ops.where(ops.less(at, 0), ops.add(at, n), at), 0, n), dt.int32)
        positions, scalar = at, obj.ndim == 0
    else:
        positions, scalar = _positions_along("insert", "obj", obj, n + 1)
        if positions.size and (positions.min() < -n or positions.max() > n):
            raise IndexingError(f"insert: obj holds positions from {positions.min()} to {positions.max()}, "
                                f"outside [-{n}, {n}] for axis {axis} of length {n}")
        positions = np.where(positions < 0, positions + n, positions).reshape(-1)
    if positions.shape[0] == 1 or scalar:
        if scalar:  # NumPy: a scalar position takes values' first axis as the inserted block's `axis`
            vals = ops.moveaxis(vals, 0, ax)
        count = vals.shape[ax]
        source = _block_source(positions, n, count, x)
    else:
        count = positions.shape[0]
        source = _spread_source(positions, n, x)
    block = x.shape[:ax] + (count,) + x.shape[ax + 1:]
    try:
        vals = ops.broadcast_to(vals, block)
    except ShapeError as e:
        raise ShapeError(f"insert: values of shape {vals.shape} do not fit the inserted block of shape "
                         f"{block}") from e
    return ops.take(ops.concatenate([x, vals], ax), source, axis=ax)


def _block_source(position, n, count, like):
    """Where each slot of the result of inserting `count` slices at `position` comes from in
    concatenate([x, values]): x's own before it, the values, then the rest of x's."""
    if not isinstance(position, (Array, Tracer)):
        at = int(position.reshape(-1)[0])
        return _const(np.concatenate([np.arange(at), n + np.arange(count), np.arange(at, n)]), like)
    at = ops.reshape(position, ())
    j = iota((n + count,), dt.int32, 0, like.device)
    after = ops.less(j, ops.add(at, count))
    return ops.where(ops.less(j, at), j, ops.where(after, ops.add(ops.subtract(j, at), n), ops.subtract(j, count)))


def _spread_source(positions, n, like):
    """Where each slot of the result of inserting one slice before each of `positions` comes from in
    concatenate([x, values]): NumPy's rule, each position shifted by the insertions before it (in a stable
    order), x's own slices filling the other slots in order."""
    m = positions.shape[0]
    if not isinstance(positions, (Array, Tracer)):
        shifted = positions.copy()
        shifted[np.argsort(positions, kind="stable")] += np.arange(m)
        source = np.empty(n + m, np.int64)
        old = np.ones(n + m, bool)
        old[shifted] = False
        source[old] = np.arange(n)
        source[shifted] = n + np.arange(m)
        return _const(source, like)
    from .sorting import argsort
    order = argsort(positions, stable=True)
    count = ops.constant_like(np.arange(m, dtype=np.int32), like)
    shifted = ops.add(ops.take(positions, order), count)     # the slot of values[order[k]]
    old = _scatter_set(ops.constant_like(np.ones(n + m, bool), like), shifted,
                       ops.constant_like(np.zeros(m, bool), like))
    slots, _ = _first_true(old, n)                           # x's slots, in order
    source = _scatter_set(ops.constant_like(np.zeros(n + m, np.int32), like), slots,
                          ops.constant_like(np.arange(n, dtype=np.int32), like))
    return _scatter_set(source, shifted, ops.add(order, n))


# ---------------------------------------------------------------- vander

def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of the 1-d `x`: columns x**(N-1), ..., x, 1 (or the reverse) (np.vander).

    x: a 1-d array. N: the number of columns (default len(x)). increasing: powers from 0 up. The powers are
    running products, as NumPy's; x keeps its dtype (NumPy widens integers to int64), bools become int32.
    """
    x = ops.asarray(x)
    if x.ndim != 1:
        raise ShapeError(f"vander: x must be 1-d, got shape {x.shape}")
    n = x.shape[0] if N is None else _static_int("vander", "N", N)
    if n < 0:
        raise ArgumentError(f"vander: N must be non-negative, got {n}")
    if x.dtype == dt.bool_:
        x = ops.astype(x, dt.default_int)
    if n == 0:
        return _empty_columns(x)
    columns = [ops.broadcast_to(ops.constant_like(np.ones((), x.dtype), x), x.shape)]
    for _ in range(n - 1):
        columns.append(ops.multiply(columns[-1], x))
    return ops.stack(columns if increasing else columns[::-1], axis=1)


def _empty_columns(x):
    return ops.reshape(ops.take(ops.reshape(x, (-1,)), _const(np.zeros((x.shape[0], 0), int), x)),
                       (x.shape[0], 0))
