"""Implementations of the linalg primitives (rune/nx/linalg.py) on an
array module `xp`: NumPy's LAPACK calls (CuPy's cuSOLVER ones), batched over leading
axes. float16/bfloat16 (which LAPACK lacks) compute in float32 and round once."""
import numpy as np

from ...base.stats import COUNTERS


def make_impls(xp):
    def wide(fn):
        def run(*args, **params):
            dtype = args[0].dtype
            if dtype.itemsize == 2:
                outs = fn(*(a.astype(np.float32) for a in args), **params)
                return [o.astype(dtype) for o in outs] if isinstance(outs, list) else outs.astype(dtype)
            return fn(*args, **params)
        return run

    def solve(a, b):
        return xp.linalg.solve(a, b)

    def cholesky(a):
        return xp.linalg.cholesky(a)

    def eigh(a):
        w, v = xp.linalg.eigh(a)
        return [w, v]

    def slogdet(a):
        sign, logabs = xp.linalg.slogdet(a)
        # log|det| is real for complex matrices too
        return [xp.asarray(sign, a.dtype), xp.asarray(logabs, np.real(np.zeros((), a.dtype)).dtype)]

    def det(a):
        return xp.asarray(xp.linalg.det(a), a.dtype)

    def svdvals(a):
        return xp.linalg.svd(a, compute_uv=False)

    def svd(a, *, full_matrices):
        u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
        return [u, s, vh]

    def eig(a):
        # Always complex (the abstract rule's dtype): NumPy's eig is real when every eigenvalue is.
        # (float16 and bfloat16 compute in float32: not through `wide`, which would round
        # the complex results to the input's real dtype)
        complex_dtype = np.complex128 if a.dtype in (np.float64, np.complex128) else np.complex64
        a = a.astype(np.float32) if a.dtype.itemsize == 2 else a
        if xp is np:
            w, v = np.linalg.eig(a)
            return [w.astype(complex_dtype), v.astype(complex_dtype)]
        # CuPy has no general eigensolver: LAPACK on the host, the results copied
        # back (two transfers, counted as rune.core.devices.transfer counts them)
        host = xp.asnumpy(a)
        w, v = np.linalg.eig(host)
        _count_round_trip(host.nbytes + w.astype(complex_dtype).nbytes + v.astype(complex_dtype).nbytes)
        return [xp.asarray(w.astype(complex_dtype)), xp.asarray(v.astype(complex_dtype))]

    def qr(a, *, mode):
        q, r = xp.linalg.qr(a, mode=mode)
        return [q, r]

    def safe(fn):
        # Singular or non-positive-definite inputs give NaNs (as JAX), not an exception.
        def run(*args, **params):
            with np.errstate(all="ignore"):
                try:
                    return fn(*args, **params)
                except np.linalg.LinAlgError:
                    return nan_like(fn, args, params)
        return run

    def nan_like(fn, args, params):
        probe = fn(*(xp.eye(a.shape[-1], dtype=a.dtype) * xp.ones(a.shape, a.dtype) if a.ndim >= 2 and
                     a.shape[-1] == a.shape[-2] else xp.ones(a.shape, a.dtype) for a in args), **params)
        return [xp.full_like(p, np.nan) for p in probe] if isinstance(probe, list) else xp.full_like(probe, np.nan)

    table = {"linalg_" + name: safe(wide(fn)) for name, fn in {
        "solve": solve, "cholesky": cholesky, "eigh": eigh, "slogdet": slogdet, "det": det, "svdvals": svdvals,
        "svd": svd, "qr": qr}.items()}
    table["linalg_eig"] = safe(eig)
    return table


def _count_round_trip(nbytes):
    COUNTERS["transfers"] += 2
    COUNTERS["bytes_moved"] += nbytes
    COUNTERS["device_to_host"] += 1
    COUNTERS["host_to_device"] += 1
