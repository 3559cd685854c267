"""The CUDA dialect's indexed kernels without a GPU: planning and NVRTC cost.

Rows (rune only; nothing to compare with on a machine without a GPU), for each
kind of kernel the indexed IR brings, at a GPU-sized shape: planning it for
`target="cuda"` from Specs (fusion and rendering), and NVRTC compiling its unit
with the prelude to an sm_90 cubin at the default optimisation (what a launcher
pays once per stretch before its disk cache has it). Argmax rows cover the
"block" (many rows) and "split" (few long rows, two launches) strategies.
"""
import time

import numpy as np

import rune
from rune import nx
from rune.core.prims import P
from rune.core.trace import bind

from .common import Row, per_call, print_table

F32, I32 = "float32", "int32"

CASES = [
    ("argmax, 65536 rows of 512 (block)", lambda x: nx.argmax(x * x - x, axis=1), [((65536, 512), F32)]),
    ("argmin, 8 rows of 2**22 (split)", lambda x: nx.argmin(x, axis=1), [((8, 1 << 22), F32)]),
    ("uniform, 2**24 Threefry draws", lambda k: nx.random.uniform(k, (1 << 24,)) * 2 - 1, [((2,), "uint32")]),
    ("gather, 2**20 rows of 64 at runtime indices",
     lambda x, i: bind(P["gather"], x, i, axis=0) * 2, [((1 << 16, 64), F32), ((1 << 20,), I32)]),
    ("scatter-add, 2**20 updates (serial)", lambda x, i, u: bind(P["scatter"], x, i, u, axis=0, mode="add"),
     [((1 << 16,), F32), ((1 << 20,), I32), ((1 << 20,), F32)]),
    ("scatter-add int32, 2**20 updates (atomics)", lambda x, i, u: bind(P["scatter"], x, i, u, axis=0, mode="add"),
     [((1 << 16,), I32), ((1 << 20,), I32), ((1 << 20,), I32)]),
    ("dynamic_update_slice, 4096x4096 into 8192x8192",
     lambda x, u, a: nx.dynamic_update_slice(x, u * 2, (a, a)), [((8192, 8192), F32), ((4096, 4096), F32), ((), I32)]),
]


def run():
    from rune.backends.cuda import nvrtc
    from rune.codegen.cuda import CudaDialect
    rows = []
    prelude = CudaDialect().prelude()
    for name, fn, specs in CASES:
        specs = [rune.Spec(s, d) for s, d in specs]
        plan = rune.jit(fn).plan(*specs, target="cuda")
        rows.append(Row(f"plan {name} for cuda", "per plan",
                        {"rune": per_call(lambda: rune.jit(fn).plan(*specs, target="cuda"), repeat=3)}))
        if nvrtc.available():
            text = prelude + "\n\n".join(s.text for s in plan.steps if hasattr(s, "text"))
            start = time.perf_counter()
            nvrtc.compile_unit(text)
            rows.append(Row(f"NVRTC {name}, sm_90 cubin", "per unit", {"rune": time.perf_counter() - start}))
    if not nvrtc.available():
        print("NVRTC not installed: only planning is timed")
    print_table("CUDA indexed kernels without a GPU (planning, NVRTC)", rows, note=f"numpy {np.__version__}")
    return rows
