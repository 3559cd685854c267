"""Eager float32 transcendental functions on the host through rune's own math library
(rune/codegen/c_src/rn_math.h), so eager gives the bits `jit` gives.

NumPy computes float32 exp, log, tanh, ... with its own SIMD routines and SciPy its
erf and expit; rune's kernels call the library's correctly rounded functions. Here
each op is a one-op C unit (a loop calling the library function, OpenMP across the
threads rune's policy allows from PARALLEL elements) built through the compile
pipeline with the C dialect's prelude, so it is cached on disk like every kernel and
computes the very function the kernels compute. float16 and bfloat16 compute in
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

PARALLEL = 1 << 15   # elements from which a call's loop runs on several threads
F32 = np.dtype(np.float32)
LOW = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))   # computed in float32, rounded once
# rune op -> the library's function, for the ops the eager table has
UNARY = {op: fn for op, fn in mathlib.UNARY.items() if op not in ("exp2", "erfc", "cbrt")}
BINARY = dict(mathlib.BINARY)

_LOCK = threading.Lock()
_BUILT = {}   # op -> compiled entry (or None: no compiler)


def _unit(op, fn, arity):
    """The C unit of one op: <name>_run(b) over b = (inputs..., output, &n)."""
    name = f"rn_eager_{op}"
    ins = ", ".join(f"x{i}[i]" for i in range(arity))
    decls = "".join(f"  const float *x{i} = (const float *)b[{i}];\n" for i in range(arity))
    text = (f"void {name}_run(void **b) {{\n{decls}"
            f"  float *y = (float *)b[{arity}];\n  const int64_t n = *(const int64_t *)b[{arity + 1}];\n"
            f"  #pragma omp parallel for simd schedule(static) if (n >= {PARALLEL})\n"
            f"  for (int64_t i = 0; i < n; i++) y[i] = {fn}({ins});\n}}\n")
    return name, text, ()


def _entry(op):
    """The compiled entry of `op`'s unit (None without a compiler). Every op's unit is
    built on the first call, in one batch (one compiler run; cached on disk after)."""
    entry = _BUILT.get(op, False)
    if entry is not False:
        return entry
    with _LOCK:
        if op not in _BUILT:
            from ..codegen.c import CDialect
            from .cpu import compiler
            path = compiler.find()
            ops = [*UNARY, *BINARY]
            units = [_unit(o, UNARY[o], 1) if o in UNARY else _unit(o, BINARY[o], 2) for o in ops]
            entries = compiler.build(path, CDialect().prelude(), units) if path else [None] * len(ops)
            _BUILT.update(zip(ops, entries))
        return _BUILT[op]


def _run(op, entry, args):
    """The library's results for same-shaped float32 C-contiguous `args`."""
    out = np.empty(args[0].shape, F32)
    n = ctypes.c_int64(out.size)
    pointers = (ctypes.c_void_p * (len(args) + 2))(*[a.ctypes.data for a in args], out.ctypes.data,
                                                   ctypes.addressof(n))
    entry(pointers)
    return out


def _replacement(op, before):
    """`op` through the library for float32 (and 16-bit float) operands, `before` else."""
    def run(*args):
        dtype = getattr(args[0], "dtype", None)
        if dtype != F32 and dtype not in LOW or any(getattr(a, "dtype", None) != dtype for a in args):
            return before(*args)
        entry = _entry(op)
        if entry is None:
            return before(*args)
        if len(args) > 1:
            args = np.broadcast_arrays(*args)
        ins = [np.ascontiguousarray(a, F32) for a in args]
        out = _run(op, entry, ins)
        return out if dtype == F32 else out.astype(dtype)
    run.on_nd = run
    return run


def wrap(xp, impls):
    """Replacements for `impls`' float transcendental ops on NumPy (none on other modules)."""
    if xp is not np:
        return {}
    return {op: _replacement(op, impls[op]) for op in (*UNARY, *BINARY) if op in impls}
