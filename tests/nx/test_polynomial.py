"""The polynomial functions and the linalg additions beyond the op table's rows
(tests/op_table_polynomial.py): NumPy's data-dependent shapes eagerly, the fixed
shapes under jit, complex eigendecompositions and their derivatives, and the
errors that name the function."""
import numpy as np
import pytest

import rune
from rune import nx
from rune.errors import ArgumentError, AxisError, ConcretizationError, RuneError, ShapeError


def _sorted(z):
    return np.sort_complex(np.asarray(z).astype(complex))


# ---------------------------------------------------------------- polydiv's remainder

@pytest.mark.parametrize("u, v", [([1.0, 3.0, 2.0], [1.0, 1.0]),          # exact: remainder [0.]
                                  ([2.0, -1.0, 0.5, 4.0], [0.5, 2.0]),
                                  ([1.0, 2.0], [3.0, 1.0, 1.0]),           # deg u < deg v
                                  ([3.0, 0.0, 0.0, 1.0], [1.0, 0.0, 2.0])])
def test_polydiv_trims_the_remainder_eagerly_as_numpy_and_keeps_it_under_jit(u, v):
    u, v = np.array(u), np.array(v)
    q_np, r_np = np.polydiv(u, v)
    q, r = nx.polydiv(u, v)
    assert r.shape == r_np.shape
    np.testing.assert_allclose(np.asarray(q), q_np, atol=1e-12)
    np.testing.assert_allclose(np.asarray(r), r_np, atol=1e-12)
    q_jit, r_jit = rune.jit(nx.polydiv)(u, v)
    assert r_jit.shape == u.shape          # the untrimmed remainder: a fixed shape
    padded = np.concatenate([np.zeros(len(u) - len(r_np)), r_np])
    np.testing.assert_allclose(np.asarray(q_jit), q_np, atol=1e-12)
    np.testing.assert_allclose(np.asarray(r_jit), padded, atol=1e-12)


# ---------------------------------------------------------------- roots

@pytest.mark.parametrize("p", [[1.0, -6.0, 11.0, -6.0], [0.0, 0.0, 2.0, -3.0, 1.0, 0.0, 0.0], [5.0],
                               [0.0, 0.0], [1.0, 0.0, 1.0], [0, 3, -6, 3]])
def test_roots_strips_zeros_eagerly_as_numpy(p):
    p = np.array(p)
    got, want = nx.roots(p), np.roots(p)
    assert got.shape == want.shape and got.dtype.kind == "c"
    np.testing.assert_allclose(_sorted(got), _sorted(want), atol=1e-7)


def test_roots_under_jit_take_strip_zeros_false_and_mark_leading_zeros_nan():
    with pytest.raises(ConcretizationError, match="roots"):
        rune.jit(nx.roots)(np.array([1.0, 2.0]))
    batch = np.array([[0.0, 1.0, -3.0, 2.0], [1.0, -6.0, 11.0, -6.0], [0.0, 0.0, 0.0, 0.0]])
    out = np.asarray(rune.jit(rune.vmap(lambda p: nx.roots(p, strip_zeros=False)))(batch))
    assert out.shape == (3, 3)
    np.testing.assert_allclose(_sorted(out[0, :2]), [1, 2], atol=1e-9)
    assert np.isnan(out[0, 2])
    np.testing.assert_allclose(_sorted(out[1]), [1, 2, 3], atol=1e-9)
    assert np.isnan(out[2]).all()


def test_roots_gradient_matches_the_implicit_function_theorem():
    # p(r) = 0 moves by dr = -(dp(r)) / p'(r): for the root r of x^2 - 3x + 2 at 2, d r / d p_k = -2^(2-k) / p'(2)
    p = np.array([1.0, -3.0, 2.0])
    g = rune.grad(lambda p: nx.real(nx.sum(nx.roots(p, strip_zeros=False) * nx.asarray([1.0, 0.0]))))(p)
    r = np.roots(p)[0]
    assert np.isclose(r, 2.0)
    np.testing.assert_allclose(np.asarray(g), -(r ** np.arange(2, -1, -1)) / np.polyval(np.polyder(p), r), atol=1e-9)


def test_poly_of_a_real_matrix_is_real_as_numpy():
    a = np.array([[0.0, -1.0], [1.0, 0.0]])     # eigenvalues +-i
    got = nx.poly(a)
    assert got.dtype == np.float64
    np.testing.assert_allclose(np.asarray(got), np.poly(a), atol=1e-12)


# ---------------------------------------------------------------- lstsq's residuals

@pytest.mark.parametrize("shape, b_shape", [((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 5), (3,)), ((4, 4), (4, 2))])
def test_lstsq_eagerly_returns_numpy_2_results(shape, b_shape):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(shape), rng.standard_normal(b_shape)
    x, resid, rank, s = nx.linalg.lstsq(a, b)
    x_np, resid_np, rank_np, s_np = np.linalg.lstsq(a, b)
    assert resid.shape == resid_np.shape and int(rank) == rank_np
    for got, want in ((x, x_np), (resid, resid_np), (s, s_np)):
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-10)


def test_lstsq_rank_deficient_gives_numpy_s_empty_residuals_eagerly_and_every_one_under_jit():
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    b = np.array([1.0, 0.0, 1.0])
    x, resid, rank, _ = nx.linalg.lstsq(a, b)
    x_np, resid_np, rank_np, _ = np.linalg.lstsq(a, b)
    assert resid.shape == (0,) == resid_np.shape and int(rank) == rank_np == 1
    np.testing.assert_allclose(np.asarray(x), x_np, atol=1e-12)
    _, resid_jit, _, _ = rune.jit(nx.linalg.lstsq)(a, b)
    np.testing.assert_allclose(np.asarray(resid_jit), [np.sum((b - a @ x_np) ** 2)], atol=1e-12)
    with pytest.raises(ConcretizationError, match="lstsq"):
        rune.jit(lambda a, b: nx.linalg.lstsq(a, b, numpy_resid=True))(a, b)


# ---------------------------------------------------------------- eig

def test_eig_of_complex_and_batched_matrices_matches_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))
    w, v = nx.linalg.eig(a)
    w_np = np.linalg.eigvals(a)
    np.testing.assert_allclose(np.asarray(w), w_np, atol=1e-12)
    v = np.asarray(v)
    np.testing.assert_allclose(a @ v, v * np.asarray(w)[:, None, :], atol=1e-12)
    assert nx.linalg.eigvals(np.eye(2, dtype=np.float32)).dtype == np.complex64
    assert nx.linalg.eigvals(np.eye(2, dtype=np.int32)).dtype == np.complex128


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_eig_of_half_precision_computes_in_float32_and_keeps_the_imaginary_parts(dtype):
    rotation = nx.asarray(np.array([[0.0, -1.0], [1.0, 0.0]]), dtype)
    w, v = nx.linalg.eig(rotation)
    assert w.dtype == v.dtype == np.complex64
    np.testing.assert_allclose(_sorted(w), [-1j, 1j], atol=1e-6)


def test_eig_gradient_of_a_complex_matrix_matches_finite_differences():
    """A loss of the eigenvalues and of the eigenvectors' moduli (independent of their
    arbitrary phases): the gradient of a real loss of complex A is dL/dx - i dL/dy (JAX's
    convention, rune/nx/complex.py), so re sum(g * D) is the derivative along D."""
    rng = np.random.default_rng(2)
    a = np.diag([1.0, 2.5, 4.0]) + 0.3 * (rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3)))
    weights = rng.standard_normal((3, 3))

    def loss(a):
        w, v = nx.linalg.eig(a)
        return nx.sum(nx.real(w) * nx.asarray([1.0, -2.0, 0.5])) + nx.sum(nx.imag(w) ** 2) + \
            nx.sum(nx.real(v * nx.conj(v)) * weights)

    g = np.asarray(rune.grad(loss)(a))
    direction = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    eps = 1e-6
    fd = (float(loss(a + eps * direction)) - float(loss(a - eps * direction))) / (2 * eps)
    np.testing.assert_allclose(np.real(np.sum(g * direction)), fd, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- errors name the function

@pytest.mark.parametrize("call, error, words", [
    (lambda: nx.polyder(np.ones(3), -1), ArgumentError, "polyder: m"),
    (lambda: nx.polyint(np.ones(3), 1.5), ArgumentError, "polyint: m"),
    (lambda: nx.polyint(np.ones(3), 3, k=[1.0, 2.0]), ShapeError, "polyint: k"),
    (lambda: nx.polyval(np.ones((2, 2)), 1.0), ShapeError, "polyval: p"),
    (lambda: nx.polyadd(np.ones((2, 2)), np.ones(2)), ShapeError, "polyadd: a1"),
    (lambda: nx.polyfit(np.ones(4), np.ones(3), 1), ShapeError, "polyfit: y"),
    (lambda: nx.polyfit(np.ones(4), np.ones(4), -1), ArgumentError, "polyfit: deg"),
    (lambda: nx.polyfit(np.arange(3.0), np.ones(3), 2, cov=True), ArgumentError, "polyfit"),
    (lambda: nx.poly(np.ones((2, 3))), ShapeError, "poly: seq_of_zeros"),
    (lambda: nx.roots(np.ones((2, 2))), ShapeError, "roots: p"),
    (lambda: nx.linalg.eig(np.ones((2, 3))), ShapeError, "linalg.eig"),
    (lambda: nx.linalg.eigvals(np.ones(3)), ShapeError, "linalg.eigvals"),
    (lambda: nx.linalg.cond(np.ones((2, 3)), 1), ShapeError, "linalg.cond"),
    (lambda: nx.linalg.lstsq(np.ones((3, 2)), np.ones(4)), ShapeError, "linalg.lstsq: b"),
    (lambda: nx.linalg.norm(np.ones((2, 2)), axis=2), AxisError, "linalg.norm: axis"),
    (lambda: nx.linalg.norm(np.ones((2, 2, 2)), ord=1), ShapeError, "linalg.norm"),
    (lambda: nx.linalg.norm(np.ones(3), ord="fro", axis=0), ArgumentError, "linalg.norm"),
    (lambda: nx.linalg.norm(np.ones((2, 2, 2)), axis=(0, 1, 2)), ArgumentError, "linalg.norm"),
    (lambda: nx.linalg.multi_dot([np.ones((2, 3)), np.ones((2, 3))]), ShapeError, "linalg.multi_dot"),
    (lambda: nx.linalg.multi_dot([np.ones((2, 3))]), ArgumentError, "linalg.multi_dot"),
    (lambda: nx.linalg.tensorinv(np.ones((2, 3, 4)), 1), ShapeError, "linalg.tensorinv"),
    (lambda: nx.linalg.tensorinv(np.ones((2, 2)), 0), ArgumentError, "linalg.tensorinv: ind"),
    (lambda: nx.linalg.tensorsolve(np.ones((2, 3, 4)), np.ones((2, 3))), ShapeError, "linalg.tensorsolve"),
])
def test_bad_input_is_a_rune_error_naming_the_function(call, error, words):
    with pytest.raises(error, match=words) as info:
        call()
    assert isinstance(info.value, RuneError)


def test_linalg_fft_and_random_list_only_public_names():
    for module in (nx.linalg, nx.fft, nx.random):
        names = [n for n in dir(module) if not (n.startswith("__") and n.endswith("__"))]
        assert names == sorted(module.__all__), module.__name__


@pytest.mark.cuda
def test_eig_on_a_gpu_runs_on_the_host_and_counts_the_round_trip():
    gpu = rune.devices("cuda")[0]
    a = np.diag([1.0, 2.5, 4.0]) + 0.3 * np.random.default_rng(3).standard_normal((3, 3))
    x = nx.asarray(a, device=gpu)
    rune.reset_stats()
    w, v = nx.linalg.eig(x)
    assert rune.stats()["transfers"] >= 2 and w.device == gpu
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvals(a), atol=1e-12)
    loss = rune.grad(lambda a: nx.sum(nx.real(nx.linalg.eigvals(a)) ** 2))
    np.testing.assert_allclose(np.asarray(rune.jit(loss)(x)), np.asarray(loss(a)), atol=1e-10)


_P, _Q = np.array([1.0, -3.0, 2.0, 5.0]), np.array([2.0, 1.0])
_X = np.linspace(0.0, 1.0, 5)
_A = np.diag([1.0, 2.0, 3.0]) + 0.1


@pytest.mark.parametrize("numpy_call, rune_call, args", [
    (lambda p, q: np.polydiv(p, q), lambda p, q: nx.polydiv(p, q, trim_leading_zeros=False), (_P, _Q)),
    (lambda p, x: np.polyval(p, x), nx.polyval, (_P, _X)),
    (lambda p: np.polyder(p, 2), lambda p: nx.polyder(p, 2), (_P,)),
    (lambda p: np.polyint(p, 2, k=[1.0, 2.0]), lambda p: nx.polyint(p, 2, k=[1.0, 2.0]), (_P,)),
    (lambda p, q: np.polymul(p, q), nx.polymul, (_P, _Q)),
    (lambda x, y: np.polyfit(x, y, 2), lambda x, y: nx.polyfit(x, y, 2), (_X, _X ** 3)),
    (lambda a, b: np.linalg.lstsq(a, b), lambda a, b: nx.linalg.lstsq(a, b, numpy_resid=False), (_A, _P[:3])),
    (lambda a: np.linalg.tensorinv(a, 1), lambda a: nx.linalg.tensorinv(a, 1), (_A,)),
    (lambda a, b: np.linalg.tensorsolve(a, b), nx.linalg.tensorsolve, (_A, _P[:3])),
    (lambda a: np.linalg.eigvals(a), nx.linalg.eigvals, (_A,)),
])
def test_numpy_functions_on_traced_values_run_rune_s(numpy_call, rune_call, args):
    got, want = rune.jit(numpy_call)(*args), rune_call(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=1e-12)


def test_numpy_linalg_norm_under_grad_runs_rune_s():
    x = np.array([0.5, -1.0, 2.0])
    g = rune.grad(lambda x: np.linalg.norm(x))(nx.asarray(x))
    np.testing.assert_allclose(np.asarray(g), x / np.linalg.norm(x), rtol=1e-12)
