"""Derivative and batching rules of the linalg primitives (rune/nx/linalg_prims.py),
written with nx operations (so they are themselves differentiable, jittable and
batchable). The formulas are the standard matrix-calculus ones JAX uses:
solve: dx = A^-1 (db - dA x); slogdet: d log|det A| = tr(A^-1 dA);
cholesky (Murray 2016): dL = L Phi(L^-1 dA L^-T), Phi the lower triangle with a
halved diagonal; eigh: dw = diag(V^T dA V), dV = V (F o V^T dA V) with
F_ij = 1 / (w_j - w_i); svdvals: ds = diag(U^T dA V); svd (reduced, as JAX's
JVP and PyTorch's svd_backward): with dS = U^T dA V and F_ij = 1 / (s_j^2 - s_i^2),
dU = U (F o (dS S + S dS^T)) + (I - U U^T) dA V S^-1, dV likewise on A^T;
qr (m >= n; Liao et al. 2019): dQ = Q (do - Q^T dA R^-1) + dA R^-1,
dR = (Q^T dA R^-1 - do) R with do the skew part of tril(Q^T dA R^-1, -1); its
transpose gA = (gQ + Q copyltu(R gR^T - gQ^T Q)) R^-T. Full-matrix svd of a
non-square matrix (its extra columns are not unique) and qr with m < n or
mode="complete" on m > n raise NotDifferentiableError, as in JAX.
"""
import numpy as np

from .errors import NotDifferentiableError

from .autodiff.jvp import jvp_rules
from .autodiff.vjp import vjp_rules
from .batching import batch_rules, to_front
from .core.trace import bind
from .nx import ops as nx
from .nx.linalg_prims import cholesky_p, eigh_p, qr_p, slogdet_p, solve_p, svd_p, svdvals_p


def _mT(x):
    return nx.swapaxes(x, -1, -2)


def _mm(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = nx.matmul(out, x)
    return out


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
    return [sign, logabs], [None, nx.sum(_diag(bind(solve_p, a, ta)), -1)]


def _slogdet_vjp(cts, ins, outs, wants):
    a = ins[0]
    ct = cts[1]
    if ct is None:
        return (None,)
    n = a.shape[-1]
    eye = nx.broadcast_to(nx.constant_like(np.eye(n, dtype=a.dtype), a), a.shape)
    inv_t = _mT(bind(solve_p, a, eye))
    return (nx.multiply(nx.reshape(ct, ct.shape + (1, 1)), inv_t),)


jvp_rules[slogdet_p], vjp_rules[slogdet_p] = _slogdet_jvp, _slogdet_vjp


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


def _eigh_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    w, v = bind(eigh_p, a)
    inner = _mm(_mT(v), ta, v)
    return [w, v], [_diag(inner), _mm(v, nx.multiply(_gaps(w), inner))]


def _eigh_vjp(cts, ins, outs, wants):
    w, v = outs
    ct_w, ct_v = cts
    middle = None
    if ct_w is not None:
        middle = _diag_matrix(ct_w)
    if ct_v is not None:
        term = nx.multiply(_gaps(w), _mm(_mT(v), ct_v))
        middle = term if middle is None else nx.add(middle, term)
    if middle is None:
        return (None,)
    return (_mm(v, middle, _mT(v)),)


jvp_rules[eigh_p], vjp_rules[eigh_p] = _eigh_jvp, _eigh_vjp


# ---------------------------------------------------------------- svdvals

def _svdvals_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    u, s, vh = bind(svd_p, a, full_matrices=False)
    return s, _diag(_mm(_mT(u), ta, _mT(vh)))


def _svdvals_vjp(ct, ins, out, wants):
    u, _, vh = bind(svd_p, ins[0], full_matrices=False)
    return (_mm(u, _diag_matrix(ct), vh),)


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
    middle = _diag_matrix(g_s) if g_s is not None else nx.zeros_like(_mm(_mT(u), u))
    s_inv = _safe_inverse(row)
    extra = None
    if g_u is not None:
        utg = _mm(_mT(u), g_u)
        middle = nx.add(middle, nx.multiply(nx.multiply(nx.subtract(utg, _mT(utg)), f), row))
        if m > n:
            extra = _mm(nx.multiply(nx.subtract(g_u, _mm(u, utg)), s_inv), vh)
    if g_vh is not None:
        g_v = _mT(g_vh)
        vtg = _mm(vh, g_v)
        middle = nx.add(middle, nx.multiply(_mT(row), nx.multiply(nx.subtract(vtg, _mT(vtg)), f)))
        if n > m:
            term = _mm(u, _mT(nx.multiply(nx.subtract(g_v, _mm(v, vtg)), s_inv)))
            extra = term if extra is None else nx.add(extra, term)
    out = _mm(u, middle, vh)
    return (out if extra is None else nx.add(out, extra),)


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
    g_q, g_r = cts
    g_q = g_q if g_q is not None else nx.zeros_like(q)
    g_r = g_r if g_r is not None else nx.zeros_like(r)
    mmat = nx.subtract(_mm(r, _mT(g_r)), _mm(_mT(g_q), q))
    low = nx.multiply(mmat, _lower_mask(mmat, -1))
    copyltu = nx.add(nx.add(low, _mT(low)), nx.multiply(mmat, _eye(mmat.shape[-1], mmat)))
    return (_right_solve(nx.add(g_q, _mm(q, copyltu)), _mT(r)),)


jvp_rules[qr_p], vjp_rules[qr_p] = _qr_jvp, _qr_vjp


# ---------------------------------------------------------------- complex matrices

def _real_matrices_only(prim, rule, matrix_of):
    """The rule, refusing complex matrices: the formulas above transpose where a
    complex matrix needs the conjugate transpose (solve, being holomorphic, is exact)."""
    def run(*args, **params):
        a = matrix_of(args)
        if a.dtype.kind == "c":
            raise NotDifferentiableError(
                f"{prim.name}: derivatives for complex matrices are not implemented (got {a.dtype.name}); "
                f"differentiate the real and imaginary parts as a real block matrix instead")
        return rule(*args, **params)
    return run


for _prim in (cholesky_p, eigh_p, slogdet_p, svdvals_p, svd_p, qr_p):
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


for _prim in (solve_p, cholesky_p, eigh_p, slogdet_p, svdvals_p, svd_p, qr_p):
    batch_rules[_prim] = _leading_batch(_prim)
