// The C dialect's prelude head (rune/codegen/c.py): headers and RN_FN.
// Lines starting with "// " at the top of a file here are notes, dropped when it is read
// (rune/codegen/helpers.py); every other byte is the kernels' text.
#include <stdint.h>
#include <string.h>
#include <math.h>
#define RN_FN static inline
