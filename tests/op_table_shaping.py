"""Op-table rows of rune/nx/shaping.py: each case is checked eagerly against NumPy, under jit
against eager, its jvp/vjp against finite differences and under vmap against a loop."""
import numpy as np

from rune import nx

from op_table import *  # noqa: F401,F403  (case, the samplers, dtypes)
from op_table import NOT_OPS, _extend, _rng, _shape_samples

# Not ops on arrays: Python facts about an argument (shape, size, ndim, iterable, isscalar), constructors
# from host data or from a shape (frombuffer, fromiter, fromfunction, indices) and a function transform
# (vectorize). tests/nx/test_shaping.py checks them against NumPy, under jit and vmap.
NOT_OPS.update({"shape", "size", "ndim", "iterable", "isscalar", "frombuffer", "fromiter", "fromfunction",
                "indices", "vectorize"})


def _arrays(name, shapes_list, dtypes=(F64, I32), **kw):
    """One sample per (dtype, tuple of shapes): the operands are the positional arguments."""
    rng = _rng(name)
    return [S(*(draw(rng, s, d) for s in shapes), **kw) for d in dtypes for shapes in shapes_list]


def _sequence_case(name, shapes_list, extra=()):
    """A function of one sequence of arrays (hstack, block's rows, ...), its operands passed positionally."""
    nx_fn, np_fn = getattr(nx, name), getattr(np, name)
    case(name, lambda *xs, **kw: nx_fn(list(xs), **kw), lambda *xs, **kw: np_fn(list(xs), **kw),
         _arrays(name, shapes_list) + list(extra), grad=True, diff_argnums=(0, 1),
         note="operands are the positional arguments")


_MIXED = S(draw(_rng("stack mixed"), (3,), I32), draw(_rng("stack mixed"), (3,), F32))
_CAST = [S(draw(_rng("stack cast"), (2,), F64), draw(_rng("stack cast"), (2,), F64), dtype=I32, casting="unsafe"),
         S(draw(_rng("stack cast"), (2,), I8), draw(_rng("stack cast"), (2,), U8), dtype=F32)]
_sequence_case("hstack", [((3,), (2,)), ((2, 3), (2, 1)), ((), (2,)), ((2, 1, 3), (2, 2, 3))], [_MIXED, _CAST[0]])
_sequence_case("vstack", [((3,), (3,)), ((2, 3), (1, 3)), ((), ()), ((1, 2, 3), (2, 2, 3))], [_MIXED, _CAST[1]])
_sequence_case("dstack", [((3,), (3,)), ((2, 3), (2, 3)), ((2, 3, 1), (2, 3, 2))], [_MIXED])
_sequence_case("column_stack", [((3,), (3,)), ((3, 2), (3,)), ((0,), (0,))], [_MIXED])

for _name, _specs in (("atleast_1d", [((),), ((3,),), ((2, 3),), ((), (2,))]),
                      ("atleast_2d", [((),), ((3,),), ((2, 3, 4),), ((), (3,), (2, 3))]),
                      ("atleast_3d", [((),), ((3,),), ((2, 3),), ((2, 3, 4, 1),), ((3,), (2, 3))])):
    case(_name, getattr(nx, _name), getattr(np, _name), _arrays(_name, _specs), grad=True,
         diff_argnums=(0, 1), note="one array for one argument, else a list (NumPy: a tuple)")


def _nx_block(*xs, layout):
    return nx.block(_nest(layout, list(xs)))


def _np_block(*xs, layout):
    return np.block(_nest(layout, list(xs)))


def _nest(layout, xs):
    """The positional operands placed in the nested lists `layout` gives (a nested list of counts)."""
    return [_nest(e, xs) for e in layout] if isinstance(layout, list) else xs.pop(0)


case("block", _nx_block, _np_block,
     _arrays("block", [((2, 2), (2, 1), (1, 3))], layout=[[0, 0], [0]]) +
     _arrays("block", [((3,), (2,))], layout=[0, 0]) +
     _arrays("block", [((2,), (3, 2))], layout=[[0], [0]]) +
     [S(draw(_rng("block"), (2, 3), F64), layout=0)], grad=True, diff_argnums=(0, 1),
     note="operands are the positional arguments, nested by `layout`")

case("append", nx.append, np.append,
     _arrays("append", [((2, 3), (2,)), ((3,), ())]) + _arrays("append", [((2, 3), (1, 3))], axis=0) +
     [S(draw(_rng("append"), (3,), I32), draw(_rng("append"), (2,), F32))], grad=True, diff_argnums=(0, 1))

for _name, _specs in (
        ("array_split", [((7,), dict(indices_or_sections=3)), ((4, 5), dict(indices_or_sections=2, axis=1)),
                         ((6,), dict(indices_or_sections=[1, -2])), ((2,), dict(indices_or_sections=3))]),
        ("hsplit", [((6,), dict(indices_or_sections=3)), ((2, 4), dict(indices_or_sections=[1, 3]))]),
        ("vsplit", [((4, 2), dict(indices_or_sections=2)), ((3, 2, 2), dict(indices_or_sections=[1]))]),
        ("dsplit", [((2, 2, 4), dict(indices_or_sections=2)), ((1, 2, 3), dict(indices_or_sections=[2]))])):
    case(_name, getattr(nx, _name), getattr(np, _name), _shape_samples(_name, _specs), grad=True,
         note="returns a list")

case("fliplr", nx.fliplr, np.fliplr, _shape_samples("fliplr", [((3, 4), {}), ((2, 3, 2), {})]), grad=True)
case("flipud", nx.flipud, np.flipud, _shape_samples("flipud", [((5,), {}), ((3, 4), {})]), grad=True)
case("rot90", nx.rot90, np.rot90, _shape_samples("rot90", [
    ((3, 4), {}), ((3, 4), dict(k=2)), ((2, 3, 4), dict(k=-1, axes=(2, 0))), ((3, 4), dict(k=3, axes=(1, 0))),
    ((3, 4), dict(k=4))]), grad=True)
case("rollaxis", nx.rollaxis, np.rollaxis, _shape_samples("rollaxis", [
    ((2, 3, 4), dict(axis=2)), ((2, 3, 4), dict(axis=0, start=3)), ((2, 3, 4), dict(axis=-1, start=1)),
    ((2, 3, 4), dict(axis=1, start=-1))]), grad=True)
case("kron", nx.kron, np.kron,
     _arrays("kron", [((2, 3), (3, 2)), ((3,), (2,)), ((2,), (2, 2)), ((), (3,))]) +
     [S(draw(_rng("kron"), (2,), I32), draw(_rng("kron"), (2,), F32))], grad=True, diff_argnums=(0, 1))
case("resize", nx.resize, np.resize, _shape_samples("resize", [
    ((2, 3), dict(new_shape=(4, 4))), ((5,), dict(new_shape=3)), ((2, 3), dict(new_shape=(3, 2))),
    ((0,), dict(new_shape=(2,)))]), grad=True)
case("copy", nx.copy, np.copy, _shape_samples("copy", [((3, 4), {}), ((), {})], dtypes=(F64, I32, BOOL, BF16)),
     grad=True)


def _trim_zeros_ref(filt, trim="fb", axis=None):
    """NumPy's trim_zeros by its definition: along each axis, the all-zero slices at the trimmed ends
    dropped (np.trim_zeros takes a tuple of axes only from NumPy 2.3; Python 3.10 gets NumPy 2.2)."""
    filt = np.asarray(filt)
    axes = range(filt.ndim) if axis is None else np.atleast_1d(axis) % max(filt.ndim, 1)
    for a in axes:
        kept = np.flatnonzero(np.any(filt != 0, axis=tuple(b for b in range(filt.ndim) if b != a)))
        lo = kept[0] if kept.size and "f" in trim else 0
        hi = kept[-1] + 1 if kept.size and "b" in trim else filt.shape[a]
        filt = np.take(filt, np.arange(lo, hi) if kept.size else [], axis=a)   # all zeros: nothing left
    return filt


# Finite differences move the zeros off zero (the length jumps): tests/nx/test_shaping.py checks the gradient.
case("trim_zeros", nx.trim_zeros, _trim_zeros_ref,
     [S(np.array([0, 0, 1.5, 0, -2, 0], d), fd=False, **kw) for d in (F64, I32)
      for kw in ({}, dict(trim="f"), dict(trim="b"))] + [S(np.zeros(3, F64), fd=False)] +
     [S(np.pad(draw(_rng("trim_zeros"), (2, 3), d), ((1, 0), (2, 1))), fd=False, **kw) for d in (F64, BOOL)
      for kw in ({}, dict(axis=1), dict(trim="b", axis=(0, 1)))],
     grad=True, traced=False, note="a data-dependent length: exact eagerly, ConcretizationError under jit")

# nx.pad's modes beyond constant (rune/nx/padding.py); the "pad" row of op_table.py checks mode="constant".
_PAD_MODES = [("edge", ((1, 2), (0, 3)), {}), ("reflect", ((2, 1), (3, 0)), {}),
              ("reflect", 1, dict(reflect_type="odd")), ("symmetric", ((0, 2), (5, 1)), {}),
              ("wrap", ((1, 4), (2, 0)), {}), ("linear_ramp", ((2, 1), (1, 2)), dict(end_values=((1, -2), (3, 4)))),
              ("maximum", 1, {}), ("minimum", ((1, 0), (0, 2)), dict(stat_length=2)),
              ("mean", ((2, 2), (1, 0)), dict(stat_length=((1, 2), (3, 1)))), ("median", ((1, 1), (0, 1)), {})]
case("pad_modes", nx.pad, np.pad,
     [S(draw(_rng("pad " + mode), (3, 4), d), pad_width=pw, mode=mode, **kw)
      for i, (mode, pw, kw) in enumerate(_PAD_MODES) for d in ((F64, I32) if i % 3 == 0 else (F64,))],
     grad=True, note="np.pad's modes other than constant; ints round (mean, median) or floor (linear_ramp)")


def _np_where_sized(c, size, fill_value=0):
    """np.where(c) with JAX's size=/fill_value=: the first `size` indices, padded with fill_value."""
    return tuple(np.concatenate([i[:size], np.full(max(size - len(i), 0), fill_value)]).astype(np.int32)
                 for i in np.where(c))


# The one-argument where(cond) = nonzero(cond); size= fixes its shape, so it also runs under jit.
case("where_one_argument", lambda c, **kw: nx.where(c, **kw), _np_where_sized,
     [S(draw(_rng("where1"), (3, 4), d), size=k, **kw) for d, k, kw in
      ((BOOL, 5, {}), (F64, 14, dict(fill_value=-1)), (I32, 2, {}))], dtype_rule=index_rule,
     note="where(cond) is nonzero(cond); tests/nx/test_shaping.py checks the unsized form eagerly")

# Further dtypes: bools, unsigned and narrow floats, complex (a few samples each, for every path).
_r = _rng("shaping dtypes")
for _name, _samples in (
        ("hstack", [S(draw(_r, (3,), BOOL), draw(_r, (2,), BOOL)), S(draw(_r, (2, 2), BF16), draw(_r, (2, 1), BF16))]),
        ("vstack", [S(draw(_r, (3,), C128), draw(_r, (3,), F64))]),
        ("append", [S(draw(_r, (3,), U8), draw(_r, (2,), BOOL))]),
        ("kron", [S(draw(_r, (2,), C128), draw(_r, (2, 2), C128)), S(draw(_r, (2,), BOOL), draw(_r, (3,), BOOL))]),
        ("rot90", [S(draw(_r, (3, 4), BF16)), S(draw(_r, (2, 3), C128), k=3)]),
        ("resize", [S(draw(_r, (2, 2), C128), new_shape=(3, 3)), S(draw(_r, (3,), BOOL), new_shape=(2, 4))]),
        ("array_split", [S(draw(_r, (5,), C64), indices_or_sections=2), S(draw(_r, (4,), U16), indices_or_sections=3)]),
        ("pad_modes", [S(draw(_r, (3, 4), C128), pad_width=2, mode="reflect", reflect_type="odd"),
                       S(draw(_r, (3, 4), F64), pad_width=((5, 7), (0, 4)), mode="symmetric", reflect_type="odd"),
                       S(draw(_r, (3, 4), I8), pad_width=((6, 1), (2, 5)), mode="reflect", reflect_type="odd"),
                       S(draw(_r, (2, 3), F64), pad_width=((1, 2), (2, 1)), mode="constant",
                         constant_values=((1.5, -2), (3, 4))),
                       S(draw(_r, (2, 3), I32), pad_width=1, mode="constant", constant_values=(1, 2)),
                       S(draw(_r, (3, 4), F32), pad_width=((1, 2), (2, 1)), mode="mean"),
                       S(draw(_r, (3, 4), U8), pad_width=1, mode="linear_ramp", end_values=3),
                       S(draw(_r, (4,), BOOL), pad_width=3, mode="wrap")])):
    _extend(_name, _samples)
