"""Derivative and batching rules of the FFT primitive (rune/nx/fft_prims.py).

Every transform is linear, so its JVP applies it to the tangent; the VJP is
its transpose, with JAX's convention for complex numbers (transposed, never
conjugated; JAX's lax.fft rules):
  fft, ifft: the DFT matrix is symmetric, so each is its own transpose;
  rfft: the transpose of x -> fft(x + 0i)[:n // 2 + 1]: Re(fft(cotangent padded
        with zeros to n)), computed as an irfft (see _rfft_transpose);
  irfft: conj(w * rfft(ct) / N), w = 1 for the zero (and Nyquist) frequency
        and 2 for the others, which irfft counts twice (as their Hermitian mirror).
"""
import math

import numpy as np

from .autodiff.jvp import jvp_rules
from .autodiff.vjp import vjp_rules
from .batching import batch_rules, to_front
from .core.trace import bind
from .nx import ops as nx
from .nx.fft_prims import fft_p


def _fft_jvp(primals, tangents, *, kind, lengths):
    return bind(fft_p, primals[0], kind=kind, lengths=lengths), bind(fft_p, tangents[0], kind=kind, lengths=lengths)


def _rfft_transpose(ct, lengths):
    """rfftn is the complex FFT over the leading transform axes after rfft over the
    last, so its transpose is their transposes in the other order: fft over the
    leading axes (the DFT is symmetric), then rfft's along the last axis,
    Re(fft(pad(c))) = n irfft(conj(c) v) with v = 1 for the zero (and Nyquist)
    frequency and 1/2 for the others (irfft counts those twice). Two half-size
    transforms instead of a full complex one."""
    k = len(lengths)
    if k > 1:
        last = ct.ndim - 1
        perm = list(range(ct.ndim - k)) + [last] + list(range(ct.ndim - k, last))
        moved = bind(fft_p, nx.transpose(ct, perm), kind="fft", lengths=lengths[:-1])
        ct = nx.transpose(moved, [perm.index(a) for a in range(ct.ndim)])
    n, m = lengths[-1], ct.shape[-1]
    weights = np.full(m, 0.5)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    scaled = nx.multiply(nx.conj(ct), nx.constant_like((weights * n).astype(nx.real(ct).dtype), ct))
    return bind(fft_p, scaled, kind="irfft", lengths=(n,))


def _irfft_transpose(ct, lengths):
    x = bind(fft_p, ct, kind="rfft", lengths=lengths)
    m, odd = x.shape[-1], lengths[-1] % 2
    weights = np.concatenate([[1.0], np.full(m - 2 + odd, 2.0), np.ones(1 - odd)])
    weights = weights / math.prod(lengths)
    return nx.conj(nx.multiply(x, nx.constant_like(weights.astype(nx.real(x).dtype), x)))


_TRANSPOSES = {
    "fft": lambda ct, lengths: bind(fft_p, ct, kind="fft", lengths=lengths),
    "ifft": lambda ct, lengths: bind(fft_p, ct, kind="ifft", lengths=lengths),
    "rfft": _rfft_transpose,
    "irfft": _irfft_transpose,
}


def _fft_vjp(ct, ins, out, wants, *, kind, lengths):
    return (_TRANSPOSES[kind](ct, lengths),)


def _fft_batch(values, dims, size, *, kind, lengths):
    # The primitive transforms trailing axes only: any leading axis is a batch.
    return bind(fft_p, to_front(values[0], dims[0]), kind=kind, lengths=lengths), 0


jvp_rules[fft_p], vjp_rules[fft_p], batch_rules[fft_p] = _fft_jvp, _fft_vjp, _fft_batch
