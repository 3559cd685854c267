"""pytest plugin for ci/gpu-check's test parts (`-p gpu_part_stats`, ci/ on the path):
what the part compiled, to test ci/gpu_budget.py's cost model on the GPU machine.

At the end of the session it prints one line and writes RUNE_PART_STATS (JSON):
- rune: the wall seconds rune's compile pipeline spent compiling (NVRTC batches,
  rune/backends/pipeline.py `compile_time`), the units and batches;
- CuPy: the kernels CuPy compiled cold (its disk cache missed) and their seconds,
  timed around cupy.cuda.compiler's NVRTC call (the cache-miss path of every
  CuPy kernel, elementwise and reduction alike).
"""
import json
import os
import time

_CUPY = {"kernels": 0, "seconds": 0.0}


def _timed(inner):
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            _CUPY["kernels"] += 1
            _CUPY["seconds"] += time.perf_counter() - start
    return run


def pytest_configure(config):
    try:
        from cupy.cuda import compiler
        compiler._compile_using_nvrtc_no_warning = _timed(compiler._compile_using_nvrtc_no_warning)
    except (ImportError, AttributeError):   # no CuPy, or one whose compile path moved: rune's figures only
        pass


def summary():
    from rune.backends import pipeline
    return {"rune": pipeline.compile_time(), "cupy_cold": {"kernels": _CUPY["kernels"],
                                                         "seconds": round(_CUPY["seconds"], 2)}}


def pytest_sessionfinish(session, exitstatus):
    stats = summary()
    r, c = stats["rune"], stats["cupy_cold"]
    print(f"\ncompiles: rune NVRTC {r['seconds']:.1f} s ({r['units']} units in {r['batches']} batches); "
          f"CuPy {c['kernels']} cold kernels, {c['seconds']:.1f} s", flush=True)
    path = os.environ.get("RUNE_PART_STATS")
    if path:
        with open(path, "w") as f:
            json.dump(stats, f)
