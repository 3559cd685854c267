"""Host implementation of the FFT primitive (rune/nx/fft_prims.py): NumPy's
pocketfft over the trailing axes, in the input's precision."""
import numpy as np

_CALLS = {"fft": np.fft.fftn, "ifft": np.fft.ifftn, "rfft": np.fft.rfftn, "irfft": np.fft.irfftn}
_OUT = {("rfft", np.dtype(np.float32)): np.complex64, ("irfft", np.dtype(np.complex64)): np.float32}


def _fft(x, *, kind, lengths):
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    out = _CALLS[kind](x, s=lengths, axes=axes)
    return np.asarray(out, _OUT.get((kind, x.dtype), np.float64 if kind == "irfft" else
                                    np.complex128 if x.dtype == np.float64 else x.dtype))


IMPLS = {"fft": _fft}
