"""The CUDA C dialect of the kernel renderer (target "cuda").

`CudaDialect` shares with the C dialect every type, constant, expression rule
and exact-semantics helper (rune/codegen/cstyle.py `CStyle`, rune/codegen/helpers.py); it
replaces the loop form with grid-stride loops over a flat index decomposed
into the (collapsed) axes, the reductions with block-wide trees of warp
shuffles, and the storage of 16-bit floats with cuda_fp16.h / cuda_bf16.h
types (computed in float32, rounded after every operation as in C). Math is
CUDA's IEEE functions: compile without --use_fast_math (rune/backends/cuda/nvrtc.py).

What a launcher needs
---------------------
`CudaDialect.render_unit(kernels)` returns a `RenderedUnit` (name, source,
kernels: CudaKernels). The source is one translation unit: `prelude()` is NOT
included (prepend it; it includes cuda_fp16.h and cuda_bf16.h, so pass their
folder with -I). Rendering is pure, as in C: the IR is never written into and
the dialect keeps no per-call state, so threads may share one. Each
`CudaKernel` (a copy of an IR `Kernel`; the IR object itself is never
rendered into) has

- `target == "cuda"`, `name` (its first launch's function), `source` (its functions);
- `launches`: the `Launch`es to run in order (one, two for a reduction split
  across blocks, 2 + ceil(log2 M) for a scatter of M index points whose duplicates
  combine in order: keys, one merge function launched once a pass, fold; a function
  launched again learns its pass from a scratch counter). Each `Launch` names an `extern "C" __global__` function
  (`name`), its 1-d `grid` and `block` (blockDim.x; a multiple of 32, except a
  serial kernel's one thread: grid 1, block 1),
  `shared` (dynamic shared bytes: 0 today, every buffer is static) and
  `params`: the C parameter types in order;
- `args`: what to pass, the same for every launch of the kernel:
  `("buffer", i)` for the unit's buffer i (rune/compiler/fuse.py `Unit.buffers`:
  inputs, outputs and intermediates, each a contiguous device array of its
  dtype and shape), then `("scratch", k)` for the kernel's scratch buffer k;
- `scratch`: [(NumPy dtype, element count)] device buffers the launcher
  allocates (and may keep between calls; they need no initial value).

Every argument is a device pointer aligned to its element type; there are no
scalar arguments (shapes and strides are compiled in). A buffer may be a view
starting anywhere in an allocation (a slice, a scan's row, a foreign or donated
array): flat contiguous kernels read and write `rn_vec`s of up to 16 bytes only
after a runtime test that every pointer they vector-access is aligned to its
vector, and otherwise run the scalar loop (a misaligned vector access is a
sticky CUDA error). Kernels of a unit run in list order on one stream: a kernel
reads only what earlier kernels stored, and the two launches of a split
reduction must run in order too.

Indexed IR: `index` nodes are the point's linear index, spelled from the
grid-stride loop's axis indices (`statements`' `index_of`, as the C loop nest's);
`random_bits` calls the shared inline Threefry (`index_helpers`, in the
prelude); loads and stores add their runtime index terms (clamped, or a dropped
store for scatter) as in C. A `serial` kernel (scatter: repeated indices combine
in NumPy's order) whose combination is an integer add/min/max (the same result in
any order) runs over the whole grid with atomics (`atomic_combines`); any other
(float add/mul, set, ...) sorts the index points by target (a merge sort of
target * M + point keys, O(M log M) comparisons, 16 outputs a thread) and runs the updates
of each target element in order on one thread, different elements in parallel
(`scatter_sorted`: bit for bit NumPy's order at any M); a form neither fits is launched as one thread, and only
thread 0 of block 0 works whatever the launch, so it stays exact. dynamic_update_slice writes distinct
positions and runs over the whole grid. Its copy kernel runs before it, in list order.

Reductions (`CudaKernel.strategy`): "thread" (one thread per output point: short
rows), "block" (one block per output row: many rows), "split" (few long rows: each
row's blocks in aligned runs, a CUDA block per run writing its partials and NaN
flags to scratch, then `<name>_finish` combines each row's runs and runs the
epilogue). Every strategy folds in the one order reductions.py fixes, the C dialect's:
a warp folds a block of REDUCE_BLOCK elements (lane l the elements l, l + 32, ...;
then the shuffle-down tree, C's lane tree), thread 0 combines the blocks' partials
(float and complex sums widened to double) by the block tree, and the runs of the
split strategy are subtrees of it. So the bits are the C kernel's, under any grid
and any block size (a multiple of 32). Float max/min carry a NaN flag, so NaN
propagates as in NumPy. argmax/argmin keep a (value, index) pair whose partials
combine NaN first, then the extreme, then the smaller index, so every tree gives
NumPy's first extreme / first NaN. Shared memory is static (32 slots per accumulator).

Launch shapes come from `DeviceProps` (SM count, threads per block); the
defaults are an sm_90 H200's. `block`, `blocks_per_sm`, the serial-reduction
limit and `reduce_strategy` are parameters so small inputs can be made to
cross blocks (the emulation tests do).
"""
import math

import numpy as np

from ..errors import ArgumentError
from . import complexc, mathlib
from .cstyle import CStyle, Half, RenderedUnit, unit_name
from .expressions import RULES, is_float, kind
from .helpers import c_helpers, index_helpers, read
from .index_math import flat_index, offset
from .kernel import Const, Load, Node, rendered as rendered_kernel
from .reductions import ARG_REDUCERS, REDUCE_BLOCK, REDUCE_LANES, REDUCERS, Fold, fold_plan, tree_depth, tree_push, \
    tree_total


class DeviceProps:
    """What launch shapes are chosen from."""
    __slots__ = ("sm_count", "max_threads_per_block", "arch")

    def __init__(self, sm_count=132, max_threads_per_block=1024, arch="sm_90"):
        self.sm_count, self.max_threads_per_block, self.arch = sm_count, max_threads_per_block, arch

    def __repr__(self):
        return f"DeviceProps({self.sm_count} SMs, {self.max_threads_per_block} threads/block, {self.arch})"


H200 = DeviceProps()


class Launch:
    __slots__ = ("name", "grid", "block", "shared", "params")

    def __init__(self, name, grid, block, shared, params):
        self.name, self.grid, self.block, self.shared, self.params = name, grid, block, shared, params

    def __repr__(self):
        return f"Launch({self.name}, grid={self.grid}, block={self.block}, shared={self.shared})"


STRATEGIES = ("thread", "block", "split")
_MERGE_CHUNK = 16   # most outputs a thread merges in a pass of a scatter's sort (rn_merge_pass)

# fp16/bf16 headers, NVRTC's fixed-width types, RN_FN, the vector access type and a
# scatter sort's merge pass
_PRELUDE = read("cuda_prelude.h")

# The type a value travels through a warp shuffle in (CUDA overloads only int,
# unsigned, long long, unsigned long long, float and double).
_SHUFFLE = {"bool": "int", "int8": "int", "int16": "int", "int32": "int", "int64": "long long",
            "uint8": "unsigned", "uint16": "unsigned", "uint32": "unsigned",
            "uint64": "unsigned long long", "float16": "float", "bfloat16": "float",
            "float32": "float", "float64": "double", "complex64": "float", "complex128": "double"}


# Order-independent scatter combinations with a CUDA atomic: (op, dtype) -> (function,
# the C type it takes). Integer addition wraps, so int64 adds as unsigned 64-bit.
_ATOMICS = {("add", "int32"): ("atomicAdd", "int"), ("add", "uint32"): ("atomicAdd", "unsigned"),
            ("add", "int64"): ("atomicAdd", "unsigned long long"),
            ("add", "uint64"): ("atomicAdd", "unsigned long long"),
            **{(op, dt): (fn, wire) for op, fn in (("min", "atomicMin"), ("max", "atomicMax"))
               for dt, wire in (("int32", "int"), ("uint32", "unsigned"), ("int64", "long long"),
                                ("uint64", "unsigned long long"))}}

# Reductions whose partial accumulators combine with their own update (acc = update(acc,
# other partial)), which is what the shuffle and shared-memory trees do.
_TREE_REDUCTIONS = frozenset({"reduce_sum", "reduce_prod", "reduce_max", "reduce_min"})


def _compute_dtype(dtype):
    return np.dtype(np.float32) if kind(dtype) == "h" else dtype


class CudaDialect(CStyle):
    """CUDA C++ for NVRTC: grid-stride loops, warp-shuffle reductions, __half / __nv_bfloat16."""

    target = "cuda"
    restrict = "__restrict__"
    CTYPES = {**CStyle.CTYPES, "bool": "bool", "float16": "__half", "bfloat16": "__nv_bfloat16"}

    def __init__(self, device=H200, block=256, blocks_per_sm=8, serial_reduce_limit=32,
                 items_per_thread=8, reduce_strategy=None, vector_bytes=16,
                 scatter_sort=True):
        if block % 32 or not 32 <= block <= device.max_threads_per_block:
            raise ArgumentError(f"CudaDialect: block must be a multiple of 32 (whole warps) between 32 "
                                f"and {device.max_threads_per_block}, got {block}")
        if reduce_strategy not in (None,) + STRATEGIES:
            raise ArgumentError(f"CudaDialect: reduce_strategy must be one of {STRATEGIES} or None, "
                                f"got {reduce_strategy!r}")
        self.device, self.block, self.blocks_per_sm = device, block, blocks_per_sm
        self.serial_reduce_limit, self.items_per_thread = serial_reduce_limit, items_per_thread
        self.reduce_strategy = reduce_strategy
        self.vector_bytes = vector_bytes   # widest vector access (0: scalar accesses only)
        self.scatter_sort = scatter_sort   # False: an ordered scatter runs on one thread (a second code path)

    # -------------------------------------------------------------- values

    # bfloat16's value is already rounded when stored: its upper bits are the bfloat16;
    # rounding goes through the shared helper (NaN keeps its sign, as ml_dtypes)
    HALVES = {"bfloat16": Half(load="__bfloat162float({})", stored="__ushort_as_bfloat16(rn_bf16_bits({}))",
                               rounded="rn_bf16({})"),
              "float16": Half(load="__half2float({})", stored="__float2half_rn({})",
                              rounded="__half2float(__float2half_rn({}))")}
    F64_TO_F16 = "__half2float(__double2half({}))"

    def expression(self, node, args):
        if node.op not in RULES:
            raise NotImplementedError(f"the CUDA dialect cannot render a {node.op!r} node "
                                      f"({node.dtype.name}); no expression rule for it")
        return super().expression(node, args)

    def prelude(self):
        return _PRELUDE + c_helpers() + complexc.helpers() + index_helpers() + mathlib.branching_source()

    # -------------------------------------------------------------- units

    def render_unit(self, kernels):
        """The `RenderedUnit` of IR `kernels` (CudaKernels, launched in list order); the IR
        is left untouched. Consecutive kernels over the same rows (rune/codegen/rows.py)
        run as one kernel, a block per row (`row_group`): the group's first kernel carries
        its source and launch, the others none."""
        groups = {g.start: g for g in self.row_groups(kernels) if self._fills_a_block(kernels[g.start:g.stop], g)}
        parts, j = [], 0   # (kernel index, source, launches, scratch, strategy, buffers)
        while j < len(kernels):
            g = groups.get(j)
            if g is None:
                src, launches, scratch, strategy = self.render(kernels[j], f"@U@_k{j}")
                parts.append((j, src, launches, scratch, strategy, self.buffers(kernels[j])))
                j += 1
                continue
            members = kernels[g.start:g.stop]
            src, launch = self.row_group(members, g, f"@U@_g{j}")
            parts.append((j, src, [launch], [], "row group", self.buffers(*members)))
            # the later kernels carry the group's source too, and no launch of their own
            parts += [(m, src, [], [], "row group", []) for m in range(g.start + 1, g.stop)]
            j = g.stop
        text = "\n\n".join(p[1] for p in parts if p[2])
        name = unit_name(text)
        out, entry = [], None
        for j, src, launches, scratch, strategy, buffers in parts:
            for ln in launches:   # made by this call: renamed in place
                ln.name = ln.name.replace("@U@", name)
            entry = launches[0].name if launches else entry   # a group's later kernels: its entry
            args = [("buffer", i) for i in buffers] + [("scratch", s) for s in range(len(scratch))]
            out.append(rendered_kernel(kernels[j], self.target, entry, src.replace("@U@", name),
                                       launches=launches, scratch=scratch, strategy=strategy, args=args))
        return RenderedUnit(name, text.replace("@U@", name), tuple(out))

    def row_form(self, kernel):
        """CStyle's row form, for kernels a block can run row by row: a reduction only
        under the block strategy (one block folds a row)."""
        if kernel.reduce_shape and self.strategy(kernel.size, math.prod(kernel.reduce_shape)) != "block":
            return None
        return super().row_form(kernel)

    def _fills_a_block(self, kernels, group):
        """Whether each kernel of a row group has a block's worth of work in a row (a
        reduction's row length, an elementwise kernel's points): shorter rows keep their
        own kernels, whose elementwise ones spread over all threads, not a block's few."""
        return all((math.prod(k.reduce_shape) if k.reduce_shape else k.size // group.rows) >= self.block
                   for k in kernels)

    def row_group(self, kernels, group, name):
        """(source, Launch) of one kernel running a row group's `kernels` row by row:
        a block per group row (grid-stride over them), each kernel's part of the row in
        turn, with __syncthreads() between (a kernel reads what an earlier one wrote
        in the row; its writes are then visible to the whole block). A row stays in the
        SM's caches from one kernel to the next, where separate kernels each stream the
        whole array through memory. Each kernel's points and folds are its own kernel's,
        so the bits are the same."""
        params = self.params([], *kernels)
        lines = [self.signature(name, params) + " {", "  " + _WARP_IDS,
                 f"  for (int64_t g = blockIdx.x; g < {group.rows}; g += gridDim.x) {{"]
        for pos, (kernel, chunk) in enumerate(zip(kernels, group.chunks)):
            if pos:
                lines.append("    __syncthreads();  // the row's earlier parts are written")
            lines += ["    {"] + ["      " + x for x in self._row_part(kernel, chunk)] + ["    }"]
        lines += ["  }", "}"]
        return "\n".join(lines), Launch(name, self.grid(group.rows), self.block, 0, params)

    def _row_part(self, kernel, chunk):
        """The lines by which a block runs `kernel`'s part of group row `g`: `chunk`
        iterations of its outermost loop, a reduction's output rows one after another,
        an elementwise kernel's points over the block's threads."""
        if kernel.reduce_shape:
            c, _ = self._reduction_parts(kernel, None)
            span = chunk * math.prod(c["oshape"][1:])
            rt = c["row_t"]
            return self.shared(c["accs"]) + [
                f"for ({rt} row = ({rt})g * {span}; row < ({rt})(g + 1) * {span}; row++) {{"] + [
                "  " + x for x in self._block_row(c)] + ["}"]
        loads, nodes, indices, shape, acc, at, idx, position, body_parts = self._point(kernel)
        names = {}
        body = _decompose("t", shape, [f"i{a}" for a in range(len(shape))], idx) + body_parts(names)
        body += self.stores(kernel, names, position)
        span, lt = chunk * math.prod(shape[1:]), _loop_type(kernel.size, idx)
        return _grid_stride("t", lt, f"({lt})(g + 1) * {span}", f"({lt})g * {span} + threadIdx.x", "blockDim.x",
                            body, 0)

    def render(self, kernel, name):
        """(source, [Launch], scratch, strategy) of one IR kernel."""
        if kernel.reduce_shape:
            return self.reduction(kernel, name)
        return self.elementwise(kernel, name)

    def buffers(self, *kernels):
        """The buffers `kernels` read or write, by index."""
        return sorted({b.buffer.index for k in kernels for b in (*k.loads, *k.stores)})

    def params(self, scratch, *kernels):
        """The C parameters of `kernels` (one, or a row group's): each buffer (writable
        where one of them stores it), then the `scratch` buffers."""
        stored = {s.buffer.index for k in kernels for s in k.stores}
        dtypes = {}
        for k in kernels:
            dtypes.update({ld.buffer.index: ld.buffer.dtype for ld in k.loads})
            dtypes.update({s.buffer.index: s.buffer.dtype for s in k.stores})
        params = []
        for i in self.buffers(*kernels):
            t = self.ctype(dtypes[i])
            params.append((f"{t} *" if i in stored else f"const {t} *", f"p{i}"))
        for k, (dt, _) in enumerate(scratch):
            params.append((f"{self.ctype(dt)} *", f"s{k}"))
        return params

    def signature(self, name, params):
        args = ", ".join(f"{t}{self.restrict} {n}" for t, n in params)
        return f'extern "C" __global__ void {name}({args})'

    def index_type(self, kernel):
        return "int32_t" if kernel.index_bits == 32 else "int64_t"

    def grid(self, work):
        """Blocks for `work` items of one block each: enough to fill the device, at least 1."""
        return max(1, min(work, self.device.sm_count * self.blocks_per_sm))

    # -------------------------------------------------------------- elementwise

    def elementwise(self, kernel, name):
        """A grid-stride loop over the flat output index; a `serial` kernel (scatter:
        repeated indices combine in NumPy's order) sorts its points by target and folds
        each target's in order (`scatter_sorted`), or takes atomics where its combination
        is an integer add/min/max; a form neither fits runs its points on one thread."""
        loads, nodes, indices, shape, acc, at, idx, position, body_parts = self._point(kernel)
        names = {}
        body = _decompose("t", shape, [f"i{a}" for a in range(len(shape))], idx) + body_parts(names)

        atomic = self.atomic_combines(kernel)
        if atomic:
            body += self.atomic_stores(kernel, names, position, atomic)
        else:
            body += self.stores(kernel, names, position)
        n = kernel.size
        params = self.params([], kernel)
        lines = [self.signature(name, params) + " {"]
        lt = _loop_type(n, idx)
        if kernel.serial and not atomic:
            ordered = self.scatter_sorted(kernel, name, shape, at, loads, indices, body_parts)
            if ordered is not None:
                return ordered
            # correct under any launch shape: only the first thread works
            lines += ["  if (blockIdx.x != 0 || threadIdx.x != 0) return;"]
            lines += _grid_stride("t", lt, str(n), "0", "1", body, 1)
            return "\n".join(lines + ["}"]), [Launch(name, 1, 1, 0, params)], [], None
        start, step = f"({lt})blockIdx.x * blockDim.x + threadIdx.x", f"({lt})blockDim.x * gridDim.x"
        # the vector body has no axis indices to spell an index node with
        width = self.vector_width(kernel, shape, loads, acc) if not indices else 1
        if width > 1:   # whole vectors where every vector-accessed pointer allows them
            lines += [f"  const bool vectors = {self.vectors_aligned(kernel, loads, at, width)};",
                      "  if (vectors) {"]
            lines += ["  " + x for x in self.vectorised(kernel, loads, nodes, at, lt, start, step, width)]
            lines += ["  }"]
            start = f"(vectors ? {n - n % width} : 0) + {start}"   # the scalar tail, or every point
        lines += _grid_stride("t", lt, str(n), start, step, body, 1)
        grid = self.grid(-(-n // (self.block * width)))
        return "\n".join(lines + ["}"]), [Launch(name, grid, self.block, 0, params)], [], None

    def _point(self, kernel):
        """An elementwise kernel's collapsed walk, and how its point of axis indices
        i0, i1, ... is computed: (loads, nodes, index nodes, collapsed shape, each
        walker's strides, walker -> strides, index type, position(store), body_parts(names))."""
        loads, nodes, indices, walkers, shape, acc, amap = self.collapsed_walk(kernel)
        ivars = [f"i{a}" for a in range(len(shape))]
        at = {id(w): s for w, s in zip(walkers, acc)}

        def position(s):
            return offset(ivars, at[id(s)], s.offset)

        def body_parts(names):
            """The lines computing a point's values, in the axis variables `ivars`."""
            return self.walk_statements(kernel, loads, nodes, names, ivars, at, amap)
        return loads, nodes, indices, shape, acc, at, self.index_type(kernel), position, body_parts

    def scatter_sorted(self, kernel, name, shape, at, loads, indices, body_parts):
        """A scatter whose repeated targets combine in NumPy's order, in parallel at any
        number M of index points: the updates to one element run in order on one thread,
        different elements on different threads (the order the eager GPU scatter's
        rounds keep, without a barrier between rounds). The kernel's (collapsed) axes
        split into the columns, where the store moves, and the index axes, where it
        does not and the runtime index varies; the target may depend on the index axes
        only. Launches: `name` writes each index point j's key target * M + j to s0
        (target N, past every kept one, where the update is dropped); `ceil(log2 M)`
        merge passes (`_merge`, launched once a pass: its pass is the counter s2[0],
        which the last block of each launch moves on) sort the keys, s0 and s1 in
        turn (one function, not one a pass: NVRTC's time grows with the functions);
        `_fold`: one thread per (column, distinct target) walks its run of sorted keys,
        so position order. Keys are unique, so the sort needs no stability; a pass gives
        each thread 16 consecutive outputs of one merge, found by a binary search on
        the merge path. Cost: O(M log M) comparisons over M / 16 threads a pass,
        O(M * columns) updates; the longest run of one target is the only serial part.
        (source, launches, scratch, None), or None where the kernel has another form
        (then it stays serial): several stores, a load of the stored buffer away from
        the stored element, a target depending on a column."""
        if not self.scatter_sort or len(kernel.stores) != 1:
            return None
        store = kernel.stores[0]
        if len(store.dynamic) != 1 or store.dynamic[0][3] is not None:
            return None
        target, _, n, _ = store.dynamic[0]
        sacc = at[id(store)]
        columns = [a for a in range(len(shape)) if sacc[a] != 0]
        points = [a for a in range(len(shape)) if sacc[a] == 0]
        m = math.prod(shape[a] for a in points)
        if not m or (n + 1) * m >= 2 ** 63 or not self.target_per_point(store, target, loads, at, columns, indices):
            return None
        idx = self.index_type(kernel)
        mt = _loop_type(m, idx)
        cols = kernel.size // m
        ut = _loop_type(cols * m, idx)
        ivars = [f"i{a}" for a in range(len(shape))]
        scratch = [(np.dtype(np.int64), m), (np.dtype(np.int64), m), (np.dtype(np.uint32), 2)]
        params = self.params(scratch, kernel)
        point_axes = _decompose("j", [shape[a] for a in points], [ivars[a] for a in points], idx)

        def launch(suffix, var, vtype, count, body):
            """One grid-stride function over `count` items and its Launch."""
            text = [self.signature(name + suffix, params) + " {"]
            text += _grid_stride(var, vtype, str(count), f"({vtype})blockIdx.x * blockDim.x + threadIdx.x",
                                 f"({vtype})blockDim.x * gridDim.x", body, 1) + ["}"]
            return "\n".join(text), Launch(name + suffix, self.grid(-(-count // self.block)), self.block, 0, params)

        names = {}
        body = point_axes + [f"const {idx} {ivars[a]} = 0;" for a in columns] + body_parts(names)
        t = names[id(target)] if type(target) is not Const else self.const(target, target.dtype)
        body += [f"const int64_t at = rn_from_end((int64_t)({t}), {n});",
                 f"s0[j] = ((uint64_t)at < {n}u ? at : {n}) * {m} + j;",
                 "if (j == 0) s2[0] = s2[1] = 0;   // the sort's first pass, no block arrived"]
        parts = [launch("", "j", mt, m, body)]
        launches = [parts[0][1]]
        passes = (m - 1).bit_length()
        merge = [self.signature(f"{name}_merge", params) + " {", "  const uint32_t p = s2[0];",
                 "  rn_merge_pass(p & 1 ? s1 : s0, p & 1 ? s0 : s1, (int64_t)blockIdx.x * blockDim.x + threadIdx.x,",
                 f"                (int64_t)blockDim.x * gridDim.x, (int64_t)1 << p, {m}, {_MERGE_CHUNK});",
                 "  rn_pass_done(s2, p);", "}"]
        parts += [("\n".join(merge), None)]
        for p in range(passes):   # one launch a pass, each over its items (C outputs each)
            items = -(-m // min(_MERGE_CHUNK, 2 << p))
            launches.append(Launch(f"{name}_merge", self.grid(-(-items // self.block)), self.block, 0, params))

        names = {}
        walk = point_axes + body_parts(names) + self.stores(kernel, names, lambda s: offset(ivars, at[id(s)], s.offset))
        keys = f"s{passes % 2}"
        body = [f"const int64_t r0 = (int64_t)(u / {cols});" if cols > 1 else "const int64_t r0 = (int64_t)u;",
                f"const int64_t low = {keys}[r0] / {m} * {m}, high = low + {m};",
                f"if (low >= {n * m} || (r0 > 0 && {keys}[r0 - 1] >= low)) continue;   // dropped, or not the first",
                f"const {ut} c = u % {cols};"]
        body += _decompose("c", [shape[a] for a in columns], [ivars[a] for a in columns], idx) if columns else []
        body += [f"for (int64_t r = r0; r < {m} && {keys}[r] < high; ++r) {{",
                 f"  const {mt} j = ({mt})({keys}[r] - low);"]
        body += ["  " + x for x in walk] + ["}"]
        parts.append(launch("_fold", "u", ut, cols * m, body))
        return "\n\n".join(text for text, _ in parts), launches + [parts[-1][1]], scratch, None

    def target_per_point(self, store, target, loads, at, columns, indices):
        """Whether a scatter's target is one per index point (it stays put along the
        columns: no column index, no load moving along one) and the stored buffer is read
        only at the element stored (the combination)."""
        sacc = at[id(store)]
        for ld in loads:
            if ld.buffer is store.buffer and (at[id(ld)] != sacc or ld.offset != store.offset or ld.guard
                                              or [d[:3] for d in ld.dynamic] != [d[:3] for d in store.dynamic]):
                return False
        seen, stack = set(), [target]
        while stack:   # what the target is computed from
            a = stack.pop()
            if id(a) in seen or type(a) is Const:
                continue
            seen.add(id(a))
            if type(a) is Load:
                if a.guard or any(at[id(a)][c] for c in columns):
                    return False
                stack.extend(d[0] for d in a.dynamic)
            elif a.op == "index" or a in indices:
                return False
            else:
                stack.extend(a.args)
        return True

    def atomic_combines(self, kernel):
        """{id(store): (atomic function, its C type, operand)} when every store of a scatter
        kernel combines into its own buffer by an order-independent integer add/min/max
        (wrapping addition, min and max give one result in any order), else {}. Float
        sums depend on the order and `set` on which duplicate comes last: those stay serial."""
        if not kernel.serial:
            return {}
        out, live = {}, kernel.live_nodes()
        for s in kernel.stores:
            v = s.value
            if (type(v) is not Node or (v.op, v.dtype.name) not in _ATOMICS or len(s.dynamic) != 1
                    or s.dynamic[0][3] is not None or type(v.args[0]) is not Load):
                return {}
            current, (index, stride, n, _) = v.args[0], s.dynamic[0]
            if (current.buffer is not s.buffer or current.strides != s.strides or current.offset != s.offset
                    or [d[:3] for d in current.dynamic] != [(index, stride, n)]
                    or sum(ld.buffer is s.buffer for ld in kernel.loads) != 1
                    or any(a is v for node in live for a in node.args)):
                return {}
            out[id(s)] = _ATOMICS[v.op, v.dtype.name] + (v.args[1],)
        return out

    def atomic_stores(self, kernel, names, position, atomic):
        """A scatter's combining stores as atomics at the same positions (`stores`' drop rule)."""
        lines = []
        for s in kernel.stores:
            fn, wire, operand = atomic[id(s)]
            (index, stride, n, _), = s.dynamic
            at = f"rn_from_end((int64_t)({self.operand(index, names)}), {n})"
            lines.append(f"if ((uint64_t){at} < {n}u) {fn}(({wire} *)&p{s.buffer.index}"
                         f"[{position(s)} + (int64_t){stride} * {at}], ({wire})({self.operand(operand, names)}));")
        return lines

    def vector_width(self, kernel, shape, loads, acc):
        """Elements per thread and vector access (1: scalar) of a flat contiguous kernel:
        every buffer read at stride 1 from an offset the width divides (or at stride 0,
        broadcast) and stored at stride 1, with no guards and enough work to fill the device."""
        if (not self.vector_bytes or len(shape) != 1 or any(ld.guard or ld.dynamic for ld in loads)
                or any(st.strides is not None for st in kernel.stores)):
            return 1
        wide = [ld for ld, s in zip(loads, acc) if s[0] == 1]
        sizes = [ld.buffer.dtype.itemsize for ld in wide] + [st.buffer.dtype.itemsize for st in kernel.stores]
        width = min(4, self.vector_bytes // max(sizes))
        if width < 2 or shape[0] < width * self.block:
            return 1
        stored = {st.buffer.index for st in kernel.stores}
        access = {}
        for ld, s in zip(loads, acc):
            access.setdefault(ld.buffer.index, set()).add((s[0], ld.offset if s[0] else 0))
        for b, kinds in access.items():
            if b in stored or len(kinds) > 1:
                return 1
            (stride, start), = kinds
            if stride not in (0, 1) or start % width:
                return 1
        return width

    def vectors_aligned(self, kernel, loads, at, width):
        """The runtime test that every buffer the vector body reads or writes as `rn_vec`s
        starts on its vector's alignment. Views with an element offset (a slice, a scan's
        row, a foreign or donated buffer) reach kernels as they are, so the test decides
        between the vector loop and the scalar one; it is the same for every thread."""
        sizes = {ld.buffer.index: ld.buffer.dtype.itemsize for ld in loads if at[id(ld)][0] == 1}
        sizes.update({st.buffer.index: st.buffer.dtype.itemsize for st in kernel.stores})
        by_bytes = {}
        for b in sorted(sizes):
            by_bytes.setdefault(sizes[b] * width, []).append(f"(unsigned long long)p{b}")
        return " && ".join(f"(({' | '.join(ps)}) & {n - 1}) == 0" for n, ps in sorted(by_bytes.items()))

    def vectorised(self, kernel, loads, nodes, at, lt, start, step, width):
        """The body over whole vectors of `width` elements: each stride-1 buffer read and
        written as one aligned `rn_vec`, the element loop over it unrolled (its pointers
        shadowed by the vector's elements). It runs only where `vectors_aligned` holds."""
        wide = {ld.buffer.index: ld for ld in loads if at[id(ld)][0] == 1}
        pre, alias, post = [], [], []
        for b, ld in wide.items():
            t = self.ctype(ld.dtype)
            pre.append(f"const rn_vec<{t}, {width}> w{b} = *(const rn_vec<{t}, {width}> *)(p{b} + base + {ld.offset});")
            alias.append(f"const {t} *p{b} = w{b}.v;")
        for st in kernel.stores:
            b, t = st.buffer.index, self.ctype(st.buffer.dtype)
            pre.append(f"rn_vec<{t}, {width}> w{b};")
            alias.append(f"{t} *p{b} = w{b}.v;")
            post.append(f"*(rn_vec<{t}, {width}> *)(p{b} + base) = w{b};")
        names = {}
        inner = self.statements(kernel, loads, nodes, names,
                                lambda ld: "e" if ld.buffer.index in wide else str(ld.offset))
        inner += self.stores(kernel, names, "e")
        body = [f"const {lt} base = v * {width};"] + pre + ["{"] + ["  " + x for x in alias]
        body += ["  #pragma unroll", f"  for (int e = 0; e < {width}; ++e) {{"] + ["    " + x for x in inner]
        body += ["  }", "}"] + post
        return _grid_stride("v", lt, str(kernel.size // width), start, step, body, 1)

    # -------------------------------------------------------------- reductions

    def strategy(self, rows, length):
        """thread: one thread per output point (short rows); block: one block per row
        (many rows); split: several blocks per row, then a finishing kernel (few long rows)."""
        if self.reduce_strategy:
            return self.reduce_strategy
        if length <= self.serial_reduce_limit:
            return "thread"
        if rows >= 2 * self.device.sm_count or length <= self.block * self.items_per_thread:
            return "block"
        return "split"

    def reduction(self, kernel, name):
        """A reduction kernel under its strategy (`_reduction_parts`)."""
        ctx, how = self._reduction_parts(kernel, name)
        return getattr(self, f"_reduce_{how}")(kernel, ctx) + (how,)

    def _reduction_parts(self, kernel, name):
        """A reduction kernel's parts (a dict of its shapes, loop types and lines) and
        its strategy. Every strategy folds a row's elements
        in the order reductions.py fixes, the C dialect's: a warp folds a block (lane l the
        elements l, l + 32, ... of it, then the shuffle tree), thread 0 of the CUDA block
        combines the blocks' partials by the block tree; the split strategy's blocks take
        aligned runs of blocks (subtrees) and its finishing kernel combines their
        partials by the tree's top. The grid and the block size decide which thread
        folds what, never the order: the bits are the C kernel's under any launch."""
        lay = self.reduction_layout(kernel)
        inner_loads, inner_nodes, reduces, outer_loads, outer_nodes = lay.phases
        oshape, rshape, oacc, ov, rv, index, guard = (lay.oshape, lay.rshape, lay.oacc, lay.ov, lay.rv,
                                                      lay.index, lay.guard)
        idx = self.index_type(kernel)
        names = {}
        prologue = self.statements(kernel, inner_loads, inner_nodes, names, lambda ld: index(ld, ld.offset),
                                   guard, index)
        position = rv[0] if rv else "0"   # an arg reduction's one reduced axis (dropped when of size 1)
        rows, length = kernel.size, math.prod(kernel.reduce_shape)
        how = self.strategy(rows, length)
        for r in reduces:
            if r.op not in _ACCUMULATORS:
                raise NotImplementedError(f"the CUDA dialect cannot render a {r.op!r} reduction "
                                          f"({r.dtype.name}): its partial results have no combination rule")
        if how == "thread":   # the C dialect's loop, one thread per row
            point = self.point_reductions(reduces, names, position)
            accs = None
        else:
            accs = []
            for k, r in enumerate(reduces):
                accs.append(_ACCUMULATORS[r.op](self, k, r, self.reduced(k, r, names), position))
            point = None
        epilogue = self.statements(kernel, outer_loads, outer_nodes, names, lambda ld: index(ld, ld.offset),
                                   guard, index)
        epilogue += self.stores(kernel, names, offset(ov, oacc[-1], 0))
        row_t, len_t = _loop_type(rows, idx), _loop_type(length, idx)
        return dict(name=name, idx=idx, oshape=oshape, ov=ov, rshape=rshape, rv=rv, rows=rows,
                    length=math.prod(rshape), row_t=row_t, len_t=len_t, prologue=prologue, point=point,
                    epilogue=epilogue, accs=accs), how

    def _reduce_thread(self, kernel, c):
        """Each thread folds whole rows, as the C loop nest folds a point (scalar lanes)."""
        folds, accs, in_order, finals = c["point"]
        plan = fold_plan(c["length"])
        folded = self.fold_blocks(c["idx"], c["rshape"], c["rv"], folds, c["prologue"] + in_order, plan,
                                  "0", str(plan.blocks), simd=False)
        body = _decompose("row", c["oshape"], c["ov"], c["idx"]) + accs + folded + finals + c["epilogue"]
        params = self.params([], kernel)
        lines = [self.signature(c["name"], params) + " {"]
        rt = c["row_t"]
        lines += _grid_stride("row", rt, str(c["rows"]), f"({rt})blockIdx.x * blockDim.x + threadIdx.x",
                              f"({rt})blockDim.x * gridDim.x", body, 1)
        grid = self.grid(-(-c["rows"] // self.block))
        return "\n".join(lines + ["}"]), [Launch(c["name"], grid, self.block, 0, params)], []

    def _reduce_block(self, kernel, c):
        """One block per row (grid-stride over rows): its warps fold the row's blocks, a
        round of as many blocks as warps at a time, and thread 0 combines their partials
        by the block tree, then runs the epilogue."""
        body = self._block_row(c)
        params = self.params([], kernel)
        lines = [self.signature(c["name"], params) + " {"] + ["  " + x for x in self.shared(c["accs"])]
        lines += ["  " + _WARP_IDS]
        lines += _grid_stride("row", c["row_t"], str(c["rows"]), "blockIdx.x", "gridDim.x", body, 1)
        return "\n".join(lines + ["}"]), [Launch(c["name"], self.grid(c["rows"]), self.block, 0, params)], []

    def _block_row(self, c):
        """The lines one block runs for output row `row`: its warps fold the row's
        blocks, thread 0 combines them by the block tree and runs the epilogue."""
        plan = fold_plan(c["length"])
        body = _decompose("row", c["oshape"], c["ov"], c["idx"])
        body += self.warp_rounds(c, plan, "0", str(plan.blocks))
        return body + ["if (threadIdx.x == 0) {"] + ["  " + x for x in self.totals(c["accs"]) + c["epilogue"]] + ["}"]

    def _reduce_split(self, kernel, c):
        """Few long rows: each row's blocks in `chunks` aligned runs (a power of two of
        blocks each: subtrees of the block tree), one CUDA block per run folding it as
        `_reduce_block` folds a row, its partials to scratch; a second kernel combines
        each row's run partials by the tree's top on thread 0 and runs the epilogue.
        The run length follows the device; the bits do not."""
        rows, accs = c["rows"], c["accs"]
        want = max(2, min(-(-c["length"] // (self.block * self.items_per_thread)),
                          -(-self.device.sm_count * self.blocks_per_sm // max(rows, 1))))
        plan = fold_plan(c["length"], want)
        chunks = plan.groups
        parts = rows * chunks
        part_t = _loop_type(parts, c["idx"])
        scratch = []
        for a in accs:
            a.slot = len(scratch)
            scratch += [(dt, parts) for dt in a.scratch_dtypes()]
        params = self.params(scratch, kernel)
        # pass 1: block `part` folds run `part % chunks` of row `part / chunks`
        last = f"(chunk + 1) * {plan.span} < {plan.blocks} ? (chunk + 1) * {plan.span} : {plan.blocks}"
        body = [f"const {part_t} row = part / {chunks}, chunk = part % {chunks};"]
        body += _decompose("row", c["oshape"], c["ov"], c["idx"])
        body += self.warp_rounds(c, plan, f"(int64_t)chunk * {plan.span}", last)
        body += ["if (threadIdx.x == 0) {"] + ["  " + x for x in self.run_totals(accs, "part")] + ["}"]
        first = [self.signature(c["name"], params) + " {"] + ["  " + x for x in self.shared(accs)]
        first += ["  " + _WARP_IDS]
        first += _grid_stride("part", part_t, str(parts), "blockIdx.x", "gridDim.x", body, 1)
        # pass 2: thread 0 of a block per row combines the row's run partials
        finish = c["name"] + "_finish"
        tail = self.tree_state(accs, tree_depth(chunks))
        tail += [f"for (int64_t q = 0; q < {chunks}; q++) {{"]
        tail += ["  " + x for x in self.absorb(accs, "q", lambda a: a.gathered(f"row * {chunks} + q"))] + ["}"]
        tail += _decompose("row", c["oshape"], c["ov"], c["idx"]) + self.totals(accs) + c["epilogue"]
        body = ["if (threadIdx.x == 0) {"] + ["  " + x for x in tail] + ["}"]
        second = [self.signature(finish, params) + " {"]
        second += _grid_stride("row", c["row_t"], str(rows), "blockIdx.x", "gridDim.x", body, 1)
        text = "\n".join(first + ["}"]) + "\n\n" + "\n".join(second + ["}"])
        launches = [Launch(c["name"], self.grid(parts), self.block, 0, params),
                    Launch(finish, self.grid(rows), self.block, 0, params)]
        return text, launches, scratch

    def warp_rounds(self, c, plan, first, last):
        """Lines folding blocks [first, last) of the row (an aligned run of the tree, or
        the whole row): round after round each warp folds one block into its lanes and
        shuffles them to lane 0, and thread 0 takes the round's partials in block order
        into the tree state (`tree_state`, declared here; thread 0's alone)."""
        accs, w, blk, n, t = c["accs"], REDUCE_LANES, REDUCE_BLOCK, c["length"], c["len_t"]
        element = flat_index(c["idx"], c["rv"], c["rshape"], "j") + c["prologue"]
        element += [x for a in accs for x in a.update_lines()]
        fold = [f"const {t} jb = ({t})b * {blk}, je = jb < {n - blk} ? jb + {blk} : {n};"]
        fold += _grid_stride("j", t, "je", "jb + lane", str(w), element, 0)
        rnd = ["const int64_t b = base + warp;"] + [x for a in accs for x in a.reset_lines()]
        rnd += [f"if (b < ({last})) {{"] + ["  " + x for x in fold] + ["}"]
        rnd += [f"for (int off = {w // 2}; off > 0; off >>= 1) {{"]
        rnd += ["  " + x for a in accs for x in a.shuffle("off")] + ["}"]
        rnd += ["if (lane == 0) {"] + ["  " + x for a in accs for x in a.to_shared("warp")] + ["}"]
        rnd += ["__syncthreads();", "if (threadIdx.x == 0) {"]
        take = self.absorb(accs, f"base + w - ({first})", lambda a: a.shared_part("w"))
        rnd += [f"  for (int w = 0; w < warps && base + w < ({last}); w++) {{"] + ["    " + x for x in take]
        rnd += ["  }", "}", "__syncthreads();  // the round's shared partials are read before the next round"]
        lines = self.tree_state(accs, plan.depth) + [x for a in accs for x in a.init_lines()]
        return lines + [f"for (int64_t base = {first}; base < ({last}); base += warps) {{"] + [
            "  " + x for x in rnd] + ["}"]

    def tree_state(self, accs, depth):
        """Thread 0's combination state: each fold's tree stack, each NaN flag and arg pair."""
        lines = [x for a in accs for x in a.state_lines(depth)]
        return lines + (["int top = 0;"] if _folds(accs) else [])

    def absorb(self, accs, index, source):
        """Thread 0's lines taking one partial of each accumulator (`source(acc)`: its
        value, flag or index expressions) of block or run `index` into the state."""
        folds = _folds(accs)
        lines = [f"{a.fold.part} w{a.k} = {source(a)[0]};" for a in accs if a.fold]
        lines += tree_push(folds, index, [f"w{f.k}" for f in folds]) if folds else []
        return lines + [x for a in accs for x in a.absorb_rest(source(a))]

    def tree_totals(self, accs):
        """Thread 0's tree results t<k> from its state (the tree's unfinished edge combined)."""
        folds = _folds(accs)
        lines = [f"{f.part} t{f.k};" for f in folds]
        return lines + (tree_total(folds, [f"t{f.k}" for f in folds]) if folds else [])

    def totals(self, accs):
        """Thread 0's results r<k> from its state."""
        return self.tree_totals(accs) + [a.final() for a in accs]

    def run_totals(self, accs, at):
        """Thread 0's run partials into the split strategy's scratch at `at`."""
        return self.tree_totals(accs) + [x for a in accs for x in a.spill(at)]

    def shared(self, accs):
        """One slot per warp for each accumulator's block partial (and NaN flag or index)."""
        return [line for a in accs for line in a.shared_lines()]


# a reduction kernel's thread in its warp, its warp in the block, the block's warps
_WARP_IDS = "const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;"


class _Accumulator:
    """One `Fold` (reductions.py) in CUDA: a thread's lane accumulator (the elements of its
    lane of a block, then the shuffle tree combining a warp's lanes as the C lane tree
    does), the warp's block partial through shared memory, and thread 0's block tree
    state (`stk<k>`) and NaN flag (`tnan<k>`)."""

    def __init__(self, r, k, node, value, position=None):
        self.r, self.k, self.node, self.value = r, k, node, value
        self.fold = Fold(r, k, node, value)
        self.acc, self.flag, self.nan, self.ctype = f"acc{k}", f"nan{k}", self.fold.nan, self.fold.ctype
        self.wire = _SHUFFLE[node.dtype.name]
        self.slot = None

    def init_lines(self):
        return [f"{self.ctype} {self.acc};"] + ([f"int {self.flag} = 0;"] if self.nan else [])

    def reset_lines(self):
        return [f"{self.acc} = {self.fold.init};"]

    def update_lines(self):
        lines = [f"{self.acc} = {self.fold.update(self.acc, self.value)};"]
        if self.nan:
            lines.append(f"{self.flag} |= ({self.value} != {self.value});")
        return lines

    def shuffle(self, off):
        # lane l takes lane l + off (the C lane tree); lanes past the warp's end get their
        # own value back, and lane 0 only ever reads lanes that were in range at every step
        other = f"o{self.k}"
        if complexc.is_complex(self.node.dtype):   # a struct travels part by part
            parts = ", ".join(f"__shfl_down_sync(RN_FULL_MASK, {self.acc}.{p}, {off})" for p in ("re", "im"))
            moved = f"{self.ctype}_make({parts})"
        else:
            moved = f"({self.ctype})__shfl_down_sync(RN_FULL_MASK, ({self.wire}){self.acc}, {off})"
        lines = [f"const {self.ctype} {other} = {moved};", f"{self.acc} = {self.fold.update(self.acc, other)};"]
        if self.nan:
            lines.append(f"{self.flag} |= __shfl_down_sync(RN_FULL_MASK, {self.flag}, {off});")
        return lines

    def shared_lines(self):
        lines = [f"__shared__ {self.fold.part} sh_acc{self.k}[32];"]
        return lines + ([f"__shared__ int sh_nan{self.k}[32];"] if self.nan else [])

    def to_shared(self, warp):
        lines = [f"sh_acc{self.k}[{warp}] = {self.fold.widen(self.acc)};"]
        return lines + ([f"sh_nan{self.k}[{warp}] = {self.flag};"] if self.nan else [])

    def shared_part(self, w):
        return f"sh_acc{self.k}[{w}]", f"sh_nan{self.k}[{w}]" if self.nan else None

    def state_lines(self, depth):
        return [f"{self.fold.part} stk{self.k}[{depth}];"] + ([f"int tnan{self.k} = 0;"] if self.nan else [])

    def absorb_rest(self, source):
        return [f"tnan{self.k} |= {source[1]};"] if self.nan else []

    def final(self):
        return self.fold.final(f"t{self.k}", f"tnan{self.k}")

    def scratch_dtypes(self):
        """The split strategy's run partials: the partial, and the NaN flag."""
        return [self.fold.part_dtype] + ([np.dtype(np.int32)] if self.nan else [])

    def spill(self, at):
        lines = [f"s{self.slot}[{at}] = t{self.k};"]
        return lines + ([f"s{self.slot + 1}[{at}] = tnan{self.k};"] if self.nan else [])

    def gathered(self, at):
        return f"s{self.slot}[{at}]", f"s{self.slot + 1}[{at}]" if self.nan else None


class _ArgAccumulator:
    """argmax/argmin in CUDA: a (value, index) pair. Two pairs combine by NaN first
    (the C loop's first NaN), then the extreme, then the smaller index on ties (the
    first extreme), so any order of combination gives the sequential loop's answer:
    thread 0 keeps one running pair (`tacc<k>`, `targ<k>`). A partial that saw nothing
    holds the extreme's identity and RN_NO_INDEX, which every element beats (an element
    equal to the identity by its smaller index)."""

    fold = None

    def __init__(self, r, k, node, value, position):
        self.r, self.k, self.node, self.value, self.position = r, k, node, value, position
        self.acc, self.arg = f"acc{k}", f"arg{k}"
        vt = node.args[0].dtype
        self.cmp = ARG_REDUCERS[node.op]
        extreme = REDUCERS["reduce_max" if self.cmp == ">" else "reduce_min"]
        self.init = extreme(r, vt, self.acc, value)[0]
        self.ctype, self.compute_dtype = r.compute_type(vt), _compute_dtype(vt)
        self.wire, self.float = _SHUFFLE[vt.name], is_float(vt)
        self.slot = None

    def combine(self, value, index, acc=None, arg=None):
        """Lines making (value, index) the pair (acc, arg) where it beats it."""
        v, i, cmp = f"cv{self.k}", f"ci{self.k}", self.cmp
        acc, arg = acc or self.acc, arg or self.arg
        beats = f"{v} {cmp} {acc} || ({v} == {acc} && {i} < {arg})"
        if self.float:
            beats = f"{v} != {v} ? ({acc} == {acc} || {i} < {arg}) : ({acc} == {acc} && ({beats}))"
        return ["{", f"  const {self.ctype} {v} = {value};", f"  const int64_t {i} = {index};",
                f"  if ({beats}) {{ {acc} = {v}; {arg} = {i}; }}", "}"]

    def init_lines(self):
        return [f"{self.ctype} {self.acc};", f"int64_t {self.arg};"]

    def reset_lines(self):
        return [f"{self.acc} = {self.init};", f"{self.arg} = RN_NO_INDEX;"]

    def update_lines(self):
        return self.combine(self.value, f"(int64_t)({self.position})")

    def shuffle(self, off):
        # lanes past the warp's end combine their own pair again: no change
        return self.combine(f"({self.ctype})__shfl_down_sync(RN_FULL_MASK, ({self.wire}){self.acc}, {off})",
                            f"(int64_t)__shfl_down_sync(RN_FULL_MASK, (long long){self.arg}, {off})")

    def shared_lines(self):
        return [f"__shared__ {self.ctype} sh_acc{self.k}[32];", f"__shared__ int64_t sh_arg{self.k}[32];"]

    def to_shared(self, warp):
        return [f"sh_acc{self.k}[{warp}] = {self.acc};", f"sh_arg{self.k}[{warp}] = {self.arg};"]

    def shared_part(self, w):
        return f"sh_acc{self.k}[{w}]", f"sh_arg{self.k}[{w}]"

    def state_lines(self, depth):
        return [f"{self.ctype} tacc{self.k} = {self.init};", f"int64_t targ{self.k} = RN_NO_INDEX;"]

    def absorb_rest(self, source):
        return self.combine(source[0], source[1], f"tacc{self.k}", f"targ{self.k}")

    def final(self):
        t = self.r.ctype(self.node.dtype)
        return f"const {t} r{self.k} = ({t})(targ{self.k} == RN_NO_INDEX ? 0 : targ{self.k});"

    def scratch_dtypes(self):
        return [self.compute_dtype, np.dtype(np.int64)]

    def spill(self, at):
        return [f"s{self.slot}[{at}] = tacc{self.k};", f"s{self.slot + 1}[{at}] = targ{self.k};"]

    def gathered(self, at):
        return f"s{self.slot}[{at}]", f"s{self.slot + 1}[{at}]"


# How each reduction's partial results are kept and combined.
_ACCUMULATORS = {**dict.fromkeys(_TREE_REDUCTIONS, _Accumulator), **dict.fromkeys(ARG_REDUCERS, _ArgAccumulator)}


def _folds(accs):
    """The `Fold`s of the accumulators that combine by the block tree (all but arg ones)."""
    return [a.fold for a in accs if a.fold is not None]


def _loop_type(n, idx):
    """The type of a grid-stride counter up to `n`: it may pass `n` by a grid's worth of
    threads (at most 2**20 with the grids chosen here), so 32 bits only below 2**30."""
    return idx if n < 2 ** 30 else "int64_t"


def _grid_stride(var, vtype, n, start, step, body, depth):
    pad = "  " * depth
    return ([f"{pad}for ({vtype} {var} = {start}; {var} < {n}; {var} += {step}) {{"]
            + [pad + "  " + x for x in body] + [pad + "}"])


def _decompose(flat, shape, ivars, idx):
    """Lines giving each axis index of the row-major flat index `flat`."""
    lines, step = [], 1
    for a in reversed(range(len(shape))):
        q = flat if step == 1 else f"{flat} / {step}"
        lines.append(f"const {idx} {ivars[a]} = ({idx})({q}" + (f" % {shape[a]});" if a else ");"))
        step *= shape[a]
    return list(reversed(lines))
