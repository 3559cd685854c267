"""`nx.linalg`: the Array API standard's linear-algebra extension, batched over
leading axes, with its primitives and their rules.

Factorizations and solves are library-call primitives (solve, cholesky, eigh,
slogdet, det, svdvals, svd, qr, eig; implemented on an array module in
rune/backends/xp/linalg.py; eig, which CuPy lacks, on the host for a GPU too).
Each takes matrices in the last two axes and any leading (batch) axes, as
LAPACK-backed NumPy (and cuSOLVER) do, so vmap only moves the batch axis to the
front. They declare no lowering: compiled code runs them op by op. Everything
else is a composite of them and of ordinary nx operations, so derivatives, jit
and vmap follow from their rules. Every factorization is differentiable; pinv
through svd.

The derivative rules are written with nx operations (so they are themselves
differentiable, jittable and batchable). The formulas are the standard
matrix-calculus ones JAX uses:
solve: dx = A^-1 (db - dA x); det: d det A = tr(adj(A) dA), the adjugate
adj(A) = det(A) A^-1 computed so that it stays finite (and exact) at singular A;
slogdet: with z = tr(A^-1 dA), d log|det A| = re z and d sign = sign i im z;
cholesky (Murray 2016, of the Hermitian part (dA + dA^H) / 2 as JAX symmetrizes):
dL = L Phi(L^-1 dA L^-H), Phi the lower triangle with a halved diagonal; eigh
(Hermitian dA likewise): dw = re diag(V^H dA V), dV = V (F o V^H dA V) with
F_ij = 1 / (w_j - w_i); eig (general matrices, complex results): with X = V^-1 dA V,
dw = diag(X) and dV = V (F o X) less each column's component along itself, as JAX's;
svdvals: ds = re diag(U^H dA V); svd (reduced, as JAX's JVP and PyTorch's svd_backward):
with dS = U^H dA V and F_ij = 1 / (s_j^2 - s_i^2),
dU = U (F o (dS S + S dS^H) + i im diag(dS) S^-1) + (I - U U^H) dA V S^-1, dV
likewise on A^H without the phase term: a complex singular pair is unique only up
to a phase, and JAX's gauge (V^H dV has a zero diagonal) moves it with U, so
losses that do not depend on the phases (S, U S Vh, |U|, pinv) get their true
derivatives; qr (m >= n; Liao et al. 2019): dQ = Q (do - Q^H dA R^-1) + dA R^-1,
dR = (Q^H dA R^-1 - do) R with do = L - L^H + i im diag(Q^H dA R^-1), L the
strict lower triangle of Q^H dA R^-1 (the imaginary diagonal keeps R's diagonal
real, as JAX's). Full-matrix svd of a non-square matrix (its extra columns are
not unique) and qr with m < n or mode="complete" on m > n raise
NotDifferentiableError, as in JAX.

Complex matrices follow JAX's convention (rune/nx/complex.py): a VJP rule is the
transpose of its JVP under the pairing re sum(ct * t), without conjugation, so the
holomorphic det and solve pull back by adj(A)^T and A^-T, the real-valued
eigenvalues, singular values and log|det| by conj(V) diag(ct) V^T and the like,
and each factor U^H ... V of a JVP by conj(U) ... conj(Vh) (conjugate transposes
become plain transposes of the conjugates; the Hermitian part and taking the
real or imaginary diagonal are their own transposes). The real formulas are the
same with conj dropped.
"""
import builtins
import collections
import math

import numpy as np

from ..core.aval import Aval
from ..core.primitive import abstract_rules, batch_rules, jvp_rules, primitive, vjp_rules
from ..core.trace import bind, common_device
from ..errors import ArgumentError, NotDifferentiableError, ShapeError
from ..core import dtypes as dt
from . import ops
from .shapes import matrix_transpose  # noqa: F401  (also names of this extension)
from .contractions import vecdot  # noqa: F401
from .host_values import concrete
from .contractions import matmul, tensordot  # noqa: F401
from .rule_helpers import sum_terms, to_front

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
           "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer",
           "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace",
           "vecdot", "vector_norm"]


def __dir__():
    """The public names only (as rune.nx's): the helpers and imported modules stay out of dir()."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__") and n.endswith("__")})

EigResult = collections.namedtuple("EigResult", "eigenvalues eigenvectors")
EighResult = collections.namedtuple("EighResult", "eigenvalues eigenvectors")
LstsqResult = collections.namedtuple("LstsqResult", "x residuals rank s")
QRResult = collections.namedtuple("QRResult", "Q R")
SlogdetResult = collections.namedtuple("SlogdetResult", "sign logabsdet")
SVDResult = collections.namedtuple("SVDResult", "U S Vh")


# ---------------------------------------------------------------- the primitives

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
# The general (non-symmetric) eigendecomposition: LAPACK's geev on the host; CuPy has
# none, so on a GPU it runs on the host and its results come back (two counted
# transfers, rune/backends/xp/linalg.py). Eigenvalues and eigenvectors are complex
# whatever the input (NumPy's real results when every eigenvalue is real depend
# on the values: a static dtype takes JAX's choice).
eig_p = primitive("linalg_eig", multiple_results=True)


def _solve_abstract(a, b):
    return Aval(b.shape, b.dtype, common_device(solve_p, (a, b)))


def _real(a):
    """Eigenvalues, singular values and log|det| are real for complex matrices too."""
    return dt.real_dtype(a.dtype)


def _eigh_abstract(a):
    return [a.update(shape=a.shape[:-1], dtype=_real(a), weak=False), a.update(weak=False)]


def _slogdet_abstract(a):
    return [a.update(shape=a.shape[:-2], weak=False), a.update(shape=a.shape[:-2], dtype=_real(a), weak=False)]


def _k(a):
    return min(a.shape[-2:])


def _svdvals_abstract(a):
    return a.update(shape=a.shape[:-2] + (_k(a),), dtype=_real(a), weak=False)


def _svd_abstract(a, *, full_matrices):
    m, n, k = a.shape[-2], a.shape[-1], _k(a)
    lead = a.shape[:-2]
    return [a.update(shape=lead + ((m, m) if full_matrices else (m, k)), weak=False),
            a.update(shape=lead + (k,), dtype=_real(a), weak=False),
            a.update(shape=lead + ((n, n) if full_matrices else (k, n)), weak=False)]


def _eig_abstract(a):
    complex_dtype = dt.complex64 if dt.real_dtype(a.dtype).itemsize <= 4 else dt.complex128
    return [a.update(shape=a.shape[:-1], dtype=complex_dtype, weak=False),
            a.update(dtype=complex_dtype, weak=False)]


def _qr_abstract(a, *, mode):
    m, n, k = a.shape[-2], a.shape[-1], _k(a)
    lead = a.shape[:-2]
    k = m if mode == "complete" else k
    return [a.update(shape=lead + (m, k), weak=False), a.update(shape=lead + (k, n), weak=False)]


abstract_rules.update({solve_p: _solve_abstract, cholesky_p: lambda a: a.update(weak=False),
                       eigh_p: _eigh_abstract, slogdet_p: _slogdet_abstract,
                       det_p: lambda a: a.update(shape=a.shape[:-2], weak=False), svdvals_p: _svdvals_abstract,
                       svd_p: _svd_abstract, qr_p: _qr_abstract, eig_p: _eig_abstract})


# ---------------------------------------------------------------- the functions

def _matrices(name, x, square=False):
    x = ops.asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"linalg.{name}: expected a stack of matrices (at least 2 dimensions), got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"linalg.{name}: expected square matrices, got shape {x.shape}")
    if not dt.is_inexact(x.dtype):
        x = ops.astype(x, dt.to_inexact(x.dtype))  # the promotion table's float
    return x


def _eps(x):
    """Machine epsilon of x's precision (of its parts, for complex)."""
    return float(np.finfo(np.float32 if dt.real_dtype(x.dtype).itemsize <= 4 else np.float64).eps)


def _eye_like(x):
    n = x.shape[-1]
    return ops.broadcast_to(ops.constant_like(np.eye(n, dtype=x.dtype), x), x.shape)


def cholesky(x, /, *, upper=False):
    """The Cholesky factor of symmetric (Hermitian) positive-definite matrices, lower triangular.

    x: square matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    Only the lower triangle is read; derivatives, as JAX's, are those of the Hermitian part (x + x^H) / 2, so
    gradients are Hermitian. upper: return U = Lᴴ (upper triangular, x = Uᴴ U) instead: the lower
    factor's conjugate transpose, as NumPy's upper=True.
    """
    x = _matrices("cholesky", x, square=True)
    out = bind(cholesky_p, x)
    if not upper:
        return out
    upper_factor = matrix_transpose(out)
    return ops.conj(upper_factor) if dt.dtype(out.dtype).kind == "c" else upper_factor


def solve(x1, x2, /):
    """The solution of x1 @ out = x2.

    x1: square matrices (batched over leading axes). x2: a vector when 1-d, else matrices whose batch axes
    broadcast with x1's; the two promote to one dtype.
    """
    x1 = _matrices("solve", x1, square=True)
    x2 = ops.asarray(x2)
    x1, x2 = ops.promote("linalg.solve", x1, x2)
    if x2.ndim == 1:
        if x2.shape[0] != x1.shape[-1]:
            raise ShapeError(f"linalg.solve: x2 of shape {x2.shape} does not match x1 {x1.shape}")
        b = ops.broadcast_to(ops.reshape(x2, (-1, 1)), x1.shape[:-2] + (x1.shape[-1], 1))
        return ops.squeeze(bind(solve_p, x1, b), -1)
    if x2.shape[-2] != x1.shape[-1]:
        raise ShapeError(f"linalg.solve: x2 of shape {x2.shape} does not match x1 {x1.shape}")
    batch = ops.broadcast_shapes("linalg.solve", x1.shape[:-2], x2.shape[:-2])
    return bind(solve_p, ops.broadcast_to(x1, batch + x1.shape[-2:]), ops.broadcast_to(x2, batch + x2.shape[-2:]))


def inv(x, /):
    """The inverse of square matrices (solve against the identity).

    x: square matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    """
    x = _matrices("inv", x, square=True)
    return bind(solve_p, x, _eye_like(x))


def slogdet(x, /):
    """(sign, logabsdet) of square matrices: det = sign * exp(logabsdet); logabsdet is differentiable.

    x: square matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    """
    x = _matrices("slogdet", x, square=True)
    return SlogdetResult(*bind(slogdet_p, x))


def det(x, /):
    """The determinant of square matrices (differentiable, also where singular).

    x: square matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    Its gradient is the transposed adjugate.
    """
    return bind(det_p, _matrices("det", x, square=True))


def eigh(x, /):
    """(eigenvalues, eigenvectors) of symmetric (Hermitian) matrices; eigenvalues ascending.

    x: square matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    Only the lower triangle is read; derivatives, as JAX's, are those of the Hermitian part
    (x + x^H) / 2, so gradients are Hermitian.
    """
    x = _matrices("eigh", x, square=True)
    return EighResult(*bind(eigh_p, x))


def eigvalsh(x, /):
    """The eigenvalues of symmetric (Hermitian) matrices, ascending.

    x: square matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    Only the lower triangle is read.
    """
    return eigh(x).eigenvalues


def svd(x, /, *, full_matrices=True):
    """(U, S, Vh) with x = U diag(S) Vh; S descending.

    x: matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    full_matrices: U (m, m) and Vh (n, n) when True, else U (m, k) and Vh (k, n) with k = min(m, n).
    """
    x = _matrices("svd", x)
    return SVDResult(*bind(svd_p, x, full_matrices=builtins.bool(full_matrices) and x.shape[-1] != x.shape[-2]))


def svdvals(x, /):
    """The singular values, descending (differentiable).

    x: matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    """
    return bind(svdvals_p, _matrices("svdvals", x))


def qr(x, /, *, mode="reduced"):
    """(Q, R) with x = Q R, Q with orthonormal columns and R upper triangular.

    x: matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits). mode:
    "reduced" (Q (m, k), R (k, n), k = min(m, n)) or "complete" (Q (m, m), R (m, n)).
    """
    if mode not in ("reduced", "complete"):
        raise ArgumentError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*bind(qr_p, _matrices("qr", x), mode=mode))


def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse: V diag(1/s) U^H over singular values s above rtol * max(s).

    x: matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits). rtol:
    the relative cutoff, a float or one per matrix (default max(m, n) * the dtype's eps).
    """
    x = _matrices("pinv", x)
    u, s, vh = svd(x, full_matrices=False)
    if rtol is None:
        rtol = builtins.max(x.shape[-2:]) * _eps(x)
    keep = ops.greater(s, _cutoff(s, rtol))
    s_inv = ops.where(keep, ops.divide(1, ops.where(keep, s, s.dtype.type(1))), s.dtype.type(0))
    return ops.matmul(ops.conj(matrix_transpose(vh)), ops.multiply(ops.expand_dims(s_inv, -1),
                                                                   ops.conj(matrix_transpose(u))))


def matrix_rank(x, /, *, rtol=None):
    """The rank of matrices: how many singular values exceed rtol * the largest, as int32.

    x: matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits). rtol:
    the relative cutoff, a float or one per matrix (default max(m, n) * the dtype's eps).
    """
    x = _matrices("matrix_rank", x)
    s = svdvals(x)
    if rtol is None:
        rtol = builtins.max(x.shape[-2:]) * _eps(x)
    return ops.sum(ops.astype(ops.greater(s, _cutoff(s, rtol)), dt.default_int), -1)


def _cutoff(s, rtol):
    """rtol * the largest singular value; an array rtol holds one per matrix of the batch."""
    if not isinstance(rtol, (int, float)):
        rtol = ops.expand_dims(ops.astype(ops.constant_like(rtol, s), s.dtype), -1)
    return ops.multiply(ops.max(s, -1, keepdims=True), rtol)


def matrix_power(x, n, /):
    """`x` multiplied by itself `n` times (the identity for 0, the inverse's power for n < 0).

    x: square matrices in the last two axes, batched over the leading ones. n: an int.
    """
    x = _matrices("matrix_power", x, square=True) if not isinstance(n, int) or n < 0 else ops.asarray(x)
    if not isinstance(n, (int, np.integer)):
        raise ArgumentError(f"linalg.matrix_power: n must be an int, got {n!r}")
    if n < 0:
        x, n = inv(x), -n
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else ops.matmul(result, base)
        n >>= 1
        if n:
            base = ops.matmul(base, base)
    return _eye_like(x) if result is None else result


def outer(x1, x2, /):
    """The outer product x1[i] * x2[j] of two vectors (the standard's linalg.outer).

    x1, x2: 1-d arrays.
    """
    x1, x2 = (ops.asarray(v) for v in ops._operands((x1, x2)))
    if x1.ndim != 1 or x2.ndim != 1:
        raise ShapeError(f"linalg.outer: expected 1-d vectors, got shapes {x1.shape} and {x2.shape}")
    return ops.outer(x1, x2)


def diagonal(x, /, *, offset=0):
    """The diagonal of each matrix in the last two axes.

    x: an array of at least 2 dimensions. offset: the diagonal (0 the main one, positive above, negative below).
    """
    x = ops.asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"linalg.diagonal: expected at least 2 dimensions, got shape {x.shape}")
    n, m = x.shape[-2:]
    rows = np.arange(builtins.max(0, -offset), builtins.min(n, m - offset) if m - offset > 0 else 0)
    flat = ops.reshape(x, x.shape[:-2] + (n * m,))
    return ops.take(flat, ops.constant_like((rows * m + rows + offset).astype(np.int32), x), axis=-1)


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the diagonal of each matrix in the last two axes.

    x: an array of at least 2 dimensions. offset: the diagonal (0 the main one, positive above, negative
    below). dtype: of the sum and the result (default: as sum's, narrow integers widen).
    """
    d = diagonal(x, offset=offset)
    return ops.sum(d, -1, dtype=dtype) if dtype is not None else ops.sum(d, -1)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along `axis`.

    x1, x2: arrays with size 3 along `axis`, broadcast together and promoted to one dtype. axis: -1 by default.
    """
    x1, x2 = ops.promote("linalg.cross", x1, x2)
    x1, x2 = ops.asarray(x1), ops.asarray(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ShapeError(f"linalg.cross: axis {axis} must have size 3, got shapes {x1.shape} and {x2.shape}")
    a = [ops.take(x1, ops.constant_like(np.int32(i), x1), axis=axis) for i in range(3)]
    b = [ops.take(x2, ops.constant_like(np.int32(i), x2), axis=axis) for i in range(3)]
    parts = [ops.subtract(ops.multiply(a[1], b[2]), ops.multiply(a[2], b[1])),
             ops.subtract(ops.multiply(a[2], b[0]), ops.multiply(a[0], b[2])),
             ops.subtract(ops.multiply(a[0], b[1]), ops.multiply(a[1], b[0]))]
    return ops.stack(parts, axis=axis)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The `ord`-norm of vectors along `axis`.

    x: an array (integers in float64, float32 to 16 bits; complex numbers by their moduli). axis: an int, a tuple of
    ints, or None (all elements as one vector). keepdims: keep each reduced axis with size 1. ord: 2 (default),
    1, inf, -inf, 0 (the count of nonzeros) or any other p.
    """
    x = ops.asarray(x)
    if not dt.is_inexact(x.dtype):
        x = ops.astype(x, dt.to_inexact(x.dtype))  # the promotion table's float
    a = ops.abs(x)
    if dt.is_complex(x.dtype):   # the norm of the moduli
        x = a
    if ord == math.inf:
        return ops.max(a, axis, keepdims)
    if ord == -math.inf:
        return ops.min(a, axis, keepdims)
    if ord == 0:
        return ops.sum(ops.astype(ops.not_equal(x, 0), a.dtype), axis, keepdims)
    if ord == 1:
        return ops.sum(a, axis, keepdims)
    if ord == 2:
        return ops.sqrt(ops.sum(ops.multiply(x, x), axis, keepdims))
    return ops.power(ops.sum(ops.power(a, x.dtype.type(ord)), axis, keepdims), x.dtype.type(1 / ord))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The `ord`-norm of each matrix in the last two axes.

    x: matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    keepdims: keep the two reduced axes with size 1. ord: 'fro' (default), 'nuc', 1, -1, 2, -2, inf or -inf.
    """
    x = _matrices("matrix_norm", x)
    if ord == "fro":
        x = ops.abs(x) if dt.is_complex(x.dtype) else x
        out = ops.sqrt(ops.sum(ops.multiply(x, x), (-2, -1)))
    elif ord == "nuc":
        out = ops.sum(svdvals(x), -1)
    elif ord in (2, -2):
        s = svdvals(x)
        out = ops.max(s, -1) if ord == 2 else ops.min(s, -1)
    elif ord in (1, -1, math.inf, -math.inf):
        sums = ops.sum(ops.abs(x), -2 if ord in (1, -1) else -1)
        out = ops.max(sums, -1) if ord > 0 else ops.min(sums, -1)
    else:
        raise ArgumentError(f"linalg.matrix_norm: unsupported ord {ord!r}")
    return ops.reshape(out, out.shape + (1, 1)) if keepdims else out


def eig(x, /):
    """(eigenvalues, eigenvectors) of general square matrices: x @ v[..., :, i] = w[..., i] * v[..., :, i].

    x: square matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16
    bits). Both results are complex (complex64 for 32-bit and narrower inputs, else complex128), as JAX's: NumPy's
    real results when every eigenvalue happens to be real depend on the values. Eigenvectors have unit norm (their
    phase is LAPACK's). Computed on the host by LAPACK; on a GPU the matrices go to the host and the results come
    back (CuPy has no general eigensolver). Derivatives as JAX's: dw = diag(V^-1 dA V), dV = V (F o V^-1 dA V)
    less each column's component along itself, F_ij = 1 / (w_j - w_i); they are undefined at repeated eigenvalues.
    """
    return EigResult(*bind(eig_p, _matrices("eig", x, square=True)))


def eigvals(x, /):
    """The eigenvalues of general square matrices, complex (see `eig`), in LAPACK's order.

    x: square matrices in the last two axes, batched over the leading ones; integers in float64 (float32 to 16 bits).
    """
    return bind(eig_p, _matrices("eigvals", x, square=True))[0]


def _known(x):
    """x's host value where it is concrete (eagerly, also under eager grad), else None."""
    from ..core.trace import Tracer
    if isinstance(x, Tracer):
        value = x.concrete()
        return None if value is None else np.asarray(value)
    return np.asarray(x)


def cond(x, p=None):
    """The condition number of matrices in the `p` norm (NumPy's linalg.cond).

    x: matrices in the last two axes, batched over the leading ones. p: None or 2 (largest over smallest singular
    value), -2 (smallest over largest), or 'fro', 'nuc', 1, -1, inf, -inf (norm(x) * norm(inv(x)), square x only).
    Singular matrices give inf (not NaN) unless x itself holds NaNs, as NumPy's.
    """
    x = _matrices("cond", x)
    if p is None or p in (2, -2):
        s = svdvals(x)
        big, small = ops.max(s, -1), ops.min(s, -1)
        r = ops.divide(small, big) if p == -2 else ops.divide(big, small)
    else:
        if x.shape[-1] != x.shape[-2]:
            raise ShapeError(f"linalg.cond: p={p!r} needs square matrices, got shape {x.shape}")
        r = ops.multiply(norm(x, p, axis=(-2, -1)), norm(inv(x), p, axis=(-2, -1)))
    # a singular matrix: NumPy reports inf where the inverse's NaNs (or 0/0) came from x's singularity
    clean = ops.logical_not(ops.any(ops.isnan(x), (-2, -1)))
    return ops.where(ops.logical_and(ops.isnan(r), clean), r.dtype.type(np.inf), r)


def _norm_axes(x, axis):
    """axis as a tuple of distinct non-negative ints (None: every axis)."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or not -x.ndim <= a < x.ndim:
            from ..errors import AxisError
            raise AxisError(f"linalg.norm: axis {axis!r} is out of range for an array of {x.ndim} dimensions")
        out.append(int(a) % x.ndim)
    if len(set(out)) != len(out):
        raise ArgumentError(f"linalg.norm: axis {axis!r} repeats an axis")
    return tuple(out)


def norm(x, ord=None, axis=None, keepdims=False):
    """The vector or matrix norm of `x` (NumPy's linalg.norm).

    x: an array. ord: the norm (see vector_norm and matrix_norm); None is the 2-norm of vectors and the Frobenius
    norm of matrices. axis: None (x as one vector, or as one matrix when 2-d and ord is given; ord with axis=None
    needs a 1-d or 2-d x), an int (vector norms along it) or a pair of ints (matrix norms over them). keepdims: keep
    the reduced axes with size 1.
    """
    x = ops.asarray(x)
    if axis is None and ord is not None and x.ndim not in (1, 2):
        raise ShapeError(f"linalg.norm: ord={ord!r} with axis=None needs a 1-d or 2-d array, got shape {x.shape}")
    axes = _norm_axes(x, axis)
    if axis is None and ord is None:
        return vector_norm(x, axis=None, keepdims=keepdims) if not keepdims else \
            vector_norm(x, axis=axes, keepdims=True)
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ArgumentError(f"linalg.norm: ord={ord!r} is a matrix norm, but axis {axis!r} names one axis")
        return vector_norm(x, axis=axes, keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) != 2:
        raise ArgumentError(f"linalg.norm: axis must name one or two axes, got {axis!r}")
    order = tuple(k for k in range(x.ndim) if k not in axes) + axes
    out = matrix_norm(ops.transpose(x, order), ord="fro" if ord is None else ord)
    if keepdims:
        out = ops.reshape(out, tuple(1 if k in axes else d for k, d in enumerate(x.shape)))
    return out


def lstsq(a, b, rcond=None, *, numpy_resid=None):
    """The least-squares solution x of a @ x = b: LstsqResult(x, residuals, rank, s), as NumPy 2's linalg.lstsq.

    a: an (M, N) matrix. b: (M,) or (M, K), promoted with a. rcond: singular values at most rcond * the largest
    count as zero (default max(M, N) * eps of a's precision, NumPy 2's). x is (N,) or (N, K); rank (int32) the
    number of singular values kept; s the singular values of a, descending. residuals: the squared 2-norm of each
    column of b - a @ x. NumPy returns them only when rank == N < M (else an empty array): numpy_resid=True does so
    (its shape depends on the rank: a concrete `a` only), False returns them always (JAX's choice, fixed shapes);
    None (default) is True for concrete operands and False under jit or vmap.
    """
    a = _matrices("lstsq", a)
    b = ops.asarray(b)
    if a.ndim != 2:
        raise ShapeError(f"linalg.lstsq: a must be a 2-d matrix, got shape {a.shape}")
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ShapeError(f"linalg.lstsq: b must be ({a.shape[0]},) or ({a.shape[0]}, K) to match a {a.shape}, "
                         f"got shape {b.shape}")
    a, b = ops.promote("linalg.lstsq", a, b)
    m, n = a.shape
    u, s, vh = svd(a, full_matrices=False)
    if rcond is None:
        rcond = builtins.max(m, n) * _eps(a)
    keep = ops.greater(s, ops.multiply(ops.max(s, -1, keepdims=True), s.dtype.type(rcond))) if s.shape[0] else s
    rank = ops.sum(ops.astype(keep, dt.default_int))
    s_inv = ops.astype(ops.where(keep, ops.divide(1, ops.where(keep, s, s.dtype.type(1))), s.dtype.type(0)),
                       a.dtype)
    column = b if b.ndim == 2 else ops.expand_dims(b, -1)
    x = ops.matmul(_H(vh), ops.multiply(ops.expand_dims(s_inv, -1), ops.matmul(_H(u), column)))
    resid_vec = ops.subtract(column, ops.matmul(a, x))
    resid = ops.sum(ops.real(ops.multiply(ops.conj(resid_vec), resid_vec)) if _is_complex(resid_vec) else
                    ops.multiply(resid_vec, resid_vec), 0)
    x = x if b.ndim == 2 else ops.squeeze(x, -1)
    if numpy_resid is None:
        numpy_resid = all(_known(v) is not None for v in (a, b))
    if numpy_resid:
        full = m > n and int(concrete("linalg.lstsq (numpy_resid=True)", rank, "the rank")) == n
        if not full:
            resid = ops.slice_in_dim(resid, 0, 0)
    return LstsqResult(x, resid, rank, s)


def _chain_order(dims):
    """The cheapest parenthesization of a matrix chain (dims[i] x dims[i+1] for matrix i): split[i][j]."""
    count = len(dims) - 1
    cost = [[0] * count for _ in range(count)]
    split = [[0] * count for _ in range(count)]
    for length in range(1, count):
        for i in range(count - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices in the cheapest order (NumPy's linalg.multi_dot).

    arrays: two or more arrays; the first may be 1-d (a row vector) and the last 1-d (a column vector), the others
    are 2-d. The result drops the dimensions of 1-d ends, as matmul does. precision: accepted for JAX's signature.
    """
    arrays = [ops.asarray(v) for v in arrays]
    if len(arrays) < 2:
        raise ArgumentError(f"linalg.multi_dot: expected at least two arrays, got {len(arrays)}")
    first_vector, last_vector = arrays[0].ndim == 1, arrays[-1].ndim == 1
    mats = list(arrays)
    if first_vector:
        mats[0] = ops.expand_dims(mats[0], 0)
    if last_vector:
        mats[-1] = ops.expand_dims(mats[-1], -1)
    for i, v in enumerate(mats):
        if v.ndim != 2:
            raise ShapeError(f"linalg.multi_dot: array {i} must be 2-d (the ends may be 1-d), got shape "
                             f"{arrays[i].shape}")
        if i and mats[i - 1].shape[1] != v.shape[0]:
            raise ShapeError(f"linalg.multi_dot: array {i - 1} of shape {arrays[i - 1].shape} does not chain "
                             f"with array {i} of shape {arrays[i].shape}")
    split = _chain_order([mats[0].shape[0]] + [v.shape[1] for v in mats])

    def product(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return ops.matmul(product(i, k), product(k + 1, j))

    out = product(0, len(mats) - 1)
    if first_vector:
        out = ops.squeeze(out, 0)
    if last_vector:
        out = ops.squeeze(out, -1)
    return out


def tensorinv(a, ind=2):
    """The inverse of `a` as a tensor: tensordot(tensorinv(a, ind), a, ind) is the identity (NumPy's).

    a: an array whose first `ind` axes and remaining axes have equal products. ind: a positive int. The result has
    shape a.shape[ind:] + a.shape[:ind].
    """
    a = ops.asarray(a)
    if not isinstance(ind, (int, np.integer)) or ind <= 0:
        raise ArgumentError(f"linalg.tensorinv: ind must be a positive int, got {ind!r}")
    rows = int(np.prod(a.shape[:ind], dtype=np.int64))
    cols = int(np.prod(a.shape[ind:], dtype=np.int64))
    if rows != cols:
        raise ShapeError(f"linalg.tensorinv: the first {ind} axes of shape {a.shape} must hold as many elements "
                         f"as the rest ({rows} against {cols})")
    return ops.reshape(inv(ops.reshape(a, (cols, rows))), a.shape[ind:] + a.shape[:ind])


def tensorsolve(a, b, axes=None):
    """The x with tensordot(a, x, x.ndim) == b (NumPy's linalg.tensorsolve).

    a: an array whose leading axes have b's shape and whose trailing axes (x's shape) hold as many elements.
    b: an array. axes: axes of `a` moved to the end (in that order) before solving, or None.
    """
    a, b = ops.asarray(a), ops.asarray(b)
    if axes is not None:
        order = [k for k in range(a.ndim) if k not in [int(v) % a.ndim for v in axes]] + \
            [int(v) % a.ndim for v in axes]
        a = ops.transpose(a, tuple(order))
    x_shape = a.shape[b.ndim:]
    count = int(np.prod(x_shape, dtype=np.int64))
    if a.shape[:b.ndim] != b.shape or a.size != count * count:
        raise ShapeError(f"linalg.tensorsolve: a of shape {a.shape} must start with b's shape {b.shape} and its "
                         f"remaining axes hold as many elements ({count} against {b.size})")
    return ops.reshape(solve(ops.reshape(a, (count, count)), ops.reshape(b, (count,))), x_shape)


# ---------------------------------------------------------------- rules: matrix helpers

def _mT(x):
    return ops.swapaxes(x, -1, -2)


def _mm(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = ops.matmul(out, x)
    return out


def _is_complex(x):
    return x.dtype.kind == "c"


def _conj(x):
    return ops.conj(x) if _is_complex(x) else x


def _H(x):
    """The conjugate transpose of the last two axes."""
    return _conj(_mT(x))


def _real_part(x):
    return ops.real(x) if _is_complex(x) else x


def _times_i(x):
    """i x for real x."""
    return ops.make_complex(ops.multiply(x, 0), x)


def _hermitian_part(x):
    """(x + x^H) / 2: cholesky's and eigh's derivatives see only the Hermitian
    part of a perturbation, and their gradients are Hermitian, as JAX's (which
    symmetrizes the input)."""
    return ops.multiply(ops.add(x, _H(x)), 0.5)


def _imaginary_diagonal(x, scale=None):
    """The diagonal matrix of i im(x_jj) (times scale_j): where a complex factorization's
    phase moves. None for real x, whose diagonal has no phase."""
    if not _is_complex(x):
        return None
    d = ops.imag(_diag(x))
    return _diag_matrix(_times_i(d if scale is None else ops.multiply(d, scale)))


def _real_diagonal(x):
    """The diagonal matrix of re x_jj, in x's dtype."""
    return ops.astype(_diag_matrix(_real_part(_diag(x))), x.dtype)


def _matrix_of_scalars(x):
    """A scalar per matrix as a (..., 1, 1) array, to scale a stack of matrices."""
    return ops.reshape(x, x.shape + (1, 1))


def _diag(x):
    """The diagonal of the last two axes, as a vector."""
    n = x.shape[-1]
    return ops.sum(ops.multiply(x, ops.constant_like(np.eye(n, dtype=x.dtype), x)), -1)


def _diag_matrix(v):
    n = v.shape[-1]
    return ops.multiply(ops.expand_dims(v, -1), ops.constant_like(np.eye(n, dtype=v.dtype), v))


# ---------------------------------------------------------------- solve

def _solve_jvp(primals, tangents):
    (a, b), (ta, tb) = primals, tangents
    x = bind(solve_p, a, b)
    rhs = tb if tb is not None else None
    if ta is not None:
        term = ops.negative(_mm(ta, x))
        rhs = term if rhs is None else ops.add(rhs, term)
    return x, bind(solve_p, a, rhs)


def _solve_vjp(ct, ins, out, wants):
    a, _ = ins
    ct_b = bind(solve_p, _mT(a), ct)
    ct_a = ops.negative(_mm(ct_b, _mT(out))) if wants[0] else None
    return ct_a, ct_b if wants[1] else None


jvp_rules[solve_p], vjp_rules[solve_p] = _solve_jvp, _solve_vjp


# ---------------------------------------------------------------- slogdet

def _slogdet_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    sign, logabs = bind(slogdet_p, a)
    z = ops.sum(_diag(bind(solve_p, a, ta)), -1)
    if not _is_complex(a):      # the sign of a real determinant is locally constant
        return [sign, logabs], [None, z]
    return [sign, logabs], [ops.multiply(sign, _times_i(ops.imag(z))), ops.real(z)]


def _slogdet_vjp(cts, ins, outs, wants):
    a = ins[0]
    ct_sign, ct_logabs = cts
    # the transpose of (re z, sign i im z): the coefficient of z is ct_logabs + i im(ct_sign sign)
    turn = None
    if ct_sign is not None and _is_complex(a):
        turn = _times_i(ops.imag(ops.multiply(ct_sign, outs[0])))
    coef = sum_terms(ct_logabs, turn)
    if coef is None:
        return (None,)
    return (ops.multiply(_matrix_of_scalars(coef), _mT(_inverse(a))),)


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
    well = _matrix_of_scalars(ops.greater(ops.min(s, -1), ops.multiply(ops.max(s, -1), float(np.sqrt(_eps(a))))))
    # The inverse branch sees the identity where it is not taken, so that solve's NaNs
    # at singular matrices reach neither the result nor its derivatives (the SVD branch
    # and its derivatives are finite everywhere).
    invertible = ops.where(well, a, ops.broadcast_to(_eye(n, a), a.shape))
    by_inverse = ops.multiply(_matrix_of_scalars(bind(det_p, invertible)), _inverse(invertible))
    # others[..., i] = prod_{j != i} s_j, without dividing by s_i
    others = ops.prod(ops.where(ops.constant_like(np.eye(n, dtype=bool), s), s.dtype.type(1),
                              ops.expand_dims(s, -2)), -1)
    phase = ops.multiply(bind(slogdet_p, u)[0], bind(slogdet_p, vh)[0])   # det of unitary factors
    by_svd = ops.multiply(_matrix_of_scalars(phase),
                         _mm(_H(vh), ops.multiply(ops.expand_dims(ops.astype(others, a.dtype), -1), _H(u))))
    return ops.where(well, by_inverse, by_svd)


def _det_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    return bind(det_p, a), ops.sum(ops.multiply(_mT(_adjugate(a)), ta), (-2, -1))


def _det_vjp(ct, ins, out, wants):
    return (ops.multiply(_matrix_of_scalars(ct), _mT(_adjugate(ins[0]))),)


jvp_rules[det_p], vjp_rules[det_p] = _det_jvp, _det_vjp


# ---------------------------------------------------------------- cholesky

def _phi(x):
    """The lower triangle with its diagonal halved."""
    n = x.shape[-1]
    mask = np.tril(np.ones((n, n)), -1) + 0.5 * np.eye(n)
    return ops.multiply(x, ops.constant_like(mask.astype(x.dtype), x))


def _inverse(a):
    n = a.shape[-1]
    return bind(solve_p, a, ops.broadcast_to(ops.constant_like(np.eye(n, dtype=a.dtype), a), a.shape))


def _cholesky_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    chol = bind(cholesky_p, a)
    l_inv = _inverse(chol)
    # of the Hermitian part of the tangent, as the VJP (and JAX, which symmetrizes the input)
    return chol, _mm(chol, _phi(_mm(l_inv, _hermitian_part(ta), _H(l_inv))))


def _cholesky_vjp(ct, ins, chol, wants):
    # the JVP transposed factor by factor: X -> L X to G -> L^T G, Y -> L^-1 Y L^-H to
    # P -> L^-T P conj(L^-1); Phi (a real mask) and the Hermitian part are their own transposes
    l_inv = _inverse(chol)
    return (_hermitian_part(_mm(_mT(l_inv), _phi(_mm(_mT(chol), ct)), _conj(l_inv))),)


jvp_rules[cholesky_p], vjp_rules[cholesky_p] = _cholesky_jvp, _cholesky_vjp


# ---------------------------------------------------------------- eigh

def _gaps(w):
    """F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (and where eigenvalues repeat)."""
    diff = ops.subtract(ops.expand_dims(w, -2), ops.expand_dims(w, -1))
    zero = ops.equal(diff, 0)
    return ops.where(zero, w.dtype.type(0), ops.divide(1, ops.where(zero, w.dtype.type(1), diff)))


def _eigh_jvp(primals, tangents):
    (a,), (ta,) = primals, tangents
    w, v = bind(eigh_p, a)
    inner = _mm(_H(v), _hermitian_part(ta), v)
    # F o inner has a zero diagonal: V^H dV = 0 there (JAX's choice of phase)
    return [w, v], [_real_part(_diag(inner)), _mm(v, ops.multiply(_gaps(w), inner))]


def _eigh_vjp(cts, ins, outs, wants):
    w, v = outs
    ct_w, ct_v = cts
    middle = sum_terms(ops.astype(_diag_matrix(ct_w), v.dtype) if ct_w is not None else None,
                        ops.multiply(_gaps(w), _mm(_mT(v), ct_v)) if ct_v is not None else None)
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
    return (_mm(_conj(u), ops.astype(_diag_matrix(ct), u.dtype), _conj(vh)),)


jvp_rules[svdvals_p], vjp_rules[svdvals_p] = _svdvals_jvp, _svdvals_vjp


# ---------------------------------------------------------------- svd

def _eye(n, like):
    return ops.constant_like(np.eye(n, dtype=like.dtype), like)


def _safe_inverse(x):
    """1 / x, and 0 where x is 0 (repeated or zero singular values carry no rotation)."""
    zero = ops.equal(x, 0)
    return ops.where(zero, x.dtype.type(0), ops.divide(1, ops.where(zero, x.dtype.type(1), x)))


def _svd_gaps(s):
    """F_ij = 1 / (s_j^2 - s_i^2) off the diagonal (0 on it and where values repeat)."""
    s2 = ops.multiply(s, s)
    return _safe_inverse(ops.subtract(ops.expand_dims(s2, -2), ops.expand_dims(s2, -1)))


def _svd_check(a, full_matrices, what):
    if full_matrices and a.shape[-1] != a.shape[-2]:
        raise NotDifferentiableError(
            f"linalg.svd: {what} of full_matrices=True on a non-square {a.shape[-2]}x{a.shape[-1]} matrix "
            f"is not defined (the extra singular vectors are not unique); use full_matrices=False")


def _svd_jvp(primals, tangents, *, full_matrices):
    (a,), (ta,) = primals, tangents
    _svd_check(a, full_matrices, "the derivative")
    u, s, vh = bind(svd_p, a, full_matrices=False)
    v = _H(vh)
    m, n = a.shape[-2:]
    ds_mat = _mm(_H(u), ta, v)
    row = ops.expand_dims(s, -2)                      # s_j along the last axis
    f = _svd_gaps(s)
    s_inv = _safe_inverse(row)
    dss, sds = ops.multiply(ds_mat, row), ops.multiply(_mT(row), ds_mat)
    # complex: the phase of each singular pair moves with U (i im(dS_jj) / s_j), so
    # V^H dV has a zero diagonal (JAX's gauge)
    du = _mm(u, sum_terms(ops.multiply(f, ops.add(dss, _H(dss))), _imaginary_diagonal(ds_mat, _safe_inverse(s))))
    dv = _mm(v, ops.multiply(f, ops.add(sds, _H(sds))))
    if m > n:
        dav = _mm(ta, v)
        du = ops.add(du, ops.multiply(ops.subtract(dav, _mm(u, _H(u), dav)), s_inv))
    if n > m:
        dau = _mm(_H(ta), u)
        dv = ops.add(dv, ops.multiply(ops.subtract(dau, _mm(v, vh, dau)), s_inv))
    return [u, s, vh], [du, _real_part(_diag(ds_mat)), _H(dv)]


def _svd_vjp(cts, ins, outs, wants, *, full_matrices):
    """The JVP transposed under re sum(ct * t): dS = U^H dA V pulls a middle
    cotangent back by conj(U) middle conj(Vh); the terms of dU and dV that
    leave the span of U and V, likewise by the conjugated projectors."""
    a = ins[0]
    _svd_check(a, full_matrices, "the gradient")
    u, s, vh = outs
    g_u, g_s, g_vh = cts
    m, n = a.shape[-2:]
    row = ops.expand_dims(s, -2)
    f = _svd_gaps(s)        # F_jk = 1 / (s_k^2 - s_j^2)
    s_inv = _safe_inverse(row)
    # unused outputs reach the rule as None (zero cotangents): their terms drop out
    by_s = by_u = by_v = phase = extra_u = extra_v = None
    if g_s is not None:
        by_s = ops.astype(_diag_matrix(g_s), a.dtype)
    if g_u is not None:
        utg = _mm(_mT(u), g_u)
        by_u = ops.multiply(ops.multiply(ops.subtract(utg, _H(utg)), f), row)
        phase = _imaginary_diagonal(utg, _safe_inverse(s))
        if m > n:
            extra_u = _mm(ops.multiply(ops.subtract(g_u, _mm(_conj(u), utg)), s_inv), _conj(vh))
    if g_vh is not None:
        vtg = _mm(_conj(vh), _H(g_vh))          # V^T g_V, with g_V = g_Vh^H
        by_v = ops.multiply(_mT(row), ops.multiply(ops.subtract(vtg, _H(vtg)), f))
        if n > m:
            off_span = ops.subtract(g_vh, _mm(g_vh, _mT(vh), _conj(vh)))
            extra_v = _mm(_conj(u), ops.multiply(_mT(s_inv), off_span))
    middle = sum_terms(by_s, by_u, phase, by_v)
    return (sum_terms(_mm(_conj(u), middle, _conj(vh)) if middle is not None else None, extra_u, extra_v),)


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
    return ops.constant_like(np.tril(np.ones((n, n)), k).astype(x.dtype), x)


def _qr_jvp(primals, tangents, *, mode):
    (a,), (ta,) = primals, tangents
    _qr_check(a, mode, "the derivative")
    q, r = bind(qr_p, a, mode=mode)
    dx_rinv = _right_solve(ta, r)
    qt_dx_rinv = _mm(_H(q), dx_rinv)
    low = ops.multiply(qt_dx_rinv, _lower_mask(qt_dx_rinv, -1))
    # Q^H dQ: skew-Hermitian; complex, its diagonal i im(Q^H dA R^-1)_jj keeps R's diagonal real (JAX's)
    do = sum_terms(ops.subtract(low, _H(low)), _imaginary_diagonal(qt_dx_rinv))
    dq = ops.add(_mm(q, ops.subtract(do, qt_dx_rinv)), dx_rinv)
    dr = _mm(ops.subtract(qt_dx_rinv, do), r)
    return [q, r], [dq, dr]


def _qr_vjp(cts, ins, outs, wants, *, mode):
    a = ins[0]
    _qr_check(a, mode, "the gradient")
    q, r = outs
    g_q, g_r = cts      # None where an output is unused (a zero cotangent)
    # M: the cotangent of X = Q^H dA R^-1 through dR = (X - do) R and dQ = Q (do - X) + ...
    mmat = sum_terms(_mm(g_r, _mT(r)) if g_r is not None else None,
                      ops.negative(_mm(_mT(q), g_q)) if g_q is not None else None)
    if mmat is None:
        return (None,)
    # and through do's transpose: triu(M, 1) + re diag(M) + tril(M^H, -1) (copyutl for real M)
    up = ops.multiply(mmat, _mT(_lower_mask(mmat, -1)))
    g_x = ops.add(ops.add(up, _H(up)), _real_diagonal(mmat))
    return (_right_solve(sum_terms(g_q, _mm(_conj(q), g_x)), _mT(r)),)


jvp_rules[qr_p], vjp_rules[qr_p] = _qr_jvp, _qr_vjp


# ---------------------------------------------------------------- eig

def _eig_parts(a, w, v):
    """V^-1, and F_ij = 1 / (w_j - w_i) off the diagonal (0 on it and where eigenvalues repeat)."""
    return _inverse(v), _gaps(w)


def _eig_jvp(primals, tangents):
    """JAX's: with X = V^-1 dA V, dw = diag(X) and dV = V (F o X) less each column's
    component along itself (re v_i^H dv_i = 0 keeps the columns' unit norm)."""
    (a,), (ta,) = primals, tangents
    w, v = bind(eig_p, a)
    v_inv, f = _eig_parts(a, w, v)
    x = _mm(v_inv, ops.astype(ta, v.dtype), v)
    du = _mm(v, ops.multiply(f, x))
    along = ops.real(ops.sum(ops.multiply(ops.conj(v), du), -2, keepdims=True))
    return [w, v], [_diag(x), ops.subtract(du, ops.multiply(v, ops.astype(along, v.dtype)))]


def _eig_vjp(cts, ins, outs, wants):
    """The JVP transposed under re sum(ct * t): the normalization pulls ct_V back to
    ct_V - conj(V) re(sum(ct_V * V, -2)); then X's cotangent diag(ct_w) + F o V^T ct_U
    pulls back to V^-T (...) V^T, whose real part is a real matrix's gradient."""
    a = ins[0]
    w, v = outs
    ct_w, ct_v = cts
    v_inv, f = _eig_parts(a, w, v)
    middle = None
    if ct_w is not None:
        middle = _diag_matrix(ops.astype(ct_w, v.dtype))
    if ct_v is not None:
        ct_v = ops.astype(ct_v, v.dtype)
        along = ops.real(ops.sum(ops.multiply(ct_v, v), -2, keepdims=True))
        ct_u = ops.subtract(ct_v, ops.multiply(ops.conj(v), ops.astype(along, v.dtype)))
        middle = sum_terms(middle, ops.multiply(f, _mm(_mT(v), ct_u)))
    if middle is None:
        return (None,)
    ct_a = _mm(_mT(v_inv), middle, _mT(v))
    return (ct_a if _is_complex(a) else ops.real(ct_a),)


jvp_rules[eig_p], vjp_rules[eig_p] = _eig_jvp, _eig_vjp


# ---------------------------------------------------------------- batching

def _leading_batch(prim):
    """Every operand gets the batch as its first axis (broadcast where unbatched):
    the primitives already loop over leading axes."""
    def rule(values, dims, size, **params):
        aligned = [ops.broadcast_to(v, (size,) + tuple(v.shape)) if d is None else to_front(v, d)
                   for v, d in zip(values, dims)]
        out = bind(prim, *aligned, **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)
    return rule


for _prim in (solve_p, cholesky_p, eigh_p, slogdet_p, det_p, svdvals_p, svd_p, qr_p, eig_p):
    batch_rules[_prim] = _leading_batch(_prim)
