"""`conv` and `reduce_window` (rune/nx/convolution.py) on an array module `xp`
(NumPy with BLAS on the host, CuPy with cuBLAS on a GPU: CuPy 14 dropped cuDNN).

Both read windows through a strided view of the padded (and dilated) input,
without copying it: `reduce_window` combines the view's slices at each window
offset (a pooling window has few), or reduces the view over its window axes
when windows are large; `conv` flattens it into patches (im2col, the one copy)
and multiplies them by the kernel with one BLAS matmul per feature group.

On the host, a 2-d float32/float64 conv with at most 128 output channels and
enough work runs instead as a direct loop nest compiled for its geometry
(rune's C compiler, once per geometry, through the disk cache): each output
pixel's channels are a few vector registers, a block of pixels along a row
shares every kernel load, zero padding is skipped rather than copied, and no
patch matrix is written. A kernel's cotangent (rune/nx/convolution.py: the input
seen with images as channels, the output's cotangent as the kernel) gets its
own loop that reads both operands in their own layouts, without the
transposing copies. At a small CNN's sizes that is 2-4x faster than im2col
and BLAS; without a C compiler every conv stays on BLAS.
"""
import ctypes
import functools
import hashlib
import itertools
import math
import threading

import numpy as np

from ...base.tuning import (DIRECT_CONV_ACCUMULATORS, DIRECT_CONV_KERNEL_BYTES, DIRECT_CONV_MIN_WORK,
                             POOL_FEW_OFFSETS)
from ...codegen.windows import dilate_pad, window_count, windows
from ...errors import CompileError
from .address import address


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


def _host_matmul(a, b):
    """np.matmul of (G, M, K) patches by (G, K, N) kernels, its bits independent of the
    thread count (rune/backends/cpu/batched_matmul.py); the direct loops above call no
    BLAS and run on one thread."""
    from . import batched_matmul, compiler as c_compiler   # (as _library's: loaded with the backend)
    return batched_matmul.matmul(a, b, c_compiler.find())


def make_impls(xp):
    # NumPy's views are made read-only by `windows`; other modules bring their own.
    strided = None if xp is np else (lambda x, shape, steps: xp.lib.stride_tricks.as_strided(x, shape, steps))
    matmul = _host_matmul if xp is np else xp.matmul

    def conv(x, w, *, strides, padding, lhs_dilation, rhs_dilation):
        g, n, c, o = x.shape[0], x.shape[1], x.shape[-1], w.shape[-1]
        nd = x.ndim - 3
        axes = tuple(range(2, 2 + nd))
        if xp is np and nd == 2 and not x.flags.c_contiguous and np.swapaxes(x, 1, -1).flags.c_contiguous:
            direct = _direct_conv_channels_outer(x, w, strides, padding, lhs_dilation, rhs_dilation)
            if direct is not None:
                return direct
        if xp is np and nd == 2:
            direct = _direct_conv(x, w, strides, padding, lhs_dilation, rhs_dilation)
            if direct is not None:
                return direct
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
        if _half(x.dtype) and xp is not np:
            # Half precision is computed in float32 (BLAS) and rounded once on store (the
            # host's matmul takes float16/bfloat16 as they are and does the same itself).
            out = matmul(patches.astype(np.float32), kernel_matrix.astype(np.float32)).astype(x.dtype)
        else:
            out = matmul(patches, kernel_matrix)
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


# ---------------------------------------------------------------- direct convs

# (rune/base/tuning.py says why each)
DIRECT_MIN_WORK = DIRECT_CONV_MIN_WORK
_DIRECT_ACCUMULATORS = DIRECT_CONV_ACCUMULATORS
_DIRECT_KERNEL_BYTES = DIRECT_CONV_KERNEL_BYTES
_DIRECT_BUILD_LOCK = threading.Lock()
_DIRECT_TYPES = {np.dtype(np.float32): ("float", "fmaf"), np.dtype(np.float64): ("double", "fma")}


def _direct_counts(x, w, strides, padding, lhs_dilation, rhs_dilation):
    """The output's spatial sizes when a direct loop pays for this conv (its dtypes,
    at most the accumulators it keeps in registers, enough work), else None."""
    if x.dtype not in _DIRECT_TYPES or w.dtype != x.dtype:
        return None
    kernel = w.shape[1:3]
    counts = tuple(window_count(s, k, st, lo, hi, ld, d) for s, k, st, (lo, hi), ld, d in
                   zip(x.shape[2:4], kernel, strides, padding, lhs_dilation, rhs_dilation))
    work = x.shape[0] * x.shape[1] * math.prod(counts) * w.shape[-1] * x.shape[-1] * math.prod(kernel)
    if w.shape[-1] > _DIRECT_ACCUMULATORS // 2 or 0 in counts or work < DIRECT_MIN_WORK:
        return None
    return counts


def _direct_conv(x, w, strides, padding, lhs_dilation, dilation):
    """conv of x (G, N, H, W, C) by w (G, KH, KW, C, O) as a compiled direct loop
    nest, zero padding read as such (no padded copy), or None where it does not
    apply (BLAS then)."""
    counts = _direct_counts(x, w, strides, padding, lhs_dilation, dilation)
    if counts is None or w[0].nbytes > _DIRECT_KERNEL_BYTES:
        return None
    g, n, c, o = x.shape[0], x.shape[1], x.shape[-1], w.shape[-1]
    kernel = w.shape[1:3]
    if any(d != 1 for d in lhs_dilation) or any(lo < 0 or hi < 0 for lo, hi in padding):
        x = dilate_pad(x, (2, 3), lhs_dilation, padding, x.dtype.type(0))   # holes and crops: a copy
        padding = ((0, 0), (0, 0))
    fn = _direct_kernel("images_outer", x.dtype, n, x.shape[2:4], c, kernel, o, counts, strides, dilation,
                        tuple(lo for lo, _ in padding))
    if fn is None:
        return None
    return _run_direct(fn, np.ascontiguousarray(x), np.ascontiguousarray(w), (g, n) + counts + (o,))


def _direct_conv_channels_outer(x, w, strides, padding, lhs_dilation, rhs_dilation):
    """conv of an x (G, B, H, W, C) that is a view of an array laid out (G, C, H, W, B),
    by a w (G, KH, KW, C, O) (read as laid out (G, C, KH, KW, O) where it is so):
    a kernel's cotangent, the input seen with images as channels and the output's
    cotangent as the kernel. The direct loop reads both in their own layouts (no
    transposing copy, no patches); None where it does not apply."""
    counts = _direct_counts(x, w, strides, padding, lhs_dilation, rhs_dilation)
    if counts is None:
        return None
    g, b, c, o = x.shape[0], x.shape[1], x.shape[-1], w.shape[-1]
    kernel = w.shape[1:3]
    xt = dilate_pad(np.swapaxes(x, 1, -1), (2, 3), lhs_dilation, padding, x.dtype.type(0))   # (G, C, H, W, B)
    fn = _direct_kernel("channels_outer", x.dtype, b, xt.shape[2:4], c, kernel, o, counts, strides, rhs_dilation)
    if fn is None:
        return None
    wt = np.moveaxis(w, -2, 1)                                                          # (G, C, KH, KW, O)
    return _run_direct(fn, np.ascontiguousarray(xt), np.ascontiguousarray(wt), (g, b) + counts + (o,))


def _run_direct(fn, x, w, out_shape):
    """fn on each feature group of contiguous x and w; None if its C did not build
    (the conv then runs on BLAS, as without a compiler)."""
    out = np.empty(out_shape, x.dtype)
    ptrs = (ctypes.c_void_p * 3)()
    for i in range(out_shape[0]):
        ptrs[0], ptrs[1], ptrs[2] = address(x[i]), address(w[i]), address(out[i])
        try:
            fn(ptrs)
        except CompileError:
            return None
    return out


@functools.lru_cache(maxsize=None)
def _direct_kernel(layout, dtype, n, spatial, c, kernel, o, counts, strides, dilation, low=(0, 0)):
    """The compiled entry (void **: x, w, out) of one conv geometry, or None
    without a working C compiler."""
    from . import compiler as c_compiler
    try:
        cc = c_compiler.find()
    except CompileError:   # a compiler named but not runnable: BLAS, as without one
        return None
    if cc is None:
        return None
    source = _direct_source if layout == "images_outer" else _direct_channels_outer_source
    text = source("@NAME@", dtype, n, spatial, c, kernel, o, counts, strides, dilation, low)
    name = "rn_conv_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    with _DIRECT_BUILD_LOCK:
        (fn,) = c_compiler.build(cc, "#include <math.h>\n", [(name, text.replace("@NAME@", name), [name])])
    return fn


def _direct_source(name, dtype, n, spatial, c, kernel, o, counts, strides, dilation, low):
    """C for out[b, i, j, :] = sum over (kh, kw, ch) of x[b, i*sh + kh*dh - ph, j*sw + kw*dw - pw, ch] * w[kh, kw, ch, :],
    x read as 0 outside its (H, W) (the padding).

    Output channels are the vectorised inner loop; `block` pixels along a row are
    computed together, so each kernel row loaded serves all of them (a row's last
    pixels, fewer than a block, one at a time). A kernel row that reaches into the
    padding is skipped, a column that does for some pixels of a block is read
    with a guard. fma keeps one rounding per multiply-add, as BLAS does."""
    t, fma = _DIRECT_TYPES[dtype]
    (h, wd), (kh, kw), (ho, wo), (sh, sw), (dh, dw), (ph, pw) = spatial, kernel, counts, strides, dilation, low
    block = max(1, min(8, wo, _DIRECT_ACCUMULATORS // o))

    def taps(p, load):
        return f"""
          for (int ch = 0; ch < {c}; ch++) {{
            {t} xv[{p}];
            for (int p = 0; p < {p}; p++) xv[p] = {load};
            #pragma omp simd
            for (int q = 0; q < {o}; q++) {{
              const {t} wv = wr[ch * {o} + q];
              for (int p = 0; p < {p}; p++) acc[p][q] = {fma}(xv[p], wv, acc[p][q]);
            }}
          }}"""

    def pixels(p, first):
        inside = f"(iw + p * {sw} >= 0 && iw + p * {sw} < {wd})"
        return f"""
      {t} acc[{p}][{o}];
      for (int p = 0; p < {p}; p++) for (int q = 0; q < {o}; q++) acc[p][q] = 0;
      for (int ki = 0; ki < {kh}; ki++) {{
        const long ih = (long)oh * {sh} + ki * {dh} - {ph};
        if (ih < 0 || ih >= {h}) continue;
        for (int kj = 0; kj < {kw}; kj++) {{
          const long iw = (long){first} * {sw} + kj * {dw} - {pw};
          const {t} *wr = w + (ki * {kw} + kj) * {c * o};
          const long row = ((b * {h} + ih) * {wd}) * {c};
          if (iw >= 0 && iw + {(p - 1) * sw} < {wd}) {{
            const {t} *xr = x + row + iw * {c};{taps(p, f"xr[p * {sw * c} + ch]")}
          }} else {{{taps(p, f"{inside} ? x[row + (iw + p * {sw}) * {c} + ch] : 0")}
          }}
        }}
      }}
      for (int p = 0; p < {p}; p++) for (int q = 0; q < {o}; q++)
        out[((b * {ho} + oh) * {wo} + {first} + p) * {o} + q] = acc[p][q];"""

    return f"""
void {name}_run(void **args) {{
  const {t} *restrict x = (const {t} *)args[0];
  const {t} *restrict w = (const {t} *)args[1];
  {t} *restrict out = ({t} *)args[2];
  for (long b = 0; b < {n}; b++)
  for (int oh = 0; oh < {ho}; oh++) {{
    int ow0 = 0;
    for (; ow0 + {block} <= {wo}; ow0 += {block}) {{{pixels(block, "ow0")}
    }}
    for (int ow = ow0; ow < {wo}; ow++) {{{pixels(1, "ow")}
    }}
  }}
}}
"""


def _direct_channels_outer_source(name, dtype, n, padded, c, kernel, o, counts, strides, dilation, low):
    """C for out[b, i, j, :] = sum over (ch, ki, kj) of x[ch, i*sh + ki*dh, j*sw + kj*dw, b] * w[ch, ki, kj, :]
    (x laid out (C, H, W, B), padded: `low` is unused; w (C, KH, KW, O); out (B, HO, WO, O)).

    Output channels are the vectorised inner loop; a block of consecutive b
    (adjacent in x), or of positions j where there are few b, is computed
    together, so each row of w loaded serves all of them."""
    t, fma = _DIRECT_TYPES[dtype]
    (hp, wp), (kh, kw), (ho, wo), (sh, sw), (dh, dw) = padded, kernel, counts, strides, dilation
    by_images = n >= 4 or wo == 1
    block = max(1, min(8, n if by_images else wo, _DIRECT_ACCUMULATORS // o))

    def outputs(p, b, j, step, out_b, out_j):
        return f"""
      {t} acc[{p}][{o}];
      for (int p = 0; p < {p}; p++) for (int q = 0; q < {o}; q++) acc[p][q] = 0;
      for (long ch = 0; ch < {c}; ch++)
      for (int ki = 0; ki < {kh}; ki++)
      for (int kj = 0; kj < {kw}; kj++) {{
        const {t} *wr = w + ((ch * {kh} + ki) * {kw} + kj) * {o};
        const {t} *xr = x + ((ch * {hp} + i * {sh} + ki * {dh}) * {wp} + {j} * {sw} + kj * {dw}) * {n} + {b};
        {t} xv[{p}];
        for (int p = 0; p < {p}; p++) xv[p] = xr[p * {step}];
        #pragma omp simd
        for (int q = 0; q < {o}; q++) {{
          const {t} wv = wr[q];
          for (int p = 0; p < {p}; p++) acc[p][q] = {fma}(xv[p], wv, acc[p][q]);
        }}
      }}
      for (int p = 0; p < {p}; p++) for (int q = 0; q < {o}; q++)
        out[((({out_b}) * {ho} + i) * {wo} + {out_j}) * {o} + q] = acc[p][q];"""

    if by_images:
        loops = f"""
  for (int i = 0; i < {ho}; i++)
  for (int j = 0; j < {wo}; j++) {{
    long b0 = 0;
    for (; b0 + {block} <= {n}; b0 += {block}) {{{outputs(block, "b0", "j", 1, "b0 + p", "j")}
    }}
    for (long b = b0; b < {n}; b++) {{{outputs(1, "b", "j", 1, "b", "j")}
    }}
  }}"""
    else:
        loops = f"""
  for (long b = 0; b < {n}; b++)
  for (int i = 0; i < {ho}; i++) {{
    int j0 = 0;
    for (; j0 + {block} <= {wo}; j0 += {block}) {{{outputs(block, "b", "j0", sw * n, "b", "j0 + p")}
    }}
    for (int j = j0; j < {wo}; j++) {{{outputs(1, "b", "j", sw * n, "b", "j")}
    }}
  }}"""
    return f"""
void {name}_run(void **args) {{
  const {t} *restrict x = (const {t} *)args[0];
  const {t} *restrict w = (const {t} *)args[1];
  {t} *restrict out = ({t} *)args[2];{loops}
}}
"""


# Up to this many elements per window, one elementwise pass per window offset
# (over the whole output) beats NumPy's reduction over several strided axes,
# which runs an inner loop of a window's few elements per output element.
_FEW_OFFSETS = POOL_FEW_OFFSETS


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
