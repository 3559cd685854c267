"""Eager float32 transcendental functions on the host through rune's own math library
(rune/codegen/c_src/rn_math.h), so eager gives the bits `jit` gives.

NumPy computes float32 exp, log, tanh, ... with its own SIMD routines and SciPy its
erf and expit; rune's kernels call the library's correctly rounded functions. Here
each op is a one-op C unit (a loop calling the library function, OpenMP across the
threads rune's policy allows from PARALLEL elements) built at the op's first call
through the compile pipeline with the C dialect's prelude, so it is cached on disk
like every kernel and calls the very function the kernels call (compiled once per
machine: rune/backends/cpu/math_library.py). A function with a fast path
(mathlib.FAST) runs it over blocks and the library's function on what it flags: the
same bits at about half the cost. A call below PARALLEL elements on float32 arrays
goes through the unit's loop made a NumPy ufunc (rune/backends/cpu/ufunc.py): NumPy's
call costs a microsecond less than one through ctypes. float16 and bfloat16 compute in
float32 and round once, as the kernels do; other dtypes, other array modules (CuPy)
and a host without a C compiler keep the implementation they had.

`wrap(xp, impls)` gives the replacements for the eager primitive table `impls`
(rune/backends/array_impls.py: `impls.update(eager_mathlib.wrap(xp, impls))`).
"""
import ctypes
import threading

import ml_dtypes
import numpy as np

from ..codegen import mathlib
from ..errors import CompileError
from . import pipeline
from .cpu import threads
from .cpu import ufunc
from .cpu.address import address

PARALLEL = 1 << 15   # elements from which a call's loop runs on several threads
BLOCK = 512          # elements per pass of a fast path (mathlib.FAST) and its fix-up
F32 = np.dtype(np.float32)
LOW = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))   # computed in float32, rounded once
# rune op -> the library's function (`wrap` replaces those the eager table has)
UNARY, BINARY = dict(mathlib.UNARY), dict(mathlib.BINARY)

_LOCK = threading.Lock()
_BUILT = {}   # op -> compiled entry (or None: no compiler)


def _unit(op, fn, arity):
    """The C unit of one op: <name>_call(x..., y, n) and the pipeline's entry
    <name>_run(b) over b = (x..., y, &n)."""
    name = f"rn_eager_{op}"
    text = "#include <fenv.h>\n"
    params = "".join(f"const float *x{i}, " for i in range(arity))
    ins = ", ".join(f"x{i}[i]" for i in range(arity))
    args = "".join(f"(const float *)b[{i}], " for i in range(arity))
    fast = mathlib.FAST.get(fn)
    if fast:   # blocks of the fast path (threads split the blocks)
        text += _blocks(name, fn, fast)
        serial = (f"for (int64_t s = 0; s < n; s += {BLOCK}) "
                  f"{name}_block(x0 + s, y + s, n - s < {BLOCK} ? n - s : {BLOCK});")
        parallel = f"#pragma omp parallel for schedule(static)\n  {serial}"
    else:
        loop = f"for (int64_t i = 0; i < n; i++) y[i] = {fn}({ins});"
        serial, parallel = f"#pragma omp simd\n    {loop}", f"#pragma omp parallel for simd schedule(static)\n  {loop}"
    # (a short call never enters an OpenMP region: even one an `if` clause keeps to
    # one thread costs microseconds, more than the loop over a few elements)
    text += (f"void {name}_call({params}float *y, int64_t n) {{\n"
             f"  if (n < {PARALLEL}) {{\n"
             f"    {serial}\n"
             f"    return;\n  }}\n"
             f"  {parallel}\n}}\n"
             f"void {name}_run(void **b) {{ {name}_call({args}(float *)b[{arity}], "
             f"*(const int64_t *)b[{arity + 1}]); }}\n")
    # <name>_loop: a NumPy ufunc's loop (rune/backends/cpu/ufunc.py), contiguous
    # operands through <name>_call, strided ones (a view, a broadcast operand) one by one.
    # It clears the floating-point flags it raised: NumPy turns them into warnings after
    # a ufunc's loop, and rune's math functions are quiet (their flags come from the
    # evaluation, not from the result: a fast path's NaN test, a clamped argument)
    contiguous = " && ".join(f"steps[{i}] == 4" for i in range(arity + 1))
    pointers = "".join(f"(const float *)args[{i}], " for i in range(arity))
    strided = ", ".join(f"*(const float *)(args[{i}] + i * steps[{i}])" for i in range(arity))
    text += (f"void {name}_loop(char **args, const int64_t *dims, const int64_t *steps, void *data) {{\n"
             f"  (void)data;\n"
             f"  if ({contiguous}) {name}_call({pointers}(float *)args[{arity}], dims[0]);\n"
             f"  else for (int64_t i = 0; i < dims[0]; i++) *(float *)(args[{arity}] + i * steps[{arity}]) = {fn}({strided});\n"
             f"  feclearexcept(FE_ALL_EXCEPT);\n"
             f"}}\n")
    return name, text, ()


def _blocks(name, fn, fast):
    """The block function of an op with a fast path (mathlib.FAST): the fast path over a
    block of elements, then the library's function on those it flags (about one in 2^15;
    RN_FAST_THEN_FULL, rn_math_fast.h)."""
    return (f"static void {name}_block(const float *x, float *y, int64_t n) {{\n"
            f"  RN_FAST_THEN_FULL({fast}, {fn}, x, y, n, {BLOCK});\n}}\n")


class _Entry:
    """One op's compiled unit: a short call runs on the calling thread straight through
    ctypes; a long one through the pipeline's entry, on the threads rune's policy gives."""

    def __init__(self, program, name, arity):
        self.arity = arity
        self.threaded = threads.parallel_kernel(program.function(name + "_run"))
        self.direct = getattr(program.lib, name + "_call")
        self.direct.argtypes = [ctypes.c_void_p] * (arity + 1) + [ctypes.c_int64]
        self.direct.restype = None
        # the unit's loop as a NumPy ufunc, for small calls (None where NumPy's C API is
        # out of reach): NumPy's call costs a microsecond less than one through ctypes
        self.ufunc = ufunc.make(name, ctypes.cast(getattr(program.lib, name + "_loop"), ctypes.c_void_p).value,
                                arity)

    def __call__(self, args):
        out = np.empty(args[0].shape, F32)
        pointers = [address(a) for a in args] + [address(out)]
        if out.size < PARALLEL:
            self.direct(*pointers, out.size)
        else:
            n = ctypes.c_int64(out.size)
            self.threaded((ctypes.c_void_p * (self.arity + 2))(*pointers, ctypes.addressof(n)))
        return out


def _entry(op):
    """The compiled entry of `op`'s unit (None without a compiler), built on its first
    call (cached on disk after): the library function it calls is compiled once per
    machine too (rune/backends/cpu/math_library.py), so an op costs only what it uses."""
    entry = _BUILT.get(op, False)
    if entry is not False:
        return entry
    with _LOCK:
        if op not in _BUILT:
            from ..codegen.c import CDialect
            from .cpu import compiler
            path = compiler.find()
            fn = mathlib.function(op)
            arity = mathlib.arity(fn)
            unit = _unit(op, fn, arity)
            program, = pipeline.build(path, CDialect().prelude() + mathlib.fast_source(), [unit]) if path else [None]
            ok = program is not None and not isinstance(program, CompileError)
            _BUILT[op] = _Entry(program, unit[0], arity) if ok else None
        return _BUILT[op]


def _replacement(op, before):
    """`op` through the library for float32 (and 16-bit float) operands, `before` else."""
    def run(*args):
        # the common call first: small float32 arrays through the unit's ufunc, which
        # costs about what NumPy's own call does (a 0-d result stays an array below)
        a = args[0]
        entry = _BUILT.get(op)
        small = entry.ufunc if entry else None
        if small is not None and type(a) is np.ndarray and a.dtype is F32 and a.ndim and a.size < PARALLEL:
            if len(args) == 1:
                return small(a)
            b = args[1]
            if type(b) is np.ndarray and b.dtype is F32 and b.shape == a.shape:
                return small(a, b)
        dtype = getattr(args[0], "dtype", None)
        if dtype != F32 and dtype not in LOW or any(getattr(a, "dtype", None) != dtype for a in args):
            return before(*args)
        entry = _entry(op)
        if entry is None:
            return before(*args)
        if len(args) > 1:
            args = np.broadcast_arrays(*args)
        out = entry([np.asarray(a, F32, order="C") for a in args])   # (0-d stays 0-d)
        return out if dtype == F32 else out.astype(dtype)
    run.on_nd = run
    return run


def wrap(xp, impls):
    """Replacements for `impls`' float transcendental ops on NumPy (none on other modules)."""
    if xp is not np:
        return {}
    return {op: _replacement(op, impls[op]) for op in (*UNARY, *BINARY) if op in impls}
