"""Eager evaluation of the primitives whose bodies are programs, through plans.

Scan, while, cond, checkpoints and custom rules evaluate their bodies on
concrete arrays with the evaluator jit uses: a plan (rune/compiler/plan.py).
Their eval rules live here, keyed by primitive, and `install_eval_rules()` (run
when the compiler package is imported) puts them in the core's `eval_rules`
table; the transformations that define these primitives import nothing of
the compiler.

Each plan is built for the default device the call runs under (where unplaced
values lie) and kept with its program by the compiler (`plan_for`). A body
staged for one call and never run again (a fresh branch, a custom rule's
forward) runs once op by op, without a kept plan: compiling (or loading)
kernels for one run costs more than it saves. The second run of the same
program (a branch reused from the staged cache, rune/core/stage_cache.py)
builds its plan and keeps it. A loop keeps its `ScanLoop` / `WhileLoop` with
its body, so the function written from a body of NumPy stretches is reused
by every later call.
"""
from ..transforms.autodiff.api import checkpoint_p
from ..transforms.autodiff.custom import custom_jvp_p, custom_vjp_p
from ..transforms.control import cond_p, scan_p, while_p
from ..core.primitive import abstract_rules, eval_rules
from ..core.devices import _default  # the default device stack: read without a call
from ..nx.buffers import wrap_raws
from .control_steps import ScanLoop, WhileLoop
from .plan import KEPT, Plan, keep_with, kept_with, plan_for
from .steps import device_of

_RAN_ONCE = "ran once"


def run_program(program, args):
    """Evaluate `program` on concrete Arrays `args` (constants first) through a plan
    for the default device: op by op on its first run, through its kept plan after."""
    device = _default.stack[-1]
    found = KEPT.get(id(program))
    plan = None if found is None else found.get((None, device.name))   # as `plan_for` keys it
    if plan is None:
        if kept_with(program, (_RAN_ONCE, device.name)) is None:
            keep_with(program, (_RAN_ONCE, device.name), True)
            plan = Plan(program, None, device, compiled=False)
        else:
            plan = plan_for(program, None, device)
    return wrap_raws(plan.run([a._raw for a in args]), plan.out_avals)


def _scan_eval(*args, body, num_consts, num_carry, length, reverse):
    device = _default.stack[-1]
    key = ("scan", device.name, num_consts, num_carry)
    loop = kept_with(body, key)
    if loop is None:
        loop = keep_with(body, key, ScanLoop(plan_for(body, None, device), num_consts, num_carry, device))
    out_avals = abstract_rules[scan_p](body=body, num_consts=num_consts, num_carry=num_carry, length=length,
                                       reverse=reverse)
    return wrap_raws(loop.run([a._raw for a in args], length, reverse, out_avals), out_avals)


def _while_eval(*args, cond, body, num_cond_consts, num_body_consts):
    device = _default.stack[-1]
    key = ("while", device.name, body, num_cond_consts, num_body_consts)
    loop = kept_with(cond, key)
    if loop is None:
        loop = keep_with(cond, key, WhileLoop(plan_for(cond, None, device), plan_for(body, None, device),
                                         num_cond_consts, num_body_consts,
                                         device_of(cond.out_avals[0], device)))
    return wrap_raws(loop.run([a._raw for a in args]), body.out_avals)


def _cond_eval(index, *args, branches, num_consts):
    # The index is read here and clamped (an eager `switch` binds it unclamped).
    k = int(index.read_scalar())
    k = 0 if k < 0 else min(k, len(branches) - 1)
    return run_program(branches[k], args)


EVAL_RULES = {
    scan_p: _scan_eval,
    while_p: _while_eval,
    cond_p: _cond_eval,
    checkpoint_p: lambda *args, program: run_program(program, args),
    custom_vjp_p: lambda *args, fwd, **_: run_program(fwd, args),
    custom_jvp_p: lambda *args, fun, **_: run_program(fun, args),
}


def install_eval_rules():
    """Evaluate the primitives of `EVAL_RULES` eagerly through plans."""
    eval_rules.update(EVAL_RULES)
