"""rune.nx's index tricks (rune/nx/index_tricks.py) beyond the op table: bad input is a rune error
naming the function and the argument; data-dependent shapes are refused under jit without size=
(naming the argument); the NumPy forms the table's samples leave out; np.<name> on traced values."""
import numpy as np
import pytest

import rune
from rune import nx

A = np.arange(12.0).reshape(3, 4)


def _x():
    return nx.asarray(A)


BAD_INPUT = [
    (lambda: nx.diag(nx.ones((2, 2, 2))), rune.ShapeError, "diag: x must be 1-d or 2-d"),
    (lambda: nx.diagonal(_x(), 0, 1, -1), rune.ArgumentError, "diagonal: axis1 and axis2"),
    (lambda: nx.diagonal(_x(), 0, 0, 5), rune.AxisError, "diagonal: axis 5"),
    (lambda: nx.trace(_x(), out=np.zeros(())), rune.ArgumentError, "trace: out="),
    (lambda: nx.fill_diagonal(_x(), 1.0), rune.ArgumentError, "fill_diagonal: .*inplace=False"),
    (lambda: nx.fill_diagonal(nx.ones((2, 3, 2)), 1.0, inplace=False), rune.ShapeError, "fill_diagonal: beyond"),
    (lambda: nx.diag_indices_from(nx.ones((2, 3))), rune.ShapeError, "diag_indices_from: all the axes"),
    (lambda: nx.tril_indices_from(nx.ones(3)), rune.ShapeError, "tril_indices_from: x must be 2-d"),
    (lambda: nx.tri(-1), rune.ArgumentError, "tri: N and M must be non-negative"),
    (lambda: nx.tri(2.5), rune.ArgumentError, "tri: N must be an int"),
    (lambda: nx.diag(nx.ones(2), k=nx.ones(2, nx.int32)), rune.ArgumentError, "diag: k must be an int"),
    (lambda: nx.put(_x(), [0], [1.0]), rune.ArgumentError, "put: .*inplace=False"),
    (lambda: nx.put(_x(), [12], [1.0], mode="raise", inplace=False), rune.IndexingError, "put: ind holds"),
    (lambda: nx.put(_x(), [0.5], [1.0], inplace=False), rune.DTypeError, "put: ind must be integers"),
    (lambda: nx.put(_x(), [0], [1.0], mode="bogus", inplace=False), rune.ArgumentError, "put: mode"),
    (lambda: nx.put_along_axis(_x(), nx.zeros((3,), nx.int32), 1.0, 1, inplace=False), rune.ShapeError,
     "put_along_axis: indices of shape"),
    (lambda: nx.select([_x() > 1], [_x(), _x()]), rune.ArgumentError, "select: condlist and choicelist"),
    (lambda: nx.select([_x()], [_x()]), rune.DTypeError, r"select: condlist\[0\] must be a bool array"),
    (lambda: nx.choose(nx.asarray([0, 2]), [nx.ones(2), nx.ones(2)]), rune.IndexingError, "choose: x holds"),
    (lambda: nx.choose(nx.asarray([0.0]), [nx.ones(1)]), rune.DTypeError, "choose: x must be integers"),
    (lambda: nx.compress(nx.asarray([True] * 4), _x(), axis=0), rune.ShapeError, "compress: cond has 4 entries"),
    (lambda: nx.compress(nx.ones((2, 2), nx.bool), _x()), rune.ShapeError, "compress: cond must be 1-d"),
    (lambda: nx.extract(_x() > 3, _x(), size=-1), rune.ArgumentError, "extract: size must be non-negative"),
    (lambda: nx.ix_(nx.ones((2, 2), nx.int32)), rune.ShapeError, "ix_: argument 0 must be 1-d"),
    (lambda: nx.ix_(nx.ones(2)), rune.DTypeError, "ix_: argument 0 must be integers"),
    (lambda: nx.ravel_multi_index((nx.asarray([3]), nx.asarray([0])), (3, 4)), rune.IndexingError,
     r"ravel_multi_index: multi_index\[0\] holds 3"),
    (lambda: nx.ravel_multi_index((nx.asarray([1]),), (3, 4)), rune.ArgumentError,
     "ravel_multi_index: multi_index must be a sequence of 2"),
    (lambda: nx.ravel_multi_index((nx.asarray([1]), nx.asarray([1])), (3, 4), order="K"), rune.ArgumentError,
     "ravel_multi_index: order"),
    (lambda: nx.unravel_index(nx.asarray([1.0]), (3, 4)), rune.DTypeError, "unravel_index: indices must be"),
    (lambda: nx.unravel_index(nx.asarray([1]), (3, 0)), rune.ShapeError, "unravel_index: cannot unravel"),
    (lambda: nx.delete(_x(), 4, axis=1), rune.IndexingError, "delete: obj holds positions"),
    (lambda: nx.delete(_x(), [[0]], axis=1), rune.ShapeError, "delete: obj must be an int, a slice"),
    (lambda: nx.delete(_x(), [True, False], axis=1), rune.ShapeError, "delete: a bool mask obj"),
    (lambda: nx.insert(_x(), 5, 1.0, axis=1), rune.IndexingError, "insert: obj holds positions"),
    (lambda: rune.jit(lambda o: nx.insert(_x(), o, 1.0))(nx.ones(2)), rune.DTypeError,
     "insert: a traced obj must be an int or a 1-d array of ints"),
    (lambda: nx.insert(_x(), [0, 1], nx.ones((3, 3)), axis=1), rune.ShapeError, "insert: values of shape"),
    (lambda: nx.vander(_x()), rune.ShapeError, "vander: x must be 1-d"),
    (lambda: nx.vander(nx.ones(3), -1), rune.ArgumentError, "vander: N must be non-negative"),
    (lambda: nx.mask_indices(3, "triu"), rune.ArgumentError, "mask_indices: mask_func"),
]


@pytest.mark.parametrize("call,error,match", BAD_INPUT, ids=[m.split(":")[0] + "-" + str(i)
                                                             for i, (_, _, m) in enumerate(BAD_INPUT)])
def test_bad_input_is_a_rune_error_naming_the_function(call, error, match):
    with pytest.raises(error, match=match):
        call()


TRACED_SHAPES = [
    ("extract", lambda c, x: nx.extract(c, x), "extract: cond is a traced"),
    ("compress", lambda c, x: nx.compress(c[0], x, axis=1), "compress: cond is a traced"),
    ("flatnonzero", lambda c, x: nx.flatnonzero(c), "flatnonzero: x is a traced"),
    ("argwhere", lambda c, x: nx.argwhere(c), "argwhere: x is a traced"),
    ("delete", lambda c, x: nx.delete(x, nx.argmax(x[0]), axis=1), "delete: obj is traced.*assume_unique_indices"),
    ("choose", lambda c, x: nx.choose(nx.astype(c, nx.int32), [x, -x]), "choose: with mode='raise'"),
    ("ravel_multi_index", lambda c, x: nx.ravel_multi_index((nx.astype(c, nx.int32),) * 2, (3, 4)),
     r"ravel_multi_index: with mode='raise'.*multi_index\[0\] is traced"),
    ("mask_indices", lambda c, x: nx.mask_indices(3, nx.triu), "mask_indices: the mask mask_func returns is a traced"),
    ("tri", lambda c, x: nx.tri(nx.sum(nx.astype(c, nx.int32))), "tri: N must be a static int"),
]


@pytest.mark.parametrize("name,fn,match", TRACED_SHAPES, ids=[t[0] for t in TRACED_SHAPES])
def test_data_dependent_shapes_under_jit_need_size_or_a_static_argument(name, fn, match):
    cond = nx.asarray(A > 4)
    fn(cond, _x())  # eagerly it runs
    with pytest.raises(rune.ConcretizationError, match=match):
        rune.jit(fn)(cond, _x())


def test_size_runs_under_jit_with_numpy_values_padded():
    cond, x = nx.asarray(A % 3 == 1), _x()
    got = rune.jit(lambda c, v: nx.extract(c, v, size=6, fill_value=-1.0))(cond, x)
    np.testing.assert_array_equal(np.asarray(got), [1.0, 4.0, 7.0, 10.0, -1.0, -1.0])
    rows, cols = rune.jit(lambda: nx.mask_indices(3, nx.triu, 1, size=3))()
    np.testing.assert_array_equal(np.asarray(rows), np.mask_indices(3, np.triu, 1)[0])
    np.testing.assert_array_equal(np.asarray(cols), np.mask_indices(3, np.triu, 1)[1])
    # delete with a traced obj of distinct positions (JAX's assume_unique_indices)
    got = rune.jit(lambda v, i: nx.delete(v, i, axis=1, assume_unique_indices=True))(x, nx.asarray([3, 0]))
    np.testing.assert_array_equal(np.asarray(got), np.delete(A, [3, 0], axis=1))
    # insert's length depends on obj's shape alone: a traced obj, its positions clamped where NumPy raises
    got = rune.jit(lambda v, i: nx.insert(v, i, -1.0, axis=1))(x, nx.asarray(np.array([9, -9, 2, 2 ** 32])))
    np.testing.assert_array_equal(np.asarray(got), np.insert(A, [4, 0, 2, 4], -1.0, axis=1))


NUMPY_FORMS = [
    (lambda m: m.ix_(m.asarray([0, 2]), m.asarray([True, False, True, True])), "ix_ bool mask"),
    (lambda m: m.choose(m.asarray([2, 0, 1]), m.asarray(A[:, :3])), "choose array choices"),
    (lambda m: m.choose(m.asarray([[0, 1, 1, 0]]), [m.asarray(A), m.asarray(-A)]), "choose mode raise"),
    (lambda m: m.delete(m.asarray(A), m.asarray([True, False, False, True]), axis=1), "delete bool mask"),
    (lambda m: m.delete(m.asarray(A), slice(None, None, -2)), "delete negative slice"),
    (lambda m: m.insert(m.asarray(A), 2, m.asarray(np.ones((2, 3))), axis=1), "insert scalar obj, 2-d values"),
    (lambda m: m.insert(m.asarray(A), slice(0, 4, 2), m.asarray([5.0, 6.0]), axis=1), "insert slice obj"),
    (lambda m: m.insert(m.asarray(A), [], 1.0), "insert no positions"),
    (lambda m: m.select([m.asarray(A) > 3], [m.asarray(A)], m.asarray(np.full(4, -2.0))), "select array default"),
    (lambda m: m.diag(m.asarray(np.zeros(0)), 2), "diag of empty"),
    (lambda m: m.argwhere(m.asarray(np.float64(1.0))), "argwhere 0-d"),
    (lambda m: m.ravel_multi_index((m.asarray([2, 0]), m.asarray([1, 3])), (3, 4), order="F"), "ravel F"),
    (lambda m: m.ravel_multi_index((m.asarray(np.array([2 ** 40 + 1])), m.asarray(np.array([-1]))), (3, 4),
                                   mode="wrap"), "ravel wrap of int64 coordinates past int32"),
]


@pytest.mark.parametrize("fn,label", NUMPY_FORMS, ids=[f[1] for f in NUMPY_FORMS])
def test_numpy_forms_the_table_leaves_out(fn, label):
    got, want = fn(nx), fn(np)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w)
    else:
        assert got.shape == np.shape(want)
        np.testing.assert_array_equal(np.asarray(got), want)


def test_unravel_index_clamps_and_counts_negative_positions_from_the_end_as_jax():
    got = nx.unravel_index(nx.asarray([-1, 12, -13]), (3, 4))
    want = np.unravel_index(np.array([11, 11, 0]), (3, 4))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_put_and_put_along_axis_see_64_bit_positions_before_narrowing_them():
    big = np.array([2 ** 40 + 1, -(2 ** 33) - 2], np.int64)
    want = np.arange(5.0)
    want[big % 5] = [7.0, 8.0]  # (NumPy's own put wraps by repeated subtraction: hours for these)
    got = nx.put(nx.asarray(np.arange(5.0)), nx.asarray(big), nx.asarray([7.0, 8.0]), mode="wrap", inplace=False)
    np.testing.assert_array_equal(np.asarray(got), want)
    got = nx.put(nx.asarray(np.arange(5.0)), nx.asarray(big), nx.asarray([7.0, 8.0]), inplace=False)
    np.testing.assert_array_equal(np.asarray(got), np.arange(5.0))  # out of range: dropped
    got = nx.put_along_axis(_x(), nx.asarray(np.array([[2 ** 32], [1], [2 ** 32 + 2]])), 0.0, 1, inplace=False)
    want = A.copy()
    want[1, 1] = 0.0
    np.testing.assert_array_equal(np.asarray(got), want)


def test_put_drops_out_of_range_positions_by_default_and_put_along_axis_too():
    got = nx.put(nx.asarray(np.arange(5.0)), nx.asarray([1, 9, -7]), nx.asarray([7.0, 8.0, 9.0]), inplace=False)
    np.testing.assert_array_equal(np.asarray(got), [0.0, 7.0, 2.0, 3.0, 4.0])
    got = nx.put_along_axis(_x(), nx.asarray([[0], [4], [-5]]), 9.0, 1, inplace=False)
    want = A.copy()
    want[0, 0] = 9.0
    np.testing.assert_array_equal(np.asarray(got), want)
    # mode="clip" clamps them instead
    got = nx.put_along_axis(_x(), nx.asarray([[1], [5], [-9]]), 0.0, 1, inplace=False, mode="clip")
    want = A.copy()
    np.put_along_axis(want, np.array([[1], [3], [0]]), 0.0, 1)
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("name,call", [
    ("diag", lambda x: np.diag(x, 1)), ("diagflat", lambda x: np.diagflat(x)),
    ("diagonal", lambda x: np.diagonal(x, -1)), ("trace", lambda x: np.trace(x, 1)),
    ("select", lambda x: np.select([x > 3, x < 1], [x, -x], 0.5)),
    ("extract", lambda x: np.extract(A > 4, x)), ("compress", lambda x: np.compress([True, False, True], x, axis=0)),
    ("choose", lambda x: np.choose(np.array([0, 1, 1, 0]), [x, 2 * x], mode="wrap")),
    ("vander", lambda x: np.vander(x[0], 3)), ("tril_indices_from", lambda x: np.tril_indices_from(x, 1)),
    ("delete", lambda x: np.delete(x, [0, 2], axis=1)), ("insert", lambda x: np.insert(x, 1, 5.0, axis=0)),
    ("delete obj by name", lambda x: np.delete(x, obj=1)),
])
def test_numpy_functions_on_traced_values_run_rune_s(name, call):
    want = call(A)
    got = rune.jit(call)(_x())
    for g, w in zip(*((got, want) if isinstance(want, tuple) else ((got,), (want,)))):
        np.testing.assert_allclose(np.asarray(g), w)
