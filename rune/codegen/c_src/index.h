// Index arithmetic, integer powers and Threefry (both dialects' prelude).
/* a runtime index as the eager backend reads it: negative counts from the end, then clamped to [0, hi] */
RN_FN int64_t rn_from_end(int64_t v, int64_t n) { return v < 0 ? v + n : v; }
RN_FN int64_t rn_clamp_index(int64_t v, int64_t n, int64_t hi) {
  v = v < 0 ? v + n : v;
  return v < 0 ? 0 : (v > hi ? hi : v);
}
/* integer power by squaring, wrapping as NumPy's loops (the exponent is non-negative) */
RN_FN uint64_t rn_powu64(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  while (e) { if (e & 1u) r *= base; base *= base; e >>= 1; }
  return r;
}
/* Threefry-2x32, 20 rounds (rune/backends/cpu/threefry.py): (y0 << 32) | y1 of counter i */
RN_FN uint32_t rn_rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
RN_FN uint64_t rn_threefry(uint32_t k0, uint32_t k1, uint64_t i) {
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  uint32_t x0 = (uint32_t)(i >> 32) + ks[0], x1 = (uint32_t)i + ks[1];
  for (int g = 1; g <= 5; g++) {
    for (int k = 0; k < 4; k++) { x0 += x1; x1 = rn_rotl32(x1, rot[(g - 1) % 2][k]); x1 ^= x0; }
    x0 += ks[g % 3]; x1 += ks[(g + 1) % 3] + (uint32_t)g;
  }
  return ((uint64_t)x0 << 32) | x1;
}
