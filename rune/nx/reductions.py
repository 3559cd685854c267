"""Reductions over axes: sum, prod, max, min, any, all, argmax/argmin, mean,
var, std, count_nonzero, and the stable logsumexp/softmax/log_softmax; with
NumPy's keywords (dtype=, initial=, where=, out=None) that np.sum(a) and the
array methods pass."""
import builtins
import math

import numpy as np

from ..core.prims import P, broadcast_shapes
from ..core.trace import bind
from ..errors import ArgumentError, DTypeError, ShapeError
from ..core import dtypes as dt
from .conversion import asarray, astype, constant_like, in_float32
from .elementwise import _parts
from .elementwise import (add, divide, equal, exp, isfinite, log, logical_not, maximum, minimum, multiply,
                          not_equal, sqrt, stop_gradient, subtract, where)
from .shapes import _axes, broadcast_to, normalize_axis, reshape, squeeze

def _keep(x, out, axes, keepdims):
    if not keepdims:
        return out
    return reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


_NARROW = {dt.bool_: dt.int32, dt.int8: dt.int32, dt.int16: dt.int32, dt.uint8: dt.uint32,
           dt.uint16: dt.uint32}


def _reduction(prim_name, accumulate_as=None):
    prim = P[prim_name]

    def op(x, axis=None, keepdims=False):
        x = asarray(x)
        axes = _axes(op.__name__, axis, x.ndim)
        if accumulate_as is not None and x.dtype in _NARROW:
            # The standard's rule: narrow ints sum in the default int of their
            # kind (uint8 -> uint32, int8 -> int32), bools in the default int.
            x = astype(x, _NARROW[x.dtype])
        if prim_name in ("reduce_max", "reduce_min") and dt.is_complex(x.dtype):
            raise DTypeError(f"{op.__name__}: complex numbers have no order; take the max of abs(x) "
                             f"or real(x), got {x.dtype.name}")
        if prim_name in ("reduce_max", "reduce_min") and builtins.any(x.shape[a] == 0 for a in axes):
            raise ShapeError(f"{op.__name__}: reduction over an empty axis of shape {x.shape} has no identity")
        return _keep(x, bind(prim, x, axes=axes), axes, keepdims)
    return op


def _reduced_shape(shape, axes, keepdims):
    return tuple(1 if i in axes else d for i, d in enumerate(shape)) if keepdims else \
        tuple(d for i, d in enumerate(shape) if i not in axes)


sum = _reduction("reduce_sum", dt.int32)
prod = _reduction("reduce_prod", dt.int32)
max = _reduction("reduce_max")
min = _reduction("reduce_min")
sum.__name__, prod.__name__, max.__name__, min.__name__ = "sum", "prod", "max", "min"


def any(x, axis=None, keepdims=False):
    """Whether any element is true (False over an empty axis).

    x: an array of any dtype (nonzero is true). axis: an int, a tuple of ints, or None (all axes).
    keepdims: keep each reduced axis with size 1. dtype=, where= and out=None (rune arrays are
    immutable) are NumPy's keywords; initial= is refused (ArgumentError), as NumPy's any/all have none.
    """
    return not_equal(sum(astype(x, dt.bool_), axis, keepdims), 0)


def all(x, axis=None, keepdims=False):
    """Whether every element is true (True over an empty axis).

    x: an array of any dtype (nonzero is true). axis: an int, a tuple of ints, or None (all axes).
    keepdims: keep each reduced axis with size 1. dtype=, where= and out=None (rune arrays are
    immutable) are NumPy's keywords; initial= is refused (ArgumentError), as NumPy's any/all have none.
    """
    return equal(sum(logical_not(x), axis, keepdims), 0)


def _arg_reduction(prim_name):
    prim = P[prim_name]

    def op(x, axis=None, keepdims=False):
        x = asarray(x)
        if axis is None:
            if x.size == 0:
                raise ShapeError(f"{prim_name}: the array is empty, so it has no {prim_name[3:]}imum")
            flat = reshape(x, (-1,))
            out = bind(prim, flat, axis=0, index_dtype=dt.int32)
            return reshape(out, (1,) * x.ndim) if keepdims else out
        a = normalize_axis(prim_name, axis, x.ndim)
        if x.shape[a] == 0:
            raise ShapeError(f"{prim_name}: empty axis {axis} of shape {x.shape}")
        return _keep(x, bind(prim, x, axis=a, index_dtype=dt.int32), (a,), keepdims)
    op.__name__ = prim_name
    return op


argmax, argmin = _arg_reduction("argmax"), _arg_reduction("argmin")


@in_float32
def mean(x, axis=None, keepdims=False):
    """The arithmetic mean over `axis`.

    x: an array (integers and bools are averaged in the promotion table's float for them: float32 for bool and
    8/16-bit integers, float64 for 32/64-bit ones; float16/bfloat16 accumulate in float32 and round once).
    axis: an int, a tuple of ints, or None (all axes). keepdims: keep each reduced axis with size 1. dtype= (of
    the computation and the result) and where= (only elements where it holds count) are NumPy's keywords; out=
    must be None (rune arrays are immutable).
    """
    if not dt.is_inexact(x.dtype):
        x = astype(x, dt.to_inexact(x.dtype))
    axes = _axes("mean", axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    return divide(sum(x, axes, keepdims), n)


@in_float32
def var(x, axis=None, keepdims=False, ddof=0):
    """The variance over `axis`: mean(|x - mean(x)|**2) * n / (n - ddof).

    x: an array (integers as in `mean`; complex numbers give a real variance). axis: an int, a tuple of ints,
    or None (all axes). keepdims: keep each reduced axis with size 1. ddof: delta degrees of freedom (the
    standard's correction=). dtype=, where= and out=None as in `mean`.
    """
    if not dt.is_inexact(x.dtype):
        x = astype(x, dt.to_inexact(x.dtype))
    axes = _axes("var", axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    centered = subtract(x, mean(x, axes, keepdims=True))
    return divide(sum(_abs_squared(centered), axes, keepdims), n - ddof)


def _abs_squared(x):
    """|x|^2: x * x, or re^2 + im^2 for complex x (a real dtype, as NumPy's var of complex)."""
    if dt.is_complex(x.dtype):
        re, im = _parts(x)
        return add(multiply(re, re), multiply(im, im))
    return multiply(x, x)


@in_float32
def std(x, axis=None, keepdims=False, ddof=0):
    """The standard deviation over `axis`: sqrt(var(x, axis, keepdims, ddof)).

    x: an array (integers as in `mean`). axis: an int, a tuple of ints, or None (all axes). keepdims: keep each
    reduced axis with size 1. ddof: delta degrees of freedom (the standard's correction=). dtype=, where= and
    out=None as in `mean`.
    """
    return sqrt(var(x, axis, keepdims, ddof))


# ---------------------------------------------------------------- NumPy's reduction keywords
# np.sum(a), np.mean(a), ... call the array's methods with NumPy's keywords
# (dtype=, out=None, initial=, where=, ddof=); the methods pass them here.


def check_out(name, out):
    """NumPy's out=: only None, since arrays are immutable."""
    if out is not None:
        raise ArgumentError(f"{name}: out= must be None (rune arrays are immutable, so the result is "
                            f"returned instead), got {type(out).__name__}")


def _with_numpy_keywords(reduce, fill=None, combine=None):
    """`reduce(x, axis, keepdims)` that also takes NumPy's keywords: dtype= (of the
    accumulator and the result), initial= (a scalar that takes part, so an empty
    axis gives it; where `combine` joins it to a result), where= (elements where
    it is False do not take part: they become `fill`, else `initial`) and out=None."""
    name = reduce.__name__

    def op(x, axis=None, keepdims=False, *, dtype=None, out=None, initial=None, where=None):
        check_out(name, out)
        if dtype is None and initial is None and where is None:
            return reduce(x, axis, keepdims)
        x = asarray(x)
        if dtype is not None:
            x = astype(x, dtype)
        if initial is not None:
            if combine is None:
                raise ArgumentError(f"{name}: initial= is not an argument of {name}")
            initial = constant_like(initial, x, x.dtype)
            if initial.ndim:
                raise ShapeError(f"{name}: initial must be a scalar, got shape {initial.shape}")
        if where is not None:
            value = initial if fill is None else fill
            if value is None:
                raise ArgumentError(f"{name}: where= needs initial= (an axis where nothing is selected "
                                    f"has no {name}imum)")
            x = _select(_mask(name, where, x), x, value)
        axes = _axes(name, axis, x.ndim)
        if initial is None:
            out = reduce(x, axes, keepdims)
        elif builtins.any(x.shape[a] == 0 for a in axes):
            out = broadcast_to(initial, _reduced_shape(x.shape, axes, keepdims))
        else:
            out = combine(reduce(x, axes, keepdims), initial)
        # Small integers accumulate wider; NumPy's result has the dtype asked for.
        return out if dtype is None else astype(out, dtype)

    op.__name__ = name
    op.__doc__ = reduce.__doc__
    return op


def _mask(name, where, x):
    mask = astype(constant_like(where, x), dt.bool_)
    try:
        fits = broadcast_shapes(name, mask.shape, x.shape) == x.shape
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(f"{name}: where= of shape {mask.shape} does not broadcast to the array's {x.shape}")
    return mask


def _statistic_with_numpy_keywords(stat):
    """mean/var/std that also take dtype= (of the computation and the result),
    where= (only elements where it holds count) and out=None, as NumPy's."""
    name = stat.__name__

    def op(x, axis=None, keepdims=False, *args, dtype=None, out=None, where=None, **kwargs):
        check_out(name, out)
        if dtype is None and where is None:
            return stat(x, axis, keepdims, *args, **kwargs)
        x = asarray(x)
        if dtype is not None and dt.is_float(dt.dtype(dtype)):
            x = astype(x, dtype)
        if where is None:
            out = stat(x, axis, keepdims, *args, **kwargs)
        else:
            out = _masked_statistic(name, x, _mask(name, where, x), axis, keepdims, *args, **kwargs)
        return out if dtype is None else astype(out, dtype)

    op.__name__ = name
    op.__doc__ = stat.__doc__
    return op


def _real_part(x):
    return _parts(x)[0] if dt.is_complex(x.dtype) else x


def _masked_statistic(name, x, mask, axis, keepdims, ddof=0):
    low = x.dtype in (dt.float16, dt.bfloat16)  # accumulated in float32 and rounded once
    work = dt.float32 if low else dt.to_inexact(x.dtype)
    xw = astype(x, work)
    axes = _axes(name, axis, x.ndim)
    count = sum(astype(broadcast_to(mask, x.shape), work), axes, True)
    mu = divide(sum(xw, axes, True, where=mask), count)
    if name == "mean":
        out = mu
    else:
        out = divide(sum(_abs_squared(subtract(xw, mu)), axes, True, where=mask),
                     maximum(subtract(_real_part(count), ddof), 0))
        out = sqrt(out) if name == "std" else out
    out = out if keepdims else reshape(out, _reduced_shape(x.shape, axes, False))
    return astype(out, x.dtype) if low else out


_select = where
sum = _with_numpy_keywords(sum, 0, add)
prod = _with_numpy_keywords(prod, 1, multiply)
max = _with_numpy_keywords(max, None, maximum)
min = _with_numpy_keywords(min, None, minimum)
amax, amin = max, min
any = _with_numpy_keywords(any, False)
all = _with_numpy_keywords(all, True)
mean, var, std = (_statistic_with_numpy_keywords(f) for f in (mean, var, std))


_REDUCE = ("x: an array. axis: an int, a tuple of ints, or None (all axes). keepdims: keep each reduced axis "
           "with size 1. dtype=, initial= and where= are NumPy's keywords; out= must be None (rune arrays are "
           "immutable, so the result is returned).")
_ARG_REDUCE = ("x: an array. axis: an int, or None for the flattened array. keepdims: keep the reduced axis "
               "with size 1. The index is int32; of ties, the first.")
for _f, _summary, _args in (
        (sum, "The sum over `axis`; bools and narrow integers accumulate in int32 (uint8, uint16 in uint32).",
         _REDUCE),
        (prod, "The product over `axis`; bools and narrow integers accumulate in int32 (uint8, uint16 in uint32).",
         _REDUCE),
        (max, "The largest element over `axis` (also named amax); NaN if any is NaN.",
         _REDUCE + " An empty axis needs initial=; complex numbers are refused."),
        (min, "The smallest element over `axis` (also named amin); NaN if any is NaN.",
         _REDUCE + " An empty axis needs initial=; complex numbers are refused."),
        (argmax, "The index of the largest element over `axis`.", _ARG_REDUCE),
        (argmin, "The index of the smallest element over `axis`.", _ARG_REDUCE)):
    _f.__doc__ = f"{_summary}\n\n{_args}"


def _floating(x):
    x = asarray(x)
    return x if dt.is_float(x.dtype) else astype(x, dt.to_inexact(x.dtype))


@in_float32
def logsumexp(x, axis=None, keepdims=False):
    """log(sum(exp(x))) over `axis`, computed stably (the maximum is subtracted first).

    x: an array (integers as in `mean`). axis: an int, a tuple of ints, or None (all axes). keepdims: keep each
    reduced axis with size 1. An empty axis gives -inf.
    """
    x = _floating(x)
    axes = _axes("logsumexp", axis, x.ndim)
    if builtins.any(x.shape[a] == 0 for a in axes):  # the log of an empty sum
        return broadcast_to(constant_like(-np.inf, x, x.dtype), _reduced_shape(x.shape, axes, keepdims))
    top = stop_gradient(max(x, axes, keepdims=True))
    top = where(isfinite(top), top, 0)
    out = add(log(sum(exp(subtract(x, top)), axes, keepdims=True)), top)
    return out if keepdims else squeeze(out, axes)


def _softmax_input(name, x, axis):
    """`x` as floats, and whether it is empty: then the result is `x` itself (no
    element to normalise). The axis is checked here so errors name softmax."""
    x = _floating(x)
    _axes(name, axis, x.ndim)
    return x, x.size == 0


@in_float32
def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, computed stably (the maximum is subtracted first).

    x: an array (integers as in `mean`). axis: the axis (or axes) normalized over, -1 by default.
    """
    x, empty = _softmax_input("softmax", x, axis)
    if empty:
        return x
    unnormalized = exp(subtract(x, stop_gradient(max(x, axis, keepdims=True))))
    return divide(unnormalized, sum(unnormalized, axis, keepdims=True))


@in_float32
def log_softmax(x, axis=-1):
    """log(softmax(x)) along `axis`, computed stably.

    x: an array (integers as in `mean`). axis: the axis (or axes) normalized over, -1 by default.
    """
    x, empty = _softmax_input("log_softmax", x, axis)
    if empty:
        return x
    shifted = subtract(x, stop_gradient(max(x, axis, keepdims=True)))
    return subtract(shifted, log(sum(exp(shifted), axis, keepdims=True)))


def count_nonzero(x, axis=None, keepdims=False):
    """How many elements are nonzero, as int32 (the default integer dtype).

    x: an array. axis: an int, a tuple of ints, or None (all axes). keepdims: keep each reduced axis with size 1.
    """
    x = asarray(x)
    return sum(astype(not_equal(x, x.dtype.type(0)), dt.default_int), axis, keepdims)
