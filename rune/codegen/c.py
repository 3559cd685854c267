"""The C dialect of the kernel renderer (target "c"): kernels for the CPU.

`CDialect` renders with the shared C-style core (rune/codegen/cstyle.py: types,
expression rules, reductions, index math, exact-semantics helpers) and decides
what is CPU specific: the prelude (C99 headers, libm's vector variants, the
OpenMP user reductions of complex sums), `restrict` pointers, bool buffers as
bytes, and the loop form. Loops run with OpenMP (`parallel for` above a size
where threads pay, `simd` inside, with some of libm's vector variants
declared); what is the same along the innermost loop is computed once before
it; reductions over strided leading axes run in a column form (the output's
last axis innermost, so every read is contiguous); long float sums run in
blocks added into a wide accumulator; consecutive kernels over the same rows
(a softmax's maxima, exponentials, sums and quotients) run row by row, so a
row is still in cache for the next kernel (rune/codegen/rows.py).

`CDialect().render_unit(kernels)` gives a `RenderedUnit`: the unit's source
(compile it after `prelude()`) with one entry point `<name>_run(void **buffers)`
running its kernels in order; buffers are indexed as rune/compiler/fuse.py's
`Unit.buffers`. rune/backends/cpu compiles and runs it.
"""
import math

from . import complexc, rows
from .cstyle import (ARG_REDUCERS, COSTLY_OPS, REDUCERS, SUM_BLOCK, CStyle, RenderedUnit, c_helpers,
                     condition, index_helpers, is_float, kind, nest, offset, sum_blocks, unit_name, wide_sum)
from .kernel import Const, Load, rendered

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
    if any(r.op not in REDUCERS or kind(r.dtype) == "c" for r in reduces):
        return False
    if any(ld.guard or ld.dynamic for ld in inner_loads):
        return False
    walks = [(lay.oacc[k][-1], lay.racc[k][-1]) for k in range(lay.n_inner)]
    # a read broadcast along the output (o == 0) is one value per row of the column form
    return any(o == 1 for o, _ in walks) and all(o == 0 or (o == 1 and r != 1) for o, r in walks)


def _cost(nodes):
    """What a point of these nodes costs, in adds: a libm call is tens."""
    return sum(16 if n.op in COSTLY_OPS else 1 for n in nodes)


def _rows(row):
    """The first loop's bounds in a row function running `row` of its iterations per row r."""
    return None if row is None else ("r" if row == 1 else f"r * {row}", "r + 1" if row == 1 else f"r * {row} + {row}")


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




class CDialect(CStyle):
    """C for the CPU: OpenMP loops, libm's vector functions, `restrict` pointers."""

    target = "c"
    restrict = "restrict"
    parallel_threshold = 1 << 20   # elements; below it one thread is faster than waking more (and than
                                   # contending with BLAS threads for the cores between kernels)
    # a row group's points (summed over its kernels): one parallel loop serves all its kernels
    row_parallel_threshold = 1 << 18
    # an elementwise kernel's points times its per-point cost (_cost) from which its loop is parallel
    # too (a GELU's tanh over 2048x256 floats): a warm team starts in microseconds
    parallel_work = 1 << 22

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
        return (_C_PRELUDE + "\n".join(decls) + "\n" + c_helpers() + complexc.helpers()
                + complexc.omp_reductions() + index_helpers())

    def kernel(self, kernel, name, row=None):
        """`kernel` as a C function `name(void **b)`; with `row` (rune/codegen/rows.py),
        as `name(void **b, int64_t r)` running iterations [r * row, (r + 1) * row) of
        its outermost loop, on the calling thread."""
        if kernel.reduce_shape:
            return self.reduction_kernel(kernel, name, row)
        loads, nodes, indices, walkers, shape, acc, amap = self.collapsed_walk(kernel)
        ivars = [f"i{a}" for a in range(len(shape))]
        at = {id(w): s for w, s in zip(walkers, acc)}
        names = {}
        # what is the same along the innermost loop is computed once per row, before it
        row_loads, row_nodes, loads, nodes = _row_invariant(
            loads, nodes, lambda w: len(shape) > 1 and at[id(w)][-1] == 0)

        def statements(loads, nodes):
            return self.statements(kernel, loads, nodes, names,
                                   lambda ld: offset(ivars, at[id(ld)], ld.offset),
                                   lambda ld: condition(ld.guard, [ivars[m] if m is not None else None
                                                                    for m in amap], kernel.shape),
                                   lambda n: offset(ivars, at[id(n)], 0))
        per_row = statements(row_loads, row_nodes)
        body = statements(loads, nodes)
        body += self.stores(kernel, names, lambda s: offset(ivars, at[id(s)], s.offset))
        par = row is None and (kernel.size >= self.parallel_threshold
                               or kernel.size * _cost(nodes + row_nodes) >= self.parallel_work)
        pragmas = [None] * len(shape)
        if shape and not kernel.serial:   # a serial kernel's points run in order (repeated scatter indices)
            pragmas[-1] = "#pragma omp simd"
            if par and len(shape) == 1:
                pragmas[0] = "#pragma omp parallel for simd"
            elif par:
                pragmas[0] = "#pragma omp parallel for" + (f" collapse({len(shape) - 1})" if len(shape) > 2 else "")
        lines = [self.signature(name, row)] + ["  " + x for x in self.pointers(kernel)]
        idx = self.index_type(kernel)
        if per_row:
            body = per_row + nest(idx, ivars[-1:], shape[-1:], pragmas[-1:], body, 0)
            ivars, shape, pragmas = ivars[:-1], shape[:-1], pragmas[:-1]
        lines += nest(idx, ivars, shape, pragmas, body, 1, _rows(row))
        return "\n".join(lines + ["}"])

    def signature(self, name, row=None):
        if row is None:
            return f"static void {name}(void **{self.restrict} b) {{"
        return f"static inline void {name}(void **{self.restrict} b, int64_t r) {{"

    def index_type(self, kernel):
        return "int32_t" if kernel.index_bits == 32 else "int64_t"

    def reduction_kernel(self, kernel, name, row=None):
        """Outer loops over the output, accumulators, an inner loop over the reduced
        axes (the prologue), then the epilogue and stores per output point. A float
        sum over more than SUM_BLOCK elements runs its inner loop in blocks (`sum_blocks`),
        each block's partial added into a wide accumulator (`WideSum`)."""
        lay = self.reduction_layout(kernel)
        if _columns(lay):
            return self.column_reduction_kernel(kernel, name, lay)
        inner_loads, inner_nodes, reduces, _, _ = lay.phases
        oshape, rshape, ov, rv, index, guard = lay.oshape, lay.rshape, lay.ov, lay.rv, lay.index, lay.guard
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
                beats = f"{v} {cmp} {acc}" + (f" || ({v} != {v} && {acc} == {acc})" if is_float(vt) else "")
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
        epilogue = self.reduction_epilogue(kernel, lay, names)

        ordered = None in clauses
        total = kernel.size * math.prod(kernel.reduce_shape)
        big = total >= self.parallel_threshold and row is None
        inner_par = big and (oshape == [] or kernel.size < 8) and not ordered
        idx = self.index_type(kernel)
        if not block_ends:
            rp = [None] * len(rshape)
            if rshape and not ordered:
                coll = f" collapse({len(rshape)})" if len(rshape) > 1 else ""
                red = "".join(f" reduction({c})" for c in clauses)
                rp[0] = f"#pragma omp {'parallel for ' if inner_par else ''}simd{coll}{red}"
            loops = nest(idx, rv, rshape, rp, prologue + updates, 1)
        else:
            loops = self.blocked_loops(idx, rv, rshape, blocks, prologue + updates, block_accs, block_ends,
                                       None if ordered else clauses, outer_clauses if inner_par else None)
        point = ["  " + x for x in accs + per_point] + loops + ["  " + x for x in finals + epilogue]
        op = [None] * len(oshape)
        if oshape and big and not inner_par:
            op[0] = "#pragma omp parallel for" + (f" collapse({len(oshape)})" if len(oshape) > 1 else "")
        lines = [self.signature(name, row)] + ["  " + x for x in self.pointers(kernel)]
        lines += nest(idx, ov, oshape, op, ["{"] + point + ["}"], 1, _rows(row))
        return "\n".join(lines + ["}"])

    def reduction_epilogue(self, kernel, lay, names):
        """A reduction's statements once per output point, after its accumulators are
        final (`names` holds them): the outer nodes, then the stores."""
        _, _, _, outer_loads, outer_nodes = lay.phases
        lines = self.statements(kernel, outer_loads, outer_nodes, names, lambda ld: lay.index(ld, ld.offset),
                                lay.guard, lay.index)
        return lines + self.stores(kernel, names, lambda st: offset(lay.ov, lay.oacc[-1], st.offset))

    def column_reduction_kernel(self, kernel, name, lay):
        """A reduction over leading (strided) axes whose reads are contiguous along the
        output's last axis (a bias gradient, a sum over the batch): the output's last
        axis runs innermost, vectorised, in tiles of COLUMN_TILE accumulators, under
        the reduced loops, so every read is contiguous. A float sum adds each column's
        runs of at most COLUMN_BLOCK values (what one vector lane of the row form sums)
        into a wide accumulator: the row form's accuracy."""
        inner_loads, inner_nodes, reduces, _, _ = lay.phases
        oshape, rshape, ov, rv, index, guard = lay.oshape, lay.rshape, lay.ov, lay.rv, lay.index, lay.guard
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
        epilogue = self.reduction_epilogue(kernel, lay, names)

        column = f"const {idx} {ov[-1]} = io + t;"
        span = f"{idx} t = 0; t < tn; t++"
        row = ["#pragma omp simd", f"for ({span}) {{", "  " + column] + ["  " + x for x in body + updates] + ["}"]
        if blocks is None:
            reduced = nest(idx, rv, rshape, [None] * len(rshape), row, 0)
        else:
            a, c = blocks
            chunk = nest(idx, rv[a + 1:], rshape[a + 1:], [None] * (len(rshape) - a - 1), row, 0)
            chunk = [f"for ({idx} {rv[a]} = jb; {rv[a]} < je; {rv[a]}++) {{"] + ["  " + x for x in chunk] + ["}"]
            chunk = ([f"const {idx} je = jb < {rshape[a] - c} ? jb + {c} : {rshape[a]};",
                      "#pragma omp simd", f"for ({span}) {{"] + ["  " + x for x in block_accs] + ["}"] + chunk
                     + ["#pragma omp simd", f"for ({span}) {{"] + ["  " + x for x in block_ends] + ["}"])
            chunk = [f"for ({idx} jb = 0; jb < {rshape[a]}; jb += {c}) {{"] + ["  " + x for x in chunk] + ["}"]
            reduced = nest(idx, rv[:a], rshape[:a], [None] * a, chunk, 0)
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
        lines += nest(idx, ov[:-1], oshape[:-1], outer, point, 1)
        return "\n".join(lines + ["}"])

    def render_unit(self, kernels):
        """The `RenderedUnit` of one stretch's IR `kernels` and a driver `<name>_run`
        running them in order, consecutive kernels over the same rows row by row
        (rune/codegen/rows.py). The IR is left untouched; each rendered kernel is a
        copy carrying its `name`, `source` and `target` (kernel.rendered): a kernel
        of a row group, its row function (the group's loop with the last)."""
        found = rows.groups([self.row_form(k) for k in kernels], _writers(kernels))
        texts = [self.kernel(k, f"@U@_k{j}") for j, k in enumerate(kernels)]
        calls = [f"@U@_k{j}" for j in range(len(kernels))]
        for g in found:
            for j, chunk in zip(range(g.start, g.stop), g.chunks):
                texts[j] = self.kernel(kernels[j], f"@U@_k{j}", chunk)
            texts[g.stop - 1] += "\n\n" + self.row_loop(f"@U@_g{g.start}", kernels[g.start:g.stop], g)
            calls[g.start:g.stop] = [f"@U@_g{g.start}"] + [None] * (g.stop - g.start - 1)
        driver = self.driver([c for c in calls if c is not None])
        text = "\n\n".join(texts + [driver])
        name = unit_name(text)
        out = tuple(rendered(k, self.target, f"{name}_k{j}", texts[j].replace("@U@", name))
                    for j, k in enumerate(kernels))
        return RenderedUnit(name, text.replace("@U@", name), out)

    def row_loop(self, name, kernels, group):
        """The function running a row group's row functions, row by row: on the
        OpenMP threads when the group's points are many enough (rows are independent)."""
        work = sum(k.size * math.prod(k.reduce_shape) for k in kernels)
        pragma = ["  #pragma omp parallel for"] if work >= self.row_parallel_threshold else []
        calls = [f"    @U@_k{group.start + j}(b, r);" for j in range(len(kernels))]
        return "\n".join([f"static void {name}(void **{self.restrict} b) {{"] + pragma
                         + [f"  for (int64_t r = 0; r < {group.rows}; r++) {{"] + calls + ["  }", "}"])

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
            if not lay.oshape or _columns(lay):
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

    def driver(self, names):
        calls = "\n".join(f"  {n}(b);" for n in names)
        return f"void @U@_run(void **b) {{\n{calls}\n}}"


def _writers(kernels):
    """Buffer index -> how many of `kernels` store into it."""
    count = {}
    for k in kernels:
        for st in k.stores:
            count[st.buffer.index] = count.get(st.buffer.index, 0) + 1
    return count


_C_PRELUDE = """\
#include <stdint.h>
#include <string.h>
#include <math.h>
#define RN_FN static inline
"""

