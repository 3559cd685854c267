"""The first part of ci/gpu-check: one process per check, since a CUDA fault
(a misaligned address, an illegal access) is sticky and ends the CUDA context
of the process it happens in, and would hide every check after it. The
processes run side by side (--jobs; each has its own CUDA context), so the part
takes about as long as its slowest check.

    python ci/gpu_smoke.py [--json PATH] [--limit S] [--jobs N]

Each check prints one line (`PASS`, `FAIL` or `SKIP`, its seconds and the last
lines it printed); the exit status is the number of failed checks (0: all good).
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

PRELUDE = "import numpy as np, rune\nfrom rune import nx\n"
SKIP = 77  # a check's exit status for "this machine cannot run it" (no NCCL, one GPU)

CHECKS = {
    # Where rune found the CUDA headers and whether it compiles stretches at all:
    # without the headers every GPU stretch would silently run op by op.
    "environment": """
import cupy, cupy.cuda.runtime as rt
from rune.backends.cuda import nvrtc
from rune.backends.cuda.backend import BACKEND
from rune.backends.cuda.nccl import NcclCommunicator
from rune.backends.cuda import environment
print(f"CuPy {cupy.__version__}, runtime {rt.runtimeGetVersion()}, driver {rt.driverGetVersion()}, "
      f"{rt.getDeviceProperties(0)['name'].decode()}; headers {nvrtc.include_dir()}; "
      f"NVRTC {nvrtc.version()}; NCCL {NcclCommunicator(0).available()}; NumPy {np.__version__}")
assert not environment.problems(), environment.problems()
assert BACKEND.compiler() is not None, "rune found no CUDA compiler: GPU stretches would run op by op"
""",
    "compiled_stretch": """
x = np.linspace(-2, 2, 4096, dtype=np.float32)
f = rune.jit(lambda v: nx.tanh(v) * 2.0)
rune.reset_stats()
y = np.asarray(f(nx.asarray(x, device="cuda:0")))
assert rune.stats()["kernels_launched"] >= 1, rune.stats()
np.testing.assert_allclose(y, np.tanh(x) * 2, rtol=2e-6, atol=1e-6)
print("one fused kernel:", rune.stats()["kernels_launched"], "launch(es)")
""",
    # A contiguous view at an element offset reaches a kernel whose vector loads
    # need 16-byte alignment: a jitted call on x[1:], scan rows of 1,025 float32,
    # and a view between two steps of one plan.
    "misaligned_argument": """
x = np.arange(4097, dtype=np.float32)
y = rune.jit(lambda v: nx.exp(v * 1e-3) * 2.0)(nx.asarray(x, device="cuda:0")[1:])
np.testing.assert_allclose(np.asarray(y), np.exp(x[1:] * np.float32(1e-3)) * 2, rtol=2e-6)
print("x[1:] ok")
""",
    "misaligned_scan_rows": """
xs = np.linspace(-1, 1, 3 * 1025, dtype=np.float32).reshape(3, 1025)
with rune.default_device("cuda:0"):
    f = rune.jit(lambda xs: rune.scan(lambda c, r: (c + 1.0, nx.tanh(r) * 2.0), nx.zeros((), np.float32), xs))
    c, ys = f(nx.asarray(xs))
np.testing.assert_allclose(np.asarray(ys), np.tanh(xs) * 2, rtol=2e-6, atol=1e-6)
print("rows of 1,025 ok")
""",
    "misaligned_view_in_plan": """
x = np.linspace(-1, 1, 100 * 63, dtype=np.float32).reshape(100, 63)
w = np.eye(63, dtype=np.float32)
f = rune.jit(lambda x, w: (lambda v: v @ w + v)(nx.tanh(x)[1:]))
y = f(nx.asarray(x, device="cuda:0"), nx.asarray(w, device="cuda:0"))
np.testing.assert_allclose(np.asarray(y), 2 * np.tanh(x)[1:], rtol=2e-5, atol=1e-6)
print("view between a matmul and a stretch ok")
""",
    # One compile pipeline: a second process runs a jitted GPU function from rune's
    # disk cache (the cubin NVRTC made in the first) without running NVRTC.
    "second_process_from_cache": """
import json, os, subprocess, sys, tempfile
body = ("import json, numpy as np, rune\\nfrom rune import nx\\n"
        "x = np.linspace(-2, 2, 4096, dtype=np.float32)\\n"
        "y = np.asarray(rune.jit(lambda v: nx.tanh(v) * 3.0 - v)(nx.asarray(x, device='cuda:0')))\\n"
        "np.testing.assert_allclose(y, np.tanh(x) * 3 - x, rtol=2e-6, atol=1e-6)\\n"
        "print(json.dumps(rune.stats()))")
env = dict(os.environ, RUNE_CACHE_DIR=tempfile.mkdtemp(prefix="rune-smoke-cache-"), RUNE_CACHE="1")
runs = []
for _ in range(2):
    done = subprocess.run([sys.executable, "-c", body], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
first, second = runs
assert first["kernels_compiled"] >= 1 and first["kernels_launched"] >= 1, first
assert second["kernels_compiled"] == 0 and second["disk_cache_hits"] >= 1, second
print("second process: 0 NVRTC runs,", second["disk_cache_hits"], "unit(s) from the disk cache")
""",
    # rune's kernels keep float32 subnormals (no flush to zero), in comparisons too.
    "subnormals": """
h = np.full(4096, 1.5e-38, np.float32)
g = nx.asarray(h, device="cuda:0")
for name, fn in (("x * 1.0", lambda v: v * 1.0), ("x > 0", lambda v: v > 0), ("x * 0.5", lambda v: v * 0.5)):
    got = np.asarray(rune.jit(fn)(g))
    want = fn(h)
    assert np.array_equal(got, want), f"{name}: GPU gives {got[:2]}, the host {want[:2]}"
print("subnormals kept")
""",
    # Eager GPU ops follow rune's semantics where CuPy's differ.
    "semantics": """
one, tenth = nx.asarray(np.float32(1.0), device="cuda:0"), nx.asarray(np.float32(0.1), device="cuda:0")
assert float(one // tenth) == 9.0, f"1.0 // 0.1 on the GPU gives {float(one // tenth)}, the host 9.0"
assert float(rune.jit(lambda a, b: a // b)(one, tenth)) == 9.0
specials = nx.asarray(np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, -1.5], np.float32), device="cuda:0")
want = [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, -1]
assert np.asarray(specials.astype(nx.int32)).tolist() == want, np.asarray(specials.astype(nx.int32))
assert np.asarray(rune.jit(lambda v: v.astype(nx.int32))(specials)).tolist() == want
print("floor division and float -> int conversion as on the host")
""",
    "nccl": """
import sys, cupy
from rune.core.devices import Device
from rune.distributed import nccl, runtime
if not nccl.available(Device("cuda", 0)):
    print("NCCL not loadable here"); sys.exit(77)
out = nccl.all_reduce(runtime.initialize(), [cupy.arange(5, dtype=cupy.float32)], "sum", Device("cuda", 0))
assert cupy.asnumpy(out[0]).tolist() == [0, 1, 2, 3, 4]
print("all_reduce over one rank ok")
""",
    # Whether two NVRTC runs on two threads run at once (the compile pipeline's batches
    # go on threads): the scheduler state of both threads, sampled while both compile.
    # Both runnable nearly always: no process-wide lock, threads overlap as processes would.
    "nvrtc_threads_overlap": """
import threading, time
from rune.backends.cuda import nvrtc
from rune.codegen.cuda import CudaDialect
plan = rune.jit(lambda x: nx.tanh(x) * 2.0 + nx.exp(x)).plan(rune.Spec((4096,), np.float32), target="cuda")
source = CudaDialect().prelude() + "\\n" + "\\n".join(k.source for k in plan.kernels)
tids, inside = {}, {}
def one(k):
    tids[k] = threading.get_native_id(); inside[k] = True
    for _ in range(4):
        nvrtc.compile_unit(source, arch="sm_90")
    inside[k] = False
ts = [threading.Thread(target=one, args=(k,)) for k in range(2)]
[t.start() for t in ts]
states = []
while any(t.is_alive() for t in ts):
    if len(tids) == 2 and all(inside.get(k) for k in range(2)):
        st = [open(f"/proc/self/task/{tids[k]}/stat").read().rsplit(")", 1)[1].split()[0] for k in range(2)]
        states.append(st == ["R", "R"])
    time.sleep(0.002)
[t.join() for t in ts]
share = sum(states) / max(len(states), 1)
print(f"NVRTC on 2 threads: both runnable in {share:.0%} of {len(states)} samples")
assert share > 0.2 or len(states) < 20, "NVRTC runs serialise on threads: compile batches in processes"
""",
    # What a cold CuPy kernel costs here, to size the eager op-table part.
    "cold_kernel_seconds": """
import time, cupy
x = cupy.arange(10, dtype=cupy.float32)
t = []
for op in (cupy.sin, cupy.cos, cupy.tanh, cupy.log1p, cupy.expm1):
    t0 = time.perf_counter(); op(x); cupy.cuda.Device().synchronize(); t.append(time.perf_counter() - t0)
print("cold CuPy kernels, s each:", ", ".join(f"{s:.2f}" for s in t))
""",
}


def run_check(name, body, limit):
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True,
                              timeout=limit)
        rc, lines = done.returncode, (done.stdout + done.stderr).strip().splitlines()
    except subprocess.TimeoutExpired:
        rc, lines = "timeout", [f"no result within {limit} s"]
    outcome = "PASS" if rc == 0 else "SKIP" if rc == SKIP else "FAIL"
    return {"check": name, "outcome": outcome, "rc": rc, "seconds": round(time.perf_counter() - start, 1),
            "tail": " | ".join(lines[-3:])[-800:]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds for one check")
    parser.add_argument("--jobs", type=int, default=min(len(CHECKS), os.cpu_count() or 1),
                        help="checks run at once (default: one per CPU, at most all)")
    args = parser.parse_args(argv)
    results = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        running = [pool.submit(run_check, name, body, args.limit) for name, body in CHECKS.items()]
        for done in concurrent.futures.as_completed(running):
            r = done.result()
            results.append(r)
            print(f"{r['outcome']} {r['check']:26s} {r['seconds']:5.1f}s  {r['tail'][-300:]}", flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(sorted(results, key=lambda r: list(CHECKS).index(r["check"])), f, indent=1)
    return sum(r["outcome"] == "FAIL" for r in results)


if __name__ == "__main__":
    sys.exit(main())
