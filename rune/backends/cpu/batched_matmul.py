"""Matrix products on BLAS whose bits depend on the operands' shapes alone, never on
the thread count, and that still run on several threads.

OpenBLAS (0.3.31, Haswell/SkylakeX kernels) changes a product's bits with its thread
count: a threaded gemm cuts K into blocks of its own (level3_thread.c halves a
remainder between GEMM_Q and 2 GEMM_Q exactly, level3.c rounds the half to the
kernel's unroll) and each thread's rows and columns end at places of its own, where
edge kernels fold K in another order; a float64 300x301x300 product gave four
different results on 1, 2, 3 and 4 threads. Its gemv splits a matrix-vector
product's columns over the threads with partial sums, and its ddot the reduction. So
every product here runs BLAS on one thread per call, and the threads come from
rune's side:

- a product of more than BLAS_SERIAL_WORK multiply-adds (over which OpenBLAS would
  thread it) is cut into tiles of the output, TILE rows by TILE columns (the last of
  each axis shorter), each computed by one single-threaded cblas_?gemm call with the
  whole K loop; the tiles are shared out over the kernels' OpenMP threads
  (rune/threads.py: the same pool BLAS runs on). Where each output element lands
  depends on the shape alone, so its bits do, whichever thread computes it;
- a matrix-vector product or a dot (one output row or column) of that size runs as
  NumPy's one call (gemv, dot) with BLAS held at one thread: memory bound, it gains
  little from threads;
- smaller products are NumPy's own calls, which OpenBLAS runs on the calling thread
  whatever it is set to; a stack of many (an attention layer's (batch, heads, t, d)
  products, which NumPy multiplies one after the other) is shared out over the
  OpenMP threads, each a single-threaded call of NumPy's own `cblas_?gemm`: the same
  routine NumPy calls, so the same values to the bit.

Used for float32, float64, complex64 and complex128 operands whose matrices BLAS
reads in place (one unit stride; others are copied); without a C compiler or
NumPy's ILP64 OpenBLAS, every product is NumPy's, with BLAS at one thread.
"""
import ctypes
import math
import threading

import numpy as np

from ... import threads
from ...errors import CompileError
from .. import pipeline
from .address import address

NAME = "rune_batched_gemm"
TILE = 256   # rows and columns of an output tile: ~2**24 multiply-adds per K of 256, packing under 2%
# OpenBLAS's interface/gemv.c threads a matrix of 2304 * GEMM_MULTITHREAD_THRESHOLD elements and
# more, its x86_64 dot kernels a vector of more than 10000: below this neither threads
VECTOR_SERIAL_WORK = 2304 * 4

_ENTRY = r"""
typedef void (*rune_{p}gemm)(int, int, int, int64_t, int64_t, int64_t, {scalar}, const {t} *, int64_t,
                           const {t} *, int64_t, {scalar}, {t} *, int64_t);

/* count products c_i = a_i b_i (row-major; ta, tb: CblasNoTrans 111 / CblasTrans 112), each
   m_i x k by k x n_i: items[5 i ...] holds the byte offsets of a_i, b_i and c_i, then m_i and
   n_i; on `threads` OpenMP threads */
void rune_batched_{p}gemm(void *gemm, int64_t count, const int64_t *items, const char *a, const char *b,
                        char *c, int ta, int tb, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                        int threads) {{
  const rune_{p}gemm f = (rune_{p}gemm)gemm;
  {constants}
  #pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (int64_t i = 0; i < count; i++) {{
    const int64_t *it = items + 5 * i;
    f(101, ta, tb, it[3], it[4], k, {one}, (const {t} *)(a + it[0]), lda, (const {t} *)(b + it[1]), ldb,
      {zero}, ({t} *)(c + it[2]), ldc);
  }}
}}
"""
_REAL = dict(scalar="{t}", constants="", one="1", zero="0")
_COMPLEX = dict(scalar="const void *", constants="static const {t} one[2] = {{1, 0}}, zero[2] = {{0, 0}};",
                one="one", zero="zero")   # cblas_[cz]gemm take alpha and beta by address
_TYPES = {np.dtype(np.float32): ("s", "float", _REAL), np.dtype(np.float64): ("d", "double", _REAL),
          np.dtype(np.complex64): ("c", "float", _COMPLEX), np.dtype(np.complex128): ("z", "double", _COMPLEX)}


def _source():
    entries = []
    for p, t, kind in _TYPES.values():
        fields = {name: text.format(t=t) for name, text in kind.items()}
        entries.append(_ENTRY.format(p=p, t=t, **fields))
    return ("#include <stdint.h>\n" + "".join(entries)
            + "\n/* the unit's entry point (every unit has one): unused */\nvoid rune_batched_gemm_run(void **b) { (void)b; }\n")


SOURCE = _source()

_NO_TRANS, _TRANS = 111, 112
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_ARGS = [_PTR, _I64, _PTR, _PTR, _PTR, _PTR, ctypes.c_int, ctypes.c_int, _I64, _I64, _I64, _I64, ctypes.c_int]

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
    gemms = {dtype: blas.symbol(f"cblas_{p}gemm") for dtype, (p, _, _) in _TYPES.items()}
    if any(g is None for g in gemms.values()):
        return None
    program = pipeline.build(compiler, "", [(NAME, SOURCE, ())])[0]
    if isinstance(program, CompileError):
        return None
    entries = {}
    for dtype, (p, _, _) in _TYPES.items():
        fn = getattr(program.lib, f"rune_batched_{p}gemm")
        fn.argtypes, fn.restype = _ARGS, None
        entries[dtype] = (fn, gemms[dtype])
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
    """np.matmul(a, b) of stacks of one batch shape (or of two matrices), its bits
    independent of the thread count (see the module's doc)."""
    if a.ndim < 2 or b.ndim < 2 or a.shape[:-2] != b.shape[:-2] or a.dtype != b.dtype or a.dtype not in _TYPES:
        return np.matmul(a, b)   # NumPy's own loops (integers, objects): no BLAS
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    count = math.prod(a.shape[:-2])
    each = m * k * n
    vector = m == 1 or n == 1
    if each <= (VECTOR_SERIAL_WORK if vector else threads.BLAS_SERIAL_WORK):   # OpenBLAS: one thread
        return _small_products(a, b, compiler, m, k, n, count) if not vector else np.matmul(a, b)
    entries = _entries(compiler)
    if vector or entries is None:
        return threads.serial_blas(np.matmul, a, b)
    return _tiled(a, b, entries[a.dtype], m, k, n, count)


def _small_products(a, b, compiler, m, k, n, count):
    """np.matmul of products OpenBLAS runs on one thread each: a stack of many shared
    out over the OpenMP threads where the policy gives more than one."""
    if count < 2 or min(m, k, n) < 2 or m * k * n * count < threads.BLAS_MIN_WORK:
        return np.matmul(a, b)
    la, lb = _layout(a), _layout(b)
    entries = _entries(compiler) if la is not None and lb is not None else None
    n_threads = threads.stack_threads(m * k * n * count) if entries is not None else 1
    if n_threads < 2:
        return np.matmul(a, b)   # the same routine on the same matrices: the same bits
    return _run(a, b, entries[a.dtype], la, lb, k, (m, n), n_threads)


def _tiled(a, b, entry, m, k, n, count):
    """np.matmul of large products, tile by tile (TILE x TILE of the output) on
    single-threaded BLAS calls shared out over the OpenMP threads."""
    la, lb = _layout(a), _layout(b)
    if la is None:
        a, la = np.ascontiguousarray(a), (_NO_TRANS, k)
    if lb is None:
        b, lb = np.ascontiguousarray(b), (_NO_TRANS, n)
    n_threads = threads.stack_threads(m * k * n * count)   # (before BLAS is held at one thread)
    return threads.serial_blas(_run, a, b, entry, la, lb, k, (min(m, TILE), min(n, TILE)), n_threads)


def _run(a, b, entry, la, lb, k, tile, n_threads):
    """a @ b by the C entry: each product cut into tiles of `tile` (rows, columns) of the
    output, the tiles on `n_threads` OpenMP threads."""
    fn, gemm = entry
    m, n = a.shape[-2], b.shape[-1]
    batch = a.shape[:-2]
    out = np.empty(batch + (m, n), a.dtype)
    rows, cols = _blocks(m, tile[0]), _blocks(n, tile[1])
    # items[batch..., row block, column block] = (offset of a, of b, of out, rows, columns)
    items = np.empty(batch + (len(rows), len(cols), 5), np.int64)
    for field, (x, row_axis, col_axis) in enumerate(((a, True, False), (b, False, True), (out, True, True))):
        start = _starts(x, batch)[..., None, None]
        if row_axis:
            start = start + (rows[:, 0] * x.strides[-2])[:, None]
        if col_axis:
            start = start + cols[:, 0] * x.strides[-1]
        items[..., field] = start
    items[..., 3] = rows[:, 1, None]
    items[..., 4] = cols[:, 1]
    count = items.size // 5
    fn(gemm, count, address(items), address(a), address(b), address(out), la[0], lb[0], k, la[1], lb[1], n,
       n_threads)
    threads.pool_ran(n_threads)
    return out


def _blocks(extent, size):
    """(start, length) of each block of `size` along an axis of `extent`, the last shorter."""
    starts = np.arange(0, extent, size, dtype=np.int64)
    return np.stack([starts, np.minimum(size, extent - starts)], axis=1)


def _starts(x, batch):
    """The byte offset of each matrix of stack `x` from its first element, over `batch`."""
    total = np.zeros(batch, np.int64)
    for axis, (extent, stride) in enumerate(zip(batch, x.strides)):
        shape = [1] * len(batch)
        shape[axis] = extent
        total = total + (np.arange(extent, dtype=np.int64) * stride).reshape(shape)
    return total
