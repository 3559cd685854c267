// The C dialect's prelude head (rune/codegen/c.py): headers and RN_FN.
// Lines starting with "// " at the top of a file here are notes, dropped when it is read
// (rune/codegen/helpers.py); every other byte is the kernels' text.
// RN_MATH_FN: rune's math functions (rn_math.h) as SIMD clones, GCC's vector variants as
// libmvec's: a fused loop calls the clone on whole vectors. Inlined, a function with a
// table of hard cases kept gcc from vectorizing the loops it sat in (a GELU loop of 2**19
// floats: 61 ms inlined, 1.6 ms through the clone; the function alone in a loop: 1.45 ms).
// They are `const` (they read only their arguments and constant tables), so a call on
// loop-invariant values (Adam's pow(b1, step)) is computed once, not per element.
#include <stdint.h>
#include <string.h>
#include <math.h>
#define RN_FN static inline
#define RN_MATH_FN __attribute__((simd("notinbranch"), noinline, const)) static
