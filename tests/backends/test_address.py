"""rune/backends/cpu/address.py: an array's data address read from NumPy's array
struct agrees with `ndarray.ctypes.data` on every kind of array a kernel is handed."""
import numpy as np
import pytest

from rune.backends.cpu.address import address


def _arrays():
    base = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    yield base
    yield base[1:, ::2, 3:]                        # a strided view, offset into its base
    yield base.transpose(2, 0, 1)
    yield np.asarray(base[0, 0, 0])                 # 0-d
    yield np.zeros((0, 3))                          # empty
    yield np.frombuffer(bytearray(64), np.uint8)    # another owner's memory
    yield np.ones(7, bool)[::-1]
    yield np.empty(3, dtype=[("a", np.int32), ("b", np.float64)])


@pytest.mark.parametrize("array", list(_arrays()), ids=lambda a: f"{a.dtype}{a.shape}")
def test_the_address_is_the_one_ctypes_reads(array):
    assert address(array) == (array.ctypes.data or None)
