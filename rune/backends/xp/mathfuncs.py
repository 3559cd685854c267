"""Implementations of the elementwise functions in rune/nx/mathfuncs.py on an
array module `xp` (NumPy, CuPy): its ufuncs, without floating-point warnings
(inf and nan are values)."""
import numpy as np


_UFUNCS = {"acosh": "arccosh", "asinh": "arcsinh", "atanh": "arctanh", "log2": "log2",
           "log10": "log10", "trunc": "trunc", "copysign": "copysign",
           "logaddexp": "logaddexp"}   # hypot: rune's own rule, in complexfuncs.py


def make_impls(xp):
    def ufunc(fn):
        def run(*args):
            with np.errstate(all="ignore"):  # NumPy's warnings; CuPy has none
                out = fn(*args)
            return out if type(out) is xp.ndarray else xp.asarray(out)
        return run

    def low(fn):
        """float16/bfloat16 computed in float32 and rounded once (NumPy has no
        bfloat16 loops for most of these)."""
        def run(*args):
            dtype = xp.result_type(*args)
            if dtype.itemsize == 2:
                return fn(*(xp.asarray(a, np.float32) for a in args)).astype(dtype)
            return fn(*args)
        return run

    def nextafter(x, y):
        dtype = xp.result_type(x, y)
        if dtype.name == "bfloat16":   # the next bfloat16: step the 16-bit pattern
            x, y = xp.asarray(x, dtype), xp.asarray(y, dtype)
            bits = x.view(np.uint16).astype(np.int32)
            up = (y > x) == (x >= 0)                # away from zero when moving outward
            step = xp.where(up, 1, -1)
            zero = x == 0
            out = (bits + step).astype(np.uint16).view(dtype)
            tiny = xp.where(y > 0, np.uint16(1), np.uint16(0x8001)).view(dtype)
            out = xp.where(zero, tiny, out)
            return xp.where(xp.isnan(x) | xp.isnan(y), np.nan, xp.where(x == y, y, out)).astype(dtype)
        # Equal operands give y (C99, IEEE 754) in every dtype: NumPy's float16 loop gave
        # x before NumPy 2.5, which differs for zeros of opposite signs.
        return xp.where(x == y, y, xp.nextafter(x, y)).astype(dtype)

    impls = {name: ufunc(low(getattr(xp, fn))) for name, fn in _UFUNCS.items()}
    impls["nextafter"] = ufunc(nextafter)
    return impls
