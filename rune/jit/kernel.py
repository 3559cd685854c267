"""The kernel IR: what one fused loop computes, independent of the target.

A `Kernel` is an output index space (`shape`), the buffers it reads through
`Load`s (per-axis strides in elements and an offset, so broadcast, transposed,
sliced and reversed inputs are read in place), an expression DAG of `Node`s
over the loaded values and inline `Const`s, and `Store`s of some nodes into
contiguous buffers of the index space. A reduction kernel also has a
`reduce_shape`: at each output point an inner loop over it evaluates the
prologue (nodes over inner loads, whose strides cover the output axes then the
reduced ones) into accumulators (`reduce_*` nodes); the epilogue (nodes over
reduce results and outer loads) runs once per output point. Shapes are static. A renderer (C today,
CUDA C next) turns a kernel into source; nothing here knows the target.
"""
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
    __slots__ = ("buffer", "strides", "offset", "dtype", "inner", "guard", "fill")

    def __init__(self, buffer, strides, offset, inner=False, guard=None, fill=None):
        self.buffer, self.strides, self.offset = buffer, tuple(strides), offset
        self.dtype = buffer.dtype
        self.inner = inner  # read inside a reduction's inner loop
        self.guard = None if guard is None or not any(guard) else tuple(guard)
        self.fill = fill

    def __repr__(self):
        guard = f", inside {self.guard} else {self.fill!r}" if self.guard else ""
        return f"load b{self.buffer.index}[strides {self.strides}, offset {self.offset}{guard}]"


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
    __slots__ = ("buffer", "value")

    def __init__(self, buffer, value):
        self.buffer, self.value = buffer, value


def contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


class Kernel:
    """Loops over `shape`; each point evaluates the DAG and writes the stores."""

    target = None  # set by the renderer that gives the kernel its source

    def __init__(self, name, shape, reduce_shape=()):
        self.name = name
        self.shape = tuple(shape)
        self.reduce_shape = tuple(reduce_shape)
        self.reduce_key = None  # (input shape, axes) of the reductions, for siblings
        self.loads = []
        self.nodes = []
        self.stores = []
        self.source = None

    @property
    def size(self):
        return math.prod(self.shape)

    def load(self, buffer, strides, offset, inner=False, guard=None, fill=None):
        new = Load(buffer, strides, offset, inner, guard, fill)
        for ld in self.loads:  # one load per distinct access
            if (ld.buffer is buffer and ld.strides == new.strides and ld.offset == offset
                    and ld.inner == inner and ld.guard == new.guard
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

    def store(self, buffer, value):
        self.stores.append(Store(buffer, value))

    def live_nodes(self):
        """The nodes the stores need, in evaluation order."""
        need, stack = set(), [s.value for s in self.stores]
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
            lines.append(f"  store b{s.buffer.index} <- {name(s.value)}")
        return "\n".join(lines)
