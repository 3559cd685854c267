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
