"""rune on an NVIDIA GPU beside PyTorch and JAX on the same GPU.

Cases (targets from the CUDA backend's issue; "copy" is a device-to-device
copy measured in the same run, its bandwidth counting bytes read and written):
- W1 chain `sin(x)*exp(-x*x) + 0.5*tanh(x) - x/(1+x*x)` over 1e8 float32:
  bandwidth (read + write) at least 85% of the copy's;
- `sum(x*x)` over 1e8 and a row softmax of 16384x4096: bandwidth at least 80%
  of the copy's, no slower than jax.jit;
- MLP 784-1024-1024-10, jit(value_and_grad) + SGD at batch 1024: no slower
  than torch.compile and jax.jit;
- scan of 10,000 rows with a host callback per row: at most 50 us a row
  (JAX's pure_callback beside it);
- a cached jit call of `x + 1`: at most 10 us.

Each case runs on its own: one that fails (or a library that is missing)
leaves an error in its row and the others go on; each has a time budget so
the whole bench fits in ci/gpu-check's minutes. With RUNE_BENCH_DEADLINE (a Unix
time, which ci/gpu-check sets from its limit) a peer library whose cold first
measurement (PEER_SECONDS: torch.compile's is 20-60 s) could run past it is
skipped, and its row says so; rune's figures are always measured, and written
before any peer's, so a run cut by its limit keeps them.

    python -m bench --only gpu                    # in the bench summary
    JAX_PLATFORMS=cuda,cpu python -m bench.gpu --json out.json --md out.md
"""
import argparse
import json
import os
import sys
import time
import traceback

os.environ.setdefault("JAX_PLATFORMS", "cuda,cpu")  # effective when this module loads JAX first

import numpy as np  # noqa: E402

from .common import Row, jax, per_call, print_table, torch  # noqa: E402

N = 10 ** 8
SOFTMAX = (16384, 4096)
MLP = (784, 1024, 1024, 10)
BATCH = 1024
ROWS = 10_000
TARGETS = {  # case -> (figure, bound, meaning)
    "W1 chain": ("fraction_of_copy", 0.85, "at least"),
    "sum(x*x)": ("fraction_of_copy", 0.80, "at least"),
    "row softmax": ("fraction_of_copy", 0.80, "at least"),
    "scan + host callback": ("rune_us", 50.0, "at most"),
    "cached jit call x + 1": ("rune_us", 10.0, "at most"),
}


def gpu_count():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def _jax_on_gpu():
    try:
        return jax is not None and jax.devices()[0].platform == "gpu"
    except Exception:  # JAX without a CUDA plugin
        return False


def _torch_on_gpu():
    return torch is not None and torch.cuda.is_available()


def timed(fn, sync, *, budget=2.0, repeat=5):
    """Seconds one call of `fn()` takes on the GPU: warm up, then the min over
    `repeat` batches sized to `budget`, each ended by `sync()`."""
    return per_call(fn, budget=budget, repeat=repeat, sync=sync)


_LIBRARY_ERRORS = {}  # library -> error, for the case being measured
DEADLINE_ENV = "RUNE_BENCH_DEADLINE"
# The most a peer's measurement of one case takes on a cold machine, its compiles included.
PEER_SECONDS = {"jax.jit": 12.0, "torch": 6.0, "torch.compile": 60.0}
_KEEP = [lambda times: None]   # writes the case's figures so far (measure() sets it per case)


def seconds_left():
    """Seconds until RUNE_BENCH_DEADLINE (None: no deadline)."""
    deadline = os.environ.get(DEADLINE_ENV)
    return float(deadline) - time.time() if deadline else None


def guarded(times, lib, measure, need=None):
    """Put one peer library's figure for the case in `times`. A library that fails here
    (torch.compile without a C toolchain for its launcher, a JAX without its CUDA plugin)
    loses only its own figure: rune's, measured first, and the other library's stay.
    One that may need more than the seconds left before the deadline (`need`, default
    PEER_SECONDS[lib]) is skipped, saying so."""
    need = PEER_SECONDS.get(lib, 10.0) if need is None else need
    left = seconds_left()
    if left is not None and left < need:
        _LIBRARY_ERRORS[lib] = f"skipped: needs up to {need:.0f} s, {max(left, 0):.0f} s left before the deadline"
        print(f"{lib}: {_LIBRARY_ERRORS[lib]}", file=sys.stderr)
        return
    _KEEP[0](times)   # rune's figure is on disk before a peer could be cut
    try:
        times[lib] = measure()
    except Exception as e:
        _LIBRARY_ERRORS[lib] = f"{type(e).__name__}: {e}"
        print(f"{lib}: failed: {_LIBRARY_ERRORS[lib]}", file=sys.stderr)


def _cupy_sync():
    import cupy
    cupy.cuda.Device(0).synchronize()


def _torch_sync():
    torch.cuda.synchronize()


def _rune():
    import rune
    from rune import nx
    return rune, nx


def copy_seconds():
    import cupy
    x = cupy.random.standard_normal(N, dtype=cupy.float32)
    y = cupy.empty_like(x)
    return timed(lambda: y.__setitem__(Ellipsis, x), _cupy_sync)


def _w1(np_like):
    def chain(x):
        return np_like.sin(x) * np_like.exp(-x * x) + 0.5 * np_like.tanh(x) - x / (1 + x * x)
    return chain


def _bandwidth_case(rune_fn, make_rune_input, jax_fn=None, torch_fn=None, host_input=None):
    """Seconds for rune, jax.jit and torch on one input, and rune's kernel launches
    per call (its jit stretches run as compiled CUDA kernels: a fused chain is one)."""
    rune, _ = _rune()
    times = {}
    x = make_rune_input()
    times["rune"] = timed(lambda: rune_fn(x), _cupy_sync)
    rune.reset_stats()
    rune_fn(x)
    launches = rune.stats()["kernels_launched"]
    del x
    if jax_fn is not None and _jax_on_gpu():
        def run_jax():
            jx = jax.device_put(host_input())
            return timed(lambda: jax_fn(jx).block_until_ready(), lambda: None)
        guarded(times, "jax.jit", run_jax)
    if torch_fn is not None and _torch_on_gpu():
        def run_torch():
            tx = torch.from_numpy(host_input()).cuda()
            return timed(lambda: torch_fn(tx), _torch_sync)
        guarded(times, "torch", run_torch)
    return times, launches


def _host_normal(shape):
    return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)


def w1_case(copy_bw):
    rune, nx = _rune()
    f = rune.jit(_w1(nx))
    times, launches = _bandwidth_case(
        f, lambda: nx.asarray(_host_normal(N), device="cuda:0"),
        jax_fn=jax.jit(_w1(jax.numpy)) if _jax_on_gpu() else None,
        torch_fn=_w1(torch) if _torch_on_gpu() else None, host_input=lambda: _host_normal(N))
    return _bandwidth_row("W1 chain", 8 * N, times, copy_bw, launches)


def sum_case(copy_bw):
    rune, nx = _rune()
    f = rune.jit(lambda x: nx.sum(x * x))
    times, launches = _bandwidth_case(
        f, lambda: nx.asarray(_host_normal(N), device="cuda:0"),
        jax_fn=jax.jit(lambda x: jax.numpy.sum(x * x)) if _jax_on_gpu() else None,
        torch_fn=(lambda x: torch.sum(x * x)) if _torch_on_gpu() else None, host_input=lambda: _host_normal(N))
    return _bandwidth_row("sum(x*x)", 4 * N, times, copy_bw, launches)


def softmax_case(copy_bw):
    rune, nx = _rune()
    f = rune.jit(lambda x: rune.nn.softmax(x, axis=-1))
    times, launches = _bandwidth_case(
        f, lambda: nx.asarray(_host_normal(SOFTMAX), device="cuda:0"),
        jax_fn=jax.jit(lambda x: jax.nn.softmax(x, axis=-1)) if _jax_on_gpu() else None,
        torch_fn=(lambda x: torch.softmax(x, -1)) if _torch_on_gpu() else None,
        host_input=lambda: _host_normal(SOFTMAX))
    return _bandwidth_row("row softmax", 8 * SOFTMAX[0] * SOFTMAX[1], times, copy_bw, launches)


def _bandwidth_row(case, nbytes, times, copy_bw, launches):
    row = Row(f"{case}", "per call", times)
    row.extra = {"rune_GBps": nbytes / times["rune"] / 1e9, "copy_GBps": copy_bw / 1e9,
                 "fraction_of_copy": nbytes / times["rune"] / copy_bw, "rune_kernels_per_call": launches}
    return row


def _mlp_params(rng):
    return [(rng.standard_normal((a, b), dtype=np.float32) * np.float32(np.sqrt(2 / a)),
             np.zeros(b, np.float32)) for a, b in zip(MLP[:-1], MLP[1:])]


def mlp_case(copy_bw):
    rune, nx = _rune()
    rng = np.random.default_rng(0)
    params = _mlp_params(rng)
    xb = rng.standard_normal((BATCH, MLP[0]), dtype=np.float32)
    yb = rng.integers(0, MLP[-1], BATCH)
    onehot = np.eye(MLP[-1], dtype=np.float32)[yb]
    lr = 0.01

    def loss(params, x, y, lib_nn, lib):
        h = x
        for k, (w, b) in enumerate(params):
            h = h @ w + b
            if k < len(params) - 1:
                h = lib_nn.relu(h)
        return -lib.mean(lib.sum(y * lib_nn.log_softmax(h, axis=-1), axis=-1))

    def step_rune(params, x, y):
        value, grads = rune.value_and_grad(lambda p: loss(p, x, y, rune.nn, nx))(params)
        return value, rune.tree.map(lambda p, g: p - lr * g, params, grads)

    step = rune.jit(step_rune)
    on = lambda a: nx.asarray(a, device="cuda:0")  # noqa: E731
    state = {"p": rune.tree.map(on, params)}
    gx, gy = on(xb), on(onehot)

    def run_rune():
        value, state["p"] = step(state["p"], gx, gy)
        return value
    times = {"rune": timed(run_rune, _cupy_sync, budget=3.0)}
    if _jax_on_gpu():
        guarded(times, "jax.jit", lambda: _mlp_jax(loss, params, xb, onehot, lr))
    if _torch_on_gpu():
        guarded(times, "torch", lambda: _mlp_torch(params, xb, onehot, lr), need=PEER_SECONDS["torch.compile"])
    return Row("MLP 784-1024-1024-10 step, batch 1024", "per step", times)


def _mlp_jax(loss, params, xb, onehot, lr):
    jnp = jax.numpy
    jstep = jax.jit(lambda p, x, y: (lambda v, g: (v, jax.tree.map(lambda a, b: a - lr * b, p, g)))(
        *jax.value_and_grad(lambda p: loss(p, x, y, jax.nn, jnp))(p)))
    jstate = {"p": jax.device_put(params)}
    jx, jy = jax.device_put(xb), jax.device_put(onehot)

    def run_jax():
        value, jstate["p"] = jstep(jstate["p"], jx, jy)
        value.block_until_ready()
    return timed(run_jax, lambda: None, budget=3.0)


def _mlp_torch(params, xb, onehot, lr):
    tparams = [(torch.tensor(w, device="cuda", requires_grad=True), torch.tensor(b, device="cuda",
                requires_grad=True)) for w, b in params]
    tx, ty = torch.tensor(xb, device="cuda"), torch.tensor(onehot, device="cuda")

    def tstep(x, y):
        h = x
        for k, (w, b) in enumerate(tparams):
            h = h @ w + b
            if k < len(tparams) - 1:
                h = torch.relu(h)
        value = -(y * torch.log_softmax(h, -1)).sum(-1).mean()
        value.backward()
        with torch.no_grad():
            for w, b in tparams:
                w -= lr * w.grad
                b -= lr * b.grad
                w.grad = None
                b.grad = None
        return value
    compiled = torch.compile(tstep)
    return timed(lambda: compiled(tx, ty), _torch_sync, budget=3.0)


def scan_case(copy_bw):
    rune, nx = _rune()
    calls = []

    def on_host(row):
        calls.append(1)
        return np.float32(np.asarray(row)[0])

    def step(carry, row):
        got = rune.callback(on_host, row, like=rune.Spec((), np.float32))
        return carry + got, got

    xs_host = np.random.default_rng(0).standard_normal((ROWS, 4), dtype=np.float32)
    with rune.default_device("cuda:0"):
        f = rune.jit(lambda xs: rune.scan(step, nx.zeros((), np.float32), xs)[0])
        xs = nx.asarray(xs_host)
        times = {"rune": timed(lambda: f(xs).block_until_ready(), lambda: None, budget=2.0, repeat=2) / ROWS}
    if _jax_on_gpu():
        jnp = jax.numpy

        def jstep(carry, row):
            got = jax.pure_callback(on_host, jax.ShapeDtypeStruct((), jnp.float32), row)
            return carry + got, got
        jf = jax.jit(lambda xs: jax.lax.scan(jstep, jnp.zeros((), jnp.float32), xs)[0])
        jxs = jax.device_put(xs_host)
        guarded(times, "jax.jit", lambda: timed(lambda: jf(jxs).block_until_ready(), lambda: None,
                                                budget=2.0, repeat=2) / ROWS)
    return Row(f"scan + host callback ({ROWS:,} rows)", "per row", times)


def dispatch_case(copy_bw):
    rune, nx = _rune()
    x = nx.asarray(np.ones(1, np.float32), device="cuda:0")
    add_one = rune.jit(lambda v: v + 1)
    times = {"rune": timed(lambda: add_one(x), _cupy_sync, budget=1.0)}
    if _jax_on_gpu():
        jadd = jax.jit(lambda v: v + 1)
        jx = jax.device_put(np.ones(1, np.float32))
        guarded(times, "jax.jit", lambda: timed(lambda: jadd(jx), lambda: jadd(jx).block_until_ready(), budget=1.0))
    if _torch_on_gpu():
        tx = torch.ones(1, device="cuda")
        guarded(times, "torch", lambda: timed(lambda: tx + 1, _torch_sync, budget=1.0))
    return Row("cached jit call x + 1 (1 x f32)", "per call", times)


# torch.compile's first call of the MLP takes the longest: it runs last.
CASES = (("W1 chain", w1_case), ("sum(x*x)", sum_case), ("row softmax", softmax_case),
         ("cached jit call x + 1", dispatch_case), ("scan + host callback", scan_case), ("MLP step", mlp_case))


def measure(report=lambda records: None):
    """Every case, each guarded: (rows, records) where records are JSON-ready;
    `report(records)` after each case, so a run cut short keeps what it measured."""
    records, rows = [], []
    copy_bw = None
    planned = [name for name, _ in CASES]   # for ci/gpu_report.py: which rows a cut run lacks
    try:
        copy_bw = 8 * N / copy_seconds()
        records.append({"case": "device-to-device copy", "GBps": copy_bw / 1e9, "cases": planned})
    except Exception as e:
        records.append({"case": "device-to-device copy", "error": f"{type(e).__name__}: {e}", "cases": planned})
    for name, case in CASES:
        start = time.perf_counter()
        _LIBRARY_ERRORS.clear()
        _KEEP[0] = lambda times, name=name: report(records + [
            {"case": name, "us": {lib: t * 1e6 for lib, t in times.items()}, "partial": True}])
        try:
            row = case(copy_bw)
        except Exception as e:
            records.append({"case": name, "error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc()[-3000:]})
            print(f"{name}: failed: {type(e).__name__}: {e}", file=sys.stderr)
            report(records)
            continue
        rows.append(row)
        record = {"case": name, "unit": row.unit, "us": row.us,
                  "ratios": {lib: row.ratio(lib) for lib in row.us if lib != "rune"},
                  "seconds": time.perf_counter() - start, **getattr(row, "extra", {})}
        if _LIBRARY_ERRORS:
            record["library_errors"] = dict(_LIBRARY_ERRORS)
        if name in TARGETS:
            figure, bound, meaning = TARGETS[name]
            value = record.get(figure, record["us"].get("rune"))
            record["target"] = f"{figure} {meaning} {bound}"
            record["meets_target"] = value >= bound if meaning == "at least" else value <= bound
        records.append(record)
        report(records)
    return rows, records


def markdown(records):
    lines = ["| case | rune us | jax.jit us | torch us | rune/jax | rune/torch | % of copy | target | met |",
             "|---|---|---|---|---|---|---|---|---|"]
    def f(v, pattern="{:.4g}"):
        return "-" if v is None else pattern.format(v)
    for r in records:
        if "error" in r:
            lines.append(f"| {r['case']} | error: {r['error'][:120]} | | | | | | | |")
            continue
        if "us" not in r:
            lines.append(f"| {r['case']} | {f(r.get('GBps'))} GB/s | | | | | | | |")
            continue
        us, ratios = r["us"], r.get("ratios", {})
        notes = [f"{lib} {why}" for lib, why in r.get("library_errors", {}).items()]
        notes += ["cut while measuring the peers"] if r.get("partial") else []
        case = f"{r['case']} ({'; '.join(notes)[:160]})" if notes else r["case"]
        lines.append(f"| {case} | {f(us.get('rune'))} | {f(us.get('jax.jit'))} | {f(us.get('torch'))} | "
                     f"{f(ratios.get('jax.jit'), '{:.2f}x')} | {f(ratios.get('torch'), '{:.2f}x')} | "
                     f"{f(r.get('fraction_of_copy') and 100 * r['fraction_of_copy'], '{:.0f}%')} | "
                     f"{r.get('target', '')} | {r.get('meets_target', '')} |")
    return "\n".join(lines) + "\n"


def run():
    """For `python -m bench`: the rows, or none (with a word) without a GPU."""
    if not gpu_count():
        print("gpu: no NVIDIA GPU visible to CuPy; nothing to measure")
        return []
    rows, records = measure()
    print_table("rune on the GPU beside jax.jit and torch (same GPU)", rows)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--md", metavar="PATH")
    args = parser.parse_args(argv)
    if not gpu_count():
        print("bench.gpu: no NVIDIA GPU visible to CuPy (needs a GPU, its driver and CuPy); nothing measured",
              file=sys.stderr)
        return 2
    def report(records):
        if args.json:
            with open(args.json, "w") as f:
                json.dump(records, f, indent=1)
        if args.md:
            with open(args.md, "w") as f:
                f.write(markdown(records))
    rows, records = measure(report)
    print_table("rune on the GPU beside jax.jit and torch (same GPU)", rows)
    report(records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
