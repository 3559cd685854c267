"""The library-call primitives under `nx.linalg`: solve, cholesky, eigh,
slogdet, det, svdvals, svd, qr. Each takes matrices in the last two axes and any
leading (batch) axes, as LAPACK-backed NumPy (and cuSOLVER) do, so vmap only
moves the batch axis to the front. Derivative and batching rules:
rune/linalg_rules.py; host implementations: rune/backends/cpu/linalg.py.
"""
from ..core.aval import Aval
from ..core.primitive import abstract_rules, primitive
from ..core.trace import common_device
from ..core import dtypes as dt

solve_p = primitive("linalg_solve")
cholesky_p = primitive("linalg_cholesky")
eigh_p = primitive("linalg_eigh", multiple_results=True)
slogdet_p = primitive("linalg_slogdet", multiple_results=True)
# det is its own primitive (not sign * exp(log|det|)) so that its derivative, the
# adjugate, stays finite at singular matrices.
det_p = primitive("linalg_det")
svdvals_p = primitive("linalg_svdvals")
svd_p = primitive("linalg_svd", multiple_results=True)
qr_p = primitive("linalg_qr", multiple_results=True)


def _solve(a, b):
    return Aval(b.shape, b.dtype, common_device(solve_p, (a, b)))


def _real(a):
    """Eigenvalues, singular values and log|det| are real for complex matrices too."""
    return dt.real_dtype(a.dtype)


def _eigh(a):
    return [a.update(shape=a.shape[:-1], dtype=_real(a), weak=False), a.update(weak=False)]


def _slogdet(a):
    return [a.update(shape=a.shape[:-2], weak=False), a.update(shape=a.shape[:-2], dtype=_real(a), weak=False)]


def _k(a):
    return min(a.shape[-2:])


def _svdvals(a):
    return a.update(shape=a.shape[:-2] + (_k(a),), dtype=_real(a), weak=False)


def _svd(a, *, full_matrices):
    m, n, k = a.shape[-2], a.shape[-1], _k(a)
    lead = a.shape[:-2]
    return [a.update(shape=lead + ((m, m) if full_matrices else (m, k)), weak=False),
            a.update(shape=lead + (k,), dtype=_real(a), weak=False),
            a.update(shape=lead + ((n, n) if full_matrices else (k, n)), weak=False)]


def _qr(a, *, mode):
    m, n, k = a.shape[-2], a.shape[-1], _k(a)
    lead = a.shape[:-2]
    k = m if mode == "complete" else k
    return [a.update(shape=lead + (m, k), weak=False), a.update(shape=lead + (k, n), weak=False)]


abstract_rules.update({solve_p: _solve, cholesky_p: lambda a: a.update(weak=False), eigh_p: _eigh,
                       slogdet_p: _slogdet, det_p: lambda a: a.update(shape=a.shape[:-2], weak=False),
                       svdvals_p: _svdvals, svd_p: _svd, qr_p: _qr})
