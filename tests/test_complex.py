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
    assert (nx.ones((2,), nx.int32) * 1j).dtype == nx.complex64
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
