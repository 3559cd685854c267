"""`argsort` and `sort` (rune/nx/sorting.py) on an array module `xp`: its stable sort."""
import numpy as np


def make_impls(xp):
    def argsort(x, *, axis, descending, index_dtype):
        if x.dtype.name == "bfloat16":     # ml_dtypes sorts through float32 exactly
            x = x.astype(np.float32)
        if not descending:
            return xp.argsort(x, axis=axis, kind="stable").astype(index_dtype)
        # Stable descending: sort the reversed axis ascending, reverse that order
        # and map positions back (equal elements keep their original order).
        n = x.shape[axis]
        order = xp.flip(xp.argsort(xp.flip(x, axis), axis=axis, kind="stable"), axis)
        return (n - 1 - order).astype(index_dtype)
    def sort(x, *, axis):
        if x.dtype.name == "bfloat16":
            return xp.sort(x.astype(np.float32), axis=axis, kind="stable").astype(x.dtype)
        # integers: equal values are indistinguishable, so NumPy's fastest sort gives the same
        # result; floats: stable, so 0.0 and -0.0 keep their order as argsort's gather keeps it
        return xp.sort(x, axis=axis, kind="stable" if x.dtype.kind in "fc" else None)

    return {"argsort": argsort, "sort": sort}
