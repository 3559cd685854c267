"""NumPy indexing (`x[idx]`) and functional updates (`x.at[idx].set(v)`).

An index becomes one static `slice` (plus `rev` for negative steps), one
`gather` for the integer-array part, and a final reshape that drops integer
axes and inserts `None` axes. Integer-array indices are clamped after
negative ones count from the end, as in JAX (no bounds error can be raised on
traced indices); static integer indices are bounds-checked.
"""
import numpy as np

from ..core.trace import Tracer
from ..errors import IndexingError
from ..core import dtypes as dt
from . import ops
from .buffers import Array
from .constants import filled, iota
from .index_math import clamped, from_end, in_bounds


def _is_array_index(item):
    return isinstance(item, (Array, Tracer, np.ndarray, list)) or (
        isinstance(item, np.generic) and item.dtype.kind in "iub")


def _normalize(x, idx):
    """The index as a tuple with its Ellipsis expanded and trailing axes filled in."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    consumed = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if consumed > x.ndim:
        raise IndexingError(f"too many indices for an array of shape {x.shape}: {len(idx)} given")
    if sum(i is Ellipsis for i in idx) > 1:
        raise IndexingError("an index can only have a single ellipsis ('...')")
    if Ellipsis in [i for i in idx if not _is_array_index(i)]:
        at = next(k for k, i in enumerate(idx) if i is Ellipsis)
        idx = idx[:at] + (slice(None),) * (x.ndim - consumed) + idx[at + 1:]
    else:
        idx = idx + (slice(None),) * (x.ndim - consumed)
    return idx


def getitem(x, idx):
    if _is_mask(idx):
        # x[mask]: a data-dependent shape, computed from the concrete mask.
        from .dynamic import boolean_mask
        return boolean_mask(x, idx)
    return _index(x, idx)


def _is_mask(idx):
    return isinstance(idx, (Array, Tracer, np.ndarray)) and idx.dtype == dt.bool_


def _index(x, idx, out_of_bounds=None):
    """x[idx]. Integer-array indices out of bounds are clamped, or, when
    `out_of_bounds` is given, give that value instead (how .at[] drops them)."""
    x = ops.asarray(x)
    starts, limits, strides, flips, entries = _parse(x, idx)
    out = ops._slice(x, starts, limits, strides)
    if flips:
        out = ops.flip(out, flips)
    if any(kind == "adv" for kind, _ in entries):
        # Beside an integer array, NumPy counts integer indices as advanced too
        # (that decides where the gathered axes go): each picks element 0 of
        # the length-1 axis its slice left.
        zero = filled((), 0, dt.int32, x.device)
        entries = [("adv", zero) if kind == "int" else (kind, v) for kind, v in entries]
    return _finish(out, entries, out_of_bounds)


def _parse(x, idx):
    """The index as a static box (starts, limits, strides, axes to flip) and its
    entries: ("int" | "slice" | "adv" | "none", the index array for "adv")."""
    idx = _normalize(x, idx)
    starts, limits, strides, flips = [], [], [], []
    entries = []  # ("int" | "slice" | "adv" | "none", payload)
    axis = 0
    for item in idx:
        if item is None:
            entries.append(("none", None))
            continue
        n = x.shape[axis]
        if isinstance(item, (bool, np.bool_)):
            raise IndexingError("boolean scalars are not supported as indices")
        if isinstance(item, (int, np.integer)) and not isinstance(item, np.bool_):
            i = int(item)
            if not -n <= i < n:
                raise IndexingError(f"index {i} is out of bounds for axis {axis} of size {n}")
            i %= n
            starts.append(i), limits.append(i + 1), strides.append(1)
            entries.append(("int", None))
        elif isinstance(item, slice):
            start, stop, step = item.indices(n)
            if step < 0:
                count = len(range(start, stop, step))
                first = start + step * (count - 1) if count else 0
                starts.append(first), limits.append(first + (count - 1) * -step + 1 if count else 0)
                strides.append(-step)
                flips.append(axis)
            else:
                starts.append(start), limits.append(max(stop, start)), strides.append(step)
            entries.append(("slice", None))
        elif _is_array_index(item):
            index = ops.constant_like(item, x)
            if index.dtype == dt.bool_:
                raise IndexingError("a boolean mask is supported alone (x[mask]), not combined with other indices; "
                                    "use nx.where(mask, x, fill) for a fixed shape")
            if index.dtype.kind not in "iu":
                raise IndexingError(f"array indices must be integers, got {index.dtype.name}")
            starts.append(0), limits.append(n), strides.append(1)
            entries.append(("adv", index))
        else:
            raise IndexingError(f"unsupported index {item!r} of type {type(item).__name__}")
        axis += 1
    return starts, limits, strides, flips, entries


def _finish(out, entries, out_of_bounds=None):
    """Gather the integer-array axes, then drop integer axes and add None axes."""
    axes = [e for e in entries if e[0] != "none"]
    adv_axes = [k for k, e in enumerate(axes) if e[0] == "adv"]
    block_shape = ()
    if adv_axes:
        index = ops.broadcast_arrays(*(axes[k][1] for k in adv_axes))
        # NumPy's rule: the gathered axes stay in place only if the advanced
        # indices stand next to each other in the index (a None between them counts).
        at = [k for k, e in enumerate(entries) if e[0] == "adv"]
        adjacent = at == list(range(at[0], at[-1] + 1))
        if not adjacent:  # NumPy puts the gathered axes first
            rest = [k for k in range(len(axes)) if k not in adv_axes]
            out = ops.transpose(out, adv_axes + rest)
            axes = [axes[k] for k in adv_axes] + [axes[k] for k in rest]
            adv_axes = list(range(len(adv_axes)))
        first = adv_axes[0]
        dims = [out.shape[k] for k in adv_axes]
        linear = inside = None
        for i, d in zip(index, dims):
            i = ops.astype(i, dt.int32) if i.dtype != dt.int32 else i
            i = from_end(i, d)
            ok = in_bounds(i, d)
            inside = ok if inside is None else ops.logical_and(inside, ok)
            i = clamped(i, d)
            linear = i if linear is None else ops.add(ops.multiply(linear, d), i)
        merged = out.shape[:first] + (int(np.prod(dims)),) + out.shape[adv_axes[-1] + 1:]
        out = ops.bind(ops.P["gather"], ops.reshape(out, merged), linear, axis=first)
        block_shape = linear.shape
        if out_of_bounds is not None:
            where_inside = ops.reshape(inside, (1,) * first + block_shape +
                                       (1,) * (out.ndim - first - len(block_shape)))
            out = ops.where(where_inside, out, out.dtype.type(out_of_bounds))
        if not adjacent:
            entries = [("block", None)] + [e for e in entries if e[0] != "adv"]
        else:
            at = next(k for k, e in enumerate(entries) if e[0] == "adv")
            entries = entries[:at] + [("block", None)] + [e for e in entries[at:] if e[0] != "adv"]
        shape_iter = iter(out.shape[:first] + out.shape[first + len(block_shape):])
    else:
        shape_iter = iter(out.shape)
    final = []
    for kind, _ in entries:
        if kind == "none":
            final.append(1)
        elif kind == "block":
            final.extend(block_shape)
        elif kind == "int":
            next(shape_iter)
        else:
            final.append(next(shape_iter))
    return ops.reshape(out, tuple(final))


_COMBINE = {"add": ops.add, "mul": ops.multiply, "min": ops.minimum, "max": ops.maximum}


class IndexUpdater:
    """`x.at[idx]`: functional updates that return a new array."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx):
        return _Updates(self.array, idx)


class _Updates:
    __slots__ = ("array", "idx")

    def __init__(self, array, idx):
        self.array, self.idx = array, idx

    def get(self):
        return getitem(self.array, self.idx)

    def set(self, values):
        return self._scatter(values, "set")

    def add(self, values):
        return self._scatter(values, "add")

    def multiply(self, values):
        return self._scatter(values, "mul")

    def min(self, values):
        return self._scatter(values, "min")

    def max(self, values):
        return self._scatter(values, "max")

    def _scatter(self, values, mode):
        x = ops.asarray(self.array)
        starts, limits, strides, flips, entries = _parse(x, self.idx)
        if not flips and all(st == 1 for st in strides) and all(k != "adv" for k, _ in entries):
            return self._update_box(x, values, mode, starts, limits, entries)
        # The flat positions the index selects: an index into arange(size); an
        # out-of-bounds array index selects position `size`, which the scatter drops.
        positions = _index(ops.reshape(iota((x.size,), dt.int32, 0, x.device), x.shape),
                           self.idx, out_of_bounds=x.size)
        values = ops.constant_like(values, x, x.dtype)
        try:
            values = ops.broadcast_to(values, positions.shape)
        except Exception as e:
            raise IndexingError(f"at[...].{mode}: values of shape {values.shape} do not fit the "
                                f"selected shape {positions.shape}") from e
        flat = ops.bind(ops.P["scatter"], ops.reshape(x, (-1,)), ops.reshape(positions, (-1,)),
                        ops.reshape(values, (-1,)), axis=0, mode=mode)
        return ops.reshape(flat, x.shape)

    def _update_box(self, x, values, mode, starts, limits, entries):
        """A contiguous box (ints and step-1 slices): one dynamic_update_slice, no scatter."""
        box = tuple(hi - lo for lo, hi in zip(starts, limits))
        selected, sizes = [], iter(box)  # the shape x[idx] has: int axes dropped, None axes added
        for kind, _ in entries:
            if kind == "none":
                selected.append(1)
            elif kind == "int":
                next(sizes)
            else:
                selected.append(next(sizes))
        selected = tuple(selected)
        values = ops.constant_like(values, x, x.dtype)
        try:
            values = ops.reshape(ops.broadcast_to(values, selected), box)
        except Exception as e:
            raise IndexingError(f"at[...].{mode}: values of shape {values.shape} do not fit the "
                                f"selected shape {selected}") from e
        if mode != "set":  # a box has no repeated positions: combine, then write
            values = _COMBINE[mode](ops._slice(x, starts, limits, [1] * x.ndim), values)
        return ops.dynamic_update_slice(x, values, starts)
