"""`nx.linalg`: the Array API standard's linear-algebra extension, batched over
leading axes. Factorizations and solves are library-call primitives
(rune/nx/linalg_prims.py); everything else is a composite of them and of
ordinary nx operations, so derivatives, jit and vmap follow from their rules.
Every factorization is differentiable (rune/linalg_rules.py); pinv through svd.
"""
import builtins
import collections
import math

import numpy as np

from ..core.trace import bind
from ..errors import ArgumentError, ShapeError
from ..core import dtypes as dt
from . import ops
from .linalg_prims import cholesky_p, det_p, eigh_p, qr_p, slogdet_p, solve_p, svd_p, svdvals_p
from .manipulation import matrix_transpose, vecdot  # noqa: F401  (also names of this extension)
from .ops import matmul, tensordot  # noqa: F401

__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
           "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
           "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]

EighResult = collections.namedtuple("EighResult", "eigenvalues eigenvectors")
QRResult = collections.namedtuple("QRResult", "Q R")
SlogdetResult = collections.namedtuple("SlogdetResult", "sign logabsdet")
SVDResult = collections.namedtuple("SVDResult", "U S Vh")


def _matrices(name, x, square=False):
    x = ops.asarray(x)
    if x.ndim < 2:
        raise ShapeError(f"linalg.{name}: expected a stack of matrices (at least 2 dimensions), got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"linalg.{name}: expected square matrices, got shape {x.shape}")
    if not dt.is_inexact(x.dtype):
        x = ops.astype(x, dt.default_float)
    return x


def _eps(x):
    """Machine epsilon of x's precision (of its parts, for complex)."""
    return float(np.finfo(np.float32 if dt.real_dtype(x.dtype).itemsize <= 4 else np.float64).eps)


def _eye_like(x):
    n = x.shape[-1]
    return ops.broadcast_to(ops.constant_like(np.eye(n, dtype=x.dtype), x), x.shape)


def cholesky(x, /, *, upper=False):
    """The Cholesky factor of symmetric (Hermitian) positive-definite matrices, lower triangular.

    x: square matrices in the last two axes, batched over the leading ones; integers are computed in float32.
    Only the lower triangle is read. upper: return U = Lᴴ (upper triangular, x = Uᴴ U) instead: the lower
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

    x: square matrices in the last two axes, batched over the leading ones; integers are computed in float32.
    """
    x = _matrices("inv", x, square=True)
    return bind(solve_p, x, _eye_like(x))


def slogdet(x, /):
    """(sign, logabsdet) of square matrices: det = sign * exp(logabsdet); logabsdet is differentiable.

    x: square matrices in the last two axes, batched over the leading ones; integers are computed in float32.
    """
    x = _matrices("slogdet", x, square=True)
    return SlogdetResult(*bind(slogdet_p, x))


def det(x, /):
    """The determinant of square matrices (differentiable, also where singular).

    x: square matrices in the last two axes, batched over the leading ones; integers are computed in float32.
    Its gradient is the transposed adjugate.
    """
    return bind(det_p, _matrices("det", x, square=True))


def eigh(x, /):
    """(eigenvalues, eigenvectors) of symmetric (Hermitian) matrices; eigenvalues ascending.

    x: square matrices in the last two axes, batched over the leading ones; integers are computed in float32.
    Only the lower triangle is read; derivatives, as JAX's, are those of the Hermitian part
    (x + x^H) / 2, so gradients are Hermitian.
    """
    x = _matrices("eigh", x, square=True)
    return EighResult(*bind(eigh_p, x))


def eigvalsh(x, /):
    """The eigenvalues of symmetric (Hermitian) matrices, ascending.

    x: square matrices in the last two axes, batched over the leading ones; integers are computed in float32.
    Only the lower triangle is read.
    """
    return eigh(x).eigenvalues


def svd(x, /, *, full_matrices=True):
    """(U, S, Vh) with x = U diag(S) Vh; S descending.

    x: matrices in the last two axes, batched over the leading ones; integers are computed in float32.
    full_matrices: U (m, m) and Vh (n, n) when True, else U (m, k) and Vh (k, n) with k = min(m, n).
    """
    x = _matrices("svd", x)
    return SVDResult(*bind(svd_p, x, full_matrices=builtins.bool(full_matrices) and x.shape[-1] != x.shape[-2]))


def svdvals(x, /):
    """The singular values, descending (differentiable).

    x: matrices in the last two axes, batched over the leading ones; integers are computed in float32.
    """
    return bind(svdvals_p, _matrices("svdvals", x))


def qr(x, /, *, mode="reduced"):
    """(Q, R) with x = Q R, Q with orthonormal columns and R upper triangular.

    x: matrices in the last two axes, batched over the leading ones; integers are computed in float32. mode:
    "reduced" (Q (m, k), R (k, n), k = min(m, n)) or "complete" (Q (m, m), R (m, n)).
    """
    if mode not in ("reduced", "complete"):
        raise ArgumentError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*bind(qr_p, _matrices("qr", x), mode=mode))


def pinv(x, /, *, rtol=None):
    """The Moore-Penrose pseudo-inverse: V diag(1/s) U^H over singular values s above rtol * max(s).

    x: matrices in the last two axes, batched over the leading ones; integers are computed in float32. rtol: the
    relative cutoff, a float or one per matrix (default max(m, n) * the dtype's eps).
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

    x: matrices in the last two axes, batched over the leading ones; integers are computed in float32. rtol: the
    relative cutoff, a float or one per matrix (default max(m, n) * the dtype's eps).
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

    x: an array (integers in float32; complex numbers by their moduli). axis: an int, a tuple of ints, or None
    (all elements as one vector). keepdims: keep each reduced axis with size 1. ord: 2 (default), 1, inf, -inf,
    0 (the count of nonzeros) or any other p.
    """
    x = ops.asarray(x)
    if not dt.is_inexact(x.dtype):
        x = ops.astype(x, dt.default_float)
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

    x: matrices in the last two axes, batched over the leading ones; integers are computed in float32. keepdims:
    keep the two reduced axes with size 1. ord: 'fro' (default), 'nuc', 1, -1, 2, -2, inf or -inf.
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
