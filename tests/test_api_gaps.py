"""Small NumPy/JAX API forms: pad widths, random permutation and categorical."""
import numpy as np
import pytest

import rune
from rune import nx


# ---------------------------------------------------------------- pad

PAD_CASES = [
    ((3,), 2), ((3,), (1, 2)), ((3,), (2,)), ((3,), ((1, 2),)), ((3,), [[0, 4]]),
    ((2, 3), 1), ((2, 3), (1, 2)), ((2, 3), ((1, 2),)), ((2, 3), ((1, 0), (0, 3))), ((2, 3), [[1], [2]]),
    ((2, 1, 2), (0, 1)), ((3,), np.array([1, 2])), ((3,), np.int64(1)),
]


@pytest.mark.parametrize("shape,pad_width", PAD_CASES)
def test_pad_accepts_numpys_pad_width_forms(shape, pad_width):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    expected = np.pad(x, pad_width, constant_values=7.0)
    got = nx.pad(nx.asarray(x), pad_width, constant_values=7.0)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(got), expected)
    jitted = rune.jit(lambda a: nx.pad(a, pad_width, constant_values=7.0))(nx.asarray(x))
    np.testing.assert_array_equal(np.asarray(jitted), expected)


@pytest.mark.parametrize("pad_width", [(1, 2, 3), ((1, 2), (3, 4)), (-1,), (1.5,), ((1, 2), 3), "a"])
def test_pad_rejects_widths_numpy_rejects(pad_width):
    x = np.arange(3.0)
    with pytest.raises(Exception):
        np.pad(x, pad_width)
    with pytest.raises(rune.ShapeError, match=r"pad: pad_width must be .* of shape \(3,\)"):
        nx.pad(nx.asarray(x), pad_width)
