"""Run under mpiexec by tests/distributed/test_distributed_mpi.py: every collective against NumPy.

Each rank builds its inputs from its rank number alone, so every rank can
also build every other rank's inputs and compute the expected results with
NumPy (the oracle never goes through rune's own collectives). Prints
"OK rank R of N" at the end; any failed check raises, which aborts the run.
"""
import numpy as np

import rune
import rune.distributed as dist
from rune import nx
from rune.distributed import runtime
from rune.core import dtypes as dt

dist.initialize()
RANK, SIZE = dist.rank(), dist.size()
assert 0 <= dist.local_rank() < SIZE
# every rank runs on this machine: one node, named by its first rank
assert runtime.initialize().node == 0 and dist.local_rank() == RANK


def inputs(r):
    """Rank r's tree: integer-valued floats, so sums are exact in any order."""
    g = np.random.default_rng(100 + r)
    ints = lambda shape, lo=-8, hi=9: g.integers(lo, hi, shape)
    return {
        "f32": ints((2, 3)).astype(np.float32),
        "f64": ints((4,)).astype(np.float64),
        "i32": ints((5,)).astype(np.int32),
        "i64_0d": np.int64(ints(())),
        "bf16": ints((3,)).astype(dt.bfloat16),
        "bf16_b": ints((2, 2)).astype(dt.bfloat16),     # two bf16 leaves: packed together
        "f16": ints((2, 2)).astype(np.float16),
        "bool": ints((4,), 0, 2).astype(bool),
        "empty": np.zeros((0, 3), np.float32),
        "f32_0d": np.float32(ints(())),
        "i16": ints((2, 3)).astype(np.int16),
        "u16": ints((3,), 0, 9).astype(np.uint16),
        "c64": (ints((3,)) + 1j * ints((3,))).astype(np.complex64),
        "c128": (ints((2,)) - 1j * ints((2,))).astype(np.complex128),
    }


ALL = [inputs(r) for r in range(SIZE)]
MINE = ALL[RANK]


def same(got, want, what):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.tobytes() == want.tobytes(), f"{what}: {got} != {want}"   # bit for bit


def reduce_oracle(key, op):
    stack = np.stack([np.asarray(t[key]) for t in ALL])
    dtype = stack.dtype
    work = stack.astype(np.float32) if dtype in (np.float16, dt.bfloat16) else stack
    if dtype == np.bool_:
        return (stack.max(0) if op == "max" else stack.min(0))
    out = {"sum": lambda: work.sum(0), "max": lambda: work.max(0), "min": lambda: work.min(0),
           "mean": lambda: work.sum(0) / work.dtype.type(SIZE)}[op]()
    return np.asarray(out).astype(dtype)


def valid(key, op):
    kind = np.asarray(MINE[key]).dtype
    if kind == np.bool_:
        return op in ("max", "min")
    if kind.kind == "c":   # complex numbers have no order
        return op in ("sum", "mean")
    return op != "mean" or kind.kind in "fcV"


# ---- all_reduce: one call per op over the leaves it applies to (a mixed-dtype tree)
for op in ("sum", "mean", "max", "min"):
    keys = [k for k in MINE if valid(k, op)]
    got = dist.all_reduce({k: MINE[k] for k in keys}, op)
    for k in keys:
        same(got[k], reduce_oracle(k, op), f"all_reduce {op} {k}")

# ---- max and min propagate NaN as np.max does, whichever rank holds it: rank r alone
# has a NaN at index r, and every rank has one at the last index
def with_nans(r, dtype):
    x = np.arange(SIZE + 2, dtype=np.float64) * (r + 1)
    x[r] = x[-1] = np.nan
    return x.astype(dtype)


for dtype in (np.float32, np.float64, np.float16, dt.bfloat16):
    stack = np.stack([with_nans(r, dtype).astype(np.float64) for r in range(SIZE)])
    for op in ("max", "min"):
        got = np.asarray(dist.all_reduce({"x": with_nans(RANK, dtype)}, op)["x"])
        want = (stack.max(0) if op == "max" else stack.min(0)).astype(dtype)
        assert got.dtype == want.dtype and np.isnan(want[:SIZE]).all(), (got.dtype, want)
        # compared as float64 (exact for every dtype here): NumPy 2.2's assert_array_equal
        # does not see bfloat16 NaNs as equal, whatever rune computed
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64),
                                      err_msg=f"all_reduce {op} with NaN, {np.dtype(dtype).name}")

# ---- broadcast from every root: bit for bit
for root in range(SIZE):
    got = dist.broadcast(MINE, root=root)
    for k in MINE:
        same(got[k], ALL[root][k], f"broadcast root {root} {k}")
same(dist.broadcast(nx.asarray(MINE["f32"])), ALL[0]["f32"], "broadcast's default root")

# ---- all_gather along each axis, negative axes too
for k, v in MINE.items():
    v = np.asarray(v)
    for axis in range(-v.ndim, v.ndim):
        same(dist.all_gather(v, axis), np.concatenate([np.asarray(t[k]) for t in ALL], axis), f"all_gather {k} {axis}")
tree_gather = dist.all_gather({"a": MINE["f32"], "b": [MINE["bf16"]]})
same(tree_gather["b"][0], np.concatenate([t["bf16"] for t in ALL]), "all_gather of a tree")

# ---- large trees are bucketed: several leaves of several buckets still come back right
from rune.distributed import host
saved, host.BUCKET_BYTES = host.BUCKET_BYTES, 64
big = [np.full((7,), RANK + k, np.float32) for k in range(9)]
for k, got in enumerate(dist.all_reduce(big)):
    same(got, np.full((7,), sum(r + k for r in range(SIZE)), np.float32), f"bucketed leaf {k}")
host.BUCKET_BYTES = saved

# ---- a model's state, dtypes mixed: packed by host.layout, every leaf comes back at a
# multiple of 16 bytes of its bucket (a bfloat16 bias of 3 put the float32 weight after it
# at byte 6, the int64 at byte 70), with NumPy's bits; in one bucket and in several
from rune.distributed import host


def model_state(r):
    g = np.random.default_rng(300 + r)
    ints = lambda shape: g.integers(-9, 10, shape)
    return [ints(3).astype(dt.bfloat16), ints((4, 4)).astype(np.float32), np.int64(ints(())).reshape(()),
            ints(5).astype(bool), (ints(3) + 1j * ints(3)).astype(np.complex64), ints(2).astype(np.float32),
            ints((3, 1)).astype(np.int16), ints(7).astype(np.uint8)]


def aligned(arrays, what):
    for k, a in enumerate(arrays):
        assert a.size == 0 or a.__array_interface__["data"][0] % 16 == 0, \
            f"{what}: leaf {k} ({a.dtype}) at address % 16 = {a.__array_interface__['data'][0] % 16}"


STATES = [model_state(r) for r in range(SIZE)]
group = runtime.initialize()
for bucket in (host.BUCKET_BYTES, 48):
    saved, host.BUCKET_BYTES = host.BUCKET_BYTES, bucket
    got = host.broadcast(group, STATES[RANK], SIZE - 1)
    aligned(got, "broadcast")
    for k, (g_, w) in enumerate(zip(got, STATES[-1])):
        same(g_, w, f"broadcast of a mixed tree, leaf {k}, buckets of {bucket} bytes")
    shaped = [k for k, a in enumerate(STATES[RANK]) if a.ndim]
    got = host.all_gather(group, [STATES[RANK][k] for k in shaped], [0] * len(shaped))
    for g_, k in zip(got, shaped):
        same(g_, np.concatenate([s[k] for s in STATES]), f"all_gather of a mixed tree, leaf {k}")
    numbers = [k for k, a in enumerate(STATES[RANK]) if a.dtype != np.bool_]
    got = host.all_reduce(group, [STATES[RANK][k] for k in numbers], "sum")
    aligned(got, "all_reduce")
    for g_, k in zip(got, numbers):
        stack = np.stack([s[k] for s in STATES])
        work = stack.astype(np.float32) if stack.dtype == dt.bfloat16 else stack
        same(g_, work.sum(0).astype(stack.dtype), f"all_reduce of a mixed tree, leaf {k}")
    host.BUCKET_BYTES = saved

# ---- one GPU per rank, checked over MPI before NCCL: every rank raises, naming the first two
# ranks claiming one GPU; a GPU each passes
try:
    runtime.check_one_gpu_per_rank(group, 0, "0000:3B:00.0", 1)
except rune.DistributedError as e:
    assert "rank 0 (on cuda:0) and rank 1 (on cuda:0) both use the GPU at PCI 0000:3B:00.0" in str(e), e
    assert "launch at most 1 rank(s) per node" in str(e), e
else:
    raise AssertionError("two ranks on one GPU passed the check")
runtime.check_one_gpu_per_rank(group, RANK, f"0000:{RANK + 1:02X}:00.0", SIZE)

# ---- jit: the same results as eager, every collective kept and run once, in order
def step(t):
    s = dist.all_reduce(t["f32"] * 2.0, "sum")
    unused = dist.all_reduce(t["f64"], "max")   # never removed although nothing reads it
    g = dist.all_gather(t["bf16"])
    b = dist.broadcast(t["i32"], root=SIZE - 1)
    return s, g, b

jitted = rune.jit(step)
before = runtime.initialize().seq
eager = step(MINE)
after_eager = runtime.initialize().seq
for _ in range(2):
    staged = jitted(MINE)
    for e, s in zip(eager, staged):
        same(s, e, "jit vs eager")
assert runtime.initialize().seq - after_eager == 2 * (after_eager - before) == 8, runtime.initialize().seq

# ---- a gradient through all_reduce(mean) against the gradient of the global mean loss
g = np.random.default_rng(7)
w0 = g.standard_normal(3)
X = g.standard_normal((4 * SIZE, 3))
y = g.standard_normal(4 * SIZE)
Xr, yr = X[4 * RANK:4 * RANK + 4], y[4 * RANK:4 * RANK + 4]

def global_loss(w):
    local = nx.mean((nx.asarray(Xr) @ w - nx.asarray(yr)) ** 2)
    return dist.all_reduce(local, "mean")

want = 2 * X.T @ (X @ w0 - y) / X.shape[0]            # NumPy: d/dw of the mean over the global batch
local = 2 * Xr.T @ (Xr @ w0 - yr) / Xr.shape[0]
for how, fn in (("eager", rune.grad(global_loss)), ("jit", rune.jit(rune.grad(global_loss)))):
    g_rank = fn(nx.asarray(w0))
    np.testing.assert_allclose(np.asarray(g_rank), local, rtol=1e-12, err_msg=f"{how}: psum convention")
    np.testing.assert_allclose(np.asarray(dist.all_reduce(g_rank, "mean")), want, rtol=1e-12, err_msg=how)
loss = rune.jit(global_loss)(nx.asarray(w0))
np.testing.assert_allclose(float(loss), np.mean((X @ w0 - y) ** 2), rtol=1e-12)

# forward mode: the tangent of all_reduce(sum) is the all_reduce of the tangents
_, t = rune.jvp(lambda x: dist.all_reduce(x * (RANK + 1.0), "sum"), (nx.asarray(w0),), (nx.ones(3, dtype="float64"),))
np.testing.assert_allclose(np.asarray(t), np.full(3, sum(r + 1.0 for r in range(SIZE))))

# all_gather's transpose: this rank's slice of the summed cotangents
C = [np.arange(6.0 * SIZE).reshape(2 * SIZE, 3) * (r + 1) for r in range(SIZE)]
gx = rune.grad(lambda x: nx.sum(dist.all_gather(x, 0) * nx.asarray(C[RANK])))(nx.ones((2, 3), dtype="float64"))
np.testing.assert_allclose(np.asarray(gx), sum(C)[2 * RANK:2 * RANK + 2])

# broadcast's transpose: the summed cotangents on the root, zeros elsewhere
gb = rune.grad(lambda x: nx.sum(dist.broadcast(x, root=0) * (RANK + 1.0)))(nx.ones(3, dtype="float64"))
np.testing.assert_allclose(np.asarray(gb), np.full(3, sum(r + 1.0 for r in range(SIZE)) if RANK == 0 else 0.0))

# ---- shard: disjoint, equal counts, covering all but n % size, the same permutation everywhere
for n in (10, 11, 0, 2):
    for epoch in (0, 1):
        mine = dist.shard(n, epoch, seed=3)
        every = np.asarray(dist.all_gather(nx.asarray(mine.astype(np.int64)), 0))
        assert len(mine) == n // SIZE, (n, len(mine))
        assert len(set(every.tolist())) == len(every) == n - n % SIZE, every
        assert set(every.tolist()) <= set(range(n))
        same(every, np.random.default_rng([3, epoch]).permutation(n)[:len(every)], "shard order")
assert not np.array_equal(dist.shard(10, 0, 3), dist.shard(10, 1, 3)) or SIZE > 5

dist.barrier()
print(f"OK rank {RANK} of {SIZE}", flush=True)
