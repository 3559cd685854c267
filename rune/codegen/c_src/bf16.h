// bfloat16 in float32: load, round to nearest even, store (both dialects' prelude).
RN_FN float rn_bf16_load(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
/* float32 -> bfloat16 -> float32, round to nearest even; NaN keeps its sign and turns quiet (ml_dtypes) */
RN_FN float rn_bf16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) u = (u & 0x80000000u) | 0x7fc00000u;
  else u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&f, &u, 4); return f;
}
RN_FN uint16_t rn_bf16_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return (uint16_t)(u >> 16); }
