"""The C helper text of the kernels' preludes: C files in rune/codegen/c_src/, read once here.

Both dialects' preludes are their head (`c_prelude.h`, `cuda_prelude.h`) followed by
`c_helpers()`, `complexc.helpers()` and `index_helpers()`. Every helper is declared
`RN_FN` (C: static inline, CUDA: static __device__ __forceinline__) and avoids C-only
types, so one text serves both. The files:

- bf16.h, conversions.h, nextafter16.h: bfloat16 storage and rounding, conversions as
  rune defines them (rune/backends/float_semantics.py), nextafter in float16/bfloat16;
- float_divmod.h, int_divmod.h: NumPy's floor division and remainder (and logaddexp),
  templates instantiated per C type;
- index.h: runtime indices, integer powers, Threefry-2x32;
- complex.h, complex_rounded.h: the complex structs and their arithmetic (complexc.py);
- c_prelude.h, cuda_prelude.h: each dialect's head.

A template's `${name}` placeholders are filled by `instantiate` (string.Template). A
file's leading lines that start with "// " are notes for the reader, dropped when it is
read. The prelude's text is part of every kernel's disk-cache key
(rune/backends/pipeline.py), so any change to these files recompiles each kernel once.
"""
import math
from importlib import resources
from string import Template

import numpy as np


def read(name):
    """The text of c_src/`name` without its leading "// " note lines."""
    lines = (resources.files(__package__) / "c_src" / name).read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("// "):
        lines.pop(0)
    return "".join(lines)


def instantiate(template, **values):
    """A template's text (from `read`) with its `${name}`s filled in (each one required)."""
    return Template(template).substitute(values)


def float_literal(value, ctype):
    """`value` as a C literal of the type `ctype` ("float", "double"): its exact hex (the
    cast rounds it where it is not a value of the type), NaN and the infinities spelled out."""
    v = float(value)
    if math.isnan(v):
        return f"(({ctype})NAN)"
    if math.isinf(v):
        return f"(({ctype}){'-' if v < 0 else ''}INFINITY)"
    return f"(({ctype}){v.hex()})"


_BF16, _CONVERSIONS, _NEXTAFTER16, _INDEX = (read(f) for f in ("bf16.h", "conversions.h", "nextafter16.h",
                                                                    "index.h"))
_FLOAT_DIVMOD, _INT_DIVMOD = read("float_divmod.h"), read("int_divmod.h")


def _float_to_int_helpers():
    """rn_f2i_<int type>(double): float -> integer as rune defines it, saturating (NaN -> 0,
    truncation inside the range: CUDA's cvt.rzi.sat), one line per integer type from its
    bounds."""
    lines = []
    for dtype in (np.dtype(f"{k}int{b}") for k in ("", "u") for b in (8, 16, 32, 64)):
        info, t = np.iinfo(dtype), f"{dtype.name}_t"
        bits = 8 * dtype.itemsize
        # the exclusive upper bound and the minimum are powers of two (or 0), exact in double
        above = float(2 ** (bits - 1) if info.min else 2 ** bits)
        lowest = f"(({t})({info.min + 1}LL - 1))" if info.min else "0"
        lines.append(f"RN_FN {t} rn_f2i_{dtype.name}(double x) {{ return x != x ? 0 : x >= {above!r} ? "
                     f"({t}){info.max}{'ULL' if dtype.kind == 'u' else 'LL'} : x <= {float(info.min)!r} ? "
                     f"{lowest} : ({t})x; }}")
    return "\n".join(lines)


def _divmod_helpers():
    """NumPy's floor division and remainder (Python-signed; integer division by zero
    gives 0) and logaddexp, one set per C type."""
    floats = [instantiate(_FLOAT_DIVMOD, t=t, s=s, ln2=float_literal(ln2, t))
              for t, s, ln2 in (("float", "f", np.float32(math.log(2))), ("double", "", math.log(2)))]
    ints = [instantiate(_INT_DIVMOD, bits=bits) for bits in (8, 16, 32, 64)]
    return "\n".join("\n" + text.rstrip("\n") for text in floats + ints)


# Exact NumPy semantics C leaves undefined or different: bfloat16 in float32, conversions,
# 16-bit nextafter, floor division and remainder.
_C_HELPERS = ("\n" + _BF16 + "\n" + _float_to_int_helpers() + "\n\n" + _CONVERSIONS + "\n\n\n"
              + _NEXTAFTER16 + "\n" + _divmod_helpers() + "\n")


def c_helpers():
    """Exact NumPy semantics C leaves undefined or different, one helper per C type
    (shared by the C and CUDA dialects)."""
    return _C_HELPERS


def index_helpers():
    """Index arithmetic, integer powers and Threefry, shared by the C and CUDA dialects."""
    return "\n" + _INDEX
