"""Math functions with the same bits on every target, for the random samplers.

Each function here is a fixed sequence of operations that IEEE 754 rounds
correctly (+, -, *, /, sqrt), comparisons and selects, on float32 or float64
arrays. Eager NumPy, the compiled C kernels (no FMA contraction) and the CUDA
kernels (no fused multiply-add) all compute exactly that sequence, so the
results agree bit for bit, where libm's, NumPy's SIMD and CUDA's log differ in
the last bit. Powers of two scale exactly, so exponents are found by comparing
and scaling, never by reinterpreting bits.

  log(x)      natural log, within 1 ulp (fdlibm's reduction and polynomial).
  exp(x)      e**x, within 1 ulp (fdlibm's reduction and rational form).
  ndtri(p)    the standard normal quantile (Wichura's AS 241, PPND16: rational
              approximations with positive coefficients on positive arguments,
              so their evaluation loses little), within a few ulp.
  ndtr(x)     the standard normal CDF, from exp(-x**2/2) and Weideman's (1994)
              expansion of erfcx: relative error within 4e-15 (float64) or 1e-6
              (float32) however far into the lower tail.
  log_ndtr(x) log of the normal CDF, without underflow: -x**2/2 plus the log of
              ndtr's erfcx term in the lower tail (x = -40 gives -804.6).
  ndtri_exp(y)  the normal quantile of exp(y): AS 241 from r = sqrt(-y) itself,
              with a Newton step on log_ndtr beyond its fitted range (r > 27).
  nextafter(x, y)  the float next to x toward y, of x's dtype or a narrower one.

Each is about a hundred elementwise operations: eagerly, on large concrete
arrays, they run as one compiled plan (`compiled_when_eager`) once the compiler
has registered itself (`use_compiler`), which gives the same bits as running
them op by op and is an order of magnitude faster.
"""
import functools
import math
from decimal import Decimal, localcontext

import ml_dtypes
import numpy as np

from ..base.tuning import EAGER_COMPILE_SIZE
from ..core.array import Array
from ..core.trace import EVAL, active
from ..errors import DTypeError
from ..core import dtypes as dt
from . import ops

_JIT = []   # the compiler (rune.jit), registered from above: nx does not import it


def use_compiler(jit):
    """Let eager calls of this module's functions on large arrays run compiled by `jit`."""
    _JIT[:] = [jit]


def compiled_when_eager(fn):
    """`fn(x, *args, **static)` as one compiled plan when called eagerly on a concrete
    array of at least EAGER_COMPILE_SIZE elements (the other arguments are static)."""
    compiled = {}

    @functools.wraps(fn)
    def run(x, *args, **static):
        if (not _JIT or args or active.interp is not EVAL or type(x) is not Array
                or x.size < EAGER_COMPILE_SIZE):
            return fn(x, *args, **static)
        names = tuple(sorted(static))
        jitted = compiled.get(names)
        if jitted is None:
            jitted = compiled[names] = _JIT[0](fn, static_argnames=names)
        return jitted(x, **static)
    return run


def _split_ln2():
    """(hi, lo) per dtype: hi has trailing zero bits, so e * hi is exact for any
    binary exponent e of the dtype; hi + lo is ln 2 to twice the precision."""
    with localcontext() as context:
        context.prec = 50
        ln2 = Decimal(2).ln()
    hi64 = float.fromhex("0x1.62e42feep-1")            # 21 low bits zero: |e| < 2**11
    hi32 = math.ldexp(round(math.ldexp(float(ln2), 16)), -16)   # 16 significant bits: |e| < 2**8
    return {dt.float64: (np.float64(hi64), np.float64(float(ln2 - Decimal(hi64)))),
            dt.float32: (np.float32(hi32), np.float32(float(ln2 - Decimal(hi32))))}


_LN2 = _split_ln2()

# log(1 + f) = 2 atanh(s), s = f / (2 + f): 2s + s * R(s^2) (fdlibm's minimax R, |s| < 0.1716).
_LOG_R = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
          2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
          1.479819860511658591e-01)

# AS 241 (Wichura 1988), PPND16: numerators and denominators, lowest degree first.
_CENTRAL = ((3.3871328727963666080e0, 1.3314166789178437745e+2, 1.9715909503065514427e+3,
             1.3731693765509461125e+4, 4.5921953931549871457e+4, 6.7265770927008700853e+4,
             3.3430575583588128105e+4, 2.5090809287301226727e+3),
            (1.0, 4.2313330701600911252e+1, 6.8718700749205790830e+2, 5.3941960214247511077e+3,
             2.1213794301586595867e+4, 3.9307895800092710610e+4, 2.8729085735721942674e+4,
             5.2264952788528545610e+3))
_NEAR_TAIL = ((1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
               3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
               2.27238449892691845833e-2, 7.74545014278341407640e-4),
              (1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
               1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
               1.05075007164441684324e-9))
_FAR_TAIL = ((6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
              2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
              2.71155556874348757815e-5, 2.01033439929228813265e-7),
             (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
              7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
              2.04426310338993978564e-15))


# exp(r) = 1 + 2r / (2 - c(r)), c(r) = r - r^2 P(r^2) on |r| <= ln(2)/2 (fdlibm's minimax P).
_EXP_P = (1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
          -1.65339022054652515390e-06, 4.13813679705723846039e-08)

# erfcx(y) = (2 P(Z) / (L + y) + 1/sqrt(pi)) / (L + y), Z = (L - y) / (L + y), y >= 0: Weideman's
# expansion with N = 40 terms, L = sqrt(N / sqrt(2)), its coefficients (lowest degree first)
# computed once by his FFT recipe. Terms below 1e-10 are left out in float32.
_ERFCX_L = 5.3182958969449885
_ERFCX = (2.899624509389705, 2.6160541527618597, 2.201513794878312, 1.7253830848179779,
          1.2563815675765133, 0.8472174576593815, 0.5266528988277086, 0.2998943799615006,
          0.15504263802479504, 0.07182361779074328, 0.02920291647124188, 0.010048186242783535,
          0.002705405633073729, 0.000439807015986967, -3.939363145483805e-05, -5.5913092642348794e-05,
          -1.8007447144723407e-05, -1.066013898416273e-06, 1.4835661133172014e-06, 5.912136953029057e-07,
          1.419864237295343e-08, -6.351773483015411e-08, -1.8315616834296834e-08, 3.249746582945079e-09,
          3.017780425551564e-09, 2.1085990731251058e-10, -3.5632350403602684e-10, -9.055138860958323e-11,
          3.4727420938907015e-11, 1.771418567386718e-11, -2.7277735625830245e-12, -2.90771851041427e-12,
          1.203330952919568e-13, 4.5341448909434655e-13, 1.3778224047664046e-14, -7.071088022159408e-14,
          -5.231716366324404e-15, 1.1519170220749485e-14, 1.201674910759281e-15, -1.7356980998791865e-15)


def _float_type(x, name):
    if x.dtype not in (dt.float32, dt.float64):
        raise DTypeError(f"exact_math.{name}: expected a float32 or float64 array, got {x.dtype.name}")
    return x.dtype.type


def _polynomial(coefficients, x, t):
    """sum(c_i x^i) by Horner's rule (a multiply, then an add: never fused)."""
    acc = t(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = ops.add(ops.multiply(x, acc), t(c))
    return acc


def _binade(x, t, lo, hi):
    """(m, e) with x = m * 2**e, 1 <= m < 2 and e an integer held in x's dtype, for x
    in [lo, hi] (positive, finite): binary searches on the exponent with exact
    power-of-two scalings (of the selected factor, so no lane overflows), only as
    many steps as that range needs."""
    info = np.finfo(t)
    e = t(0)
    if lo < info.tiny:                               # subnormals first become normal
        sub = ops.less(x, t(info.tiny))
        x = ops.multiply(x, ops.where(sub, t(2.0 ** info.nmant), t(1)))
        e = ops.where(sub, t(-info.nmant), e)
        lo = info.tiny
    for k in _steps(math.frexp(hi)[1] - 1):          # down to below 2
        big = ops.greater_equal(x, t(2.0 ** k))
        x = ops.multiply(x, ops.where(big, t(2.0 ** -k), t(1)))
        e = ops.where(big, ops.add(e, t(k)), e)
    for k in _steps(1 - math.frexp(lo)[1]):          # up to at least 1
        small = ops.less(x, t(2.0 ** (1 - k)))
        x = ops.multiply(x, ops.where(small, t(2.0 ** k), t(1)))
        e = ops.where(small, ops.subtract(e, t(k)), e)
    return x, e


def _steps(most):
    """Powers of two, largest first, whose subsets sum to every integer in [0, most]."""
    return [2 ** i for i in reversed(range(max(most, 0).bit_length()))]


@compiled_when_eager
def log(x, bounds=None):
    """The natural logarithm of a float32 or float64 array, within 1 ulp: -inf at 0,
    NaN below 0 and at NaN, inf at inf. bounds=(lo, hi), 0 < lo <= hi finite: x is
    known to lie in [lo, hi], which leaves out the steps other values need."""
    x = ops.asarray(x)
    t = _float_type(x, "log")
    if bounds is None:
        ok = ops.logical_and(ops.greater(x, t(0)), ops.less(x, t(np.inf)))
        m, e = _binade(ops.where(ok, x, t(1)), t, 0.0, float(np.finfo(t).max))
    else:
        m, e = _binade(x, t, *(float(b) for b in bounds))
    # m in [sqrt(1/2), sqrt(2)): f = m - 1 is exact (Sterbenz) and small.
    high = ops.greater(m, t(math.sqrt(2)))
    m = ops.where(high, ops.multiply(m, t(0.5)), m)
    e = ops.where(high, ops.add(e, t(1)), e)
    f = ops.subtract(m, t(1))
    s = ops.divide(f, ops.add(f, t(2)))
    z = ops.multiply(s, s)
    r = ops.multiply(z, _polynomial(_LOG_R, z, t))
    half_f2 = ops.multiply(ops.multiply(f, f), t(0.5))
    hi, lo = _LN2[x.dtype]
    # log(1 + f) = f - (f^2/2 - s (f^2/2 + R)), with e ln 2 added in two parts (fdlibm).
    inner = ops.add(ops.multiply(s, ops.add(half_f2, r)), ops.multiply(e, lo))
    out = ops.subtract(ops.multiply(e, hi), ops.subtract(ops.subtract(half_f2, inner), f))
    if bounds is not None:
        return out
    special = ops.where(ops.equal(x, t(0)), t(-np.inf), ops.where(ops.equal(x, t(np.inf)), x, t(np.nan)))
    return ops.where(ok, out, special)


def _rational(pair, x, t):
    numerator, denominator = pair
    return ops.divide(_polynomial(numerator, x, t), _polynomial(denominator, x, t))


@compiled_when_eager
def ndtri(p, lowest=None):
    """The standard normal quantile: x with P(Z <= x) = p, for a float32 or float64
    array; -inf at 0, inf at 1, NaN outside [0, 1]. ndtri(1 - p) == -ndtri(p)
    exactly wherever 1 - p is exact. lowest: p is known to lie in [lowest,
    1 - lowest] (0 < lowest <= 1/2), which leaves out the steps other values need."""
    p = ops.asarray(p)
    t = _float_type(p, "ndtri")
    if lowest is None:
        ok = ops.logical_and(ops.greater(p, t(0)), ops.less(p, t(1)))
        special = ops.where(ops.equal(p, t(0)), t(-np.inf), ops.where(ops.equal(p, t(1)), t(np.inf), t(np.nan)))
        p = ops.where(ok, p, t(0.5))
    smallest = float(np.finfo(t).smallest_subnormal) if lowest is None else float(lowest)
    # Tails: r = sqrt(-log(the smaller of p and 1 - p))
    r = ops.sqrt(ops.negative(log(ops.minimum(p, ops.subtract(t(1), p)), bounds=(smallest, 0.5))))
    out = _ppnd16(ops.subtract(p, t(0.5)), r, t, far=math.sqrt(-math.log(smallest)) > 5)
    return out if lowest is not None else ops.where(ok, out, special)


def _ppnd16(q, r, t, far):
    """AS 241's quantile from q = p - 1/2 and r = sqrt(-log(min(p, 1 - p))) (> 1.6
    wherever |q| > 0.425, so the shifted arguments of the branch taken are
    non-negative): every branch is computed, then one is chosen. far: whether r
    can exceed 5 (else its branch is left out)."""
    central = ops.multiply(q, _rational(_CENTRAL, ops.subtract(t(0.180625), ops.multiply(q, q)), t))
    tail = _rational(_NEAR_TAIL, ops.subtract(r, t(1.6)), t)
    if far:
        tail = ops.where(ops.less_equal(r, t(5)), tail, _rational(_FAR_TAIL, ops.subtract(r, t(5)), t))
    tail = ops.where(ops.less(q, t(0)), ops.negative(tail), tail)
    return ops.where(ops.less_equal(ops.abs(q), t(0.425)), central, tail)


def _scale(y, k, t):
    """y * 2**k for an integer k held in y's dtype, by exact power-of-two factors (the
    largest twice, as 2**(2 * largest) does not exist); a subnormal result rounds at
    each of the last steps."""
    steps = _steps(np.finfo(t).maxexp // 2)           # 64..1 or 512..1: their sum and the
    for s in [steps[0]] + steps:                      # largest again cover every k
        up = ops.greater_equal(k, t(s))
        down = ops.less_equal(k, t(-s))
        y = ops.multiply(y, ops.where(up, t(2.0 ** s), ops.where(down, t(2.0 ** -s), t(1))))
        k = ops.subtract(k, ops.where(up, t(s), ops.where(down, t(-s), t(0))))
    return y


@compiled_when_eager
def exp(x):
    """e**x for a float32 or float64 array, within 1 ulp (normal results): 0 below the
    underflow threshold, inf above the overflow one, NaN at NaN."""
    x = ops.asarray(x)
    t = _float_type(x, "exp")
    info = np.finfo(t)
    top = t(math.log(float(info.max)))                               # above: inf
    top = np.nextafter(top, t(0)) if float(top) > math.log(float(info.max)) else top
    bottom = math.log(float(info.smallest_subnormal)) - math.log(2)  # below: 0
    xc = ops.minimum(ops.maximum(x, t(bottom)), top)                 # no lane overflows
    k = ops.round(ops.multiply(xc, t(1 / math.log(2))))
    hi_ln2, lo_ln2 = _LN2[x.dtype]
    hi = ops.subtract(xc, ops.multiply(k, hi_ln2))                   # exact: k ln2_hi has spare bits
    lo = ops.multiply(k, lo_ln2)
    r = ops.subtract(hi, lo)
    r2 = ops.multiply(r, r)
    c = ops.subtract(r, ops.multiply(r2, _polynomial(_EXP_P, r2, t)))
    # e**r = 1 - ((lo - r c / (2 - c)) - hi)
    er = ops.subtract(t(1), ops.subtract(ops.subtract(lo, ops.divide(ops.multiply(r, c), ops.subtract(t(2), c))),
                                         hi))
    out = _scale(er, k, t)
    out = ops.where(ops.greater(x, top), t(np.inf), ops.where(ops.less(x, t(bottom)), t(0), out))
    return ops.where(ops.isnan(x), x, out)


def _erfcx(y, t):
    """exp(y**2) erfc(y) for y >= 0 (finite)."""
    coefficients = _ERFCX if t is np.float64 else tuple(c for c in _ERFCX if abs(c) > 1e-10)
    shifted = ops.add(y, t(_ERFCX_L))
    z = ops.divide(ops.subtract(t(_ERFCX_L), y), shifted)
    inner = ops.add(ops.divide(ops.multiply(_polynomial(coefficients, z, t), t(2)), shifted),
                    t(1 / math.sqrt(math.pi)))
    return ops.divide(inner, shifted)


def _lower_tail(a, t):
    """(g, e) for a >= 0 (finite, below 2**60): Phi(-a) = exp(g) e, with g = -a^2/2 the
    sum of two parts held apart (g[0] exact), e = erfcx(a/sqrt 2)/2 in (0, 1/2]."""
    # a = h + l, h = a rounded to 1/16: h^2/2 is exact (for a below 2**8 in float32,
    # 2**22 in float64) and l (a + h) small, so the rounding of a^2 (up to 800 ulp of
    # it at a = 40) never reaches the exponent.
    h = ops.multiply(ops.round(ops.multiply(a, t(16))), t(1 / 16))
    rest = ops.multiply(ops.subtract(a, h), ops.add(a, h))
    half_e = ops.multiply(_erfcx(ops.multiply(a, t(1 / math.sqrt(2))), t), t(0.5))
    return (ops.multiply(ops.multiply(h, h), t(-0.5)), ops.multiply(rest, t(-0.5))), half_e


@compiled_when_eager
def ndtr(x):
    """The standard normal CDF P(Z <= x) of a float32 or float64 array: 0 at -inf, 1 at
    inf, NaN at NaN. The lower tail is Phi(-|x|) = exp(-x^2/2) erfcx(|x|/sqrt 2) / 2,
    relatively accurate however far out; the upper one is 1 minus it."""
    x = ops.asarray(x)
    t = _float_type(x, "ndtr")
    # beyond `far` the lower tail underflows to 0: clamping keeps every lane finite
    far = t(40.0 if t is np.float64 else 15.0)
    (g_exact, g_rest), half_e = _lower_tail(ops.minimum(ops.abs(x), far), t)
    tail = ops.multiply(ops.multiply(exp(g_exact), exp(g_rest)), half_e)
    out = ops.where(ops.greater(x, t(0)), ops.subtract(t(1), tail), tail)
    return ops.where(ops.isnan(x), x, out)


# |x| is clamped here in log_ndtr, where x^2 is still finite and log Phi(-x) = -x^2/2 to
# far below every dtype's precision (so -inf and inf give finite, ordered values)
_LOG_NDTR_FAR = 2.0 ** 60


@compiled_when_eager
def log_ndtr(x):
    """log P(Z <= x) of a float32 or float64 array, without underflow: in the lower tail
    -x^2/2 + log(erfcx(|x|/sqrt 2)/2), within a few ulp of it however far out (at
    x = -40, where Phi(x) is below float64's smallest value, it is -804.6); above 0,
    log(1 - Phi(-x)). -inf and inf are taken as -2**60 and 2**60 (giving about
    -6.6e35 and 0); NaN at NaN."""
    x = ops.asarray(x)
    t = _float_type(x, "log_ndtr")
    a = ops.minimum(ops.abs(x), t(_LOG_NDTR_FAR))
    return ops.where(ops.isnan(x), x, _log_ndtr(x, a, t)[0])


def _log_ndtr(x, a, t):
    """(log Phi(x), erfcx(a/sqrt 2)/2) for a = |x| (clamped)."""
    (g_exact, g_rest), half_e = _lower_tail(a, t)
    # e lies in [erfcx(2**60/sqrt 2)/2, 1/2] (erfcx(y) > 1/(sqrt(pi) (y + 1)))
    lower = ops.add(ops.add(g_exact, g_rest), log(half_e, bounds=(2.0 ** -64, 0.5)))
    upper = log(ops.subtract(t(1), exp(ops.minimum(lower, t(0)))), bounds=(0.5, 1.0))
    return ops.where(ops.greater(x, t(0)), upper, lower), half_e


# Beyond this r = sqrt(-log p), AS 241's far-tail approximation (fitted up to r = 27)
# drifts (1e-9 relative at r = 70): its value is refined by a Newton step from there,
# and beyond it the quantile starts from its asymptotic form instead.
_NEWTON_FROM = 27.0
_ASYMPTOTIC_FROM = 70.0
_NEWTON_UNTIL = 2.0 ** 40


@compiled_when_eager
def ndtri_exp(y):
    """The standard normal quantile of exp(y): x with log P(Z <= x) = y, for a float32 or
    float64 array of y <= 0, without underflow however far into the lower tail (y =
    -804.6 gives -40): ndtri's AS 241 with r = sqrt(-y) taken straight from y, then,
    beyond r = 27, one Newton step on log_ndtr(x) = y, from the asymptotic
    x^2 = s - log s, s = -2y - log(2 pi), beyond r = 70. Within a few ulp in the lower
    tail (3 ulp against 50-digit quantiles, y from -1 to -1e20); above y = log(1/2) as
    accurate as ndtri of exp(y) (1 - exp(y) keeps exp(y)'s absolute error).
    -inf at -inf, inf at 0, NaN above 0 and at NaN; y below a quarter of the dtype's most
    negative value is taken as that quarter."""
    given = ops.asarray(y)
    t = _float_type(given, "ndtri_exp")
    tiny = float(np.finfo(t).tiny)
    ok = ops.logical_and(ops.greater(given, t(-np.inf)), ops.less(given, t(0)))
    y = ops.where(ok, given, t(-1))
    p = exp(y)
    q = ops.subtract(p, t(0.5))
    # log(min(p, 1 - p)): y itself below 1/2 (never rounded through p)
    small = ops.where(ops.less(q, t(0)), y,
                      log(ops.maximum(ops.subtract(t(1), p), t(tiny)), bounds=(tiny, 1.0)))
    r = ops.sqrt(ops.negative(small))
    # (beyond _ASYMPTOTIC_FROM the rational is not used, and its powers of r could overflow)
    x = _ppnd16(q, ops.minimum(r, t(_ASYMPTOTIC_FROM)), t, far=True)
    # the far lower tail (q < 0 there): the asymptotic start, then a Newton step (where
    # log_ndtr's clamp of |x| leaves it meaningful: beyond, the start is exact to the last bit)
    s = ops.subtract(ops.multiply(ops.maximum(y, t(-float(np.finfo(t).max) / 4)), t(-2)), t(math.log(2 * math.pi)))
    s = ops.maximum(s, t(_ASYMPTOTIC_FROM ** 2))
    start = ops.negative(ops.sqrt(ops.subtract(s, log(s, bounds=(_ASYMPTOTIC_FROM ** 2, float(np.finfo(t).max))))))
    x0 = ops.where(ops.greater(r, t(_ASYMPTOTIC_FROM)), start, ops.minimum(x, t(-_NEWTON_FROM)))
    a = ops.minimum(ops.negative(x0), t(_LOG_NDTR_FAR))
    logcdf, half_e = _log_ndtr(x0, a, t)
    # d/dx log Phi(x) = phi(x) / Phi(x) = 1 / (sqrt(2 pi) erfcx(|x|/sqrt 2) / 2) for x < 0
    newton = ops.subtract(x0, ops.multiply(ops.subtract(logcdf, y), ops.multiply(half_e, t(math.sqrt(2 * math.pi)))))
    x = ops.where(ops.greater(r, t(_NEWTON_FROM)), ops.where(ops.less(r, t(_NEWTON_UNTIL)), newton, x0), x)
    special = ops.where(ops.equal(given, t(-np.inf)), t(-np.inf),
                        ops.where(ops.equal(given, t(0)), t(np.inf), t(np.nan)))
    return ops.where(ok, x, special)


@compiled_when_eager
def nextafter(x, y, grid=None):
    """The float adjacent to x in the direction of y (y where they are equal, NaN where
    either is), for float32 or float64 arrays. grid: a narrower float dtype (float16,
    bfloat16) whose values x holds: the neighbour on that dtype's grid, exact in x's."""
    x = ops.asarray(x)
    y = ops.constant_like(y, x)   # (a host value placed with x: a key on any device)
    t = _float_type(x, "nextafter")
    info = ml_dtypes.finfo(grid or x.dtype)
    lowest_exponent = float(info.minexp)
    a = ops.abs(x)
    m, e = _binade(ops.where(ops.logical_and(ops.greater(a, t(0)), ops.less(a, t(np.inf))), a, t(1)), t,
                   float(np.finfo(t).smallest_subnormal), float(np.finfo(t).max))
    e = ops.maximum(e, t(lowest_exponent))                # subnormals share the lowest spacing
    spacing = _scale(t(1), ops.subtract(e, t(info.nmant)), t)
    up, down = ops.less(x, y), ops.greater(x, y)
    # toward zero from a power of two the spacing below is half (above the lowest binade)
    toward_zero = ops.logical_or(ops.logical_and(up, ops.less(x, t(0))), ops.logical_and(down, ops.greater(x, t(0))))
    halve = ops.logical_and(toward_zero, ops.logical_and(ops.equal(m, t(1)), ops.greater(e, t(lowest_exponent))))
    step = ops.where(halve, ops.multiply(spacing, t(0.5)), spacing)
    step = ops.where(ops.equal(a, t(0)), t(float(info.smallest_subnormal)), step)
    # on magnitudes: away from zero past the largest finite value lies infinity, which is
    # selected, never computed (so no lane overflows, whichever way it goes)
    top = t(float(info.max))
    at_top = ops.equal(a, top)
    grown = ops.where(at_top, t(np.inf), ops.add(ops.where(at_top, t(0), a), step))
    magnitude = ops.where(toward_zero, ops.subtract(a, step), grown)
    negative = ops.logical_or(ops.less(x, t(0)), ops.logical_and(ops.equal(x, t(0)), down))
    moved = ops.where(negative, ops.negative(magnitude), magnitude)
    out = ops.where(ops.logical_or(up, down), moved, y)   # equal: y (so -0.0 toward 0.0 is 0.0, as C)
    # from an infinity toward a finite value: the largest finite value
    out = ops.where(ops.logical_and(ops.equal(a, t(np.inf)), ops.not_equal(x, y)),
                    ops.where(ops.greater(x, t(0)), t(float(info.max)), t(-float(info.max))), out)
    return ops.where(ops.isnan(x), x, ops.where(ops.isnan(y), y, out))
