"""Check the eager fast paths of rune's float32 math library (rune/codegen/c_src/
rn_math_fast.h) against the library's functions, bit for bit, over every float32 input.

    python scripts/check_fast_paths.py            # every function with one: all 2**32 inputs each
    python scripts/check_fast_paths.py tanh --start 0 --stop 0x80000000

What runs is the eager op's own C unit (rune/backends/eager_mathlib.py: the fast path in
blocks, the library's function where it flags an element) and the function's SIMD clones
that the kernels call (rune/codegen/c_src/simd_clones.h: each ISA variant this CPU has)
and the exported scalar function (a kernel's call outside a vector loop),
compiled with rune's C flags beside the library's text. The library's functions are
correctly rounded on every input (scripts/check_math_exhaustive.py), so no mismatch here
means the eager ops and the kernels are too. Reports the mismatches and how many inputs
took the slow path. Not a CI test: about a minute a function on two cores.
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

COMMON = r"""
/* a mismatch (input, path, result, library's) of the eager unit (path 0), a SIMD clone
   (paths 1-4: b, c, d, e) or the exported scalar function (5) */
static void record(uint32_t *bad, int64_t *nbad, int64_t cap, uint32_t x, uint32_t path, float got, float want) {
  if (rn_fbits(got) == rn_fbits(want) || (got != got && want != want)) return;
  int64_t j;
  #pragma omp atomic capture
  j = (*nbad)++;
  if (j < cap) { bad[4 * j] = x; bad[4 * j + 1] = path; bad[4 * j + 2] = rn_fbits(got); bad[4 * j + 3] = rn_fbits(want); }
}
#define CLONE_CHECK(isa, path, lanes, fn)                                               \
  for (int64_t i = 0; i + lanes <= n; i += lanes) {                                    \
    fn##_##isa##_vector v;                                                              \
    memcpy(&v, x + i, sizeof v);                                                        \
    v = _ZGV##isa##N##lanes##v_##fn(v);                                                 \
    memcpy(y + i, &v, sizeof v);                                                        \
  }                                                                                     \
  for (int64_t i = 0; i < n; i++) record(bad, nbad, cap, (uint32_t)(c + i), path, y[i], want[i]);
"""

CHECK = r"""
/* inputs [start, stop): the mismatches and the slow path's count */
void check_%(op)s(uint64_t start, uint64_t stop, uint32_t *bad, int64_t *nbad, int64_t *nslow, int64_t cap) {
  #pragma omp parallel for schedule(dynamic, 1)
  for (uint64_t c = start; c < stop; c += %(chunk)d) {
    float *x = malloc(sizeof(float) * %(chunk)d), *y = malloc(sizeof(float) * %(chunk)d);
    float *want = malloc(sizeof(float) * %(chunk)d);
    int64_t n = stop - c < %(chunk)d ? (int64_t)(stop - c) : %(chunk)d, slow = 0;
    for (int64_t i = 0; i < n; i++) {
      int s;
      x[i] = rn_bitsf((uint32_t)(c + i));
      want[i] = %(fn)s_impl(x[i]);
      (void)%(fast)s(x[i], &s);
      slow += s;
    }
    rn_eager_%(op)s_call(x, y, n);
    for (int64_t i = 0; i < n; i++) record(bad, nbad, cap, (uint32_t)(c + i), 0, y[i], want[i]);
    for (int64_t i = 0; i < n; i++) record(bad, nbad, cap, (uint32_t)(c + i), 5, %(fn)s(x[i]), want[i]);
#if RN_X86_CLONES
    CLONE_CHECK(b, 1, 4, %(fn)s)
#if defined(__AVX__)
    CLONE_CHECK(c, 2, 8, %(fn)s)
#endif
#if defined(__AVX2__)
    CLONE_CHECK(d, 3, 8, %(fn)s)
#endif
#if defined(__AVX512F__)
    CLONE_CHECK(e, 4, 16, %(fn)s)
#endif
#endif
    #pragma omp atomic
    *nslow += slow;
    free(x);
    free(y);
    free(want);
  }
}
"""
PATHS = ("the eager unit", "clone b (SSE2)", "clone c (AVX)", "clone d (AVX2)", "clone e (AVX-512)",
         "the scalar function")


def build(ops):
    """The harness: the library inlined (`<fn>_impl`), each function's unit of the
    library as the kernels load it (the function and its SIMD clones), each op's eager
    unit and its check."""
    dialect = CDialect()
    functions = "".join(dialect.math_function(mathlib.UNARY[op])[1] for op in ops)
    units = "".join(eager_mathlib._unit(op, mathlib.UNARY[op], 1)[1] for op in ops)
    checks = "".join(CHECK % {"op": op, "fn": mathlib.UNARY[op], "fast": mathlib.FAST[mathlib.UNARY[op]],
                              "chunk": CHUNK} for op in ops)
    text = "#include <stdlib.h>\n" + dialect.math_library() + functions + units + COMMON + checks
    folder = tempfile.mkdtemp(prefix="rune-fastcheck-")
    src, lib = os.path.join(folder, "check.c"), os.path.join(folder, "check.so")
    with open(src, "w") as f:
        f.write(text)
    subprocess.run(["cc", *FLAGS, "-o", lib, src, "-lm"], check=True)
    return ctypes.CDLL(lib)


def run(lib, op, start, stop, cap=64):
    """(mismatch count, the first as (input, path, result, library's) bits, slow-path count)
    over [start, stop)."""
    bad = (ctypes.c_uint32 * (4 * cap))()
    nbad, nslow = ctypes.c_int64(0), ctypes.c_int64(0)
    getattr(lib, f"check_{op}")(ctypes.c_uint64(start), ctypes.c_uint64(stop), bad, ctypes.byref(nbad),
                                ctypes.byref(nslow), ctypes.c_int64(cap))
    shown = min(nbad.value, cap)
    return nbad.value, [tuple(bad[4 * i:4 * i + 4]) for i in range(shown)], nslow.value


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
        print(f"{op}: {total} inputs, {count} results of the eager unit, the SIMD clones and the scalar "
              f"function differ from the library, {slow} took the slow path "
              f"({slow / total:.2e}), {time.time() - t0:.0f} s")
        for x, path, got, want in shown:
            print(f"  x=0x{x:08x}: {PATHS[path]} 0x{got:08x}, library 0x{want:08x}")
        failed |= count > 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
