"""Host implementations of the complex-number primitives (rune/nx/complex_prims.py)."""
import numpy as np


def _complex(re, im):
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), np.complex128 if re.dtype == np.float64 else np.complex64)
    out.real, out.imag = re, im
    return out


IMPLS = {
    "real": lambda x: np.asarray(np.real(x)),
    "imag": lambda x: np.asarray(np.imag(x)),
    "conj": lambda x: np.asarray(np.conj(x)),
    "complex": _complex,
}
