"""The C dialect of the kernel renderer (target "c"): kernels for the CPU.

`CDialect` renders with the shared C-style core (rune/codegen/cstyle.py: types,
expression rules, reductions, index math, exact-semantics helpers) and decides
what is CPU specific: the prelude (C99 headers, libm's vector variants),
`restrict` pointers, bool buffers as bytes, and the loop form. Loops run with OpenMP (`parallel for` above a size
where threads pay, `simd` inside, with some of libm's vector variants
declared); what is the same along the innermost loop is computed once before
it; reductions over strided leading axes run in a column form (the output's
last axis innermost, so every read is contiguous); every reduction folds its
elements in the one order reductions.py fixes (blocks of vector lanes, fixed trees),
the threads splitting a row's blocks, never the order; consecutive kernels over the same rows
(a softmax's maxima, exponentials, sums and quotients) run row by row, so a
row is still in cache for the next kernel (rune/codegen/rows.py).

`CDialect().render_unit(kernels)` gives a `RenderedUnit`: the unit's source
(compile it after `prelude()`) with one entry point `<name>_run(void **buffers)`
running its kernels in order; buffers are indexed as rune/compiler/fuse.py's
`Unit.buffers`. rune/backends/cpu compiles and runs it.
"""
import math

from ..base.tuning import COLUMN_TILE
from . import complexc, mathlib
from .cstyle import CStyle, RenderedUnit, columns_form, unit_name
from .expressions import op_cost
from .helpers import c_helpers, index_helpers, read
from .index_math import flat_index, nest, offset
from .kernel import Const, Load, rendered
from .reductions import REDUCE_BLOCK, REDUCE_LANES, Fold, fold_plan, tree_depth, tree_push, tree_total


def _cost(nodes):
    """What a point of these nodes costs, in adds: a libm call is tens."""
    return sum(op_cost(n.op) for n in nodes)


def _rows(row):
    """The first loop's bounds in a row function running `row` of its iterations per row r."""
    return None if row is None else ("r" if row == 1 else f"r * {row}", "r + 1" if row == 1 else f"r * {row} + {row}")


def _rows_apart(kernel, loads, at, per_row):
    """Whether a serial (scatter) kernel's innermost loop can run as vectors: each
    store writes one row per outer point, chosen by values computed before the loop
    (`per_row`), a different element at each inner index; and every load of a buffer
    the kernel writes reads the element its store writes at the same inner index (the
    same strides and indices; a dropped write's row is read clamped, never written)."""
    fixed = {id(x) for x in per_row}
    stores = {}
    for s in kernel.stores:
        if (len(at[id(s)]) < 2 or at[id(s)][-1] == 0 or s.buffer.index in stores
                or any(type(v) is not Const and id(v) not in fixed for v, *_ in s.dynamic)):
            return False
        stores[s.buffer.index] = s
    for ld in loads:
        s = stores.get(ld.buffer.index)
        if s is not None and (at[id(ld)] != at[id(s)] or ld.offset != s.offset or
                              [(id(v), st, n) for v, st, n, _ in ld.dynamic] !=
                              [(id(v), st, n) for v, st, n, _ in s.dynamic]):
            return False
    return True


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
    stores_shared_costly = True   # (CStyle): a row group's rows stay in cache
    parallel_threshold = 1 << 20   # elements; below it one thread is faster than waking more (and than
                                   # contending with BLAS threads for the cores between kernels)
    # a row group's points (summed over its kernels): one parallel loop serves all its kernels
    row_parallel_threshold = 1 << 18
    # an elementwise kernel's points times its per-point cost (_cost) from which its loop is parallel
    # too (a GELU's tanh over 2048x256 floats): a warm team starts in microseconds
    parallel_work = 1 << 22
    # the most runs a row's blocks are split into among the threads (`split_fold`): enough
    # to balance any team, few enough that their partials' tree costs nothing
    fold_groups = 256

    # libmvec's vector variants (glibc >= 2.35), declared `omp declare simd` so
    # `#pragma omp simd` loops call them, only for the float32 functions NumPy
    # computes with its own SIMD routines (so eager's bits are not libm's either).
    # Every other function stays scalar libm: the very function NumPy calls where NumPy
    # has no SIMD routine of its own (on AVX-512 builds it has float64 ones, and eager
    # float64 differs there: docs/numerics.md, "Not yet").
    _SIMD_MATH = ("sinf", "cosf", "expf", "logf", "tanhf")

    def pointer_type(self, dtype):
        # Bool buffers are read and written as bytes (NumPy's bools are 0 or 1): gcc
        # vectorises no loop that loads a _Bool beside a wider type (a relu's mask
        # selecting floats), and a scalar select on a random mask mispredicts.
        return "unsigned char" if dtype.name == "bool" else self.ctype(dtype)

    def beside_calls(self):
        return _BESIDE_CALLS

    def prelude(self):
        decls = [f"#pragma omp declare simd notinbranch\nfloat {f}(float);" for f in self._SIMD_MATH]
        return (_C_PRELUDE + "\n".join(decls) + "\n" + c_helpers() + complexc.helpers()
                + index_helpers() + mathlib.declarations(f"__attribute__(({_MATH_ATTRIBUTES}))"))

    def math_library(self):
        """The prelude of rune's math library's units (rune/backends/cpu/math_library.py:
        each function is compiled once per machine, as a shared library loaded into the
        global scope): the library's text with each public function renamed
        `<name>_impl` and inlined where called, and nothing exported."""
        names = mathlib.functions()
        return (_C_PRELUDE + "#define RN_MATH_FN static inline __attribute__((always_inline))\n"
                + "".join(f"#define {fn} {fn}_impl\n" for fn in names) + mathlib.source()
                + "".join(f"#undef {fn}\n" for fn in names) + mathlib.fast_source() + _SIMD_CLONES)

    def math_function(self, fn):
        """The math library's unit exporting `fn` and its SIMD clones under the name the
        kernels' prelude declares (after `math_library()`), with its (empty) entry point.
        A function with a fast path gets the clones of simd_clones.h where that header
        can write them (gcc on x86-64), gcc's elsewhere."""
        params = ", ".join(f"float x{i}" for i in range(mathlib.arity(fn)))
        args = ", ".join(f"x{i}" for i in range(mathlib.arity(fn)))
        name = f"rn_library_{fn}"
        body = f"float {fn}({params}) {{ return {fn}_impl({args}); }}\n"
        exported = f"__attribute__(({_MATH_ATTRIBUTES})) {body}"
        if fn in mathlib.FAST:   # (a scalar call branches: the fast path, the full evaluation where it flags)
            fast = mathlib.FAST[fn]
            scalar = (f"float {fn}(float x) {{ int slow; float y = {fast}(x, &slow); "
                      f"return slow ? {fn}_impl(x) : y; }}\n")
            exported = (f"#if RN_X86_CLONES\n__attribute__((const)) {scalar}RN_CLONES({fn}, {fast})\n"
                        f"#else\n{exported}#endif\n")
        return name, exported + f"void {name}_run(void **b) {{ (void)b; }}\n"

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
            return self.walk_statements(kernel, loads, nodes, names, ivars, at, amap)
        per_row = statements(row_loads, row_nodes)
        if len(shape) > 1:   # a row chosen by such values (a gather's, a scatter's): its address too
            per_row += self.hoist_terms(loads + kernel.stores, {id(x) for x in row_loads + row_nodes}, names)
        body = statements(loads, nodes)
        body += self.stores(kernel, names, lambda s: offset(ivars, at[id(s)], s.offset))
        par = row is None and (kernel.size >= self.parallel_threshold
                               or kernel.size * _cost(nodes + row_nodes) >= self.parallel_work)
        pragmas = [None] * len(shape)
        if shape and kernel.serial:
            # a serial kernel's points run in order on one thread (repeated scatter indices);
            # its innermost loop still runs as vectors where its points cannot meet (an
            # embedding's gradient: a row per token)
            if _rows_apart(kernel, loads, at, row_loads + row_nodes):
                pragmas[-1] = "#pragma omp simd"
        elif shape:
            pragmas[-1] = "#pragma omp simd"
            if par and len(shape) == 1:
                pragmas[0] = self.parallel_for(" simd")
            elif par:
                pragmas[0] = self.parallel_for(f" collapse({len(shape) - 1})" if len(shape) > 2 else "")
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
        """Outer loops over the output, then per output point its reduced elements folded
        in the fixed order (cstyle.py: `fold_blocks`): blocks of vector lanes, the lanes'
        tree, the blocks' tree; then the epilogue and stores. A reduction to few points
        over many elements splits each row's blocks among the OpenMP threads in runs
        that are subtrees of the block tree (`fold_plan`): any thread count gives the
        same bits."""
        lay = self.reduction_layout(kernel)
        if columns_form(lay):
            return self.column_reduction_kernel(kernel, name, lay)
        inner_loads, inner_nodes, reduces, _, _ = lay.phases
        oshape, rshape, ov, rv, index, guard = lay.oshape, lay.rshape, lay.ov, lay.rv, lay.index, lay.guard
        names = {}
        # prologue values the same across the reduced axes are computed once per output point
        nr = len(kernel.reduce_shape)
        point_loads, point_nodes, inner_loads, inner_nodes = _row_invariant(
            inner_loads, inner_nodes,
            lambda w: nr > 0 and type(w) is Load and not any(w.strides[-nr:]))
        per_point = self.statements(kernel, point_loads, point_nodes, names, lambda ld: index(ld, ld.offset),
                                    guard, index)
        prologue = self.statements(kernel, inner_loads, inner_nodes, names, lambda ld: index(ld, ld.offset),
                                   guard, index)
        folds, accs, in_order, finals = self.point_reductions(reduces, names, rv[0] if rv else "0")
        epilogue = self.reduction_epilogue(kernel, lay, names)

        total = kernel.size * math.prod(kernel.reduce_shape)
        big = total >= self.parallel_threshold and row is None
        n = math.prod(rshape)
        split = big and (oshape == [] or kernel.size < 8) and not in_order and n > REDUCE_BLOCK
        plan = fold_plan(n, self.fold_groups if split else 1)
        idx = self.index_type(kernel)
        element = prologue + in_order
        if split:
            folded = self.split_fold(idx, rshape, rv, folds, element, plan)
        else:
            folded = self.fold_blocks(idx, rshape, rv, folds, element, plan, "0", str(plan.blocks),
                                      simd=not in_order)
        point = ["  " + x for x in accs + per_point + folded + finals + epilogue]
        op = [None] * len(oshape)
        if oshape and big and not split:
            op[0] = self.parallel_for(f" collapse({len(oshape)})" if len(oshape) > 1 else "")
        lines = [self.signature(name, row)] + ["  " + x for x in self.pointers(kernel)]
        lines += nest(idx, ov, oshape, op, ["{"] + point + ["}"], 1, _rows(row))
        return "\n".join(lines + ["}"])

    def split_fold(self, idx, rshape, rv, folds, element, plan):
        """A row's blocks folded on the OpenMP threads: each run of `plan.span` blocks (a
        subtree of the block tree) into its slot, then the runs' partials by the tree's
        top on the calling thread. Threads take runs, never a say in the order."""
        runs = plan.groups
        lines = [f"{f.part} gp{f.k}[{runs}];" for f in folds] + [f"int gn{f.k}[{runs}];" for f in folds if f.nan]
        last = f"(g + 1) * {plan.span} < {plan.blocks} ? (g + 1) * {plan.span} : {plan.blocks}"
        run = [f"{f.part} pt{f.k};" for f in folds] + [f"int nan{f.k} = 0;" for f in folds if f.nan]
        run += self.fold_blocks(idx, rshape, rv, folds, element, plan, f"g * {plan.span}", last, simd=True)
        run += [f"gp{f.k}[g] = pt{f.k};" for f in folds] + [f"gn{f.k}[g] = nan{f.k};" for f in folds if f.nan]
        lines += [self.parallel_for(" schedule(static)"), f"for (int64_t g = 0; g < {runs}; g++) {{"]
        lines += ["  " + x for x in run] + ["}"]
        # the runs' partials: the leaves of the tree's top
        lines += [f"{f.part} stk{f.k}[{tree_depth(runs)}];" for f in folds] + ["int top = 0;"]
        step = [f"{f.part} w{f.k} = gp{f.k}[g];" for f in folds] + tree_push(folds, "g", [f"w{f.k}" for f in folds])
        step += [f"nan{f.k} |= gn{f.k}[g];" for f in folds if f.nan]
        lines += [f"for (int64_t g = 0; g < {runs}; g++) {{"] + ["  " + x for x in step] + ["}"]
        return lines + tree_total(folds, [f"pt{f.k}" for f in folds])

    def parallel_for(self, clauses=""):
        """The pragma of every parallel loop the C dialect writes (one place to give
        them all another clause)."""
        return "#pragma omp parallel for" + clauses

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
        axis runs innermost, vectorised, in tiles of COLUMN_TILE columns, under the
        reduced elements, so every read is contiguous. Each column folds in the fixed
        order (cstyle.py: `fold_blocks`), its lanes a row of accumulators per lane:
        element j of the reduced axes goes to lane j % REDUCE_LANES of its block, the
        lanes' tree and the blocks' tree run per column. The same bits as the row form."""
        inner_loads, inner_nodes, reduces, _, _ = lay.phases
        oshape, rshape, ov, rv, index, guard = lay.oshape, lay.rshape, lay.ov, lay.rv, lay.index, lay.guard
        idx = self.index_type(kernel)
        n, tile = oshape[-1], min(COLUMN_TILE, oshape[-1])
        names = {}
        body = self.statements(kernel, inner_loads, inner_nodes, names, lambda ld: index(ld, ld.offset), guard, index)
        folds = []
        for k, r in enumerate(reduces):
            folds.append(Fold(self, k, r, self.reduced(k, r, names)))
        epilogue = self.reduction_epilogue(kernel, lay, names)
        plan = fold_plan(math.prod(rshape))
        w, blk = REDUCE_LANES, REDUCE_BLOCK
        column = f"const {idx} {ov[-1]} = io + t;"

        def columns(lines, simd=True, count="tn"):
            return ((["#pragma omp simd"] if simd else []) + [f"for (int t = 0; t < {count}; t++) {{"]
                    + ["  " + x for x in lines] + ["}"])

        setup = [f"const {idx} tn = io + {tile} <= {n} ? {tile} : {n} - io;"]
        setup += [f"{f.part} stk{f.k}[{plan.depth}][{tile}];" for f in folds] + ["int top = 0;"]
        setup += [f"int nan{f.k}[{tile}];" for f in folds if f.nan]
        setup += columns([f"nan{f.k}[t] = 0;" for f in folds if f.nan])
        block = [f"const {idx} jb = ({idx})b * {blk};", f"const {idx} je = jb < {plan.n - blk} ? jb + {blk} : {plan.n};"]
        block += [f"{f.ctype} lane{f.k}[{w}][{tile}];" for f in folds]
        # lane by lane: a lane's rows j = ln, ln + 32, ... of the block into a row of accumulators
        fold = [f"acc{f.k}[t] = {f.update(f'acc{f.k}[t]', f.value)};" for f in folds]
        fold += [f"nan{f.k}[t] |= ({f.value} != {f.value});" for f in folds if f.nan]

        def lane(count):   # a whole tile's count is a constant: its accumulators stay in registers
            lines = [f"{f.ctype} acc{f.k}[{tile}];" for f in folds]
            lines += columns([f"acc{f.k}[t] = {f.init};" for f in folds], count=count)
            element = flat_index(idx, rv, rshape, "jj") + columns([column] + body + fold, count=count)
            lines += [f"for ({idx} jj = jb + ln; jj < je; jj += {w}) {{"] + ["  " + x for x in element] + ["}"]
            return lines + columns([f"lane{f.k}[ln][t] = acc{f.k}[t];" for f in folds], count=count)
        lanes = [f"if (tn == {tile}) {{"] + ["  " + x for x in lane(tile)] + ["} else {"]
        lanes += ["  " + x for x in lane("tn")] + ["}"]
        block += [f"for (int ln = 0; ln < {w}; ln++) {{"] + ["  " + x for x in lanes] + ["}"]
        pair = columns([f"lane{f.k}[ln][t] = {f.update(f'lane{f.k}[ln][t]', f'lane{f.k}[ln + s][t]')};"
                        for f in folds])
        block += [f"for (int s = {w // 2}; s > 0; s >>= 1) {{", "  for (int ln = 0; ln < s; ln++) {"]
        block += ["    " + x for x in pair] + ["  }", "}"]
        # the block's partials onto the columns' tree stacks (one block count for all)
        push = [f"{f.part} w{f.k} = {f.widen(f'lane{f.k}[0][t]')};" for f in folds]
        merge = [f"w{f.k} = {f.join(f'stk{f.k}[d][t]', f'w{f.k}')};" for f in folds]
        push += ["int d = top;", "for (int64_t m = b; m & 1; m >>= 1) {", "  --d;"] + ["  " + x for x in merge] + ["}"]
        push += [f"stk{f.k}[d][t] = w{f.k};" for f in folds]
        block += columns(push, simd=False) + ["for (int64_t m = b; m & 1; m >>= 1) --top;", "++top;"]
        reduced = [f"for (int64_t b = 0; b < {plan.blocks}; b++) {{"] + ["  " + x for x in block] + ["}"]
        finals = [f"{f.part} pt{f.k} = stk{f.k}[top - 1][t];" for f in folds]
        finals += ["for (int s = top - 2; s >= 0; --s) {"]
        finals += [f"  pt{f.k} = {f.join(f'stk{f.k}[s][t]', f'pt{f.k}')};" for f in folds] + ["}"]
        finals += [f.final(f"pt{f.k}", f"nan{f.k}[t]") for f in folds]
        point = setup + reduced + columns([column] + finals + epilogue, simd=False)
        point = [f"for ({idx} io = 0; io < {n}; io += {tile}) {{"] + ["  " + x for x in point] + ["}"]
        total = kernel.size * math.prod(kernel.reduce_shape)
        outer = [None] * (len(oshape) - 1)
        if total >= self.parallel_threshold:   # each column on one thread, folded in its fixed order
            if outer:
                outer[0] = self.parallel_for(f" collapse({len(outer)})" if len(outer) > 1 else "")
            else:
                point = [self.parallel_for()] + point
        lines = [f"static void {name}(void **{self.restrict} b) {{"] + ["  " + x for x in self.pointers(kernel)]
        lines += nest(idx, ov[:-1], oshape[:-1], outer, point, 1)
        return "\n".join(lines + ["}"])

    def render_unit(self, kernels):
        """The `RenderedUnit` of one stretch's IR `kernels` and a driver `<name>_run`
        running them in order, consecutive kernels over the same rows row by row
        (rune/codegen/rows.py). The IR is left untouched; each rendered kernel is a
        copy carrying its `name`, `source` and `target` (kernel.rendered): a kernel
        of a row group, its row function (the group's loop with the last)."""
        found = self.row_groups(kernels)
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
        pragma = ["  " + self.parallel_for()] if work >= self.row_parallel_threshold else []
        calls = [f"    @U@_k{group.start + j}(b, r);" for j in range(len(kernels))]
        return "\n".join([f"static void {name}(void **{self.restrict} b) {{"] + pragma
                         + [f"  for (int64_t r = 0; r < {group.rows}; r++) {{"] + calls + ["  }", "}"])

    def driver(self, names):
        calls = "\n".join(f"  {n}(b);" for n in names)
        return f"void @U@_run(void **b) {{\n{calls}\n}}"


_C_PRELUDE = read("c_prelude.h")   # headers and RN_FN
_SIMD_CLONES = read("simd_clones.h")   # the math library's clones of functions with a fast path

# rune's math functions (rn_math.h) as SIMD clones, GCC's vector variants as libmvec's: a
# fused loop calls the clone on whole vectors (_ZGVeN16v_rn_expf: 16 floats, AVX-512).
# Inlined, a function with a table of hard cases kept gcc from vectorizing the loops it sat
# in (a GELU loop of 2**19 floats: 61 ms inlined, 1.6 ms through the clone). They are
# `const` (they read only their arguments and constant tables), so a call on loop-invariant
# values (Adam's pow(b1, step)) is computed once, not per element. The clones live in one
# shared library per machine (`CDialect.math_library`), not in each unit: compiled into
# every unit that called them, they took a sixth of the compile time of rune's test
# suite's kernels (40 sampled batches: 27.6 -> 23.1 CPU-s).
_MATH_ATTRIBUTES = 'simd("notinbranch"), const'


class _BesideCalls(CDialect):
    """The C dialect in a kernel that calls float32 math functions (`CStyle.beside_calls`):
    float selects are blends of bits (c_prelude.h), since a branch beside the call keeps
    gcc from vectorizing the loop (it cannot if-convert it there). Only there: elsewhere
    the branch vectorizes, and blends cost gcc time on long kernels."""

    def select(self, cond, on_true, on_false, dtype):
        kind = {"float": "f32", "double": "f64"}.get(self.compute_type(dtype))
        if kind is None:
            return super().select(cond, on_true, on_false, dtype)
        return f"rn_select_{kind}({cond}, {on_true}, {on_false})"


_BESIDE_CALLS = _BesideCalls()
