"""Custom derivative rules: `custom_vjp` (rrule style) and `custom_jvp`.

`custom_vjp(f)`: `f(*args)` returns `(out, pullback)`. A call stages the
forward; the pullback is staged only when a derivative is asked for (the
first time a reverse-mode rule needs it), into a backward program whose
residuals are the forward values it closed over (docs/design.md, "Staging and capture"), so the same
rule works eagerly, under jit and inside a scan step, and a plain call never
runs the pullback.
"""
import functools
import inspect
import numbers

from ... import tree
from ...core.closure import split_residuals
from ...core.primitive import abstract_rules, calls, primitive
from ...core.staging import abstract, stage, stage_pytree, stage_pytree_open
from ..batching import batch_program, batch_rules, closed_batched, front, vmap
from ...core.trace import bind
from ...errors import ArgumentError, DTypeError, NotDifferentiableError, ShapeError, TreeError, UsageError
from ...nx import ops as nx
from ...nx.creation import zeros_like
from .jvp import jvp_rules
from .vjp import vjp_forward

# Both evaluate eagerly through a plan of the forward program, by the compiler
# (rune/compiler/eager.py); a plan inlines them (`calls`).
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


def _nondiff_argnums(what, nums):
    nums = (nums,) if isinstance(nums, numbers.Integral) else tuple(nums)
    if not all(isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in nums):
        raise UsageError(f"{what}: nondiff_argnums must be an int or a tuple of ints, got {nums!r}")
    return nums


def _split_nondiff(what, args, nondiff_argnums):
    """(the differentiated arguments, their positions, the nondiff arguments in
    nondiff_argnums order, and `rebuild(diff)` -> every argument in its place)."""
    if not nondiff_argnums:
        return tuple(args), list(range(len(args))), [], tuple
    for n in nondiff_argnums:
        if not -len(args) <= n < len(args):
            raise ArgumentError(f"{what}: nondiff_argnums {nondiff_argnums} names argument {n}, "
                                f"but it was called with {len(args)} positional argument(s)")
    static = [n % len(args) for n in nondiff_argnums]
    positions = [i for i in range(len(args)) if i not in static]

    def rebuild(diff):
        full = list(args)
        for i, v in zip(positions, diff):
            full[i] = v
        return full

    return tuple(args[i] for i in positions), positions, [args[i] for i in static], rebuild


class custom_vjp:
    """Decorate `f(*args) -> (out, pullback)`; calling the result returns `out`.

    `pullback(ct)` returns one cotangent per positional argument (a bare one
    when there is a single argument; None means zeros), each of its argument's
    shape and dtype. The pullback is traced only when a derivative is asked
    for: a plain call, eager or under jit, never runs or stages it.

    `nondiff_argnums` (as in JAX) lists positions whose arguments are not
    differentiated: Python values there (ints, strings, functions) reach `f`
    as they are, untraced. The pullback then returns cotangents only for the
    other positional arguments (a bare one when one remains). Where JAX's bwd
    receives the nondiff arguments first, rune's pullback simply closes over
    them, since `f` built it.
    """

    def __init__(self, f, nondiff_argnums=()):
        self.f = f
        self.nondiff_argnums = _nondiff_argnums(f"custom_vjp {getattr(f, '__name__', '')}", nondiff_argnums)
        functools.update_wrapper(self, f, updated=())  # never copy f.__dict__ over ours

    def __call__(self, *args, **kwargs):
        args = _positional(self.f, args, kwargs)
        name = getattr(self.f, "__name__", "custom_vjp")
        diff, positions, _, rebuild = _split_nondiff(f"custom_vjp {name}", args, self.nondiff_argnums)
        leaves, in_struct = nx.tree_operands(diff)

        def flatten(result):
            out, pullback = _out_and_pullback(name, result)
            out_leaves, out_struct = tree.flatten(out)
            # Made arrays once: the forward program is built again with residuals.
            return [nx.asarray(o) if isinstance(o, (bool, int, float)) else o for o in out_leaves], \
                (out_struct, pullback)

        fwd, out_leaves, (out_struct, pullback) = stage_pytree_open(
            lambda *xs: self.f(*rebuild(xs)), [abstract(x) for x in leaves], in_struct, flatten)
        fwd_program, consts = fwd.build(out_leaves).closed()
        rule = _Pullback(name, fwd, out_leaves, out_struct, pullback, diff, positions,
                         [x.aval for x in leaves], len(consts))
        outs = bind(custom_vjp_p, *consts, *leaves, fwd=fwd_program, rule=rule,
                    num_consts=len(consts), name=name)
        return tree.unflatten(out_struct, outs)


def _out_and_pullback(name, result):
    if isinstance(result, tuple) and len(result) == 2 and callable(result[1]):
        return result
    def kind(v):  # in the user's terms: staged values are arrays to them
        return f"an array {v.aval.describe()}" if hasattr(v, "aval") else f"a {type(v).__name__}"

    if isinstance(result, tuple) and len(result) == 2:
        got = f"a pair whose second element is {kind(result[1])}, not a function"
    elif isinstance(result, tuple):
        got = f"a tuple of {len(result)} elements"
    else:
        got = kind(result)
    raise TreeError(f"custom_vjp {name}: the function must return a pair (out, pullback), where "
                    f"pullback maps the output's cotangent to the arguments' cotangents; got {got}")


class VJPRule:
    """The reverse-mode rule of one custom_vjp call. `split()` gives (forward:
    operands[skip:] -> outputs + residuals, backward: residuals + output
    cotangents -> one cotangent per operand after the constants)."""
    skip = 0

    def forward(self, primals):
        fwd, _ = self.split()
        outs = fwd(*primals[self.skip:])
        return outs[:self.num_out], outs[self.num_out:]

    def backward(self, res, cts):
        return self.split()[1](*res, *cts)


class _Pullback(VJPRule):
    """Stages the user's pullback on first use, against the forward staging it
    closes over (whose values become residuals)."""

    def __init__(self, name, fwd, out_leaves, out_struct, pullback, args, positions, in_avals, num_consts):
        self.name, self.fwd, self.out_leaves, self.out_struct = name, fwd, out_leaves, out_struct
        self.pullback, self.args, self.positions, self.in_avals = pullback, args, positions, in_avals
        self.num_consts, self.num_out = num_consts, len(out_leaves)
        self._split = None

    def __repr__(self):
        return f"pullback of {self.name}"

    def split(self):
        if self._split is None:
            fwd = self.fwd
            ct_avals = [fwd.atom(o).aval.strong() for o in self.out_leaves]
            bwd, _ = stage_pytree(
                lambda *cts: self.pullback(tree.unflatten(self.out_struct, cts)), ct_avals,
                flatten=lambda given: (_check_cotangents(self.name, given, self.args, self.positions,
                                                         self.in_avals), None))
            bwd_program, res = split_residuals(bwd)
            fwd_program, consts = fwd.build(list(self.out_leaves) + res).closed()
            if len(consts) != self.num_consts:
                # The call's operands are fixed already; a traced value only the
                # pullback reads has no way in (JAX forbids it too).
                raise NotDifferentiableError(
                    f"custom_vjp {self.name}: the pullback reads a traced value that the function's "
                    f"forward computation does not use; use it in the forward computation or pass "
                    f"it as an argument")
            self._split = fwd_program, bwd_program
        return self._split


def _check_cotangents(name, given, args, positions, avals):
    """One cotangent per differentiated positional argument (bare when there is
    one); None means zero. Each must have its argument's shape and dtype."""
    given = (given,) if len(args) == 1 else given
    if not isinstance(given, (tuple, list)) or len(given) != len(args):
        n = len(given) if isinstance(given, (tuple, list)) else 1
        raise TreeError(f"custom_vjp {name}: the pullback must return {len(args)} cotangent(s), "
                        f"one per differentiated positional argument, got {n}")
    out, avals = [], iter(avals)
    for i, ct, arg in zip(positions, given, args):
        # A cotangent may be a prefix of its argument: None for any subtree means zeros.
        cs = tree.prefix_broadcast(ct, arg, f"custom_vjp {name}: cotangent {i}")
        for c, (path, _) in zip(cs, tree.flatten_with_paths(arg)[0]):
            a = next(avals)
            if c is None:
                out.append(zeros_like(a))
                continue
            c = nx.asarray(c)
            where = f"custom_vjp {name}: the pullback's cotangent for argument {i}{path}"
            if c.shape != a.shape:
                raise ShapeError(f"{where} has shape {c.shape}, but the argument has shape {a.shape}")
            if c.dtype != a.dtype:
                if not c.weak:  # a Python scalar takes its argument's dtype, as anywhere
                    raise DTypeError(f"{where} has dtype {c.dtype.name}, but the argument has dtype "
                                     f"{a.dtype.name}; they must be equal (cast with .astype)")
                c = nx.astype(c, a.dtype)
            out.append(c)
    return out


calls[custom_vjp_p] = lambda params: (params["fwd"], None)
abstract_rules[custom_vjp_p] = lambda *avals, fwd, **_: fwd.out_avals


def _custom_vjp_fwd(primals, tracked, *, fwd, rule, num_consts, name):
    if any(tracked[:num_consts]):
        raise NotDifferentiableError(
            f"custom_vjp {name} closes over a value that is being differentiated; pass it as an "
            f"argument so its pullback can return its cotangent")
    return rule.forward(primals)


def _custom_vjp_bwd(cts, res, tracked, *, fwd, rule, num_consts, name):
    cts = [c if c is not None else zeros_like(a) for c, a in zip(cts, fwd.out_avals)]
    return [None] * num_consts + list(rule.backward(res, cts))


vjp_forward[custom_vjp_p] = (_custom_vjp_fwd, _custom_vjp_bwd)


def _custom_vjp_jvp(primals, tangents, *, name, **_):
    raise NotDifferentiableError(f"custom_vjp {name} has only a reverse-mode rule; forward mode "
                                 f"(jvp, jacfwd, hessian) needs rune.custom_jvp")


jvp_rules[custom_vjp_p] = _custom_vjp_jvp


class custom_jvp:
    """`f` with a forward-mode rule `jvp(primals, tangents) -> (out, tangent_out)`.

    Use as `custom_jvp(f, jvp)`, or decorate `f` and add the rule with
    `@f.defjvp`. With `nondiff_argnums` (as in JAX), the arguments at those
    positions reach `f` as they are (Python values untraced) and the rule is
    called `jvp(*nondiff_args, primals, tangents)`: the nondiff arguments
    first, in nondiff_argnums order, then the tuples of the other arguments
    and their tangents.
    """

    def __init__(self, f, jvp=None, nondiff_argnums=()):
        self.f = f
        self.rule = jvp
        self.nondiff_argnums = _nondiff_argnums(f"custom_jvp {getattr(f, '__name__', '')}", nondiff_argnums)
        functools.update_wrapper(self, f, updated=())  # never copy f.__dict__ over ours

    def defjvp(self, rule):
        self.rule = rule
        return rule

    def __call__(self, *args, **kwargs):
        args = _positional(self.f, args, kwargs)
        name = getattr(self.f, "__name__", "custom_jvp")
        if self.rule is None:
            raise TreeError(f"custom_jvp {name}: no rule; pass jvp= or use @{name}.defjvp")
        diff, _, static, rebuild = _split_nondiff(f"custom_jvp {name}", args, self.nondiff_argnums)
        leaves, in_struct = nx.tree_operands(diff)
        program, out_struct = stage_pytree(lambda *xs: self.f(*rebuild(xs)), [abstract(x) for x in leaves],
                                           in_struct)
        program, consts = program.closed()
        rule = functools.partial(self.rule, *static) if static else self.rule
        outs = bind(custom_jvp_p, *consts, *leaves, fun=program, rule=rule,
                    num_consts=len(consts), in_struct=in_struct, out_struct=out_struct, name=name)
        return tree.unflatten(out_struct, outs)


calls[custom_jvp_p] = lambda params: (params["fun"], None)
abstract_rules[custom_jvp_p] = lambda *avals, fun, **_: fun.out_avals


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


# ---------------------------------------------------------------- batching (vmap)

def _custom_vjp_batch(values, dims, size, *, fwd, rule, num_consts, name):
    batched = [d is not None for d in dims]
    args = [front(v, d) for v, d in zip(values, dims)]
    fwd_b, extra = closed_batched(fwd, batched, size)
    outs = bind(custom_vjp_p, *extra, *args, fwd=fwd_b, rule=_BatchedRule(rule, batched, num_consts, size,
                len(extra)), num_consts=len(extra) + num_consts, name=name)
    return outs, [0] * len(outs)


class _BatchedRule(VJPRule):
    """A custom_vjp rule over a batch, built from the lane rule when first needed
    (so batching a plain call stages no pullback either)."""

    def __init__(self, lane, batched, lane_consts, size, skip):
        self.lane, self.batched, self.lane_consts, self.size = lane, batched, lane_consts, size
        self.skip, self.num_out, self._split = skip, lane.num_out, None

    def split(self):
        if self._split is None:
            fwd, bwd = self.lane.split()
            fwd_b = batch_program(fwd, self.batched[self.lane.skip:], self.size)
            bwd_b = batch_program(bwd, [True] * len(bwd.invars), self.size)
            arg_batched = self.batched[self.lane_consts:]

            def pullback(*a):
                # An argument shared by every lane gets the sum of the lanes' cotangents.
                return [o if m else nx.sum(o, 0) for o, m in zip(bwd_b(*a), arg_batched)]

            self._split = fwd_b, stage(pullback, bwd_b.in_avals)
        return self._split


def _custom_jvp_batch(values, dims, size, *, fun, rule, num_consts, in_struct, out_struct, name):
    batched = [d is not None for d in dims]
    args = [front(v, d) for v, d in zip(values, dims)]
    fun_b, extra = closed_batched(fun, batched, size)
    axes = [0 if m else None for m in batched[num_consts:]]

    def rule_b(primals, tangents):
        def lane_rule(p, t):
            return rule(tuple(tree.unflatten(in_struct, p)), tuple(tree.unflatten(in_struct, t)))
        return vmap(lane_rule, in_axes=(axes, axes))(list(tree.leaves(primals)), list(tree.leaves(tangents)))

    outs = bind(custom_jvp_p, *extra, *args, fun=fun_b, rule=rule_b,
                num_consts=len(extra) + num_consts, in_struct=in_struct, out_struct=out_struct, name=name)
    return outs, [0] * len(outs)


batch_rules[custom_vjp_p] = _custom_vjp_batch
batch_rules[custom_jvp_p] = _custom_jvp_batch
