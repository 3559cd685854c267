"""Polynomials as coefficient arrays, highest degree first (NumPy's poly* functions and roots).

Every function is a composite of nx operations, so derivatives, jit and vmap
follow from theirs: products and divisions unroll over the (static) lengths,
roots are the eigenvalues of the companion matrix (nx.linalg.eigvals, LAPACK on
the host) and polyfit is a least-squares solve (nx.linalg.lstsq).

Two results have a data-dependent length in NumPy: polydiv's remainder (NumPy
trims its leading near-zeros) and roots (NumPy strips the polynomial's leading
and trailing zeros). Eagerly both are exact as NumPy's; under jit or vmap
polydiv keeps the full-length remainder and roots takes strip_zeros=False
(JAX's choices), a traced strip_zeros=True raising ConcretizationError.
Results whose NumPy dtype depends on the values take the static one: roots
and poly of complex zeros are complex (NumPy returns reals when the imaginary
parts cancel).
"""
import numpy as np

from ..core import dtypes as dt
from ..errors import ArgumentError, ShapeError
from . import linalg, ops
from .host_values import concrete
from .linalg import _known

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul", "polysub", "polyval",
           "roots"]


# ---------------------------------------------------------------- helpers

def _coefficients(name, p, what="p", inexact=False):
    """p as a 1-d coefficient array (a scalar is a constant polynomial)."""
    p = ops.asarray(p)
    if p.ndim == 0:
        p = ops.reshape(p, (1,))
    if p.ndim != 1:
        raise ShapeError(f"{name}: {what} must be a 1-d array of coefficients (highest degree first), "
                         f"got shape {p.shape}")
    if inexact and not dt.is_inexact(p.dtype):
        p = ops.astype(p, dt.to_inexact(p.dtype))
    return p


def _order(name, value, what):
    """A non-negative Python int (a static count: derivative order, degree)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ArgumentError(f"{name}: {what} must be a non-negative int, got {value!r}")
    return int(value)


def _pad_front(p, length):
    """p with leading zeros up to `length` coefficients (the same polynomial)."""
    return p if p.shape[0] >= length else ops.pad(p, ((length - p.shape[0], 0),))


def _convolve(a, b):
    """The full convolution of two 1-d arrays (the product of their polynomials):
    out[k] = sum_i a[i] b[k - i], as one gather of b (zero-padded) and a sum."""
    m, n = a.shape[0], b.shape[0]
    if m == 0 or n == 0:
        return ops.multiply(ops.slice_in_dim(a, 0, 0), ops.slice_in_dim(b, 0, 0))
    padded = ops.pad(b, ((m - 1, m - 1),))
    # row k takes padded[k - i + m - 1] for i = 0..m-1
    index = np.arange(m + n - 1)[:, None] - np.arange(m)[None, :] + m - 1
    rows = ops.take(padded, ops.constant_like(index.astype(np.int32), padded), axis=0)
    return ops.sum(ops.multiply(rows, a), -1)


# ---------------------------------------------------------------- arithmetic

def polyadd(a1, a2):
    """The sum of two polynomials: the shorter padded with leading zeros.

    a1, a2: 1-d coefficient arrays (or scalars), highest degree first, promoted to one dtype.
    """
    return ops.add(*_aligned("polyadd", a1, a2))


def polysub(a1, a2):
    """The difference a1 - a2 of two polynomials: the shorter padded with leading zeros.

    a1, a2: 1-d coefficient arrays (or scalars), highest degree first, promoted to one dtype.
    """
    return ops.subtract(*_aligned("polysub", a1, a2))


def _aligned(name, a1, a2):
    """The coefficients of `a1` and `a2` in one dtype, the shorter padded with leading zeros."""
    a1, a2 = (_coefficients(name, a, w) for a, w in ((a1, "a1"), (a2, "a2")))
    a1, a2 = ops.promote(name, a1, a2)
    n = max(a1.shape[0], a2.shape[0])
    return _pad_front(a1, n), _pad_front(a2, n)


def polymul(a1, a2):
    """The product of two polynomials (the full convolution of their coefficients).

    a1, a2: 1-d coefficient arrays (or scalars), highest degree first, promoted to one dtype. The result has
    len(a1) + len(a2) - 1 coefficients (leading zeros are kept, as NumPy's).
    """
    a1, a2 = (_coefficients("polymul", a, w) for a, w in ((a1, "a1"), (a2, "a2")))
    a1, a2 = ops.promote("polymul", a1, a2)
    return _convolve(a1, a2)


def _trim_remainder(r):
    """NumPy's: drop leading coefficients while |r[0]| <= 1e-8 (allclose to 0), keeping one."""
    host = concrete("polydiv", r, "the remainder")
    start = 0
    while start < host.shape[0] - 1 and np.abs(host[start]) <= 1e-8:
        start += 1
    return ops.slice_in_dim(r, start, r.shape[0])


def polydiv(u, v, *, trim_leading_zeros=None):
    """(quotient, remainder) of dividing polynomial u by v: u = q * v + r.

    u, v: 1-d coefficient arrays (or scalars), highest degree first; the results are inexact (ints in float).
    v[0] must be nonzero. trim_leading_zeros: drop the remainder's leading near-zero coefficients as NumPy
    does (its length then depends on the values: concrete operands only); False keeps all len(u) coefficients
    (JAX's default; fixed shapes). None (default): trims eagerly, keeps them under jit and vmap.
    """
    u = _coefficients("polydiv", u, "u", inexact=True)
    v = _coefficients("polydiv", v, "v", inexact=True)
    u, v = ops.promote("polydiv", u, v)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    if n < 0:
        raise ShapeError("polydiv: the divisor v has no coefficients")
    scale = ops.divide(1, ops.take(v, ops.constant_like(np.int32(0), v)))
    digits, r = [], u
    for k in range(m - n + 1):
        d = ops.multiply(scale, ops.take(r, ops.constant_like(np.int32(k), r)))
        digits.append(d)
        # r[k:k+n+1] -= d * v, as one subtraction of the shifted product
        shifted = ops.pad(ops.multiply(d, v), ((k, m - n - k),))
        r = ops.subtract(r, shifted)
    q = ops.stack(digits) if digits else ops.multiply(ops.slice_in_dim(u, 0, 1), 0)
    if trim_leading_zeros is None:
        trim_leading_zeros = _known(u) is not None and _known(v) is not None
    return q, _trim_remainder(r) if trim_leading_zeros else r


# ---------------------------------------------------------------- calculus

def polyder(p, m=1):
    """The m-th derivative of a polynomial.

    p: a 1-d coefficient array (or scalar), highest degree first; its dtype is kept (ints stay ints).
    m: the order, a non-negative int. The result has max(len(p) - m, 0) coefficients.
    """
    p = _coefficients("polyder", p)
    m = _order("polyder", m, "m")
    n = p.shape[0]
    if m == 0:
        return p
    if m >= n:
        return ops.slice_in_dim(p, 0, 0)
    # coefficient i (power n-1-i) gains the falling factorial (n-1-i)(n-2-i)...(n-m-i)
    powers = np.arange(n - 1, m - 1, -1)
    factors = np.prod(powers[:, None] - np.arange(m)[None, :], axis=1)
    return ops.multiply(ops.slice_in_dim(p, 0, n - m), ops.constant_like(factors.astype(p.dtype), p))


def polyint(p, m=1, k=None):
    """The m-th antiderivative of a polynomial.

    p: a 1-d coefficient array (or scalar), highest degree first; the result is inexact (ints in float).
    m: the order, a non-negative int. k: the integration constants, the first for the first integration
    (the lowest coefficient of the final result is the last one): None (zeros), a scalar (used for every
    integration) or m values.
    """
    p = _coefficients("polyint", p, inexact=True)
    m = _order("polyint", m, "m")
    if k is None:
        constants = [0] * m
    else:
        k = ops.asarray(k)
        if k.ndim == 0 or (k.ndim == 1 and k.shape[0] == 1 and m > 1):
            constants = [ops.reshape(k, ())] * m
        elif k.ndim == 1 and k.shape[0] >= m:
            constants = [ops.take(k, ops.constant_like(np.int32(i), k)) for i in range(m)]
        else:
            raise ShapeError(f"polyint: k must be a scalar or hold m={m} integration constants, got shape "
                             f"{k.shape}")
    for c in constants:
        n = p.shape[0]
        p, c = ops.promote("polyint", p, c) if not isinstance(c, int) else (p, c)
        divided = ops.divide(p, ops.constant_like(np.arange(n, 0, -1).astype(p.dtype), p))
        p = ops.concatenate([divided, ops.astype(ops.reshape(ops.asarray(c) if not isinstance(c, int)
                                                             else ops.constant_like(c, p), (1,)), p.dtype)])
    return p


# ---------------------------------------------------------------- evaluation and construction

def polyval(p, x):
    """The polynomial p evaluated at x (Horner's scheme, as NumPy).

    p: a 1-d coefficient array (or scalar), highest degree first. x: an array or scalar; the result has x's shape
    and the promoted dtype of p and x.
    """
    p = _coefficients("polyval", p)
    x = ops.asarray(x) if not isinstance(x, (int, float, complex)) else x
    if p.shape[0] == 0:
        return ops.multiply(x, 0)
    y = None
    for i in range(p.shape[0]):
        c = ops.take(p, ops.constant_like(np.int32(i), p))
        y = ops.add(ops.multiply(ops.multiply(x, 0), c), c) if y is None else ops.add(ops.multiply(y, x), c)
    return y


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given zeros.

    seq_of_zeros: a 1-d array of zeros, or a non-empty square matrix (then its characteristic polynomial, from its
    eigenvalues: real for a real matrix). Ints compute in float. No zeros give the constant 1.0 (a 0-d array). The
    zeros' dtype is kept, so complex zeros give complex coefficients (NumPy returns reals when they come in
    conjugate pairs, a fact of the values).
    """
    a = ops.asarray(seq_of_zeros)
    real_matrix = False
    if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] != 0:
        real_matrix = not dt.is_complex(a.dtype)
        a = linalg.eigvals(a)
    elif a.ndim != 1:
        raise ShapeError(f"poly: seq_of_zeros must be 1-d or a non-empty square matrix, got shape {a.shape}")
    elif not dt.is_inexact(a.dtype):
        a = ops.astype(a, dt.to_inexact(a.dtype))
    if a.shape[0] == 0:
        return ops.constant_like(1.0, a, dt.to_inexact(a.dtype) if not dt.is_inexact(a.dtype) else a.dtype)
    coeffs = ops.constant_like(np.ones(1, a.dtype), a)
    for i in range(a.shape[0]):
        z = ops.take(a, ops.constant_like(np.int32(i), a))
        # (coeffs) * (x - z): shift up one power, less z times coeffs
        coeffs = ops.subtract(ops.pad(coeffs, ((0, 1),)), ops.pad(ops.multiply(coeffs, z), ((1, 0),)))
    return ops.real(coeffs) if real_matrix else coeffs


def _companion_roots(p):
    """The roots of p (p[0] != 0) as the eigenvalues of its companion matrix."""
    n = p.shape[0]
    complex_dtype = dt.complex64 if dt.real_dtype(p.dtype).itemsize <= 4 else dt.complex128
    if n < 2:
        return ops.astype(ops.slice_in_dim(p, 0, 0), complex_dtype)
    first = ops.negative(ops.divide(ops.slice_in_dim(p, 1, n), ops.take(p, ops.constant_like(np.int32(0), p))))
    below = ops.constant_like(np.eye(n - 2, n - 1, dtype=p.dtype), p)
    return linalg.eigvals(ops.concatenate([ops.reshape(first, (1, n - 1)), below]))


def roots(p, *, strip_zeros=True):
    """The roots of a polynomial: the eigenvalues of its companion matrix.

    The roots are complex (JAX's dtype; NumPy's is real when every root is).
    p: a 1-d coefficient array (or scalar), highest degree first; ints compute in float.
    strip_zeros: drop leading zero coefficients (and give each trailing zero coefficient a zero root) as NumPy does:
    the number of roots then depends on the values, so p must be concrete (ConcretizationError under jit/vmap).
    False: a fixed len(p) - 1 roots, where each leading zero coefficient gives a NaN root at the end (JAX's).
    """
    p = _coefficients("roots", p, inexact=True)
    n = p.shape[0]
    if strip_zeros:
        host = concrete("roots (strip_zeros=True)", p, "p")
        nonzero = np.flatnonzero(host)
        complex_dtype = dt.complex64 if dt.real_dtype(p.dtype).itemsize <= 4 else dt.complex128
        if nonzero.size == 0:
            return ops.astype(ops.slice_in_dim(p, 0, 0), complex_dtype)
        found = _companion_roots(ops.slice_in_dim(p, int(nonzero[0]), int(nonzero[-1]) + 1))
        trailing = n - 1 - int(nonzero[-1])
        return ops.concatenate([found, ops.constant_like(np.zeros(trailing, complex_dtype), found)])
    return _roots_with_zeros(p)


def _roots_with_zeros(p):
    """JAX's fixed-shape roots: the leading zeros rotated to the end (p times x^k has
    k extra zero roots), those sorted last and reported as NaN."""
    from .sorting import argsort
    n = p.shape[0]
    if n < 2:
        return _companion_roots(p)
    is_zero = ops.astype(ops.equal(p, 0), dt.int8)
    leading = ops.where(ops.all(ops.equal(p, 0)), n, ops.argmin(is_zero))
    p = ops.where(ops.equal(leading, n), p.dtype.type(1), p)    # all zero: any polynomial, its roots all NaN
    rotated = ops.take(p, ops.remainder(ops.add(ops.constant_like(np.arange(n, dtype=np.int32), p),
                                                ops.astype(leading, dt.int32)), n))
    found = _companion_roots(rotated)
    found = ops.take(found, argsort(ops.astype(ops.equal(found, 0), dt.int8), stable=True))
    keep = ops.less(ops.constant_like(np.arange(n - 1, dtype=np.int32), p), ops.subtract(n - 1, leading))
    return ops.where(keep, found, ops.constant_like(complex(np.nan, np.nan), found, found.dtype))


# ---------------------------------------------------------------- fitting

def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree `deg` through the points (x, y), as NumPy's polyfit.

    x: 1-d sample positions (M,). y: (M,) or (M, K) values (K fits at once, one per column). deg: a non-negative
    int. rcond: the relative cutoff of small singular values (default M * eps of x's precision). full: also
    return (residuals, rank, singular values, rcond) of the scaled least-squares problem. w: 1-d weights (M,),
    multiplying the residuals (1/sigma for Gaussian errors). cov: also return the coefficients' covariance,
    scaled by the residuals / (M - deg - 1), or unscaled for cov="unscaled" (ignored when full).
    Returns p ((deg+1,) or (deg+1, K)), highest degree first.
    """
    order = _order("polyfit", deg, "deg") + 1
    x = _coefficients("polyfit", x, "x", inexact=True)
    y = ops.asarray(y)
    if x.shape[0] == 0:
        raise ShapeError("polyfit: x must be a non-empty 1-d array")
    if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ShapeError(f"polyfit: y must be ({x.shape[0]},) or ({x.shape[0]}, K) to match x, got shape {y.shape}")
    if not dt.is_inexact(y.dtype):
        y = ops.astype(y, dt.to_inexact(y.dtype))
    x, y = ops.promote("polyfit", x, y)
    if rcond is None:
        rcond = x.shape[0] * linalg._eps(x)
    lhs = ops.power(ops.expand_dims(x, -1), ops.constant_like(np.arange(order - 1, -1, -1).astype(x.dtype), x))
    rhs = y
    if w is not None:
        w = _coefficients("polyfit", w, "w")
        if w.shape[0] != x.shape[0]:
            raise ShapeError(f"polyfit: w must have the length of x ({x.shape[0]}), got shape {w.shape}")
        w = ops.astype(w, x.dtype)
        lhs = ops.multiply(lhs, ops.expand_dims(w, -1))
        rhs = ops.multiply(rhs, w if y.ndim == 1 else ops.expand_dims(w, -1))
    # columns scaled to unit norm: better conditioned, as NumPy's
    scale = ops.sqrt(ops.sum(ops.multiply(lhs, lhs), 0))
    scale = ops.where(ops.equal(scale, 0), scale.dtype.type(1), scale)
    lhs = ops.divide(lhs, scale)
    fit = linalg.lstsq(lhs, rhs, rcond, numpy_resid=None if full else False)
    c = ops.divide(fit.x, scale if y.ndim == 1 else ops.expand_dims(scale, -1))
    if full:
        return c, fit.residuals, fit.rank, fit.s, rcond
    if not cov:
        return c
    base = ops.divide(linalg.inv(ops.matmul(linalg.matrix_transpose(lhs), lhs)), ops.outer(scale, scale))
    if cov == "unscaled":
        factor = 1
    else:
        if x.shape[0] <= order:
            raise ArgumentError(f"polyfit: scaling the covariance needs more points than deg + 1 = {order}, "
                                f"got {x.shape[0]}")
        factor = ops.divide(fit.residuals, x.shape[0] - order)
    return c, ops.multiply(base if y.ndim == 1 else ops.expand_dims(base, -1), factor)
