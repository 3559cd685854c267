"""Complex values in C-style kernels, shared by the C and CUDA dialects.

A complex64 / complex128 value is a plain struct of its two parts (`rn_c64`,
`rn_c128`): NumPy's memory layout, so buffers are loaded and stored as they
are, and one text serves C (which has `_Complex`) and CUDA C++ (which has not).
The helpers are declared `RN_FN` like `render._c_helpers`.

Only what gives NumPy's bits is lowered: add, sub, neg, conj (exact), real,
imag, complex, converts to complex, eq/ne, select, isnan/isfinite and
`reduce_sum` (a float-like sum). `mul` and `abs` stay on NumPy: its array
loops compute them with FMA and its own scaled hypot where the CPU has them
(and plainly elsewhere, or for negative strides), so no single formula
reproduces eager's bits. `div` too: `rn_c*_div` below is NumPy's Smith-style
loop and matches it as scalar code, but GCC 12's SLP vectoriser (-O3
-march=native) changes its float64 results by an ulp inside `omp simd` loops.
Every other complex op has no rule here and stays on NumPy too.
"""
import math

# complex dtype name -> (struct, part C type, libm suffix of the part type)
STRUCTS = {"complex64": ("rn_c64", "float", "f"), "complex128": ("rn_c128", "double", "")}
CTYPES = {name: s[0] for name, s in STRUCTS.items()}


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
# The same signature as render.RULES: (renderer, node, args, arg dtypes) -> C or None.

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
    imaginary part +0). From complex to real NumPy drops the imaginary part with
    a warning eager reports: left to eager."""
    src, dst = dts[0], node.dtype
    if not is_complex(dst):
        return None
    s, part, _ = STRUCTS[dst.name]
    if is_complex(src):
        return a[0] if src == dst else f"{s}_make(({part})({a[0]}).re, ({part})({a[0]}).im)"
    if src.name == "bfloat16":
        return None
    # bool, integers, and floats (16-bit ones already computed as float): one rounding to the part type
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
    "add": _binary("add"), "sub": _binary("sub"),
    "neg": _unary("neg"), "conj": _unary("conj"),
    "real": _part("re"), "imag": _part("im"), "complex": _make,
    "eq": _compare("eq"), "ne": _compare("ne"), "select": _select, "convert": _convert,
    "isnan": _nan_test(True, "isnan"), "isfinite": _nan_test(False, "isfinite"),
    "stop_gradient": _identity,
}


def sum_reducer(r, dtype, acc, v):
    """`reduce_sum` of complex: (initial value, update, C OpenMP reduction clause)."""
    s = struct(dtype)
    return f"{s}_make(0, 0)", f"{s}_add({acc}, {v})", f"{s}_add"


def helpers():
    """The struct types and their arithmetic, for both dialects."""
    parts = []
    for s, t, sfx in STRUCTS.values():
        parts.append(f"""
typedef struct {{ {t} re, im; }} {s};
RN_FN {s} {s}_make({t} re, {t} im) {{ {s} z; z.re = re; z.im = im; return z; }}
RN_FN {s} {s}_add({s} a, {s} b) {{ return {s}_make(a.re + b.re, a.im + b.im); }}
RN_FN {s} {s}_sub({s} a, {s} b) {{ return {s}_make(a.re - b.re, a.im - b.im); }}
RN_FN {s} {s}_neg({s} a) {{ return {s}_make(-a.re, -a.im); }}
RN_FN {s} {s}_conj({s} a) {{ return {s}_make(a.re, -a.im); }}
RN_FN int {s}_eq({s} a, {s} b) {{ return a.re == b.re && a.im == b.im; }}
RN_FN int {s}_ne({s} a, {s} b) {{ return a.re != b.re || a.im != b.im; }}
/* NumPy's complex division loop (Smith's method; a zero divisor gives inf/nan parts) */
RN_FN {s} {s}_div({s} a, {s} b) {{
  const {t} br_abs = fabs{sfx}(b.re), bi_abs = fabs{sfx}(b.im);
  if (br_abs >= bi_abs) {{
    if (br_abs == 0 && bi_abs == 0) return {s}_make(a.re / br_abs, a.im / br_abs);
    const {t} rat = b.im / b.re, scl = ({t})1.0 / (b.re + b.im * rat);
    return {s}_make((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
  }}
  const {t} rat = b.re / b.im, scl = ({t})1.0 / (b.im + b.re * rat);
  return {s}_make((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
}}""")
    return "\n".join(parts) + "\n"


def omp_reductions():
    """OpenMP user reductions so complex sums keep the C loops' simd / parallel clauses."""
    return "".join(f"#pragma omp declare reduction({s}_add : {s} : omp_out = {s}_add(omp_out, omp_in)) "
                   f"initializer(omp_priv = {s}_make(0, 0))\n" for s, _, _ in STRUCTS.values())

