"""Check the eager fast paths of rune's float32 math library (rune/codegen/c_src/
rn_math_fast.h) against the library's functions, bit for bit, over every float32 input.

    python scripts/check_fast_paths.py            # exp, log and tanh: all 2**32 inputs each
    python scripts/check_fast_paths.py tanh --start 0 --stop 0x80000000

What runs is the eager op's own C unit (rune/backends/eager_mathlib.py: the fast path in
blocks, the library's function where it flags an element), compiled with rune's C flags
beside the library's text. The library's functions are correctly rounded on every input
(scripts/check_math_exhaustive.py), so no mismatch here means the eager ops are too.
Reports the mismatches and how many inputs took the slow path. Not a CI test: about 20 s
a function on two cores.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rune.backends import eager_mathlib  # noqa: E402
from rune.backends.cpu.compiler import FLAGS  # noqa: E402
from rune.codegen import mathlib  # noqa: E402
from rune.codegen.c import CDialect  # noqa: E402

CHUNK = 1 << 22

CHECK = r"""
/* inputs [start, stop): mismatches (input, eager, library); the slow path's count */
void check_%(op)s(uint64_t start, uint64_t stop, uint32_t *bad, int64_t *nbad, int64_t *nslow, int64_t cap) {
  #pragma omp parallel for schedule(dynamic, 1)
  for (uint64_t c = start; c < stop; c += %(chunk)d) {
    float *x = malloc(sizeof(float) * %(chunk)d), *y = malloc(sizeof(float) * %(chunk)d);
    int64_t n = stop - c < %(chunk)d ? (int64_t)(stop - c) : %(chunk)d, slow = 0;
    for (int64_t i = 0; i < n; i++) x[i] = rn_bitsf((uint32_t)(c + i));
    rn_eager_%(op)s_call(x, y, n);
    for (int64_t i = 0; i < n; i++) {
      int s;
      (void)%(fast)s(x[i], &s);
      slow += s;
      float want = %(fn)s_impl(x[i]);
      if (rn_fbits(y[i]) == rn_fbits(want) || (y[i] != y[i] && want != want)) continue;
      int64_t j;
      #pragma omp atomic capture
      j = (*nbad)++;
      if (j < cap) { bad[3 * j] = (uint32_t)(c + i); bad[3 * j + 1] = rn_fbits(y[i]); bad[3 * j + 2] = rn_fbits(want); }
    }
    #pragma omp atomic
    *nslow += slow;
    free(x);
    free(y);
  }
}
"""


def build(ops):
    """The harness: the library inlined (`<fn>_impl`), each public name a function over
    it, the fast paths, each op's eager unit and its check."""
    wrappers = "".join(f"float {fn}(float x) {{ return {fn}_impl(x); }}\n"
                       for fn in (mathlib.UNARY[op] for op in ops))
    units = "".join(eager_mathlib._unit(op, mathlib.UNARY[op], 1)[1] for op in ops)
    checks = "".join(CHECK % {"op": op, "fn": mathlib.UNARY[op], "fast": mathlib.FAST[mathlib.UNARY[op]],
                              "chunk": CHUNK} for op in ops)
    text = "#include <stdlib.h>\n" + CDialect().math_library() + wrappers + mathlib.fast_source() + units + checks
    folder = tempfile.mkdtemp(prefix="rune-fastcheck-")
    src, lib = os.path.join(folder, "check.c"), os.path.join(folder, "check.so")
    with open(src, "w") as f:
        f.write(text)
    subprocess.run(["cc", *FLAGS, "-o", lib, src, "-lm"], check=True)
    return ctypes.CDLL(lib)


def run(lib, op, start, stop, cap=64):
    """(mismatches as (input, eager, library) bit triples, slow-path count) over [start, stop)."""
    bad = (ctypes.c_uint32 * (3 * cap))()
    nbad, nslow = ctypes.c_int64(0), ctypes.c_int64(0)
    getattr(lib, f"check_{op}")(ctypes.c_uint64(start), ctypes.c_uint64(stop), bad, ctypes.byref(nbad),
                                ctypes.byref(nslow), ctypes.c_int64(cap))
    shown = min(nbad.value, cap)
    return nbad.value, [tuple(bad[3 * i:3 * i + 3]) for i in range(shown)], nslow.value


def main():
    fast_ops = [op for op, fn in mathlib.UNARY.items() if fn in mathlib.FAST]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ops", nargs="*", help=f"of {fast_ops} (default: all)")
    parser.add_argument("--start", type=lambda s: int(s, 0), default=0)
    parser.add_argument("--stop", type=lambda s: int(s, 0), default=1 << 32)
    args = parser.parse_args()
    args.ops = args.ops or fast_ops
    unknown = sorted(set(args.ops) - set(fast_ops))
    if unknown:
        parser.error(f"no fast path for {unknown}: expected some of {fast_ops}")
    lib = build(args.ops)
    failed = False
    for op in args.ops:
        t0 = time.time()
        count, shown, slow = run(lib, op, args.start, args.stop)
        total = args.stop - args.start
        print(f"{op}: {total} inputs, {count} differ from the library, {slow} took the slow path "
              f"({slow / total:.2e}), {time.time() - t0:.0f} s")
        for x, got, want in shown:
            print(f"  x=0x{x:08x}: eager 0x{got:08x}, library 0x{want:08x}")
        failed |= count > 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
