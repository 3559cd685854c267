"""Process-wide counters: what rune compiled, ran and moved.

`rune.stats()` returns a copy; `rune.reset_stats()` zeroes them.
"""
COUNTERS = dict.fromkeys((
    "traces",            # programs staged by jit (one per cache miss)
    "cache_hits",        # jit calls served by a cached plan
    "compiles",          # plans built
    "kernels_launched",  # kernels run (a NumPy stretch counts as one)
    "kernels_compiled",  # compiler runs (cc or NVRTC; each may build many kernels)
    "disk_cache_hits",   # compiled stretches loaded from the on-disk kernel cache
    "callbacks_run",     # host callbacks executed
    "transfers",         # array copies between devices
    "host_to_device",    # of those, host -> accelerator
    "device_to_host",    # of those, accelerator -> host
    "bytes_moved",
    "scalar_reads",      # device values read by the host to decide (loop predicates,
                         # branch indices, dynamic starts): each one waits for the device
), 0)


# A hot path counts its calls in a cell of its own (one increment where the two
# counters would take two dict updates), folded into COUNTERS whenever they are
# read: the written `__call__` of a cached jit plan (rune/compiler/api.py) counts
# a cache hit and its steps as launched per call.
_CELLS = {}   # id(cell) -> (cell, kernels launched per call)


def call_cell(kernels):
    """A cell [calls] whose every call counts a cache hit and `kernels` kernels launched."""
    cell = [0]
    _CELLS[id(cell)] = (cell, kernels)
    return cell


def release_cell(cell):
    """Count what `cell` holds and stop reading it (its path is gone)."""
    _fold(((cell, _CELLS.pop(id(cell), (cell, 0))[1]),))


def _fold(cells):
    for cell, kernels in cells:
        n = cell[0]
        if n:
            cell[0] -= n   # (not = 0: a call counted meanwhile stays counted)
            COUNTERS["cache_hits"] += n
            COUNTERS["kernels_launched"] += n * kernels


def stats():
    """A snapshot of rune's counters (a plain dict)."""
    _fold(list(_CELLS.values()))
    return dict(COUNTERS)


def reset_stats():
    """Zero every counter."""
    _fold(list(_CELLS.values()))
    for k in COUNTERS:
        COUNTERS[k] = 0
