"""Counter-based random numbers from explicit keys (Threefry-2x32, JAX's argument order).

A key is a uint32 array of shape (2,). Bits are a pure function of the key and
each element's position, so every device draws the same numbers.

split(key, num): key j is words 2j and 2j+1 of random_bits(key, (num, 2), 32).
fold_in(key, data): random_bits(key ^ (data ^ 0x5BD1E995, data * 0x9E3779B9 +
0x7F4A7C15), (2,), 32); the constants keep its keys apart from split's.

Samplers turn bits into values with integer ops and the correctly rounded float
ops only (rune/nx/exact_math.py builds log, exp, the normal CDF and quantile and
nextafter from them), so a sample has the same bits eager, compiled to C and on
a GPU. Float samples of 16-bit dtypes are computed in float32 and rounded once.
"""
import math

import numpy as np

from ..core.aval import normalize_shape
from ..core.prims import P
from ..core.trace import Tracer, bind
from ..errors import ArgumentError, DTypeError, RuneError, ScalarOverflowError, ShapeError, UsageError
from ..core import dtypes as dt
from . import exact_math, ops
from .buffers import Array, from_host
from .sorting import argsort

__all__ = ["key", "split", "fold_in", "uniform", "normal", "truncated_normal", "exponential", "gumbel",
           "bernoulli", "randint", "permutation", "choice", "categorical"]


def __dir__():
    """The public names only (as rune.nx's): the helpers and imported modules stay out of dir()."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__") and n.endswith("__")})

_MANTISSA = {dt.float16: 11, dt.bfloat16: 8, dt.float32: 24, dt.float64: 53}


def key(seed, device=None):
    """A key (a uint32 array of shape (2,)) made from an integer seed, as JAX's random.key.

    seed: an int in [-2**63, 2**64) (an int64 or a uint64 value); the key is (high 32 bits, low 32 bits) of
    its 64-bit pattern, so -1 and 2**64 - 1 are the same seed. Other seeds raise: a float, a bool or a
    non-scalar array a UsageError, an int outside the range a ScalarOverflowError (an OverflowError, as JAX
    gives). The seed may be traced (a key per lane under vmap, a seed argument under jit).
    device: where the key is made (default: the default device).
    """
    if isinstance(seed, (Array, Tracer)):
        if seed.dtype.kind not in "iu" or seed.shape != ():
            raise UsageError(f"random.key: the seed must be an integer scalar, got {seed.aval.describe()}")
        wide = ops.astype(seed, dt.int64)
        high = ops.astype(ops.bitwise_and(ops.right_shift(wide, np.int64(32)), np.int64(0xFFFFFFFF)), dt.uint32)
        low = ops.astype(ops.bitwise_and(wide, np.int64(0xFFFFFFFF)), dt.uint32)
        out = ops.stack([high, low])
        return out if device is None else ops.asarray(out, device=device)
    if isinstance(seed, np.ndarray) and seed.shape == () and seed.dtype.kind in "iu":
        seed = seed[()]
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, (bool, np.bool_)):
        raise UsageError(f"random.key: the seed must be an integer, got {type(seed).__name__} {seed!r}")
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ScalarOverflowError(f"random.key: the seed must fit in 64 bits, in [-2**63, 2**64), got {seed}")
    return from_host(np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], np.uint32), device)


def _check_key(k, name):
    k = ops.asarray(k)
    if k.shape != (2,) or k.dtype != dt.uint32:
        raise ShapeError(f"random.{name}: expected a key (uint32 array of shape (2,)), got {k.aval.describe()}")
    return k


def _bits(k, shape, width):
    return bind(P["random_bits"], k, shape=tuple(shape), width=width)


def split(key, num=2):
    """`num` new independent keys, stacked into shape (num, 2).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    num: how many keys (2 by default). Use each key once: pass one on and split it again.
    """
    key = _check_key(key, "split")
    return _bits(key, _shape((num, 2), "split"), 32)


def fold_in(key, data):
    """A new key derived from `key` and the integer `data` (e.g. a step or rank number).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    data: an int or an integer scalar (taken modulo 2**32; may be traced).
    """
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


def _work_dtype(dtype):
    """The dtype a sampler computes in: float32 for the 16-bit floats (rounded once at the end)."""
    return dt.float64 if dtype == dt.float64 else dt.float32


def _next_inside(x, toward, dtype):
    """The value of `dtype` next to `x` (held in `dtype`'s work dtype) toward `toward`
    (+inf or -inf), in exact ops; for 16-bit dtypes, on their grid."""
    work = _work_dtype(dtype)
    return exact_math.nextafter(x, work.type(toward), None if dtype == work else dtype)


def _open_unit(key, shape, work):
    """(p, lowest): floats p = (m + 1/2) 2**-b of `work` (m uniform below 2**b, b one bit
    less than the mantissa), strictly inside (0, 1) and symmetric about 1/2, with
    lowest = 2**-(b + 1) the smallest p. The inverse CDFs below never meet 0 or 1."""
    width = 64 if work == dt.float64 else 32
    b = _MANTISSA[work] - 1
    m = ops.right_shift(_bits(key, shape, width), np.dtype(f"uint{width}").type(width - b))
    p = ops.multiply(ops.add(ops.astype(m, work), work.type(0.5)), work.type(2.0 ** -b))
    return p, 2.0 ** -(b + 1)


def uniform(key, shape=(), dtype=dt.float32, minval=0.0, maxval=1.0):
    """Floats uniform in [minval, maxval).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    shape: an int or a sequence of ints (() by default). dtype: float16, bfloat16, float32 (default) or float64.
    minval, maxval: the bounds (scalars or arrays broadcast to `shape`); where maxval <= minval, minval (as
    JAX). The unit floats lie on the dtype's grid k 2**-mantissa, scaled and shifted in float32 (for 16-bit
    dtypes) or the dtype, rounded once.
    """
    key = _check_key(key, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    work = _work_dtype(dtype)
    width = 64 if dtype == dt.float64 else 32
    m = _MANTISSA[dtype]
    bits = ops.right_shift(_bits(key, _shape(shape, "uniform"), width), np.dtype(f"uint{width}").type(width - m))
    unit = ops.multiply(ops.astype(bits, work), work.type(2.0 ** -m))
    below = ops.astype(_below(maxval, key, dtype), work)
    minval = ops.astype(ops.constant_like(minval, key, dtype), work)
    maxval = ops.astype(ops.constant_like(maxval, key, dtype), work)
    drawn = ops.add(ops.multiply(unit, ops.subtract(maxval, minval)), minval)
    # the product can round up to maxval (unit 1 - 2**-24 times 10, say): the value below instead;
    # where maxval <= minval that value is below minval: minval then, as JAX's max(minval, ...)
    return ops.astype(ops.maximum(minval, ops.minimum(drawn, below)), dtype)


def _below(bound, key, dtype):
    """The largest value of `dtype` below `bound`: on the host for a host bound (a
    constant), else in exact ops; IEEE nextafter is exact, so both give the same bits."""
    if isinstance(bound, (Array, Tracer)):
        return _next_inside(ops.astype(bound, _work_dtype(dtype)), -np.inf, dtype)
    return ops.constant_like(np.nextafter(np.asarray(bound, dtype), np.asarray(-np.inf, dtype)), key)


def normal(key, shape=(), dtype=dt.float32):
    """Standard normal floats (mean 0, standard deviation 1).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    shape: an int or a sequence of ints (() by default). dtype: float16, bfloat16, float32 (default) or float64.
    Each is the normal quantile (exact_math.ndtri, computed in float32 for 16-bit dtypes) of a
    uniform draw strictly inside (0, 1), so the samples are symmetric about 0 and reach about 5.3 (float32)
    or 8.2 (float64).
    """
    key = _check_key(key, "normal")
    dtype = _float_dtype(dtype, "normal")
    p, lowest = _open_unit(key, _shape(shape, "normal"), _work_dtype(dtype))
    return ops.astype(exact_math.ndtri(p, lowest=lowest), dtype)


def truncated_normal(key, lower, upper, shape=None, dtype=dt.float32):
    """Standard normal floats conditioned on lower < x < upper (JAX's argument order).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    lower, upper: the bounds (scalars or arrays). shape: the result's shape, to which the bounds broadcast
    (default: the bounds' broadcast shape). dtype: float16, bfloat16, float32 (default) or float64.
    Each is x with Phi(x) = Phi(lo) + p (Phi(hi) - Phi(lo)), p uniform strictly inside (0, 1), on the side
    of 0 where the interval's farther part is in the lower tail ((lo, hi) = (-upper, -lower), negated
    after, where lower + upper > 0), computed in logs (exact_math.log_ndtr, ndtri_exp), so no CDF
    underflows: (20, 30) in float32 or (39, 40) in float64 are drawn as finely as (0, 1). Relative
    error within a few ulp (of float32 for 16-bit dtypes) in the lower tail; where the interval reaches
    into the upper one (hi > 0), values there carry the absolute error of Phi near 1 (as `normal`'s
    do). Then held inside the open interval (the nearest values of `dtype` inside where rounding
    reaches a bound).
    """
    key = _check_key(key, "truncated_normal")
    dtype = _float_dtype(dtype, "truncated_normal")
    work = _work_dtype(dtype)
    lower = ops.astype(ops.constant_like(lower, key, dtype), work)
    upper = ops.astype(ops.constant_like(upper, key, dtype), work)
    try:
        bounds = np.broadcast_shapes(lower.shape, upper.shape)
        shape = bounds if shape is None else _shape(shape, "truncated_normal")
        fits = np.broadcast_shapes(bounds, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"random.truncated_normal: the bounds' shapes {lower.shape} and {upper.shape} "
                         f"do not broadcast to shape {shape}")
    # The normal is symmetric: draw from (-upper, -lower) and negate where that puts the
    # interval's farther end in the lower tail, where Phi and its log are relatively exact.
    flip = ops.greater(upper, ops.negative(lower))          # lower + upper > 0, NaN-free at infinities
    lo = ops.where(flip, ops.negative(upper), lower)
    hi = ops.where(flip, ops.negative(lower), upper)
    log_lo, log_hi = exact_math.log_ndtr(lo), exact_math.log_ndtr(hi)
    p, _ = _open_unit(key, shape, work)
    # Phi(x) = Phi(hi) (ratio + p (1 - ratio)), ratio = Phi(lo) / Phi(hi): its log, where
    # Phi itself would underflow (below 1e-38 in float32, from x = -13.2)
    ratio = exact_math.exp(ops.subtract(log_lo, log_hi))
    share = ops.add(ratio, ops.multiply(p, ops.subtract(work.type(1), ratio)))
    z = exact_math.ndtri_exp(ops.minimum(ops.add(log_hi, exact_math.log(share)), work.type(0)))
    z = ops.where(flip, ops.negative(z), z)
    # rounding may reach a bound: the nearest values of `dtype` inside instead
    inside_lower, inside_upper = _next_inside(lower, np.inf, dtype), _next_inside(upper, -np.inf, dtype)
    return ops.astype(ops.minimum(ops.maximum(z, inside_lower), inside_upper), dtype)


def exponential(key, shape=(), dtype=dt.float32):
    """Exponential floats with rate 1: -log of a uniform draw strictly inside (0, 1).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    shape: an int or a sequence of ints (() by default). dtype: float16, bfloat16, float32 (default) or float64.
    """
    key = _check_key(key, "exponential")
    dtype = _float_dtype(dtype, "exponential")
    p, lowest = _open_unit(key, _shape(shape, "exponential"), _work_dtype(dtype))
    return ops.astype(ops.negative(exact_math.log(p, bounds=(lowest, 1.0))), dtype)


def _gumbel(key, shape, work):
    p, lowest = _open_unit(key, shape, work)
    e = ops.negative(exact_math.log(p, bounds=(lowest, 1.0)))
    # e lies in [-log(1 - lowest), -log(lowest)], within [lowest / 2, 0.75 log2(1 / lowest)]
    return ops.negative(exact_math.log(e, bounds=(lowest / 2, -0.75 * math.log2(lowest))))


def gumbel(key, shape=(), dtype=dt.float32):
    """Standard Gumbel floats: -log(-log(p)) of a uniform draw p strictly inside (0, 1).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    shape: an int or a sequence of ints (() by default). dtype: float16, bfloat16, float32 (default) or float64.
    """
    key = _check_key(key, "gumbel")
    dtype = _float_dtype(dtype, "gumbel")
    return ops.astype(_gumbel(key, _shape(shape, "gumbel"), _work_dtype(dtype)), dtype)


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability `p`.

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    p: the probability, a scalar or an array (0.5 by default). shape: the result's shape (default: p's
    shape); p broadcasts to it.
    """
    key = _check_key(key, "bernoulli")
    if shape is None:
        shape = ops.asarray(p).shape if isinstance(p, (Array, Tracer, np.ndarray)) else ()
    shape = _shape(shape, "bernoulli")
    return ops.less(uniform(key, shape), p)


def randint(key, shape, minval, maxval, dtype=dt.int32):
    """Integers uniform in [minval, maxval) (minval where the range is empty, as in JAX).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    shape: an int or a sequence of ints. minval, maxval: the bounds (ints, or arrays broadcast to `shape`;
    float arrays are truncated to ints). As in JAX, bounds outside `dtype`'s range are clipped into it, and a
    maxval above its largest value includes that value: randint(k, s, 0, 256, nx.uint8) draws all of 0..255.
    dtype: an integer dtype, int32 by default.
    """
    key = _check_key(key, "randint")
    dtype = dt.dtype(dtype)
    if dtype.kind not in "iu":
        raise DTypeError(f"random.randint: dtype must be an integer type, got {dtype.name}")
    shape = _shape(shape, "randint")
    minval, _ = _clipped_bound(minval, key, dtype, "minval")
    maxval, beyond = _clipped_bound(maxval, key, dtype, "maxval")
    try:
        fits = np.broadcast_shapes(minval.shape, maxval.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"random.randint: the bounds' shapes {minval.shape} and {maxval.shape} "
                         f"do not broadcast to shape {shape}")
    # The span maxval - minval can exceed the dtype (e.g. the whole int32 range):
    # compute it as unsigned 64-bit, where the wrap-around difference is exact.
    lo, hi = ops.astype(minval, dt.uint64), ops.astype(maxval, dt.uint64)
    # a maxval beyond the dtype's largest value takes that value in: one more (the
    # whole 64-bit range wraps to 0, where every 64-bit draw is an offset)
    span = ops.add(ops.subtract(hi, lo), ops.astype(ops.constant_like(beyond, key), dt.uint64))
    bits = _bits(key, shape, 64)
    offset = ops.where(ops.equal(span, np.uint64(0)), bits, ops.remainder(bits, ops.maximum(span, np.uint64(1))))
    drawn = ops.astype(ops.add(lo, offset), dtype)
    # An empty range (maxval <= minval, after clipping) gives minval, as in JAX.
    return ops.where(ops.logical_or(ops.less(minval, maxval), ops.constant_like(beyond, key)), drawn, minval)


def _clipped_bound(bound, key, dtype, name):
    """(bound in `dtype`, clipped into its range; whether it lay above the range), as
    JAX's randint takes its bounds."""
    info = np.iinfo(dtype)
    if isinstance(bound, (int, np.integer)) and not isinstance(bound, (bool, np.bool_)):
        value = int(bound)     # on the host, exactly, whatever its size
        return ops.constant_like(dtype.type(min(max(value, info.min), info.max)), key), np.bool_(value > info.max)
    try:
        bound = ops.constant_like(bound, key)
    except RuneError as e:
        raise type(e)(f"random.randint: {name}: {e}") from None
    if bound.dtype.kind not in "iu":
        if bound.dtype.kind not in "fb":
            raise DTypeError(f"random.randint: {name} must be integers, got {bound.dtype.name}")
        bound = ops.astype(bound, dt.int64)                    # floats truncated, as JAX's astype(int)
    have = np.iinfo(bound.dtype)
    low, high = max(info.min, have.min), min(info.max, have.max)  # both held by either dtype
    beyond = ops.greater(bound, bound.dtype.type(high)) if high < have.max else np.bool_(False)
    if low > have.min or high < have.max:
        bound = ops.minimum(ops.maximum(bound, bound.dtype.type(low)), bound.dtype.type(high))
    return ops.astype(bound, dtype), beyond


def _ascending(keys):
    """`keys` (its last axis 2**k long) sorted along the last axis.

    A bitonic sorting network of elementwise min/max on reshaped views:
    O(n log^2 n) work in O(log^2 n) steps that fuse into kernels, and it runs
    under every transformation and on every backend.
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
    """A random permutation of range(x) if `x` is an int, else of `x`'s elements along `axis`.

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    x: an int n, or an array. axis: the permuted axis (0 by default). independent: False permutes every
    slice the same way; True permutes each 1-d vector along `axis` on its own (JAX's meaning).
    """
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


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Random draws from `a` (JAX's argument order and meaning).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    a: an int n (draws from range(n)) or an array (draws its slices along `axis`). shape: the draws' shape,
    in the place of `axis` (() by default). replace: False draws no slice twice. p: one weight per slice
    (1-d; default: all equal); slice i comes with probability p[i] / sum(p). axis: the axis of `a` (0).
    Weighted draws are Gumbel-max: the largest log p[i] + Gumbel noise for each draw with replacement, the
    prod(shape) largest of one noisy vector without.
    """
    key = _check_key(key, "choice")
    shape = _shape(shape, "choice")
    if np.ndim(a) == 0 and not isinstance(a, (Array, Tracer)):
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise UsageError(f"random.choice: a must be an int or an array, got {type(a).__name__}")
        population, n = None, int(a)
    else:
        population = ops.asarray(a)
        if population.ndim == 0:
            raise ShapeError("random.choice: a must be an int or an array of at least one axis, got a 0-d array")
        axis = ops.normalize_axis("random.choice", axis, population.ndim)
        n = population.shape[axis]
    size = math.prod(shape)
    if n <= 0 and size:
        raise ArgumentError(f"random.choice: cannot draw {size} values from an empty population (a = {n})")
    if not replace and size > n:
        raise ArgumentError(f"random.choice: cannot draw {size} values from {n} without replacement")
    if p is None:
        index = randint(key, shape, 0, max(n, 1)) if replace else \
            ops.reshape(_random_order(key, (), n)[:size], shape)
    else:
        p = ops.asarray(p)
        if p.shape != (n,):
            raise ShapeError(f"random.choice: p must have one weight per choice, shape ({n},), "
                             f"got {p.aval.describe()}")
        work = _work_dtype(p.dtype)
        log_p = exact_math.log(ops.astype(p, work))
        if replace:
            index = ops.argmax(ops.add(log_p, _gumbel(key, shape + (n,), work)), axis=len(shape))
        else:
            noisy = ops.add(log_p, _gumbel(key, (n,), work))
            index = ops.reshape(argsort(noisy, descending=True)[:size], shape)
    index = ops.astype(index, dt.int32 if n <= 2 ** 31 else dt.int64)
    return index if population is None else ops.take(population, index, axis=axis)


def categorical(key, logits, axis=-1, shape=None):
    """Indices drawn along `axis` with probabilities softmax(logits) (Gumbel-max).

    key: a key (a uint32 array of shape (2,)) from key, split or fold_in; the same key gives the same numbers.
    logits: unnormalized log-probabilities, at least one axis. axis: the axis of the categories (-1 by
    default). shape: the result's shape: by default logits' shape without `axis`; otherwise it ends with dims
    that broadcast with those (JAX's meaning).
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
    work = _work_dtype(logits.dtype)
    noise_shape = prefix + tail[:a] + (logits.shape[a],) + tail[a:]
    noisy = ops.add(ops.astype(logits, work), _gumbel(key, noise_shape, work))
    return ops.argmax(noisy, axis=len(prefix) + a)
