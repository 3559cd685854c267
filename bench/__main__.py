"""`python -m bench`: every bench in one process, then a summary of the ratios.

BLAS-bound rows (the MLP) swing widely when other processes share the cores,
so the load average is printed first: compare runs made on a quiet machine.

    python -m bench                          # everything
    python -m bench --only train grad        # some benches
    python -m bench --json out.json --plot out.png
"""
import argparse
import json
import os
import platform
import sys
import time

from . import (callbacks, cuda_compile, cuda_indexed, cuda_jit, data, distributed, eager, eager_control, functions,
               gpu, grad, kernels, sharded, statistics, threads, train, vmap)
from . import complex as complex_numbers
from .common import print_table

BENCHES = (("eager", eager), ("functions", functions), ("grad", grad), ("callbacks", callbacks), ("vmap", vmap), ("kernels", kernels),
           ("threads", threads),
           ("train", train), ("data", data), ("distributed", distributed), ("sharded", sharded),
           ("eager_control", eager_control),
           ("cuda_compile", cuda_compile), ("cuda_indexed", cuda_indexed), ("complex", complex_numbers), ("gpu", gpu),
           ("cuda_jit", cuda_jit), ("statistics", statistics))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[n for n, _ in BENCHES], help="run only these benches")
    parser.add_argument("--json", metavar="PATH", help="write every figure, versions and the machine as JSON")
    parser.add_argument("--plot", metavar="PATH", help="bar chart of the ratios rune/other (needs matplotlib)")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    print("load average at start: " + " ".join(f"{v:.2f}" for v in load))
    rows = []
    for name, bench in BENCHES:
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        rows += [_named(row, name) for row in bench.run()]
        print(f"({name}: {time.perf_counter() - start:.1f} s)")
    print_table("summary: rune's time per unit and rune/other (below 1x: rune is faster)", rows)
    if args.json:
        write_json(args.json, rows, load)
        print(f"figures written to {args.json}")
    if args.plot:
        if plot(args.plot, rows):
            print(f"ratios plotted to {args.plot}")


def _named(row, bench):
    row.bench = bench
    row.case = f"{bench}: {row.case}"
    return row


def _versions():
    import numpy
    import rune
    from .common import jax, torch
    found = {"python": platform.python_version(), "numpy": numpy.__version__,
             "rune": getattr(rune, "__version__", "source")}
    for name, module in (("jax", jax), ("torch", torch)):
        if module is not None:
            found[name] = module.__version__
    return found


def _machine(load):
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "load_average": list(load),
            "gpus": [str(d) for d in __import__("rune").devices("cuda")]}


def write_json(path, rows, load):
    """Every row's times (microseconds per unit) and ratios, with versions and the machine."""
    data = {"argv": sys.argv, "versions": _versions(), "machine": _machine(load), "rows": [
        {"bench": getattr(r, "bench", None), "case": r.case, "unit": r.unit, "us": r.us,
         "ratios": {lib: r.ratio(lib) for lib in r.us if lib != "rune"}} for r in rows]}
    with open(path, "w") as f:
        json.dump(data, f, indent=2)


def plot(path, rows):
    """Horizontal bars of rune/other per case (log scale, 1x marked); False without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib (pip install matplotlib); no plot written")
        return False
    bars = [(f"{r.case} vs {lib}", r.ratio(lib)) for r in rows for lib in r.us if lib != "rune"]
    bars = [(label, ratio) for label, ratio in bars if ratio]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(bars) + 1.5))
    if bars:
        labels, ratios = zip(*bars)
        ax.barh(range(len(bars)), ratios, color=["tab:green" if r <= 1 else "tab:red" for r in ratios])
        ax.set_yticks(range(len(bars)), labels, fontsize=8)
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.invert_yaxis()
    else:
        ax.text(0.5, 0.5, "no comparison library installed", ha="center", va="center")
    ax.set_xlabel("rune time / other time (below 1: rune is faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


if __name__ == "__main__":
    main()
