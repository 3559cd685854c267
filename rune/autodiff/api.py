"""The user-facing derivative transformations: grad, vjp, jvp, jacobians, checkpoint."""
import functools

from .. import tree
from ..core.primitive import abstract_rules, eval_rules, primitive
from ..core.staging import stage
from ..core.trace import bind
from ..errors import DTypeError, ShapeError, TreeError
from ..nx import ops as nx
from ..nx.creation import ones_like, zeros
from . import rules  # noqa: F401  (fills the rule tables)
from .jvp import jvp_flat, jvp_rules
from .vjp import differentiable, vjp_flat, vjp_forward


def _leaves(x, what):
    leaves, struct = tree.flatten(x)
    return [nx.asarray(l) if not hasattr(l, "aval") else l for l in leaves], struct


def _zeros_for(x):
    return zeros(x.shape, x.dtype, x.device)


def vjp(f, *primals, has_aux=False):
    """`(out, pullback)` (and `aux`); `pullback(ct)` returns one cotangent per primal."""
    leaves, in_struct = _leaves(primals, "vjp")
    tracked = [differentiable(x.aval) for x in leaves]
    aux_box = []

    def flat_f(*xs):
        out = f(*tree.unflatten(in_struct, xs))
        if has_aux:
            out, aux = _split_aux(out)
            aux_box.append(aux)
        out_leaves, out_struct = tree.flatten(out)
        aux_box.insert(0, out_struct)
        return out_leaves

    outs, pull, _ = vjp_flat(flat_f, leaves, tracked)
    out_struct = aux_box[0]
    out_avals = [nx.asarray(o).aval if not hasattr(o, "aval") else o.aval for o in outs]

    def pullback(ct):
        ct_leaves, ct_struct = tree.flatten(ct)
        if ct_struct != out_struct:
            raise TreeError(f"vjp pullback: cotangent structure {ct_struct} does not match the "
                            f"output structure {out_struct}")
        cts = []
        for c, a in zip(ct_leaves, out_avals):
            c = nx.asarray(c)
            if c.shape != a.shape:
                raise ShapeError(f"vjp pullback: cotangent of shape {c.shape} for an output of shape {a.shape}")
            cts.append(nx.astype(c, a.dtype) if c.dtype != a.dtype else c)
        in_cts = pull(cts)
        in_cts = [c if c is not None else _zeros_for(x) for c, x in zip(in_cts, leaves)]
        return tuple(tree.unflatten(in_struct, in_cts))

    out = tree.unflatten(out_struct, outs)
    if has_aux:
        return out, pullback, _strip(aux_box[1])
    return out, pullback


def _split_aux(out):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TreeError("has_aux=True: the function must return a pair (output, aux)")
    return out


def _strip(aux):
    """Aux values leave the transformation as their primal values."""
    from .vjp import VJPTracer
    return tree.map(lambda x: x.primal if isinstance(x, VJPTracer) else x, aux)


def value_and_grad(f, argnums=0, has_aux=False):
    """A function returning `(f(*args), gradient of f w.r.t. args[argnums])`."""
    multiple = isinstance(argnums, (tuple, list))
    nums = tuple(argnums) if multiple else (argnums,)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        for n in nums:
            if not -len(args) <= n < len(args):
                raise ShapeError(f"grad: argnums {argnums} is out of range for {len(args)} positional arguments")
        chosen = tuple(args[n] for n in nums)
        for n, a in zip(nums, chosen):
            for path, leaf in tree.flatten_with_paths(a)[0]:
                leaf = nx.asarray(leaf) if not hasattr(leaf, "aval") else leaf
                if not differentiable(leaf.aval):
                    raise DTypeError(f"grad: argument {n}{path} has dtype {leaf.dtype.name}; gradients "
                                     f"need float inputs (cast with .astype(nx.float32))")

        def g(*picked):
            full = list(args)
            for n, p in zip(nums, picked):
                full[n] = p
            return f(*full, **kwargs)

        result = vjp(g, *chosen, has_aux=has_aux)
        out, pullback = result[0], result[1]
        if not hasattr(out, "aval") or out.shape != () or not differentiable(out.aval):
            got = out.aval.describe() if hasattr(out, "aval") else type(out).__name__
            raise ShapeError(f"grad: the function must return a float scalar, got {got}; "
                             f"use rune.vjp for non-scalar outputs")
        grads = pullback(ones_like(out))
        grads = grads if multiple else grads[0]
        value = out.primal if hasattr(out, "primal") else out
        return ((value, result[2]), grads) if has_aux else (value, grads)

    return wrapped


def grad(f, argnums=0, has_aux=False):
    """The gradient of scalar-valued `f` with respect to `args[argnums]`."""
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        (value, g) = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped


def jvp(f, primals, tangents, has_aux=False):
    """`(f(*primals), J @ tangents)` by forward mode (and `aux` with has_aux)."""
    p_leaves, p_struct = _leaves(tuple(primals), "jvp")
    t_leaves, t_struct = _leaves(tuple(tangents), "jvp")
    if p_struct != t_struct:
        raise TreeError(f"jvp: tangents {t_struct} do not match primals {p_struct}")
    paths = [p for p, _ in tree.flatten_with_paths(tuple(primals))[0]]
    for path, p, t in zip(paths, p_leaves, t_leaves):
        if p.shape != t.shape:
            raise ShapeError(f"jvp: the tangent of primals{path} has shape {t.shape}, the primal {p.shape}")
        if p.dtype != t.dtype and differentiable(p.aval):
            raise DTypeError(f"jvp: the tangent of primals{path} has dtype {t.dtype.name}, the primal "
                             f"{p.dtype.name}; they must be equal")
    box = []

    def flat_f(*xs):
        out = f(*tree.unflatten(p_struct, xs))
        if has_aux:
            out, aux = _split_aux(out)
            box.append(aux)
        out_leaves, s = tree.flatten(out)
        box.insert(0, s)
        return out_leaves

    outs, touts = jvp_flat(flat_f, p_leaves, [t if differentiable(p.aval) else None
                                              for p, t in zip(p_leaves, t_leaves)])
    touts = [t if t is not None else _zeros_for(nx.asarray(o)) for o, t in zip(outs, touts)]
    result = tree.unflatten(box[0], outs), tree.unflatten(box[0], touts)
    if has_aux:
        from .jvp import JVPTracer
        return result + (tree.map(lambda a: a.primal if isinstance(a, JVPTracer) else a, box[1]),)
    return result


# ---------------------------------------------------------------- checkpoint

checkpoint_p = primitive("checkpoint", multiple_results=True)
abstract_rules[checkpoint_p] = lambda *avals, program: program.out_avals
eval_rules[checkpoint_p] = lambda *args, program: program(*args)


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
        leaves, in_struct = _leaves(args, "checkpoint")
        box = []

        def flat_f(*xs):
            out_leaves, s = tree.flatten(f(*tree.unflatten(in_struct, xs)))
            box.append(s)
            return out_leaves

        program, consts = stage(flat_f, [x.aval for x in leaves]).closed()
        outs = bind(checkpoint_p, *consts, *leaves, program=program)
        return tree.unflatten(box[0], outs)
    return wrapped


remat = checkpoint
