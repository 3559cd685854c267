"""Op-table rows of rune/nx/index_tricks.py: each case is checked eagerly against NumPy, under jit
against eager, its jvp/vjp against finite differences and under vmap against a loop."""
import numpy as np

from rune import nx

from op_table import *  # noqa: F401,F403  (case, the samplers, dtypes)
from op_table import _rng, accumulate_rule, index_rule, ACCUMULATE_NOTE

INDEX_NOTE = "indices are int32, rune's default int (NumPy: int64)"


def _copy_then(np_fn):
    """A NumPy in-place function (put, fill_diagonal, ...) as one that returns the updated copy."""
    def ref(x, *args, **kwargs):
        out = np.array(x, copy=True)
        np_fn(out, *args, **kwargs)
        return out
    return ref


def _padded(values, size, fill):
    """The first `size` of `values` (along axis 0), padded with `fill`: JAX's size=/fill_value=."""
    values = np.asarray(values)
    out = np.full((size,) + values.shape[1:], 0 if fill is None else fill, values.dtype)
    k = min(size, values.shape[0])
    out[:k] = values[:k]
    return out


# -- diagonals and triangles

_r = _rng("diagonal")
case("diagonal", nx.diagonal, np.diagonal,
     [S(draw(_r, (3, 4), F64)), S(draw(_r, (3, 4), I32), offset=-1),
      S(draw(_r, (2, 3, 4), F64), offset=1, axis1=2, axis2=0), S(draw(_r, (2, 3), BOOL), offset=5)], grad=True)
_r = _rng("trace")
case("trace", nx.trace, np.trace,
     [S(draw(_r, (3, 4), F64)), S(draw(_r, (3, 3), I8), offset=1), S(draw(_r, (2, 3, 3), F32), axis1=1, axis2=2),
      S(draw(_r, (3, 3), F64), offset=-1, dtype=F32)], grad=True, dtype_rule=lambda s, d: (
          np.dtype(s.kwargs["dtype"]) if "dtype" in s.kwargs else accumulate_rule(s, d)), dtype_note=ACCUMULATE_NOTE)
_r = _rng("diag")
case("diag", nx.diag, np.diag,
     [S(draw(_r, (3,), F64)), S(draw(_r, (3,), I32), k=-2), S(draw(_r, (3, 4), F64), k=1),
      S(draw(_r, (4, 2), BOOL), k=-1), S(draw(_r, (2,), C128), k=1)], grad=True)
_r = _rng("diagflat")
case("diagflat", nx.diagflat, np.diagflat, [S(draw(_r, (2, 2), F64), k=1), S(draw(_r, (3,), I32))], grad=True)
case("diag_indices", nx.diag_indices, np.diag_indices, [S(n=3), S(n=2, ndim=3)], dtype_rule=index_rule,
     dtype_note=INDEX_NOTE)
_r = _rng("diag_indices_from")
case("diag_indices_from", nx.diag_indices_from, np.diag_indices_from,
     [S(draw(_r, (3, 3), F32)), S(draw(_r, (2, 2, 2), I32))], dtype_rule=index_rule, dtype_note=INDEX_NOTE)
_r = _rng("fill_diagonal")
case("fill_diagonal", lambda x, val, **kw: nx.fill_diagonal(x, val, inplace=False, **kw),
     _copy_then(np.fill_diagonal),
     [S(draw(_r, (3, 3), F64), 2.5), S(draw(_r, (5, 3), F64), draw(_r, (2,), F64), wrap=True),
      S(draw(_r, (3, 3, 3), I32), np.array([7, -1], I32)), S(draw(_r, (2, 4), F32), draw(_r, (), F32))],
     grad=True, diff_argnums=(0, 1), note="inplace=False (as jnp's): the updated copy is returned")
case("tri", nx.tri, np.tri, [S(N=3), S(N=2, M=4, k=1), S(N=3, M=2, k=-1, dtype=I32)],
     dtype_rule=lambda s, d: np.dtype(s.kwargs.get("dtype", F32)), dtype_note="float32 by default (NumPy: float64)")
for _name in ("tril_indices", "triu_indices"):
    case(_name, getattr(nx, _name), getattr(np, _name), [S(n=3), S(n=3, k=1, m=4), S(n=4, k=-1, m=2)],
         dtype_rule=index_rule, dtype_note=INDEX_NOTE)
    _r = _rng(_name + "_from")
    case(_name + "_from", getattr(nx, _name + "_from"), getattr(np, _name + "_from"),
         [S(draw(_r, (3, 3), F64)), S(draw(_r, (2, 4), I32), k=1)], dtype_rule=index_rule, dtype_note=INDEX_NOTE)
case("mask_indices", lambda n, which, k=0: nx.mask_indices(n, getattr(nx, which), k),
     lambda n, which, k=0: np.mask_indices(n, getattr(np, which), k),
     [S(n=3, which="triu"), S(n=4, which="tril", k=-1)], dtype_rule=index_rule, dtype_note=INDEX_NOTE,
     traced=False, note="mask_func named by `which` (nx.triu / np.triu); under jit it needs size= (as JAX's)")
case("mask_indices(size)", lambda n, which, k=0, size=None: nx.mask_indices(n, getattr(nx, which), k, size=size),
     lambda n, which, k=0, size=None: tuple(_padded(i, size, 0) for i in np.mask_indices(n, getattr(np, which), k)),
     [S(n=3, which="triu", size=7), S(n=4, which="tril", k=-1, size=4)], dtype_rule=index_rule,
     dtype_note=INDEX_NOTE)

# -- selection


def _select(*arrays, default=0):
    half = len(arrays) // 2
    return list(arrays[:half]), list(arrays[half:]), default


_r = _rng("select")
case("select", lambda *a, default=0: nx.select(*_select(*a, default=default)),
     lambda *a, default=0: np.select(*_select(*a, default=default)),
     [S(draw(_r, (3, 4), BOOL), draw(_r, (4,), BOOL), draw(_r, (3, 4), F64), draw(_r, (3, 4), F64), default=-1.5),
      S(draw(_r, (5,), BOOL), draw(_r, (5,), I32)),
      S(draw(_r, (2, 3), BOOL), draw(_r, (2, 3), BOOL), draw(_r, (2, 3), BF16), draw(_r, (2, 3), BF16)),
      S(draw(_r, (3,), BOOL), draw(_r, (3,), C128), default=1j)],
     grad=True, diff_argnums=(2, 3), note="conditions, then choices, as positional arguments")
_r = _rng("choose")
case("choose", lambda a, *choices, mode="raise": nx.choose(a, list(choices), mode=mode),
     lambda a, *choices, mode="raise": np.choose(a, list(choices), mode=mode),
     [S(np.array([[0, 2, 1, 1], [2, 0, 1, 0], [1, 1, 2, 0]], I32), draw(_r, (3, 4), F64), draw(_r, (4,), F64),
        draw(_r, (3, 4), F64), mode="clip"),
      S(np.array([0, 3, -1, 4, 1], I32), draw(_r, (5,), I32), draw(_r, (5,), I32), mode="wrap"),
      S(np.array([5, -2, 1], I64), draw(_r, (3,), F32), draw(_r, (3,), F32), mode="clip")],
     grad=True, diff_argnums=(1, 2), note="choices as positional arguments; mode='raise' is eager only")


def _sized(np_fn):
    return lambda *a, size, fill_value=None: _padded(np_fn(*a), size, fill_value)


def _masked(name, shapes, dtypes):
    rng = _rng(name)
    return [draw(rng, s, d, "small") * (rng.random(s) < 0.5) for s, d in zip(shapes, dtypes)]


_c = _masked("extract", [(3, 4), (7,)], [F64, I32])
_r = _rng("extract")
case("extract", nx.extract, np.extract,
     [S(_c[0] != 0, draw(_r, (3, 4), F64)), S(_c[1].astype(I32), draw(_r, (7,), I32)),
      S(np.zeros((0,), BOOL), draw(_r, (0,), F32))], grad=True, diff_argnums=(1,), traced=False)
case("extract(size)", nx.extract,
     lambda c, x, size, fill_value=0: _padded(np.extract(c, x), size, fill_value),
     [S(_c[0] != 0, draw(_r, (3, 4), F64), size=8, fill_value=-1.0), S(_c[1].astype(I32), draw(_r, (7,), I32), size=2)],
     grad=True, diff_argnums=(1,), note="size=/fill_value= (JAX's): a fixed shape, so it runs under jit")
_r = _rng("compress")
case("compress", lambda c, x, **kw: nx.compress(c, x, **kw), lambda c, x, **kw: np.compress(c, x, **kw),
     [S(np.array([True, False, True]), draw(_r, (3, 4), F64), axis=0),
      S(np.array([0, 2, 0, 1], I32), draw(_r, (2, 4), I32), axis=-1),
      S(np.array([False, True]), draw(_r, (2, 3), F64))], grad=True, diff_argnums=(1,), traced=False)
case("compress(size)", lambda c, x, **kw: nx.compress(c, x, **kw),
     lambda c, x, axis=None, size=None, fill_value=0: np.moveaxis(_padded(np.moveaxis(
         np.compress(c, x, axis=axis), axis or 0, 0), size, fill_value), 0, axis or 0),
     [S(np.array([True, False, True]), draw(_r, (3, 4), F64), axis=0, size=3, fill_value=9.0),
      S(np.array([0, 2, 0, 1], I32), draw(_r, (2, 4), I32), axis=1, size=1)],
     grad=True, diff_argnums=(1,), note="size=/fill_value= (JAX's): a fixed shape, so it runs under jit")
_c = _masked("flatnonzero", [(3, 4), (5,), (0,)], [F64, I32, BOOL])
case("flatnonzero", nx.flatnonzero, np.flatnonzero, [S(c) for c in _c], dtype_rule=index_rule,
     dtype_note=INDEX_NOTE, traced=False)
case("flatnonzero(size)", nx.flatnonzero, _sized(np.flatnonzero), [S(_c[0], size=8, fill_value=-1), S(_c[1], size=2)],
     dtype_rule=index_rule, dtype_note=INDEX_NOTE)
_c = _masked("argwhere", [(3, 4), (2, 2, 3), ()], [F64, I32, F32])
case("argwhere", nx.argwhere, np.argwhere, [S(c) for c in _c], dtype_rule=index_rule, dtype_note=INDEX_NOTE,
     traced=False)
case("argwhere(size)", nx.argwhere, _sized(np.argwhere), [S(_c[0], size=9, fill_value=-1), S(_c[1], size=3)],
     dtype_rule=index_rule, dtype_note=INDEX_NOTE)
case("ix_", nx.ix_, np.ix_, [S(np.array([0, 2], I32), np.array([1, 0, 3], I32)), S(np.array([4, 1], I64))])

# -- updates
_r = _rng("put")
case("put", lambda x, ind, v, **kw: nx.put(x, ind, v, inplace=False, **kw), _copy_then(np.put),
     [S(draw(_r, (3, 4), F64), np.array([0, 5, -1], I32), draw(_r, (3,), F64)),
      S(draw(_r, (6,), I32), np.array([1, 4, 2, 0], I64), np.array([7, 8], I32)),
      S(draw(_r, (2, 3), F64), np.array([7, -9, 2], I32), draw(_r, (3,), F64), mode="clip"),
      S(draw(_r, (5,), F32), np.array([6, -7], I32), 1.5, mode="wrap")],
     grad=True, diff_argnums=(0, 2), note="inplace=False (as jnp's); positions distinct (repeats: one write wins)")
_r = _rng("put_along_axis")
case("put_along_axis",
     lambda x, idx, v, axis: nx.put_along_axis(x, idx, v, axis, inplace=False), _copy_then(np.put_along_axis),
     [S(draw(_r, (3, 4), F64), np.array([[1, 3], [0, 2], [3, -4]], I32), draw(_r, (3, 2), F64), axis=1),
      S(draw(_r, (3, 4), I32), np.array([[2, 0, 1, 2]], I32), np.array(5, I32), axis=0),
      S(draw(_r, (2, 3), F64), np.array([4, 0], I32), draw(_r, (2,), F64), axis=None)],
     grad=True, diff_argnums=(0, 2), note="inplace=False (as jnp's); indices distinct along the axis")
case("ravel_multi_index", lambda *idx, dims, mode: nx.ravel_multi_index(idx, dims, mode=mode),
     lambda *idx, dims, mode: np.ravel_multi_index(idx, dims, mode=mode),
     [S(np.array([0, 2, 1], I32), np.array([3, 0, 1], I32), dims=(3, 4), mode="clip"),
      S(np.array([[4, -1]], I32), np.array([[1], [5]], I64), np.array(2, I32), dims=(3, 4, 3), mode="wrap"),
      S(np.array([1, 7], I32), np.array([9, 0], I32), dims=(2, 5), mode=("clip", "wrap"))],
     dtype_rule=index_rule, dtype_note=INDEX_NOTE, note="coordinates positional; mode='raise' is eager only")
case("unravel_index", nx.unravel_index, np.unravel_index,
     [S(np.array([0, 5, 11, 7], I32), shape=(3, 4)), S(np.array([[3, 23]], I32), shape=(2, 3, 4), order="F"),
      S(np.array(4, I32), shape=(5,))], dtype_rule=index_rule, dtype_note=INDEX_NOTE)

# -- insert, delete, vander
_r = _rng("delete")
case("delete", nx.delete, np.delete,
     [S(draw(_r, (3, 4), F64), obj=[0, 2], axis=1), S(draw(_r, (5,), I32), obj=-1),
      S(draw(_r, (2, 3), F64), obj=slice(1, None, 2)), S(draw(_r, (4, 2), F64), obj=[3, 0, 3], axis=0)],
     grad=True, note="static obj (kwarg); a traced obj needs assume_unique_indices=True")
case("delete(unique)", lambda x, obj, axis: nx.delete(x, obj, axis, assume_unique_indices=True),
     lambda x, obj, axis: np.delete(x, obj, axis),
     [S(draw(_r, (3, 4), F64), np.array([2, 0], I32), axis=1), S(draw(_r, (5,), I32), np.array([-1], I32), axis=0)],
     grad=True, note="assume_unique_indices=True (JAX's): obj traced, distinct and in range")
_r = _rng("insert")
case("insert", lambda x, values, obj, axis=None: nx.insert(x, obj, values, axis),
     lambda x, values, obj, axis=None: np.insert(x, obj, values, axis),
     [S(draw(_r, (3, 4), F64), draw(_r, (3,), F64), obj=1, axis=1),
      S(draw(_r, (5,), I32), np.array([7, 8, 9], I32), obj=[1, 1, 5]),
      S(draw(_r, (2, 3), F64), 2.5, obj=[-1, 0], axis=0),
      S(draw(_r, (2, 2), F32), draw(_r, (2, 1), F32), obj=[2], axis=1)],
     grad=True, diff_argnums=(0, 1), note="values positional, static obj (kwarg): the result's length depends on it")
case("insert(traced obj)", lambda x, obj, values, axis=None: nx.insert(x, obj, values, axis),
     lambda x, obj, values, axis=None: np.insert(x, obj, values, axis),
     [S(draw(_r, (3, 4), F64), np.array([4, 1, 1], I32), draw(_r, (3, 3), F64), axis=1),
      S(draw(_r, (5,), I32), np.array(-2, I32), np.array([7, 8], I32)),
      S(draw(_r, (2, 3), F64), np.array([1], I64), draw(_r, (2, 3), F64), axis=0)],
     grad=True, diff_argnums=(0, 2), note="obj a (traceable) array: the length depends on its shape alone")
_r = _rng("vander")
case("vander", nx.vander, np.vander,
     [S(draw(_r, (4,), F64)), S(draw(_r, (3,), F64), N=5, increasing=True), S(draw(_r, (3,), I32, "small"), N=3),
      S(draw(_r, (3,), F32), N=0)], grad=True,
     dtype_rule=lambda s, d: I32 if s.args[0].dtype == BOOL else s.args[0].dtype,
     dtype_note="x keeps its dtype (NumPy widens ints to int64 and float32 to float64)")
