"""complex64 and complex128: promotion, elementwise math and reductions against
NumPy, the standard's errors, DLPack, jit against eager, vmap against a loop, and
derivatives with JAX's convention checked against finite differences."""
import numpy as np
import pytest

import rune
from rune import nx

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
TOL = {C64: dict(rtol=2e-5, atol=2e-6), C128: dict(rtol=1e-12, atol=1e-12),
       np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6), np.dtype(np.float64): dict(rtol=1e-12, atol=1e-12)}


def _z(shape, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return ((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) * scale).astype(dtype)


# ---------------------------------------------------------------- dtypes and promotion

@pytest.mark.parametrize("a, b, want", [
    (nx.complex64, nx.float32, nx.complex64), (nx.complex64, nx.float64, nx.complex128),
    (nx.complex128, nx.float32, nx.complex128), (nx.complex64, nx.complex128, nx.complex128),
    (nx.float16, nx.complex64, nx.complex64), (nx.bfloat16, nx.complex128, nx.complex128)])
def test_promotion_gives_the_wider_complex(a, b, want):
    assert nx.result_type(a, b) == want
    x, y = nx.zeros((2,), a), nx.ones((2,), b)
    assert (x + y).dtype == want and nx.can_cast(a, want) and nx.can_cast(b, want)
    assert not nx.can_cast(want, nx.float64)


def test_weak_python_complex_keeps_the_array_precision():
    assert (nx.ones((2,), nx.float64) * 1j).dtype == nx.complex128
    assert (nx.ones((2,), nx.float32) * 1j).dtype == nx.complex64
    # a Python complex meeting an int array acts as complex64: int32 (whose float is float64 in the
    # promotion table) gives complex128, int16 (float32) complex64
    assert (nx.ones((2,), nx.int32) * 1j).dtype == nx.complex128
    assert (nx.ones((2,), nx.int16) * 1j).dtype == nx.complex64
    assert (nx.ones((2,), nx.complex128) * 2.5).dtype == nx.complex128
    assert nx.asarray(1 + 2j).dtype == nx.complex64
    assert nx.result_type(nx.float64, 1j) == nx.complex128


def test_dtype_functions():
    assert nx.isdtype(nx.complex64, "complex floating") and nx.isdtype(nx.complex128, "numeric")
    assert not nx.isdtype(nx.complex64, "real floating")
    for c, f in ((nx.complex64, np.float32), (nx.complex128, np.float64)):
        info = nx.finfo(c)
        assert info.eps == float(np.finfo(f).eps) and info.max == float(np.finfo(f).max)
        assert info.bits == np.finfo(f).bits
    assert nx.__array_namespace_info__().default_dtypes()["complex floating"] == nx.complex64


# ---------------------------------------------------------------- elementwise, against NumPy

UNARY = {
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "log2": np.log2, "log10": np.log10,
    "square": np.square, "reciprocal": np.reciprocal, "negative": np.negative, "conj": np.conj,
    "abs": np.abs, "angle": np.angle, "real": np.real, "imag": np.imag, "sign": np.sign,
    "isnan": np.isnan, "isfinite": np.isfinite, "isinf": np.isinf, "round": np.round,
}


@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_numpy(name, dtype):
    z = _z((7,), dtype, seed=len(name))
    z[0], z[1] = 0, complex(np.inf, 1.0)
    z[2] = complex(np.nan, 0.0)
    with np.errstate(all="ignore"):
        want = np.asarray(UNARY[name](z))
    got = getattr(nx, name)(nx.asarray(z))
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    finite = np.isfinite(want)
    np.testing.assert_allclose(np.asarray(got)[3:][finite[3:]], want[3:][finite[3:]], **TOL[dtype])


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power", "equal", "not_equal"])
def test_binary_matches_numpy(name):
    a, b = _z((3, 4), C128, 1), _z((4,), C64, 2)
    want = getattr(np, name)(a, b)
    got = getattr(nx, name)(nx.asarray(a), nx.asarray(b))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_reductions_and_matmul_match_numpy():
    a, b = _z((4, 5), C64, 3), _z((5, 3), C64, 4)
    x = nx.asarray(a)
    for name in ("sum", "prod", "mean"):
        got, want = getattr(nx, name)(x, axis=0), getattr(np, name)(a, axis=0)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(x @ nx.asarray(b)), a @ b, rtol=1e-5)
    assert complex(nx.sum(x)) == pytest.approx(complex(np.asarray(nx.sum(x))))


def test_make_complex_and_parts_round_trip():
    re, im = np.arange(3.0), -np.arange(3.0) / 2
    z = nx.make_complex(nx.asarray(re), nx.asarray(im))
    assert z.dtype == nx.complex128
    np.testing.assert_array_equal(np.asarray(z), re + 1j * im)
    np.testing.assert_array_equal(np.asarray(nx.real(z)), re)
    np.testing.assert_array_equal(np.asarray(nx.imag(z)), im)


@pytest.mark.parametrize("call", [
    lambda z: nx.less(z, z), lambda z: z > 0, lambda z: nx.max(z), lambda z: nx.maximum(z, z),
    lambda z: nx.floor(z), lambda z: nx.sort(z), lambda z: nx.astype(z, nx.float32),
    lambda z: nx.erf(z), lambda z: nx.floor_divide(z, z), lambda z: nx.hypot(z, z)])
def test_order_and_real_only_functions_refuse_complex(call):
    with pytest.raises(rune.DTypeError, match="complex"):
        call(nx.asarray(_z((3,), C64)))


def test_dlpack_round_trip_and_bool_cast():
    z = _z((2, 3), C128, 5)
    x = nx.from_dlpack(z)
    np.testing.assert_array_equal(np.from_dlpack(x), z)
    np.testing.assert_array_equal(np.asarray(nx.astype(nx.asarray(np.array([0, 1j])), nx.bool_)), [False, True])


# ---------------------------------------------------------------- transformations

def _f(z):
    return nx.sum(nx.real(nx.exp(z) * nx.conj(z)) + nx.abs(nx.sin(z)) ** 2 + nx.angle(z + 3))


def test_jit_matches_eager():
    z = nx.asarray(_z((6,), C64, 6))
    np.testing.assert_allclose(np.asarray(rune.jit(_f)(z)), np.asarray(_f(z)), rtol=1e-5)
    g = rune.jit(lambda z: nx.sqrt(z) * 2 + nx.make_complex(nx.real(z), 1.0))
    np.testing.assert_allclose(np.asarray(g(z)), np.sqrt(np.asarray(z)) * 2 + (np.asarray(z).real + 1j),
                               rtol=1e-5)


def test_vmap_matches_loop():
    zs = _z((4, 3), C128, 7)
    got = rune.vmap(lambda z: nx.abs(z) + nx.real(z * nx.conj(z[0])))(nx.asarray(zs))
    want = np.stack([np.abs(z) + np.real(z * np.conj(z[0])) for z in zs])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def _fd_grad(f, z, h=1e-6):
    """JAX's gradient of real-valued f: df/dx - i df/dy, by central differences."""
    out = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        e = np.zeros_like(z)
        e[i] = 1
        dx = (f(z + h * e) - f(z - h * e)) / (2 * h)
        dy = (f(z + 1j * h * e) - f(z - 1j * h * e)) / (2 * h)
        out[i] = dx - 1j * dy
    return out


def test_grad_of_real_valued_function_follows_jax():
    z = _z((5,), C128, 8)
    f = lambda v: float(_f(nx.asarray(v)))
    np.testing.assert_allclose(np.asarray(rune.grad(_f)(nx.asarray(z))), _fd_grad(f, z), rtol=1e-6, atol=1e-7)
    # JAX's documented values: grad of |z|^2 at 3 + 4i is 6 - 8i; of |z| it is (3 - 4i) / 5.
    w = nx.asarray(np.complex128(3 + 4j))
    assert complex(rune.grad(lambda v: nx.real(v * nx.conj(v)))(w)) == pytest.approx(6 - 8j)
    assert complex(rune.grad(nx.abs)(w)) == pytest.approx(0.6 - 0.8j)


def test_grad_through_real_to_complex_and_back():
    x = np.linspace(0.5, 2.0, 4)
    f = lambda v: nx.sum(nx.abs(nx.exp(v * (1 + 2j))) + nx.imag(nx.make_complex(v, v * v)))
    fd = [(float(f(nx.asarray(x + h))) - float(f(nx.asarray(x - h)))) / 2e-6 for h in np.eye(4) * 1e-6]
    g = rune.grad(f)(nx.asarray(x))
    assert g.dtype == nx.float64
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6)


def test_holomorphic_grad_and_jvp():
    z = _z((), C128, 9)
    f = lambda v: v * nx.exp(v) + nx.sqrt(v)
    h = 1e-6
    d = (np.asarray(f(nx.asarray(z + h))) - np.asarray(f(nx.asarray(z - h)))) / (2 * h)
    assert complex(rune.grad(f, holomorphic=True)(nx.asarray(z))) == pytest.approx(complex(d), rel=1e-6)
    t = np.complex128(0.3 - 0.7j)
    _, tan = rune.jvp(f, (nx.asarray(z),), (nx.asarray(t),))
    fd = (np.asarray(f(nx.asarray(z + h * t))) - np.asarray(f(nx.asarray(z - h * t)))) / (2 * h)
    assert complex(tan) == pytest.approx(complex(fd), rel=1e-6)


def test_grad_refuses_complex_output_without_holomorphic():
    z = nx.asarray(np.complex64(1 + 1j))
    with pytest.raises(rune.DTypeError, match="holomorphic=True"):
        rune.grad(lambda v: v * v)(z)
    with pytest.raises(rune.DTypeError, match="complex inputs"):
        rune.grad(lambda v: v * v, holomorphic=True)(nx.asarray(1.0))


def test_var_std_and_vdot_of_complex_match_numpy():
    z = _z((3, 5), C128, 10)
    x = nx.asarray(z)
    for name in ("var", "std"):
        got, want = getattr(nx, name)(x, axis=1), getattr(np, name)(z, axis=1)
        assert got.dtype == want.dtype == np.float64
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(nx.vdot(x, x[::-1])), np.vdot(z, z[::-1]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(nx.linalg.vecdot(x, x[::-1])), np.vecdot(z, z[::-1]), rtol=1e-12)


# ---------------------------------------------------------------- mul, div and |z|: rune's rule
# (rune/backends/cpu/complexfuncs.py): fixed sequences of correctly rounded real ops,
# the same bits eager, in C kernels and in CUDA kernels. The oracles below compute the
# rule element by element with NumPy scalars of the part dtype (each op one IEEE
# rounding), and the exact values with Fraction / Decimal.

from decimal import Decimal, localcontext  # noqa: E402
from fractions import Fraction  # noqa: E402

from compiled import numpy_stretches  # noqa: E402

PART = {C64: np.dtype(np.float32), C128: np.dtype(np.float64)}
SPECIAL_PARTS = (0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan)


def _edge(dtype):
    """Parts near overflow and underflow, subnormal ones, and the special values."""
    big, tiny = (1e38, 1e-40) if dtype == C64 else (1e300, 3e-310)
    return SPECIAL_PARTS + (big, -big / 3, tiny, -tiny * 7)


def _pairs(dtype, n=3000, seed=11):
    """(x, y): random values over wide exponents, then every pair of edge-case numbers."""
    rng = np.random.default_rng(seed)
    part = PART[dtype]
    span = 30 if dtype == C64 else 250

    def rand(k):
        return (rng.standard_normal(k) * 2.0 ** rng.integers(-span, span, k)).astype(part)
    x, y = np.empty(n, dtype), np.empty(n, dtype)
    x.real, x.imag, y.real, y.imag = rand(n), rand(n), rand(n), rand(n)
    edge = np.array([complex(a, b) for a in _edge(dtype) for b in _edge(dtype)], dtype)
    return np.concatenate([x, np.repeat(edge, edge.size)]), np.concatenate([y, np.tile(edge, edge.size)])


def _bits(a):
    """The bit patterns of a float or complex array, every NaN one NaN (the rule leaves
    a NaN's sign and payload open): equal bits mean equal values and zero signs."""
    a = np.array(a)
    parts = np.stack([a.real, a.imag]) if a.dtype.kind == "c" else a
    parts = np.where(np.isnan(parts), parts.dtype.type(np.nan), parts).astype(parts.dtype)
    return parts.view({4: np.uint32, 8: np.uint64, 2: np.uint16}[parts.dtype.itemsize])


def _rule_mul(x, y):
    a, b, c, d = x.real, x.imag, y.real, y.imag
    return a * c - b * d, a * d + b * c


def _rule_div(x, y):
    a, b, c, d = x.real, x.imag, y.real, y.imag
    if abs(c) >= abs(d):
        if c == 0 and d == 0:
            return a / abs(c), b / abs(c)
        rat = d / c
        scl = 1 / (c + d * rat)
        return (a + b * rat) * scl, (b - a * rat) * scl
    rat = c / d
    scl = 1 / (d + c * rat)
    return (a * rat + b) * scl, (b * rat - a) * scl


def _rule_hypot(x, y):
    t = type(x)
    x, y = abs(x), abs(y)
    if np.isinf(x) or np.isinf(y):
        return t(np.inf)
    big, down, small, up = (t(2.0 ** 50), t(2.0 ** -70), t(2.0 ** -50), t(2.0 ** 100)) if t is np.float32 else \
        (t(2.0 ** 500), t(2.0 ** -600), t(2.0 ** -500), t(2.0 ** 600))
    k = down if x > big or y > big else up if x < small and y < small else t(1)
    back = 1 / k   # a power of two
    xs, ys = x * k, y * k
    return np.sqrt(xs * xs + ys * ys) * back


def _oracle(rule, xs, ys, dtype):
    with np.errstate(all="ignore"):
        out = np.empty(xs.shape, dtype)
        for i, (x, y) in enumerate(zip(xs, ys)):
            if dtype.kind == "c":   # the parts set apart: complex(re, im) turns inf im's re into NaN
                out.real[i], out.imag[i] = rule(x, y)
            else:
                out[i] = rule(x, y)
    return out


@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
def test_eager_mul_div_abs_follow_the_rule_element_by_element(dtype):
    x, y = _pairs(dtype, n=400)
    X, Y = nx.asarray(x), nx.asarray(y)
    assert (_bits(X * Y) == _bits(_oracle(_rule_mul, x, y, dtype))).all()
    assert (_bits(X / Y) == _bits(_oracle(_rule_div, x, y, dtype))).all()
    got = nx.abs(X)
    assert got.dtype == PART[dtype]
    assert (_bits(got) == _bits(_abs_oracle(x, dtype))).all()
    # the random values alone: every pair in the unscaled band (NumPy's shortcut there)
    e = 50 if dtype == C64 else 500
    m = np.maximum(abs(x.real[:400]), abs(x.imag[:400]))
    mid = x[:400][(m >= 2.0 ** -e) & (m <= 2.0 ** e)]
    assert mid.size > 300
    assert (_bits(nx.abs(nx.asarray(mid))) == _bits(_abs_oracle(mid, dtype))).all()


def _abs_oracle(z, dtype):
    """|z|: complex64's is rune's correctly rounded float32 hypot (its math library,
    docs/numerics.md: float64's hypot of the parts rounded once, which settles these
    values); complex128's the scaled rule."""
    if dtype == C64:
        with np.errstate(all="ignore"):
            return np.hypot(z.real.astype(np.float64), z.imag.astype(np.float64)).astype(np.float32)
    return _oracle(_rule_hypot, z.real, z.imag, PART[dtype])


@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
def test_special_values_by_value(dtype):
    """C99 hypot's infinities; no Annex G recovery in mul; NumPy's zero divisor."""
    inf, nan = np.inf, np.nan

    def parts(z):
        z = np.asarray(z)
        return [(float(v.real), float(v.imag)) for v in z.reshape(-1)]

    def c(re, im):
        z = np.empty((), dtype)
        z.real, z.imag = re, im
        return nx.asarray(z)

    def same(got, want):
        return _bits(np.array(got, np.float64)).tolist() == _bits(np.array(want, np.float64)).tolist()
    assert same(parts(c(inf, 0) * c(1, 0)), [(inf, nan)])
    assert same(parts(c(1, 2) * c(3, 4)), [(-5.0, 10.0)])
    big = 3e38 if dtype == C64 else 1e308   # 2 big overflows
    assert same(parts(c(big, big) * c(1, 1)), [(0.0, inf)])          # each sum rounds (and overflows) alone
    assert same(parts(c(1, 0) / c(0, 0)), [(inf, nan)])
    assert same(parts(c(-1, 1) / c(-0.0, 0)), [(-inf, inf)])
    assert same(parts(c(1, 1) / c(inf, 0)), [(0.0, 0.0)])
    assert same(parts(c(inf, 0) / c(1, 0)), [(inf, nan)])
    assert same(parts(c(-0.0, 0) / c(1, 0)), [(0.0, 0.0)])   # (-0 + 0 rat) scl: Smith's method drops the sign
    assert same(parts(c(6, 8) / c(3, 4)), [(2.0, 0.0)])
    e = 149 if dtype == C64 else 1074          # the smallest subnormal's exponent
    hi = 100 if dtype == C64 else 1000
    cases = [((inf, nan), inf), ((nan, -inf), inf), ((nan, 1.0), nan), ((-0.0, 0.0), 0.0),
             ((3 * 2.0 ** -e, 4 * 2.0 ** -e), 5 * 2.0 ** -e), ((3 * 2.0 ** hi, -4 * 2.0 ** hi), 5 * 2.0 ** hi),
             ((-3.0, 4.0), 5.0)]
    got = [float(nx.abs(c(*z))) for z, _ in cases]
    assert same(got, [w for _, w in cases]), got


@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
def test_accuracy_against_exact_arithmetic(dtype):
    """Normwise relative error against Fraction arithmetic, in units of u, for values
    whose results stay in the normal range: mul within sqrt(5) u (Brent, Percival and
    Zimmermann's bound for this formula), div (Smith's method) within 4 u, |z| within 2 u."""
    part = PART[dtype]
    x, y = _pairs(dtype, n=300, seed=12)
    x, y = x[:300], y[:300]
    m, d, r = (np.asarray(v) for v in (nx.asarray(x) * nx.asarray(y), nx.asarray(x) / nx.asarray(y),
                                       nx.abs(nx.asarray(x))))
    u2 = Fraction(1, 2 ** (24 if part == np.float32 else 53)) ** 2
    worst = {"mul": 0, "div": 0, "abs": 0}
    for i in range(x.size):
        a, b, c, dd = (Fraction(float(v)) for v in (x[i].real, x[i].imag, y[i].real, y[i].imag))
        em = (a * c - b * dd, a * dd + b * c)
        n2 = c * c + dd * dd
        ed = ((a * c + b * dd) / n2, (b * c - a * dd) / n2)
        for name, got, ex in (("mul", m[i], em), ("div", d[i], ed)):
            err2 = (Fraction(float(got.real)) - ex[0]) ** 2 + (Fraction(float(got.imag)) - ex[1]) ** 2
            worst[name] = max(worst[name], err2 / (u2 * (ex[0] ** 2 + ex[1] ** 2)))
        with localcontext() as ctx:
            ctx.prec, ctx.Emax, ctx.Emin = 80, 10 ** 6, -10 ** 6
            ex = (Decimal(float(x[i].real)) ** 2 + Decimal(float(x[i].imag)) ** 2).sqrt()
            u = Decimal(2) ** -(24 if part == np.float32 else 53)
            worst["abs"] = max(worst["abs"], abs(Decimal(float(r[i])) - ex) / (ex * u))
    assert worst["mul"] <= 5 and worst["div"] <= 16 and worst["abs"] <= 2, worst   # squared norms: 5 = sqrt(5)^2
    assert worst["mul"] > 0 and worst["abs"] > 0   # the samples do round


def _mul_div_abs(a, b):
    return (a * b, a / b, nx.abs(a), a[::-1] * b, b / a[::-1], nx.abs(b[::-1]) + nx.real(a),
            nx.hypot(nx.real(a), nx.imag(b)))


@pytest.mark.cc
@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
def test_jit_mul_div_abs_compile_and_give_eager_bits(dtype):
    """Random values, every pair of special values, reversed strides: the C kernels'
    bits are eager's, and no step of the plan runs on NumPy."""
    x, y = (nx.asarray(v) for v in _pairs(dtype))
    jf = rune.jit(_mul_div_abs)
    plan = jf.plan(x, y)
    assert plan.kernels and not numpy_stretches(plan), plan
    with np.errstate(all="ignore"):   # inf - inf in the real add
        want = _mul_div_abs(x, y)
    for g, w in zip(jf(x, y), want):
        assert g.dtype == w.dtype
        assert (_bits(g) == _bits(w)).all()


@pytest.mark.cc
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_jit_hypot_of_reals_gives_eager_bits(dtype):
    rng = np.random.default_rng(13)
    span = 8 if dtype == np.float16 else 60
    x, y = ((rng.standard_normal(2000) * 2.0 ** rng.integers(-span, span, 2000)).astype(dtype) for _ in range(2))
    x[:7], y[:7] = SPECIAL_PARTS, SPECIAL_PARTS[::-1]
    jf = rune.jit(nx.hypot)
    plan = jf.plan(nx.asarray(x), nx.asarray(y))
    assert plan.kernels and not numpy_stretches(plan), plan
    got, want = jf(nx.asarray(x), nx.asarray(y)), nx.hypot(nx.asarray(x), nx.asarray(y))
    assert (_bits(got) == _bits(want)).all()
    np.testing.assert_allclose(np.asarray(want, np.float64)[7:], np.hypot(x, y).astype(np.float64)[7:],
                               rtol=4 * np.finfo(dtype).eps)


@pytest.mark.cc   # builds the CUDA emulation with a C++ compiler
@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
def test_cuda_kernels_give_eager_bits_emulated(dtype):
    """The same functions rendered for CUDA, run by tests/cuda_emu on the CPU (and, when
    NVRTC is installed, compiled by it)."""
    cuda_emu = pytest.importorskip("cuda_emu")
    if cuda_emu.CXX is None:
        pytest.skip("no g++ to build the CUDA emulation")
    from rune.backends.cuda import nvrtc
    from rune.codegen.cuda import CudaDialect, DeviceProps
    dialect = CudaDialect(device=DeviceProps(sm_count=2), block=64, blocks_per_sm=2, items_per_thread=2)
    x, y = _pairs(dtype, n=500)
    plan = rune.jit(_mul_div_abs).plan(x, y, target="cuda")
    rendered = cuda_emu.rerender(plan, dialect)
    assert rendered and not numpy_stretches(plan), plan
    library = cuda_emu.Library(dialect.prelude(), list(rendered.values()))
    got = cuda_emu.run_plan(plan, [x, y], library, rendered)
    with np.errstate(all="ignore"):
        want = _mul_div_abs(nx.asarray(x), nx.asarray(y))
    for g, w in zip(got, want):
        assert (_bits(g) == _bits(w)).all()
    if nvrtc.available():
        nvrtc.compile_unit(dialect.prelude() + "\n\n".join(t for t, _ in rendered.values()), arch="sm_90",
                           ptx=True, options=("-fdevice-syntax-only",))


@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
def test_abs_within_2u_of_exact_over_the_whole_range(dtype):
    """|z| over every binade, subnormal parts and parts near overflow among them (each
    of the scaling bands): within 2 u of the exact modulus (Decimal), relative, where
    that is normal; where the result is subnormal, within 1.5 of its ulp."""
    part = PART[dtype]
    info = np.finfo(part)
    lo, hi = int(np.log2(info.smallest_subnormal)), int(np.log2(info.max))
    rng = np.random.default_rng(14)
    n = 3000
    z = np.empty(n, dtype)
    z.real = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(lo, hi, n)).astype(part)
    with np.errstate(over="ignore"):
        z.imag = z.real * (rng.uniform(-2, 2, n) * 2.0 ** rng.integers(-40, 40, n)).astype(part)
    z.imag[:100] = (rng.uniform(1, 2, 100) * 2.0 ** rng.integers(lo, lo + 30, 100)).astype(part)
    got = np.asarray(nx.abs(nx.asarray(z)))
    keep = np.isfinite(z.real) & np.isfinite(z.imag)
    p = 24 if part == np.float32 else 53
    worst = 0
    with localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = 80, 10 ** 6, -10 ** 6
        for i in np.nonzero(keep)[0]:
            ex = (Decimal(float(z.real[i])) ** 2 + Decimal(float(z.imag[i])) ** 2).sqrt()
            if ex > Decimal(float(info.max)):
                assert got[i] == np.inf
                continue
            err = abs(Decimal(float(got[i])) - ex)
            if ex < Decimal(float(info.smallest_normal)):
                assert err <= Decimal(float(info.smallest_subnormal)) * Decimal("1.5"), (z[i], got[i])
            else:
                worst = max(worst, err / (ex * Decimal(2) ** -p))
    assert 0 < worst <= 2, worst


def _exp_samples(dtype):
    """Random values (|x| up to 100: e^x overflowing where e^x cos y does not) and
    every pair of edge-case parts."""
    rng = np.random.default_rng(15)
    part = PART[dtype]
    z = np.empty(4000, dtype)
    z.real = rng.uniform(-100, 100, z.size).astype(part)
    z.real[:500] += 88 if dtype == C64 else 709
    z.imag = (rng.standard_normal(z.size) * 10).astype(part)
    edge = np.array([complex(0, 0)] * len(_edge(dtype)) ** 2, dtype)
    edge.real, edge.imag = np.repeat(_edge(dtype), len(_edge(dtype))), np.tile(_edge(dtype), len(_edge(dtype)))
    return np.concatenate([edge, z])


def _exp_close(got, want, dtype, ulps):
    """Parts within `ulps` ulp of eager's (another libm's exp, sin and cos: not its bits),
    and equal where eager's is 0, infinite or NaN (zero signs included)."""
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        exact = ~np.isfinite(w) | (w == 0)
        assert (_bits(g[exact]) == _bits(w[exact])).all(), (g[exact], w[exact])
        info = np.finfo(PART[dtype])   # ulps of the value, or of the subnormals below the normal range
        np.testing.assert_allclose(g[~exact], w[~exact], rtol=ulps * info.eps, atol=ulps * info.smallest_subnormal)


@pytest.mark.cc
@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
def test_jit_exp_compiles_within_ulps_of_eager_and_keeps_its_special_values(dtype):
    z = _exp_samples(dtype)
    jf = rune.jit(nx.exp)
    plan = jf.plan(nx.asarray(z))
    assert plan.kernels and not numpy_stretches(plan), plan
    with np.errstate(all="ignore"):
        want = np.asarray(nx.exp(nx.asarray(z)))
    _exp_close(np.asarray(jf(nx.asarray(z))), want, dtype, 4)


@pytest.mark.cc   # builds the CUDA emulation with a C++ compiler
@pytest.mark.parametrize("dtype", [C64, C128], ids=["c64", "c128"])
def test_cuda_exp_kernel_emulated_within_ulps_of_eager(dtype):
    cuda_emu = pytest.importorskip("cuda_emu")
    if cuda_emu.CXX is None:
        pytest.skip("no g++ to build the CUDA emulation")
    from rune.codegen.cuda import CudaDialect, DeviceProps
    dialect = CudaDialect(device=DeviceProps(sm_count=2), block=64, blocks_per_sm=2, items_per_thread=2)
    z = _exp_samples(dtype)
    plan = rune.jit(nx.exp).plan(z, target="cuda")
    rendered = cuda_emu.rerender(plan, dialect)
    assert rendered and not numpy_stretches(plan), plan
    got, = cuda_emu.run_plan(plan, [z], cuda_emu.Library(dialect.prelude(), list(rendered.values())), rendered)
    with np.errstate(all="ignore"):
        want = np.asarray(nx.exp(nx.asarray(z)))
    _exp_close(got, want, dtype, 4)


def test_hypot_of_empty_and_broadcast_operands_has_numpys_shape():
    for x, y in ((np.float64(0.4), np.zeros((3, 0))), (np.zeros((0,)), np.zeros((2, 1))), (np.ones(3), np.ones(3))):
        got = np.asarray(nx.hypot(nx.asarray(x), nx.asarray(y)))
        assert got.shape == np.hypot(x, y).shape and np.array_equal(got, np.hypot(x, y))
