"""Eager `nx` ops against NumPy, generated from the op table (tests/op_table.py).

For every sample of every case: the result is an `nx.Array` of NumPy's shape,
of the dtype rune's rules give (NumPy's, except where the table documents a
difference) and its traced program promises, with NumPy's values (exact for ints and bools, within the
table's tolerance for floats), and the inputs are left unchanged.
"""
import inspect
import warnings

import numpy as np
import pytest

import rune
from rune import nx

from op_table import (ALIASES, BY_NAME, F32, F64, I32, NOT_OPS, TABLE, BF16, F16, assert_traced_avals,
                      expected_dtype, is_float, is_inexact, is_precise, widest)


def _params():
    out = []
    for case in TABLE:
        for sample in case.samples:
            marks = [pytest.mark.xfail(strict=True, reason=f"BUG: {sample.bug}")] if sample.bug else []
            out.append(pytest.param(case, sample, id=f"{case.name}:{sample.id}", marks=marks))
    return out


def to_rune(args):
    return [nx.asarray(a) if isinstance(a, (np.ndarray, np.generic)) else a for a in args]


def _looser(a, b):
    return max(a[0], b[0]), max(a[1], b[1])


def assert_matches(case, sample, out, ref):
    ref = np.asarray(ref)
    assert isinstance(out, nx.Array), f"expected an nx.Array, got {type(out).__name__}"
    assert out.shape == ref.shape, f"shape {out.shape}, NumPy gives {ref.shape}"
    want = expected_dtype(case, sample, ref.dtype)
    assert out.dtype == want, (f"dtype {out.dtype}, expected {want} (NumPy gives {ref.dtype}; "
                               f"{case.dtype_note or 'same rules as NumPy'})")
    got = np.asarray(out)
    assert got.dtype == out.dtype
    if is_inexact(want) or is_inexact(ref.dtype):
        tol = case.tolerance(want) if is_inexact(want) else (0.0, 0.0)
        if is_inexact(ref.dtype):
            tol = _looser(tol, case.tolerance(ref.dtype))
        wide = widest(ref.dtype if ref.dtype.kind == "c" else want)
        np.testing.assert_allclose(got.astype(wide), ref.astype(wide), rtol=tol[0], atol=tol[1],
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("case,sample", _params())
def test_op_matches_numpy(case, sample):
    originals = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in sample.args]
    args = to_rune(sample.args)
    out = case.fn(*args, **sample.kwargs)
    if case.traced:
        assert_traced_avals(lambda *a: case.fn(*a, **sample.kwargs), args, out, "eager")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = case.ref(*sample.args, **sample.kwargs)
    if isinstance(ref, (list, tuple)):
        assert isinstance(out, (list, tuple)) and len(out) == len(ref)
        for o, r in zip(out, ref):
            assert_matches(case, sample, o, r)
    else:
        assert_matches(case, sample, out, ref)
    # Arrays are immutable: no op (at[].set, dynamic_update_slice, ...) writes into its inputs.
    for before, a in zip(originals, args):
        if isinstance(a, nx.Array):
            got = np.asarray(a)
            if is_inexact(got.dtype):
                got, before = got.astype(widest(got.dtype)), before.astype(widest(got.dtype))
            np.testing.assert_array_equal(got, before)


# ---------------------------------------------------------------- the table is complete

def _public_ops():
    names = []
    for name in dir(nx):
        if name.startswith("_") or name in NOT_OPS:
            continue
        value = getattr(nx, name)
        if callable(value) and not inspect.isclass(value) and not isinstance(value, np.dtype):
            names.append(name)
    return names


def test_table_lists_every_public_op():
    missing = [n for n in _public_ops() if ALIASES.get(n, n) not in BY_NAME and n not in BY_NAME]
    assert not missing, f"nx functions without an op-table entry: {missing}"


def test_numpy_names_are_the_same_functions():
    for alias, name in ALIASES.items():
        if alias != "arctan2":  # has its own table entry
            assert getattr(nx, alias) is getattr(nx, name), alias


def test_table_cases_have_samples_and_precise_ones_for_gradients():
    for case in TABLE:
        assert case.samples, case.name
        if case.grad:
            has_f64 = any(isinstance(a, np.ndarray) and is_precise(a.dtype) and a.size
                          for s in case.samples for a in s.args)
            assert has_f64, f"{case.name}: differentiable but no non-empty float64 or complex128 sample"


# ---------------------------------------------------------------- methods call the same functions

def test_array_methods_match_functions():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4)).astype(F32)
    x = nx.asarray(a)
    pairs = [
        (x.reshape(6, 4), a.reshape(6, 4)), (x.reshape((4, 6)), a.reshape(4, 6)),
        (x.transpose(1, 0, 2), a.transpose(1, 0, 2)), (x.transpose((2, 0, 1)), a.transpose(2, 0, 1)),
        (x.transpose(), a.transpose()), (x.flatten(), a.flatten()),
        (x[:1].squeeze(0), a[:1].squeeze(0)), (x.sum(1), a.sum(1)), (x.mean(keepdims=True), a.mean(keepdims=True)),
        (x.prod(axis=2), a.prod(axis=2)), (x.max(0), a.max(0)), (x.min(), a.min()),
        (x.argmax(2), a.argmax(2).astype(I32)), (x.argmin(), np.int32(a.argmin())),
        (x.any(0), a.any(0)), (x.all(), a.all()), (x.var(1, ddof=1), a.var(1, ddof=1)),
        (x.std(), a.std()), (x.clip(-0.5, 0.5), a.clip(-0.5, 0.5)), (x.astype(nx.float64), a.astype(F64)),
        (x[0].dot(x[1].T), a[0].dot(a[1].T)), (x.T, a.T), (+x, a), (abs(x), abs(a)),
    ]
    for got, want in pairs:
        want = np.asarray(want)
        assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    assert x.ndim == 3 and x.size == 24 and len(x) == 2
    assert [r.shape for r in x] == [(3, 4), (3, 4)]


# ---------------------------------------------------------------- creation and conversion

def test_creation_functions_match_numpy():
    cases = [
        (nx.zeros((2, 3)), np.zeros((2, 3), F32)), (nx.zeros(4, nx.int8), np.zeros(4, np.int8)),
        (nx.ones((0, 2)), np.ones((0, 2), F32)), (nx.ones((), dtype="float64"), np.ones((), F64)),
        (nx.full((2, 2), 7), np.full((2, 2), 7, I32)), (nx.full(3, 2.5), np.full(3, 2.5, F32)),
        (nx.full((2,), True), np.full((2,), True)), (nx.full((2,), 3, nx.float16), np.full((2,), 3, F16)),
        (nx.arange(5), np.arange(5, dtype=I32)), (nx.arange(1, 7, 2), np.arange(1, 7, 2, dtype=I32)),
        (nx.arange(0.0, 1.0, 0.25), np.arange(0, 1, 0.25, dtype=F32)),
        (nx.arange(5, dtype=nx.float64), np.arange(5, dtype=F64)), (nx.arange(0), np.arange(0, dtype=I32)),
        (nx.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=F32)),
        (nx.linspace(0, 1, 4, endpoint=False, dtype=nx.float64), np.linspace(0, 1, 4, endpoint=False)),
        (nx.eye(3), np.eye(3, dtype=F32)), (nx.eye(2, 3, 1, dtype=nx.int32), np.eye(2, 3, 1, dtype=I32)),
        (nx.identity(2), np.identity(2, dtype=F32)),
        (nx.scalar(3), np.array(3, I32)), (nx.scalar(2.5), np.array(2.5, F32)),
        (nx.scalar(True), np.array(True)), (nx.scalar(3, nx.uint8), np.array(3, np.uint8)),
        (nx.create(nx.float64, (2, 3), range(6)), np.arange(6, dtype=F64).reshape(2, 3)),
        (nx.create(nx.bfloat16, 2, [1.5, -2]), np.array([1.5, -2], BF16)),
        (nx.zeros_like(nx.ones((2, 3), nx.int16)), np.zeros((2, 3), np.int16)),
        (nx.ones_like(np.zeros(3, F64)), np.ones(3, F64)),
        (nx.full_like(nx.zeros(2), 4), np.full(2, 4, F32)),
        (nx.zeros_like(nx.zeros(2), dtype=nx.int32), np.zeros(2, I32)),
    ]
    for got, want in cases:
        assert isinstance(got, nx.Array)
        assert got.shape == want.shape and got.dtype == want.dtype, (got, want.dtype)
        np.testing.assert_array_equal(np.asarray(got), want)


def test_array_and_asarray_dtypes():
    # Python numbers take rune's defaults; NumPy arrays keep their dtype.
    assert nx.array([1, 2]).dtype == I32
    assert nx.array([1.0, 2]).dtype == F32
    assert nx.array([True, False]).dtype == np.bool_
    assert nx.array(1.5).dtype == F32 and nx.array(1.5).shape == ()
    assert nx.array([[1, 2], [3, 4]], dtype=nx.float64).dtype == F64
    for d in (np.int8, np.uint8, np.int64, np.float16, np.float64, BF16):
        assert nx.asarray(np.zeros(2, d)).dtype == np.dtype(d)
    assert nx.asarray(np.float64(2.0)).dtype == F64
    x = nx.asarray([1, 2, 3])
    assert nx.asarray(x) is x
    assert nx.asarray(x, dtype=nx.float32).dtype == F32
    # An Array never shares memory with the NumPy array it was made from.
    a = np.arange(3.0)
    y = nx.asarray(a)
    a[0] = 100.0
    assert y.tolist() == [0.0, 1.0, 2.0]
    # Lists of Arrays stack.
    z = nx.array([nx.asarray([1.0, 2.0]), nx.asarray([3.0, 4.0])])
    assert z.shape == (2, 2) and z.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_creation_errors():
    with pytest.raises(rune.ShapeError):
        nx.zeros((2, -1))
    with pytest.raises(rune.ShapeError):
        nx.create(nx.float32, (2, 2), [1, 2, 3])
    with pytest.raises(rune.DTypeError):
        nx.zeros(2, dtype="complex256")
    assert nx.zeros(2, dtype="complex64").dtype == nx.complex64
    with pytest.raises(TypeError):  # DTypeError is a TypeError
        nx.ones(2, dtype="float128")
