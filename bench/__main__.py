"""`python -m bench`: every bench in one process, then a summary of the ratios."""
import time

from . import callbacks, eager, grad, vmap
from .common import print_table

BENCHES = (("eager", eager), ("grad", grad), ("callbacks", callbacks), ("vmap", vmap))


def main():
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
