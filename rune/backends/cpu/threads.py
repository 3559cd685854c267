"""How many threads rune's parallel work runs on: one policy for the compiled
kernels (OpenMP) and the BLAS library calls (OpenBLAS through NumPy).

Left to themselves the two keep a pool of threads each, and after parallel
work both keep their idle threads spinning on a core (OpenBLAS for about
2**28 cycles, in a loop that never yields). A plan runs its steps one after
the other, so one pool's spinners steal the cores the other's next step
needs, and a parallel loop whose threads wait for a core (another pool's
spinner, another process) holds every other thread at its end: on a busy
machine threads made a step 2 to 20 times slower than one thread. So:

- one pool: where NumPy's OpenBLAS lets its caller run its parallel work
  (0.3.27 and later) and a C compiler is found, BLAS runs on the kernels'
  OpenMP threads (rune/backends/cpu/blas_pool.py, installed while rune is
  imported; RUNE_BLAS_POOL=0 leaves it out), so kernels and BLAS calls
  take turns on the same threads. Otherwise BLAS keeps its own, and each
  pool's spinning threads count as busy cores to the other's work (below);
- a process forked after its parent's OpenMP runtime started threads runs
  its parallel work on one thread (GNU libgomp cannot start a team in it:
  see "fork" below);
- idle threads spin briefly, then sleep: the kernels' OpenMP runtime is
  loaded with GOMP_SPINCOUNT=30000 (libgomp: a fraction of a millisecond)
  and KMP_BLOCKTIME=1 (LLVM's libomp: a millisecond) unless OMP_WAIT_POLICY,
  GOMP_SPINCOUNT or KMP_BLOCKTIME is set (the runtime reads them once, when
  it loads; rune sets them for that load only, so child processes and other
  libraries keep the environment as it was; a runtime something else loaded
  first keeps its own). Waking a sleeping thread costs 50-100 us on a
  virtual machine, more than a mid-sized loop, while a team that ran a
  moment ago starts at once;
- work too small to pay for threads runs on one: a kernel below the
  renderer's parallel threshold (2**20 elements) has no parallel loop, and a
  matrix product of fewer than BLAS_MIN_WORK multiply-adds runs on one thread;
- a matrix product's bits do not depend on the thread count: OpenBLAS's would
  (its threads split rows, columns and K blocks where they fall), so rune's
  products call BLAS on one thread (serial_blas) and run their tiles, cut by the
  shape alone, on the kernels' threads (rune/backends/cpu/batched_matmul.py);
- larger work runs on at most RUNE_NUM_THREADS threads (default: the CPUs this
  process may use: its affinity, within its cgroup's CPU quota, rounded up:
  half a CPU's time runs one thread), never more than the library is set to
  (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, threadpoolctl's limits) and never
  more than the CPUs the machine's other running tasks leave free, since a
  thread that waits for a core costs more than it brings. Those are read
  from /proc/loadavg (every SAMPLE_PERIOD seconds; the fewest of the
  readings within RECENT_SECONDS, so a system task passing through one
  reading costs nothing), less this process's own spinning threads, which
  are free to the next work on their pool.
  /proc/loadavg counts the whole host's tasks: it is read only when this
  process may use every CPU of the machine; within a cpuset or a CPU quota
  (a container on a shared node) the host's load says nothing of the CPUs
  the process was given, and their number alone is the bound.

Limits are set for the one call and put back after it, so the settings the
process sees between calls stay its own. The thread count of the OpenMP
runtime is per thread. That of BLAS is process-wide: while limited calls run
(from any Python threads) it is the smallest of their limits, and when the
last of them ends it goes back to what it was before the first began.
"""
import collections
import ctypes
import functools
import math
import os
import threading
import time

from ...base.tuning import BLAS_MIN_WORK, GOMP_SPINCOUNT, KMP_BLOCKTIME_MS, RECENT_READINGS, SAMPLE_PERIOD  # noqa: F401
from ...base import config
from ...errors import ArgumentError, CompileError

config.check_threads()   # a bad RUNE_NUM_THREADS or RUNE_BLAS_POOL fails `import rune`, not a later call

# How idle OpenMP threads wait (rune/base/tuning.py says why).
_KERNEL_ENV = {"GOMP_SPINCOUNT": str(GOMP_SPINCOUNT), "KMP_BLOCKTIME": str(KMP_BLOCKTIME_MS)}
_KERNEL_ENV_SET_BY_USER = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


@functools.lru_cache(maxsize=1)
def machine_cpus():
    """The machine's CPUs (read once: os.cpu_count reads /sys, ~7 us, and the policy
    asks at every parallel kernel and BLAS call)."""
    return os.cpu_count() or 1


@functools.lru_cache(maxsize=1)
def usable_cpus():
    """The CPUs this process may run on: its affinity, within its cgroup's CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = machine_cpus()
    quota = _cgroup_quota()
    return max(1, cpus if quota is None else min(cpus, quota))


_CGROUP_ROOT = "/"   # where /proc/self/cgroup and /sys/fs/cgroup are read (tests give fake files)


def _cgroup_quota():
    """CPUs' worth of time this process's cgroup allows per period, rounded up (half a
    CPU's time still runs one thread, 1.5 CPUs' two); None for no limit or none to read.
    cgroup v2 keeps it in `cpu.max` ("quota period" or "max ..."), v1 in
    `cpu.cfs_quota_us` (-1: no limit) and `cpu.cfs_period_us`."""
    for version, folder in _cgroup_folders():
        try:
            quota, period = _QUOTA_READERS[version](folder)
        except (OSError, ValueError):
            continue
        return None if quota is None or period <= 0 else max(1, math.ceil(quota / period))
    return None


def _cgroup_folders():
    """(cgroup version, folder) of each cgroup of this process that may hold its CPU quota."""
    try:
        with open(os.path.join(_CGROUP_ROOT, "proc/self/cgroup")) as f:
            lines = f.read().splitlines()
    except OSError:
        return
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            version, mount = 2, "sys/fs/cgroup"
        elif "cpu" in controllers.split(","):
            version, mount = 1, os.path.join("sys/fs/cgroup", controllers)
        else:
            continue
        base = os.path.join(_CGROUP_ROOT, mount)
        # a container may name its cgroup by the host's path while mounting it as the root
        for folder in dict.fromkeys((os.path.normpath(os.path.join(base, path.strip().lstrip("/"))), base)):
            yield version, folder


def _read_words(folder, name):
    with open(os.path.join(folder, name)) as f:
        return f.read().split()


def _quota_v2(folder):
    quota, period = _read_words(folder, "cpu.max")[:2]
    return (None if quota == "max" else int(quota)), int(period)


def _quota_v1(folder):
    quota, = _read_words(folder, "cpu.cfs_quota_us")
    period, = _read_words(folder, "cpu.cfs_period_us")
    return (None if int(quota) < 0 else int(quota)), int(period)


_QUOTA_READERS = {2: _quota_v2, 1: _quota_v1}   # (quota or None for no limit, period) in microseconds


def num_threads():
    """RUNE_NUM_THREADS, by default the usable CPUs: the most threads any parallel work gets."""
    return config.num_threads(usable_cpus())


# /proc/loadavg's running count is a snapshot: a system task passing through
# shows in one reading and is gone by the next, while a process competing for
# the cores shows in all. The other tasks are the fewest of the readings within
# RECENT_SECONDS, so one passing task does not cost the next calls their
# threads (a competitor is seen within RECENT_SECONDS).
RECENT_SECONDS = RECENT_READINGS * SAMPLE_PERIOD
_readings = collections.deque(maxlen=4)   # (when, other running tasks then) of the last readings
_sample = [-math.inf, None]   # when the machine was last looked at, and the other running tasks it had


def free_cpus(pool=None):
    """The CPUs the machine's other running tasks leave free for this thread's
    work (at least 1). This process's idle threads spinning after its last
    parallel work count as free to work on their own pool (`pool`: "openmp",
    "openblas"; it runs on them) and as busy to any other."""
    now = time.monotonic()
    if now - _sample[0] > SAMPLE_PERIOD:
        _sample[:] = [now, _read_others(now)]
    others = _sample[1]
    if others is None:   # nothing to tell: the usable CPUs alone decide
        return usable_cpus()
    others += sum(n for name, (until, n) in _spinning.items() if name != pool and now < until)
    cpus = machine_cpus()
    return max(1, min(cpus, cpus - others))


def _read_others(now):
    running = _read_running()
    if running is None:
        _readings.clear()
        return None
    # the reader is one of the running tasks, and so are this process's spinners
    own = sum(n for until, n in _spinning.values() if now < until)
    _readings.append((now, max(0, running - 1 - own)))
    return min(others for when, others in _readings if now - when <= RECENT_SECONDS)


_LOADAVG = "/proc/loadavg"


def _read_running():
    """The running tasks /proc/loadavg counts (the reader among them), or None
    where the host's load says nothing of this process's CPUs (a cpuset or a
    quota: their number alone is the bound) or cannot be read."""
    if usable_cpus() < machine_cpus():
        return None
    try:
        with open(_LOADAVG) as f:
            return running_of(f.read())
    except OSError:
        return None


def running_of(loadavg):
    """The running tasks of a reading of /proc/loadavg (its 4th field is running/total), or None."""
    try:
        return int(loadavg.split()[3].split("/")[0])
    except (ValueError, IndexError):
        return None


def parallel_threads():
    """The threads a kernel's parallel loops run on now (one in a forked child whose
    parent had started OpenMP threads: see forked_from_a_team)."""
    if _forked[0]:
        return 1
    return max(1, min(num_threads(), free_cpus("openmp")))


# After parallel work a pool's idle threads spin a while, and /proc/loadavg
# counts them as running: the next work on that pool runs on those very
# threads, while work on another pool must leave their cores alone. OpenBLAS's
# own threads spin about 2**28 cycles (a tenth of a second), the kernels'
# OpenMP threads up to a millisecond or so (_KERNEL_ENV). BLAS runs on the
# kernels' pool where rune could route it there (rune/backends/cpu/blas_pool.py).
SPIN_SECONDS = {"openmp": 0.002, "openblas": 0.08}
_spinning = {pool: [-math.inf, 0] for pool in SPIN_SECONDS}   # until when each pool's idle threads spin, how many
_blas_pool = ["openblas"]   # the pool BLAS's parallel work runs on


def _spun(pool, ran):
    """`ran` threads of `pool` just ran parallel work: all but the caller spin now."""
    if ran > 1:
        _spinning[pool][:] = [time.monotonic() + SPIN_SECONDS[pool], ran - 1]
        if pool == "openmp":
            _openmp_team[0] = True


def blas_on_kernel_pool(routed):
    """BLAS's parallel work runs on the kernels' OpenMP pool from now on (`routed`), or on its own."""
    _blas_pool[0] = "openmp" if routed else "openblas"


def blas_threads(work):
    """The BLAS threads for a call of `work` multiply-adds."""
    return 1 if work < BLAS_MIN_WORK else max(1, min(num_threads(), free_cpus(_blas_pool[0])))


def stack_threads(work):
    """The OpenMP threads the single-threaded BLAS calls of a product's tiles (or of a
    stack of small products), `work` multiply-adds in all, are shared out on
    (rune/backends/cpu/batched_matmul.py): what one BLAS call of that work would get,
    within what BLAS and OpenMP are set to now."""
    blas, omp = _blas(), _openmp
    if blas is None or omp is None or work < BLAS_MIN_WORK or _forked[0]:
        return 1
    return max(1, min(num_threads(), free_cpus("openmp"), blas.get(), omp.get()))


def pool_ran(n):
    """Work just ran on `n` of the kernels' OpenMP threads (outside a kernel)."""
    _spun("openmp", n)


# ---- fork

# GNU libgomp keeps the threads of the first team it starts, and a forked child has
# none of them but still believes it does: its first parallel region with more than
# one thread waits forever. So a child forked after the parent's OpenMP runtime started
# threads runs every parallel region on one thread (parallel_threads, stack_threads:
# the kernels' wrapper sets omp_set_num_threads(1) around each call), which needs no
# other thread; BLAS goes back to OpenBLAS's own threads, which OpenBLAS restarts after
# a fork (rune/backends/cpu/blas_pool.py). A child forked before any team started (a
# forkserver's, say) keeps its threads.
_openmp_team = [False]   # this process's OpenMP runtime has started threads (a region of several ran)
_team_probes = []        # other tellers of that: the BLAS pool's regions run inside NumPy's calls
_forked = [False]        # a forked child of a process whose OpenMP runtime had started threads


def watch_openmp_team(probe):
    """`probe()` says whether parallel regions run outside rune's wrappers (the BLAS pool's)
    started the OpenMP runtime's threads."""
    _team_probes.append(probe)


def forked_from_a_team():
    """Whether this process was forked after its parent's OpenMP runtime started threads
    (its parallel work then runs on one thread)."""
    return _forked[0]


def _after_fork_in_child():
    if _openmp_team[0] or any(probe() for probe in _team_probes):
        _forked[0] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- the kernels' OpenMP runtime

class _OpenMP:
    """The OpenMP runtime the kernels link, reached through a kernel library."""

    def __init__(self, lib):
        self.get = lib.omp_get_max_threads
        self.get.argtypes, self.get.restype = [], ctypes.c_int
        self.set = lib.omp_set_num_threads
        self.set.argtypes, self.set.restype = [ctypes.c_int], None


_openmp = None
_load_lock = threading.Lock()


def load_kernel_library(path, mode=ctypes.DEFAULT_MODE):
    """ctypes.CDLL(path, mode) for a library of kernels: until the OpenMP runtime it
    links is found, it is loaded with idle threads that sleep (see the module's doc)."""
    global _openmp
    if _openmp is not None:
        return ctypes.CDLL(path, mode)
    with _load_lock:
        if _openmp is not None:
            return ctypes.CDLL(path, mode)
        user_set = any(os.environ.get(name) for name in _KERNEL_ENV_SET_BY_USER)
        saved = {name: os.environ.get(name) for name in _KERNEL_ENV}
        if not user_set:
            os.environ.update(_KERNEL_ENV)
        try:
            lib = ctypes.CDLL(path, mode)
        finally:
            if not user_set:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
        try:
            _openmp = _OpenMP(lib)
        except AttributeError:   # it links no OpenMP runtime: the next library may
            pass
        return lib


def parallel_kernel(fn):
    """The entry point `fn` of a compiled unit with parallel loops, run on
    parallel_threads() OpenMP threads (no more than the calling thread's OpenMP
    setting, which is put back after the call)."""
    omp = _openmp
    if omp is None:   # no runtime found: its loops run as the runtime decides
        return fn

    def run(buffers):
        n, have = parallel_threads(), omp.get()
        if n >= have:
            fn(buffers)
            _spun("openmp", have)
            return
        omp.set(n)
        try:
            fn(buffers)
        finally:
            omp.set(have)
        _spun("openmp", n)
    run.__wrapped__ = fn
    return run


# ---- BLAS

class _OpenBLAS:
    """OpenBLAS's thread count, under the names its builds export (NumPy's wheels:
    scipy_openblas, 64-bit), and where it has one (0.3.27 and later) the setter of
    the callback that runs its parallel work (`set_callback`, else None)."""
    _PREFIXES = (("openblas_", ""), ("scipy_openblas_", "64_"), ("openblas_", "64_"), ("scipy_openblas_", ""))

    def __init__(self, lib):
        for prefix, suffix in self._PREFIXES:
            try:
                self.get = getattr(lib, f"{prefix}get_num_threads{suffix}")
                self.set = getattr(lib, f"{prefix}set_num_threads{suffix}")
                self.lib, self.prefix, self.suffix = lib, prefix[:-len("openblas_")], suffix
                break
            except AttributeError:
                continue
        else:
            raise AttributeError("no openblas_get_num_threads / openblas_set_num_threads")
        self.get.argtypes, self.get.restype = [], ctypes.c_int
        self.set.argtypes, self.set.restype = [ctypes.c_int], None
        self.set_callback = getattr(lib, f"{prefix}set_threads_callback_function{suffix}", None)
        if self.set_callback is not None:
            self.set_callback.argtypes, self.set_callback.restype = [ctypes.c_void_p], None


    def symbol(self, name):
        """The address of the library's function `name` ("cblas_sgemm") under this
        build's names, or None where it has none."""
        try:
            return ctypes.cast(getattr(self.lib, f"{self.prefix}{name}{self.suffix}"), ctypes.c_void_p).value
        except AttributeError:
            return None


def openblas():
    """NumPy's OpenBLAS as loaded in this process, or None (see _blas)."""
    return _blas()


@functools.lru_cache(maxsize=1)
def _blas():
    """NumPy's OpenBLAS as loaded in this process, or None (another BLAS, or no
    /proc/self/maps to find it by): its calls then run as the library decides."""
    import numpy  # noqa: F401  (loads the BLAS NumPy links)
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[5].strip() for line in f if line.count(" ") >= 5 and "openblas" in line}
    except OSError:
        return None
    # NumPy's own (numpy.libs), not another package's that may be loaded beside it (SciPy's)
    for path in sorted((p for p in paths if os.path.basename(p).startswith("lib") and ".so" in p),
                       key=lambda p: ("numpy" not in p, p)):
        try:
            return _OpenBLAS(ctypes.CDLL(path))
        except (OSError, AttributeError):
            continue
    return None


# BLAS's thread count is one for the process, while limited calls may overlap in
# several Python threads: each saving and restoring the count it found would leave
# the limit of whichever ended last. So the count the process had before the first
# of them (the baseline) is kept once, the running calls' limits are counted, BLAS
# is set to the smallest while any runs and back to the baseline after the last.
_blas_lock = threading.Lock()
_blas_limits = collections.Counter()   # the thread limit of each limited call running now
_blas_baseline = [None]                # BLAS's own count, while _blas_limits is not empty


def route_blas_with(router):
    """Run `router()` now, while rune is imported (the host backend hands it
    rune/backends/cpu/blas_pool.py's routing of BLAS's parallel work onto the kernels'
    OpenMP pool). OpenBLAS's setter of that callback "should be called before any other
    openblas function": a call already running on OpenBLAS's own threads when it is set
    shares their buffers and mailboxes with the calls that follow on the pool, and a
    threaded LU solve issued right after the switch, while a threaded matmul of another
    thread still ran on OpenBLAS's threads, hung (0.3.31). Importing rune is the
    earliest rune can set it: before rune's own BLAS calls, and before any where rune is
    imported before the program's threads start BLAS work. A compiler that cannot be
    used (a bad RUNE_CC) leaves BLAS on its own threads here and fails the first
    compiled call, as it would without the pool."""
    if not config.blas_pool():   # RUNE_BLAS_POOL=0: not even a compiler is looked for
        return
    try:
        router()
    except (ArgumentError, CompileError):
        pass


def blas_call(work, fn, *args, **kwargs):
    """fn(*args, **kwargs), a call into BLAS of `work` multiply-adds, on
    blas_threads(work) BLAS threads (no more than BLAS is set to, which is put
    back after the call: see the module's doc for calls from several threads).
    Its bits may change with that count (OpenBLAS splits a product's rows, columns
    and K blocks by its threads): rune's products use serial_blas and thread by
    tiles of their own (rune/backends/cpu/batched_matmul.py)."""
    return _limited_blas_call(blas_threads(work), fn, args, kwargs)


def serial_blas(fn, *args, **kwargs):
    """fn(*args, **kwargs), calls into BLAS, with BLAS on one thread: what each call
    computes then depends on its operands alone, not on the threads BLAS has."""
    return _limited_blas_call(1, fn, args, kwargs)


def _limited_blas_call(n, fn, args, kwargs):
    """fn(*args, **kwargs) with BLAS on at most `n` threads."""
    blas = _blas()
    if blas is None:
        return fn(*args, **kwargs)
    with _blas_lock:
        have = _blas_baseline[0] if _blas_limits else blas.get()
        limited = n < have
        if limited:
            if not _blas_limits:
                _blas_baseline[0] = have
            before = min(_blas_limits, default=have)
            _blas_limits[n] += 1
            if n < before:
                blas.set(n)
    try:
        return fn(*args, **kwargs)
    finally:
        if limited:
            with _blas_lock:
                _blas_limits[n] -= 1
                if not _blas_limits[n]:
                    del _blas_limits[n]
                blas.set(min(_blas_limits, default=_blas_baseline[0]))
        _spun(_blas_pool[0], min(n, have))
