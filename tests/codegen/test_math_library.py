"""rune's float32 math library (rune/codegen/c_src/rn_math.h, docs/numerics.md).

- Correct rounding: each function on a sample of inputs (random bit patterns, which
  reach every binade, NaN and the infinities, and values where the function is
  neither tiny nor saturated), its table of hard cases, the known hard and exact
  cases, and the special values, against the exact value rounded to nearest even:
  NumPy's float64 (glibc's) rounded to float32 where that is provably the same (the
  float64 lies farther than REF_ULPS of its ulps from a midpoint between two floats),
  mpmath at 120 bits elsewhere. The exhaustive check of every float32 input is
  scripts/check_math_exhaustive.py (minutes per function).
- Special values (C99 Annex F; NumPy's logaddexp): the same reference, which
  follows them, compared by bits (signed zeros included; any NaN is a NaN).

The library is compiled directly with rune's C flags; tests/codegen/
test_math_library.py's last tests run it through rune's C and (emulated) CUDA
kernels.
"""
import ctypes
import hashlib
import math
import os
import subprocess
import tempfile

import mpmath
import numpy as np
import pytest

from rune.backends import disk_cache
from rune.backends.cpu.compiler import FLAGS
from rune.codegen import mathlib

pytestmark = pytest.mark.cc

REF_ULPS = 16
SAMPLE = 100_000
F32 = np.float32

# op -> (float64 reference on float64 arrays, mpmath's function)
UNARY_REFERENCE = {
    "exp": (np.exp, mpmath.exp), "exp2": (np.exp2, lambda x: mpmath.power(2, x)),
    "expm1": (np.expm1, mpmath.expm1), "log": (np.log, mpmath.log),
    "log2": (np.log2, lambda x: mpmath.log(x, 2)), "log10": (np.log10, mpmath.log10),
    "log1p": (np.log1p, mpmath.log1p), "sin": (np.sin, mpmath.sin), "cos": (np.cos, mpmath.cos),
    "tan": (np.tan, mpmath.tan), "tanh": (np.tanh, mpmath.tanh), "sinh": (np.sinh, mpmath.sinh),
    "cosh": (np.cosh, mpmath.cosh), "asin": (np.arcsin, mpmath.asin), "acos": (np.arccos, mpmath.acos),
    "atan": (np.arctan, mpmath.atan), "asinh": (np.arcsinh, mpmath.asinh),
    "acosh": (np.arccosh, mpmath.acosh), "atanh": (np.arctanh, mpmath.atanh),
    "erf": (np.frompyfunc(math.erf, 1, 1), mpmath.erf), "erfc": (np.frompyfunc(math.erfc, 1, 1), mpmath.erfc),
    "cbrt": (np.cbrt, mpmath.cbrt),
    "logistic": (lambda x: 1 / (1 + np.exp(-x)), lambda x: 1 / (1 + mpmath.exp(-x))),
}


def _logaddexp64(a, b):
    """NumPy's float64 logaddexp, with the cancelling sums (result below a quarter of
    the log1p, where float64 loses bits) marked NaN... as not provably close: they go
    to mpmath."""
    out = np.logaddexp(a, b)
    m = np.maximum(a, b)
    cancel = np.isfinite(out) & (m < 0) & (np.abs(out) < 0.25 * np.log1p(np.exp(-np.abs(a - b))))
    return out, cancel


def _logaddexp_mp(a, b):
    """log(e^a + e^b) at 600 bits: the sum may cancel to 2^-150 of its terms."""
    with mpmath.workprec(600):
        return max(a, b) + mpmath.log1p(mpmath.exp(-abs(a - b)))


BINARY_REFERENCE = {
    "atan2": (np.arctan2, mpmath.atan2), "hypot": (np.hypot, mpmath.hypot),
    "pow": (np.power, mpmath.power),
    "logaddexp": (None, lambda a, b: _logaddexp_mp(a, b)),
}

# where a sample's second half is drawn: values where the function varies
RANGES = {"exp": (-104, 89), "exp2": (-150, 128), "expm1": (-20, 89), "log1p": (-1, 10), "sinh": (-90, 90),
          "cosh": (-90, 90), "tanh": (-10, 10), "asin": (-1, 1), "acos": (-1, 1), "atanh": (-1, 1),
          "acosh": (1, 100), "erf": (-4, 4), "erfc": (-4, 10.1), "logistic": (-104, 20)}
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-45, -1e-45,
                     1.1754942e-38, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 88.72284, 88.72283, -103.97208,
                     -87.33655, 127.99999, 128.0, -149.0, -150.0, 1e-30, -1e-30, 10.0, 1e30], F32)

# known hard and exact cases per binary function (pairs)
BINARY_CASES = {
    "pow": [(90601.0, 1.5), (707281.0, 1.25), (2.0, -150.0), (2.0, -149.0), (2.0, 127.0), (2.0, 128.0),
            (3.0, 15.0), (-3.0, 15.0), (0.5, 149.0), (10.0, 10.0), (-2.0, -149.0), (4.0, 0.5),
            (16777215.0, 1.0), (1.0000001, 1e8), (0.99999994, 2.5e8), (-1.0, np.inf), (-0.0, -3.0),
            (-0.0, 3.0), (-np.inf, -3.0), (-np.inf, 2.0), (-8.0, 1.0 / 3.0), (np.nan, 0.0), (1.0, np.nan)],
    "hypot": [(3.0, 4.0), (np.inf, np.nan), (np.nan, -np.inf), (1e-45, 1e-45), (3.4028235e38, 3.4028235e38),
              (16777215.0, 5792.0), (-0.0, 0.0)],
    "atan2": [(0.0, -0.0), (-0.0, -0.0), (0.0, 0.0), (-0.0, 1.0), (1.0, 0.0), (np.inf, np.inf),
              (-np.inf, -np.inf), (1.0, -np.inf), (-1.0, np.inf), (1e-45, 3.4028235e38), (3.4028235e38, 1e-45)],
    "logaddexp": [(-4.1006317e-34, -76.71693), (-0.6931472, -0.6931472), (-0.6931471, -0.6931473), (np.inf, np.inf), (-np.inf, -np.inf),
                  (np.inf, -np.inf), (-np.inf, 1.0), (0.0, -200.0), (-100.0, -100.0), (88.0, 88.0)],
}

HEADER = "#include <stdint.h>\n#include <string.h>\n#include <math.h>\n#define RN_FN static inline\n"


@pytest.fixture(scope="module")
def library():
    """The library and one loop per function over float32 arrays, built once per source."""
    loops = [f"void u_{op}(const float *x, float *y, int64_t n) {{ for (int64_t i = 0; i < n; i++) "
             f"y[i] = {fn}(x[i]); }}" for op, fn in mathlib.UNARY.items()]
    loops += [f"void b_{op}(const float *x, const float *z, float *y, int64_t n) {{ for (int64_t i = 0; "
              f"i < n; i++) y[i] = {fn}(x[i], z[i]); }}" for op, fn in mathlib.BINARY.items()]
    loops += [f"void f_{op}(const float *x, float *y, int32_t *slow, int64_t n) {{ for (int64_t i = 0; "
              f"i < n; i++) {{ int s; y[i] = {mathlib.FAST[fn]}(x[i], &s); slow[i] = s; }} }}"
              for op, fn in mathlib.UNARY.items() if fn in mathlib.FAST]
    source = HEADER + mathlib.source() + mathlib.fast_source() + "\n".join(loops) + "\n"
    flags = [f for f in FLAGS if f != "-shared"]
    key = hashlib.sha256((source + " ".join(flags)).encode()).hexdigest()[:24]
    folder = os.path.join(os.path.dirname(disk_cache.directory()), "mathlib-test")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, key + ".so")
    if not os.path.exists(path):
        with tempfile.TemporaryDirectory() as tmp:
            src, lib = os.path.join(tmp, "m.c"), os.path.join(tmp, "m.so")
            with open(src, "w") as f:
                f.write(source)
            subprocess.run(["cc", *flags, "-shared", "-o", lib, src, "-lm"], check=True)
            os.replace(lib, path)
    return ctypes.CDLL(path)


def run_unary(lib, op, x):
    x = np.ascontiguousarray(x, F32)
    y = np.empty_like(x)
    getattr(lib, f"u_{op}")(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p),
                            ctypes.c_int64(x.size))
    return y


def run_fast(lib, op, x):
    """The fast path of `op` (rn_math_fast.h) on x: its results and its slow flags."""
    x = np.ascontiguousarray(x, F32)
    y, slow = np.empty_like(x), np.empty(x.shape, np.int32)
    getattr(lib, f"f_{op}")(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p),
                            slow.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(x.size))
    return y, slow.astype(bool)


def run_binary(lib, op, a, b):
    a, b = np.ascontiguousarray(a, F32), np.ascontiguousarray(b, F32)
    y = np.empty_like(a)
    getattr(lib, f"b_{op}")(a.ctypes.data_as(ctypes.c_void_p), b.ctypes.data_as(ctypes.c_void_p),
                            y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(a.size))
    return y


# ---------------------------------------------------------------- the reference

def round_f32(v):
    """An mpf rounded to nearest even float32 (subnormals; overflow to inf); with
    whether it lay too close to a midpoint to trust at its precision."""
    if not mpmath.isfinite(v):
        return F32(float(v)), False
    if v == 0:
        return F32(0.0), False
    man, exp = int(abs(v).man), int(abs(v).exp)
    q = max(exp + man.bit_length() - 24, -149)
    close = False
    if exp < q:
        shift = q - exp
        rem, half = man & ((1 << shift) - 1), 1 << (shift - 1)
        close = abs(rem - half) <= (1 << max(shift - 100, 0))
        man = (man >> shift) + (rem > half or (rem == half and (man >> shift) & 1))
        exp = q
    value = math.ldexp(man, exp) if man.bit_length() + exp <= 1030 else math.inf
    return F32(math.copysign(value, v) if value < 2.0 ** 128 else math.copysign(math.inf, v)), close


def exact(fn, *args):
    """fn(*args) at 120 bits (400 where 120 bits land too close to a midpoint), rounded."""
    xs = [mpmath.mpf(float(a)) for a in args]
    for prec in (120, 400):
        with mpmath.workprec(prec):
            try:
                r, close = round_f32(fn(*xs))
            except (ValueError, ZeroDivisionError):
                return F32(np.nan)
        if not close:
            return r
    return r


def near_tie(y):
    """Whether float64 values y lie within REF_ULPS of their ulps of a float32 midpoint
    (or are not finite: those are left to the float64 result)."""
    y = np.asarray(y, np.float64)
    f = y.astype(F32).astype(np.float64)
    up = np.nextafter(y.astype(F32), np.where(y >= f, F32(np.inf), F32(-np.inf))).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        up = np.where(np.isinf(up) & np.isfinite(f), np.copysign(2.0 ** 128, f), up)
        mid = (f + up) / 2
        return np.isfinite(y) & (np.abs(y - mid) <= REF_ULPS * np.spacing(np.abs(y)))


def reference(f64, mp, args, cancel=None):
    """The correctly rounded float32 results: f64's rounded, mpmath's near ties."""
    with np.errstate(all="ignore"):
        y = np.asarray(f64(*[a.astype(np.float64) for a in args]), np.float64)
    out = y.astype(F32)
    redo = near_tie(y) if cancel is None else near_tie(y) | cancel
    for i in np.flatnonzero(redo):
        out[i] = exact(mp, *[a[i] for a in args])
    return out


def assert_bits(got, want, args, what):
    """Equal bits, any NaN equal to any NaN; a failure names the inputs."""
    gb, wb = got.view(np.uint32), want.view(np.uint32)
    bad = (gb != wb) & ~(np.isnan(got) & np.isnan(want))
    if bad.any():
        rows = [f"  {tuple(float(a[i]) for a in args)}: got {float(got[i])!r} ({int(gb[i]):#010x}), correctly "
                f"rounded {float(want[i])!r} ({int(wb[i]):#010x})" for i in np.flatnonzero(bad)[:10]]
        raise AssertionError(f"{what}: {int(bad.sum())} of {got.size} results not correctly rounded:\n"
                             + "\n".join(rows))


def sample(op, n=SAMPLE, seed=0):
    """Random bit patterns (every binade, NaN, inf) and uniform values in the op's range."""
    rng = np.random.default_rng(abs(hash(op)) % 2 ** 32 + seed)
    lo, hi = RANGES.get(op, (-20, 20) if op not in ("log", "log2", "log10") else (0, 10))
    bits = rng.integers(0, 2 ** 32, n // 2, dtype=np.uint64).astype(np.uint32).view(F32)
    return np.concatenate([bits, rng.uniform(lo, hi, n - n // 2).astype(F32)])


def hard_cases():
    """{op: inputs} from the library's table of hard cases."""
    import re
    text = open(os.path.join(mathlib.HERE, "rn_math_fixes.h")).read()
    out = {}
    for name, body in re.findall(r"rn_(\w+)f_fix\[\] = \{([^}]*)\}", text):
        words = [int(w, 16) for w in re.findall(r"0x[0-9a-f]+", body)][:-2]
        out[name] = np.array(words[0::2], np.uint32).view(F32)
    return out


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize("op", list(mathlib.UNARY))
def test_unary_functions_are_correctly_rounded(library, op):
    x = np.concatenate([sample(op), SPECIALS, hard_cases().get(op, np.zeros(0, F32))])
    f64, mp = UNARY_REFERENCE[op]
    f64 = (lambda fn: lambda v: fn(v).astype(np.float64))(f64) if op in ("erf", "erfc") else f64
    assert_bits(run_unary(library, op, x), reference(f64, mp, [x]), [x], f"rn_{op}f")


def _pairs(op, n, rng):
    """Operand pairs: random bits, moderate values, and (pow) bases near 1."""
    k = n // 4
    bits = rng.integers(0, 2 ** 32, (2, k), dtype=np.uint64).astype(np.uint32).view(F32)
    wide = rng.uniform(-50, 50, (2, k)).astype(F32)
    if op == "pow":
        near1 = np.stack([rng.uniform(0.5, 2, k), rng.uniform(-120, 120, k)]).astype(F32)
        ints = np.stack([rng.uniform(-30, 30, k), rng.integers(-20, 20, k)]).astype(F32)
    else:
        near1 = rng.uniform(-3, 3, (2, k)).astype(F32)
        ints = np.stack([rng.uniform(-3, 3, k), rng.uniform(-3, 3, k) * 1e-6]).astype(F32)
    cases = np.array(BINARY_CASES[op], F32).T
    specials = np.array(np.meshgrid(SPECIALS, SPECIALS)).reshape(2, -1)
    return np.concatenate([bits, wide, near1, ints, cases, specials], axis=1)


@pytest.mark.parametrize("op", list(mathlib.BINARY))
def test_binary_functions_are_correctly_rounded(library, op):
    a, b = _pairs(op, SAMPLE, np.random.default_rng(len(op)))
    f64, mp = BINARY_REFERENCE[op]
    if op == "logaddexp":
        with np.errstate(all="ignore"):
            y, cancel = _logaddexp64(a.astype(np.float64), b.astype(np.float64))
        want = reference(lambda *_: y, mp, [a, b], cancel)
    else:
        want = reference(f64, mp, [a, b])
    assert_bits(run_binary(library, op, a, b), want, [a, b], f"rn_{op}f")


# ---------------------------------------------------------------- through the kernels

def test_small_eager_calls_run_the_units_loop_as_a_numpy_ufunc(library):
    """Eager float32 calls below the threaded size run the op's compiled loop as a NumPy
    ufunc (rune/backends/cpu/ufunc.py: NumPy's call, about a microsecond cheaper than one
    through ctypes); contiguous, strided and transposed operands give the library's bits."""
    from rune.backends import eager_mathlib
    from rune.backends.cpu.backend import IMPLS
    replaced = eager_mathlib.wrap(np, IMPLS)
    rng = np.random.default_rng(5)
    x = rng.uniform(-20, 20, (40, 50)).astype(F32)
    z = rng.uniform(0.1, 5, (40, 50)).astype(F32)
    for op in ("exp", "tanh", "sin"):
        for arg in (x, x[:, ::3], x.T, x[0]):
            got = replaced[op](arg)
            assert got.shape == arg.shape and got.dtype == F32
            flat = np.ascontiguousarray(arg).ravel()
            assert_bits(np.ascontiguousarray(got).ravel(), run_unary(library, op, flat), [flat], f"small eager {op}")
    for op in ("pow", "atan2"):
        for a, b in ((z, x), (z[:, ::2], x[:, 1::2]), (z.T, x.T)):
            got = replaced[op](a, b)
            fa, fb = (np.ascontiguousarray(v).ravel() for v in (a, b))
            assert_bits(np.ascontiguousarray(got).ravel(), run_binary(library, op, fa, fb), [fa, fb],
                        f"small eager {op}")
    for op in ("exp", "pow"):
        small = eager_mathlib._BUILT[op].ufunc
        assert isinstance(small, np.ufunc) and small.types == ["ff->f" if op == "pow" else "f->f"]


FAST_OPS = [op for op, fn in mathlib.UNARY.items() if fn in mathlib.FAST]


@pytest.mark.parametrize("op", FAST_OPS)
def test_fast_paths_give_the_library_bits_and_eager_ops_and_kernels_use_them(library, op):
    """rn_math_fast.h: wherever a fast path leaves its slow flag at 0 its result is the
    library's (correctly rounded) one, it flags NaNs and few values in range, and
    the eager op, the jitted C kernel and the emulated CUDA kernel, which run it and the
    library's function on what it flags, give the library's bits, flagged inputs
    included (the exhaustive form of these claims for C is scripts/check_fast_paths.py)."""
    from rune.backends import eager_mathlib
    from rune.backends.cpu.backend import IMPLS
    rng = np.random.default_rng(11)
    lo, hi = (1e-3, 1e3) if op == "log" else (-20, 20)
    inside = rng.uniform(lo, hi, 1 << 17).astype(F32)
    # 2^20 consecutive floats: near-midpoint results (one in 2^14 to 2^17) among them
    run = (np.arange(1 << 20, dtype=np.uint32) + np.float32(1.5).view(np.uint32)).view(F32)
    bits = rng.integers(0, 2 ** 32, 1 << 17, dtype=np.uint64).astype(np.uint32).view(F32)
    x = np.concatenate([inside, run, bits, SPECIALS])
    got, slow = run_fast(library, op, x)
    want = run_unary(library, op, x)
    assert_bits(got[~slow], want[~slow], [x[~slow]], f"{op}'s fast path where it did not flag")
    assert slow[np.isnan(x)].all()
    assert slow[:inside.size].mean() < 2 ** -10, "the fast path flags more than its gate allows"
    flagged = x[slow & np.isfinite(x)]
    assert 0 < flagged.size and slow[inside.size:inside.size + run.size].any()
    eager = eager_mathlib.wrap(np, IMPLS)[op]
    with np.errstate(all="ignore"):
        for args in (x, flagged, x[:1000]):   # threaded blocks, the flagged alone, one short call
            assert_bits(eager(args), run_unary(library, op, args), [args], f"eager {op}")
    # a kernel calls the function's SIMD clones (rune/codegen/c_src/simd_clones.h on
    # x86-64: the fast path on every lane, the library's function on the flagged ones)
    import rune
    from rune.core.prims import P
    from rune.core.trace import bind
    kernel = rune.jit(lambda v: bind(P[op], v))
    assert_bits(np.asarray(kernel(x)), want, [x], f"jitted {op}")
    # CUDA kernels try the fast path per thread (mathlib.branching_source): the emulated
    # kernel on the flagged inputs, the special values and a stretch of the others
    pytest.importorskip("rune.backends.cuda.emulator")
    from rune.backends.cuda.emulator import compiler
    if compiler() is not None:
        some = np.concatenate([flagged, SPECIALS, run[:4096]])
        assert_bits(np.asarray(kernel.emulate(some, target="cuda")), run_unary(library, op, some), [some],
                    f"{op} in an emulated CUDA kernel")


def _program_inputs(n=2048):
    """Inputs for every function in one program: bit patterns, moderate values, specials."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(F32),
                        rng.uniform(-12, 12, n).astype(F32), SPECIALS])
    a, b = _pairs("pow", x.size, rng)[:, :x.size]
    return x, np.ascontiguousarray(a), np.ascontiguousarray(b)


def _every_function(x, a, b):
    from rune.core.prims import P
    from rune.core.trace import bind
    return (tuple(bind(P[op], x) for op in mathlib.UNARY if op in P)
            + tuple(bind(P[op], a, b) for op in mathlib.BINARY))


@pytest.fixture(scope="module")
def every_function():
    """`_every_function` jitted, shared by the tests below (one trace and compile per signature)."""
    import rune
    return rune.jit(_every_function)


def test_c_kernels_and_emulated_cuda_kernels_give_the_library_bits(library, every_function):
    """The jitted C kernels and the same plan's CUDA kernels under the emulator (g++ over
    the CUDA dialect's text) give the library's correctly rounded bits, every function
    fused into one kernel."""
    from rune.core.prims import P
    pytest.importorskip("rune.backends.cuda.emulator")
    from rune.backends.cuda.emulator import compiler
    if compiler() is None:
        pytest.skip("no g++ to build the CUDA emulation")
    x, a, b = _program_inputs()
    c_out = [np.asarray(o) for o in every_function(x, a, b)]
    cuda_out = [np.asarray(o) for o in every_function.emulate(x, a, b, target="cuda")]
    names = [op for op in mathlib.UNARY if op in P] + list(mathlib.BINARY)
    for op, c, cu in zip(names, c_out, cuda_out):
        args = [x] if op in mathlib.UNARY else [a, b]
        want = run_unary(library, op, x) if op in mathlib.UNARY else run_binary(library, op, a, b)
        assert_bits(c, want, args, f"{op}: the C kernel against the library")
        assert_bits(cu, c, args, f"{op}: the emulated CUDA kernel against the C kernel")


def test_eager_replacements_give_the_kernels_bits(library, every_function):
    """rune/backends/eager_mathlib.py's one-op units (the eager table's float32 functions
    once hooked in) give the jitted kernels' bits, for float32 and float16, and leave
    float64 to the implementation they replace."""
    from rune.backends import eager_mathlib
    from rune.backends.cpu.backend import IMPLS
    from rune.core.prims import P
    x, a, b = _program_inputs()   # the other test's: its float32 kernels serve here too
    replaced = eager_mathlib.wrap(np, IMPLS)
    names = [op for op in mathlib.UNARY if op in P] + list(mathlib.BINARY)
    for dtype in (F32, np.float16):
        xs, as_, bs = (v.astype(dtype) for v in (x, a, b))
        for op, want in zip(names, every_function(xs, as_, bs)):
            if op not in replaced:   # a primitive the eager table does not have
                continue
            args = [xs] if op in mathlib.UNARY else [as_, bs]
            got = replaced[op](*args)
            assert got.dtype == dtype
            assert_bits(got.astype(F32), np.asarray(want).astype(F32), args, f"eager {op} ({np.dtype(dtype).name})")
    zero_d = replaced["exp"](np.asarray(x[3]))        # a 0-d array stays one
    assert zero_d.shape == () and zero_d == run_unary(library, "exp", x[3:4])[0]
    with np.errstate(all="ignore"):   # (signalling NaNs among the bit patterns: invalid in the cast)
        x64 = x.astype(np.float64)
        np.testing.assert_array_equal(replaced["exp"](x64), IMPLS["exp"](x64))

