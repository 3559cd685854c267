"""`nx.fft`: the standard's FFT extension, its one primitive and the
primitive's rules.

The transforms (fft, ifft, fftn, ifftn, rfft, irfft, rfftn, irfftn, hfft,
ihfft) take NumPy's and the standard's arguments (n / s, axis / axes, norm);
each moves its axes to the end, pads or truncates them to the requested
sizes, binds the FFT primitive and scales for `norm`. hfft and ihfft are
irfft and rfft of the conjugate, as NumPy defines them. The frequency
functions (fftfreq, rfftfreq, fftshift, ifftshift) are ordinary array
functions.

The primitive `fft_p` is one library call (NumPy's pocketfft on the host,
rune/backends/xp/fft.py) over the trailing `len(lengths)` axes, in NumPy's
default ("backward") normalization. It declares no lowering: compiled code
runs it op by op. `kind` is one of
  fft   complex -> complex, the unnormalized DFT;
  ifft  complex -> complex, the inverse DFT (divided by the transform size);
  rfft  real -> complex, the DFT's non-negative frequencies (last axis n -> n // 2 + 1);
  irfft complex -> real, the inverse of rfft (last axis n // 2 + 1 -> n).
`lengths` are the transform sizes (the output sizes for irfft).

Every transform is linear, so its JVP applies it to the tangent; the VJP is
its transpose, with JAX's convention for complex numbers (transposed, never
conjugated; JAX's lax.fft rules):
  fft, ifft: the DFT matrix is symmetric, so each is its own transpose;
  rfft: the transpose of x -> fft(x + 0i)[:n // 2 + 1]: Re(fft(cotangent padded
        with zeros to n)), computed as an irfft (see _rfft_transpose);
  irfft: conj(w * rfft(ct) / N), w = 1 for the zero (and Nyquist) frequency
        and 2 for the others, which irfft counts twice (as their Hermitian mirror).
vmap moves the batch axis first: the primitive transforms trailing axes only.
"""
import math

import numpy as np

from ..core.aval import Aval
from ..core.primitive import abstract_rules, batch_rules, jvp_rules, primitive, vjp_rules
from ..core.trace import bind
from ..errors import ArgumentError, DTypeError
from ..core import dtypes as dt
from . import ops
from .shapes import roll
from .rule_helpers import to_front

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn", "irfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]


def __dir__():
    """The public names only (as rune.nx's): the helpers and imported modules stay out of dir()."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__") and n.endswith("__")})

_NORMS = ("backward", "ortho", "forward")
_INVERSE = {"fft": False, "rfft": False, "ifft": True, "irfft": True}


# ---------------------------------------------------------------- the primitive

fft_p = primitive("fft")
KINDS = ("fft", "ifft", "rfft", "irfft")


def _fft_abstract(x, *, kind, lengths):
    k = len(lengths)
    lead, last = x.shape[:-k], tuple(lengths)
    if kind == "rfft":
        if not dt.is_float(x.dtype):
            raise DTypeError(f"fft (rfft): expected a real float operand, got {x.dtype.name}")
        return Aval(lead + last[:-1] + (last[-1] // 2 + 1,), dt.complex_dtype(x.dtype), x.device)
    if not dt.is_complex(x.dtype):
        raise DTypeError(f"fft ({kind}): expected a complex operand, got {x.dtype.name}")
    if kind == "irfft":
        return Aval(lead + last, dt.real_dtype(x.dtype), x.device)
    return Aval(x.shape, x.dtype, x.device)


abstract_rules[fft_p] = _fft_abstract


# ---------------------------------------------------------------- the transforms

def _resized(x, axis, size):
    """`x` truncated or zero-padded to `size` along `axis`."""
    have = x.shape[axis]
    if size < have:
        return ops.slice_in_dim(x, 0, size, axis=axis)
    if size > have:
        return ops.pad(x, [(0, 0)] * axis + [(0, size - have)] + [(0, 0)] * (x.ndim - axis - 1))
    return x


def _as_kind(name, x, kind):
    """The operand in the dtype the transform reads: complex for fft/ifft/irfft
    (real input is promoted, as NumPy does), real float for rfft."""
    x = ops.asarray(x)
    if kind == "rfft":
        if dt.is_complex(x.dtype):
            raise DTypeError(f"fft.{name}: expected a real-valued array, got {x.dtype.name}")
        # ints transform in their float (the promotion table's), float16/bfloat16 in float32
        # (pocketfft has no such loops)
        if x.dtype in (dt.float32, dt.float64):
            return x
        target = dt.to_inexact(x.dtype)
        return ops.astype(x, dt.float32 if target.itemsize == 2 else target)
    if dt.is_complex(x.dtype):
        return x
    return ops.astype(x, dt.complex_dtype(dt.to_inexact(x.dtype)))


def _axes_and_sizes(name, x, s, axes):
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(ops.normalize_axis(f"fft.{name}", a, x.ndim) for a in axes)
    if len(set(axes)) != len(axes):
        raise ArgumentError(f"fft.{name}: repeated axis in axes={axes}")
    if s is not None:
        s = tuple(s)
        if len(s) != len(axes):
            raise ArgumentError(f"fft.{name}: s={s} and axes={axes} differ in length")
    return axes, s


def _check_size(name, size, what="n"):
    if not isinstance(size, (int, np.integer)) or isinstance(size, bool) or size < 1:
        raise ArgumentError(f"fft.{name}: {what} must be a positive int, got {size!r}")


def _transform(name, kind, x, axes, sizes, norm):
    """The `kind` transform of `x` over `axes`, with output sizes `sizes` (per axis)."""
    if norm not in _NORMS:
        raise ArgumentError(f"fft.{name}: norm must be one of {_NORMS}, got {norm!r}")
    for size in sizes:
        _check_size(name, size, "each transform size")
    x = _as_kind(name, x, kind)
    in_sizes = list(sizes)
    if kind == "irfft":
        in_sizes[-1] = sizes[-1] // 2 + 1
    for a, size in zip(axes, in_sizes):
        x = _resized(x, a, size)
    perm = [a for a in range(x.ndim) if a not in axes] + list(axes)   # the transformed axes last
    moved = ops.transpose(x, perm) if perm != sorted(perm) else x
    out = bind(fft_p, moved, kind=kind, lengths=tuple(int(n) for n in sizes))
    out = ops.transpose(out, [perm.index(a) for a in range(x.ndim)]) if perm != sorted(perm) else out
    return _normalized(out, kind, math.prod(sizes), norm)


def _normalized(out, kind, size, norm):
    """The primitive computes NumPy's "backward" normalization: rescale for the others."""
    if norm == "backward" or size == 0:
        return out
    scale = math.sqrt(size) if norm == "ortho" else size
    factor = scale if _INVERSE[kind] else 1 / scale
    return ops.multiply(out, dt.real_dtype(out.dtype).type(factor))


def _one_axis(name, kind, x, n, axis, norm, default_n):
    x = ops.asarray(x)
    axis = ops.normalize_axis(f"fft.{name}", axis, x.ndim)
    if n is None:
        n = default_n(x.shape[axis])
    else:
        _check_size(name, n)
    return _transform(name, kind, x, (axis,), (n,), norm)


def _same(m):
    return m


def _hermitian(m):
    return 2 * (m - 1)


def fft(x, /, *, n=None, axis=-1, norm="backward"):
    """The one-dimensional discrete Fourier transform along `axis`.

    x: an array; real input is promoted to complex (float64 to complex128, others to complex64). n: the
    transform's length (`x` zero-padded or truncated to it; default: the axis's length). axis: the transformed
    axis (-1 by default). norm: "backward" (default: the inverse transforms divide by the size), "ortho" (both
    by its square root) or "forward".
    """
    return _one_axis("fft", "fft", x, n, axis, norm, _same)


def ifft(x, /, *, n=None, axis=-1, norm="backward"):
    """The one-dimensional inverse discrete Fourier transform along `axis`.

    x: an array; real input is promoted to complex (float64 to complex128, others to complex64). n: the
    transform's length (`x` zero-padded or truncated to it; default: the axis's length). axis: the transformed
    axis (-1 by default). norm: "backward" (default: the inverse transforms divide by the size), "ortho" (both
    by its square root) or "forward".
    """
    return _one_axis("ifft", "ifft", x, n, axis, norm, _same)


def rfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The DFT of real input: its n // 2 + 1 non-negative frequencies.

    x: a real array (float64 and 32/64-bit ints in float64, the rest in float32). n: the input length along
    `axis` (zero-padded or truncated; default: the axis's length). axis: the transformed axis (-1 by default).
    norm: "backward" (default: the inverse transforms divide by the size), "ortho" (both by its square root) or
    "forward".
    """
    return _one_axis("rfft", "rfft", x, n, axis, norm, _same)


def irfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of rfft: `n` real samples from the non-negative frequencies of a Hermitian signal.

    x: an array of m frequencies (promoted to complex). n: the output length (default 2 (m - 1); x is
    zero-padded or truncated to n // 2 + 1). axis: the transformed axis (-1 by default). norm: "backward"
    (default: the inverse transforms divide by the size), "ortho" (both by its square root) or "forward".
    """
    return _one_axis("irfft", "irfft", x, n, axis, norm, _hermitian)


_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def hfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The DFT of a Hermitian-symmetric signal given by its first half: `n` real samples.

    x: an array of m values (promoted to complex). n: the output length (default 2 (m - 1)). axis: the
    transformed axis (-1 by default). norm: "backward" (default: the inverse transforms divide by the size),
    "ortho" (both by its square root) or "forward".
    """
    if norm not in _NORMS:
        raise ArgumentError(f"fft.hfft: norm must be one of {_NORMS}, got {norm!r}")
    x = ops.asarray(x)
    return _one_axis("hfft", "irfft", ops.conj(_as_kind("hfft", x, "fft")), n, axis, _SWAPPED[norm], _hermitian)


def ihfft(x, /, *, n=None, axis=-1, norm="backward"):
    """The inverse of hfft: the first n // 2 + 1 terms of a real signal's inverse DFT.

    x: a real array (float64 and 32/64-bit ints in float64, the rest in float32). n: the input length along
    `axis` (zero-padded or truncated; default: the axis's length). axis: the transformed axis (-1 by default).
    norm: "backward" (default: the inverse transforms divide by the size), "ortho" (both by its square root) or
    "forward".
    """
    if norm not in _NORMS:
        raise ArgumentError(f"fft.ihfft: norm must be one of {_NORMS}, got {norm!r}")
    return ops.conj(_one_axis("ihfft", "rfft", x, n, axis, _SWAPPED[norm], _same))


def _many_axes(name, kind, x, s, axes, norm):
    x = ops.asarray(x)
    axes, s = _axes_and_sizes(name, x, s, axes)
    if not axes:
        return _as_kind(name, x, kind) if kind in ("fft", "ifft") else x
    if s is None:
        s = [x.shape[a] for a in axes]
        if kind == "irfft":
            s[-1] = _hermitian(s[-1])
    return _transform(name, kind, x, axes, tuple(s), norm)


def fftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional discrete Fourier transform over `axes`.

    x: an array; real input is promoted to complex. s: the transform's size along each of `axes` (zero-padded or
    truncated; default: the axes' lengths). axes: the transformed axes (default: all, or the last len(s)). norm:
    "backward" (default: the inverse transforms divide by the size), "ortho" (both by its square root) or
    "forward".
    """
    return _many_axes("fftn", "fft", x, s, axes, norm)


def ifftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional inverse discrete Fourier transform over `axes`.

    x: an array; real input is promoted to complex. s: the transform's size along each of `axes` (zero-padded or
    truncated; default: the axes' lengths). axes: the transformed axes (default: all, or the last len(s)). norm:
    "backward" (default: the inverse transforms divide by the size), "ortho" (both by its square root) or
    "forward".
    """
    return _many_axes("ifftn", "ifft", x, s, axes, norm)


def rfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The n-dimensional DFT of real input (the last axis halved, as in rfft).

    x: a real array. s: the transform's size along each of `axes` (zero-padded or truncated; default: the axes'
    lengths). axes: the transformed axes (default: all, or the last len(s)). norm: "backward" (default: the
    inverse transforms divide by the size), "ortho" (both by its square root) or "forward".
    """
    return _many_axes("rfftn", "rfft", x, s, axes, norm)


def irfftn(x, /, *, s=None, axes=None, norm="backward"):
    """The inverse of rfftn: real output (the last size defaults to 2 (m - 1)).

    x: an array (promoted to complex). s: the transform's size along each of `axes` (zero-padded or truncated;
    default: the axes' lengths). axes: the transformed axes (default: all, or the last len(s)). norm: "backward"
    (default: the inverse transforms divide by the size), "ortho" (both by its square root) or "forward".
    """
    return _many_axes("irfftn", "irfft", x, s, axes, norm)


def _frequencies(name, values, d, dtype, device):
    if d == 0:
        raise ArgumentError(f"fft.{name}: the sample spacing d must be nonzero")
    dtype = dt.default_float if dtype is None else dt.dtype(dtype)
    return ops.asarray(np.asarray(values / (d * 1.0), np.float64).astype(dtype), device=device)


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an n-point DFT: [0, 1, ..., n/2 - 1, -n/2, ..., -1] / (d n).

    n: the number of samples, a positive int. d: the sample spacing (1.0 by default). dtype: float32 by default.
    device: where the result is made (default: the default device).
    """
    if not isinstance(n, (int, np.integer)) or n <= 0:
        raise ArgumentError(f"fft.fftfreq: n must be a positive int, got {n!r}")
    return _frequencies("fftfreq", np.fft.fftfreq(int(n)), d, dtype, device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an n-point real DFT: [0, 1, ..., n // 2] / (d n).

    n: the number of samples, a positive int. d: the sample spacing (1.0 by default). dtype: float32 by default.
    device: where the result is made (default: the default device).
    """
    if not isinstance(n, (int, np.integer)) or n <= 0:
        raise ArgumentError(f"fft.rfftfreq: n must be a positive int, got {n!r}")
    return _frequencies("rfftfreq", np.fft.rfftfreq(int(n)), d, dtype, device)


def _shift(x, axes, sign):
    x = ops.asarray(x)
    axes = tuple(range(x.ndim)) if axes is None else ((axes,) if isinstance(axes, int) else tuple(axes))
    shifts = tuple(sign * (x.shape[a] // 2) for a in axes)
    return roll(x, shifts, axes) if axes else x


def fftshift(x, /, *, axes=None):
    """The zero frequency moved to the centre (a roll by n // 2 along each of `axes`).

    x: an array. axes: an int, a tuple of ints, or None (every axis).
    """
    return _shift(x, axes, 1)


def ifftshift(x, /, *, axes=None):
    """The inverse of fftshift (a roll by -(n // 2) along each of `axes`).

    x: an array. axes: an int, a tuple of ints, or None (every axis).
    """
    return _shift(x, axes, -1)


# ---------------------------------------------------------------- rules of the primitive

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
        moved = bind(fft_p, ops.transpose(ct, perm), kind="fft", lengths=lengths[:-1])
        ct = ops.transpose(moved, [perm.index(a) for a in range(ct.ndim)])
    n, m = lengths[-1], ct.shape[-1]
    weights = np.full(m, 0.5)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    scaled = ops.multiply(ops.conj(ct), ops.constant_like((weights * n).astype(ops.real(ct).dtype), ct))
    return bind(fft_p, scaled, kind="irfft", lengths=(n,))


def _irfft_transpose(ct, lengths):
    x = bind(fft_p, ct, kind="rfft", lengths=lengths)
    m, odd = x.shape[-1], lengths[-1] % 2
    weights = np.concatenate([[1.0], np.full(m - 2 + odd, 2.0), np.ones(1 - odd)])
    weights = weights / math.prod(lengths)
    return ops.conj(ops.multiply(x, ops.constant_like(weights.astype(ops.real(x).dtype), x)))


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
