"""The kernel IR: what one fused loop computes, independent of the target.

A `Kernel` is an output index space (`shape`), the buffers it reads through
`Load`s (per-axis strides in elements and an offset, so broadcast, transposed,
sliced and reversed inputs are read in place), an expression DAG of `Node`s
over the loaded values and inline `Const`s, and `Store`s of some nodes into
contiguous buffers of the index space. A reduction kernel also has a
`reduce_shape`: at each output point an inner loop over it evaluates the
prologue (nodes over inner loads, whose strides cover the output axes then the
reduced ones) into accumulators (`reduce_*` nodes); the epilogue (nodes over
reduce results and outer loads) runs once per output point. Shapes are static. A renderer
(rune/codegen/c.py, rune/codegen/cuda.py) turns kernels into source without writing
into them; nothing here knows the target. A node's op is one of the vocabulary in
rune/codegen/expressions.py (`ELEMENTWISE_OPS`, `REDUCE_OPS`, ...).

Node kinds beyond the elementwise primitives (every renderer implements these):

- `index` (no args; params `strides`): the point's linear index
  sum(i[a] * strides[a]) over the kernel's axes (outer then reduced ones), as
  int64. `iota` is a convert of it; `random_bits` counts with it.
- `random_bits` (args k0, k1 as uint32 and the counter as int64; params
  `width`): Threefry-2x32 of the counter under the key (rune/backends/cpu/threefry.py),
  y0 truncated to `width` bits, or (y0 << 32) | y1 for width 64.
- `argmax` / `argmin` (a reduction, like `reduce_*`; params `index_dtype`):
  the first index along the (single) reduced axis of the largest / smallest
  value, a NaN counting as the extreme (the first NaN wins, as NumPy).

A `Load` may add `dynamic` terms to its address: (value, stride, n, hi) adds
stride * clamp(v < 0 ? v + n : v, 0, hi) for the runtime value v of `value`
(a load of an index buffer, or a constant) -- gather and dynamic_slice read
through these, the index clamped exactly as the eager backend clamps it.

A `Store` writes the kernel's index space contiguously unless it has its own
`strides`/`offset` and `dynamic` terms (the same tuples; hi None means an
index out of [0, n) drops the store instead of clamping: scatter).
A `serial` kernel (scatter) runs its points in order on one thread, so
repeated indices combine in NumPy's order.
"""
import copy
import math

import numpy as np


class Buffer:
    """A pointer the driver hands to its kernels: a stretch input, a stretch
    output (a fresh array each call) or an intermediate (kept between calls)."""
    __slots__ = ("index", "dtype", "shape", "role")

    def __init__(self, index, dtype, shape, role):
        self.index, self.dtype, self.shape, self.role = index, dtype, tuple(shape), role

    def __repr__(self):
        return f"b{self.index}:{self.role}:{self.dtype.name}{list(self.shape)}"


class Load:
    """A read of `buffer` at offset + sum(index[a] * strides[a]). With a `guard`
    (per axis a (lo, hi) range or None), points outside it read `fill` instead
    (padding) and the buffer is not touched there."""
    __slots__ = ("buffer", "strides", "offset", "dtype", "inner", "guard", "fill", "dynamic")

    def __init__(self, buffer, strides, offset, inner=False, guard=None, fill=None, dynamic=()):
        self.buffer, self.strides, self.offset = buffer, tuple(strides), offset
        self.dtype = buffer.dtype
        self.inner = inner  # read inside a reduction's inner loop
        self.guard = None if guard is None or not any(guard) else tuple(guard)
        self.fill = fill
        self.dynamic = tuple(dynamic)  # ((value, stride, n, hi), ...): runtime index terms

    def __repr__(self):
        guard = f", inside {self.guard} else {self.fill!r}" if self.guard else ""
        dyn = "".join(f" + {s}*clamp({v!r}, n={n}, hi={hi})" for v, s, n, hi in self.dynamic)
        return f"load b{self.buffer.index}[strides {self.strides}, offset {self.offset}{dyn}{guard}]"


class Const:
    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype):
        self.value, self.dtype = value, np.dtype(dtype)

    def __repr__(self):
        return f"{self.value!r}:{self.dtype.name}"


class Node:
    """One primitive applied to earlier nodes, loads or constants."""
    __slots__ = ("op", "dtype", "args", "params")

    def __init__(self, op, dtype, args, params=None):
        self.op, self.dtype, self.args, self.params = op, np.dtype(dtype), tuple(args), params or {}


class Store:
    """`value` written to `buffer`: at the point's contiguous position, or (with
    `strides`) at offset + sum(i[a] * strides[a]) plus the `dynamic` terms."""
    __slots__ = ("buffer", "value", "strides", "offset", "dynamic")

    def __init__(self, buffer, value, strides=None, offset=0, dynamic=()):
        self.buffer, self.value = buffer, value
        self.strides = None if strides is None else tuple(strides)
        self.offset, self.dynamic = offset, tuple(dynamic)


def contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


class Kernel:
    """Loops over `shape`; each point evaluates the DAG and writes the stores.

    A renderer never writes into it: it returns `rendered` copies."""

    target = None   # a rendered copy's target ("c", "cuda"); None for the IR itself
    source = None   # a rendered copy's source

    def __init__(self, name, shape, reduce_shape=()):
        self.name = name
        self.shape = tuple(shape)
        self.reduce_shape = tuple(reduce_shape)
        self.reduce_key = None  # (input shape, axes) of the reductions, for siblings
        self.serial = False     # points run in order on one thread (scatter)
        self.closed = False     # no further op joins it (scatter, dynamic_update_slice)
        self.loads = []
        self.nodes = []
        self.stores = []

    @property
    def size(self):
        return math.prod(self.shape)

    def load(self, buffer, strides, offset, inner=False, guard=None, fill=None, dynamic=()):
        new = Load(buffer, strides, offset, inner, guard, fill, dynamic)
        for ld in self.loads:  # one load per distinct access
            if (ld.buffer is buffer and ld.strides == new.strides and ld.offset == offset
                    and ld.inner == inner and ld.guard == new.guard
                    and len(ld.dynamic) == len(new.dynamic)
                    and all(a[0] is b[0] and a[1:] == b[1:] for a, b in zip(ld.dynamic, new.dynamic))
                    and (ld.fill is None) == (fill is None)
                    and (fill is None or repr(ld.fill.value) == repr(fill.value))):
                return ld
        ld = new
        self.loads.append(ld)
        return ld

    def node(self, op, dtype, args, params=None):
        n = Node(op, dtype, args, params)
        self.nodes.append(n)
        return n

    def store(self, buffer, value, strides=None, offset=0, dynamic=()):
        self.stores.append(Store(buffer, value, strides, offset, dynamic))

    def live_nodes(self):
        """The nodes the stores need, in evaluation order."""
        need, stack = set(), [s.value for s in self.stores]
        stack += [d[0] for s in self.stores for d in s.dynamic]
        while stack:
            n = stack.pop()
            if type(n) is Node and id(n) not in need:
                need.add(id(n))
                stack.extend(n.args)
        return [n for n in self.nodes if id(n) in need]

    @property
    def index_bits(self):
        """32 when every extent and offset fits a signed 32-bit int, else 64."""
        limit = 2 ** 31 - 1
        full = self.shape + self.reduce_shape
        spans = [self.size * math.prod(self.reduce_shape)]
        spans += [math.prod(ld.buffer.shape) for ld in self.loads]
        spans += [abs(ld.offset) + sum(abs(s) * max(d - 1, 0) for s, d in zip(ld.strides, full))
                  for ld in self.loads]
        spans += [max(abs(lo), abs(hi)) for ld in self.loads for g in (ld.guard or ()) if g
                  for lo, hi in [g]]
        spans += [sum(abs(s) * max(d - 1, 0) for s, d in zip(n.params["strides"], full))
                  for n in self.nodes if n.op == "index"]
        spans += [math.prod(s.buffer.shape) for s in self.stores]
        return 32 if max(spans, default=0) <= limit else 64

    def __repr__(self):
        names = {}
        over = f"{list(self.shape)}" + (f", reducing {list(self.reduce_shape)}" if self.reduce_shape else "")
        lines = [f"kernel {self.name} over {over}:"]

        def name(a):
            if type(a) is Node:
                return names[id(a)]
            return repr(a)

        for k, n in enumerate(self.live_nodes()):
            names[id(n)] = f"%{k}"
            params = "".join(f" {k}={v}" for k, v in n.params.items())
            lines.append(f"  %{k}:{n.dtype.name} = {n.op}{params} {', '.join(map(name, n.args))}")
        for s in self.stores:
            at = "" if s.strides is None else f"[strides {s.strides}, offset {s.offset}" + "".join(
                f" + {st}*{'drop' if hi is None else 'clamp'}({name(v)}, n={n})" for v, st, n, hi in s.dynamic) + "]"
            lines.append(f"  store b{s.buffer.index}{at} <- {name(s.value)}")
        return "\n".join(lines)


def rendered(kernel, target, name, source, **extra):
    """A copy of the IR `kernel` carrying what a renderer made of it: its `target`,
    `name` (its entry function), `source` and any `extra` (a GPU kernel's launches)."""
    out = copy.copy(kernel)
    out.target, out.name, out.source = target, name, source
    for k, v in extra.items():
        setattr(out, k, v)
    return out


def launch_line(kernel):
    """A rendered GPU kernel's line in a plan's text: its launches, or the row group's
    kernel it runs in (a row group's later kernels have no launch of their own)."""
    if not kernel.launches:
        return f"kernel over {list(kernel.shape)}: in {kernel.name}, row by row"
    launches = ", ".join(f"{ln.name}<<<{ln.grid}, {ln.block}>>>" for ln in kernel.launches)
    return f"kernel {kernel.name} over {list(kernel.shape)}: {launches}"


def describe_launched(kind, name, eqns, kernels, where):
    """A stretch of GPU kernels as text: its ops, then each kernel's launches and source."""
    names = " ".join(e.prim.name for e in eqns)
    lines = [f"{kind} {name} of {len(eqns)} ops ({names}){where}: "
             f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''}"]
    for k in kernels:
        lines.append("  " + launch_line(k))
        if k.launches:
            lines.extend("    " + ln for ln in k.source.splitlines())
    return "\n".join(lines)
