// CUDA's execution model on the host, so g++ compiles and runs rune's generated
// CUDA kernels: blocks run one after another; the threads of a block are real
// threads (std::thread); __syncthreads is a barrier over the block; __shared__
// variables are function statics (one block at a time uses them); warp shuffles
// and votes go through a per-warp exchange between two warp barriers; atomics are
// std::atomic_ref. Only what rune's kernels use, plus the common intrinsics.
#pragma once
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

namespace rn_emu {
struct Block {
  std::unique_ptr<std::barrier<>> all;                 // __syncthreads
  std::vector<std::unique_ptr<std::barrier<>>> warps;  // one per warp, over its live lanes
  std::vector<uint64_t> slots;                         // one exchange slot per thread
};
inline Block *block = nullptr;  // the running block
}  // namespace rn_emu

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

inline void __syncthreads() { rn_emu::block->all->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { rn_emu::block->warps[threadIdx.x / 32]->arrive_and_wait(); }

namespace rn_emu {
// Every lane of the warp publishes `v`; each then reads lane `src` (its own value when
// `src` is outside the warp or not `valid`).
template <class T>
inline T exchange(T v, unsigned src, bool valid) {
  static_assert(sizeof(T) <= 8, "a shuffled value fits 8 bytes");
  Block *b = block;
  const unsigned t = threadIdx.x, w = t / 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  b->slots[t] = bits;
  b->warps[w]->arrive_and_wait();
  T out = v;
  const unsigned from = w * 32 + src;
  if (valid && src < 32 && from < blockDim.x) {
    uint64_t s = b->slots[from];
    std::memcpy(&out, &s, sizeof(T));
  }
  b->warps[w]->arrive_and_wait();  // nobody overwrites a slot before every lane read it
  return out;
}
}  // namespace rn_emu

template <class T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int = 32) {
  const unsigned lane = threadIdx.x % 32;
  return rn_emu::exchange(v, lane + delta, lane + delta < 32);
}
template <class T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta, int = 32) {
  const unsigned lane = threadIdx.x % 32;
  return rn_emu::exchange(v, lane - delta, lane >= delta);
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
  return rn_emu::exchange(v, (threadIdx.x % 32) ^ (unsigned)mask, true);
}
template <class T>
inline T __shfl_sync(unsigned, T v, int src, int = 32) {
  return rn_emu::exchange(v, (unsigned)src % 32, true);
}

inline unsigned __ballot_sync(unsigned mask, int pred) {
  unsigned bits = 0;
  const unsigned lane = threadIdx.x % 32;
  for (unsigned l = 0; l < 32; ++l) {
    int p = rn_emu::exchange(pred ? 1 : 0, l, true);
    const bool live = (threadIdx.x - lane + l) < blockDim.x;
    if (live && p && (mask >> l & 1u)) bits |= 1u << l;
  }
  return bits;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) {
  const unsigned lane = threadIdx.x % 32, first = threadIdx.x - lane;
  const unsigned n = blockDim.x - first < 32 ? blockDim.x - first : 32;
  const unsigned live = (n == 32 ? 0xffffffffu : (1u << n) - 1u) & mask;
  return (__ballot_sync(mask, pred) & live) == live;
}

template <class T>
inline T atomicAdd(T *p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T>
inline T atomicSub(T *p, T v) { return std::atomic_ref<T>(*p).fetch_sub(v); }
template <class T>
inline T atomicExch(T *p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T>
inline T atomicCAS(T *p, T expected, T desired) {
  std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
template <class T>
inline T atomicMax(T *p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {}
  return old;
}
template <class T>
inline T atomicMin(T *p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {}
  return old;
}

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }

// The library is compiled with UBSan's alignment check (-fsanitize=alignment,
// not recoverable) and linked without UBSan's runtime: these handlers are its.
// A load or store at an address its type's alignment forbids (on a GPU, a
// misaligned vector access: a sticky error) records what and where, and ends
// the emulated thread (kernels hold no objects to destroy); the launch then
// reports it (rn_emu_fault) and the Python side raises.
namespace rn_emu {
struct TypeMismatch {  // UBSan's TypeMismatchData
  const char *file;
  uint32_t line, column;
  const void *type;
  unsigned char log_alignment, kind;
};
inline thread_local jmp_buf escape;
inline std::atomic<bool> faulted{false};
inline char fault[512];
}  // namespace rn_emu

extern "C" [[noreturn]] void __ubsan_handle_type_mismatch_v1_abort(rn_emu::TypeMismatch *data, uintptr_t ptr) {
  bool first = false;
  if (rn_emu::faulted.compare_exchange_strong(first, true))
    snprintf(rn_emu::fault, sizeof rn_emu::fault,
             "misaligned access at %p (%u bytes past a %u-byte boundary the type needs), line %u of the unit, "
             "thread %u of block %u", (void *)ptr, (unsigned)(ptr % (1u << data->log_alignment)),
             1u << data->log_alignment, data->line, threadIdx.x, blockIdx.x);
  longjmp(rn_emu::escape, 1);
}
extern "C" [[noreturn]] void __ubsan_handle_type_mismatch_v1(rn_emu::TypeMismatch *data, uintptr_t ptr) {
  __ubsan_handle_type_mismatch_v1_abort(data, ptr);
}

// The first misaligned access of the last launch ("" if none).
extern "C" const char *rn_emu_fault() { return rn_emu::faulted ? rn_emu::fault : ""; }

// Run `body(args)` (a kernel launched with its arguments) over grid x block. Not a
// template: one instantiation of the thread machinery serves every kernel.
inline void rn_emu_launch(unsigned grid, unsigned block, void (*body)(void **), void **args) {
  rn_emu::faulted = false;
  gridDim = dim3{grid, 1, 1};
  blockDim = dim3{block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    rn_emu::Block blk;
    blk.all = std::make_unique<std::barrier<>>(block);
    for (unsigned w = 0; w * 32 < block; ++w)
      blk.warps.push_back(std::make_unique<std::barrier<>>(block - w * 32 < 32 ? block - w * 32 : 32));
    blk.slots.assign(block, 0);
    rn_emu::block = &blk;
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([body, args, b, t] {
        threadIdx = dim3{t, 1, 1};
        blockIdx = dim3{b, 1, 1};
        if (!setjmp(rn_emu::escape)) body(args);
      });
    for (auto &th : threads) th.join();
    rn_emu::block = nullptr;
  }
}
