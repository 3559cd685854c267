"""rune's math library on the host (rune/backends/cpu/math_library.py): each function
compiled once per machine into the global scope, kernels calling its SIMD clones by name."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from rune.codegen import mathlib
from rune.codegen.c import CDialect

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A program calling exp and log (one kernel), then eager tanh; prints its values' bits,
# the compile counts and the paths of the libraries it loaded other than the math library's.
_PROGRAM = """
import json, sys, numpy as np, rune
from rune import nx
from rune.backends import compile_pending, pipeline
x = nx.asarray(np.linspace(0.25, 40, 3001, dtype=np.float32))
f = rune.jit(lambda x: nx.exp(-x) * 3.0 + nx.log(x))
f.plan(x)
compile_pending()
y, t = np.asarray(f(x)), np.asarray(nx.tanh(x * 0.1))
kernel = [p.lib._name for p in pipeline._OPENED.values()
          if b"rn_library_" not in open(p.lib._name, "rb").read()]   # the kernel's library (and eager tanh's)
print(json.dumps({"y": y.view(np.uint32).tolist(), "t": t.view(np.uint32).tolist(), "stats": rune.stats(),
                  "libraries": kernel}))
"""


def _run(cache):
    env = dict(os.environ, RUNE_CACHE_DIR=str(cache), RUNE_CACHE="1", RUNE_COMPILE_MIN_SIZE="0", RUNE_BLAS_POOL="0")
    done = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_kernels_prelude_declares_the_library_and_defines_none_of_it():
    prelude = CDialect().prelude()
    for fn in mathlib.functions():
        args = ", ".join(["float"] * mathlib.arity(fn))
        assert f'__attribute__((simd("notinbranch"), const)) float {fn}({args});' in prelude
        assert not re.search(rf"\b{fn}\s*\([^;]*\)\s*{{", prelude)   # no body
    assert "rn_expm1_poly" not in prelude and "rn_expm1_poly" in CDialect().math_library()


@pytest.mark.cc
def test_functions_are_compiled_once_per_machine_and_kernels_call_their_simd_clones(tmp_path):
    first, second = _run(tmp_path), _run(tmp_path)
    # the oracle: NumPy's float64 functions, rounded once to float32 (rune's are correctly rounded)
    x = np.linspace(0.25, 40, 3001, dtype=np.float32).astype(np.float64)
    want_y = (np.exp(-x).astype(np.float32) * np.float32(3.0)) + np.log(x).astype(np.float32)
    want_t = np.tanh((x.astype(np.float32) * np.float32(0.1)).astype(np.float64)).astype(np.float32)
    got_y, got_t = (np.array(first[k], np.uint32).view(np.float32) for k in ("y", "t"))
    np.testing.assert_array_equal(got_y, want_y)
    np.testing.assert_array_equal(got_t, want_t)
    # the first process ran the compiler 4 times: the kernel; exp and log, which its
    # library names, in one run; eager tanh's unit; tanh. The second loads those 5 units
    # from the cache (the kernel before any function: loading it fails on the names it
    # leaves undefined until they are loaded) and gives the same bits
    assert first["stats"]["kernels_compiled"] == 4 and first["stats"]["disk_cache_hits"] == 0
    assert second["stats"]["kernels_compiled"] == 0 and second["stats"]["disk_cache_hits"] == 5
    assert (second["y"], second["t"]) == (first["y"], first["t"])
    # the kernel calls the vector variants by name (whole vectors a call), compiled into
    # none; eager tanh's unit runs its fast path and calls the library's scalar function
    # on the elements it flags (rune/backends/eager_mathlib.py)
    undefined = set()
    for path in first["libraries"]:
        nm = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True, text=True, check=True)
        undefined |= {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
    for fn in ("rn_expf", "rn_logf"):
        assert any(re.fullmatch(rf"_ZGV\w+_{fn}", name) for name in undefined), (fn, sorted(undefined))
    assert "rn_tanhf" in undefined, sorted(undefined)
