"""`CStyle`, the base of rune's C-style kernel dialects (C: rune/codegen/c.py; CUDA:
rune/codegen/cuda.py): what both render the same way.

- types: how each dtype is stored (`CTYPES`) and computed with (16-bit floats in
  float32), loaded, stored and rounded (`HALVES`);
- constants, and a node as a C expression (`expression`, by the rules of
  rune/codegen/expressions.py);
- a kernel's statements (`statements`, `stores`), phases (`phases`), pointers, and the
  loops of a reduction (`reduction_layout`, `point_reductions`, `fold_blocks`: the order
  of rune/codegen/reductions.py, vectorised lanes);
- `can_render`, the question a planner asks before it fuses a node;
- `RenderedUnit` and `unit_name`, what `render_unit` returns.

The op vocabulary and expression rules are in expressions.py, the reducers and the
reduction order in reductions.py, loop and offset arithmetic in index_math.py, and the C
helper text of the preludes in c_src/ (read by helpers.py).

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

from . import complexc, rows
from .expressions import ARITY, COSTLY_OPS, EXACT_OPS, RULES, is_float, kind
from .helpers import float_literal
from .index_math import collapse, condition, flat_index, guarded_axes, offset
from .kernel import Const, Node, contiguous_strides
from .reductions import ARG_REDUCERS, REDUCE_BLOCK, REDUCE_LANES, REDUCE_NODES, REDUCERS, Fold, lane_tree, \
    tree_push, tree_total


class Half(NamedTuple):
    """How a dialect spells a 16-bit float's values (float32 in the kernels): format
    strings of one C expression (`str.format`'s `{}`)."""
    load: str      # the buffer element -> its value
    stored: str    # a (rounded) value -> the buffer element
    rounded: str   # a float32 result -> rounded to the format, still float32


def _term_key(v, stride, n, hi):
    """The key of a runtime index term in a kernel's `names` (beside the ids of its values)."""
    return ("term", id(v), stride, n, hi)


def _clamped(v, stride, n, hi, arg):
    """A read's runtime index term: the index clamped as the eager backend clamps it."""
    return f"(int64_t){stride} * rn_clamp_index((int64_t)({arg(v)}), {n}, {hi})"


def _counted_from_end(v, n, arg):
    """A scatter's runtime index, counted from the end when negative."""
    return f"rn_from_end((int64_t)({arg(v)}), {n})"


def _indent(lines, by="  "):
    return [by + x for x in lines]


class CStyle:
    """What every C-like target shares: types, constants, expressions, the unit layout."""

    target = None
    # A costly elementwise value (a libm call's tree: softmax's exp) that a reduction and
    # another op both read is stored once and loaded back, instead of computed in each: on
    # the CPU a row group keeps the row in cache (rows.py). The CUDA dialect recomputes it,
    # where a store and two loads of the whole array cost more than the math.
    stores_shared_costly = False
    # dtype name -> the C type its values are stored as (the dtypes the dialect renders)
    CTYPES = {"bool": "_Bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
              "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
              "uint32": "uint32_t", "uint64": "uint64_t", "float16": "_Float16",
              "bfloat16": "uint16_t", "float32": "float", "float64": "double",
              **complexc.CTYPES}
    # 16-bit float dtype name -> how its values (float32 in the kernels) are loaded from
    # and stored into its buffers, and rounded to its format after an operation
    HALVES = {"bfloat16": Half(load="rn_bf16_load({})", stored="rn_bf16_bits({})", rounded="rn_bf16({})"),
              "float16": Half(load="((float){})", stored="((_Float16){})", rounded="((float)(_Float16)({}))")}
    # a float64 rounded once to float16, kept in float32
    F64_TO_F16 = "((float)(_Float16)({}))"

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
        """The constant `c` as a C literal of `dtype`'s compute type (exact)."""
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
        return float_literal(v, self.compute_type(dtype))

    def load(self, dtype, ref):
        """A value of `dtype` read from its buffer element `ref`, in the compute type."""
        half = self.HALVES.get(dtype.name)
        return ref if half is None else half.load.format(ref)

    def stored(self, dtype, value):
        """A value of the compute type as `dtype`'s buffer element (16-bit floats are
        already rounded: `rounded`)."""
        half = self.HALVES.get(dtype.name)
        return value if half is None else half.stored.format(value)

    def select(self, cond, on_true, on_false, dtype):
        """`cond ? on_true : on_false`, values of `dtype`'s compute type."""
        return f"(({cond}) ? {on_true} : {on_false})"

    def beside_calls(self):
        """The dialect that spells the nodes of a kernel calling float32 math functions
        (this one; the C dialect's spells selects otherwise there)."""
        return self

    def rounded(self, dtype, expr):
        """Round a float32 result to its 16-bit float dtype (kept in float32)."""
        half = self.HALVES.get(dtype.name)
        return expr if half is None else half.rounded.format(expr)

    def f64_to_f16(self, expr):
        """A float64 rounded once to float16, kept in float32."""
        return self.F64_TO_F16.format(expr)

    def expression(self, node, args):
        dts = [a.dtype for a in node.args]
        expr = RULES[node.op](self, node, args, dts)
        if kind(node.dtype) == "h" and node.op not in EXACT_OPS and not (
                node.op == "convert" and dts[0] == node.dtype):
            expr = self.rounded(node.dtype, expr)
        return expr

    # -------------------------------------------------------------- kernels

    def operand(self, a, names):
        """The C spelling of an operand: its name in `names`, or a constant's literal."""
        return names[id(a)] if type(a) is not Const else self.const(a, a.dtype)

    def statements(self, kernel, loads, nodes, names, index, guard=None, index_of=None):
        """Lines computing `loads` then `nodes` (in order); `names` maps ids to C names
        (filled here); `index(load)` spells a load's element offset, `guard(load)` the
        condition of a guarded load, `index_of(node)` an `index` node's linear index
        in the loop form's variables. Everything a kernel's rendering depends on is
        passed in: a dialect object holds no per-kernel state, so threads share it."""
        lines = []

        def arg(a):
            return self.operand(a, names)

        for ld in sorted(loads, key=lambda ld: bool(ld.dynamic)):  # index loads first
            names[id(ld)] = f"l{kernel.loads.index(ld)}"
            value = self.load(ld.dtype, f"p{ld.buffer.index}[{index(ld)}{self.dynamic(ld.dynamic, arg, names)}]")
            if ld.guard:  # padding: the buffer is only read inside the guard
                value = f"({guard(ld)}) ? {value} : {self.const(ld.fill, ld.dtype)}"
            lines.append(f"const {self.compute_type(ld.dtype)} {names[id(ld)]} = {value};")
        # a float32 (or 16-bit) math function is a call to its SIMD clone (float64's are
        # scalar calls: their loops never vectorize)
        spell = (self.beside_calls() if any(n.op in COSTLY_OPS and self.compute_type(n.dtype) == "float"
                                            for n in kernel.nodes) else self)
        for n in nodes:
            names[id(n)] = f"v{len(names)}"
            if n.op == "index":
                if index_of is None:
                    raise NotImplementedError(f"{type(self).__name__}: this loop form has no axis indices "
                                              f"to spell an index node with")
                args = [index_of(n)]
            else:
                args = [arg(a) for a in n.args]
            expr = spell.expression(n, args)
            lines.append(f"const {self.compute_type(n.dtype)} {names[id(n)]} = {expr};")
        return lines

    def dynamic(self, terms, arg, names=None):
        """The runtime part of an address: each index clamped as the eager backend clamps it
        (a term computed before the loop, `hoist_terms`, by its name)."""
        names = names or {}
        return "".join(" + " + names.get(_term_key(v, st, n, hi), _clamped(v, st, n, hi, arg))
                       for v, st, n, hi in terms if hi is not None)

    def from_end(self, v, n, arg, names=None):
        """A scatter's runtime index counted from the end when negative (by its name where
        computed before the loop, `hoist_terms`)."""
        return (names or {}).get(_term_key(v, None, n, None), _counted_from_end(v, n, arg))

    def hoist_terms(self, walkers, fixed, names):
        """Lines computing, once per row, the runtime index terms of `walkers` (loads and
        stores) whose index values are the same along the innermost loop (ids in `fixed`),
        each named in `names`: an address whose row is chosen by such a value (an
        embedding's row) then has a base the loop does not change, which gcc needs to
        vectorize the loop."""
        lines = []

        def arg(a):
            return self.operand(a, names)

        for w in walkers:
            for v, st, n, hi in w.dynamic:
                if type(v) is not Const and id(v) not in fixed:
                    continue
                # a read's whole term; a scatter's write, its index (its condition reads it too)
                key, expr = ((_term_key(v, st, n, hi), _clamped(v, st, n, hi, arg)) if hi is not None
                             else (_term_key(v, None, n, None), _counted_from_end(v, n, arg)))
                if key not in names:
                    names[key] = f"d{len(names)}"
                    lines.append(f"const int64_t {names[key]} = {expr};")
        return lines

    def stores(self, kernel, names, index):
        """`index(store)`: the static part of a store's position (a string: the same
        contiguous position for every store)."""
        if not callable(index):
            index = (lambda text: lambda s: text)(index)

        def arg(a):
            return self.operand(a, names)

        lines = []
        for s in kernel.stores:
            v = s.value
            val = names[id(v)] if type(v) is not Const else self.const(v, s.buffer.dtype)
            line = f"p{s.buffer.index}[{index(s)}{self.dynamic(s.dynamic, arg, names)}"
            drops = [(v, st, n) for v, st, n, hi in s.dynamic if hi is None]
            if drops:  # scatter: an index outside [0, n) (negative ones count from the end) drops the write
                pos = [self.from_end(v, n, arg, names) for v, st, n in drops]
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

    def walk_statements(self, kernel, loads, nodes, names, ivars, at, amap):
        """`statements` of an elementwise loop nest over the collapsed axes' variables
        `ivars`: each walker's strides `at[id(walker)]`, `amap` the collapsed axis of each
        kernel axis (None: a dropped unit axis), as `collapsed_walk` gives them."""
        return self.statements(kernel, loads, nodes, names,
                               lambda ld: offset(ivars, at[id(ld)], ld.offset),
                               lambda ld: condition(ld.guard, [ivars[m] if m is not None else None
                                                                for m in amap], kernel.shape),
                               lambda n: offset(ivars, at[id(n)], 0))

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
        """The declarations of a kernel's buffer pointers p<i>: the read-only ones (const),
        then the stored ones (a buffer read and written, a scatter's, among them)."""
        written = {s.buffer.index for s in kernel.stores}
        buffers = [(ld.buffer, "const ") for ld in kernel.loads if ld.buffer.index not in written]
        buffers += [(s.buffer, "") for s in kernel.stores]
        lines, seen = [], set()
        for b, const in buffers:
            if b.index not in seen:
                seen.add(b.index)
                t = self.pointer_type(b.dtype)
                lines.append(f"{const}{t} *{self.restrict} p{b.index} = ({const}{t} *)b[{b.index}];")
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

    def reduced(self, k, r, names):
        """The C value reduction node `r` (the kernel's k-th) folds; `names` gains its
        result's name r<k>."""
        names[id(r)] = f"r{k}"
        return self.operand(r.args[0], names)

    def point_reductions(self, reduces, names, position):
        """One output point's reductions as a loop folding its elements one after the
        other writes them: (the `Fold`s, declarations of their partials and NaN flags
        and of the arg reductions' (value, index) pairs, the arg reductions' updates
        (in index order; `position`: the element's index along the one reduced axis),
        the statements of the results r<k>). `names` gains each reduction's r<k>."""
        folds, accs, in_order, finals = [], [], [], []
        for k, r in enumerate(reduces):
            v = self.reduced(k, r, names)
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

    def row_groups(self, kernels):
        """The row groups (rows.py) of a unit's `kernels` as this dialect renders them."""
        writers = {}   # buffer index -> how many of `kernels` store into it
        for k in kernels:
            for st in k.stores:
                writers[st.buffer.index] = writers.get(st.buffer.index, 0) + 1
        return rows.groups([self.row_form(k) for k in kernels], writers)

    def row_form(self, kernel):
        """`kernel` seen as the iterations of its outermost (collapsed) loop, for
        rune/codegen/rows.py; None where it runs only whole: a serial or closed
        kernel, one storing anywhere but contiguously, a column reduction, one
        without loops."""
        if kernel.serial or kernel.closed or any(st.strides is not None or st.offset or st.dynamic
                                                 for st in kernel.stores):
            return None
        if kernel.reduce_shape:
            lay = self.reduction_layout(kernel)
            if not lay.oshape or columns_form(lay):
                return None
            inner_loads, _, _, outer_loads, _ = lay.phases
            inner = [(ld, lay.oacc[k] + lay.racc[k]) for k, ld in enumerate(inner_loads)]
            outer = [(ld, lay.oacc[lay.n_inner + k] + [0] * len(lay.rshape)) for k, ld in enumerate(outer_loads)]
            walks, extents, out = inner + outer, list(lay.oshape) + list(lay.rshape), lay.oshape
        else:
            loads, _, _, _, shape, acc, _ = self.collapsed_walk(kernel)
            if not shape:
                return None
            walks, extents, out = list(zip(loads, acc)), list(shape), shape
        reads = tuple(rows.Read(ld.buffer.index, strides[0], tuple(extents[1:]), tuple(strides[1:]), ld.offset,
                                bool(ld.dynamic)) for ld, strides in walks)
        each = math.prod(out[1:])
        return rows.RowForm(out[0], reads, {st.buffer.index: each for st in kernel.stores},
                            kernel.size * math.prod(kernel.reduce_shape))


_CAN_RENDER = {}   # (dialect class, op, rule, operand dtypes, result dtype) -> whether it renders


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


def columns_form(lay):
    """Whether a reduction reads its values contiguously along the output's last axis
    and strided along the reduced ones: then it runs in the column form. Not arg
    reductions (in order), complex sums (their user reductions) or short rows."""
    inner_loads, inner_nodes, reduces, _, _ = lay.phases
    if not lay.oshape or not lay.rshape or lay.oshape[-1] < 8:
        return False
    if any(r.op not in REDUCERS or kind(r.dtype) == "c" for r in reduces):
        return False
    if any(ld.guard or ld.dynamic for ld in inner_loads):
        return False
    walks = [(lay.oacc[k][-1], lay.racc[k][-1]) for k in range(lay.n_inner)]
    # a read broadcast along the output (o == 0) is one value per row of the column form
    return any(o == 1 for o, _ in walks) and all(o == 0 or (o == 1 and r != 1) for o, r in walks)
