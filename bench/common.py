"""What every bench shares: the optional comparison libraries, a timer, and a table.

A bench measures each case for rune, NumPy, JAX and PyTorch (whichever are
installed), prints one table with the time per unit of work in microseconds and
the ratio rune/other, and returns its rows so `python -m bench` can summarise.
"""
import importlib
import os
import time

# JAX must see the platform choice before it is first imported.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

COLUMN_ORDER = ("rune", "numpy", "jax", "jax.jit", "torch")


def optional(name):
    """The module `name`, or None when it is not installed (its column is skipped)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


jax = optional("jax")
torch = optional("torch")


def per_call(fn, *, budget=0.25, repeat=5, number=None, sync=None):
    """Seconds one call of `fn()` takes: the min over `repeat` timed batches.

    `fn` is called once first (warm-up: traces, compiles, caches). The batch
    size is chosen so a batch takes about `budget / repeat` seconds, unless
    `number` fixes it. `sync()` (for asynchronous devices) ends every batch.
    """
    sync = sync or (lambda: None)
    fn()
    sync()
    if number is None:
        start = time.perf_counter()
        fn()
        sync()
        once = max(time.perf_counter() - start, 1e-7)
        number = max(1, int(budget / repeat / once))
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def per_call_each(fns, *, budget=1.0, repeat=5, settle=0.0):
    """Seconds one call of each of `fns` ({name: fn}) takes, the min over `repeat`
    rounds that each time one batch of every fn in turn: on a machine whose speed
    drifts (a shared host), a slow spell then hits every library alike instead
    of whichever was being timed. `settle` seconds of sleep go before each batch
    (the last library's idle threads spin a while: let them stop)."""
    numbers = {}
    for name, fn in fns.items():
        fn()
        start = time.perf_counter()
        fn()
        once = max(time.perf_counter() - start, 1e-7)
        numbers[name] = max(1, int(budget / repeat / once))
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            time.sleep(settle)
            start = time.perf_counter()
            for _ in range(numbers[name]):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / numbers[name])
    return best


class Row:
    """One case: microseconds per unit for each library that ran it."""

    def __init__(self, case, unit, times):
        self.case, self.unit = case, unit
        self.us = {lib: t * 1e6 for lib, t in times.items() if t is not None}

    def ratio(self, other):
        if "rune" not in self.us or other not in self.us:
            return None
        return self.us["rune"] / self.us[other]


def _fmt(value, suffix=""):
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:,.0f}{suffix}"
    return f"{value:.3g}{suffix}" if value < 10 else f"{value:.1f}{suffix}"


def print_table(title, rows, note=None):
    """The rows side by side: one time column per library, then ratios rune/other.

    Columns are the libraries the rows name (a column may be a variant such as
    "jax.jit"), known ones in COLUMN_ORDER, others after them.
    """
    named = {lib for r in rows for lib in r.us} | {"rune"}
    libs = sorted(named, key=lambda lib: (COLUMN_ORDER.index(lib) if lib in COLUMN_ORDER
                                          else len(COLUMN_ORDER), lib))
    others = libs[1:]
    head = ["case", "unit"] + [f"{lib} us" for lib in libs] + [f"rune/{lib}" for lib in others]
    body = [[r.case, r.unit] + [_fmt(r.us.get(lib)) for lib in libs]
            + [_fmt(r.ratio(lib), "x") for lib in others] for r in rows]
    widths = [max(len(line[i]) for line in [head] + body) for i in range(len(head))]
    rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
    print(f"\n{title}\n{rule}")
    for line in [head] + body:
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))]
        print("  ".join(cells))
    print(rule)
    if note:
        print(note)
    missing = [lib for lib in ("jax", "torch") if globals()[lib] is None]
    if missing:
        print(f"(not installed, skipped: {', '.join(missing)})")
