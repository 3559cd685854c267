"""rune's tuning constants in one place, each with the measurement that chose it.

These set how fast rune runs, never what it computes: a result is the same
whatever value each takes (the reduction order, which does decide bits, is
fixed by rune/codegen/reductions.py's REDUCE_BLOCK and REDUCE_LANES, and the
thread-count-independent BLAS tiles by the products' shapes, not by these).
The modules named in each entry read them from here; a test that changes one
sets the module's attribute (`monkeypatch.setattr(module, NAME, ...)`).
Measured on a 2-core x86-64 host (AVX2), GCC 12, OpenBLAS 0.3.27, unless said.
"""

# ---------------------------------------------------------------- threads (rune/backends/cpu/threads.py)

# A matrix product of fewer multiply-adds runs on one thread: a 2048x64x32 matmul
# takes ~0.1 ms on one core and 0.06 ms on two, so a smaller one gains less than a
# team's wake-up costs.
BLAS_MIN_WORK = 1 << 22
# Seconds a reading of /proc/loadavg (the machine's other running tasks) is trusted;
# the thread count of a call is the CPUs free then. The fewest of the readings of
# the last RECENT_READINGS periods counts, so a system task passing through one
# reading does not cost the next calls their threads.
SAMPLE_PERIOD = 0.02
RECENT_READINGS = 4
# Idle OpenMP threads spin this many turns (libgomp: ~0.3-1 ms) or a millisecond
# (LLVM's libomp), then sleep: waking a sleeping thread costs 50-100 us here, more
# than a whole mid-sized loop, while a team that ran a moment ago is ready at once.
GOMP_SPINCOUNT = 30000
KMP_BLOCKTIME_MS = 1

# ---------------------------------------------------------------- products (rune/backends/cpu/batched_matmul.py)

# Rows and columns of an output tile of a threaded product: on one thread a tile is
# as fast as one whole call, within the noise.
MATMUL_TILE = 256
# Tiles a product is cut into at least, where tiles of MATMUL_MIN_SIDE allow; halving
# 64 x 64 tiles of a float64 64x20000x64 product doubled its memory traffic and time.
MATMUL_MIN_TILES = 8
MATMUL_MIN_SIDE = 64
# A product with fewer output tiles than MATMUL_MIN_TILES is cut along K into blocks
# whose two panels fit in this many bytes (L2-sized): a 10x100000x10 float32 product ran
# 1.23 ms in one BLAS call, 0.80 ms as 8 blocks of 12,544 and 0.17 ms as blocks of
# 3,328 (128 KiB) on two threads (NumPy's 1.12 ms); 32x300000x32: 7.1 -> 4.0 ms.
MATMUL_K_BLOCK_BYTES = 128 << 10

# ---------------------------------------------------------------- bfloat16 products (rune/backends/cpu/bf16_gemm.py)

# A thread's tile of a bfloat16 product's output: 64 rows by 256 columns (the widest
# layer of a transformer of d_model 64 in one tile, so no strided row block is packed
# twice; 64 x K x 2 bytes of packed rows stay in L2 up to K = 2048). Not swept: with
# them the GPT step's 51 products take 8.9 ms of CPU time on one thread (oneDNN's, in
# PyTorch: 8.4 ms).
BFLOAT_TILE_ROWS = 64
BFLOAT_TILE_COLS = 256

# ---------------------------------------------------------------- convolutions (rune/backends/cpu/conv.py)

# A compiled direct conv pays for its compile (once per geometry, then the disk
# cache) from this many multiply-adds; smaller convs (most eager calls) stay BLAS.
DIRECT_CONV_MIN_WORK = 1 << 18
# Accumulators of one pixel block (output channels x pixels): the vector registers;
# more output channels go to BLAS.
DIRECT_CONV_ACCUMULATORS = 256
# Every pixel block streams the whole kernel: beyond this many bytes it no longer
# stays in cache (a kernel's cotangent taken as a conv) and BLAS's blocking wins.
DIRECT_CONV_KERNEL_BYTES = 64 << 10
# Up to this many elements per window, one elementwise pass per window offset beats
# NumPy's reduction over several strided axes (host pooling).
POOL_FEW_OFFSETS = 32
# Up to this many elements per tiling window, a max's ties are counted offset by
# offset (rune/nx/convolution.py, the VJP of max pooling); larger windows reduce.
POOL_TIE_FEW_OFFSETS = 16

# ---------------------------------------------------------------- compiling (rune/backends/pipeline.py, cpu/compiler.py, cuda/nvrtc.py)

# One C compiler run costs ~70-100 ms whatever it holds: units go 64 to a
# translation unit when many are built at once (the op table's 5,900 units: 64 runs).
C_UNITS_PER_RUN = 64
# NVRTC's fixed cost per program is higher and its per-unit cost lower.
NVRTC_UNITS_PER_RUN = 200
# Compiler runs at once: bounded by the CPUs, and by this (a 64-core host would
# otherwise start 64 gcc processes of ~100 MB each).
MAX_COMPILE_THREADS = 16

# ---------------------------------------------------------------- what runs compiled (rune/compiler/lower.py, rune/nx/exact_math.py)

# A compiled call costs a few microseconds (the ctypes call, one pointer read per
# array), which NumPy spends on about as many tiny ops: a stretch whose values are
# all under this many elements and that has fewer than COMPILE_MIN_OPS ops runs op
# by op (RUNE_COMPILE_MIN_SIZE overrides it; the tests set it to 0).
COMPILE_MIN_SIZE = 4096
COMPILE_MIN_OPS = 16
# From this many elements, an eager exact-math call (the samplers' building blocks)
# runs compiled: below it, op by op is faster than the compile a new shape costs.
EAGER_COMPILE_SIZE = 1 << 18

# ---------------------------------------------------------------- kernels (rune/codegen/rows.py, rune/codegen/c.py)

# Fewer rows than this and a row group gains nothing (nor does a parallel loop over them).
ROW_GROUP_MIN_ROWS = 16
# Columns of the output's last axis a column reduction folds side by side.
COLUMN_TILE = 64

# ---------------------------------------------------------------- NumPy surface (rune/nx/sequence_convolution.py)

# Past this many taps (of the shorter operand) convolve/correlate go through the FFT:
# its O(L log L) beats the direct O(n k) loop.
FFT_CONVOLVE_FROM = 128
