"""rune.distributed on 2 MPI processes (needs mpi4py and an mpiexec):

- all_reduce of 100 MB of float32 through `rune.distributed.all_reduce`
  against a raw mpi4py `Allreduce` of the same buffer (the MPI library is the
  same; the difference is rune's overhead: the layout check, the Array);
- one epoch of the digits CNN (examples/train_digits.py, whole training set,
  batch 32 per process) data-parallel on 2 processes against 1 process;
- a jitted data-parallel step of the char transformer (bench/sharded.py's models,
  the gradients' tree all-reduced) with communication overlapped with the backward
  pass (rune/compiler/overlap.py) against RUNE_OVERLAP=0 (synchronous collectives),
  at the example's sizes and at the large ones (13 MB of gradients: one 25 MiB
  bucket, the default, or 1 MiB buckets).

The worker half runs under mpiexec: python -m bench.distributed --worker allreduce
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

from .common import Row, print_table

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEGABYTES = 100


def _mpiexec():
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MV2_"))}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _allreduce_worker(repeat=10):
    import numpy as np
    from mpi4py import MPI

    import rune.distributed as dist
    from rune import nx
    dist.initialize()
    comm = MPI.COMM_WORLD
    x = np.random.default_rng(dist.rank()).random(MEGABYTES * 1000 * 1000 // 4, dtype=np.float32)
    out = np.empty_like(x)
    a = nx.asarray(x)
    best = {"rune": float("inf"), "mpi4py": float("inf")}
    for _ in range(repeat):   # interleaved: both see the same machine load
        comm.Barrier()
        start = time.perf_counter()
        result = dist.all_reduce(a)
        best["rune"] = min(best["rune"], time.perf_counter() - start)
        comm.Barrier()
        start = time.perf_counter()
        comm.Allreduce(x, out)
        best["mpi4py"] = min(best["mpi4py"], time.perf_counter() - start)
    assert np.array_equal(np.asarray(result), out)
    if dist.rank() == 0:
        print("RESULT " + json.dumps(best), flush=True)


def _overlap_worker(size, bucket_bytes, steps=22):
    """Median seconds of a jitted data-parallel step, overlap on and off, interleaved."""
    import statistics

    import numpy as np

    import rune.compiler.overlap as overlap
    import rune.distributed as dist
    from rune import nx
    from .sharded import SIZES, _build, _step
    dist.initialize()
    overlap.BUCKET_BYTES = int(bucket_bytes)
    shape = SIZES[size]
    vocab = 96
    rng = np.random.default_rng(dist.rank())
    windows = [nx.asarray(rng.integers(0, vocab, (shape["batch"], shape["seq_len"] + 1)).astype(np.int32))
               for _ in range(steps)]
    runs = {}
    for mode in ("on", "off"):
        os.environ["RUNE_OVERLAP"] = "1" if mode == "on" else "0"   # read when the plan is built
        model, opt = _build("unsharded", vocab, shape["seq_len"], shape["d_model"], shape["layers"])
        step, state = _step("unsharded", opt), opt.init(model)
        for w in windows[:2]:   # compiled, then warm
            model, state, _ = step(model, state, w)
        runs[mode] = [step, model, state, []]
    for w in windows[2:]:
        for run in runs.values():
            dist.barrier()
            start = time.perf_counter()
            run[1], run[2], loss = run[0](run[1], run[2], w)
            float(loss)
            run[3].append(time.perf_counter() - start)
    same = all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in
               zip(_leaves(runs["on"][1]), _leaves(runs["off"][1])))
    if dist.rank() == 0:
        print("RESULT " + json.dumps({m: statistics.median(r[3]) for m, r in runs.items()} | {"same": same}),
              flush=True)


def _leaves(tree):
    from rune import tree as pytree
    return pytree.leaves(tree)


def _overlap_rows():
    from rune.compiler.overlap import BUCKET_BYTES
    rows = []
    for size, bucket in (("example", BUCKET_BYTES), ("large", BUCKET_BYTES), ("large", 1 << 20)):
        done = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m", "bench.distributed", "--worker",
                               "overlap", size, str(bucket)], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=900)
        if done.returncode:
            raise RuntimeError(done.stdout + done.stderr)
        times = json.loads(re.search(r"RESULT (.*)", done.stdout).group(1))
        if not times.pop("same"):
            raise RuntimeError(f"overlap ({size}): the parameters differ from the synchronous run's")
        rows.append(Row(f"distributed: char transformer ({size}) data-parallel step, 2 processes, overlap on "
                        f"({bucket >> 20} MiB buckets, rune) vs off", "per step", {"rune": times["on"], "off": times["off"]}))
    return rows


def _epoch_seconds(processes):
    """Seconds of one steady-state epoch (epochs 3 to 6, evaluation included; the example
    prints to 0.1 s, so four epochs make the figure good to 25 ms)."""
    cmd = [sys.executable, os.path.join(REPO, "examples", "train_digits.py"), "--epochs", "6",
           "--no-progress", "--checkpoint", os.path.join("/tmp", f"bench-digits-{os.getpid()}.safetensors")]
    if processes > 1:
        cmd = [_mpiexec(), "-n", str(processes)] + cmd
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(done.stdout + done.stderr)
    marks = [float(v) for v in re.findall(r"epoch +\d+ .*\(([0-9.]+) s\)", done.stdout)]
    return (marks[5] - marks[1]) / 4


def run():
    import importlib.util
    if _mpiexec() is None or importlib.util.find_spec("mpi4py") is None:
        print("\n(distributed: skipped, no mpi4py or mpiexec; pip install 'rune[distributed]')")
        return []
    done = subprocess.run([_mpiexec(), "-n", "2", sys.executable, "-m", "bench.distributed", "--worker",
                           "allreduce"], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(done.stdout + done.stderr)
    times = json.loads(re.search(r"RESULT (.*)", done.stdout).group(1))
    rows = [Row(f"distributed: all_reduce {MEGABYTES} MB float32, 2 processes", "per call", times),
            Row("distributed: digits epoch, 2 processes (rune) vs 1 (\"1 process\")", "per epoch",
                {"rune": _epoch_seconds(2), "1 process": _epoch_seconds(1)})] + _overlap_rows()
    print_table("distributed: 2 MPI processes on this machine", rows,
                note="all_reduce: rune vs raw mpi4py Allreduce on the same buffer (min of 10); the digits "
                     "epoch holds every process's evaluation and checkpoint on process 0; overlap: median of 20 "
                     "steps, on and off interleaved, parameters checked bit for bit the same")
    return rows


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker", "allreduce"]:
        _allreduce_worker()
    elif sys.argv[1:3] == ["--worker", "overlap"]:
        _overlap_worker(*sys.argv[3:5])
    else:
        run()
