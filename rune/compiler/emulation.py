"""`jitted.emulate(*args, target="cuda")`: a program's CUDA kernels run on the host.

The plan is the one a CUDA device would run (`jitted.plan(..., target="cuda")`,
rune/compiler/target.py: the same fusion, the CUDA dialect's kernels with the
launch shapes of the target), its CUDA stretches built by the host emulation of
CUDA (rune/backends/cuda/emulator) and run launch by launch; every other step
(library calls, loops and branches, callbacks) runs as on the host, each loop or
branch body's plan through this runner too. A user's CI without a GPU checks its
model's GPU kernels this way: the kernels are the ones a GPU runs, and where
their arithmetic is rune's own (basic IEEE operations, rune's reductions' fixed
order: docs/design.md, "One result per program") they give the GPU's bits.
Functions a kernel calls from CUDA's math library run on the host's libm here.
"""
import contextlib

import numpy as np

from ..backends import emulator_for
from .plan import Plan
from .target import TargetStretch, dialect


def stretches(plan):
    """The target stretches of `plan`, its loop and branch bodies' included."""
    out = []
    for step in plan.steps:
        if type(step) is TargetStretch:
            out.append(step)
        for sub in step.plans:
            out += stretches(sub)
    return out


def rerender(plan, kernel_dialect):
    """Render `plan`'s IR kernels (its bodies' included) again with `kernel_dialect` (e.g. small
    blocks so that small inputs cross blocks); returns {id(stretch): (unit text, [kernels])}."""
    return {id(s): kernel_dialect.render_unit(s.unit.kernels)[1:] for s in stretches(plan)}


def as_rendered(plan):
    """{id(stretch): (unit text, [kernels])} as the plan's own dialect rendered them."""
    return {id(s): (s.text, list(s.kernels)) for s in stretches(plan)}


def run_unit(library, unit, kernels, env, grid=None, block=None):
    """Run one fused unit's kernels over `env` (slot -> array) as a launcher would:
    inputs as the stretch passes them (contiguous views kept), fresh outputs and
    intermediates, scratch per kernel, the launches in order. `grid`/`block` override
    the recorded launch shapes (None: as recorded)."""
    buffers = [None] * len(unit.buffers)
    for b, s in unit.inputs:
        buffers[b.index] = library.upload(np.asarray(env[s], dtype=b.dtype))
    for b in unit.buffers:
        if buffers[b.index] is None:
            buffers[b.index] = library.alloc(b.dtype, b.shape)
    for k in kernels:
        scratch = [library.alloc(dt, (n,)) for dt, n in k.scratch]
        args = [buffers[i] if kind == "buffer" else scratch[i] for kind, i in k.args]
        for ln in k.launches:
            library.launch(ln, grid or ln.grid, block or ln.block, args)
    for b, s in unit.outputs:
        env[s] = library.download(buffers[b.index], b.dtype, b.shape)


def run_plan(plan, args, library, rendered):
    """Evaluate a target plan on host arrays: its target stretches through `library`
    (emulated, or a GPU's), the rest as on the host. A loop or branch step runs as the
    host runs it, each body's plan through this runner (its rows and carries passed as
    the host passes them: a scan's rows are views)."""
    env = list(plan.template)
    for s, a in zip(plan.in_slots, args):
        env[s] = np.asarray(a)
    for step in plan.steps:
        if type(step) is TargetStretch:
            text, kernels = rendered[id(step)]
            run_unit(library, step.unit, kernels, env)
        else:
            with _bodies_through(step, library, rendered):
                step.run(env)
    return [np.asarray(env[s]) for s in plan.out_slots]


@contextlib.contextmanager
def _bodies_through(step, library, rendered):
    """While `step` runs, each of its nested plans runs through `run_plan` (the step calls
    `plan.run`, shadowed here on the plan object and restored after)."""
    subs = list(step.plans)
    for sub in subs:
        sub.run = lambda args, sub=sub: run_plan(sub, args, library, rendered)
    try:
        yield
    finally:
        for sub in subs:
            del sub.run


def emulate(plan, host_args, target):
    """The outputs (NumPy arrays) of the target plan `plan` on `host_args`, its kernels emulated."""
    assert isinstance(plan, Plan)
    rendered = as_rendered(plan)
    library = emulator_for(target)(dialect(target).prelude(), list(rendered.values()))
    return run_plan(plan, host_args, library, rendered)
