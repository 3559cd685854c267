"""Float sums and products in rune's reduction order, written once on any array module.

The compiled kernels (C on any number of threads, CUDA on any grid) combine a
reduction's elements in one order fixed by the reduced length n alone
(rune/codegen/reductions.py, "the reduction order"; docs/design.md, "One result per
program"). Eager primitives and op-by-op stretches run here in that same order, so a
program's bits do not depend on whether a stretch was compiled, on its size class or
on eager vs jit:

- the reduced axes (in their order) flattened to one index j of length n, cut into
  blocks of REDUCE_BLOCK elements (the last one shorter: the identity fills it);
- a block is REDUCE_BLOCK // REDUCE_LANES steps of REDUCE_LANES lanes: lane l folds
  the block's elements j = l (mod REDUCE_LANES) in index order, from the identity,
  in the compute type (float32 for float16/bfloat16);
- the lanes' halving tree: lane l takes lane l + s for s = 16, 8, 4, 2, 1;
- the blocks' pairwise tree (p[i] += p[i + s] at every i a multiple of 2s, for
  s = 1, 2, 4, ...), a sum's partials widened first (float64, complex128); the total
  narrowed to the compute type and rounded once to a 16-bit float.

The identity fills a short block exactly (x + 0 and x * 1 are x for every partial: a
sum's never is -0.0, since every lane starts from +0.0), and an odd level of the
block tree carries its last partial up unchanged, as the kernels' stack does.

`ordered(xp, op, x, axes)` returns the reduction of the raw array `x` (NumPy or CuPy)
over `axes`; `SERVED` names the primitives and dtypes it serves (float and complex
sums, float products; integer sums are exact in any order and max/min need none), and
`wrap(xp, impls)` puts it in the eager primitive table.
"""
import math
import threading

import ml_dtypes
import numpy as np

from ..codegen.reductions import REDUCE_BLOCK, REDUCE_LANES
from . import float_semantics
from .cpu.address import address

STEPS = REDUCE_BLOCK // REDUCE_LANES
F32 = np.dtype(np.float32)


class _Rule:
    """How one reduction combines: `combine(xp)` the binary ufunc, `identity`, and
    `wide(dtype)` the dtype its block partials combine in (None: the compute type)."""

    def __init__(self, ufunc, identity, wide):
        self.ufunc, self.identity, self.wide = ufunc, identity, wide

    def combine(self, xp):
        return getattr(xp, self.ufunc)


def _sum_wide(dtype):
    return np.dtype(np.complex128) if dtype.kind == "c" else np.dtype(np.float64)


RULES = {
    "reduce_sum": _Rule("add", 0, _sum_wide),
    "reduce_prod": _Rule("multiply", 1, lambda dtype: None),
}


def _served(op):
    """The dtypes `op` runs here for: float sums and products, complex sums (the
    kernels' complex sums add the parts; they compute no complex products)."""
    floats = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), F32, np.dtype(np.float64))
    return frozenset(floats + ((np.dtype(np.complex64), np.dtype(np.complex128)) if op == "reduce_sum" else ()))


SERVED = {op: _served(op) for op in RULES}


def wrap(xp, impls):
    """The eager primitive table's `reduce_sum` and `reduce_prod` (rune/backends/array_impls.py)
    in rune's order for the dtypes `SERVED` names, `impls`' own for the rest."""
    return {op: _replacement(xp, op, impls[op]) for op in RULES if op in impls}


def _replacement(xp, op, before):
    served = SERVED[op]

    def run(x, *, axes):
        if x.dtype not in served or not axes:   # nothing reduced: the array as it is
            return before(x, axes=axes)
        return ordered(xp, op, x, axes)
    return run


def ordered(xp, op, x, axes):
    """`op` ("reduce_sum" or "reduce_prod") of the raw array `x` over `axes` in rune's
    order: an array of x's dtype and shape without `axes`."""
    dtype = x.dtype
    compute = float_semantics.widened(dtype)
    if len(axes) == x.ndim:             # the whole array: one row
        kept, x3 = (), None
    else:
        axes = tuple(sorted(a % x.ndim for a in axes))
        kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        x3 = _three_axes(xp, x, axes)
    entry = _BUILT.get((op, compute), False) if xp is np else None
    if entry is False:
        entry = _entry(op, compute) if compute in HOST_DTYPES else None
    if entry is not None and (x3 is None or x3.shape[2] < HOST_COLUMNS):
        total = _host_totals(entry, x.reshape(1, x.size) if x3 is None else _rows(x3), compute, kept)
    else:
        with np.errstate(all="ignore"):     # overflow to inf, inf - inf: the values, not an error
            x3 = x.reshape(1, x.size, 1) if x3 is None else x3
            total = _fold(xp, RULES[op], x3.astype(compute, copy=False), compute).reshape(kept)
    if dtype != compute:
        total = float_semantics.narrowed(xp, total, dtype)
    return total


def _three_axes(xp, x, axes):
    """`x` as (before, reduced, after): the reduced axes (in order) flattened to the
    middle one, moved behind the others where they are not adjacent."""
    first, last = axes[0], axes[-1] + 1
    if last - first != len(axes):
        x = xp.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
        first, last = x.ndim - len(axes), x.ndim
    shape = x.shape
    return x.reshape(math.prod(shape[:first]), math.prod(shape[first:last]), math.prod(shape[last:]))


def _fold(xp, rule, x3, compute):
    """(before, n, after) -> (before, after) totals in `compute`, each over its n
    elements in the order of the module docstring (vectorised over the other two axes:
    the array module's inner loops run along `after` and the lanes, contiguous)."""
    m, n, k = x3.shape
    full = n - n % REDUCE_BLOCK
    combine = rule.combine(xp)
    parts = []
    if full:
        blocks = x3[:, :full].reshape(m, full // REDUCE_BLOCK, STEPS, REDUCE_LANES, k)
        parts.append(_lane_tree(combine, _steps(xp, rule, blocks)))
    if full < n or not n:
        parts.append(_lane_tree(combine, _short_block(xp, rule, x3[:, full:], compute)[:, None]))
    wide = rule.wide(compute)
    parts = [p.astype(wide) for p in parts] if wide is not None else parts
    partials = parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=1)
    return _block_tree(xp, combine, partials).astype(compute)


def _steps(xp, rule, blocks):
    """(m, nb, steps, LANES, k) blocks -> (m, nb, LANES, k) lanes, each from the identity
    through its steps in index order. NumPy reduces a middle axis in index order, in
    one call (from the first step instead of the identity, which changes a sum's lane
    only by the sign of a zero: added to +0.0 after); other modules' reductions are
    trees, so their steps are added one by one."""
    combine = rule.combine(xp)
    identity = blocks.dtype.type(rule.identity)
    if xp is np:
        return combine(combine.reduce(blocks, axis=2), identity)
    lanes = combine(identity, blocks[:, :, 0])
    for step in range(1, blocks.shape[2]):
        combine(lanes, blocks[:, :, step], out=lanes)
    return lanes


def _short_block(xp, rule, rest, compute):
    """(m, t, k), t < REDUCE_BLOCK elements -> (m, LANES, k) lanes: the whole steps,
    then the last one's first lanes (the lanes past the end keep the identity)."""
    m, t, k = rest.shape
    whole, r = divmod(t, REDUCE_LANES)
    if whole:
        lanes = _steps(xp, rule, rest[:, :whole * REDUCE_LANES].reshape(m, 1, whole, REDUCE_LANES, k))[:, 0]
    else:
        lanes = xp.full((m, REDUCE_LANES, k), rule.identity, compute)
    if r:
        rule.combine(xp)(lanes[:, :r], rest[:, whole * REDUCE_LANES:], out=lanes[:, :r])
    return lanes


def _lane_tree(combine, lanes):
    """(m, nb, LANES, k) lanes -> (m, nb, k) block partials: lane l takes lane l + s,
    s = 16, 8, 4, 2, 1."""
    s = REDUCE_LANES // 2
    while s:
        lanes = combine(lanes[:, :, :s], lanes[:, :, s:2 * s])
        s //= 2
    return lanes[:, :, 0]


def _block_tree(xp, combine, partials):
    """(m, nb, k) partials -> (m, k) totals, combined pairwise: neighbours first, an odd
    level's last partial carried up as it is."""
    while partials.shape[1] > 1:
        nb = partials.shape[1]
        pairs = combine(partials[:, 0:nb - 1:2], partials[:, 1::2])
        if nb % 2:
            pairs = xp.concatenate([pairs, partials[:, nb - 1:]], axis=1)
        partials = pairs
    return partials[:, 0]


# ---------------------------------------------------------------- the host's compiled fold
# NumPy's loops over (blocks, LANES) slices cost a call per 32 elements (a 1e6-element
# float32 sum ~4.7x np.sum), so on the host the order runs as one C unit per
# reduction and compute type, its lines written by rune/codegen/reductions.py's
# `Fold`, `lane_tree`, `tree_push` and `tree_total`: the very order of the kernels,
# over rows of a length given at run time (one build for every shape, cached on
# disk like every unit). Without a C compiler the array-module fold above runs.

HOST_DTYPES = (F32, np.dtype(np.float64))
# From this many elements after the reduced ones (a reduction over leading axes: the
# columns of a matrix), the array-module fold runs instead, its inner loops along those
# contiguous elements: the compiled fold would first copy the array transposed.
HOST_COLUMNS = 64
_LOCK = threading.Lock()
_BUILT = {}   # (op, compute dtype) -> entry, or None without a compiler
_ARGS = threading.local()


class _Node:
    """What `Fold` reads of a reduction node: its op and dtype."""

    def __init__(self, op, dtype):
        self.op, self.dtype = op, dtype


def _unit(op, dtype):
    """The C unit `<name>_run(b)`, b = (x, y, rows, n) (the counts as values):
    y[r] = op over x[r * n:(r + 1) * n]."""
    from ..codegen import reductions
    from ..codegen.c import CDialect
    r = CDialect()
    fold = reductions.Fold(r, 0, _Node(op, dtype), "x[jj + ln]")
    ctype, w, b = fold.ctype, REDUCE_LANES, REDUCE_BLOCK
    name = f"rn_ordered_{op}_{dtype.name}"
    element = f"lane0[ln] = {fold.update('lane0[ln]', 'x[jj + ln]')};"
    block = [f"const int64_t jb = bk * {b}, je = jb < n - {b} ? jb + {b} : n;",
             f"{ctype} lane0[{w}];",
             f"for (int ln = 0; ln < {w}; ln++) lane0[ln] = {fold.init};",
             "int64_t jj = jb;",
             f"for (; je - jj >= {w}; jj += {w}) {{", "#pragma omp simd",
             f"  for (int ln = 0; ln < {w}; ln++) {element}", "}",
             "for (int ln = 0; ln < (int)(je - jj); ln++) " + element,
             *reductions.lane_tree([fold]),
             f"{fold.part} w0 = {fold.widen('lane0[0]')};",
             *reductions.tree_push([fold], "bk", ["w0"])]
    row = [f"const {ctype} *x = xs + row * n;",
           f"{fold.part} stk0[64], pt0;", "int top = 0;",   # a subtree per bit of the block count
           "const int64_t blocks = n > 0 ? (n + %d) / %d : 1;" % (b - 1, b),
           "for (int64_t bk = 0; bk < blocks; bk++) {", *["  " + x for x in block], "}",
           *reductions.tree_total([fold], ["pt0"]),
           fold.final("pt0", "0"), "y[row] = r0;"]
    text = "\n".join([f"void {name}_run(void **b) {{",
                      f"  const {ctype} *xs = (const {ctype} *)b[0];",
                      f"  {ctype} *y = ({ctype} *)b[1];",
                      "  const int64_t rows = (int64_t)b[2], n = (int64_t)b[3];",
                      "  for (int64_t row = 0; row < rows; row++) {",
                      *["    " + x for x in row], "  }", "}", ""])
    return name, text, ()


def _entry(op, dtype):
    """The compiled fold of `op` over `dtype` (None without a C compiler); every one is
    built on the first call, in one batch."""
    entry = _BUILT.get((op, dtype), False)
    if entry is not False:
        return entry
    with _LOCK:
        if (op, dtype) not in _BUILT:
            from ..codegen.c import CDialect
            from .cpu import compiler
            path = compiler.find()
            keys = [(o, d) for o in RULES for d in HOST_DTYPES]
            units = [_unit(o, d) for o, d in keys]
            entries = compiler.build(path, CDialect().prelude(), units) if path else [None] * len(keys)
            _BUILT.update(zip(keys, entries))
        return _BUILT[(op, dtype)]


def _rows(x3):
    """(before, n, after) as (before * after, n) rows, in the order of the result."""
    m, n, k = x3.shape
    return x3.reshape(m, n) if k == 1 else x3.transpose(0, 2, 1).reshape(m * k, n)


def _host_totals(entry, rows, compute, shape):
    """(m, n) rows -> their m totals, as an array of `shape`, through the compiled fold
    `entry`. Its arguments go in a per-thread int64 array (making one, or ctypes
    objects, costs microseconds: more than a small sum)."""
    rows = np.ascontiguousarray(rows, compute)
    out = np.empty(shape, compute)
    try:
        args, at = _ARGS.args
    except AttributeError:
        args = np.zeros(4, np.int64)
        _ARGS.args = args, at = args, address(args)
    args[0], args[1], args[2], args[3] = address(rows), address(out), rows.shape[0], rows.shape[1]
    entry(at)
    return out
