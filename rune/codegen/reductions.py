"""Reductions in C-style kernels: what each combines with, and the one order it combines in.

- the reducers (`REDUCERS`: initial value and update per `reduce_*` op, with a NaN flag for
  float max/min; `ARG_REDUCERS`: argmax/argmin's comparison);
- the one order every reduction combines its elements in, whatever the threads or the grid
  (below): fixed blocks (`REDUCE_BLOCK`), lanes (`REDUCE_LANES`) and trees; float and
  complex sums' block partials widened (`WideSum`); `Fold`, one reduction node as that
  order accumulates it; `FoldPlan`/`fold_plan`, a row's blocks in aligned runs for
  workers; `tree_push`, `tree_total`, `lane_tree`, the lines of the trees.

The dialects write the loops around these (rune/codegen/cstyle.py `CStyle.fold_blocks`,
rune/codegen/c.py, rune/codegen/cuda.py).
"""
from typing import NamedTuple

import numpy as np

from . import complexc
from .expressions import kind, uwide, wrap_int
from .kernel import Const

# Reductions: (initial value, update of `acc` by `v`, whether a NaN flag rides along).
# Float max/min ignore NaN in their (vectorised) lanes and a flag remembers whether
# one was seen: the result is then NaN, as NumPy's. The order they fold in: below.
def _reducer(init, update, nan=False):
    def rule(r, dtype, acc, v):
        k = kind(dtype)
        return init(r, dtype, k), update(r, dtype, k, acc, v), nan and k in "hf"
    return rule


def _extreme_init(sign):
    def init(r, dtype, k):
        if k in "hf":
            return f"({'-' if sign < 0 else ''}INFINITY)"
        if k == "b":
            return "0" if sign < 0 else "1"
        info = np.iinfo(dtype)
        return r.const(Const(info.min if sign < 0 else info.max, dtype), dtype)
    return init


def _extreme_update(cmp):
    def update(r, dtype, k, acc, v):
        return f"(({v} {cmp} {acc}) ? {v} : {acc})"
    return update


def _fold(op, bool_op):
    def update(r, dtype, k, acc, v):
        if k in "hf":
            return f"({acc} {op} {v})"
        if k == "b":
            return f"({acc} {bool_op} {v})"
        u = uwide(dtype)
        return wrap_int(r, dtype, f"({u})({acc}) {op} ({u})({v})")
    return update


def _complex_sum(real_rule):
    """A complex sum folds with complexc's add."""
    def rule(r, dtype, acc, v):
        if kind(dtype) == "c":
            return (*complexc.sum_reducer(r, dtype, acc, v), False)
        return real_rule(r, dtype, acc, v)
    return rule


REDUCERS = {
    "reduce_sum": _complex_sum(_reducer(lambda r, d, k: "0", _fold("+", "|"))),
    "reduce_prod": _reducer(lambda r, d, k: "1", _fold("*", "&")),
    "reduce_max": _reducer(_extreme_init(-1), _extreme_update(">"), nan=True),
    "reduce_min": _reducer(_extreme_init(1), _extreme_update("<"), nan=True),
}

# ---------------------------------------------------------------- the reduction order
# Every reduction combines its elements in one order that depends on the reduced
# length n alone (docs/design.md, "One result per program"), the same in C on any number of OpenMP threads and in
# CUDA under any grid:
#
# - blocks: elements j of the row-major flat reduced index in blocks of REDUCE_BLOCK
#   (the last one shorter);
# - lanes: in a block, lane l (of REDUCE_LANES) folds the block's elements j = l
#   (mod REDUCE_LANES) in index order, from the reducer's identity, in the compute
#   type (a CPU's vector lanes; a warp's threads, reading coalesced);
# - the lane tree: lane l takes lane l + s for s = 16, 8, 4, 2, 1 (a warp's
#   shuffle-down tree); lane 0 holds the block's partial;
# - the block tree: the partials (float and complex sums widened first: `WideSum`, so
#   a row's rounding error is that of one block however long the row) combine
#   pairwise, p[i] = p[i] + p[i + s] for s = 1, 2, 4, ... at every i a multiple of
#   2s. Any aligned run of a power of two of blocks is a subtree of it: threads and GPU
#   blocks each take such runs, and their partials combine by the same tree, so how
#   the work is split never changes the bits (`FoldPlan`).
#
# The tree is computed streaming (`tree_push`): a stack of the subtrees done so far,
# the incoming partial of block b merged with the top once per trailing one bit of b.
# A reduction's identity is exact under its combination (x + 0, x * 1, max(x, -inf)),
# and no partial is ever -0.0 (every sum starts from +0.0), so a lane or tree slot
# holding the identity changes nothing. Arg reductions keep a (value, index) pair
# whose combination gives NumPy's first extreme whatever the order.
REDUCE_BLOCK = 512
REDUCE_LANES = 32


class WideSum:
    """The wide type a float or complex sum's block partials combine in: its C type
    `ctype` and `init`; `widen(part)` a block's partial (of the compute type) in it,
    `join(a, b)` two partials' sum, `narrow(wide)` the total back in the compute type."""

    def __init__(self, r, dtype):
        self.struct = complexc.struct(dtype) if kind(dtype) == "c" else None
        self.compute = r.compute_type(dtype)
        if self.struct:
            self.ctype, self.init, self.dtype = "rn_c128", "rn_c128_make(0, 0)", np.dtype(np.complex128)
        else:
            self.ctype, self.init, self.dtype = "double", "0", np.dtype(np.float64)

    def widen(self, part):
        if self.struct is None:
            return f"((double){part})"
        if self.struct != "rn_c128":
            return f"rn_c128_make({part}.re, {part}.im)"
        return part

    def join(self, a, b):
        return f"({a} + {b})" if self.struct is None else f"rn_c128_add({a}, {b})"

    def narrow(self, wide):
        if self.struct is None:
            return f"(({self.compute}){wide})"
        if self.struct != "rn_c128":
            return f"{self.struct}_make((float){wide}.re, (float){wide}.im)"
        return wide


def wide_sum(r, op, dtype):
    """The `WideSum` a reduction `op` of `dtype` combines its blocks in, or None where
    its partials keep the compute type (every reduction but float and complex sums)."""
    return WideSum(r, dtype) if op == "reduce_sum" and kind(dtype) in "hfc" else None


class Fold:
    """One reduction node (`reduce_*`) of a kernel, number `k`, folding the C value
    `value`, as the fixed order accumulates it: lanes of the compute type `ctype`
    (from `init`, by `update`), partials of the type `part` (`widen`ed from a lane,
    combined by `join`), a NaN flag where NaN must win over a vectorised max/min."""

    def __init__(self, r, k, node, value):
        self.r, self.k, self.node, self.value = r, k, node, value
        self.init, _, self.nan = REDUCERS[node.op](r, node.dtype, "a", "v")
        self.ctype = r.compute_type(node.dtype)
        self.wide = wide_sum(r, node.op, node.dtype)
        self.part = self.wide.ctype if self.wide else self.ctype
        self.part_dtype = self.wide.dtype if self.wide else (
            np.dtype(np.float32) if kind(node.dtype) == "h" else node.dtype)

    def update(self, acc, v):
        """`acc` folded with `v` (lane by element, or left lane by right lane)."""
        return REDUCERS[self.node.op](self.r, self.node.dtype, acc, v)[1]

    def widen(self, lane):
        return self.wide.widen(lane) if self.wide else lane

    def join(self, left, right):
        """Two partials of the block tree, `left` the earlier blocks'."""
        return self.wide.join(left, right) if self.wide else self.update(left, right)

    def final(self, part, nan):
        """The statement of the result r<k> from the row's partial and NaN flag."""
        result = self.wide.narrow(part) if self.wide else part
        if self.nan:
            result = f"({nan} ? ({self.ctype})NAN : {result})"
        return f"const {self.ctype} r{self.k} = {self.r.rounded(self.node.dtype, result)};"


class FoldPlan(NamedTuple):
    """How a row of `n` elements is worked through: `blocks` blocks, in `groups` runs
    of `span` blocks each (a power of two; the last run shorter), each run a subtree
    of the block tree that one worker folds. `depth`: the tree stack a run needs."""
    n: int
    blocks: int
    span: int
    groups: int

    @property
    def depth(self):
        return tree_depth(self.span)


def tree_depth(leaves):
    """The most subtrees `tree_push`'s stack holds over `leaves` partials."""
    return max(1, int(leaves).bit_length())


def fold_plan(n, most_groups=1):
    """The `FoldPlan` of `n` elements in at most `most_groups` runs."""
    blocks = max(1, -(-n // REDUCE_BLOCK))
    span = 1
    while -(-blocks // span) > most_groups:
        span *= 2
    return FoldPlan(n, blocks, span, -(-blocks // span))


def tree_push(folds, index, values, stack="stk", top="top", at=""):
    """Lines pushing each fold's partial `values[i]` (a variable, replaced by the
    result) of block `index` (counted from its run's first) onto the tree stacks:
    merged with the top once per trailing one bit of `index`. `at` subscripts each
    stack slot (a column's)."""
    merge = [f"{v} = {f.join(f'{stack}{f.k}[{top}]{at}', v)};" for f, v in zip(folds, values)]
    lines = [f"for (int64_t m = (int64_t)({index}); m & 1; m >>= 1) {{", f"  --{top};"]
    lines += ["  " + x for x in merge] + ["}"]
    lines += [f"{stack}{f.k}[{top}]{at} = {v};" for f, v in zip(folds, values)]
    return lines + [f"++{top};"]


def tree_total(folds, targets, stack="stk", top="top", at=""):
    """Lines setting `targets[i]` to fold i's stack combined (the tree's unfinished
    right edge, the latest subtree innermost)."""
    lines = [f"{t} = {stack}{f.k}[{top} - 1]{at};" for f, t in zip(folds, targets)]
    lines += [f"for (int s = {top} - 2; s >= 0; --s) {{"]
    lines += [f"  {t} = {f.join(f'{stack}{f.k}[s]{at}', t)};" for f, t in zip(folds, targets)]
    return lines + ["}"]


def lane_tree(folds, lane="lane"):
    """Lines combining each fold's REDUCE_LANES lanes (and NaN flags) into lane 0 (the
    halving tree), a loop of a constant count per level (so a compiler vectorises the
    wide ones)."""
    lines = []
    s = REDUCE_LANES // 2
    while s:
        lines += ["#pragma omp simd", f"for (int ln = 0; ln < {s}; ln++) {{"]
        lines += [f"  {lane}{f.k}[ln] = {f.update(f'{lane}{f.k}[ln]', f'{lane}{f.k}[ln + {s}]')};" for f in folds]
        lines += [f"  nanl{f.k}[ln] |= nanl{f.k}[ln + {s}];" for f in folds if f.nan]
        lines.append("}")
        s //= 2
    return lines


# Arg reductions: the comparison that makes a later value the new extreme. The
# first extreme wins (strict comparison); a NaN beats everything but an earlier NaN.
ARG_REDUCERS = {"argmax": ">", "argmin": "<"}
REDUCE_NODES = frozenset(REDUCERS) | frozenset(ARG_REDUCERS)
