"""The dialect-independent core of rune's C-style kernel renderers.

What the C dialect (rune/codegen/c.py) and the CUDA dialect (rune/codegen/cuda.py)
share, written once:

- the IR op vocabulary (`UNARY_OPS`, `BINARY_OPS`, ..., `ELEMENTWISE_OPS`,
  `REDUCE_OPS`): every op a kernel `Node` may carry;
- the expression rules (`RULES`, keyed by op): each spells one node as a C
  expression, with NumPy's semantics written out where C differs:
  NaN-propagating max/min, round half to even, float->int conversions as rune
  defines them (saturating, NaN -> 0; one rounding into 16-bit floats),
  integer division and remainder by zero, Python-signed floor division and
  remainder, shifts wider than the type, float16/bfloat16 computed in float32
  and rounded to their format after every operation (so a fused chain gives
  the eager bits); complex values through rune/codegen/complexc.py;
- the reductions (`REDUCERS`, `ARG_REDUCERS`) and the one order every reduction
  combines its elements in, whatever the threads or the grid: fixed blocks, lanes
  and trees, float sums' blocks widened (`REDUCE_BLOCK`, `Fold`, `fold_plan`,
  `CStyle.fold_blocks`);
- `CStyle`, the base of both dialects: types, constants, loads and stores,
  a kernel's statements and phases, the loops of a reduction (`reduction_layout`),
  and `can_render`, the question a planner asks before it fuses a node;
- index math (`collapse`, `nest`, `offset`, `condition`, `guarded_axes`) and the
  exact-semantics C helpers both preludes include (`c_helpers`, `index_helpers`).

Rendering is a pure function of the IR: a dialect object holds only its
configuration, every per-kernel value (names, index expressions) is passed
per call, and the IR kernels are never written into (`render_unit` returns
copies in a `RenderedUnit`), so any thread may render with a shared dialect.
Nothing here imports the backends or the compiler.
"""
import hashlib
import math
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from . import complexc
from .kernel import Const, Node, contiguous_strides

# ---------------------------------------------------------------- the IR op vocabulary
# Per-point ops (one `Node` per point; a primitive's name where it is one, so an
# elementwise primitive `p` becomes the node op `p.ir_op`). Arities are fixed.
UNARY_OPS = ("neg", "exp", "log", "log1p", "expm1", "log2", "log10", "sqrt", "rsqrt",
             "sin", "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos", "atan",
             "asinh", "acosh", "atanh", "erf", "logistic", "floor", "ceil", "round", "trunc",
             "sign", "abs", "not", "stop_gradient", "real", "imag", "conj")
BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "rem", "pow", "max", "min", "atan2",
              "hypot", "copysign", "logaddexp", "nextafter", "and", "or", "xor",
              "shift_left", "shift_right", "complex")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
PREDICATE_OPS = ("isnan", "isfinite")
SELECT_OP, CONVERT_OP = "select", "convert"   # select(pred, on_true, on_false); convert to the node's dtype
ELEMENTWISE_OPS = UNARY_OPS + BINARY_OPS + COMPARE_OPS + PREDICATE_OPS + (SELECT_OP, CONVERT_OP)
# Ops of the point's index (rune/codegen/kernel.py): `index` (no operands) and
# `random_bits` (key words k0, k1 and the counter).
INDEX_OP, RANDOM_BITS_OP = "index", "random_bits"
# Reductions: nodes evaluated by a kernel's inner loop over its reduced axes.
REDUCE_OPS = ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")
ARG_REDUCE_OPS = ("argmax", "argmin")

ARITY = {**dict.fromkeys(UNARY_OPS + PREDICATE_OPS + (CONVERT_OP,), 1),
         **dict.fromkeys(BINARY_OPS + COMPARE_OPS, 2), SELECT_OP: 3,
         INDEX_OP: 0, RANDOM_BITS_OP: 3}

BOOL = np.dtype(bool)


def kind(dtype):
    """b (bool), i (signed), u (unsigned), h (16-bit floats: f16/bf16), f (f32/f64),
    c (complex64/complex128)."""
    if dtype == BOOL:
        return "b"
    if dtype.kind in "iuc":
        return dtype.kind
    if dtype.itemsize == 2:
        return "h"
    return "f"


def is_float(dtype):
    """Real floating point (16-bit ones included)."""
    return kind(dtype) in "hf"


# ---------------------------------------------------------------- expression rules
# Each rule: (renderer, node, args as C expressions, arg dtypes) -> C expression,
# or None where the op is not rendered for these dtypes (the planner then leaves
# it to the eager backend). `CStyle.can_render` asks the same rules.

def _unary_float(fname):
    def rule(r, node, a, dts):
        return f"{r.math(fname, node.dtype)}({a[0]})" if is_float(node.dtype) else None
    return rule


def _wrap_int(r, dtype, expr):
    """An integer expression computed in a wide unsigned type, cast back (wraps as NumPy)."""
    return f"(({r.ctype(dtype)})({expr}))"


def _uwide(dtype):
    return "uint64_t" if dtype.itemsize == 8 else "uint32_t"


def _arith(op, bool_op):
    def rule(r, node, a, dts):
        k = kind(node.dtype)
        if k in "hf":
            return f"({a[0]} {op} {a[1]})"
        if k in "iu":
            u = _uwide(node.dtype)
            return _wrap_int(r, node.dtype, f"({u})({a[0]}) {op} ({u})({a[1]})")
        return None if bool_op is None else f"({a[0]} {bool_op} {a[1]})"
    return rule


def _neg(r, node, a, dts):
    k = kind(node.dtype)
    if k in "hf":
        return f"(-{a[0]})"
    if k in "iu":
        return _wrap_int(r, node.dtype, f"0u - ({_uwide(node.dtype)})({a[0]})")
    return None


def _div(r, node, a, dts):
    return f"({a[0]} / {a[1]})" if is_float(node.dtype) else None


def _helper(prefix, kinds):
    """A prelude helper per C type: rn_<prefix>_<ctype>(a, b)."""
    def rule(r, node, a, dts):
        if kind(node.dtype) not in kinds:
            return None
        return f"rn_{prefix}_{r.compute_name(node.dtype)}({a[0]}, {a[1]})"
    return rule


def _pow(r, node, a, dts):
    k = kind(node.dtype)
    if k in "iu":   # exponents are known non-negative (fuse.lowerable): NumPy raises on negative ones
        return f"(({r.ctype(node.dtype)})rn_powu64((uint64_t)({a[0]}), (uint64_t)({a[1]})))"
    return f"{r.math('pow', node.dtype)}({a[0]}, {a[1]})" if k in "hf" else None


def _index(r, node, a, dts):
    # its one "argument" is the point's linear index as the loop form spells it (`statements`)
    return f"((int64_t)({a[0]}))"


def _random_bits(r, node, a, dts):
    """Threefry-2x32 of the counter: y0's low bits, or y0:y1 for 64-bit draws (the
    node's unsigned dtype is as wide as its `width`)."""
    bits = f"rn_threefry({a[0]}, {a[1]}, (uint64_t)({a[2]}))"
    if node.dtype.itemsize == 8:
        return bits
    return f"(({r.ctype(node.dtype)})({bits} >> 32))"


def _extremum(cmp):
    def rule(r, node, a, dts):
        if is_float(node.dtype):
            # NaN wins. On equal values (+-0) NumPy's float32/float64 loops return the
            # second operand and its float16 loop the first.
            c = cmp + "=" if node.dtype == np.dtype("float16") else cmp
            return f"(({a[0]} {c} {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})"
        return f"(({a[0]} {cmp} {a[1]}) ? {a[0]} : {a[1]})"
    return rule


def _bitwise(op):
    def rule(r, node, a, dts):
        k = kind(node.dtype)
        if k == "b":
            return f"({a[0]} {op} {a[1]})"
        return _wrap_int(r, node.dtype, f"({a[0]}) {op} ({a[1]})") if k in "iu" else None
    return rule


def _shift_left(r, node, a, dts):
    if kind(node.dtype) not in "iu":
        return None
    bits, u = 8 * node.dtype.itemsize, _uwide(node.dtype)
    return (f"(((uint64_t)({a[1]}) < {bits}u) ? "
            f"{_wrap_int(r, node.dtype, f'({u})({a[0]}) << ({a[1]})')} : 0)")


def _shift_right(r, node, a, dts):
    k = kind(node.dtype)
    if k not in "iu":
        return None
    bits = 8 * node.dtype.itemsize
    wide = f"{_wrap_int(r, node.dtype, f'({a[0]}) >> ({a[1]})')}"
    past = f"(({a[0]}) < 0 ? -1 : 0)" if k == "i" else "0"
    return f"(((uint64_t)({a[1]}) < {bits}u) ? {wide} : {past})"


def _compare(op):
    def rule(r, node, a, dts):
        return f"({a[0]} {op} {a[1]})"
    return rule


def _not(r, node, a, dts):
    k = kind(node.dtype)
    if k == "b":
        return f"(!{a[0]})"
    return _wrap_int(r, node.dtype, f"~({a[0]})") if k in "iu" else None


def _abs(r, node, a, dts):
    k = kind(node.dtype)
    if k in "hf":
        return f"{r.math('fabs', node.dtype)}({a[0]})"
    if k == "i":
        return f"(({a[0]}) < 0 ? {_neg(r, node, a, dts)} : ({a[0]}))"
    return a[0]


def _sign(r, node, a, dts):
    k = kind(node.dtype)
    t = r.compute_type(node.dtype)
    if k in "hf":  # NaN stays NaN; -0.0 gives +0.0 in NumPy, itself in ml_dtypes' bfloat16
        zero = a[0] if node.dtype.name == "bfloat16" else f"({t})0"
        return f"(({a[0]}) > 0 ? ({t})1 : (({a[0]}) < 0 ? ({t})-1 : (({a[0]}) == 0 ? {zero} : ({a[0]}))))"
    if k == "i":
        return f"(({t})((({a[0]}) > 0) - (({a[0]}) < 0)))"
    if k == "u":
        return f"(({t})(({a[0]}) > 0))"
    return None


def _rsqrt(r, node, a, dts):
    if not is_float(node.dtype):
        return None
    # eager computes 1 / sqrt(x): a 16-bit float rounds the square root first
    root = r.rounded(node.dtype, f"{r.math('sqrt', node.dtype)}({a[0]})")
    return f"(({r.compute_type(node.dtype)})1 / {root})"


def _logistic(r, node, a, dts):
    if not is_float(node.dtype):
        return None
    t = r.compute_type(node.dtype)
    return f"(({t})1 / (({t})1 + {r.math('exp', node.dtype)}(-({a[0]}))))"


def _isnan(r, node, a, dts):
    return f"isnan({a[0]})" if is_float(dts[0]) else "0"


def _isfinite(r, node, a, dts):
    return f"isfinite({a[0]})" if is_float(dts[0]) else "1"


def _identity(r, node, a, dts):
    return a[0]


def _select(r, node, a, dts):
    return f"(({a[0]}) ? {a[1]} : {a[2]})"


def _convert(r, node, a, dts):
    src, dst = dts[0], node.dtype
    ks, kd = kind(src), kind(dst)
    x = a[0]
    if kd == "b":
        return f"(({x}) != 0)"
    if kd in "iu" and ks in "hf":
        return _float_to_int(r, src, dst, x)
    if kd in "iu":
        return f"(({r.ctype(dst)})({x}))"
    # to a float type: rounded once from the exact value (never twice, through float32)
    if kd == "h" and (src == np.dtype("float64") or (ks in "iu" and src.itemsize == 4)):
        if dst == np.dtype("float16"):
            return r.f64_to_f16(f"(double)({x})")
        return f"rn_bf16_from_f64((double)({x}))"
    if kd == "h" and ks in "iu" and src.itemsize == 8:
        # float16 overflows long before 24 bits, so only bfloat16 needs the care
        return f"rn_bf16_from_i64_src{ks}((int64_t)({x}))" if dst.name == "bfloat16" else f"((float)({x}))"
    if kd == "h":
        return f"((float)({x}))"             # exact in float32; `rounded` rounds it once
    return f"(({r.compute_type(dst)})({x}))"


def _libm_binary(fname):
    """A float function of two operands from the target's math library (libm, CUDA's)."""
    def rule(r, node, a, dts):
        return f"{r.math(fname, node.dtype)}({a[0]}, {a[1]})" if is_float(node.dtype) else None
    return rule


def _nextafter(r, node, a, dts):
    """The next value after a[0] toward a[1] in the node's own format: libm's for
    float32/float64, a step of the 16-bit pattern for float16/bfloat16 (a float32
    step would land between two of their values)."""
    k = kind(node.dtype)
    if k == "h":
        return f"rn_nextafter_{'f16' if node.dtype.name == 'float16' else 'bf16'}({a[0]}, {a[1]})"
    return f"{r.math('nextafter', node.dtype)}({a[0]}, {a[1]})" if k == "f" else None


def _float_to_int(r, src, dst, x):
    """Float -> integer as rune defines it (rune/backends/float_semantics.py): NaN -> 0,
    saturating at the type's bounds, truncation toward zero inside."""
    return f"rn_f2i_{dst.name}((double)({x}))"


_REAL_RULES = {
    "neg": _neg, "exp": _unary_float("exp"), "log": _unary_float("log"),
    "log1p": _unary_float("log1p"), "expm1": _unary_float("expm1"), "sqrt": _unary_float("sqrt"),
    "rsqrt": _rsqrt, "sin": _unary_float("sin"), "cos": _unary_float("cos"),
    "tan": _unary_float("tan"), "tanh": _unary_float("tanh"), "sinh": _unary_float("sinh"),
    "cosh": _unary_float("cosh"), "asin": _unary_float("asin"), "acos": _unary_float("acos"),
    "atan": _unary_float("atan"), "erf": _unary_float("erf"), "logistic": _logistic,
    # the target's math library, as every function above: glibc's, or CUDA's (whose guide
    # bounds log2f, log2 and log10 by 1 ulp, log10f by 2); not correctly rounded, and
    # within 2 ulp of NumPy's (tests/codegen/test_codegen.py). 16-bit floats compute in float32
    # and round once.
    "log2": _unary_float("log2"), "log10": _unary_float("log10"),
    "asinh": _unary_float("asinh"), "acosh": _unary_float("acosh"), "atanh": _unary_float("atanh"),
    "floor": _unary_float("floor"), "ceil": _unary_float("ceil"), "trunc": _unary_float("trunc"),
    "round": _unary_float("rint"),  # rint rounds half to even in the default mode
    "sign": _sign, "abs": _abs, "not": _not, "stop_gradient": _identity,
    "isnan": _isnan, "isfinite": _isfinite,
    "add": _arith("+", "|"), "sub": _arith("-", None), "mul": _arith("*", "&"), "div": _div,
    "floordiv": _helper("floordiv", "hfiu"), "rem": _helper("rem", "hfiu"), "pow": _pow,
    "max": _extremum(">"), "min": _extremum("<"),
    "atan2": _libm_binary("atan2"), "copysign": _libm_binary("copysign"),
    "hypot": _helper("hypot", "hf"),   # rune's hypot (complexc.helpers; complexfuncs.py has the rule)
    "logaddexp": _helper("logaddexp", "hf"),   # NumPy's npy_logaddexp (c_helpers)
    "nextafter": _nextafter,
    "and": _bitwise("&"), "or": _bitwise("|"), "xor": _bitwise("^"),
    "shift_left": _shift_left, "shift_right": _shift_right,
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="),
    "gt": _compare(">"), "ge": _compare(">="),
    "select": _select, "convert": _convert,
    "index": _index, "random_bits": _random_bits,
}


def _complex_aware(op):
    """An op's rule: the real one, or where a complex value is involved complexc's
    (None, so left to NumPy, where complexc has none)."""
    real, cplx = _REAL_RULES.get(op), complexc.RULES.get(op)

    def rule(r, node, a, dts):
        if kind(node.dtype) == "c" or any(kind(d) == "c" for d in dts):
            return None if cplx is None else cplx(r, node, a, dts)
        return None if real is None else real(r, node, a, dts)
    return rule


RULES = {op: _complex_aware(op) for op in ELEMENTWISE_OPS + (INDEX_OP, RANDOM_BITS_OP)}

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
        u = _uwide(dtype)
        return _wrap_int(r, dtype, f"({u})({acc}) {op} ({u})({v})")
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


def _indent(lines, by="  "):
    return [by + x for x in lines]


def flat_index(idx, rv, rshape, flat):
    """Lines giving each reduced axis index (`rv`) of the row-major flat index `flat`."""
    lines, step = [], 1
    for a in reversed(range(len(rshape))):
        q = f"({flat})" if step == 1 else f"({flat}) / {step}"
        lines.append(f"const {idx} {rv[a]} = ({idx})({q}" + (f" % {rshape[a]});" if a else ");"))
        step *= rshape[a]
    return list(reversed(lines))


# Arg reductions: the comparison that makes a later value the new extreme. The
# first extreme wins (strict comparison); a NaN beats everything but an earlier NaN.
ARG_REDUCERS = {"argmax": ">", "argmin": "<"}
REDUCE_NODES = frozenset(REDUCERS) | frozenset(ARG_REDUCERS)

# Results that are already values of their (16-bit float) dtype: no rounding needed.
_EXACT = frozenset({"neg", "abs", "max", "min", "select", "stop_gradient", "floor", "ceil",
                    "round", "trunc", "sign", "copysign", "nextafter", "random_bits", "index"})



class CStyle:
    """What every C-like target shares: types, constants, expressions, the unit layout."""

    target = None
    # dtype name -> the C type its values are stored as (the dtypes the dialect renders)
    CTYPES = {"bool": "_Bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
              "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
              "uint32": "uint32_t", "uint64": "uint64_t", "float16": "_Float16",
              "bfloat16": "uint16_t", "float32": "float", "float64": "double",
              **complexc.CTYPES}

    def ctype(self, dtype):
        """How values of `dtype` are stored."""
        return self.CTYPES[dtype.name]

    def pointer_type(self, dtype):
        """How a kernel's buffer of `dtype` is addressed (its elements' type)."""
        return self.ctype(dtype)

    def compute_type(self, dtype):
        """How values of `dtype` are computed with (16-bit floats in float32)."""
        return "float" if kind(dtype) == "h" else self.ctype(dtype)

    def compute_name(self, dtype):
        return {"_Bool": "bool"}.get(self.compute_type(dtype), self.compute_type(dtype)).replace("_t", "")

    def math(self, fname, dtype):
        return fname if dtype == np.dtype("float64") else fname + "f"

    # -------------------------------------------------------------- values

    def const(self, c, dtype):
        v, k = c.value, kind(dtype)
        if k == "c":
            return complexc.const(v, dtype)
        if k == "b":
            return "1" if v else "0"
        if k in "iu":
            v = int(v)
            info = np.iinfo(dtype)
            if k == "i" and v == info.min:
                return f"(({self.ctype(dtype)})({v + 1}LL - 1))"
            return f"(({self.ctype(dtype)}){v}{'ULL' if k == 'u' else 'LL'})"
        t = self.compute_type(dtype)
        v = float(v)
        if math.isnan(v):
            return f"(({t})NAN)"
        if math.isinf(v):
            return f"(({t}){'-' if v < 0 else ''}INFINITY)"
        return f"(({t}){v.hex()})"

    def load(self, dtype, ref):
        if dtype.name == "bfloat16":
            return f"rn_bf16_load({ref})"
        if dtype.name == "float16":
            return f"((float){ref})"
        return ref

    def stored(self, dtype, value):
        if dtype.name == "bfloat16":
            return f"rn_bf16_bits({value})"
        if dtype.name == "float16":
            return f"((_Float16){value})"
        return value

    def rounded(self, dtype, expr):
        """Round a float32 result to its 16-bit float dtype (kept in float32)."""
        if dtype.name == "bfloat16":
            return f"rn_bf16({expr})"
        if dtype.name == "float16":
            return f"((float)(_Float16)({expr}))"
        return expr

    def f64_to_f16(self, expr):
        """A float64 rounded once to float16, kept in float32."""
        return f"((float)(_Float16)({expr}))"

    def expression(self, node, args):
        dts = [a.dtype for a in node.args]
        expr = RULES[node.op](self, node, args, dts)
        if kind(node.dtype) == "h" and node.op not in _EXACT and not (
                node.op == "convert" and dts[0] == node.dtype):
            expr = self.rounded(node.dtype, expr)
        return expr

    # -------------------------------------------------------------- kernels

    def statements(self, kernel, loads, nodes, names, index, guard=None, index_of=None):
        """Lines computing `loads` then `nodes` (in order); `names` maps ids to C names
        (filled here); `index(load)` spells a load's element offset, `guard(load)` the
        condition of a guarded load, `index_of(node)` an `index` node's linear index
        in the loop form's variables. Everything a kernel's rendering depends on is
        passed in: a dialect object holds no per-kernel state, so threads share it."""
        lines = []

        def arg(a):
            return names[id(a)] if type(a) is not Const else self.const(a, a.dtype)

        for ld in sorted(loads, key=lambda ld: bool(ld.dynamic)):  # index loads first
            names[id(ld)] = f"l{kernel.loads.index(ld)}"
            value = self.load(ld.dtype, f"p{ld.buffer.index}[{index(ld)}{self.dynamic(ld.dynamic, arg)}]")
            if ld.guard:  # padding: the buffer is only read inside the guard
                value = f"({guard(ld)}) ? {value} : {self.const(ld.fill, ld.dtype)}"
            lines.append(f"const {self.compute_type(ld.dtype)} {names[id(ld)]} = {value};")
        for n in nodes:
            names[id(n)] = f"v{len(names)}"
            if n.op == "index":
                if index_of is None:
                    raise NotImplementedError(f"{type(self).__name__}: this loop form has no axis indices "
                                              f"to spell an index node with")
                args = [index_of(n)]
            else:
                args = [arg(a) for a in n.args]
            expr = self.expression(n, args)
            lines.append(f"const {self.compute_type(n.dtype)} {names[id(n)]} = {expr};")
        return lines

    def dynamic(self, terms, arg):
        """The runtime part of an address: each index clamped as the eager backend clamps it."""
        return "".join(f" + (int64_t){st} * rn_clamp_index((int64_t)({arg(v)}), {n}, {hi})"
                       for v, st, n, hi in terms if hi is not None)

    def stores(self, kernel, names, index):
        """`index(store)`: the static part of a store's position (a string: the same
        contiguous position for every store)."""
        if not callable(index):
            index = (lambda text: lambda s: text)(index)

        def arg(a):
            return names[id(a)] if type(a) is not Const else self.const(a, a.dtype)

        lines = []
        for s in kernel.stores:
            v = s.value
            val = names[id(v)] if type(v) is not Const else self.const(v, s.buffer.dtype)
            line = f"p{s.buffer.index}[{index(s)}{self.dynamic(s.dynamic, arg)}"
            drops = [(v, st, n) for v, st, n, hi in s.dynamic if hi is None]
            if drops:  # scatter: an index outside [0, n) (negative ones count from the end) drops the write
                pos = [f"rn_from_end((int64_t)({arg(v)}), {n})" for v, st, n in drops]
                line += "".join(f" + (int64_t){st} * {p}" for (v, st, n), p in zip(drops, pos))
                cond = " && ".join(f"(uint64_t){p} < {n}u" for (v, st, n), p in zip(drops, pos))
                lines.append(f"if ({cond}) {line}] = {self.stored(s.buffer.dtype, val)};")
            else:
                lines.append(f"{line}] = {self.stored(s.buffer.dtype, val)};")
        return lines

    def collapsed_walk(self, kernel):
        """An elementwise kernel's loads, nodes, index nodes, everything that walks
        its points (loads, index nodes, stores), and its shape collapsed over the
        axes every walker steps through contiguously (`collapse`): (shape, each
        walker's strides, the map of collapsed to kernel axes)."""
        out = contiguous_strides(kernel.shape)
        _, _, _, loads, nodes = self.phases(kernel)
        indices = [n for n in nodes if n.op == "index"]
        pinned = guarded_axes(loads, 0, len(kernel.shape))
        walkers = loads + indices + kernel.stores
        shape, acc, amap = collapse(kernel.shape, [ld.strides for ld in loads] +
                                    [n.params["strides"] for n in indices] +
                                    [s.strides or out for s in kernel.stores], pinned)
        return loads, nodes, indices, walkers, shape, acc, amap

    def phases(self, kernel):
        """(inner loads, inner nodes, reduce nodes, outer loads, outer nodes) in order."""
        live = kernel.live_nodes()
        reduces = [n for n in live if n.op in REDUCE_NODES]
        inner = set()
        stack = [a for r in reduces for a in r.args]
        while stack:
            a = stack.pop()
            if id(a) not in inner and type(a) is not Const:
                inner.add(id(a))
                if type(a) is Node:
                    stack.extend(a.args)
                else:   # a gathered load's index loads are read where it is
                    stack.extend(d[0] for d in a.dynamic)
        used = ({id(a) for n in live for a in n.args} | {id(s.value) for s in kernel.stores}
                | {id(d[0]) for s in kernel.stores for d in s.dynamic})
        used |= {id(d[0]) for ld in kernel.loads if id(ld) in used for d in ld.dynamic}
        loads = [ld for ld in kernel.loads if id(ld) in used]
        return ([ld for ld in loads if id(ld) in inner], [n for n in live if id(n) in inner],
                reduces, [ld for ld in loads if id(ld) not in inner],
                [n for n in live if id(n) not in inner and n.op not in REDUCE_NODES])

    def pointers(self, kernel):
        lines, seen = [], set()
        written = {s.buffer.index for s in kernel.stores}
        for ld in kernel.loads:
            if ld.buffer.index in written:   # read and written (scatter): declared with the stores
                continue
            b = ld.buffer
            if b.index not in seen:
                seen.add(b.index)
                t = self.pointer_type(b.dtype)
                lines.append(f"const {t} *{self.restrict} p{b.index} = (const {t} *)b[{b.index}];")
        for s in kernel.stores:
            b = s.buffer
            if b.index not in seen:
                seen.add(b.index)
                t = self.pointer_type(b.dtype)
                lines.append(f"{t} *{self.restrict} p{b.index} = ({t} *)b[{b.index}];")
        return lines

    def reduction_layout(self, kernel):
        """The loops of a reduction kernel, shared by every dialect: the output and
        reduced axes collapsed where every access walks them as one, their loop
        variables (`ov`, `rv`), `index(access, offset)` spelling a load's or index
        node's element offset, `guard(load)` a padded load's condition, and the
        kernel's phases."""
        no, nr = len(kernel.shape), len(kernel.reduce_shape)
        inner_loads, inner_nodes, reduces, outer_loads, outer_nodes = self.phases(kernel)
        inner_idx = [n for n in inner_nodes if n.op == "index"]
        outer_idx = [n for n in outer_nodes if n.op == "index"]

        def full(n):  # an index node's strides over outer then reduced axes
            s = n.params["strides"]
            return tuple(s) + (0,) * (no + nr - len(s))

        out = contiguous_strides(kernel.shape)
        opin = guarded_axes(inner_loads + outer_loads, 0, no)
        rpin = {a - no for a in guarded_axes(inner_loads, no, no + nr)}
        inner_w = [ld.strides for ld in inner_loads] + [full(n) for n in inner_idx]
        outer_w = [ld.strides for ld in outer_loads] + [full(n)[:no] for n in outer_idx]
        oshape, oacc, omap = collapse(kernel.shape, [w[:no] for w in inner_w] + outer_w + [out], opin)
        rshape, racc, rmap = collapse(kernel.reduce_shape, [w[no:] for w in inner_w], rpin)
        ov = [f"i{a}" for a in range(len(oshape))]
        rv = [f"j{a}" for a in range(len(rshape))]
        axis_vars = ([ov[m] if m is not None else None for m in omap] +
                     [rv[m] if m is not None else None for m in rmap])
        extents = kernel.shape + kernel.reduce_shape

        def guard(ld):
            return condition(ld.guard, axis_vars, extents)
        n_in = len(inner_w)
        at = {id(w): (oacc[k], racc[k]) for k, w in enumerate(inner_loads + inner_idx)}
        at.update({id(w): (oacc[n_in + k], []) for k, w in enumerate(outer_loads + outer_idx)})

        def index(w, base=0):
            o, r = at[id(w)]
            return offset(ov + rv, list(o) + list(r), base)

        return SimpleNamespace(phases=(inner_loads, inner_nodes, reduces, outer_loads, outer_nodes), no=no,
                               oshape=oshape, rshape=rshape, oacc=oacc, racc=racc, n_inner=n_in, ov=ov, rv=rv,
                               index=index, guard=guard)

    def point_reductions(self, reduces, names, position):
        """One output point's reductions as a loop folding its elements one after the
        other writes them: (the `Fold`s, declarations of their partials and NaN flags
        and of the arg reductions' (value, index) pairs, the arg reductions' updates
        (in index order; `position`: the element's index along the one reduced axis),
        the statements of the results r<k>). `names` gains each reduction's r<k>."""
        folds, accs, in_order, finals = [], [], [], []
        for k, r in enumerate(reduces):
            v = names[id(r.args[0])] if type(r.args[0]) is not Const else self.const(r.args[0], r.args[0].dtype)
            names[id(r)] = f"r{k}"
            if r.op in ARG_REDUCERS:   # the first extreme (a NaN beats all but an earlier NaN)
                cmp, vt, t = ARG_REDUCERS[r.op], r.args[0].dtype, self.ctype(r.dtype)
                init = REDUCERS["reduce_max" if cmp == ">" else "reduce_min"](self, vt, f"acc{k}", v)[0]
                accs += [f"{self.compute_type(vt)} acc{k} = {init};", f"int64_t arg{k} = 0;"]
                beats = f"{v} {cmp} acc{k}" + (f" || ({v} != {v} && acc{k} == acc{k})" if is_float(vt) else "")
                in_order.append(f"if ({beats}) {{ acc{k} = {v}; arg{k} = {position}; }}")
                finals.append(f"const {t} r{k} = ({t})arg{k};")
                continue
            f = Fold(self, k, r, v)
            folds.append(f)
            accs += [f"{f.part} pt{k};"] + ([f"int nan{k} = 0;"] if f.nan else [])
            finals.append(f.final(f"pt{k}", f"nan{k}"))
        return folds, accs, in_order, finals

    def fold_blocks(self, idx, rshape, rv, folds, element, plan, first, last, simd):
        """Lines folding the blocks [first, last) of a row (C expressions; the run is an
        aligned subtree of `plan`, or the whole row) into each fold's partial `pt<k>` and
        NaN flag `nan<k>` (declared by the caller), in the fixed order: each block's
        lanes over groups of REDUCE_LANES elements (`element`: the lines of one element,
        the reduced indices `rv` defined; vectorised where `simd`), its lane tree, then
        the block tree. Arg reductions update in `element`, in index order."""
        n, w, b = plan.n, REDUCE_LANES, REDUCE_BLOCK
        if not rshape:
            spell, at_group = [], []
        elif len(rshape) == 1:
            spell, at_group = [f"const {idx} {rv[0]} = jj + ln;"], []
        elif rshape[-1] % w == 0:   # a group never crosses the last axis: its indices are found once
            at_group = flat_index(idx, rv[:-1], rshape[:-1], f"jj / {rshape[-1]}")
            at_group.append(f"const {idx} jl = jj % {rshape[-1]};")
            spell = [f"const {idx} {rv[-1]} = jl + ln;"]
        else:
            spell, at_group = flat_index(idx, rv, rshape, "jj + ln"), []
        fold = [f"lane{f.k}[ln] = {f.update(f'lane{f.k}[ln]', f.value)};" for f in folds]
        fold += [f"nanl{f.k}[ln] |= ({f.value} != {f.value});" for f in folds if f.nan]

        def group(count):
            pragma = ["#pragma omp simd"] if simd else []
            return at_group + pragma + [f"for (int ln = 0; ln < {count}; ln++) {{"] + _indent(
                spell + element + fold) + ["}"]

        block = [f"const {idx} jb = ({idx})b * {b};", f"const {idx} je = jb < {n - b} ? jb + {b} : {n};"]
        block += [f"{f.ctype} lane{f.k}[{w}];" for f in folds] + [f"int nanl{f.k}[{w}];" for f in folds if f.nan]
        if folds:
            block += [f"for (int ln = 0; ln < {w}; ln++) {{"] + [f"  lane{f.k}[ln] = {f.init};" for f in folds]
            block += [f"  nanl{f.k}[ln] = 0;" for f in folds if f.nan] + ["}"]
        block += [f"{idx} jj = jb;", f"for (; je - jj >= {w}; jj += {w}) {{"] + _indent(group(w)) + ["}"]
        block += ["if (jj < je) {", "  const int tail = (int)(je - jj);"] + _indent(group("tail")) + ["}"]
        if folds:
            block += lane_tree(folds)
        block += [f"nan{f.k} |= nanl{f.k}[0];" for f in folds if f.nan]
        if plan.span == 1 or not folds:   # one block per run: its partial is the run's
            block += [f"pt{f.k} = {f.widen(f'lane{f.k}[0]')};" for f in folds]
            return [f"for (int64_t b = {first}; b < ({last}); b++) {{"] + _indent(block) + ["}"]
        block += [f"{f.part} w{f.k} = {f.widen(f'lane{f.k}[0]')};" for f in folds]
        block += tree_push(folds, f"b - ({first})", [f"w{f.k}" for f in folds])
        lines = [f"{f.part} stk{f.k}[{plan.depth}];" for f in folds] + ["int top = 0;"]
        lines += [f"for (int64_t b = {first}; b < ({last}); b++) {{"] + _indent(block) + ["}"]
        return lines + tree_total(folds, [f"pt{f.k}" for f in folds])


    # -------------------------------------------------------------- units

    def render_unit(self, kernels):
        """The `RenderedUnit` of one stretch's IR `kernels` (run in list order), which
        are left untouched. Each dialect defines it."""
        raise NotImplementedError(f"{type(self).__name__} renders no units")

    def can_render(self, op, in_dtypes, out_dtype):
        """Whether this dialect renders a per-point node `op` whose operands have the
        NumPy dtypes `in_dtypes` (one per operand, in order) and whose value has
        `out_dtype`.

        `op` is an IR op name as the fusion pass emits it: an elementwise
        primitive's IR op (its name: "add", "log2", "convert", "real", ...), or
        "index" / "random_bits". True exactly when the op is one of
        `ELEMENTWISE_OPS` or those two, the operand count is its `ARITY`, every
        dtype is one the dialect stores (`CTYPES`), and the op's rule spells
        it for these dtypes: such a node then renders without raising. False
        otherwise: an op outside the vocabulary (movements, reductions and library
        calls are not per-point nodes), or dtypes its rule leaves alone (complex
        log2 or sin, a float `and`, a 16-bit float into complex, ...).

        It judges dtypes, never operand values: an integer `pow` renders NumPy's
        loop, which is right for non-negative exponents only, so whether the
        exponent is known to be one stays the planner's to check. It builds no
        kernel, holds no state and may be called from any thread.

        The answer is kept per dialect class, op, rule and dtypes: the planner asks
        the same question for every equation of every plan (tens of thousands of
        times for a large program), and a rule swapped in `RULES` is a new key."""
        rule = RULES.get(op)
        key = (type(self), op, rule, tuple(in_dtypes), out_dtype)
        known = _CAN_RENDER.get(key)
        if known is None:
            known = _CAN_RENDER[key] = self._can_render(op, rule, in_dtypes, out_dtype)
        return known

    def _can_render(self, op, rule, in_dtypes, out_dtype):
        if rule is None or len(in_dtypes) != ARITY[op]:
            return False
        dtypes = [np.dtype(d) for d in in_dtypes]
        out = np.dtype(out_dtype)
        if any(d.name not in self.CTYPES for d in dtypes + [out]):
            return False
        node = Node(op, out, [Const(0, d) for d in dtypes])
        # placeholder C operands (an `index` node's one is its index expression)
        return rule(self, node, ["a0", "a1", "a2"], dtypes) is not None


_CAN_RENDER = {}   # (dialect class, op, rule, operand dtypes, result dtype) -> whether it renders


# Kernel IR ops that are libm calls (or as long): a tree holding one is loaded where
# it is stored anyway rather than recomputed in each reader (rune/compiler/fuse.py),
# and a loop of few points but many of them pays for threads (rune/codegen/c.py).
COSTLY_OPS = frozenset({"exp", "expm1", "log", "log1p", "log2", "log10", "logaddexp", "tanh", "sin", "cos", "tan",
                        "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "atan2", "hypot",
                        "erf", "logistic", "pow", "random_bits"})


class RenderedUnit(NamedTuple):
    """One stretch's kernels rendered for a target: `name` (its symbols' prefix, from
    a hash of its text, so identical stretches share one compiled function and many
    units fit one translation unit), `source` (its text; the dialect's `prelude()` is
    not in it) and `kernels` (copies of the IR kernels carrying their `target`,
    entry `name` and `source`, and for CUDA their launches: rune/codegen/kernel.py
    `rendered`). It unpacks as (name, source, kernels)."""
    name: str
    source: str
    kernels: tuple


def unit_name(text):
    """The symbol prefix of a unit whose text (with its placeholder name) is `text`."""
    return "rn_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def offset(ivars, strides, constant=0):
    """The C expression sum(ivars[a] * strides[a]) + constant (zero terms dropped)."""
    terms = [v if s == 1 else f"{v} * {s}" for v, s in zip(ivars, strides) if s != 0]
    if constant:
        terms.append(str(constant))
    return " + ".join(terms) or "0"




def nest(idx, ivars, shape, pragmas, body, depth, first=None):
    """Lines of loops over `shape` (index type `idx`, variables `ivars`; a pragma, or
    None, before each) around the lines `body`, indented from `depth`. `first`, where
    given, is the (start, stop) C expressions of the first loop instead of (0, extent)."""
    lines = []
    for a, (v, d, p) in enumerate(zip(ivars, shape, pragmas)):
        if p:
            lines.append("  " * depth + p)
        lo, hi = first if a == 0 and first is not None else ("0", d)
        lines.append("  " * depth + f"for ({idx} {v} = {lo}; {v} < {hi}; {v}++) {{")
        depth += 1
    lines += ["  " * depth + x for x in body]
    for _ in shape:
        depth -= 1
        lines.append("  " * depth + "}")
    return lines


def collapse(shape, accesses, pinned=()):
    """Merge adjacent axes that every access walks as one, and drop unit axes.

    Returns (shape, [strides per access], the new axis of each old one or None
    where it was dropped): a contiguous elementwise kernel becomes one flat
    loop; a transposed read keeps two. `pinned` axes (guarded ones) stay as they are."""
    axes = [a for a, d in enumerate(shape) if d != 1 or a in pinned]
    shp = [shape[a] for a in axes]
    acc = [[s[a] for a in axes] for s in accesses]
    groups = [[a] for a in axes]
    a = len(shp) - 2
    while a >= 0:
        if (not set(groups[a] + groups[a + 1]) & set(pinned)
                and all(s[a] == s[a + 1] * shp[a + 1] for s in acc)):
            shp[a] *= shp[a + 1]
            del shp[a + 1]
            for s in acc:
                s[a] = s[a + 1]
                del s[a + 1]
            groups[a] += groups.pop(a + 1)
        a -= 1
    amap = [None] * len(shape)
    for k, g in enumerate(groups):
        for old in g:
            amap[old] = k
    return shp, acc, amap


def guarded_axes(loads, start, stop):
    """The axes in [start, stop) that some guarded (padded) load guards: loops kept apart."""
    return {a for ld in loads if ld.guard for a in range(start, stop)
            if a < len(ld.guard) and ld.guard[a] is not None}


def condition(guard, axis_vars, extents):
    """C condition for a guarded load: each guarded axis's index inside [lo, hi)."""
    terms = []
    for g, v, n in zip(guard, axis_vars, extents):
        if g is None:
            continue
        lo, hi = g
        if v is None:  # not a loop (a dropped unit axis): its index is 0
            if not lo <= 0 < hi:
                return "0"
            continue
        if lo > 0:
            terms.append(f"{v} >= {lo}")
        if hi < n:
            terms.append(f"{v} < {hi}")
    return " && ".join(terms) or "1"




def c_helpers():
    """Exact NumPy semantics C leaves undefined or different, one helper per C type.

    Shared by the C and CUDA dialects: each declares `RN_FN` (C: static inline,
    CUDA: static __device__ __forceinline__), and the text avoids C-only types."""
    parts = [r"""
RN_FN float rn_bf16_load(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
/* float32 -> bfloat16 -> float32, round to nearest even; NaN keeps its sign and turns quiet (ml_dtypes) */
RN_FN float rn_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) u = (u & 0x80000000u) | 0x7fc00000u;
  else u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&f, &u, 4); return f;
}
RN_FN uint16_t rn_bf16_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)(u >> 16); }
"""]
    parts.append(_conversion_helpers())
    parts.append(_nextafter16_helpers())
    for t, s in (("float", "f"), ("double", "")):
        parts.append(f"""
/* NumPy's npy_divmod: Python-signed floor division and remainder */
RN_FN {t} rn_floordiv_{t}({t} a, {t} b) {{
  if (!b) return a / b;
  {t} mod = fmod{s}(a, b), div = (a - mod) / b, fl;
  if (mod) {{ if ((b < 0) != (mod < 0)) div -= 1; }}
  if (div) {{ fl = floor{s}(div); if (div - fl > 0.5{s}) fl += 1; }}
  else fl = copysign{s}(({t})0, a / b);
  return fl;
}}
RN_FN {t} rn_rem_{t}({t} a, {t} b) {{
  {t} mod = fmod{s}(a, b);
  if (!b) return mod;
  if (mod) {{ if ((b < 0) != (mod < 0)) mod += b; }}
  else mod = copysign{s}(({t})0, b);
  return mod;
}}
/* NumPy's npy_logaddexp: log(e^a + e^b) without overflow; equal operands (infinities
   of one sign included) give a + log 2, a NaN difference gives that NaN */
RN_FN {t} rn_logaddexp_{t}({t} a, {t} b) {{
  if (a == b) return a + {_part_literal(math.log(2), t)};
  const {t} d = a - b;
  if (d > 0) return a + log1p{s}(exp{s}(-d));
  if (d <= 0) return b + log1p{s}(exp{s}(d));
  return d;
}}""")
    for bits in (8, 16, 32, 64):
        t = f"int{bits}_t"
        parts.append(f"""
/* integer division by zero gives 0, MIN // -1 wraps to MIN (the eager backend) */
RN_FN {t} rn_floordiv_int{bits}({t} a, {t} b) {{
  if (b == 0) return 0;
  if (b == -1) return ({t})(0u - (uint64_t)a);
  {t} q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}}
RN_FN {t} rn_rem_int{bits}({t} a, {t} b) {{
  if (b == 0 || b == -1) return 0;
  {t} r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}}
RN_FN uint{bits}_t rn_floordiv_uint{bits}(uint{bits}_t a, uint{bits}_t b) {{ return b ? a / b : 0; }}
RN_FN uint{bits}_t rn_rem_uint{bits}(uint{bits}_t a, uint{bits}_t b) {{ return b ? a % b : 0; }}""")
    return "\n".join(parts) + "\n"


def _part_literal(value, ctype):
    """`value` rounded to the C type `ctype` ("float" or "double"), as an exact hex literal."""
    v = float(np.float32(value)) if ctype == "float" else float(value)
    return f"(({ctype}){v.hex()})"


def _nextafter16_helpers():
    """nextafter in float16 and bfloat16, whose values the kernels hold in float32: a
    step of the 16-bit pattern toward y. NaN in either gives NaN. Equal operands give y
    (C99's and IEEE 754's rule, as float32/float64 do; it matters only for zeros of
    opposite signs: nextafter(+0, -0) is -0), for both types: rune's rule, whatever the
    NumPy installed (NumPy before 2.5 gave x for float16)."""
    return r"""
/* float16 bits <-> its value in float32 (exact both ways; no _Float16 or __half needed) */
RN_FN float rn_f16_value(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t u;
  if (e == 0) { float f = ldexpf((float)m, -24); memcpy(&u, &f, 4); u |= sign; }
  else if (e == 31) u = sign | 0x7f800000u | (m << 13);
  else u = sign | ((e + 112u) << 23) | (m << 13);
  float f; memcpy(&f, &u, 4); return f;
}
RN_FN uint16_t rn_f16_pattern(float f) {   /* f: a float16 value */
  uint32_t u; memcpy(&u, &f, 4);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x38800000u) return sign | (uint16_t)((((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu));
  return sign | (uint16_t)(fabsf(f) * 16777216.0f);   /* subnormal: a multiple of 2^-24 */
}
/* the pattern one step away from zero where y lies beyond x, else one step toward it */
RN_FN int rn_step16(float x, float y) { return (y > x) == (x > 0) ? 1 : -1; }
RN_FN float rn_nextafter_f16(float x, float y) {
  if (x != x || y != y) return NAN;
  if (x == y) return y;
  if (x == 0) return copysignf(5.9604644775390625e-08f, y);   /* 2^-24 */
  return rn_f16_value((uint16_t)(rn_f16_pattern(x) + rn_step16(x, y)));
}
RN_FN float rn_nextafter_bf16(float x, float y) {
  if (x != x || y != y) return NAN;
  if (x == y) return y;
  if (x == 0) return copysignf(9.183549615799121e-41f, y);   /* 2^-133 */
  return rn_bf16_load((uint16_t)(rn_bf16_bits(x) + rn_step16(x, y)));
}
"""


def _conversion_helpers():
    """Conversions as rune defines them (rune/backends/float_semantics.py), shared by the
    C and CUDA dialects: float -> integer saturating (NaN -> 0, truncation inside the
    range: CUDA's cvt.rzi.sat), and float64 or wide integers -> bfloat16 rounded once,
    through a float32 rounded to odd (a second rounding to 8 bits is then exact)."""
    parts = []
    for dtype in (np.dtype(f"{k}int{b}") for k in ("", "u") for b in (8, 16, 32, 64)):
        info, t = np.iinfo(dtype), f"{dtype.name}_t"
        bits = 8 * dtype.itemsize
        # the exclusive upper bound and the minimum are powers of two (or 0), exact in double
        above = float(2 ** (bits - 1) if info.min else 2 ** bits)
        lowest = f"(({t})({info.min + 1}LL - 1))" if info.min else "0"
        parts.append(f"RN_FN {t} rn_f2i_{dtype.name}(double x) {{ return x != x ? 0 : x >= {above!r} ? "
                     f"({t}){info.max}{'ULL' if dtype.kind == 'u' else 'LL'} : x <= {float(info.min)!r} ? "
                     f"{lowest} : ({t})x; }}")
    parts.append(r"""
/* float64 -> float32 rounded to odd: truncated, the last bit set when inexact */
RN_FN float rn_f32_odd(double x) {
  float f = (float)x; uint32_t u; memcpy(&u, &f, 4);
  if ((double)f != x && x == x && !(u & 1u)) u += fabs((double)f) > fabs(x) ? 0xffffffffu : 1u;
  memcpy(&f, &u, 4); return f;
}
RN_FN float rn_bf16_from_f64(double x) { return rn_bf16(rn_f32_odd(x)); }
/* a 64-bit integer's magnitude kept to 24 bits, rounded to odd, then to bfloat16 */
RN_FN float rn_bf16_from_magnitude(uint64_t m, int negative) {
  int shift = 0;
  while ((m >> shift) >= (1ull << 24)) shift++;
  uint64_t kept = m >> shift;
  kept |= (kept << shift) != m;
  float f = ldexpf((float)kept, shift);
  return rn_bf16(negative ? -f : f);
}
RN_FN float rn_bf16_from_i64_srci(int64_t v) { return rn_bf16_from_magnitude(v < 0 ? 0ull - (uint64_t)v : (uint64_t)v, v < 0); }
RN_FN float rn_bf16_from_i64_srcu(int64_t v) { return rn_bf16_from_magnitude((uint64_t)v, 0); }
""")
    return "\n".join(parts) + "\n"


def index_helpers():
    """Index arithmetic, integer powers and Threefry, shared by the C and CUDA
    dialects like `c_helpers` (declared `RN_FN`, no C-only types)."""
    return r"""
/* a runtime index as the eager backend reads it: negative counts from the end, then clamped to [0, hi] */
RN_FN int64_t rn_from_end(int64_t v, int64_t n) { return v < 0 ? v + n : v; }
RN_FN int64_t rn_clamp_index(int64_t v, int64_t n, int64_t hi) {
  v = v < 0 ? v + n : v;
  return v < 0 ? 0 : (v > hi ? hi : v);
}
/* integer power by squaring, wrapping as NumPy's loops (the exponent is non-negative) */
RN_FN uint64_t rn_powu64(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  while (e) { if (e & 1u) r *= base; base *= base; e >>= 1; }
  return r;
}
/* Threefry-2x32, 20 rounds (rune/backends/cpu/threefry.py): (y0 << 32) | y1 of counter i */
RN_FN uint32_t rn_rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
RN_FN uint64_t rn_threefry(uint32_t k0, uint32_t k1, uint64_t i) {
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  uint32_t x0 = (uint32_t)(i >> 32) + ks[0], x1 = (uint32_t)i + ks[1];
  for (int g = 1; g <= 5; g++) {
    for (int k = 0; k < 4; k++) { x0 += x1; x1 = rn_rotl32(x1, rot[(g - 1) % 2][k]); x1 ^= x0; }
    x0 += ks[g % 3]; x1 += ks[(g + 1) % 3] + (uint32_t)g;
  }
  return ((uint64_t)x0 << 32) | x1;
}
"""
