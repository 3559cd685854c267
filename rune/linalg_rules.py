"""Derivative and batching rules of the linalg primitives (rune/nx/linalg_prims.py),
written with nx operations (so they are themselves differentiable, jittable and
batchable). The formulas are the standard matrix-calculus ones JAX uses:
solve: dx = A^-1 (db - dA x); slogdet: d log|det A| = tr(A^-1 dA);
cholesky (Murray 2016): dL = L Phi(L^-1 dA L^-T), Phi the lower triangle with a
halved diagonal; eigh: dw = diag(V^T dA V), dV = V (F o V^T dA V) with
F_ij = 1 / (w_j - w_i); svdvals: ds = diag(U^T dA V). svd and qr have no rules
yet: differentiating them raises NotDifferentiableError (svdvals is differentiable).
"""
import numpy as np

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
