"""bfloat16 matrix products of rune's own: bfloat16 in, float32 accumulation,
bfloat16 out, rounded once (to nearest even), with no float32 copy of the operands.

NumPy's OpenBLAS (scipy-openblas 0.3.x, the wheel's numpy.libs) exports no
bfloat16 routine (`nm -D` lists no sbgemm_ / cblas_sbgemm: it is built without
BUILD_BFLOAT16), so the float32 route cast both operands up, ran sgemm and cast
the result down; the casts (ml_dtypes' rounding above all) cost as much as the
product. Here:

- B is packed once per product into panels of NP (16) columns, each k pair of a
  column one 32-bit word (the even k in the low half); A is packed per block of
  MR (8) rows by the thread that uses it, the same way. An odd K is padded with a zero.
- The micro-kernel keeps 8 rows by 32 columns of float32 sums in registers over the
  whole K loop (16 by 16 for a last panel of 16 columns or fewer: an attention
  head's 16 columns use every lane), with VDPBF16PS: each lane adds a pair of
  bfloat16 products per instruction (as oneDNN, which PyTorch uses, does; the
  instruction treats subnormal bfloat16 values as zero), rounded to bfloat16 on
  store (VCVTNEPS2BF16, to nearest even).
- Only where the CPU has AVX512-BF16 (rune compiles with -march=native): without
  it, plain C float32 multiply-adds ran about as fast as the float32 route on large
  products and 5x slower on narrow ones (n = 16, AVX2), so products there take the
  float32 route (OpenBLAS's sgemm, one rounding) as before.
- Threads take tiles of the output (MB rows by NB columns, halved while there are
  fewer than two a thread: a weight's gradient, 64 x 64 over a long K, is one
  tile of the largest size); every element's sum
  runs over the whole K in one order fixed by K alone, so its bits do not depend on
  the thread count or the tiling (as rune/backends/cpu/batched_matmul.py).
"""
import ctypes
import math
import threading

import ml_dtypes
import numpy as np

from . import threads
from ...base.tuning import BFLOAT_TILE_COLS, BFLOAT_TILE_ROWS
from ...errors import CompileError
from .. import pipeline
from .address import address, stack_offsets

NAME = "rune_bf16_gemm"
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
MR, NP = 8, 16          # rows of a packed block of a; columns of a packed panel of b (16 floats)
MB, NB = BFLOAT_TILE_ROWS, BFLOAT_TILE_COLS   # a thread's tile of the output (rune/base/tuning.py)

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define RUNE_DPBF16 1
#endif

#define MR 8
#define NP 16   /* columns of a packed panel of b: one vector of 16 floats */

/* b (k x n; element (p, j) at b[p sk + j sn]) as panels of NP columns: word (q kp + p) NP + j
   holds column q NP + j's pair (2p, 2p + 1), zero past n or k */
static void rune_pack_b(const uint16_t *b, int64_t sk, int64_t sn, int64_t k, int64_t n, uint32_t *out) {
  const int64_t kp = (k + 1) / 2, panels = (n + NP - 1) / NP;
  for (int64_t q = 0; q < panels; q++)
    for (int64_t p = 0; p < kp; p++) {
      uint32_t *o = out + (q * kp + p) * NP;
      const uint16_t *lo = b + 2 * p * sk + q * NP * sn, *hi = lo + sk;
      const int64_t cols = n - q * NP < NP ? n - q * NP : NP;
      const int odd = 2 * p + 1 == k;   /* the last pair of an odd K: its high half is zero */
      if (sn == 1 && cols == NP && !odd) {   /* rows of b in place: the compiler interleaves them in vectors */
        for (int64_t j = 0; j < NP; j++) o[j] = (uint32_t)lo[j] | ((uint32_t)hi[j] << 16);
        continue;
      }
      for (int64_t j = 0; j < NP; j++)
        o[j] = j >= cols ? 0 : (uint32_t)lo[j * sn] | (odd ? 0 : (uint32_t)hi[j * sn] << 16);
    }
}

/* rows of a (element (i, p) at a[i sm + p sk]) as blocks of MR rows: word (r0 / MR) (kp MR) + p MR + r
   holds row r's pair (2p, 2p + 1), zero past m or k */
static void rune_pack_a(const uint16_t *a, int64_t sm, int64_t sk, int64_t rows, int64_t k, uint32_t *out) {
  const int64_t kp = (k + 1) / 2, whole = k / 2;
  int64_t r0 = 0;
  if (sm == 1) {   /* a transposed (a weight's gradient): a^T's rows 2p and 2p + 1 read whole, each
                      block's MR words of pair p from MR elements of each */
    const int64_t blocks = rows / MR;
    for (int64_t p = 0; p < kp; p++) {
      const uint16_t *lo = a + 2 * p * sk, *hi = lo + sk;
      if (p < whole)
        for (int64_t q = 0; q < blocks; q++)
          for (int64_t r = 0; r < MR; r++)
            out[(q * kp + p) * MR + r] = (uint32_t)lo[q * MR + r] | (uint32_t)hi[q * MR + r] << 16;
      else
        for (int64_t q = 0; q < blocks; q++)
          for (int64_t r = 0; r < MR; r++) out[(q * kp + p) * MR + r] = lo[q * MR + r];
    }
    r0 = blocks * MR;
  }
  for (; r0 < rows; r0 += MR) {
    uint32_t *o = out + (r0 / MR) * kp * MR;
    for (int64_t r = 0; r < MR; r++) {
      const uint16_t *row = a + (r0 + r) * sm;
      if (r0 + r >= rows) {
        for (int64_t p = 0; p < kp; p++) o[p * MR + r] = 0;
        continue;
      }
      if (sk == 1)   /* a pair is one 32-bit word of the row (x86: unaligned reads are fine) */
        for (int64_t p = 0; p < whole; p++) memcpy(o + p * MR + r, row + 2 * p, 4);
      else
        for (int64_t p = 0; p < whole; p++)
          o[p * MR + r] = (uint32_t)row[2 * p * sk] | ((uint32_t)row[(2 * p + 1) * sk] << 16);
      if (kp > whole) o[whole * MR + r] = row[2 * whole * sk];
    }
  }
}

/* A's rows as the micro-kernel reads them (in bfloat16 elements from `at`): row r of group g, pair p
   at at + g gs + r rs + p ps. Packed (rune_pack_a): rs 2, ps 2 MR, gs 2 kp MR; in place (rows with
   unit stride along k): rs the row stride, ps 2, gs MR rs */
struct rune_rows { const uint16_t *at; int64_t rs, ps, gs; };

static inline uint32_t rune_pair(const uint16_t *x) {
  uint32_t w;
  memcpy(&w, x, 4);   /* x86 reads it unaligned at no cost */
  return w;
}

/* c[0:mr, 0:nr] (row stride ldc) = the block of `groups` groups of MR rows of A by `vecs` panels of NP
   columns (packed b, the next panel b_next words on), summed over k and rounded to bfloat16.
   groups x vecs <= 2: sixteen vectors of sums at most, all in registers; called with constants, so
   that the loops unroll. An odd K's last element is read alone (in place, the next may not exist) */
static inline __attribute__((always_inline)) void rune_bf16_block(
    const int groups, const int vecs, int64_t k, struct rune_rows a, const uint32_t *b, int64_t b_next,
    uint16_t *c, int64_t ldc, int64_t mr, int64_t nr) {
  const int64_t whole = k / 2;
#ifdef RUNE_DPBF16
  __m512 acc[2][MR][2];
  for (int g = 0; g < groups; g++)
    for (int r = 0; r < MR; r++)
      for (int v = 0; v < vecs; v++) acc[g][r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < (k + 1) / 2; p++) {
    __m512bh bv[2];
    for (int v = 0; v < vecs; v++) bv[v] = (__m512bh)_mm512_loadu_si512(b + v * b_next + p * NP);
    for (int g = 0; g < groups; g++)
      for (int r = 0; r < MR; r++) {
        const uint16_t *x = a.at + g * a.gs + r * a.rs + p * a.ps;
        const __m512bh av = (__m512bh)_mm512_set1_epi32((int)(p < whole ? rune_pair(x) : (uint32_t)x[0]));
        for (int v = 0; v < vecs; v++) acc[g][r][v] = _mm512_dpbf16_ps(acc[g][r][v], av, bv[v]);
      }
  }
  for (int g = 0; g < groups; g++)
    for (int r = 0; r < MR && g * MR + r < mr; r++)
      for (int v = 0; v < vecs && nr > NP * v; v++) {
        const int64_t cols = nr - NP * v;
        const __mmask16 keep = cols >= NP ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
        _mm256_mask_storeu_epi16(c + (g * MR + r) * ldc + NP * v, keep, (__m256i)_mm512_cvtneps_pbh(acc[g][r][v]));
      }
#else
  (void)groups; (void)vecs; (void)k; (void)a; (void)b; (void)b_next; (void)c; (void)ldc; (void)mr; (void)nr;
  (void)whole;
#endif
}

static inline struct rune_rows rune_rows_from(struct rune_rows a, int64_t r0) {
  a.at += (r0 / MR) * a.gs;   /* r0: a multiple of MR */
  return a;
}

/* a tile of mi x nj outputs at c from A's rows `a` (every row of every group readable) and the packed
   panels of its columns (b): 8 rows by 32 columns at a time; a last panel of 16 columns (or fewer)
   16 rows by 16 at a time */
static void rune_bf16_tile(int64_t k, struct rune_rows a, const uint32_t *b, uint16_t *c, int64_t ldc,
                           int64_t mi, int64_t nj) {
  const int64_t b_next = (k + 1) / 2 * NP;
  for (int64_t q0 = 0; q0 < nj; q0 += 2 * NP) {
    const uint32_t *bq = b + (q0 / NP) * b_next;
    const int64_t cols = nj - q0;
    if (cols > NP)
      for (int64_t r0 = 0; r0 < mi; r0 += MR)
        rune_bf16_block(1, 2, k, rune_rows_from(a, r0), bq, b_next, c + r0 * ldc + q0, ldc, mi - r0, cols);
    else
      for (int64_t r0 = 0; r0 < mi; r0 += 2 * MR) {
        if (mi - r0 > MR)
          rune_bf16_block(2, 1, k, rune_rows_from(a, r0), bq, b_next, c + r0 * ldc + q0, ldc, mi - r0, cols);
        else
          rune_bf16_block(1, 1, k, rune_rows_from(a, r0), bq, b_next, c + r0 * ldc + q0, ldc, mi - r0, cols);
      }
  }
}

/* count products c_i = a_i b_i of m x k by k x n (bfloat16; offsets[3 i ...]: the byte offsets of
   a_i, b_i, c_i; a: element strides sm, sk; b: sk, sn; c: row-major, row stride ldc), in tiles of
   mb x nb outputs on `threads` OpenMP threads; bpack: room for every product's packed b. Rows of a
   with unit stride along k are read in place, whole groups of 2 MR of them; the rest are packed */
int rune_bf16_gemm(int64_t count, const int64_t *offsets, const char *a, const char *b, char *c,
                   int64_t m, int64_t n, int64_t k, int64_t a_sm, int64_t a_sk, int64_t b_sk, int64_t b_sn,
                   int64_t ldc, int64_t mb, int64_t nb, uint32_t *bpack, int threads) {
  const int64_t kp = (k + 1) / 2, panels = (n + NP - 1) / NP, packed = panels * kp * NP;
  const int64_t rows = (m + mb - 1) / mb, cols = (n + nb - 1) / nb, tiles = rows * cols;
  int failed = 0;
  #pragma omp parallel num_threads(threads)
  {
    #pragma omp for schedule(static)
    for (int64_t t = 0; t < count * panels; t++) {   /* a panel of NP columns each */
      const int64_t i = t / panels, q = t % panels, cols = n - q * NP < NP ? n - q * NP : NP;
      rune_pack_b((const uint16_t *)(b + offsets[3 * i + 1]) + q * NP * b_sn, b_sk, b_sn, k, cols,
                  bpack + i * packed + q * kp * NP);
    }
    uint32_t *apack = (uint32_t *)malloc((size_t)(((mb + MR - 1) / MR) * MR * kp) * sizeof(uint32_t));
    if (apack == NULL) {
      #pragma omp atomic write
      failed = 1;
    }
    #pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < count * tiles; t++) {
      if (apack == NULL) continue;
      const int64_t i = t / tiles, i0 = (t % tiles) / cols * mb, j0 = (t % cols) * nb;
      const int64_t mi = m - i0 < mb ? m - i0 : mb, nj = n - j0 < nb ? n - j0 : nb;
      const uint16_t *ai = (const uint16_t *)(a + offsets[3 * i]) + i0 * a_sm;
      const uint32_t *bi = bpack + i * packed + (j0 / NP) * kp * NP;
      uint16_t *ci = (uint16_t *)(c + offsets[3 * i + 2]) + i0 * ldc + j0;
      const int64_t direct = a_sk == 1 ? mi / (2 * MR) * (2 * MR) : 0;   /* rows read in place */
      if (direct > 0) {
        const struct rune_rows rows_in_place = {ai, a_sm, 2, MR * a_sm};
        rune_bf16_tile(k, rows_in_place, bi, ci, ldc, direct, nj);
      }
      if (mi > direct) {
        rune_pack_a(ai + direct * a_sm, a_sm, a_sk, mi - direct, k, apack);
        const struct rune_rows rows_packed = {(const uint16_t *)apack, 2, 2 * MR, 2 * kp * MR};
        rune_bf16_tile(k, rows_packed, bi, ci + direct * ldc, ldc, mi - direct, nj);
      }
    }
    free(apack);
  }
  return failed;
}

/* whether this build has the bfloat16 dot products (rune_bf16_gemm computes nothing without them) */
int rune_bf16_native(void) {
#ifdef RUNE_DPBF16
  return 1;
#else
  return 0;
#endif
}

/* the unit's entry point (every unit has one): unused */
void rune_bf16_gemm_run(void **b) { (void)b; }
"""

_I64, _PTR, _INT = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
_ARGS = [_I64, _PTR, _PTR, _PTR, _PTR] + [_I64] * 10 + [_PTR, _INT]

_lock = threading.Lock()
_loaded = {}   # "entry": the C function, or None where there is no C compiler


def _entry(compiler):
    if "entry" not in _loaded:
        with _lock:
            if "entry" not in _loaded:
                _loaded["entry"] = _load(compiler)
    return _loaded["entry"]


def _load(compiler):
    if compiler is None:
        return None
    program = pipeline.build(compiler, "", [(NAME, SOURCE, ())])[0]
    if isinstance(program, CompileError):
        return None
    if not program.lib.rune_bf16_native():   # no bfloat16 dot products: the float32 route is faster
        return None
    fn = program.lib.rune_bf16_gemm
    fn.argtypes, fn.restype = _ARGS, ctypes.c_int
    return fn


def available(compiler):
    """Whether the kernel can be had (a C compiler that builds it)."""
    return _entry(compiler) is not None


def matmul(a, b, compiler):
    """np.matmul of bfloat16 stacks of one batch shape (or two matrices) as bfloat16,
    summed in float32 and rounded once; None without a C compiler (the caller then
    goes through float32)."""
    fn = _entry(compiler)
    if fn is None:
        return None
    a, b = (x if min(x.strides[-2:], default=0) >= 0 else np.ascontiguousarray(x) for x in (a, b))
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = a.shape[:-2]
    count = math.prod(batch)
    out = np.empty(batch + (m, n), BFLOAT16)
    if out.size == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    offsets = stack_offsets(batch, tuple(x.strides[:len(batch)] for x in (a, b, out)))
    kp, panels = (k + 1) // 2, -(-n // NP)
    bpack = np.empty(count * panels * kp * NP, np.uint32)
    n_threads = threads.stack_threads(m * k * n * count)
    mb, nb = _tile(m, n, count, n_threads)
    failed = fn(count, address(offsets), address(a), address(b), address(out), m, n, k, a.strides[-2] // 2,
                a.strides[-1] // 2, b.strides[-2] // 2, b.strides[-1] // 2, n, mb, nb, address(bpack), n_threads)
    if n_threads > 1:
        threads.pool_ran(n_threads)
    if failed:
        raise MemoryError("bfloat16 matmul: no memory for a thread's packed rows")
    return out


def _tile(m, n, count, n_threads):
    """(rows, columns) of the tiles the threads take: MB x NB (within the product),
    the rows halved, then the columns (down to 2 MR rows, 2 NP columns: the
    micro-kernel's blocks) while `count` products have fewer than two tiles a thread. A tile's
    size changes no sum (each runs over the whole K), so no bit."""
    rows, cols = min(MB, -(-m // (2 * MR)) * 2 * MR), min(NB, -(-n // (2 * NP)) * 2 * NP)
    while (n_threads > 1 and count * -(-m // rows) * -(-n // cols) < 2 * n_threads
           and (rows > 2 * MR or cols > 2 * NP)):
        if rows > 2 * MR:   # rows first: a tile packs its rows of a, a column's tiles each again
            rows = -(-rows // (4 * MR)) * 2 * MR
        else:
            cols = -(-cols // (4 * NP)) * 2 * NP
    return rows, cols
