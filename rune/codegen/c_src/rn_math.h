/* rune's float32 math library: correctly rounded results, the same bits in the C
   and the CUDA dialect (docs/numerics.md).

   Written once for both dialects (rune/codegen/mathlib.py: the CUDA prelude includes
   it; the C dialect builds it once per machine as a shared library), with
   only IEEE 754 basic operations (+ - * / sqrt), explicit fma, conversions and
   integer bit manipulation: every operation is correctly rounded on both targets,
   so the same text gives the same bits (C: -ffp-contract=off; NVRTC: --fmad=false,
   no -ftz). No libm call lies on a result's path.

   Each function evaluates in double with a relative error far below 2^-44 (the
   `RN_GATE` window) and rounds once to float. Rounding a double y that close to the
   exact value f(x) gives f(x) correctly rounded unless y lies within the window of a
   midpoint between two floats (about one input in 2^20). The inputs whose double
   lands on the wrong side of a midpoint, found by the exhaustive checker
   (scripts/check_math_exhaustive.py), are a function's table of hard cases, with
   their correctly rounded results (rn_math_fixes.h; `rn_finish`).

   Every function takes and returns float; rn_<name>f as libm's names. */
#ifndef RN_MATH_FN   /* the public functions: exported SIMD clones in the C dialect (c.py) */
#define RN_MATH_FN RN_FN
#endif

#ifndef RN_TABLE
#if defined(__CUDACC__)
#define RN_TABLE static __device__ const
#else
#define RN_TABLE static const
#endif
#endif

/* a fixed-count loop unrolled whole: the function's callers still vectorize */
#if defined(__CUDACC__)
#define RN_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define RN_UNROLL _Pragma("GCC unroll 32")
#else
#define RN_UNROLL
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
   or for an input in the table (pairs of input and result bits, sorted by input; n
   pairs) the table's result. A short table is a chain of selects (no branch: a loop
   of calls vectorizes); a long one is searched only where y lies near a midpoint. */
RN_FN float rn_finish(double y, float x, const uint32_t *table, int n) {
  uint32_t key = rn_fbits(x), r = rn_fbits((float)y);
  if (n <= 16) {
    for (int i = 0; i < n; i++) r = table[2 * i] == key ? table[2 * i + 1] : r;
    return rn_bitsf(r);
  }
  if (rn_near_midpoint(y)) {
    int lo = 0, hi = n;
    while (lo < hi) {
      int mid = (lo + hi) >> 1;
      if (table[2 * mid] < key) lo = mid + 1; else hi = mid;
    }
    if (lo < n && table[2 * lo] == key) r = table[2 * lo + 1];
  }
  return rn_bitsf(r);
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
/* e^r - 1 for |r| <= 0.35: Taylor to r^13 / 13! (the rest below 2^-55 relative), as
   r q(r) with q's 13 terms in Estrin's form with fma: a tree of depth 4 where Horner's
   chain was 12 multiply-adds long (the vector clones were latency bound) */
RN_FN double rn_expm1_poly(double r) {
  double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  double a0 = fma(0.5, r, 1.0);                                      /* 1 + r/2 */
  double a1 = fma(0x1.5555555555555p-5, r, 0x1.5555555555555p-3);   /* 1/3! + r/4! */
  double a2 = fma(0x1.6c16c16c16c17p-10, r, 0x1.1111111111111p-7);  /* 1/5!, 1/6! */
  double a3 = fma(0x1.a01a01a01a01ap-16, r, 0x1.a01a01a01a01ap-13);  /* 1/7!, 1/8! */
  double a4 = fma(0x1.27e4fb7789f5cp-22, r, 0x1.71de3a556c734p-19);  /* 1/9!, 1/10! */
  double a5 = fma(0x1.1eed8eff8d898p-29, r, 0x1.ae64567f544e4p-26);  /* 1/11!, 1/12! */
  double b0 = fma(a1, r2, a0), b1 = fma(a3, r2, a2);
  double b2 = fma(0x1.6124613a86d09p-33, r4, fma(a5, r2, a4));       /* 1/13! r^12 */
  return r * fma(b2, r8, fma(b1, r4, b0));
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

/* e^x - 1 in double for |x| <= 700, x != 0. No branch for small x: there k = 0,
   r = x and s * em + (s - 1) = em exactly, so one polynomial serves every x (a
   vector clone evaluates both sides of a branch) */
RN_FN double rn_expm1_d(double x) {
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

RN_MATH_FN float rn_expf(float x) {
  if (rn_isnanf(x)) return x + x;
  return RN_FIXED(expf, rn_exp_d(rn_clamp150(x)), x);
}

RN_MATH_FN float rn_exp2f(float x) {
  if (rn_isnanf(x)) return x + x;
  double xd = rn_clamp150(x), k = rn_rint(xd);
  double y = (1.0 + rn_expm1_poly((xd - k) * RN_LN2_HI)) * rn_pow2i((int)k);
  return RN_FIXED(exp2f, y, x);
}

RN_MATH_FN float rn_expm1f(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  return RN_FIXED(expm1f, rn_expm1_d(rn_clamp150(x)), x);
}

/* ------------------------------------------------------------------ log */
/* log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: 2 atanh(s), s = f / (2 + f),
   |s| <= 0.1716, the series to s^23 (the rest below 2^-56 relative) */
/* 1/3 + z/5 + z^2/7 + ... + z^10/23, in Estrin's form with fma (depth 4, not a chain of 10) */
RN_FN double rn_atanh_poly(double z) {
  double z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
  double a0 = fma(0x1.999999999999ap-3, z, 0x1.5555555555555p-2);    /* 1/3 + z/5 */
  double a1 = fma(0x1.c71c71c71c71cp-4, z, 0x1.2492492492492p-3);    /* 1/7, 1/9 */
  double a2 = fma(0x1.3b13b13b13b14p-4, z, 0x1.745d1745d1746p-4);    /* 1/11, 1/13 */
  double a3 = fma(0x1.e1e1e1e1e1e1ep-5, z, 0x1.1111111111111p-4);    /* 1/15, 1/17 */
  double a4 = fma(0x1.8618618618618p-5, z, 0x1.af286bca1af28p-5);    /* 1/19, 1/21 */
  double b0 = fma(a1, z2, a0), b1 = fma(a3, z2, a2);
  double b2 = fma(0x1.642c8590b2164p-5, z2, a4);                     /* 1/23 */
  return fma(b2, z8, fma(b1, z4, b0));
}

RN_FN double rn_log1p_red(double f) {
  double s = f / (2.0 + f), z = s * s, t = 2.0 * s;
  return t + t * (z * rn_atanh_poly(z));
}

/* u = 2^e (1 + f) with positive normal u, 1 + f in [sqrt(1/2), sqrt(2)): f (exact) */
RN_FN double rn_log_split(double u, double *e) {
  uint64_t b = rn_dbits(u);
  int k = (int)(b >> 52) - 1023;
  double m = rn_bitsd((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 0x1.6a09e667f3bcdp+0) { m *= 0.5; k += 1; }
  *e = (double)k;
  return m - 1.0;                                     /* exact */
}

/* u = 2^e (1 + f) as above: log(1 + f) */
RN_FN double rn_log_parts(double u, double *e) { return rn_log1p_red(rn_log_split(u, e)); }

/* e ln 2 + l, for l = log(1 + f) */
RN_FN double rn_log_join(double e, double l) {
  double p = e * RN_LN2_HI, pe = fma(e, RN_LN2_HI, -p);  /* e ln 2 = p + pe + e lo */
  return p + ((pe + e * RN_LN2_LO) + l);
}

/* log(u) for positive normal u */
RN_FN double rn_log_d(double u) {
  double e, l = rn_log_parts(u, &e);
  return rn_log_join(e, l);
}

/* log(1 + u) for u > -1, u != 0: log1p_red(u) near 0, else log(1 + u) as rn_log_d.
   One polynomial either way: near 0 the split's e is taken as 0, and rn_log_join(0, l)
   is l exactly (a vector clone evaluates both sides of a branch) */
RN_FN double rn_log1p_d(double u) {
  int near0 = u > -0.2928 && u < 0.4142;
  double e, f = rn_log_split(1.0 + u, &e);
  f = near0 ? u : f;
  e = near0 ? 0.0 : e;
  return rn_log_join(e, rn_log1p_red(f));
}

/* the special values of a log: NaN below 0 and at NaN, -inf at 0, inf at inf; else 0 */
RN_FN int rn_log_special(float x, float *out) {
  if (x > 0 && x < RN_INFF) return 0;
  *out = x == 0 ? -RN_INFF : (x > 0 ? x : (x - x) / (x - x));
  return 1;
}

RN_MATH_FN float rn_logf(float x) {
  float s;
  if (rn_log_special(x, &s)) return s;
  return RN_FIXED(logf, rn_log_d(x), x);
}

RN_MATH_FN float rn_log2f(float x) {
  float s;
  if (rn_log_special(x, &s)) return s;
  double e, l = rn_log_parts(x, &e);
  return RN_FIXED(log2f, e + (l * RN_INVLN2 + l * RN_INVLN2_LO), x);
}

RN_MATH_FN float rn_log10f(float x) {
  float s;
  if (rn_log_special(x, &s)) return s;
  double e, l = rn_log_parts(x, &e);
  double p = e * RN_LOG10_2_HI, pe = fma(e, RN_LOG10_2_HI, -p);
  return RN_FIXED(log10f, p + ((pe + e * RN_LOG10_2_LO) + l * RN_INVLN10), x);
}

RN_MATH_FN float rn_log1pf(float x) {
  if (!(x > -1.0f && x < RN_INFF)) {
    if (x == -1.0f) return -RN_INFF;
    return x > 0 ? x : (x - x) / (x - x);              /* inf, or NaN below -1 and at NaN */
  }
  if (x == 0) return x;
  return RN_FIXED(log1pf, rn_log1p_d(x), x);
}

/* ------------------------------------------------------------------ sin, cos, tan */
/* x (a finite float's value) = (q + r) pi/2, q an integer (returned mod 4), r as
   h + l with |r| <= 1/2 + tiny, to about 2^-85 absolute: each of the 9 pieces of 2/pi
   times x is exact, reduced mod 4 exactly (a product past 2^54 is a multiple of 4),
   and the terms are summed in double-double. A fixed count and selects: no branch. */
RN_FN int rn_rem_pio2(double x, double *rh, double *rl) {
  double h = 0, l = 0;
  for (int i = 0; i < 9; i++) {
    double t = x * rn_2opi[i];
    double m = t - 4.0 * rn_rint(t * 0.25);
    t = rn_fabs(t) >= 0x1p54 ? 0.0 : m;
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
   below 2^-60 relative), the polynomials in z = t^2 in Estrin's form with fma */
RN_FN double rn_sin_poly(double t) {
  double z = t * t, z2 = z * z, z4 = z2 * z2;
  double a0 = fma(0x1.1111111111111p-7, z, -0x1.5555555555555p-3);   /* -1/3! + z/5! */
  double a1 = fma(0x1.71de3a556c734p-19, z, -0x1.a01a01a01a01ap-13);  /* -1/7!, 1/9! */
  double a2 = fma(0x1.6124613a86d09p-33, z, -0x1.ae64567f544e4p-26);  /* -1/11!, 1/13! */
  double a3 = fma(0x1.952c77030ad4ap-49, z, -0x1.ae7f3e733b81fp-41);  /* -1/15!, 1/17! */
  double p = fma(fma(a3, z2, a2), z4, fma(a1, z2, a0));
  return t + t * (z * p);
}

RN_FN double rn_cos_poly(double t) {
  double z = t * t, z2 = z * z, z4 = z2 * z2;
  double a0 = fma(0x1.5555555555555p-5, z, -0.5);                     /* -1/2! + z/4! */
  double a1 = fma(0x1.a01a01a01a01ap-16, z, -0x1.6c16c16c16c17p-10);  /* -1/6!, 1/8! */
  double a2 = fma(0x1.1eed8eff8d898p-29, z, -0x1.27e4fb7789f5cp-22);  /* -1/10!, 1/12! */
  double a3 = fma(0x1.ae7f3e733b81fp-45, z, -0x1.93974a8c07c9dp-37);  /* -1/14!, 1/16! */
  double b1 = fma(-0x1.6827863b97d97p-53, z4, fma(a3, z2, a2));       /* -1/18! */
  return 1.0 + z * fma(b1, z4, fma(a1, z2, a0));
}

/* x = (q + r) pi/2 for a finite float x: t = r pi/2 in double, q mod 4 returned */
RN_FN int rn_reduce_trig(float x, double *t) {
  if (x > -0.78f && x < 0.78f) { *t = x; return 0; }
  double h, l;
  int q = rn_rem_pio2(x, &h, &l);
  *t = h * RN_PIO2_HI + (h * RN_PIO2_LO + l * RN_PIO2_HI);
  return q;
}

RN_MATH_FN float rn_sinf(float x) {
  if (!(x - x == 0) || x == 0) return x == 0 ? x : x - x;   /* +-0 kept, NaN at inf and NaN */
  double t;
  int q = rn_reduce_trig(x, &t);
  double y = q & 1 ? rn_cos_poly(t) : rn_sin_poly(t);
  return RN_FIXED(sinf, q & 2 ? -y : y, x);
}

RN_MATH_FN float rn_cosf(float x) {
  if (!(x - x == 0)) return x - x;
  double t;
  int q = rn_reduce_trig(x, &t);
  double y = q & 1 ? rn_sin_poly(t) : rn_cos_poly(t);
  return RN_FIXED(cosf, (q + 1) & 2 ? -y : y, x);
}

RN_MATH_FN float rn_tanf(float x) {
  if (!(x - x == 0) || x == 0) return x == 0 ? x : x - x;
  double t;
  int q = rn_reduce_trig(x, &t);
  double s = rn_sin_poly(t), c = rn_cos_poly(t);
  return RN_FIXED(tanf, q & 1 ? -c / s : s / c, x);
}

/* ------------------------------------------------------------------ hyperbolic */
RN_MATH_FN float rn_tanhf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  float a = x < 0 ? -x : x;
  if (a >= 10.0f) return rn_signf(1.0f, x);          /* 1 - tanh(10) < 2^-27 */
  double em = rn_expm1_d(2.0 * (double)a);
  double y = em / (em + 2.0);
  return RN_FIXED(tanhf, x < 0 ? -y : y, x);
}

RN_MATH_FN float rn_sinhf(float x) {
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

RN_MATH_FN float rn_coshf(float x) {
  if (rn_isnanf(x)) return x + x;
  double e = rn_exp_d(rn_fabs(rn_clamp150(x)));
  return RN_FIXED(coshf, 0.5 * (e + 1.0 / e), x);
}

/* Near 0, 1/2 + x/4 lands on midpoints between floats (x with few bits) and the rest
   of the series decides: there 1/2 + x/4 - x^3/48 + x^5/480 - 17x^7/80640 as a
   double-double, rounded once. */
RN_MATH_FN float rn_logisticf(float x) {
  if (rn_isnanf(x)) return x + x;
  double xd = x;
  if (rn_fabs(xd) < 0x1p-6) {
    double q = xd * 0.25, h = 0.5 + q, z = xd * xd;
    double c = xd * z * (-0x1.5555555555555p-6 + z * (0x1.1111111111111p-9 - z * 0x1.ba1ba1ba1ba1cp-13));
    double l = (q - (h - 0.5)) + c, s = h + l;         /* h - 0.5 exact */
    return rn_round_dd(s, l - (s - h));
  }
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

RN_MATH_FN float rn_atanf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  double y = rn_atan_d(rn_fabs(x));
  return RN_FIXED(atanf, x < 0 ? -y : y, x);
}

RN_MATH_FN float rn_asinf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  double a = rn_fabs(x);
  if (a > 1.0) return (x - x) / (x - x);
  double y = rn_atan_d(a / sqrt(1.0 - a * a));
  return RN_FIXED(asinf, x < 0 ? -y : y, x);
}

RN_MATH_FN float rn_acosf(float x) {
  if (rn_isnanf(x)) return x + x;
  double a = rn_fabs(x);
  if (a > 1.0) return (x - x) / (x - x);
  double y = rn_atan_d(sqrt(1.0 - a * a) / a);
  return RN_FIXED(acosf, x < 0 ? rn_pi_minus(y) : y, x);
}

/* atan2 (C99 Annex F's special cases). Correctly rounded unless the double lands
   within RN_GATE ulps of a midpoint (two arguments: no exhaustive table). */
RN_MATH_FN float rn_atan2f(float y, float x) {
  if (rn_isnanf(x) || rn_isnanf(y)) return x + y;
  int neg_x = rn_fbits(x) >> 31;
  double r;
  if (y == 0) {
    r = neg_x ? RN_PI_HI : 0.0;
  } else if (y - y != 0 && x - x != 0) {             /* both infinite */
    r = neg_x ? 0.75 * RN_PI_HI : 0.25 * RN_PI_HI;
  } else {
    double ay = rn_fabs(y), ax = rn_fabs(x), t = ay / ax;
    if (t < 0x1p-27 && !neg_x) {
      /* atan(t) = t - t^3/3 to 2^-100: the quotient's remainder and the cube (kept
         nonzero where it underflows) decide a t on a midpoint (a halved subnormal) */
      double c = -(t * t * t) * 0x1.5555555555555p-2;
      if (c == 0) c = -t * 0x1p-100;
      return rn_signf(rn_round_dd(t, fma(-t, ax, ay) / ax + c), y);
    }
    double a = rn_atan_d(t);
    r = neg_x ? rn_pi_minus(a) : a;
  }
  return rn_signf((float)r, y);
}

/* ------------------------------------------------------------------ inverse hyperbolic */
RN_MATH_FN float rn_asinhf(float x) {
  if (!(x - x == 0) || x == 0) return x + x;
  double a = rn_fabs(x), a2 = a * a;
  double y = rn_log1p_d(a + a2 / (1.0 + sqrt(1.0 + a2)));
  return RN_FIXED(asinhf, x < 0 ? -y : y, x);
}

RN_MATH_FN float rn_acoshf(float x) {
  if (!(x >= 1.0f)) return (x - x) / (x - x);         /* NaN below 1 and at NaN */
  if (x == 1.0f) return 0.0f;
  if (x - x != 0) return x;
  double d = (double)x - 1.0;
  return RN_FIXED(acoshf, rn_log1p_d(d + sqrt(d * ((double)x + 1.0))), x);
}

RN_MATH_FN float rn_atanhf(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  double a = rn_fabs(x);
  if (a >= 1.0) return a == 1.0 ? rn_signf(RN_INFF, x) : (x - x) / (x - x);
  double y = 0.5 * rn_log1p_d(2.0 * a / (1.0 - a));
  return RN_FIXED(atanhf, x < 0 ? -y : y, x);
}

/* ------------------------------------------------------------------ erf, erfc */
/* erfc(j / 8), j = 0..82, as hi + lo */
RN_TABLE double rn_erfc_j8[166] = {
  0x1.0000000000000p+0, 0x0.0p+0, 0x1.b82879728f11ep-1, -0x1.742db5924f83dp-55, 0x1.728558ee694fcp-1, -0x1.208b6f02df46ap-55,
  0x1.311796a46f064p-1, -0x1.74c71fef1759ep-55, 0x1.eb02147ce245cp-2, -0x1.5e809f1a31a28p-56, 0x1.81cd2465e1d96p-2, 0x1.f25f4f6fdf70bp-56,
  0x1.27c6d14c5e341p-2, 0x1.3af3434d0eeabp-57, 0x1.ba36dab91c0e9p-3, 0x1.3c896e9a97c59p-58, 0x1.4226162fbddd5p-3, -0x1.b40443f6ec34ap-59,
  0x1.c9296beb09cf1p-4, -0x1.5224acd170beep-59, 0x1.3bcd133aa0ffcp-4, -0x1.89da82345938bp-62, 0x1.a8973c4b5c03ep-5, 0x1.d27662c1d9dc2p-59,
  0x1.15aaa8ec85205p-5, -0x1.e86ee834da4cep-61, 0x1.612d893085125p-6, -0x1.7847afe4f2a7bp-62, 0x1.b4be201caa4b4p-7, -0x1.6abde927f9cddp-61,
  0x1.0678442cc256fp-7, -0x1.77b62199d8601p-61, 0x1.328f5ec350e67p-8, -0x1.ca006412e68d0p-62, 0x1.5bde729a6b60fp-9, 0x1.999ec7becc5c7p-65,
  0x1.7f713f9cc9784p-10, -0x1.4207143202515p-64, 0x1.9a7c305336484p-11, 0x1.6394dd2ff0093p-65, 0x1.aab859b20ac9ep-12, 0x1.88f4ff748376bp-66,
  0x1.aeb4423e690e7p-13, -0x1.a732e928e4c5dp-68, 0x1.a609f7584d32bp-14, 0x1.d92f3f7ab9ef5p-68, 0x1.916f7c5f2f764p-15, 0x1.84e95673c70a1p-70,
  0x1.729df6503422ap-16, 0x1.784ca4c429a15p-73, 0x1.4c144d984e1b8p-17, 0x1.2d1f7068bf3fbp-74, 0x1.20c1303550f0ep-18, -0x1.20ee80d2c8d09p-73,
  0x1.e749309831666p-20, -0x1.76172989e68aep-76, 0x1.8ef2a9a18d857p-21, -0x1.2d76dc03e80a5p-75, 0x1.3ce784b411931p-22, -0x1.8c77157062626p-76,
  0x1.e87470e4f4246p-24, -0x1.cafa3aa5b4314p-82, 0x1.6d3126d74b6ccp-25, -0x1.301eb5249fe1dp-79, 0x1.08ddd13bd35e7p-26, -0x1.615db40319381p-80,
  0x1.74b179d1eba81p-28, -0x1.83473776fe2fcp-82, 0x1.fcae93fb7323cp-30, 0x1.35a3596692c9cp-84, 0x1.50b75c536f927p-31, -0x1.3c10e160b737ep-89,
  0x1.b05cfe2e99435p-33, -0x1.a071ed80552c6p-87, 0x1.0d3b35021d695p-34, -0x1.42a25e7a42894p-89, 0x1.453141082302ap-36, -0x1.1a101007d8742p-90,
  0x1.7cef42e9a617dp-38, 0x1.22a7daf8a3e2fp-92, 0x1.b0c1a759f7739p-40, -0x1.b28568855c7a1p-94, 0x1.dcc4fabf32f1cp-42, -0x1.748a050f39acfp-96,
  0x1.fd5f08ad2b29ap-44, 0x1.e5b1d0c5bf934p-99, 0x1.07dd6833bb380p-45, -0x1.63b11e0c47d2ap-99, 0x1.09182b326b229p-47, -0x1.22e85b13a8e1dp-102,
  0x1.0241de6c31e5bp-49, -0x1.636c6dd3916b0p-103, 0x1.e7eea02e4ed88p-52, -0x1.824cc1e2339a2p-106, 0x1.bef1b1a12823ep-54, -0x1.b1807c3b357d3p-108,
  0x1.8cf81557d20b6p-56, 0x1.a7fff0cc732c0p-112, 0x1.55df1790f2f61p-58, 0x1.ec3d39d9bc1d6p-113, 0x1.1d791bb1324a1p-60, 0x1.4c1d1176d0d26p-114,
  0x1.ce42dd8e4fa23p-63, 0x1.8bad2d1795b81p-117, 0x1.6ae172414cebap-65, -0x1.4ce015960b1e5p-122, 0x1.1432649c86c4dp-67, -0x1.76681db3323e7p-121,
  0x1.97a3dc62119c8p-70, 0x1.bb8349c77f884p-125, 0x1.23a85891dc72bp-72, 0x1.fe4810babd776p-127, 0x1.94a28136fa731p-75, 0x1.491f9e70583a0p-129,
  0x1.1022313b11381p-77, 0x1.e521cbf9cf10ep-131, 0x1.62e225ebca190p-80, 0x1.24abc2451f08ep-137, 0x1.c0aee6d6b1406p-83, 0x1.01c2b84c30198p-139,
  0x1.12fc6cdafd10dp-85, 0x1.add6ff295f6bap-139, 0x1.46c779ebb14aep-88, 0x1.61c0b9f885047p-144, 0x1.7879eb52380edp-91, 0x1.e4289f32a4be0p-146,
  0x1.a47db588b15cfp-94, 0x1.6268156643083p-148, 0x1.c74fc41217dfbp-97, 0x1.dae003e8b6247p-151, 0x1.ddf56913a541ep-100, 0x1.099b82891a35dp-154,
  0x1.e667d9a8bcd9ep-103, 0x1.ab4626748c58dp-158, 0x1.dfe0c1b8af1f3p-106, 0x1.2e9765a21e903p-161, 0x1.caf8458ad2a12p-109, -0x1.4b7e45919ceb0p-163,
  0x1.a98e26924c6c8p-112, -0x1.b4fab86673155p-166, 0x1.7e82cde922833p-115, -0x1.0ddc41036f42dp-169, 0x1.4d4ec8ea8ee67p-118, -0x1.61d73c8f3ef76p-172,
  0x1.198d422be3f8cp-121, 0x1.36ba610a005ffp-176, 0x1.cd1db96a6c6efp-125, -0x1.a3529be138ff8p-180, 0x1.6e0c8fadbb050p-128, -0x1.5f2ecaa398ef9p-186,
  0x1.19b0f23241b88p-131, -0x1.b6b4a43d5e1bep-186, 0x1.a4480db60fe17p-135, 0x1.c96ff9dc62e09p-189, 0x1.2feeed430b87bp-138, 0x1.47bffa3906326p-194,
  0x1.aa222a98ba953p-142, 0x1.13a8ebda11769p-196, 0x1.219685023e1bep-145, -0x1.738eb42b5af0fp-199, 0x1.7d8a7f2a8a2d0p-149, -0x1.8b231dcfa8e27p-203,
  0x1.e74cb7ebdea0ap-153, -0x1.6d85c0a75328ep-208, 0x1.2da83d59392f5p-156, -0x1.20cd226b795c2p-211,
};
/* 1 / k, k = 1..27 */
RN_TABLE double rn_inv[27] = {0x1.0000000000000p+0, 0x1.0000000000000p-1, 0x1.5555555555555p-2, 0x1.0000000000000p-2, 0x1.999999999999ap-3, 0x1.5555555555555p-3, 0x1.2492492492492p-3, 0x1.0000000000000p-3, 0x1.c71c71c71c71cp-4, 0x1.999999999999ap-4, 0x1.745d1745d1746p-4, 0x1.5555555555555p-4, 0x1.3b13b13b13b14p-4, 0x1.2492492492492p-4, 0x1.1111111111111p-4, 0x1.0000000000000p-4, 0x1.e1e1e1e1e1e1ep-5, 0x1.c71c71c71c71cp-5, 0x1.af286bca1af28p-5, 0x1.999999999999ap-5, 0x1.8618618618618p-5, 0x1.745d1745d1746p-5, 0x1.642c8590b2164p-5, 0x1.5555555555555p-5, 0x1.47ae147ae147bp-5, 0x1.3b13b13b13b14p-5, 0x1.2f684bda12f68p-5};
#define RN_2_SQRTPI 0x1.20dd750429b6dp+0

/* (2/sqrt(pi)) e^{-c^2} integral_0^h e^{-2cs - s^2} ds for c = j/8 <= 10.25, |h| <= 1/16:
   erf(c + h) - erf(c). The integrand's series sum a_k s^k has (k+1) a_{k+1} =
   -2c a_k - 2 a_{k-1}; its terms fall below 2^-58 of the sum by k = 12 + c (23 terms
   always: a fixed count vectorizes). */
RN_FN double rn_erf_step(double c, double h) {
  double am1 = 0, a = 1, hp = h, sum = 0;
  RN_UNROLL
  for (int k = 1; k <= 23; k++) {                     /* a = a_{k-1}, hp = h^k */
    sum += a * hp * rn_inv[k - 1];
    double an = (-2.0 * c * a - 2.0 * am1) * rn_inv[k - 1];
    am1 = a;
    a = an;
    hp *= h;
  }
  return RN_2_SQRTPI * (rn_exp_d(-c * c) * sum);
}

/* erfc(a) for 0 <= a <= 10.25 (a float's value) */
RN_FN double rn_erfc_pos(double a) {
  double j = rn_rint(a * 8.0), c = j * 0.125;
  int k = (int)j;
  return (rn_erfc_j8[2 * k] - rn_erf_step(c, a - c)) + rn_erfc_j8[2 * k + 1];
}

RN_MATH_FN float rn_erff(float x) {
  if (rn_isnanf(x) || x == 0) return x + x;
  double a = rn_fabs(x);
  if (a >= 4.0) return rn_signf(1.0f, x);             /* erfc(4) < 2^-25 */
  double j = rn_rint(a * 8.0), c = j * 0.125;
  int k = (int)j;
  double y = ((1.0 - rn_erfc_j8[2 * k]) - rn_erfc_j8[2 * k + 1]) + rn_erf_step(c, a - c);
  return RN_FIXED(erff, x < 0 ? -y : y, x);
}

RN_MATH_FN float rn_erfcf(float x) {
  if (rn_isnanf(x)) return x + x;
  if (x >= 10.25f) return 0.0f;                       /* erfc(10.25) < 2^-151 */
  if (x <= -4.0f) return 2.0f;                        /* 2 - erfc(-4) rounds to 2 */
  double y = rn_erfc_pos(rn_fabs(x));
  return RN_FIXED(erfcf, x < 0 ? 2.0 - y : y, x);
}

/* ------------------------------------------------------------------ roots */
RN_MATH_FN float rn_cbrtf(float x) {
  if (!(x - x == 0) || x == 0) return x + x;
  double a = rn_fabs(x);
  /* a guess within a few percent from the exponent, then Newton's iterations */
  double y = rn_bitsd(rn_dbits(a) / 3 + 0x2a9f7893782da1ceull);
  for (int i = 0; i < 5; i++) y = y - (y * y * y - a) / (3.0 * y * y);
  return RN_FIXED(cbrtf, x < 0 ? -y : y, x);
}

/* hypot: inf if either is infinite (even beside NaN), else NaN beside NaN; else
   sqrt(x^2 + y^2) from its exact double-double, correctly rounded. */
RN_MATH_FN float rn_hypotf(float x, float y) {
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

/* ------------------------------------------------------------------ double-double */
/* h + l = s + e for |s| >= |e| (or s == 0) */
RN_FN void rn_dd_norm(double s, double e, double *h, double *l) { *h = s + e; *l = e - (*h - s); }
RN_FN void rn_dd_add(double ah, double al, double bh, double bl, double *h, double *l) {
  double s = ah + bh, bb = s - ah;
  rn_dd_norm(s, ((ah - (s - bb)) + (bh - bb)) + (al + bl), h, l);
}
RN_FN void rn_dd_mul(double ah, double al, double bh, double bl, double *h, double *l) {
  double p = ah * bh;
  rn_dd_norm(p, fma(ah, bh, -p) + (ah * bl + al * bh), h, l);
}

/* 1/n!, n = 2..9, as hi + lo */
RN_TABLE double rn_invfact_dd[16] = {
  0x1p-1, 0, 0x1.5555555555555p-3, 0x1.5555555555555p-57, 0x1.5555555555555p-5, 0x1.5555555555555p-59,
  0x1.1111111111111p-7, 0x1.1111111111111p-63, 0x1.6c16c16c16c17p-10, -0x1.f49f49f49f49fp-65,
  0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-73, 0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-76,
  0x1.71de3a556c734p-19, -0x1.c154f8ddc6c00p-73};

/* e^(xh + xl) as h + l to about 2^-95 relative, |xh| <= 160 (the slow paths): 2^k e^r,
   e^r - 1 from e^(r/256) - 1 (Taylor to degree 9) squared back 8 times as m (2 + m) */
RN_FN void rn_exp_slow(double xh, double xl, double *h, double *l) {
  double k = rn_rint(xh * RN_INVLN2), rh, rl, mh, ml, sh, sl;
  double t = xh - k * RN_LN2_K;                       /* exact: |k| < 2^8, Sterbenz */
  double p = k * RN_LN2_KLO, pe = fma(k, RN_LN2_KLO, -p) + k * 0x1.cc01f97b57a08p-87;
  rn_dd_add(t, xl, -p, -pe, &rh, &rl);
  rh *= 0x1p-8;
  rl *= 0x1p-8;
  mh = rn_invfact_dd[14];
  ml = rn_invfact_dd[15];
  for (int i = 12; i >= 0; i -= 2) {
    rn_dd_mul(mh, ml, rh, rl, &mh, &ml);
    rn_dd_add(mh, ml, rn_invfact_dd[i], rn_invfact_dd[i + 1], &mh, &ml);
  }
  rn_dd_mul(mh, ml, rh, rl, &mh, &ml);
  rn_dd_add(mh, ml, 1.0, 0.0, &mh, &ml);
  rn_dd_mul(mh, ml, rh, rl, &mh, &ml);
  for (int i = 0; i < 8; i++) {
    rn_dd_add(mh, ml, 2.0, 0.0, &sh, &sl);
    rn_dd_mul(mh, ml, sh, sl, &mh, &ml);
  }
  rn_dd_add(1.0, 0.0, mh, ml, &mh, &ml);
  int ki = (int)k, k1 = ki / 2;
  double s1 = rn_pow2i(k1), s2 = rn_pow2i(ki - k1);
  *h = mh * s1 * s2;
  *l = ml * s1 * s2;
}

/* log(vh + vl) as h + l for v >= 1 or a positive normal double: one Newton step
   L0 + (v e^-L0 - 1) from the double log, to about 2^-95 absolute */
RN_FN void rn_log_newton(double vh, double vl, double *h, double *l) {
  double L0 = rn_log_d(vh), eh, el, ph, pl;
  rn_exp_slow(-L0, 0.0, &eh, &el);
  rn_dd_mul(vh, vl, eh, el, &ph, &pl);
  rn_dd_norm(L0, (ph - 1.0) + pl, h, l);              /* ph - 1 exact: ph is near 1 */
}

/* log(x) as hi + *lo for a positive float x, to about 2^-59 relative: the atanh
   series with s = f / (2 + f) carried as s + sl */
RN_FN double rn_log_dd_fast(double x, double *lo) {
  double e, hi;
  uint64_t b = rn_dbits(x);
  int k = (int)(b >> 52) - 1023;
  double m = rn_bitsd((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > 0x1.6a09e667f3bcdp+0) { m *= 0.5; k += 1; }
  e = (double)k;
  double f = m - 1.0, g = 2.0 + f;                    /* both exact: f has 24 bits */
  double s = f / g, sl = fma(-s, g, f) / g, z = s * s, t = 2.0 * s;
  double p = e * RN_LN2_HI, pe = fma(e, RN_LN2_HI, -p);
  double sum = p + t, bb = sum - p;
  double err = ((p - (sum - bb)) + (t - bb)) + ((pe + e * RN_LN2_LO) + (2.0 * sl + t * (z * rn_atanh_poly(z))));
  rn_dd_norm(sum, err, &hi, lo);
  return hi;
}

/* x^y exactly for x > 0 where y = n / 2^j (j <= 2, |n| <= 64) and every step is exact
   (the results that can be floats or midpoints between floats), or x a power of 2
   with x^y one: returns 1 and the value (a double, then rounded once); else 0 */
RN_FN int rn_pow_exact(double x, double y, double *out) {
  uint64_t b = rn_dbits(x);
  if ((b & 0x000fffffffffffffull) == 0) {             /* x = 2^e */
    double ey = ((double)(int)(b >> 52) - 1023.0) * y;
    if (ey != rn_rint(ey) || rn_fabs(ey) > 1000) return 0;
    *out = rn_pow2i((int)ey / 2) * rn_pow2i((int)ey - (int)ey / 2);
    return 1;
  }
  double r = x;
  for (int j = 0; j <= 2; j++) {
    double n = y * (double)(1 << j);
    if (rn_fabs(n) <= 64 && n == rn_rint(n)) {
      int m = (int)rn_fabs(n);
      double acc = 1.0, base = r;
      while (m) {
        if (m & 1) {
          double q = acc * base;
          if (fma(acc, base, -q) != 0) return 0;
          acc = q;
        }
        m >>= 1;
        if (m) {
          double q = base * base;
          if (fma(base, base, -q) != 0) return 0;
          base = q;
        }
      }
      if (n < 0) {
        double q = 1.0 / acc;
        if (fma(q, acc, -1.0) != 0) return 0;
        acc = q;
      }
      *out = acc;
      return 1;
    }
    double s = sqrt(r);
    if (fma(s, s, -r) != 0) return 0;
    r = s;
  }
  return 0;
}

/* pow with C99 Annex F's special cases. |x|^y = e^(y log|x|) with log|x| to 2^-59
   (error of the double below 2^-49, rounded directly outside the RN_GATE window);
   inside it, again to about 2^-90 (rn_exp_slow, rn_log_newton), with the exact
   results (floats and midpoints) found by rn_pow_exact. */
RN_MATH_FN float rn_powf(float x, float y) {
  float ax = rn_bitsf(rn_fbits(x) & 0x7fffffffu), ay = rn_bitsf(rn_fbits(y) & 0x7fffffffu);
  if (y == 0 || x == 1.0f) return 1.0f;
  if (rn_isnanf(x) || rn_isnanf(y)) return x + y;
  if (ay == RN_INFF) return ax == 1.0f ? 1.0f : ((ax < 1.0f) == (y < 0) ? RN_INFF : 0.0f);
  int yint = ay >= 0x1p24f || (double)y == rn_rint(y);
  int yodd = ay < 0x1p24f && yint && ((int64_t)y & 1);
  if (x == 0) return y < 0 ? (yodd ? 1.0f / x : RN_INFF) : (yodd ? x : 0.0f);
  if (ax == RN_INFF) return rn_signf(y < 0 ? 0.0f : RN_INFF, yodd ? x : 1.0f);
  if (x < 0 && !yint) return (x - x) / (x - x);
  double neg = x < 0 && yodd ? -1.0 : 1.0;
  double lo, hi = rn_log_dd_fast(ax, &lo);
  double th = (double)y * hi, tl = fma((double)y, hi, -th) + (double)y * lo;
  if (th > 160.0) return (float)(neg * 0x1p200);
  if (th < -160.0) return (float)(neg * 0x1p-200);
  double r = rn_exp_d(th);
  r = r + r * tl;
  if (!rn_near_midpoint(r)) return (float)(neg * r);
  double exact;
  if (rn_pow_exact(ax, y, &exact)) return (float)(neg * exact);
  double lh, ll, eh, el;
  rn_log_newton(ax, 0.0, &lh, &ll);
  rn_dd_mul(lh, ll, (double)y, 0.0, &th, &tl);
  rn_exp_slow(th, tl, &eh, &el);
  return rn_round_dd(neg * eh, neg * el);
}

/* log(1 + u) as h + l for u = uh + ul in (0, 1], to about 2^-75 relative */
RN_FN void rn_log1p_slow(double uh, double ul, double *h, double *l) {
  if (uh < 0x1p-20) {                                 /* u - u^2/2 + u^3/3 - u^4/4 */
    double qh, ql;
    rn_dd_mul(uh, ul, -0.5 * uh, -0.5 * ul, &qh, &ql);
    rn_dd_add(uh, ul, qh, ql + uh * uh * uh * (0x1.5555555555555p-2 - 0.25 * uh), h, l);
    return;
  }
  double vh, vl;
  rn_dd_add(1.0, 0.0, uh, ul, &vh, &vl);
  rn_log_newton(vh, vl, h, l);
}

/* log(e^a + e^b), NumPy's special cases: equal operands give a + log 2 (so infinities
   of one sign stay), a NaN gives NaN. max + log1p(e^-|a - b|), again in double-double
   inside the RN_GATE window and where the sum cancels (the result below 1/64 of the
   log1p). */
RN_MATH_FN float rn_logaddexpf(float a, float b) {
  if (rn_isnanf(a) || rn_isnanf(b)) return a + b;
  if (a == b && a - a != 0) return a;                 /* both +inf or both -inf */
  double m = a > b ? a : b, d = rn_fabs((double)a - (double)b);
  if (m == (double)RN_INFF) return RN_INFF;
  if (d == (double)RN_INFF) return (float)(m + 0.0);  /* the other is -inf (-0 + 0 is +0, as NumPy) */
  if (d > 150.0) d = 150.0;
  double L = rn_log1p_d(rn_exp_d(-d)), y = m + L;
  if (!rn_near_midpoint(y) && rn_fabs(y) >= 0.015625 * L) return (float)y;
  double uh, ul, lh, ll, sh, sl;
  rn_exp_slow(-d, 0.0, &uh, &ul);
  rn_log1p_slow(uh, ul, &lh, &ll);
  rn_dd_add(m, 0.0, lh, ll, &sh, &sl);
  return rn_round_dd(sh, sl);
}
