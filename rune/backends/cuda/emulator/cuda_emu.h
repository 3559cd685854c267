// CUDA's execution model on the host, so g++ compiles and runs rune's generated
// CUDA kernels: blocks run one after another on the calling thread; the threads of
// a block are fibers on it (each its own stack, switched cooperatively: a thread
// runs until it waits at a barrier or returns, then the next runnable one runs);
// __syncthreads is a barrier over the block, __syncwarp and the warp shuffles and
// votes (a per-warp exchange between two warp barriers) one over the warp's live
// lanes (a mask is taken to name them all: rune's kernels pass the full mask);
// __shared__ variables are function statics (one block at a time uses them);
// atomics are plain read-modify-writes (one OS thread runs every fiber). A barrier
// that can never complete (a GPU would hang) fails the launch instead. A thread
// costs ~0.2 us to start and ~20 ns a barrier (measured on x86-64 with the switch
// below; ~0.6 us and ~0.2 us through ucontext), the std::thread each once was ~10 us
// and futex round trips. Only what rune's kernels use, plus the common intrinsics.
#pragma once
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <sys/mman.h>
#include <cstdint>
#include <cstring>
// the hand-written fiber switch (x86-64, where objects are not built for shadow stacks;
// RN_EMU_UCONTEXT asks for glibc's everywhere)
#if defined(__x86_64__) && !(defined(__CET__) && (__CET__ & 2)) && !defined(RN_EMU_UCONTEXT)
#define RN_EMU_OWN_SWITCH 1
#else
#include <ucontext.h>
#endif

// Each emulation library keeps its own state (fibers, stacks, the running block):
// nothing of the header is exported, so a process that loads several libraries (or
// two builds of this header) never binds one's names to another's. Python calls
// rn_emu_fault (exported by name) and the launch entries written after the header.
#pragma GCC visibility push(hidden)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

// Set for the running fiber at each switch (one OS thread runs them all).
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace rn_emu {
constexpr unsigned MAX_THREADS = 1024;  // CUDA's largest block
constexpr unsigned WARPS = MAX_THREADS / 32;

// The fiber switch: save the running context's registers and stack pointer, resume
// another's. On x86-64 a hand-written one: glibc's swapcontext also saves and sets
// the signal mask, a system call (~0.2 us) at every switch, and a warp shuffle is
// two switches a lane. Elsewhere, and where the compiler marks objects for CET
// shadow stacks (a return to another stack would fault there), glibc's ucontext.
#if RN_EMU_OWN_SWITCH
struct Context {
  void *sp = nullptr;  // the callee-saved registers and the resume address lie on its stack
};
// rn_emu_switch(&from->sp, to->sp): push what the SysV ABI says a call keeps (rbx, rbp,
// r12-r15; the SSE/x87 control words kernels never change), swap stacks, pop, return.
asm(".pushsection .text\n"
    ".p2align 4\n"
    ".type rn_emu_switch, @function\n"
    "rn_emu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size rn_emu_switch, .-rn_emu_switch\n"
    ".popsection\n");
extern "C" void rn_emu_switch(void **save, void *resume);
inline void swap(Context &from, Context &to) { rn_emu_switch(&from.sp, to.sp); }
// A context that starts `entry` (which never returns) on the stack [base, base + size).
inline void start(Context &c, char *base, size_t size, Context &, void (*entry)()) {
  void **top = (void **)(base + size);  // 16-byte aligned
  *--top = nullptr;                     // entry's return address (it never returns)
  *--top = (void *)entry;               // popped by rn_emu_switch's ret
  for (int r = 0; r < 6; ++r) *--top = nullptr;
  c.sp = top;
}
#else
struct Context {
  ucontext_t uc;
};
inline void swap(Context &from, Context &to) { swapcontext(&from.uc, &to.uc); }
inline void start(Context &c, char *base, size_t size, Context &back, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = base;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = &back.uc;
  makecontext(&c.uc, entry, 0);
}
#endif

// A barrier counts arrivals; the fibers that arrived park until the last one does.
struct Barrier {
  unsigned expected = 0, arrived = 0;
};

struct Fiber {
  Context ctx;
  jmp_buf escape;  // where a fault (a misaligned access) ends this thread
  Barrier *parked; // the barrier it waits at, or null
  bool done;
};

// Each fiber's stack: 64 KiB (the kernels' deepest frames reach 1.4 KiB, a fault's
// report through snprintf 3.2 KiB; CUDA gives a thread 1 KiB by default) above a
// guard as large (it covers 4 and 64 KiB pages), so an overflow faults instead of
// running into the next stack. Mapped once, for the largest block a launch may have,
// and reused by every launch after; pages are committed as touched, so a fiber costs
// the one or two pages its frames reach.
constexpr size_t STACK = 64 << 10, GUARD = 64 << 10;

struct Block {
  unsigned size = 0, returned = 0;
  Fiber *running = nullptr;
  Barrier all;             // __syncthreads
  Barrier warps[WARPS];    // one per warp, over its live lanes
  uint64_t slots[MAX_THREADS];  // one exchange slot per thread
};

struct Launch {
  void (*body)(void **);
  void **args;
  Context scheduler;       // the launching thread's own context
  Fiber fibers[MAX_THREADS];
  char *stacks = nullptr;
  unsigned mapped = 0;     // how many fibers have a stack
  bool faulted = false;
  char fault[512];         // what failed the last launch ("" if nothing)
};
inline Block block;
inline Launch launch;

inline char *stack_of(unsigned t) { return launch.stacks + (size_t)t * (GUARD + STACK) + GUARD; }

// Stacks for the first `n` fibers: the span for every fiber a block may have is mapped
// inaccessible once, each stack opened the first time a block needs it.
inline bool open_stacks(unsigned n) {
  if (!launch.stacks) {
    void *p = mmap(nullptr, (size_t)MAX_THREADS * (GUARD + STACK), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    launch.stacks = (char *)p;
  }
  for (; launch.mapped < n; ++launch.mapped)
    if (mprotect(stack_of(launch.mapped), STACK, PROT_READ | PROT_WRITE)) return false;
  return true;
}

// Run fiber `to`: the thread whose indices the kernel sees is the running one.
inline void resume(Context &from, Fiber &to) {
  block.running = &to;
  threadIdx.x = (unsigned)(&to - launch.fibers);
  swap(from, to.ctx);
}

// The running fiber waits (parked or returned): the next runnable fiber after it
// runs, round robin; with none (every thread returned, or the rest wait at barriers
// nobody else can reach, or a fault ends the block) the scheduler's context does.
inline void yield() {
  Fiber *me = block.running, *fibers = launch.fibers;
  const unsigned n = block.size, at = (unsigned)(me - fibers);
  if (!launch.faulted)
    for (unsigned k = 1; k <= n; ++k) {
      Fiber &f = fibers[(at + k) % n];
      if (!f.done && !f.parked) {
        if (&f != me) resume(me->ctx, f);
        return;
      }
    }
  swap(me->ctx, launch.scheduler);
}

// The running fiber arrives at `b` over fibers [first, first + b.expected): the last to
// arrive releases the rest and goes on.
inline void arrive(Barrier &b, unsigned first) {
  if (++b.arrived < b.expected) {
    block.running->parked = &b;
    yield();
    return;
  }
  b.arrived = 0;
  for (unsigned t = first; t < first + b.expected; ++t) launch.fibers[t].parked = nullptr;
}

inline void fiber_main() {
  Fiber &me = *block.running;
  if (!setjmp(me.escape)) launch.body(launch.args);
  me.done = true;
  ++block.returned;
  yield();  // never resumed
}
}  // namespace rn_emu

inline void __syncthreads() { rn_emu::arrive(rn_emu::block.all, 0); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  const unsigned w = threadIdx.x / 32;
  rn_emu::arrive(rn_emu::block.warps[w], w * 32);
}

namespace rn_emu {
// Every lane of the warp publishes `v`; each then reads lane `src` (its own value when
// `src` is outside the warp or not `valid`).
template <class T>
inline T exchange(T v, unsigned src, bool valid) {
  static_assert(sizeof(T) <= 8, "a shuffled value fits 8 bytes");
  const unsigned t = threadIdx.x, first = t / 32 * 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  block.slots[t] = bits;
  __syncwarp();
  T out = v;
  if (valid && src < 32 && first + src < blockDim.x) std::memcpy(&out, &block.slots[first + src], sizeof(T));
  __syncwarp();  // nobody overwrites a slot before every lane read it
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

// The `mask` lanes of the warp whose `pred` holds (lanes past the block's end hold none).
inline unsigned __ballot_sync(unsigned mask, int pred) {
  const unsigned t = threadIdx.x, first = t / 32 * 32;
  rn_emu::block.slots[t] = pred != 0;
  __syncwarp();
  unsigned bits = 0;
  for (unsigned l = 0; l < 32 && first + l < blockDim.x; ++l)
    if (rn_emu::block.slots[first + l] && (mask >> l & 1u)) bits |= 1u << l;
  __syncwarp();
  return bits;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) {
  const unsigned lane = threadIdx.x % 32, first = threadIdx.x - lane;
  const unsigned n = blockDim.x - first < 32 ? blockDim.x - first : 32;
  const unsigned live = (n == 32 ? 0xffffffffu : (1u << n) - 1u) & mask;
  return (__ballot_sync(mask, pred) & live) == live;
}

// Atomics: no other thread runs between a fiber's read and its write.
template <class T>
inline T atomicAdd(T *p, T v) { T old = *p; *p = old + v; return old; }
template <class T>
inline T atomicSub(T *p, T v) { T old = *p; *p = old - v; return old; }
template <class T>
inline T atomicExch(T *p, T v) { T old = *p; *p = v; return old; }
template <class T>
inline T atomicCAS(T *p, T expected, T desired) {  // compares bits, as the hardware does
  T old = *p;
  if (!std::memcmp(&old, &expected, sizeof(T))) *p = desired;
  return old;
}
template <class T>
inline T atomicMax(T *p, T v) { T old = *p; if (old < v) *p = v; return old; }
template <class T>
inline T atomicMin(T *p, T v) { T old = *p; if (v < old) *p = v; return old; }

inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }

// The library is compiled with UBSan's alignment check (-fsanitize=alignment,
// not recoverable) and linked without UBSan's runtime: these handlers are its.
// A load or store at an address its type's alignment forbids (on a GPU, a
// misaligned vector access: a sticky error) records what and where, and ends
// the emulated thread (kernels hold no objects to destroy) and its launch; the
// launch then reports it (rn_emu_fault) and the Python side raises.
namespace rn_emu {
struct TypeMismatch {  // UBSan's TypeMismatchData
  const char *file;
  uint32_t line, column;
  const void *type;
  unsigned char log_alignment, kind;
};
}  // namespace rn_emu

extern "C" [[noreturn]] void __ubsan_handle_type_mismatch_v1_abort(rn_emu::TypeMismatch *data, uintptr_t ptr) {
  rn_emu::launch.faulted = true;
  snprintf(rn_emu::launch.fault, sizeof rn_emu::launch.fault,
           "misaligned: misaligned access at %p (%u bytes past a %u-byte boundary the type needs), "
           "line %u of the unit, thread %u of block %u", (void *)ptr, (unsigned)(ptr % (1u << data->log_alignment)),
           1u << data->log_alignment, data->line, threadIdx.x, blockIdx.x);
  longjmp(rn_emu::block.running->escape, 1);
}
extern "C" [[noreturn]] void __ubsan_handle_type_mismatch_v1(rn_emu::TypeMismatch *data, uintptr_t ptr) {
  __ubsan_handle_type_mismatch_v1_abort(data, ptr);
}

// What failed the last launch ("" if it ran to the end): "misaligned: ...", "stuck: ..."
// (a barrier that can never complete) or "launch: ..." (a shape it cannot run).
extern "C" [[gnu::visibility("default")]] const char *rn_emu_fault() { return rn_emu::launch.fault; }

namespace rn_emu {
// Why the fibers of the block ended with some still parked: who waits where.
inline void report_stuck() {
  const unsigned n = block.size;
  unsigned at_all = 0;
  for (unsigned t = 0; t < n; ++t) at_all += launch.fibers[t].parked == &block.all;
  int len = snprintf(launch.fault, sizeof launch.fault, "stuck: block %u never completes a barrier: %u of its %u "
                     "threads returned, %u wait at __syncthreads", blockIdx.x, block.returned, n, at_all);
  for (unsigned w = 0; w * 32 < n && len < (int)sizeof launch.fault; ++w) {
    unsigned waiting = 0;
    for (unsigned t = w * 32; t < n && t < w * 32 + 32; ++t) waiting += launch.fibers[t].parked == &block.warps[w];
    if (waiting)
      len += snprintf(launch.fault + len, sizeof launch.fault - len, ", %u of warp %u's %u lanes at its warp barrier "
                      "(__syncwarp or a shuffle or vote)", waiting, w, block.warps[w].expected);
  }
}

// One block: fresh fibers at the kernel's start, run until none can go on.
inline void run_block(unsigned n) {
  block.size = n;
  block.returned = 0;
  block.all = Barrier{n, 0};
  for (unsigned w = 0; w * 32 < n; ++w) block.warps[w] = Barrier{n - w * 32 < 32 ? n - w * 32 : 32, 0};
  for (unsigned t = 0; t < n; ++t) {
    Fiber &f = launch.fibers[t];
    f.parked = nullptr;
    f.done = false;
    start(f.ctx, stack_of(t), STACK, launch.scheduler, fiber_main);
  }
  resume(launch.scheduler, launch.fibers[0]);
  if (!launch.faulted && block.returned < n) {
    report_stuck();
    launch.faulted = true;
  }
}
}  // namespace rn_emu

// Run `body(args)` (a kernel launched with its arguments) over grid x block. Not a
// template: one instantiation of the fiber machinery serves every kernel.
inline void rn_emu_launch(unsigned grid, unsigned block, void (*body)(void **), void **args) {
  using namespace rn_emu;
  launch.faulted = false;
  launch.fault[0] = 0;
  if (block == 0 || block > MAX_THREADS) {
    snprintf(launch.fault, sizeof launch.fault, "launch: a block of %u threads (CUDA runs 1 to %u)", block,
             MAX_THREADS);
    return;
  }
  if (!open_stacks(block)) {
    snprintf(launch.fault, sizeof launch.fault, "launch: no memory for %u thread stacks", block);
    return;
  }
  launch.body = body;
  launch.args = args;
  gridDim = dim3{grid, 1, 1};
  blockDim = dim3{block, 1, 1};
  threadIdx = dim3{};
  for (unsigned b = 0; b < grid && !launch.faulted; ++b) {
    blockIdx = dim3{b, 1, 1};
    run_block(block);
  }
}
#pragma GCC visibility pop
