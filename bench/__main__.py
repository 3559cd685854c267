"""`python -m bench`: every bench in one process, then a summary of the ratios.

BLAS-bound rows (the MLP) swing widely when other processes share the cores,
so the load average is printed first: compare runs made on a quiet machine.
"""
import os
import time

from . import callbacks, eager, grad, kernels, vmap
from .common import print_table

BENCHES = (("eager", eager), ("grad", grad), ("callbacks", callbacks), ("vmap", vmap), ("kernels", kernels))


def main():
    print("load average at start: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    rows = []
    for name, bench in BENCHES:
        start = time.perf_counter()
        rows += [_named(row, name) for row in bench.run()]
        print(f"({name}: {time.perf_counter() - start:.1f} s)")
    print_table("summary: rune's time per unit and rune/other (below 1x: rune is faster)", rows)


def _named(row, bench):
    row.case = f"{bench}: {row.case}"
    return row


if __name__ == "__main__":
    main()
