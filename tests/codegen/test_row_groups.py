"""Row groups (rune/codegen/rows.py): consecutive C kernels over the same rows run
row by row. The grouping rule on row forms, and compiled stretches that group
(softmax, layer norm) or must not (a row reading another row's values), against
NumPy and, bit for bit, against the same kernels run whole."""
import numpy as np
import pytest

import rune
from rune import nx
from rune.codegen import rows
from rune.codegen.rows import Read, RowForm

pytestmark = pytest.mark.cc


def _form(extent, reads=(), writes=None, work=1):
    return RowForm(extent, tuple(reads), writes or {}, work)


def _read(buffer, stride, extents=(), strides=(), offset=0, dynamic=False):
    return Read(buffer, stride, tuple(extents), tuple(strides), offset, dynamic)


def test_kernels_over_the_same_rows_group_at_their_common_row_count():
    # a row maximum (512 rows of 64), then the quotients over 512 x 64 flattened to 32768 points
    maxima = _form(512, [_read(0, 64, [64], [1])], {1: 1})
    quotients = _form(512, [_read(0, 64, [64], [1]), _read(1, 1, [64], [0])], {2: 64})
    flat = _form(32768, [_read(2, 1)], {3: 1})   # 64 points per row of the group
    (g,) = rows.groups([maxima, quotients, flat], {1: 1, 2: 1, 3: 1})
    assert (g.start, g.stop, g.rows, g.chunks) == (0, 3, 512, (1, 1, 64))


@pytest.mark.parametrize("bad_read", [
    _read(1, 0, [64], [0]),           # every row reads row 0's maximum (a broadcast over rows)
    _read(1, 1, [64], [0], offset=1),  # the next row's maximum
    _read(1, -1, [64], [0], offset=511),  # the rows in reverse
    _read(1, 1, [64], [0], dynamic=True),  # a gather: read where the index says
])
def test_a_kernel_reading_another_rows_values_of_the_group_stays_whole(bad_read):
    maxima = _form(512, [_read(0, 64, [64], [1])], {1: 1})
    use = _form(512, [_read(0, 64, [64], [1]), bad_read], {2: 64})
    assert rows.groups([maxima, use], {1: 1, 2: 1}) == []


def test_no_group_over_few_rows_a_buffer_written_twice_or_a_kernel_that_runs_whole():
    a = _form(8, [_read(0, 64, [64], [1])], {1: 1})
    b = _form(8, [_read(1, 1, [64], [0])], {2: 64})
    assert rows.groups([a, b], {1: 1, 2: 1}) == []          # 8 rows: below MIN_ROWS
    a, b = _form(512, [], {1: 1}), _form(512, [_read(1, 1)], {1: 1})
    assert rows.groups([a, b], {1: 2}) == []                # two kernels store into buffer 1
    c = _form(512, [_read(9, 1)], {2: 1})
    assert rows.groups([a, None, c], {1: 1, 2: 1}) == []    # a kernel that runs whole splits them


def _whole(monkeypatch, fn, *args):
    """fn(*args) under jit with every row group refused: the kernels run whole."""
    with monkeypatch.context() as m:
        m.setattr(rows, "groups", lambda forms, writers: [])
        return np.asarray(rune.jit(fn)(*args))


def _np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_layer_norm(x):
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + 1e-5)


def _layer_norm(x):
    m = nx.mean(x, axis=-1, keepdims=True)
    return (x - m) / nx.sqrt(nx.mean((x - m) ** 2, axis=-1, keepdims=True) + 1e-5)


@pytest.mark.parametrize("fn, ref, shape", [
    (lambda x: nx.softmax(x, axis=-1), _np_softmax, (300, 64)),
    (lambda x: nx.softmax(x * 0.5, axis=-1), lambda x: _np_softmax(x * 0.5), (8, 4, 64, 64)),
    (_layer_norm, _np_layer_norm, (1000, 100)),
])
def test_grouped_stretches_match_numpy_and_the_whole_kernels_bit_for_bit(monkeypatch, fn, ref, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    f = rune.jit(fn)
    plan = f.plan(nx.asarray(x))
    assert any("(b, r);" in k.source for k in plan.kernels), "no row group formed"
    got = np.asarray(f(nx.asarray(x)))
    np.testing.assert_allclose(got, ref(x), rtol=2e-5, atol=1e-6)
    np.testing.assert_array_equal(got, _whole(monkeypatch, fn, nx.asarray(x)))


def test_a_row_reading_other_rows_results_stays_right():
    # each row divided by the sum of the row opposite it: a row group would read
    # sums not yet computed
    x = np.random.default_rng(1).random((256, 64)).astype(np.float32) + 0.5
    f = rune.jit(lambda v: nx.exp(v) / nx.flip(nx.sum(nx.exp(v), axis=1), axis=0)[:, None])
    want = np.exp(x) / np.exp(x).sum(axis=1)[::-1][:, None]
    np.testing.assert_allclose(np.asarray(f(nx.asarray(x))), want, rtol=2e-6)


def test_a_large_group_runs_its_rows_on_the_openmp_threads_a_small_one_on_one():
    x = nx.asarray(np.random.default_rng(2).standard_normal((4096, 1024)).astype(np.float32))
    plan = rune.jit(lambda v: nx.softmax(v, axis=-1)).plan(x)
    group = [k.source for k in plan.kernels if "(b, r);" in k.source]
    assert group and "#pragma omp parallel for\n  for (int64_t r = 0; r < 4096; r++)" in group[0]
    small = rune.jit(lambda v: nx.softmax(v, axis=-1)).plan(nx.ones((64, 64)))   # 16k points: one thread pays
    group = [k.source for k in small.kernels if "(b, r);" in k.source]
    assert group and "omp parallel" not in group[0]
