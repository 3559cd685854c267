"""Op-table rows of the elementwise-math families (rune/nx/elementwise_math.py ... mapping.py): each
case is checked eagerly against NumPy, under jit against eager, its jvp/vjp against finite differences
and under vmap against a loop."""
from op_table import *  # noqa: F401,F403  (case, the samplers, dtypes)
import ml_dtypes  # noqa: E402

from op_table import _errstate, _rng  # noqa: E402

R = _rng("numeric")


def _d(shape, dtype, domain="real"):
    return draw(R, shape, dtype, domain)


def _all_float(rule_dtype):
    """A dtype rule: the result is `rule_dtype` whatever NumPy gives (rune's default float for creation)."""
    return lambda sample, np_dtype: rule_dtype if np.dtype(np_dtype).kind == "f" else np_dtype


def _promoted_inexact(sample, np_dtype):
    """The float (or complex) of the strong operands by rune's promotion (NumPy: always float64/complex128)."""
    joined = np.result_type(*[a.dtype for a in sample.args if isinstance(a, np.ndarray)])
    if joined.kind in "fc" or joined == BF16:
        return joined
    return ints_float([joined])


SPECIAL = np.array([-8.0, -1.5, -0.0, 0.0, 0.3, 27.0, np.inf, -np.inf, np.nan, 1e-310, 1e300])

# -- elementwise math
case("around", nx.around, np.around,
     [S(_d((3, 4), F64, "frac")), S(_d((5,), F32, "frac"), decimals=1), S(_d((5,), I32), decimals=-1)])
case("rint", nx.rint, np.rint, [S(_d((3, 4), F64, "frac")), S(_d((5,), F32, "frac")), S(_d((5,), I32)),
                                 S(_d((4,), U8)), S(_d((3,), C128, "frac"))],
     dtype_note="ints and bools give their float (int32: float64; uint8: float32, NumPy float16)")
case("fabs", nx.fabs, np.fabs, [S(_d((3, 4), F64, "nonzero")), S(_d((5,), F32, "nonzero")), S(_d((5,), I16))],
     grad=True, domain="nonzero")
case("cbrt", nx.cbrt, _errstate(np.cbrt), [S(_d((3, 4), F64, "nonzero")), S(SPECIAL), S(_d((5,), F32, "nonzero")),
                                            S(np.array([-27, -8, 0, 1, 64], np.int32))],
     grad=True, domain="nonzero")
for _name in ("deg2rad", "rad2deg"):
    case(_name, getattr(nx, _name), getattr(np, _name), [S(_d((3, 4), F64)), S(_d((5,), F32)), S(_d((4,), I8))],
         grad=True)
ALIASES.update({"radians": "deg2rad", "degrees": "rad2deg", "true_divide": "divide"})
case("exp2", nx.exp2, np.exp2, [S(_d((3, 4), F64, "small")), S(_d((5,), F32, "small")), S(_d((4,), I8, "small")),
                                 S(_d((3,), C128, "small"))], grad=True, domain="small")
case("logaddexp2", nx.logaddexp2, np.logaddexp2,
     [S(_d((3, 4), F64), _d((4,), F64)), S(_d((5,), F32), _d((5,), F32)), S(_d((3,), F64), 1.5),
      S(_d((3,), I32), _d((3,), I32))], grad=True, diff_argnums=(0, 1))
case("divmod", nx.divmod, np.divmod,
     [S(_d((3, 4), F64, "nonzero"), _d((4,), F64, "nonzero")), S(_d((5,), I32), _d((5,), I32, "nonzero")),
      S(_d((5,), F32, "nonzero"), 2.5), S(np.array([True, False, True]), np.array([True, True, True]))],
     grad=True, diff_argnums=(0, 1), domain=("nonzero", "nonzero"), dtype_rule=lambda sample, np_dtype: np_dtype,
     dtype_note="bools divide as int8, as NumPy's")
case("float_power", nx.float_power, np.float_power,
     [S(_d((3, 4), F64, "positive"), _d((4,), F64, "small")), S(_d((5,), F32, "positive"), _d((5,), F32, "small")),
      S(_d((5,), I32, "positive"), _d((5,), I32, "small")), S(_d((3,), F64, "positive"), 2.5)],
     grad=True, diff_argnums=(0, 1), domain=("positive", "small"), dtype_rule=lambda sample, np_dtype: np_dtype,
     dtype_note="float64 (complex128) always, as NumPy")
for _name in ("fmax", "fmin"):
    case(_name, getattr(nx, _name), getattr(np, _name),
         [S(_d((3, 4), F64), _d((4,), F64)), S(_d((6,), F64, "special"), _d((6,), F64, "special")),
          S(_d((5,), F32, "special"), _d((5,), F32)), S(_d((5,), I32), _d((5,), I8)), S(_d((3,), F32), 0.5),
          S(np.array([1 + 2j, 1 + 3j, np.nan + 0j, 2 + 1j, 3 + 0j]),
            np.array([1 + 1j, 1 + 3j, 1 + 1j, 1 + 5j, 3 - 1j]))],
         grad=True, diff_argnums=(0, 1), note="a NaN operand gives the other one")
case("fmod", nx.fmod, _errstate(np.fmod),
     [S(_d((3, 4), F64), _d((4,), F64, "nonzero")), S(SPECIAL, np.array([3.0, -2, 0.5, np.inf, 1, 2, 3, 1, -1, 7, 0])),
      S(_d((5,), F32), 1.5), S(np.array([7, -7, 7, -7, -128, 5], np.int8), np.array([3, 3, -3, -3, 6, 0], np.int8)),
      S(_d((5,), U16), _d((5,), U16, "nonzero"))],
     grad=True, diff_argnums=(0, 1), domain=("real", "nonzero"), note="the sign of x (remainder has y's)")
case("frexp", nx.frexp, np.frexp, [S(SPECIAL), S(_d((3, 4), F32)), S(_d((5,), F16)), S(_d((5,), I32))],
     note="the exponent is int32")
case("ldexp", nx.ldexp, np.ldexp,
     [S(_d((3, 4), F64), _d((4,), I32)), S(SPECIAL, np.array([3, -2, 5, 1030, -1070, 1, 1, 1, 40, -2000, 0], np.int32)),
      S(_d((5,), F32), _d((5,), I8)), S(_d((3,), F16), 2)], grad=True)
case("spacing", nx.spacing, _errstate(np.spacing), [S(SPECIAL), S(_d((3, 4), F32)), S(_d((4,), I16))])
case("modf", nx.modf, np.modf, [S(_d((3, 4), F64, "frac")), S(SPECIAL), S(_d((5,), F32, "frac")), S(_d((4,), I32))],
     grad=True, domain="frac")
case("heaviside", nx.heaviside, np.heaviside,
     [S(np.array([-1.5, 0.0, 2.0, np.nan, 0.0, 3.0]), np.array([0.5, 0.5, 1.0, 1.0, 0.25, 2.0])),
      S(_d((3, 4), F32), 0.5), S(np.array([-2, 0, 3], np.int32), 0.5)], grad=True, diff_argnums=(0, 1))
case("i0", nx.i0, np.i0, [S(_d((3, 4), F64) * 6), S(_d((5,), F32) * 6), S(_d((4,), I8))], grad=True,
     tol={F32: (1e-5, 1e-5)})
def _nan_to_num(x, **kw):
    """np.nan_to_num, which leaves bfloat16 (not a NumPy inexact type) alone: bfloat16 goes through float32."""
    if x.dtype != BF16:
        return np.nan_to_num(x, **kw)
    big = float(ml_dtypes.finfo(BF16).max)
    kw = {"posinf": big, "neginf": -big, **kw}
    return np.nan_to_num(x.astype(F32), **kw).astype(BF16)


case("nan_to_num", nx.nan_to_num, _nan_to_num,
     [S(_d((3, 4), F64)), S(_d((6,), F64, "special")), S(_d((6,), F32, "special"), nan=1.5, posinf=9.0),
      S(_d((4,), C128, "special")), S(_d((4,), I32))], grad=True, domain="special")
case("sinc", nx.sinc, np.sinc, [S(np.array([0.0, 0.5, -1.25, 2.0])), S(_d((3, 4), F64)), S(_d((5,), F32)),
                                 S(_d((3,), C128))], grad=True)

# -- integer functions
for _name in ("gcd", "lcm"):
    case(_name, getattr(nx, _name), getattr(np, _name),
         [S(np.array([12, -18, 0, 7, 0, 21], np.int32), np.array([8, 12, 5, 0, 0, -14], np.int32)),
          S(_d((3, 4), I16), _d((4,), I16)), S(_d((5,), U8, "positive"), _d((5,), U8, "positive")),
          S(_d((4,), I64), 6)])
case("bitwise_count", nx.bitwise_count, np.bitwise_count,
     [S(np.array([0, 1, -1, 127, -128, 85], np.int8)), S(_d((3, 4), U16)), S(_d((4,), I64)),
      S(np.array([0, 2**64 - 1, 2**63, 12345], np.uint64)), S(np.array([True, False]))],
     dtype_rule=lambda sample, np_dtype: U8, dtype_note="uint8, as NumPy")
case("packbits", nx.packbits, np.packbits,
     [S(_d((3, 10), BOOL), axis=1), S(_d((13,), I32, "small"), bitorder="little"), S(_d((2, 3), U8, "small"))],
     dtype_rule=lambda sample, np_dtype: U8, dtype_note="uint8, as NumPy")
case("unpackbits", nx.unpackbits, np.unpackbits,
     [S(np.array([[0, 255, 17], [128, 1, 100]], np.uint8)), S(np.array([[3, 200], [77, 9]], np.uint8), axis=1),
      S(np.array([[3, 200], [77, 9]], np.uint8), axis=0, count=-3), S(np.array([5, 6], np.uint8), count=20,
                                                                        bitorder="little")])

# -- comparisons and predicates
_NEAR = np.array([1.0, 1.0 + 1e-9, np.inf, -np.inf, np.nan, 2.0, 0.0])
_NEAR2 = np.array([1.0, 1.0, np.inf, np.inf, np.nan, 2.1, 1e-9])
case("isclose", nx.isclose, np.isclose,
     [S(_NEAR, _NEAR2), S(_NEAR, _NEAR2, equal_nan=True), S(_d((3, 4), F32), _d((4,), F32), rtol=0.5, atol=0.1),
      S(_d((5,), I32), _d((5,), I32))])
case("allclose", nx.allclose, lambda *a, **k: np.asarray(np.allclose(*a, **k)),
     [S(_NEAR[:2], _NEAR2[:2]), S(_NEAR, _NEAR2, equal_nan=True), S(_d((3, 4), F32), _d((4,), F32), atol=3.0)],
     note="a bool scalar array (NumPy: a Python bool)")
_SAME = _d((3, 4), F64)
case("array_equal", nx.array_equal, lambda *a, **k: np.asarray(np.array_equal(*a, **k)),
     [S(_SAME, _SAME.copy()), S(_SAME, _SAME[:1]), S(_NEAR, _NEAR.copy(), equal_nan=True), S(_NEAR, _NEAR.copy()),
      S(_d((4,), I32), _d((4,), I32))], note="a bool scalar array (NumPy: a Python bool)")
case("array_equiv", nx.array_equiv, lambda *a: np.asarray(np.array_equiv(*a)),
     [S(np.tile(_SAME[:1], (3, 1)), _SAME[0].copy()), S(_SAME, _SAME[:2]), S(_d((3,), I32), _d((3,), I32))],
     note="a bool scalar array (NumPy: a Python bool)")
for _name in ("isneginf", "isposinf"):
    case(_name, getattr(nx, _name), getattr(np, _name), [S(_d((6,), F64, "special")), S(_d((6,), F32, "special")),
                                                          S(_d((3,), I32))])
for _name in ("iscomplex", "isreal"):
    case(_name, getattr(nx, _name), getattr(np, _name),
         [S(np.array([1 + 0j, 2 + 1j, -1j, np.nan])), S(_d((3, 4), C64)), S(_d((5,), F64)), S(_d((3,), I32))])
# Python answers about dtypes, not array functions: tests/nx/test_numeric_functions.py checks them.
NOT_OPS.update({"iscomplexobj", "isrealobj", "issubdtype", "promote_types"})

# -- differences and calculus
_PHASE = np.cumsum(_rng("numeric phase").uniform(-4, 4, (3, 8)), axis=1)
case("unwrap", nx.unwrap, np.unwrap, [S(_PHASE), S(_PHASE, axis=0, period=3.0), S(_PHASE.astype(F32), discont=4.0),
                                     S(np.array([0, 4, 8, 12, 3, -7], np.int32), period=6, discont=2.5)],
     grad=True)
case("ediff1d", nx.ediff1d, np.ediff1d, [S(_d((3, 4), F64)), S(_d((5,), I32), to_begin=[9, 8], to_end=0)],
     grad=True)
_COORDS = np.cumsum(_rng("numeric coords").uniform(0.5, 1.0, 5))
case("gradient", nx.gradient, np.gradient,
     [S(_d((6,), F64)), S(_d((3, 5), F64)), S(_d((3, 5), F64), 0.5, axis=1, edge_order=2),
      S(_d((4, 5), F64), _COORDS, axis=-1, edge_order=2), S(_d((3, 5), F32), _COORDS.astype(F32), axis=1),
      S(_d((5,), I32))], grad=True)
case("trapezoid", nx.trapezoid, np.trapezoid,
     [S(_d((3, 5), F64)), S(_d((3, 5), F64), _COORDS), S(_d((4, 3), F32), dx=0.5, axis=0), S(_d((5,), I32))],
     grad=True, diff_argnums=(0,))
case("cross", nx.cross, np.cross,
     [S(_d((4, 3), F64), _d((3,), F64)), S(_d((3, 2), F64), _d((2, 3), F64), axisa=0, axisc=0),
      S(_d((2, 3), I32), _d((2, 3), I32)), S(_d((3, 1, 3), F32), _d((4, 3), F32))], grad=True, diff_argnums=(0, 1))

# -- windows and spaced values (the default float, float32, where NumPy gives float64)
for _name in ("hanning", "hamming", "blackman", "bartlett"):
    case(_name, getattr(nx, _name), getattr(np, _name), [S(M=7), S(M=1), S(M=0), S(M=4)],
         dtype_rule=_all_float(F32), dtype_note="float32, the default float (NumPy: float64)")
case("kaiser", lambda beta, M: nx.kaiser(M, beta), lambda beta, M: np.kaiser(M, beta),
     [S(np.array(4.0), M=7), S(np.array(0.5), M=6)], grad=True, dtype_rule=_all_float(F32),
     dtype_note="float32, the default float (NumPy: float64)")
case("logspace", nx.logspace, np.logspace,
     [S(0.0, 2.0, num=5), S(0.5, 3.0, num=4, endpoint=False, base=2.0),
      S(_d((2,), F64), _d((2,), F64), num=3, axis=1)], grad=True, diff_argnums=(0, 1),
     dtype_note="Python-number ends give float32, the default float (NumPy: float64)")
case("geomspace", nx.geomspace, np.geomspace,
     [S(1.0, 1000.0, num=4), S(-2.0, -50.0, num=5, endpoint=False), S(1j, 1000j, num=4), S(-1.0, 1.0, num=3),
      S(_d((2,), F64, "positive"), _d((2,), F64, "positive"), num=3, axis=1)], grad=True, diff_argnums=(0, 1),
     domain="positive", dtype_note="Python-number ends give float32, the default float (NumPy: float64)")

# -- interpolation and mapping
_XP = np.sort(_rng("numeric xp").uniform(0, 5, 6))
_X = _rng("numeric x").uniform(-1, 6, 9)
case("interp", nx.interp, np.interp,
     [S(_X, _XP, _d((6,), F64)), S(_X.astype(F32), _XP.astype(F32), _d((6,), F32), left=-9.0, right=9.0),
      S(_X, _XP, _d((6,), C128)), S(_X, _XP, _d((6,), F64), period=4.0),
      S(np.append(_XP[2:4], 7.0), _XP, _d((6,), F64), fd=False)],   # (on sample points: kinks)
     grad=True, diff_argnums=(0, 2), dtype_rule=_promoted_inexact,
     dtype_note="the float of x, xp and fp by rune's promotion (NumPy: always float64 or complex128)")
_PX = np.linspace(-2, 2, 7) + 0.1



case("piecewise", lambda x, b, a: nx.piecewise(x, [b, a], [lambda v: -v, 5.0, lambda v: v * 2]),
     lambda x, b, a: np.piecewise(x, [b, a], [lambda v: -v, 5.0, lambda v: v * 2]),
     [S(_PX, _PX < 0, _PX > 1), S(_PX.astype(F32), _PX < 1, _PX > 1.5)], grad=True)
case("apply_along_axis",
     lambda a, axis: nx.apply_along_axis(lambda v: v * v.sum(), axis, a),
     lambda a, axis: np.apply_along_axis(lambda v: v * v.sum(), axis, a),
     [S(_d((3, 4), F64), axis=1), S(_d((2, 3, 4), F32), axis=0)], grad=True)
case("apply_over_axes", lambda a, axes: nx.apply_over_axes(nx.sum, a, axes),
     lambda a, axes: np.apply_over_axes(np.sum, a, axes),
     [S(_d((2, 3, 4), F64), axes=(0, 2)), S(_d((3, 4), F32), axes=1)], grad=True)
case("matvec", nx.matvec, np.matvec,
     [S(_d((2, 3, 4), F64), _d((4,), F64)), S(_d((3, 4), F32), _d((2, 1, 4), F32)), S(_d((3, 2), I32), _d((2,), I32))],
     grad=True, diff_argnums=(0, 1))
case("vecmat", nx.vecmat, np.vecmat,
     [S(_d((3,), F64), _d((2, 3, 4), F64)), S(_d((2, 3), C128), _d((3, 2), C128)), S(_d((2,), I32), _d((2, 3), I32))],
     grad=True, diff_argnums=(0, 1))

# -- the low floats (float16, bfloat16): one small sample for a few functions, the two alternating
from op_table import _extend, float_rule  # noqa: E402

_LOW_UNARY = {"cbrt": "nonzero", "exp2": "small", "sinc": "real", "modf": "frac", "nan_to_num": "special",
              "frexp": "real", "i0": "real", "gradient": "real", "unwrap": "real"}
_LOW_BINARY = {"fmax": ("special", "real"), "fmod": ("real", "nonzero"), "logaddexp2": ("real", "real"),
               "heaviside": ("frac", "real"), "isclose": ("real", "real"), "cross": ("real", "real")}
for _k, (_name, _doms) in enumerate(list(_LOW_UNARY.items()) + list(_LOW_BINARY.items())):
    _low = LOW_FLOATS[_k % 2]
    _doms = (_doms,) if isinstance(_doms, str) else _doms
    _extend(_name, [S(*[_d((2, 3) if i == 0 else (3,), _low, dom) for i, dom in enumerate(_doms)])])
_extend("ldexp", [S(_d((2, 3), BF16), _d((3,), I8))])
# NumPy's i0 and gradient give float64 for bfloat16 (they compute in float64); rune keeps the float dtype.
for _case in TABLE:
    if _case.name in ("i0", "gradient"):
        _case.dtype_rule = float_rule
        _case.dtype_note = "a float operand keeps its dtype (NumPy: float64 for bfloat16)"
