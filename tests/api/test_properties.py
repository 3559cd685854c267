"""Property tests (hypothesis): rune agrees with NumPy on generated shapes, indices and trees."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rune
from rune import nx

settings.register_profile("rune", max_examples=60, deadline=None)
settings.load_profile("rune")

finite = st.floats(-1e3, 1e3, allow_nan=False, width=64)


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4), st.data())
def test_broadcasting_binary_ops_match_numpy(shapes, data):
    a = data.draw(hnp.arrays(np.float64, shapes.input_shapes[0], elements=finite))
    b = data.draw(hnp.arrays(np.float64, shapes.input_shapes[1], elements=finite))
    x, y = nx.asarray(a), nx.asarray(b)
    for got, want in ((x + y, a + b), (x * y, a * b), (nx.maximum(x, y), np.maximum(a, b)),
                      (nx.where(x > y, x, y), np.where(a > b, a, b))):
        assert got.shape == shapes.result_shape
        np.testing.assert_array_equal(np.asarray(got), want)


def _slices(n):
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0))
    return st.builds(slice, bound, bound, step)


@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), st.data())
def test_basic_indexing_matches_numpy(shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    parts = [data.draw(st.one_of(_slices(n), st.integers(-n, n - 1))) for n in shape]
    for _ in range(data.draw(st.integers(0, 2))):  # new axes anywhere
        parts.insert(data.draw(st.integers(0, len(parts))), None)
    idx = tuple(parts)
    got = nx.asarray(a)[idx]
    np.testing.assert_array_equal(np.asarray(got), a[idx])
    # The functional update writes exactly where the index reads.
    updated = np.array(a)
    updated[idx] = -1
    np.testing.assert_array_equal(np.asarray(nx.asarray(a).at[idx].set(-1)), updated)


@given(hnp.array_shapes(min_dims=0, max_dims=4, max_side=4), st.data())
def test_reshape_transpose_and_reductions_match_numpy(shape, data):
    a = data.draw(hnp.arrays(np.float64, shape, elements=finite))
    x = nx.asarray(a)
    perm = data.draw(st.permutations(range(len(shape))))
    np.testing.assert_array_equal(np.asarray(nx.transpose(x, perm)), np.transpose(a, perm))
    np.testing.assert_array_equal(np.asarray(nx.reshape(x, (-1,))), a.reshape(-1))
    if a.ndim:
        axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
        np.testing.assert_allclose(np.asarray(nx.sum(x, axis)), a.sum(axis), rtol=1e-12, atol=1e-9)
        if a.shape[axis]:
            np.testing.assert_array_equal(np.asarray(nx.max(x, axis)), a.max(axis))


leaf = st.one_of(st.integers(), st.floats(allow_nan=False))
trees = st.recursive(leaf | st.none(), lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.tuples(kids, kids),
    st.dictionaries(st.text("abc", min_size=1, max_size=2), kids, max_size=3)), max_leaves=12)


@given(trees)
def test_tree_flatten_unflatten_round_trip(t):
    leaves, structure = rune.tree.flatten(t)
    assert rune.tree.unflatten(structure, leaves) == t
    assert rune.tree.structure(rune.tree.map(lambda v: v, t)) == structure
    assert structure.num_leaves == len(leaves)
