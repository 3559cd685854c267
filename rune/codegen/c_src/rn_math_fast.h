/* Fast paths of rune's float32 exp, log, tanh, logistic, sin, cos and erf: the
   library's bits (rn_math.h), for nearly every input, at a half (a third for erf, a
   fifth for sin and cos) of the cost.

   Each `rn_<name>f_fast(x, &slow)` evaluates in double with short polynomials (relative
   error near 2^-40 where the library's functions keep below 2^-52) and rounds once to
   float. That float is the correctly rounded result unless the double lies within the
   function's gate (its error bound, in double ulps) of a midpoint between two floats;
   there, and outside the range the fast path covers (special values, overflow,
   subnormal results), it sets *slow and the caller must use the library's function.
   Where *slow is 0 the result is the library's result, bit for bit: both are the
   correctly rounded value. scripts/check_fast_paths.py checks this on all 2^32 inputs
   of each function (docs/numerics.md); about one input in 2^15 takes the slow path.

   No branch: a loop of calls vectorizes, computing *slow with the result, and a second
   pass redoes the rare flagged elements (rune/backends/eager_mathlib.py). The
   coefficients are Chebyshev fits by scripts/fit_fast_paths.py. Same operations as the
   library (IEEE basic operations, explicit fma, bit manipulation), so the text is valid
   in both dialects. */

/* inlined wherever called: a fast path left as a call keeps its caller's loop scalar (gcc's
   heuristics may decline a long one) */
#if defined(__GNUC__) && !defined(__CUDACC__)
#define RN_FAST_FN RN_FN __attribute__((always_inline))
#else
#define RN_FAST_FN RN_FN
#endif

RN_FN uint64_t rn_fast_dbits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
RN_FN double rn_fast_bitsd(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
RN_FN uint32_t rn_fast_fbits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
RN_FN float rn_fast_bitsf(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

/* Whether the normal double with bits b lies within `gate` double ulps of a midpoint
   between two floats (the 29 bits a float drops are 2^28 there). One unsigned
   comparison: the difference wraps around for bits below the window. */
RN_FN int rn_fast_near_midpoint(uint64_t b, uint64_t gate) {
  return ((b & 0x1fffffffull) - (0x10000000ull - gate)) < 2 * gate;
}

/* y[i] = full(x[i]) for i < n (n at most N, a constant) through the fast path `fast`:
   one vector loop computes every element and flags, then `full` redoes the flagged ones
   (the eager units' blocks, rune/backends/eager_mathlib.py, and the C dialect's SIMD
   clones, simd_clones.h). The flags are ints: a char array made gcc vectorize 64 lanes
   wide and spill. */
#define RN_FAST_THEN_FULL(fast, full, x, y, n, N)                                         \
  do {                                                                                     \
    int rn_slow_[N], rn_any_ = 0;                                                          \
    _Pragma("omp simd reduction(|:rn_any_)")                                               \
    for (int64_t i_ = 0; i_ < (n); i_++) {                                                 \
      int s_;                                                                              \
      (y)[i_] = fast((x)[i_], &s_);                                                        \
      rn_slow_[i_] = s_;                                                                   \
      rn_any_ |= s_;                                                                       \
    }                                                                                      \
    if (rn_any_)                                                                           \
      for (int64_t i_ = 0; i_ < (n); i_++) if (rn_slow_[i_]) (y)[i_] = full((x)[i_]);      \
  } while (0)

#define RN_FAST_INVLN2 0x1.71547652b82fep+0
#define RN_FAST_LN2 0x1.62e42fefa39efp-1

/* The bits of e^x = 2^k e^r for -104 <= x <= 88.7 (a normal double): r = x - k ln 2 (one
   fma: |k| <= 150 and ln 2's double is within 2^-54 of it, so r is within 2^-46 of
   exact), e^r by a degree-8 fit on |r| <= ln(2)/2 (error 2^-40.2, relative 2^-39.7). */
RN_FAST_FN uint64_t rn_fast_exp_bits(double x) {
  double t = x * RN_FAST_INVLN2 + 0x1.8p52;   /* k in t's low bits */
  double k = t - 0x1.8p52;
  double r = fma(k, -RN_FAST_LN2, x);
  double r2 = r * r, r4 = r2 * r2;
  double a0 = fma(0x1.ffffffffd38bdp-1, r, 1.0);
  double a1 = fma(0x1.555555a26e454p-3, r, 0x1.fffffffff71cep-2);
  double a2 = fma(0x1.111080ad98b3fp-7, r, 0x1.5555557428fc1p-5);
  double a3 = fma(0x1.a1aa7fabf2756p-13, r, 0x1.6c164df3ec5dfp-10);
  double p = fma(fma(0x1.a15a501238ce0p-16, r4, fma(a3, r2, a2)), r4, fma(a1, r2, a0));
  return rn_fast_dbits(p) + (rn_fast_dbits(t) << 52);   /* p 2^k (t's bits << 52 = k << 52) */
}

/* e^x: gate 2^14 ulps (2^-39 relative). Covers -87 < x < 88.7, where e^x is a normal
   float, and x < -104 (-inf included), where it rounds to +0: a softmax's masked scores
   take no slow path. */
RN_FAST_FN float rn_expf_fast(float x, int *slow) {
  uint64_t y = rn_fast_exp_bits(x);
  int zero = x < -104.0f;
  *slow = !zero & (!(x > -87.0f && x < 88.7f) | rn_fast_near_midpoint(y, 1ull << 14));
  return zero ? 0.0f : (float)rn_fast_bitsd(y);
}

/* logistic x = 1 / (1 + e^-x), e^-x as exp's (relative error 2^-39.7; y's is at most
   that, E / (1 + E) times it, plus the division's); gate 2^14 ulps. Covers x > -87
   (+inf included): past 104, e^-x is taken as e^-104 and y rounds to 1 either way. */
RN_FAST_FN float rn_logisticf_fast(float x, int *slow) {
  double e = rn_fast_bitsd(rn_fast_exp_bits(x < 104.0f ? -(double)x : -104.0));
  double y = 1.0 / (1.0 + e);
  *slow = !(x > -87.0f) | rn_fast_near_midpoint(rn_fast_dbits(y), 1ull << 14);
  return (float)y;
}

/* log x = e ln 2 + log(m), x = 2^e m with m in [sqrt(1/2), sqrt(2)) (m - 1 = f exact),
   log(m) = 2 atanh(s) = 2s + 2s z P(z), s = f / (2 + f), z = s^2 <= 0.0295, P a
   degree-4 fit (error 2^-38.0 on P, 2^-43.1 relative on log m); gate 2^12 ulps.
   Covers positive normal x. */
RN_FAST_FN float rn_logf_fast(float x, int *slow) {
  uint32_t u = rn_fast_fbits(x);
  int e = (int)((u - 0x3f3504f3u + 0x80000000u) >> 23) - 256;   /* the binade of x / sqrt(1/2) */
  float m = rn_fast_bitsf(u - ((uint32_t)e << 23));
  double f = (double)m - 1.0, s = f / (2.0 + f), z = s * s, z2 = z * z;
  double P = fma(fma(0x1.8c8c11e5b9853p-4, z2, fma(0x1.c67ada0177669p-4, z, 0x1.249323e4d807bp-3)), z2,
                 fma(0x1.999998cafbf29p-3, z, 0x1.5555555564e96p-2));
  double t = s + s;
  double y = fma((double)e, RN_FAST_LN2, fma(t * z, P, t));
  *slow = !(x >= 0x1p-126f && x <= 0x1.fffffep127f) | rn_fast_near_midpoint(rn_fast_dbits(y), 1ull << 12);
  return (float)y;
}

/* tanh |x| = em / (em + 2), em = e^(2|x|) - 1 = 2^k r Q(r) + (2^k - 1), with
   r = |x| - k ln(2)/2 (|r| <= ln(2)/4) and r Q(r) = e^(2r) - 1 by a degree-8 fit of Q
   (relative error 2^-43.5; em's is at most 3.4 times that, at k = 1, r = -ln(2)/4);
   gate 2^13 ulps. The sign is x's. Covers |x| >= 2^-60, infinities included: past 9.01
   the result rounds to 1, and |x| is taken as at most 88 (2^k stays a double). */
RN_FAST_FN float rn_tanhf_fast(float x, int *slow) {
  uint32_t bits = rn_fast_fbits(x) & 0x7fffffffu;
  float a = rn_fast_bitsf(bits);
  /* |x| at most 88 as an unsigned minimum of the bits (one instruction: a float select
     here had gcc carry both sides through the reduction) */
  double ad = rn_fast_bitsf(bits < 0x42b00000u ? bits : 0x42b00000u);
  double t = ad * (2 * RN_FAST_INVLN2) + 0x1.8p52;
  double k = t - 0x1.8p52;
  double r = fma(k, -0.5 * RN_FAST_LN2, ad);
  double r2 = r * r, r4 = r2 * r2;
  double b0 = fma(0x1.fffffffff71cdp+0, r, 2.0);
  double b1 = fma(0x1.55555574291f1p-1, r, 0x1.5555555553b7dp+0);
  double b2 = fma(0x1.6c164df394f2ep-4, r, 0x1.1111111c45ef2p-2);
  double b3 = fma(0x1.a15a508b8668cp-8, r, 0x1.a019adab7c510p-6);
  double q = fma(fma(0x1.72c721633e56ap-10, r4, fma(b3, r2, b2)), r4, fma(b1, r2, b0));
  double scale = rn_fast_bitsd(0x3ff0000000000000ull + (rn_fast_dbits(t) << 52));   /* 2^k */
  double em = fma(scale * r, q, scale - 1.0);
  double y = em / (em + 2.0);
  *slow = !(a >= 0x1p-60f) | rn_fast_near_midpoint(rn_fast_dbits(y), 1ull << 13);
  return rn_fast_bitsf(rn_fast_fbits((float)y) | (rn_fast_fbits(x) & 0x80000000u));
}

/* x = q pi/2 + r for |x| < 2^17: q = rint(x 2/pi) (|q| < 2^17), r by two fmas with pi/2
   as hi + lo doubles (each rounding once, relative to what is left; the dropped third
   piece times q is below 2^-92). Returns r, sets q mod 4. */
RN_FAST_FN double rn_fast_reduce_pio2(float x, int *q) {
  double xd = x;
  double t = xd * 0x1.45f306dc9c883p-1 + 0x1.8p52;   /* q in t's low bits */
  double k = t - 0x1.8p52;
  double r = fma(-k, 0x1.921fb54442d18p+0, xd);
  *q = (int)(rn_fast_dbits(t) & 3);
  return fma(-k, 0x1.1a62633145c07p-54, r);
}

/* sin r = r + r z S(z) and cos r = 1 + z C(z) for z = r^2, |r| <= pi/4, S and C degree-4
   fits (relative error 2^-45.6 and 2^-41.5) */
RN_FAST_FN double rn_fast_sin_poly(double r) {
  double z = r * r, z2 = z * z;
  double S = fma(fma(-0x1.aa285741f6e65p-26, z2, fma(0x1.71d9a9f383b18p-19, z, -0x1.a019fd9b35248p-13)), z2,
                 fma(0x1.1111110fd3d3ep-7, z, -0x1.555555555516bp-3));
  return fma(r * z, S, r);
}

RN_FAST_FN double rn_fast_cos_poly(double r) {
  double z = r * r, z2 = z * z;
  double C = fma(fma(-0x1.2474e17020a56p-22, z2, fma(0x1.a01298d76e8f2p-16, z, -0x1.6c16bae5ee25cp-10)), z2,
                 fma(0x1.555555514f763p-5, z, -0x1.fffffffffe697p-2));
  return fma(z, C, 1.0);
}

/* sin x: sin r or cos r by the quadrant, gate 2^13 ulps. Covers 2^-126 <= |x| < 2^17
   (past it, and at 0 and NaN, the library's exact reduction). */
RN_FAST_FN float rn_sinf_fast(float x, int *slow) {
  int q;
  double r = rn_fast_reduce_pio2(x, &q);
  double s = rn_fast_sin_poly(r), c = rn_fast_cos_poly(r);
  double y = q & 1 ? c : s;
  y = q & 2 ? -y : y;
  float a = rn_fast_bitsf(rn_fast_fbits(x) & 0x7fffffffu);
  *slow = !(a >= 0x1p-126f && a < 0x1p17f) | rn_fast_near_midpoint(rn_fast_dbits(y), 1ull << 13);
  return (float)y;
}

/* cos x as sin x a quadrant on. Covers |x| < 2^17. */
RN_FAST_FN float rn_cosf_fast(float x, int *slow) {
  int q;
  double r = rn_fast_reduce_pio2(x, &q);
  double s = rn_fast_sin_poly(r), c = rn_fast_cos_poly(r);
  double y = q & 1 ? s : c;
  y = (q + 1) & 2 ? -y : y;
  float a = rn_fast_bitsf(rn_fast_fbits(x) & 0x7fffffffu);
  *slow = !(a < 0x1p17f) | rn_fast_near_midpoint(rn_fast_dbits(y), 1ull << 13);
  return (float)y;
}


/* erf |x| = |x| P(x^2) below 1 (P a degree-9 fit, relative error 2^-45.4), 1 - e^(-x^2) R(|x|)
   on [1, 4) (x^2 exact in double; e^(-x^2) as exp's, relative 2^-39.7; e^(-x^2) R < 0.16, so
   erf's relative error stays below 2^-41.9), and 1 from 4 (erfc 4 < 2^-25: erf rounds to 1),
   |x| taken as at most 4 throughout (every piece finite); gate 2^13 ulps. The sign is x's.
   Covers |x| >= 2^-125, infinities included. */
RN_FAST_FN float rn_erff_fast(float x, int *slow) {
  float a = rn_fast_bitsf(rn_fast_fbits(x) & 0x7fffffffu);
  uint32_t ab = rn_fast_fbits(a);
  double ad = rn_fast_bitsf(ab < 0x40800000u ? ab : 0x40800000u);   /* min(a, 4) on the bits */
  double z = ad * ad, z2 = z * z, z4 = z2 * z2, z8 = z4 * z4;
  double p0 = fma(-0x1.812746b0271ecp-2, z, 0x1.20dd750429b19p+0);
  double p1 = fma(-0x1.b82ce15c3b7f4p-6, z, 0x1.ce2f2197bc2efp-4);
  double p2 = fma(-0x1.c0286cad68777p-11, z, 0x1.565ba0406bfbdp-8);
  double p3 = fma(-0x1.f0705a1dac8d9p-17, z, 0x1.f941bed7e193ep-14);
  double p4 = fma(-0x1.c1a515db3238bp-24, z, 0x1.9ae0986ebb4ebp-20);
  double small = ad * fma(p4, z8, fma(fma(p3, z2, p2), z4, fma(p1, z2, p0)));
  /* R(a) = erfc(a) e^(a^2) in u = a - 1.5 on [1, 2) (degree 12, relative error 2^-43.4) and
     in u = a - 3 on [2, 4) (degree 14, 2^-43.2), both in Estrin's form */
  double u1 = ad - 1.5, u2 = ad - 3.0;
  double w2 = u1 * u1, w4 = w2 * w2, w8 = w4 * w4, v2 = u2 * u2, v4 = v2 * v2, v8 = v4 * v4;
  double d0 = fma(-0x1.4f198844485bdp-3, u1, 0x1.494daffa2ad68p-2), e0 = fma(-0x1.bd6ae4d150ee3p-5, u2, 0x1.6e9827d229d2dp-3);
  double d1 = fma(-0x1.0dc51d30d2d7dp-5, u1, 0x1.37ea271bc2df0p-4), e1 = fma(-0x1.259061b3b6fd9p-8, u2, 0x1.043fe1a98e7e2p-6);
  double d2 = fma(-0x1.513ecfd26cce1p-8, u1, 0x1.b65944fbcb033p-7), e2 = fma(-0x1.53dece6556cc1p-12, u2, 0x1.409cc2e78e88bp-10);
  double d3 = fma(-0x1.5b0df9f3852e0p-11, u1, 0x1.ee7055fb6812ap-10), e3 = fma(-0x1.6023b4f28be06p-16, u2, 0x1.5e7396d9902bbp-14);
  double d4 = fma(-0x1.3015d839839a3p-14, u1, 0x1.d4543b5b90043p-13), e4 = fma(-0x1.4b48fd6a95b63p-20, u2, 0x1.595df8d17e28bp-18);
  double d5 = fma(-0x1.f5dff75375868p-18, u1, 0x1.7ed994422cec6p-16), e5 = fma(-0x1.193beefd123f3p-24, u2, 0x1.36c50a4872b78p-22);
  double e6 = fma(-0x1.0f75e4876755fp-28, u2, 0x1.fb881c26d8557p-27);
  double r1 = fma(fma(0x1.2862dd687c50fp-19, w4, fma(d5, w2, d4)), w8,
                  fma(fma(d3, w2, d2), w4, fma(d1, w2, d0)));
  double r2 = fma(fma(fma(0x1.d5282b7ff504ep-31, v2, e6), v4, fma(e5, v2, e4)), v8,
                  fma(fma(e3, v2, e2), v4, fma(e1, v2, e0)));
  /* the pieces blended by 0/1 factors, not selected: selects here had gcc branch and leave
     the loop scalar; a blend's one rounding (2^-53 of the pieces' difference) is far
     inside the gate, and at 0 and 1 the factor gives a piece exactly */
  double upper = (double)(ad >= 2.0), big = (double)(ad >= 1.0), past = (double)(ad >= 4.0);
  double r = fma(upper, r2 - r1, r1);
  double large = 1.0 - rn_fast_bitsd(rn_fast_exp_bits(-z)) * r;
  double y = fma(big, large - small, small);
  y = fma(past, 1.0 - y, y);
  *slow = !(a >= 0x1p-125f) | rn_fast_near_midpoint(rn_fast_dbits(y), 1ull << 13);
  return rn_fast_bitsf(rn_fast_fbits((float)y) | (rn_fast_fbits(x) & 0x80000000u));
}
