"""Matrix products on BLAS whose bits depend on the operands' shapes alone, never on
the thread count, still run on several threads.

OpenBLAS (0.3.31, SkylakeX kernels) changes a product's bits with its thread count.
Its threaded gemm never splits K over threads (each output element is one thread's,
its whole K loop), but the order that loop adds in follows the threads: one thread
runs driver/level3/level3.c, which cuts a K remainder between GEMM_Q and 2 GEMM_Q at
half rounded up to the kernel's unroll, several run level3_thread.c, which cuts it at
half exactly; and the rows and columns each thread takes decide which edge kernel
(another K order) computes an element. A float64 300x301x300 product gave four
results on 1, 2, 3 and 4 threads, a float32 37x1000x37 one two. Its gemv splits a
matrix-vector product over the threads, its ddot and zdot the reduction itself. So
every product here calls BLAS on one thread, and its threads are rune's:

- a product over SERIAL_WORK multiply-adds (over which OpenBLAS would thread it), and
  over BLAS_MIN_WORK in all, is cut into tiles of its output, TILE rows by TILE
  columns (the last of each axis shorter; a matrix-vector product's tiles are TILE
  rows or columns of its one), each one single-threaded cblas_?gemm call (?gemv for
  a matrix-vector product) with the whole K loop, shared out over the kernels' OpenMP threads (rune/backends/cpu/threads.py: the
  pool BLAS runs on). The tiles depend on the shape alone, so every element's bits
  do, whichever thread computes it;
- a dot (one output element), and any product under BLAS_MIN_WORK, is NumPy's one
  call with BLAS held at one thread;
- products OpenBLAS runs on the calling thread whatever its count are NumPy's own
  calls; a stack of many (an attention layer's (batch, heads, t, d) products, which
  NumPy multiplies one after the other) is shared out over the OpenMP threads, each a
  single-threaded call of NumPy's own `cblas_?gemm`: the same routine NumPy calls,
  so the same values to the bit.

For float32, float64, complex64 and complex128 operands (a layout BLAS cannot read
in place is copied first); without a C compiler or NumPy's ILP64 OpenBLAS, every
product is NumPy's, with BLAS at one thread.
"""
import ctypes
import math
import threading

import numpy as np

from ...base.tuning import MATMUL_K_BLOCK_BYTES, MATMUL_MIN_SIDE, MATMUL_MIN_TILES, MATMUL_TILE
from . import bf16_gemm, threads
from ...errors import CompileError
from .. import pipeline
from .address import address, stack_offsets

NAME = "rune_batched_gemm"
TILE, MIN_TILES, MIN_SIDE = MATMUL_TILE, MATMUL_MIN_TILES, MATMUL_MIN_SIDE   # rune/base/tuning.py says why
K_BLOCK_BYTES = MATMUL_K_BLOCK_BYTES
# The most multiply-adds of a product OpenBLAS runs on the calling thread whatever its thread
# count: interface/gemm.c threads over 65536 * GEMM_MULTITHREAD_THRESHOLD (4) of them, complex
# over 8192 * 4 (a complex 50x50x50 product changed at 3 threads); zgemv.c a matrix of
# 1024 * 4 elements, gemv.c of 2304 * 4, the x86_64 dot kernels a vector over 10000
SERIAL_WORK = {"f": 65536 * 4, "c": 8192 * 4}
SERIAL_VECTOR_WORK = 1024 * 4

_ENTRY = r"""
typedef void (*rune_{p}gemm)(int, int, int, int64_t, int64_t, int64_t, {scalar}, const {t} *, int64_t,
                           const {t} *, int64_t, {scalar}, {t} *, int64_t);
typedef void (*rune_{p}gemv)(int, int, int64_t, int64_t, {scalar}, const {t} *, int64_t, const {t} *, int64_t,
                           {scalar}, {t} *, int64_t);

/* count products c_i = a_i b_i of m x k by k x n (row-major; ta, tb: CblasNoTrans 111 /
   CblasTrans 112; offsets[3 i ...]: the byte offsets of a_i, b_i, c_i), each cut into tiles of
   tm x tn of c_i (the last of each axis shorter; a_row, b_col: the bytes from a row of a_i to the
   next, from a column of b_i to the next), every tile one BLAS call, on `threads` OpenMP threads.
   A tile of one column or row of c (n or m 1) is a gemv: a gemm of it packs the matrix, twice the time */
void rune_batched_{p}gemm(void *gemm, void *gemv, int64_t count, const int64_t *offsets, const char *a,
                        const char *b, char *c, int ta, int tb, int64_t m, int64_t n, int64_t k, int64_t lda,
                        int64_t ldb, int64_t ldc, int64_t a_row, int64_t b_col, int64_t tm, int64_t tn,
                        int threads) {{
  const rune_{p}gemm mm = (rune_{p}gemm)gemm;
  const rune_{p}gemv mv = (rune_{p}gemv)gemv;
  const int64_t inc_a = ta == 111 ? 1 : lda, inc_b = tb == 111 ? ldb : 1;   /* a's row, b's column: along k */
  const int64_t rows = (m + tm - 1) / tm, cols = (n + tn - 1) / tn, tiles = rows * cols;
  {constants}
  #pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (int64_t t = 0; t < count * tiles; t++) {{
    const int64_t *o = offsets + 3 * (t / tiles);
    const int64_t i0 = (t % tiles) / cols * tm, j0 = (t % cols) * tn;
    const int64_t mi = m - i0 < tm ? m - i0 : tm, nj = n - j0 < tn ? n - j0 : tn;
    const {t} *ai = (const {t} *)(a + o[0] + i0 * a_row), *bi = (const {t} *)(b + o[1] + j0 * b_col);
    {t} *ci = ({t} *)(c + o[2] + (i0 * ldc + j0) * {size});
    if (n == 1)        /* rows of a (ta 111), or columns of the k x m row-major matrix it is */
      mv(101, ta, ta == 111 ? mi : k, ta == 111 ? k : mi, {one}, ai, lda, bi, inc_b, {zero}, ci, ldc);
    else if (m == 1)   /* b's transpose times a */
      mv(101, tb == 111 ? 112 : 111, tb == 111 ? k : nj, tb == 111 ? nj : k, {one}, bi, ldb, ai, inc_a,
         {zero}, ci, 1);
    else
      mm(101, ta, tb, mi, nj, k, {one}, ai, lda, bi, ldb, {zero}, ci, ldc);
  }}
}}
"""
_REAL = dict(scalar="{t}", constants="", one="1", zero="0", size="sizeof({t})")
_COMPLEX = dict(scalar="const void *", constants="static const {t} one[2] = {{1, 0}}, zero[2] = {{0, 0}};",
                one="one", zero="zero", size="2 * sizeof({t})")   # cblas_[cz]gemm take alpha, beta by address
_TYPES = {np.dtype(np.float32): ("s", "float", _REAL), np.dtype(np.float64): ("d", "double", _REAL),
          np.dtype(np.complex64): ("c", "float", _COMPLEX), np.dtype(np.complex128): ("z", "double", _COMPLEX)}


def _source():
    entries = []
    for p, t, kind in _TYPES.values():
        fields = {name: text.format(t=t) for name, text in kind.items()}
        entries.append(_ENTRY.format(p=p, t=t, **fields))
    return ("#include <stdint.h>\n" + "".join(entries)
            + "\n/* the unit's entry point (every unit has one): unused */\n"
            + "void rune_batched_gemm_run(void **b) { (void)b; }\n")


SOURCE = _source()

_NO_TRANS, _TRANS = 111, 112
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_INT = ctypes.c_int
_ARGS = [_PTR, _PTR, _I64, _PTR, _PTR, _PTR, _PTR, _INT, _INT] + [_I64] * 10 + [_INT]

_lock = threading.Lock()
_loaded = {}   # "ready": {dtype: (the C entry, NumPy's cblas gemm and gemv)}, or None: not to be had


def _entries(compiler):
    """{dtype: (batched entry, (gemm address, gemv address))} for the dtypes NumPy's
    OpenBLAS has an ILP64 gemm and gemv for (rune's entries pass 64-bit integers), or None."""
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
    routines = {dtype: (blas.symbol(f"cblas_{p}gemm"), blas.symbol(f"cblas_{p}gemv"))
                for dtype, (p, _, _) in _TYPES.items()}
    if any(None in pair for pair in routines.values()):
        return None
    program = pipeline.build(compiler, "", [(NAME, SOURCE, ())])[0]
    if isinstance(program, CompileError):
        return None
    entries = {}
    for dtype, (p, _, _) in _TYPES.items():
        fn = getattr(program.lib, f"rune_batched_{p}gemm")
        fn.argtypes, fn.restype = _ARGS, None
        entries[dtype] = (fn, routines[dtype])
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


_LOW = {np.dtype(np.float16), bf16_gemm.BFLOAT16}   # summed in float32, rounded once to their own dtype


def matmul(a, b, compiler):
    """np.matmul(a, b) of stacks of one batch shape (or of two matrices), its bits
    independent of the thread count (see the module's doc). float16 and bfloat16
    operands give their own dtype, summed in float32 and rounded once: bfloat16 ones
    on rune's own kernel (rune/backends/cpu/bf16_gemm.py), without a float32 copy."""
    if a.dtype in _LOW and a.dtype == b.dtype:
        return _low(a, b, compiler)
    if a.dtype not in _TYPES and b.dtype not in _TYPES:
        return np.matmul(a, b)   # NumPy's own loops (integers, objects): no BLAS
    if a.ndim < 2 or b.ndim < 2 or a.shape[:-2] != b.shape[:-2] or a.dtype != b.dtype:
        return threads.serial_blas(np.matmul, a, b)   # (shapes and mixes rune's dot_general never passes)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    count = math.prod(a.shape[:-2])
    each = m * k * n
    vector = m == 1 or n == 1
    if each <= (SERIAL_VECTOR_WORK if vector else SERIAL_WORK[a.dtype.kind]):   # OpenBLAS: one thread
        return np.matmul(a, b) if vector else _small_products(a, b, compiler, m, k, n, count)
    entries = _entries(compiler)
    if entries is None or each * count < threads.BLAS_MIN_WORK or m == n == 1:
        return threads.serial_blas(np.matmul, a, b)   # one thread's work, or dots: one output each
    return _tiled(a, b, entries[a.dtype], m, k, n, count)


def _low(a, b, compiler):
    if a.dtype == bf16_gemm.BFLOAT16 and a.ndim >= 2 and b.ndim >= 2 and a.shape[:-2] == b.shape[:-2]:
        out = bf16_gemm.matmul(a, b, compiler)
        if out is not None:
            return out
    wide = matmul(a.astype(np.float32), b.astype(np.float32), compiler)   # (no C compiler, float16)
    return wide.astype(a.dtype)


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
    """np.matmul of large products, tile by tile of the output (_tile) on single-threaded
    BLAS calls shared out over the OpenMP threads."""
    la, lb = _layout(a), _layout(b)
    if la is None:
        a, la = np.ascontiguousarray(a), (_NO_TRANS, k)
    if lb is None:
        b, lb = np.ascontiguousarray(b), (_NO_TRANS, n)
    n_threads = threads.stack_threads(m * k * n * count)   # (before BLAS is held at one thread)
    # a matrix-vector product whose matrix BLAS would read in stripes of TILE of its rows' elements
    if k > TILE and ((n == 1 and la[0] == _TRANS) or (m == 1 and lb[0] == _NO_TRANS)):
        return threads.serial_blas(_k_blocks, a, b, entry, la, lb, k, n_threads, TILE)
    rows, cols = _tile(m, n)
    # few outputs over a long K (a covariance, a weight gradient of a thin layer): too few
    # tiles to share out, so K is cut into blocks whose panels stay in cache, their
    # products run side by side and added in block order
    block = _k_block(m, n, a.dtype.itemsize)
    if -(-m // rows) * -(-n // cols) < MIN_TILES and k >= 2 * block:
        return threads.serial_blas(_k_blocks, a, b, entry, la, lb, k, n_threads, block)
    return threads.serial_blas(_run, a, b, entry, la, lb, k, (rows, cols), n_threads)


def _k_block(m, n, itemsize):
    """The K block of a product split along K: a multiple of TILE whose two panels (m and n
    rows of it) fit in K_BLOCK_BYTES. The shape alone decides, so the sum's order does too."""
    return max(TILE, K_BLOCK_BYTES // ((m + n) * itemsize) // TILE * TILE)


def _tile(m, n):
    """(rows, columns) of the output tiles of an m x n product: TILE x TILE, halved (the
    longer side first, down to MIN_SIDE) while that leaves fewer than MIN_TILES, so that a
    long K over few outputs still has tiles for several threads. The shape alone decides."""
    rows, cols = min(m, TILE), min(n, TILE)
    while -(-m // rows) * -(-n // cols) < MIN_TILES and max(rows, cols) > MIN_SIDE:
        if rows >= cols:
            rows = -(-rows // 2)
        else:
            cols = -(-cols // 2)
    return rows, cols


def _k_blocks(a, b, entry, la, lb, k, n_threads, block):
    """A product as the sum of the products of blocks of `block` along K (a matrix-vector
    product's blocks of TILE each read whole rows of the matrix: a stripe of them runs at
    half the speed), added in block order: its blocks, and so its bits, depend on the
    shape alone."""
    blocks, rest = divmod(k, block)
    a_blocks = np.lib.stride_tricks.as_strided(
        a, a.shape[:-1] + (blocks, block), a.strides[:-1] + (block * a.strides[-1], a.strides[-1]))
    b_blocks = np.lib.stride_tricks.as_strided(
        b, b.shape[:-2] + (blocks, block, b.shape[-1]), b.strides[:-2] + (block * b.strides[-2],) + b.strides[-2:])
    a_blocks = np.moveaxis(a_blocks, -2, -3)   # (..., blocks, m, block)
    whole = (a.shape[-2], b.shape[-1])
    out = _run(a_blocks, b_blocks, entry, la, lb, block, whole, n_threads).sum(axis=-3)
    if rest:
        out += _run(a[..., blocks * block:], b[..., blocks * block:, :], entry, la, lb, rest, whole, n_threads)
    return out


def _run(a, b, entry, la, lb, k, tile, n_threads):
    """a @ b by the C entry: each product cut into tiles of `tile` (rows, columns) of the
    output, the tiles on `n_threads` OpenMP threads."""
    fn, (gemm, gemv) = entry
    m, n = a.shape[-2], b.shape[-1]
    batch = a.shape[:-2]
    out = np.empty(batch + (m, n), a.dtype)
    offsets = stack_offsets(batch, tuple(x.strides[:len(batch)] for x in (a, b, out)))
    fn(gemm, gemv, math.prod(batch), address(offsets), address(a), address(b), address(out), la[0], lb[0], m, n, k,
       la[1], lb[1], n, a.strides[-2], b.strides[-1], tile[0], tile[1], n_threads)
    threads.pool_ran(n_threads)
    return out
