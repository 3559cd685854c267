"""Derivatives of cholesky, qr, svd and pinv on complex matrices, in JAX's
convention (a VJP is the transpose of the JVP under re sum(ct * t); grad of a
real f of z = x + iy is df/dx - i df/dy), against independent oracles: central
differences of NumPy's float64 factorizations along real and imaginary
directions, the transpose identity re<v, J u> = re<J^T v, u>, and, for the
phase of singular vectors, NumPy's SVD with the phase JAX's rule picks
(V^H dV has a zero diagonal, the phase moves with U)."""
import numpy as np
import pytest

import rune
from rune import nx
from oracles import fd_complex_grad

_RTOL = {np.complex128: 1e-6, np.complex64: 2e-3, np.float64: 1e-6}


def _draw(rng, shape, dtype):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c" else x


def _hermitian(a):
    return (a + np.conj(np.swapaxes(a, -1, -2))) / 2


def _hpd(rng, shape, dtype):
    """A well-conditioned Hermitian positive-definite matrix."""
    a = _draw(rng, shape, dtype)
    return a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])


def _well_conditioned(rng, shape, dtype):
    return _draw(rng, shape, dtype) + max(shape[-2:]) * np.eye(*shape[-2:])


def _gauge_free_svd(xp, a):
    """What does not depend on the singular vectors' phases: S, U diag(S) Vh,
    |U|^2 (U * conj(U)), |Vh|^2 and the first singular pair's outer product."""
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    return (s, xp.matmul(u * s[..., None, :], vh), xp.real(u * xp.conj(u)), xp.real(vh * xp.conj(vh)),
            u[..., :, :1] * vh[..., :1, :])


# name -> (input, rune's outputs, NumPy's outputs); the oracles read the Hermitian
# part where rune's rule does (cholesky, as JAX's, differentiates (A + A^H) / 2)
_CASES = {
    "cholesky": (_hpd, lambda a: (nx.linalg.cholesky(a),), lambda a: (np.linalg.cholesky(_hermitian(a)),)),
    "qr": (_well_conditioned, lambda a: tuple(nx.linalg.qr(a)), lambda a: tuple(np.linalg.qr(a))),
    "svd": (_well_conditioned, lambda a: _gauge_free_svd(nx, a), lambda a: _gauge_free_svd(np, a)),
    "pinv": (_well_conditioned, lambda a: (nx.linalg.pinv(a),), lambda a: (np.linalg.pinv(a),)),
}
_SHAPES = {"cholesky": [(3, 3), (2, 3, 3)], "qr": [(4, 3), (3, 3)], "svd": [(4, 3), (3, 3), (3, 4)],
           "pinv": [(4, 3), (3, 4)]}
_PARAMS = [(name, shape) for name in _CASES for shape in _SHAPES[name]]


def _input(name, shape, dtype, seed=0):
    return _CASES[name][0](np.random.default_rng(seed + sum(shape)), shape, dtype)


def _central(f, a, t, h=1e-6):
    return [(p - m) / (2 * h) for p, m in zip(f(a + h * t), f(a - h * t))]


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name, shape", _PARAMS)
def test_jvp_matches_finite_differences_along_real_and_imaginary_directions(name, shape, dtype):
    _, fn, oracle = _CASES[name]
    a = _input(name, shape, np.complex128)
    rng = np.random.default_rng(1)
    for t in (rng.standard_normal(shape), 1j * rng.standard_normal(shape)):
        _, got = rune.jvp(lambda m: fn(m), (nx.asarray(a.astype(dtype)),), (nx.asarray(t.astype(dtype)),))
        for g, want in zip(got, _central(oracle, a, t)):
            scale = np.abs(want).max()
            np.testing.assert_allclose(np.asarray(g), want, rtol=_RTOL[dtype], atol=_RTOL[dtype] * scale)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, np.float64])
@pytest.mark.parametrize("name, shape", _PARAMS + [("svd factors", (4, 3)), ("svd factors", (3, 4))])
def test_vjp_is_the_transpose_of_the_jvp(name, shape, dtype):
    # re sum(v * J u) = re sum(J^T v * u) for any u and v, with no conjugation (JAX's
    # pairing); u is not Hermitian, so cholesky's JVP must take its Hermitian part
    # as the VJP does. The raw svd factors are gauge dependent: this pins their
    # VJP to their JVP (JAX's gauge, checked against NumPy below).
    fn = (lambda m: tuple(nx.linalg.svd(m, full_matrices=False))) if name == "svd factors" else _CASES[name][1]
    a = _input(name.split()[0], shape, dtype).astype(dtype)
    rng = np.random.default_rng(2)
    u = _draw(rng, shape, dtype).astype(dtype)
    outs, ju = rune.jvp(fn, (nx.asarray(a),), (nx.asarray(u),))
    vs = tuple(_draw(rng, o.shape, o.dtype).astype(o.dtype) for o in outs)
    _, pullback = rune.vjp(fn, nx.asarray(a))
    (jt_v,) = pullback(tuple(nx.asarray(v) for v in vs))
    lhs = sum(np.real(np.sum(v.astype(np.complex128) * np.asarray(j))) for v, j in zip(vs, ju))
    rhs = np.real(np.sum(np.asarray(jt_v).astype(np.complex128) * u))
    assert rhs == pytest.approx(lhs, rel=_RTOL[dtype] / 10, abs=_RTOL[dtype] / 10)


def _weighted(xp, outs):
    """A real loss reading every output: sum re(o * w) for fixed complex weights."""
    rng = np.random.default_rng(3)
    return sum(xp.sum(xp.real(o * _draw(rng, o.shape, np.complex128))) for o in outs)


@pytest.mark.parametrize("name, shape", [("cholesky", (3, 3)), ("qr", (4, 3)), ("svd", (3, 4)), ("pinv", (4, 3))])
def test_grad_is_df_dx_minus_i_df_dy(name, shape):
    _, fn, oracle = _CASES[name]
    a = _input(name, shape, np.complex128)
    got = np.asarray(rune.grad(lambda m: _weighted(nx, fn(m)))(nx.asarray(a)))
    want = fd_complex_grad(lambda m: _weighted(np, oracle(m)), a)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7 * np.abs(want).max())
    if name == "cholesky":      # of the Hermitian part: the gradient is Hermitian
        np.testing.assert_allclose(got, _hermitian(got), atol=1e-12)


def _svd_in_jax_gauge(a, at):
    """NumPy's SVD of `a`, each singular pair's phase chosen so that V_k(a) stays in
    phase with V_k(at) (v_k(at)^H v_k(a) real, positive): to first order V^H dV has a
    zero imaginary diagonal, the gauge of JAX's svd JVP; U_k takes the same phase
    (A = U S V^H is unchanged)."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    _, _, vh0 = np.linalg.svd(at, full_matrices=False)
    overlap = np.sum(vh * np.conj(vh0), -1)        # v_k(a)^H v_k(at): the rows of Vh are v_k^H
    phase = overlap / np.abs(overlap)
    return u * phase, s, vh * np.conj(phase)[:, None]


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 4)])
def test_svd_factors_move_in_jax_gauge(shape):
    # The factors themselves are defined up to a phase per singular pair; JAX's
    # rule (and rune's) puts the derivative of that phase on U: U^H dU has the
    # imaginary diagonal i im(U^H dA V)_kk / s_k, V^H dV a zero diagonal.
    a = _input("svd", shape, np.complex128)
    rng = np.random.default_rng(4)
    t = _draw(rng, shape, np.complex128)
    (u, s, vh), (du, ds, dvh) = rune.jvp(lambda m: tuple(nx.linalg.svd(m, full_matrices=False)),
                                         (nx.asarray(a),), (nx.asarray(t),))
    for got, want in zip((du, ds, dvh), _central(lambda m: _svd_in_jax_gauge(m, a), a, t)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-8)
    u, vh, du, dvh = (np.asarray(x) for x in (u, vh, du, dvh))
    np.testing.assert_allclose(np.diagonal(vh @ np.conj(dvh).T), 0, atol=1e-12)
    phase = np.diagonal(np.conj(u).T @ t @ np.conj(vh).T).imag / np.asarray(s)
    np.testing.assert_allclose(np.diagonal(np.conj(u).T @ du), 1j * phase, atol=1e-12)


def _all_factors_loss(m):
    hpd = nx.matmul(m, nx.conj(nx.matrix_transpose(m))) + 3 * nx.eye(3)
    return sum(_weighted(nx, fn(hpd if name == "cholesky" else m)) for name, (_, fn, _) in _CASES.items())


def test_complex_gradients_vmap_and_jit_like_a_loop():
    batch = np.stack([_input("qr", (3, 3), np.complex128, seed) for seed in range(3)])
    grad = rune.grad(_all_factors_loss)
    want = np.stack([np.asarray(grad(nx.asarray(m))) for m in batch])
    np.testing.assert_allclose(np.asarray(rune.vmap(grad)(nx.asarray(batch))), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(rune.jit(grad)(nx.asarray(batch[0]))), want[0], rtol=1e-10, atol=1e-12)
