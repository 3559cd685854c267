// Conversions as rune defines them (rune/backends/float_semantics.py): float64 and wide
// integers to bfloat16 rounded once. The saturating float -> int helpers are generated
// from each integer type's bounds (rune/codegen/helpers.py).
/* float64 -> float32 rounded to odd: truncated, the last bit set when inexact */
RN_FN float rn_f32_odd(double x) {
  float f = (float)x; uint32_t u; memcpy(&u, &f, 4);
  if ((double)f != x && x == x && !(u & 1u)) u += fabs((double)f) > fabs(x) ? 0xffffffffu : 1u;
  memcpy(&f, &u, 4); return f;
}
RN_FN float rn_bf16_from_f64(double x) { return rn_bf16(rn_f32_odd(x)); }
/* a 64-bit integer's magnitude kept to 24 bits, rounded to odd, then to bfloat16 */
RN_FN float rn_bf16_from_magnitude(uint64_t m, int negative) {
  int shift = 0;
  while ((m >> shift) >= (1ull << 24)) shift++;
  uint64_t kept = m >> shift;
  kept |= (kept << shift) != m;
  float f = ldexpf((float)kept, shift);
  return rn_bf16(negative ? -f : f);
}
RN_FN float rn_bf16_from_i64_srci(int64_t v) { return rn_bf16_from_magnitude(v < 0 ? 0ull - (uint64_t)v : (uint64_t)v, v < 0); }
RN_FN float rn_bf16_from_i64_srcu(int64_t v) { return rn_bf16_from_magnitude((uint64_t)v, 0); }
