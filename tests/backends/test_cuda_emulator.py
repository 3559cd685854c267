"""The CUDA emulation's execution model (rune/backends/cuda/emulator/cuda_emu.h: a
block's threads are fibers on the launching thread) on hand-written kernels built
through its Library: barriers, warp shuffles and votes, atomics and shared memory
give what CUDA defines (the oracle: the same rules written out in NumPy and Python
loops), and a launch that would fault or hang on a GPU fails with an error naming
the kernel, the block and the threads. Each check runs on both fiber switches: the
hand-written x86-64 one (where the host has it) and glibc's ucontext."""
import re
import types

import numpy as np
import pytest

from rune.backends.cuda import emulator
from rune.backends.cuda.emulator import BarrierDeadlock, Library, MisalignedAccess, OutOfBoundsWrite
from rune.codegen.cuda import Launch
from rune.errors import ArgumentError

pytestmark = [pytest.mark.cc,
              pytest.mark.skipif(emulator.compiler() is None, reason="the CUDA emulation needs g++")]

UNIT = r"""
// Each thread's value after a warp's shuffle-down tree, its block's total through
// shared memory (thread 0 adds the warps' partials after a barrier, every thread
// reads the total after another), and the total less its own value.
__global__ void block_sums(const float *x, float *tree, float *rest) {
  __shared__ float part[32];
  __shared__ float total;
  const unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  float v = x[i];
  for (unsigned off = 16; off; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  tree[i] = v;
  if (t % 32 == 0) part[t / 32] = v;
  __syncthreads();
  if (t == 0) {
    float s = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) s += part[w];
    total = s;
  }
  __syncthreads();
  rest[i] = total - x[i];
}

__global__ void shuffles(const int *x, int *up, int *flip, int *from) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
  up[i] = __shfl_up_sync(0xffffffffu, x[i], 3);
  flip[i] = __shfl_xor_sync(0xffffffffu, x[i], 5);
  from[i] = __shfl_sync(0xffffffffu, x[i], (lane * 7) % 32);
}

__global__ void votes(const int *pred, unsigned *ballot, unsigned *masked, int *any, int *all) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  ballot[i] = __ballot_sync(0xffffffffu, pred[i]);
  masked[i] = __ballot_sync(0x5555ffffu, pred[i]);
  any[i] = __any_sync(0xffffffffu, pred[i]);
  all[i] = __all_sync(0xffffffffu, pred[i]);
}

// acc: sum, max, min, minus the sum, float sum; owner[k]: the first thread to claim key k,
// x mod 8 as Python takes it (atomicCAS); last: every thread's index swapped in
// (atomicExch), the one it replaced in seen.
__global__ void atomics(const int *x, int *acc, float *fsum, int *owner, int *claimed, int *last, int *seen) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&acc[0], x[i]);
  atomicMax(&acc[1], x[i]);
  atomicMin(&acc[2], x[i]);
  atomicSub(&acc[3], x[i]);
  atomicAdd(fsum, (float)x[i]);
  claimed[i] = atomicCAS(&owner[(x[i] % 8 + 8) % 8], -1, i) == -1;   // C's % keeps x's sign: key in [0, 8)
  seen[i] = atomicExch(last, i);
}

// threads 40 and up return; the rest wait at a __syncthreads nobody else reaches
__global__ void diverge_at_syncthreads(int *out) {
  if (threadIdx.x >= 40) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

// one thread of block 1 returns early; blocks 0 and 2 are whole
__global__ void one_thread_leaves_block_1(int *out) {
  if (blockIdx.x == 1 && threadIdx.x == 5) return;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// the upper half of each warp returns; the lower half shuffles (its mask names all 32)
__global__ void half_warps_shuffle(int *out) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x % 32 >= 16) return;
  out[i] = __shfl_down_sync(0xffffffffu, (int)i, 1);
}

// thread t stores at out[t + shift]: a shift of 1 writes one element past the end (the
// last thread), -2 two before the start (threads 0 and 1)
__global__ void store_shifted(int *out, const int *shift) {
  out[(int)(blockIdx.x * blockDim.x + threadIdx.x) + *shift] = 7;
}

// thread 7 stores a double 4 bytes past an 8-byte boundary between two barriers
__global__ void misaligned_between_barriers(double *out) {
  __syncthreads();
  if (threadIdx.x == 7) *(double *)((char *)out + 4) = 1.0;
  __syncthreads();
  out[threadIdx.x] = 2.0;
}
"""

PARAMS = {"block_sums": ["const float *", "float *", "float *"],
          "shuffles": ["const int *", "int *", "int *", "int *"],
          "votes": ["const int *", "unsigned *", "unsigned *", "int *", "int *"],
          "atomics": ["const int *", "int *", "float *", "int *", "int *", "int *", "int *"],
          "diverge_at_syncthreads": ["int *"],
          "one_thread_leaves_block_1": ["int *"],
          "half_warps_shuffle": ["int *"],
          "misaligned_between_barriers": ["double *"],
          "store_shifted": ["int *", "const int *"]}
LAUNCHES = {name: Launch(name, 1, 32, 0, [(t, f"a{i}") for i, t in enumerate(types_)])
            for name, types_ in PARAMS.items()}
# the ucontext switch asked for where the header would take its own (the same on other hosts)
SWITCHES = {"own switch": (), "ucontext": ("-DRN_EMU_UCONTEXT",)}


@pytest.fixture(scope="module", params=list(SWITCHES), ids=list(SWITCHES))
def library(request):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emulator, "FLAGS", emulator.FLAGS + SWITCHES[request.param])
        return Library("", [(UNIT, [types.SimpleNamespace(launches=list(LAUNCHES.values()))])])


def _run(library, name, grid, block, *buffers):
    library.launch(LAUNCHES[name], grid, block, list(buffers))
    return buffers


def _warps(a):
    return a.reshape(-1, 32)


def _shfl_down_tree(x):
    """Each lane's value after `v += shfl_down(v, off)` for off = 16 .. 1: a lane whose
    source is past the warp keeps its own value (CUDA's rule)."""
    v = _warps(x).astype(np.float64)
    lanes = np.arange(32)
    for off in (16, 8, 4, 2, 1):
        src = np.where(lanes + off < 32, lanes + off, lanes)
        v = v + v[:, src]
    return v.reshape(-1)


@pytest.mark.parametrize("grid,block", [(3, 64), (2, 256), (1, 1024), (3, 64)])
def test_shuffle_trees_and_block_barriers_give_cudas_values(library, grid, block):
    """Sizes grow and shrink across launches: the fibers' stacks are reused."""
    x = np.random.default_rng(block).integers(0, 100, grid * block).astype(np.float32)   # sums exact
    tree, rest = _run(library, "block_sums", grid, block, x, np.zeros_like(x), np.zeros_like(x))[1:]
    np.testing.assert_array_equal(tree, _shfl_down_tree(x))
    totals = np.repeat(x.reshape(grid, block).sum(axis=1, dtype=np.float64), block)
    np.testing.assert_array_equal(rest, totals - x)


def test_shuffle_up_xor_and_indexed_read_the_lanes_cuda_names(library):
    x = np.random.default_rng(1).integers(-1000, 1000, 128).astype(np.int32)
    up, flip, src = _run(library, "shuffles", 2, 64, x, *(np.zeros_like(x) for _ in range(3)))[1:]
    lanes, w = np.arange(32), _warps(x)
    np.testing.assert_array_equal(_warps(up), w[:, np.where(lanes >= 3, lanes - 3, lanes)])
    np.testing.assert_array_equal(_warps(flip), w[:, lanes ^ 5])
    np.testing.assert_array_equal(_warps(src), w[:, lanes * 7 % 32])


def test_votes_count_the_live_lanes_of_a_partial_warp(library):
    """Blocks of 48 threads: a warp of 32 lanes, then one of 16 (lanes past the block's end
    vote for nothing)."""
    grid, block = 2, 48
    pred = (np.random.default_rng(2).random(grid * block) < 0.5).astype(np.int32)
    pred[:32] = 1   # one warp where every lane holds
    out = _run(library, "votes", grid, block, pred, *(np.zeros(grid * block, t) for t in
                                                      (np.uint32, np.uint32, np.int32, np.int32)))[1:]
    want = [[] for _ in out]
    for first in (b * block + w * 32 for b in range(grid) for w in range(-(-block // 32))):
        live = min(32, block - first % block)
        bits = sum(1 << lane for lane in range(live) if pred[first + lane])
        for got, value in zip(want, (bits, bits & 0x5555ffff, int(bits != 0), int(bits == (1 << live) - 1))):
            got += [value] * live
    for got, w in zip(out, want):
        assert got.tolist() == w
    assert out[3][0] == 1 and not out[3][32:].all()


def test_atomics_combine_every_thread_once(library):
    x = np.random.default_rng(3).integers(-50, 50, 192).astype(np.int32)
    acc = np.array([0, -2**31, 2**31 - 1, 0], np.int32)
    owner, last = np.full(8, -1, np.int32), np.array([-1], np.int32)
    acc, fsum, owner, claimed, last, seen = _run(library, "atomics", 3, 64, x, acc, np.zeros(1, np.float32), owner,
                                                 np.zeros_like(x), last, np.zeros_like(x))[1:]
    assert acc.tolist() == [x.sum(), x.max(), x.min(), -x.sum()]
    assert fsum[0] == x.sum()
    keys = x % 8
    assert claimed.sum() == len(set(keys.tolist()))
    for k in range(8):
        claimers = np.flatnonzero(claimed & (keys == k))
        assert owner[k] == (claimers[0] if len(claimers) else -1)
    # each index swapped in was swapped out once, and -1 first: a chain through every thread
    assert sorted(seen.tolist() + last.tolist()) == [-1] + list(range(192))


def _stuck(library, name, grid, block):
    out = np.zeros(grid * block, np.int32)
    with pytest.raises(BarrierDeadlock) as err:
        _run(library, name, grid, block, out)
    return str(err.value), out


def test_threads_diverging_around_syncthreads_fail_the_launch_naming_who_waits(library):
    """On a GPU the block hangs; here the launch fails, and the library runs the next one."""
    msg, out = _stuck(library, "diverge_at_syncthreads", 2, 64)
    assert msg == ("kernel diverge_at_syncthreads (grid 2, block 64): block 0 never completes a barrier: "
                   "24 of its 64 threads returned, 40 wait at __syncthreads")
    assert not out.any()   # nobody passed the barrier
    msg, out = _stuck(library, "one_thread_leaves_block_1", 3, 64)
    assert "block 1 never completes a barrier: 1 of its 64 threads returned, 63 wait at __syncthreads" in msg
    assert out[:64].all() and not out[64:128].any()   # block 0 ran whole, block 1 stopped at its barrier
    x = np.arange(64, dtype=np.float32)
    (rest,) = _run(library, "block_sums", 1, 64, x, np.zeros_like(x), np.zeros_like(x))[2:]
    np.testing.assert_array_equal(rest, x.sum() - x)


def test_a_shuffle_half_a_warp_never_reaches_fails_the_launch(library):
    msg, _ = _stuck(library, "half_warps_shuffle", 1, 64)
    assert re.fullmatch(r"kernel half_warps_shuffle \(grid 1, block 64\): block 0 never completes a barrier: "
                        r"32 of its 64 threads returned, 0 wait at __syncthreads, "
                        r"16 of warp 0's 32 lanes at its warp barrier \(.*\), "
                        r"16 of warp 1's 32 lanes at its warp barrier \(.*\)", msg), msg


def test_a_misaligned_store_between_barriers_fails_the_launch_not_hangs_it(library):
    out = np.zeros(64, np.float64)
    assert out.ctypes.data % 8 == 0
    with pytest.raises(MisalignedAccess, match=r"^kernel misaligned_between_barriers \(grid 2, block 64\): "
                                               r"misaligned access at 0x[0-9a-f]+ \(4 bytes past a 8-byte boundary "
                                               r"the type needs\), line \d+ of the unit, thread 7 of block 0$"):
        _run(library, "misaligned_between_barriers", 2, 64, out)


def test_a_store_just_outside_an_allocated_buffer_fails_the_launch_naming_it(library):
    # buffers the emulation allocates (a plan's outputs, intermediates, scratch) lie between
    # red zones, checked after each launch: on a GPU the store would land in another allocation
    for shift, message in ((0, None),
                           (1, r"argument 0 \(int32\[64\], 256 bytes\): wrote 4 byte\(s\) after its end, "
                               r"at byte offsets 256 to 259"),
                           (-2, r"argument 0 \(int32\[64\], 256 bytes\): wrote 8 byte\(s\) before its start, "
                                r"at byte offsets -8 to -1")):
        out = library.alloc(np.int32, (64,))
        args = (library, "store_shifted", 2, 32, out, np.array([shift], np.int32))
        if message is None:
            _run(*args)
            assert (out == 7).all()   # every element written once, nothing outside
            continue
        with pytest.raises(OutOfBoundsWrite, match=r"^kernel store_shifted \(grid 2, block 32\), " + message):
            _run(*args)
    _run(library, "store_shifted", 2, 32, np.zeros(64, np.int32), np.array([0], np.int32))   # not ours: unchecked


def test_a_block_larger_than_cuda_allows_is_refused(library):
    with pytest.raises(ArgumentError, match=r"block 1025\): a block of 1025 threads \(CUDA runs 1 to 1024\)"):
        _run(library, "diverge_at_syncthreads", 1, 1025, np.zeros(1025, np.int32))
