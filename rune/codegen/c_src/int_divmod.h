// A template, instantiated per integer width ${bits} (8, 16, 32, 64): NumPy's integer
// floor division and remainder as the eager backend computes them.
/* integer division by zero gives 0, MIN // -1 wraps to MIN (the eager backend) */
RN_FN int${bits}_t rn_floordiv_int${bits}(int${bits}_t a, int${bits}_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int${bits}_t)(0u - (uint64_t)a);
  int${bits}_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
RN_FN int${bits}_t rn_rem_int${bits}(int${bits}_t a, int${bits}_t b) {
  if (b == 0 || b == -1) return 0;
  int${bits}_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
RN_FN uint${bits}_t rn_floordiv_uint${bits}(uint${bits}_t a, uint${bits}_t b) { return b ? a / b : 0; }
RN_FN uint${bits}_t rn_rem_uint${bits}(uint${bits}_t a, uint${bits}_t b) { return b ? a % b : 0; }
