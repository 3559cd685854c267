"""Derivatives of nx.linalg against independent oracles (finite differences of
NumPy's own factorizations in float64, the adjugate by cofactors): gradients
through one output of a multi-output factorization, det's gradient (the
adjugate) at singular matrices, and complex matrices with JAX's convention
(grad of a real f of z = x + iy is df/dx - i df/dy)."""
import numpy as np
import pytest

import rune
from rune import nx
from oracles import fd_grad, fd_complex_grad

_C = np.random.default_rng(40).standard_normal((2, 4, 4))


def _adjugate(a):
    """adj(A)_ji = (-1)^(i+j) det(A without row i and column j), by NumPy dets of the minors."""
    n = a.shape[-1]
    cof = np.zeros_like(a)
    for i in range(n):
        for j in range(n):
            cof[i, j] = (-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
    return cof.T


def _low_rank(n, rank, seed, dtype=np.float64):
    """An n x n matrix of rank `rank` with small integer (Gaussian integer) entries, so
    it is exactly singular in floating point."""
    rng = np.random.default_rng(seed)
    draw = (lambda s: rng.integers(-3, 4, s) + 1j * rng.integers(-3, 4, s)) if dtype == np.complex128 else \
        (lambda s: rng.integers(-3, 4, s).astype(np.float64))
    a = draw((n, rank)) @ draw((rank, n))
    assert np.linalg.matrix_rank(a) == rank
    return a


# ---------------------------------------------------------------- one output of a factorization

def _column_signs(xp, v):
    """v with each column's sign fixed by its first row, so finite differences see one branch."""
    return v * xp.sign(v[:1, :])


def _sym(a):
    return (a + a.T) / 2


def _weigh(xp, x, k=0):
    """sum(x * C) for a fixed C of x's shape (vector or matrix)."""
    c = _C[k][0, :x.shape[0]] if x.ndim == 1 else _C[k][:x.shape[0], :x.shape[1]]
    return xp.sum(x * c)


def _svd(xp, a):
    return xp.linalg.svd(a, full_matrices=False)


def _eigh(xp, a):
    """The oracle symmetrizes: eigh differentiates as a function of (A + A^T) / 2 (JAX's convention)."""
    return nx.linalg.eigh(a) if xp is nx else np.linalg.eigh(_sym(a))


# loss(xp, a), run with xp = nx (the gradient) and xp = np (the finite-difference
# oracle); each reads a single output of the factorization
_SINGLE_OUTPUT = {
    "qr Q": lambda xp, a: _weigh(xp, xp.linalg.qr(a)[0]),
    "qr R": lambda xp, a: _weigh(xp, xp.linalg.qr(a)[1], 1),
    "svd U": lambda xp, a: _weigh(xp, _column_signs(xp, _svd(xp, a)[0])),
    "svd Vh": lambda xp, a: _weigh(xp, _column_signs(xp, xp.matrix_transpose(_svd(xp, a)[2])), 1),
    "svd S": lambda xp, a: _weigh(xp, _svd(xp, a)[1]),
    "eigh eigenvalues": lambda xp, a: _weigh(xp, _eigh(xp, a)[0]),
    "eigh eigenvectors": lambda xp, a: _weigh(xp, _column_signs(xp, _eigh(xp, a)[1])),
    "slogdet logabsdet": lambda xp, a: xp.linalg.slogdet(a)[1],
    "slogdet sign": lambda xp, a: xp.linalg.slogdet(a)[0],
}


def _shapes(name):
    """eigh and slogdet take square matrices, qr's derivative needs m >= n."""
    return [(3, 3)] if name.startswith(("eigh", "slogdet")) else [(4, 3), (3, 3)] + ([(3, 4)] * name.startswith("svd"))


@pytest.mark.parametrize("name, shape", [(name, shape) for name in sorted(_SINGLE_OUTPUT) for shape in _shapes(name)])
def test_grad_through_a_single_output_matches_finite_differences(name, shape):
    symmetric = name.startswith(("eigh", "slogdet"))
    loss = _SINGLE_OUTPUT[name]
    a = np.random.default_rng(sum(shape)).standard_normal(shape)
    if symmetric:
        a = _sym(a) + 3 * np.eye(shape[0])   # symmetric, positive determinant
    got = np.asarray(rune.grad(lambda m: loss(nx, m))(nx.asarray(a)))
    np.testing.assert_allclose(got, fd_grad(lambda m: loss(np, m), a), rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- det at singular matrices

@pytest.mark.parametrize("n, rank", [(3, 2), (4, 3), (3, 1), (4, 2)])
def test_det_gradient_at_singular_matrices_is_the_adjugate(n, rank):
    a = _low_rank(n, rank, seed=n + rank)
    want = _adjugate(a).T
    if rank <= n - 2:
        np.testing.assert_allclose(want, 0, atol=1e-12)     # the oracle agrees: the adjugate vanishes
    scale = np.abs(a).max() ** (n - 1)     # of the cofactors
    got = np.asarray(rune.grad(nx.linalg.det)(nx.asarray(a)))
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * scale)
    t = np.random.default_rng(7).standard_normal((n, n))
    value, tangent = rune.jvp(nx.linalg.det, (nx.asarray(a),), (nx.asarray(t),))
    assert float(value) == pytest.approx(0, abs=1e-13 * scale)
    assert float(tangent) == pytest.approx(np.sum(want * t), rel=1e-12, abs=1e-13 * scale)


def test_det_gradient_with_a_zero_column_and_near_singular():
    # a zero first column (an LU without a pivot there), and a matrix one singular value
    # of 1e-12 away from singular
    zero_col = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, -1.0], [0.0, 0.5, 4.0]])
    rng = np.random.default_rng(8)
    q1, q2 = np.linalg.qr(rng.standard_normal((2, 4, 4)))[0]
    near = q1 @ np.diag([3.0, 2.0, 0.5, 1e-12]) @ q2.T
    for a in (zero_col, near):
        want = _adjugate(a).T
        got = np.asarray(rune.grad(nx.linalg.det)(nx.asarray(a)))
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())


def test_det_gradient_vmaps_and_jits_like_a_loop():
    batch = np.stack([_low_rank(3, 2, 1), _low_rank(3, 3, 2), _low_rank(3, 1, 3), np.eye(3)])
    want = np.stack([_adjugate(a).T for a in batch])
    np.testing.assert_allclose(np.asarray(rune.vmap(rune.grad(nx.linalg.det))(nx.asarray(batch))), want,
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(rune.jit(rune.grad(lambda a: nx.sum(nx.linalg.det(a))))(nx.asarray(batch))),
                               want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rank", [3, 2])
def test_det_hessian_matches_finite_differences_of_the_adjugate(rank):
    # at the identity (repeated singular values) and at a rank-2 matrix
    a = np.eye(3) if rank == 3 else _low_rank(3, 2, 11)
    got = np.asarray(rune.hessian(nx.linalg.det)(nx.asarray(a)))
    want = np.zeros((3, 3, 3, 3))
    for k, l in np.ndindex(3, 3):
        e = np.zeros((3, 3))
        e[k, l] = 1e-6
        want[:, :, k, l] = (_adjugate(a + e).T - _adjugate(a - e).T) / 2e-6
    np.testing.assert_allclose(got, want, atol=1e-8)
    if rank == 3:   # d2 det / dA_ij dA_kl at I = d_ij d_kl - d_il d_kj
        eye = np.eye(3)
        np.testing.assert_allclose(got, np.einsum("ij,kl->ijkl", eye, eye) - np.einsum("il,kj->ijkl", eye, eye),
                                   atol=1e-12)


# ---------------------------------------------------------------- complex matrices

def _complex(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@pytest.mark.parametrize("rank", [3, 2])
def test_complex_det_is_holomorphic(rank):
    a = _low_rank(3, rank, 21, np.complex128)
    want = _adjugate(a).T
    np.testing.assert_allclose(np.asarray(rune.grad(nx.linalg.det, holomorphic=True)(nx.asarray(a))), want,
                               rtol=1e-9, atol=1e-12)
    t = _complex((3, 3), 22)
    _, tangent = rune.jvp(nx.linalg.det, (nx.asarray(a),), (nx.asarray(t),))
    fd = (np.linalg.det(a + 1e-6 * t) - np.linalg.det(a - 1e-6 * t)) / 2e-6
    assert complex(tangent) == pytest.approx(fd, rel=1e-7, abs=1e-9)
    abs2 = lambda m: nx.real(nx.linalg.det(m) * nx.conj(nx.linalg.det(m)))  # noqa: E731
    np.testing.assert_allclose(np.asarray(rune.grad(abs2)(nx.asarray(a))),
                               fd_complex_grad(lambda m: abs(np.linalg.det(m)) ** 2, a), rtol=1e-6, atol=1e-8)


_W = 0.3 - 1.1j


@pytest.mark.parametrize("parts", ["logabsdet", "sign", "both"])
def test_complex_slogdet_matches_finite_differences(parts):
    def loss(xp, sign, logabs):
        terms = {"logabsdet": 1.3 * logabs, "sign": xp.real(sign * np.conj(_W))}
        return terms["logabsdet"] + terms["sign"] if parts == "both" else terms[parts]

    a = _complex((3, 3), 23) + 2 * np.eye(3)
    got = np.asarray(rune.grad(lambda m: loss(nx, *nx.linalg.slogdet(m)))(nx.asarray(a)))
    want = fd_complex_grad(lambda m: loss(np, *np.linalg.slogdet(m)), a)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    t = _complex((3, 3), 24)
    _, (dsign, dlogabs) = rune.jvp(nx.linalg.slogdet, (nx.asarray(a),), (nx.asarray(t),))
    (s1, l1), (s0, l0) = np.linalg.slogdet(a + 1e-6 * t), np.linalg.slogdet(a - 1e-6 * t)
    assert complex(dsign) == pytest.approx((s1 - s0) / 2e-6, rel=1e-6)
    assert float(dlogabs) == pytest.approx((l1 - l0) / 2e-6, rel=1e-6)


def _hermitian(a):
    return (a + np.swapaxes(a, -1, -2).conj()) / 2


def _eigh_loss(xp, w, v):
    """Eigenvalues and eigenvector moduli (eigenvectors are defined up to a phase)."""
    n = w.shape[-1]
    return xp.sum(w * _C[0][0, :n]) + xp.sum(xp.real(v * xp.conj(v)) * _C[1][:n, :n])


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eigh_gradient_is_that_of_the_hermitian_part(dtype):
    # JAX's convention: eigh differentiates as a function of (A + A^H) / 2, so the
    # oracle perturbs every entry (real and imaginary parts) of A and symmetrizes
    rng = np.random.default_rng(25)
    a = rng.standard_normal((4, 4)) + (1j * rng.standard_normal((4, 4)) if dtype == np.complex128 else 0)
    a = _hermitian(a)
    oracle = lambda m: _eigh_loss(np, *np.linalg.eigh(_hermitian(m)))  # noqa: E731
    got = np.asarray(rune.grad(lambda m: _eigh_loss(nx, *nx.linalg.eigh(m)))(nx.asarray(a)))
    want = fd_complex_grad(oracle, a) if dtype == np.complex128 else fd_grad(oracle, a)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    weights = lambda xp, m: xp.sum(m * _C[0][0, :4])  # noqa: E731
    got = np.asarray(rune.grad(lambda m: weights(nx, nx.linalg.eigvalsh(m)))(nx.asarray(a)))
    oracle = lambda m: weights(np, np.linalg.eigvalsh(_hermitian(m)))  # noqa: E731
    want = fd_complex_grad(oracle, a) if dtype == np.complex128 else fd_grad(oracle, a)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_complex_eigh_jvp_keeps_the_phase_and_vmaps_like_a_loop():
    a = _hermitian(_complex((2, 3, 3), 26))
    t = _hermitian(_complex((3, 3), 27))
    (w, v), (dw, dv) = rune.jvp(nx.linalg.eigh, (nx.asarray(a[0]),), (nx.asarray(t),))
    w1, w0 = np.linalg.eigvalsh(a[0] + 1e-6 * t), np.linalg.eigvalsh(a[0] - 1e-6 * t)
    np.testing.assert_allclose(np.asarray(dw), (w1 - w0) / 2e-6, rtol=1e-6, atol=1e-8)
    # JAX's phase convention: V^H dV has a zero diagonal
    np.testing.assert_allclose(np.diagonal(np.asarray(v).conj().T @ np.asarray(dv)), 0, atol=1e-12)
    g = rune.grad(lambda m: _eigh_loss(nx, *nx.linalg.eigh(m)))
    np.testing.assert_allclose(np.asarray(rune.vmap(g)(nx.asarray(a))),
                               np.stack([np.asarray(g(nx.asarray(m))) for m in a]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4)])
def test_complex_svdvals_matches_finite_differences(shape):
    a = _complex(shape, sum(shape))
    weights = lambda xp, s: xp.sum(s * _C[0][0, :min(shape)])  # noqa: E731
    got = np.asarray(rune.grad(lambda m: weights(nx, nx.linalg.svdvals(m)))(nx.asarray(a)))
    np.testing.assert_allclose(got, fd_complex_grad(lambda m: weights(np, np.linalg.svd(m, compute_uv=False)), a),
                               rtol=1e-6, atol=1e-8)
    t = _complex(shape, 28)
    _, ds = rune.jvp(nx.linalg.svdvals, (nx.asarray(a),), (nx.asarray(t),))
    fd = (np.linalg.svd(a + 1e-6 * t, compute_uv=False) - np.linalg.svd(a - 1e-6 * t, compute_uv=False)) / 2e-6
    np.testing.assert_allclose(np.asarray(ds), fd, rtol=1e-6, atol=1e-8)
