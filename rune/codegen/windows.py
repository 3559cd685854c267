"""Window geometry shared by the convolution and pooling primitives, their
rules and the backends: how far dilated elements reach, how many windows fit,
and the NumPy views of a padded array's windows (the host backend computes
with them; the rules build static index tables with them)."""
import numpy as np
from numpy.lib.stride_tricks import as_strided


def dilate(n, d):
    """The extent of `n` elements with `d - 1` holes between neighbours."""
    return 0 if n == 0 else (n - 1) * d + 1


def window_count(n, window, stride, lo=0, hi=0, dilation=1, window_dilation=1):
    """How many windows fit along one axis (padding may be negative: a crop)."""
    span = dilate(n, dilation) + lo + hi
    extent = dilate(window, window_dilation)
    return 0 if span < extent else (span - extent) // stride + 1


def dilate_pad(x, axes, dilations, padding, value):
    """`x` with `dilations[i] - 1` holes between neighbours along axes[i], then
    padded by padding[i] = (lo, hi) (negative: cropped); holes and padding hold `value`."""
    shape = list(x.shape)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    empty = False
    for a, d, (lo, hi) in zip(axes, dilations, padding):
        n = x.shape[a]
        span = dilate(n, d) + lo + hi
        shape[a] = max(span, 0)
        first = max(0, -(lo // d)) if lo < 0 else 0          # the first element that lands inside
        last = min(n, (span - 1 - lo) // d + 1) if span > 0 else 0
        if last <= first:
            empty = True
            continue
        src[a] = slice(first, last)
        dst[a] = slice(first * d + lo, (last - 1) * d + lo + 1, d)
    if not empty and all(d == 1 for d in dilations) and all(p == (0, 0) for p in padding):
        return x
    out = np.full_like(x, value, shape=shape, order="C")  # on x's array module (NEP 18)
    if not empty:
        out[tuple(dst)] = x[tuple(src)]
    return out


def windows(x, axes, window, strides, dilation, counts, strided=None):
    """A read-only view of `x` with, for each axis in `axes`, that axis replaced
    by (window position) and a window axis appended at the end. `strided(x,
    shape, strides)` makes the view on arrays other than NumPy's (CuPy's
    `as_strided`, which has no read-only flag)."""
    shape, steps = list(x.shape), list(x.strides)
    tail_shape, tail_steps = [], []
    for a, k, s, d, c in zip(axes, window, strides, dilation, counts):
        shape[a], steps[a] = c, x.strides[a] * s
        tail_shape.append(k)
        tail_steps.append(x.strides[a] * d)
    shape, steps = tuple(shape) + tuple(tail_shape), tuple(steps) + tuple(tail_steps)
    if strided is not None:
        return strided(x, shape, steps)
    return as_strided(x, shape, steps, writeable=False)
