"""rune.nx's statistics family beyond the op table (tests/op_table_statistics.py): einsum_path's plan, the
data-dependent shapes under jit (refused without size=/length=, fixed with them), derivatives of order
statistics at known points, and bad input raising rune errors that name the function and the argument."""
import numpy as np
import pytest

import rune
from rune import nx


def test_einsum_path_is_numpys_plan_from_shapes_alone():
    shapes = ((2, 3), (3, 4), (4, 5))
    arrays = [np.ones(s) for s in shapes]
    for optimize in ("greedy", "optimal"):
        got = nx.einsum_path("ij,jk,kl->il", *[nx.ones(s) for s in shapes], optimize=optimize)
        want = np.einsum_path("ij,jk,kl->il", *arrays, optimize=optimize)
        assert got[0] == want[0] and got[1] == want[1]


def test_einsum_path_with_bad_subscripts_is_a_rune_error():
    with pytest.raises(rune.ArgumentError, match="einsum_path"):
        nx.einsum_path("ij,jk->il", nx.ones((2, 3)), nx.ones((3, 4)))


@pytest.mark.parametrize("call, fix", [
    (lambda x: nx.bincount(x), "length="),
    (lambda x: nx.unique(x), "size="),
    (lambda x: nx.union1d(x, x), "size="),
    (lambda x: nx.histogram(nx.astype(x, nx.float32), bins="auto"), "int number of bins"),
])
def test_data_dependent_shapes_under_jit_say_what_fixes_them(call, fix):
    x = nx.asarray(np.array([1, 3, 3, 0], np.int32))
    call(x)   # eagerly the values are known
    with pytest.raises(rune.ConcretizationError, match=fix):
        rune.jit(call)(x)


def test_unique_under_jit_with_size_pads_with_fill_value_and_zero_counts():
    x = nx.asarray(np.array([4, 1, 4, 2], np.int32))
    values, counts = rune.jit(lambda v: nx.unique(v, return_counts=True, size=5, fill_value=-1))(x)
    np.testing.assert_array_equal(np.asarray(values), [1, 2, 4, -1, -1])
    np.testing.assert_array_equal(np.asarray(counts), [1, 1, 2, 0, 0])


def test_median_gradient_splits_between_the_two_middle_elements():
    x = nx.asarray(np.array([1.0, 3.0, 2.0, 4.0]))
    np.testing.assert_array_equal(np.asarray(rune.grad(nx.median)(x)), [0.0, 0.5, 0.5, 0.0])
    # percentile 25 of 4 values: rank 0.75 between the 1st and 2nd smallest, weights 0.25 and 0.75
    g = rune.grad(lambda v: nx.percentile(v, 25.0))(x)
    np.testing.assert_allclose(np.asarray(g), [0.25, 0.0, 0.75, 0.0])


def test_nan_argextremes_of_a_slice_of_nans_only_are_minus_one():
    x = nx.asarray(np.array([[np.nan, np.nan], [np.nan, 2.0]]))
    np.testing.assert_array_equal(np.asarray(nx.nanargmax(x, axis=1)), [-1, 1])
    np.testing.assert_array_equal(np.asarray(nx.nanargmin(x, axis=1)), [-1, 1])


@pytest.mark.parametrize("call, error, words", [
    (lambda: nx.quantile(nx.ones(3), 1.5), rune.ArgumentError, "quantile: q must lie in"),
    (lambda: nx.percentile(nx.ones(3), -1), rune.ArgumentError, "percentile: q"),
    (lambda: nx.quantile(nx.ones(3), 0.5, method="cubic"), rune.ArgumentError, "quantile: method"),
    (lambda: nx.median(nx.ones((2, 2)), axis=2), rune.AxisError, "median: axis 2"),
    (lambda: nx.median(nx.asarray(np.ones(2, np.complex64))), rune.DTypeError, "median"),
    (lambda: nx.bincount(nx.asarray(np.array([1, -1]))), rune.ArgumentError, "bincount: x must be non-negative"),
    (lambda: nx.bincount(nx.ones((2, 2), nx.int32)), rune.ShapeError, "bincount: x must be 1-d"),
    (lambda: nx.bincount(nx.ones(2)), rune.DTypeError, "bincount: x must be non-negative integers"),
    (lambda: nx.digitize(nx.ones(3), np.array([0.0, 2.0, 1.0])), rune.ArgumentError, "digitize: bins must be mono"),
    (lambda: nx.histogram(nx.ones(3), bins=np.array([0.0, 2.0, 1.0])), rune.ArgumentError, "histogram: bin edges"),
    (lambda: nx.histogram(nx.ones(3), bins=0), rune.ArgumentError, "histogram: bins must be a positive int"),
    (lambda: nx.histogram(nx.ones(3), range=(2.0, 1.0)), rune.ArgumentError, "histogram: range"),
    (lambda: nx.partition(nx.ones(3), 3), rune.ArgumentError, "partition: kth 3 is out of range"),
    (lambda: nx.lexsort([nx.ones(3), nx.ones(4)]), rune.ShapeError, "lexsort: all keys"),
    (lambda: nx.cov(nx.ones((2, 2, 2))), rune.ShapeError, "cov: expected a 1-d or 2-d"),
    (lambda: nx.average(nx.ones((2, 3)), weights=nx.ones(3)), rune.ShapeError, "average: weights"),
    (lambda: nx.average(nx.ones((2, 3)), axis=0, weights=nx.ones(3)), rune.ShapeError, "average: weights"),
    (lambda: nx.convolve(nx.ones((2, 2)), nx.ones(2)), rune.ShapeError, "convolve: a must be 1-d"),
    (lambda: nx.correlate(nx.ones(3), nx.ones(0)), rune.ShapeError, "correlate: v cannot be empty"),
    (lambda: nx.convolve(nx.ones(3), nx.ones(2), mode="wide"), rune.ArgumentError, "convolve: mode"),
    (lambda: nx.unique(nx.ones(3), size=-1), rune.ArgumentError, "unique: size"),
    (lambda: nx.ptp(nx.ones(3, nx.bool)), rune.DTypeError, "ptp"),
    (lambda: nx.nanmax(nx.ones(3), out=np.ones(1)), rune.ArgumentError, "nanmax: out="),
])
def test_bad_input_is_a_rune_error_naming_the_function(call, error, words):
    with pytest.raises(error, match=words):
        call()


_X = np.array([0.3, -1.2, 2.5, 0.7, -0.4, 1.9, -2.2, 0.1])
_Y = np.array([1.1, 0.4, -0.9, 2.0, -1.5, 0.2, 0.8, -0.3])
# name -> (NumPy call on x (and y), the arguments it takes: "x" or "xy")
_DISPATCHED = {
    "average": (lambda x: np.average(x, weights=x * x), "x"), "median": (np.median, "x"),
    "percentile": (lambda x: np.percentile(x, 30), "x"),
    "quantile": (lambda x: np.quantile(x, [0.1, 0.5], method="lower"), "x"),
    "nanmedian": (np.nanmedian, "x"), "nanpercentile": (lambda x: np.nanpercentile(x, 30), "x"),
    "nanquantile": (lambda x: np.nanquantile(x, 0.3), "x"), "nansum": (np.nansum, "x"), "nanprod": (np.nanprod, "x"),
    "nanmax": (np.nanmax, "x"), "nanmin": (np.nanmin, "x"), "nanmean": (np.nanmean, "x"),
    "nanvar": (lambda x: np.nanvar(x, ddof=1), "x"), "nanstd": (np.nanstd, "x"), "nanargmax": (np.nanargmax, "x"),
    "nanargmin": (np.nanargmin, "x"), "nancumsum": (np.nancumsum, "x"), "nancumprod": (np.nancumprod, "x"),
    "ptp": (np.ptp, "x"), "cov": (np.cov, "xy"), "corrcoef": (np.corrcoef, "xy"),
    "partition": (lambda x: np.partition(x, 3), "x"), "argpartition": (lambda x: np.argpartition(x, 3), "x"),
    "lexsort": (lambda x, y: np.lexsort((x, y)), "xy"), "sort_complex": (np.sort_complex, "x"),
    "histogram": (lambda x: np.histogram(x, bins=4), "x"),
    "histogram_bin_edges": (lambda x: np.histogram_bin_edges(x, bins=4), "x"),
    "histogram2d": (lambda x, y: np.histogram2d(x, y, bins=3), "xy"),
    "histogramdd": (lambda x, y: np.histogramdd(np.stack([x, y], 1), bins=3)[0], "xy"),
    "digitize": (lambda x: np.digitize(x, np.array([-1.0, 0.0, 1.0])), "x"),
    "convolve": (np.convolve, "xy"), "correlate": (lambda x, y: np.correlate(x, y, "same"), "xy"),
}


@pytest.mark.parametrize("name", sorted(_DISPATCHED))
def test_numpy_functions_on_traced_values_run_rune_s(name):
    """np.<name>(tracer) inside a transformation runs rune.nx.<name> (no NumPy fallback, no refusal): the
    result under vmap equals NumPy's on each lane."""
    call, kinds = _DISPATCHED[name]
    args = {"x": (_X,), "xy": (_X, _Y)}[kinds]
    lanes = [tuple(np.roll(a, k) for a in args) for k in range(2)]
    got = rune.vmap(lambda *a: call(*a))(*[nx.asarray(np.stack(c)) for c in zip(*lanes)])
    for k, lane in enumerate(lanes):
        with np.errstate(all="ignore"):
            want = call(*lane)
        for g, w in zip(rune.tree.leaves(got), rune.tree.leaves(want)):
            np.testing.assert_allclose(np.asarray(g)[k], np.asarray(w), rtol=1e-12, atol=1e-12)



@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-10), (np.float32, 1e-4), (np.complex128, 1e-10)])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_long_convolutions_by_fft_match_numpy(dtype, tol, mode):
    """Past 128 taps convolve/correlate go through the FFT: the same values as NumPy's direct sums, and the
    same gradient as the direct path (checked against NumPy's correlation, its transpose)."""
    rng = np.random.default_rng(7)
    a, v = (rng.standard_normal(n).astype(dtype) for n in (300, 200))
    if np.dtype(dtype).kind == "c":
        a, v = a + 1j * rng.standard_normal(300), v - 1j * rng.standard_normal(200)
    scale = np.abs(np.convolve(a, v)).max()
    for rune_fn, np_fn in ((nx.convolve, np.convolve), (nx.correlate, np.correlate)):
        got = np.asarray(rune_fn(nx.asarray(a), nx.asarray(v), mode))
        assert got.dtype == np_fn(a, v, mode).dtype or np.dtype(dtype) == np.float32
        np.testing.assert_allclose(got, np_fn(a, v, mode), rtol=0, atol=tol * scale)
    if np.dtype(dtype) == np.float64:
        w = rng.standard_normal(np.convolve(a, v, mode).shape)
        g = rune.grad(lambda x: nx.sum(nx.convolve(x, nx.asarray(v), mode) * nx.asarray(w)))(nx.asarray(a))
        full_w = w if mode == "full" else np.pad(w, {"same": (99, 100), "valid": (199, 199)}[mode])
        np.testing.assert_allclose(np.asarray(g), np.correlate(full_w, v, "valid"), rtol=0, atol=1e-9 * scale)


@pytest.mark.cc
def test_large_eager_histogram_runs_compiled_with_numpy_s_counts_and_edges():
    """From 2**18 elements an eager histogram of equal bins runs as one compiled plan: NumPy's counts
    exactly (its edge corrections included) and its edges."""
    x = np.random.default_rng(3).standard_normal(1 << 18).astype(np.float32)
    for bins, rng in ((64, None), (7, (-1.0, 2.5))):
        hist, edges = nx.histogram(nx.asarray(x), bins, range=rng)
        want_hist, want_edges = np.histogram(x, bins, range=rng)
        np.testing.assert_array_equal(np.asarray(hist), want_hist)
        np.testing.assert_allclose(np.asarray(edges), want_edges, rtol=1e-6)
