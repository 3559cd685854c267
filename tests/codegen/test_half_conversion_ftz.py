"""Eager conversions into float16/bfloat16 give the same bits under CuPy's flush to zero.

CuPy compiles every eager GPU kernel with -ftz=true: float32 subnormals are
flushed to signed zero wherever a float32 is an operand or a result, in
conversions too (cvt.rn.ftz.f32.f64, cvt.ftz.f64.f32). rune/backends/float_semantics.py
is written against an array module, so running it on NumPy arrays that flush
the same way shows on the host what a GPU would compute eagerly.
"""
import inspect
import math
import types
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from rune.backends import float_semantics as fs
from test_semantics import HALF_CASES, _half_bits, _half_source

F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
TINY = np.finfo(np.float32).tiny


class _Flushing(np.ndarray):
    """An ndarray whose float32 operands and results of ufuncs and conversions are
    flushed to signed zero, as CuPy's kernels do; `formed` counts the float32
    subnormals that met such an operation (each one a value the GPU would lose)."""
    formed = 0

    @classmethod
    def flush(cls, a):
        a = np.array(a, copy=True)
        if a.dtype == F32:
            sub = (a != 0) & (np.abs(a) < TINY)
            _Flushing.formed += int(np.count_nonzero(sub))
            a[sub] = np.copysign(np.float32(0), a[sub])
        return a

    def astype(self, dtype, *args, **kwargs):
        if np.dtype(dtype) == self.dtype:     # a copy of the bits (or none), no conversion
            return np.ndarray.astype(self, dtype, *args, **kwargs)
        out = self.flush(self.view(np.ndarray)).astype(dtype, *args, **kwargs)
        return self.flush(out).view(_Flushing)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [self.flush(i.view(np.ndarray)) if isinstance(i, np.ndarray) else i for i in inputs]
        out = getattr(ufunc, method)(*plain, **kwargs)
        if isinstance(out, tuple):
            return tuple(self.flush(o).view(_Flushing) if isinstance(o, np.ndarray) else o for o in out)
        return self.flush(out).view(_Flushing) if isinstance(out, np.ndarray) else out


def _flushing_numpy():
    """numpy whose functions return flushing arrays (ufuncs flush through the arrays)."""
    mod = types.SimpleNamespace()
    for name in dir(np):
        obj = getattr(np, name)
        if callable(obj) and not inspect.isclass(obj) and not isinstance(obj, np.ufunc):
            def wrapped(*a, _f=obj, **k):
                r = _f(*[x.view(np.ndarray) if isinstance(x, _Flushing) else x for x in a], **k)
                return _Flushing.flush(r).view(_Flushing) if isinstance(r, np.ndarray) else r
            setattr(mod, name, wrapped)
        else:
            setattr(mod, name, obj)
    mod.ndarray = np.ndarray
    return mod


XP = _flushing_numpy()


def _oracle(v, dst):
    """The bits of float `v` rounded once to `dst` (exact rational rounding; -0.0 keeps its sign)."""
    if v == 0:
        return 0x8000 if math.copysign(1, v) < 0 else 0
    return _half_bits(Fraction(v), dst)


def _bits(xp, x, dst):
    with np.errstate(all="ignore"):
        return np.asarray(fs.to_half(xp, x, dst)).view(np.uint16)


def _flushed_bits(x, dst):
    _Flushing.formed = 0
    bits = _bits(XP, np.asarray(x).view(_Flushing), dst)
    return bits, _Flushing.formed


def test_every_half_case_keeps_its_bits_when_float32_subnormals_flush():
    # 2**-134 + 2**-160 -> bfloat16 gave 0x0000 (expected 0x0001) before float64's
    # subnormal-float32 range was computed in float64 and integers
    for src, value, dst, bits in HALF_CASES:
        x = _half_source(src, value)
        got, _ = _flushed_bits(x, dst)
        assert got.tolist() == [bits], (src.name, value, dst.name, hex(bits), hex(int(got[0])))


def _around_float32_subnormals(rng, n):
    """float64 values of both signs from far below float32's subnormals to above its
    smallest normal, with long significands (so most round inexactly), and the
    steps of bfloat16's subnormals, their halfway points and neighbours."""
    exps = rng.uniform(-160, -120, n)
    random = np.ldexp(1 + rng.random(n), np.floor(exps).astype(int)) * rng.choice([-1, 1], n)
    steps = np.arange(0, 130) * 2.0 ** -133
    halves = steps + 2.0 ** -134
    exact = np.concatenate([steps, halves, np.nextafter(halves, 0), np.nextafter(halves, 1)])
    return np.concatenate([random, exact, -exact, [TINY, -TINY, np.nextafter(TINY, 0), 2.0 ** -149]])


@pytest.mark.parametrize("dst", [BF16, F16], ids=["bfloat16", "float16"])
def test_float64_near_float32_subnormals_rounds_once_and_forms_no_float32_subnormal(dst):
    x = _around_float32_subnormals(np.random.default_rng(7), 600)
    want = [_oracle(float(v), dst) for v in x]             # exact rational rounding
    assert _bits(np, x, dst).tolist() == want                           # unflushed (the host)
    got, formed = _flushed_bits(x, dst)
    assert got.tolist() == want                                         # flushed (eager GPU)
    assert formed == 0


@pytest.mark.parametrize("dst", [BF16, F16], ids=["bfloat16", "float16"])
def test_random_float64_of_every_magnitude_gives_the_same_bits_flushed_or_not(dst):
    rng = np.random.default_rng(11)
    x = np.ldexp(1 + rng.random(3000), rng.integers(-1074, 1024, 3000)) * rng.choice([-1, 1], 3000)
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324]])
    unflushed = _bits(np, x, dst)
    got, formed = _flushed_bits(x, dst)
    np.testing.assert_array_equal(got, unflushed)
    assert formed == 0
    finite = np.isfinite(x)
    sample = np.flatnonzero(finite)[::10]
    assert [int(b) for b in unflushed[sample]] == [_oracle(float(v), dst) for v in x[sample]]


@pytest.mark.parametrize("src", [F32, F16, BF16, np.dtype(np.int32), np.dtype(np.int64)],
                         ids=lambda d: d.name)
def test_other_sources_give_the_same_bits_flushed_or_not(src):
    """float32 inputs that are themselves subnormal lose nothing either: bfloat16 is
    taken from their bits, and float16 cannot hold them (they round to signed zero)."""
    rng = np.random.default_rng(3)
    if src.kind in "iu":
        x = rng.integers(np.iinfo(src).min, np.iinfo(src).max, 500, dtype=src, endpoint=True)
    else:
        info = np.finfo(F32 if src == BF16 else src)
        width = 8 * src.itemsize
        bits = np.concatenate([rng.integers(0, 2 ** width, 400, dtype=np.uint64),       # any value
                               rng.integers(1, 2 ** (width - 9), 100, dtype=np.uint64),  # subnormals
                               rng.integers(1, 2 ** (width - 9), 100, dtype=np.uint64) | 1 << (width - 1)])
        x = bits.astype(f"u{src.itemsize}").view(src)
        x = x[np.isfinite(x.astype(F64)) & (np.abs(x.astype(F64)) <= float(info.max))]
    for dst in (BF16, F16):
        if dst == src:
            continue
        got, _ = _flushed_bits(x, dst)
        np.testing.assert_array_equal(got, _bits(np, x, dst), err_msg=f"{src.name} -> {dst.name}")
        some = x[::6]
        assert got[::6].tolist() == [_half_bits(Fraction(int(v)), dst) if src.kind in "iu" else _oracle(float(v), dst)
                                     for v in some], f"{src.name} -> {dst.name}"
