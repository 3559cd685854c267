/* rune's float32 math library: correctly rounded results, the same bits in the C
   and the CUDA dialect (docs/numerics.md).

   Written once, included by both dialects' preludes (rune/codegen/mathlib.py), with
   only IEEE 754 basic operations (+ - * / sqrt), explicit fma, conversions and
   integer bit manipulation: every operation is correctly rounded on both targets,
   so the same text gives the same bits (C: -ffp-contract=off; NVRTC: --fmad=false,
   no -ftz). No libm call lies on a result's path.

   Each function evaluates in double with a relative error far below 2^-44 (the
   `RN_GATE` window) and rounds once to float. Rounding a double y that close to the
   exact value f(x) gives f(x) correctly rounded unless y lies within the window of a
   midpoint between two floats; only then (about one input in 2^20) the function
   looks x up in its table of hard cases: the inputs, found by the exhaustive checker
   (scripts/check_math_exhaustive.py), whose double lands on the wrong side of a
   midpoint, with their correctly rounded results (rn_math_fixes.h).

   Every function takes and returns float; rn_<name>f as libm's names. */
#ifndef RN_TABLE
#if defined(__CUDACC__)
#define RN_TABLE static __device__ const
#else
#define RN_TABLE static const
#endif
#endif

/* ------------------------------------------------------------------ bits */
RN_FN uint64_t rn_dbits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
RN_FN double rn_bitsd(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
RN_FN uint32_t rn_fbits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
RN_FN float rn_bitsf(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
RN_FN double rn_fabs(double x) { return rn_bitsd(rn_dbits(x) & 0x7fffffffffffffffull); }
RN_FN int rn_isnanf(float x) { return (rn_fbits(x) & 0x7fffffffu) > 0x7f800000u; }
/* x with the sign of s (a float's sign bit) */
RN_FN float rn_signf(float x, float s) {
  return rn_bitsf((rn_fbits(x) & 0x7fffffffu) | (rn_fbits(s) & 0x80000000u));
}
/* t rounded to an integer, half to even, for |t| < 2^51 (exact in round to nearest) */
#define RN_INFF rn_bitsf(0x7f800000u)
RN_FN double rn_rint(double t) { return (t + 0x1.8p52) - 0x1.8p52; }
/* 2^k for k in [-1022, 1023] */
RN_FN double rn_pow2i(int k) { return rn_bitsd((uint64_t)(k + 1023) << 52); }

/* ------------------------------------------------------------------ rounding */
/* The window: a double within RN_GATE ulps of a float midpoint is a possible hard case. */
#define RN_GATE 256

/* Whether y lies within RN_GATE double ulps of a midpoint between two floats. */
RN_FN int rn_near_midpoint(double y) {
  uint64_t u = rn_dbits(y) & 0x7fffffffffffffffull;
  if (u >= (uint64_t)(1023 - 126) << 52) {        /* float normal range: 29 bits dropped */
    uint64_t low = u & 0x1fffffffull;
    return low + RN_GATE > 0x10000000ull && low < 0x10000000ull + RN_GATE;
  }
  double s = rn_bitsd(u) * 0x1p149;               /* subnormal grid: the integers */
  double f = rn_fabs(s - rn_rint(s));
  return f >= 0.5 - RN_GATE * 0x1p-52 * s;
}

/* The correctly rounded float of x's function from its double y: y itself rounded,
   or near a midpoint the table's answer for x (pairs of input and result bits,
   sorted by input; n pairs). */
RN_FN float rn_finish(double y, float x, const uint32_t *table, int n) {
  if (rn_near_midpoint(y)) {
    uint32_t key = rn_fbits(x);
    int lo = 0, hi = n;
    while (lo < hi) {
      int mid = (lo + hi) >> 1;
      if (table[2 * mid] < key) lo = mid + 1; else hi = mid;
    }
    if (lo < n && table[2 * lo] == key) return rn_bitsf(table[2 * lo + 1]);
  }
  return (float)y;
}

/* h + l (|l| <= ulp(h) / 2) rounded once to float: h's rounding, unless h is a
   midpoint, where l's sign decides. */
RN_FN float rn_round_dd(double h, double l) {
  float f = (float)h;
  double d = h - (double)f;                         /* exact */
  if (l == 0 || d == 0 || !(rn_fabs(h) <= 0x1.fffffep127)) return f;
  uint32_t u = rn_fbits(f);
  /* the float on h's other side */
  float g = f == 0 ? (h > 0 ? 0x1p-149f : -0x1p-149f) : rn_bitsf((h > f) == (f > 0) ? u + 1 : u - 1);
  if ((double)g - h != h - (double)f) return f;       /* not a midpoint */
  return (l > 0) == (d > 0) ? g : f;
}

/* ------------------------------------------------------------------ constants */
#define RN_LN2_HI 0x1.62e42fefa39efp-1
#define RN_LN2_LO 0x1.abc9e3b39803fp-56
#define RN_INVLN2 0x1.71547652b82fep+0
#define RN_INVLN2_LO 0x1.777d0ffda0d24p-56
#define RN_LOG10_2_HI 0x1.34413509f79ffp-2
#define RN_LOG10_2_LO -0x1.9dc1da994fd21p-59
#define RN_INVLN10 0x1.bcb7b1526e50ep-2
#define RN_PIO2_HI 0x1.921fb54442d18p+0
#define RN_PIO2_LO 0x1.1a62633145c07p-54
#define RN_PI_HI 0x1.921fb54442d18p+1
#define RN_PI_LO 0x1.1a62633145c07p-53
/* ln 2 with 21 trailing zero bits (k * hi exact for |k| < 2^21) and the rest */
#define RN_LN2_K 0x1.62e42feep-1
#define RN_LN2_KLO 0x1.a39ef35793c76p-33

/* 2/pi in pieces of at most 28 bits: a float times a piece is exact in double */
RN_TABLE double rn_2opi[9] = {
  0x1.45f306cp-1, 0x1.c9c882ap-29, 0x1.4fe13a8p-59, 0x1.f47d4dp-86, 0x1.bb81b6cp-113,
  0x1.4acc9ep-143, 0x1.0e4107cp-170, 0x1.ca2c756p-197, 0x1.bd778acp-225};

/* atan(j / 8), j = 0..8, as hi + lo */
RN_TABLE double rn_atan_j8[18] = {
  0, 0, 0x1.fd5ba9aac2f6ep-4, -0x1.cd37686760c17p-59, 0x1.f5b75f92c80ddp-3, 0x1.8ab6e3cf7afbdp-57,
  0x1.6f61941e4def1p-2, -0x1.c63aae6f6e918p-56, 0x1.dac670561bb4fp-2, 0x1.a2b7f222f65e2p-56,
  0x1.1e00babdefeb4p-1, -0x1.928df287a668fp-58, 0x1.4978fa3269ee1p-1, 0x1.2419a87f2a458p-56,
  0x1.700a7c5784634p-1, -0x1.8c34d25aadef6p-56, 0x1.921fb54442d18p-1, 0x1.1a62633145c07p-55};

/* ------------------------------------------------------------------ exp */
/* e^r - 1 for |r| <= 0.35: Taylor to r^13 / 13! (the rest below 2^-55 relative) */
RN_FN double rn_expm1_poly(double r) {
  double p = 0x1.6124613a86d09p-33;                   /* 1/14! ... */
  p = p * r + 0x1.1eed8eff8d898p-29;                  /* 1/13! */
  p = p * r + 0x1.ae64567f544e4p-26;
  p = p * r + 0x1.27e4fb7789f5cp-22;
  p = p * r + 0x1.71de3a556c734p-19;
  p = p * r + 0x1.a01a01a01a01ap-16;
  p = p * r + 0x1.a01a01a01a01ap-13;
  p = p * r + 0x1.6c16c16c16c17p-10;
  p = p * r + 0x1.1111111111111p-7;
  p = p * r + 0x1.5555555555555p-5;
  p = p * r + 0x1.5555555555555p-3;
  p = p * r + 0.5;
  p = p * r + 1.0;
  return p * r;
}

/* x = k ln 2 + r, |r| <= ln(2)/2 + tiny, for |x| <= 745: returns r, sets k */
RN_FN double rn_exp_reduce(double x, int *k) {
  double kd = rn_rint(x * RN_INVLN2);
  *k = (int)kd;
  return (x - kd * RN_LN2_K) - kd * RN_LN2_KLO;       /* the first difference is exact */
}

/* e^x in double for |x| <= 700 */
RN_FN double rn_exp_d(double x) {
  int k;
  double r = rn_exp_reduce(x, &k);
  int k1 = k / 2;
  return ((1.0 + rn_expm1_poly(r)) * rn_pow2i(k1)) * rn_pow2i(k - k1);
}

/* e^x - 1 in double for |x| <= 700 */
RN_FN double rn_expm1_d(double x) {
  if (rn_fabs(x) < 0.34) return rn_expm1_poly(x);
  int k;
  double r = rn_exp_reduce(x, &k);
  double em = rn_expm1_poly(r);
  if (k > 1000) return (1.0 + em) * rn_pow2i(k - 10) * 0x1p10;
  double s = rn_pow2i(k);
  return s * em + (s - 1.0);
}

/* x clamped to [-150, 150]: past it every float function below saturates */
RN_FN double rn_clamp150(float x) { return x > 150.0f ? 150.0 : (x < -150.0f ? -150.0 : (double)x); }

#include "rn_math_fixes.h"

#define RN_FIXED(name, y, x) rn_finish((y), (x), rn_##name##_fix, (int)(sizeof(rn_##name##_fix) / 8) - 1)

RN_FN float rn_expf(float x) {
  if (rn_isnanf(x)) return x + x;
  return RN_FIXED(expf, rn_exp_d(rn_clamp150(x)), x);
}

RN_FN float rn_exp2f(float x) {
  if (rn_isnanf(x)) return x + x;
  double xd = rn_clamp150(x), k = rn_rint(xd);
  double y = (1.0 + rn_expm1_poly((xd - k) * RN_LN2_HI)) * rn_pow2i((int)k);
  return RN_FIXED(exp2f, y, x);
}

RN_FN float rn_expm1f(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  return RN_FIXED(expm1f, rn_expm1_d(rn_clamp150(x)), x);
}

/* ------------------------------------------------------------------ log */
/* log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: 2 atanh(s), s = f / (2 + f),
   |s| <= 0.1716, the series to s^23 (the rest below 2^-56 relative) */
RN_FN double rn_log1p_red(double f) {
  double s = f / (2.0 + f), z = s * s, t = 2.0 * s;
  double p = 0x1.642c8590b2164p-5;                    /* 1/23 */
  p = p * z + 0x1.8618618618618p-5;                   /* 1/21 */
  p = p * z + 0x1.af286bca1af28p-5;
  p = p * z + 0x1.e1e1e1e1e1e1ep-5;
  p = p * z + 0x1.1111111111111p-4;
  p = p * z + 0x1.3b13b13b13b14p-4;
  p = p * z + 0x1.745d1745d1746p-4;
  p = p * z + 0x1.c71c71c71c71cp-4;
  p = p * z + 0x1.2492492492492p-3;
  p = p * z + 0x1.999999999999ap-3;
  p = p * z + 0x1.5555555555555p-2;                   /* 1/3 */
  return t + t * (z * p);
}

/* u = 2^e (1 + f) with positive normal u, 1 + f in [sqrt(1/2), sqrt(2)): log(1 + f) */
RN_FN double rn_log_parts(double u, double *e) {
  uint64_t b = rn_dbits(u);
  int k = (int)(b >> 52) - 1023;
  double m = rn_bitsd((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 0x1.6a09e667f3bcdp+0) { m *= 0.5; k += 1; }
  *e = (double)k;
  return rn_log1p_red(m - 1.0);                       /* m - 1 exact */
}

/* log(u) for positive normal u */
RN_FN double rn_log_d(double u) {
  double e, l = rn_log_parts(u, &e);
  double p = e * RN_LN2_HI, pe = fma(e, RN_LN2_HI, -p);  /* e ln 2 = p + pe + e lo */
  return p + ((pe + e * RN_LN2_LO) + l);
}

/* log(1 + u) for u > -1 */
RN_FN double rn_log1p_d(double u) {
  if (u > -0.2928 && u < 0.4142) return rn_log1p_red(u);
  return rn_log_d(1.0 + u);
}

/* the special values of a log: NaN below 0 and at NaN, -inf at 0, inf at inf; else 0 */
RN_FN int rn_log_special(float x, float *out) {
  if (x > 0 && x < RN_INFF) return 0;
  *out = x == 0 ? -RN_INFF : (x > 0 ? x : (x - x) / (x - x));
  return 1;
}

RN_FN float rn_logf(float x) {
  float s;
  if (rn_log_special(x, &s)) return s;
  return RN_FIXED(logf, rn_log_d(x), x);
}

RN_FN float rn_log2f(float x) {
  float s;
  if (rn_log_special(x, &s)) return s;
  double e, l = rn_log_parts(x, &e);
  return RN_FIXED(log2f, e + (l * RN_INVLN2 + l * RN_INVLN2_LO), x);
}

RN_FN float rn_log10f(float x) {
  float s;
  if (rn_log_special(x, &s)) return s;
  double e, l = rn_log_parts(x, &e);
  double p = e * RN_LOG10_2_HI, pe = fma(e, RN_LOG10_2_HI, -p);
  return RN_FIXED(log10f, p + ((pe + e * RN_LOG10_2_LO) + l * RN_INVLN10), x);
}

RN_FN float rn_log1pf(float x) {
  if (!(x > -1.0f && x < RN_INFF)) {
    if (x == -1.0f) return -RN_INFF;
    return x > 0 ? x : (x - x) / (x - x);              /* inf, or NaN below -1 and at NaN */
  }
  if (x == 0) return x;
  return RN_FIXED(log1pf, rn_log1p_d(x), x);
}

/* ------------------------------------------------------------------ sin, cos, tan */
/* x (a finite float's value) = (q + r) pi/2, q an integer (returned mod 4), r as
   h + l with |r| <= 1/2 + tiny, to about 2^-85 absolute: pieces of 2/pi times x are
   exact, reduced mod 4 exactly, and summed in double-double. */
RN_FN int rn_rem_pio2(double x, double *rh, double *rl) {
  int ex = (int)((rn_dbits(x) >> 52) & 0x7ff) - 1023;
  int n = (ex + 85) / 28 + 1;
  if (n < 3) n = 3;
  if (n > 9) n = 9;
  double h = 0, l = 0;
  for (int i = 0; i < n; i++) {
    double t = x * rn_2opi[i];
    if (rn_fabs(t) >= 0x1p54) continue;               /* a multiple of 4 */
    t -= 4.0 * rn_rint(t * 0.25);
    double s = h + t, bb = s - h;                     /* two-sum */
    l += (h - (s - bb)) + (t - bb);
    h = s;
  }
  double q = rn_rint(h);
  h -= q;                                             /* exact */
  double s = h + l;
  *rl = l - (s - h);
  *rh = s;
  return (int)((int64_t)q & 3);
}

/* sin(t), cos(t) for |t| <= pi/4 + tiny: Taylor to t^17 / 17!, t^18 / 18! (the rest
   below 2^-60 relative) */
RN_FN double rn_sin_poly(double t) {
  double z = t * t;
  double p = 0x1.952c77030ad4ap-49;
  p = p * z - 0x1.ae7f3e733b81fp-41;
  p = p * z + 0x1.6124613a86d09p-33;
  p = p * z - 0x1.ae64567f544e4p-26;
  p = p * z + 0x1.71de3a556c734p-19;
  p = p * z - 0x1.a01a01a01a01ap-13;
  p = p * z + 0x1.1111111111111p-7;
  p = p * z - 0x1.5555555555555p-3;
  return t + t * (z * p);
}

RN_FN double rn_cos_poly(double t) {
  double z = t * t;
  double p = -0x1.6827863b97d97p-53;
  p = p * z + 0x1.ae7f3e733b81fp-45;
  p = p * z - 0x1.93974a8c07c9dp-37;
  p = p * z + 0x1.1eed8eff8d898p-29;
  p = p * z - 0x1.27e4fb7789f5cp-22;
  p = p * z + 0x1.a01a01a01a01ap-16;
  p = p * z - 0x1.6c16c16c16c17p-10;
  p = p * z + 0x1.5555555555555p-5;
  p = p * z - 0.5;
  return 1.0 + z * p;
}

/* x = (q + r) pi/2 for a finite float x: t = r pi/2 in double, q mod 4 returned */
RN_FN int rn_reduce_trig(float x, double *t) {
  if (x > -0.78f && x < 0.78f) { *t = x; return 0; }
  double h, l;
  int q = rn_rem_pio2(x, &h, &l);
  *t = h * RN_PIO2_HI + (h * RN_PIO2_LO + l * RN_PIO2_HI);
  return q;
}

RN_FN float rn_sinf(float x) {
  if (!(x - x == 0) || x == 0) return x == 0 ? x : x - x;   /* +-0 kept, NaN at inf and NaN */
  double t;
  int q = rn_reduce_trig(x, &t);
  double y = q & 1 ? rn_cos_poly(t) : rn_sin_poly(t);
  return RN_FIXED(sinf, q & 2 ? -y : y, x);
}

RN_FN float rn_cosf(float x) {
  if (!(x - x == 0)) return x - x;
  double t;
  int q = rn_reduce_trig(x, &t);
  double y = q & 1 ? rn_sin_poly(t) : rn_cos_poly(t);
  return RN_FIXED(cosf, (q + 1) & 2 ? -y : y, x);
}

RN_FN float rn_tanf(float x) {
  if (!(x - x == 0) || x == 0) return x == 0 ? x : x - x;
  double t;
  int q = rn_reduce_trig(x, &t);
  double s = rn_sin_poly(t), c = rn_cos_poly(t);
  return RN_FIXED(tanf, q & 1 ? -c / s : s / c, x);
}

/* ------------------------------------------------------------------ hyperbolic */
RN_FN float rn_tanhf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  float a = x < 0 ? -x : x;
  if (a >= 10.0f) return rn_signf(1.0f, x);          /* 1 - tanh(10) < 2^-27 */
  double em = rn_expm1_d(2.0 * (double)a);
  double y = em / (em + 2.0);
  return RN_FIXED(tanhf, x < 0 ? -y : y, x);
}

RN_FN float rn_sinhf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  double a = rn_fabs(rn_clamp150(x)), y;
  if (a < 1.0) {
    double em = rn_expm1_d(a);
    y = 0.5 * (em + em / (em + 1.0));
  } else {
    double e = rn_exp_d(a);
    y = 0.5 * (e - 1.0 / e);
  }
  return RN_FIXED(sinhf, x < 0 ? -y : y, x);
}

RN_FN float rn_coshf(float x) {
  if (rn_isnanf(x)) return x + x;
  double e = rn_exp_d(rn_fabs(rn_clamp150(x)));
  return RN_FIXED(coshf, 0.5 * (e + 1.0 / e), x);
}

RN_FN float rn_logisticf(float x) {
  if (rn_isnanf(x)) return x + x;
  return RN_FIXED(logisticf, 1.0 / (1.0 + rn_exp_d(-rn_clamp150(x))), x);
}

/* ------------------------------------------------------------------ inverse trig */
/* atan(t) for t >= 0 (inf included): atan(c) + atan((t - c) / (1 + t c)) with c = j/8
   nearest t (or 1/t past 1, from pi/2), the series to u^17 on |u| <= 1/16 */
RN_FN double rn_atan_d(double t) {
  int inv = t > 1.0;
  if (inv) t = 1.0 / t;
  double j = rn_rint(t * 8.0), c = j * 0.125;
  double u = (t - c) / (1.0 + t * c), z = u * u;
  double p = 0x1.e1e1e1e1e1e1ep-5;                    /* 1/17 */
  p = p * z - 0x1.1111111111111p-4;
  p = p * z + 0x1.3b13b13b13b14p-4;
  p = p * z - 0x1.745d1745d1746p-4;
  p = p * z + 0x1.c71c71c71c71cp-4;
  p = p * z - 0x1.2492492492492p-3;
  p = p * z + 0x1.999999999999ap-3;
  p = p * z - 0x1.5555555555555p-2;                   /* -1/3 */
  int k = (int)j;
  double hi = rn_atan_j8[2 * k], lo = rn_atan_j8[2 * k + 1] + (u + u * (z * p));
  return inv ? (RN_PIO2_HI - hi) + (RN_PIO2_LO - lo) : hi + lo;
}

/* pi - a for a in [0, pi/2] */
RN_FN double rn_pi_minus(double a) { return (RN_PI_HI - a) + RN_PI_LO; }

RN_FN float rn_atanf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  double y = rn_atan_d(rn_fabs(x));
  return RN_FIXED(atanf, x < 0 ? -y : y, x);
}

RN_FN float rn_asinf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  double a = rn_fabs(x);
  if (a > 1.0) return (x - x) / (x - x);
  double y = rn_atan_d(a / sqrt(1.0 - a * a));
  return RN_FIXED(asinf, x < 0 ? -y : y, x);
}

RN_FN float rn_acosf(float x) {
  if (rn_isnanf(x)) return x + x;
  double a = rn_fabs(x);
  if (a > 1.0) return (x - x) / (x - x);
  double y = rn_atan_d(sqrt(1.0 - a * a) / a);
  return RN_FIXED(acosf, x < 0 ? rn_pi_minus(y) : y, x);
}

/* atan2 (C99 Annex F's special cases). Correctly rounded unless the double lands
   within RN_GATE ulps of a midpoint (two arguments: no exhaustive table). */
RN_FN float rn_atan2f(float y, float x) {
  if (rn_isnanf(x) || rn_isnanf(y)) return x + y;
  int neg_x = rn_fbits(x) >> 31;
  double r;
  if (y == 0) {
    r = neg_x ? RN_PI_HI : 0.0;
  } else if (y - y != 0 && x - x != 0) {             /* both infinite */
    r = neg_x ? 0.75 * RN_PI_HI : 0.25 * RN_PI_HI;
  } else {
    double a = rn_atan_d(rn_fabs(y) / rn_fabs(x));
    r = neg_x ? rn_pi_minus(a) : a;
  }
  float f = (float)r;
  return rn_signf(f, y);
}

/* ------------------------------------------------------------------ inverse hyperbolic */
RN_FN float rn_asinhf(float x) {
  if (!(x - x == 0) || x == 0) return x + x;
  double a = rn_fabs(x), a2 = a * a;
  double y = rn_log1p_d(a + a2 / (1.0 + sqrt(1.0 + a2)));
  return RN_FIXED(asinhf, x < 0 ? -y : y, x);
}

RN_FN float rn_acoshf(float x) {
  if (!(x >= 1.0f)) return (x - x) / (x - x);         /* NaN below 1 and at NaN */
  if (x == 1.0f) return 0.0f;
  if (x - x != 0) return x;
  double d = (double)x - 1.0;
  return RN_FIXED(acoshf, rn_log1p_d(d + sqrt(d * ((double)x + 1.0))), x);
}

RN_FN float rn_atanhf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  double a = rn_fabs(x);
  if (a >= 1.0) return a == 1.0 ? rn_signf(RN_INFF, x) : (x - x) / (x - x);
  double y = 0.5 * rn_log1p_d(2.0 * a / (1.0 - a));
  return RN_FIXED(atanhf, x < 0 ? -y : y, x);
}

/* ------------------------------------------------------------------ roots */
RN_FN float rn_cbrtf(float x) {
  if (!(x - x == 0) || x == 0) return x + x;
  double a = rn_fabs(x);
  /* a guess within a few percent from the exponent, then Newton's iterations */
  double y = rn_bitsd(rn_dbits(a) / 3 + 0x2a9f7893782da1ceull);
  for (int i = 0; i < 5; i++) y = y - (y * y * y - a) / (3.0 * y * y);
  return RN_FIXED(cbrtf, x < 0 ? -y : y, x);
}

/* hypot: inf if either is infinite (even beside NaN), else NaN beside NaN; else
   sqrt(x^2 + y^2) from its exact double-double, correctly rounded. */
RN_FN float rn_hypotf(float x, float y) {
  if (x - x != 0 || y - y != 0) {
    if ((rn_fbits(x) & 0x7fffffffu) == 0x7f800000u || (rn_fbits(y) & 0x7fffffffu) == 0x7f800000u)
      return RN_INFF;
    return x + y;
  }
  double a = (double)x * x, b = (double)y * y;        /* exact */
  double s = a + b, bb = s - a, e = (a - (s - bb)) + (b - bb);
  if (s == 0) return 0.0f;
  double r = sqrt(s);
  double c = (fma(-r, r, s) + e) / (2.0 * r);
  return rn_round_dd(r, c);
}
