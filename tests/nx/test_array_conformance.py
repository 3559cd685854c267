"""rune's public API against its documented public API (README, docs/): Array.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, close


# ---------------------------------------------------------------- Array

def test_array_properties():
    x = nx.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert isinstance(x, nx.Array)
    assert x.shape == (2, 3) and type(x.shape) is tuple
    assert x.ndim == 2 and x.size == 6
    assert x.dtype == nx.float32
    assert str(x.device) == "cpu:0"


def test_array_item_and_tolist():
    assert nx.array(2.5).item() == 2.5
    assert nx.array([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert isinstance(nx.array([1.5]).tolist()[0], float)


def test_array_python_conversions():
    assert float(nx.array(2.5)) == 2.5
    assert int(nx.array(3)) == 3
    assert bool(nx.array(True)) is True


def test_array_len_and_iter():
    x = nx.array([[1, 2], [3, 4], [5, 6]])
    assert len(x) == 3
    rows = [r.tolist() for r in x]
    assert rows == [[1, 2], [3, 4], [5, 6]]


def test_array_repr_works():
    assert isinstance(repr(nx.array([1.0, 2.0])), str)
    assert isinstance(str(nx.array([1.0, 2.0])), str)


def test_array_T():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    close(nx.array(x).T, x.T)


def test_array_astype():
    y = nx.array([1.7, -2.2]).astype(nx.int32)
    assert y.dtype == nx.int32 and y.tolist() == [1, -2]


def test_array_reshape_varargs_and_tuple():
    x = nx.arange(6)
    assert x.reshape(2, 3).shape == (2, 3)
    assert x.reshape((3, 2)).shape == (3, 2)
    assert x.reshape(-1, 2).shape == (3, 2)


@pytest.mark.parametrize("method", ["sum", "mean", "max", "min", "prod", "var", "std"])
def test_array_reduction_methods(method):
    xn = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]])
    x = nx.array(xn)
    close(getattr(x, method)(), getattr(xn, method)())
    close(getattr(x, method)(axis=0), getattr(xn, method)(axis=0))
    close(getattr(x, method)(axis=1, keepdims=True), getattr(xn, method)(axis=1, keepdims=True))


@pytest.mark.parametrize("method", ["argmax", "argmin"])
def test_array_arg_methods(method):
    xn = np.array([[1.0, 9.0, 3.0], [8.0, 5.0, 0.0]])
    x = nx.array(xn)
    assert getattr(x, method)().item() == getattr(xn, method)()
    assert getattr(x, method)(axis=1).tolist() == getattr(xn, method)(axis=1).tolist()


def test_array_any_all_methods():
    x = nx.array([[True, False], [True, True]])
    assert x.any().item() is True and x.all().item() is False
    assert x.all(axis=1).tolist() == [False, True]


def test_array_is_immutable_setitem():
    x = nx.array([1.0, 2.0])
    with pytest.raises(TypeError):
        x[0] = 5.0
    assert x.tolist() == [1.0, 2.0]


def test_np_asarray_cannot_mutate_array():
    x = nx.array([1.0, 2.0])
    a = np.asarray(x)
    try:
        a[0] = 100.0
    except ValueError:
        pass  # read-only view, as in JAX
    assert x.tolist() == [1.0, 2.0]


def test_np_asarray_keeps_dtype_and_values():
    for dt, ndt in [(nx.float32, np.float32), (nx.float64, np.float64), (nx.int32, np.int32),
                    (nx.int8, np.int8), (nx.uint8, np.uint8), (nx.bool, np.bool_),
                    (nx.bfloat16, ml_dtypes.bfloat16), (nx.float16, np.float16),
                    (nx.int64, np.int64), (nx.int16, np.int16), (nx.uint32, np.uint32)]:
        a = np.asarray(nx.ones((2,), dtype=dt))
        assert isinstance(a, np.ndarray) and a.dtype == np.dtype(ndt), (dt, a.dtype)
        assert a.astype(np.float64).tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- operators

BIN_OPS = [
    ("add", lambda a, b: a + b),
    ("sub", lambda a, b: a - b),
    ("mul", lambda a, b: a * b),
    ("truediv", lambda a, b: a / b),
    ("floordiv", lambda a, b: a // b),
    ("mod", lambda a, b: a % b),
    ("pow", lambda a, b: a ** b),
    ("lt", lambda a, b: a < b),
    ("le", lambda a, b: a <= b),
    ("gt", lambda a, b: a > b),
    ("ge", lambda a, b: a >= b),
    ("eq", lambda a, b: a == b),
    ("ne", lambda a, b: a != b),
]


@pytest.mark.parametrize("name,op", BIN_OPS, ids=[n for n, _ in BIN_OPS])
def test_binary_operator_float(name, op):
    an = np.array([1.5, -2.25, 3.0, 0.5], dtype=np.float32)
    bn = np.array([0.5, 1.5, -2.0, 2.0], dtype=np.float32)
    if name == "pow":
        an = np.abs(an)
    got = op(nx.array(an), nx.array(bn))
    want = op(an, bn)
    assert A(got).dtype == want.dtype
    close(got, want)


@pytest.mark.parametrize("name,op", BIN_OPS[:7], ids=[n for n, _ in BIN_OPS[:7]])
def test_binary_operator_reflected_scalar(name, op):
    an = np.array([1.5, 2.25, 3.0], dtype=np.float32)
    got = op(2.0, nx.array(an))
    want = op(np.float32(2.0), an)
    assert A(got).dtype == np.float32
    close(got, want)


def test_int_floordiv_mod_follow_python_floor_semantics():
    a = nx.array([7, -7, 7, -7])
    b = nx.array([2, 2, -2, -2])
    assert (a // b).tolist() == [3, -4, -4, 3]
    assert (a % b).tolist() == [1, 1, -1, -1]


def test_int_truediv_gives_float():
    r = nx.array([1, 2, 3]) / nx.array([2, 2, 2])
    assert np.issubdtype(A(r).dtype, np.floating)
    close(r, [0.5, 1.0, 1.5])


def test_int_pow():
    assert (nx.array([2, 3]) ** 2).tolist() == [4, 9]
    assert (nx.array([2, 3]) ** 2).dtype == nx.int32


def test_unary_neg_and_pos():
    x = nx.array([1.0, -2.0])
    assert (-x).tolist() == [-1.0, 2.0]


def test_abs_builtin():
    assert abs(nx.array([-1.0, 2.0])).tolist() == [1.0, 2.0]


def test_matmul_operator():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    close(nx.array(a) @ nx.array(b), a @ b)


def test_matmul_operator_vectors():
    a = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    r = nx.array(a) @ nx.array(a)
    assert r.shape == ()
    close(r, 14.0)


def test_matmul_batched():
    a = np.random.RandomState(0).randn(2, 3, 4).astype(np.float32)
    b = np.random.RandomState(1).randn(4, 5).astype(np.float32)
    close(nx.array(a) @ nx.array(b), a @ b, rtol=1e-5, atol=1e-5)


def test_bitwise_operators_on_ints():
    a, b = np.array([12, 10, -3], dtype=np.int32), np.array([10, 6, 5], dtype=np.int32)
    x, y = nx.array(a), nx.array(b)
    assert (x & y).tolist() == (a & b).tolist()
    assert (x | y).tolist() == (a | b).tolist()
    assert (x ^ y).tolist() == (a ^ b).tolist()
    assert (~x).tolist() == (~a).tolist()


def test_bitwise_operators_on_bools():
    a, b = np.array([True, True, False]), np.array([True, False, False])
    x, y = nx.array(a), nx.array(b)
    assert (x & y).tolist() == (a & b).tolist()
    assert (x | y).tolist() == (a | b).tolist()
    assert (x ^ y).tolist() == (a ^ b).tolist()
    assert (~x).tolist() == (~a).tolist()
    assert (~x).dtype == nx.bool


def test_comparisons_return_bool():
    r = nx.array([1.0, 2.0]) < 1.5
    assert r.dtype == nx.bool and r.tolist() == [True, False]


def test_uint8_wraps_like_numpy():
    assert (nx.array(np.array([255], np.uint8)) + 1).tolist() == [0]


def test_broadcasting_operator():
    a = np.arange(3, dtype=np.float32)[:, None]
    b = np.arange(4, dtype=np.float32)[None, :]
    close(nx.array(a) + nx.array(b), a + b)


# ---------------------------------------------------------------- indexing

X34 = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("idx", [
    1, -1, slice(1, 3), slice(None, None, 2), slice(None, None, -1), (slice(None), None),
    (Ellipsis, 0), (1, 2), (slice(None), 1), (None, 1), (Ellipsis, None), (-2, slice(1, None)),
], ids=repr)
def test_basic_indexing(idx):
    got = nx.array(X34)[idx]
    want = X34[idx]
    assert got.shape == want.shape
    close(got, want)


def test_integer_array_indexing_nx():
    got = nx.array(X34)[nx.array([2, 0, 2])]
    close(got, X34[[2, 0, 2]])


def test_integer_array_indexing_numpy_index():
    got = nx.array(X34)[np.array([1, 2])]
    close(got, X34[[1, 2]])


def test_integer_array_indexing_negative():
    close(nx.array(X34)[nx.array([-1])], X34[[-1]])


def test_integer_array_indexing_2d_pairs():
    r, c = np.array([0, 2]), np.array([3, 1])
    close(nx.array(X34)[nx.array(r), nx.array(c)], X34[r, c])


def test_integer_array_indexing_second_axis():
    close(nx.array(X34)[:, nx.array([3, 0])], X34[:, [3, 0]])


def test_index_out_of_bounds_raises_index_error():
    x = nx.array([1.0, 2.0, 3.0])
    with pytest.raises(IndexError) as ei:
        x[10]
    assert isinstance(ei.value, rune.RuneError)


def test_at_set():
    x = nx.array([1.0, 2.0, 3.0])
    y = x.at[1].set(9.0)
    assert y.tolist() == [1.0, 9.0, 3.0]
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_at_add():
    x = nx.array([1.0, 2.0, 3.0])
    assert x.at[2].add(10.0).tolist() == [1.0, 2.0, 13.0]


def test_at_set_slice_and_2d():
    y = nx.array(X34).at[1:, 2].set(-1.0)
    want = X34.copy()
    want[1:, 2] = -1.0
    close(y, want)


def test_at_set_array_value():
    y = nx.array(X34).at[0].set(nx.array([9.0, 8.0, 7.0, 6.0]))
    want = X34.copy()
    want[0] = [9, 8, 7, 6]
    close(y, want)


def test_at_add_duplicate_indices_accumulate():
    y = nx.zeros((3,)).at[nx.array([0, 0, 2])].add(1.0)
    assert y.tolist() == [2.0, 0.0, 1.0]


def test_at_set_negative_index():
    assert nx.array([1, 2, 3]).at[-1].set(7).tolist() == [1, 2, 7]


def test_at_keeps_dtype():
    x = nx.array([1, 2, 3], dtype=nx.int8)
    assert x.at[0].set(5).dtype == nx.int8


# ---------------------------------------------------------------- DLPack

def test_dlpack_to_numpy():
    x = nx.array([1.0, 2.0, 3.0])
    a = np.from_dlpack(x)
    assert a.dtype == np.float32 and a.tolist() == [1.0, 2.0, 3.0]


def test_dlpack_device_is_cpu():
    x = nx.array([1.0])
    assert tuple(x.__dlpack_device__())[0] == 1  # kDLCPU


def test_from_dlpack_numpy():
    a = np.arange(5, dtype=np.int64)
    x = nx.from_dlpack(a)
    assert isinstance(x, nx.Array)
    assert x.dtype == nx.int64 and x.tolist() == [0, 1, 2, 3, 4]


def test_dlpack_torch_roundtrip():
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.float64)
    x = nx.from_dlpack(t)
    assert x.dtype == nx.float64 and x.tolist() == [0.0, 1.0, 2.0, 3.0]
    back = torch.from_dlpack(nx.array([1.0, 2.0]))
    assert back.dtype == torch.float32 and back.tolist() == [1.0, 2.0]
