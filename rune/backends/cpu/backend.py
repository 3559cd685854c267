"""The host backend: NumPy arrays and an implementation per primitive.

`BACKEND` is the `rune.backends.base.Backend` of every host device (the
protocol is written down there). `IMPLS` maps primitive names to functions of
raw NumPy values; every host device runs the same functions, and plans run
them for stretches on the host. The module-level `to_host`, `from_host`,
`stack` and `empty` are the backend's own methods, kept for older callers.
"""
import functools

import ml_dtypes
import numpy as np

from ..base import Backend
from . import compiler as c_compiler, threefry

# float16 and bfloat16 accumulate in float32 and round once to their own dtype,
# as XLA does: summed in their own precision, 10000 bfloat16 ones give 256.
_ACCUMULATOR = {np.dtype(np.float16): np.dtype(np.float32),
                np.dtype(ml_dtypes.bfloat16): np.dtype(np.float32)}


def to_host(raw):
    return raw


def from_host(host, device):
    # A move between distinct host devices is a real copy, so that no two
    # devices ever share a buffer.
    return np.array(host, copy=True)


def stack(rows, aval):
    """Rows of a loop's output stacked along a new leading axis."""
    return np.stack(rows)


def empty(aval):
    """The stacked output of a loop that ran zero times."""
    return np.empty((0,) + aval.shape[1:], aval.dtype)


def _quiet(fn):
    """Run `fn` without NumPy's floating-point warnings: inf and nan are values here."""
    def run(*args, **params):
        with np.errstate(all="ignore"):
            return fn(*args, **params)
    return run


def _rsqrt(x):
    return 1 / np.sqrt(x)


@functools.cache
def _special():
    # SciPy takes a fifth of a second to import: only pay for it when erf or
    # sigmoid is first used.
    from scipy import special
    return special


def _logistic(x):
    return _special().expit(x).astype(x.dtype)  # SciPy computes float16/bfloat16 in float64


def _erf(x):
    return _special().erf(x).astype(x.dtype)


_NUMPY_UNARY = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1,
    "sqrt": np.sqrt, "rsqrt": _rsqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "erf": _erf, "logistic": _logistic, "floor": np.floor,
    "ceil": np.ceil, "round": np.round, "sign": np.sign, "abs": np.abs, "not": np.invert,
    "isnan": np.isnan, "isfinite": np.isfinite,
}
_NUMPY_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": np.floor_divide, "rem": np.remainder, "pow": np.power, "max": np.maximum,
    "min": np.minimum, "atan2": np.arctan2, "and": np.bitwise_and, "or": np.bitwise_or,
    "xor": np.bitwise_xor, "shift_left": np.left_shift, "shift_right": np.right_shift,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
# Ops that never raise floating-point flags on finite inputs skip the errstate
# guard (it costs ~1 us a call). Multiplication can overflow to inf, but guarding
# every product costs too much.
_SAFE = {"neg", "add", "sub", "mul", "sin", "cos", "tan", "tanh", "atan", "erf", "logistic", "max", "min", "and", "or", "xor", "not", "eq", "ne", "lt", "le",
         "gt", "ge", "isnan", "isfinite", "abs", "sign", "floor", "ceil", "shift_left",
         "shift_right"}


def _elementwise(name, fn):
    def run(*args):
        out = fn(*args)
        # ufuncs on 0-d inputs return NumPy scalars; keep arrays everywhere.
        return out if type(out) is np.ndarray else np.asarray(out)
    return run if name in _SAFE else _quiet(run)


def _stop_gradient(x):
    return x


def _select(pred, on_true, on_false):
    return np.asarray(np.where(pred, on_true, on_false))


def _convert(x, *, dtype):
    if dtype.kind in "iu" and x.dtype.kind == "f":
        with np.errstate(all="ignore"):  # nan/inf to int is undefined; do not warn
            return np.asarray(x).astype(dtype)
    return np.asarray(x).astype(dtype)


def _reducer(fn):
    def run(x, *, axes):
        # dtype= keeps int32 sums int32 (NumPy would widen them to int64).
        out = np.asarray(fn(x, axis=axes, dtype=_ACCUMULATOR.get(x.dtype, x.dtype)))
        return out.astype(x.dtype, copy=False)
    return run


def _extremum(fn):
    def run(x, *, axes):
        return np.asarray(fn(x, axis=axes))
    return run


def _arg(fn):
    def run(x, *, axis, index_dtype):
        return np.asarray(fn(x, axis=axis)).astype(index_dtype)
    return run


def _broadcast_to(x, *, shape):
    return np.broadcast_to(x, shape)


def _reshape(x, *, shape):
    return np.reshape(x, shape)


def _transpose(x, *, perm):
    return np.transpose(x, perm)


def _slice(x, *, starts, limits, strides):
    return x[tuple(slice(s, l, st) for s, l, st in zip(starts, limits, strides))]


def _rev(x, *, axes):
    return np.flip(x, axes)


def _pad(x, value, *, config):
    return np.pad(x, config, constant_values=value)


def _concatenate(*xs, axis):
    return np.concatenate(xs, axis)


def _from_end(idx, n):
    """Indices with negative ones counted from the end (rune.nx.indices, in NumPy)."""
    idx = np.asarray(idx, np.intp)  # narrow index dtypes cannot hold idx + n
    return np.where(idx < 0, idx + n, idx)


def _clamped(idx, n):
    """Indices as gathers see them: negative counts from the end, then clamped."""
    return np.clip(_from_end(idx, n), 0, max(n - 1, 0))


def _gather(x, idx, *, axis):
    return np.asarray(np.take(x, _clamped(idx, x.shape[axis]), axis=axis))


def _scatter(x, idx, updates, *, axis, mode):
    """Updates written (or added) at `idx` along `axis`; negative indices count from
    the end and out-of-bounds updates are dropped, as in JAX (gathers clamp instead)."""
    out = np.array(x, copy=True)
    n = x.shape[axis]
    idx = _from_end(idx, n)
    keep = ((idx >= 0) & (idx < n)).reshape(-1)
    if not keep.all():
        updates = np.asarray(updates).reshape(x.shape[:axis] + (keep.size,) + x.shape[axis + 1:])
        idx, updates = idx.reshape(-1)[keep], np.compress(keep, updates, axis=axis)
    index = (slice(None),) * axis + (idx,)
    if mode == "set":
        out[index] = updates  # with repeated indices, the last write wins
    else:
        _COMBINE_AT[mode].at(out, index, updates)  # every update combines, repeats included
    return out


_COMBINE_AT = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _start(s):
    """A start as a Python int; one held in an array is a counted device read."""
    return BACKEND.read_scalar(s) if isinstance(s, np.ndarray) else int(s)


def _starts(x, starts, sizes):
    """Window starts as JAX takes them: negative counts from the end, then clamped
    so the window fits."""
    starts = [_start(s) for s in starts]
    return tuple(int(min(max(s + d if s < 0 else s, 0), d - z))
                 for s, d, z in zip(starts, x.shape, sizes))


def _dynamic_slice(x, *starts, sizes):
    st = _starts(x, starts, sizes)
    return x[tuple(slice(s, s + z) for s, z in zip(st, sizes))]


def _dynamic_update_slice(x, update, *starts):
    st = _starts(x, starts, update.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + z) for s, z in zip(st, update.shape))] = update
    return out


def _dot_general(x, y, *, dims):
    (lc, rc), (lb, rb) = dims
    lfree = [i for i in range(x.ndim) if i not in lc and i not in lb]
    rfree = [i for i in range(y.ndim) if i not in rc and i not in rb]
    # (batch, free, contract) @ (batch, contract, free) is one BLAS-backed matmul.
    xt = np.transpose(x, list(lb) + lfree + list(lc))
    yt = np.transpose(y, list(rb) + list(rc) + rfree)
    nb = len(lb)
    bshape = xt.shape[:nb]
    lshape, rshape = xt.shape[nb:nb + len(lfree)], yt.shape[nb + len(rc):]
    k = int(np.prod(xt.shape[nb + len(lfree):], dtype=np.int64))
    m, n = int(np.prod(lshape, dtype=np.int64)), int(np.prod(rshape, dtype=np.int64))
    acc = _ACCUMULATOR.get(x.dtype, x.dtype)  # NumPy's bfloat16 matmul returns float32
    out = np.matmul(xt.reshape(bshape + (m, k)).astype(acc, copy=False),
                    yt.reshape(bshape + (k, n)).astype(acc, copy=False))
    return out.astype(x.dtype, copy=False).reshape(bshape + lshape + rshape)


def _iota(start, *, shape, dimension, device):
    out = BACKEND.iota(shape, start.dtype, dimension, device)
    return out + start if start else out


def _full(value, *, shape, device):
    return BACKEND.full(shape, value, value.dtype, device)


def _random_bits(key, *, shape, width):
    return threefry.random_bits(np.asarray(key, np.uint32), shape, width)


IMPLS = {name: _elementwise(name, fn) for name, fn in {**_NUMPY_UNARY, **_NUMPY_BINARY}.items()}
IMPLS.update({
    "stop_gradient": _stop_gradient, "select": _select, "convert": _convert,
    "reduce_sum": _reducer(np.sum), "reduce_max": _extremum(np.max),
    "reduce_min": _extremum(np.min), "reduce_prod": _reducer(np.prod),
    "argmax": _arg(np.argmax), "argmin": _arg(np.argmin),
    "broadcast_to": _broadcast_to, "reshape": _reshape, "transpose": _transpose,
    "slice": _slice, "rev": _rev, "pad": _pad, "concatenate": _concatenate,
    "gather": _gather, "scatter": _scatter, "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice, "dot_general": _dot_general,
    "random_bits": _random_bits, "iota": _iota, "full": _full,
})

# Convolution and pooling: library calls, in their own module.
from .conv import IMPLS as _CONV_IMPLS  # noqa: E402
IMPLS.update(_CONV_IMPLS)

# The Array API additions (elementwise functions, sorting, ...): each in its own module.
from .mathfuncs import IMPLS as _MATH_IMPLS  # noqa: E402
IMPLS.update(_MATH_IMPLS)
from .sorting import IMPLS as _SORT_IMPLS  # noqa: E402
IMPLS.update(_SORT_IMPLS)
from .linalg import IMPLS as _LINALG_IMPLS  # noqa: E402
IMPLS.update(_LINALG_IMPLS)
from .complexfuncs import IMPLS as _COMPLEX_IMPLS  # noqa: E402
IMPLS.update(_COMPLEX_IMPLS)
from .fft import IMPLS as _FFT_IMPLS  # noqa: E402
IMPLS.update(_FFT_IMPLS)

class CpuBackend(Backend):
    """Every host device: NumPy buffers; host devices are distinct places that
    happen to share memory, so a copy between them is a real copy."""
    platform = "cpu"
    IMPLS = IMPLS
    library = {"dot_general": _dot_general, **_CONV_IMPLS}

    def to_host(self, raw):
        return to_host(raw)

    def from_host(self, host, device):
        return from_host(host, device)

    def copy(self, raw, src, dst):
        return np.array(raw, copy=True)

    def from_foreign(self, obj, device):
        """NumPy arrays and scalars, host DLPack producers, and CuPy arrays
        (copied off their GPU); anything else NumPy can read."""
        if isinstance(obj, (np.ndarray, np.generic)):
            return np.asarray(obj)
        if hasattr(obj, "__cuda_array_interface__") and hasattr(obj, "get"):
            return obj.get()  # a CuPy array: its host copy
        if hasattr(obj, "__dlpack__") and _is_host_dlpack(obj):
            return np.from_dlpack(obj)
        return np.asarray(obj)

    def full(self, shape, value, dtype, device):
        return np.full(shape, value, dtype)

    def iota(self, shape, dtype, dimension, device):
        line = np.arange(shape[dimension], dtype=dtype)
        return np.broadcast_to(line.reshape((-1,) + (1,) * (len(shape) - dimension - 1)), shape)

    def empty(self, aval):
        return empty(aval)

    def stack(self, rows, aval):
        return stack(rows, aval)

    def compiler(self):
        """The C compiler stretches are built with (`RUNE_CC`, else cc/gcc/clang on
        PATH), or None: then plans run their stretches on NumPy."""
        return c_compiler.find()

    def compile(self, compiler, prelude, units):
        """Rendered C units (name, source) built into shared libraries (batched,
        through the disk cache) and loaded with ctypes: one driver function each."""
        return c_compiler.build(compiler, prelude, units)


def _is_host_dlpack(obj):
    try:
        return obj.__dlpack_device__()[0] == 1  # kDLCPU
    except Exception:  # a producer that cannot say where it lives is not read as host memory
        return False


BACKEND = CpuBackend()
