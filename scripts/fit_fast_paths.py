"""The polynomials of rune's float32 fast paths (rune/codegen/c_src/rn_math_fast.h):
Chebyshev fits with mpmath at 200 bits, printed as the header's hex constants (lowest
degree first) with each fit's largest error (absolute; Q is near 2, so relative is half).

    python scripts/fit_fast_paths.py

A changed fit must be checked again on every input (scripts/check_fast_paths.py).
"""
import mpmath

mpmath.mp.prec = 200
LN2 = mpmath.log(2)
SLACK = mpmath.mpf("1e-6")   # the reduced argument can pass its bound by a few ulps
TINY = 1e-9


def _exp(r):
    return mpmath.exp(r)


def _atanh_tail(z):
    """P(z) with atanh(s) = s + s z P(z), z = s^2."""
    if z == 0:
        return mpmath.mpf(1) / 3
    s = mpmath.sqrt(z)
    return (mpmath.atanh(s) / s - 1) / z


def _expm1_2r_over_r(r):
    """Q(r) with r Q(r) = e^(2r) - 1."""
    return 2 * mpmath.expm1(2 * r) / (2 * r) if r != 0 else mpmath.mpf(2)


def _sin_tail(z):
    """S(z) with sin r = r + r z S(z), z = r^2."""
    return (mpmath.sin(mpmath.sqrt(z)) / mpmath.sqrt(z) - 1) / z if z != 0 else -mpmath.mpf(1) / 6


def _cos_tail(z):
    """C(z) with cos r = 1 + z C(z), z = r^2."""
    return (mpmath.cos(mpmath.sqrt(z)) - 1) / z if z != 0 else -mpmath.mpf(1) / 2


def _erf_over_x(z):
    """P(z) with erf x = x P(z), z = x^2."""
    return mpmath.erf(mpmath.sqrt(z)) / mpmath.sqrt(z) if z != 0 else 2 / mpmath.sqrt(mpmath.pi)


def _erfc_scaled(center):
    """R(center + u) with erfc a = e^(-a^2) R(a)."""
    return lambda u: mpmath.erfc(center + u) * mpmath.exp((center + u) ** 2)


S_MAX = (mpmath.sqrt(2) - 1) / (mpmath.sqrt(2) + 1)
# name: (function, interval, degree)
FITS = {
    "exp: e^r, |r| <= ln(2)/2": (_exp, [-LN2 / 2 - SLACK, LN2 / 2 + SLACK], 8),
    "log: P(z), z <= (3 - 2 sqrt 2)^2": (_atanh_tail, [0, S_MAX ** 2 * (1 + mpmath.mpf("1e-9"))], 4),
    "tanh: Q(r), |r| <= ln(2)/4": (_expm1_2r_over_r, [-LN2 / 4 - SLACK, LN2 / 4 + SLACK], 8),
    "sin: S(z), z = r^2 <= (pi/4)^2": (_sin_tail, [0, (mpmath.pi / 4) ** 2 * (1 + SLACK)], 4),
    "cos: C(z), z = r^2 <= (pi/4)^2": (_cos_tail, [0, (mpmath.pi / 4) ** 2 * (1 + SLACK)], 4),
    "erf: P(z), z = x^2 <= 1": (_erf_over_x, [0, 1 + TINY], 9),
    "erf: R(1.5 + u), |u| <= 1/2": (_erfc_scaled(mpmath.mpf(1.5)), [-0.5 - TINY, 0.5 + TINY], 12),
    "erf: R(3 + u), |u| <= 1": (_erfc_scaled(mpmath.mpf(3)), [-1 - TINY, 1 + TINY], 14),
}


def main():
    for name, (f, interval, degree) in FITS.items():
        poly, err = mpmath.chebyfit(f, interval, degree + 1, error=True)
        print(f"{name}: degree {degree}, largest error 2^{float(mpmath.log(err, 2)):.1f}")
        print("  " + ", ".join(float(c).hex() for c in reversed(poly)))


if __name__ == "__main__":
    main()
