"""Sharded data parallelism (rune.distributed.sharded, fully_shard) against unsharded data
parallelism, on the char transformer of examples/train_charlm.py at its default sizes
(d_model 64, 4 heads, 2 layers, 64 characters, batch 32 per process; AdamW):

- the time of one jitted training step on 2 processes: unsharded (all_reduce of the
  gradients, the whole optimizer on every rank), ZeRO-2 (`sharded(adamw)`) and ZeRO-3
  (`fully_shard` of every block and of the model, `sharded(adamw)`);
- the memory per process counted by `rune.memory_stats()` on 1, 2 and 3 processes:
  what a rank holds between steps (parameters and optimizer state), and the peak of
  one step run eagerly (every intermediate an Array: activations, gradients, gathered
  parameters), above what the process held before the model was built. At the
  example's sizes the activations dominate that peak, so the table is also made for
  a model whose parameters dominate (d_model 256, 4 layers, 16 characters, batch 2).

    python -m bench.sharded                     # the table and the rows
    mpiexec -n 2 python -m bench.sharded --worker example   # (or large) one group's figures
"""
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import time

from .common import Row, print_table
from .distributed import REPO, _env, _mpiexec

MODES = ("unsharded", "zero2", "zero3")
STEPS = 22


SIZES = {"example": dict(d_model=64, layers=2, seq_len=64, batch=32),
         "large": dict(d_model=256, layers=4, seq_len=16, batch=2)}


def _build(mode, vocab, seq_len, d_model=64, layers=2):
    import rune.distributed as dist
    from rune import nx, optim
    sys.path.insert(0, os.path.join(REPO, "examples"))
    from train_charlm import CharTransformer
    model = CharTransformer(nx.random.key(0), vocab, seq_len, d_model, 4, layers)
    opt = optim.adamw(3e-3, b1=0.9, b2=0.99, weight_decay=0.01)
    if mode == "unsharded":
        return model, opt
    if mode == "zero3":
        model = dist.fully_shard(model.replace(blocks=tuple(dist.fully_shard(b) for b in model.blocks)))
    return model, dist.sharded(opt)


def _step(mode, opt, jit=True):
    import rune
    import rune.distributed as dist
    from rune import optim
    sys.path.insert(0, os.path.join(REPO, "examples"))
    from train_charlm import loss_fn

    def step(model, state, windows):
        loss, grads = rune.value_and_grad(loss_fn)(model, windows)
        if mode == "unsharded":
            grads = dist.all_reduce(grads, "mean")
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss
    return rune.jit(step) if jit else step


def _worker(size):
    import numpy as np

    import rune
    import rune.distributed as dist
    from rune import nx
    dist.initialize()
    shape = SIZES[size]
    vocab, seq_len, batch = 96, shape["seq_len"], shape["batch"]
    timed = size == "example"
    rng = np.random.default_rng(dist.rank())
    windows = [nx.asarray(rng.integers(0, vocab, (batch, seq_len + 1)).astype(np.int32)) for _ in range(STEPS)]
    result, runs, kept = {}, {}, []
    for mode in MODES:   # the memory of each mode alone: what it adds to what the process holds
        gc.collect()
        base = rune.memory_stats("cpu")["current"]
        model, opt = _build(mode, vocab, seq_len, shape["d_model"], shape["layers"])
        gc.collect()
        params = rune.memory_stats("cpu")["current"] - base
        state = opt.init(model)
        held = rune.memory_stats("cpu")["current"] - base
        rune.reset_peak_memory("cpu")
        _step(mode, opt, jit=False)(model, state, windows[0])   # eager: every intermediate counted
        peak = rune.memory_stats("cpu")["peak"] - base
        result[mode] = {"params": params, "state": held - params, "peak": peak, "step": float("nan")}
        kept.append((model, state))   # (dropped by the next mode's measure, it would count negative)
        if timed:
            step = _step(mode, opt)
            for w in windows[:2]:   # compiled, then warm
                model, state, _ = step(model, state, w)
            runs[mode] = [step, model, state, []]
    for w in windows[2:]:   # the modes' steps interleaved: each sees the same machine load
        for mode, run in runs.items():
            dist.barrier()
            start = time.perf_counter()
            run[1], run[2], loss = run[0](run[1], run[2], w)
            float(loss)
            run[3].append(time.perf_counter() - start)
    for mode, run in runs.items():
        result[mode]["step"] = statistics.median(run[3])
    if dist.rank() == 0:
        print("RESULT " + json.dumps(result), flush=True)


def _launch(processes, size):
    cmd = [sys.executable, "-m", "bench.sharded", "--worker", size]
    if processes > 1:
        cmd = [_mpiexec(), "-n", str(processes)] + cmd
    done = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise RuntimeError(done.stdout + done.stderr)
    return json.loads(re.search(r"RESULT (.*)", done.stdout).group(1))


def memory_table(results):
    """The memory per process (KiB) for each number of processes and mode, as text."""
    lines = ["| processes | mode | parameters | optimizer state | held between steps | eager step peak |",
             "|---|---|---|---|---|---|"]
    for n, by_mode in sorted(results.items()):
        for mode in MODES:
            r = by_mode[mode]
            lines.append(f"| {n} | {mode} | {r['params'] / 1024:.0f} KiB | {r['state'] / 1024:.0f} KiB | "
                         f"{(r['params'] + r['state']) / 1024:.0f} KiB | {r['peak'] / 1024:.0f} KiB |")
    return "\n".join(lines)


def run():
    import importlib.util
    if _mpiexec() is None or importlib.util.find_spec("mpi4py") is None:
        print("\n(sharded: skipped, no mpi4py or mpiexec; pip install 'rune[distributed]')")
        return []
    results = {n: _launch(n, "example") for n in (1, 2, 3)}
    print("\nsharded: memory per process (rune.memory_stats), char transformer at the example's sizes, AdamW\n")
    print(memory_table(results))
    print("\nthe same, a model whose parameters dominate (d_model 256, 4 layers, 16 characters, batch 2)\n")
    print(memory_table({n: _launch(n, "large") for n in (1, 2, 3)}))
    two = results[2]
    rows = [Row(f"sharded: char transformer step, 2 processes, {mode} (rune) vs unsharded", "per step",
                {"rune": two[mode]["step"], "unsharded": two["unsharded"]["step"]}) for mode in ("zero2", "zero3")]
    print_table("sharded: a jitted training step on 2 MPI processes", rows,
                note="median of 20 steps after 2 warm-up steps, the modes' steps interleaved, the ranks meeting "
                     "at a barrier before each")
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        _worker(sys.argv[2])
    else:
        run()
