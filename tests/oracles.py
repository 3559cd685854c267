"""Independent oracles shared by the tests."""
import numpy as np


def fd_grad(f, x, eps=1e-6):
    """Central finite differences of scalar `f` (NumPy float64 in, float out) at `x`."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    return g


def fd_complex_grad(f, a, h=1e-6):
    """df/dx - i df/dy of real-valued f at complex a, by central differences."""
    out = np.zeros(a.shape, np.complex128)
    for i in np.ndindex(a.shape):
        e = np.zeros(a.shape, np.complex128)
        e[i] = h
        out[i] = (f(a + e) - f(a - e) - 1j * (f(a + 1j * e) - f(a - 1j * e))) / (2 * h)
    return out
