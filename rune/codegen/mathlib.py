"""rune's float32 math library (c_src/rn_math.h): one C text for both dialects.

The functions use only IEEE 754 basic operations, explicit fma and integer bit
manipulation, so the C kernels (-ffp-contract=off) and the CUDA kernels
(--fmad=false, no -ftz) compute the same bits; float32 results are correctly
rounded (docs/numerics.md: how, and what the exhaustive checker found).

`source()` is the library's text (its table of hard cases inlined), for a dialect's
prelude after `RN_FN` and `RN_MATH_FN` are defined and <stdint.h>/<string.h> (or
CUDA's) are in: the C dialect compiles it once per machine into a shared library
(rune/backends/cpu/math_library.py) and its kernels declare the functions
(`declarations`); the CUDA dialect includes `branching_source()` in every prelude.
`FAST` names the functions with a fast path (c_src/rn_math_fast.h: the same bits for
about half the work, the full evaluation where it flags an element): eager units run
it in blocks, the C dialect's SIMD clones lane by lane (c_src/simd_clones.h), CUDA
kernels per thread (`branching_source`). `UNARY` and `BINARY` map rune's op
names to the library's float32 functions; 16-bit floats compute in float32 and round
once on store, as before.
"""
import functools
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "c_src")

# rune op -> C function (float -> float); the order is the checker's priority order
UNARY = {
    "exp": "rn_expf", "exp2": "rn_exp2f", "expm1": "rn_expm1f", "log": "rn_logf", "log2": "rn_log2f",
    "log10": "rn_log10f", "log1p": "rn_log1pf", "sin": "rn_sinf", "cos": "rn_cosf", "tan": "rn_tanf",
    "tanh": "rn_tanhf", "sinh": "rn_sinhf", "cosh": "rn_coshf", "asin": "rn_asinf", "acos": "rn_acosf",
    "atan": "rn_atanf", "asinh": "rn_asinhf", "acosh": "rn_acoshf", "atanh": "rn_atanhf",
    "erf": "rn_erff", "erfc": "rn_erfcf", "cbrt": "rn_cbrtf", "logistic": "rn_logisticf",
}
# (float, float) -> float
BINARY = {"atan2": "rn_atan2f", "hypot": "rn_hypotf", "pow": "rn_powf", "logaddexp": "rn_logaddexpf"}
# library function -> its fast path (c_src/rn_math_fast.h: `float f(float x, int *slow)`,
# the library's bits wherever it leaves *slow at 0)
FAST = {"rn_expf": "rn_expf_fast", "rn_logf": "rn_logf_fast", "rn_tanhf": "rn_tanhf_fast",
        "rn_logisticf": "rn_logisticf_fast", "rn_sinf": "rn_sinf_fast", "rn_cosf": "rn_cosf_fast",
        "rn_erff": "rn_erff_fast"}
assert all(fn in UNARY.values() for fn in FAST), "fast paths are of one-argument functions (their callers assume it)"


@functools.lru_cache(maxsize=None)
def source():
    """rn_math.h with its table of hard cases (rn_math_fixes.h) in place of the include."""
    with open(os.path.join(HERE, "rn_math.h")) as f:
        text = f.read()
    with open(os.path.join(HERE, "rn_math_fixes.h")) as f:
        fixes = f.read()
    return text.replace('#include "rn_math_fixes.h"\n', fixes)


@functools.lru_cache(maxsize=None)
def fast_source():
    """rn_math_fast.h: the fast paths of `FAST`, for a dialect's prelude (as `source()`)."""
    with open(os.path.join(HERE, "rn_math_fast.h")) as f:
        return f.read()


def branching_source():
    """The library for a dialect whose functions may branch per element (CUDA, where a
    warp runs the library's full evaluation only when one of its lanes needs it): each
    function with a fast path tries it first and calls the full evaluation, renamed
    `<name>_full` and called out of line, on what it flags. The same bits as `source()` (both are the correctly
    rounded value: scripts/check_fast_paths.py), at about half the double-precision work."""
    full = "".join(f"#define {fn} {fn}_full\n" for fn in FAST)
    public = "".join(f"#undef {fn}\n" for fn in FAST)
    # the full evaluation out of line (RN_RARE_FN): kernels stay small, and so does the
    # fast path's register use
    rare = "#ifndef RN_RARE_FN\n#define RN_RARE_FN RN_FN\n#endif\n" + "".join(
        f"RN_RARE_FN float {fn}_rare(float x) {{ return {fn}_full(x); }}\n" for fn in FAST)
    tried = "".join(f"RN_MATH_FN float {fn}(float x) {{ int slow; float y = {fast}(x, &slow); "
                    f"return slow ? {fn}_rare(x) : y; }}\n" for fn, fast in FAST.items())
    return full + source() + public + fast_source() + rare + tried


def function(op):
    """The library's float32 function for rune op `op`, or None."""
    return UNARY.get(op) or BINARY.get(op)


def functions():
    """The library's public functions' C names."""
    return (*UNARY.values(), *BINARY.values())


def arity(fn):
    """How many float arguments the library function `fn` takes."""
    return 2 if fn in BINARY.values() else 1


def declarations(attributes):
    """C declarations of the library's public functions, each with `attributes`."""
    return "".join(f"{attributes} float {fn}({', '.join(['float'] * arity(fn))});\n" for fn in functions())
