"""Check rune's float32 math library (rune/codegen/c_src/rn_math.h) against the exact
function rounded to nearest even, over every float32 input or a range of them.

    python scripts/check_math_exhaustive.py exp log            # all 2**32 inputs each
    python scripts/check_math_exhaustive.py sin --start 0 --stop 0x7f800000
    python scripts/check_math_exhaustive.py all --write-fixes  # and update the hard cases
    python scripts/check_math_exhaustive.py tanh --stop 0x80000000   # odd: the positive half

Not a CI test: a function takes minutes on two cores. The library is compiled with
rune's C flags (rune/backends/cpu/compiler.py: -O3 -march=native, -ffp-contract=off)
into a harness that runs OpenMP over the inputs. The reference is glibc's float64
function rounded to float32, which is exact unless the float64 result lies within
REF_ULPS of its ulps of a midpoint between two floats (glibc's float64 functions are
within a few ulps); those near ties are settled with mpmath at 120 bits (at 400 where
120 is still too close). NaN results only need to be NaN.

--write-fixes puts every mismatch (input, correct result) into the library's table
of hard cases (rn_math_fixes.h; rn_math.h says why a table is enough), rebuilds, and
checks those inputs again: every other input's result is unchanged by the table, so
a function with no mismatch left is correctly rounded over the whole range checked.
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import time

import mpmath
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rune.backends.cpu.compiler import FLAGS  # noqa: E402
from rune.codegen import mathlib  # noqa: E402

REF_ULPS = 16
CHUNK = 1 << 24
# functions computed from |x| with the sign put back (odd) or dropped (even), so that
# f(-x) is -f(x) (or f(x)) bit for bit: a check of the positive half covers both halves,
# and --write-fixes enters each hard case for -x too
SYMMETRY = {"tanh": "odd", "sinh": "odd", "atan": "odd", "asin": "odd", "asinh": "odd", "atanh": "odd",
            "erf": "odd", "cbrt": "odd", "cosh": "even"}

# function -> (glibc float64 reference, in C; mpmath's, at the working precision)
REFERENCE = {
    "exp": ("exp(x)", mpmath.exp), "exp2": ("exp2(x)", lambda x: mpmath.power(2, x)),
    "expm1": ("expm1(x)", mpmath.expm1), "log": ("log(x)", mpmath.log),
    "log2": ("log2(x)", lambda x: mpmath.log(x, 2)), "log10": ("log10(x)", mpmath.log10),
    "log1p": ("log1p(x)", mpmath.log1p), "sin": ("sin(x)", mpmath.sin), "cos": ("cos(x)", mpmath.cos),
    "tan": ("tan(x)", mpmath.tan), "tanh": ("tanh(x)", mpmath.tanh), "sinh": ("sinh(x)", mpmath.sinh),
    "cosh": ("cosh(x)", mpmath.cosh), "asin": ("asin(x)", mpmath.asin), "acos": ("acos(x)", mpmath.acos),
    "atan": ("atan(x)", mpmath.atan), "asinh": ("asinh(x)", mpmath.asinh),
    "acosh": ("acosh(x)", mpmath.acosh), "atanh": ("atanh(x)", mpmath.atanh),
    "erf": ("erf(x)", mpmath.erf), "erfc": ("erfc(x)", mpmath.erfc), "cbrt": ("cbrt(x)", mpmath.cbrt), "logistic": ("1.0 / (1.0 + exp(-x))", lambda x: 1 / (1 + mpmath.exp(-x))),
}

HARNESS = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>
#define RN_FN static inline
%(library)s

/* whether the float64 y lies within k of its ulps of a midpoint between two floats */
static int near_tie(double y, int k) {
  uint64_t u = rn_dbits(y) & 0x7fffffffffffffffull;
  if (u >= 0x7ff0000000000000ull) return 0;
  if (u >= (uint64_t)(1023 - 126) << 52) {
    uint64_t low = u & 0x1fffffffull;
    return low + k > 0x10000000ull && low < 0x10000000ull + k;
  }
  double s = rn_bitsd(u) * 0x1p149, f = fabs(s - rn_rint(s));
  return f >= 0.5 - k * 0x1p-52 * (s > 1 ? s : 1);
}

%(checks)s
"""

CHECK = r"""
/* inputs [start, stop): mismatches (input, ours, reference) and near ties (input, ours) */
void check_%(name)s(uint64_t start, uint64_t stop, uint32_t *bad, int64_t *nbad, uint32_t *ties, int64_t *nties,
                   int64_t cap) {
  #pragma omp parallel for schedule(dynamic, 65536)
  for (uint64_t i = start; i < stop; i++) {
    float xf = rn_bitsf((uint32_t)i);
    float ours = %(fn)s(xf);
    double x = (double)xf, y = %(ref)s;
    uint32_t o = rn_fbits(ours);
    if (y != y || xf != xf) {
      if ((ours == ours) == (y == y)) continue;
    } else if (near_tie(y, %(k)d)) {
      int64_t j;
      #pragma omp atomic capture
      j = (*nties)++;
      if (j < cap) { ties[2 * j] = (uint32_t)i; ties[2 * j + 1] = o; }
      continue;
    } else if (rn_fbits((float)y) == o) {
      continue;
    }
    int64_t j;
    #pragma omp atomic capture
    j = (*nbad)++;
    if (j < cap) { bad[3 * j] = (uint32_t)i; bad[3 * j + 1] = o; bad[3 * j + 2] = rn_fbits((float)y); }
  }
}
"""


def build(names):
    """The harness library for these functions (compiled with rune's C flags)."""
    checks = "".join(CHECK % {"name": n, "fn": mathlib.UNARY[n], "ref": REFERENCE[n][0], "k": REF_ULPS}
                     for n in names)
    text = HARNESS % {"library": mathlib.source(), "checks": checks}
    folder = tempfile.mkdtemp(prefix="rune-mathcheck-")
    src, lib = os.path.join(folder, "check.c"), os.path.join(folder, "check.so")
    with open(src, "w") as f:
        f.write(text)
    flags = [f for f in FLAGS if f != "-shared"]
    subprocess.run(["cc", *flags, "-shared", "-o", lib, src, "-lm"], check=True)
    return ctypes.CDLL(lib)


def round_f32(v):
    """The mpf v rounded to nearest even float32 (subnormals, overflow to inf), and
    whether v was too close to a midpoint to trust at its precision."""
    if v == 0:
        return np.float32(0.0), False
    sign, man, exp = (-1 if v < 0 else 1), int(abs(v).man), int(abs(v).exp)
    top = exp + man.bit_length() - 1
    q = max(top - 23, -149)
    if exp >= q:
        m, close = man << (exp - q), False
    else:
        shift = q - exp
        m, rem, half = man >> shift, man & ((1 << shift) - 1), 1 << (shift - 1)
        close = abs(rem - half) <= (1 << max(shift - 96, 0))
        if rem > half or (rem == half and m & 1):
            m += 1
    if m * 2.0 ** q >= 2.0 ** 128:
        return np.float32(sign * np.inf), close
    return np.float32(sign * m * 2.0 ** q), close


def exact(name, xbits):
    """f(x) correctly rounded to float32 (mpmath)."""
    x = mpmath.mpf(float(np.uint32(xbits).view(np.float32)))
    for prec in (120, 400):
        with mpmath.workprec(prec):
            r, close = round_f32(REFERENCE[name][1](x))
        if not close:
            break
    return r


def bits(f):
    return int(np.float32(f).view(np.uint32))


def run(lib, name, start, stop, cap=1 << 16):
    """(mismatches [(input, ours, correct)], near ties settled) over [start, stop)."""
    fn = getattr(lib, f"check_{name}")
    bad, ties = np.zeros(3 * cap, np.uint32), np.zeros(2 * cap, np.uint32)
    wrong, settled = [], 0
    for lo in range(start, stop, CHUNK):
        nbad, nties = ctypes.c_int64(0), ctypes.c_int64(0)
        fn(ctypes.c_uint64(lo), ctypes.c_uint64(min(lo + CHUNK, stop)), bad.ctypes.data_as(ctypes.c_void_p),
           ctypes.byref(nbad), ties.ctypes.data_as(ctypes.c_void_p), ctypes.byref(nties), ctypes.c_int64(cap))
        if nbad.value > cap or nties.value > cap:
            raise SystemExit(f"{name}: more than {cap} mismatches or near ties in [{lo:#x}, +{CHUNK:#x})")
        for i in range(nbad.value):   # the float64 reference can only be wrong near a tie: it is not here
            wrong.append((int(bad[3 * i]), int(bad[3 * i + 1]), int(bad[3 * i + 2])))
        for i in range(nties.value):
            x, ours = int(ties[2 * i]), int(ties[2 * i + 1])
            r = exact(name, x)
            settled += 1
            if bits(r) != ours and not (np.isnan(r) and np.isnan(np.uint32(ours).view(np.float32))):
                wrong.append((x, ours, bits(r)))
    return sorted(wrong), settled


FIXES = os.path.join(mathlib.HERE, "rn_math_fixes.h")


def read_fixes():
    """{function: {input bits: result bits}} from rn_math_fixes.h."""
    out = {}
    for cname, body in re.findall(r"rn_(\w+)f_fix\[\] = \{([^}]*)\}", open(FIXES).read()):
        words = [int(w, 16) for w in re.findall(r"0x[0-9a-f]+", body)]
        out[cname] = {words[i]: words[i + 1] for i in range(0, len(words) - 2, 2)}
    return out


def write_fixes(fixes):
    head = open(FIXES).read().split("RN_TABLE", 1)[0]
    lines = []
    for name, c in mathlib.UNARY.items():
        pairs = sorted(fixes.get(c[3:-1], {}).items())
        words = "".join(f"0x{i:08x}u, 0x{o:08x}u, " for i, o in pairs)
        lines.append(f"RN_TABLE uint32_t {c}_fix[] = {{{words}0xffffffffu, 0}};")
    with open(FIXES, "w") as f:
        f.write(head + "\n".join(lines) + "\n")
    mathlib.source.cache_clear()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="+", help=f"functions, or all: {' '.join(REFERENCE)}")
    p.add_argument("--start", type=lambda s: int(s, 0), default=0)
    p.add_argument("--stop", type=lambda s: int(s, 0), default=1 << 32)
    p.add_argument("--write-fixes", action="store_true")
    args = p.parse_args()
    names = list(REFERENCE) if args.names == ["all"] else args.names
    lib = build(names)
    failed, found = False, {}
    for name in names:
        t0 = time.perf_counter()
        wrong, settled = run(lib, name, args.start, args.stop)
        dt = time.perf_counter() - t0
        print(f"{name}: [{args.start:#x}, {args.stop:#x}) {dt:.0f} s, {settled} near ties settled by mpmath, "
              f"{len(wrong)} not correctly rounded", flush=True)
        for x, ours, good in wrong[:20]:
            xf = np.uint32(x).view(np.float32)
            print(f"   x={float(xf)!r} ({x:#010x}): ours {ours:#010x}, correct {good:#010x}")
        found[name] = {x: good for x, _, good in wrong}
        if name in SYMMETRY:   # the same hard case at -x
            flip = 0x80000000 if SYMMETRY[name] == "odd" else 0
            found[name].update({x ^ 0x80000000: good ^ flip for x, _, good in wrong})
        failed |= bool(wrong)
    if args.write_fixes:
        # read again (another run may have written since): a whole check replaces the
        # function's table, a range adds to it
        fixes = read_fixes()
        for name, cases in found.items():
            whole = args.start == 0 and (args.stop == 1 << 32 or (args.stop == 1 << 31 and name in SYMMETRY))
            fixes[name] = cases if whole else {**fixes.get(name, {}), **cases}
        write_fixes(fixes)
        if failed:
            lib = build(names)
            still = [(n, x) for n in names for x, good in fixes.get(n, {}).items()
                     if run(lib, n, x, x + 1)[0]]
            print(f"with the table of hard cases: {len(still)} still wrong {still[:10]}")
            failed = bool(still)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
