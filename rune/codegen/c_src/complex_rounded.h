// RN_ROUNDED(x): a product kept rounded (GCC's assoc barrier), so no vectoriser fuses it
// into an fma (rune/codegen/complexc.py says why).
#if defined(__has_builtin)
#if __has_builtin(__builtin_assoc_barrier)
#define RN_ROUNDED(x) __builtin_assoc_barrier(x)
#endif
#endif
#ifndef RN_ROUNDED
#define RN_ROUNDED(x) (x)
#endif
