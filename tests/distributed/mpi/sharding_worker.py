"""Run under mpiexec by tests/distributed/test_sharding_mpi.py (argv[1]: what to check).

- collectives: reduce_scatter and all_gather against NumPy (every rank builds every
  rank's inputs from the rank number, so the oracle never goes through MPI), the
  sums in rank order as all_reduce takes them, eagerly, in jit and under grad;
- train: 20 jitted steps of a data-parallel MLP and char transformer, unsharded
  (all_reduce of the gradients) and sharded (ZeRO-1, ZeRO-2, ZeRO-3), with
  parameter counts that do not divide by the number of ranks: the parameters
  must be bit for bit the same;
- mismatch: rank 1 passes another shape: a DistributedError on every rank naming ranks
  and leaf, printed ("rank R raised DistributedError: ..."); it moves no data, so the
  checks after it run as in a fresh launch (first, it is collective #1);
- save, load, failed-save, missing (argv[2]: a folder): a sharded checkpoint saved on
  one group of ranks and resumed on another.
argv[1] names the checks, comma-separated ("mismatch,collectives,train-mlp"), run in one
launch; "OK rank R of N <check> passed" is printed as each passes; a failed check raises,
which aborts the run (and so fails the checks after it too).
"""
import hashlib
import os
import sys

import numpy as np

# Every stretch compiled, as in the test suite: with the default threshold a small
# stretch runs op by op (NumPy), and which stretches are small depends on where the
# collectives cut the program, so toy models could round differently in the last bit.
os.environ.setdefault("RUNE_COMPILE_MIN_SIZE", "0")

import rune
import rune.distributed as dist
from rune import nn, nx, optim
from rune.core import dtypes as dt

dist.initialize()
RANK, SIZE = dist.rank(), dist.size()
WHAT = sys.argv[1]


def same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    assert got.tobytes() == want.tobytes(), f"{what}: {got} != {want}"


def padded_block(x, axis, r):
    """Rank r's block of x along axis, x padded with zeros to a multiple of SIZE (the oracle)."""
    x = np.moveaxis(x, axis, 0)
    b = -(-x.shape[0] // SIZE)
    x = np.concatenate([x, np.zeros((b * SIZE - x.shape[0],) + x.shape[1:], x.dtype)])
    return np.moveaxis(x[r * b:(r + 1) * b], 0, axis)


def fold(xs, combine):
    acc = xs[0]
    for x in xs[1:]:
        acc = combine(acc, x)
    return acc


def check_collectives():
    def inputs(r):
        g = np.random.default_rng(7 + r)
        scale = np.float32(10.0) ** (3 * r)   # magnitudes apart: the order of the sum shows in the bits
        return {"w": (g.standard_normal((7, 3)) * scale).astype(np.float32),
                "big": (g.standard_normal(300_001) * scale).astype(np.float32),   # > 1 MB: MPICH's own
                "b16": g.standard_normal(5).astype(dt.bfloat16),                   # reduce_scatter reorders
                "i": g.integers(-9, 9, (4, 5)).astype(np.int32),
                "c": (g.standard_normal(3) + 1j * g.standard_normal(3)).astype(np.complex64)}
    every = [inputs(r) for r in range(SIZE)]
    mine = {k: nx.asarray(v) for k, v in every[RANK].items()}
    for op in ("sum", "mean"):
        mine = {k: v for k, v in mine.items() if op == "sum" or k != "i"}   # no mean of integers
        got = dist.reduce_scatter(mine, op)
        reduced = dist.all_reduce(mine, op)
        for k in mine:
            work = np.float32 if k == "b16" else every[0][k].dtype
            total = fold([e[k].astype(work) for e in every], lambda a, b: a + b)
            if op == "mean":
                total = total / np.array(SIZE, work)
            want = padded_block(total.astype(every[0][k].dtype), 0, RANK)
            same(got[k], want, f"reduce_scatter {op} {k}")
            same(got[k], padded_block(np.asarray(reduced[k]), 0, RANK), f"reduce_scatter {op} {k} vs all_reduce")
        back = dist.all_gather(got, length={k: v.shape[0] for k, v in mine.items()})
        if op == "sum":
            same(back["w"], np.asarray(reduced["w"]), "all_gather of the blocks")
    # along axis 1, max with a NaN on one rank only (NaN wins, as nx.max)
    x = np.arange(4 * 5, dtype=np.float32).reshape(4, 5) * (RANK + 1)
    if RANK == SIZE - 1:
        x[0, 0] = np.nan
    got = dist.reduce_scatter(nx.asarray(x), "max", axis=1)
    want = np.arange(20, dtype=np.float32).reshape(4, 5) * SIZE
    want[0, 0] = np.nan
    same(got, padded_block(want, 1, RANK), "reduce_scatter max along axis 1")
    # in jit, under grad: d/dw sum over ranks of sum(all_gather(w * c_r)^2) and of reduce_scatter
    w = nx.asarray(np.float32([1.0, 2.0, 3.0]) + RANK)
    c = np.float32(RANK + 1)
    g = rune.jit(rune.grad(lambda w: nx.sum(dist.all_gather(w * c) ** 2)))(w)
    ws = [np.float32([1.0, 2.0, 3.0]) + r for r in range(SIZE)]
    same(g, 2 * c * c * ws[RANK] * SIZE, "grad of all_gather")   # every rank's loss holds w_r's square
    v = nx.asarray(np.arange(7, dtype=np.float32) * (RANK + 1))
    g = rune.jit(rune.grad(lambda v: nx.sum(dist.reduce_scatter(v, "sum") * (RANK + 1.0))))(v)
    coeff = np.concatenate([np.full(-(-7 // SIZE), r + 1.0, np.float32) for r in range(SIZE)])[:7]
    same(g, coeff, "grad of reduce_scatter")


class MLP(nn.Module):
    one: nn.Linear
    two: nn.Linear

    def __init__(self, key, d_in, hidden, d_out):
        k1, k2 = nx.random.split(key)
        self.one = nn.Linear(k1, d_in, hidden)
        self.two = nn.Linear(k2, hidden, d_out)

    def __call__(self, x):
        return self.two(nn.gelu(self.one(x)))


EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                        "examples")


def charlm():
    sys.path.insert(0, EXAMPLES)
    from train_charlm import CharTransformer, loss_fn
    return CharTransformer(nx.random.key(0), 13, 8, d_model=8, heads=2, layers=1, hidden=12), loss_fn


def digits():
    """examples/train_digits.py's CNN (8x8 images; 12,000 parameters, none divisible by 3 in
    every leaf), its loss on a batch (images, labels)."""
    sys.path.insert(0, EXAMPLES)
    from train_digits import DigitsCNN, loss_fn
    return DigitsCNN(nx.random.key(0)), lambda model, batch: loss_fn(model, *batch)


def mlp():
    def loss_fn(model, batch):
        x, y = batch[:, :-1], batch[:, -1:]
        return nx.mean((model(x) - y) ** 2)
    return MLP(nx.random.key(0), 5, 7, 1), loss_fn   # 5*7+7 + 7+1 = 50 parameters: not a multiple of 3


def batches(kind, steps):
    g = np.random.default_rng(1000 + RANK)   # each rank its own data
    if kind == "charlm":
        return [g.integers(0, 13, (4, 9)).astype(np.int32) for _ in range(steps)]
    if kind == "digits":
        return [(g.random((4, 8, 8, 1)).astype(np.float32), g.integers(0, 10, 4).astype(np.int32))
                for _ in range(steps)]
    return [g.standard_normal((6, 6)).astype(np.float32) for _ in range(steps)]


def train(model, loss_fn, opt, data, mode):
    """20 jitted steps; unsharded: all_reduce of the gradients and the plain optimizer."""
    if mode == "zero3":
        model = dist.fully_shard(model.replace(**{k: dist.fully_shard(getattr(model, k)) for k in
                                                   model._children if isinstance(getattr(model, k), nn.Module)}))
    wrapped = opt if mode == "ddp" else dist.sharded(opt, stage=1 if mode == "zero1" else 2)
    state = wrapped.init(model)

    @rune.jit
    def step(model, state, batch):
        loss, grads = rune.value_and_grad(loss_fn)(model, batch)
        if mode == "ddp":
            grads = dist.all_reduce(grads, "mean")
        updates, state = wrapped.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    for batch in data:
        model, state, loss = step(model, state, rune.tree.map(nx.asarray, batch))
    return model, state


def gathered(model):
    """A model's whole parameters, gathering fully_shard modules."""
    if isinstance(model, dist.FullyShard):
        model = model.gather()
    leaves, structure = rune.tree.flatten(model, is_leaf=lambda x: isinstance(x, dist.FullyShard))
    return rune.tree.unflatten(structure, [gathered(x) if isinstance(x, dist.FullyShard) else x for x in leaves])


def digest(model):
    h = hashlib.sha256()
    for leaf in rune.tree.leaves(model):
        h.update(np.asarray(leaf).tobytes())
    return h.hexdigest()[:16]


def check_train(models=("mlp", "charlm")):
    for kind, make in (("mlp", mlp), ("charlm", charlm), ("digits", digits)):
        if kind not in models:
            continue
        model, loss_fn = make()
        opt = optim.adamw(1e-2, weight_decay=0.1)
        data = batches(kind, 20)
        want, want_state = train(model, loss_fn, opt, data, "ddp")
        # ZeRO-1 differs from ZeRO-2 only in taking its block of an all_reduce: the MLP covers it
        for mode in ("zero1", "zero2", "zero3") if kind == "mlp" else ("zero2", "zero3"):
            got, state = train(model, loss_fn, opt, data, mode)
            for a, b in zip(rune.tree.leaves(gathered(got)), rune.tree.leaves(want)):
                same(a, b, f"{kind} {mode}")
            mu = rune.tree.leaves(state)
            assert sum(np.asarray(m).size for m in mu) <= sum(np.asarray(m).size for m in
                                                              rune.tree.leaves(want_state)) // SIZE + 3 * SIZE * len(mu)
        print(f"rank {RANK}: {kind} parameters after 20 steps, unsharded and ZeRO-1/2/3: {digest(want)}", flush=True)


def _whole(tree_):
    """Every leaf of a tree of sharded state whole (blocks gathered from every rank)."""
    from rune.distributed.zero import block_layout
    wholes, _ = block_layout(tree_)
    out = []
    for leaf, whole in zip(rune.tree.leaves(tree_), wholes):
        if whole is None:
            out.append(np.asarray(leaf))
        else:
            n = int(np.prod(whole))
            out.append(np.asarray(dist.all_gather(leaf, length=n)).reshape(whole))
    return out


def _sharded_run(steps):
    model, loss_fn = mlp()
    model = dist.fully_shard(model.replace(one=dist.fully_shard(model.one)))
    opt = dist.sharded(optim.adamw(1e-2, weight_decay=0.1))
    state = opt.init(model)

    @rune.jit
    def step(model, state, batch):
        loss, grads = rune.value_and_grad(loss_fn)(model, batch)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    for batch in batches("mlp", steps):
        model, state, _ = step(model, state, nx.asarray(batch))
    return model, state, loss_fn, step


def check_save(folder):
    """5 sharded steps, then the sharded save; rank 0 also writes the whole values (the oracle)."""
    model, state, loss_fn, _ = _sharded_run(5)
    rune.save(os.path.join(folder, "ckpt"), {"model": model, "opt": state, "step": 5})
    whole = _whole({"model": model, "opt": state})
    batch = nx.asarray(np.linspace(-1, 1, 36, dtype=np.float32).reshape(6, 6))
    loss = float(rune.jit(loss_fn)(model, batch))
    if RANK == 0:
        rune.save(os.path.join(folder, "whole.safetensors"), {"leaves": whole, "loss": loss})


def check_load(folder):
    """The sharded save resharded for this group: every leaf whole as saved, the loss of a
    fixed batch as before, and one more step runs."""
    model, state, loss_fn, step = _sharded_run(0)
    got = rune.load(os.path.join(folder, "ckpt"), like={"model": model, "opt": state, "step": 0})
    assert got["step"] == 5
    oracle = rune.load(os.path.join(folder, "whole.safetensors"))
    for k, (a, b) in enumerate(zip(_whole({"model": got["model"], "opt": got["opt"]}), oracle["leaves"])):
        same(a, b, f"leaf {k} after resharding")
    batch = nx.asarray(np.linspace(-1, 1, 36, dtype=np.float32).reshape(6, 6))
    assert float(rune.jit(loss_fn)(got["model"], batch)) == oracle["loss"]
    step(got["model"], got["opt"], nx.asarray(batches("mlp", 1)[0]))


def check_failed_save(folder):
    """A save that fails on rank 1 is a DistributedError on every rank; the previous save
    still loads whole."""
    from rune import checkpoints
    model, state, _, _ = _sharded_run(0)
    before = open(os.path.join(folder, "ckpt", "current")).read()
    if RANK == 1:
        def fail(path, tree_):
            raise OSError("disk full on purpose")
        checkpoints.write = fail
    try:
        rune.save(os.path.join(folder, "ckpt"), {"model": model, "opt": state, "step": 0})
    except rune.DistributedError as e:
        assert "failed on rank 1 of" in str(e) and "disk full on purpose" in str(e), e
    else:
        raise AssertionError("a failed save raised nothing")
    assert open(os.path.join(folder, "ckpt", "current")).read() == before
    got = rune.load(os.path.join(folder, "ckpt"), like={"model": model, "opt": state, "step": 0})
    assert got["step"] == 5


def check_missing(folder):
    """A shard deleted: loading is a DistributedError on every rank, naming it."""
    model, state, _, _ = _sharded_run(0)
    ckpt = os.path.join(folder, "ckpt")
    saved = os.path.join(ckpt, open(os.path.join(ckpt, "current")).read().strip())
    dist.barrier()
    if RANK == 0:
        os.remove(os.path.join(saved, "rank-1-of-3.safetensors"))
    dist.barrier()
    try:
        rune.load(ckpt, like={"model": model, "opt": state, "step": 0})
    except rune.DistributedError as e:
        assert f"rank {RANK}: {ckpt} was saved by 3 processes, but the shards of rank(s) [1] are missing " \
               f"(rank-1-of-3.safetensors)" in str(e), e
    else:
        raise AssertionError("a missing shard raised nothing")


def check_mismatch():
    try:
        dist.reduce_scatter({"w": nx.zeros((3, 2 + RANK))})
    except rune.DistributedError as e:
        print(f"rank {RANK} raised {type(e).__name__}: {e}", flush=True)
    else:
        raise AssertionError("ranks passing different shapes to reduce_scatter raised nothing")


CHECKS = {"collectives": check_collectives, "train": check_train, "train-mlp": lambda: check_train(("mlp",)),
          "train-digits": lambda: check_train(("digits",)),
          "mismatch": check_mismatch, "save": lambda: check_save(sys.argv[2]), "load": lambda: check_load(sys.argv[2]),
          "failed-save": lambda: check_failed_save(sys.argv[2]), "missing": lambda: check_missing(sys.argv[2])}
for what in WHAT.split(","):
    CHECKS[what]()
    print(f"OK rank {RANK} of {SIZE} {what} passed", flush=True)
