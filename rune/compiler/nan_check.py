"""NaN debugging: a jitted call whose result holds a NaN is run again op by op,
and the first primitive that made a NaN from operands without one is reported
with the user's line that bound it (JAX's jax_debug_nans).

The compiled call runs as usual; only when one of its results holds a NaN is
the function called again on the same arguments under `NanInterpreter`, which
runs every primitive eagerly and checks its results. Nested jitted functions
are traced through in that run (a jitted function is plain code under any
interpreter), and the bodies of loops and branches run under it too, so their
primitives are checked one by one; the line reported is then the user's call
of the loop. Effects (callbacks, prints) run again in the re-run.

Switched by RUNE_DEBUG_NANS=1 at import or `rune.debug.nans(True)`; while it
is on, `SWITCH.on` sends every jitted call through `checked_call`
(rune/compiler/api.py), and one open context is counted (rune.base.contexts)
so that the hot written calls step aside for it.
"""
import threading

import numpy as np

from .. import tree
from ..base import config, contexts
from ..base.tracebacks import user_source
from ..core.program import eval_program
from ..core.trace import EVAL, Interpreter, using
from ..errors import RuneError
from ..transforms.autodiff.api import checkpoint_p
from ..transforms.autodiff.custom import custom_jvp_p, custom_vjp_p
from ..transforms.control import cond_p, scan_p, while_p


class NanError(RuneError, FloatingPointError):
    """A NaN found by rune.debug.nans: the primitive that made it and the user's line."""


class _Switch(threading.local):
    """`on`: the process-wide setting (the class attribute); a thread running a
    checked call sets its own to False meanwhile, so that call runs plainly."""
    on = False


SWITCH = _Switch()


def enable(on):
    """Turn NaN checking on or off for the process; returns the previous setting."""
    before = _Switch.on
    if bool(on) != before:
        _Switch.on = bool(on)
        (contexts.opened if on else contexts.closed)()
    return before


def _has_nan(x):
    dtype = getattr(x, "dtype", None)
    if dtype is None or np.dtype(dtype).kind not in "fc":
        return False
    return bool(np.isnan(np.asarray(x)).any())


def _nan_leaves(values):
    return [k for k, x in enumerate(values) if _has_nan(x)]


def checked_call(jitted, name, args, kwargs):
    """`jitted(*args, **kwargs)`, and when its result holds a NaN, the NanError of
    the op-by-op re-run."""
    SWITCH.on = False
    try:
        out = jitted(*args, **kwargs)
    finally:
        del SWITCH.on
    leaves, _ = tree.flatten(out)
    if not _nan_leaves(leaves):
        return out
    rerun(jitted, name, args, kwargs)
    return out


def rerun(f, name, args, kwargs):
    """Call `f` op by op (a jitted function is traced through, placed as it places its
    values); raise NanError at the first primitive making a NaN, or one naming the
    arguments that held NaNs when no primitive did."""
    with using(NanInterpreter(name)):
        f(*args, **kwargs)
    paths = [path for path, x in tree.flatten_with_paths((args, kwargs))[0] if _has_nan(x)]
    where = (f"; the NaN came in through the argument{'s' if len(paths) > 1 else ''} "
             f"{', '.join(_argument(p) for p in paths)}" if paths else "")
    raise NanError(f"{name} returned a NaN, but running it op by op made none from operands without one"
                   f"{where}")


def _argument(path):
    """A path of (args, kwargs) as the user wrote the call: args[0]..., kwargs['x']..."""
    return ("args" if path.startswith("[0]") else "kwargs") + path[3:]


class NanInterpreter(Interpreter):
    """Runs each primitive eagerly (on the eval interpreter) and raises NanError at
    the first whose results hold a NaN where its operands held none."""

    def __init__(self, name):
        self.parent = EVAL
        self.name = name
        self.within = []   # the loops and branches whose bodies are being re-run, outermost first

    def process(self, prim, args, params):
        out = EVAL.process(prim, args, params)
        results = out if prim.multiple_results else [out]
        if _nan_leaves(results) and not _nan_leaves(args):
            inside = _BODIES.get(prim)
            if inside is not None:   # a loop or branch: its body again, op by op, names the op inside
                self.within.append(prim.name)
                inside(list(args), **params)
                self.within.pop()
            source = user_source()
            at = f"\n  at {source}" if source is not None else ""
            body = "".join(f" in the body of {name}," for name in reversed(self.within))
            raise NanError(f"{prim.name} made a NaN from operands without one,{body} in {self.name} "
                           f"(re-run op by op because its result held a NaN){at}")
        return out


# The bodies of the primitives that hold programs, evaluated equation by equation
# (under the current interpreter: a NanInterpreter checks each). Only reached for
# an op already known to make a NaN, so speed does not matter.

def _scan_rows(args, *, body, num_consts, num_carry, length, reverse):
    consts, carry, xs = args[:num_consts], args[num_consts:num_consts + num_carry], args[num_consts + num_carry:]
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        carry = eval_program(body, consts + carry + [x[i] for x in xs])[:num_carry]


def _while_steps(args, *, cond, body, num_cond_consts, num_body_consts):
    nc, nb = num_cond_consts, num_body_consts
    cc, bc, carry = args[:nc], args[nc:nc + nb], args[nc + nb:]
    while bool(eval_program(cond, cc + carry)[0]):
        carry = eval_program(body, bc + carry)


def _branch(args, *, branches, num_consts):
    k = min(max(int(args[0]), 0), len(branches) - 1)
    eval_program(branches[k], args[1:])


_BODIES = {
    scan_p: _scan_rows,
    while_p: _while_steps,
    cond_p: _branch,
    checkpoint_p: lambda args, program, **_: eval_program(program, args),
    custom_vjp_p: lambda args, fwd, **_: eval_program(fwd, args),
    custom_jvp_p: lambda args, fun, **_: eval_program(fun, args),
}


if config.debug_nans():
    enable(True)
