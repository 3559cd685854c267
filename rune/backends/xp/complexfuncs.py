"""The complex-number primitives (rune/nx/complex.py) on an array module `xp`,
and rune's complex mul and div and its hypot (|z| is hypot(re, im)).

Complex mul, div and abs are rune's own rule, not the array module's loop (NumPy
uses FMA in some loops and not in others, its own SIMD hypot; CuPy has its own):
each is a fixed sequence of correctly rounded real operations on the parts,
written here with `xp`'s real ufuncs and, operation for operation, in C by
rune/codegen/complexc.py (the C and CUDA kernels), so eager, compiled and GPU
results are the same bits. Selects stand where the C text has them, never a
branch that would compute something else.

- mul: (a + bi)(c + di) = (ac - bd) + (ad + bc)i, each product and sum rounded
  on its own (no FMA). Infinities are not recovered from NaN results (no C99
  Annex G step): (inf + 0i)(1 + 0i) = inf + nan i, as NumPy and XLA give.
- div: NumPy's scalar loop (Smith's method): with |c| >= |d| (a NaN compares
  false) p, q = c, d, else d, c; rat = q / p, scl = 1 / (p + q rat); then
  re = (a + b rat) scl, im = (b - a rat) scl when |c| >= |d|, else
  re = (b + a rat) scl, im = (b rat - a) scl. A zero divisor gives
  (a / +0, b / +0): infinities or NaN.
- hypot (the `hypot` primitive, so nx.hypot and |z|): sqrt(x^2 + y^2) with x
  and y first scaled by a power of two chosen by their size (HYPOT_SCALES), so
  the squares neither overflow nor lose bits to underflow, and the root scaled
  back; an infinite operand gives +inf even beside a NaN (C99 hypot). Within
  2 ulp of the exact value. float16/bfloat16 compute in float32 and round once.
"""
import numpy as np

from ...base.numerics import HYPOT_SCALES


def _parts(z):
    return z.real, z.imag


def make_impls(xp):
    def rune_hypot(x, y):
        x, y = xp.abs(x), xp.abs(y)
        part = x.dtype
        big, down, small, up = (part.type(s) for s in HYPOT_SCALES[part])
        if xp is np:
            # NumPy reads are free: where every pair lies in the middle band (no
            # scaling, nothing infinite: the same bits) skip the selects
            m = np.maximum(x, y)
            if m.size == 0 or (m.min() >= small and m.max() <= big):
                return xp.asarray(xp.sqrt(x * x + y * y))
        one = part.type(1)
        large = (x > big) | (y > big)
        tiny = (x < small) & (y < small)
        s = xp.where(large, down, xp.where(tiny, up, one))
        back = xp.where(large, 1 / down, xp.where(tiny, 1 / up, one))
        xs, ys = x * s, y * s
        r = xp.sqrt(xs * xs + ys * ys) * back
        return xp.asarray(xp.where((x == np.inf) | (y == np.inf), part.type(np.inf), r), part)

    def make_complex(re, im):
        # parts set separately: re + im * 1j would turn an infinite im into nan + inf j
        out = xp.empty(np.broadcast_shapes(np.shape(re), np.shape(im)),
                       np.complex128 if re.dtype == np.float64 else np.complex64)
        out.real, out.imag = re, im
        return out

    def hypot(x, y):
        with np.errstate(all="ignore"):   # NumPy's warnings; CuPy has none
            dtype = x.dtype
            if dtype.itemsize == 2:   # float16 / bfloat16
                return rune_hypot(xp.asarray(x, np.float32), xp.asarray(y, np.float32)).astype(dtype)
            return rune_hypot(x, y)

    return {
        "hypot": hypot,
        "real": lambda x: xp.asarray(xp.real(x)),
        "imag": lambda x: xp.asarray(xp.imag(x)),
        "conj": lambda x: xp.asarray(xp.conj(x)),
        "complex": make_complex,
    }


def arithmetic(xp):
    """mul and div of complex operands by rune's rule (module docstring), on `xp`."""
    make = make_impls(xp)["complex"]
    where = xp.where

    def cmul(x, y):
        a, b = _parts(x)
        c, d = _parts(y)
        return make(a * c - b * d, a * d + b * c)

    def cdiv(x, y):
        a, b = _parts(x)
        c, d = _parts(y)
        ac, ad = xp.abs(c), xp.abs(d)
        first = ac >= ad
        p, q = where(first, c, d), where(first, d, c)
        u, v = where(first, a, b), where(first, b, a)
        rat = q / p
        scl = 1 / (p + q * rat)
        w = u * rat
        re = (u + v * rat) * scl
        im = where(first, v - w, w - v) * scl
        zero = (ac == 0) & (ad == 0)
        return make(where(zero, a / ac, re), where(zero, b / ac, im))

    return {"mul": cmul, "div": cdiv}
