"""Threefry-2x32 counter-based random bits, vectorized in NumPy.

The cipher
----------
``threefry2x32(k0, k1, x0, x1)`` is Threefry-2x32 with 20 rounds, exactly as in
Random123 and JAX.  All arithmetic is uint32 with wraparound.

* Key schedule: ``ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)``.
* Start: ``x0 += ks[0]; x1 += ks[1]``.
* One round with rotation ``r``: ``x0 += x1; x1 = rotl32(x1, r); x1 ^= x0``.
* Five groups of four rounds.  Groups use the rotations ``(13, 15, 26, 6)``
  and ``(17, 29, 16, 24)`` alternately, starting with the first.  After group
  ``g`` (g = 1..5) the key is injected:
  ``x0 += ks[g % 3]; x1 += ks[(g + 1) % 3] + g``.
* The output is ``(y0, y1) = (x0, x1)``.

Keys
----
A key is a uint32 array of shape ``(2,)``: ``(k0, k1)``.

* ``key(seed)``: ``(uint32((seed >> 32) & 0xffffffff), uint32(seed & 0xffffffff))``
  for an int ``seed`` in ``[-2**63, 2**64)`` (negative seeds use two's
  complement); others raise ScalarOverflowError.

Splitting and folding in are built on ``random_bits`` by ``rune.nx.random``.

Random bits (element-local)
---------------------------
``random_bits(key, shape, width)`` returns an array of ``shape`` (C order) whose
element with flat index ``i`` depends only on ``key`` and ``i``:

    (y0, y1) = threefry2x32(k0, k1, x0 = uint32(i >> 32), x1 = uint32(i & 0xffffffff))

* width 32: ``y0``.
* width 64: ``(uint64(y0) << 32) | uint64(y1)``.
* width 16: ``y0 & 0xffff`` (low 16 bits of ``y0``).
* width 8:  ``y0 & 0xff`` (low 8 bits of ``y0``).

So the bits of a smaller draw are a prefix of the flat bits of a larger draw
with the same key and width, and a GPU kernel can compute every element on
its own from ``(k0, k1, i)``.
"""

from __future__ import annotations

import operator

import numpy as np

from rune.errors import DTypeError, ScalarOverflowError, ShapeError

__all__ = ["threefry2x32", "random_bits", "key"]

_MASK32 = 0xFFFFFFFF
_PARITY = np.uint32(0x1BD11BDA)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_UINT_BY_WIDTH = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _rotl32(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _as_u32(v, name: str, xp=np):
    a = xp.asarray(v)
    if a.dtype != np.uint32:
        if a.dtype.kind not in "ui":
            raise DTypeError(f"threefry2x32: {name} must be an integer, got {a.dtype}")
        return (a.astype(np.uint64) & np.uint64(_MASK32)).astype(np.uint32)
    return a


def threefry2x32(k0, k1, x0, x1, xp=np):
    """Threefry-2x32, 20 rounds. Returns ``(y0, y1)`` as uint32 arrays; keys and
    counters broadcast together (one key, or one key per row of counters).
    `xp` is the array module (NumPy, CuPy): the same bits on either."""
    k0 = _as_u32(k0, "k0", xp)
    k1 = _as_u32(k1, "k1", xp)
    x0 = xp.asarray(x0)
    x1 = xp.asarray(x1)
    if x0.shape != x1.shape:
        raise ShapeError(f"threefry2x32: x0 and x1 shapes differ: {x0.shape} vs {x1.shape}")
    for name, x in (("x0", x0), ("x1", x1)):
        if x.dtype != np.uint32:
            raise DTypeError(f"threefry2x32: {name} must be uint32, got {x.dtype}")
    shape = np.broadcast_shapes(x0.shape, k0.shape, k1.shape)
    # Work on arrays of at least one dimension (never NumPy scalars) so uint32
    # arithmetic wraps silently.
    with np.errstate(over="ignore"):
        ks = (k0, k1, k0 ^ k1 ^ _PARITY)
        a, b = xp.broadcast_arrays(xp.atleast_1d(x0) + ks[0], xp.atleast_1d(x1) + ks[1])
        a, b = a.copy(), b.copy()  # writable, for the in-place rounds
        for g in range(1, 6):
            for r in _ROTATIONS[(g - 1) % 2]:
                a += b
                b = _rotl32(b, r)
                b ^= a
            a += ks[g % 3]
            b += ks[(g + 1) % 3] + np.uint32(g)
    return a.reshape(shape), b.reshape(shape)


def _check_key(k, xp=np):
    a = xp.asarray(k)
    if a.ndim < 1 or a.shape[-1] != 2:
        raise ShapeError(f"a threefry key has shape (2,) (or (..., 2) for a batch of keys), got {a.shape}")
    if a.dtype != np.uint32:
        raise DTypeError(f"a threefry key has dtype uint32, got {a.dtype}")
    return a[..., 0], a[..., 1]


def _normalize_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise ShapeError(f"random_bits: shape must be a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ShapeError(f"random_bits: negative dimension in shape {shape}")
    return shape


def random_bits(key, shape, width: int = 32, xp=np):
    """Random unsigned integers of ``width`` bits; see the module docstring for the scheme.

    A batch of keys (shape ``batch + (2,)``) draws ``batch + shape``: each key's
    bits are exactly those it draws on its own (this is how vmap over keys runs).
    `xp` is the array module (NumPy, CuPy) the bits are computed on.
    """
    k0, k1 = _check_key(key, xp)
    batch = k0.shape
    k0, k1 = k0.reshape(-1, 1), k1.reshape(-1, 1)
    shape = _normalize_shape(shape)
    if width not in _UINT_BY_WIDTH:
        raise DTypeError(f"random_bits: width must be 8, 16, 32 or 64, got {width!r}")
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    i = xp.arange(n, dtype=np.uint64)
    hi = (i >> np.uint64(32)).astype(np.uint32)
    lo = (i & np.uint64(_MASK32)).astype(np.uint32)
    y0, y1 = threefry2x32(k0, k1, hi[None], lo[None], xp=xp)
    if width == 64:
        out = (y0.astype(np.uint64) << np.uint64(32)) | y1.astype(np.uint64)
    else:
        out = y0.astype(_UINT_BY_WIDTH[width])  # truncation keeps the low bits
    return out.reshape(batch + shape)


def key(seed) -> np.ndarray:
    """A key from an int seed: (high 32 bits, low 32 bits) of the seed."""
    seed = operator.index(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ScalarOverflowError(f"threefry key: the seed must fit in 64 bits, in [-2**63, 2**64), got {seed}")
    return np.array([(seed >> 32) & _MASK32, seed & _MASK32], dtype=np.uint32)
