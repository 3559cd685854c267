"""NumPy's packbits and unpackbits (big- or little-endian bit order) on uint8 arrays.
"""
import builtins

import numpy as np

from ..core import dtypes as dt
from ..errors import ArgumentError, DTypeError
from . import ops
from .surface_operands import _array, exporter

__all__ = []
_public = exporter(__all__)


def _bitorder(name, bitorder):
    if bitorder not in ("big", "little"):
        raise ArgumentError(f"{name}: bitorder must be 'big' or 'little', got {bitorder!r}")
    weights = [1 << (7 - i) for i in range(8)]
    return weights if bitorder == "big" else weights[::-1]


@_public
def packbits(x, axis=None, bitorder="big"):
    """The elements of `x` (nonzero: 1) packed eight to a uint8 along `axis`.

    The flattened array if axis is None; the last byte is padded with zero bits.

    x: a bool or integer array. axis: the axis to pack along (None: flatten first). bitorder: "big" (the first
    element is the highest bit) or "little".
    """
    x = _array(x)
    if x.dtype.kind not in "biu":
        raise DTypeError(f"packbits: expected x to be a bool or integer array, got {x.dtype.name}")
    weights = _bitorder("packbits", bitorder)
    if axis is None:
        x, axis = ops.reshape(x, (-1,)), 0
    axis = ops.normalize_axis("packbits", axis, x.ndim)
    bits = ops.astype(ops.not_equal(x, 0), dt.uint8)
    n = x.shape[axis]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, -n % 8)
    bits = ops.moveaxis(ops.pad(bits, pad), axis, -1)
    groups = ops.reshape(bits, bits.shape[:-1] + (bits.shape[-1] // 8, 8))
    packed = ops.sum(ops.multiply(groups, np.asarray(weights, np.uint8)), axis=-1, dtype=dt.uint8)
    return ops.moveaxis(packed, -1, axis)


@_public
def unpackbits(x, axis=None, count=None, bitorder="big"):
    """The bits of the uint8 array `x`, eight elements per byte along `axis`, as uint8 zeros and ones.

    The flattened array if axis is None.

    x: a uint8 array. axis: the axis to unpack along (None: flatten first). count: how many bits to keep along
    the axis (None: all; negative: drop that many from the end; beyond the bits: pad with zeros).
    bitorder: "big" (the highest bit first) or "little".
    """
    x = _array(x)
    if x.dtype != dt.uint8:
        raise DTypeError(f"unpackbits: expected x to be a uint8 array, got {x.dtype.name}")
    weights = _bitorder("unpackbits", bitorder)
    if axis is None:
        x, axis = ops.reshape(x, (-1,)), 0
    axis = ops.normalize_axis("unpackbits", axis, x.ndim)
    moved = ops.moveaxis(x, axis, -1)
    shifts = np.asarray([w.bit_length() - 1 for w in weights], np.uint8)
    bits = ops.bitwise_and(ops.right_shift(ops.expand_dims(moved, -1), shifts), np.uint8(1))
    bits = ops.reshape(bits, moved.shape[:-1] + (moved.shape[-1] * 8,))
    total = bits.shape[-1]
    if count is not None:
        if not isinstance(count, (int, np.integer)):
            raise ArgumentError(f"unpackbits: count must be an int or None, got {count!r}")
        keep = builtins.max(total + count, 0) if count < 0 else count
        if keep <= total:
            bits = ops.slice_in_dim(bits, 0, keep, axis=-1)
        else:
            bits = ops.pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return ops.moveaxis(bits, -1, axis)
