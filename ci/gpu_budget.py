"""ci/gpu-check's cost model: each part's predicted seconds on a cold machine, printed
before the part beside its limit, and the measured seconds after it.

    python ci/gpu_budget.py predict OUT        # OUT/budget.json and the table
    python ci/gpu_budget.py measured OUT PART SECONDS [EXIT]

The model's costs were measured on a busy 2-core machine ("the reference"):

- one small rune NVRTC unit 0.05-0.11 s: NVRTC_UNIT_REF, its middle;
- one cold CuPy kernel (CuPy's headers and flags) 0.21-0.44 s: CUPY_KERNEL_REF;
- the jit op table's 3,475 distinct units in 18 programs of 200, 45.9 s on one
  core, the longest program 3.9 s;
- what the parts make besides (tests, imports, torch/JAX init, sample runs): fixed
  ranges from the audit's estimates.

Costs that are NVRTC runs are scaled by `scale`: this machine's time for the
reference unit (measured here when NVRTC is present, `nvrtc_unit_seconds`) over
NVRTC_UNIT_REF; without NVRTC (or with --reference, which also takes the GPU
host's 16 cores) the audit's assumption for an H100 host's core, 1/1.5 of the
reference. The counts come cheaply from the
tests themselves: the jit part's traced op-table samples, the eager part's
selection (tests/backends/test_cuda_eager_own.py); the kernels and units per
sample are the ratios the audit's scripts measured here (UNITS_PER_TRACED_SAMPLE,
EAGER_COLD_PER_SAMPLE). Each part's limit must be at least HEADROOM times its
high prediction, and the high predictions must add up to at most TOTAL_MAX:
tests/backends/test_gpu_budget.py checks both against ci/gpu-check's limits.
"""
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

NVRTC_UNIT_REF = 0.08                  # s: one small rune unit, reference machine
CUPY_KERNEL_REF = (0.21, 0.44)         # s: one cold CuPy kernel, reference machine
H100_CORE = 1 / 1.5                    # the audit's H100 host core against the reference's
JIT_UNIT_REF = 45.9 / 3475             # s per op-table unit in 200-unit NVRTC programs, one core
JIT_LONGEST_PROGRAM_REF = 3.9          # s: the slowest of those programs
UNITS_PER_TRACED_SAMPLE = 3475 / 4914  # distinct CUDA units per traced op-table sample (audit)
JIT_CUPY_KERNELS = 105                 # CuPy kernels of the jit table's op-by-op and library steps (audit)
EAGER_COLD_PER_SAMPLE = 58 / 98        # cold CuPy kernels per eager-part sample, after the earlier parts
CUDA_TESTS_CUPY_KERNELS = 96 + 110     # test_semantics' eager halves + the other cuda tests' (audit)
CUDA_TESTS_NVRTC_REF = 7.3 + 1.0 + 50 * NVRTC_UNIT_REF   # the 71-unit library, the sampler, ~50 small units
HEADROOM = 1.3
TOTAL_MAX = 300.0                      # s: the whole check, cold, predicted (high)

# ci/gpu-check's limits per part (seconds; the kill grace comes on top).
LIMITS = {"probe": 45, "smoke": 45, "cuda-tests": 160, "jit-op-table": 95, "eager-op-table": 40, "bench": 80}


def nvrtc_unit_seconds():
    """Seconds NVRTC takes here for the reference unit (the prelude and tanh(x) * 2 over
    4096 float32, rune's flags, sm_90), the least of 2 runs; None without NVRTC."""
    try:
        import numpy as np
        import rune
        from rune import nx
        from rune.backends.cuda import nvrtc
        from rune.codegen.cuda import CudaDialect
        plan = rune.jit(lambda x: nx.tanh(x) * 2.0).plan(rune.Spec((4096,), np.float32), target="cuda")
        source = CudaDialect().prelude() + "\n" + "\n".join(k.source for k in plan.kernels)
        best = math.inf
        for _ in range(2):
            start = time.perf_counter()
            nvrtc.compile_unit(source, arch="sm_90")
            best = min(best, time.perf_counter() - start)
        return best
    except Exception:  # no cuda-bindings, libnvrtc or headers here: the reference assumption
        return None


def counts():
    """What the parts will run, counted from the tests without running them."""
    for folder in (HERE, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "backends")):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    from op_table import TABLE
    import test_cuda_eager_own as eager
    from gpu_smoke import CHECKS
    selected = eager.selected()
    return {"smoke_checks": len(CHECKS),
            "jit_tests": sum(1 for c in TABLE if c.traced),
            "jit_samples": sum(1 for c in TABLE if c.traced for s in c.samples if not s.bug),
            "eager_tests": len(selected), "eager_samples": sum(len(s) for _, s in selected),
            "cuda_tests": 71,   # the cuda-tests part's selection (69 on the first GPU run, 2026-12-06)
            "emulated_programs": 5}   # tests/compiler/test_emulate.py (GPU_PROGRAMS): a g++ build of each


# one g++ -O1 build of a small program's emulated CUDA kernels (the cuda_emu.h header, C++20),
# measured here at 2-4 s
EMULATED_BUILD_REF = (1.5, 4.0)


def _add(*ranges):
    return (sum(r[0] for r in ranges), sum(r[1] for r in ranges))


def _times(n, each):
    return (n * each[0], n * each[1])


def predict(n, scale, cores):
    """{part: (low, high) seconds} for counts `n`, NVRTC `scale` and `cores` CPUs."""
    cupy = (CUPY_KERNEL_REF[0] * scale, CUPY_KERNEL_REF[1] * scale)
    units = n["jit_samples"] * UNITS_PER_TRACED_SAMPLE
    programs = math.ceil(units / 200)
    threads = max(1, min(16, cores, programs))
    jit_nvrtc = max(units * JIT_UNIT_REF / threads, JIT_LONGEST_PROGRAM_REF) * scale
    return {
        "probe": (3.0, 8.0),
        # the checks run side by side, one process each: the slowest is the cache check's two processes
        "smoke": _add((4.0, 10.0), _times(2, (NVRTC_UNIT_REF * scale, 4 * NVRTC_UNIT_REF * scale)),
                      _times(min(n["smoke_checks"], 12), (0.0, 0.3))),
        "cuda-tests": _add((8.0, 12.0), _times(n["cuda_tests"], (0.1, 0.3)),
                           _times(CUDA_TESTS_CUPY_KERNELS, cupy), (CUDA_TESTS_NVRTC_REF * scale,) * 2,
                           _times(n["emulated_programs"], EMULATED_BUILD_REF)),
        "jit-op-table": _add((3.0, 6.0), (jit_nvrtc, jit_nvrtc), _times(JIT_CUPY_KERNELS, cupy),
                             _times(n["jit_samples"], (0.002, 0.004))),
        "eager-op-table": _add((3.0, 5.0), _times(n["eager_tests"], (0.05, 0.15)),
                               _times(round(n["eager_samples"] * EAGER_COLD_PER_SAMPLE), cupy)),
        # rune's rows (imports, JAX/torch init, the copy, host draws of 1e8, rune's compiles); the
        # peers fill what is left before the deadline the check gives it
        "bench": (40.0, 60.0),
    }


def table(pred, scale, measured_unit):
    how = (f"NVRTC reference unit {measured_unit:.3f} s here" if measured_unit is not None
           else "no NVRTC here: the audit's H100 core")
    lines = [f"gpu-check budget (cold, scale {scale:.2f}: {how}):",
             f"  {'part':16s} {'predicted':>12s} {'limit':>6s} {'headroom':>9s}"]
    for part, (lo, hi) in pred.items():
        lines.append(f"  {part:16s} {lo:5.0f}-{hi:4.0f} s {LIMITS[part]:5d} s {LIMITS[part] / hi:8.1f}x")
    total = _add(*pred.values())
    lines.append(f"  {'total':16s} {total[0]:5.0f}-{total[1]:4.0f} s {sum(LIMITS.values()):5d} s")
    return "\n".join(lines)


def main(argv):
    what, out = argv[0], argv[1]
    path = os.path.join(out, "budget.json")
    if what == "predict":
        reference = "--reference" in argv
        measured_unit = None if reference else nvrtc_unit_seconds()
        scale = measured_unit / NVRTC_UNIT_REF if measured_unit else H100_CORE
        pred = predict(counts(), scale, 16 if reference else os.cpu_count() or 1)
        print(table(pred, scale, measured_unit))
        with open(path, "w") as f:
            json.dump({"scale": scale, "nvrtc_unit_seconds": measured_unit, "limits": LIMITS,
                       "predicted": pred, "measured": {}}, f, indent=1)
        return 0
    part, seconds = argv[2], float(argv[3])
    try:
        with open(path) as f:
            budget = json.load(f)
    except (OSError, ValueError):
        budget = {"predicted": {}, "measured": {}, "limits": LIMITS}
    budget["measured"][part] = seconds
    with open(path, "w") as f:
        json.dump(budget, f, indent=1)
    lo, hi = budget["predicted"].get(part, (math.nan, math.nan))
    verdict = "within" if seconds <= hi else "OVER"
    print(f"gpu-check budget: {part} took {seconds:.0f} s (predicted {lo:.0f}-{hi:.0f} s, limit "
          f"{LIMITS.get(part, '?')} s): {verdict} the prediction"
          + (f", exit {argv[4]}" if len(argv) > 4 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
