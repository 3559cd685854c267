"""The FFT primitive (rune/nx/fft.py) on an array module `xp`: NumPy's
pocketfft on the host, cuFFT through CuPy on a GPU, over the trailing axes, in
the input's precision."""
import numpy as np

_OUT = {("rfft", np.dtype(np.float32)): np.complex64, ("irfft", np.dtype(np.complex64)): np.float32}


def make_impls(xp):
    calls = {"fft": xp.fft.fftn, "ifft": xp.fft.ifftn, "rfft": xp.fft.rfftn, "irfft": xp.fft.irfftn}

    def fft(x, *, kind, lengths):
        axes = tuple(range(x.ndim - len(lengths), x.ndim))
        out = calls[kind](x, s=lengths, axes=axes)
        return xp.asarray(out, _OUT.get((kind, x.dtype), np.float64 if kind == "irfft" else
                                        np.complex128 if x.dtype == np.float64 else x.dtype))

    return {"fft": fft}
