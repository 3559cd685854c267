"""rune.Array (and every tracer) has jax.Array's methods and properties, with NumPy's signatures and values,
eagerly and under jit."""
import numpy as np
import pytest

import rune
from rune import nx

A = np.arange(12.0).reshape(3, 4) - 5.25


def _pairs(x, a):
    """(rune result, NumPy result) of each method, on x (rune) and a (NumPy)."""
    return [
        (x.ravel(), a.ravel()), (x.swapaxes(0, 1), a.swapaxes(0, 1)), (x.copy(), a.copy()),
        (x.take(np.array([0, 2]), axis=1), a.take([0, 2], axis=1)), (x.take(np.array([5, 1])), a.take([5, 1])),
        (x.repeat(2, axis=0), a.repeat(2, axis=0)), (x.cumsum(1), a.cumsum(1)), (x.cumprod(), a.cumprod()),
        (x.sort(0), np.sort(a, 0)), (x.sort(), np.sort(a)), (x.argsort(0), a.argsort(0).astype(np.int32)),
        (x.conj(), a.conj()), (x.conjugate(), a.conjugate()), (x.real, a.real), (x.imag, a.imag),
        (x.diagonal(1), a.diagonal(1)), (x.trace(), a.trace()), (x.ptp(0), np.ptp(a, 0)),
        (x.ravel().searchsorted(0.5), a.ravel().searchsorted(0.5)),
        (x.compress(np.array([True, False, True]), 0), a.compress([True, False, True], 0)),
    ]


def test_methods_match_numpy_eagerly_and_under_jit():
    x = nx.asarray(A)
    for got, want in _pairs(x, A):
        want = np.asarray(want)
        assert got.shape == want.shape, (got, want)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    compiled = rune.jit(lambda t: [g for g, _ in _pairs(t, A)])(x)
    for got, (eager, _) in zip(compiled, _pairs(x, A)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(eager), rtol=1e-12)


def test_properties_are_numpys():
    for a in (A, np.zeros((2, 0), np.int8), np.ones((), np.complex64), np.ones(5, np.float16)):
        x = nx.asarray(a)
        assert (x.nbytes, x.itemsize, x.size, x.ndim) == (a.nbytes, a.itemsize, a.size, a.ndim)
    seen = []
    rune.jit(lambda t: seen.append((t.nbytes, t.itemsize, t.size, t.ndim)) or t)(nx.asarray(A))
    assert seen == [(A.nbytes, 8, 12, 2)]
    c = nx.asarray(A + 2j * A)
    np.testing.assert_array_equal(np.asarray(c.real), A)
    np.testing.assert_array_equal(np.asarray(c.imag), 2 * A)
    np.testing.assert_array_equal(np.asarray(c.conj()), A - 2j * A)


def test_nonzero_method_and_its_size_under_jit():
    a = np.array([0.0, 1.5, 0.0, -2.0])
    x = nx.asarray(a)
    np.testing.assert_array_equal(np.asarray(x.nonzero()[0]), a.nonzero()[0])
    got = rune.jit(lambda t: t.nonzero(size=3, fill_value=-1))(x)
    np.testing.assert_array_equal(np.asarray(got[0]), [1, 3, -1])


def test_view_reinterprets_bytes_eagerly_and_refuses_under_jit():
    x = nx.asarray(A)
    np.testing.assert_array_equal(np.asarray(x.view(np.int64)), A.view(np.int64))
    np.testing.assert_array_equal(np.asarray(x.view(np.uint8)), A.view(np.uint8))
    assert x.view() is x
    with pytest.raises(rune.ConcretizationError, match="view: the bits of a traced"):
        rune.jit(lambda t: t.view(np.int64))(x)


def test_method_arguments_numpy_accepts_but_rune_cannot_honour_are_errors():
    x = nx.asarray(A)
    with pytest.raises(rune.errors.ArgumentError, match="sort: order="):
        x.sort(order="f")
    with pytest.raises(rune.errors.ArgumentError, match="take: mode must be"):
        x.take(np.array([0]), mode="fill")
    with pytest.raises(rune.errors.ArgumentError, match="ravel: only order='C'"):
        x.ravel("F")
    with pytest.raises(rune.errors.UsageError, match="arr.flat .* use arr.ravel"):
        x.flat


def test_take_modes_and_numpy_take_on_a_rune_array():
    x = nx.asarray(A)
    idx = np.array([0, -1, 13, -14])
    np.testing.assert_array_equal(np.asarray(x.take(idx, mode="wrap")), A.take(idx, mode="wrap"))
    np.testing.assert_array_equal(np.asarray(x.take(idx, axis=1, mode="clip")), A.take(idx, axis=1, mode="clip"))
    # np.take calls the method with NumPy's default mode="raise": checked on concrete indices, as NumPy.
    np.testing.assert_array_equal(np.asarray(np.take(x, [0, -2], axis=1)), np.take(A, [0, -2], axis=1))
    with pytest.raises(rune.errors.IndexingError, match="take: index 4 is out of bounds for axis 1 with size 4"):
        np.take(x, [0, 4], axis=1)
    with pytest.raises(rune.errors.ArgumentError, match="take: mode='raise' checks the indices, which are traced"):
        rune.jit(lambda i: x.take(i, mode="raise"))(nx.asarray([0]))
