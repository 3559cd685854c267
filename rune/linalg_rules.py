"""Derivative and batching rules of the linalg primitives (rune/nx/linalg_prims.py),
written with nx operations (so they are themselves differentiable, jittable and
batchable). The formulas are the standard matrix-calculus ones JAX uses:
solve: dx = A^-1 (db - dA x); det: d det A = tr(adj(A) dA), the adjugate
adj(A) = det(A) A^-1 computed so that it stays finite (and exact) at singular A;
slogdet: with z = tr(A^-1 dA), d log|det A| = re z and d sign = sign i im z;
cholesky (Murray 2016): dL = L Phi(L^-1 dA L^-T), Phi the lower triangle with a
halved diagonal; eigh (Hermitian dA = (dA + dA^H) / 2, as JAX symmetrizes):
dw = re diag(V^H dA V), dV = V (F o V^H dA V) with F_ij = 1 / (w_j - w_i);
svdvals: ds = re diag(U^H dA V); svd (reduced, as JAX's
JVP and PyTorch's svd_backward): with dS = U^T dA V and F_ij = 1 / (s_j^2 - s_i^2),
dU = U (F o (dS S + S dS^T)) + (I - U U^T) dA V S^-1, dV likewise on A^T;
qr (m >= n; Liao et al. 2019): dQ = Q (do - Q^T dA R^-1) + dA R^-1,
dR = (Q^T dA R^-1 - do) R with do the skew part of tril(Q^T dA R^-1, -1); its
transpose gA = (gQ + Q copyltu(R gR^T - gQ^T Q)) R^-T. Full-matrix svd of a
non-square matrix (its extra columns are not unique) and qr with m < n or
mode="complete" on m > n raise NotDifferentiableError, as in JAX.

Complex matrices follow JAX's convention (rune/complex_rules.py): a VJP rule is the
transpose of its JVP under the pairing re sum(ct * t), without conjugation, so the
holomorphic det and solve pull back by adj(A)^T and A^-T, and the real-valued
eigenvalues, singular values and log|det| by conj(V) diag(ct) V^T and the like.
"""
import numpy as np

from .errors import NotDifferentiableError

from .autodiff.jvp import jvp_rules
from .autodiff.vjp import vjp_rules
from .batching import batch_rules, to_front
from .core.trace import bind
from .nx import ops as nx
from .nx.linalg import _eps
from .nx.linalg_prims import cholesky_p, det_p, eigh_p, qr_p, slogdet_p, solve_p, svd_p, svdvals_p


def _mT(x):
    return nx.swapaxes(x, -1, -2)


def _mm(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = nx.matmul(out, x)
    return out


def _is_complex(x):
    return x.dtype.kind == "c"


def _conj(x):
    return nx.conj(x) if _is_complex(x) else x


def _H(x):
    """The conjugate transpose of the last two axes."""
    return _conj(_mT(x))


def _real_part(x):
    return nx.real(x) if _is_complex(x) else x


def _times_i(x):
    """i x for real x."""
    return nx.make_complex(nx.multiply(x, 0), x)


def _sum_terms(*terms):
    """The sum of the terms that are not None (None: a zero cotangent, as rules
    receive for unused outputs); None if all are."""
    present = [t for t in terms if t is not None]
    if not present:
        return None
    out = present[0]
    for t in present[1:]:
        out = nx.add(out, t)
    return out


def _matrix_of_scalars(x):
    """A scalar per matrix as a (..., 1, 1) array, to scale a stack of matrices."""
    return nx.reshape(x, x.shape + (1, 1))


def _diag(x):
    """The diagonal of the last two axes, as a vector."""
    n = x.shape[-1]
    return nx.sum(nx.multiply(x, nx.constant_like(np.eye(n, dtype=x.dtype), x)), -1)


def _diag_matrix(v):
    n = v.shape[-1]
    return nx.multiply(nx.expand_dims(v, -1), nx.constant_like(np.eye(n, dtype=v.dtype), v))


# ---------------------------------------------------------------- solve

def _solve_jvp(primals, tangents):
    (a, b), (ta, tb) = primals, tangents
    x = bind(solve_p, a, b)
    rhs = tb if tb is not None else None
    if ta is not None:
        term = nx.negative(_mm(ta, x))
        rhs = term if rhs is None else nx.add(rhs, term)
    return x, bind(solve_p, a, rhs)


def _solve_vjp(ct, ins, out, wants):
    a, _ = ins
    ct_b = bind(solve_p, _mT(a), ct)
    ct_a = nx.negative(_mm(ct_b, _mT(out))) if wants[0] else None
    return ct_a, ct_b if wants[1] else None


jvp_rules[solve_p], vjp_rules[solve_p] = _solve_jvp, _solve_vjp


# ---------------------------------------------------------------- slogdet

def _slogdet_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    sign, logabs = bind(slogdet_p, a)
    z = nx.sum(_diag(bind(solve_p, a, ta)), -1)
    if not _is_complex(a):      # the sign of a real determinant is locally constant
        return [sign, logabs], [None, z]
    return [sign, logabs], [nx.multiply(sign, _times_i(nx.imag(z))), nx.real(z)]


def _slogdet_vjp(cts, ins, outs, wants):
    a = ins[0]
    ct_sign, ct_logabs = cts
    # the transpose of (re z, sign i im z): the coefficient of z is ct_logabs + i im(ct_sign sign)
    turn = None
    if ct_sign is not None and _is_complex(a):
        turn = _times_i(nx.imag(nx.multiply(ct_sign, outs[0])))
    coef = _sum_terms(ct_logabs, turn)
    if coef is None:
        return (None,)
    return (nx.multiply(_matrix_of_scalars(coef), _mT(_inverse(a))),)


jvp_rules[slogdet_p], vjp_rules[slogdet_p] = _slogdet_jvp, _slogdet_vjp


# ---------------------------------------------------------------- det

def _adjugate(a):
    """adj(A) = det(A) A^-1, also where A is singular (it is a polynomial in A).
    Well-conditioned matrices take det(A) A^-1, whose own derivatives (hessians of
    det) are exact; the others the SVD A = U diag(s) Vh, whose adjugate
    det(U) det(Vh) Vh^H diag(prod_{j != i} s_j) U^H divides by nothing, so it stays
    accurate as the smallest singular values reach 0 (rank n-1 gives a rank-1
    adjugate, lower ranks 0). Derivatives of that branch (second derivatives of
    det at singular matrices) inherit the svd rule's blind spot: they can be
    wrong where singular values repeat (two exact zeros, say)."""
    n = a.shape[-1]
    if n == 0:
        return a
    u, s, vh = bind(svd_p, a, full_matrices=False)
    well = _matrix_of_scalars(nx.greater(nx.min(s, -1), nx.multiply(nx.max(s, -1), float(np.sqrt(_eps(a))))))
    # The inverse branch sees the identity where it is not taken, so that solve's NaNs
    # at singular matrices reach neither the result nor its derivatives (the SVD branch
    # and its derivatives are finite everywhere).
    invertible = nx.where(well, a, nx.broadcast_to(_eye(n, a), a.shape))
    by_inverse = nx.multiply(_matrix_of_scalars(bind(det_p, invertible)), _inverse(invertible))
    # others[..., i] = prod_{j != i} s_j, without dividing by s_i
    others = nx.prod(nx.where(nx.constant_like(np.eye(n, dtype=bool), s), s.dtype.type(1),
                              nx.expand_dims(s, -2)), -1)
    phase = nx.multiply(bind(slogdet_p, u)[0], bind(slogdet_p, vh)[0])   # det of unitary factors
    by_svd = nx.multiply(_matrix_of_scalars(phase),
                         _mm(_H(vh), nx.multiply(nx.expand_dims(nx.astype(others, a.dtype), -1), _H(u))))
    return nx.where(well, by_inverse, by_svd)


def _det_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    return bind(det_p, a), nx.sum(nx.multiply(_mT(_adjugate(a)), ta), (-2, -1))


def _det_vjp(ct, ins, out, wants):
    return (nx.multiply(_matrix_of_scalars(ct), _mT(_adjugate(ins[0]))),)


jvp_rules[det_p], vjp_rules[det_p] = _det_jvp, _det_vjp


# ---------------------------------------------------------------- cholesky

def _phi(x):
    """The lower triangle with its diagonal halved."""
    n = x.shape[-1]
    mask = np.tril(np.ones((n, n)), -1) + 0.5 * np.eye(n)
    return nx.multiply(x, nx.constant_like(mask.astype(x.dtype), x))


def _inverse(a):
    n = a.shape[-1]
    return bind(solve_p, a, nx.broadcast_to(nx.constant_like(np.eye(n, dtype=a.dtype), a), a.shape))


def _cholesky_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    chol = bind(cholesky_p, a)
    l_inv = _inverse(chol)
    return chol, _mm(chol, _phi(_mm(l_inv, ta, _mT(l_inv))))


def _cholesky_vjp(ct, ins, chol, wants):
    l_inv = _inverse(chol)
    p = _phi(_mm(_mT(chol), ct))
    s = _mm(_mT(l_inv), p, l_inv)
    return (nx.multiply(nx.add(s, _mT(s)), 0.5),)


jvp_rules[cholesky_p], vjp_rules[cholesky_p] = _cholesky_jvp, _cholesky_vjp


# ---------------------------------------------------------------- eigh

def _gaps(w):
    """F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (and where eigenvalues repeat)."""
    diff = nx.subtract(nx.expand_dims(w, -2), nx.expand_dims(w, -1))
    zero = nx.equal(diff, 0)
    return nx.where(zero, w.dtype.type(0), nx.divide(1, nx.where(zero, w.dtype.type(1), diff)))


def _hermitian_part(x):
    """(x + x^H) / 2: eigh's derivatives see only the Hermitian part of a
    perturbation, and its gradients are Hermitian, as JAX's (which symmetrizes
    the input)."""
    return nx.multiply(nx.add(x, _H(x)), 0.5)


def _eigh_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    w, v = bind(eigh_p, a)
    inner = _mm(_H(v), _hermitian_part(ta), v)
    # F o inner has a zero diagonal: V^H dV = 0 there (JAX's choice of phase)
    return [w, v], [_real_part(_diag(inner)), _mm(v, nx.multiply(_gaps(w), inner))]


def _eigh_vjp(cts, ins, outs, wants):
    w, v = outs
    ct_w, ct_v = cts
    middle = _sum_terms(nx.astype(_diag_matrix(ct_w), v.dtype) if ct_w is not None else None,
                        nx.multiply(_gaps(w), _mm(_mT(v), ct_v)) if ct_v is not None else None)
    if middle is None:
        return (None,)
    return (_hermitian_part(_mm(_conj(v), middle, _mT(v))),)


jvp_rules[eigh_p], vjp_rules[eigh_p] = _eigh_jvp, _eigh_vjp


# ---------------------------------------------------------------- svdvals

def _svdvals_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    u, s, vh = bind(svd_p, a, full_matrices=False)
    return s, _real_part(_diag(_mm(_H(u), ta, _H(vh))))


def _svdvals_vjp(ct, ins, out, wants):
    u, _, vh = bind(svd_p, ins[0], full_matrices=False)
    return (_mm(_conj(u), nx.astype(_diag_matrix(ct), u.dtype), _conj(vh)),)


jvp_rules[svdvals_p], vjp_rules[svdvals_p] = _svdvals_jvp, _svdvals_vjp


# ---------------------------------------------------------------- svd

def _eye(n, like):
    return nx.constant_like(np.eye(n, dtype=like.dtype), like)


def _safe_inverse(x):
    """1 / x, and 0 where x is 0 (repeated or zero singular values carry no rotation)."""
    zero = nx.equal(x, 0)
    return nx.where(zero, x.dtype.type(0), nx.divide(1, nx.where(zero, x.dtype.type(1), x)))


def _svd_gaps(s):
    """F_ij = 1 / (s_j^2 - s_i^2) off the diagonal (0 on it and where values repeat)."""
    s2 = nx.multiply(s, s)
    return _safe_inverse(nx.subtract(nx.expand_dims(s2, -2), nx.expand_dims(s2, -1)))


def _svd_check(a, full_matrices, what):
    if full_matrices and a.shape[-1] != a.shape[-2]:
        raise NotDifferentiableError(
            f"linalg.svd: {what} of full_matrices=True on a non-square {a.shape[-2]}x{a.shape[-1]} matrix "
            f"is not defined (the extra singular vectors are not unique); use full_matrices=False")


def _svd_jvp(primals, tangents, *, full_matrices):
    (a,), (ta,) = primals, tangents
    _svd_check(a, full_matrices, "the derivative")
    u, s, vh = bind(svd_p, a, full_matrices=False)
    v = _mT(vh)
    m, n = a.shape[-2:]
    ds_mat = _mm(_mT(u), ta, v)
    row = nx.expand_dims(s, -2)                      # s_j along the last axis
    f = _svd_gaps(s)
    dss, sds = nx.multiply(ds_mat, row), nx.multiply(_mT(row), ds_mat)
    du = _mm(u, nx.multiply(f, nx.add(dss, _mT(dss))))
    dv = _mm(v, nx.multiply(f, nx.add(sds, _mT(sds))))
    s_inv = _safe_inverse(row)
    if m > n:
        dav = _mm(ta, v)
        du = nx.add(du, nx.multiply(nx.subtract(dav, _mm(u, _mT(u), dav)), s_inv))
    if n > m:
        dau = _mm(_mT(ta), u)
        dv = nx.add(dv, nx.multiply(nx.subtract(dau, _mm(v, vh, dau)), s_inv))
    return [u, s, vh], [du, _diag(ds_mat), _mT(dv)]


def _svd_vjp(cts, ins, outs, wants, *, full_matrices):
    a = ins[0]
    _svd_check(a, full_matrices, "the gradient")
    u, s, vh = outs
    g_u, g_s, g_vh = cts
    v = _mT(vh)
    m, n = a.shape[-2:]
    row = nx.expand_dims(s, -2)
    f = _svd_gaps(s)        # F_jk = 1 / (s_k^2 - s_j^2)
    s_inv = _safe_inverse(row)
    # unused outputs reach the rule as None (zero cotangents): their terms drop out
    by_s = by_u = by_v = extra_u = extra_v = None
    if g_s is not None:
        by_s = _diag_matrix(g_s)
    if g_u is not None:
        utg = _mm(_mT(u), g_u)
        by_u = nx.multiply(nx.multiply(nx.subtract(utg, _mT(utg)), f), row)
        if m > n:
            extra_u = _mm(nx.multiply(nx.subtract(g_u, _mm(u, utg)), s_inv), vh)
    if g_vh is not None:
        g_v = _mT(g_vh)
        vtg = _mm(vh, g_v)
        by_v = nx.multiply(_mT(row), nx.multiply(nx.subtract(vtg, _mT(vtg)), f))
        if n > m:
            extra_v = _mm(u, _mT(nx.multiply(nx.subtract(g_v, _mm(v, vtg)), s_inv)))
    middle = _sum_terms(by_s, by_u, by_v)
    return (_sum_terms(_mm(u, middle, vh) if middle is not None else None, extra_u, extra_v),)


jvp_rules[svd_p], vjp_rules[svd_p] = _svd_jvp, _svd_vjp


# ---------------------------------------------------------------- qr

def _qr_check(a, mode, what):
    m, n = a.shape[-2:]
    if m < n or (mode == "complete" and m > n):
        raise NotDifferentiableError(
            f"linalg.qr: {what} is defined for m >= n (and mode='reduced' unless square), got a "
            f"{m}x{n} matrix with mode={mode!r}")


def _right_solve(x, r):
    """x R^-1 (R upper triangular, invertible)."""
    return _mT(bind(solve_p, _mT(r), _mT(x)))


def _lower_mask(x, k):
    n = x.shape[-1]
    return nx.constant_like(np.tril(np.ones((n, n)), k).astype(x.dtype), x)


def _qr_jvp(primals, tangents, *, mode):
    (a,), (ta,) = primals, tangents
    _qr_check(a, mode, "the derivative")
    q, r = bind(qr_p, a, mode=mode)
    dx_rinv = _right_solve(ta, r)
    qt_dx_rinv = _mm(_mT(q), dx_rinv)
    low = nx.multiply(qt_dx_rinv, _lower_mask(qt_dx_rinv, -1))
    do = nx.subtract(low, _mT(low))
    dq = nx.add(_mm(q, nx.subtract(do, qt_dx_rinv)), dx_rinv)
    dr = _mm(nx.subtract(qt_dx_rinv, do), r)
    return [q, r], [dq, dr]


def _qr_vjp(cts, ins, outs, wants, *, mode):
    a = ins[0]
    _qr_check(a, mode, "the gradient")
    q, r = outs
    g_q, g_r = cts      # None where an output is unused (a zero cotangent)
    mmat = _sum_terms(_mm(r, _mT(g_r)) if g_r is not None else None,
                      nx.negative(_mm(_mT(g_q), q)) if g_q is not None else None)
    if mmat is None:
        return (None,)
    low = nx.multiply(mmat, _lower_mask(mmat, -1))
    copyltu = nx.add(nx.add(low, _mT(low)), nx.multiply(mmat, _eye(mmat.shape[-1], mmat)))
    return (_right_solve(_sum_terms(g_q, _mm(q, copyltu)), _mT(r)),)


jvp_rules[qr_p], vjp_rules[qr_p] = _qr_jvp, _qr_vjp


# ---------------------------------------------------------------- complex matrices

def _real_matrices_only(prim, rule, matrix_of):
    """The rule, refusing complex matrices: the cholesky, svd and qr formulas above
    transpose where a complex matrix needs the conjugate transpose."""
    def run(*args, **params):
        a = matrix_of(args)
        if a.dtype.kind == "c":
            raise NotDifferentiableError(
                f"{prim.name}: derivatives for complex matrices are not implemented (got {a.dtype.name}); "
                f"differentiate the real and imaginary parts as a real block matrix instead")
        return rule(*args, **params)
    return run


for _prim in (cholesky_p, svd_p, qr_p):
    jvp_rules[_prim] = _real_matrices_only(_prim, jvp_rules[_prim], lambda args: args[0][0])
    vjp_rules[_prim] = _real_matrices_only(_prim, vjp_rules[_prim], lambda args: args[1][0])


# ---------------------------------------------------------------- batching

def _leading_batch(prim):
    """Every operand gets the batch as its first axis (broadcast where unbatched):
    the primitives already loop over leading axes."""
    def rule(values, dims, size, **params):
        aligned = [nx.broadcast_to(v, (size,) + tuple(v.shape)) if d is None else to_front(v, d)
                   for v, d in zip(values, dims)]
        out = bind(prim, *aligned, **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)
    return rule


for _prim in (solve_p, cholesky_p, eigh_p, slogdet_p, det_p, svdvals_p, svd_p, qr_p):
    batch_rules[_prim] = _leading_batch(_prim)
