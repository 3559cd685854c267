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


def stats():
    """A snapshot of rune's counters (a plain dict)."""
    return dict(COUNTERS)


def reset_stats():
    """Zero every counter."""
    for k in COUNTERS:
        COUNTERS[k] = 0
