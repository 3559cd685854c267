// The C dialect's prelude head (rune/codegen/c.py): headers and RN_FN.
// Lines starting with "// " at the top of a file here are notes, dropped when it is read
// (rune/codegen/helpers.py); every other byte is the kernels' text.
#include <stdint.h>
#include <string.h>
#include <math.h>
#define RN_FN static inline
/* A select of floats as a blend of their bits (the very bits of one arm). Written as
   `c ? a : b`, gcc makes a branch of it; in a loop that also calls a math function
   (a masked softmax's exp) it then cannot if-convert the loop, which stays scalar. */
RN_FN float rn_select_f32(int c, float a, float b) {
  uint32_t ua, ub, m = 0u - (uint32_t)(c != 0); memcpy(&ua, &a, 4); memcpy(&ub, &b, 4);
  ua = (ua & m) | (ub & ~m); memcpy(&a, &ua, 4); return a;
}
RN_FN double rn_select_f64(int c, double a, double b) {
  uint64_t ua, ub, m = 0u - (uint64_t)(c != 0); memcpy(&ua, &a, 8); memcpy(&ub, &b, 8);
  ua = (ua & m) | (ub & ~m); memcpy(&a, &ua, 8); return a;
}
