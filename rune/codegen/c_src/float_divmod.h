// A template, instantiated per float type (rune/codegen/helpers.py): ${t} the C type
// (float, double), ${s} its libm suffix (f, ""), ${ln2} log 2 as its exact hex literal.
/* NumPy's npy_divmod: Python-signed floor division and remainder */
RN_FN ${t} rn_floordiv_${t}(${t} a, ${t} b) {
  if (!b) return a / b;
  ${t} mod = fmod${s}(a, b), div = (a - mod) / b, fl;
  if (mod) { if ((b < 0) != (mod < 0)) div -= 1; }
  if (div) { fl = floor${s}(div); if (div - fl > 0.5${s}) fl += 1; }
  else fl = copysign${s}((${t})0, a / b);
  return fl;
}
RN_FN ${t} rn_rem_${t}(${t} a, ${t} b) {
  ${t} mod = fmod${s}(a, b);
  if (!b) return mod;
  if (mod) { if ((b < 0) != (mod < 0)) mod += b; }
  else mod = copysign${s}((${t})0, b);
  return mod;
}
/* NumPy's npy_logaddexp: log(e^a + e^b) without overflow; equal operands (infinities
   of one sign included) give a + log 2, a NaN difference gives that NaN */
RN_FN ${t} rn_logaddexp_${t}(${t} a, ${t} b) {
  if (a == b) return a + ${ln2};
  const ${t} d = a - b;
  if (d > 0) return a + log1p${s}(exp${s}(-d));
  if (d <= 0) return b + log1p${s}(exp${s}(d));
  return d;
}
