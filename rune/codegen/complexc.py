"""Complex values in C-style kernels, shared by the C and CUDA dialects.

A complex64 / complex128 value is a plain struct of its two parts (`rn_c64`,
`rn_c128`): NumPy's memory layout, so buffers are loaded and stored as they
are, and one text serves C (which has `_Complex`) and CUDA C++ (which has not).
The helpers (c_src/complex.h) are declared `RN_FN` like rune/codegen/helpers.py's.

Lowered: add, sub, neg, conj (exact); mul and div by rune's rule, the
sequences of correctly rounded real operations that eager computes with the
array module's real ufuncs (rune/backends/xp/complexfuncs.py), written here
operation for operation with the same selects (C is compiled with
-ffp-contract=off and NVRTC with --fmad=false, so no product is fused into a
sum, and RN_ROUNDED below stops GCC's vectoriser from fusing anyway); real,
imag, complex, converts to complex and to bool, eq/ne, select, isnan/isfinite; exp (glibc's
cexp as a formula over the kernels' libm: within a few ulp of eager, as the
real exp, its special values exactly eager's); and `reduce_sum` (a float-like
sum). |z| is the real `hypot` primitive of the parts (nx.abs, rune/nx/elementwise.py), whose C
(`rn_hypot_float/double`, rune's hypot, complexfuncs.py again) is here too.
Every other complex op has no rule here and stays on NumPy.
"""
import math

import numpy as np

from ..base.numerics import HYPOT_SCALES
from .helpers import float_literal, instantiate, read

# complex dtype name -> (struct, part C type, libm suffix of the part type)
STRUCTS = {"complex64": ("rn_c64", "float", "f"), "complex128": ("rn_c128", "double", "")}
CTYPES = {name: s[0] for name, s in STRUCTS.items()}
PART_DTYPES = {"float": np.dtype(np.float32), "double": np.dtype(np.float64)}


def is_complex(dtype):
    return dtype.kind == "c"


def struct(dtype):
    return STRUCTS[dtype.name][0]


def const(value, dtype):
    s, part, _ = STRUCTS[dtype.name]
    z = complex(value)
    return f"{s}_make({float_literal(z.real, part)}, {float_literal(z.imag, part)})"


# ---------------------------------------------------------------- expression rules
# The same signature as expressions.RULES: (renderer, node, args, arg dtypes) -> C or None.

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
# bit. A product whose rounding rune's rule needs is wrapped in RN_ROUNDED
# (c_src/complex_rounded.h): GCC's assoc barrier, which keeps it a rounded product
# (vmulpd then vaddsubpd, exact); NVRTC (--fmad=false) and compilers without the
# builtin need nothing.
_ROUNDED, _STRUCT = read("complex_rounded.h"), read("complex.h")


def _struct_helpers(s, t, sfx):
    """c_src/complex.h for the struct `s` of parts of the C type `t` (libm suffix `sfx`)."""
    big, down, small, up = HYPOT_SCALES[PART_DTYPES[t]]
    hypot = dict(zip(("big", "down", "small", "up", "down_back", "up_back"),
                     (float_literal(v, t) for v in (big, down, small, up, 1 / down, 1 / up))))
    # the largest integer T with e^T finite: glibc's cexp threshold
    exp_t = 88 if t == "float" else 709
    u, absmask, infbits = (("uint32_t", "0x7fffffffu", "0x7f800000u") if t == "float" else
                           ("uint64_t", "0x7fffffffffffffffull", "0x7ff0000000000000ull"))
    return instantiate(_STRUCT, s=s, t=t, sfx=sfx, u=u, absmask=absmask, infbits=infbits, **hypot,
                       exp_t=float_literal(exp_t, t),
                       exp_big=float_literal(np.array(math.exp(exp_t), PART_DTYPES[t]), t))


# The struct types and their arithmetic, for both dialects (read and filled in once).
_HELPERS = "\n" + _ROUNDED + "\n".join("\n" + _struct_helpers(*st).rstrip("\n") for st in STRUCTS.values()) + "\n"


def helpers():
    """The struct types and their arithmetic, for both dialects."""
    return _HELPERS
