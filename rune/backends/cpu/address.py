"""The address of a NumPy array's data, as a C function reading it needs it.

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
