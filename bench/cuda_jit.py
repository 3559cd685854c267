"""jit stretches on a GPU: compiled CUDA kernels against the same plans op by op.

Rows: building the compiled CUDA stretches of a row-softmax plan (rendering for
a GPU's properties and the launch and argument lists; no GPU needed), then, on
a GPU, each program jitted with its stretches compiled (`rune`) and op by op
through CuPy (`rune op by op`, RUNE_CUDA_COMPILE=0 while it is planned), with
the kernels launched per call of each.
"""
import os

import numpy as np

import rune
from rune import nx

from .common import Row, per_call, print_table
from .gpu import _cupy_sync, gpu_count, timed


def _softmax(x):
    e = nx.exp(x - nx.max(x, axis=1, keepdims=True))
    return e / nx.sum(e, axis=1, keepdims=True)


PROGRAMS = (  # name, function, input shape
    ("W1 chain 1e7", lambda x: nx.sin(x) * nx.exp(-x * x) + 0.5 * nx.tanh(x) - x / (1 + x * x), (10 ** 7,)),
    ("sum(x*x) 1e7", lambda x: nx.sum(x * x), (10 ** 7,)),
    ("row softmax 4096x4096", _softmax, (4096, 4096)),
    ("many short rows: sum 1e6x8", lambda x: nx.sum(x, axis=1), (10 ** 6, 8)),
)


def _build_row():
    from rune.backends.cuda.backend import BACKEND
    from rune.codegen.cuda import DeviceProps
    plan = rune.jit(_softmax).plan(rune.Spec((16384, 4096), "float32"), target="cuda")
    runs = [s for s in plan.steps if hasattr(s, "unit")]
    props, device = DeviceProps(), rune.devices()[0]

    def build():
        for s in runs:
            BACKEND.compiled_stretch(s.eqns, s.unit, device, props)
    return Row("build the CUDA stretches of softmax 16384x4096", "per plan", {"rune": per_call(build, repeat=3)})


def _jitted(fn, x, compiled):
    """`fn` jitted and planned for `x`'s GPU, compiled or op by op; its kernels per call."""
    f = rune.jit(fn)
    before = os.environ.get("RUNE_CUDA_COMPILE")
    os.environ["RUNE_CUDA_COMPILE"] = "1" if compiled else "0"
    try:
        f(x)
    finally:
        if before is None:
            del os.environ["RUNE_CUDA_COMPILE"]
        else:
            os.environ["RUNE_CUDA_COMPILE"] = before
    rune.reset_stats()
    f(x)
    return f, rune.stats()["kernels_launched"]


def run():
    try:
        rows = [_build_row()]
    except ImportError as e:
        print(f"cuda_jit: CuPy is not installed ({e}): nothing to measure")
        return []
    if not gpu_count():
        print("cuda_jit: no GPU here: only building the stretches is timed")
        print_table("jit stretches for a GPU, built without one", rows)
        return rows
    for name, fn, shape in PROGRAMS:
        x = nx.asarray(np.random.default_rng(0).standard_normal(shape, dtype=np.float32), device="cuda:0")
        times, launches = {}, {}
        for label, compiled in (("rune", True), ("rune op by op", False)):
            f, launches[label] = _jitted(fn, x, compiled)
            times[label] = timed(lambda: f(x), _cupy_sync, budget=1.0)
        row = Row(f"{name} (kernels per call: {launches['rune']} compiled, "
                  f"{launches['rune op by op']} op by op)", "per call", times)
        rows.append(row)
    print_table("jit stretches on the GPU: compiled CUDA kernels against op by op", rows)
    return rows
