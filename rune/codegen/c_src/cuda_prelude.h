// The CUDA dialect's prelude head (rune/codegen/cuda.py): fp16/bf16 headers, NVRTC's
// fixed-width types, RN_FN, the vector access type and a scatter sort's merge pass.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807LL - 1)
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#else
#include <cstdint>
#include <cstring>
#include <cmath>
#endif
#define RN_FN static __device__ __forceinline__
#define RN_MATH_FN RN_FN
/* a function called on rare paths (the math library's full evaluations behind its fast
   paths): one out-of-line copy per unit, not one inlined at every call site */
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define RN_RARE_FN static __device__ __noinline__
#else
#define RN_RARE_FN static __device__ __attribute__((noinline))
#endif
#define RN_FULL_MASK 0xffffffffu
/* the index of an arg reduction's partial that has seen no element (loses every tie) */
#define RN_NO_INDEX ((int64_t)0x7fffffffffffffffLL)
/* N elements read or written as one aligned access (ld.global.v4 and kin) */
template <typename T, int N> struct alignas(sizeof(T) * N) rn_vec { T v[N]; };
/* One pass of a bottom-up merge sort of the M unique keys in src into dst: runs of W
   sorted keys merge in pairs. Each item (a grid-stride loop from start by step) writes
   C = min(chunk, 2W) consecutive outputs of one pair: a binary search on its merge path
   finds how many of the keys before its first output come from the left run, then it
   merges C keys in order. O(M + M / C log W) a pass, O(M log M) the sort. */
static __device__ __forceinline__ void rn_merge_pass(const int64_t *src, int64_t *dst, int64_t start,
                                                     int64_t step, int64_t W, int64_t M, int64_t chunk) {
  const int64_t C = 2 * W < chunk ? 2 * W : chunk;
  for (int64_t item = start; item < (M + C - 1) / C; item += step) {
    const int64_t first = item * C, base = first - first % (2 * W);
    const int64_t mid = base + W < M ? base + W : M, end = base + 2 * W < M ? base + 2 * W : M;
    const int64_t d = first - base, na = mid - base, nb = end - mid;
    int64_t lo = d > nb ? d - nb : 0, hi = d < na ? d : na;
    while (lo < hi) {  /* the fewest left keys among the first d that leave none behind */
      const int64_t i = lo + (hi - lo) / 2;
      if (src[base + i] < src[mid + d - i - 1]) lo = i + 1; else hi = i;
    }
    int64_t a = base + lo, b = mid + d - lo;
    const int64_t last = first + C < end ? first + C : end;
    for (int64_t out = first; out < last; ++out)
      dst[out] = b >= end || (a < mid && src[a] < src[b]) ? src[a++] : src[b++];
  }
}
/* A kernel launched once per pass learns its pass from counter[0] (each thread reads it
   before its block's barrier here); the last block to arrive (counter[1] counts them)
   moves it on for the next launch, after every block has read it. */
static __device__ __forceinline__ void rn_pass_done(uint32_t *counter, uint32_t pass) {
  __syncthreads();
  if (threadIdx.x == 0 && atomicAdd(&counter[1], 1u) == gridDim.x - 1) {
    counter[1] = 0;
    counter[0] = pass + 1;
  }
}
