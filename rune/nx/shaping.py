"""Stacking, splitting, reshaping and construction helpers of the NumPy surface (hstack, atleast_2d, rot90, kron, ...).

Each is a composite of existing primitives (reshape, concatenate, slice, rev,
broadcast, multiply), so jit, vmap, the derivatives and every backend get them
with no new rules. Sizes that set a result's shape (split points, new shapes,
the shape given to fromfunction/indices) are static Python values; the one
function whose result's shape depends on the values (trim_zeros) is exact
eagerly and raises ConcretizationError under jit, as JAX's does.
"""
import builtins
import functools
import math
import operator
import re

import numpy as np

from ..core import dtypes as dt
from ..core.prims import P
from ..core.trace import Tracer, bind
from ..errors import ArgumentError, AxisError, DTypeError, ShapeError, UsageError
from . import elementwise, ops, padding  # noqa: F401  (padding: registers nx.pad's other modes)
from .buffers import Array
from .dynamic import nonzero
from .host_values import concrete
from .shapes import tile
from .transformations import vmap

__all__ = ["append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "block", "column_stack", "copy",
           "dsplit", "dstack", "fliplr", "flipud", "hsplit", "hstack", "vsplit", "vstack", "kron", "resize",
           "rollaxis", "rot90", "trim_zeros", "shape", "size", "ndim", "iterable", "isscalar", "frombuffer",
           "fromiter", "fromfunction", "indices", "vectorize"]


elementwise._LATER["nonzero"] = nonzero   # where(cond), the one-argument form


def _is_array(x):
    return isinstance(x, (Array, Tracer))


# ---------------------------------------------------------------- rank

def _atleast(arys, rank, place):
    """Each of `arys` raised to `rank` dimensions by `place(shape)`; one array, or a list for several."""
    out = []
    for a in arys:
        a = ops.asarray(a)
        out.append(a if a.ndim >= rank else ops.reshape(a, place(a.shape)))
    return out[0] if len(out) == 1 else out


def atleast_1d(*arys):
    """Each argument as an array of at least one dimension (a scalar becomes shape (1,)).

    arys: arrays or scalars. Returns one array for one argument, else a list.
    """
    return _atleast(arys, 1, lambda s: (1,))


def atleast_2d(*arys):
    """Each argument as an array of at least two dimensions (shape (N,) becomes (1, N)).

    arys: arrays or scalars. Returns one array for one argument, else a list.
    """
    return _atleast(arys, 2, lambda s: (1,) * (2 - len(s)) + s)


def atleast_3d(*arys):
    """Each argument as an array of at least three dimensions.

    As NumPy: () -> (1, 1, 1), (N,) -> (1, N, 1), (M, N) -> (M, N, 1).

    arys: arrays or scalars. Returns one array for one argument, else a list.
    """
    return _atleast(arys, 3, lambda s: {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)])


def _listed(fn, arys):
    # atleast_* returns a bare array for one argument; the stackers want a list always.
    out = fn(*arys)
    return out if isinstance(out, list) else [out]


def _sequence(name, tup):
    if _is_array(tup) or isinstance(tup, np.ndarray):
        tup = list(ops.asarray(tup)) if ops.asarray(tup).ndim else [tup]
    tup = list(tup)
    if not tup:
        raise ShapeError(f"{name}: expected a non-empty sequence of arrays, got an empty one")
    return tup


def _cast_all(name, xs, dtype, casting):
    """xs cast to `dtype` (None: promoted as concatenate does), each cast allowed by `casting` (NumPy's rule)."""
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ArgumentError(f"{name}: casting must be 'no', 'equiv', 'safe', 'same_kind' or 'unsafe', got "
                            f"{casting!r}")
    if dtype is None:
        return xs
    dtype = dt.dtype(dtype)
    for x in xs:
        if not np.can_cast(np.dtype(x.dtype), np.dtype(dtype), casting):
            raise DTypeError(f"{name}: cannot cast {x.dtype} to {dtype} under casting={casting!r}")
    return [ops.astype(x, dtype) for x in xs]


def vstack(tup, *, dtype=None, casting="same_kind"):
    """The arrays of `tup` stacked row-wise: 1-d arrays become rows (atleast_2d), then joined along axis 0.

    tup: a non-empty sequence of arrays. dtype: the result's dtype (by default the operands' promoted one).
    casting: which casts to `dtype` are allowed (NumPy's rule names; "same_kind" by default).
    """
    xs = _listed(atleast_2d, _sequence("vstack", tup))
    return ops.concatenate(_cast_all("vstack", xs, dtype, casting), 0)


def hstack(tup, *, dtype=None, casting="same_kind"):
    """The arrays of `tup` stacked column-wise: along axis 1, or axis 0 when they are 1-d.

    tup: a non-empty sequence of arrays (scalars count as shape (1,)). dtype: the result's dtype.
    casting: which casts to `dtype` are allowed (NumPy's rule names; "same_kind" by default).
    """
    xs = _listed(atleast_1d, _sequence("hstack", tup))
    return ops.concatenate(_cast_all("hstack", xs, dtype, casting), 0 if xs[0].ndim == 1 else 1)


def dstack(tup):
    """The arrays of `tup` stacked depth-wise (along axis 2, after atleast_3d).

    tup: a non-empty sequence of arrays.
    """
    return ops.concatenate(_listed(atleast_3d, _sequence("dstack", tup)), 2)


def column_stack(tup):
    """1-d and 2-d arrays joined as columns of a 2-d array (a 1-d array of length N becomes an (N, 1) column).

    tup: a non-empty sequence of arrays.
    """
    xs = [ops.asarray(x) for x in _sequence("column_stack", tup)]
    xs = [ops.reshape(x, (-1, 1)) if x.ndim < 2 else x for x in xs]
    return ops.concatenate(xs, 1)


def append(arr, values, axis=None):
    """`values` appended to the end of `arr` along `axis` (a new array; np.append).

    arr, values: arrays. axis: the axis they are joined along; None flattens both first.
    """
    arr, values = ops.asarray(arr), ops.constant_like(values, ops.asarray(arr))
    if axis is None:
        return ops.concatenate([ops.ravel(arr), ops.ravel(values)], 0)
    return ops.concatenate([arr, values], axis)


def block(arrays):
    """An array assembled from nested lists of blocks (np.block).

    The innermost lists join along the last axis, the next ones out along the one before, and so on; every
    block is first raised to the deepest rank among them (and the nesting depth) by leading ones.

    arrays: an array, or nested lists of arrays all nested to the same depth.
    """
    depths = set()
    leaves = []

    def walk(a, depth):
        if isinstance(a, tuple):
            raise UsageError("block: the nesting must use lists, not tuples (as NumPy)")
        if isinstance(a, list):
            if not a:
                raise ShapeError(f"block: an empty list at depth {depth}")
            return [walk(e, depth + 1) for e in a]
        depths.add(depth)
        x = ops.asarray(a)
        leaves.append(x)
        return x

    tree = walk(arrays, 0)
    if len(depths) > 1:
        raise ShapeError(f"block: lists nested to different depths {sorted(depths)}")
    depth = depths.pop()
    rank = builtins.max([depth] + [x.ndim for x in leaves])

    def join(a, level):
        if not isinstance(a, list):
            return ops.reshape(a, (1,) * (rank - a.ndim) + a.shape)
        return ops.concatenate([join(e, level + 1) for e in a], rank - depth + level)

    return join(tree, 0)


# ---------------------------------------------------------------- splitting

def _bounds(name, n, indices_or_sections, even):
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ArgumentError(f"{name}: the number of sections must be positive, got {k}")
        if even and n % k:
            raise ShapeError(f"{name}: an axis of size {n} does not split into {k} equal parts")
        each, extra = divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        return list(np.cumsum([0] + sizes))
    if _is_array(indices_or_sections):
        indices_or_sections = concrete(name, indices_or_sections, "indices_or_sections")
    cuts = np.asarray(indices_or_sections)
    if cuts.ndim != 1 or (cuts.size and cuts.dtype.kind not in "iu"):
        raise ArgumentError(f"{name}: indices_or_sections must be an int or a sequence of ints, "
                            f"got {indices_or_sections!r}")
    # NumPy's rule: a negative cut counts from the end, then each is clipped to the axis.
    return [0] + [builtins.min(builtins.max(int(i) + n if i < 0 else int(i), 0), n) for i in cuts] + [n]


def _split(name, x, indices_or_sections, axis, even):
    x = ops.asarray(x)
    if x.ndim == 0:
        raise ShapeError(f"{name}: a 0-d array cannot be split")
    a = ops.normalize_axis(name, axis, x.ndim)
    bounds = _bounds(name, x.shape[a], indices_or_sections, even)
    return [ops.slice_in_dim(x, int(lo), int(hi), axis=a) for lo, hi in zip(bounds[:-1], bounds[1:])]


def array_split(ary, indices_or_sections, axis=0):
    """`ary` cut into pieces along `axis`, as a list; n sections need not divide the axis.

    Unlike split, the first size % n pieces are one longer than the rest.

    ary: an array. indices_or_sections: an int n or a sequence of cut points. axis: the axis cut.
    """
    return _split("array_split", ary, indices_or_sections, axis, even=False)


def _at_least_rank(name, ary, rank):
    ary = ops.asarray(ary)
    if ary.ndim < rank:
        raise ShapeError(f"{name}: expected an array of at least {rank} dimensions, got shape {ary.shape}")
    return ary


def hsplit(ary, indices_or_sections):
    """`ary` split column-wise: along axis 1, or axis 0 for a 1-d array.

    ary: an array. indices_or_sections: n equal sections (n must divide the axis) or a sequence of cut points.
    """
    ary = _at_least_rank("hsplit", ary, 1)
    return _split("hsplit", ary, indices_or_sections, 1 if ary.ndim > 1 else 0, even=True)


def vsplit(ary, indices_or_sections):
    """`ary` (at least 2-d) split row-wise, along axis 0.

    ary: an array. indices_or_sections: n equal sections (n must divide the axis) or a sequence of cut points.
    """
    return _split("vsplit", _at_least_rank("vsplit", ary, 2), indices_or_sections, 0, even=True)


def dsplit(ary, indices_or_sections):
    """`ary` (at least 3-d) split depth-wise, along axis 2.

    ary: an array. indices_or_sections: n equal sections (n must divide the axis) or a sequence of cut points.
    """
    return _split("dsplit", _at_least_rank("dsplit", ary, 3), indices_or_sections, 2, even=True)


# ---------------------------------------------------------------- reordering

def fliplr(m):
    """`m` (at least 2-d) with its columns (axis 1) in reverse order."""
    return ops.flip(_at_least_rank("fliplr", m, 2), 1)


def flipud(m):
    """`m` (at least 1-d) with its rows (axis 0) in reverse order."""
    return ops.flip(_at_least_rank("flipud", m, 1), 0)


def rollaxis(a, axis, start=0):
    """`a` with `axis` moved to sit before position `start` (np.rollaxis; moveaxis is the clearer form).

    a: an array. axis: the axis moved. start: the position it is moved before, in 0..a.ndim (negative
    counts from the end).
    """
    a = ops.asarray(a)
    n = a.ndim
    axis = ops.normalize_axis("rollaxis", _static_int("rollaxis", axis, "axis"), n)
    start = _static_int("rollaxis", start, "start")
    if not -n <= start <= n:
        raise AxisError(f"rollaxis: start {start} is out of range for an array of rank {n} "
                        f"(expected {-n} <= start <= {n})")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    return ops.moveaxis(a, axis, start) if axis != start else a


def rot90(m, k=1, axes=(0, 1)):
    """`m` rotated by 90 degrees `k` times in the plane of `axes`, from the first axis towards the second.

    m: an array of at least 2 dimensions. k: the number of quarter turns (negative turns the other way).
    axes: two different axes.
    """
    m = ops.asarray(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ArgumentError(f"rot90: axes must be two axes, got {axes}")
    if m.ndim < 2:
        raise ShapeError(f"rot90: expected an array of at least 2 dimensions, got shape {m.shape}")
    a, b = (ops.normalize_axis("rot90", x, m.ndim) for x in axes)
    if a == b:
        raise ArgumentError(f"rot90: the axes must differ, got {axes}")
    k = _static_int("rot90", k, "k") % 4
    if k == 0:
        return m
    if k == 2:
        return ops.flip(m, (a, b))
    perm = list(range(m.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(ops.flip(m, b), perm) if k == 1 else ops.flip(ops.transpose(m, perm), b)


# ---------------------------------------------------------------- products and shapes

def kron(a, b):
    """The Kronecker product of `a` and `b`: blocks a[i, ...] * b, laid out on a grid of a's shape.

    a, b: arrays (the one of lower rank gains leading ones); dtypes promote as in multiply.
    """
    a, b = ops.asarray(a), ops.constant_like(b, ops.asarray(a))
    nd = builtins.max(a.ndim, b.ndim)
    sa, sb = (1,) * (nd - a.ndim) + a.shape, (1,) * (nd - b.ndim) + b.shape
    # (a0, 1, a1, 1, ...) * (1, b0, 1, b1, ...), then each pair of axes merged.
    prod = ops.multiply(ops.reshape(a, tuple(v for d in sa for v in (d, 1))),
                        ops.reshape(b, tuple(v for d in sb for v in (1, d))))
    return ops.reshape(prod, tuple(x * y for x, y in zip(sa, sb)))


def _static_int(name, value, what):
    """`value` as a Python int: a traced one raises ConcretizationError naming `name` and `what`."""
    if _is_array(value):
        value = concrete(name, value, what)
    try:
        return operator.index(value)
    except TypeError:
        raise ArgumentError(f"{name}: {what} must be an int, got {value!r}") from None


def _static_shape(name, shape, what="shape"):
    if _is_array(shape):
        shape = concrete(name, shape, what)
    try:
        dims = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name}: {what} must be an int or a sequence of ints, got {shape!r}") from None
    if builtins.any(d < 0 for d in dims):
        raise ShapeError(f"{name}: {what} must be non-negative, got {dims}")
    return dims


def resize(a, new_shape):
    """An array of `new_shape` filled with the elements of `a` (flattened) repeated cyclically.

    As np.resize; zeros where `a` is empty.

    a: an array. new_shape: an int or a tuple of non-negative ints.
    """
    a = ops.asarray(a)
    shape = _static_shape("resize", new_shape, "new_shape")
    total = math.prod(shape)
    flat = ops.ravel(a)
    if a.size == 0 or total == 0:
        return ops.broadcast_to(ops.astype(ops.constant_like(0, a), a.dtype), shape)
    reps = -(-total // a.size)
    return ops.reshape(ops.slice_in_dim(tile(flat, reps), 0, total), shape)


def copy(a, order="K"):
    """A copy of `a` as a rune array (arrays are immutable: the same values in a new array).

    a: an array, or anything asarray takes. order: accepted for NumPy's signature ("K", "C", "A", "F");
    rune arrays are always row-major.
    """
    if order not in ("K", "C", "A", "F", None):
        raise ArgumentError(f"copy: order must be 'K', 'C', 'A' or 'F', got {order!r}")
    a = ops.asarray(a)
    # A new buffer (a same-dtype convert), so donating the copy leaves `a` alive, as in JAX.
    return bind(P["convert"], a, dtype=a.dtype)


def shape(a):
    """The shape of `a` (a tuple of ints; static, also under jit)."""
    return tuple(a.shape) if _is_array(a) or isinstance(a, np.ndarray) else np.shape(a)


def ndim(a):
    """The number of dimensions of `a` (an int; static, also under jit)."""
    return len(shape(a))


def size(a, axis=None):
    """The number of elements of `a`, or its length along `axis` (an int; static, also under jit)."""
    s = shape(a)
    if axis is None:
        return math.prod(s)
    return s[ops.normalize_axis("size", _static_int("size", axis, "axis"), len(s))]


def iterable(y):
    """Whether `y` can be iterated over (a 0-d array cannot, as in NumPy)."""
    if _is_array(y):
        return y.ndim > 0
    return np.iterable(y)


def isscalar(element):
    """Whether `element` is a scalar: a Python or NumPy scalar, or a 0-d rune array.

    As JAX: rune has no separate scalar type, so its 0-d arrays play that part (NumPy's 0-d ndarrays are
    not scalars).
    """
    if _is_array(element):
        return element.ndim == 0
    return bool(np.isscalar(element))


# ---------------------------------------------------------------- construction

def _checked_dtype(name, dtype):
    try:
        return np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{name}: {dtype!r} is not a dtype") from None


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    """A 1-d array of the bytes of `buffer` read as `dtype` (np.frombuffer; the values are copied).

    buffer: a bytes-like object. dtype: the element type (float64 by default). count: the number of elements
    (-1: all that fit). offset: the first byte read.
    """
    dtype = _checked_dtype("frombuffer", dtype)
    try:
        host = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"frombuffer: cannot read {count if count >= 0 else 'all'} {dtype.name} "
                            f"elements from offset {offset} of the buffer: {e}") from None
    return ops.asarray(host.copy())


def fromiter(iter, dtype, count=-1):
    """A 1-d array of the values an iterable yields (np.fromiter).

    iter: an iterable of scalars. dtype: the element type (required). count: how many to read (-1: all).
    """
    dtype = _checked_dtype("fromiter", dtype)
    try:
        host = np.fromiter(iter, dtype=dtype, count=count)
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"fromiter: cannot read {count if count >= 0 else 'all'} {dtype.name} values "
                            f"from the iterable: {e}") from None
    return ops.asarray(host)


def indices(dimensions, dtype=int, sparse=False):
    """The index grid of an array of shape `dimensions` (np.indices).

    An array of shape (len(dimensions),) + dimensions whose k-th slice holds the index along axis k, or with
    sparse=True a tuple of arrays each of length dimensions[k] along axis k and 1 elsewhere.
    dimensions: a sequence of non-negative ints. dtype: an integer dtype (int32 by default, rune's int).
    """
    dims = _static_shape("indices", dimensions, "dimensions")
    dtype = dt.default_int if dtype is int else dt.dtype(dtype)
    n = len(dims)
    grids = [ops.asarray(np.arange(d).reshape((1,) * k + (d,) + (1,) * (n - k - 1)), dtype)
             for k, d in enumerate(dims)]
    if sparse:
        return tuple(grids)
    return ops.stack([ops.broadcast_to(g, dims) for g in grids], 0) if n else ops.asarray(
        np.zeros((0,), np.int64), dtype)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """`function` called once on the index grids of `shape` (np.fromfunction): function(*indices(shape)).

    function: called with one array per axis (the coordinates, of `dtype`), and the extra keywords.
    shape: a tuple of non-negative ints. dtype: the coordinates' dtype (float: rune's default float).
    """
    dims = _static_shape("fromfunction", shape)
    dtype = dt.float32 if dtype is float else dt.dtype(dtype)
    return function(*ops.astype(indices(dims), dtype), **kwargs) if dims else function(**kwargs)


# ---------------------------------------------------------------- trimming

def trim_zeros(filt, trim="fb", axis=None):
    """`filt` without its leading and/or trailing zeros (along `axis`: the all-zero slices at its ends).

    filt: an array; its values set the result's shape, so it must be concrete (not under jit).
    trim: "f" trims the front, "b" the back, "fb" both. axis: an int or a tuple of ints; None trims along
    every axis (NumPy 2.2's n-d form: the bounding box of the nonzero elements).
    """
    filt = ops.asarray(filt)
    if not isinstance(trim, str) or not set(trim.lower()) <= set("fb"):
        raise ArgumentError(f"trim_zeros: trim must be 'f', 'b' or 'fb', got {trim!r}")
    axes = ops._axes("trim_zeros", axis, filt.ndim)
    nonzero = np.nonzero(concrete("trim_zeros", filt, "filt"))
    trim = trim.lower()
    for a in axes:
        at = nonzero[a]
        if not at.size:   # nothing but zeros: nothing is left along a trimmed axis
            filt = ops.slice_in_dim(filt, 0, 0, axis=a)
            continue
        lo = int(at.min()) if "f" in trim else 0
        hi = int(at.max()) + 1 if "b" in trim else filt.shape[a]
        filt = ops.slice_in_dim(filt, lo, hi, axis=a)
    return filt


# ---------------------------------------------------------------- vectorize

_DIMS = r"\w+(?:\s*,\s*\w+)*"
_ARG = rf"\((?:{_DIMS})?\)"
_SIGNATURE = re.compile(rf"^\s*{_ARG}(?:\s*,\s*{_ARG})*\s*->\s*{_ARG}(?:\s*,\s*{_ARG})*\s*$")


def _parse_signature(signature):
    """'(m,n),(n)->(m)' as ([('m', 'n'), ('n',)], [('m',)])."""
    if not _SIGNATURE.match(signature):
        raise ArgumentError(f"vectorize: {signature!r} is not a generalised-ufunc signature such as "
                            f"'(m,n),(n)->(m)'")
    ins, outs = signature.split("->")
    parse = lambda side: [tuple(re.findall(r"\w+", g)) for g in re.findall(r"\(([^)]*)\)", side)]  # noqa: E731
    return parse(ins), parse(outs)


def _core_sizes(args, core_dims):
    """The loop shape (broadcast of the non-core axes) and the size of every named core dimension."""
    sizes, loops = {}, []
    for i, (x, dims) in enumerate(zip(args, core_dims)):
        if x.ndim < len(dims):
            raise ShapeError(f"vectorize: argument {i} of shape {x.shape} has fewer than the {len(dims)} "
                             f"core dimensions {dims} of the signature")
        for name, d in zip(dims, x.shape[x.ndim - len(dims):]):
            if sizes.setdefault(name, d) != d:
                raise ShapeError(f"vectorize: core dimension {name!r} is {sizes[name]} in one argument and "
                                 f"{d} in argument {i}")
        loops.append(x.shape[:x.ndim - len(dims)])
    return ops.broadcast_shapes("vectorize", *loops) if loops else (), sizes


def _checked_outputs(fn, sizes, out_dims):
    """fn, with its outputs' core shapes checked against the signature."""
    if out_dims is None:
        return fn

    def checked(*args):
        out = fn(*args)
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(out_dims):
            raise ShapeError(f"vectorize: the function returned {len(outs)} outputs, the signature has "
                             f"{len(out_dims)}")
        for k, (o, dims) in enumerate(zip(outs, out_dims)):
            o_shape = ops.asarray(o).shape
            want = tuple(sizes.get(n, o_shape[i] if i < len(o_shape) else None) for i, n in enumerate(dims))
            if o_shape != want:
                raise ShapeError(f"vectorize: output {k} has shape {o_shape}, the signature asks for core "
                                 f"dimensions {dims} = {want}")
        return out
    return checked


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """`pyfunc` turned into a function that broadcasts over leading axes, by vmap (jax.numpy.vectorize).

    pyfunc is written for single elements, or for the core shapes `signature` gives.

    pyfunc: a function of arrays. excluded: positions (ints) and keyword names (strs) of arguments passed
    unchanged rather than mapped over. signature: a generalised-ufunc signature such as '(n),(n)->()';
    without it every argument's core is a scalar and so is every output. Keyword arguments not in `excluded`
    are also passed unchanged (not mapped), as in JAX.
    """
    if not callable(pyfunc):
        raise UsageError(f"vectorize: pyfunc must be callable, got {type(pyfunc).__name__}")
    if builtins.any(not isinstance(e, (int, str)) for e in excluded):
        raise ArgumentError(f"vectorize: excluded must hold ints and strs, got {excluded!r}")
    parsed = _parse_signature(signature) if signature is not None else None

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        static = {i: args[i] for i in excluded if isinstance(i, int) and -len(args) <= i < len(args)}
        static = {i % len(args): v for i, v in static.items()}
        # None arguments pass unchanged too (JAX's rule), as do excluded ones.
        mapped_at = [i for i in range(len(args)) if i not in static and args[i] is not None]

        def call(*dynamic):
            full = list(args)
            for i, v in zip(mapped_at, dynamic):
                full[i] = v
            return pyfunc(*full, **kwargs)

        dynamic = [ops.asarray(args[i]) for i in mapped_at]
        in_dims, out_dims = parsed if parsed is not None else ([()] * len(dynamic), None)
        if len(in_dims) != len(dynamic):
            raise ArgumentError(f"vectorize: the signature {signature!r} has {len(in_dims)} inputs, the call "
                                f"maps {len(dynamic)} arguments")
        loop, sizes = _core_sizes(dynamic, in_dims)
        fn = _checked_outputs(call, sizes, out_dims)
        # Loop axes of size 1 (or missing) are not mapped for that argument: vmap broadcasts them (JAX's
        # way), so an argument is never materialised at the full loop shape.
        squeezed, filled = [], []
        for x, dims in zip(dynamic, in_dims):
            lead = x.shape[:x.ndim - len(dims)]
            squeezed.append(ops.squeeze(x, tuple(i for i, d in enumerate(lead) if d == 1)))
            filled.append((1,) * (len(loop) - len(lead)) + lead)
        expand = []
        for k in reversed(range(len(loop))):
            axes = tuple(None if f[k] == 1 else 0 for f in filled)
            if builtins.all(a is None for a in axes):
                expand.append(k)
            else:
                fn = vmap(fn, in_axes=axes)
        out = fn(*squeezed)
        if not expand:
            return out
        grow = lambda o: ops.expand_dims(o, tuple(sorted(expand)))  # noqa: E731
        return tuple(grow(o) for o in out) if isinstance(out, tuple) else grow(out)

    return wrapped
