"""Collectives as primitives: effects inside programs, with derivative rules.

`all_reduce`, `broadcast` and `all_gather` bind effectful primitives, so
`jit` keeps each one, runs it exactly once per call and in program order, as
it does a `rune.callback`. A plan runs them through the callback machinery: a
collective is a "call" of a one-equation program holding a callback equation
whose host function is the collective itself (`calls`, the same hook custom
rules and checkpoints use), so plans need no entry of their own.

Derivatives follow JAX's convention for `psum`: a rank's cotangent is the
derivative of the SUM OVER ALL RANKS of every rank's output. Hence

- `all_reduce(x, "sum")` is linear and its transpose is again an
  `all_reduce(ct, "sum")`; `"mean"` transposes to `all_reduce(ct, "mean")`;
  `"max"`/`"min"` have no derivative rule (NotDifferentiableError);
- `all_gather(x, axis)` transposes to this rank's slice of
  `all_reduce(ct, "sum")` (a reduce-scatter);
- `broadcast(x, root)` transposes to `all_reduce(ct, "sum")` on `root` and
  zeros elsewhere.

So in a data-parallel step, `grad` of `all_reduce(local_loss(w), "mean")`
is the gradient of this rank's local loss; averaging those gradients with
`all_reduce(grads, "mean")` gives the gradient of the mean loss over the
global batch (when every rank holds a batch of the same size).

Under `vmap` a collective over batched values is an error: it runs once per
process, never once per lane.

Inside a plan a collective runs as two steps (rune/compiler/overlap.py): its
`start` hands host leaves to the communication thread, which runs the very call
a synchronous collective makes (so the bits are the same), and the plan's wait
step takes the results where they are first read; compute runs between them.
A collective of GPU leaves runs at its start, as before: NCCL already queues it
on the device's stream, behind the kernels that make its inputs.
"""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import tree as pytree
from ..transforms.autodiff.jvp import jvp_rules
from ..transforms.autodiff.vjp import vjp_rules
from ..transforms.batching import batch_rules
from ..transforms.callback import callback_p
from ..backends import backend_for
from ..base import profiler
from ..core.primitive import abstract_rules, calls, eval_rules, primitive
from ..core.program import Eqn, Program, Var
from ..core.trace import aval_of, bind
from ..errors import ArgumentError, NotDifferentiableError, UsageError
from ..nx import ops as nx
from ..nx.buffers import Array
from ..nx.creation import zeros_like
from . import host, nccl, runtime

OPS = ("sum", "mean", "max", "min")

all_reduce_p = primitive("all_reduce", multiple_results=True, effectful=True)
broadcast_p = primitive("broadcast_from_root", multiple_results=True, effectful=True)
all_gather_p = primitive("all_gather", multiple_results=True, effectful=True)


class Collective:
    """One collective over a list of leaves: what a collective equation runs.

    Called on concrete Arrays (eagerly, or by a plan's callback step); returns
    Arrays. `option` is the op, the root or the per-leaf axes; `structure` the
    user's tree's Structure, which every rank must share (None for the flat
    lists of derivative rules).
    """
    __slots__ = ("kind", "option", "structure", "in_avals", "out_avals", "name", "_program")

    def __init__(self, kind, option, in_avals, out_avals, structure=None):
        self.kind, self.option, self.structure = kind, option, structure
        self.in_avals, self.out_avals = list(in_avals), list(out_avals)
        self.name = f"{kind}({_option_text(kind, option)})"
        self._program = None

    def __repr__(self):
        return self.name

    @property
    def program(self):
        """A program of one callback equation running this collective (what a plan runs)."""
        if self._program is None:
            invars = [Var(a) for a in self.in_avals]
            outvars = [Var(a) for a in self.out_avals]
            eqn = Eqn(callback_p, invars, outvars, {"fn": self, "vmap_method": "sequential"})
            self._program = Program(invars, outvars, [eqn])
        return self._program

    def __call__(self, arrays):
        group = runtime.initialize()
        if group.size > 1:
            detail = [f"{a.dtype.name}{list(a.shape)} ({a.device.platform})" for a in arrays]
            runtime.agree(group, self.name, detail, _structure_text(self.structure))
        # Host leaves go through MPI, each GPU's leaves through its platform's
        # communicator (NCCL).
        def run(device, index, raws):
            option = [self.option[i] for i in index] if self.kind == "all_gather" else self.option
            return self._run(group, device, raws, option)
        out = run_by_device(arrays, run)
        group.seq += 1
        return out

    def start(self, arrays):
        """Start this collective on `arrays` without waiting for it: a handle whose
        `result()` waits and returns what calling it would. Host leaves in a group of
        several ranks go to the communication thread; otherwise it runs here and now."""
        if runtime.initialize().size == 1 or any(a.device.platform != "cpu" for a in arrays):
            return _Done(self(arrays))
        return _communication().submit(self._communicate, arrays)

    def split(self, groups):
        """This collective cut into one per group of leaf indices (rune/compiler/overlap.py's
        buckets), or None where that could change a result: all_reduce only, which
        reduces each element on its own, whatever buffer carries it."""
        if self.kind != "all_reduce":
            return None
        return [Collective(self.kind, self.option, [self.in_avals[i] for i in g], [self.out_avals[i] for i in g],
                           self.structure) for g in groups]

    def _communicate(self, arrays):
        """On the communication thread: the collective, as a span of its own in a profile."""
        with profiler.span("communication", self.name, "cpu", sum(a.nbytes for a in arrays)):
            return self(arrays)

    def _run(self, group, device, raws, option):
        backend = backend_for(device)
        link = backend.communicator(device)
        if link is None:   # no collective library of its own (the host): MPI, through host memory
            if group.size == 1:
                return raws   # a group of one: every collective is the identity
            out = getattr(host, self.kind)(group, [backend.to_host(r) for r in raws], option)
            return [backend.adopt(o, device) for o in out]
        if group.size == 1 and not link.available():
            return raws   # a group of one: every collective is the identity
        return getattr(nccl, self.kind)(group, raws, option, device)


class _Done:
    """The handle of a collective that ran at its start."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


# One thread runs every started collective, in the order started: the order every
# rank issues them in (MPI requires the same on all ranks), and plans never have
# two in flight (rune/compiler/overlap.py), so MPI is called by one thread at a time.
_thread = None
_thread_lock = threading.Lock()


def _communication():
    global _thread
    if _thread is None:
        with _thread_lock:
            if _thread is None:
                _thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rune-communication")
    return _thread


def _option_text(kind, option):
    if kind == "all_reduce":
        return f"op={option!r}"
    if kind == "broadcast":
        return f"root={option}"
    return f"axis={option[0] if len(set(option)) == 1 else list(option)}"


for _p in (all_reduce_p, broadcast_p, all_gather_p):
    abstract_rules[_p] = lambda *avals, fn: list(fn.out_avals)
    eval_rules[_p] = lambda *arrays, fn: fn(list(arrays))
    calls[_p] = lambda params: (params["fn"].program, None)


def _avals(leaves):
    return [aval_of(x) for x in leaves]


def _bind(prim, kind, option, leaves, out_avals=None, structure=None):
    in_avals = _avals(leaves)
    fn = Collective(kind, option, in_avals, in_avals if out_avals is None else out_avals, structure)
    return bind(prim, *leaves, fn=fn)


# ---------------------------------------------------------------- public functions

def all_reduce(tree, op="sum"):
    """Every rank's `tree` reduced leaf by leaf: op "sum", "mean", "max" or "min".

    Every rank must pass the same structure, shapes and dtypes. float16 and
    bfloat16 leaves are reduced in float32; "mean" needs floating leaves.
    """
    if op not in OPS:
        raise ArgumentError(f"all_reduce: op must be one of {OPS}, got {op!r}")
    leaves, struct = nx.tree_operands(tree)
    for path_leaf in leaves:
        host.work_dtype(np.dtype(path_leaf.dtype), op)
    if not leaves:
        return tree
    return pytree.unflatten(struct, _bind(all_reduce_p, "all_reduce", op, leaves, structure=struct))


def broadcast(tree, root=0):
    """`root`'s `tree` on every rank, bit for bit (every rank passes the same layout)."""
    size = runtime.initialize().size
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < size:
        raise ArgumentError(f"broadcast: root must be a rank in [0, {size}), got {root!r}")
    leaves, struct = nx.tree_operands(tree)
    if not leaves:
        return tree
    return pytree.unflatten(struct, _bind(broadcast_p, "broadcast", int(root), leaves, structure=struct))


def all_gather(x, axis=0):
    """Every rank's `x` concatenated along `axis` in rank order (`x` may be a pytree;
    every rank passes the same shapes, so the result's `axis` is `size()` times longer)."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ArgumentError(f"all_gather: axis must be an int, got {axis!r}")
    leaves, struct = nx.tree_operands(x)
    if not leaves:
        return x
    axes = []
    for k, leaf in enumerate(leaves):
        if leaf.ndim == 0:
            raise ArgumentError(f"all_gather: leaf {k} is 0-d; there is no axis {axis} to gather along "
                                f"(reshape it to (1,) first)")
        if not -leaf.ndim <= axis < leaf.ndim:
            raise ArgumentError(f"all_gather: axis {axis} is out of range for leaf {k} of shape "
                                f"{tuple(leaf.shape)}")
        axes.append(int(axis) % leaf.ndim)
    return pytree.unflatten(struct, _gather(leaves, tuple(axes), struct))


def run_by_device(arrays, run):
    """`run(device, indices, raws)` on the leaves of each device, in the same order on every
    rank (host first, then the other platforms' devices by index, as collectives must be
    issued alike everywhere); its raw results come back as Arrays in the leaves' order."""
    out = [None] * len(arrays)
    by_device = {}
    for i, a in enumerate(arrays):
        by_device.setdefault(a.device, []).append(i)
    for device in sorted(by_device, key=lambda d: (d.platform != "cpu", d.platform, d.index)):
        index = by_device[device]
        for i, r in zip(index, run(device, index, [arrays[i]._raw for i in index])):
            out[i] = Array(r, device, arrays[i].weak)
    return out


def _structure_text(structure):
    """A tree's structure as the ranks compare it, `{'b': *, 'w': *}` ("" for none);
    made only in runs of several ranks."""
    if structure is None:
        return ""
    text = repr(structure)
    return text[len("Structure("):-1] if text.startswith("Structure(") else text


def _gather(leaves, axes, structure=None):
    size = runtime.initialize().size
    out_avals = [a.update(shape=tuple(n * size if d == ax else n for d, n in enumerate(a.shape)))
                 for a, ax in zip(_avals(leaves), axes)]
    return _bind(all_gather_p, "all_gather", axes, leaves, out_avals, structure)


# ---------------------------------------------------------------- derivative rules

def _no_derivative(fn, mode):
    return NotDifferentiableError(
        f"rune.distributed: {fn.name} has no derivative rule, but a {mode} flows through it "
        f"(all_reduce differentiates for op 'sum' and 'mean')")


def _jvp(primals, tangents, *, fn):
    """Collectives are linear: one collective carries the primals and the nonzero tangents."""
    if fn.kind == "all_reduce" and fn.option in ("max", "min"):
        raise _no_derivative(fn, "tangent")
    nonzero = [i for i, t in enumerate(tangents) if t is not None]
    leaves = list(primals) + [tangents[i] for i in nonzero]
    if fn.kind == "all_gather":
        outs = _gather(leaves, tuple(fn.option) + tuple(fn.option[i] for i in nonzero))
    else:
        outs = _bind({"all_reduce": all_reduce_p, "broadcast": broadcast_p}[fn.kind], fn.kind,
                     fn.option, leaves)
    n = len(primals)
    touts = [None] * n
    for k, i in enumerate(nonzero):
        touts[i] = outs[n + k]
    return outs[:n], touts


def _summed_cotangents(cts, outs, wants, op="sum"):
    """all_reduce of the wanted cotangents (zeros where none came): the transpose of a psum."""
    index = [i for i, w in enumerate(wants) if w]
    full = [cts[i] if cts[i] is not None else zeros_like(outs[i]) for i in index]
    summed = _bind(all_reduce_p, "all_reduce", op, full) if full else []
    result = [None] * len(wants)
    for i, s in zip(index, summed):
        result[i] = s
    return result


def _all_reduce_vjp(cts, ins, outs, wants, *, fn):
    if fn.option in ("max", "min"):
        raise _no_derivative(fn, "cotangent")
    return _summed_cotangents(cts, outs, wants, fn.option)


def _broadcast_vjp(cts, ins, outs, wants, *, fn):
    summed = _summed_cotangents(cts, outs, wants)
    if runtime.initialize().rank == fn.option:
        return summed
    return [None if s is None else zeros_like(x) for s, x in zip(summed, ins)]


def _all_gather_vjp(cts, ins, outs, wants, *, fn):
    summed = _summed_cotangents(cts, outs, wants)
    rank = runtime.initialize().rank
    result = []
    for s, x, axis in zip(summed, ins, fn.option):
        if s is None:
            result.append(None)
            continue
        n = aval_of(x).shape[axis]
        result.append(s[(slice(None),) * axis + (slice(rank * n, (rank + 1) * n),)])
    return result


def _batch(values, dims, size, *, fn):
    raise UsageError(f"rune.distributed: {fn.name} cannot run under vmap on batched values: a "
                     f"collective runs once per process, not once per lane. Call it outside vmap "
                     f"(on the stacked result)")


for _p, _vjp in ((all_reduce_p, _all_reduce_vjp), (broadcast_p, _broadcast_vjp),
                 (all_gather_p, _all_gather_vjp)):
    jvp_rules[_p] = _jvp
    vjp_rules[_p] = _vjp
    batch_rules[_p] = _batch
