"""NumPy's NaN-aware reductions: nansum, nanprod, nanmax/nanmin, nanargmax/nanargmin, nancumsum,
nancumprod, nanmean, nanvar and nanstd. Each replaces NaN by the reduction's identity (or masks it out of
a count) and reduces; a slice of NaNs gives -1 from nanargmax/nanargmin, as JAX.
"""
import numpy as np

from ..core import dtypes as dt
from . import ops
from .sorting import cumprod, cumsum

__all__ = ["nanargmax", "nanargmin", "nancumprod", "nancumsum", "nanmax", "nanmean", "nanmin", "nanprod", "nanstd",
           "nansum", "nanvar"]


def _nan_replaced(x, value):
    """x with its NaNs replaced by `value` (integers and bools have none)."""
    x = ops.asarray(x)
    if not dt.is_inexact(x.dtype):
        return x
    return ops.where(ops.isnan(x), ops.constant_like(value, x, x.dtype) if not dt.is_complex(x.dtype)
                     else x.dtype.type(value), x)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """The sum over `axis`, NaNs counted as zero.

    a: an array. axis: an int, a tuple of ints, or None (all axes). dtype, initial, where: as in nx.sum.
    out: must be None (rune arrays are immutable). keepdims: keep each reduced axis with size 1.
    """
    return ops.sum(_nan_replaced(a, 0), axis, keepdims, dtype=dtype, out=out, initial=initial, where=where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """The product over `axis`, NaNs counted as one.

    a: an array. axis: an int, a tuple of ints, or None (all axes). dtype, initial, where: as in nx.prod.
    out: must be None. keepdims: keep each reduced axis with size 1.
    """
    return ops.prod(_nan_replaced(a, 1), axis, keepdims, dtype=dtype, out=out, initial=initial, where=where)


def _nan_extreme(name, reduce, fill):
    def op(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        ops.check_out(name, out)
        a = ops.asarray(a)
        if not dt.is_float(a.dtype):
            return reduce(a, axis, keepdims, initial=initial, where=where)
        nan = ops.isnan(a)
        best = reduce(ops.where(nan, a.dtype.type(fill), a), axis, keepdims, initial=initial, where=where)
        skipped = nan if where is None else ops.logical_or(nan, ops.logical_not(ops._mask(name, where, a)))
        # A slice of NaNs only has no extreme: NaN, as NumPy's (which also warns).
        return ops.where(ops.all(skipped, axis, keepdims), a.dtype.type(np.nan), best)
    op.__name__ = name
    op.__doc__ = (f"The {'largest' if fill < 0 else 'smallest'} element over `axis`, NaNs ignored (NaN where a "
                  f"slice holds only NaNs).\n\na: a real array. axis: an int, a tuple of ints, or None. out: "
                  f"must be None. keepdims: keep each reduced axis with size 1. initial, where: as in nx.{name[3:]}.")
    return op


nanmax = _nan_extreme("nanmax", ops.max, -np.inf)
nanmin = _nan_extreme("nanmin", ops.min, np.inf)


def _nan_arg(name, arg, fill):
    def op(a, axis=None, out=None, *, keepdims=False):
        ops.check_out(name, out)
        a = ops.asarray(a)
        if not dt.is_float(a.dtype):
            return arg(a, axis, keepdims)
        nan = ops.isnan(a)
        i = arg(ops.where(nan, a.dtype.type(fill), a), axis, keepdims)
        # A slice of NaNs only: -1, as JAX (NumPy raises, which a compiled program cannot).
        return ops.where(ops.all(nan, axis, keepdims), i.dtype.type(-1), i)
    op.__name__ = name
    op.__doc__ = (f"The index of the {'largest' if fill < 0 else 'smallest'} element over `axis`, NaNs ignored; "
                  f"-1 for a slice of NaNs only (as JAX; NumPy raises).\n\na: a real array. axis: an int, or None "
                  f"for the flattened array. out: must be None. keepdims: keep the reduced axis with size 1.")
    return op


nanargmax = _nan_arg("nanargmax", ops.argmax, -np.inf)
nanargmin = _nan_arg("nanargmin", ops.argmin, np.inf)


def nancumsum(a, axis=None, dtype=None, out=None):
    """The running sum along `axis` (the flattened array when None), NaNs counted as zero.

    a: an array. dtype: of the accumulator and the result (as in nx.cumsum). out: must be None.
    """
    return cumsum(_nan_replaced(a, 0), axis, dtype, out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """The running product along `axis` (the flattened array when None), NaNs counted as one.

    a: an array. dtype: of the accumulator and the result (as in nx.cumprod). out: must be None.
    """
    return cumprod(_nan_replaced(a, 1), axis, dtype, out)


def _nan_statistic(name, plain):
    def op(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
        ops.check_out(name, out)
        a = ops.asarray(a)
        if dtype is not None:
            a = ops.astype(a, dtype)
        extra = {} if name == "nanmean" else {"ddof": ddof}
        if not dt.is_inexact(a.dtype):
            return plain(a, axis, keepdims, where=where, **extra)
        mask = ops.logical_not(ops.isnan(a))
        if where is not None:
            mask = ops.logical_and(mask, ops._mask(name, where, a))
        return ops._masked_statistic(name[3:], a, mask, axis, keepdims, **extra)
    op.__name__ = name
    return op


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    return _nan_mean(a, axis, dtype, out, 0, keepdims, where=where)


_nan_mean = _nan_statistic("nanmean", ops.mean)
nanvar = _nan_statistic("nanvar", ops.var)
nanstd = _nan_statistic("nanstd", ops.std)
_NAN_STAT_ARGS = ("\n\na: an array (integers as in nx.mean). axis: an int, a tuple of ints, or None. dtype: of the "
                  "computation and the result. out: must be None. keepdims: keep each reduced axis with size 1. "
                  "where: only elements where it holds count.")
nanmean.__doc__ = "The mean over `axis` of the elements that are not NaN (NaN where there are none)." + \
    _NAN_STAT_ARGS
nanvar.__doc__ = "The variance over `axis` of the elements that are not NaN." + _NAN_STAT_ARGS + \
    " ddof: delta degrees of freedom."
nanstd.__doc__ = "The standard deviation over `axis` of the elements that are not NaN." + _NAN_STAT_ARGS + \
    " ddof: delta degrees of freedom."
