"""The codegen layer (rune/codegen): the kernel IR and its C and CUDA dialects.

- Every elementwise primitive renders, in both dialects, for every dtype
  signature the nx layer binds it with (found by tracing the nx functions on
  every dtype), or is listed in NOT_LOWERED with its reason; `can_render` agrees
  with both. The C kernels (one unit, one compile) and the CUDA kernels run in
  the CPU emulation (tests/cuda_emu, one build) give the eager backend's values
  (NumPy with rune's rules) on edge cases: exactly, or within a stated ulp bound
  for the math library's transcendental functions. Every CUDA kernel compiles
  with NVRTC (one program).
- log2 and log10 lie within LOG_ULPS of NumPy's; hypot within 2 ulp of the exact
  value (rune's rule, rune/base/numerics.py HYPOT_SCALES).
- Rendering is pure: the IR is the same after rendering (compared with a deep
  copy taken before), and 8 threads rendering distinct units at once, or
  planning distinct functions at once, get what they get one at a time.
- codegen imports nothing above it (only rune.errors, rune.base's numerics, vocabulary
  and tuning, NumPy and the standard library).
"""
import ast
import copy
import ctypes
import decimal
import os
import pathlib
import subprocess
import sys
import threading
import warnings

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu import compiler as c_compiler
from rune.backends.cuda import nvrtc
from rune.codegen import cstyle, expressions
from rune.codegen.c import CDialect
from rune.codegen.cuda import CudaDialect, DeviceProps
from rune.codegen.kernel import Buffer, Const, Kernel, Load, Node, Store
from rune.compiler.target import TargetStretch
from rune.core.primitive import Lowering
from rune.core.prims import P
from rune.core.trace import bind

import cuda_emu

BOOL, BF16 = np.dtype(bool), np.dtype(ml_dtypes.bfloat16)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
DTYPES = [np.dtype(t) for t in (bool, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
                                np.complex64, np.complex128)]
CODEGEN = pathlib.Path(rune.__file__).parent / "codegen"

needs_gxx = pytest.mark.skipif(cuda_emu.CXX is None, reason="no g++ to build the CUDA emulation")


# ---------------------------------------------------------------- the signatures nx binds

# Every elementwise function of nx (and the composites that bind elementwise
# primitives of their own), by arity. Tracing each on every dtype gives the
# (op, operand dtypes, result dtype) signatures the planner meets.
UNARY_FUNCTIONS = (nx.negative, nx.exp, nx.log, nx.log1p, nx.expm1, nx.log2, nx.log10, nx.sqrt, nx.rsqrt,
                   nx.sin, nx.cos, nx.tan, nx.tanh, nx.sinh, nx.cosh, nx.asin, nx.acos, nx.atan, nx.asinh,
                   nx.acosh, nx.atanh, nx.erf, nx.sigmoid, nx.floor, nx.ceil, nx.round, nx.trunc, nx.sign,
                   nx.abs, nx.bitwise_not, nx.logical_not, nx.stop_gradient, nx.isnan, nx.isfinite, nx.isinf,
                   nx.signbit, nx.real, nx.imag, nx.conj, nx.square, nx.reciprocal, nx.cbrt)
BINARY_FUNCTIONS = (nx.add, nx.subtract, nx.multiply, nx.divide, nx.floor_divide, nx.remainder, nx.pow,
                    nx.maximum, nx.minimum, nx.atan2, nx.hypot, nx.copysign, nx.logaddexp, nx.nextafter,
                    nx.bitwise_and, nx.bitwise_or, nx.bitwise_xor, nx.logical_and, nx.logical_or,
                    nx.logical_xor, nx.left_shift, nx.right_shift, nx.equal, nx.not_equal, nx.less,
                    nx.less_equal, nx.greater, nx.greater_equal, nx.make_complex)


def _traced_signatures():
    """{(op, operand dtypes, result dtype): params} of every elementwise equation the
    functions above (and where, astype) bind on every dtype nx accepts for them."""
    calls = [(f, (d,)) for f in UNARY_FUNCTIONS for d in DTYPES]
    calls += [(f, (d, d)) for f in BINARY_FUNCTIONS for d in DTYPES]
    calls += [(nx.where, (BOOL, d, d)) for d in DTYPES]
    calls += [(lambda x, to=to: nx.astype(x, to), (d,)) for d in DTYPES for to in DTYPES]
    out = {}
    for f, dtypes in calls:
        try:
            program = rune.jit(f).trace(*[np.ones(3, d) for d in dtypes])
        except rune.errors.RuneError:   # a dtype this function refuses
            continue
        for e in program.eqns:
            if e.prim.lowering in (None, Lowering.ELEMENTWISE) and not e.prim.multiple_results:
                op = e.prim.ir_op or e.prim.name
                out.setdefault((op, tuple(a.aval.dtype for a in e.inputs), e.outputs[0].aval.dtype), e.params)
    return out


# Complex functions whose NumPy loops complexc does not spell (their branch cuts and
# special values are NumPy's own algorithms): the planner leaves them to eager.
_COMPLEX_LEFT_TO_NUMPY = ("log", "log1p", "expm1", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan",
                          "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "pow")

# (op, operand dtypes, result dtype) -> why neither dialect renders it.
NOT_LOWERED = {
    (op, (d,) * expressions.ARITY[op], d): f"complex {op}: complexc has no rule; NumPy's complex loop runs it "
                                      f"eagerly (its branch cuts and special values are NumPy's own)"
    for op in _COMPLEX_LEFT_TO_NUMPY for d in (C64, C128)
}


@pytest.fixture(scope="module")
def signatures():
    return _traced_signatures()


def test_the_op_vocabulary_covers_every_elementwise_primitive(signatures):
    traced = {op for op, _, _ in signatures}
    declared = {p.ir_op for p in P.values() if p.lowering is Lowering.ELEMENTWISE}
    vocabulary = set(expressions.ELEMENTWISE_OPS)
    assert declared <= traced, f"elementwise primitives no nx function above binds: {declared - traced}"
    assert traced <= vocabulary, f"ops outside the IR vocabulary: {traced - vocabulary}"
    assert vocabulary <= traced, f"vocabulary ops no primitive uses: {vocabulary - traced}"
    # the mathfuncs family, which had no kernel rule before
    for op in ("log2", "log10", "trunc", "hypot", "acosh", "asinh", "atanh", "copysign", "logaddexp", "nextafter"):
        assert op in traced


def test_every_elementwise_signature_renders_in_both_dialects_or_is_listed(signatures):
    stale = set(NOT_LOWERED) - set(signatures)
    assert not stale, f"NOT_LOWERED lists signatures nx never binds: {sorted(stale)}"
    for dialect in (CDialect(), CudaDialect()):
        for op, ins, out in signatures:
            can = dialect.can_render(op, ins, out)
            if (op, ins, out) in NOT_LOWERED:
                assert not can, f"{type(dialect).__name__} renders {op}{ins} -> {out}: drop it from NOT_LOWERED"
            else:
                assert can, f"{type(dialect).__name__} cannot render {op}{[d.name for d in ins]} -> {out.name}"


def test_can_render_refuses_what_is_not_a_per_point_op_of_these_dtypes():
    f32 = np.dtype(np.float32)
    for dialect in (CDialect(), CudaDialect()):
        assert dialect.can_render("log2", (f32,), f32) and dialect.can_render("index", (), np.dtype(np.int64))
        assert not dialect.can_render("reduce_sum", (f32,), f32)   # a reduction, not a per-point node
        assert not dialect.can_render("transpose", (f32,), f32)
        assert not dialect.can_render("log2", (f32, f32), f32)      # the wrong operand count
        assert not dialect.can_render("and", (f32, f32), f32)       # no float rule
        assert not dialect.can_render("add", (np.dtype("U3"),) * 2, np.dtype("U3"))
        assert not dialect.can_render("log2", (C64,), C64)


# ---------------------------------------------------------------- one unit of every rendered signature

def _float_values(d):
    fi = ml_dtypes.finfo(d)
    vals = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5, 0.9, -0.3, 3.75, 10.0, -100.0, 1e-3, 2.0,
            float(fi.smallest_subnormal), float(fi.tiny), float(fi.max), -float(fi.max), np.inf, -np.inf, np.nan]
    return np.array(vals, np.float64).astype(d)


def _values(d):
    """Edge cases of dtype `d`: zeros of both signs, +-1, subnormals, the extremes,
    infinities and NaN; for integers the bounds and shift counts past the width."""
    if d == BOOL:
        return np.array([False, True])
    if d.kind in "iu":
        info, bits = np.iinfo(d), 8 * d.itemsize
        vals = [0, 1, 2, 3, 7, 13, 100, bits - 1, bits, bits + 1, -1, -2, -7, -100,
                info.min, info.min + 1, info.max, info.max - 1]
        return np.array(sorted({v for v in vals if info.min <= v <= info.max}), d)
    if d.kind == "c":
        re, im = np.meshgrid([0.0, -0.0, 1.0, -2.5, 1e-3, np.inf, np.nan], [0.0, 1.0, -0.5, np.inf])
        z = np.empty(re.size, d)
        z.real, z.imag = re.ravel(), im.ravel()
        return z
    vals = _float_values(d)
    if d.itemsize >= 4:   # a spread of magnitudes for the math functions (log2, log10, ...)
        vals = np.concatenate([vals, np.geomspace(1e-30 if d.itemsize == 4 else 1e-300, 1e30, 160).astype(d),
                               np.linspace(-1, 1, 41).astype(d)])
    return vals


def _operands(op, ins):
    """(group, arrays): the operand arrays of a signature; signatures of one group share
    their loads in one kernel. Binary ops get every pair of edge values."""
    if op == "select":
        x = _values(ins[1])
        return ("select", ins), [np.arange(len(x)) % 3 == 0, x, x[::-1].copy()]
    if len(ins) == 1:
        return ("unary", ins), [_values(ins[0])]
    x, y = _values(ins[0]), _values(ins[1])
    spread = None
    edges = _float_values(ins[0]).size if x.dtype.kind == "f" else x.size
    if x.size > edges and ins[0] == ins[1]:   # float32/float64: every pair of edge cases, then random pairs
        rng = np.random.default_rng(x.size)
        rest = x[edges:]
        spread = [rng.permutation(rest) * rng.choice([-1, 1], rest.size).astype(x.dtype), rng.permutation(rest)]
        x, y = x[:edges], y[:edges]
    if op == "pow" and ins[1].kind in "iu":   # integer powers are lowered for non-negative exponents only
        y = y[(y >= 0) & (y < 20)]
        group = ("natural exponents", ins)
    else:
        group = ("binary", ins)
    pairs = [np.repeat(x, y.size), np.tile(y, x.size)]
    if spread is not None:
        pairs = [np.concatenate([p, q]) for p, q in zip(pairs, spread)]
    return group, pairs


class _Table:
    """Every rendered signature as one unit: a kernel per operand group, a node and a
    store per signature. `outputs[sig]` is its output buffer's index, `inputs[sig]`
    its operand arrays, `buffers` the arrays the unit runs on."""

    def __init__(self, signatures):
        self.kernels, self.inputs, self.outputs, self.buffers, self.params = [], {}, {}, [], {}
        groups = {}
        for sig, params in sorted(signatures.items(), key=lambda kv: repr(kv[0])):
            if sig in NOT_LOWERED:
                continue
            op, ins, out = sig
            group, arrays = _operands(op, ins)
            if group not in groups:
                kernel = Kernel(f"group{len(groups)}", (arrays[0].size,))
                loads = []
                for a in arrays:
                    b = self.buffer(a.dtype, a.shape, "in")
                    self.buffers[b.index] = a
                    loads.append(kernel.load(b, (1,), 0))
                groups[group] = (kernel, loads, arrays)
                self.kernels.append(kernel)
            kernel, loads, arrays = groups[group]
            node = kernel.node(op, out, loads, params)
            b = self.buffer(out, (kernel.size,), "out")
            kernel.store(b, node)
            self.inputs[sig], self.outputs[sig], self.params[sig] = arrays, b.index, params

    def buffer(self, dtype, shape, role):
        b = Buffer(len(self.buffers), np.dtype(dtype), shape, role)
        self.buffers.append(np.full(shape, 0xA5, np.uint8).view(dtype) if dtype.itemsize == 1 else
                            np.empty(shape, dtype))
        return b

    def fresh_buffers(self):
        """The operands as they are and outputs filled with garbage (a kernel must write them)."""
        out = []
        for a in self.buffers:
            if any(a is arrays[k] for arrays in self.inputs.values() for k in range(len(arrays))):
                out.append(a)
            else:
                o = np.empty_like(a)
                o.reshape(-1).view(np.uint8).fill(0xA5)
                out.append(o)
        return out


@pytest.fixture(scope="module")
def table(signatures):
    return _Table(signatures)


def _eager(op, params, arrays):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return np.asarray(bind(P[op], *[nx.asarray(a) for a in arrays], **params))


# Ops computed by the target's math library (glibc's or CUDA's, libmvec's vector variants
# in C loops), which NumPy computes with its own SIMD routines on some machines: the
# kernels lie within these ulp of eager's float32/float64 results (16-bit results within
# 1 ulp of their format). Every other op gives eager's bits.
MATH_ULPS = {"exp": 4, "log": 4, "log1p": 4, "expm1": 4, "log2": 2, "log10": 2, "sin": 4, "cos": 4,
             "tan": 4, "tanh": 4, "sinh": 4, "cosh": 4, "asin": 4, "acos": 4, "atan": 4, "asinh": 4,
             "acosh": 4, "atanh": 4, "erf": 4, "logistic": 4, "atan2": 4, "pow": 4, "logaddexp": 4,
             "cbrt": 2}
LOG_ULPS = 2   # log2 and log10, both dialects, against NumPy


def _ordered(a):
    """Float bits mapped to integers in the floats' order (+0 and -0 both 0), as Python ints."""
    bits = a.view({2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]).astype(np.int64).tolist()
    top = 1 << (8 * a.dtype.itemsize - 1)
    return [b if b >= 0 else -(b + top) for b in bits]


def ulps(got, want):
    """Per element: the ulp distance of two float arrays of one dtype (0 where both are
    NaN, a huge number where only one is)."""
    nan_g, nan_w = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
    dist = np.array([abs(g - w) for g, w in zip(_ordered(got), _ordered(want))], dtype=object)
    dist[nan_g & nan_w] = 0
    dist[nan_g != nan_w] = 1 << 80
    return dist


def _mismatches(op, got, want, arrays):
    """A description of where `got` differs from eager's `want` beyond what MATH_ULPS allows."""
    if got.dtype.kind == "c":
        parts = [_mismatches(op, g, w, arrays) for g, w in ((got.real, want.real), (got.imag, want.imag))]
        return "; ".join(p for p in parts if p)
    if got.dtype.kind == "f" or got.dtype == BF16:
        allowed = (1 if got.dtype.itemsize == 2 else MATH_ULPS[op]) if op in MATH_ULPS else 0
        d = ulps(got, want)
        bad = d > allowed
        if allowed == 0:   # exact: the sign of a zero too
            zeros = (got.astype(np.float64) == 0) & (want.astype(np.float64) == 0)
            bad |= zeros & (np.signbit(got) != np.signbit(want))
    else:
        bad = got != want
    if not bad.any():
        return ""
    k = np.flatnonzero(bad)[:4]
    return ", ".join(f"{op}{tuple(a[i] for a in arrays)}: {got[i]!r} not {want[i]!r}" for i in k)


def _check_by_value(table, outputs, where):
    failures = []
    for sig, b in table.outputs.items():
        op, ins, out = sig
        got = outputs[b]
        assert got.dtype == out
        want = _eager(op, table.params[sig], table.inputs[sig])
        assert want.dtype == out, (sig, want.dtype)
        bad = _mismatches(op, got, want, table.inputs[sig])
        if bad:
            failures.append(f"{op}({', '.join(d.name for d in ins)}) -> {out.name}: {bad}")
    assert not failures, f"{where} differs from eager:\n" + "\n".join(failures[:40])


@pytest.fixture(scope="module")
def c_outputs(table):
    """The table's unit rendered by the C dialect, compiled once and run once."""
    dialect = CDialect()
    unit = dialect.render_unit(table.kernels)
    fn, = c_compiler.build(c_compiler.find(), dialect.prelude(), [unit])   # a unit is (name, source, kernels)
    buffers = table.fresh_buffers()
    fn((ctypes.c_void_p * len(buffers))(*[a.ctypes.data for a in buffers]))
    return buffers


@pytest.fixture(scope="module")
def cuda_unit(table):
    """The table's unit rendered by a CUDA dialect with small blocks and grids, so the
    kernels' grid-stride loops cross blocks and end in partial ones."""
    dialect = CudaDialect(DeviceProps(sm_count=2), block=64, blocks_per_sm=1)
    return dialect, dialect.render_unit(table.kernels)


@pytest.mark.cc
def test_c_kernels_give_eager_values_for_every_rendered_signature(table, c_outputs):
    _check_by_value(table, c_outputs, "the C kernel")


@pytest.mark.nvrtc
def test_cuda_kernels_of_every_rendered_signature_compile_with_nvrtc(cuda_unit):
    dialect, unit = cuda_unit
    # to PTX: NVRTC's whole front end and code generator in half the time of a cubin
    # (tests/codegen/test_cuda_kernels.py assembles cubins of the op table's kernels)
    ptx = nvrtc.compile_unit(dialect.prelude() + unit.source, arch="sm_90", ptx=True,
                             kernels=[k.name for k in unit.kernels])
    assert all(f".entry {ln.name}(" in ptx.decode() for k in unit.kernels for ln in k.launches)


@needs_gxx
def test_emulated_cuda_kernels_give_eager_values_for_every_rendered_signature(table, cuda_unit):
    dialect, unit = cuda_unit
    library = cuda_emu.Library(dialect.prelude(), [(unit.source, unit.kernels)])
    buffers = table.fresh_buffers()
    for k in unit.kernels:
        args = [buffers[i] for kind, i in k.args]
        assert all(kind == "buffer" for kind, _ in k.args)   # elementwise kernels use no scratch
        for ln in k.launches:
            library.launch(ln, ln.grid, ln.block, args)
    _check_by_value(table, buffers, "the emulated CUDA kernel")


@pytest.mark.cc
def test_log2_and_log10_lie_within_log_ulps_of_numpy(table, c_outputs):
    # the libm functions both dialects call (glibc's here, CUDA's on a GPU: 1 ulp for
    # log2f/log2/log10, 2 ulp for log10f) are not correctly rounded, nor NumPy's
    checked = 0
    for d in (np.dtype(np.float32), np.dtype(np.float64)):
        for op, ref in (("log2", np.log2), ("log10", np.log10)):
            sig = (op, (d,), d)
            x = table.inputs[sig][0]
            with np.errstate(all="ignore"):
                want = ref(x)
            d_ulps = ulps(c_outputs[table.outputs[sig]], want)
            assert d_ulps.max() <= LOG_ULPS, (op, d, x[np.argmax(d_ulps)])
            checked += x.size
    assert checked > 800


@pytest.mark.cc
def test_hypot_lies_within_2_ulp_of_the_exact_value(table, c_outputs):
    decimal.getcontext().prec = 60
    checked = 0
    for d in (np.dtype(np.float32), np.dtype(np.float64)):
        big = np.finfo(d).max
        top, top_ulp = decimal.Decimal(float(big)), decimal.Decimal(float(big - np.nextafter(big, d.type(0))))
        sig = ("hypot", (d, d), d)
        x, y = table.inputs[sig]
        got = c_outputs[table.outputs[sig]]
        for xi, yi, gi in zip(x.tolist(), y.tolist(), got.tolist()):
            if not (np.isfinite(xi) and np.isfinite(yi)):
                assert gi == np.inf if np.isinf(xi) or np.isinf(yi) else np.isnan(gi)
                continue
            exact = (decimal.Decimal(xi) ** 2 + decimal.Decimal(yi) ** 2).sqrt()
            if gi == np.inf:   # past the largest float by more than its rounding
                assert exact > top + top_ulp / 2, (d, xi, yi, gi)
                continue
            ulp = top_ulp if gi == top else decimal.Decimal(float(np.spacing(d.type(gi))))
            assert abs(decimal.Decimal(gi) - exact) <= 2 * ulp, (d, xi, yi, gi)
            checked += 1
    assert checked > 1000


# ---------------------------------------------------------------- rendering is a pure function

def _programs():
    """Functions covering the renderer's paths: elementwise chains, broadcasts and
    transposes, row, column and blocked sums, arg reductions, padding, gathers,
    scatters, slices updated in place, random bits, iota and complex values."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    key = nx.random.key(3)
    return [
        (lambda a: nx.exp(nx.log2(nx.abs(a) + 1.0) * 2.0) + 3.0, (x,)),
        (lambda a: nx.sum(a * a, axis=1) + nx.max(a, axis=1), (x,)),
        (lambda a: nx.sum(a, axis=0), (x,)),
        (lambda a: nx.sum(nx.tanh(a)), (rng.standard_normal(5000).astype(np.float32),)),
        (lambda a: (nx.argmax(a, axis=1), nx.argmin(a, axis=0)), (x,)),
        (lambda a: nx.pad(a, ((1, 2), (3, 0))) * 2.0, (x,)),
        (lambda a, i: nx.take(a, i, axis=0) + 1.0, (x, np.array([3, -1, 70, 0], np.int32))),
        (lambda a, i: a.at[i].add(1.0), (x, np.array([1, 1, 5], np.int32))),
        (lambda a: nx.dynamic_update_slice(a, nx.ones((2, 3), np.float32), (4, 5)), (x,)),
        (lambda k: nx.random.normal(k, (16, 8)) + nx.arange(8, dtype=np.float32), (key,)),
        (lambda a: nx.real(nx.exp(nx.make_complex(a, a * 2.0)) * 3.0), (x,)),
        (lambda a: nx.astype(nx.hypot(a, a[::-1]), np.float16), (x,)),
        (lambda a: a.T @ nx.ones((64, 3), np.float32) + nx.log10(nx.abs(a[:48, :3]) + 1.0), (x,)),
    ]


def _ir_units():
    """The IR kernels of every fused stretch of `_programs`, planned for CUDA (so from
    shapes alone, on any machine)."""
    units = []
    for f, args in _programs():
        plan = rune.jit(f).plan(*args, target="cuda")
        units += [list(s.unit.kernels) for s in plan.steps if type(s) is TargetStretch]
    assert len(units) >= len(_programs())
    return units


def _structure(obj, seen=None):
    """A comparable picture of an IR object graph (shared objects by their first
    visit's number, NaN constants by their repr)."""
    seen = {} if seen is None else seen
    if isinstance(obj, (Kernel, Load, Node, Store, Buffer, Const)):
        if id(obj) in seen:
            return ("same as", seen[id(obj)])
        seen[id(obj)] = len(seen)
        names = type(obj).__slots__ if hasattr(type(obj), "__slots__") else sorted(vars(obj))
        return (type(obj).__name__, tuple((n, _structure(getattr(obj, n), seen)) for n in names))
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, tuple(_structure(v, seen) for v in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _structure(v, seen)) for k, v in obj.items()))
    if isinstance(obj, (float, np.generic, np.ndarray, np.dtype)):
        return repr(obj)
    return obj


def _dialects():
    small = DeviceProps(sm_count=2)
    return [CDialect(), CudaDialect()] + [CudaDialect(small, block=64, blocks_per_sm=1, reduce_strategy=s)
                                           for s in ("thread", "block", "split")]


def test_rendering_leaves_the_ir_as_it_was():
    units = _ir_units()
    before = copy.deepcopy(units)
    for dialect in _dialects():
        for ks in units:
            unit = dialect.render_unit(ks)
            assert isinstance(unit, cstyle.RenderedUnit) and len(unit.kernels) == len(ks)
            assert all(r.target == dialect.target and r.source and r.name.startswith(unit.name)
                       for r in unit.kernels)
            name, source, kernels = unit   # it unpacks as the triple callers read
            assert (name, source, kernels) == (unit.name, unit.source, unit.kernels)
    assert _structure(units) == _structure(before)
    assert all(k.target is None and k.source is None for ks in units for k in ks)


def test_dialects_hold_no_per_call_state():
    for dialect in _dialects():
        state = dict(vars(dialect))
        for ks in _ir_units():
            dialect.render_unit(ks)
        assert vars(dialect) == state, f"{type(dialect).__name__} kept state between calls"


def _together(n, work):
    """Run work(k) for k < n on n threads released at once; their results in order."""
    barrier, results, errors = threading.Barrier(n), [None] * n, []

    def run(k):
        try:
            barrier.wait()
            results[k] = work(k)
        except BaseException as e:   # reported below, with the thread's index
            errors.append((k, e))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_eight_threads_render_distinct_units_at_once_as_they_render_alone():
    units = _ir_units()
    dialects = _dialects()
    alone = [[d.render_unit(ks)[:2] for d in dialects] for ks in units]
    before = copy.deepcopy(units)
    # thread k renders the units k, k + 8, ... with every (shared) dialect, several rounds
    mine = [list(range(k, len(units), 8)) or [k % len(units)] for k in range(8)]
    results = _together(8, lambda k: [[[d.render_unit(units[j])[:2] for d in dialects] for j in mine[k]]
                                      for _ in range(3)])
    for k, rounds in enumerate(results):
        for again in rounds:
            assert again == [alone[j] for j in mine[k]]
    assert _structure(units) == _structure(before)


def test_eight_threads_plan_distinct_functions_at_once_as_they_plan_alone():
    sizes = [5 + 7 * k for k in range(8)]

    def plan(n):
        f = rune.jit(lambda n=n: nx.arange(n) * 2.0)
        return f, [k.source for k in f.plan().kernels]

    alone = [plan(n)[1] for n in sizes]

    def work(k):
        out = []
        for _ in range(4):
            f, sources = plan(sizes[k])
            out.append((sources, np.asarray(f())))
        return out

    for k, rounds in enumerate(_together(8, work)):
        for sources, value in rounds:
            assert sources == alone[k]
            np.testing.assert_array_equal(value, np.arange(sizes[k]) * 2.0)


# ---------------------------------------------------------------- the layer's imports

ALLOWED = {"rune.errors", "rune.base.numerics", "rune.base.vocabulary", "rune.base.tuning"}  # vocabulary: the core elementwise ops; tuning: speed knobs


def test_codegen_modules_import_only_errors_numerics_numpy_and_the_standard_library():
    # every import statement, function-local ones included
    for path in sorted(CODEGEN.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                target = "rune.codegen" if node.level == 1 else "rune"
                if node.module:
                    target += "." + node.module
                if target == "rune":   # from .. import x
                    names = {f"rune.{a.name}" for a in node.names}
                else:
                    names = {target}
                for name in names:
                    assert name.startswith("rune.codegen") or name in ALLOWED, f"{path.name} imports {name}"
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                for m in mods:
                    top = m.split(".")[0]
                    assert top in sys.stdlib_module_names or top == "numpy" or m in ALLOWED or \
                        m.startswith("rune.codegen"), f"{path.name} imports {m}"


def test_importing_the_dialects_loads_nothing_above_codegen():
    # `rune` as a bare namespace, so rune/__init__.py (the whole library) does not run
    code = ("import sys, types\n"
            "pkg = types.ModuleType('rune'); pkg.__path__ = [sys.argv[1]]; sys.modules['rune'] = pkg\n"
            "import rune.codegen.cstyle, rune.codegen.c, rune.codegen.cuda, rune.codegen.windows\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('rune'))))\n")
    out = subprocess.run([sys.executable, "-c", code, str(CODEGEN.parent)], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(CODEGEN.parent.parent)}).stdout.split()
    # the packages holding the allowed modules are loaded with them
    assert {m for m in out if not m.startswith("rune.codegen")} <= ALLOWED | {"rune", "rune.base"}, out
