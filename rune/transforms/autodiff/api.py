"""The user-facing derivative transformations: grad, vjp, jvp, jacobians, checkpoint."""
import functools
import numbers

from ... import tree
from ...core.primitive import abstract_rules, calls, primitive
from ..batching import batch_rules, closed_batched, front
from ...core.staging import stage_pytree
from ...core.trace import bind
from ...errors import ArgumentError, DeviceMismatchError, DTypeError, ShapeError, TreeError, UsageError
from ...nx import ops as nx
from ...nx.creation import ones_like, zeros_like
from . import rules  # noqa: F401  (imported for its effect: it fills the rule tables)
from .jvp import jvp_flat, jvp_rules
from .vjp import differentiable, vjp_flat, vjp_forward


class _Flat:
    """`f` as a function of flat leaves returning flat leaves: its outputs first,
    then (with has_aux) the aux leaves, so the interpreter that made them unwraps
    them too. The structures are recorded on the call."""

    def __init__(self, f, in_struct, has_aux):
        self.f, self.in_struct, self.has_aux = f, in_struct, has_aux
        self.out_struct = self.aux_struct = None
        self.num_out = 0

    def __call__(self, *xs):
        out = self.f(*tree.unflatten(self.in_struct, xs))
        aux = None
        if self.has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TreeError("has_aux=True: the function must return a pair (output, aux)")
            out, aux = out
        out_leaves, self.out_struct = tree.flatten(out)
        aux_leaves, self.aux_struct = tree.flatten(aux)
        self.num_out = len(out_leaves)
        return out_leaves + aux_leaves

    def split(self, leaves):
        """(the output tree, the aux tree) from the flat results."""
        out = tree.unflatten(self.out_struct, leaves[:self.num_out])
        return out, tree.unflatten(self.aux_struct, leaves[self.num_out:])


def select(f, args, kwargs, argnums, what):
    """`f` as a function of the arguments `argnums` names, those arguments, and
    whether argnums is a tuple. Checks they exist and are float (differentiable)."""
    multiple = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multiple else (argnums,)
    for n in nums:
        if not isinstance(n, numbers.Integral) or isinstance(n, bool):
            raise UsageError(f"{what}: argnums must be an int or a tuple of ints, got {argnums!r}")
        if not -len(args) <= n < len(args):
            raise ArgumentError(f"{what}: argnums {argnums!r} names argument {n!r}, but the function "
                                f"was called with {len(args)} positional argument(s)")
    # A repeated argument would be substituted twice and only the last copy would
    # reach f, so the first entry's derivative would silently come back zero.
    normalized = [n % len(args) for n in nums]
    if len(set(normalized)) != len(nums):
        raise ArgumentError(f"{what}: argnums {argnums!r} names an argument more than once; "
                            f"each argument can be differentiated once")
    chosen = tuple(args[n] for n in nums)
    for n, a in zip(nums, chosen):
        for path, leaf in tree.flatten_with_paths(a)[0]:
            if not differentiable(nx.asarray(leaf).aval):
                raise DTypeError(f"{what}: argument {n}{path} has dtype {nx.asarray(leaf).dtype.name}; "
                                 f"derivatives need float inputs (cast with .astype(nx.float32))")

    def picked(*values):
        full = list(args)
        for n, v in zip(nums, values):
            full[n] = v
        return f(*full, **kwargs)

    return picked, chosen, multiple


def _check_like(what, given, expected, paths):
    """Tangents or cotangents must match their primals leaf by leaf."""
    for path, g, e in zip(paths, given, expected):
        if g.shape != e.shape:
            raise ShapeError(f"{what}{path} has shape {g.shape}, but its primal has shape {e.shape}")
        if g.dtype != e.dtype and differentiable(e):
            raise DTypeError(f"{what}{path} has dtype {g.dtype.name}, but its primal has dtype "
                             f"{e.dtype.name}; they must be equal")
        if g.device is not None and e.device is not None and g.device != e.device:
            raise DeviceMismatchError(f"{what}{path} lies on {g.device}, but its primal on {e.device}")


def vjp(f, *primals, has_aux=False):
    """`(out, pullback)` (and `aux`); `pullback(ct)` returns one cotangent per primal."""
    leaves, in_struct = tree.flatten(primals)
    leaves = nx.operands(leaves)
    flat = _Flat(f, in_struct, has_aux)
    results, pull, _ = vjp_flat(flat, leaves, [differentiable(x.aval) for x in leaves])
    out, aux = flat.split(results)
    out_leaves = nx.operands(results[:flat.num_out])
    out_paths = [p for p, _ in tree.flatten_with_paths(out)[0]]

    def pullback(ct):
        ct_leaves, ct_struct = tree.flatten(ct)
        if ct_struct != flat.out_struct:
            raise TreeError(f"vjp pullback: cotangent structure {ct_struct} does not match the "
                            f"output structure {flat.out_struct}")
        cts = nx.operands(ct_leaves)
        cts = [nx.astype(c, o.dtype) if c.weak and c.dtype != o.dtype else c for c, o in zip(cts, out_leaves)]
        _check_like("vjp pullback: the cotangent of output", [c.aval for c in cts],
                    [o.aval for o in out_leaves], out_paths)
        in_cts = pull(cts)
        return tuple(tree.unflatten(in_struct, [c if c is not None else zeros_like(x)
                                                for c, x in zip(in_cts, leaves)]))

    return (out, pullback, aux) if has_aux else (out, pullback)


def value_and_grad(f, argnums=0, has_aux=False, holomorphic=False):
    """A function returning `(f(*args), gradient of f w.r.t. args[argnums])`.

    Complex inputs follow JAX: for real-valued f of z = x + iy the gradient is
    df/dx - i df/dy; a complex-valued f needs holomorphic=True (complex inputs),
    and its gradient is then f'(z)."""
    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        picked, chosen, multiple = select(f, args, kwargs, argnums, "grad")
        if holomorphic:
            _check_complex_inputs(chosen)
        result = vjp(picked, *chosen, has_aux=has_aux)
        value, pullback = result[0], result[1]
        if not hasattr(value, "aval") or value.shape != ():
            got = value.aval.describe() if hasattr(value, "aval") else type(value).__name__
            raise ShapeError(f"grad: the function must return a float scalar, got {got}; "
                             f"use rune.vjp for non-scalar outputs")
        if not differentiable(value.aval):
            raise DTypeError(f"grad: the function must return a float scalar, got "
                             f"{value.aval.describe()}; grad needs a real (float) output: an integer "
                             f"or boolean result has no derivative")
        if value.dtype.kind == "c" and not holomorphic:
            raise DTypeError(f"grad: the function returns {value.aval.describe()}, a complex scalar; grad "
                             f"needs a real output (take nx.abs or nx.real of it), or pass "
                             f"holomorphic=True for a holomorphic function")
        if holomorphic and value.dtype.kind != "c":
            raise DTypeError(f"grad: holomorphic=True needs a complex output, got {value.aval.describe()}")
        grads = pullback(ones_like(value))
        grads = grads if multiple else grads[0]
        return ((value, result[2]), grads) if has_aux else (value, grads)

    return wrapped


def _check_complex_inputs(chosen):
    for leaf in tree.flatten(chosen)[0]:
        d = nx.asarray(leaf).dtype
        if d.kind != "c":
            raise DTypeError(f"grad: holomorphic=True needs complex inputs, got {d.name}")


def grad(f, argnums=0, has_aux=False, holomorphic=False):
    """The gradient of scalar-valued `f` with respect to `args[argnums]` (see value_and_grad
    for complex inputs and holomorphic=)."""
    vg = value_and_grad(f, argnums, has_aux, holomorphic)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        (value, g) = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def jvp(f, primals, tangents, has_aux=False):
    """`(f(*primals), J @ tangents)` by forward mode (and `aux` with has_aux).

    `primals` and `tangents` are tuples or lists, one entry per positional
    argument of `f` (as in JAX)."""
    for what, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, (tuple, list)):
            raise UsageError(f"jvp: {what} must be a tuple or list with one entry per positional "
                             f"argument of f, got {type(v).__name__}; write rune.jvp(f, (x,), (t,))")
    p_leaves, p_struct = tree.flatten(tuple(primals))
    t_leaves, t_struct = tree.flatten(tuple(tangents))
    if p_struct != t_struct:
        raise TreeError(f"jvp: tangents {t_struct} do not match primals {p_struct}")
    p_leaves, t_leaves = nx.operands(p_leaves), nx.operands(t_leaves)
    paths = [p for p, _ in tree.flatten_with_paths(tuple(primals))[0]]
    _check_like("jvp: the tangent of primals", [t.aval for t in t_leaves], [p.aval for p in p_leaves], paths)
    flat = _Flat(f, p_struct, has_aux)
    results, touts = jvp_flat(flat, p_leaves, [t if differentiable(p.aval) else None
                                               for p, t in zip(p_leaves, t_leaves)])
    out, aux = flat.split(results)
    touts = [t if t is not None else zeros_like(nx.asarray(o))
             for o, t in zip(results[:flat.num_out], touts)]
    tangent = tree.unflatten(flat.out_struct, touts)
    return (out, tangent, aux) if has_aux else (out, tangent)


# ---------------------------------------------------------------- checkpoint

# Evaluated eagerly through a plan of its program, by the compiler (rune/compiler/eager.py).
checkpoint_p = primitive("checkpoint", multiple_results=True)
calls[checkpoint_p] = lambda params: (params["program"], None)
abstract_rules[checkpoint_p] = lambda *avals, program: program.out_avals


def _checkpoint_fwd(primals, tracked, *, program):
    if program.effectful:
        # Recomputing would run its callbacks again: keep the tape instead.
        outs, pullback, _ = vjp_flat(lambda *xs: program(*xs), primals, tracked)
        return outs, pullback
    return bind(checkpoint_p, *primals, program=program), list(primals)


def _checkpoint_bwd(cts, res, tracked, *, program):
    if program.effectful:
        return res(cts)
    # Recompute the forward pass now, on the saved inputs, and pull back through it.
    _, pullback, _ = vjp_flat(lambda *xs: program(*xs), res, tracked)
    return pullback(cts)


vjp_forward[checkpoint_p] = (_checkpoint_fwd, _checkpoint_bwd)
jvp_rules[checkpoint_p] = lambda primals, tangents, *, program: jvp_flat(
    lambda *xs: program(*xs), primals, tangents)


def checkpoint(f):
    """`f`, whose intermediate values are recomputed in the backward pass instead of stored."""
    @functools.wraps(f)
    def wrapped(*args):
        leaves, in_struct = tree.flatten(args)
        leaves = nx.operands(leaves)
        program, out_struct = stage_pytree(f, [x.aval for x in leaves], in_struct)
        program, consts = program.closed()
        outs = bind(checkpoint_p, *consts, *leaves, program=program)
        return tree.unflatten(out_struct, outs)
    return wrapped


remat = checkpoint


# ---------------------------------------------------------------- batching (vmap)

def _checkpoint_batch(values, dims, size, *, program):
    args = [front(v, d) for v, d in zip(values, dims)]
    prog, extra = closed_batched(program, [d is not None for d in dims], size)
    outs = bind(checkpoint_p, *extra, *args, program=prog)
    return outs, [0] * len(outs)


batch_rules[checkpoint_p] = _checkpoint_batch
