"""The complex-number primitives (rune/nx/complex_prims.py) on an array module `xp`."""
import numpy as np


def make_impls(xp):
    def make_complex(re, im):
        # parts set separately: re + im * 1j would turn an infinite im into nan + inf j
        out = xp.empty(np.broadcast_shapes(re.shape, im.shape),
                       np.complex128 if re.dtype == np.float64 else np.complex64)
        out.real, out.imag = re, im
        return out

    return {
        "real": lambda x: xp.asarray(xp.real(x)),
        "imag": lambda x: xp.asarray(xp.imag(x)),
        "conj": lambda x: xp.asarray(xp.conj(x)),
        "complex": make_complex,
    }
