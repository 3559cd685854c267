"""The op table: every public `nx` function, with a NumPy/SciPy reference and sample arguments.

One entry (`OpCase`) per function. Other test files reuse the same table:
`nx/test_ops.py` checks eager results against the reference; gradient, jit and
vmap tests can walk the same entries (`grad`, `diff_argnums`, `domain`,
`draw`) instead of writing tests op by op.

Conventions
- `case.fn(*args, **kwargs)` is the rune call, `case.ref(*args, **kwargs)`
  the NumPy one. `Sample.args` holds NumPy arrays (convert each with
  `nx.asarray`; NumPy arrays keep their dtype, so they are *strong* operands)
  or Python scalars (pass them unchanged: they are rune's *weak* literals).
  `Sample.kwargs` are static Python values (axes, shapes, index expressions).
- An index expression may hold `Arg(k)`: "positional argument k of this
  sample", so integer-array indices are real (traceable, batchable) arguments.
- `grad`: the op is differentiable in `diff_argnums` at the sample points
  (the samples keep away from kinks, ties and discontinuities: see `domain`;
  tests/transforms/test_ties.py checks derivatives exactly at ties and kinks).
  Piecewise-constant ops (floor, sign, ...) are marked differentiable with a
  zero derivative, as in JAX; finite differences away from their jumps are 0.
- `domain` names how float (and int) inputs are drawn (`DOMAINS`); use
  `draw(rng, shape, dtype, domain)` to make more inputs (e.g. vmap batches).
- `Sample.bug`: a known rune bug on this sample (the eager test marks it
  strict-xfail; other suites should skip such samples). `Sample.fd` is False
  where finite differences do not apply (a sample on a jump, a kink such as
  std of one element, or with infinities).
- Result dtypes follow NumPy 2 except where rune documents otherwise; see
  `expected_dtype` and each case's `dtype_note`.

Everything is deterministic: each case draws from `np.random.default_rng`
seeded by the crc32 of its name, so adding a case does not move the others.
"""
import dataclasses
import math
import warnings
import zlib
from typing import Any, Callable, Optional

import ml_dtypes
import numpy as np
import scipy.special

import rune
from rune import nn, nx

# ---------------------------------------------------------------- dtypes

BOOL = np.dtype(np.bool_)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U16, U32, U64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
BF16 = np.dtype(ml_dtypes.bfloat16)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)

SIGNED = (I8, I16, I32, I64)
UNSIGNED = (U8, U16, U32, U64)
INTS = SIGNED + UNSIGNED
FLOATS = (F32, F64)
LOW_FLOATS = (F16, BF16)
ALL_DTYPES = (BOOL,) + INTS + LOW_FLOATS + FLOATS

SHORT = {BOOL: "b", I8: "i8", I16: "i16", I32: "i32", I64: "i64", U8: "u8", U16: "u16",
         U32: "u32", U64: "u64", F16: "f16", BF16: "bf16", F32: "f32", F64: "f64", C64: "c64", C128: "c128"}


def is_float(d):
    d = np.dtype(d)
    return d.kind == "f" or d == BF16


def is_int(d):
    return np.dtype(d).kind in "iu"


def is_inexact(d):
    """Float or complex: compared with a tolerance."""
    return is_float(d) or np.dtype(d).kind == "c"


def widest(d):
    """The dtype results of dtype `d` are compared in (complex128 for complex, float64 for floats)."""
    return C128 if np.dtype(d).kind == "c" else F64


def is_precise(d):
    """float64 or complex128: the samples whose derivatives finite differences check."""
    return np.dtype(d) in (F64, C128)


# Tolerances (rtol, atol) by result dtype; integer and bool results are exact.
TOL = {F16: (2e-3, 2e-3), BF16: (1.6e-2, 1.6e-2), F32: (1e-5, 1e-6), F64: (1e-12, 1e-12),
       C64: (1e-5, 1e-6), C128: (1e-12, 1e-12)}


# ---------------------------------------------------------------- table entries

@dataclasses.dataclass(frozen=True)
class Arg:
    """Inside an index expression: positional argument `index` of the sample."""
    index: int


@dataclasses.dataclass
class Sample:
    args: tuple
    kwargs: dict
    id: str
    bug: Optional[str] = None
    fd: bool = True    # finite differences apply here (False: on a kink, a jump or at infinities)


@dataclasses.dataclass
class OpCase:
    name: str
    fn: Callable
    ref: Callable
    samples: list
    grad: bool = False
    diff_argnums: tuple = (0,)
    domain: Any = "real"
    dtype_rule: Optional[Callable] = None   # (sample, numpy_dtype) -> rune's dtype
    dtype_note: str = ""
    tol: Optional[dict] = None              # dtype -> (rtol, atol), overriding TOL
    note: str = ""
    traced: bool = True                     # False: a data-dependent shape (eager only; jit raises)

    def tolerance(self, dtype):
        table = dict(TOL)
        table.update(self.tol or {})
        return table[np.dtype(dtype)]


def _describe(a):
    if isinstance(a, (np.ndarray, np.generic)):
        return f"{SHORT[a.dtype]}{list(a.shape)}".replace(" ", "")
    return f"py{a!r}"


def _short(v):
    if isinstance(v, Arg):
        return f"a{v.index}"
    if isinstance(v, slice):
        return ":".join("" if p is None else str(p) for p in (v.start, v.stop, v.step))
    if v is Ellipsis:
        return "..."
    if v is None:
        return "None"
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(_short(e) for e in v) + ")"
    if isinstance(v, np.dtype):
        return SHORT[v]
    return str(v)


def S(*args, bug=None, fd=True, **kwargs):
    """A sample; its id describes the arguments (shapes, dtypes, static values)."""
    parts = [_describe(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()]
    return Sample(tuple(args), kwargs, "-".join(parts).replace(" ", ""), bug, fd)


def _uniquify(samples):
    seen = {}
    for s in samples:
        n = seen.get(s.id, 0)
        seen[s.id] = n + 1
        if n:
            s.id = f"{s.id}#{n}"
    return samples


# ---------------------------------------------------------------- drawing inputs

def _float_nonzero(rng, shape):
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 3.0, size=shape)


def _float_frac(rng, shape):
    # Away from integers and from halves: floor/ceil/round are constant nearby.
    whole = rng.integers(-3, 4, size=shape)
    frac = rng.uniform(0.1, 0.4, size=shape) + rng.choice([0.0, 0.5], size=shape)
    return whole + frac


def _float_special(rng, shape):
    x = rng.standard_normal(size=shape)
    flat = x.reshape(-1)
    specials = [np.nan, np.inf, -np.inf]
    for i in range(0, flat.size, 3):
        flat[i] = specials[(i // 3) % 3]
    return flat.reshape(shape)


FLOAT_DOMAINS = {
    "real": lambda rng, shape: rng.standard_normal(size=shape),
    "positive": lambda rng, shape: rng.uniform(0.5, 3.0, size=shape),
    "unit": lambda rng, shape: rng.uniform(-0.9, 0.9, size=shape),
    "small": lambda rng, shape: rng.uniform(-2.0, 2.0, size=shape),
    "angle": lambda rng, shape: rng.uniform(-1.2, 1.2, size=shape),
    "nonzero": _float_nonzero,
    "frac": _float_frac,
    "special": _float_special,
}


def _int_range(domain, d):
    info = np.iinfo(d)
    table = {"real": (-20, 20), "positive": (1, 10), "unit": (-1, 1), "small": (0, 3),
             "angle": (-1, 1), "frac": (-3, 3), "special": (-20, 20), "shift": (0, 7),
             "nonzero": (1, 10), "above1": (2, 10)}
    lo, hi = table[domain]
    return max(lo, info.min, 0 if d.kind == "u" else info.min), min(hi, info.max)


DOMAINS = tuple(FLOAT_DOMAINS) + ("shift",)


def draw(rng, shape, dtype, domain="real"):
    """A NumPy array of `shape` and `dtype` with values from `domain`."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype == BOOL:
        return np.asarray(rng.random(size=shape) < 0.5)
    if dtype.kind in "iu":
        lo, hi = _int_range(domain, dtype)
        out = rng.integers(lo, hi, size=shape, endpoint=True)
        if domain == "nonzero" and dtype.kind == "i":
            out = out * rng.choice([-1, 1], size=shape)
        return np.asarray(out).astype(dtype)
    fn = FLOAT_DOMAINS["real" if domain == "shift" else domain]
    if dtype.kind == "c":   # the domain's values, turned off the real axis by a small imaginary part
        return np.asarray(np.asarray(fn(rng, shape)) + 1j * rng.uniform(-0.5, 0.5, size=shape)).astype(dtype)
    return np.asarray(fn(rng, shape)).astype(dtype)


def weak(rng, kind, domain="real", like=I8):
    """A Python scalar (rune's weak literal) of `kind` (float, int or bool) from `domain`.

    Ints are drawn inside the range of `like` (the dtype of the array they meet):
    a literal that does not fit raises, in NumPy as in rune.
    """
    if kind is bool:
        return bool(rng.random() < 0.5)
    if kind is int:
        return int(draw(rng, (), like if is_int(like) else I8, domain))
    return round(float(draw(rng, (), F64, domain)), 3) or 0.5


def _rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


# ---------------------------------------------------------------- dtype rules

def _strong(args):
    return [a for a in args if isinstance(a, (np.ndarray, np.generic))]


def _strong_dtypes(sample):
    arrays = _strong(sample.args)
    for v in sample.kwargs.values():  # arrays inside index expressions
        if isinstance(v, (np.ndarray, np.generic)):
            arrays.append(v)
    return [a.dtype for a in arrays]


def ints_float(dtypes):
    """The float rune computes bool and int operands in (README's promotion table):
    float32 when they join to bool or an 8/16-bit int (or there are none: Python
    numbers alone), float64 from 32 bits up (NumPy: float64 for all, float16 for
    exp of int8)."""
    joined = np.result_type(*dtypes) if dtypes else BOOL
    return F32 if joined.kind == "b" or (joined.kind in "iu" and joined.itemsize <= 2) else F64


def numpy_rule(sample, np_dtype):
    """NumPy's dtype, with rune's defaults where no strong operand fixes the kind.

    rune: a float (or complex) result with no float array among the operands is
    the ints' float (`ints_float`: float ops on ints, float Python scalars meeting
    int arrays, means of ints); an int result with no int array among them (bool
    array + Python int) is int32.
    """
    np_dtype = np.dtype(np_dtype)
    strong = _strong_dtypes(sample)
    if np_dtype.kind in "fc" and not any(is_inexact(d) for d in strong):
        ints = ints_float(strong)
        return ints if np_dtype.kind == "f" else (C64 if ints == F32 else C128)
    if np_dtype.kind in "iu" and not any(d.kind in "iu" or is_float(d) for d in strong):
        return I32
    return np_dtype


def float_rule(sample, np_dtype):
    """A float op: float inputs keep their dtype, anything else gives the ints' float."""
    d = sample.args[0].dtype if isinstance(sample.args[0], np.ndarray) else None
    return d if d is not None and is_float(d) else ints_float([] if d is None else [d])


def accumulate_rule(sample, np_dtype):
    """sum/prod: bool and narrow ints accumulate in int32; other dtypes keep theirs."""
    d = sample.args[0].dtype
    return {BOOL: I32, I8: I32, I16: I32, U8: U32, U16: U32}.get(d, d)


def product_rule(sample, np_dtype):
    """matmul and friends: NumPy's, except that bfloat16 operands give bfloat16
    (NumPy's bfloat16 matmul returns float32; rune, like JAX, keeps the dtype)."""
    strong = _strong_dtypes(sample)
    if strong and all(d == BF16 for d in strong):
        return BF16
    return numpy_rule(sample, np_dtype)


PRODUCT_NOTE = "bfloat16 products stay bfloat16 (NumPy: float32)"


def index_rule(sample, np_dtype):
    return I32


ACCUMULATE_NOTE = ("NumPy sums ints in int64/uint64; rune follows the standard: bool/int8/int16 sum "
                   "in int32, uint8/uint16 in uint32, every other dtype keeps its own")


# ---------------------------------------------------------------- references

def _errstate(fn):
    def run(*args, **kwargs):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args, **kwargs)
    return run


def _float_like(x):
    d = np.asarray(x).dtype
    return d if is_float(d) else F64


def _in_f64(fn):
    """Reference computed in float64, returned in the operand's float dtype (float64 for ints)."""
    def run(x, *args, **kwargs):
        out = fn(np.asarray(x, F64), *args, **kwargs)
        return np.asarray(out).astype(_float_like(x))
    return run


def _round_half_even(x):
    return np.round(np.asarray(x, F64)).astype(x.dtype) if is_float(x.dtype) else np.round(x)


def _fill(idx, args):
    """An index expression with each `Arg(k)` replaced by args[k]."""
    if isinstance(idx, Arg):
        return args[idx.index]
    if isinstance(idx, tuple):
        return tuple(_fill(i, args) for i in idx)
    return idx


def _np_dynamic_starts(shape, starts, sizes):
    # lax.dynamic_slice semantics: a negative start counts from the end (JAX's
    # allow_negative_indices), then each start is clamped so the slice fits.
    return tuple(int(min(max(int(s) + d if int(s) < 0 else int(s), 0), d - z))
                 for s, d, z in zip(starts, shape, sizes))


def _np_dynamic_slice(x, *starts, sizes):
    st = _np_dynamic_starts(x.shape, starts, sizes)
    return x[tuple(slice(s, s + z) for s, z in zip(st, sizes))]


def _np_dynamic_update_slice(x, update, *starts):
    st = _np_dynamic_starts(x.shape, starts, update.shape)
    out = x.copy()
    out[tuple(slice(s, s + z) for s, z in zip(st, update.shape))] = update.astype(x.dtype)
    return out


def _np_at(x, values, *arrays, idx, mode):
    out = x.copy()
    index = _fill(idx, (x, values) + arrays)
    values = np.asarray(values).astype(x.dtype)
    if mode == "set":
        out[index] = values
    else:  # every update combines, repeated indices included (ufunc.at)
        {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}[mode].at(
            out, index, values)
    return out


def _nx_at(x, values, *arrays, idx, mode):
    return getattr(x.at[_fill(idx, (x, values) + arrays)], mode)(values)


def _einsum_any(spec, *operands):
    """np.einsum, which has no bfloat16 loop: bfloat16 operands go through float64."""
    if any(o.dtype == BF16 for o in operands):
        return np.einsum(spec, *(o.astype(F64) for o in operands)).astype(BF16)
    return np.einsum(spec, *operands)


def _np_dot_general(x, y, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    letters = iter("abcdefghijklmnop")
    xs = [next(letters) for _ in range(x.ndim)]
    ys = [next(letters) for _ in range(y.ndim)]
    for a, b in zip(lc + lb, rc + rb):
        ys[b] = xs[a]
    batch = [xs[a] for a in lb]
    out = batch + [xs[i] for i in range(x.ndim) if i not in lc and i not in lb] + \
        [ys[i] for i in range(y.ndim) if i not in rc and i not in rb]
    return _einsum_any(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y)


# ---------------------------------------------------------------- sample generators

SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4)]
PAIRS = [((), ()), ((5,), ()), ((), (5,)), ((3, 4), (3, 4)), ((3, 1), (1, 4)),
         ((4,), (2, 3, 4)), ((2, 1, 4), (3, 1)), ((0, 3), (3,)), ((0,), (1,))]


def unary(name, domain, dtypes=FLOATS, extra=(I32, U8, BOOL, F16, BF16)):
    rng = _rng(name)
    out = [S(draw(rng, s, d, domain)) for d in dtypes for s in SHAPES]
    out += [S(draw(rng, (3, 4), d, domain)) for d in extra]
    return out


def binary(name, domains=("real", "real"), dtypes=(F32, F64, I32), mixed=(), low=(F16, BF16),
           weak_kinds=(float, int), weak_dtypes=(F32, I8, I32, F16, U8), pairs=PAIRS):
    """Broadcasting pairs per dtype, mixed-dtype pairs, low floats, and weak Python scalars."""
    rng = _rng(name)
    dx, dy = domains
    out = []
    for d in dtypes:
        for sx, sy in pairs:
            out.append(S(draw(rng, sx, d, dx), draw(rng, sy, d, dy)))
    for a, b in mixed:
        out.append(S(draw(rng, (3, 4), a, dx), draw(rng, (4,), b, dy)))
    for d in low:
        out.append(S(draw(rng, (3, 4), d, dx), draw(rng, (3, 4), d, dy)))
    for kind in weak_kinds:
        for d in weak_dtypes:
            out.append(S(draw(rng, (3,), d, dx), weak(rng, kind, dy, like=d)))
            out.append(S(weak(rng, kind, dx, like=d), draw(rng, (3,), d, dy)))
    return out


MIXED_NUM = ((I8, I16), (I8, U8), (U8, I32), (I32, F32), (I64, F64), (F32, F64), (BOOL, I8),
             (BOOL, F32), (U32, I32), (I16, F16), (F16, F32), (U8, U16))
MIXED_INT = ((I8, I16), (I8, U8), (U8, I32), (BOOL, I8), (U32, I32), (U8, U16), (I64, I32))

REDUCE_AXES = [((), None), ((5,), None), ((5,), 0), ((5,), -1), ((3, 4), None), ((3, 4), 0),
               ((3, 4), 1), ((3, 4), (0, 1)), ((3, 4), (-1, 0)), ((2, 3, 4), (0, 2)),
               ((2, 3, 4), -2), ((0, 3), 0), ((0, 3), 1), ((0, 3), None)]


def _empty_reduced(shape, axis):
    axes = range(len(shape)) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    return any(shape[a] == 0 for a in axes)


def reduction(name, dtypes=(F32, F64, I32), extra=(), domain="real", empty=True, empty_bug=None,
              axes=REDUCE_AXES, fd_scalars=True, **kwargs):
    rng = _rng(name)
    out = []
    for d in dtypes:
        for shape, axis in axes:
            if _empty_reduced(shape, axis) and not empty:
                continue
            bug = empty_bug if _empty_reduced(shape, axis) else None
            fd = fd_scalars or math.prod(shape[a] for a in (range(len(shape)) if axis is None else
                                                            ((axis,) if isinstance(axis, int) else axis))) > 1
            for keepdims in (False, True):
                out.append(S(draw(rng, shape, d, domain), axis=axis, keepdims=keepdims, bug=bug, fd=fd, **kwargs))
    for d in extra:
        out.append(S(draw(rng, (3, 4), d, domain), axis=1, keepdims=False, **kwargs))
        out.append(S(draw(rng, (3, 4), d, domain), axis=None, keepdims=False, **kwargs))
    return out


# ---------------------------------------------------------------- the table

TABLE = []


def case(name, fn, ref, samples, **kw):
    TABLE.append(OpCase(name, fn, ref, _uniquify(samples), **kw))


# -- elementwise float math: result is a float; ints and bools compute in their float (`ints_float`)

def _float_unary(name, fn, ref, domain, grad=True, rule=numpy_rule, note=""):
    case(name, fn, _errstate(ref), unary(name, domain), grad=grad, domain=domain, dtype_rule=rule,
         dtype_note=note or "float op: bool/8/16-bit int inputs give float32 (NumPy: float16)")


_float_unary("exp", nx.exp, np.exp, "small")
_float_unary("log", nx.log, np.log, "positive")
_float_unary("log1p", nx.log1p, np.log1p, "positive")
_float_unary("expm1", nx.expm1, np.expm1, "small")
_float_unary("sqrt", nx.sqrt, np.sqrt, "positive")
_float_unary("rsqrt", nx.rsqrt, lambda x: 1 / np.sqrt(x), "positive")
_float_unary("sin", nx.sin, np.sin, "real")
_float_unary("cos", nx.cos, np.cos, "real")
_float_unary("tan", nx.tan, np.tan, "angle")
_float_unary("tanh", nx.tanh, np.tanh, "real")
_float_unary("sinh", nx.sinh, np.sinh, "small")
_float_unary("cosh", nx.cosh, np.cosh, "small")
_float_unary("asin", nx.asin, np.arcsin, "unit")
_float_unary("acos", nx.acos, np.arccos, "unit")
_float_unary("atan", nx.atan, np.arctan, "real")
_float_unary("erf", nx.erf, _in_f64(np.vectorize(math.erf, otypes=[F64])), "real")
_float_unary("sigmoid", nx.sigmoid, _in_f64(lambda x: 1 / (1 + np.exp(-x))), "real")
_float_unary("floor", nx.floor, np.floor, "frac", note="ints and bools keep their dtype (the standard's rule)")
_float_unary("ceil", nx.ceil, np.ceil, "frac", note="ints and bools keep their dtype (the standard's rule)")
# Halves round to even, as np.round and jnp.round (and CUDA's rint) do.
case("round", nx.round, _round_half_even,
     unary("round", "frac", extra=(F16, I32, U8)) +
     [S(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], d), fd=False) for d in (F32, F64)],
     grad=True, domain="frac", dtype_note="ints keep their dtype (the standard's rule)",
     note="halves round to even, as in NumPy and JAX")
case("isnan", nx.isnan, np.isnan, unary("isnan", "special", extra=(I32, BOOL, F16, BF16)),
     domain="special")
case("isfinite", nx.isfinite, np.isfinite, unary("isfinite", "special", extra=(I32, BOOL, F16, BF16)),
     domain="special")

# -- elementwise on any numeric dtype

_ALL_BUT_BOOL = INTS + LOW_FLOATS + FLOATS


def _any_unary_samples(name, domain, dtypes):
    rng = _rng(name)
    out = [S(draw(rng, s, d, domain)) for d in FLOATS for s in SHAPES]
    out += [S(draw(rng, (3, 4), d, domain)) for d in dtypes if d not in FLOATS]
    return out


case("negative", nx.negative, np.negative, _any_unary_samples("negative", "real", _ALL_BUT_BOOL),
     grad=True)
case("abs", nx.abs, np.abs, _any_unary_samples("abs", "nonzero", ALL_DTYPES), grad=True,
     domain="nonzero")
case("sign", nx.sign, np.sign, _any_unary_samples("sign", "nonzero", _ALL_BUT_BOOL), grad=True,
     domain="nonzero")
case("square", nx.square, np.square, _any_unary_samples("square", "real", _ALL_BUT_BOOL), grad=True)
case("reciprocal", nx.reciprocal, _errstate(lambda x: 1 / x),
     _any_unary_samples("reciprocal", "nonzero", (I32, I8, F16, BF16)), grad=True, domain="nonzero",
     dtype_rule=numpy_rule, dtype_note="true division: int8 gives float32 (np.reciprocal divides integers)")
case("stop_gradient", nx.stop_gradient, lambda x: x,
     _any_unary_samples("stop_gradient", "real", (I32, BOOL)),
     note="identity value; its derivative is zero (finite differences do not apply)")
case("invert", nx.invert, np.invert,
     [S(draw(_rng("invert"), s, d)) for d in (BOOL,) + INTS for s in ((3, 4),)] +
     [S(draw(_rng("invert"), s, I32)) for s in SHAPES])

# -- binary arithmetic

case("add", nx.add, np.add, binary("add", mixed=MIXED_NUM), grad=True, diff_argnums=(0, 1))
case("subtract", nx.subtract, np.subtract, binary("subtract", mixed=MIXED_NUM), grad=True,
     diff_argnums=(0, 1))
case("multiply", nx.multiply, np.multiply, binary("multiply", mixed=MIXED_NUM), grad=True,
     diff_argnums=(0, 1))
case("divide", nx.divide, _errstate(np.true_divide),
     binary("divide", ("real", "nonzero"), mixed=MIXED_NUM), grad=True, diff_argnums=(0, 1),
     domain=("real", "nonzero"), dtype_note="8/16-bit int / int is float32 (NumPy: float64)")
_NO_BOOL = tuple((a, b) for a, b in MIXED_NUM if BOOL not in (a, b))
case("floor_divide", nx.floor_divide, _errstate(np.floor_divide),
     binary("floor_divide", ("real", "nonzero"), mixed=_NO_BOOL), grad=True, diff_argnums=(0, 1),
     domain=("real", "nonzero"), note="derivative zero (piecewise constant)")
case("remainder", nx.remainder, _errstate(np.remainder),
     binary("remainder", ("real", "nonzero"), mixed=_NO_BOOL), grad=True, diff_argnums=(0, 1),
     domain=("real", "nonzero"))
case("power", nx.power, _errstate(np.power),
     binary("power", ("positive", "small"), mixed=tuple((a, b) for a, b in _NO_BOOL if is_float(b) or
                                                        (is_int(a) and is_int(b)))),
     grad=True, diff_argnums=(0, 1), domain=("positive", "small"),
     note="float base kept positive; integer exponents kept non-negative")
case("maximum", nx.maximum, np.maximum, binary("maximum", mixed=MIXED_NUM), grad=True,
     diff_argnums=(0, 1), note="float samples have no ties")
case("minimum", nx.minimum, np.minimum, binary("minimum", mixed=MIXED_NUM), grad=True,
     diff_argnums=(0, 1), note="float samples have no ties")
case("atan2", nx.atan2, np.arctan2, binary("atan2", ("nonzero", "nonzero"), mixed=MIXED_NUM),
     grad=True, diff_argnums=(0, 1), domain=("nonzero", "nonzero"),
     dtype_note="8/16-bit ints give float32 (NumPy: float64)")

# -- comparisons and logical ops: bool results

for _name, _fn, _ref in (("equal", nx.equal, np.equal), ("not_equal", nx.not_equal, np.not_equal),
                         ("less", nx.less, np.less), ("less_equal", nx.less_equal, np.less_equal),
                         ("greater", nx.greater, np.greater),
                         ("greater_equal", nx.greater_equal, np.greater_equal)):
    # Small ints so that equal elements occur and == / <= are exercised.
    case(_name, _fn, _ref, binary(_name, ("small", "small"), dtypes=(F32, I32, BOOL), mixed=MIXED_NUM,
                                  weak_kinds=(float, int, bool)), domain=("small", "small"))
    _samples = TABLE[-1].samples
    _samples.append(S(np.array([1.0, np.nan, np.inf, -np.inf], F32), np.array([1.0, np.nan, np.inf, 0], F32)))

for _name, _fn, _ref in (("logical_and", nx.logical_and, np.logical_and),
                         ("logical_or", nx.logical_or, np.logical_or),
                         ("logical_xor", nx.logical_xor, np.logical_xor)):
    case(_name, _fn, _ref, binary(_name, ("small", "small"), dtypes=(BOOL, I32, F32), mixed=MIXED_NUM,
                                  weak_kinds=(bool, int)), domain=("small", "small"))
case("logical_not", nx.logical_not, np.logical_not,
     [S(draw(_rng("logical_not"), s, d, "small")) for d in (BOOL, I32, F32) for s in SHAPES])

# -- bitwise ops: bool and integers

for _name, _fn, _ref in (("bitwise_and", nx.bitwise_and, np.bitwise_and),
                         ("bitwise_or", nx.bitwise_or, np.bitwise_or),
                         ("bitwise_xor", nx.bitwise_xor, np.bitwise_xor)):
    case(_name, _fn, _ref, binary(_name, dtypes=(I32, BOOL, U8, I64), mixed=MIXED_INT, low=(),
                                  weak_kinds=(int, bool), weak_dtypes=(I8, I32, U8, BOOL)))
for _name, _fn, _ref in (("left_shift", nx.left_shift, np.left_shift),
                         ("right_shift", nx.right_shift, np.right_shift)):
    case(_name, _fn, _ref, binary(_name, ("real", "shift"), dtypes=(I32, U8, I64, I8),
                                  mixed=tuple(p for p in MIXED_INT if BOOL not in p), low=(),
                                  weak_kinds=()), domain=("real", "shift"),
         note="shift amounts stay below the bit width (larger shifts are implementation-defined)")

# -- where, clip, astype


def _where_samples():
    rng = _rng("where")
    out = []
    for sc, sx, sy in [((), (), ()), ((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), (4,)),
                       ((2, 3, 4), (4,), ()), ((0, 3), (3,), (1, 3)), ((5,), (5,), (5,))]:
        for d in (F32, F64, I32):
            out.append(S(draw(rng, sc, BOOL), draw(rng, sx, d), draw(rng, sy, d)))
    out.append(S(draw(rng, (5,), I32, "small"), draw(rng, (5,), F32), draw(rng, (5,), F32)))
    out.append(S(draw(rng, (5,), BOOL), draw(rng, (5,), I8), draw(rng, (5,), F32)))
    out.append(S(draw(rng, (5,), BOOL), draw(rng, (5,), F32), 0.5))
    out.append(S(draw(rng, (5,), BOOL), 2, draw(rng, (5,), I8)))
    out.append(S(draw(rng, (5,), BOOL), draw(rng, (5,), I32), 1.5))
    out.append(S(draw(rng, (5,), BOOL), 1.0, 0.0))
    out.append(S(draw(rng, (5,), BOOL), 1.0, 0))
    out.append(S(draw(rng, (5,), BOOL), 1, True))
    return out


case("where", nx.where, np.where, _where_samples(), grad=True, diff_argnums=(1, 2))


def _clip_samples():
    rng = _rng("clip")
    out = []
    for d in FLOATS:
        for s in SHAPES:
            out.append(S(draw(rng, s, d), -0.5, 0.5))
    out.append(S(draw(rng, (3, 4), F32), draw(rng, (4,), F32, "unit") - 1.0, draw(rng, (3, 1), F32, "unit") + 1.0))
    out.append(S(draw(rng, (3, 4), I32), -5, 5))
    out.append(S(draw(rng, (3, 4), U8), 3, 30))
    out.append(S(draw(rng, (3, 4), I32), 0.5, 5.5))
    out.append(S(draw(rng, (3, 4), F16), -0.5, 0.5))
    out.append(S(draw(rng, (3, 4), F32), min=-0.5))
    out.append(S(draw(rng, (3, 4), F32), max=0.5))
    out.append(S(draw(rng, (3, 4), I32), min=0))
    return out


def _np_clip(x, lo=None, hi=None, min=None, max=None):
    lo = min if lo is None else lo
    hi = max if hi is None else hi
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


case("clip", nx.clip, _np_clip, _clip_samples(), grad=True, diff_argnums=(0,),
     note="float samples avoid the bounds (|x| == 0.5 has probability zero)")


def _astype_samples():
    rng = _rng("astype")
    out = []
    for src in ALL_DTYPES:
        for dst in ALL_DTYPES:
            # Values every dtype holds exactly: small non-negative integers (and halves for floats).
            x = draw(rng, (3, 4), src, "small")
            if is_float(src) and not is_float(dst):
                x = np.abs(x)  # float -> int truncates toward zero; negatives to unsigned are undefined
            out.append(S(x, dtype=dst))
    for d in FLOATS:
        for s in SHAPES:
            out.append(S(draw(rng, s, d), dtype=F64 if d == F32 else F32))
    return out


def target_rule(sample, np_dtype):
    return sample.kwargs["dtype"]


case("astype", nx.astype, lambda x, dtype: x.astype(dtype), _astype_samples(), grad=True,
     dtype_rule=target_rule, note="differentiable for float -> float only")
case("cast", nx.cast, lambda x, dtype: x.astype(dtype),
     [S(draw(_rng("cast"), (3, 4), F32), dtype=d) for d in (I32, F64, BF16, BOOL)] +
     [S(draw(_rng("cast"), (3, 4), F64), dtype=F32)], grad=True, dtype_rule=target_rule,
     note="alias of astype")

# -- reductions

_SUM_EXTRA = (BOOL, I8, I16, U8, U16, U32, I64, F16, BF16)
case("sum", nx.sum, np.sum, reduction("sum", extra=_SUM_EXTRA), grad=True,
     dtype_rule=accumulate_rule, dtype_note=ACCUMULATE_NOTE,
     tol={F32: (1e-5, 2e-5), F16: (1e-2, 1e-2)})
case("prod", nx.prod, np.prod, reduction("prod", domain="small", extra=(BOOL, I8, U8, I64)), grad=True,
     domain="small", dtype_rule=accumulate_rule, dtype_note=ACCUMULATE_NOTE, tol={F32: (2e-5, 1e-6)},
     note="ints in [0, 3] keep products inside int32")
_EXT_EXTRA = (BOOL, I8, U8, U16, I64, F16, BF16)
case("max", nx.max, np.max, reduction("max", extra=_EXT_EXTRA, empty=False), grad=True,
     note="no ties among float samples; reducing an empty axis raises (as NumPy)")
case("min", nx.min, np.min, reduction("min", extra=_EXT_EXTRA, empty=False), grad=True)
case("amax", nx.amax, np.amax, reduction("amax", dtypes=(F64,), empty=False), grad=True, note="alias of max")
case("amin", nx.amin, np.amin, reduction("amin", dtypes=(F64, I32), empty=False), grad=True,
     note="alias of min")
_ARG_AXES = [(s, a) for s, a in REDUCE_AXES if not isinstance(a, tuple)]
case("argmax", nx.argmax, np.argmax,
     reduction("argmax", dtypes=(F32, I32, BOOL), axes=_ARG_AXES, empty=False, extra=(U8, F64)),
     dtype_rule=index_rule, dtype_note="indices are int32 (NumPy: int64)",
     note="ties (ints, bools) resolve to the first occurrence")
case("argmin", nx.argmin, np.argmin,
     reduction("argmin", dtypes=(F32, I32), axes=_ARG_AXES, empty=False, extra=(U8, F64)),
     dtype_rule=index_rule, dtype_note="indices are int32 (NumPy: int64)")
case("any", nx.any, np.any, reduction("any", dtypes=(BOOL, I32, F32), domain="small"), domain="small")
case("all", nx.all, np.all, reduction("all", dtypes=(BOOL, I32, F32), domain="small"), domain="small")
_mean_samples = reduction("mean", extra=(BOOL, I8, F16, BF16))
for _s in _mean_samples:
    if _s.args[0].size == 0:
        _s.fd = False  # nan results
case("mean", nx.mean, _errstate(np.mean), _mean_samples, grad=True,
     dtype_note="means of bools and 8/16-bit ints are float32 (NumPy: float64)", tol={F16: (1e-2, 1e-2)},
     note="empty reductions are nan (0/0)")
_VAR_AXES = [(s, a) for s, a in REDUCE_AXES if not _empty_reduced(s, a)]
for _name, _fn, _ref in (("var", nx.var, np.var), ("std", nx.std, np.std)):
    case(_name, _fn, _errstate(_ref),
         reduction(_name, axes=_VAR_AXES, fd_scalars=_name != "std") +
         reduction(_name + "1", dtypes=(F64, F32),
                                                       axes=[((3, 4), 0), ((2, 3, 4), (0, 2)), ((5,), None)],
                                                       ddof=1),
         grad=True, dtype_note="variances of 8/16-bit ints are float32 (NumPy: float64)",
         tol={F32: (1e-5, 1e-5)}, note="scalars have zero variance: std is not differentiable there")


@_errstate
def _np_logsumexp(x, axis=None, keepdims=False):
    xf = np.asarray(x, F64)
    top = np.max(xf, axis=axis, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0.0)
    out = np.log(np.sum(np.exp(xf - top), axis=axis, keepdims=True)) + top
    if not keepdims:
        out = np.squeeze(out, axis=axis)
    return out.astype(_float_like(x))



_lse_samples = reduction("logsumexp", dtypes=FLOATS, empty=False)
_lse_samples += [S(np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]], d), axis=1, keepdims=False,
                   fd=False) for d in FLOATS]
_lse_samples += [S(np.array([[1.0, 2.0], [3.0, 4.0]], F32) * 100, axis=None, keepdims=False)]
_lse_samples += [S(np.zeros((0, 3), d), axis=0, keepdims=False, fd=False) for d in FLOATS]
case("logsumexp", nx.logsumexp, _np_logsumexp,
     _lse_samples + [S(draw(_rng("logsumexp_i"), (3, 4), I32), axis=1, keepdims=k) for k in (False, True)],
     grad=True, dtype_note="int32 gives float64 (the ints' float)")


def _softmax_samples(name):
    rng = _rng(name)
    out = []
    for d in FLOATS:
        for shape, axis in [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((0, 3), -1)]:
            out.append(S(draw(rng, shape, d) * 3, axis=axis))
    out.append(S(np.array([[1000.0, 1001.0, 999.0]], F32), axis=-1))
    out.append(S(draw(rng, (3, 4), I32), axis=-1))
    return out


def _np_softmax(x, axis=-1):
    return scipy.special.softmax(np.asarray(x, F64), axis=axis).astype(_float_like(x))


def _np_log_softmax(x, axis=-1):
    return scipy.special.log_softmax(np.asarray(x, F64), axis=axis).astype(_float_like(x))


case("softmax", nx.softmax, _np_softmax, _softmax_samples("softmax"), grad=True,
     dtype_note="int32 gives float64 (the ints' float)")
case("log_softmax", nx.log_softmax, _np_log_softmax, _softmax_samples("log_softmax"), grad=True,
     dtype_note="int32 gives float64 (the ints' float)")

# -- shape ops


def _shape_samples(name, specs, dtypes=(F64, I32)):
    """specs: (shape, kwargs) pairs, each drawn for every dtype."""
    rng = _rng(name)
    return [S(draw(rng, shape, d), **kw) for d in dtypes for shape, kw in specs]


case("reshape", nx.reshape, np.reshape, _shape_samples("reshape", [
    ((2, 3, 4), dict(shape=(6, 4))), ((2, 3, 4), dict(shape=(-1,))), ((2, 3, 4), dict(shape=(4, -1))),
    ((), dict(shape=(1, 1))), ((1, 1), dict(shape=())), ((0, 3), dict(shape=(3, 0))),
    ((0, 3), dict(shape=(-1, 3))), ((5,), dict(shape=(5, 1))), ((6,), dict(shape=6)),
    ((3, 4), dict(shape=(3, 4)))]), grad=True)
case("ravel", nx.ravel, np.ravel, _shape_samples("ravel", [(s, {}) for s in SHAPES]), grad=True)
case("transpose", nx.transpose, np.transpose, _shape_samples("transpose", [
    ((3, 4), {}), ((2, 3, 4), {}), ((2, 3, 4), dict(axes=(1, 0, 2))), ((2, 3, 4), dict(axes=(-1, 0, 1))),
    ((5,), {}), ((), {}), ((0, 3), dict(axes=(1, 0))), ((3, 4), dict(axes=(0, 1)))]), grad=True)
case("moveaxis", nx.moveaxis, np.moveaxis, _shape_samples("moveaxis", [
    ((2, 3, 4), dict(source=0, destination=2)), ((2, 3, 4), dict(source=-1, destination=0)),
    ((3, 4), dict(source=1, destination=1))]), grad=True)
case("swapaxes", nx.swapaxes, np.swapaxes, _shape_samples("swapaxes", [
    ((2, 3, 4), dict(a=0, b=2)) , ((3, 4), dict(a=-1, b=0)), ((3, 4), dict(a=1, b=1))]),
     grad=True)
# np.swapaxes names its axes axis1/axis2; adapt the reference.
TABLE[-1].ref = lambda x, a, b: np.swapaxes(x, a, b)
case("expand_dims", nx.expand_dims, np.expand_dims, _shape_samples("expand_dims", [
    ((), dict(axis=0)), ((3, 4), dict(axis=0)), ((3, 4), dict(axis=-1)), ((3, 4), dict(axis=1)),
    ((3, 4), dict(axis=(0, 2))), ((3, 4), dict(axis=(-1, 0))), ((0,), dict(axis=1))]), grad=True)
case("squeeze", nx.squeeze, np.squeeze, _shape_samples("squeeze", [
    ((1, 3, 1), {}), ((1, 3, 1), dict(axis=0)), ((1, 3, 1), dict(axis=(0, 2))), ((1, 3, 1), dict(axis=-1)),
    ((), {}), ((1,), {}), ((3, 4), {}), ((1, 0), dict(axis=0))]), grad=True)
case("broadcast_to", nx.broadcast_to, np.broadcast_to, _shape_samples("broadcast_to", [
    ((3,), dict(shape=(2, 3))), ((), dict(shape=(4,))), ((3, 1), dict(shape=(2, 3, 4))),
    ((0,), dict(shape=(2, 0))), ((1,), dict(shape=(0,))), ((3, 4), dict(shape=(3, 4))),
    ((), dict(shape=()))]), grad=True)


def _broadcast_arrays_samples():
    rng = _rng("broadcast_arrays")
    return [S(*(draw(rng, s, d) for s in shapes)) for d in (F64, I32)
            for shapes in [((3, 1), (4,)), ((), (2, 3)), ((2, 1, 4), (3, 1), ()), ((0, 1), (3,))]]


case("broadcast_arrays", nx.broadcast_arrays, np.broadcast_arrays, _broadcast_arrays_samples(),
     grad=True, diff_argnums=(0, 1), note="returns a list")


def _concat_samples(name):
    rng = _rng(name)
    out = []
    for d in (F64, I32):
        out += [S(draw(rng, (2, 3), d), draw(rng, (4, 3), d), axis=0),
                S(draw(rng, (2, 3), d), draw(rng, (2, 1), d), axis=1),
                S(draw(rng, (2, 3), d), draw(rng, (2, 1), d), draw(rng, (2, 2), d), axis=-1),
                S(draw(rng, (5,), d), axis=0),
                S(draw(rng, (0, 3), d), draw(rng, (2, 3), d), axis=0),
                S(draw(rng, (2, 3, 4), d), draw(rng, (2, 3, 1), d), axis=2)]
    out += [S(draw(rng, (2,), I32), draw(rng, (3,), F32), axis=0),
            S(draw(rng, (2,), I8), draw(rng, (3,), U8), axis=0),
            S(draw(rng, (2,), F16), draw(rng, (3,), F32), axis=0)]
    return out


case("concatenate", lambda *xs, axis: nx.concatenate(xs, axis),
     lambda *xs, axis: np.concatenate(xs, axis), _concat_samples("concatenate"), grad=True,
     diff_argnums=(0, 1), note="operands are the positional arguments")


def _stack_samples():
    rng = _rng("stack")
    out = []
    for d in (F64, I32):
        out += [S(draw(rng, (3,), d), draw(rng, (3,), d), axis=0),
                S(draw(rng, (3,), d), draw(rng, (3,), d), axis=1),
                S(draw(rng, (3,), d), draw(rng, (3,), d), axis=-1),
                S(draw(rng, (2, 3), d), draw(rng, (2, 3), d), draw(rng, (2, 3), d), axis=1),
                S(draw(rng, (), d), draw(rng, (), d), axis=0),
                S(draw(rng, (0, 2), d), draw(rng, (0, 2), d), axis=2)]
    out.append(S(draw(rng, (3,), I32), draw(rng, (3,), F32), axis=0))
    return out


case("stack", lambda *xs, axis: nx.stack(xs, axis), lambda *xs, axis: np.stack(xs, axis),
     _stack_samples(), grad=True, diff_argnums=(0, 1), note="operands are the positional arguments")
case("split", nx.split, np.split, _shape_samples("split", [
    ((6,), dict(indices_or_sections=3)), ((4, 6), dict(indices_or_sections=2, axis=1)),
    ((6,), dict(indices_or_sections=[1, 4])), ((6,), dict(indices_or_sections=[2, 2])),
    ((5,), dict(indices_or_sections=[1, 10])), ((3, 4), dict(indices_or_sections=[1], axis=-1)),
    ((0, 2), dict(indices_or_sections=2, axis=0)), ((6,), dict(indices_or_sections=1))]), grad=True,
    note="returns a list")
case("flip", nx.flip, np.flip, _shape_samples("flip", [
    ((5,), {}), ((3, 4), {}), ((3, 4), dict(axis=0)), ((2, 3, 4), dict(axis=(0, 2))),
    ((2, 3, 4), dict(axis=-1)), ((), {}), ((0, 3), dict(axis=1))]), grad=True)


def _np_pad(x, pad_width, constant_values=0):
    if not isinstance(pad_width, int) and len(pad_width) == 1:
        pad_width = tuple(pad_width) * x.ndim
    return np.pad(x, pad_width, constant_values=constant_values)


case("pad", nx.pad, _np_pad, _shape_samples("pad", [
    ((3,), dict(pad_width=1)), ((3, 4), dict(pad_width=((1, 2), (0, 1)))),
    ((3, 4), dict(pad_width=[(2, 1)])), ((3, 4), dict(pad_width=((0, 0), (3, 0)), constant_values=7)),
    ((2, 3, 4), dict(pad_width=1, constant_values=-1)), ((0, 2), dict(pad_width=((1, 1), (0, 0))))]) +
    [S(draw(_rng("pad"), (3,), F32), pad_width=2, constant_values=2.5)],
    grad=True, note="constant padding")


def _take_samples():
    rng = _rng("take")
    out = []
    for d in (F64, I32):
        x = draw(rng, (3, 4), d)
        out += [S(x, np.array([0, 5, 11, 2], I32)), S(x, np.array([2, 0, 2], I32), axis=0),
                S(x, np.array([[3, 0], [1, 1]], I32), axis=1), S(x, np.array([-1, -4, 0], I32), axis=-1),
                S(x, np.array(2, I32), axis=1), S(x, np.zeros((0,), I32), axis=0),
                S(draw(rng, (2, 3, 4), d), np.array([1, 0], I64), axis=1),
                S(draw(rng, (5,), d), np.array([4, 4, 0], U8))]
    return out


case("take", nx.take, np.take, _take_samples(), grad=True,
     note="indices in range; out-of-range indices clamp (JAX) where NumPy raises")


def _dyn_samples(update):
    rng = _rng("dynamic_update_slice" if update else "dynamic_slice")
    out = []
    for d in (F64, I32):
        x = draw(rng, (4, 5), d)
        for starts, sizes in [((1, 2), (2, 2)), ((0, 0), (4, 5)), ((3, 4), (2, 3)), ((-2, 1), (1, 4)),
                              ((2, 0), (0, 5)), ((7, -9), (1, 1))]:
            st = tuple(np.array(s, I32) for s in starts)
            if update:
                out.append(S(x, draw(rng, sizes, d), *st))
            else:
                out.append(S(x, *st, sizes=sizes))
        v = draw(rng, (5,), d)
        out.append(S(v, draw(rng, (2,), d), np.array(1, I64)) if update else S(v, np.array(1, I64), sizes=(3,)))
    return out


case("dynamic_slice", lambda x, *starts, sizes: nx.dynamic_slice(x, starts, sizes), _np_dynamic_slice,
     _dyn_samples(False), grad=True,
     note="start indices are positional (traceable) 0-d int arrays; out-of-range starts clamp (lax)")
case("dynamic_update_slice", lambda x, update, *starts: nx.dynamic_update_slice(x, update, starts),
     _np_dynamic_update_slice, _dyn_samples(True), grad=True, diff_argnums=(0, 1),
     note="start indices are positional (traceable) 0-d int arrays; out-of-range starts clamp (lax)")

# -- linear algebra


def _pair_samples(name, shape_pairs, dtypes=FLOATS + (I32,), **kw):
    rng = _rng(name)
    return [S(draw(rng, a, d), draw(rng, b, d), **kw) for d in dtypes for a, b in shape_pairs]


_LINALG_TOL = {F32: (1e-5, 3e-5), F16: (1e-2, 5e-2), BF16: (3e-2, 1e-1)}
_PRODUCT = dict(grad=True, diff_argnums=(0, 1), tol=_LINALG_TOL, dtype_rule=product_rule,
                dtype_note=PRODUCT_NOTE)
case("matmul", nx.matmul, np.matmul, _pair_samples("matmul", [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (1, 4, 5)), ((3, 4), (2, 4, 5)), ((0, 4), (4, 3)), ((3, 0), (0, 2)),
    ((2, 1, 3, 4), (5, 4, 2))]) +
    _pair_samples("matmul_mixed", [((3, 4), (4, 2))], dtypes=(F16, BF16)) +
    [S(draw(_rng("matmul"), (3, 4), I8, "small"), draw(_rng("matmul"), (4, 2), F32))], **_PRODUCT)
case("dot", nx.dot, np.dot, _pair_samples("dot", [
    ((), (3,)), ((3,), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((2, 3, 4), (5, 4, 6)),
    ((3,), (2, 3, 4)), ((0, 3), (3, 2))]) +
    _pair_samples("dot_low", [((2, 3), (3, 4))], dtypes=LOW_FLOATS), **_PRODUCT)
case("inner", nx.inner, np.inner, _pair_samples("inner", [((3,), (3,)), ((2, 3), (4, 3)), ((2, 3), (3,))]),
     **_PRODUCT)
case("vdot", nx.vdot, np.vdot, _pair_samples("vdot", [((3,), (3,)), ((2, 3), (6,)), ((2, 3), (3, 2))]) +
     _pair_samples("vdot_low", [((3,), (3,))], dtypes=LOW_FLOATS), **_PRODUCT)
case("outer", nx.outer, np.outer, _pair_samples("outer", [((3,), (4,)), ((2, 2), (3,)), ((0,), (2,)),
                                                          ((), (3,))]),
     grad=True, diff_argnums=(0, 1))
case("tensordot", nx.tensordot, np.tensordot,
     _pair_samples("tensordot", [((2, 3, 4), (3, 4, 5))], axes=2) +
     _pair_samples("tensordot", [((2, 3), (3, 4))], axes=1) +
     _pair_samples("tensordot", [((2, 3, 4), (4, 3, 5))], axes=((1, 2), (1, 0))) +
     _pair_samples("tensordot", [((2, 3), (4,))], axes=0),
     **_PRODUCT)
case("dot_general", nx.dot_general, _np_dot_general,
     _pair_samples("dot_general", [((3, 4), (4, 5))], dimension_numbers=(((1,), (0,)), ((), ()))) +
     _pair_samples("dot_general", [((2, 3, 4), (2, 4, 5))], dimension_numbers=(((2,), (1,)), ((0,), (0,)))) +
     _pair_samples("dot_general", [((4, 2, 3), (3, 2, 5))], dimension_numbers=(((2,), (0,)), ((1,), (1,)))) +
     _pair_samples("dot_general", [((3, 4), (5, 4))], dimension_numbers=(((1,), (1,)), ((), ()))) +
     _pair_samples("dot_general", [((3,), (4,))], dimension_numbers=(((), ()), ((), ()))) +
     _pair_samples("dot_general_low", [((2, 3, 4), (2, 4, 5))], dimension_numbers=(((2,), (1,)), ((0,), (0,))),
                   dtypes=LOW_FLOATS),
     **_PRODUCT, note="lax.dot_general: batch, then free axes")


def _einsum_samples():
    rng = _rng("einsum")
    specs = [("ij,jk->ik", (3, 4), (4, 5)), ("ij,jk", (3, 4), (4, 5)), ("i,i->", (4,), (4,)),
             ("i,j->ij", (3,), (4,)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)), ("ij->ji", (3, 4)),
             ("ij->", (3, 4)), ("ij->j", (3, 4)), ("ij,jk,kl->il", (2, 3), (3, 4), (4, 5)),
             ("ij,ij->ij", (3, 4), (3, 4)), ("ij,ij->i", (3, 4), (3, 4)), ("ijk,kl->lij", (2, 3, 4), (4, 5)),
             ("ij,kj", (3, 4), (5, 4)), ("i j , j k -> k i", (3, 4), (4, 2)), ("ij,jk->ik", (0, 4), (4, 2))]
    out = []
    for d in (F32, F64, I32):
        for spec, *shapes in specs:
            out.append(S(*(draw(rng, s, d) for s in shapes), spec=spec))
    for d in LOW_FLOATS:
        for spec, *shapes in (specs[0], specs[6], specs[8]):  # a product, a sum, a chain
            out.append(S(*(draw(rng, s, d) for s in shapes), spec=spec))
    return out


case("einsum", lambda *ops, spec: nx.einsum(spec, *ops), lambda *ops, spec: _einsum_any(spec, *ops),
     _einsum_samples(), **_PRODUCT,
     note="spec is static; operands are the positional arguments")

# -- indexing: x[idx] and x.at[idx].set/add

_GETITEM_STATIC = [1, -1, (1, 2), (1, -2, 3), slice(1, 3), slice(None, None, 2), slice(None, None, -1),
                   slice(3, 0, -2), slice(-3, None), slice(3, 1), slice(10, 20), (slice(None), 2),
                   (Ellipsis, 0), (None,), (slice(None), None, 1), (Ellipsis, None),
                   (1, Ellipsis, slice(None, None, -2)), np.int64(2), np.int32(-1), (),
                   (slice(1, 3), slice(None), slice(4, 1, -1)), (None, 0, None, Ellipsis),
                   (Ellipsis,), (-4, -5, -6)]
_IDX = {"i3": np.array([0, 3, 1], I32), "neg": np.array([-1, 0, -2], I32),
        "i2d": np.array([[0, 1], [2, 3]], I32), "col": np.array([[1], [0]], I64),
        "row": np.array([0, 4, 2], I32), "empty": np.zeros((0,), I32), "u8": np.array([3, 3], U8)}
_GETITEM_ARRAY = [(Arg(1), ("i3",)), ((slice(None), Arg(1)), ("row",)), ((Arg(1), Arg(2)), ("col", "row")),
                  ((Arg(1), slice(None), Arg(2)), ("i3", "i3")), ((Ellipsis, Arg(1)), ("i3",)),
                  (Arg(1), ("neg",)), (Arg(1), ("i2d",)), ((slice(1, 3), Arg(1)), ("i2d",)),
                  (Arg(1), ("empty",)), ((Arg(1), 2), ("u8",)), ((None, Arg(1)), ("i3",)),
                  ((0, Arg(1), slice(None, None, -1)), ("row",)),
                  ((1, slice(None), Arg(1)), ("i3",))]


def _getitem_samples():
    rng = _rng("getitem")
    out = []
    for d in (F64, I32):
        x = draw(rng, (4, 5, 6), d)
        out += [S(x, idx=idx) for idx in _GETITEM_STATIC]
        for idx, names in _GETITEM_ARRAY:
            out.append(S(x, *(_IDX[n] for n in names), idx=idx))
    out.append(S(draw(rng, (3,), F32), idx=[2, 0]))
    out.append(S(draw(rng, (), F32), idx=()))
    out.append(S(draw(rng, (), F32), idx=None))
    out.append(S(draw(rng, (), F32), idx=Ellipsis))
    out.append(S(draw(rng, (0, 3), F32), idx=(slice(None), 1)))
    return out


def _nx_getitem(x, *arrays, idx):
    return x[_fill(idx, (x,) + arrays)]


def _np_getitem(x, *arrays, idx):
    return np.asarray(x[_fill(idx, (x,) + arrays)])


case("getitem", _nx_getitem, _np_getitem, _getitem_samples(), grad=True,
     note="index expression is static (kwarg idx); integer-array indices are positional arguments "
          "named by Arg(k)")


def _at_samples():
    rng = _rng("at")
    out = []
    for d in (F64, I32):
        x = draw(rng, (4, 5), d)
        for mode in ("set", "add"):
            out += [S(x, draw(rng, (), d), idx=1, mode=mode),
                    S(x, draw(rng, (5,), d), idx=-1, mode=mode),
                    S(x, draw(rng, (2, 5), d), idx=slice(1, 3), mode=mode),
                    S(x, draw(rng, (2, 1), d), idx=(slice(1, 3), slice(None, None, 2)), mode=mode),
                    S(x, draw(rng, (4,), d), idx=(Ellipsis, 3), mode=mode),
                    S(x, draw(rng, (3, 5), d), np.array([3, 0, 1], I32), idx=Arg(2), mode=mode),
                    S(x, draw(rng, (2,), d), np.array([0, 3], I32), np.array([4, -1], I32),
                      idx=(Arg(2), Arg(3)), mode=mode),
                    S(x, draw(rng, (), d), idx=(2, 3), mode=mode),
                    S(x, draw(rng, (4, 5), d), idx=Ellipsis, mode=mode)]
        # Repeated indices combine under add/multiply/min/max (ufunc.at), as in JAX.
        for mode in ("add", "multiply", "min", "max"):
            out.append(S(x, draw(rng, (3, 5), d), np.array([1, 1, 2], I32), idx=Arg(2), mode=mode))
            out.append(S(x, draw(rng, (4,), d), np.array([0, 0, 0, 4], I32), idx=(slice(None), Arg(2)),
                         mode=mode))
        for mode in ("multiply", "min", "max"):  # boxes and strided slices too
            out += [S(x, draw(rng, (2, 5), d), idx=slice(1, 3), mode=mode),
                    S(x, draw(rng, (2, 1), d), idx=(slice(1, 3), slice(None, None, 2)), mode=mode)]
    return out


case("at", _nx_at, _np_at, _at_samples(), grad=True, diff_argnums=(0, 1),
     note="x.at[idx].set(v) / .add(v); static kwargs idx and mode; set samples never repeat an index")


# ---------------------------------------------------------------- convolution and pooling

def _np_pads(padding, sizes, windows, strides, dilation):
    """Explicit (lo, hi) pairs, as lax.padtype_to_pads: SAME gives ceil(n / stride) outputs."""
    if padding == "VALID":
        return [(0, 0)] * len(sizes)
    if padding == "SAME":
        out = []
        for n, k, s, d in zip(sizes, windows, strides, dilation):
            total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
            out.append((total // 2, total - total // 2))
        return out
    return [tuple(p) for p in padding]


def _np_conv(x, w, strides=None, padding="VALID", dilation=None, feature_group_count=1):
    """A direct loop over output positions and kernel offsets (NHWC input, HWIO kernel)."""
    nd, groups = x.ndim - 2, feature_group_count
    strides = (strides,) * nd if isinstance(strides, int) else strides or (1,) * nd
    dilation = dilation or (1,) * nd
    pads = _np_pads(padding, x.shape[1:-1], w.shape[:nd], strides, dilation)
    xp = np.pad(x.astype(F64), [(0, 0)] + pads + [(0, 0)])
    cg, og = w.shape[-2], w.shape[-1] // groups
    spatial = [(xp.shape[1 + i] - (w.shape[i] - 1) * dilation[i] - 1) // strides[i] + 1 for i in range(nd)]
    out = np.zeros((x.shape[0], *[max(n, 0) for n in spatial], w.shape[-1]))
    for pos in np.ndindex(*out.shape[1:-1]):
        for k in np.ndindex(*w.shape[:nd]):
            patch = xp[(slice(None),) + tuple(p * s + o * d for p, s, o, d in zip(pos, strides, k, dilation))]
            for g in range(groups):
                out[(slice(None),) + pos + (slice(g * og, (g + 1) * og),)] += (
                    patch[:, g * cg:(g + 1) * cg] @ w[k][:, g * og:(g + 1) * og].astype(F64))
    return out.astype(np.result_type(x, w))


def _np_reduce_window(x, op, window_dimensions, window_strides=None, padding="VALID"):
    """A direct loop over window positions; padding holds -inf (max) or 0 (sum)."""
    strides = window_strides or (1,) * x.ndim
    pads = _np_pads(padding, x.shape, window_dimensions, strides, (1,) * x.ndim)
    fill = 0 if op == "sum" else (-np.inf if is_float(x.dtype) else np.iinfo(x.dtype).min)
    xp = np.pad(x, pads, constant_values=fill)
    counts = [(n - k) // s + 1 for n, k, s in zip(xp.shape, window_dimensions, strides)]
    out = np.zeros(counts, x.dtype)
    reduce = np.max if op == "max" else np.sum
    for pos in np.ndindex(*counts):
        out[pos] = reduce(xp[tuple(slice(p * s, p * s + k) for p, s, k in zip(pos, strides, window_dimensions))])
    return out


def _conv_samples():
    rng = _rng("conv")
    out = []
    for d in (F64, F32):
        out += [S(draw(rng, (2, 5, 6, 3), d), draw(rng, (3, 2, 3, 4), d)),
                S(draw(rng, (2, 7, 6, 2), d), draw(rng, (3, 2, 2, 3), d), strides=(2, 1),
                  padding=((1, 2), (0, 1)), dilation=(1, 2)),
                S(draw(rng, (2, 5, 5, 4), d), draw(rng, (2, 2, 2, 6), d), strides=2, padding="SAME",
                  feature_group_count=2)]
    out += [S(draw(rng, (2, 7, 3), F64), draw(rng, (3, 3, 4), F64), strides=(2,), padding="SAME"),
            S(draw(rng, (1, 4, 4, 4), F64), draw(rng, (3, 3, 1, 4), F64), padding="SAME",
              feature_group_count=4),
            S(draw(rng, (1, 4, 3, 3, 2), F64), draw(rng, (2, 2, 2, 2, 3), F64), padding="SAME"),
            S(draw(rng, (2, 4, 4, 2), I32), draw(rng, (2, 2, 2, 3), I32)),
            S(draw(rng, (2, 4, 4, 2), F16), draw(rng, (2, 2, 2, 3), F16), padding="SAME"),
            S(draw(rng, (2, 4, 4, 2), BF16), draw(rng, (2, 2, 2, 3), BF16), strides=2)]
    return out


case("conv", nx.conv, _np_conv, _conv_samples(), grad=True, diff_argnums=(0, 1),
     note="lax.conv_general_dilated with NHWC input and HWIO kernel; 1-, 2- and 3-d")


def _reduce_window_samples():
    rng = _rng("reduce_window")
    out = []
    for d in (F64, F32):
        for op in ("max", "sum"):
            out += [S(draw(rng, (2, 5, 6, 3), d), op=op, window_dimensions=(1, 2, 2, 1),
                      window_strides=(1, 2, 2, 1)),
                    S(draw(rng, (2, 5, 5, 2), d), op=op, window_dimensions=(1, 3, 3, 1), padding="SAME"),
                    S(draw(rng, (7,), d), op=op, window_dimensions=(3,), window_strides=(2,),
                      padding=((1, 2),))]
    out += [S(draw(rng, (4, 6), I32), op="max", window_dimensions=(2, 3), window_strides=(2, 2),
              padding="SAME"),
            S(draw(rng, (4, 6), I32), op="sum", window_dimensions=(2, 2)),
            S(draw(rng, (2, 6, 6, 2), BF16), op="sum", window_dimensions=(1, 3, 3, 1), padding="SAME"),
            S(draw(rng, (2, 6, 6, 2), F16), op="max", window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1))]
    return out


case("reduce_window", nx.reduce_window, _np_reduce_window, _reduce_window_samples(), grad=True,
     note="op is 'max' or 'sum'; windows, strides and padding per axis")


# ---------------------------------------------------------------- rune.nn (same machinery; not nx names)

def _nn_float_samples(name, shapes=((3, 4), (5,))):
    rng = _rng(name)
    return [S(draw(rng, shape, d)) for d in FLOATS for shape in shapes]


def _np_softplus(x):
    return np.logaddexp(x, 0)


NN_ACTIVATIONS = {
    "nn.relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "nn.gelu": (nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "nn.gelu_exact": (lambda x: nn.gelu(x, approximate=False), lambda x: x * scipy.special.ndtr(x)),
    "nn.silu": (nn.silu, lambda x: x * scipy.special.expit(x)),
    "nn.softplus": (nn.softplus, _np_softplus),
    "nn.log_sigmoid": (nn.log_sigmoid, lambda x: -_np_softplus(-x)),
    "nn.leaky_relu": (nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    "nn.elu": (nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
}
for _name, (_fn, _ref) in NN_ACTIVATIONS.items():
    case(_name, _fn, _in_f64(_ref), _nn_float_samples(_name), grad=True, dtype_rule=float_rule)


def _np_cross_entropy(logits, labels, where=None):
    z = logits.astype(F64)
    top = z.max(-1, keepdims=True)
    out = np.log(np.exp(z - top).sum(-1)) + top[..., 0] - np.take_along_axis(z, labels[..., None], -1)[..., 0]
    return (out if where is None else np.where(where, out, 0.0)).astype(logits.dtype)


def _cross_entropy_samples():
    rng = _rng("nn.cross_entropy")
    out = []
    for d in FLOATS:
        out += [S(draw(rng, (4, 5), d), rng.integers(0, 5, 4).astype(I32)),
                S(draw(rng, (2, 3, 6), d), rng.integers(0, 6, (2, 3)).astype(I32), rng.random((2, 3)) < 0.5)]
    return out


case("nn.cross_entropy", nn.cross_entropy, _np_cross_entropy, _cross_entropy_samples(), grad=True)


def _np_layer_norm(x, gamma=None, beta=None, axis=-1, eps=1e-5):
    z = x.astype(F64)
    out = (z - z.mean(axis, keepdims=True)) / np.sqrt(z.var(axis, keepdims=True) + eps)
    out = out if gamma is None else out * gamma
    return (out if beta is None else out + beta).astype(x.dtype)


def _layer_norm_samples():
    rng = _rng("nn.layer_norm")
    return [S(draw(rng, (3, 6), d), draw(rng, (6,), d), draw(rng, (6,), d)) for d in FLOATS] + \
        [S(draw(rng, (2, 3, 4), F64), draw(rng, (3, 4), F64), draw(rng, (3, 4), F64), axis=(1, 2))]


case("nn.layer_norm", nn.layer_norm, _np_layer_norm, _layer_norm_samples(), grad=True, diff_argnums=(0, 1, 2))


def _pool_samples(name):
    rng = _rng(name)
    out = []
    for d in FLOATS:
        out += [S(draw(rng, (2, 4, 6, 3), d), window=2),
                S(draw(rng, (2, 5, 5, 2), d), window=3, strides=1, padding="SAME")]
    return out


case("nn.max_pool", nn.max_pool,
     lambda x, window, strides=None, padding="VALID": _np_reduce_window(
         x, "max", (1, window, window, 1), (1,) + (strides or window,) * 2 + (1,), padding),
     _pool_samples("nn.max_pool"), grad=True)
case("nn.avg_pool", nn.avg_pool,
     lambda x, window, strides=None, padding="VALID": (_np_reduce_window(
         x, "sum", (1, window, window, 1), (1,) + (strides or window,) * 2 + (1,), padding) / window ** 2
     ).astype(x.dtype),
     _pool_samples("nn.avg_pool"), grad=True)


# ---------------------------------------------------------------- public surface

# Every public nx callable that is an op (creation, conversion, random and
# placement are tested elsewhere). test_ops checks this list against nx.
NOT_OPS = {"Array", "arange", "array", "asarray", "create", "eye", "full", "full_like", "identity",
           "linspace", "ones", "ones_like", "scalar", "zeros", "zeros_like", "dtype", "place",
           "from_dlpack", "random", "bool"}
ALIASES = {"arctan2": "atan2", "mod": "remainder", "bitwise_not": "invert", "absolute": "abs",
           "pow": "power", "arcsin": "asin", "arccos": "acos",
           "arctan": "atan"}
case("arctan2", nx.arctan2, np.arctan2, binary("arctan2", ("nonzero", "nonzero"), dtypes=(F64,), low=(),
                                               weak_kinds=()),
     grad=True, diff_argnums=(0, 1), domain=("nonzero", "nonzero"), note="alias of atan2")


# ---------------------------------------------------------------- the Array API additions
# (rune/nx/mathfuncs.py, manipulation.py, sorting.py, searching.py, dynamic.py)

FLOAT_DOMAINS["above1"] = lambda rng, shape: rng.uniform(1.2, 3.0, size=shape)
DOMAINS = tuple(FLOAT_DOMAINS) + ("shift",)

_float_unary("acosh", nx.acosh, np.arccosh, "above1")
_float_unary("asinh", nx.asinh, np.arcsinh, "real")
_float_unary("atanh", nx.atanh, np.arctanh, "unit")
_float_unary("log2", nx.log2, np.log2, "positive")
_float_unary("log10", nx.log10, np.log10, "positive")
case("trunc", nx.trunc, np.trunc, _any_unary_samples("trunc", "frac", (I32, U8, F16, BF16)), grad=True,
     domain="frac", note="ints keep their dtype (the standard's rule)")
case("isinf", nx.isinf, np.isinf, unary("isinf", "special", extra=(I32, BOOL, F16, BF16)), domain="special")
case("signbit", nx.signbit, np.signbit,
     unary("signbit", "real", dtypes=(F32,), extra=(I32, F64, F16, BF16, U8)) +
     [S(np.array([-0.0, 0.0, -1.5, 2.0, -np.inf, np.inf], d)) for d in FLOATS])
case("positive", nx.positive, np.positive, _any_unary_samples("positive", "real", INTS + LOW_FLOATS), grad=True)


def _float_binary(name, fn, ref, domains=("real", "real"), grad=True, diff_argnums=(0, 1)):
    case(name, fn, _errstate(ref),
         binary(name, domains, dtypes=(F32, F64), mixed=((I32, F32), (F32, F64)), low=(F16, BF16),
                weak_kinds=(float,), weak_dtypes=(F32,), pairs=PAIRS[:6]),
         grad=grad, diff_argnums=diff_argnums, domain=domains)


_float_binary("hypot", nx.hypot, np.hypot, ("nonzero", "nonzero"))
_float_binary("copysign", nx.copysign, np.copysign, ("nonzero", "nonzero"))
_float_binary("logaddexp", nx.logaddexp, np.logaddexp)
def _nextafter_c99(x, y):
    """nextafter with C99's rule for equal operands (y), in every dtype: rune's rule;
    NumPy's float16 loop gave x before NumPy 2.5."""
    step = np.nextafter(x, y)   # its dtype by NumPy's rules, Python scalars weak
    return np.where(np.equal(x, y), y, step).astype(step.dtype)


_float_binary("nextafter", nx.nextafter, _nextafter_c99, grad=False)
ALIASES.update({"arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh"})


def _sort_samples(name, dtypes=(F32, F64, I32)):
    rng = _rng(name)
    out = []
    for d in dtypes:
        for shape, axis in (((5,), -1), ((3, 4), 0), ((3, 4), -1), ((0,), 0), ((2, 3, 4), 1)):
            for descending in (False, True):
                out.append(S(draw(rng, shape, d), axis=axis, descending=descending))
    out.append(S(np.array([2, 1, 2, 0, 1, 2], I32), axis=0, descending=True))   # ties: stability
    out.append(S(np.array([[1, 1, 0], [0, 0, 1]], BOOL), axis=1))
    out.append(S(draw(rng, (3, 4), BF16), axis=1))
    return out


def _np_sort(x, axis=-1, descending=False):
    return np.flip(np.sort(x, axis), axis) if descending else np.sort(x, axis)


def _np_argsort(x, axis=-1, descending=False):
    if not descending:
        return np.argsort(x, axis, kind="stable")
    # Stable descending by its definition: ascending keys (-x), ties in index order.
    keys = -x.astype(np.float64) if x.dtype.kind != "b" else ~x
    return np.argsort(keys, axis, kind="stable")


case("sort", nx.sort, _np_sort, _sort_samples("sort"), grad=True)
case("argsort", nx.argsort, _np_argsort, _sort_samples("argsort"), dtype_rule=index_rule,
     dtype_note="indices are int32 (rune's default int)")


def _cumulative_rule(sample, np_dtype):
    if "dtype" in sample.kwargs:
        return np.dtype(sample.kwargs["dtype"])
    d = sample.args[0].dtype
    return {BOOL: I32, I8: I32, I16: I32, U8: U32, U16: U32}.get(d, d)


def _cumulative_samples(name, standard):
    rng = _rng(name)
    out = []
    for d in (F32, F64, I32):
        for shape, axis in (((5,), 0), ((3, 4), 0), ((3, 4), 1), ((0, 3), 0), ((2, 3, 4), -1)):
            kw = {"axis": axis}
            if standard:
                out.append(S(draw(rng, shape, d, "small"), include_initial=True, **kw))
            out.append(S(draw(rng, shape, d, "small"), **kw))
    for d in (I8, U8, BOOL, F16):
        out.append(S(draw(rng, (3, 4), d, "small"), axis=1))
    out.append(S(draw(rng, (7,), F64, "small"), axis=0, dtype=F32))
    out.append(S(np.array([2.0, 0.0, -3.0, 0.0, 1.5]), axis=0))   # zeros: the product's derivative
    if not standard:
        out.append(S(draw(rng, (3, 4), F64, "small")))               # axis None: flattened
    return out


def _np_cumulative(fn, standard):
    def ref(x, axis=None, dtype=None, include_initial=False):
        want = _cumulative_rule(S(x, **({"dtype": dtype} if dtype else {})), x.dtype)
        if standard:
            return fn(x, axis=axis, dtype=want, include_initial=include_initial)
        return fn(x, axis=axis, dtype=want)
    return ref


case("cumulative_sum", nx.cumulative_sum, _np_cumulative(np.cumulative_sum, True),
     _cumulative_samples("cumulative_sum", True), grad=True, dtype_rule=_cumulative_rule,
     dtype_note="the standard's sum rule: small ints widen to int32/uint32 (NumPy: int64/uint64)")
case("cumulative_prod", nx.cumulative_prod, _np_cumulative(np.cumulative_prod, True),
     _cumulative_samples("cumulative_prod", True), grad=True, dtype_rule=_cumulative_rule)
case("cumsum", nx.cumsum, _np_cumulative(np.cumsum, False), _cumulative_samples("cumsum", False), grad=True,
     dtype_rule=_cumulative_rule)
case("cumprod", nx.cumprod, _np_cumulative(np.cumprod, False), _cumulative_samples("cumprod", False),
     grad=True, dtype_rule=_cumulative_rule)


def _take_along_samples():
    rng = _rng("take_along_axis")
    out = []
    for d in (F32, F64, I32):
        x = draw(rng, (3, 4), d)
        out.append(S(x, rng.integers(-4, 4, (3, 2)).astype(I32), axis=1))
        out.append(S(x, rng.integers(0, 3, (5, 4)).astype(I64), axis=0))
    out.append(S(draw(rng, (2, 3, 4), F64), rng.integers(0, 3, (2, 1, 4)).astype(I32), axis=1))
    out.append(S(draw(rng, (3, 4), F64), rng.integers(0, 4, (3, 4)).astype(U8), axis=-1))
    return out


case("take_along_axis", nx.take_along_axis, lambda x, i, axis=-1: np.take_along_axis(x, i.astype(np.intp), axis),
     _take_along_samples(), grad=True)


def _matrix_samples(name, extra_kwargs=({},)):
    rng = _rng(name)
    return [S(draw(rng, shape, d), **kw) for d in (F64, I32, BOOL) for shape in ((3, 4), (2, 4, 3), (0, 2))
            for kw in extra_kwargs]


case("tril", nx.tril, np.tril, _matrix_samples("tril", ({}, {"k": -1}, {"k": 2})), grad=True)
case("triu", nx.triu, np.triu, _matrix_samples("triu", ({}, {"k": 1}, {"k": -2})), grad=True)
case("matrix_transpose", nx.matrix_transpose, np.matrix_transpose, _matrix_samples("matrix_transpose"),
     grad=True)
case("roll", nx.roll, np.roll, _shape_samples("roll", [
    ((5,), dict(shift=2)), ((3, 4), dict(shift=-1, axis=1)), ((3, 4), dict(shift=5)),
    ((2, 3, 4), dict(shift=(1, -2), axis=(0, 2))), ((0, 3), dict(shift=1, axis=0))]), grad=True)
case("repeat", nx.repeat, np.repeat, _shape_samples("repeat", [
    ((5,), dict(repeats=2)), ((3, 4), dict(repeats=3, axis=1)), ((3, 4), dict(repeats=[1, 0, 2], axis=0)),
    ((2, 3), dict(repeats=2)), ((0,), dict(repeats=2))]), grad=True)
case("tile", nx.tile, lambda x, repetitions: np.tile(x, repetitions), _shape_samples("tile", [
    ((5,), dict(repetitions=3)), ((3, 4), dict(repetitions=(2, 1))), ((3,), dict(repetitions=(2, 1, 2))),
    ((2, 3), dict(repetitions=(0, 2)))]), grad=True, note="np.tile's second argument is named reps")
case("unstack", nx.unstack, lambda x, axis=0: tuple(np.moveaxis(x, axis, 0)), _shape_samples("unstack", [
    ((5,), {}), ((3, 4), dict(axis=1)), ((2, 3, 4), dict(axis=-1))]), grad=True)


def _meshgrid_samples():
    rng = _rng("meshgrid")
    return [S(draw(rng, (3,), d), draw(rng, (4,), d), indexing=ix) for d in (F64, I32) for ix in ("xy", "ij")] + \
        [S(draw(rng, (2,), F64), draw(rng, (3,), F64), draw(rng, (4,), F64), indexing="xy"),
         S(draw(rng, (3,), F64), indexing="ij")]


case("meshgrid", nx.meshgrid, lambda *xs, indexing="xy": tuple(np.meshgrid(*xs, indexing=indexing)),
     _meshgrid_samples(), grad=True, diff_argnums=(0,))


def _diff_samples():
    rng = _rng("diff")
    out = [S(draw(rng, (5,), d)) for d in (F32, F64, I32, BOOL)]
    out += [S(draw(rng, (3, 4), F64), axis=0), S(draw(rng, (3, 5), F64), n=2),
            S(draw(rng, (4,), F64), prepend=draw(rng, (2,), F64)), S(draw(rng, (3, 4), F64), axis=1, append=0.5),
            S(draw(rng, (4,), F64), n=0)]
    return out


case("diff", nx.diff, np.diff, _diff_samples(), grad=True)


def _vecdot_samples():
    rng = _rng("vecdot")
    out = []
    for d in (F32, F64, I32):
        out += [S(draw(rng, (4,), d), draw(rng, (4,), d)), S(draw(rng, (3, 4), d), draw(rng, (4,), d)),
                S(draw(rng, (2, 1, 3), d), draw(rng, (4, 3), d))]
    out.append(S(draw(rng, (3, 4), F64), draw(rng, (3, 4), F64), axis=0))
    out.append(S(draw(rng, (3, 4), I32), draw(rng, (3, 4), F32)))
    return out


case("vecdot", nx.vecdot, lambda a, b, axis=-1: np.vecdot(a, b, axis=axis), _vecdot_samples(), grad=True,
     diff_argnums=(0, 1))


def _count_samples():
    rng = _rng("count_nonzero")
    out = []
    for d in (F64, I32, BOOL):
        for shape, axis in (((5,), None), ((3, 4), 0), ((3, 4), (0, 1)), ((0, 3), 1)):
            x = draw(rng, shape, d) * (rng.random(shape) < 0.6)
            out += [S(x.astype(d), axis=axis), S(x.astype(d), axis=axis, keepdims=True)]
    return out


case("count_nonzero", nx.count_nonzero,
     lambda x, axis=None, keepdims=False: np.asarray(np.count_nonzero(x, axis=axis, keepdims=keepdims)),
     _count_samples(), dtype_rule=index_rule)


def _searchsorted_samples():
    rng = _rng("searchsorted")
    out = []
    for d in (F64, I32):
        x1 = np.sort(draw(rng, (6,), d))
        for side in ("left", "right"):
            out += [S(x1, draw(rng, (3, 4), d), side=side), S(x1, x1.copy(), side=side)]
    out.append(S(draw(rng, (5,), F32), draw(rng, (4,), F32), sorter=None))
    return out


case("searchsorted", nx.searchsorted, lambda a, v, side="left", sorter=None: np.searchsorted(a, v, side),
     [s if "sorter" not in s.kwargs else S(np.sort(s.args[0]), s.args[1]) for s in _searchsorted_samples()],
     dtype_rule=index_rule)


# Data-dependent shapes: eager only (jit raises ConcretizationError; see `traced`).
def _nonzero_samples(name):
    rng = _rng(name)
    out = []
    for d in (F64, I32, BOOL):
        for shape in ((6,), (3, 4), (2, 3, 2), (0, 3)):
            x = draw(rng, shape, d, "small") * (rng.random(shape) < 0.5)
            out.append(S(x.astype(d)))
    return out


case("nonzero", nx.nonzero, np.nonzero, _nonzero_samples("nonzero"), dtype_rule=index_rule, traced=False)


def _unique_samples(name):
    rng = _rng(name)
    out = [S(rng.integers(0, 4, shape).astype(d)) for d in (I32, U8) for shape in ((7,), (3, 4), (0,))]
    out += [S(draw(rng, (5,), F64)), S(np.array([1.0, np.nan, 1.0, np.nan, -2.0])), S(draw(rng, (2, 3), F32))]
    return out


def _unique_rule(sample, np_dtype):
    return I32 if np.dtype(np_dtype).kind == "i" and np.dtype(np_dtype) == I64 else numpy_rule(sample, np_dtype)


for _name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
    # rune's values are sorted (as np.unique's); NumPy 2.3+ unique_values is in hash order.
    case(_name, getattr(nx, _name), (lambda x: np.sort(np.unique_values(x))) if _name == "unique_values" else getattr(np, _name), _unique_samples(_name), traced=False,
         grad=_name == "unique_values", dtype_rule=_unique_rule,
         dtype_note="indices and counts are int32 (rune's default int)")


def _mask_samples():
    rng = _rng("boolean_mask")
    out = []
    for d in (F64, I32):
        for shape, mshape in (((6,), (6,)), ((3, 4), (3, 4)), ((3, 4), (3,)), ((0, 2), (0,))):
            out.append(S(draw(rng, shape, d), rng.random(mshape) < 0.5))
    return out


case("boolean_mask", lambda x, m: x[m], lambda x, m: x[m], _mask_samples(), grad=True, traced=False,
     note="x[mask]: a data-dependent shape")


# The standard's namespace (rune/nx/array_api.py): dtype functions and constants are not ops.
NOT_OPS |= {"finfo", "iinfo", "isdtype", "can_cast", "result_type", "empty", "empty_like", "broadcast_shapes",
            "e", "pi", "inf", "nan", "newaxis"}
ALIASES.update({"bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
                "bitwise_invert": "invert"})


def _isin_samples():
    rng = _rng("isin")
    out = []
    for d in (I32, F64):
        out += [S(draw(rng, (3, 4), d, "small"), draw(rng, (5,), d, "small")),
                S(draw(rng, (6,), d, "small"), draw(rng, (2, 2), d, "small"), invert=True)]
    out.append(S(rng.integers(0, 3, (4,)).astype(I8), rng.integers(0, 3, (3,)).astype(I32)))
    return out


case("isin", nx.isin, lambda a, b, invert=False: np.isin(a, b, invert=invert), _isin_samples())
case("permute_dims", nx.permute_dims, lambda x, axes: np.transpose(x, axes), _shape_samples("permute_dims", [
    ((3, 4), dict(axes=(1, 0))), ((2, 3, 4), dict(axes=(2, 0, 1))), ((5,), dict(axes=(0,)))]), grad=True)


# ---------------------------------------------------------------- nx.linalg (rune/nx/linalg.py)

def _well_conditioned(rng, shape, d):
    m, n = shape[-2:]
    return (rng.standard_normal(shape) + max(m, n) * np.eye(m, n)).astype(d)


def _linalg_samples(name, shapes=((3, 3), (2, 3, 3), (2, 2, 4, 4)), dtypes=(F64, F32), **kw):
    rng = _rng(name)
    return [S(_well_conditioned(rng, s, d), **kw) for d in dtypes for s in shapes]


def _spd_np(a):
    return a @ np.swapaxes(a, -1, -2) + a.shape[-1] * np.eye(a.shape[-1], dtype=a.dtype)


def _spd_nx(a):
    return nx.matmul(a, nx.matrix_transpose(a)) + nx.asarray(a.shape[-1] * np.eye(a.shape[-1]), a.dtype)


_LINALG_TOL = {F32: (2e-4, 2e-4), F64: (1e-9, 1e-9)}


def _linalg_case(name, fn, ref, samples, **kw):
    case("linalg." + name, fn, ref, samples, tol=_LINALG_TOL, **kw)


def _solve_samples():
    rng = _rng("linalg.solve")
    return [S(_well_conditioned(rng, (3, 3), d), draw(rng, (3,), d)) for d in (F64, F32)] + \
        [S(_well_conditioned(rng, (2, 3, 3), F64), draw(rng, (2, 3, 2), F64)),
         S(_well_conditioned(rng, (3, 3), F64), draw(rng, (2, 3, 4), F64))]


_linalg_case("solve", nx.linalg.solve, np.linalg.solve, _solve_samples(), grad=True, diff_argnums=(0, 1))
_linalg_case("inv", nx.linalg.inv, np.linalg.inv, _linalg_samples("linalg.inv"), grad=True)
_linalg_case("det", nx.linalg.det, np.linalg.det, _linalg_samples("linalg.det"), grad=True)
_linalg_case("slogdet", nx.linalg.slogdet, lambda a: tuple(np.linalg.slogdet(a)), _linalg_samples("linalg.slogdet"),
             grad=True)
_linalg_case("cholesky", lambda a, upper=False: nx.linalg.cholesky(_spd_nx(a), upper=upper),
             lambda a, upper=False: (np.swapaxes if upper else (lambda x, *_: x))(np.linalg.cholesky(_spd_np(a)), -1, -2),
             _linalg_samples("linalg.cholesky") + [S(_well_conditioned(_rng("chol_u"), (3, 3), F64), upper=True)],
             grad=True, note="of a @ a.T + n I (symmetric positive definite)")
# Eigenvectors are defined up to sign: the table compares v * v (sign-free).
_linalg_case("eigh", lambda a: (lambda r: (r.eigenvalues, r.eigenvectors * r.eigenvectors))(nx.linalg.eigh(_spd_nx(a))),
             lambda a: (lambda w, v: (w, v * v))(*np.linalg.eigh(_spd_np(a))), _linalg_samples("linalg.eigh"),
             grad=True, note="of a @ a.T + n I; eigenvectors squared (their sign is arbitrary)")
_linalg_case("eigvalsh", lambda a: nx.linalg.eigvalsh(_spd_nx(a)), lambda a: np.linalg.eigvalsh(_spd_np(a)),
             _linalg_samples("linalg.eigvalsh"), grad=True)
_linalg_case("svdvals", nx.linalg.svdvals, np.linalg.svdvals,
             _linalg_samples("linalg.svdvals", shapes=((3, 3), (2, 4, 3), (3, 5))), grad=True)
_linalg_case("svd", lambda a: (lambda r: (r.U * r.U, r.S, r.Vh * r.Vh))(nx.linalg.svd(a, full_matrices=False)),
             lambda a: (lambda u, s, vh: (u * u, s, vh * vh))(*np.linalg.svd(a, full_matrices=False)),
             _linalg_samples("linalg.svd", shapes=((3, 3), (2, 4, 3), (3, 5))), note="U, Vh squared (signs arbitrary)")
_linalg_case("qr", lambda a: (lambda r: (r.Q * r.Q, r.R * r.R))(nx.linalg.qr(a)),
             lambda a: (lambda q, r: (q * q, r * r))(*np.linalg.qr(a)),
             _linalg_samples("linalg.qr", shapes=((3, 3), (2, 4, 3), (3, 5))), note="squared (signs arbitrary)")
_linalg_case("pinv", nx.linalg.pinv, np.linalg.pinv, _linalg_samples("linalg.pinv", shapes=((3, 3), (2, 4, 3))))
_linalg_case("matrix_rank", nx.linalg.matrix_rank, lambda a: np.linalg.matrix_rank(a).astype(I32),
             _linalg_samples("linalg.matrix_rank", shapes=((3, 3), (2, 4, 3))) +
             [S(np.array([[1.0, 2.0], [2.0, 4.0]]))])
_linalg_case("matrix_power", lambda a, n: nx.linalg.matrix_power(a, n), lambda a, n: np.linalg.matrix_power(a, n),
             [S(_well_conditioned(_rng("mpow"), (3, 3), F64) / 3, n=n) for n in (0, 1, 3, 6, -2)] +
             [S(_well_conditioned(_rng("mpow2"), (2, 3, 3), F32) / 3, n=2)], grad=True)
_linalg_case("matrix_norm", nx.linalg.matrix_norm,
             lambda a, ord="fro", keepdims=False: np.linalg.matrix_norm(a, ord=ord, keepdims=keepdims),
             [S(_well_conditioned(_rng("mnorm"), (2, 3, 4) if o != "nuc" else (3, 4), F64), ord=o)
              for o in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf)] +
             [S(_well_conditioned(_rng("mnorm"), (3, 3), F32), keepdims=True)], grad=True)
_linalg_case("vector_norm", nx.linalg.vector_norm,
             lambda x, axis=None, keepdims=False, ord=2: np.asarray(np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)),
             [S(draw(_rng("vnorm"), (3, 4), F64), ord=o, axis=ax) for o in (2, 1, np.inf, -np.inf, 3, 0)
              for ax in (None, 1)] + [S(draw(_rng("vnorm"), (2, 3, 4), F32), axis=(0, 2), keepdims=True)],
             grad=True)
_linalg_case("outer", nx.linalg.outer, np.outer, [S(draw(_rng("louter"), (3,), d), draw(_rng("louter"), (4,), d))
                                               for d in (F64, I32)], grad=True, diff_argnums=(0, 1))
_linalg_case("diagonal", nx.linalg.diagonal, lambda x, offset=0: np.diagonal(x, offset, -2, -1),
             [S(draw(_rng("ldiag"), s, d), offset=o) for s in ((3, 4), (2, 4, 3)) for d in (F64, I32)
              for o in (0, 1, -2)], grad=True)
_linalg_case("trace", nx.linalg.trace, lambda x, offset=0: np.trace(x, offset, -2, -1),
             [S(draw(_rng("ltrace"), s, F64), offset=o) for s in ((3, 4), (2, 4, 3)) for o in (0, 1)], grad=True)
_linalg_case("cross", nx.linalg.cross, lambda a, b, axis=-1: np.cross(a, b, axis=axis),
             [S(draw(_rng("lcross"), (4, 3), F64), draw(_rng("lcross2"), (3,), F64)),
              S(draw(_rng("lcross"), (3, 2), F64), draw(_rng("lcross3"), (3, 2), F64), axis=0),
              S(draw(_rng("lcross"), (3,), I32), draw(_rng("lcross4"), (3,), I32))], grad=True, diff_argnums=(0, 1))



def _concat_axis_samples():
    rng = _rng("concat")
    return [S(draw(rng, (), d), draw(rng, (), d), axis=None) for d in (U8, F64)] + \
        [S(draw(rng, (2, 3), F64), draw(rng, (3,), F64), axis=None),
         S(draw(rng, (2, 3), F64), draw(rng, (1, 3), F64), axis=0)]


case("concat", lambda *xs, axis=0: nx.concat(list(xs), axis=axis),
     lambda *xs, axis=0: np.concat(xs, axis=axis), _concat_axis_samples(), grad=True, diff_argnums=(0, 1),
     note="the standard's concat (axis=None joins the flattened arrays)")
for _name, _ref in (("real", np.real), ("imag", np.imag), ("conj", np.conj)):
    case(_name, getattr(nx, _name), _ref, _any_unary_samples(_name, "real", (I32, U8, F16)), grad=True,
         note="a real number is its own real part and conjugate (complex samples: below)")

for _name in ("fftshift", "ifftshift"):
    case("fft." + _name, getattr(nx.fft, _name), getattr(np.fft, _name), _shape_samples("fft." + _name, [
        ((5,), {}), ((4, 5), {}), ((4, 5), dict(axes=1)), ((2, 3, 4), dict(axes=(0, 2)))]), grad=True)


# -- complex64 and complex128: samples added to the cases of the functions the
# standard defines for complex numbers, and the complex-only functions.

COMPLEX = (C128, C64)
_COMPLEX_UNARY = {"exp": "small", "log": "positive", "log1p": "positive", "expm1": "small",
                  "sqrt": "positive", "sin": "small", "cos": "small", "tan": "unit", "sinh": "small",
                  "cosh": "small", "tanh": "small", "asin": "unit", "acos": "unit", "atan": "unit",
                  "asinh": "real", "acosh": "above1", "atanh": "unit", "log2": "positive",
                  "log10": "positive", "square": "real", "reciprocal": "nonzero", "negative": "real",
                  "abs": "nonzero", "sign": "nonzero", "real": "real", "imag": "real", "conj": "real",
                  "isnan": "special", "isfinite": "special", "isinf": "special", "positive": "real"}
_COMPLEX_BINARY = {"add": ("real", "real"), "subtract": ("real", "real"), "multiply": ("real", "real"),
                   "divide": ("real", "nonzero"), "power": ("positive", "small"),
                   "equal": ("frac", "frac"), "not_equal": ("frac", "frac")}
FLOAT_DOMAINS.setdefault("above1", lambda rng, shape: rng.uniform(1.5, 3.0, size=shape))


def _complex_unary_samples(name, domain):
    rng = _rng("complex " + name)
    return [S(draw(rng, shape, d, domain)) for d in COMPLEX for shape in ((), (5,), (3, 4))]


def _complex_binary_samples(name, domains):
    rng = _rng("complex " + name)
    dx, dy = domains
    out = [S(draw(rng, sx, d, dx), draw(rng, sy, d, dy)) for d in COMPLEX
           for sx, sy in (((), ()), ((3, 4), (3, 4)), ((3, 1), (4,)))]
    out.append(S(draw(rng, (3, 4), C128, dx), draw(rng, (4,), F64, dy)))     # complex with float: complex
    out.append(S(draw(rng, (3,), F32, dx), draw(rng, (3,), C64, dy)))
    if name not in ("equal", "not_equal"):
        out.append(S(draw(rng, (3,), C128, dx), 1.5 - 0.5j if name != "power" else 2.0))  # weak scalars
        out.append(S(draw(rng, (3,), F64, dx), 0.5 + 0.25j))
    return out


def _extend(name, samples):
    case = next(c for c in TABLE if c.name == name)
    case.samples.extend(samples)
    _uniquify(case.samples)


for _name, _domain in _COMPLEX_UNARY.items():
    _extend(_name, _complex_unary_samples(_name, _domain))
for _name, _domains in _COMPLEX_BINARY.items():
    _extend(_name, _complex_binary_samples(_name, _domains))
for _name in ("sum", "prod", "mean"):
    _extend(_name, [S(draw(_rng("complex " + _name), (3, 4), d, "small"), axis=a, keepdims=k)
                    for d in COMPLEX for a, k in ((None, False), (0, True), (1, False))])
_extend("matmul", [S(draw(_rng("complex matmul"), (3, 4), d), draw(_rng("complex matmul 2"), (4, 2), d))
                   for d in COMPLEX] + [S(draw(_rng("complex matmul"), (2, 3), C128),
                                          draw(_rng("complex matmul 3"), (3,), F64))])
_extend("where", [S(draw(_rng("complex where"), (3, 4), BOOL), draw(_rng("complex where"), (3, 4), C128),
                    draw(_rng("complex where 2"), (4,), C128))])
_extend("reshape", [S(draw(_rng("complex reshape"), (3, 4), C128), shape=(2, 6))])

case("angle", nx.angle, np.angle, _complex_unary_samples("angle", "nonzero") +
     [S(draw(_rng("angle"), (5,), F64, "nonzero")), S(draw(_rng("angle"), (5,), I32, "real"))],
     grad=True, domain="nonzero", dtype_note="int32 gives float64, as NumPy")
case("make_complex", nx.make_complex, lambda re, im: np.asarray(re + 1j * np.asarray(im)),
     [S(draw(_rng("make_complex"), s, d), draw(_rng("make_complex 2"), s2, d)) for d in (F64, F32)
      for s, s2 in (((), ()), ((3, 4), (4,)), ((2, 1), (1, 3)))] +
     [S(draw(_rng("make_complex"), (3,), F64), 2.0)],
     grad=True, diff_argnums=(0, 1), dtype_rule=lambda sample, d: C64 if sample.args[0].dtype == F32 else d,
     note="complex(re, im), as JAX's lax.complex; float32 parts give complex64")
ALIASES["conjugate"] = "conj"


def _fft_samples(name, real_input, specs):
    rng = _rng("fft " + name)
    dtypes = (F64, F32) if real_input else (C128, C64)
    return [S(draw(rng, shape, dtypes[i % 2]), **kw) for i, (shape, kw) in enumerate(specs)]


_ONE_AXIS = [((8,), {}), ((3, 6), dict(n=4)), ((3, 5), dict(n=7, axis=0)), ((2, 6), dict(norm="ortho")),
             ((6,), dict(norm="forward"))]
_MANY_AXES = [((4, 6), {}), ((2, 3, 4), dict(axes=(0, 2))), ((3, 4), dict(s=(5, 3), axes=(1, 0))),
              ((4, 4), dict(norm="ortho"))]
for _name, _real, _specs in (("fft", False, _ONE_AXIS), ("ifft", False, _ONE_AXIS), ("rfft", True, _ONE_AXIS),
                             ("irfft", False, _ONE_AXIS), ("hfft", False, _ONE_AXIS), ("ihfft", True, _ONE_AXIS),
                             ("fftn", False, _MANY_AXES), ("ifftn", False, _MANY_AXES),
                             ("rfftn", True, _MANY_AXES), ("irfftn", False, _MANY_AXES)):
    case("fft." + _name, getattr(nx.fft, _name), getattr(np.fft, _name), _fft_samples(_name, _real, _specs),
         grad=True, dtype_note="single precision stays single (NumPy 2 too)")

# The rest of NumPy's surface, one table file per family of rune/nx (each calls `case`).
import op_table_shaping, op_table_index_tricks, op_table_numeric, op_table_statistics, op_table_polynomial  # noqa: E402,F401,I001

BY_NAME = {c.name: c for c in TABLE}
assert len(BY_NAME) == len(TABLE), "duplicate case names"


def expected_dtype(case, sample, np_dtype):
    """The dtype rune should give for `sample`, given NumPy's dtype for it."""
    rule = case.dtype_rule or numpy_rule
    return np.dtype(rule(sample, np_dtype))


def assert_traced_avals(fn, args, result, where):
    """`result` (of running `fn(*args)` eagerly or under jit) has the shapes and
    dtypes its traced program promises: a backend's run-time dtype equals the
    abstract rule's for every primitive (NumPy's bfloat16 matmul, for one, would
    return float32 where the program says bfloat16)."""
    avals = rune.trace(fn)(*args).out_avals
    leaves = rune.tree.leaves(result)
    assert len(leaves) == len(avals), f"{where}: {len(leaves)} results, the program has {len(avals)}"
    for i, (leaf, aval) in enumerate(zip(leaves, avals)):
        got, want = (tuple(leaf.shape), np.dtype(leaf.dtype)), (tuple(aval.shape), np.dtype(aval.dtype))
        assert got == want, f"{where} result {i}: ran as {got}, traced as {want}"


def all_samples():
    """(case, sample) for every sample of every case."""
    return [(c, s) for c in TABLE for s in c.samples]
