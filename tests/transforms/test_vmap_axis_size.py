"""rune.vmap's axis_size= (JAX's meaning): the mapped size where no argument is mapped, checked against the
mapped arguments otherwise."""
import numpy as np
import pytest

import rune
from rune import nx


def test_axis_size_maps_a_function_of_no_mapped_argument():
    x = np.arange(3.0)
    got = rune.vmap(lambda x: nx.sin(x) * 2, in_axes=None, axis_size=4)(nx.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.stack([np.sin(x) * 2] * 4), rtol=1e-12)
    assert rune.vmap(lambda: nx.ones(2), axis_size=3)().shape == (3, 2)
    jitted = rune.jit(rune.vmap(lambda x: x + 1, in_axes=None, axis_size=2))(nx.asarray(x))
    np.testing.assert_array_equal(np.asarray(jitted), np.stack([x + 1] * 2))


def test_axis_size_agrees_with_the_mapped_arguments_or_is_an_error():
    x = nx.asarray(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(rune.vmap(lambda r: r * 2, axis_size=2)(x)),
                                  np.arange(6.0).reshape(2, 3) * 2)
    with pytest.raises(rune.errors.ShapeError, match="axis_size: 5"):
        rune.vmap(lambda r: r, axis_size=5)(x)
    with pytest.raises(rune.errors.ShapeError, match="pass axis_size="):
        rune.vmap(lambda r: r, in_axes=None)(x)
    with pytest.raises(rune.errors.ShapeError, match="axis_size must be a non-negative int"):
        rune.vmap(lambda r: r, in_axes=None, axis_size=-1)(x)
