"""Host implementations of the linalg primitives (rune/nx/linalg_prims.py):
NumPy's LAPACK calls, batched over leading axes. float16/bfloat16 (which LAPACK
lacks) compute in float32 and round once."""
import numpy as np


def _wide(fn):
    def run(*args, **params):
        dtype = args[0].dtype
        if dtype.itemsize == 2:
            outs = fn(*(a.astype(np.float32) for a in args), **params)
            return [o.astype(dtype) for o in outs] if isinstance(outs, list) else outs.astype(dtype)
        return fn(*args, **params)
    return run


def _solve(a, b):
    return np.linalg.solve(a, b)


def _cholesky(a):
    return np.linalg.cholesky(a)


def _eigh(a):
    w, v = np.linalg.eigh(a)
    return [w, v]


def _slogdet(a):
    sign, logabs = np.linalg.slogdet(a)
    return [np.asarray(sign, a.dtype), np.asarray(logabs, np.real(np.zeros((), a.dtype)).dtype)]


def _svdvals(a):
    return np.linalg.svd(a, compute_uv=False)


def _svd(a, *, full_matrices):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return [u, s, vh]


def _qr(a, *, mode):
    q, r = np.linalg.qr(a, mode=mode)
    return [q, r]


def _safe(fn):
    # Singular or non-positive-definite inputs give NaNs (as JAX), not an exception.
    def run(*args, **params):
        with np.errstate(all="ignore"):
            try:
                return fn(*args, **params)
            except np.linalg.LinAlgError:
                return _nan_like(fn, args, params)
    return run


def _nan_like(fn, args, params):
    probe = fn(*(np.eye(a.shape[-1], dtype=a.dtype) * np.ones(a.shape, a.dtype) if a.ndim >= 2 and
                 a.shape[-1] == a.shape[-2] else np.ones(a.shape, a.dtype) for a in args), **params)
    return [np.full_like(p, np.nan) for p in probe] if isinstance(probe, list) else np.full_like(probe, np.nan)


IMPLS = {"linalg_" + name: _safe(_wide(fn)) for name, fn in {
    "solve": _solve, "cholesky": _cholesky, "eigh": _eigh, "slogdet": _slogdet, "svdvals": _svdvals,
    "svd": _svd, "qr": _qr}.items()}
