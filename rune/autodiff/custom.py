"""Custom derivative rules: `custom_vjp` (rrule style) and `custom_jvp`.

`custom_vjp(f)`: `f(*args)` returns `(out, pullback)`. The forward and the
pullback are staged once per call: the pullback becomes a backward program
whose residuals are the forward values it closed over (DESIGN 2.2), so the
same rule works eagerly, under jit and inside a scan step.
"""
import functools
import inspect

from .. import tree
from ..core.closure import split_residuals
from ..core.primitive import abstract_rules, calls, eval_rules, primitive
from ..core.staging import StagingInterpreter, abstract, stage
from ..core.trace import bind, using
from ..errors import DTypeError, NotDifferentiableError, ShapeError, TreeError, UsageError
from ..nx import ops as nx
from ..nx.creation import zeros_like
from .jvp import jvp_rules
from .vjp import vjp_forward

custom_vjp_p = primitive("custom_vjp_call", multiple_results=True)
custom_jvp_p = primitive("custom_jvp_call", multiple_results=True)


def _positional(f, args, kwargs):
    """Keyword arguments moved to their positions (as JAX does): a rule's
    derivatives are one per positional argument."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(f).bind(*args, **kwargs)
    except TypeError as e:
        raise UsageError(f"{getattr(f, '__name__', 'custom rule')}: {e}") from e
    if bound.kwargs:
        raise UsageError(f"{getattr(f, '__name__', 'custom rule')}: keyword-only arguments "
                         f"{sorted(bound.kwargs)} cannot be differentiated; make them positional")
    return bound.args


class custom_vjp:
    """Decorate `f(*args) -> (out, pullback)`; calling the result returns `out`."""

    def __init__(self, f):
        self.f = f
        functools.update_wrapper(self, f, updated=())  # never copy f.__dict__ over ours

    def __call__(self, *args, **kwargs):
        args = _positional(self.f, args, kwargs)
        leaves, in_struct = nx.tree_operands(args)
        name = getattr(self.f, "__name__", "custom_vjp")
        fwd = StagingInterpreter()
        ins = [fwd.new_input(abstract(x)) for x in leaves]
        with using(fwd):
            result = self.f(*tree.unflatten(in_struct, ins))
        if not (isinstance(result, tuple) and len(result) == 2 and callable(result[1])):
            raise TreeError(f"custom_vjp {name}: the function must return (out, pullback), "
                            f"got {type(result).__name__}")
        out, pullback = result
        out_leaves, out_struct = tree.flatten(out)
        out_avals = [fwd.atom(o).aval.strong() for o in out_leaves]

        bwd = StagingInterpreter()
        cts = [bwd.new_input(a) for a in out_avals]
        with using(bwd):
            given = pullback(tree.unflatten(out_struct, cts))
            in_cts = _check_cotangents(name, given, args, leaves)
        bwd_program, res = split_residuals(bwd.build(in_cts))
        fwd_program, consts = fwd.build(list(out_leaves) + res).closed()
        outs = bind(custom_vjp_p, *consts, *leaves, fwd=fwd_program, bwd=bwd_program,
                    num_consts=len(consts), num_out=len(out_leaves), name=name)
        return tree.unflatten(out_struct, outs)


def _check_cotangents(name, given, args, leaves):
    """One cotangent per positional argument (bare when there is one); None means zero."""
    given = (given,) if len(args) == 1 else given
    if not isinstance(given, (tuple, list)) or len(given) != len(args):
        n = len(given) if isinstance(given, (tuple, list)) else 1
        raise TreeError(f"custom_vjp {name}: the pullback must return {len(args)} cotangent(s), "
                        f"one per positional argument, got {n}")
    flat = []
    for i, (ct, arg) in enumerate(zip(given, args)):
        # A cotangent may be a prefix of its argument: None for any subtree means zeros.
        flat.extend(tree.prefix_broadcast(ct, arg, f"custom_vjp {name}: cotangent {i}"))
    out = []
    for c, x in zip(flat, leaves):
        a = x.aval
        if c is None:
            out.append(zeros_like(x))
            continue
        c = nx.asarray(c)
        if c.shape != a.shape:
            raise ShapeError(f"custom_vjp {name}: cotangent of shape {c.shape} for an argument "
                             f"of shape {a.shape}")
        if c.dtype != a.dtype:
            if c.dtype.kind != a.dtype.kind and not c.weak:
                raise DTypeError(f"custom_vjp {name}: cotangent of dtype {c.dtype.name} for an "
                                 f"argument of dtype {a.dtype.name}")
            c = nx.astype(c, a.dtype)
        out.append(c)
    return out


calls[custom_vjp_p] = lambda params: (params["fwd"], params["num_out"])
abstract_rules[custom_vjp_p] = lambda *avals, fwd, num_out, **_: fwd.out_avals[:num_out]
eval_rules[custom_vjp_p] = lambda *args, fwd, num_out, **_: fwd(*args)[:num_out]


def _custom_vjp_fwd(primals, tracked, *, fwd, bwd, num_consts, num_out, name):
    if any(tracked[:num_consts]):
        raise NotDifferentiableError(
            f"custom_vjp {name} closes over a value that is being differentiated; pass it as an "
            f"argument so its pullback can return its cotangent")
    outs = fwd(*primals)
    return outs[:num_out], outs[num_out:]


def _custom_vjp_bwd(cts, res, tracked, *, fwd, bwd, num_consts, num_out, name):
    cts = [c if c is not None else zeros_like(a)
           for c, a in zip(cts, fwd.out_avals[:num_out])]
    return [None] * num_consts + list(bwd(*res, *cts))


vjp_forward[custom_vjp_p] = (_custom_vjp_fwd, _custom_vjp_bwd)


def _custom_vjp_jvp(primals, tangents, *, name, **_):
    raise NotDifferentiableError(f"custom_vjp {name} has only a reverse-mode rule; forward mode "
                                 f"(jvp, jacfwd, hessian) needs rune.custom_jvp")


jvp_rules[custom_vjp_p] = _custom_vjp_jvp


class custom_jvp:
    """`f` with a forward-mode rule `jvp(primals, tangents) -> (out, tangent_out)`.

    Use as `custom_jvp(f, jvp)`, or decorate `f` and add the rule with
    `@f.defjvp`.
    """

    def __init__(self, f, jvp=None):
        self.f = f
        self.rule = jvp
        functools.update_wrapper(self, f, updated=())  # never copy f.__dict__ over ours

    def defjvp(self, rule):
        self.rule = rule
        return rule

    def __call__(self, *args, **kwargs):
        args = _positional(self.f, args, kwargs)
        name = getattr(self.f, "__name__", "custom_jvp")
        if self.rule is None:
            raise TreeError(f"custom_jvp {name}: no rule; pass jvp= or use @{name}.defjvp")
        leaves, in_struct = nx.tree_operands(args)
        box = []

        def flat_f(*xs):
            out_leaves, s = tree.flatten(self.f(*tree.unflatten(in_struct, xs)))
            box.append(s)
            return out_leaves

        program, consts = stage(flat_f, [abstract(x) for x in leaves]).closed()
        outs = bind(custom_jvp_p, *consts, *leaves, fun=program, rule=self.rule,
                    num_consts=len(consts), in_struct=in_struct, out_struct=box[0], name=name)
        return tree.unflatten(box[0], outs)


calls[custom_jvp_p] = lambda params: (params["fun"], None)
abstract_rules[custom_jvp_p] = lambda *avals, fun, **_: fun.out_avals
eval_rules[custom_jvp_p] = lambda *args, fun, **_: fun(*args)


def _custom_jvp_jvp(primals, tangents, *, fun, rule, num_consts, in_struct, out_struct, name):
    if any(t is not None for t in tangents[:num_consts]):
        raise NotDifferentiableError(
            f"custom_jvp {name} closes over a value that is being differentiated; pass it as an argument")
    args = primals[num_consts:]
    ts = [t if t is not None else zeros_like(p) for p, t in zip(args, tangents[num_consts:])]
    out, tout = rule(tuple(tree.unflatten(in_struct, args)), tuple(tree.unflatten(in_struct, ts)))
    out_leaves, s = tree.flatten(out)
    t_leaves, ts_struct = tree.flatten(tout)
    if s != out_struct or ts_struct != out_struct:
        raise TreeError(f"custom_jvp {name}: the rule returned structures {s} and {ts_struct}; "
                        f"the function returns {out_struct}")
    for o, t, a in zip(out_leaves, t_leaves, fun.out_avals):
        if nx.asarray(o).shape != a.shape or nx.asarray(t).shape != a.shape:
            raise ShapeError(f"custom_jvp {name}: the rule's output or tangent shape differs from "
                             f"the function's output shape {a.shape}")
    return out_leaves, [nx.astype(t, a.dtype) for t, a in zip(t_leaves, fun.out_avals)]


def _custom_jvp_vjp(primals, tracked, *, name, **_):
    raise NotDifferentiableError(f"custom_jvp {name} has only a forward-mode rule; reverse mode "
                                 f"(grad, vjp) needs rune.custom_vjp")


jvp_rules[custom_jvp_p] = _custom_jvp_jvp
vjp_forward[custom_jvp_p] = (_custom_jvp_vjp, None)
