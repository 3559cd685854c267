"""rune's public API against its documented public API (README, docs/): creation.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, close


# ---------------------------------------------------------------- creation

def test_zeros_ones_default_float32():
    z = nx.zeros((2, 3))
    o = nx.ones((2, 3))
    assert z.shape == (2, 3) and z.dtype == nx.float32 and A(z).sum() == 0
    assert o.dtype == nx.float32 and A(o).sum() == 6


def test_zeros_int_shape():
    assert nx.zeros(4).shape == (4,)


def test_creation_with_dtype():
    assert nx.zeros((2,), dtype=nx.int8).dtype == nx.int8
    assert nx.ones((2,), dtype=nx.float64).dtype == nx.float64
    assert nx.full((2,), 3, dtype=nx.uint8).dtype == nx.uint8


def test_full_infers_dtype_from_fill():
    assert nx.full((2,), 7.0).dtype == nx.float32
    assert nx.full((2,), 7).dtype == nx.int32
    assert nx.full((2, 2), 7.0).tolist() == [[7.0, 7.0], [7.0, 7.0]]


def test_like_functions():
    x = nx.array(np.zeros((2, 3), np.float64))
    for y in (nx.zeros_like(x), nx.ones_like(x), nx.full_like(x, 4.0)):
        assert y.shape == (2, 3) and y.dtype == nx.float64
    assert A(nx.full_like(x, 4.0)).tolist() == [[4.0] * 3] * 2
    assert nx.zeros_like(x, dtype=nx.int32).dtype == nx.int32


def test_arange_forms():
    assert nx.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert nx.arange(5).dtype == nx.int32
    assert nx.arange(1, 7, 2).tolist() == [1, 3, 5]
    a = nx.arange(0.0, 1.0, 0.25)
    assert a.dtype == nx.float32 and a.tolist() == [0.0, 0.25, 0.5, 0.75]
    assert nx.arange(3, dtype=nx.float64).dtype == nx.float64


def test_linspace():
    x = nx.linspace(0.0, 1.0, 5)
    assert x.dtype == nx.float32
    close(x, np.linspace(0, 1, 5))
    assert nx.linspace(0, 1).shape == (50,)
    assert nx.linspace(0, 1, 3, dtype=nx.float64).dtype == nx.float64


def test_eye():
    close(nx.eye(3), np.eye(3))
    assert nx.eye(3).dtype == nx.float32
    assert nx.eye(2, 3).shape == (2, 3)
    assert nx.eye(3, dtype=nx.int32).dtype == nx.int32


def test_array_from_nested_lists_and_dtype():
    x = nx.array([[1, 2], [3, 4]], dtype=nx.float64)
    assert x.dtype == nx.float64 and x.shape == (2, 2)


def test_array_from_array():
    x = nx.array([1.0, 2.0])
    assert nx.array(x).tolist() == [1.0, 2.0]
    assert nx.asarray(x).tolist() == [1.0, 2.0]
    assert nx.asarray(x, dtype=nx.float64).dtype == nx.float64


def test_scalar():
    s = nx.scalar(1.5, nx.float64)
    assert s.shape == () and s.dtype == nx.float64 and s.item() == 1.5
    assert nx.scalar(3, nx.int8).dtype == nx.int8


def test_create():
    x = nx.create(nx.float32, (2, 3), [0, 1, 2, 3, 4, 5])
    assert x.dtype == nx.float32 and x.shape == (2, 3)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]


CREATORS = {
    "array": lambda **k: nx.array([1.0, 2.0], **k),
    "asarray": lambda **k: nx.asarray([1.0, 2.0], **k),
    "scalar": lambda **k: nx.scalar(1.0, nx.float32, **k),
    "create": lambda **k: nx.create(nx.float32, (2,), [1.0, 2.0], **k),
    "zeros": lambda **k: nx.zeros((2,), **k),
    "ones": lambda **k: nx.ones((2,), **k),
    "full": lambda **k: nx.full((2,), 3.0, **k),
    "zeros_like": lambda **k: nx.zeros_like(nx.ones((2,)), **k),
    "ones_like": lambda **k: nx.ones_like(nx.ones((2,)), **k),
    "full_like": lambda **k: nx.full_like(nx.ones((2,)), 2.0, **k),
    "arange": lambda **k: nx.arange(3, **k),
    "linspace": lambda **k: nx.linspace(0.0, 1.0, 3, **k),
    "eye": lambda **k: nx.eye(2, **k),
}


@pytest.mark.parametrize("name", sorted(CREATORS))
def test_creation_accepts_device_kw(name):
    x = CREATORS[name](device="cpu")
    assert str(x.device) == "cpu:0"
    y = CREATORS[name](device=rune.devices()[0])
    assert str(y.device) == "cpu:0"
