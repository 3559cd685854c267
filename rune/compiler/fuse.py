"""Fusion: a run of primitives of one stretch grouped into kernels.

Each primitive declares how it lowers where it is defined (`declare_lowering`,
rune/core/primitive.py: an elementwise IR op, a movement, a reduction, a
library call, an indexed load or an update; nothing: never lowered). The tables
here are keyed by `Primitive`: how the fuser builds each movement and indexed
op, and what it checks of an equation's params and operands. `lowerable` says
whether the fuser lowers one equation for a target, asking that target's
renderer (a codegen dialect) whether it renders the node; else the stretch is
split around it and the backend runs it op by op. `fuse` walks a run in order
and builds `Kernel`s (rune/codegen/kernel.py):

- an elementwise op joins the latest kernel over its output shape that does
  not read anything produced after it; its operands become nodes of that
  kernel, loads of buffers (broadcast by zero strides) or inline constants;
- a movement op on a buffer is index arithmetic on later loads (a `View`:
  strides, offset and, for pad and concatenate, a guard), never a copy; on a value computed in a kernel it first
  stores that value (materialises it);
- a reduction gets a kernel over its output shape with an inner loop over the
  reduced axes; its elementwise producers are recomputed in that loop (the
  prologue: their kernel is dropped if nothing else needs it), elementwise
  consumers of the reduced shape join the same kernel (the epilogue), and a
  sibling reduction of the same input shape and axes shares the loop;
- a small elementwise tree read by a later kernel over the same index space is
  recomputed there rather than stored and loaded back, unless it calls a costly
  op (exp, tanh, ...) and is stored anyway: then it is loaded;
- an op of a select whose other arm is the same along the innermost axis (a
  masking constant) runs on each arm, so that arm's op is computed once per row;
- a value is stored only where it leaves the run, is read by another kernel
  (and is not recomputed), or is moved;
- `iota` is the point's index (an `index` node), `random_bits` an inline
  Threefry over it; `gather` and `dynamic_slice` are loads whose address adds
  the runtime index (loaded in the kernel, clamped as the eager backend does);
- `scatter` and `dynamic_update_slice` copy their operand into a fresh buffer
  and update it in a kernel of their own (serial for scatter, so repeated
  indices combine in NumPy's order); a library call (`dot_general`) is a step
  of its own (`lower.py`; its epilogue starts the next run).

Kernels only read what earlier kernels stored, so running them in creation
order is correct.
"""
import collections

import numpy as np

from ..core import dtypes as _dtypes
from ..core.primitive import Lowering
from ..core.prims import P
from ..core.program import Literal

from ..codegen.kernel import Buffer, Const, Kernel, Load, Node, contiguous_strides
from ..codegen.c import CDialect
from ..codegen.cstyle import CStyle
from ..codegen.expressions import COSTLY_OP_COST, COSTLY_OPS, kind as _kind, op_cost

_COMBINE = {"add": "add", "mul": "mul", "min": "min", "max": "max"}  # scatter mode -> elementwise op

DTYPES = frozenset(CStyle.CTYPES)
# The same as dtype objects: `dtype.name` builds a string on every read, and the
# planner asks for every operand of every equation
_DTYPE_OBJECTS = frozenset(d for d in _dtypes.ALL if d.name in DTYPES)
_RECOMPUTE_LIMIT = 24  # nodes and loads: a larger tree is stored once and loaded back
HOST_DIALECT = CDialect()   # the renderer `lowerable` asks when given none (it holds no state)


def lowerable(eqn, ins=None, constants=None, renderer=None, to_host=np.asarray):
    """Whether the fuser lowers this equation (its dtypes and params included) into
    kernels `renderer` (a target's codegen dialect; default the host's C) renders.
    `ins` (its input slots) and `constants` (slot -> value) tell constant operands;
    `to_host` reads a constant's value (the backend's: a GPU constant is copied down).
    A library call is lowerable whatever its dtypes: the backend's library runs it."""
    prim = eqn.prim
    kind = prim.lowering
    if kind is None:
        return False
    if kind is Lowering.LIBRARY:
        return True
    avals = [a.aval for a in eqn.inputs] + [v.aval for v in eqn.outputs]
    if any(a.dtype not in _DTYPE_OBJECTS for a in avals):
        return False
    if kind is Lowering.ELEMENTWISE:
        if not (renderer or HOST_DIALECT).can_render(prim.ir_op, [a.aval.dtype for a in eqn.inputs],
                                                     eqn.outputs[0].aval.dtype):
            return False
    elif kind is Lowering.REDUCE:
        if not _reducible(eqn, avals):
            return False
    elif prim not in _MOVES and prim not in _INDEXED:
        return False   # declared, but the fuser has no rule for it
    check = _CHECKS.get(prim)
    return check is None or check(eqn, _known(eqn, ins, constants, to_host))


def _reducible(eqn, avals):
    if _has_complex(avals) and eqn.prim is not P["reduce_sum"]:
        return False   # of complex reductions only the sum is lowered
    axes = eqn.params["axes"] if "axes" in eqn.params else (eqn.params["axis"],)
    shape = eqn.inputs[0].aval.shape
    # max/min (and argmax/argmin) of nothing is an error eager raises: leave it to eager's path
    return bool(axes) and (eqn.prim in _EMPTY_REDUCIBLE or all(shape[a] for a in axes))


_EMPTY_REDUCIBLE = frozenset({P["reduce_sum"], P["reduce_prod"]})   # of nothing: 0 and 1


def _known(eqn, ins, constants, to_host):
    """The operands' values where known when planning (literals, plan constants), else None."""
    out = []
    for k, a in enumerate(eqn.inputs):
        if type(a) is Literal:
            out.append(np.asarray(a.value))
        elif ins is not None and constants is not None and ins[k] in constants:
            out.append(np.asarray(to_host(constants[ins[k]])))
        else:
            out.append(None)
    return out


def _integer_pow(eqn, known):
    """Integer powers only with an exponent known to be non-negative: NumPy raises on a
    negative one, which a kernel cannot, so any other stays on eager's path."""
    if eqn.outputs[0].aval.dtype.kind not in "iu":
        return True
    e = known[1]
    return e is not None and e.dtype.kind in "iub" and bool((e >= 0).all())


def _constant_fill(eqn, known):
    """A padding value known when planning (and 0-d) becomes the loads' fill."""
    return known[1] is not None and known[1].ndim == 0


def _has_complex(avals):
    return any(_kind(a.dtype) == "c" for a in avals)


def _int_index(aval):
    return aval.dtype.kind in "iu"


# primitive -> fn(eqn, known operand values) -> whether the fuser lowers this equation
_CHECKS = {
    P["pow"]: _integer_pow,
    P["pad"]: _constant_fill,
    # an empty axis has nothing to clamp into: eager raises (gather) or drops every update
    P["gather"]: lambda e, known: e.inputs[0].aval.shape[e.params["axis"]] > 0 and _int_index(e.inputs[1].aval),
    P["scatter"]: lambda e, known: (
        e.inputs[0].aval.shape[e.params["axis"]] > 0 and _int_index(e.inputs[1].aval)
        and e.params["mode"] in ("set",) + tuple(_COMBINE)
        and (e.params["mode"] in ("set", "add") or not _has_complex([e.inputs[0].aval]))),
    P["dynamic_slice"]: lambda e, known: all(_int_index(a.aval) for a in e.inputs[1:]),
    P["dynamic_update_slice"]: lambda e, known: all(_int_index(a.aval) for a in e.inputs[2:]),
    P["random_bits"]: lambda e, known: e.params["width"] in (8, 16, 32, 64),
    P["iota"]: lambda e, known: e.outputs[0].aval.dtype.kind != "b",
}


# ---------------------------------------------------------------- values during fusion

class View:
    """A buffer read through strides and an offset (elements); with a `guard` (per
    axis (lo, hi) or None) points outside it are `fill` (a padded buffer)."""
    __slots__ = ("buffer", "shape", "strides", "offset", "guard", "fill")

    def __init__(self, buffer, shape, strides, offset, guard=None, fill=None):
        self.buffer, self.shape, self.strides, self.offset = buffer, tuple(shape), tuple(strides), offset
        self.guard = tuple(guard) if guard is not None and any(guard) else None
        self.fill = fill

    def guards(self):
        return self.guard or (None,) * len(self.shape)

    def contiguous(self):
        return all(s == c for s, c, d in zip(self.strides, contiguous_strides(self.shape), self.shape)
                   if d != 1)


class Expr:
    """A node of a kernel (whose index space is the value's shape)."""
    __slots__ = ("kernel", "node")

    def __init__(self, kernel, node):
        self.kernel, self.node = kernel, node


class Scalar:
    """An inline constant, the same at every index of `shape`."""
    __slots__ = ("const", "shape")

    def __init__(self, const, shape):
        self.const, self.shape = const, tuple(shape)


class Unit:
    """The fused form of a run: kernels in order, and the buffers they share."""

    def __init__(self):
        self.kernels = []
        self.buffers = []
        self.inputs = []     # (buffer, slot)
        self.outputs = []    # (buffer, slot)
        self.producer = {}   # buffer index -> position of the kernel storing it

    def buffer(self, dtype, shape, role):
        b = Buffer(len(self.buffers), np.dtype(dtype), shape, role)
        self.buffers.append(b)
        return b

    def kernel(self, shape, reduce_shape=()):
        k = Kernel(f"k{len(self.kernels)}", shape, reduce_shape)
        self.kernels.append(k)
        return k


def fuse(ops, constants, live_out, avals, to_host=np.asarray, store_shared_costly=False):
    """Kernels for a run of lowerable `ops` [(eqn, in slots, out slots)].

    `constants`: slot -> value known when planning (0-d ones are inlined, their values
    read by `to_host`, the backend's); `live_out`: slots read after the run; `avals`:
    slot -> aval of the run's inputs. With `store_shared_costly` (the dialect's
    `stores_shared_costly`), a costly value a reduction reads that another op or a
    later run reads too is stored once, not computed again in each reader."""
    shared = ()
    if store_shared_costly:
        readers = collections.Counter(s for _, ins, _ in ops for s in set(ins))
        shared = {s for s, n in readers.items() if n > 1} | set(live_out)
    f = _Fuser(constants, avals, live_out, to_host, shared)
    for eqn, ins, outs in ops:
        f.op(eqn, ins, outs)
    for s in sorted(live_out):
        if s in f.values:
            f.output(s)
    f.unit.kernels = [k for k in f.unit.kernels if k.stores]  # prologues absorbed elsewhere
    return f.unit


class _Fuser:
    def __init__(self, constants, avals, live_out=(), to_host=np.asarray, shared=()):
        self.unit = Unit()
        self.constants = constants
        self.to_host = to_host
        self.shared = frozenset(shared)  # slots whose costly values a reduction stores (`fuse`)
        self.avals = avals
        self.live_out = frozenset(live_out)
        self.values = {}          # slot -> View | Expr | Scalar
        self.stored = {}          # id(node) -> View of the buffer it is stored in
        self.clones = {}          # (id(kernel), id(node)) -> the node recomputed in a reduction

    # -------------------------------------------------------------- reading slots

    def value(self, slot):
        v = self.values.get(slot)
        if v is not None:
            return v
        aval = self.avals[slot]
        c = self.constants.get(slot)
        if c is not None and np.ndim(c) == 0:
            v = Scalar(Const(np.asarray(self.to_host(c)).item(), aval.dtype), ())
        else:
            b = self.unit.buffer(aval.dtype, aval.shape, "in")
            self.unit.inputs.append((b, slot))
            v = View(b, aval.shape, contiguous_strides(aval.shape), 0)
        self.values[slot] = v
        return v

    def materialise(self, v, role="tmp"):
        """`v` as a View of a buffer (a node's value is stored by its kernel)."""
        if type(v) is View:
            return v   # possibly guarded: movement rules that cannot carry a guard copy it
        if type(v) is Scalar:
            return self.copy(v, role)
        view = self.stored.get(id(v.node))
        if view is None:
            k = v.kernel
            b = self.unit.buffer(v.node.dtype, k.shape, role)
            k.store(b, v.node)
            self.unit.producer[b.index] = self.unit.kernels.index(k)
            view = self.stored[id(v.node)] = View(b, k.shape, contiguous_strides(k.shape), 0)
        return view

    def copy(self, v, role):
        """A new kernel writing `v` into a fresh contiguous buffer."""
        k = self.unit.kernel(v.shape)
        dtype = v.const.dtype if type(v) is Scalar else v.buffer.dtype
        b = self.unit.buffer(dtype, v.shape, role)
        k.store(b, self.operand(k, v))
        self.unit.producer[b.index] = len(self.unit.kernels) - 1
        return View(b, v.shape, contiguous_strides(v.shape), 0)

    def operand(self, kernel, v):
        """`v` as an argument inside `kernel` (broadcast to the kernel's shape)."""
        if type(v) is Scalar:
            return v.const
        if type(v) is Expr:
            if v.kernel is kernel:
                return v.node
            stored = self.stored.get(id(v.node))
            node = None if stored is not None and _costly(v.node) else self.recompute(kernel, v)
            if node is not None:
                return node
            v = self.materialise(v)
        nd, vd = len(kernel.shape), len(v.shape)
        strides = [0] * (nd - vd) + [0 if d == 1 else s for s, d in zip(v.strides, v.shape)]
        guard = [None] * (nd - vd) + [g if d == n else None    # a broadcast axis reads index 0
                                      for g, d, n in zip(v.guards(), v.shape, kernel.shape[nd - vd:])]
        if any(g is not None and d != n and not g[0] <= 0 < g[1]
               for g, d, n in zip(v.guards(), v.shape, kernel.shape[nd - vd:])):
            return v.fill                                       # index 0 is padding everywhere
        return kernel.load(v.buffer, strides, v.offset, guard=guard, fill=v.fill)

    def recompute(self, kernel, v):
        """`v`'s elementwise tree cloned into `kernel` (same index space), instead of
        storing it and loading it back: a small tree is cheaper to recompute than a
        round trip through memory (softmax's exp then needs no buffer); a 0-d tree
        is recomputed in any kernel. None when `v` is a reduction's value, over
        another index space, large, or reads a buffer `kernel` runs before."""
        src = v.kernel
        if src.reduce_shape or src.serial or src.shape not in (kernel.shape, ()):
            return None
        pos = self.unit.kernels.index(kernel)
        seen, stack = set(), [v.node]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if type(n) is Node:
                stack.extend(n.args)
            elif type(n) is Load:
                if self.unit.producer.get(n.buffer.index, -1) >= pos:
                    return None
                stack.extend(d[0] for d in n.dynamic)
            if len(seen) > _RECOMPUTE_LIMIT:
                return None

        if src.shape == kernel.shape:
            return self.clone_tree(kernel, v.node, lambda strides: strides)
        # a 0-d value (a constant folded from others, a scalar parameter's function) is the same everywhere
        return self.clone_tree(kernel, v.node, lambda strides: (0,) * len(kernel.shape))

    def clone_tree(self, kernel, node, place, inner=False):
        """`node`'s elementwise tree rebuilt in `kernel`, each node once per kernel;
        `place(strides)` maps per-axis strides of the tree's loads and index nodes
        to `kernel`'s axes."""
        def clone(a):
            if type(a) is Node:
                key = (id(kernel), id(a))
                c = self.clones.get(key)
                if c is None:
                    params = a.params
                    if a.op == "index":
                        params = dict(params, strides=tuple(place(params["strides"])))
                    c = self.clones[key] = kernel.node(a.op, a.dtype, [clone(b) for b in a.args], params)
                return c
            if type(a) is Const:
                return a
            g = a.guard or (None,) * len(a.strides)
            dynamic = [(clone(v), st, n, hi) for v, st, n, hi in a.dynamic]
            return kernel.load(a.buffer, place(a.strides), a.offset, inner=inner,
                               guard=place(g), fill=a.fill, dynamic=dynamic)

        return clone(node)

    # -------------------------------------------------------------- ops

    def op(self, eqn, ins, outs):
        args = [self.value(s) for s in ins]
        kind, op = eqn.prim.lowering, eqn.prim.ir_op
        rule = _RULES.get(eqn.prim)
        if rule is not None:
            result = rule(self, eqn, *args)
        elif kind is Lowering.ELEMENTWISE:
            result = self.elementwise(eqn, op, args)
        else:   # Lowering.REDUCE: `lowerable` lets no other kind through without a rule
            x = args[0]
            if ins[0] in self.shared and type(x) is Expr and not x.kernel.reduce_shape and _costly(x.node):
                x = self.materialise(x)   # its other readers load it too (`stored` and costly)
            result = self.reduce(eqn, op, x)
        if outs[0] in self.live_out and type(result) is Expr and _costly(result.node):
            self.materialise(result)   # stored anyway: its readers load it, not recompute libm calls
        self.values[outs[0]] = result

    def elementwise(self, eqn, op, args):
        aval = eqn.outputs[0].aval
        kernel = self.target(aval.shape, args)
        operands = [self.operand(kernel, a) for a in args]
        node = _through_select(kernel, op, aval.dtype, operands, eqn.params)
        if node is None:
            node = kernel.node(op, aval.dtype, operands, eqn.params)
        return Expr(kernel, node)

    def target(self, shape, args):
        """The latest kernel over `shape` that every operand can be read in, else a new one."""
        kernels = self.unit.kernels
        needs = []
        for a in args:
            if type(a) is View and a.buffer.index in self.unit.producer:
                needs.append(self.unit.producer[a.buffer.index])
        for pos in range(len(kernels) - 1, -1, -1):
            k = kernels[pos]
            if k.shape != tuple(shape) or k.closed:
                continue
            ok = all(p < pos for p in needs)
            for a in args:
                if type(a) is Expr and a.kernel is not k:
                    j = self.unit.kernels.index(a.kernel)
                    ok = ok and (j < pos)
            if ok:
                return k
        return self.unit.kernel(shape)

    def reduce(self, eqn, op, x):
        p = eqn.params
        axes = tuple(sorted(p["axes"])) if "axes" in p else (p["axis"],)
        in_shape = eqn.inputs[0].aval.shape
        order = [a for a in range(len(in_shape)) if a not in axes] + list(axes)
        if type(x) is Expr and (x.kernel.reduce_shape or (id(x.node) in self.stored and _costly(x.node))):
            x = self.materialise(x)   # a reduced value reduced again, or a stored costly one, is read
        needs = self.producers(x)
        key = (in_shape, axes)
        kernels = self.unit.kernels
        kernel = None
        for pos in range(len(kernels) - 1, -1, -1):  # a sibling: same input shape and axes
            if kernels[pos].reduce_key == key and all(p < pos for p in needs):
                kernel = kernels[pos]
                break
        if kernel is None:
            kernel = self.unit.kernel(eqn.outputs[0].aval.shape, [in_shape[a] for a in axes])
            kernel.reduce_key = key
        arg = self.inner(kernel, x, order)
        for n in kernel.nodes:  # the same reduction of the same value: one accumulator
            if n.op == op and n.args[0] is arg:
                return Expr(kernel, n)
        params = {"index_dtype": p["index_dtype"]} if "index_dtype" in p else None
        return Expr(kernel, kernel.node(op, eqn.outputs[0].aval.dtype, [arg], params))

    def concatenate(self, parts, aval, axis):
        """Each part read through a load guarded to its range along `axis` (outside it
        reads the identity: -0.0, 0 or False), and the loads added up: exact, since at
        every point all but one are the identity."""
        shape = aval.shape
        views, start = [], 0
        for v in parts:
            v = self.materialise(v)
            if v.guard or len(v.shape) != len(shape):
                v = self.copy(v, "tmp")
            n = v.shape[axis]
            if n:
                guard = [None] * len(shape)
                guard[axis] = (start, start + n)
                offset = v.offset - start * v.strides[axis]
                views.append(View(v.buffer, shape, v.strides, offset, guard, _identity(aval.dtype)))
            start += n
        if not views:
            return Scalar(Const(0, aval.dtype), shape)
        kernel = self.target(shape, views)
        op = "or" if aval.dtype == np.dtype(bool) else "add"
        acc = self.operand(kernel, views[0])
        for v in views[1:]:
            acc = kernel.node(op, aval.dtype, [acc, self.operand(kernel, v)])
        if type(acc) is not Node:
            acc = kernel.node("stop_gradient", aval.dtype, [acc])  # an Expr is a node
        return Expr(kernel, acc)

    def readable(self, v):
        """`v` as a View without padding (copied when padded), or a Scalar as it is."""
        if type(v) is Scalar:
            return v
        v = self.materialise(v)
        return self.copy(v, "tmp") if v.guard else v

    def index_value(self, kernel, v, strides):
        """A runtime index operand in `kernel`: its constant, or a load of it through
        `strides` (per kernel axis); a computed index is stored first."""
        v = self.readable(v)
        if type(v) is Scalar:
            return v.const
        return kernel.load(v.buffer, strides, v.offset)

    def copy_into(self, v, buffer):
        """A kernel (or a store in `v`'s own) writing `v` into `buffer`, contiguous."""
        if type(v) is Expr and not v.kernel.closed:
            v.kernel.store(buffer, v.node)
            return
        k = self.unit.kernel(buffer.shape)
        k.store(buffer, self.operand(k, v))

    def producers(self, v):
        """Positions of the kernels storing what `v` reads."""
        prod = self.unit.producer
        if type(v) is View:
            return [prod[v.buffer.index]] if v.buffer.index in prod else []
        if type(v) is Scalar:
            return []
        return [prod[ld.buffer.index] for ld in v.kernel.loads if ld.buffer.index in prod]

    def inner(self, kernel, x, order):
        """`x` (over the reduction's input shape) recomputed in `kernel`'s inner loop."""
        if type(x) is Scalar:
            return x.const
        if type(x) is View:
            strides = [0 if d == 1 else s for s, d in zip(x.strides, x.shape)]
            g = x.guards()
            return kernel.load(x.buffer, [strides[a] for a in order], x.offset, inner=True,
                               guard=[g[a] for a in order], fill=x.fill)
        return self.clone_tree(kernel, x.node, lambda seq: [seq[k] for k in order], inner=True)

    def output(self, slot):
        """`slot`'s value in a buffer of its own, a fresh array each call."""
        v = self.values[slot]
        taken = {b.index for b, _ in self.unit.outputs}
        if type(v) is Expr:
            view = self.materialise(v, "out")
        elif (type(v) is View and v.buffer.role == "tmp" and v.shape == v.buffer.shape
              and v.offset == 0 and not v.guard and v.contiguous()):
            view = v                      # a whole buffer written here (scatter): handed out as it is
        else:
            view = None
        if view is None or view.buffer.index in taken:   # two outputs never share a buffer
            view = self.copy(view or v, "out")
        view.buffer.role = "out"
        self.unit.outputs.append((view.buffer, slot))


# ---------------------------------------------------------------- costly trees


def _costly(node):
    """Whether `node`'s elementwise tree costs a point as much as a libm call: it calls
    one, or it is a long chain of cheap ops (a GELU's derivative), which a reader
    loads where it is stored anyway rather than computing it again."""
    stack, seen, cost = [node], set(), 0
    while stack and cost < COSTLY_OP_COST:
        n = stack.pop()
        if type(n) is Node and id(n) not in seen:
            seen.add(id(n))
            cost += op_cost(n.op)
            stack.extend(n.args)
    return cost >= COSTLY_OP_COST


# ---------------------------------------------------------------- ops through a masking select

_INVARIANT_LIMIT = 8   # nodes and loads looked at before an arm counts as varying


def _row_invariant(a, depth=_INVARIANT_LIMIT):
    """Whether `a` is the same at every index of its kernel's innermost axis (a
    constant, or a tree of loads broadcast along it), so that C computes it once
    per row, outside the vectorised loop."""
    if type(a) is Const:
        return True
    if type(a) is Load:
        return (not a.dynamic and (not a.strides or a.strides[-1] == 0)
                and not (a.guard and a.guard[-1] is not None))
    if type(a) is not Node or depth <= 0 or a.op in ("index", "random_bits"):
        return False
    return all(_row_invariant(b, depth - 1) for b in a.args)


def _through_select(kernel, op, dtype, operands, params):
    """op(select(c, x, y), rest) as select(c, op(x, rest), op(y, rest)) where y and
    rest are row invariant (a masking constant, a row's max): the op of y then runs
    once per row and the vectorised loop never sees y. A masked softmax's
    exp(where(mask, s, min) - max) so never calls exp on the huge negative
    constant, which sends every vector holding one lane of it down libm's slow
    scalar path. An elementwise op is a function of its operands: the same values
    (libmvec's float32 functions aside, whose scalar fallback rounds a lane apart
    from the vector path by an ulp). None where the pattern does not apply."""
    if op == "select" or kernel.reduce_shape or not kernel.shape or kernel.shape[-1] < 2:
        return None
    at = [k for k, a in enumerate(operands) if type(a) is Node and a.op == "select"]
    if len(at) != 1 or not all(_row_invariant(a) for k, a in enumerate(operands) if k != at[0]):
        return None
    cond, x, y = operands[at[0]].args
    if not (_row_invariant(x) or _row_invariant(y)):
        return None

    def applied(arm):
        args = list(operands)
        args[at[0]] = arm
        return kernel.node(op, dtype, args, params)
    return kernel.node("select", dtype, [cond, applied(x), applied(y)])


# ---------------------------------------------------------------- movement as views

def _identity(dtype):
    """x + identity == x for every x of dtype (-0.0 keeps -0.0 and NaN as they are)."""
    if dtype == np.dtype(bool):
        return Const(False, dtype)
    k = _kind(dtype)
    return Const(complex(-0.0, -0.0) if k == "c" else -0.0 if k in "hf" else 0, dtype)

def _broadcast_to(f, v, out_shape, *, shape):
    if type(v) is not View:
        if type(v) is Scalar:
            return Scalar(v.const, shape)
        v = f.materialise(v)
    nd = len(shape)
    pad = nd - len(v.shape)
    if any(g is not None and d != n for g, d, n in zip(v.guards(), v.shape, shape[pad:])):
        v = f.copy(v, "tmp")   # a padded unit axis broadcast: store it first
    strides = [0] * pad + [0 if d == 1 and n != 1 else s
                           for s, d, n in zip(v.strides, v.shape, shape[pad:])]
    return View(v.buffer, shape, strides, v.offset, [None] * pad + list(v.guards()), v.fill)


def _reshape(f, v, out_shape, *, shape):
    if type(v) is Scalar:
        return Scalar(v.const, shape)
    v = f.materialise(v)
    if not v.contiguous() or v.guard:
        v = f.copy(v, "tmp")
    return View(v.buffer, shape, contiguous_strides(shape), v.offset)


def _transpose(f, v, out_shape, *, perm):
    if type(v) is Scalar:
        return Scalar(v.const, out_shape)
    v = f.materialise(v)
    g = v.guards()
    return View(v.buffer, out_shape, [v.strides[p] for p in perm], v.offset, [g[p] for p in perm], v.fill)


def _slice(f, v, out_shape, *, starts, limits, strides):
    if type(v) is Scalar:
        return Scalar(v.const, out_shape)
    v = f.materialise(v)
    offset = v.offset + sum(s * st for s, st in zip(starts, v.strides))
    guard = [None if g is None else (-(-(g[0] - s) // k), -(-(g[1] - s) // k))  # i*k + s in [lo, hi)
             for g, s, k in zip(v.guards(), starts, strides)]
    return View(v.buffer, out_shape, [st * k for st, k in zip(v.strides, strides)], offset, guard, v.fill)


def _rev(f, v, out_shape, *, axes):
    if type(v) is Scalar:
        return v
    v = f.materialise(v)
    strides, offset, guard = list(v.strides), v.offset, list(v.guards())
    for a in axes:
        if v.shape[a] > 0:
            offset += (v.shape[a] - 1) * strides[a]
            strides[a] = -strides[a]
            if guard[a] is not None:
                guard[a] = (v.shape[a] - guard[a][1], v.shape[a] - guard[a][0])
    return View(v.buffer, v.shape, strides, offset, guard, v.fill)


def _pad(f, v, value, out_shape, *, config):
    """Padding as a guarded view: outside the original extent, loads read the value."""
    if type(v) is Scalar and repr(v.const.value) == repr(value.const.value):
        return Scalar(v.const, out_shape)
    v = f.materialise(v)
    if v.guard:
        v = f.copy(v, "tmp")
    offset = v.offset - sum(lo * s for (lo, _), s in zip(config, v.strides))
    guard = [(lo, lo + d) if (lo or hi) else None for (lo, hi), d in zip(config, v.shape)]
    return View(v.buffer, out_shape, v.strides, offset, guard, Const(value.const.value, v.buffer.dtype))


def _full(f, v, out_shape, *, shape, device):
    """A constant made on the device is its scalar broadcast: an inline constant
    in every kernel that reads it, never a buffer."""
    return _broadcast_to(f, v, out_shape, shape=shape)


def _shaped(move):
    """A movement rule `move(f, v, out_shape, **params)` as a rule of the equation."""
    return lambda f, eqn, v: move(f, v, eqn.outputs[0].aval.shape, **eqn.params)


# primitive -> fn(fuser, eqn, *operand values) -> its value: movement as views
_MOVES = {
    **{P[name]: _shaped(move) for name, move in (
        ("broadcast_to", _broadcast_to), ("reshape", _reshape), ("transpose", _transpose),
        ("slice", _slice), ("rev", _rev), ("full", _full))},
    P["pad"]: lambda f, eqn, v, value: _pad(f, v, value, eqn.outputs[0].aval.shape, **eqn.params),
    P["concatenate"]: lambda f, eqn, *parts: f.concatenate(parts, eqn.outputs[0].aval, eqn.params["axis"]),
}


# ---------------------------------------------------------------- index arithmetic and indexed ops

def _iota(f, eqn, start):
    """The index along `dimension` (an `index` node), plus `start` unless it is 0."""
    aval = eqn.outputs[0].aval
    strides = [0] * len(aval.shape)
    strides[eqn.params["dimension"]] = 1
    kernel = f.target(aval.shape, [start])
    index = kernel.node("index", np.dtype("int64"), [], {"strides": tuple(strides)})
    node = kernel.node("convert", aval.dtype, [index])
    if not (type(start) is Scalar and start.const.value == 0):
        node = kernel.node("add", aval.dtype, [node, f.operand(kernel, start)])
    return Expr(kernel, node)


def _random_bits(f, eqn, key):
    """Threefry of each point's flat index within `shape` under its key (a batch of
    keys: one per leading index), computed where the bits are used."""
    aval = eqn.outputs[0].aval
    key = f.readable(key)
    if type(key) is Scalar:
        key = f.copy(key, "tmp")   # a constant key: its two words read from a buffer
    nb = len(key.shape) - 1
    tail = len(aval.shape) - nb
    kernel = f.target(aval.shape, [key])
    strides = [0 if d == 1 else s for s, d in zip(key.strides[:-1], key.shape[:-1])] + [0] * tail
    k0 = kernel.load(key.buffer, strides, key.offset)
    k1 = kernel.load(key.buffer, strides, key.offset + key.strides[-1])
    counter = kernel.node("index", np.dtype("int64"), [],
                          {"strides": (0,) * nb + contiguous_strides(aval.shape[nb:])})
    return Expr(kernel, kernel.node("random_bits", aval.dtype, [k0, k1, counter],
                                    {"width": eqn.params["width"]}))


def _gather(f, eqn, x, idx):
    """x read at the loaded (clamped) index along `axis`: one load, no copy."""
    aval, axis = eqn.outputs[0].aval, eqn.params["axis"]
    if type(x) is Scalar:
        return Scalar(x.const, aval.shape)   # every index reads the same value
    x, idx = f.readable(x), f.readable(idx)
    ni, n = len(eqn.inputs[1].aval.shape), eqn.inputs[0].aval.shape[axis]
    kernel = f.target(aval.shape, [x, idx])
    where = [0] * axis + ([0 if d == 1 else s for s, d in zip(idx.strides, idx.shape)]
                          if type(idx) is View else [0] * ni) + [0] * (len(x.shape) - axis - 1)
    index = f.index_value(kernel, idx, where)
    xs = [0 if d == 1 else s for s, d in zip(x.strides, x.shape)]
    load = kernel.load(x.buffer, xs[:axis] + [0] * ni + xs[axis + 1:], x.offset,
                       dynamic=[(index, x.strides[axis], n, n - 1)])
    return Expr(kernel, kernel.node("stop_gradient", aval.dtype, [load]))


def _window(f, kernel, starts, shape, sizes, strides, offset):
    """Clamped window starts as address terms: constants folded into the offset."""
    dynamic = []
    for s, d, z, st in zip(starts, shape, sizes, strides):
        v = f.index_value(kernel, s, [0] * len(kernel.shape))
        if type(v) is Const:
            i = int(v.value)
            offset += st * min(max(i + d if i < 0 else i, 0), d - z)
        else:
            dynamic.append((v, st, d, d - z))
    return offset, dynamic


def _dynamic_slice(f, eqn, x, *starts):
    """A window of x at runtime starts: loads offset by the clamped starts."""
    aval = eqn.outputs[0].aval
    if type(x) is Scalar:
        return Scalar(x.const, aval.shape)
    x, starts = f.readable(x), [f.readable(s) for s in starts]
    kernel = f.target(aval.shape, [x, *starts])
    shape = eqn.inputs[0].aval.shape
    offset, dynamic = _window(f, kernel, starts, shape, aval.shape, x.strides, x.offset)
    xs = [0 if d == 1 else s for s, d in zip(x.strides, x.shape)]
    load = kernel.load(x.buffer, xs, offset, dynamic=dynamic)
    return Expr(kernel, kernel.node("stop_gradient", aval.dtype, [load]))


def _updated_copy(f, x, aval, update_shape):
    """A fresh buffer holding x, and a kernel of its own over `update_shape` that
    will update it in place."""
    out = f.unit.buffer(aval.dtype, aval.shape, "tmp")
    f.copy_into(x, out)
    kernel = f.unit.kernel(update_shape)
    kernel.closed = True
    return out, kernel


def _finish(f, out, kernel):
    f.unit.producer[out.index] = f.unit.kernels.index(kernel)
    return View(out, out.shape, contiguous_strides(out.shape), 0)


def _dynamic_update_slice(f, eqn, x, update, *starts):
    aval = eqn.outputs[0].aval
    ushape = eqn.inputs[1].aval.shape
    starts = [f.readable(s) for s in starts]   # stored (if computed) before the update kernel
    out, kernel = _updated_copy(f, x, aval, ushape)
    cs = contiguous_strides(aval.shape)
    offset, dynamic = _window(f, kernel, starts, aval.shape, ushape, cs, 0)
    kernel.store(out, f.operand(kernel, update), cs, offset, dynamic)
    return _finish(f, out, kernel)


def _scatter(f, eqn, x, idx, updates):
    """Each update written (or combined) at its index along `axis`, in order; an
    index outside the axis drops its update (negative ones count from the end)."""
    aval, axis, mode = eqn.outputs[0].aval, eqn.params["axis"], eqn.params["mode"]
    ushape = eqn.inputs[2].aval.shape
    idx = f.readable(idx)   # stored (if computed) before the update kernel
    out, kernel = _updated_copy(f, x, aval, ushape)
    kernel.serial = True    # repeated indices: the last write wins, or every update combines in order
    ni, n = len(eqn.inputs[1].aval.shape), aval.shape[axis]
    where = [0] * axis + ([0 if d == 1 else s for s, d in zip(idx.strides, idx.shape)]
                          if type(idx) is View else [0] * ni) + [0] * (len(aval.shape) - axis - 1)
    index = f.index_value(kernel, idx, where)
    cs = contiguous_strides(aval.shape)
    at = list(cs[:axis]) + [0] * ni + list(cs[axis + 1:])
    value = f.operand(kernel, updates)
    if mode != "set":
        current = kernel.load(out, at, 0, dynamic=[(index, cs[axis], n, n - 1)])
        value = kernel.node(_COMBINE[mode], aval.dtype, [current, value])
    kernel.store(out, value, at, 0, [(index, cs[axis], n, None)])
    return _finish(f, out, kernel)


# primitive -> fn(fuser, eqn, *operand values) -> its value: index arithmetic,
# indexed loads and updates
_INDEXED = {P["iota"]: _iota, P["random_bits"]: _random_bits, P["gather"]: _gather,
            P["dynamic_slice"]: _dynamic_slice, P["dynamic_update_slice"]: _dynamic_update_slice,
            P["scatter"]: _scatter}


_OUTER_DTYPES = frozenset(np.dtype(d) for d in (np.float32, np.float64))


def outer_product(eqn):
    """Whether `eqn` is a dot_general contracting nothing over float32/float64: a
    batch of outer products (per-example gradients under vmap), one product per
    point, which a kernel computes elementwise (a library call would run a
    one-deep matrix product per matrix)."""
    return (eqn.prim is P["dot_general"] and not eqn.params["dims"][0][0]
            and all(v.aval.dtype in _OUTER_DTYPES for v in (*eqn.inputs, *eqn.outputs)))


def _outer_product(f, eqn, x, y):
    """The product of operands read in place over the output's (batch, x's free,
    y's free) axes (rune/nx/linalg.py's dot_general layout)."""
    (_, _), (lb, rb) = eqn.params["dims"]
    out = eqn.outputs[0].aval
    nb = len(lb)
    xs, ys = eqn.inputs[0].aval.shape, eqn.inputs[1].aval.shape
    nx_free, ny_free = len(xs) - nb, len(ys) - nb

    def spread(v, shape, batch, before, after):
        order = tuple(batch) + tuple(i for i in range(len(shape)) if i not in batch)
        t = _transpose(f, v, tuple(shape[i] for i in order), perm=order)
        if type(t) is Scalar:
            return Scalar(t.const, out.shape)
        g = t.guards()
        return View(t.buffer, out.shape, list(t.strides[:nb]) + [0] * before + list(t.strides[nb:]) + [0] * after,
                    t.offset, list(g[:nb]) + [None] * before + list(g[nb:]) + [None] * after, t.fill)

    operands = (spread(x, xs, lb, 0, ny_free), spread(y, ys, rb, nx_free, 0))
    kernel = f.target(out.shape, operands)
    return Expr(kernel, kernel.node("mul", out.dtype, [f.operand(kernel, v) for v in operands]))


# what op() lowers besides the math; stop_gradient is differentiation's business only: a plan
# computes its operand (no node, and no kernel copying a reduction's rows)
_RULES = {**_MOVES, **_INDEXED, P["dot_general"]: _outer_product, P["stop_gradient"]: lambda f, eqn, x: x}
