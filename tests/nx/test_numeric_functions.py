"""rune.nx's numeric families (rune/nx/elementwise_math.py ... mapping.py) beyond their op-table
rows: the dtype questions answered in Python (issubdtype, promote_types, iscomplexobj), the errors
bad input gets, and numpy.<name> on traced values running rune's function."""
import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx
from rune.core import dtypes as dt
from rune.errors import ArgumentError, DTypeError, RuneError, ShapeError

from compiled import precompiled


# ---------------------------------------------------------------- dtype questions

@pytest.mark.parametrize("a", dt.ALL, ids=lambda d: d.name)
def test_promote_types_is_what_operands_of_those_dtypes_promote_to(a):
    for b in dt.ALL:
        want = (nx.zeros((), dtype=a) + nx.zeros((), dtype=b)).dtype   # rune's lattice, by another path
        assert nx.promote_types(a, b) == want, (a, b)
        assert nx.promote_types(a.name, b.name) == want


def test_promote_types_differs_from_numpy_only_where_the_lattice_does():
    assert nx.promote_types(np.int64, np.uint64) == np.promote_types(np.int64, np.uint64)
    assert nx.promote_types(nx.bfloat16, np.int8) == nx.bfloat16
    assert nx.promote_types(nx.bfloat16, np.float16) == np.float32
    with pytest.raises(DTypeError, match="promote_types"):
        nx.promote_types("float32", "not a dtype")


def test_issubdtype_follows_numpy_with_bfloat16_a_floating_type():
    abstract = (np.generic, np.number, np.integer, np.signedinteger, np.unsignedinteger, np.inexact,
                np.floating, np.complexfloating)
    for d in dt.ALL:
        for cls in abstract:
            want = issubclass(np.float16, cls) if d == dt.bfloat16 else np.issubdtype(d, cls)
            assert nx.issubdtype(d, cls) is want, (d, cls)
        for other in dt.ALL:
            assert nx.issubdtype(d, other) is (d == other)
    assert nx.issubdtype(ml_dtypes.bfloat16, np.floating)
    assert nx.issubdtype("int32", np.signedinteger) and not nx.issubdtype(np.uint8, np.signedinteger)
    assert nx.issubdtype(np.float32, "float32") and nx.issubdtype(float, np.floating)
    with pytest.raises(DTypeError, match="issubdtype: arg2"):
        nx.issubdtype(np.float32, object())


def test_iscomplexobj_and_isrealobj_read_the_dtype_also_under_jit():
    z, r = nx.asarray(np.array([1.0 + 0j])), nx.asarray(np.array([1.0]))
    assert nx.iscomplexobj(z) is True and nx.isrealobj(z) is False
    assert nx.iscomplexobj(r) is False and nx.isrealobj([1, 2]) is True and nx.iscomplexobj(1j)
    seen = []
    rune.jit(lambda a: seen.append((nx.iscomplexobj(a), nx.isrealobj(a))) or a)(z)
    assert seen == [(True, False)]
    assert nx.ndarray is nx.Array and isinstance(r, nx.ndarray)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("call,error,match", [
    (lambda: nx.gcd(nx.asarray([1.5]), 2), DTypeError, "gcd: expected integer"),
    (lambda: nx.bitwise_count(nx.asarray([1.5])), DTypeError, "bitwise_count: expected an integer"),
    (lambda: nx.fmod(nx.asarray([1j]), 1.0), DTypeError, "fmod: expected real"),
    (lambda: nx.cbrt(nx.asarray([1j])), DTypeError, "cbrt: expected a real"),
    (lambda: nx.ldexp(nx.asarray([1.0]), 1.5), DTypeError, "ldexp: expected an integer exponent"),
    (lambda: nx.unpackbits(nx.asarray([1, 2])), DTypeError, "unpackbits: expected x to be a uint8"),
    (lambda: nx.packbits(nx.asarray([1.0])), DTypeError, "packbits: expected x to be a bool or integer"),
    (lambda: nx.packbits(nx.asarray([1]), bitorder="middle"), ArgumentError, "packbits: bitorder"),
    (lambda: nx.cross(nx.ones((2, 4)), nx.ones((2, 3))), ShapeError, "cross: the vectors of x1 must have 2 or 3"),
    (lambda: nx.gradient(nx.ones(4), edge_order=3), ArgumentError, "gradient: edge_order"),
    (lambda: nx.gradient(nx.ones(2), edge_order=2), ShapeError, "gradient: axis 0 has 2 elements"),
    (lambda: nx.gradient(nx.ones(4), nx.ones(3)), ShapeError, "gradient: the coordinates of axis 0"),
    (lambda: nx.gradient(nx.ones((3, 3)), 1.0, 2.0, 3.0), ArgumentError, "gradient: expected one spacing"),
    (lambda: nx.trapezoid(nx.ones(4), nx.ones(3)), ShapeError, "trapezoid: x has length 3"),
    (lambda: nx.unwrap(nx.ones(4), axis=1), RuneError, "unwrap: axis 1 is out of range"),
    (lambda: nx.interp(nx.ones(3), nx.ones((2, 2)), nx.ones(4)), ShapeError, "interp: xp and fp must be 1-d"),
    (lambda: nx.interp(nx.ones(3), nx.ones(3), nx.ones(4)), ShapeError, "interp: xp and fp must have the same"),
    (lambda: nx.interp(nx.ones(3), nx.ones(3), nx.ones(3), left=0.0, period=1.0), ArgumentError, "interp: left"),
    (lambda: nx.hanning(4.5), ArgumentError, "hanning: M must be a Python int"),
    (lambda: nx.logspace(0, 1, num=-1), ArgumentError, "logspace: num"),
    (lambda: nx.geomspace(0.0, 1.0, 3), ArgumentError, "geomspace: a geometric sequence cannot include zero"),
    (lambda: nx.piecewise(nx.ones(3), [nx.ones(3) > 0], [1, 2, 3]), ArgumentError, "piecewise: funclist"),
    (lambda: nx.apply_over_axes(lambda a, ax: nx.sum(a), nx.ones((2, 3, 4)), 0), ShapeError, "apply_over_axes"),
    (lambda: nx.matvec(nx.ones(3), nx.ones(3)), ShapeError, "matvec: expected matrices"),
])
def test_bad_input_is_a_rune_error_naming_the_function(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_a_window_length_must_be_static_under_jit():
    with pytest.raises(ArgumentError, match="kaiser: M must be a Python int"):
        rune.jit(lambda m: nx.kaiser(m, 2.0))(nx.asarray(5))


# ---------------------------------------------------------------- numpy.<name> on traced values

_A = np.array([0.5, -1.5, 2.5, 3.0])
_B = np.array([1.0, 2.0, -3.0, 4.0])
NUMPY_CALLS = {
    "cbrt": lambda np_, a, b: np_.cbrt(a), "fmax": lambda np_, a, b: np_.fmax(a, b),
    "fmod": lambda np_, a, b: np_.fmod(a, b), "frexp": lambda np_, a, b: np_.frexp(a),
    "divmod": lambda np_, a, b: np_.divmod(a, b), "heaviside": lambda np_, a, b: np_.heaviside(a, b),
    "isclose": lambda np_, a, b: np_.isclose(a, b, rtol=0.5), "allclose": lambda np_, a, b: np_.allclose(a, b),
    "array_equal": lambda np_, a, b: np_.array_equal(a, b), "around": lambda np_, a, b: np_.around(a, 1),
    "interp": lambda np_, a, b: np_.interp(a, np.array([-2.0, 0.0, 3.0]), b[:3]),
    "trapezoid": lambda np_, a, b: np_.trapezoid(a, b), "cross": lambda np_, a, b: np_.cross(a[:3], b[:3]),
    "unwrap": lambda np_, a, b: np_.unwrap(a * 3), "ediff1d": lambda np_, a, b: np_.ediff1d(a, to_begin=0.0),
    "packbits": lambda np_, a, b: np_.packbits(a > 0), "i0": lambda np_, a, b: np_.i0(a),
    "sinc": lambda np_, a, b: np_.sinc(a), "nan_to_num": lambda np_, a, b: np_.nan_to_num(a / 0.0),
    "geomspace": lambda np_, a, b: np_.geomspace(a[0], a[3], 4), "matvec": lambda np_, a, b: np_.matvec(a[None], b),
    "piecewise": lambda np_, a, b: np_.piecewise(a, [a > 1], [lambda v: v * 2, 0.5]),
    "gradient": lambda np_, a, b: np_.gradient(a, 0.5, edge_order=2),
}


def _numpy_on(call):
    """`call` made with numpy on rune's traced values (numpy dispatches to rune)."""
    return lambda a, b: call(np, a, b)


@pytest.mark.parametrize("name", sorted(NUMPY_CALLS))
def test_numpy_functions_on_traced_values_run_rune_s(name):
    call = NUMPY_CALLS[name]
    with np.errstate(all="ignore"):
        want = call(np, _A, _B)
        got = rune.jit(_numpy_on(call))(nx.asarray(_A), nx.asarray(_B))
    for g, w in zip(rune.tree.leaves(got), want if isinstance(want, tuple) else (want,)):
        assert isinstance(g, nx.Array)
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- NumPy's special values, bit for bit

def _special_calls(dtype):
    """name -> (NumPy's function, raw arguments with NumPy's special values)."""
    x = np.array([-8.0, -1.5, -0.0, 0.0, 0.3, 27.0, np.inf, -np.inf, np.nan, 1e-30, 3e38], dtype)
    y = np.array([3.0, -0.0, 0.5, np.inf, -1.0, np.nan, 3.0, 1.0, -1.0, 0.0, -np.inf], dtype)
    return {"spacing": (np.spacing, (x,)), "fmax": (np.fmax, (x, y)), "fmin": (np.fmin, (x, y)),
            "fmod": (np.fmod, (x, y)), "modf": (np.modf, (x,)), "frexp": (np.frexp, (x,)),
            "ldexp": (np.ldexp, (x, np.arange(-5, 6, dtype=np.int32) * 40)), "cbrt": (np.cbrt, (x,)),
            "heaviside": (np.heaviside, (x, y)), "nan_to_num": (np.nan_to_num, (x,))}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_match_numpy_bit_for_bit_eagerly_and_under_jit(dtype):
    for name, (ref, args) in _special_calls(dtype).items():
        with np.errstate(all="ignore"):
            want = ref(*args)
        for fn in (getattr(nx, name), rune.jit(getattr(nx, name))):
            got = fn(*[nx.asarray(a) for a in args])
            for g, w in zip(rune.tree.leaves(got), want if isinstance(want, tuple) else (want,)):
                g = np.asarray(g)
                if name == "cbrt":   # within an ulp, and the signs of zeros and infinities exact
                    np.testing.assert_allclose(g, w, rtol=2 * np.finfo(dtype).eps)
                    assert np.array_equal(np.signbit(g), np.signbit(w))
                else:   # the same bits (zeros' signs included), NaN where NumPy has NaN (of any sign)
                    nan = np.isnan(w) if w.dtype.kind == "f" else np.zeros(w.shape, bool)
                    assert g.dtype == w.dtype and np.array_equal(np.isnan(g) if nan.any() else nan, nan), (name, g, w)
                    assert g[~nan].tobytes() == w[~nan].tobytes(), (name, g, w)


def test_piecewise_is_zero_where_no_condition_holds_whatever_x_is():
    x = np.array([-1.0, -0.5, np.inf, np.nan, 1.0, -np.inf])
    conds = np.stack([x > 0, x < -0.75])
    want = np.piecewise(x, conds, [1.0, 2.0])
    for fn in (nx.piecewise, rune.jit(nx.piecewise, static_argnums=(2,))):
        got = np.asarray(fn(nx.asarray(x), nx.asarray(conds), (1.0, 2.0)))
        assert got.tobytes() == want.tobytes(), got   # +0.0, not -0.0 (x * 0) or NaN (nan * 0)


LDEXP_RANGES = [(np.float64, -1074, 1023), (np.float32, -149, 127)]


def _ldexp_inputs(dtype, lo, hi):
    rng = np.random.default_rng(7)
    x = (rng.uniform(0.5, 1, 4000) * 2.0 ** rng.integers(lo, hi, 4000) * rng.choice([-1, 1], 4000)).astype(dtype)
    return x, rng.integers(-300, 300, 4000).astype(np.int32)


@pytest.mark.parametrize("dtype,lo,hi", LDEXP_RANGES)
def test_ldexp_rounds_once_into_the_subnormals_and_frexp_is_exact(dtype, lo, hi):
    x, e = _ldexp_inputs(dtype, lo, hi)
    with np.errstate(all="ignore"):
        want = np.ldexp(x, e)
        for fn in (nx.ldexp, rune.jit(nx.ldexp)):
            assert np.asarray(fn(nx.asarray(x), nx.asarray(e))).tobytes() == want.tobytes()
    for fn in (nx.frexp, rune.jit(nx.frexp)):
        m, ex = fn(nx.asarray(x))
        wm, we = np.frexp(x)
        assert np.asarray(m).tobytes() == wm.tobytes() and np.array_equal(np.asarray(ex), we)


def test_logaddexp2_is_numpy_s_at_ties_and_infinities_and_shares_the_slope_at_ties():
    x = np.concatenate([np.linspace(-50, 50, 201), [np.inf, -np.inf, np.nan]])
    y = np.concatenate([x[:201], [-np.inf, np.inf, 1.0]])
    for a, b in ((x, x), (x, y)):
        got = np.asarray(nx.logaddexp2(nx.asarray(a), nx.asarray(b)))
        np.testing.assert_array_equal(got, np.logaddexp2(a, b))   # ties are x + 1 exactly (log2(2 * 2**x))
    slopes = rune.grad(nx.logaddexp2, argnums=(0, 1))(nx.asarray(3.0), nx.asarray(3.0))
    assert [float(s) for s in slopes] == [0.5, 0.5]


def test_bools_divide_as_int8_and_count_as_uint8_as_in_numpy():
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    with np.errstate(all="ignore"):
        pairs = [(nx.fmod(nx.asarray(a), nx.asarray(b)), np.fmod(a, b)),
                 (nx.bitwise_count(nx.asarray(a)), np.bitwise_count(a))]
        pairs += list(zip(nx.divmod(nx.asarray(a), nx.asarray(b)), np.divmod(a, b)))
    for got, want in pairs:
        assert got.dtype == want.dtype and np.array_equal(np.asarray(got), want)


WIDE_EXPONENTS = [np.array([2**40, -2**40]), np.array([2**40, 3], np.uint64),
                  np.array([2**31 - 1, -2**31], np.int32), np.array([100, -100], np.int8)]
LDEXP_BASE = np.array([1.0, 2.0])


@pytest.mark.parametrize("e", WIDE_EXPONENTS)
def test_ldexp_takes_exponents_beyond_int32_and_any_integer_dtype(e):
    x = LDEXP_BASE
    with np.errstate(all="ignore"):
        want = np.ldexp(x, e.astype(np.int64))
        for fn in (nx.ldexp, rune.jit(nx.ldexp)):
            np.testing.assert_array_equal(np.asarray(fn(nx.asarray(x), nx.asarray(e))), want)


def _jitted_calls():
    """The jitted calls of the numpy-dispatch, special-value and ldexp tests, compiled
    together before the file's first test."""
    def arrays(*raws):
        return tuple(nx.asarray(r) for r in raws)
    calls = [(_numpy_on(call), arrays(_A, _B)) for call in NUMPY_CALLS.values()]
    calls += [(getattr(nx, name), arrays(*args)) for dtype in (np.float32, np.float64)
              for name, (_, args) in _special_calls(dtype).items()]
    for dtype, lo, hi in LDEXP_RANGES:
        x, e = _ldexp_inputs(dtype, lo, hi)
        calls += [(nx.ldexp, arrays(x, e)), (nx.frexp, arrays(x))]
    calls += [(nx.ldexp, arrays(LDEXP_BASE, e)) for e in WIDE_EXPONENTS]
    return calls


_kernels = precompiled(_jitted_calls)
