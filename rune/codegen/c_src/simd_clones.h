// The C dialect's SIMD clones of the math library's functions that have a fast path
// (rn_math_fast.h), written out instead of left to gcc (rune/codegen/c.py: math_function).
// Lines starting with "// " at the top of a file here are notes, dropped when it is read.
/* A kernel loop calls a library function through its vector variant under the x86-64
   vector function ABI (_ZGV<isa>N<lanes>v_<name>: the lanes in one register, the result
   in one). gcc's own clone of a function evaluates both sides of every branch, so a
   clone could not fall back to the library for a few lanes without paying the slow path
   on all of them. These clones run the fast path on every lane as one vector body, then,
   only when a lane is flagged (about one in 2^15), the library's function on that lane:
   the library's bits on every lane, at about the fast path's cost.

   RN_X86_CLONES is 1 where this ABI holds (gcc on x86-64); elsewhere the functions keep
   gcc's clones. A variant is defined for each ISA the compiler targets (b: SSE2, c: AVX,
   d: AVX2, e: AVX-512), the ones the kernels, built with the same flags, may call. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RN_X86_CLONES 1
#else
#define RN_X86_CLONES 0
#endif

#define RN_CLONE(isa, lanes, fn, fast)                                                   \
  typedef float fn##_##isa##_vector __attribute__((vector_size(4 * lanes)));              \
  __attribute__((const)) fn##_##isa##_vector _ZGV##isa##N##lanes##v_##fn(fn##_##isa##_vector x) { \
    float xs[lanes], ys[lanes];                                                           \
    memcpy(xs, &x, sizeof xs);                                                            \
    RN_FAST_THEN_FULL(fast, fn##_impl, xs, ys, lanes, lanes);                             \
    fn##_##isa##_vector y;                                                                \
    memcpy(&y, ys, sizeof ys);                                                            \
    return y;                                                                             \
  }

#if defined(__AVX512F__)
#define RN_CLONE_E(fn, fast) RN_CLONE(e, 16, fn, fast)
#else
#define RN_CLONE_E(fn, fast)
#endif
#if defined(__AVX2__)
#define RN_CLONE_D(fn, fast) RN_CLONE(d, 8, fn, fast)
#else
#define RN_CLONE_D(fn, fast)
#endif
#if defined(__AVX__)
#define RN_CLONE_C(fn, fast) RN_CLONE(c, 8, fn, fast)
#else
#define RN_CLONE_C(fn, fast)
#endif

/* fn's variants for every ISA enabled here, each running `fast` with fn_impl behind it */
#define RN_CLONES(fn, fast) RN_CLONE(b, 4, fn, fast) RN_CLONE_C(fn, fast) RN_CLONE_D(fn, fast) RN_CLONE_E(fn, fast)
