"""rune's public API against its documented public API (README, docs/): ops.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import math

import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, close


# ---------------------------------------------------------------- ops

POS = np.array([0.3, 0.7, 1.5, 2.0], dtype=np.float32)
ANY = np.array([-1.7, -0.3, 0.0, 0.4, 2.6], dtype=np.float32)
UNIT = np.array([-0.9, -0.2, 0.0, 0.5, 0.8], dtype=np.float32)

_erf = np.vectorize(math.erf)

UNARY = [
    ("exp", np.exp, ANY), ("log", np.log, POS), ("log1p", np.log1p, POS), ("expm1", np.expm1, ANY),
    ("sqrt", np.sqrt, POS), ("rsqrt", lambda v: 1 / np.sqrt(v), POS), ("sin", np.sin, ANY),
    ("cos", np.cos, ANY), ("tan", np.tan, UNIT), ("tanh", np.tanh, ANY), ("sinh", np.sinh, ANY),
    ("cosh", np.cosh, ANY), ("asin", np.arcsin, UNIT), ("acos", np.arccos, UNIT),
    ("atan", np.arctan, ANY), ("erf", lambda v: _erf(v.astype(np.float64)), ANY),
    ("sigmoid", lambda v: 1 / (1 + np.exp(-v)), ANY), ("floor", np.floor, ANY),
    ("ceil", np.ceil, ANY), ("round", np.round, ANY), ("sign", np.sign, ANY), ("abs", np.abs, ANY),
    ("isnan", np.isnan, np.array([1.0, np.nan, np.inf], np.float32)),
    ("isfinite", np.isfinite, np.array([1.0, np.nan, np.inf, -np.inf], np.float32)),
    ("negative", np.negative, ANY), ("logical_not", np.logical_not, np.array([True, False])),
    ("invert", np.invert, np.array([0, 5, -3], np.int32)),
]


@pytest.mark.parametrize("name,ref,data", UNARY, ids=[u[0] for u in UNARY])
def test_unary_op(name, ref, data):
    got = getattr(nx, name)(nx.array(data))
    want = ref(data)
    if want.dtype == np.float64 and data.dtype == np.float32:
        want = want.astype(np.float32)
    assert A(got).dtype == want.dtype, (A(got).dtype, want.dtype)
    close(got, want, rtol=2e-6, atol=2e-6)


def test_round_half_to_even():
    assert nx.round(nx.array([0.5, 1.5, 2.5, -0.5, -1.5])).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]


def test_unary_float64_precision():
    x = np.array([0.1, 0.7, 1.3])
    np.testing.assert_allclose(A(nx.exp(nx.array(x))), np.exp(x), rtol=1e-14)
    assert nx.sin(nx.array(x)).dtype == nx.float64


BINARY = [
    ("atan2", np.arctan2), ("maximum", np.maximum), ("minimum", np.minimum),
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
    ("divide", np.divide), ("power", np.power), ("floor_divide", np.floor_divide), ("remainder", np.remainder),
    ("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
    ("less_equal", np.less_equal), ("greater", np.greater), ("greater_equal", np.greater_equal),
]


@pytest.mark.parametrize("name,ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary_op(name, ref):
    a = np.array([0.5, -1.5, 2.0, 3.0], np.float32)
    b = np.array([1.5, 0.5, -2.0, 2.0], np.float32)
    if name == "power":
        a = np.abs(a)
    got = getattr(nx, name)(nx.array(a), nx.array(b))
    want = ref(a, b)
    assert A(got).dtype == want.dtype
    close(got, want)


@pytest.mark.parametrize("name,ref", [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                                      ("logical_xor", np.logical_xor), ("bitwise_and", np.bitwise_and),
                                      ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor)])
def test_logical_bitwise_functions(name, ref):
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    assert getattr(nx, name)(nx.array(a), nx.array(b)).tolist() == ref(a, b).tolist()
    if name.startswith("bitwise"):
        i, j = np.array([12, 7], np.int32), np.array([10, 3], np.int32)
        assert getattr(nx, name)(nx.array(i), nx.array(j)).tolist() == ref(i, j).tolist()


def test_clip():
    close(nx.clip(nx.array(ANY), -0.5, 1.0), np.clip(ANY, -0.5, 1.0))


def test_where():
    c = np.array([True, False, True])
    a, b = np.array([1.0, 2.0, 3.0], np.float32), np.array([9.0, 8.0, 7.0], np.float32)
    close(nx.where(nx.array(c), nx.array(a), nx.array(b)), np.where(c, a, b))


def test_where_broadcasts():
    c = np.array([[True], [False]])
    close(nx.where(nx.array(c), nx.array([1.0, 2.0]), 0.0), np.where(c, np.array([1.0, 2.0]), 0.0))


def test_astype_between_all_dtypes():
    x = nx.array([0.0, 1.0, 2.0])
    for dt in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint32", "float16",
               "bfloat16", "float32", "float64"]:
        y = x.astype(getattr(nx, dt))
        assert y.dtype == getattr(nx, dt)
        assert A(y).astype(np.float64).tolist() == ([0.0, 1.0, 1.0] if dt == "bool" else [0.0, 1.0, 2.0])


# ---------------------------------------------------------------- reductions

RX = np.array([[1.0, 2.0, 3.0, 4.0], [0.5, 4.5, 2.5, 1.5], [3.0, 1.0, 2.0, 0.25]])
REDUCTIONS = [("sum", np.sum), ("mean", np.mean), ("prod", np.prod), ("max", np.max),
              ("min", np.min), ("var", np.var), ("std", np.std)]


def _lse(x, axis=None, keepdims=False):
    import scipy.special
    return scipy.special.logsumexp(x, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("name,ref", REDUCTIONS + [("logsumexp", _lse)], ids=[r[0] for r in REDUCTIONS] + ["logsumexp"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), (-1, False),
                                           ((0, 1), False), (None, True)])
def test_reduction(name, ref, axis, keepdims):
    got = getattr(nx, name)(nx.array(RX), axis=axis, keepdims=keepdims)
    want = ref(RX, axis=axis, keepdims=keepdims)
    assert got.shape == np.shape(want)
    close(got, want, rtol=1e-12)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_arg_reduction(name, axis):
    got = getattr(nx, name)(nx.array(RX), axis=axis)
    want = getattr(np, name)(RX, axis=axis)
    assert A(got).tolist() == want.tolist()
    assert np.issubdtype(A(got).dtype, np.integer)


def test_argmax_first_occurrence():
    assert nx.argmax(nx.array([1.0, 3.0, 3.0])).item() == 1


@pytest.mark.parametrize("name", ["any", "all"])
def test_bool_reductions(name):
    b = np.array([[True, False, True], [True, True, True]])
    assert getattr(nx, name)(nx.array(b)).item() == getattr(np, name)(b)
    assert getattr(nx, name)(nx.array(b), axis=1).tolist() == getattr(np, name)(b, axis=1).tolist()
    assert getattr(nx, name)(nx.array(b), axis=0, keepdims=True).shape == (1, 3)


def test_reductions_positional_axis():
    close(nx.sum(nx.array(RX), 0), RX.sum(0), rtol=1e-12)


def test_var_ddof():
    close(nx.var(nx.array(RX), ddof=1), np.var(RX, ddof=1), rtol=1e-12)
    close(nx.std(nx.array(RX), axis=0, ddof=1), np.std(RX, axis=0, ddof=1), rtol=1e-12)


def test_sum_float32_keeps_dtype():
    assert nx.sum(nx.ones((4,))).dtype == nx.float32
    assert nx.mean(nx.ones((4,), dtype=nx.float16)).dtype == nx.float16


# ---------------------------------------------------------------- shape ops

S = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_reshape_fn():
    close(nx.reshape(nx.array(S), (6, -1)), S.reshape(6, -1))


def test_transpose_default_reverses():
    close(nx.transpose(nx.array(S)), S.transpose())


def test_transpose_axes():
    close(nx.transpose(nx.array(S), (1, 0, 2)), S.transpose(1, 0, 2))


def test_expand_dims():
    assert nx.expand_dims(nx.array(S), 0).shape == (1, 2, 3, 4)
    assert nx.expand_dims(nx.array(S), -1).shape == (2, 3, 4, 1)


def test_squeeze():
    x = nx.zeros((1, 3, 1))
    assert nx.squeeze(x).shape == (3,)
    assert nx.squeeze(x, axis=0).shape == (3, 1)


def test_broadcast_to():
    close(nx.broadcast_to(nx.array([1.0, 2.0]), (3, 2)), np.broadcast_to([1.0, 2.0], (3, 2)))


def test_concatenate():
    a, b = S[:, :1], S[:, 1:]
    close(nx.concatenate([nx.array(a), nx.array(b)], axis=1), np.concatenate([a, b], axis=1))
    close(nx.concatenate([nx.array(S), nx.array(S)]), np.concatenate([S, S]))


def test_stack():
    a, b = np.ones(3, np.float32), np.zeros(3, np.float32)
    close(nx.stack([nx.array(a), nx.array(b)]), np.stack([a, b]))
    close(nx.stack([nx.array(a), nx.array(b)], axis=1), np.stack([a, b], axis=1))


def test_split_sections():
    parts = nx.split(nx.arange(6), 3)
    assert len(parts) == 3 and [p.tolist() for p in parts] == [[0, 1], [2, 3], [4, 5]]


def test_split_indices_and_axis():
    parts = nx.split(nx.arange(6), [1, 4])
    assert [p.tolist() for p in parts] == [[0], [1, 2, 3], [4, 5]]
    parts = nx.split(nx.array(S), 2, axis=2)
    assert [p.shape for p in parts] == [(2, 3, 2), (2, 3, 2)]


def test_flip():
    close(nx.flip(nx.array(S), axis=1), np.flip(S, axis=1))
    close(nx.flip(nx.array(S)), np.flip(S))


def test_pad():
    x = np.array([1.0, 2.0], np.float32)
    close(nx.pad(nx.array(x), ((1, 2),)), np.pad(x, ((1, 2),)))
    close(nx.pad(nx.array(x), 1), np.pad(x, 1))
    m = np.ones((2, 2), np.float32)
    close(nx.pad(nx.array(m), ((1, 0), (0, 2))), np.pad(m, ((1, 0), (0, 2))))


def test_pad_constant_values():
    x = np.array([1.0, 2.0], np.float32)
    close(nx.pad(nx.array(x), 1, constant_values=9.0), np.pad(x, 1, constant_values=9.0))


def test_take():
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    close(nx.take(nx.array(m), nx.array([2, 0]), axis=1), np.take(m, [2, 0], axis=1))
    close(nx.take(nx.array(m), nx.array([5, 1])), np.take(m, [5, 1]))


def test_dynamic_slice():
    m = np.arange(20, dtype=np.float32).reshape(4, 5)
    close(nx.dynamic_slice(nx.array(m), (1, 2), (2, 3)), m[1:3, 2:5])


def test_dynamic_slice_clamps_start_like_jax():
    close(nx.dynamic_slice(nx.arange(5), (4,), (2,)), [3, 4])


def test_dynamic_slice_traced_start_under_jit():
    g = rune.jit(lambda x, i: nx.dynamic_slice(x, (i,), (2,)))
    close(g(nx.arange(6), nx.array(3)), [3, 4])


def test_dynamic_update_slice():
    m = np.zeros((3, 4), np.float32)
    u = np.ones((2, 2), np.float32)
    want = m.copy()
    want[1:3, 1:3] = 1
    close(nx.dynamic_update_slice(nx.array(m), nx.array(u), (1, 1)), want)


def test_dot_einsum_outer():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.array([1.0, 2.0, 3.0], np.float32)
    close(nx.matmul(nx.array(a), nx.array(b)), a @ b)
    close(nx.dot(nx.array(a), nx.array(b)), a.dot(b))
    close(nx.dot(nx.array(v), nx.array(v)), v.dot(v))
    close(nx.einsum("ij,jk->ik", nx.array(a), nx.array(b)), a @ b)
    close(nx.einsum("i,i->", nx.array(v), nx.array(v)), 14.0)
    close(nx.einsum("ij->ji", nx.array(a)), a.T)
    close(nx.outer(nx.array(v), nx.array(v)), np.outer(v, v))


def test_softmax_default_last_axis():
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0]])
    e = np.exp(x - x.max(-1, keepdims=True))
    sm = e / e.sum(-1, keepdims=True)
    close(nx.softmax(nx.array(x)), sm, rtol=1e-12)
    close(nx.log_softmax(nx.array(x)), np.log(sm), rtol=1e-12)
    e0 = np.exp(x) / np.exp(x).sum(0, keepdims=True)
    close(nx.softmax(nx.array(x), axis=0), e0, rtol=1e-12)
