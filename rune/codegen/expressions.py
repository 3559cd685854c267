"""The kernel IR's op vocabulary and the rule spelling each per-point op as a C expression.

- the IR op vocabulary (`UNARY_OPS`, `BINARY_OPS`, ..., `ELEMENTWISE_OPS`, `REDUCE_OPS`,
  `ARITY`): every op a kernel `Node` may carry; `COSTLY_OPS`, those as dear as a libm call;
- the expression rules (`RULES`, keyed by op): each spells one node as a C expression for
  any C-style dialect (rune/codegen/cstyle.py `CStyle`), with NumPy's semantics written
  out where C differs: NaN-propagating max/min, round half to even, float->int
  conversions as rune defines them (saturating, NaN -> 0; one rounding into 16-bit
  floats), integer division and remainder by zero, Python-signed floor division and
  remainder, shifts wider than the type; float16/bfloat16 are computed in float32 and
  rounded to their format after every operation except those `EXACT_OPS` (so a fused
  chain gives the eager bits); complex values through rune/codegen/complexc.py.

A rule returns None where the op is not rendered for these dtypes: the planner then
leaves the node to the eager backend (`CStyle.can_render` asks the same rules). The C
functions rules call (rn_floordiv_*, rn_f2i_*, ...) are in the prelude
(rune/codegen/helpers.py).
"""
import numpy as np

from ..base.vocabulary import BINARY, COMPARE, OPS as CORE_OPS, PREDICATE, UNARY
from . import complexc, mathlib
from .kernel import Const

# ---------------------------------------------------------------- the IR op vocabulary
# Per-point ops (one `Node` per point; a primitive's name where it is one, so an
# elementwise primitive `p` becomes the node op `p.ir_op`). Arities are fixed.
# The core primitives' ops are declared in rune/base/vocabulary.py; the nx family modules'
# (rune/nx/mathfuncs.py, rune/nx/complex.py) are listed here.
FAMILY_UNARY_OPS = ("log2", "log10", "asinh", "acosh", "atanh", "trunc", "real", "imag", "conj")
FAMILY_BINARY_OPS = ("hypot", "copysign", "logaddexp", "nextafter", "complex")
UNARY_OPS = UNARY + FAMILY_UNARY_OPS
BINARY_OPS = BINARY + FAMILY_BINARY_OPS
COMPARE_OPS = COMPARE
PREDICATE_OPS = PREDICATE
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


def wrap_int(r, dtype, expr):
    """An integer expression computed in a wide unsigned type, cast back (wraps as NumPy)."""
    return f"(({r.ctype(dtype)})({expr}))"


def uwide(dtype):
    """The unsigned type integer arithmetic of `dtype` wraps in."""
    return "uint64_t" if dtype.itemsize == 8 else "uint32_t"


def _arith(op, bool_op):
    def rule(r, node, a, dts):
        k = kind(node.dtype)
        if k in "hf":
            return f"({a[0]} {op} {a[1]})"
        if k in "iu":
            u = uwide(node.dtype)
            return wrap_int(r, node.dtype, f"({u})({a[0]}) {op} ({u})({a[1]})")
        return None if bool_op is None else f"({a[0]} {bool_op} {a[1]})"
    return rule


def _neg(r, node, a, dts):
    k = kind(node.dtype)
    if k in "hf":
        return f"(-{a[0]})"
    if k in "iu":
        return wrap_int(r, node.dtype, f"0u - ({uwide(node.dtype)})({a[0]})")
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


_NEGATED = {">": "<=", "<": ">=", ">=": "<", "<=": ">"}


def _extremum(cmp):
    def rule(r, node, a, dts):
        if is_float(node.dtype):
            # NaN wins. On equal values (+-0) NumPy's float32/float64 loops return the
            # second operand and its float16 loop the first.
            c = cmp + "=" if node.dtype == np.dtype("float16") else cmp
            second = node.args[1]
            if type(second) is Const and second.value == second.value:
                # Against a number (a clamp, relu): one comparison, NaN failing it, the
                # same values. The two-test form kept gcc from vectorizing the large
                # fused loops of a GELU's backward pass (-fno-trapping-math: 4x slower).
                return f"(({a[0]} {_NEGATED[c]} {a[1]}) ? {a[1]} : {a[0]})"
            return f"(({a[0]} {c} {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})"
        return f"(({a[0]} {cmp} {a[1]}) ? {a[0]} : {a[1]})"
    return rule


def _bitwise(op):
    def rule(r, node, a, dts):
        k = kind(node.dtype)
        if k == "b":
            return f"({a[0]} {op} {a[1]})"
        return wrap_int(r, node.dtype, f"({a[0]}) {op} ({a[1]})") if k in "iu" else None
    return rule


def _shift_left(r, node, a, dts):
    if kind(node.dtype) not in "iu":
        return None
    bits, u = 8 * node.dtype.itemsize, uwide(node.dtype)
    return (f"(((uint64_t)({a[1]}) < {bits}u) ? "
            f"{wrap_int(r, node.dtype, f'({u})({a[0]}) << ({a[1]})')} : 0)")


def _shift_right(r, node, a, dts):
    k = kind(node.dtype)
    if k not in "iu":
        return None
    bits = 8 * node.dtype.itemsize
    wide = f"{wrap_int(r, node.dtype, f'({a[0]}) >> ({a[1]})')}"
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
    return wrap_int(r, node.dtype, f"~({a[0]})") if k in "iu" else None


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
    return r.select(a[0], a[1], a[2], node.dtype)


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
    # the core ops that are a math library function (exp, sin, atan2, ...): from their declaration
    **{op.name: (_unary_float if op.arity == 1 else _libm_binary)(op.c) for op in CORE_OPS if op.c},
    "neg": _neg, "rsqrt": _rsqrt, "logistic": _logistic,
    # float64: the target's math library, as every function above: glibc's, or CUDA's (whose
    # guide bounds log2 and log10 by 1 ulp); not correctly rounded. float32 and 16-bit floats
    # (computed in float32, rounded once): rune's correctly rounded library (_float32_library).
    "log2": _unary_float("log2"), "log10": _unary_float("log10"),
    "asinh": _unary_float("asinh"), "acosh": _unary_float("acosh"), "atanh": _unary_float("atanh"),
    "trunc": _unary_float("trunc"),
    "sign": _sign, "abs": _abs, "not": _not, "stop_gradient": _identity,
    "isnan": _isnan, "isfinite": _isfinite,
    "add": _arith("+", "|"), "sub": _arith("-", None), "mul": _arith("*", "&"), "div": _div,
    "floordiv": _helper("floordiv", "hfiu"), "rem": _helper("rem", "hfiu"), "pow": _pow,
    "max": _extremum(">"), "min": _extremum("<"),
    "copysign": _libm_binary("copysign"),
    "hypot": _helper("hypot", "hf"),   # rune's hypot (complexc.helpers; complexfuncs.py has the rule)
    "logaddexp": _helper("logaddexp", "hf"),   # NumPy's npy_logaddexp (c_src/float_divmod.h)
    "nextafter": _nextafter,
    "and": _bitwise("&"), "or": _bitwise("|"), "xor": _bitwise("^"),
    "shift_left": _shift_left, "shift_right": _shift_right,
    "eq": _compare("=="), "ne": _compare("!="), "lt": _compare("<"), "le": _compare("<="),
    "gt": _compare(">"), "ge": _compare(">="),
    "select": _select, "convert": _convert,
    "index": _index, "random_bits": _random_bits,
}


def _float32_library(op, rule):
    """`rule`, except where the op computes in float32 (float32, and 16-bit floats,
    which round the float32 result once on store): rune's correctly rounded library
    (mathlib.py), the same bits in both dialects."""
    fname = mathlib.function(op)

    def library_rule(r, node, a, dts):
        if kind(node.dtype) in "hf" and r.compute_type(node.dtype) == "float":
            return f"{fname}({', '.join(a)})"
        return rule(r, node, a, dts)
    return library_rule


_REAL_RULES.update({op: _float32_library(op, _REAL_RULES[op]) for op in _REAL_RULES if mathlib.function(op)})


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

# Results that are already values of their (16-bit float) dtype: no rounding needed.
EXACT_OPS = frozenset({"neg", "abs", "max", "min", "select", "stop_gradient", "floor", "ceil",
                       "round", "trunc", "sign", "copysign", "nextafter", "random_bits", "index"})

# Kernel IR ops that are libm calls (or as long): a tree holding one is loaded where
# it is stored anyway rather than recomputed in each reader (rune/compiler/fuse.py),
# and a loop of few points but many of them pays for threads (rune/codegen/c.py).
COSTLY_OPS = frozenset({op.name for op in CORE_OPS if op.costly} |
                       {"log2", "log10", "logaddexp", "asinh", "acosh", "atanh", "hypot", "random_bits"})
COSTLY_OP_COST = 16   # what a costly op costs a point, in adds


def op_cost(op):
    """What a node of `op` costs a point, in adds: a libm call is tens."""
    return COSTLY_OP_COST if op in COSTLY_OPS else 1
