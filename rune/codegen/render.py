"""One C-style renderer for the kernel IR, with a C dialect for the CPU.

`CStyle` spells dtypes, constants and every primitive as C expressions (the
rule tables below, keyed by primitive), with NumPy's semantics written out
where C differs: NaN-propagating max/min, round half to even, float->int
conversions as rune defines them (saturating, NaN -> 0; one rounding into 16-bit floats),
integer division and remainder by zero, Python-signed floor division and
remainder, shifts wider than the type, float16/bfloat16 computed in float32
and rounded to their format after every operation (so a fused chain gives
the eager bits). A dialect decides what is target specific: the prelude,
qualifiers, the index source and the loop form. `CDialect` renders loops with
OpenMP (`parallel for` above a size where threads pay, `simd` inside, with
some of libm's vector variants declared), computes what is the same along the
innermost loop before it, and runs reductions over strided leading axes in a
column form (the output's last axis innermost); the CUDA dialect will replace
the loop form with a grid-stride loop and the prelude with CUDA's.
"""
import hashlib
import math
from types import SimpleNamespace

import numpy as np

from . import complexc
from .kernel import Const, Load, Node, contiguous_strides, rendered

BOOL = np.dtype(bool)


def _kind(dtype):
    """b (bool), i (signed), u (unsigned), h (16-bit floats: f16/bf16), f (f32/f64),
    c (complex64/complex128)."""
    if dtype == BOOL:
        return "b"
    if dtype.kind in "iuc":
        return dtype.kind
    if dtype.itemsize == 2:
        return "h"
    return "f"


def _is_float(dtype):
    return _kind(dtype) in "hf"


# ---------------------------------------------------------------- expression rules
# Each rule: (renderer, node, args as C expressions, arg dtypes) -> C expression,
# or None where the compiler does not lower the op for these dtypes (the stretch
# then runs that op through the NumPy backend). `supports` asks the same rules.

def _unary_float(fname):
    def rule(r, node, a, dts):
        return f"{r.math(fname, node.dtype)}({a[0]})" if _is_float(node.dtype) else None
    return rule


def _wrap_int(r, dtype, expr):
    """An integer expression computed in a wide unsigned type, cast back (wraps as NumPy)."""
    return f"(({r.ctype(dtype)})({expr}))"


def _uwide(dtype):
    return "uint64_t" if dtype.itemsize == 8 else "uint32_t"


def _arith(op, bool_op):
    def rule(r, node, a, dts):
        k = _kind(node.dtype)
        if k in "hf":
            return f"({a[0]} {op} {a[1]})"
        if k in "iu":
            u = _uwide(node.dtype)
            return _wrap_int(r, node.dtype, f"({u})({a[0]}) {op} ({u})({a[1]})")
        return None if bool_op is None else f"({a[0]} {bool_op} {a[1]})"
    return rule


def _neg(r, node, a, dts):
    k = _kind(node.dtype)
    if k in "hf":
        return f"(-{a[0]})"
    if k in "iu":
        return _wrap_int(r, node.dtype, f"0u - ({_uwide(node.dtype)})({a[0]})")
    return None


def _div(r, node, a, dts):
    return f"({a[0]} / {a[1]})" if _is_float(node.dtype) else None


def _helper(prefix, kinds):
    """A prelude helper per C type: rn_<prefix>_<ctype>(a, b)."""
    def rule(r, node, a, dts):
        if _kind(node.dtype) not in kinds:
            return None
        return f"rn_{prefix}_{r.compute_name(node.dtype)}({a[0]}, {a[1]})"
    return rule


def _pow(r, node, a, dts):
    k = _kind(node.dtype)
    if k in "iu":   # exponents are known non-negative (fuse.lowerable): NumPy raises on negative ones
        return f"(({r.ctype(node.dtype)})rn_powu64((uint64_t)({a[0]}), (uint64_t)({a[1]})))"
    return f"{r.math('pow', node.dtype)}({a[0]}, {a[1]})" if k in "hf" else None


def _index(r, node, a, dts):
    # its one "argument" is the point's linear index as the loop form spells it (`statements`)
    return f"((int64_t)({a[0]}))"


def _random_bits(r, node, a, dts):
    """Threefry-2x32 of the counter: y0's low bits, or y0:y1 for 64-bit draws."""
    bits = f"rn_threefry({a[0]}, {a[1]}, (uint64_t)({a[2]}))"
    if node.params["width"] == 64:
        return bits
    return f"(({r.ctype(node.dtype)})({bits} >> 32))"


def _extremum(cmp):
    def rule(r, node, a, dts):
        if _is_float(node.dtype):
            # NaN wins. On equal values (+-0) NumPy's float32/float64 loops return the
            # second operand and its float16 loop the first.
            c = cmp + "=" if node.dtype == np.dtype("float16") else cmp
            return f"(({a[0]} {c} {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})"
        return f"(({a[0]} {cmp} {a[1]}) ? {a[0]} : {a[1]})"
    return rule


def _bitwise(op):
    def rule(r, node, a, dts):
        k = _kind(node.dtype)
        if k == "b":
            return f"({a[0]} {op} {a[1]})"
        return _wrap_int(r, node.dtype, f"({a[0]}) {op} ({a[1]})") if k in "iu" else None
    return rule


def _shift_left(r, node, a, dts):
    if _kind(node.dtype) not in "iu":
        return None
    bits, u = 8 * node.dtype.itemsize, _uwide(node.dtype)
    return (f"(((uint64_t)({a[1]}) < {bits}u) ? "
            f"{_wrap_int(r, node.dtype, f'({u})({a[0]}) << ({a[1]})')} : 0)")


def _shift_right(r, node, a, dts):
    k = _kind(node.dtype)
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
    k = _kind(node.dtype)
    if k == "b":
        return f"(!{a[0]})"
    return _wrap_int(r, node.dtype, f"~({a[0]})") if k in "iu" else None


def _abs(r, node, a, dts):
    k = _kind(node.dtype)
    if k in "hf":
        return f"{r.math('fabs', node.dtype)}({a[0]})"
    if k == "i":
        return f"(({a[0]}) < 0 ? {_neg(r, node, a, dts)} : ({a[0]}))"
    return a[0]


def _sign(r, node, a, dts):
    k = _kind(node.dtype)
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
    if not _is_float(node.dtype):
        return None
    # eager computes 1 / sqrt(x): a 16-bit float rounds the square root first
    root = r.rounded(node.dtype, f"{r.math('sqrt', node.dtype)}({a[0]})")
    return f"(({r.compute_type(node.dtype)})1 / {root})"


def _logistic(r, node, a, dts):
    if not _is_float(node.dtype):
        return None
    t = r.compute_type(node.dtype)
    return f"(({t})1 / (({t})1 + {r.math('exp', node.dtype)}(-({a[0]}))))"


def _isnan(r, node, a, dts):
    return f"isnan({a[0]})" if _is_float(dts[0]) else "0"


def _isfinite(r, node, a, dts):
    return f"isfinite({a[0]})" if _is_float(dts[0]) else "1"


def _identity(r, node, a, dts):
    return a[0]


def _select(r, node, a, dts):
    return f"(({a[0]}) ? {a[1]} : {a[2]})"


def _convert(r, node, a, dts):
    src, dst = dts[0], node.dtype
    ks, kd = _kind(src), _kind(dst)
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
    "floor": _unary_float("floor"), "ceil": _unary_float("ceil"),
    "round": _unary_float("rint"),  # rint rounds half to even in the default mode
    "sign": _sign, "abs": _abs, "not": _not, "stop_gradient": _identity,
    "isnan": _isnan, "isfinite": _isfinite,
    "add": _arith("+", "|"), "sub": _arith("-", None), "mul": _arith("*", "&"), "div": _div,
    "floordiv": _helper("floordiv", "hfiu"), "rem": _helper("rem", "hfiu"), "pow": _pow,
    "max": _extremum(">"), "min": _extremum("<"),
    "atan2": lambda r, n, a, d: f"{r.math('atan2', n.dtype)}({a[0]}, {a[1]})" if _is_float(n.dtype) else None,
    "hypot": _helper("hypot", "hf"),   # rune's hypot (complexc.helpers; complexfuncs.py has the rule)
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
        if _kind(node.dtype) == "c" or any(_kind(d) == "c" for d in dts):
            return None if cplx is None else cplx(r, node, a, dts)
        return None if real is None else real(r, node, a, dts)
    return rule


RULES = {op: _complex_aware(op) for op in {**_REAL_RULES, **complexc.RULES}}

# Reductions: (initial value, update of `acc` by `v`, OpenMP reduction operator,
# whether a NaN flag rides along). Float max/min ignore NaN in the vectorised
# loop and a second accumulator remembers whether one was seen: the result is
# then NaN, as NumPy's (so every reduction has an OpenMP clause and vectorises).
def _reducer(init, update, clause):
    def rule(r, dtype, acc, v):
        k = _kind(dtype)
        return init(r, dtype, k), update(r, dtype, k, acc, v), clause(k), k in "hf" and clause(k) in ("max", "min")
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
    """A complex sum folds with complexc's add (a C user reduction keeps its clause)."""
    def rule(r, dtype, acc, v):
        if _kind(dtype) == "c":
            return (*complexc.sum_reducer(r, dtype, acc, v), False)
        return real_rule(r, dtype, acc, v)
    return rule


REDUCERS = {
    "reduce_sum": _complex_sum(_reducer(lambda r, d, k: "0", _fold("+", "|"),
                                        lambda k: "|" if k == "b" else "+")),
    "reduce_prod": _reducer(lambda r, d, k: "1", _fold("*", "&"), lambda k: "&" if k == "b" else "*"),
    "reduce_max": _reducer(_extreme_init(-1), _extreme_update(">"), lambda k: "max"),
    "reduce_min": _reducer(_extreme_init(1), _extreme_update("<"), lambda k: "min"),
}

# Float and complex sums accumulate in blocks: a block of at most SUM_BLOCK elements
# of a row sums in the compute type as any reduction (a few vector lanes, each a
# short sequential run), and the block sums add into a wide accumulator (double,
# complex128). A row's rounding error then stays that of one block, however long
# the row (a plain float32 running sum of 2**24 elements is off by about 1%).
# Exact reductions (integers, max/min) and products (whose rounding error does not
# grow with the order of the factors) keep one accumulator.
SUM_BLOCK = 512


class WideSum:
    """The wide accumulator of a blocked sum of `dtype`: its C type `ctype`, initial
    value `init` and OpenMP reduction operator `clause`; `add(wide, part)` is the
    statement adding a block's partial (of the compute type), `narrow(wide)` the
    total back in the compute type."""

    def __init__(self, r, dtype):
        self.struct = complexc.struct(dtype) if _kind(dtype) == "c" else None
        self.compute = r.compute_type(dtype)
        if self.struct:
            self.ctype, self.init, self.clause = "rn_c128", "rn_c128_make(0, 0)", "rn_c128_add"
        else:
            self.ctype, self.init, self.clause = "double", "0", "+"

    def add(self, wide, part):
        if self.struct is None:
            return f"{wide} += (double){part};"
        if self.struct != "rn_c128":
            part = f"rn_c128_make({part}.re, {part}.im)"
        return f"{wide} = rn_c128_add({wide}, {part});"

    def narrow(self, wide):
        if self.struct is None:
            return f"(({self.compute}){wide})"
        if self.struct != "rn_c128":
            return f"{self.struct}_make((float){wide}.re, (float){wide}.im)"
        return wide


def wide_sum(r, op, dtype):
    """The `WideSum` a reduction `op` of `dtype` accumulates its blocks into, or None
    where it keeps one accumulator (every reduction but float and complex sums)."""
    return WideSum(r, dtype) if op == "reduce_sum" and _kind(dtype) in "hfc" else None


def sum_blocks(rshape, block=SUM_BLOCK):
    """How a reduction's loops over `rshape` split into blocks of at most `block`
    elements: (axis a, chunk c): the loops before `a` run around a loop over `a` in
    chunks of `c`, each chunk with every axis after `a` one block. None when the
    whole reduction fits one block."""
    if math.prod(rshape) <= block:
        return None
    a = max(k for k in range(len(rshape)) if math.prod(rshape[k:]) > block)
    return a, max(1, block // math.prod(rshape[a + 1:]))


# Arg reductions: the comparison that makes a later value the new extreme. The
# first extreme wins (strict comparison); a NaN beats everything but an earlier NaN.
ARG_REDUCERS = {"argmax": ">", "argmin": "<"}
REDUCE_NODES = frozenset(REDUCERS) | frozenset(ARG_REDUCERS)

# Results that are already values of their (16-bit float) dtype: no rounding needed.
_EXACT = frozenset({"neg", "abs", "max", "min", "select", "stop_gradient", "floor", "ceil",
                    "round", "sign", "random_bits", "index"})


class CStyle:
    """What every C-like target shares: types, constants, expressions, the unit layout."""

    target = None
    _CTYPES = {"bool": "_Bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
               "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
               "uint32": "uint32_t", "uint64": "uint64_t", "float16": "_Float16",
               "bfloat16": "uint16_t", "float32": "float", "float64": "double",
               **complexc.CTYPES}

    def ctype(self, dtype):
        """How values of `dtype` are stored."""
        return self._CTYPES[dtype.name]

    def pointer_type(self, dtype):
        """How a kernel's buffer of `dtype` is addressed (its elements' type)."""
        return self.ctype(dtype)

    def compute_type(self, dtype):
        """How values of `dtype` are computed with (16-bit floats in float32)."""
        return "float" if _kind(dtype) == "h" else self.ctype(dtype)

    def compute_name(self, dtype):
        return {"_Bool": "bool"}.get(self.compute_type(dtype), self.compute_type(dtype)).replace("_t", "")

    def math(self, fname, dtype):
        return fname if dtype == np.dtype("float64") else fname + "f"

    # -------------------------------------------------------------- values

    def const(self, c, dtype):
        v, k = c.value, _kind(dtype)
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
        if _kind(node.dtype) == "h" and node.op not in _EXACT and not (
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
        opin = _guarded_axes(inner_loads + outer_loads, 0, no)
        rpin = {a - no for a in _guarded_axes(inner_loads, no, no + nr)}
        inner_w = [ld.strides for ld in inner_loads] + [full(n) for n in inner_idx]
        outer_w = [ld.strides for ld in outer_loads] + [full(n)[:no] for n in outer_idx]
        oshape, oacc, omap = _collapse(kernel.shape, [w[:no] for w in inner_w] + outer_w + [out], opin)
        rshape, racc, rmap = _collapse(kernel.reduce_shape, [w[no:] for w in inner_w], rpin)
        ov = [f"i{a}" for a in range(len(oshape))]
        rv = [f"j{a}" for a in range(len(rshape))]
        axis_vars = ([ov[m] if m is not None else None for m in omap] +
                     [rv[m] if m is not None else None for m in rmap])
        extents = kernel.shape + kernel.reduce_shape

        def guard(ld):
            return _condition(ld.guard, axis_vars, extents)
        n_in = len(inner_w)
        at = {id(w): (oacc[k], racc[k]) for k, w in enumerate(inner_loads + inner_idx)}
        at.update({id(w): (oacc[n_in + k], []) for k, w in enumerate(outer_loads + outer_idx)})

        def index(w, offset=0):
            o, r = at[id(w)]
            return _offset(ov + rv, list(o) + list(r), offset)

        return SimpleNamespace(phases=(inner_loads, inner_nodes, reduces, outer_loads, outer_nodes), no=no,
                               oshape=oshape, rshape=rshape, oacc=oacc, racc=racc, n_inner=n_in, ov=ov, rv=rv,
                               index=index, guard=guard)

    def blocked_loops(self, idx, rv, rshape, blocks, body, block_accs, block_ends, clauses, outer_clauses):
        """The reduced loops of a blocked sum (`sum_blocks`): the axes before `a`, then
        axis `a` in chunks; each chunk declares `block_accs`, runs `body` over itself and
        every later axis (vectorised with `clauses`, unless None: in order), then adds
        its partials (`block_ends`). `outer_clauses`: the chunks run on the OpenMP
        threads with these reductions (None: on one thread)."""
        a, c = blocks
        n = rshape[a]
        outer = [None] * (a + 1)
        if outer_clauses is not None:
            coll = f" collapse({a + 1})" if a else ""
            outer[0] = "#pragma omp parallel for" + coll + "".join(f" reduction({x})" for x in outer_clauses)
        inner = []
        if clauses is not None:
            coll = f" collapse({len(rshape) - a})" if len(rshape) - a > 1 else ""
            inner.append("#pragma omp simd" + coll + "".join(f" reduction({x})" for x in clauses))
        inner.append(f"for ({idx} {rv[a]} = jb; {rv[a]} < je; {rv[a]}++) {{")
        inner += _nest(idx, rv[a + 1:], rshape[a + 1:], [None] * (len(rshape) - a - 1), body, 1)
        inner.append("}")
        chunk = [f"const {idx} je = jb < {n - c} ? jb + {c} : {n};"] + block_accs + inner + block_ends
        lines = _nest(idx, rv[:a], rshape[:a], outer, [], 1)
        # the chunk loop sits innermost of the outer axes (its step is not 1: written out here)
        depth = a + 1
        pad = "  " * depth
        chunk_loop = ([pad + outer[a]] if outer[a] else []) + [pad + f"for ({idx} jb = 0; jb < {n}; jb += {c}) {{"]
        chunk_loop += [pad + "  " + x for x in chunk] + [pad + "}"]
        return lines[:len(lines) - a] + chunk_loop + lines[len(lines) - a:]

    def unit(self, kernels):
        """(unit name, source, [rendered kernels]): one stretch's kernels and a driver
        running them in order. The IR `kernels` are left untouched; each rendered one
        is a copy carrying its `name`, `source` and `target` (kernel.rendered).

        Symbols are named by a hash of the unit's text, so identical stretches
        share one compiled function and many units fit one translation unit."""
        texts = [self.kernel(k, f"@U@_k{j}") for j, k in enumerate(kernels)]
        driver = self.driver([f"@U@_k{j}" for j in range(len(kernels))])
        text = "\n\n".join(texts + [driver])
        name = "rn_" + hashlib.sha256(text.encode()).hexdigest()[:16]
        out = [rendered(k, self.target, f"{name}_k{j}", texts[j].replace("@U@", name))
               for j, k in enumerate(kernels)]
        return name, text.replace("@U@", name), out


def _offset(ivars, strides, offset):
    terms = [v if s == 1 else f"{v} * {s}" for v, s in zip(ivars, strides) if s != 0]
    if offset:
        terms.append(str(offset))
    return " + ".join(terms) or "0"


# Column reductions (CDialect.column_reduction_kernel): accumulators per tile of the
# output's last axis, and the run each sums in the compute type before its wide add.
COLUMN_TILE = 64
COLUMN_BLOCK = SUM_BLOCK // 16


def _columns(lay):
    """Whether a reduction reads its values contiguously along the output's last axis
    and strided along the reduced ones: then it runs in the column form. Not arg
    reductions (in order), complex sums (their user reductions) or short rows."""
    inner_loads, inner_nodes, reduces, _, _ = lay.phases
    if not lay.oshape or not lay.rshape or lay.oshape[-1] < 8:
        return False
    if any(r.op not in REDUCERS or _kind(r.dtype) == "c" for r in reduces):
        return False
    if any(ld.guard or ld.dynamic for ld in inner_loads):
        return False
    walks = [(lay.oacc[k][-1], lay.racc[k][-1]) for k in range(lay.n_inner)]
    # a read broadcast along the output (o == 0) is one value per row of the column form
    return any(o == 1 for o, _ in walks) and all(o == 0 or (o == 1 and r != 1) for o, r in walks)


def _row_invariant(loads, nodes, invariant):
    """(loads, nodes) split into those the same at every index of the inner loop
    (`invariant(load or index node)`; a node whose arguments all are) and the rest,
    each in its order. A guarded or gathered load stays inside."""
    fixed = {id(ld) for ld in loads if not ld.guard and not ld.dynamic and invariant(ld)}
    for n in nodes:
        if (invariant(n) if n.op == "index" else
                all(type(a) is Const or id(a) in fixed for a in n.args)):
            fixed.add(id(n))
    return ([ld for ld in loads if id(ld) in fixed], [n for n in nodes if id(n) in fixed],
            [ld for ld in loads if id(ld) not in fixed], [n for n in nodes if id(n) not in fixed])


def _nest(idx, ivars, shape, pragmas, body, depth):
    """Loops over `shape` (a pragma, or None, before each) around `body`."""
    lines = []
    for v, d, p in zip(ivars, shape, pragmas):
        if p:
            lines.append("  " * depth + p)
        lines.append("  " * depth + f"for ({idx} {v} = 0; {v} < {d}; {v}++) {{")
        depth += 1
    lines += ["  " * depth + x for x in body]
    for _ in shape:
        depth -= 1
        lines.append("  " * depth + "}")
    return lines


def _collapse(shape, accesses, pinned=()):
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


def _guarded_axes(loads, start, stop):
    return {a for ld in loads if ld.guard for a in range(start, stop)
            if a < len(ld.guard) and ld.guard[a] is not None}


def _condition(guard, axis_vars, extents):
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


class CDialect(CStyle):
    """C for the CPU: OpenMP loops, libm's vector functions, `restrict` pointers."""

    target = "c"
    restrict = "restrict"
    parallel_threshold = 1 << 20   # elements; below it one thread is faster than waking more (and than
                                   # contending with BLAS threads for the cores between kernels)

    # libmvec's vector variants (glibc >= 2.35), declared `omp declare simd` so
    # `#pragma omp simd` loops call them, only for the float32 functions NumPy
    # computes with its own SIMD routines (so eager's bits are not libm's either).
    # Every other function stays scalar libm: the very function NumPy calls, so
    # float64 transcendentals (and float32 tan, erf, ...) match eager bit for bit.
    _SIMD_MATH = ("sinf", "cosf", "expf", "logf", "tanhf")

    def pointer_type(self, dtype):
        # Bool buffers are read and written as bytes (NumPy's bools are 0 or 1): gcc
        # vectorises no loop that loads a _Bool beside a wider type (a relu's mask
        # selecting floats), and a scalar select on a random mask mispredicts.
        return "unsigned char" if dtype.name == "bool" else self.ctype(dtype)

    def prelude(self):
        decls = [f"#pragma omp declare simd notinbranch\nfloat {f}(float);" for f in self._SIMD_MATH]
        return (_C_PRELUDE + "\n".join(decls) + "\n" + _c_helpers() + complexc.helpers()
                + complexc.omp_reductions() + _index_helpers())

    def kernel(self, kernel, name):
        if kernel.reduce_shape:
            return self.reduction_kernel(kernel, name)
        out = contiguous_strides(kernel.shape)
        _, _, _, loads, nodes = self.phases(kernel)
        indices = [n for n in nodes if n.op == "index"]
        pinned = _guarded_axes(loads, 0, len(kernel.shape))
        walkers = loads + indices + kernel.stores
        shape, acc, amap = _collapse(kernel.shape, [ld.strides for ld in loads] +
                                     [n.params["strides"] for n in indices] +
                                     [s.strides or out for s in kernel.stores], pinned)
        ivars = [f"i{a}" for a in range(len(shape))]
        at = {id(w): s for w, s in zip(walkers, acc)}
        names = {}
        # what is the same along the innermost loop is computed once per row, before it
        row_loads, row_nodes, loads, nodes = _row_invariant(
            loads, nodes, lambda w: len(shape) > 1 and at[id(w)][-1] == 0)

        def statements(loads, nodes):
            return self.statements(kernel, loads, nodes, names,
                                   lambda ld: _offset(ivars, at[id(ld)], ld.offset),
                                   lambda ld: _condition(ld.guard, [ivars[m] if m is not None else None
                                                                    for m in amap], kernel.shape),
                                   lambda n: _offset(ivars, at[id(n)], 0))
        per_row = statements(row_loads, row_nodes)
        body = statements(loads, nodes)
        body += self.stores(kernel, names, lambda s: _offset(ivars, at[id(s)], s.offset))
        par = kernel.size >= self.parallel_threshold
        pragmas = [None] * len(shape)
        if shape and not kernel.serial:   # a serial kernel's points run in order (repeated scatter indices)
            pragmas[-1] = "#pragma omp simd"
            if par and len(shape) == 1:
                pragmas[0] = "#pragma omp parallel for simd"
            elif par:
                pragmas[0] = "#pragma omp parallel for" + (f" collapse({len(shape) - 1})" if len(shape) > 2 else "")
        lines = [f"static void {name}(void **{self.restrict} b) {{"] + ["  " + x for x in self.pointers(kernel)]
        idx = self.index_type(kernel)
        if per_row:
            body = per_row + _nest(idx, ivars[-1:], shape[-1:], pragmas[-1:], body, 0)
            ivars, shape, pragmas = ivars[:-1], shape[:-1], pragmas[:-1]
        lines += _nest(idx, ivars, shape, pragmas, body, 1)
        return "\n".join(lines + ["}"])

    def index_type(self, kernel):
        return "int32_t" if kernel.index_bits == 32 else "int64_t"

    def reduction_kernel(self, kernel, name):
        """Outer loops over the output, accumulators, an inner loop over the reduced
        axes (the prologue), then the epilogue and stores per output point. A float
        sum over more than SUM_BLOCK elements runs its inner loop in blocks (`sum_blocks`),
        each block's partial added into a wide accumulator (`WideSum`)."""
        lay = self.reduction_layout(kernel)
        if _columns(lay):
            return self.column_reduction_kernel(kernel, name, lay)
        inner_loads, inner_nodes, reduces, outer_loads, outer_nodes = lay.phases
        oshape, rshape, oacc, ov, rv, index, guard = lay.oshape, lay.rshape, lay.oacc, lay.ov, lay.rv, lay.index, lay.guard
        blocks = sum_blocks(rshape)
        names = {}
        # per output point: accumulators, those reset per block, the wide ones
        accs, block_accs, block_ends, updates, finals = [], [], [], [], []
        clauses, outer_clauses = [], []   # reduction clauses of the inner loop, of the block loop
        # prologue values the same across the reduced axes are computed once per output point
        nr = len(kernel.reduce_shape)
        point_loads, point_nodes, inner_loads, inner_nodes = _row_invariant(
            inner_loads, inner_nodes,
            lambda w: nr > 0 and type(w) is Load and not any(w.strides[-nr:]))
        per_point = self.statements(kernel, point_loads, point_nodes, names, lambda ld: index(ld, ld.offset),
                                    guard, index)
        prologue = self.statements(kernel, inner_loads, inner_nodes, names, lambda ld: index(ld, ld.offset),
                                   guard, index)
        position = rv[0] if rv else "0"   # an arg reduction's one reduced axis (dropped when of size 1)
        for k, r in enumerate(reduces):
            acc = f"acc{k}"
            v = names[id(r.args[0])] if type(r.args[0]) is not Const else self.const(r.args[0], r.args[0].dtype)
            vt = r.args[0].dtype
            names[id(r)] = f"r{k}"
            if r.op in ARG_REDUCERS:
                cmp = ARG_REDUCERS[r.op]
                init, _, _, _ = REDUCERS["reduce_max" if cmp == ">" else "reduce_min"](self, vt, acc, v)
                accs += [f"{self.compute_type(vt)} {acc} = {init};", f"int64_t arg{k} = 0;"]
                beats = f"{v} {cmp} {acc}" + (f" || ({v} != {v} && {acc} == {acc})" if _is_float(vt) else "")
                updates.append(f"if ({beats}) {{ {acc} = {v}; arg{k} = {position}; }}")
                clauses.append(None)   # two accumulators: the inner loop runs in order
                finals.append(f"const {self.ctype(r.dtype)} r{k} = ({self.ctype(r.dtype)})arg{k};")
                continue
            init, update, clause, nan = REDUCERS[r.op](self, r.dtype, acc, v)
            wide = wide_sum(self, r.op, r.dtype) if blocks else None
            declare = f"{self.compute_type(r.dtype)} {acc} = {init};"
            updates.append(f"{acc} = {update};")
            clauses.append(f"{clause}:{acc}")
            result = acc
            if wide:
                accs.append(f"{wide.ctype} wide{k} = {wide.init};")
                block_accs.append(declare)
                block_ends.append(wide.add(f"wide{k}", acc))
                outer_clauses.append(f"{wide.clause}:wide{k}")
                result = wide.narrow(f"wide{k}")
            else:
                accs.append(declare)
                outer_clauses.append(f"{clause}:{acc}")
            if nan:
                accs.append(f"int nan{k} = 0;")
                updates.append(f"nan{k} |= ({v} != {v});")
                clauses.append(f"|:nan{k}")
                outer_clauses.append(f"|:nan{k}")
                result = f"(nan{k} ? ({self.compute_type(r.dtype)})NAN : {result})"
            finals.append(f"const {self.compute_type(r.dtype)} r{k} = {self.rounded(r.dtype, result)};")
        epilogue = self.statements(kernel, outer_loads, outer_nodes, names, lambda ld: index(ld, ld.offset),
                                   guard, index)
        epilogue += self.stores(kernel, names, lambda s: _offset(ov, oacc[-1], s.offset))

        ordered = None in clauses
        total = kernel.size * math.prod(kernel.reduce_shape)
        big = total >= self.parallel_threshold
        inner_par = big and (oshape == [] or kernel.size < 8) and not ordered
        idx = self.index_type(kernel)
        if not block_ends:
            rp = [None] * len(rshape)
            if rshape and not ordered:
                coll = f" collapse({len(rshape)})" if len(rshape) > 1 else ""
                red = "".join(f" reduction({c})" for c in clauses)
                rp[0] = f"#pragma omp {'parallel for ' if inner_par else ''}simd{coll}{red}"
            loops = _nest(idx, rv, rshape, rp, prologue + updates, 1)
        else:
            loops = self.blocked_loops(idx, rv, rshape, blocks, prologue + updates, block_accs, block_ends,
                                       None if ordered else clauses, outer_clauses if inner_par else None)
        point = ["  " + x for x in accs + per_point] + loops + ["  " + x for x in finals + epilogue]
        op = [None] * len(oshape)
        if oshape and big and not inner_par:
            op[0] = "#pragma omp parallel for" + (f" collapse({len(oshape)})" if len(oshape) > 1 else "")
        lines = [f"static void {name}(void **{self.restrict} b) {{"] + ["  " + x for x in self.pointers(kernel)]
        lines += _nest(idx, ov, oshape, op, ["{"] + point + ["}"], 1)
        return "\n".join(lines + ["}"])

    def column_reduction_kernel(self, kernel, name, lay):
        """A reduction over leading (strided) axes whose reads are contiguous along the
        output's last axis (a bias gradient, a sum over the batch): the output's last
        axis runs innermost, vectorised, in tiles of COLUMN_TILE accumulators, under
        the reduced loops, so every read is contiguous. A float sum adds each column's
        runs of at most COLUMN_BLOCK values (what one vector lane of the row form sums)
        into a wide accumulator: the row form's accuracy."""
        inner_loads, inner_nodes, reduces, outer_loads, outer_nodes = lay.phases
        oshape, rshape, oacc, ov, rv, index, guard = lay.oshape, lay.rshape, lay.oacc, lay.ov, lay.rv, lay.index, lay.guard
        idx = self.index_type(kernel)
        n, tile = oshape[-1], min(COLUMN_TILE, oshape[-1])
        names = {}
        body = self.statements(kernel, inner_loads, inner_nodes, names, lambda ld: index(ld, ld.offset), guard, index)
        accs, updates, finals, block_accs, block_ends = [], [], [], [], []
        blocks = sum_blocks(rshape, COLUMN_BLOCK)
        for k, r in enumerate(reduces):
            acc, v = f"acc{k}[t]", names[id(r.args[0])] if type(r.args[0]) is not Const else self.const(
                r.args[0], r.args[0].dtype)
            names[id(r)] = f"r{k}"
            init, update, _, nan = REDUCERS[r.op](self, r.dtype, acc, v)
            wide = wide_sum(self, r.op, r.dtype) if blocks else None
            accs.append(f"{self.compute_type(r.dtype)} acc{k}[{tile}];")
            updates.append(f"{acc} = {update};")
            result = acc
            if wide:
                accs.append(f"{wide.ctype} wide{k}[{tile}];")
                accs.append(f"for ({idx} t = 0; t < {tile}; t++) wide{k}[t] = {wide.init};")
                block_accs.append(f"{acc} = {init};")
                block_ends.append(wide.add(f"wide{k}[t]", acc))
                result = wide.narrow(f"wide{k}[t]")
            else:
                accs.append(f"for ({idx} t = 0; t < {tile}; t++) {acc} = {init};")
            if nan:
                accs.append(f"int nan{k}[{tile}];")
                accs.append(f"for ({idx} t = 0; t < {tile}; t++) nan{k}[t] = 0;")
                updates.append(f"nan{k}[t] |= ({v} != {v});")
                result = f"(nan{k}[t] ? ({self.compute_type(r.dtype)})NAN : {result})"
            finals.append(f"const {self.compute_type(r.dtype)} r{k} = {self.rounded(r.dtype, result)};")
        epilogue = self.statements(kernel, outer_loads, outer_nodes, names, lambda ld: index(ld, ld.offset),
                                   guard, index)
        epilogue += self.stores(kernel, names, lambda st: _offset(ov, oacc[-1], st.offset))

        column = f"const {idx} {ov[-1]} = io + t;"
        span = f"{idx} t = 0; t < tn; t++"
        row = ["#pragma omp simd", f"for ({span}) {{", "  " + column] + ["  " + x for x in body + updates] + ["}"]
        if blocks is None:
            reduced = _nest(idx, rv, rshape, [None] * len(rshape), row, 0)
        else:
            a, c = blocks
            chunk = _nest(idx, rv[a + 1:], rshape[a + 1:], [None] * (len(rshape) - a - 1), row, 0)
            chunk = [f"for ({idx} {rv[a]} = jb; {rv[a]} < je; {rv[a]}++) {{"] + ["  " + x for x in chunk] + ["}"]
            chunk = ([f"const {idx} je = jb < {rshape[a] - c} ? jb + {c} : {rshape[a]};",
                      "#pragma omp simd", f"for ({span}) {{"] + ["  " + x for x in block_accs] + ["}"] + chunk
                     + ["#pragma omp simd", f"for ({span}) {{"] + ["  " + x for x in block_ends] + ["}"])
            chunk = [f"for ({idx} jb = 0; jb < {rshape[a]}; jb += {c}) {{"] + ["  " + x for x in chunk] + ["}"]
            reduced = _nest(idx, rv[:a], rshape[:a], [None] * a, chunk, 0)
        point = ([f"const {idx} tn = io + {tile} <= {n} ? {tile} : {n} - io;"] + accs + reduced
                 + [f"for ({span}) {{", "  " + column] + ["  " + x for x in finals + epilogue] + ["}"])
        point = [f"for ({idx} io = 0; io < {n}; io += {tile}) {{"] + ["  " + x for x in point] + ["}"]
        total = kernel.size * math.prod(kernel.reduce_shape)
        outer = [None] * (len(oshape) - 1)
        if total >= self.parallel_threshold:
            if outer:
                outer[0] = "#pragma omp parallel for" + (f" collapse({len(outer)})" if len(outer) > 1 else "")
            else:
                point = ["#pragma omp parallel for"] + point
        lines = [f"static void {name}(void **{self.restrict} b) {{"] + ["  " + x for x in self.pointers(kernel)]
        lines += _nest(idx, ov[:-1], oshape[:-1], outer, point, 1)
        return "\n".join(lines + ["}"])

    def driver(self, names):
        calls = "\n".join(f"  {n}(b);" for n in names)
        return f"void @U@_run(void **b) {{\n{calls}\n}}"


_C_PRELUDE = """\
#include <stdint.h>
#include <string.h>
#include <math.h>
#define RN_FN static inline
"""


def _c_helpers():
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


def _index_helpers():
    """Index arithmetic, integer powers and Threefry, shared by the C and CUDA
    dialects like `_c_helpers` (declared `RN_FN`, no C-only types)."""
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
