"""nx.linalg beyond the op table: errors for users, and the derivatives of svd, qr and pinv
(complex ones: test_linalg_complex_derivatives.py)."""
import numpy as np
import pytest

import rune
from rune import nx


def _fd_grad(f, a, h=1e-6):
    out = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[i] = h
        out[i] = (f(a + e) - f(a - e)) / (2 * h)
    return out


_W = np.random.default_rng(3).standard_normal((3, 6, 6))


def _svd_loss(x):
    """Depends on U, s and Vh through sign-invariant products (singular vectors
    are defined up to sign, so finite differences of U alone are meaningless)."""
    u, s, vh = nx.linalg.svd(x, full_matrices=False)
    m, n = x.shape
    outer = nx.multiply(u[:, :1], vh[:1, :])
    return (nx.sum(nx.multiply(nx.matmul(nx.multiply(u, s * s), vh), nx.asarray(_W[0][:m, :n])))
            + nx.sum(nx.multiply(outer, nx.asarray(_W[1][:m, :n]))) + nx.sum(s * s * s))


def _qr_loss(x):
    q, r = nx.linalg.qr(x)
    return (nx.sum(nx.multiply(q, nx.asarray(_W[0][:q.shape[0], :q.shape[1]])))
            + nx.sum(nx.multiply(r, nx.asarray(_W[1][:r.shape[0], :r.shape[1]]))))


def _pinv_loss(x):
    return nx.sum(nx.multiply(nx.linalg.pinv(x), nx.asarray(_W[2][:x.shape[1], :x.shape[0]])))


@pytest.mark.parametrize("loss, shape", [(_svd_loss, (4, 3)), (_svd_loss, (3, 4)), (_svd_loss, (3, 3)),
                                         (_qr_loss, (4, 3)), (_qr_loss, (3, 3)), (_pinv_loss, (4, 3)),
                                         (_pinv_loss, (3, 4))])
def test_svd_qr_pinv_derivatives_match_finite_differences(loss, shape):
    rng = np.random.default_rng(sum(shape))
    a, t = rng.standard_normal(shape), rng.standard_normal(shape)
    f = lambda v: float(loss(nx.asarray(v)))
    np.testing.assert_allclose(np.asarray(rune.grad(loss)(nx.asarray(a))), _fd_grad(f, a), rtol=1e-6, atol=1e-7)
    _, tangent = rune.jvp(loss, (nx.asarray(a),), (nx.asarray(t),))
    assert float(tangent) == pytest.approx((f(a + 1e-6 * t) - f(a - 1e-6 * t)) / 2e-6, rel=1e-6)


def test_svd_and_qr_derivatives_vmap_like_a_loop():
    a = np.random.default_rng(5).standard_normal((3, 4, 3))
    g = rune.vmap(rune.grad(lambda x: _svd_loss(x) + _qr_loss(x)))(nx.asarray(a))
    want = [np.asarray(rune.grad(lambda x: _svd_loss(x) + _qr_loss(x))(nx.asarray(b))) for b in a]
    np.testing.assert_allclose(np.asarray(g), np.stack(want), rtol=1e-9, atol=1e-12)


def test_undefined_svd_and_qr_derivatives_say_so():
    a = nx.asarray(np.arange(6.0).reshape(2, 3) + np.eye(2, 3))
    with pytest.raises(rune.NotDifferentiableError, match="full_matrices=False"):
        rune.grad(lambda x: nx.sum(nx.linalg.svd(x).U))(a)
    with pytest.raises(rune.NotDifferentiableError, match="m >= n"):
        rune.grad(lambda x: nx.sum(nx.linalg.qr(x).R))(a)
    np.testing.assert_allclose(rune.grad(lambda x: nx.sum(nx.linalg.svdvals(x)))(a),
                               sum(np.outer(u, v) for u, v in zip(*(lambda u, s, vh: (u.T, vh))(
                                   *np.linalg.svd(np.asarray(a), full_matrices=False)))), rtol=1e-9)


def test_shape_errors_name_the_function():
    with pytest.raises(rune.ShapeError, match="linalg.inv: expected square matrices"):
        nx.linalg.inv(nx.zeros((2, 3)))
    with pytest.raises(rune.ShapeError, match="linalg.det: expected a stack of matrices"):
        nx.linalg.det(nx.zeros((3,)))
    with pytest.raises(rune.ShapeError, match="linalg.solve"):
        nx.linalg.solve(nx.eye(3), nx.zeros((4,)))


def test_singular_matrices_give_nan_not_an_exception():
    out = nx.linalg.inv(nx.zeros((2, 2)))
    assert np.isnan(np.asarray(out)).all()
    assert float(nx.linalg.det(nx.zeros((2, 2)))) == 0.0


@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_modes_match_numpy(mode):
    a = np.random.default_rng(3).standard_normal((2, 5, 3))
    q, r = nx.linalg.qr(nx.asarray(a), mode=mode)
    want_q, want_r = np.linalg.qr(a, mode=mode)
    assert q.shape == want_q.shape and r.shape == want_r.shape
    np.testing.assert_allclose(np.abs(np.asarray(r)), np.abs(want_r), atol=1e-10)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, atol=1e-10)


def test_complex_matrices_solve_and_factorize_like_numpy():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    h = a @ a.conj().T
    np.testing.assert_allclose(np.asarray(nx.linalg.solve(nx.asarray(a), nx.asarray(b))), np.linalg.solve(a, b))
    np.testing.assert_allclose(np.asarray(nx.linalg.cholesky(nx.asarray(h))), np.linalg.cholesky(h))
    w = nx.linalg.eigvalsh(nx.asarray(h))
    assert w.dtype == nx.float64
    np.testing.assert_allclose(np.asarray(w), np.linalg.eigvalsh(h))
    np.testing.assert_allclose(np.asarray(nx.linalg.svdvals(nx.asarray(a))), np.linalg.svd(a, compute_uv=False))
    np.testing.assert_allclose(np.asarray(nx.linalg.det(nx.asarray(a))), np.linalg.det(a))
    np.testing.assert_allclose(np.asarray(nx.linalg.pinv(nx.asarray(b))), np.linalg.pinv(b), atol=1e-12)
    np.testing.assert_allclose(np.asarray(nx.linalg.vector_norm(nx.asarray(b))), np.linalg.norm(b))
    np.testing.assert_allclose(np.asarray(nx.linalg.matrix_norm(nx.asarray(b))), np.linalg.norm(b, "fro"))


def test_complex_solve_is_differentiable():
    rng = np.random.default_rng(12)
    a = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    loss = lambda m: nx.sum(nx.abs(nx.linalg.solve(m, nx.asarray(b))) ** 2)  # noqa: E731
    f = lambda m: float(loss(nx.asarray(m)))  # noqa: E731
    fd = np.zeros_like(a)
    for i in np.ndindex(a.shape):   # JAX's convention: df/dx - i df/dy
        e = np.zeros_like(a)
        e[i] = 1e-6
        fd[i] = (f(a + e) - f(a - e) - 1j * (f(a + 1j * e) - f(a - 1j * e))) / 2e-6
    np.testing.assert_allclose(np.asarray(rune.grad(loss)(nx.asarray(a))), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_cholesky_upper_is_the_conjugate_transpose_of_the_lower_factor(dtype):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 4, 4)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((2, 4, 4))
    h = a @ np.conj(np.swapaxes(a, -1, -2)) + 4 * np.eye(4)
    upper = np.asarray(nx.linalg.cholesky(nx.asarray(h), upper=True))
    np.testing.assert_allclose(upper, np.linalg.cholesky(h, upper=True), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.conj(np.swapaxes(upper, -1, -2)) @ upper, h, rtol=1e-12, atol=1e-12)
