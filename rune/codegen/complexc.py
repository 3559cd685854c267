"""Complex values in C-style kernels, shared by the C and CUDA dialects.

A complex64 / complex128 value is a plain struct of its two parts (`rn_c64`,
`rn_c128`): NumPy's memory layout, so buffers are loaded and stored as they
are, and one text serves C (which has `_Complex`) and CUDA C++ (which has not).
The helpers are declared `RN_FN` like `cstyle.c_helpers`.

Lowered: add, sub, neg, conj (exact); mul and div by rune's rule, the
sequences of correctly rounded real operations that eager computes with the
array module's real ufuncs (rune/backends/xp/complexfuncs.py), written here
operation for operation with the same selects (C is compiled with
-ffp-contract=off and NVRTC with --fmad=false, so no product is fused into a
sum, and RN_ROUNDED below stops GCC's vectoriser from fusing anyway); real,
imag, complex, converts to complex and to bool, eq/ne, select, isnan/isfinite; exp (glibc's
cexp as a formula over the kernels' libm: within a few ulp of eager, as the
real exp, its special values exactly eager's); and `reduce_sum` (a float-like
sum). |z| is the real `hypot` primitive of the parts (rune/nx/ops.py), whose C
(`rn_hypot_float/double`, rune's hypot, complexfuncs.py again) is here too.
Every other complex op has no rule here and stays on NumPy.
"""
import math

import numpy as np

from ..base.numerics import HYPOT_SCALES

# complex dtype name -> (struct, part C type, libm suffix of the part type)
STRUCTS = {"complex64": ("rn_c64", "float", "f"), "complex128": ("rn_c128", "double", "")}
CTYPES = {name: s[0] for name, s in STRUCTS.items()}
PART_DTYPES = {"float": np.dtype(np.float32), "double": np.dtype(np.float64)}


def is_complex(dtype):
    return dtype.kind == "c"


def struct(dtype):
    return STRUCTS[dtype.name][0]


def part_const(value, part_type):
    """A float part as an exact C literal (hex), NaN and infinities spelled out."""
    v = float(value)
    if math.isnan(v):
        return f"(({part_type})NAN)"
    if math.isinf(v):
        return f"(({part_type}){'-' if v < 0 else ''}INFINITY)"
    return f"(({part_type}){v.hex()})"


def const(value, dtype):
    s, part, _ = STRUCTS[dtype.name]
    z = complex(value)
    return f"{s}_make({part_const(z.real, part)}, {part_const(z.imag, part)})"


# ---------------------------------------------------------------- expression rules
# The same signature as cstyle.RULES: (renderer, node, args, arg dtypes) -> C or None.

def _binary(fn):
    def rule(r, node, a, dts):
        if not all(is_complex(d) for d in dts):
            return None
        return f"{struct(node.dtype)}_{fn}({a[0]}, {a[1]})"
    return rule


def _unary(fn):
    def rule(r, node, a, dts):
        return f"{struct(node.dtype)}_{fn}({a[0]})" if is_complex(dts[0]) else None
    return rule


def _part(field):
    def rule(r, node, a, dts):
        return f"({a[0]}).{field}" if is_complex(dts[0]) else None
    return rule


def _make(r, node, a, dts):
    if any(is_complex(d) or d.kind not in "f" or d.itemsize < 4 for d in dts):
        return None   # the primitive takes float32/float64 parts
    _, part, _ = STRUCTS[node.dtype.name]
    return f"{struct(node.dtype)}_make(({part})({a[0]}), ({part})({a[1]}))"


def _compare(fn):
    def rule(r, node, a, dts):
        if dts[0] != dts[1] or not is_complex(dts[0]):
            return None
        return f"{struct(dts[0])}_{fn}({a[0]}, {a[1]})"
    return rule


def _select(r, node, a, dts):
    return f"(({a[0]}) ? {a[1]} : {a[2]})"


def _convert(r, node, a, dts):
    """To complex from complex (each part cast) or from a real number (the
    imaginary part +0), or from complex to bool. From complex to a number NumPy
    drops the imaginary part with a warning eager reports: left to eager."""
    src, dst = dts[0], node.dtype
    if is_complex(src) and dst.kind == "b":   # either part nonzero (a NaN is), as NumPy
        return f"((({a[0]}).re != 0) | (({a[0]}).im != 0))"
    if not is_complex(dst):
        return None
    s, part, _ = STRUCTS[dst.name]
    if is_complex(src):
        return a[0] if src == dst else f"{s}_make(({part})({a[0]}).re, ({part})({a[0]}).im)"
    # bool, integers, and floats (16-bit ones already computed as float, exactly): one
    # rounding to the part type
    return f"{s}_make(({part})({a[0]}), ({part})0)"


def _nan_test(any_part, test):
    def rule(r, node, a, dts):
        if not is_complex(dts[0]):
            return None
        join = " || " if any_part else " && "
        return f"({test}(({a[0]}).re){join}{test}(({a[0]}).im))"
    return rule


def _identity(r, node, a, dts):
    return a[0]


RULES = {
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"), "div": _binary("div"),
    "neg": _unary("neg"), "conj": _unary("conj"), "exp": _unary("exp"),
    "real": _part("re"), "imag": _part("im"), "complex": _make,
    "eq": _compare("eq"), "ne": _compare("ne"), "select": _select, "convert": _convert,
    "isnan": _nan_test(True, "isnan"), "isfinite": _nan_test(False, "isfinite"),
    "stop_gradient": _identity,
}


def sum_reducer(r, dtype, acc, v):
    """`reduce_sum` of complex: (initial value, update)."""
    s = struct(dtype)
    return f"{s}_make(0, 0)", f"{s}_add({acc}, {v})"


# GCC 12's SLP vectoriser fuses a product feeding one lane's subtraction and the
# next lane's addition into vfmaddsub (a*b - c*d, a*d + b*c: complex mul; so
# was NumPy's division loop) even under -ffp-contract=off, changing the last
# bit. A product whose rounding rune's rule needs is wrapped in RN_ROUNDED:
# GCC's assoc barrier, which keeps it a rounded product (vmulpd then vaddsubpd,
# exact); NVRTC (--fmad=false) and compilers without the builtin need nothing.
_ROUNDED = """
#if defined(__has_builtin)
#if __has_builtin(__builtin_assoc_barrier)
#define RN_ROUNDED(x) __builtin_assoc_barrier(x)
#endif
#endif
#ifndef RN_ROUNDED
#define RN_ROUNDED(x) (x)
#endif
"""


def helpers():
    """The struct types and their arithmetic, for both dialects."""
    parts = []
    for s, t, sfx in STRUCTS.values():
        big, down, small, up = HYPOT_SCALES[PART_DTYPES[t]]
        big, down, small, up, down_back, up_back = (part_const(v, t)
                                                    for v in (big, down, small, up, 1 / down, 1 / up))
        # the largest integer T with e^T finite: glibc's cexp threshold
        exp_t = 88 if t == "float" else 709
        exp_t, exp_big = part_const(exp_t, t), part_const(np.array(math.exp(exp_t), PART_DTYPES[t]), t)
        u, absmask, infbits = (("uint32_t", "0x7fffffffu", "0x7f800000u") if t == "float" else
                               ("uint64_t", "0x7fffffffffffffffull", "0x7ff0000000000000ull"))
        parts.append(f"""
/* c ? a : b by bit masks: GCC vectorises no loop with a branch, and it keeps ?:
   as one where an arm may trap (a division, -ftrapping-math) or holds a call */
RN_FN {u} rn_bits_{t}({t} a) {{ {u} b; memcpy(&b, &a, sizeof b); return b; }}
RN_FN {t} rn_pick_{t}(int c, {t} a, {t} b) {{   /* c ? a : b, without a branch */
  const {u} m = ({u})0 - ({u})(c != 0), r = (rn_bits_{t}(a) & m) | (rn_bits_{t}(b) & ~m);
  {t} out; memcpy(&out, &r, sizeof out); return out;
}}
/* rune's hypot (the `hypot` primitive; |z| is hypot(re, im)): complexfuncs.py */
RN_FN {t} rn_hypot_{t}({t} x, {t} y) {{
  x = fabs{sfx}(x); y = fabs{sfx}(y);
  const int large = (x > {big}) | (y > {big}), tiny = (x < {small}) & (y < {small});   /* | &: no branch */
  const {t} k = rn_pick_{t}(large, {down}, rn_pick_{t}(tiny, {up}, 1));
  const {t} back = rn_pick_{t}(large, {down_back}, rn_pick_{t}(tiny, {up_back}, 1));
  const {t} xs = x * k, ys = y * k, r = sqrt{sfx}(RN_ROUNDED(xs * xs) + RN_ROUNDED(ys * ys)) * back;
  return rn_pick_{t}((x == ({t})INFINITY) | (y == ({t})INFINITY), ({t})INFINITY, r);
}}
typedef struct {{ {t} re, im; }} {s};
RN_FN {s} {s}_make({t} re, {t} im) {{ {s} z; z.re = re; z.im = im; return z; }}
RN_FN {s} {s}_add({s} a, {s} b) {{ return {s}_make(a.re + b.re, a.im + b.im); }}
RN_FN {s} {s}_sub({s} a, {s} b) {{ return {s}_make(a.re - b.re, a.im - b.im); }}
RN_FN {s} {s}_neg({s} a) {{ return {s}_make(-a.re, -a.im); }}
RN_FN {s} {s}_conj({s} a) {{ return {s}_make(a.re, -a.im); }}
RN_FN int {s}_eq({s} a, {s} b) {{ return a.re == b.re && a.im == b.im; }}
RN_FN int {s}_ne({s} a, {s} b) {{ return a.re != b.re || a.im != b.im; }}
/* rune's complex mul and div (complexfuncs.py has the rule and eager's same
   sequence, its selects these rn_picks) */
RN_FN {s} {s}_mul({s} a, {s} b) {{
  return {s}_make(RN_ROUNDED(a.re * b.re) - RN_ROUNDED(a.im * b.im),
                 RN_ROUNDED(a.re * b.im) + RN_ROUNDED(a.im * b.re));
}}
RN_FN {s} {s}_div({s} a, {s} b) {{
  const {t} ac = fabs{sfx}(b.re), ad = fabs{sfx}(b.im);
  const int first = ac >= ad;
  const {t} p = rn_pick_{t}(first, b.re, b.im), q = rn_pick_{t}(first, b.im, b.re);
  const {t} u = rn_pick_{t}(first, a.re, a.im), v = rn_pick_{t}(first, a.im, a.re);
  const {t} rat = q / p, scl = ({t})1 / (p + RN_ROUNDED(q * rat)), w = RN_ROUNDED(u * rat);
  const {t} re = (u + RN_ROUNDED(v * rat)) * scl, im = rn_pick_{t}(first, v - w, w - v) * scl;
  const int zero = (ac == 0) & (ad == 0);
  return {s}_make(rn_pick_{t}(zero, a.re / ac, re), rn_pick_{t}(zero, a.im / ac, im));
}}
/* exp(x + iy) = e^x cos y + i e^x sin y, as glibc's cexp (NumPy's): e^(x - T) (e^T cos y)
   where e^x alone would overflow, an imaginary zero kept (also beside an infinite or
   NaN x), and C99's values for an infinite x beside an infinite or NaN y (sin and
   cos of a zero of y's sign give them). The tests read the bits (isinf would be
   a branch beside the calls, as would ?:) and the choices are rn_picks. The libm
   calls are the kernels' (vector variants in C, CUDA's): within a few ulp of
   eager, as the real exp; the special values are eager's. */
RN_FN {s} {s}_exp({s} z) {{
  const {t} x = z.re, y = z.im;
  const {u} ax = rn_bits_{t}(x) & {absmask}, ay = rn_bits_{t}(y) & {absmask};
  const int big = x > {exp_t}, edge = (ax == {infbits}) & (ay >= {infbits});
  const {t} yy = rn_pick_{t}(edge, copysign{sfx}(({t})0, y), y);
  const {t} e = exp{sfx}(x - rn_pick_{t}(big, {exp_t}, 0)), g = rn_pick_{t}(big, {exp_big}, 1);
  const {t} c = cos{sfx}(yy), sn = sin{sfx}(yy);
  return {s}_make(e * (c * g), rn_pick_{t}(y == 0, 1, e) * (sn * g));
}}""")
    return _ROUNDED + "\n".join(parts) + "\n"
