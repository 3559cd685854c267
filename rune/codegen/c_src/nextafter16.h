// nextafter in float16 and bfloat16, whose values the kernels hold in float32: a step of
// the 16-bit pattern toward y. NaN in either gives NaN; equal operands give y (C99's and
// IEEE 754's rule), for both types, whatever the NumPy installed.
/* float16 bits <-> its value in float32 (exact both ways; no _Float16 or __half needed) */
RN_FN float rn_f16_value(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t u;
  if (e == 0) { float f = ldexpf((float)m, -24); memcpy(&u, &f, 4); u |= sign; }
  else if (e == 31) u = sign | 0x7f800000u | (m << 13);
  else u = sign | ((e + 112u) << 23) | (m << 13);
  float f; memcpy(&f, &u, 4); return f;
}
RN_FN uint16_t rn_f16_pattern(float f) {   /* f: a float16 value */
  uint32_t u; memcpy(&u, &f, 4);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x38800000u) return sign | (uint16_t)((((a >> 23) - 112u) << 10) | ((a >> 13) & 0x3ffu));
  return sign | (uint16_t)(fabsf(f) * 16777216.0f);   /* subnormal: a multiple of 2^-24 */
}
/* the pattern one step away from zero where y lies beyond x, else one step toward it */
RN_FN int rn_step16(float x, float y) { return (y > x) == (x > 0) ? 1 : -1; }
RN_FN float rn_nextafter_f16(float x, float y) {
  if (x != x || y != y) return NAN;
  if (x == y) return y;
  if (x == 0) return copysignf(5.9604644775390625e-08f, y);   /* 2^-24 */
  return rn_f16_value((uint16_t)(rn_f16_pattern(x) + rn_step16(x, y)));
}
RN_FN float rn_nextafter_bf16(float x, float y) {
  if (x != x || y != y) return NAN;
  if (x == y) return y;
  if (x == 0) return copysignf(9.183549615799121e-41f, y);   /* 2^-133 */
  return rn_bf16_load((uint16_t)(rn_bf16_bits(x) + rn_step16(x, y)));
}
