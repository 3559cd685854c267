"""Stacks of small matrix products on several threads.

NumPy multiplies a stack of matrices (an attention layer's (batch, heads, t, d)
products) one matrix after the other, each a BLAS call too small for BLAS to
thread, so the whole stack runs on one core however many there are. Here the
stack's products are shared out over the kernels' OpenMP threads
(rune/threads.py: the same pool BLAS runs on), each a single-threaded call of
NumPy's own OpenBLAS `cblas_?gemm`: the same routine NumPy calls, so the same
values to the bit. Used for float32 and float64 stacks whose matrices BLAS
reads in place (one unit stride), each product under BLAS_SERIAL_WORK
multiply-adds and the stack over BLAS_MIN_WORK, where the policy gives more than
one thread; everything else is `np.matmul`.
"""
import ctypes
import threading

import numpy as np

from ... import threads
from ...errors import CompileError
from .. import pipeline
from .address import address

NAME = "rune_batched_gemm"
_ENTRY = r"""
typedef void (*rune_{p}gemm)(int, int, int, int64_t, int64_t, int64_t, {t}, const {t} *, int64_t,
                           const {t} *, int64_t, {t}, {t} *, int64_t);

/* count products c_i = a_i b_i (row-major; ta, tb: CblasNoTrans 111 / CblasTrans 112), the
   byte offsets of a_i, b_i, c_i in offsets[3 i ...], on `threads` OpenMP threads */
void rune_batched_{p}gemm(void *gemm, int64_t count, const int64_t *offsets, const char *a, const char *b,
                        char *c, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                        int64_t ldc, int threads) {{
  const rune_{p}gemm f = (rune_{p}gemm)gemm;
  #pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < count; i++)
    f(101, ta, tb, m, n, k, 1, (const {t} *)(a + offsets[3 * i]), lda,
      (const {t} *)(b + offsets[3 * i + 1]), ldb, 0, ({t} *)(c + offsets[3 * i + 2]), ldc);
}}
"""
_TYPES = {np.dtype(np.float32): ("s", "float"), np.dtype(np.float64): ("d", "double")}
SOURCE = ("#include <stdint.h>\n" + "".join(_ENTRY.format(p=p, t=t) for p, t in _TYPES.values())
          + "\n/* the unit's entry point (every unit has one): unused */\nvoid rune_batched_gemm_run(void **b) { (void)b; }\n")

_NO_TRANS, _TRANS = 111, 112
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_ARGS = [_PTR, _I64, _PTR, _PTR, _PTR, _PTR, ctypes.c_int, ctypes.c_int, _I64, _I64, _I64, _I64, _I64, _I64,
         ctypes.c_int]

_lock = threading.Lock()
_loaded = {}   # "ready": {dtype: (the C entry, the address of NumPy's cblas gemm)}, or None: not to be had


def _entries(compiler):
    """{dtype: (batched entry, gemm address)} for the dtypes NumPy's OpenBLAS has an
    ILP64 gemm for (rune's entries pass 64-bit integers), or None."""
    if "ready" in _loaded:
        return _loaded["ready"]
    with _lock:
        if "ready" not in _loaded:
            _loaded["ready"] = _load(compiler)
    return _loaded["ready"]


def _load(compiler):
    blas = threads.openblas()
    if blas is None or compiler is None or blas.suffix != "64_":
        return None
    gemms = {dtype: blas.symbol(f"cblas_{p}gemm") for dtype, (p, _) in _TYPES.items()}
    if any(g is None for g in gemms.values()):
        return None
    program = pipeline.build(compiler, "", [(NAME, SOURCE, ())])[0]
    if isinstance(program, CompileError):
        return None
    entries = {}
    for dtype, (p, _) in _TYPES.items():
        fn = getattr(program.lib, f"rune_batched_{p}gemm")
        fn.argtypes, fn.restype = _ARGS, None
        entries[dtype] = (fn, ctypes.cast(gemms[dtype], ctypes.c_void_p).value)
    return entries


def _layout(x):
    """(CblasNoTrans or CblasTrans, leading dimension) of the matrices of stack `x`
    read in place, or None where neither axis has a unit stride."""
    rows, cols = x.shape[-2:]
    s_rows, s_cols = (s // x.itemsize for s in x.strides[-2:])
    if s_cols == 1 and s_rows >= max(1, cols):
        return _NO_TRANS, s_rows
    if s_rows == 1 and s_cols >= max(1, rows):
        return _TRANS, s_cols
    return None


def matmul(a, b, compiler):
    """np.matmul(a, b) of stacks of one batch shape, the products on several threads
    where they are small and many (see the module's doc)."""
    if a.ndim < 3 or a.shape[:-2] != b.shape[:-2] or a.dtype != b.dtype:
        return np.matmul(a, b)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    count = a.size // (m * k) if m * k else 0
    each = m * k * n
    if (min(m, k, n) < 2 or count < 2 or each > threads.BLAS_SERIAL_WORK
            or each * count < threads.BLAS_MIN_WORK or a.dtype not in (np.float32, np.float64)):
        return np.matmul(a, b)
    la, lb = _layout(a), _layout(b)
    entries = _entries(compiler) if la is not None and lb is not None else None
    n_threads = threads.stack_threads(each * count) if entries is not None else 1
    if n_threads < 2:
        return np.matmul(a, b)
    fn, gemm = entries[a.dtype]
    out = np.empty(a.shape[:-1] + (n,), a.dtype)
    batch = a.shape[:-2]
    offsets = np.empty(batch + (3,), np.int64)
    offsets[..., 0] = _starts(a, batch)
    offsets[..., 1] = _starts(b, batch)
    offsets[..., 2] = _starts(out, batch)
    fn(gemm, count, address(offsets), address(a), address(b), address(out), la[0], lb[0], m, n, k, la[1], lb[1],
       n, n_threads)
    threads.pool_ran(n_threads)
    return out


def _starts(x, batch):
    """The byte offset of each matrix of stack `x` from its first element, over `batch`."""
    total = np.zeros(batch, np.int64)
    for axis, (extent, stride) in enumerate(zip(batch, x.strides)):
        shape = [1] * len(batch)
        shape[axis] = extent
        total = total + (np.arange(extent, dtype=np.int64) * stride).reshape(shape)
    return total
