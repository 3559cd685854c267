"""Op-table rows of the statistics families (rune/nx/nan_reductions.py ... einsum_plans.py): each case
is checked eagerly against NumPy, under jit against eager, its jvp/vjp against finite differences and
under vmap against a loop."""
from op_table import *  # noqa: F401,F403  (case, the samplers, dtypes)
from op_table import _errstate, _rng, NOT_OPS, ints_float, numpy_rule, index_rule

# einsum_path returns a plan (a list and a text), not an array: tests/nx/test_statistics_surface.py checks it.
NOT_OPS.add("einsum_path")


def _with_nans(rng, shape, d=F64):
    x = draw(rng, shape, d)
    x.reshape(-1)[::3] = np.nan
    return x


def _nan_samples(name, dtypes=(F64, F32)):
    rng = _rng(name)
    out = []
    out = [S(_with_nans(rng, (3, 4), dtypes[0]), axis=1), S(_with_nans(rng, (2, 5), dtypes[0])),
           S(_with_nans(rng, (3, 4), dtypes[-1]), axis=0, keepdims=True), S(draw(rng, (3, 4), I32), axis=1)]
    return out


def _int_as_float_rule(sample, np_dtype):
    """Float results: float inputs keep their dtype; ints give rune's float for them (int32 -> float64)."""
    d = sample.args[0].dtype
    if np.dtype(np_dtype).kind != "f":
        return numpy_rule(sample, np_dtype)
    return d if is_float(d) else ints_float([d])


for _name in ("nansum", "nanprod"):
    case(_name, getattr(nx, _name), getattr(np, _name), _nan_samples(_name), grad=True,
         dtype_rule=lambda s, d: I32 if np.dtype(d).kind == "i" else numpy_rule(s, d),
         dtype_note="int sums are int32 (the standard's rule; NumPy: int64)")
for _name in ("nanmax", "nanmin"):
    case(_name, getattr(nx, _name), _errstate(getattr(np, _name)),
         _nan_samples(_name) + [S(np.array([[np.nan, np.nan], [1.0, np.nan]]), axis=1, fd=False)], grad=True)
for _name in ("nanmean", "nanvar", "nanstd"):
    case(_name, getattr(nx, _name), _errstate(getattr(np, _name)),
         _nan_samples(_name) + [S(_with_nans(_rng(_name + "1"), (3, 4)), axis=1, ddof=1)] *
         (_name != "nanmean"), grad=True, dtype_rule=_int_as_float_rule)
for _name in ("nanargmax", "nanargmin"):
    case(_name, getattr(nx, _name), getattr(np, _name), _nan_samples(_name), dtype_rule=index_rule,
         dtype_note="indices are int32")
for _name in ("nancumsum", "nancumprod"):
    case(_name, getattr(nx, _name), getattr(np, _name),
         [S(_with_nans(_rng(_name), (3, 4)), axis=1), S(_with_nans(_rng(_name), (5,), F32)),
          S(draw(_rng(_name), (2, 3), I32, "small"), axis=0)], grad=True,
         dtype_rule=lambda s, d: I32 if np.dtype(d).kind == "i" else numpy_rule(s, d))

case("ptp", nx.ptp, np.ptp, [S(draw(_rng("ptp"), (3, 4), d), axis=a) for d, a in ((F64, 1), (F32, None), (I32, 0))],
     grad=True)


def _average_samples():
    rng = _rng("average")
    x = draw(rng, (3, 4), F64)
    return [S(x), S(x, draw(rng, (4,), F64, "positive"), axis=1), S(x, draw(rng, (3, 4), F64, "positive")),
            S(draw(rng, (2, 3), F32), axis=0, keepdims=True),
            S(draw(rng, (3, 4), I32), draw(rng, (4,), I32, "positive"), axis=1)]


case("average", lambda a, w=None, **k: nx.average(a, weights=w, **k),
     lambda a, w=None, **k: np.average(a, weights=w, **k), _average_samples(), grad=True, diff_argnums=(0,),
     dtype_rule=_int_as_float_rule)
case("average (returned)", lambda a, w, **k: nx.average(a, weights=w, returned=True, **k),
     lambda a, w, **k: np.average(a, weights=w, returned=True, **k),
     [S(draw(_rng("average r"), (3, 4), F64), draw(_rng("average w"), (4,), F64, "positive"), axis=1)], grad=True)


# -- order statistics: samples without ties, so the derivative (to the ranked elements) is smooth
def _quantile_samples(name, scale, nan_aware):
    rng = _rng(name)
    make = (lambda s, d=F64: _with_nans(rng, s, d)) if nan_aware else (lambda s, d=F64: draw(rng, s, d))
    out = [S(make((3, 5)), 0.3 * scale, axis=1, method="linear"),
           S(make((2, 3, 4)), np.array([0.1, 0.62, 0.95]) * scale, axis=(0, 2), keepdims=True),
           S(make((4, 3), F32), 0.4 * scale, axis=0, method="midpoint")]
    for m in ("lower", "higher", "nearest"):
        out.append(S(make((3, 6)), 0.45 * scale, axis=1, method=m))
    out.append(S(draw(rng, (3, 5), I32), 0.3 * scale, axis=0))
    # q static (a keyword): the ranks are known, a partial sort (argselect) finds them, also under jit
    out.insert(1, S(make((3, 6)), q=np.array([0.2, 0.9]) * scale, axis=1, method="nearest"))
    # percentile and the nan* forms share quantile's code: fewer samples (every method stays covered by quantile)
    return out if name == "quantile" else out[:3] + out[-2:]


for _name, _scale, _nan in (("quantile", 1, False), ("percentile", 100, False), ("nanquantile", 1, True),
                            ("nanpercentile", 100, True)):
    case(_name, getattr(nx, _name), _errstate(getattr(np, _name)), _quantile_samples(_name, _scale, _nan),
         grad=True, dtype_rule=_int_as_float_rule, dtype_note="int data interpolate in rune's float for them")
case("median", nx.median, np.median,
     [S(draw(_rng("median"), (3, 5), F64), axis=1), S(draw(_rng("median"), (4, 2), F64)),
      S(draw(_rng("median"), (2, 3, 4), F32), axis=(0, 2), keepdims=True), S(draw(_rng("median"), (4,), I32)),
      S(np.array([True, False, True, True]))],
     grad=True, dtype_rule=_int_as_float_rule)
case("nanmedian", nx.nanmedian, _errstate(np.nanmedian),
     [S(_with_nans(_rng("nanmedian"), (3, 5)), axis=1), S(_with_nans(_rng("nanmedian"), (4, 4), F32), axis=0),
      S(_with_nans(_rng("nanmedian"), (2, 3)))], grad=True)


def _cov_samples(name):
    rng = _rng(name)
    return [S(draw(rng, (3, 5), F64)), S(draw(rng, (5,), F64), draw(rng, (5,), F64)),
            S(draw(rng, (6, 2), F32), rowvar=False), S(draw(rng, (2, 4), I32))]


case("cov", nx.cov, np.cov, _cov_samples("cov") + [
    S(draw(_rng("cov w"), (2, 5), F64), fweights=np.array([1, 2, 1, 3, 1]), aweights=np.array([.5, 1, 2, 1, .7])),
    S(draw(_rng("cov b"), (2, 4), F64), bias=True)], grad=True, dtype_rule=_int_as_float_rule)
case("corrcoef", nx.corrcoef, np.corrcoef, _cov_samples("corrcoef"), grad=True, dtype_rule=_int_as_float_rule)

# -- sorting relatives
_part = [S(draw(_rng("partition"), (7,), F64), kth=3), S(draw(_rng("partition"), (3, 5), F32), kth=(0, 2), axis=0),
         S(draw(_rng("partition"), (3, 4), I32), kth=-1, axis=None)]


def _along(fn):
    """NumPy's sort/argsort along `axis` (the flattened array when None), kth unused: rune's partition."""
    def ref(a, kth=None, axis=-1):
        return fn(a.reshape(-1), axis=-1) if axis is None else fn(a, axis=axis)
    return ref


case("partition", nx.partition, _along(np.sort), _part, grad=True,
     note="rune's partition is the sorted axis, an arrangement NumPy's contract allows")
case("argpartition", nx.argpartition, _along(lambda a, axis: np.argsort(a, axis=axis, kind="stable")), _part,
     dtype_rule=index_rule)


def _lexsort_samples():
    rng = _rng("lexsort")
    k = rng.integers(0, 3, (3, 8))
    return [S(k.astype(I32)), S(np.stack([draw(rng, (6,), F64), rng.integers(0, 2, 6).astype(F64)])),
            S(rng.integers(0, 3, (2, 3, 4)).astype(I8), axis=1)]


case("lexsort", nx.lexsort, np.lexsort, _lexsort_samples(), dtype_rule=index_rule)
case("sort_complex", nx.sort_complex, np.sort_complex,
     [S(draw(_rng("sort_complex"), (6,), C128)), S(draw(_rng("sort_complex"), (2, 5), F64)),
      S(draw(_rng("sort_complex"), (4,), I32)), S(draw(_rng("sort_complex"), (5,), F32))], grad=True)


# -- histograms: counts are int32 (NumPy: int64), edges of int data rune's float for them
def _hist_rule(sample, np_dtype):
    if np.dtype(np_dtype).kind in "iu":
        return I32
    return _int_as_float_rule(sample, np_dtype) if np.dtype(np_dtype).kind == "f" else np_dtype


def _bincount_ref(x, weights=None, minlength=0, length=None):
    out = np.bincount(x, weights, minlength)
    return out if length is None else np.pad(out, (0, max(length - out.size, 0)))[:length]


_bc = np.array([0, 3, 1, 3, 5, 1, 3], I32)
case("bincount", nx.bincount, _bincount_ref,
     [S(_bc, length=7), S(_bc.astype(U8), draw(_rng("bincount"), (7,), F64), length=4),
      S(_bc, draw(_rng("bincount"), (7,), F32), minlength=9, length=9)],
     grad=True, diff_argnums=(1,), dtype_rule=lambda s, d: I32 if np.dtype(d).kind == "i" else
     (s.args[1].dtype if len(s.args) > 1 else d),
     dtype_note="counts are int32; weights keep their dtype (NumPy: float64)")
case("bincount (exact length)", nx.bincount, np.bincount, [S(_bc), S(_bc, minlength=8)], traced=False,
     dtype_rule=index_rule)
case("digitize", nx.digitize, np.digitize,
     [S(draw(_rng("digitize"), (3, 4), F64), bins=np.array([-1.0, 0.0, 0.5, 1.0])),
      S(draw(_rng("digitize"), (6,), F32), bins=np.array([1.0, 0.2, -0.3], F32), right=True),
      S(draw(_rng("digitize"), (5,), I32), bins=np.array([-5, 0, 5, 10], I32))], dtype_rule=index_rule)


def _hist_samples(name):
    rng = _rng(name)
    return [S(draw(rng, (20,), F64)), S(draw(rng, (4, 5), F32), bins=4, range=(-1.0, 1.0)),
            S(draw(rng, (12,), F64), bins=np.array([-2.0, -0.5, 0.0, 0.3, 2.0]), weights=draw(rng, (12,), F64)),
            S(draw(rng, (15,), F64), bins=5, density=True), S(draw(rng, (10,), I32), bins=3)]


case("histogram", nx.histogram, np.histogram, _hist_samples("histogram"), grad=True, diff_argnums=(),
     dtype_rule=_hist_rule)
case("histogram_bin_edges", nx.histogram_bin_edges, np.histogram_bin_edges,
     [S(draw(_rng("hbe"), (9,), F64), bins=4), S(draw(_rng("hbe"), (3, 3), F32), bins=3, range=(-2.0, 2.0)),
      S(draw(_rng("hbe"), (5,), I32))], grad=True, dtype_rule=_hist_rule)
case("histogram2d", nx.histogram2d, np.histogram2d,
     [S(draw(_rng("h2"), (15,), F64), draw(_rng("h2y"), (15,), F64), bins=3),
      S(draw(_rng("h2"), (12,), F64), draw(_rng("h2y"), (12,), F64), bins=[2, 4], density=True),
      S(draw(_rng("h2"), (10,), F32), draw(_rng("h2y"), (10,), F32), bins=2, range=[(-1.0, 1.0), (-2.0, 2.0)])],
     dtype_rule=_hist_rule)
case("histogramdd", lambda *a, **k: (lambda h, e: (h, *e))(*nx.histogramdd(*a, **k)),
     lambda *a, **k: (lambda h, e: (h, *e))(*np.histogramdd(*a, **k)),
     [S(draw(_rng("hdd"), (20, 3), F64), bins=(2, 3, 2)), S(draw(_rng("hdd"), (10, 2), F64), bins=3, density=True)],
     dtype_rule=_hist_rule, note="(hist, *edges): NumPy's edges list flattened into the tuple")


# -- unique and sets: exact eagerly (traced=False), size=/fill_value= under jit. Samples holding a value twice
# sit on a jump (moving one copy splits the value), so finite differences do not apply there (fd=False).
def _padded(fn, default_fill="min"):
    """NumPy's result padded to `size` with `fill_value` (default: the smallest value, or 0)."""
    def ref(*args, size=None, fill_value=None, **kwargs):
        out = fn(*args, **kwargs)
        if size is None:
            return out
        parts = list(out) if isinstance(out, tuple) else [out]
        v = parts[0]
        fill = fill_value if fill_value is not None else \
            (np.min(np.concatenate([np.ravel(a) for a in args if isinstance(a, np.ndarray)]))
             if default_fill == "min" else 0)
        pad = lambda a, f: np.concatenate([a[:size], np.full(max(size - a.size, 0), f, a.dtype)])  # noqa: E731
        res = [pad(v, fill)]
        for k, p in enumerate(parts[1:]):
            is_inverse = kwargs.get("return_inverse") and k == int(bool(kwargs.get("return_index")))
            res.append(p if is_inverse else pad(p, 0))
        return tuple(res) if isinstance(out, tuple) else res[0]
    return ref


def _set_rule(sample, np_dtype):
    return I32 if np.dtype(np_dtype) == I64 and sample.args[0].dtype != I64 else np_dtype


_u = np.array([3, 1, 2, 3, 1, 0, 5, 2], I32)
_w = np.array([2, 9, 3, 7, 0, 2], I32)
_uf = np.array([0.5, -1.0, 2.0, 0.5, 3.0])
_wf = np.array([2.0, 0.25, 0.5, 7.0])
case("unique", nx.unique, _padded(np.unique),
     [S(_u, size=8), S(_u, return_index=True, return_inverse=True, return_counts=True, size=6),
      S(_uf, size=3, fill_value=-9.0, fd=False), S(np.array([0.5, -1.0, 2.0, 3.0]), size=5),
      S(np.array([[1, 2, 2], [0, 1, 4]], I32), return_inverse=True, size=5)],
     grad=True, dtype_rule=_set_rule, dtype_note="indices and counts are int32")
case("unique (exact)", nx.unique, np.unique,
     [S(_u), S(_u, return_index=True, return_inverse=True, return_counts=True),
      S(np.array([1.0, np.nan, 2.0, np.nan, 1.0])),
      S(np.array([[1, 2], [0, 1], [1, 2]], I32), return_counts=True, axis=0)],
     traced=False, grad=True, dtype_rule=_set_rule)
for _name in ("union1d", "intersect1d", "setdiff1d", "setxor1d"):
    _fill = "zero" if _name == "setdiff1d" else "min"
    case(_name, getattr(nx, _name), _padded(getattr(np, _name), _fill),
         [S(_u, _w, size=9), S(_uf, _wf, size=4, fill_value=-1.0, fd=False)], grad=True, diff_argnums=(0, 1))
    case(_name + " (exact)", getattr(nx, _name), getattr(np, _name), [S(_u, _w), S(_uf, _wf, fd=False)], traced=False,
         grad=True, diff_argnums=(0, 1))
case("intersect1d (indices)", lambda a, b, **k: nx.intersect1d(a, b, return_indices=True, **k),
     _padded(lambda a, b: np.intersect1d(a, b, return_indices=True)), [S(_u, _w, size=4)],
     dtype_rule=_set_rule)
case("setdiff1d (assume_unique)", lambda a, b: nx.setdiff1d(a, b, assume_unique=True),
     lambda a, b: np.setdiff1d(a, b, assume_unique=True), [S(np.array([5, 1, 3, 0], I32), _w)], traced=False)


# -- convolution
def _conv_samples(name):
    rng = _rng(name)
    return [S(draw(rng, (7,), F64), draw(rng, (3,), F64)), S(draw(rng, (3,), F64), draw(rng, (6,), F64), mode="same"),
            S(draw(rng, (8,), F32), draw(rng, (4,), F32), mode="valid"),
            S(draw(rng, (5,), I32), draw(rng, (2,), I32), mode="full"), S(draw(rng, (5,), BOOL), draw(rng, (3,), BOOL)),
            S(draw(rng, (6,), F64), draw(rng, (3,), F64), mode="same")]


case("convolve", nx.convolve, np.convolve, _conv_samples("convolve"), grad=True, diff_argnums=(0, 1))
case("correlate", nx.correlate, np.correlate,
     _conv_samples("correlate") + [S(draw(_rng("correlate c"), (5,), C128), draw(_rng("correlate c"), (3,), C128),
                                     mode="full")], grad=True, diff_argnums=(0, 1))
