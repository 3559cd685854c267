"""Staged control flow: scan, cond, while_loop, fori_loop.

Each body is staged once at abstract values; what it closes over is captured
and passed as explicit operands (so `grad` reaches closed-over weights).
Differentiation goes through the program-level transforms: the VJP of a scan
is a forward scan that also stacks each row's residuals, then a reverse scan of
the backward step.

This module defines the primitives and their abstract, dead-code, JVP, VJP and
batching rules. Running them belongs to the compiler: their plan steps
(rune/compiler/control_steps.py) and their eager evaluation through plans
(rune/compiler/eager.py, whose eval rules the compiler installs).
"""
import numbers

import numpy as np

from .. import tree
from .autodiff.jvp import jvp_program, jvp_rules
from .autodiff.vjp import differentiable, vjp_forward, vjp_program
from .batching import batch_program, batch_rules, closed_batched, front, loop_rule, materialize, to_front
from ..core.array import Array
from ..core.primitive import abstract_rules, primitive
from ..core.program import Eqn, dce_rules, prune, reorder
from ..core.stage_cache import staged
from ..core.staging import abstract, stage, stage_pytree
from ..core.trace import EVAL, Tracer, bind, current
from ..errors import (ArgumentError, DeviceMismatchError, DTypeError, NotDifferentiableError, ShapeError, TreeError, UsageError)
from ..core import dtypes as dt
from ..nx import ops as nx
from ..nx.creation import arange, zeros_like

scan_p = primitive("scan", multiple_results=True)
cond_p = primitive("cond", multiple_results=True)
while_p = primitive("while_loop", multiple_results=True)


def _check_carry(where, struct_in, struct_out, avals_in, avals_out, paths):
    if struct_in != struct_out:
        raise TreeError(f"{where}: the carry changed structure from {struct_in} to {struct_out}")
    for path, a, b in zip(paths, avals_in, avals_out):
        if a.shape != b.shape or a.dtype != b.dtype:
            fix = "" if a.dtype == b.dtype else (
                f" (an operand of another dtype promoted the {a.dtype.name} carry to {b.dtype.name}; "
                f"cast that operand, or the new value, to the carry's dtype, e.g. `new.astype(carry.dtype)`)")
            raise ShapeError(f"{where}: the carry leaf {path or '(root)'} went in as "
                             f"{a.describe()} and came out as {b.describe()}; a loop carry must "
                             f"keep its shape and dtype{fix}")
        if b.device is not None and a.device != b.device:
            raise DeviceMismatchError(f"{where}: the carry leaf {path or '(root)'} went in on "
                                      f"{a.device} and came out on {b.device}; place it back with "
                                      f"nx.place")


# ---------------------------------------------------------------- scan

def scan(f, init, xs, length=None, reverse=False, unroll=1):
    """Loop `f(carry, x) -> (carry, y)` over the leading axis of `xs`; returns (carry, ys).

    `unroll` (a positive int, or a bool: True for fully unrolled) is accepted
    as in JAX; it is a performance hint only and never changes results."""
    if not isinstance(unroll, bool) and not (isinstance(unroll, numbers.Integral) and unroll >= 1):
        raise ArgumentError(f"scan: unroll must be a positive int or a bool, got {unroll!r}")
    if length is not None and not (isinstance(length, numbers.Integral) and not isinstance(length, bool)
                                   and length >= 0):
        raise ArgumentError(f"scan: length must be a non-negative int, got {length!r}")
    x_leaves, xs_struct = nx.tree_operands(xs)
    raw_init, carry_struct = tree.flatten(init)
    # A Python scalar in the carry is placed with the rows it meets, not on the default device.
    near = x_leaves[0] if x_leaves else None
    init_leaves = [nx.constant_like(c, near) if near is not None else nx.operands([c])[0] for c in raw_init]
    lengths = {x.shape[0] for x in x_leaves if x.ndim}
    if any(x.ndim == 0 for x in x_leaves):
        raise ShapeError("scan: every leaf of xs needs a leading axis to scan over; got a scalar")
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise ShapeError(f"scan: xs leaves and length disagree on the number of rows: {sorted(lengths)}"
                         if lengths else "scan: no xs given; pass length=")
    n = lengths.pop()
    # A weak carry (a Python scalar) is staged weak, so it promotes as the scalar
    # would; if it comes back wider (0.0 + float64 rows) it is widened and the
    # step staged again, as JAX does. Anything else must not change.
    weak = tuple(type(c) in (bool, int, float) for c in raw_init)
    carry_avals = tuple(abstract(c).update(weak=w) for c, w in zip(init_leaves, weak))
    row_avals = tuple(x.aval.update(shape=x.shape[1:]).strong() for x in x_leaves)
    (body, consts, ys_struct, carry_dtypes), _ = staged(
        "scan", (f,), (carry_avals, row_avals, carry_struct, xs_struct),
        lambda: _stage_scan(f, carry_avals, row_avals, carry_struct, xs_struct, weak))
    init_leaves = [_strong(c, d) if c.weak or c.dtype != d else c for c, d in zip(init_leaves, carry_dtypes)]
    nc = len(carry_avals)
    outs = bind(scan_p, *consts, *init_leaves, *x_leaves, body=body, num_consts=len(consts),
                num_carry=nc, length=n, reverse=bool(reverse))
    return tree.unflatten(carry_struct, outs[:nc]), tree.unflatten(ys_struct, outs[nc:])


def _stage_scan(f, carry_avals, row_avals, carry_struct, xs_struct, weak):
    """(the step's program, its constants, the structure of its ys, the carry's
    dtypes, widened where a weak carry came back wider)."""
    carry_avals, row_avals, weak = list(carry_avals), list(row_avals), list(weak)
    paths = [p for p, _ in tree.flatten_with_paths(
        tree.unflatten(carry_struct, [0] * len(carry_avals)))[0]]
    widen = {}

    def step(*args):
        n = len(carry_avals)
        return f(tree.unflatten(carry_struct, args[:n]), tree.unflatten(xs_struct, args[n:]))

    def flatten(result):
        """The step's (carry, y) as carry leaves then y leaves, and y's structure."""
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TreeError("scan: the step function must return a pair (carry, y)")
        new_carry, y = result
        c_leaves, c_struct = nx.tree_operands(new_carry)
        for i, (c, a) in enumerate(zip(c_leaves, carry_avals)):
            if weak[i] and c.shape == a.shape and c.dtype != a.dtype and \
                    dt.promote([(a.dtype, True), (c.dtype, c.weak)])[0] == c.dtype:
                widen[i] = c.dtype
        if not widen:
            _check_carry("scan", carry_struct, c_struct, carry_avals, [c.aval for c in c_leaves], paths)
        c_leaves = [nx.astype(c, a.dtype) if c.weak else c for c, a in zip(c_leaves, carry_avals)]
        y_leaves, y_struct = nx.tree_operands(y)
        return c_leaves + y_leaves, y_struct

    program, ys_struct = stage_pytree(step, carry_avals + row_avals, flatten=flatten)
    if widen:
        carry_avals = [a.update(dtype=widen.get(i, a.dtype), weak=False) for i, a in enumerate(carry_avals)]
        weak = [False] * len(weak)
        widen.clear()
        program, ys_struct = stage_pytree(step, carry_avals + row_avals, flatten=flatten)
    body, consts = program.closed()
    return body, consts, ys_struct, [a.dtype for a in carry_avals]


def _scan_abstract(*avals, body, num_consts, num_carry, length, reverse):
    outs = body.out_avals
    return outs[:num_carry] + [a.update(shape=(length,) + a.shape) for a in outs[num_carry:]]


def _scan_dce(eqn, used):
    """Drop a scan's unused ys, and carries nothing needs (not used after the
    loop, not read by the body for what is kept); effects in the body stay."""
    p = eqn.params
    nc, nk = p["num_consts"], p["num_carry"]
    n_xs = len(eqn.inputs) - nc - nk
    carry = list(used[:nk])
    while True:
        body, kept = prune(p["body"], carry + list(used[nk:]), [False] * nc + carry + [False] * n_xs)
        grown = [a or b for a, b in zip(carry, kept[nc:nc + nk])]
        if grown == carry:
            break
        carry = grown
    params = dict(p, body=body, num_consts=sum(kept[:nc]), num_carry=sum(carry))
    return _pruned_eqn(eqn, kept, carry + list(used[nk:]), params)


abstract_rules[scan_p] = _scan_abstract
dce_rules[scan_p] = _scan_dce


def _pruned_eqn(eqn, kept_inputs, kept_outputs, params):
    """`eqn` with only the inputs and outputs marked kept, and new params."""
    return Eqn(eqn.prim, [a for a, k in zip(eqn.inputs, kept_inputs) if k],
               [v for v, k in zip(eqn.outputs, kept_outputs) if k], params)


def _carry_fixpoint(transform, mask, first, count):
    """Transform a loop body until the carries it marks (tangent can be nonzero,
    cotangent is tracked) stop growing: a carry is marked if it comes in marked
    or the body marks it on the way out. `transform(mask)` returns a result
    whose last element is the outputs' mask (carries first)."""
    mask = list(mask)
    while True:
        result = transform(mask)
        grown = [a or b for a, b in zip(mask[first:first + count], result[-1][:count])]
        if grown == mask[first:first + count]:
            return result, mask
        mask[first:first + count] = grown


def scan_flat(step, consts, init, xs, length, reverse):
    """Scan a flat step `step(*consts, *carry, *x_row) -> carry + ys` (internal, for rules)."""
    in_avals = [abstract(v).strong() for v in consts] + [abstract(v).strong() for v in init] + \
        [abstract(v).update(shape=abstract(v).shape[1:]).strong() for v in xs]
    body, extra = stage(step, in_avals).closed()
    return bind(scan_p, *extra, *consts, *init, *xs, body=body, num_consts=len(extra) + len(consts),
                num_carry=len(init), length=length, reverse=reverse)


def _scan_jvp(primals, tangents, *, body, num_consts, num_carry, length, reverse):
    nc, nk = num_consts, num_carry
    nonzero = [t is not None for t in tangents]
    (prog, out_mask), nonzero = _carry_fixpoint(lambda m: jvp_program(body, m), nonzero, nc, nk)
    # jvp_program orders inputs (primals, tangents): regroup as consts, carry, xs.
    n = len(primals)
    t_index = {i: n + k for k, i in enumerate(i for i in range(n) if nonzero[i])}
    groups = [range(0, nc), range(nc, nc + nk), range(nc + nk, n)]
    in_order = [j for g in groups for j in list(g) + [t_index[i] for i in g if nonzero[i]]]
    n_out = len(body.outvars)
    t_out = {i: n_out + k for k, i in enumerate(i for i in range(n_out) if out_mask[i])}
    out_groups = [range(0, nk), range(nk, n_out)]
    out_order = [j for g in out_groups for j in list(g) + [t_out[i] for i in g if out_mask[i]]]
    prog = reorder(prog, in_order, out_order)
    body2, consts2 = prog.closed()
    ts = [t if t is not None else zeros_like(abstract(p)) for p, t in zip(primals, tangents)]
    operands = list(consts2)
    for g in groups:
        operands += [primals[i] for i in g] + [ts[i] for i in g if nonzero[i]]
    outs = bind(scan_p, *operands, body=body2,
                num_consts=len(consts2) + nc + sum(nonzero[:nc]),
                num_carry=nk + sum(nonzero[nc:nc + nk]), length=length, reverse=reverse)
    it = iter(outs)
    primal_out, tangent_out = [], []
    for g in out_groups:
        ps = [next(it) for _ in g]
        tm = {i: next(it) for i in g if out_mask[i]}
        primal_out += ps
        tangent_out += [tm.get(i) for i in g]
    return primal_out, tangent_out


jvp_rules[scan_p] = _scan_jvp


def _scan_vjp_fwd(primals, tracked, *, body, num_consts, num_carry, length, reverse):
    nc, nk = num_consts, num_carry
    tracked = list(tracked)
    (fwd, bwd, num_res, out_tracked), tracked = _carry_fixpoint(
        lambda m: vjp_program(body, m), tracked, nc, nk)
    fwd_body, fwd_consts = fwd.closed()
    outs = bind(scan_p, *fwd_consts, *primals, body=fwd_body, num_consts=len(fwd_consts) + nc,
                num_carry=nk, length=length, reverse=reverse)
    n_out = len(body.outvars)
    res = dict(stacked=outs[n_out:], bwd=bwd, tracked=tracked, out_avals=body.out_avals)
    return outs[:n_out], res


def _scan_vjp_bwd(cts, res, tracked_in, *, body, num_consts, num_carry, length, reverse):
    nc, nk = num_consts, num_carry
    tracked, bwd, stacked = res["tracked"], res["bwd"], res["stacked"]
    avals = body.in_avals
    out_avals = res["out_avals"]
    cts = [c if c is not None else zeros_like(a if i < nk else a.update(shape=(length,) + a.shape))
           for i, (c, a) in enumerate(zip(cts, out_avals))]
    t_consts = [i for i in range(nc) if tracked[i]]
    t_carry = [i for i in range(nc, nc + nk) if tracked[i]]
    t_xs = [i for i in range(nc + nk, len(avals)) if tracked[i]]
    n_res = len(stacked)
    carry_zeros = [zeros_like(out_avals[i]) for i in range(nk)]

    def step(*args):
        # carry: (const cts so far, carry cts); xs: (residual row, ys cts row)
        acc = list(args[:len(t_consts)])
        ct_carry_t = args[len(t_consts):len(t_consts) + len(t_carry)]
        rest = args[len(t_consts) + len(t_carry):]
        res_row, ct_y = rest[:n_res], rest[n_res:]
        ct_carry = list(carry_zeros)
        for k, i in enumerate(t_carry):
            ct_carry[i - nc] = ct_carry_t[k]
        in_cts = bwd(*res_row, *ct_carry, *ct_y)
        got = dict(zip([i for i in range(len(avals)) if tracked[i]], in_cts))
        new_acc = [nx.add(a, got[i]) for a, i in zip(acc, t_consts)]
        return new_acc + [got[i] for i in t_carry] + [got[i] for i in t_xs]

    init = [zeros_like(avals[i]) for i in t_consts] + [cts[i - nc] for i in t_carry]
    outs = scan_flat(step, [], init, list(stacked) + list(cts[nk:]), length, not reverse)
    got = dict(zip(t_consts + t_carry + t_xs, outs))
    return [got.get(i) if tracked_in[i] else None for i in range(len(avals))]


vjp_forward[scan_p] = (_scan_vjp_fwd, _scan_vjp_bwd)


# ---------------------------------------------------------------- cond

def cond(pred, true_fn, false_fn, *operands):
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)`; both are staged."""
    return _switch(_pred(pred), (false_fn, true_fn), operands)


def _pred(pred):
    """The predicate as a boolean scalar: any nonzero integer is true, as in Python."""
    p = pred if hasattr(pred, "aval") else nx.asarray(pred)
    if p.shape != ():
        raise ShapeError(f"cond: the predicate must be a scalar, got shape {p.shape}")
    if p.dtype.kind not in "biu":
        raise DTypeError(f"cond: the predicate must be a boolean or integer scalar, got "
                         f"{p.dtype.name}; compare it explicitly (e.g. x > 0)")
    return nx.not_equal(p, 0) if p.dtype.kind != "b" else p


def switch(index, branches, *operands):
    """`branches[index](*operands)`, index clamped into range; every branch is staged."""
    if not isinstance(branches, (list, tuple)) or not branches:
        raise ArgumentError(f"switch: branches must be a non-empty list or tuple of functions, "
                            f"got {branches!r}")
    for k, fn in enumerate(branches):
        if not callable(fn):
            raise UsageError(f"switch: branch {k} must be a function, got {type(fn).__name__}")
    index = nx.asarray(index) if not hasattr(index, "aval") else index
    if index.shape != () or index.dtype.kind not in "iub":
        raise ShapeError(f"switch: the index must be an integer scalar, got {index.aval.describe()}")
    return _switch(index, branches, operands)


def _switch(index, branches, operands):
    """`switch` on a checked integer or boolean scalar `index`."""
    leaves, in_struct = nx.tree_operands(operands)
    avals = tuple(abstract(x) for x in leaves)
    (programs, consts, out_struct), _ = staged(
        "switch", branches, (avals, in_struct), lambda: _stage_branches(branches, avals, in_struct))
    if current() is not EVAL:
        index = nx.clip(nx.astype(index, np.int32), 0, len(branches) - 1)
    # Eagerly the index is bound as it is: the eval rule reads and clamps it
    # (rune/compiler/eager.py), which costs less than two index ops.
    outs = bind(cond_p, index, *consts, *leaves, branches=programs, num_consts=len(consts))
    return tree.unflatten(out_struct, outs)


def _stage_branches(branches, avals, in_struct):
    """(each branch staged taking every branch's constants, those constants,
    the result's structure); every branch must return the same avals."""
    programs, consts, structs = [], [], []
    for fn in branches:
        prog, struct = stage_pytree(fn, list(avals), in_struct, flatten=nx.tree_operands)
        prog, c = prog.closed()
        programs.append(prog)
        consts.append(c)
        structs.append(struct)
    paths = [p for p, _ in tree.flatten_with_paths(
        tree.unflatten(structs[0], [0] * structs[0].num_leaves))[0]]
    for k, (s, p) in enumerate(zip(structs[1:], programs[1:]), start=1):
        if s != structs[0]:
            raise TreeError(f"cond: branch 0 returns {structs[0]} but branch {k} returns {s}")
        for path, a, b in zip(paths, programs[0].out_avals, p.out_avals):
            if a.device != b.device and a.device is not None and b.device is not None:
                raise DeviceMismatchError(f"cond: output {path or '(root)'} lies on {a.device} in "
                                          f"branch 0 but on {b.device} in branch {k}")
            if a.shape != b.shape or a.dtype != b.dtype:
                raise ShapeError(f"cond: output {path or '(root)'} is {a.describe()} in branch 0 but "
                                 f"{b.describe()} in branch {k}; every branch must return the same "
                                 f"shapes and dtypes")
    shared, all_consts = _share_consts(programs, consts)
    return tuple(shared), all_consts, structs[0]


def _share_consts(programs, consts):
    """Branch programs that all take every branch's constants, and those constants."""
    all_consts = [c for cs in consts for c in cs]
    out, offset = [], 0
    for prog, cs in zip(programs, consts):
        in_avals = [abstract(c).strong() for c in all_consts] + prog.in_avals[len(cs):]

        def take(*args, prog=prog, lo=offset, k=len(cs)):
            return prog(*args[lo:lo + k], *args[len(all_consts):])

        out.append(stage(take, in_avals))
        offset += len(cs)
    return out, all_consts


def _cond_abstract(index, *avals, branches, num_consts):
    return [a.strong() for a in branches[0].out_avals]


def _cond_dce(eqn, used):
    """Drop the outputs nobody reads from every branch, and the operands no branch reads."""
    p = eqn.params
    n = len(eqn.inputs) - 1
    kept = [False] * n
    for b in p["branches"]:
        kept = [a or b for a, b in zip(kept, prune(b, used, kept)[1])]
    branches = tuple(prune(b, used, kept)[0] for b in p["branches"])
    params = dict(p, branches=branches, num_consts=sum(kept[:p["num_consts"]]))
    return _pruned_eqn(eqn, [True] + kept, used, params)


abstract_rules[cond_p] = _cond_abstract
dce_rules[cond_p] = _cond_dce


def _cond_jvp(primals, tangents, *, branches, num_consts):
    index, args = primals[0], primals[1:]
    nonzero = [t is not None for t in tangents[1:]]
    progs = []
    for b in branches:
        prog, out_mask = jvp_program(b, nonzero)
        progs.append(_instantiate_tangents(prog, out_mask, b.out_avals))
    ts = [t for t in tangents[1:] if t is not None]
    outs = bind(cond_p, index, *args, *ts, branches=tuple(progs), num_consts=num_consts)
    n = len(branches[0].outvars)
    touts = [t if differentiable(a) else None for t, a in zip(outs[n:], branches[0].out_avals)]
    return outs[:n], touts


def _instantiate_tangents(prog, out_mask, out_avals):
    """`prog` changed to output one tangent per output (zeros where none can flow)."""
    n = len(out_avals)

    def full(*args):
        outs = prog(*args)
        given = iter(outs[n:])
        return list(outs[:n]) + [next(given) if m else zeros_like(a.strong())
                                 for m, a in zip(out_mask, out_avals)]

    return stage(full, prog.in_avals)


jvp_rules[cond_p] = _cond_jvp


def _cond_vjp_fwd(primals, tracked, *, branches, num_consts):
    index, args = primals[0], primals[1:]
    mask = list(tracked[1:])
    splits = [vjp_program(b, mask) for b in branches]
    res_avals = [[v.aval for v in f.outvars[len(b.outvars):]] for (f, _, _, _), b in zip(splits, branches)]
    n = len(branches[0].outvars)
    fwds, bwds = [], []
    offsets = np.cumsum([0] + [len(r) for r in res_avals])
    total = int(offsets[-1])
    all_res_avals = [a for r in res_avals for a in r]
    for k, (f, b, _, _) in enumerate(splits):
        fwds.append(_widen_residuals(f, n, all_res_avals, int(offsets[k])))
        bwds.append(_narrow_residuals(b, all_res_avals, int(offsets[k]), len(res_avals[k])))
    fwd_progs, consts = zip(*[p.closed() for p in fwds])
    fwd_shared, extra = _share_consts(list(fwd_progs), list(consts))
    outs = bind(cond_p, index, *extra, *args, branches=tuple(fwd_shared), num_consts=len(extra))
    return outs[:n], dict(index=index, res=outs[n:n + total], bwds=bwds, tracked=mask,
                          out_avals=branches[0].out_avals)


def _widen_residuals(fwd, n, all_res_avals, offset):
    """Forward branch that outputs every branch's residual slots (zeros for the others')."""
    def wide(*args):
        outs = fwd(*args)
        mine = outs[n:]
        res = [zeros_like(a) for a in all_res_avals]
        res[offset:offset + len(mine)] = mine
        return list(outs[:n]) + res
    return stage(wide, fwd.in_avals)


def _narrow_residuals(bwd, all_res_avals, offset, count):
    n_all = len(all_res_avals)

    def narrow(*args):
        return bwd(*args[offset:offset + count], *args[n_all:])
    return stage(narrow, all_res_avals + bwd.in_avals[count:])


def _cond_vjp_bwd(cts, res, tracked_in, *, branches, num_consts):
    out_avals = res["out_avals"]
    cts = [c if c is not None else zeros_like(a.strong()) for c, a in zip(cts, out_avals)]
    progs, consts = zip(*[b.closed() for b in res["bwds"]])
    shared, extra = _share_consts(list(progs), list(consts))
    in_cts = bind(cond_p, res["index"], *extra, *res["res"], *cts, branches=tuple(shared),
                  num_consts=len(extra))
    it = iter(in_cts)
    return [None] + [next(it) if t else None for t in res["tracked"]]


vjp_forward[cond_p] = (_cond_vjp_fwd, _cond_vjp_bwd)


# ---------------------------------------------------------------- while

def while_loop(cond_fn, body_fn, init):
    """Repeat `body_fn` on the carry while `cond_fn(carry)` holds."""
    leaves, struct = nx.tree_operands(init)
    avals = tuple(abstract(x).strong() for x in leaves)
    (cond_prog, cc, body_prog, bc), _ = staged(
        "while_loop", (cond_fn, body_fn), (avals, struct), lambda: _stage_while(cond_fn, body_fn, avals, struct))
    leaves = [_strong(x, a.dtype) if x.weak else x for x, a in zip(leaves, avals)]
    outs = bind(while_p, *cc, *bc, *leaves, cond=cond_prog, body=body_prog,
                num_cond_consts=len(cc), num_body_consts=len(bc))
    return tree.unflatten(struct, outs)


def _strong(x, dtype):
    """The weak `x` (a Python scalar made an array) as a strong array of `dtype`."""
    if type(x) is Array and x.dtype == dtype:
        return Array(x._raw, x.device, False)  # the same values: no cast to dispatch
    return nx.astype(x, dtype)


def _stage_while(cond_fn, body_fn, avals, struct):
    """(cond program, its constants, body program, its constants) on carries of `avals`."""
    avals = list(avals)
    paths = [p for p, _ in tree.flatten_with_paths(tree.unflatten(struct, [0] * len(avals)))[0]]

    def flat_cond(*xs):
        p = cond_fn(tree.unflatten(struct, xs))
        p = p if hasattr(p, "aval") else nx.asarray(p)
        if p.shape != ():
            raise ShapeError(f"while_loop: cond_fn must return a boolean scalar, got {p.aval.describe()}")
        if p.dtype != np.bool_:  # as in JAX: a number is not silently taken as a truth value
            raise DTypeError(f"while_loop: cond_fn must return a boolean scalar, got "
                             f"{p.aval.describe()}; compare explicitly (e.g. c > 0)")
        return [nx.astype(p, np.bool_)]  # a weak Python bool becomes a strong one

    def flat_body(*xs):
        out_leaves, s = nx.tree_operands(body_fn(tree.unflatten(struct, xs)))
        _check_carry("while_loop", struct, s, avals, [o.aval for o in out_leaves], paths)
        return [nx.astype(o, a.dtype) if o.weak else o for o, a in zip(out_leaves, avals)]

    cond_prog, cc = stage(flat_cond, avals).closed()
    body_prog, bc = stage(flat_body, avals).closed()
    return cond_prog, cc, body_prog, bc


def _while_abstract(*avals, cond, body, num_cond_consts, num_body_consts):
    return body.out_avals


def _while_dce(eqn, used):
    """Drop carries nothing needs: not used after the loop, not read by the
    predicate, not read by the body for a needed carry or an effect."""
    p = eqn.params
    ncc, nbc = p["num_cond_consts"], p["num_body_consts"]
    _, cond_kept = prune(p["cond"], [True], [False] * (ncc + len(used)))
    needed = [u or k for u, k in zip(used, cond_kept[ncc:])]
    while True:
        body, body_kept = prune(p["body"], needed, [False] * nbc + needed)
        grown = [a or b for a, b in zip(needed, body_kept[nbc:])]
        if grown == needed:
            break
        needed = grown
    cond, cond_kept = prune(p["cond"], [True], [False] * ncc + needed)
    kept = cond_kept[:ncc] + body_kept[:nbc] + needed
    params = dict(p, cond=cond, body=body, num_cond_consts=sum(cond_kept[:ncc]),
                  num_body_consts=sum(body_kept[:nbc]))
    return _pruned_eqn(eqn, kept, needed, params)


abstract_rules[while_p] = _while_abstract
dce_rules[while_p] = _while_dce


def _while_jvp(primals, tangents, *, cond, body, num_cond_consts, num_body_consts):
    ncc, nbc = num_cond_consts, num_body_consts
    nk = len(primals) - ncc - nbc
    body_nonzero = [t is not None for t in tangents[ncc:]]
    (prog, out_mask), body_nonzero = _carry_fixpoint(lambda m: jvp_program(body, m), body_nonzero,
                                                     nbc, nk)
    carry_mask = body_nonzero[nbc:]
    n_ct = sum(body_nonzero[:nbc])
    # body': (consts, const tangents, carry, carry tangents) in that order
    n = nbc + nk
    t_index = {i: n + k for k, i in enumerate(i for i in range(n) if body_nonzero[i])}
    in_order = list(range(nbc)) + [t_index[i] for i in range(nbc) if body_nonzero[i]] + \
        list(range(nbc, n)) + [t_index[i] for i in range(nbc, n) if body_nonzero[i]]
    body2 = reorder(prog, in_order)
    body2, bconsts = body2.closed()
    carry_avals = body.out_avals
    tangent_avals = [a for a, m in zip(carry_avals, carry_mask) if m]

    def cond2(*args):
        return cond(*args[:ncc + nk])
    cond_prog, cconsts = stage(cond2, cond.in_avals + tangent_avals).closed()
    cts = [t for t in tangents[ncc:ncc + nbc] if t is not None]
    carry = list(primals[ncc + nbc:])
    carry_t = [t if t is not None else zeros_like(abstract(p).strong())
               for p, t, m in zip(carry, tangents[ncc + nbc:], carry_mask) if m]
    outs = bind(while_p, *cconsts, *primals[:ncc], *bconsts, *primals[ncc:ncc + nbc], *cts,
                *carry, *carry_t, cond=cond_prog, body=body2,
                num_cond_consts=len(cconsts) + ncc, num_body_consts=len(bconsts) + nbc + n_ct)
    it = iter(outs[nk:])
    return outs[:nk], [next(it) if m else None for m in carry_mask]


jvp_rules[while_p] = _while_jvp


def _while_vjp_fwd(primals, tracked, **params):
    raise NotDifferentiableError(
        "reverse-mode differentiation of while_loop is not supported: its trip count is only known "
        "at run time. Use rune.scan or rune.fori_loop with static bounds, or forward mode (jvp)")


vjp_forward[while_p] = (_while_vjp_fwd, None)


def fori_loop(lower, upper, body_fn, init):
    """`body_fn(i, carry)` for i in [lower, upper). Static bounds lower to scan (differentiable)."""
    for what, bound in (("lower", lower), ("upper", upper)):
        if not (bound.dtype.kind in "iu" and bound.ndim == 0 if hasattr(bound, "dtype") else
                isinstance(bound, numbers.Integral) and not isinstance(bound, bool)):
            got = bound.aval.describe() if hasattr(bound, "aval") else f"{type(bound).__name__} {bound!r}"
            raise DTypeError(f"fori_loop: {what} must be an integer scalar, got {got}")
    static = not isinstance(lower, Tracer) and not isinstance(upper, Tracer)

    def body(i, carry):
        out = body_fn(i, carry)
        _check_index_promotion(carry, out)
        return out
    if static:
        lo, hi = int(lower), int(upper)
        carry, _ = scan(lambda c, i: (body(i, c), None), init,
                        arange(lo, max(hi, lo), dtype=np.int32))
        return carry
    lower = nx.astype(lower, np.int32)
    upper = nx.astype(upper, np.int32)
    _, out = while_loop(lambda s: nx.less(s[0], upper),
                        lambda s: (nx.add(s[0], 1), body(s[0], s[1])), (lower, init))
    return out


def _check_index_promotion(carry, out):
    """The error for the commonest way a fori_loop carry changes dtype: the int32
    index `i` meeting a float32 (or narrower) carry, which NumPy's rules (unlike
    JAX's) widen to float64. Any other change is left to the loop's own check."""
    leaves_in, struct_in = tree.flatten_with_paths(carry)
    leaves_out, struct_out = tree.flatten(out)
    if struct_in != struct_out:
        return
    for (path, a), b in zip(leaves_in, leaves_out):
        if not (hasattr(a, "aval") and hasattr(b, "aval")) or a.weak or a.shape != b.shape:
            continue
        if a.dtype != b.dtype and dt.promote([(a.dtype, False), (dt.int32, False)])[0] == b.dtype:
            raise ShapeError(  # as every other carry that changes (see _check_carry)
                f"fori_loop: the body returned {b.dtype.name} for the {a.dtype.name} carry leaf "
                f"{path or '(root)'}: the loop index `i` (int32) promoted it ({a.dtype.name} with int32 "
                f"gives {b.dtype.name} under NumPy's rules). Cast the index to the carry's dtype, e.g. "
                f"`v * 1.1 + i.astype(v.dtype)`, so the carry stays {a.dtype.name}")


# ---------------------------------------------------------------- batching (vmap)

def _scan_batch(values, dims, size, *, body, num_consts, num_carry, length, reverse):
    nc, nk = num_consts, num_carry
    # Every carry is batched (simplest fixpoint); xs keep the scanned axis first.
    mask = [d is not None for d in dims[:nc]] + [True] * nk + [d is not None for d in dims[nc + nk:]]
    consts = [front(v, d) for v, d in zip(values[:nc], dims[:nc])]
    init = [materialize(v, d, size) for v, d in zip(values[nc:nc + nk], dims[nc:nc + nk])]
    xs = [v if d is None else nx.moveaxis(v, d, 1) for v, d in zip(values[nc + nk:], dims[nc + nk:])]
    body_b, extra = closed_batched(body, mask, size)
    outs = bind(scan_p, *extra, *consts, *init, *xs, body=body_b, num_consts=len(extra) + nc,
                num_carry=nk, length=length, reverse=reverse)
    return outs, [0] * nk + [1] * (len(outs) - nk)


def _cond_batch(values, dims, size, *, branches, num_consts):
    index, args = values[0], values[1:]
    mask = [d is not None for d in dims[1:]]
    args = [front(v, d) for v, d in zip(args, dims[1:])]
    batched = [batch_program(b, mask, size) for b in branches]
    if dims[0] is None:
        progs, consts = zip(*[b.closed() for b in batched])
        shared, extra = _share_consts(list(progs), list(consts))
        outs = bind(cond_p, index, *extra, *args, branches=tuple(shared), num_consts=len(extra))
        return outs, [0] * len(outs)
    if any(b.effectful for b in branches):
        # Running every branch for every lane would run callbacks the lane never asked for.
        return loop_rule(cond_p, values, dims, size, branches=branches, num_consts=num_consts)
    # A batched predicate: every branch runs, and each lane selects its own result.
    index = to_front(index, dims[0])
    results = [b(*args) for b in batched]
    chosen = results[0]
    for k, outs in enumerate(results[1:], start=1):
        chosen = [nx.where(nx.reshape(nx.equal(index, k), (size,) + (1,) * (o.ndim - 1)), o, c)
                  for o, c in zip(outs, chosen)]
    return chosen, [0] * len(chosen)


def _while_batch(values, dims, size, *, cond, body, num_cond_consts, num_body_consts):
    if cond.effectful or body.effectful:
        # Finished lanes keep stepping in the batched loop; their callbacks must not run.
        return loop_rule(while_p, values, dims, size, cond=cond, body=body,
                          num_cond_consts=num_cond_consts, num_body_consts=num_body_consts)
    ncc, nbc = num_cond_consts, num_body_consts
    fronted = [front(v, d) for v, d in zip(values, dims)]
    cc, bc = fronted[:ncc], fronted[ncc:ncc + nbc]
    carry = [materialize(v, d, size) for v, d in zip(values[ncc + nbc:], dims[ncc + nbc:])]
    nk = len(carry)
    cond_b = batch_program(cond, [d is not None for d in dims[:ncc]] + [True] * nk, size)
    body_b = batch_program(body, [d is not None for d in dims[ncc:ncc + nbc]] + [True] * nk, size)
    carry_avals = [c.aval for c in carry]

    def any_lane(*args):
        return [nx.any(cond_b(*args)[0])]

    def step(*args):
        # Lanes whose condition no longer holds keep their carry: they are done.
        ccv, bcv, old = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
        live = cond_b(*ccv, *old)[0]
        new = body_b(*bcv, *old)
        return [nx.where(nx.reshape(live, (size,) + (1,) * (n.ndim - 1)), n, o) for n, o in zip(new, old)]

    cond2, c_extra = stage(any_lane, [a for a in cond_b.in_avals]).closed()
    body2, b_extra = stage(step, [x.aval for x in cc] + [x.aval for x in bc] + carry_avals).closed()
    outs = bind(while_p, *c_extra, *cc, *b_extra, *cc, *bc, *carry, cond=cond2, body=body2,
                num_cond_consts=len(c_extra) + ncc, num_body_consts=len(b_extra) + ncc + nbc)
    return outs, [0] * nk


batch_rules[scan_p] = _scan_batch
batch_rules[cond_p] = _cond_batch
batch_rules[while_p] = _while_batch
