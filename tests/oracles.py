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
