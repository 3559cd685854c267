"""Small NumPy/JAX API forms: pad widths, random permutation and categorical."""
import numpy as np
import pytest

import rune
from rune import nx

from compiled import precompiled


# ---------------------------------------------------------------- pad

PAD_CASES = [
    ((3,), 2), ((3,), (1, 2)), ((3,), (2,)), ((3,), ((1, 2),)), ((3,), [[0, 4]]),
    ((2, 3), 1), ((2, 3), (1, 2)), ((2, 3), ((1, 2),)), ((2, 3), ((1, 0), (0, 3))), ((2, 3), [[1], [2]]),
    ((2, 1, 2), (0, 1)), ((3,), np.array([1, 2])), ((3,), np.int64(1)),
]


def _pad_input(shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)


def _padded(pad_width):
    return lambda a: nx.pad(a, pad_width, constant_values=7.0)


@pytest.mark.parametrize("shape,pad_width", PAD_CASES)
def test_pad_accepts_numpys_pad_width_forms(shape, pad_width):
    x = _pad_input(shape)
    expected = np.pad(x, pad_width, constant_values=7.0)
    got = nx.pad(nx.asarray(x), pad_width, constant_values=7.0)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(got), expected)
    jitted = rune.jit(_padded(pad_width))(nx.asarray(x))
    np.testing.assert_array_equal(np.asarray(jitted), expected)


@pytest.mark.parametrize("pad_width", [(1, 2, 3), ((1, 2), (3, 4)), (-1,), (1.5,), ((1, 2), 3), "a"])
def test_pad_rejects_widths_numpy_rejects(pad_width):
    x = np.arange(3.0)
    with pytest.raises(Exception):
        np.pad(x, pad_width)
    with pytest.raises(rune.ShapeError, match=r"pad: pad_width must be .* of shape \(3,\)"):
        nx.pad(nx.asarray(x), pad_width)


# ---------------------------------------------------------------- random.permutation

def _chi_square(counts, expected):
    counts = np.asarray(counts, np.float64)
    return float(np.sum((counts - expected) ** 2 / expected))


PERMUTATION_SIZES = [0, 1, 2, 3, 7, 8, 33, 1000]


def _permutation(n):
    return lambda k: nx.random.permutation(k, n)


_kernels = precompiled(lambda: [*((_padded(w), (nx.asarray(_pad_input(shape)),)) for shape, w in PAD_CASES),
                                *((_permutation(n), (nx.random.key(n),)) for n in PERMUTATION_SIZES)])


@pytest.mark.parametrize("n", PERMUTATION_SIZES)
def test_permutation_of_an_int_is_a_permutation(n):
    key = nx.random.key(n)
    p = nx.random.permutation(key, n)
    assert p.dtype == nx.int32 and p.shape == (n,)
    assert sorted(np.asarray(p).tolist()) == list(range(n))
    np.testing.assert_array_equal(np.asarray(nx.random.permutation(key, n)), np.asarray(p))  # per key
    np.testing.assert_array_equal(np.asarray(rune.jit(_permutation(n))(key)),
                                  np.asarray(p))


def test_permutations_are_uniform_across_keys():
    keys = nx.random.split(nx.random.key(7), 6000)
    perms = np.asarray(rune.vmap(lambda k: nx.random.permutation(k, 3))(keys))
    assert (np.sort(perms, axis=1) == np.arange(3)).all()
    codes = perms[:, 0] * 3 + perms[:, 1]  # which of the 6 orders
    counts = np.bincount(codes, minlength=9)[[1, 2, 3, 5, 6, 7]]
    assert counts.sum() == 6000
    assert _chi_square(counts, 1000.0) < 25.0  # 5 degrees of freedom: p < 1e-4
    # Each element of a longer one lands at each position equally often.
    perms = np.asarray(rune.vmap(lambda k: nx.random.permutation(k, 12))(keys))
    positions = np.argmax(perms == 5, axis=1)
    assert _chi_square(np.bincount(positions, minlength=12), 500.0) < 40.0  # 11 degrees of freedom


def test_permutation_of_an_array_along_an_axis():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    key = nx.random.key(3)
    for axis in (0, 1, -1):
        got = np.asarray(nx.random.permutation(key, nx.asarray(x), axis=axis))
        order = np.asarray(nx.random.permutation(key, x.shape[axis]))
        np.testing.assert_array_equal(got, np.take(x, order, axis=axis))  # one order for every slice
    rows = np.asarray(nx.random.permutation(key, nx.asarray(x[0]), axis=1, independent=True))
    assert (np.sort(rows, axis=1) == x[0]).all()
    orders = {tuple(np.argsort(r)) for r in rows}
    assert len(orders) > 1  # each row drew its own order
    cols = np.asarray(nx.random.permutation(key, nx.asarray(x), axis=1, independent=True))
    assert (np.sort(cols, axis=1) == x).all()
    jitted = rune.jit(lambda k, a: nx.random.permutation(k, a, axis=1, independent=True))(key, nx.asarray(x))
    np.testing.assert_array_equal(np.asarray(jitted), cols)


def test_permutation_errors():
    key = nx.random.key(0)
    with pytest.raises(rune.ShapeError, match="non-negative"):
        nx.random.permutation(key, -1)
    with pytest.raises(rune.UsageError, match="int or an array"):
        nx.random.permutation(key, 2.5)
    with pytest.raises(rune.ShapeError, match="axis 2 is out of range"):
        nx.random.permutation(key, nx.ones((2, 2)), axis=2)


# ---------------------------------------------------------------- random.categorical

PROBS = np.array([0.1, 0.2, 0.3, 0.4])


def test_categorical_frequencies_follow_softmax():
    logits = np.log(PROBS).astype(np.float32) + 3.0  # a shift changes nothing
    draws = np.asarray(nx.random.categorical(nx.random.key(11), logits, shape=(20000,)))
    assert draws.dtype == np.int32 and draws.shape == (20000,)
    assert _chi_square(np.bincount(draws, minlength=4), 20000 * PROBS) < 25.0  # 3 dof: p < 1e-4
    keys = nx.random.split(nx.random.key(12), 20000)
    mapped = np.asarray(rune.vmap(lambda k: nx.random.categorical(k, logits))(keys))
    assert _chi_square(np.bincount(mapped, minlength=4), 20000 * PROBS) < 25.0
    jitted = rune.jit(lambda k: nx.random.categorical(k, logits, shape=(20000,)))(nx.random.key(11))
    np.testing.assert_array_equal(np.asarray(jitted), draws)


def test_categorical_axis_and_shape():
    # Two distributions along axis 0: column j is [p_j, 1 - p_j] made certain.
    logits = np.array([[0.0, -np.inf, 0.0], [-np.inf, 0.0, -np.inf]], np.float32)
    key = nx.random.key(5)
    np.testing.assert_array_equal(np.asarray(nx.random.categorical(key, logits, axis=0)), [0, 1, 0])
    many = nx.random.categorical(key, logits, axis=0, shape=(7, 3))
    assert many.shape == (7, 3)
    np.testing.assert_array_equal(np.asarray(many), np.tile([0, 1, 0], (7, 1)))
    rows = nx.random.categorical(key, np.log(PROBS)[None, :], shape=(4, 5))  # batch dim 1 broadcasts
    assert rows.shape == (4, 5) and set(np.asarray(rows).ravel()) <= {0, 1, 2, 3}
    with pytest.raises(rune.ShapeError, match="must end with dims"):
        nx.random.categorical(key, np.zeros((2, 4)), shape=(3,))
    bf16 = nx.random.categorical(key, nx.asarray(np.log(PROBS), dtype=nx.bfloat16), shape=(4000,))
    assert _chi_square(np.bincount(np.asarray(bf16), minlength=4), 4000 * PROBS) < 25.0
