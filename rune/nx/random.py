"""Counter-based random numbers from explicit keys (Threefry-2x32, JAX's argument order).

A key is a uint32 array of shape (2,). Bits are a pure function of the key and
each element's position, so every device draws the same numbers.

split(key, num): key j is words 2j and 2j+1 of random_bits(key, (num, 2), 32).
fold_in(key, data): random_bits(key ^ (data ^ 0x5BD1E995, data * 0x9E3779B9 +
0x7F4A7C15), (2,), 32); the constants keep its keys apart from split's.
"""
import math

import numpy as np

from ..core.aval import normalize_shape
from ..core.prims import P
from ..core.trace import Tracer, bind
from ..errors import DTypeError, ShapeError, UsageError
from . import dtypes as dt
from . import ops
from .array import Array, from_host
from .indexing import getitem

_MANTISSA = {dt.float16: 11, dt.bfloat16: 8, dt.float32: 24, dt.float64: 53}


def key(seed, device=None):
    """A key made from an integer seed: (high 32 bits, low 32 bits) of the seed
    taken modulo 2**64, so any Python int is a seed (as in JAX). The seed may be
    traced (a key per lane under vmap, a seed argument under jit)."""
    if isinstance(seed, (Array, Tracer)):
        if seed.dtype.kind not in "iu" or seed.shape != ():
            raise UsageError(f"random.key: the seed must be an integer scalar, got {seed.aval.describe()}")
        wide = ops.astype(seed, dt.int64)
        high = ops.astype(ops.bitwise_and(ops.right_shift(wide, np.int64(32)), np.int64(0xFFFFFFFF)), dt.uint32)
        low = ops.astype(ops.bitwise_and(wide, np.int64(0xFFFFFFFF)), dt.uint32)
        out = ops.stack([high, low])
        return out if device is None else ops.asarray(out, device=device)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise UsageError(f"random.key: the seed must be an integer, got {type(seed).__name__} {seed!r}")
    seed = int(seed)
    return from_host(np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], np.uint32), device)


def _check_key(k, name):
    k = ops.asarray(k)
    if k.shape != (2,) or k.dtype != dt.uint32:
        raise ShapeError(f"random.{name}: expected a key (uint32 array of shape (2,)), got {k.aval.describe()}")
    return k


def _bits(k, shape, width):
    return bind(P["random_bits"], k, shape=tuple(shape), width=width)


def split(key, num=2):
    """`num` new independent keys, stacked into shape (num, 2)."""
    key = _check_key(key, "split")
    return _bits(key, _shape((num, 2), "split"), 32)


def fold_in(key, data):
    """A new key derived from `key` and the integer `data`."""
    key = _check_key(key, "fold_in")
    data = ops.constant_like(data, key, dt.uint32) if not isinstance(data, int) else \
        ops.constant_like(np.uint32(data & 0xFFFFFFFF), key)
    # The constants keep fold_in's keys apart from split's (fold_in(k, 0) != split(k)[0]).
    mixed = ops.bitwise_xor(key, ops.stack([ops.bitwise_xor(data, np.uint32(0x5BD1E995)),
                                            ops.add(ops.multiply(data, np.uint32(0x9E3779B9)),
                                                    np.uint32(0x7F4A7C15))]))
    return _bits(mixed, (2,), 32)


def _shape(shape, name):
    return normalize_shape(f"random.{name}", shape)


def _float_dtype(dtype, name):
    """The dtype of a float-only sampler, or a DTypeError naming the sampler."""
    dtype = dt.dtype(dtype)
    if not dt.is_float(dtype):
        raise DTypeError(f"random.{name}: dtype must be a float (float16, bfloat16, float32 or "
                         f"float64), got {dtype.name}")
    return dtype


def uniform(key, shape=(), dtype=dt.float32, minval=0.0, maxval=1.0):
    """Floats uniform in [minval, maxval)."""
    key = _check_key(key, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    width = 64 if dtype == dt.float64 else 32
    m = _MANTISSA[dtype]
    bits = ops.right_shift(_bits(key, _shape(shape, "uniform"), width), np.dtype(f"uint{width}").type(width - m))
    unit = ops.multiply(ops.astype(bits, dtype), dtype.type(2.0 ** -m))
    minval, maxval = ops.constant_like(minval, key, dtype), ops.constant_like(maxval, key, dtype)
    return ops.add(ops.multiply(unit, ops.subtract(maxval, minval)), minval)


def normal(key, shape=(), dtype=dt.float32):
    """Standard normal floats (Box-Muller on two uniform draws)."""
    key = _check_key(key, "normal")
    dtype = _float_dtype(dtype, "normal")
    shape = _shape(shape, "normal")
    work = dt.float64 if dtype == dt.float64 else dt.float32
    u = uniform(key, (2,) + shape, work)
    u1 = ops.subtract(work.type(1.0), getitem(u, 0))  # in (0, 1]: log is finite
    radius = ops.sqrt(ops.multiply(work.type(-2.0), ops.log(u1)))
    angle = ops.multiply(work.type(2 * math.pi), getitem(u, 1))
    return ops.astype(ops.multiply(radius, ops.cos(angle)), dtype)


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability `p`."""
    key = _check_key(key, "bernoulli")
    if shape is None:
        shape = ops.asarray(p).shape if isinstance(p, (Array, Tracer, np.ndarray)) else ()
    shape = _shape(shape, "bernoulli")
    return ops.less(uniform(key, shape), p)


def randint(key, shape, minval, maxval, dtype=dt.int32):
    """Integers uniform in [minval, maxval)."""
    key = _check_key(key, "randint")
    dtype = dt.dtype(dtype)
    if dtype.kind not in "iu":
        raise DTypeError(f"random.randint: dtype must be an integer type, got {dtype.name}")
    minval = ops.constant_like(minval, key, dtype)
    maxval = ops.constant_like(maxval, key, dtype)
    # The span maxval - minval can exceed the dtype (e.g. the whole int32 range):
    # compute it as unsigned 64-bit, where the wrap-around difference is exact.
    lo, hi = ops.astype(minval, dt.uint64), ops.astype(maxval, dt.uint64)
    span = ops.subtract(hi, lo)
    offset = ops.remainder(_bits(key, _shape(shape, "randint"), 64), ops.maximum(span, np.uint64(1)))
    drawn = ops.astype(ops.add(lo, offset), dtype)
    # An empty range (maxval <= minval) gives minval, as in JAX.
    return ops.where(ops.less(minval, maxval), drawn, minval)


def _ascending(keys):
    """`keys` (its last axis 2**k long) sorted along the last axis.

    rune has no sort primitive, so this is a bitonic sorting network of
    elementwise min/max on reshaped views: O(n log^2 n) work in O(log^2 n)
    steps, and it runs under every transformation and on every backend.
    """
    lead, n = keys.shape[:-1], keys.shape[-1]

    def halves(x, width):
        x = ops.reshape(x, lead + (n // (2 * width), 2, width))
        return x[..., 0, :], x[..., 1, :]

    def join(a, b):
        return ops.reshape(ops.stack([a, b], axis=-2), lead + (n,))

    run = 1
    while run < n:
        # Merge sorted runs of length `run` pairwise: each element meets its
        # mirror in the other run, leaving two bitonic halves, lower below upper...
        a, b = halves(keys, run)
        b = ops.flip(b, -1)
        keys = join(ops.minimum(a, b), ops.flip(ops.maximum(a, b), -1))
        # ...which half-cleaners of shrinking width sort.
        width = run // 2
        while width:
            a, b = halves(keys, width)
            keys = join(ops.minimum(a, b), ops.maximum(a, b))
            width //= 2
        run *= 2
    return keys


def _random_order(key, lead, n):
    """Independent uniformly random orders of range(n), shape lead + (n,), int32.

    Each position gets a random 64-bit sort key whose low bits are its index,
    so keys are distinct and the sorted keys' low bits are the order.
    """
    bits = max((n - 1).bit_length(), 1)
    size = 1 << (n - 1).bit_length() if n else 0
    index = ops.constant_like(np.arange(n, dtype=np.uint64), key)
    keys = ops.bitwise_or(ops.left_shift(_bits(key, lead + (n,), 64), np.uint64(bits)), index)
    if size > n:  # padding keys above every real key sort to the end
        keys = ops.pad(keys, [(0, 0)] * len(lead) + [(0, size - n)], constant_values=np.uint64(2 ** 64 - 1))
    order = ops.bitwise_and(_ascending(keys)[..., :n], np.uint64((1 << bits) - 1))
    return ops.astype(order, dt.int32 if n <= 2 ** 31 else dt.int64)


def permutation(key, x, axis=0, independent=False):
    """A random permutation of range(x) if `x` is an int, else of `x` along
    `axis`: the same one for every slice, or with independent=True one per
    1-D vector along `axis` (JAX's argument order and meaning)."""
    key = _check_key(key, "permutation")
    if np.ndim(x) == 0:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, Array, Tracer)):
            raise UsageError(f"random.permutation: x must be an int or an array, got {type(x).__name__}")
        n = ops.asarray(x).item() if isinstance(x, (Array, Tracer)) else int(x)
        if n < 0:
            raise ShapeError(f"random.permutation: x must be a non-negative int, got {n}")
        return _random_order(key, (), n)
    x = ops.asarray(x)
    a = ops.normalize_axis("random.permutation", axis, x.ndim)
    n = x.shape[a]
    if not independent:
        return ops.take(x, _random_order(key, (), n), axis=a)
    moved = ops.moveaxis(x, a, -1)
    lead = moved.shape[:-1]
    rows = math.prod(lead)
    order = ops.reshape(_random_order(key, lead, n), (rows, n))
    # One gather on the flattened array: row r's order shifted to its row.
    wide = np.int64 if rows * n > 2 ** 31 else np.int32
    flat_index = ops.add(ops.astype(order, wide), (np.arange(rows, dtype=wide) * n)[:, None])
    out = ops.take(ops.reshape(moved, (rows * n,)), flat_index)
    return ops.moveaxis(ops.reshape(out, lead + (n,)), -1, a)


def categorical(key, logits, axis=-1, shape=None):
    """Indices drawn along `axis` with probabilities softmax(logits) (Gumbel-max).

    shape is the result's shape: by default logits' shape without `axis`;
    otherwise it ends with dims that broadcast with those (JAX's meaning).
    """
    key = _check_key(key, "categorical")
    logits = ops.asarray(logits)
    if logits.ndim == 0:
        raise ShapeError("random.categorical: logits must have at least one axis, got a 0-d array")
    a = ops.normalize_axis("random.categorical", axis, logits.ndim)
    batch = logits.shape[:a] + logits.shape[a + 1:]
    shape = batch if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
    tail = shape[len(shape) - len(batch):] if batch else ()
    if len(shape) < len(batch) or any(b not in (t, 1) for t, b in zip(tail, batch)):
        raise ShapeError(f"random.categorical: shape {shape} must end with dims that logits' other dims "
                         f"{batch} broadcast to")
    prefix = shape[:len(shape) - len(batch)]
    dtype = logits.dtype if dt.is_float(logits.dtype) else dt.float32
    work = dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype  # Gumbel noise needs the range
    noise_shape = prefix + tail[:a] + (logits.shape[a],) + tail[a:]
    u = uniform(key, noise_shape, work, minval=float(np.finfo(work).tiny), maxval=1.0)
    gumbel = ops.negative(ops.log(ops.negative(ops.log(u))))
    return ops.argmax(ops.add(ops.astype(logits, work), gumbel), axis=len(prefix) + a)
