// A template, instantiated per complex type (rune/codegen/complexc.py `helpers`):
// ${s} the struct (rn_c64, rn_c128), ${t} its part type, ${sfx} the part's libm suffix,
// ${u} the part's bits as an unsigned type with ${absmask} and ${infbits}; ${big} ${down}
// ${small} ${up} ${down_back} ${up_back} hypot's scales (rune/base/numerics.py) and
// ${exp_t} ${exp_big} cexp's overflow threshold T and e^T, as exact literals.
/* c ? a : b by bit masks: GCC vectorises no loop with a branch, and it keeps ?:
   as one where an arm may trap (a division, -ftrapping-math) or holds a call */
RN_FN ${u} rn_bits_${t}(${t} a) { ${u} b; memcpy(&b, &a, sizeof b); return b; }
RN_FN ${t} rn_pick_${t}(int c, ${t} a, ${t} b) {   /* c ? a : b, without a branch */
  const ${u} m = (${u})0 - (${u})(c != 0), r = (rn_bits_${t}(a) & m) | (rn_bits_${t}(b) & ~m);
  ${t} out; memcpy(&out, &r, sizeof out); return out;
}
/* rune's hypot (the `hypot` primitive; |z| is hypot(re, im)): complexfuncs.py */
RN_FN ${t} rn_hypot_${t}(${t} x, ${t} y) {
  x = fabs${sfx}(x); y = fabs${sfx}(y);
  const int large = (x > ${big}) | (y > ${big}), tiny = (x < ${small}) & (y < ${small});   /* | &: no branch */
  const ${t} k = rn_pick_${t}(large, ${down}, rn_pick_${t}(tiny, ${up}, 1));
  const ${t} back = rn_pick_${t}(large, ${down_back}, rn_pick_${t}(tiny, ${up_back}, 1));
  const ${t} xs = x * k, ys = y * k, r = sqrt${sfx}(RN_ROUNDED(xs * xs) + RN_ROUNDED(ys * ys)) * back;
  return rn_pick_${t}((x == (${t})INFINITY) | (y == (${t})INFINITY), (${t})INFINITY, r);
}
typedef struct { ${t} re, im; } ${s};
RN_FN ${s} ${s}_make(${t} re, ${t} im) { ${s} z; z.re = re; z.im = im; return z; }
RN_FN ${s} ${s}_add(${s} a, ${s} b) { return ${s}_make(a.re + b.re, a.im + b.im); }
RN_FN ${s} ${s}_sub(${s} a, ${s} b) { return ${s}_make(a.re - b.re, a.im - b.im); }
RN_FN ${s} ${s}_neg(${s} a) { return ${s}_make(-a.re, -a.im); }
RN_FN ${s} ${s}_conj(${s} a) { return ${s}_make(a.re, -a.im); }
RN_FN int ${s}_eq(${s} a, ${s} b) { return a.re == b.re && a.im == b.im; }
RN_FN int ${s}_ne(${s} a, ${s} b) { return a.re != b.re || a.im != b.im; }
/* rune's complex mul and div (complexfuncs.py has the rule and eager's same
   sequence, its selects these rn_picks) */
RN_FN ${s} ${s}_mul(${s} a, ${s} b) {
  return ${s}_make(RN_ROUNDED(a.re * b.re) - RN_ROUNDED(a.im * b.im),
                 RN_ROUNDED(a.re * b.im) + RN_ROUNDED(a.im * b.re));
}
RN_FN ${s} ${s}_div(${s} a, ${s} b) {
  const ${t} ac = fabs${sfx}(b.re), ad = fabs${sfx}(b.im);
  const int first = ac >= ad;
  const ${t} p = rn_pick_${t}(first, b.re, b.im), q = rn_pick_${t}(first, b.im, b.re);
  const ${t} u = rn_pick_${t}(first, a.re, a.im), v = rn_pick_${t}(first, a.im, a.re);
  const ${t} rat = q / p, scl = (${t})1 / (p + RN_ROUNDED(q * rat)), w = RN_ROUNDED(u * rat);
  const ${t} re = (u + RN_ROUNDED(v * rat)) * scl, im = rn_pick_${t}(first, v - w, w - v) * scl;
  const int zero = (ac == 0) & (ad == 0);
  return ${s}_make(rn_pick_${t}(zero, a.re / ac, re), rn_pick_${t}(zero, a.im / ac, im));
}
/* exp(x + iy) = e^x cos y + i e^x sin y, as glibc's cexp (NumPy's): e^(x - T) (e^T cos y)
   where e^x alone would overflow, an imaginary zero kept (also beside an infinite or
   NaN x), and C99's values for an infinite x beside an infinite or NaN y (sin and
   cos of a zero of y's sign give them). The tests read the bits (isinf would be
   a branch beside the calls, as would ?:) and the choices are rn_picks. The libm
   calls are the kernels' (vector variants in C, CUDA's): within a few ulp of
   eager, as the real exp; the special values are eager's. */
RN_FN ${s} ${s}_exp(${s} z) {
  const ${t} x = z.re, y = z.im;
  const ${u} ax = rn_bits_${t}(x) & ${absmask}, ay = rn_bits_${t}(y) & ${absmask};
  const int big = x > ${exp_t}, edge = (ax == ${infbits}) & (ay >= ${infbits});
  const ${t} yy = rn_pick_${t}(edge, copysign${sfx}((${t})0, y), y);
  const ${t} e = exp${sfx}(x - rn_pick_${t}(big, ${exp_t}, 0)), g = rn_pick_${t}(big, ${exp_big}, 1);
  const ${t} c = cos${sfx}(yy), sn = sin${sfx}(yy);
  return ${s}_make(e * (c * g), rn_pick_${t}(y == 0, 1, e) * (sn * g));
}
