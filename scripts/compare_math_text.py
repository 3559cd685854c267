"""Compare rune's float32 math library (rune/codegen/c_src/rn_math.h) as it is now
with its text at a git revision, bit for bit, over every float32 input.

    python scripts/compare_math_text.py HEAD expm1 tanh     # these functions
    python scripts/compare_math_text.py HEAD~3 all          # every unary function

A rewrite that keeps every result (a branch made branch-free, a helper split) needs no
new run of the exhaustive checker (scripts/check_math_exhaustive.py): the same bits on
all 2**32 inputs are the same correct rounding. Not a CI test: ~30-60 s a function on
two cores. Both texts are compiled with rune's C flags (SIMD clones included, as the
kernels call them), each into its own library. NaN results only need to be NaN in both.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rune.backends.cpu.compiler import FLAGS  # noqa: E402
from rune.codegen import mathlib  # noqa: E402
from rune.codegen.helpers import read  # noqa: E402

CHUNK = 1 << 24
SRC = os.path.join("rune", "codegen", "c_src")


def text_at(revision, name):
    """A file of c_src at `revision` (None: the working tree)."""
    if revision is None:
        with open(os.path.join(ROOT, SRC, name)) as f:
            return f.read()
    return subprocess.run(["git", "show", f"{revision}:{SRC}/{name}"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout


def build(revision, names):
    """A library of `eval_<name>(x, y, n)` for the math text at `revision`."""
    library = text_at(revision, "rn_math.h").replace('#include "rn_math_fixes.h"\n',
                                                      text_at(revision, "rn_math_fixes.h"))
    loops = "\n".join(f"void eval_{n}(const float *x, float *y, long n) {{\n"
                      f"  #pragma omp parallel for simd\n"
                      f"  for (long i = 0; i < n; i++) y[i] = {mathlib.UNARY[n]}(x[i]);\n}}" for n in names)
    folder = tempfile.mkdtemp(prefix="rune-mathcmp-")
    src, lib = os.path.join(folder, "cmp.c"), os.path.join(folder, "cmp.so")
    with open(src, "w") as f:
        f.write("\n".join([read("c_prelude.h"), library, loops]))
    subprocess.run(["cc", *FLAGS, "-o", lib, src, "-lm"], check=True)
    return ctypes.CDLL(lib)


def differing(old, new, name):
    """How many float32 inputs give different bits (NaN and NaN count as the same)."""
    f_old, f_new = getattr(old, f"eval_{name}"), getattr(new, f"eval_{name}")
    a, b = np.empty(CHUNK, np.float32), np.empty(CHUNK, np.float32)
    count = 0
    for start in range(0, 1 << 32, CHUNK):
        x = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32).view(np.float32)
        for fn, out in ((f_old, a), (f_new, b)):
            fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_long(CHUNK))
        count += int(((a.view(np.uint32) != b.view(np.uint32)) & ~(np.isnan(a) & np.isnan(b))).sum())
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="a git revision whose rn_math.h is the reference (HEAD, a hash)")
    parser.add_argument("names", nargs="+", help=f"functions ({', '.join(mathlib.UNARY)}) or 'all'")
    args = parser.parse_args()
    names = list(mathlib.UNARY) if args.names == ["all"] else args.names
    unknown = [n for n in names if n not in mathlib.UNARY]
    if unknown:
        parser.error(f"unknown functions {unknown}; expected some of {list(mathlib.UNARY)} or 'all'")
    old, new = build(args.revision, names), build(None, names)
    changed = 0
    for n in names:
        t = time.time()
        d = differing(old, new, n)
        changed += d > 0
        print(f"{n}: {d} of 2**32 inputs give other bits than at {args.revision} ({time.time() - t:.0f} s)",
              flush=True)
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
