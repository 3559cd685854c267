"""`conv` and `reduce_window` (rune/nx/conv.py) on an array module `xp`
(NumPy with BLAS on the host, CuPy with cuBLAS on a GPU: CuPy 14 dropped cuDNN).

Both read windows through a strided view of the padded (and dilated) input,
without copying it: `reduce_window` combines the view's slices at each window
offset (a pooling window has few), or reduces the view over its window axes
when windows are large; `conv` flattens it into patches (im2col, the one copy)
and multiplies them by the kernel with one BLAS matmul per feature group.
"""
import itertools
import math

import numpy as np

from ...core.windows import dilate_pad, window_count, windows


def _counts(sizes, window, strides, dilation):
    return tuple(window_count(n, k, s, window_dilation=d) for n, k, s, d in zip(sizes, window, strides, dilation))


def _half(dtype):
    # float16 (kind "f") and bfloat16 (an extension type, kind "V"); not
    # dtype.name, which NumPy computes in Python on every read.
    return dtype.itemsize == 2 and dtype.kind not in "biu"


def identity(op, dtype):
    """The value a window reduction starts from (and pads with)."""
    if op == "sum":
        return dtype.type(0)
    if dtype.kind == "b":
        return dtype.type(False)
    if dtype.kind in "iu":
        return dtype.type(np.iinfo(dtype).min)
    return dtype.type(-math.inf)


def make_impls(xp):
    # NumPy's views are made read-only by `windows`; other modules bring their own.
    strided = None if xp is np else (lambda x, shape, steps: xp.lib.stride_tricks.as_strided(x, shape, steps))

    def conv(x, w, *, strides, padding, lhs_dilation, rhs_dilation):
        g, n, c, o = x.shape[0], x.shape[1], x.shape[-1], w.shape[-1]
        nd = x.ndim - 3
        axes = tuple(range(2, 2 + nd))
        x = dilate_pad(x, axes, lhs_dilation, padding, x.dtype.type(0))
        kernel = w.shape[1:-2]
        counts = _counts(x.shape[2:-1], kernel, strides, rhs_dilation)
        out_shape = (g, n) + counts + (o,)
        if 0 in out_shape:
            return xp.zeros(out_shape, x.dtype)
        view = windows(x, axes, kernel, strides, rhs_dilation, counts, strided)   # (G, N, *out, C, *K)
        view = xp.moveaxis(view, 2 + nd, -1)                              # (G, N, *out, *K, C)
        patches = view.reshape(g, n * math.prod(counts), math.prod(kernel) * c)
        kernel_matrix = w.reshape(g, math.prod(kernel) * c, o)
        if _half(x.dtype):
            # Half precision is computed in float32 (BLAS) and rounded once on store.
            out = xp.matmul(patches.astype(np.float32), kernel_matrix.astype(np.float32)).astype(x.dtype)
        else:
            out = xp.matmul(patches, kernel_matrix)
        return out.reshape(out_shape)

    def reduce_window(x, *, op, window, strides, padding):
        axes = tuple(range(x.ndim))
        x = dilate_pad(x, axes, (1,) * x.ndim, padding, identity(op, x.dtype))
        counts = _counts(x.shape, window, strides, (1,) * x.ndim)
        if 0 in counts:
            return xp.zeros(counts, x.dtype)
        view = windows(x, axes, window, strides, (1,) * x.ndim, counts, strided)
        # Half-precision windows add in float32 and round once; narrow ints stay
        # narrow (NumPy would widen their sums to int64).
        wide = np.float32 if op == "sum" and _half(x.dtype) else x.dtype
        if math.prod(window) <= _FEW_OFFSETS:
            ufunc = xp.maximum if op == "max" else xp.add
            return _combine_offsets(view, window, ufunc, wide).astype(x.dtype, copy=False)
        tail = tuple(range(x.ndim, 2 * x.ndim))
        if op == "max":
            return xp.asarray(xp.max(view, axis=tail))
        return xp.asarray(xp.sum(view, axis=tail, dtype=wide)).astype(x.dtype, copy=False)

    return {"conv": conv, "reduce_window": reduce_window}


# Up to this many elements per window, one elementwise pass per window offset
# (over the whole output) beats NumPy's reduction over several strided axes,
# which runs an inner loop of a window's few elements per output element.
_FEW_OFFSETS = 32


def _combine_offsets(view, window, ufunc, dtype):
    """Reduce the window axes of `view` (*out, *window) with `ufunc`, one
    whole-output pass per window offset, accumulating in `dtype`."""
    out = None
    for offset in itertools.product(*(range(k) for k in window)):
        part = view[(Ellipsis,) + offset]
        if out is None:
            out = part.astype(dtype, copy=True)
        else:
            ufunc(out, part, out=out)
    return out
