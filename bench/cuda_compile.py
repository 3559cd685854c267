"""CUDA kernels without a GPU: what planning for CUDA, rendering and NVRTC cost.

Rows (rune only; there is nothing to compare with on a machine without a GPU):
planning a row softmax of 16384x4096 for `target="cuda"` from Specs; NVRTC's
fixed cost (the prelude alone, to PTX); and the cost per unit when many units
share one NVRTC program, through the front end only and to an sm_90 cubin
(the batches the test suite compiles).
"""
import time

import numpy as np

import rune
from rune import nx

from .common import Row, per_call, print_table


def _softmax(x):
    e = nx.exp(x - nx.max(x, axis=1, keepdims=True))
    return e / nx.sum(e, axis=1, keepdims=True)


def _units(n):
    """`n` distinct units: a small fused program over n different shapes."""
    out = []
    for k in range(n):
        plan = rune.jit(lambda x, y: nx.sum(nx.tanh(x) * y + 1, axis=1)).plan(
            rune.Spec((k + 2, 37), "float32"), rune.Spec((37,), "float32"), target="cuda")
        out += [s for s in plan.steps if hasattr(s, "text")]
    return out


def run():
    from rune.backends.cuda import nvrtc
    from rune.codegen.cuda import CudaDialect
    spec = rune.Spec((16384, 4096), "float32")
    rows = [Row("plan softmax 16384x4096 for cuda", "per plan",
                {"rune": per_call(lambda: rune.jit(_softmax).plan(spec, target="cuda"), repeat=3)})]
    if not nvrtc.available():
        print("NVRTC not installed: only planning is timed")
        print_table("CUDA kernels without a GPU", rows)
        return rows
    prelude = CudaDialect().prelude()
    rows.append(Row("NVRTC fixed cost (prelude to PTX)", "per program",
                    {"rune": per_call(lambda: nvrtc.compile_unit(prelude, ptx=True), repeat=3, number=1)}))
    units = _units(100)
    text = prelude + "\n\n".join(s.text for s in units)
    for what, kw in (("front end", dict(ptx=True, options=("-fdevice-syntax-only",))),
                     ("sm_90 cubin", dict(options=("--Ofast-compile=max",)))):
        start = time.perf_counter()
        nvrtc.compile_unit(text, **kw)
        rows.append(Row(f"NVRTC, 100 units in one program, {what}", "per unit",
                        {"rune": (time.perf_counter() - start) / len(units)}))
    start = time.perf_counter()
    nvrtc.compile_unit(prelude + units[0].text)
    rows.append(Row("NVRTC, one unit alone, sm_90 cubin (default optimisation)", "per unit",
                    {"rune": time.perf_counter() - start}))
    print_table("CUDA kernels without a GPU (no GPU needed: planning, rendering, NVRTC)", rows,
                note=f"NVRTC {nvrtc.version()}; numpy {np.__version__}")
    return rows
