"""Host implementations of the elementwise functions in rune/nx/mathfuncs.py:
NumPy's ufuncs, without floating-point warnings (inf and nan are values)."""
import numpy as np


def _ufunc(fn):
    def run(*args):
        with np.errstate(all="ignore"):
            out = fn(*args)
        return out if type(out) is np.ndarray else np.asarray(out)
    return run


def _low(fn):
    """float16/bfloat16 computed in float32 and rounded once (NumPy has no
    bfloat16 loops for most of these)."""
    def run(*args):
        dtype = np.result_type(*args)
        if dtype.itemsize == 2:
            return fn(*(np.asarray(a, np.float32) for a in args)).astype(dtype)
        return fn(*args)
    return run


def _nextafter(x, y):
    dtype = np.result_type(x, y)
    if dtype.name == "bfloat16":   # the next bfloat16: step the 16-bit pattern
        x, y = np.asarray(x, dtype), np.asarray(y, dtype)
        bits = x.view(np.uint16).astype(np.int32)
        up = (y > x) == (x >= 0)                # away from zero when moving outward
        step = np.where(up, 1, -1)
        zero = x == 0
        out = (bits + step).astype(np.uint16).view(dtype)
        tiny = np.where(y > 0, np.uint16(1), np.uint16(0x8001)).view(dtype)
        out = np.where(zero, tiny, out)
        return np.where(np.isnan(x) | np.isnan(y), np.nan, np.where(x == y, y, out)).astype(dtype)
    return np.nextafter(x, y)


IMPLS = {name: _ufunc(_low(fn)) for name, fn in {
    "acosh": np.arccosh, "asinh": np.arcsinh, "atanh": np.arctanh, "log2": np.log2,
    "log10": np.log10, "trunc": np.trunc, "hypot": np.hypot, "copysign": np.copysign,
    "logaddexp": np.logaddexp}.items()}
IMPLS["nextafter"] = _ufunc(_nextafter)
