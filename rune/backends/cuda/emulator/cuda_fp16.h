// The slice of cuda_fp16.h rune's kernels use, on the host (g++'s _Float16 rounds as the GPU).
#pragma once
#include <cstring>

struct __half {
  unsigned short x;
};
inline float __half2float(__half h) { _Float16 f; std::memcpy(&f, &h.x, 2); return (float)f; }
inline __half __float2half_rn(float f) { _Float16 g = (_Float16)f; __half h; std::memcpy(&h.x, &g, 2); return h; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline __half __double2half(double d) { _Float16 g = (_Float16)d; __half h; std::memcpy(&h.x, &g, 2); return h; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
