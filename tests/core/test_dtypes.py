"""rune's public API against its documented public API (README, docs/): dtypes.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, close


# ---------------------------------------------------------------- dtypes

def test_dtype_names_roundtrip():
    for name in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint32", "float16",
                 "bfloat16", "float32", "float64"]:
        dt = getattr(nx, name)
        x = nx.zeros((2,), dtype=dt)
        assert x.dtype == dt, name
        assert name in str(x.dtype), (name, str(x.dtype))


def test_default_float_is_float32():
    assert nx.array(1.5).dtype == nx.float32
    assert nx.array([1.5, 2.0]).dtype == nx.float32


def test_default_int_is_int32():
    assert nx.array(3).dtype == nx.int32
    assert nx.array([1, 2]).dtype == nx.int32


def test_default_bool():
    assert nx.array(True).dtype == nx.bool
    assert nx.array([True, False]).dtype == nx.bool


def test_numpy_arrays_keep_dtype():
    assert nx.array(np.zeros(2, np.float64)).dtype == nx.float64
    assert nx.array(np.zeros(2, np.int64)).dtype == nx.int64
    assert nx.asarray(np.zeros(2, np.float16)).dtype == nx.float16
    assert nx.asarray(np.zeros(2, np.uint8)).dtype == nx.uint8


def test_numpy_scalar_keeps_dtype():
    assert nx.array(np.float64(1.0)).dtype == nx.float64


def test_bfloat16_ops_and_host_representation():
    x = nx.array([1.0, 2.0], dtype=nx.bfloat16)
    y = x * 2.0 + 1.0
    assert y.dtype == nx.bfloat16
    assert A(y).dtype == ml_dtypes.bfloat16
    assert A(y).astype(np.float32).tolist() == [3.0, 5.0]


def test_bfloat16_from_numpy():
    x = nx.array(np.array([1.5], dtype=ml_dtypes.bfloat16))
    assert x.dtype == nx.bfloat16


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64"])
def test_weak_float_scalar_does_not_widen(dt):
    x = nx.ones((3,), dtype=getattr(nx, dt))
    assert (x * 2.0).dtype == getattr(nx, dt)
    assert (2.0 * x).dtype == getattr(nx, dt)
    assert (x - 1.0).dtype == getattr(nx, dt)
    assert (x / 3.0).dtype == getattr(nx, dt)


@pytest.mark.parametrize("dt", ["int8", "int16", "int32", "uint8", "uint32", "int64"])
def test_weak_int_scalar_does_not_widen(dt):
    x = nx.ones((3,), dtype=getattr(nx, dt))
    assert (x + 1).dtype == getattr(nx, dt)
    assert (3 * x).dtype == getattr(nx, dt)


def test_int_array_times_python_float_is_float():
    r = nx.array([1, 2]) * 1.5
    assert np.issubdtype(A(r).dtype, np.floating)
    close(r, [1.5, 3.0])


@pytest.mark.parametrize("a,b,want", [
    ("float32", "float64", "float64"),
    ("int8", "int16", "int16"),
    ("float16", "float32", "float32"),
    ("uint8", "int8", "int16"),
    ("int32", "int64", "int64"),
    ("bool", "int8", "int8"),
])
def test_array_array_promotion(a, b, want):
    x = nx.ones((2,), dtype=getattr(nx, a))
    y = nx.ones((2,), dtype=getattr(nx, b))
    assert (x + y).dtype == getattr(nx, want)


def test_weak_scalar_in_functions():
    x = nx.ones((3,), dtype=nx.float16)
    assert nx.maximum(x, 0.0).dtype == nx.float16
    assert nx.where(x > 0, x, 0.0).dtype == nx.float16
    assert nx.clip(x, 0.0, 0.5).dtype == nx.float16


def test_weak_scalar_under_jit():
    g = rune.jit(lambda x: x * 2.0 + 1)
    assert g(nx.ones((2,), dtype=nx.float16)).dtype == nx.float16


def test_astype_function_and_cast():
    x = nx.array([1.5, 2.5])
    assert nx.astype(x, nx.float64).dtype == nx.float64
    assert nx.cast(x, nx.int32).dtype == nx.int32
