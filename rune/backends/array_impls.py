"""The primitive implementations of every backend, written once against an array module.

`make_impls(xp, backend, special=..., quiet=...)` returns the table primitive
name -> fn(*raws, **params) for the NumPy-compatible module `xp`: NumPy on the
host (rune/backends/cpu/backend.py), CuPy on a GPU
(rune/backends/cuda/backend.py). Where the two modules differ, the difference
is a parameter, not a second copy:

    xp        the array module (`numpy`, `cupy`)
    backend   the Backend whose `iota`, `full` and counted `read_scalar` the
              table calls (dynamic starts held in arrays are device reads)
    special   () -> the module with `erf` and `expit` (scipy.special,
              cupyx.scipy.special), looked up on first use: SciPy is slow to import
    quiet     () -> a context manager silencing floating-point warnings (NumPy
              warns on inf and nan; CuPy never does)
    cheap_reads  whether the host reads values for free (NumPy) or each read
              waits for the device (CuPy): then scatters use no atomics and
              read one scalar, not their indices

The table of the convolution, linear algebra, sorting and Array API modules
beside the host backend join through their own `make_impls(xp)`.
"""
import contextlib
import math

import ml_dtypes
import numpy as np

from ..base import vocabulary
from . import eager_mathlib, float_semantics, ordered_reductions
from .cpu import conv, threefry
from .xp import complexfuncs, fft, linalg, mathfuncs, sorting, statistics

# float16 and bfloat16 accumulate in float32 and round once to their own dtype,
# as XLA does: summed in their own precision, 10000 bfloat16 ones give 256.
ACCUMULATOR = {np.dtype(np.float16): np.dtype(np.float32),
               np.dtype(ml_dtypes.bfloat16): np.dtype(np.float32)}

# The array-module function of each core elementwise primitive (rune/base/vocabulary.py);
# rsqrt, erf, logistic and stop_gradient, which have none, are written below.
NAMED = {op.name: op.numpy for op in vocabulary.OPS if op.numpy is not None}
# Ops that never raise floating-point flags on finite inputs skip the quiet
# guard (on NumPy it costs ~1 us a call). Multiplication can overflow to inf,
# but guarding every product costs too much.
SAFE = frozenset(op.name for op in vocabulary.OPS if op.quiet)

# Scatter modes that combine every update, repeated indices included.
COMBINE_AT = {"add": "add", "mul": "multiply", "min": "minimum", "max": "maximum"}
# How an update meets the value it lands on, for a scatter that applies them in rounds.
SCATTER_COMBINE = {"set": lambda xp, old, new: new,
                   **{mode: (lambda fn: lambda xp, old, new: getattr(xp, fn)(old, new))(fn)
                      for mode, fn in COMBINE_AT.items()}}


def numpy_quiet():
    return np.errstate(all="ignore")


def make_impls(xp, backend, *, special, quiet=contextlib.nullcontext, cheap_reads=True, matmul=None):
    """The primitive table on `xp` (see the module docstring); `matmul(a, b)`: the
    stacked matrix product dot_general ends in (default `xp.matmul`)."""
    # a given matmul takes float16/bfloat16 operands as they are and returns their dtype,
    # summed in float32 and rounded once (the host's: rune/backends/cpu/batched_matmul.py)
    low_in_place = matmul is not None
    matmul = matmul or xp.matmul
    ndarray = xp.ndarray

    def quietly(fn):
        def run(*args, **params):
            with quiet():
                return fn(*args, **params)
        return run

    def elementwise(name, fn):
        def run(*args):
            out = fn(*args)
            # NumPy ufuncs on 0-d inputs return scalars; keep arrays everywhere.
            return out if type(out) is ndarray else xp.asarray(out)
        impl = run if name in SAFE else quietly(run)
        # With an n-d operand the result is always an array: eager dispatch
        # (rune.core.trace.bind_binary) then calls the ufunc itself.
        impl.on_nd = fn if name in SAFE else impl
        return impl

    def rsqrt(x):
        return 1 / xp.sqrt(x)

    def in_special(name):
        # SciPy computes float16/bfloat16 in float64 and CuPy has no bfloat16
        # loops: widen them to float64 explicitly, the same on both.
        def run(x):
            fn = getattr(special(), name)
            return fn(x.astype(np.float64) if x.dtype.itemsize == 2 else x).astype(x.dtype)
        return run

    logistic, erf = in_special("expit"), in_special("erf")

    def by_kind(ufunc, float_rule=None, complex_rule=None):
        # One dtype test in front of the module's ufunc (this is every eager call of
        # the op): floats and complex numbers where rune defines its own rule, not
        # the module's loop (CuPy's float // is floor(x / y): 1.0 // 0.1 == 10.0;
        # NumPy's complex mul uses FMA in some loops), the ufunc for the rest.
        def run(x, y):
            if complex_rule is not None and x.dtype.kind == "c":
                with quiet():   # the parts' inf * 0 is no user's error
                    return complex_rule(x, y)
            if float_rule is not None and float_semantics.is_float(x.dtype):
                return float_rule(x, y)
            return ufunc(x, y)
        return run

    def floor_division(want):
        return lambda x, y: float_semantics.floor_divmod(xp, x, y, x.dtype, want=want)

    def stop_gradient(x):
        return x

    def select(pred, on_true, on_false):
        return xp.asarray(xp.where(pred, on_true, on_false))

    def convert(x, *, dtype):
        # rune's rules, not the module's cast (NaN and out-of-range floats to
        # integers, double rounding into 16-bit floats differ between them)
        with quiet():
            return float_semantics.cast(xp, x, dtype)

    def reducer(fn):
        def run(x, *, axes):
            # dtype= keeps int32 sums int32 (NumPy would widen them to int64).
            out = xp.asarray(fn(x, axis=axes, dtype=ACCUMULATOR.get(x.dtype, x.dtype)))
            return out.astype(x.dtype, copy=False)
        return run

    def extremum(fn):
        def run(x, *, axes):
            return xp.asarray(fn(x, axis=axes))
        return run

    def arg(fn):
        def run(x, *, axis, index_dtype):
            return xp.asarray(fn(x, axis=axis)).astype(index_dtype)
        return run

    def broadcast_to(x, *, shape):
        return xp.broadcast_to(x, shape)

    def reshape(x, *, shape):
        return xp.reshape(x, shape)

    def transpose(x, *, perm):
        return xp.transpose(x, perm)

    def slice_(x, *, starts, limits, strides):
        return x[tuple(slice(s, l, st) for s, l, st in zip(starts, limits, strides))]

    def rev(x, *, axes):
        return xp.flip(x, axes)

    def pad(x, value, *, config):
        # Filled from the 0-d `value` in place: the fill never reads it on the host
        # (NumPy's and CuPy's pad take Python scalars).
        out = xp.empty(tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, config)), x.dtype)
        out[...] = value
        out[tuple(slice(lo, lo + d) for d, (lo, _) in zip(x.shape, config))] = x
        return out

    def concatenate(*xs, axis):
        return xp.concatenate(xs, axis)

    def from_end(idx, n):
        """Indices with negative ones counted from the end (rune.nx.index_math, on raw arrays)."""
        idx = xp.asarray(idx, xp.intp)  # narrow index dtypes cannot hold idx + n
        return xp.where(idx < 0, idx + n, idx)

    def clamped(idx, n):
        """Indices as gathers see them: negative counts from the end, then clamped."""
        return xp.clip(from_end(idx, n), 0, max(n - 1, 0))

    def gather(x, idx, *, axis):
        return xp.asarray(xp.take(x, clamped(idx, x.shape[axis]), axis=axis))

    def scatter_host(x, idx, updates, *, axis, mode):
        """Updates written (or added) at `idx` along `axis`; negative indices count from
        the end and out-of-bounds updates are dropped, as in JAX (gathers clamp instead)."""
        out = xp.array(x, copy=True)
        n = x.shape[axis]
        idx = from_end(idx, n)
        keep = ((idx >= 0) & (idx < n)).reshape(-1)
        if not keep.all():
            updates = xp.asarray(updates).reshape(x.shape[:axis] + (keep.size,) + x.shape[axis + 1:])
            idx, updates = idx.reshape(-1)[keep], xp.compress(keep, updates, axis=axis)
        index = (slice(None),) * axis + (idx,)
        if mode == "set":
            out[index] = updates  # with repeated indices, the last write wins
        else:
            getattr(xp, COMBINE_AT[mode]).at(out, index, updates)  # every update combines
        return out

    def scatter_device(x, idx, updates, *, axis, mode):
        """`scatter_host` without atomics (a GPU has them for few dtypes and no
        product) and with NumPy's order: the k-th update to an index is applied
        in round k, when every target is written once, so repeats combine (or
        overwrite) in the order given, bit for bit as on the host. Dropped updates
        go to one extra slot, cut off at the end. One counted read: the rounds."""
        n = x.shape[axis]
        before, after = x.shape[:axis], x.shape[axis + 1:]
        flat = from_end(idx, n).reshape(-1)
        flat = xp.where((flat >= 0) & (flat < n), flat, n)
        m = flat.size
        ups = xp.broadcast_to(xp.asarray(updates, x.dtype), before + tuple(idx.shape) + after)
        ups = ups.reshape(before + (m,) + after)
        out = xp.concatenate([x, xp.zeros(before + (1,) + after, x.dtype)], axis)
        keep = (slice(None),) * axis + (slice(0, n),)
        if m == 0:
            return out[keep]
        order = xp.argsort(flat, kind="stable")
        ranked = flat[order]
        occurrence = xp.empty(m, order.dtype)
        occurrence[order] = xp.arange(m) - xp.searchsorted(ranked, ranked, side="left")
        combine = SCATTER_COMBINE[mode]
        for r in range(int(backend.read_scalar(xp.max(occurrence))) + 1):
            index = (slice(None),) * axis + (xp.where(occurrence == r, flat, n),)
            out[index] = combine(xp, out[index], ups)  # repeats only in the cut slot
        return out[keep]

    def start(s):
        """A start as a Python int; one held in an array is a counted device read."""
        return backend.read_scalar(s) if isinstance(s, ndarray) else int(s)

    def starts_of(x, starts, sizes):
        """Window starts as JAX takes them: negative counts from the end, then
        clamped so the window fits."""
        starts = [start(s) for s in starts]
        return tuple(int(min(max(s + d if s < 0 else s, 0), d - z))
                     for s, d, z in zip(starts, x.shape, sizes))

    def dynamic_slice(x, *starts, sizes):
        st = starts_of(x, starts, sizes)
        return x[tuple(slice(s, s + z) for s, z in zip(st, sizes))]

    def dynamic_update_slice(x, update, *starts):
        st = starts_of(x, starts, update.shape)
        out = xp.array(x, copy=True)
        out[tuple(slice(s, s + z) for s, z in zip(st, update.shape))] = update
        return out

    def dot_general(x, y, *, dims):
        (lc, rc), (lb, rb) = dims
        lfree = [i for i in range(x.ndim) if i not in lc and i not in lb]
        rfree = [i for i in range(y.ndim) if i not in rc and i not in rb]
        # (batch, free, contract) @ (batch, contract, free) is one BLAS (cuBLAS) matmul.
        xt = xp.transpose(x, list(lb) + lfree + list(lc))
        yt = xp.transpose(y, list(rb) + list(rc) + rfree)
        nb = len(lb)
        bshape = xt.shape[:nb]
        lshape, rshape = xt.shape[nb:nb + len(lfree)], yt.shape[nb + len(rc):]
        k = math.prod(xt.shape[nb + len(lfree):])
        m, n = math.prod(lshape), math.prod(rshape)
        acc = ACCUMULATOR.get(x.dtype, x.dtype)  # NumPy's bfloat16 matmul returns float32
        if k == 1 and x.dtype.kind != "c":
            # one product per point (outer products: per-example gradients): the same
            # values as a one-deep matmul, without a BLAS call per matrix
            with quiet():
                out = xp.multiply(xt.reshape(bshape + (m, 1)).astype(acc, copy=False),
                                  yt.reshape(bshape + (1, n)).astype(acc, copy=False))
        else:
            cast = acc if not low_in_place else x.dtype
            out = matmul(xt.reshape(bshape + (m, k)).astype(cast, copy=False),
                         yt.reshape(bshape + (k, n)).astype(cast, copy=False))
        return out.astype(x.dtype, copy=False).reshape(bshape + lshape + rshape)

    def iota(start, *, shape, dimension, device):
        out = backend.iota(shape, start.dtype, dimension, device)
        if cheap_reads and not start:  # skipping the add would cost a device read elsewhere
            return out
        return out + start

    def full(value, *, shape, device):
        return backend.full(shape, value, value.dtype, device)

    def random_bits(key, *, shape, width):
        return threefry.random_bits(xp.asarray(key, xp.uint32), shape, width, xp=xp)

    named = {name: getattr(xp, fn) for name, fn in NAMED.items()}
    complex_rules = complexfuncs.arithmetic(xp)   # (abs is hypot of the parts: complexfuncs too)
    named.update(rsqrt=rsqrt, erf=erf, logistic=logistic,
                 floordiv=by_kind(xp.floor_divide, float_rule=floor_division("floordiv")),
                 rem=by_kind(xp.remainder, float_rule=floor_division("rem")),
                 mul=by_kind(named["mul"], complex_rule=complex_rules["mul"]),
                 div=by_kind(named["div"], complex_rule=complex_rules["div"]))
    impls = {name: elementwise(name, fn) for name, fn in named.items()}
    impls.update({
        "stop_gradient": stop_gradient, "select": select, "convert": convert,
        "reduce_sum": reducer(xp.sum), "reduce_max": extremum(xp.max),
        "reduce_min": extremum(xp.min), "reduce_prod": reducer(xp.prod),
        "argmax": arg(xp.argmax), "argmin": arg(xp.argmin),
        "broadcast_to": broadcast_to, "reshape": reshape, "transpose": transpose,
        "slice": slice_, "rev": rev, "pad": pad, "concatenate": concatenate,
        "gather": gather, "scatter": scatter_host if cheap_reads else scatter_device,
        "dynamic_slice": dynamic_slice,
        "dynamic_update_slice": dynamic_update_slice, "dot_general": dot_general,
        "random_bits": random_bits, "iota": iota, "full": full,
    })
    # Convolution and pooling, the Array API functions, sorting, linear algebra:
    # each in its own module.
    for module in (conv, mathfuncs, sorting, linalg, complexfuncs, fft, statistics):
        impls.update(module.make_impls(xp))
    # float sums and products in the kernels' order (eager == jit at any size)
    impls.update(ordered_reductions.wrap(xp, impls))
    # float32 transcendental functions from rune's math library, as the kernels compute them
    impls.update(eager_mathlib.wrap(xp, impls))
    return impls
