"""Differential fuzzing of the kernel compiler.

Random programs (DAGs of 1-30 elementwise, movement (pad and concatenate included),
(integer) reduction, argmax/argmin, iota, gather, dynamic_slice and scatter primitives over
broadcastable shapes with size-0 and size-1 axes, transposed, reversed and
strided views, all 15 dtypes, complex64/complex128 included) run three ways: compiled to C kernels under
jit, under jit with the compiler off (`RUNE_CC=none`: NumPy stretches) and
eagerly (the NumPy backend, the oracle). The programs use only operations
NumPy and C both round exactly (no transcendental functions: those are
checked per primitive within an ulp bound in test_compiler.py), so all three
must agree bit for bit, NaN payloads aside.

`RUNE_FUZZ_PROGRAMS` (default 2000) sets how many programs the batch test
builds; all their kernels are compiled in a few batched compiler runs.
"""
import os
from contextlib import contextmanager

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rune
from rune import nx
from rune.core.prims import P, broadcast_shapes
from rune.core.trace import bind
from rune.errors import RuneError
from rune.jit.lower import compile_pending

from compiled import assert_compiled_where_lowerable, needs_cc

BF16 = np.dtype(ml_dtypes.bfloat16)
pytestmark = needs_cc
BOOL = np.dtype(bool)
DTYPES = [BOOL] + [np.dtype(t) for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                          "uint64", "float16")] + [BF16] + [np.dtype(t) for t in ("float32", "float64", "complex64",
                                                                           "complex128")]
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
# The operations each kind of dtype has (float, signed, unsigned, bool, complex). Complex
# mul and div are left out: NumPy's loops round them differently by memory layout (FMA
# in its contiguous SIMD loops), so eager and a jit stretch need not agree bit for bit.
UNARY = {"f": ("neg", "abs", "sqrt", "floor", "ceil", "round", "sign", "stop_gradient", "isnan", "isfinite"),
         "i": ("neg", "abs", "sign", "not", "stop_gradient", "isnan", "isfinite"),
         "b": ("not", "stop_gradient"),
         "c": ("neg", "conj", "real", "imag", "stop_gradient", "isnan", "isfinite")}
BINARY = {"f": ("add", "sub", "mul", "div", "floordiv", "rem", "max", "min") + COMPARE,
          "i": ("add", "sub", "mul", "floordiv", "rem", "max", "min", "and", "or", "xor",
                "shift_left", "shift_right") + COMPARE,
          "b": ("and", "or", "xor", "max", "min") + COMPARE,
         "c": ("add", "sub", "eq", "ne")}
KINDS = ("unary", "binary", "binary", "binary", "select", "convert", "transpose", "rev", "slice",
         "broadcast", "reshape", "reduce", "pad", "concat", "iota", "arg", "gather", "dslice", "scatter")
# Integer and boolean reductions are exact in any order; float ones are checked
# within a bound in test_compiler.py (the summation order differs from NumPy's).
REDUCE = ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")
N_PROGRAMS = int(os.environ.get("RUNE_FUZZ_PROGRAMS", "2000"))


class RngChoices:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def integer(self, lo, hi):
        return int(self.rng.integers(lo, hi + 1))


class DataChoices:
    def __init__(self, data):
        self.data = data

    def pick(self, seq):
        return self.data.draw(st.sampled_from(list(seq)))

    def integer(self, lo, hi):
        return self.data.draw(st.integers(lo, hi))


def _values(ch, dtype, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        vals = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
        small = rng.integers(-9 if info.min < 0 else 0, 9, size=n).astype(dtype)
        return np.where(rng.random(n) < 0.6, small, vals).reshape(shape)
    if dtype.kind == "c":   # each part drawn like a float's
        part = np.float32 if dtype == np.dtype("complex64") else np.float64
        out = np.empty(shape, dtype)
        out.real, out.imag = (_values(ch, np.dtype(part), shape, seed + k) for k in (1, 2))
        return out
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 1e30])
    vals = np.where(rng.random(n) < 0.3, rng.choice(special, n), np.round(rng.standard_normal(n) * 8, 2))
    with np.errstate(all="ignore"):
        return vals.astype(dtype).reshape(shape)


def generate(ch):
    """A random program: input (shape, dtype) pairs and a list of steps over value indices."""
    ndim = ch.integer(0, 3)
    base = tuple(ch.pick((0, 1, 2, 3, 5)) if ch.integer(0, 9) == 0 else ch.pick((1, 2, 3, 4, 5))
                 for _ in range(ndim))
    inputs = []
    for _ in range(ch.integer(1, 3)):
        shape = tuple(d if ch.integer(0, 3) else 1 for d in base)[ch.integer(0, ndim):]
        inputs.append((shape, ch.pick(DTYPES)))
    steps = []
    shapes = [s for s, _ in inputs]
    dtypes = [d for _, d in inputs]
    for _ in range(ch.integer(1, 30)):
        step = _step(ch, shapes, dtypes)
        if step is None:
            continue
        steps.append(step)
        shape, dtype = _abstract(step, shapes, dtypes)
        shapes.append(shape)
        dtypes.append(dtype)
    outs = sorted({len(shapes) - 1, ch.integer(0, len(shapes) - 1)})
    return inputs, steps, outs


def _step(ch, shapes, dtypes):
    kind = ch.pick(KINDS)
    i = ch.integer(0, len(shapes) - 1)
    shape, dtype = shapes[i], dtypes[i]
    if kind == "unary":
        return ("unary", ch.pick(UNARY[_family(dtype)]), (i,), {})
    if kind in ("binary", "select"):
        partners = [j for j in range(len(shapes)) if _broadcasts(shape, shapes[j])]
        j = ch.pick(partners)
        if kind == "binary":
            return ("binary", ch.pick(BINARY[_family(dtype)]), (i, j), {})
        bools = [k for k in range(len(shapes)) if dtypes[k] == BOOL and _broadcasts(shape, shapes[k])
                 and _broadcasts(broadcast_shapes("t", shape, shapes[j]), shapes[k])]
        if not bools:
            return None
        return ("select", "select", (ch.pick(bools), i, j), {})
    if kind == "convert":
        dst = ch.pick(DTYPES)
        if dtype.kind == "c" and dst.kind != "c":
            return None  # NumPy warns and drops the imaginary part: real/imag say which part
        if dtype.kind == "f" or dtype == BF16:
            if dst.kind in "iu" and dst.itemsize == 4 and dst.kind == "u":
                return None  # eager's own scalar and SIMD loops disagree out of range (test_compiler)
        return ("convert", "convert", (i,), {"dtype": dst})
    if kind == "iota":
        if not shape or dtype == BOOL or dtype.kind == "c":
            return None
        start = ch.integer(-3, 3) if dtype.kind != "u" else ch.integer(0, 3)
        return ("iota", "iota", (i,), {"dimension": ch.integer(0, len(shape) - 1), "start": start})
    if not shape:
        return None
    nd = len(shape)
    if kind == "arg":
        axis = ch.integer(0, nd - 1)
        if shape[axis] == 0 or dtype.kind == "c":
            return None
        return ("move", ch.pick(("argmax", "argmin")), (i,),
                {"axis": axis, "index_dtype": ch.pick((np.dtype("int32"), np.dtype("int64")))})
    if kind in ("gather", "scatter"):
        axis = ch.integer(0, nd - 1)
        n = shape[axis]
        if n == 0:
            return None
        ishape = ch.pick(((), (2,), (3,), (2, 2)))
        idx = tuple(ch.integer(-n - 2, n + 2) for _ in range(int(np.prod(ishape))))
        params = {"axis": axis, "idx": idx, "ishape": ishape}
        if kind == "gather":
            return ("gather", "gather", (i,), params)
        ushape = shape[:axis] + ishape + shape[axis + 1:]
        fits = [j for j in range(len(shapes)) if _broadcasts(ushape, shapes[j])
                and broadcast_shapes("t", ushape, shapes[j]) == ushape]
        if not fits:
            return None
        mode = ch.pick(("set", "add") if dtype.kind == "c" else ("set", "add", "min", "max"))
        return ("scatter", "scatter", (i, ch.pick(fits)), dict(params, mode=mode, ushape=ushape))
    if kind == "dslice":
        sizes = tuple(ch.integer(0, d) for d in shape)
        starts = tuple(ch.integer(-d - 1, d + 1) for d in shape)
        return ("dslice", "dynamic_slice", (i,), {"sizes": sizes, "starts": starts})
    if kind == "concat":
        axis = ch.integer(0, nd - 1)
        fits = [j for j in range(len(shapes)) if len(shapes[j]) == nd
                and all(a == axis or shapes[j][a] == shape[a] for a in range(nd))]
        return ("concat", "concatenate", (i, ch.pick(fits), ch.pick(fits)), {"axis": axis})
    if kind == "pad":
        config = tuple((ch.integer(0, 2), ch.integer(0, 2)) for _ in shape)
        return ("pad", "pad", (i,), {"config": config, "value": ch.pick((0, 1))})
    if kind == "reduce":
        axes = tuple(a for a in range(nd) if ch.integer(0, 1)) or (nd - 1,)
        op = ch.pick(REDUCE)
        if _family(dtype) in "fc" or (op in ("reduce_max", "reduce_min") and 0 in [shape[a] for a in axes]):
            return None
        return ("move", op, (i,), {"axes": axes})
    if kind == "transpose":
        perm = list(range(nd))
        for a in range(nd - 1, 0, -1):
            b = ch.integer(0, a)
            perm[a], perm[b] = perm[b], perm[a]
        return ("move", "transpose", (i,), {"perm": tuple(perm)})
    if kind == "rev":
        return ("move", "rev", (i,), {"axes": tuple(a for a in range(nd) if ch.integer(0, 1))})
    if kind == "slice":
        starts, limits, strides = [], [], []
        for d in shape:
            s = ch.integer(0, d)
            starts.append(s)
            limits.append(ch.integer(s, d))
            strides.append(ch.integer(1, 2))
        return ("move", "slice", (i,), {"starts": tuple(starts), "limits": tuple(limits),
                                        "strides": tuple(strides)})
    if kind == "broadcast":
        new = tuple(ch.pick((1, 2, 3)) if d == 1 else d for d in shape)
        return ("move", "broadcast_to", (i,), {"shape": (ch.pick((1, 2)),) + new})
    size = int(np.prod(shape))
    target = ch.pick([(size,), (1, size), (size, 1)] + ([tuple(reversed(shape))] if False else []))
    return ("move", "reshape", (i,), {"shape": target})


def _family(dtype):
    return "b" if dtype == BOOL else "i" if dtype.kind in "iu" else "c" if dtype.kind == "c" else "f"


def _broadcasts(a, b):
    try:
        broadcast_shapes("t", a, b)
        return True
    except RuneError:
        return False


def _abstract(step, shapes, dtypes):
    kind, name, ins, params = step
    if kind in ("iota", "scatter"):
        return shapes[ins[0]], dtypes[ins[0]]
    if kind == "dslice":
        return params["sizes"], dtypes[ins[0]]
    if kind == "gather":
        shape, axis = shapes[ins[0]], params["axis"]
        return shape[:axis] + params["ishape"] + shape[axis + 1:], dtypes[ins[0]]
    if kind == "pad":
        return tuple(d + lo + hi for d, (lo, hi) in zip(shapes[ins[0]], params["config"])), dtypes[ins[0]]
    if kind == "concat":
        shape = list(shapes[ins[0]])
        shape[params["axis"]] = sum(shapes[i][params["axis"]] for i in ins)
        return tuple(shape), dtypes[ins[0]]
    if kind == "move":
        from rune.core.aval import Aval
        from rune.core.primitive import abstract_rules
        aval = abstract_rules[P[name]](Aval(shapes[ins[0]], dtypes[ins[0]]), **params)
        return aval.shape, aval.dtype
    shape = broadcast_shapes("t", *(shapes[i] for i in ins))
    if name in ("isnan", "isfinite", "eq", "ne", "lt", "le", "gt", "ge"):
        return shape, BOOL
    if name == "convert":
        return shape, params["dtype"]
    if name in ("real", "imag"):
        return shape, np.dtype(np.float32 if dtypes[ins[0]] == np.dtype("complex64") else np.float64)
    return shape, dtypes[ins[1] if name == "select" else ins[0]]  # operands convert to this one


def _cast(x, dtype):
    """x as dtype; float -> uint32 goes through int64, since eager's own float ->
    uint32 casts of out-of-range values differ between its scalar and SIMD loops.
    Complex to a real dtype takes the real part first (NumPy warns on that cast)."""
    if x.dtype.kind == "c" and dtype.kind != "c":
        x = bind(P["real"], x)
    if dtype == np.dtype("uint32") and (x.dtype.kind == "f" or x.dtype == BF16):
        x = bind(P["convert"], x, dtype=np.dtype("int64"))
    return bind(P["convert"], x, dtype=dtype)


def program_fn(steps, outs):
    def f(*xs):
        vals = list(xs)
        for kind, name, ins, params in steps:
            args = [vals[i] for i in ins]
            if kind == "binary" and args[1].dtype != args[0].dtype:
                args[1] = _cast(args[1], args[0].dtype)
            if kind == "select":
                if args[2].dtype != args[1].dtype:
                    args[2] = _cast(args[2], args[1].dtype)
            if kind == "concat":
                args = [args[0]] + [_cast(a, args[0].dtype) if a.dtype != args[0].dtype else a for a in args[1:]]
            if kind == "iota":   # added to its operand, so the iota is read in the operand's kernel
                dt = args[0].dtype
                io = bind(P["iota"], np.asarray(params["start"], dt), shape=args[0].shape,
                          dimension=params["dimension"], device=None)
                vals.append(bind(P["add"], args[0], io))
                continue
            if kind in ("gather", "scatter"):   # constant indices, some out of range
                idx = nx.asarray(np.array(params["idx"], np.int32).reshape(params["ishape"]))
                if kind == "gather":
                    vals.append(bind(P["gather"], args[0], idx, axis=params["axis"]))
                else:
                    upd = args[1] if args[1].dtype == args[0].dtype else _cast(args[1], args[0].dtype)
                    upd = bind(P["broadcast_to"], upd, shape=params["ushape"])
                    vals.append(bind(P["scatter"], args[0], idx, upd, axis=params["axis"], mode=params["mode"]))
                continue
            if kind == "dslice":
                starts = [nx.asarray(np.int32(s)) for s in params["starts"]]
                vals.append(bind(P["dynamic_slice"], args[0], *starts, sizes=params["sizes"]))
                continue
            if kind == "pad":  # the padding value is a captured constant of the operand's dtype
                value = nx.asarray(np.array(params["value"], args[0].dtype))
                vals.append(bind(P["pad"], args[0], value, config=params["config"]))
                continue
            vals.append(bind(P[name], *args, **params))
        return [vals[i] for i in outs]
    return f


@contextmanager
def no_compiler():
    old = os.environ.get("RUNE_CC")
    os.environ["RUNE_CC"] = "none"
    try:
        yield
    finally:
        if old is None:
            del os.environ["RUNE_CC"]
        else:
            os.environ["RUNE_CC"] = old


def prepare(ch, seed):
    """(arrays, eager results, compiled jit, fallback jit) or None if eager rejects the program."""
    inputs, steps, outs = generate(ch)
    arrays = [nx.asarray(_values(ch, d, s, seed * 7 + k)) for k, (s, d) in enumerate(inputs)]
    f = program_fn(steps, outs)
    try:
        with np.errstate(all="ignore"):
            want = f(*arrays)
    except Exception:
        return None  # e.g. NumPy's boolean subtract: an error eager raises too
    compiled, fallback = rune.jit(f), rune.jit(f)
    compiled.plan(*arrays)
    with no_compiler():
        fallback.plan(*arrays)
    return arrays, want, compiled, fallback, (inputs, steps, outs)


def check(prepared):
    arrays, want, compiled, fallback, program = prepared
    plan = compiled.plan(*arrays)
    assert_compiled_where_lowerable(plan)
    assert not fallback.plan(*arrays).kernels
    for how, jf in (("compiled", compiled), ("numpy fallback", fallback)):
        got = jf(*arrays)
        for g, w in zip(got, want):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape
            if w.dtype.kind == "c":   # both parts, as floats
                g, w = np.stack([g.real, g.imag]), np.stack([w.real, w.imag])
            if w.dtype.kind == "f" or w.dtype == BF16:
                g64, w64 = g.astype(np.float64), w.astype(np.float64)
                ok = ((g64 == w64) & (np.signbit(g64) == np.signbit(w64))) | (np.isnan(g64) & np.isnan(w64))
            else:
                ok = g == w
            assert ok.all(), (f"{how} differs from eager for program {program}\n"
                              f"got {g[~ok]}\nwant {w[~ok]}\n{plan!r}")


def test_many_random_programs_compiled_in_batches():
    prepared = []
    for seed in range(N_PROGRAMS):
        p = prepare(RngChoices(seed), seed)
        if p is not None:
            prepared.append(p)
    assert len(prepared) > 0.95 * N_PROGRAMS
    compile_pending()
    kernels = 0
    for p in prepared:
        check(p)
        kernels += len(p[2].plan(*p[0]).kernels)
    assert kernels > N_PROGRAMS


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_programs_shrinkable(data):
    p = prepare(DataChoices(data), 1)
    if p is not None:
        check(p)
