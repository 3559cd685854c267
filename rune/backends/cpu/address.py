"""The address of a NumPy array's data, as a C function reading it needs it, and the
byte offsets of the matrices of stacks (`stack_offsets`) that batched products read.

`ndarray.ctypes.data` builds a ctypes helper object on every read: about a
microsecond, and a training step hands a hundred arrays to its kernels. The
address is the `data` field of NumPy's array struct, its first field after the
object header (NumPy's public C ABI: `PyArrayObject_fields`), so it is read
directly, a tenth of the cost. Where that field is is checked once, against
`ctypes.data` on arrays and views of several kinds; where no offset agrees (an
interpreter with another object header, a NumPy that moved it), every read
goes through `ctypes.data`.
"""
import ctypes
import functools
import math

import numpy as np

_word = ctypes.c_void_p.from_address


def _data_offset():
    """The byte offset of an array object's data pointer, or None where none agrees."""
    base = np.arange(64, dtype=np.float64)
    samples = [base, base[3:], base[::2], base.reshape(8, 8).T, np.zeros((0,), np.int8),
               np.ones(5, bool), np.asarray(3.0)]
    for offset in range(ctypes.sizeof(ctypes.c_void_p), 8 * ctypes.sizeof(ctypes.c_void_p),
                        ctypes.sizeof(ctypes.c_void_p)):
        if all(_word(id(a) + offset).value == (a.ctypes.data or None) for a in samples):
            return offset
    return None


_OFFSET = _data_offset()

if _OFFSET is None:
    def address(array):
        """The address of `array`'s first element (an ndarray)."""
        return array.ctypes.data
else:
    def address(array, _offset=_OFFSET, _read=_word):
        """The address of `array`'s first element (an ndarray)."""
        return _read(id(array) + _offset).value


@functools.lru_cache(maxsize=256)
def stack_offsets(batch, strides):
    """(count, k): the byte offset of each matrix of k stacks over `batch` from their
    first elements, given each stack's batch `strides` (k tuples): each index of the
    batch times its strides (a reshape to one batch axis would copy a stack whose batch
    axes are not one stride: attention's heads). A training step asks for the same few
    every time: they are kept, read-only. An empty batch gives one row of zeros."""
    index = np.indices(batch, np.int64).reshape(len(batch), math.prod(batch)).T
    offsets = np.stack([index @ np.asarray(s, np.int64) for s in strides], axis=1)
    offsets.flags.writeable = False
    return offsets

