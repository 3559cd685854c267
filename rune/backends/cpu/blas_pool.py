"""OpenBLAS's parallel work on the kernels' OpenMP threads: one pool of threads
for the process.

OpenBLAS keeps threads of its own, and after each parallel call they spin on
their cores (a loop of `nop`s that never yields) for about 2**28 cycles. A
compiled kernel whose parallel loop runs next finds its cores taken and waits,
so while BLAS calls come every few milliseconds (a transformer's step) the
kernels had to stay on one thread (rune/backends/cpu/threads.py). OpenBLAS 0.3.27 and
later let the caller run its parallel work instead
(`openblas_set_threads_callback_function`): rune hands it `rune_blas_pool`,
which runs the jobs in one OpenMP parallel region on the very threads the
kernels use. Kernels and BLAS calls then take turns on one pool, whose idle
threads spin briefly and then sleep (rune/backends/cpu/threads.py), and a team warm from
one is warm for the next.

OpenBLAS's jobs wait on one another (a GEMM's threads exchange packed
panels), so every job must run at once: when OpenMP gives a smaller team
(a thread limit, a call from inside a parallel region) the jobs run on
threads of their own instead. OpenBLAS's per-job buffers are shared, so one
parallel BLAS call runs at a time (a mutex). A forked child goes back to
OpenBLAS's own threads (which OpenBLAS restarts after a fork), and its kernels
run on one thread (rune/backends/cpu/threads.py: GNU libgomp cannot start a team in a child
of a process that had one; the unit counts its parallel regions to tell).

The callback is set while rune is imported: OpenBLAS asks for it before any
other call, and a call already running on its own threads when it is set
shares their buffers and mailboxes with the calls that follow on the pool (see
threads.route_blas_with). NumPy in the same process then runs its BLAS on the
pool too: the same products, bit for bit (the jobs are OpenBLAS's, split as
before), and several Python threads' matmuls take turns on it (one at a time,
as OpenBLAS's own threads also let only one threaded call run at once).

RUNE_BLAS_POOL=0 leaves BLAS on its own threads; so does NumPy's BLAS not being
an OpenBLAS with the callback, or no C compiler. rune/backends/cpu/threads.py then keeps
BLAS's threads and the kernels' apart as before.
"""
import ctypes
import os
import threading

from ...base import config
from . import threads
from ...errors import CompileError
from ...base.stats import COUNTERS
from .. import pipeline

NAME = "rune_blas_pool"
SOURCE = r"""
#include <omp.h>
#include <pthread.h>
#include <stddef.h>

typedef void (*rune_blas_job)(int thread, void *job, int arg);

struct rune_blas_task { rune_blas_job run; char *job; int thread, arg; };

static void *rune_blas_task_run(void *p) {
  struct rune_blas_task *t = (struct rune_blas_task *)p;
  t->run(t->thread, t->job, t->arg);
  return NULL;
}

/* Every job on a thread of its own: OpenMP could not give the whole team. */
static void rune_blas_on_pthreads(rune_blas_job run, int n, size_t size, char *jobs, int arg) {
  struct rune_blas_task tasks[n];
  pthread_t ids[n];
  int started[n];
  for (int i = 1; i < n; i++) {
    tasks[i] = (struct rune_blas_task){run, jobs + (size_t)i * size, i, arg};
    started[i] = pthread_create(&ids[i], NULL, rune_blas_task_run, &tasks[i]) == 0;
  }
  run(0, jobs, arg);
  for (int i = 1; i < n; i++) {
    if (started[i]) pthread_join(ids[i], NULL);
    else run(i, jobs + (size_t)i * size, arg);   /* no thread to be had: the job runs last */
  }
}

static pthread_mutex_t rune_blas_lock = PTHREAD_MUTEX_INITIALIZER;

/* Read from Python: the calls inside the lock now and the most there ever were at once
   (one, or OpenBLAS's per-thread buffers were shared), and the parallel regions run
   (a forked child of a process that ran one must not start another). */
int rune_blas_pool_inside, rune_blas_pool_most_inside, rune_blas_pool_regions;

void rune_blas_pool(int sync, rune_blas_job run, int n, size_t size, void *jobs, int arg) {
  (void)sync;
  pthread_mutex_lock(&rune_blas_lock);
  int inside = __atomic_add_fetch(&rune_blas_pool_inside, 1, __ATOMIC_SEQ_CST);
  if (inside > __atomic_load_n(&rune_blas_pool_most_inside, __ATOMIC_SEQ_CST))
    __atomic_store_n(&rune_blas_pool_most_inside, inside, __ATOMIC_SEQ_CST);
  if (n <= 1) {
    if (n == 1) run(0, jobs, arg);
  } else {
    int whole = 0;
    if (!omp_in_parallel()) {
      __atomic_add_fetch(&rune_blas_pool_regions, 1, __ATOMIC_SEQ_CST);
      #pragma omp parallel num_threads(n)
      {
        /* the jobs wait on each other: run them only in a team where all run at once */
        if (omp_get_num_threads() == n) {
          int t = omp_get_thread_num();
          run(t, (char *)jobs + (size_t)t * size, arg);
          if (t == 0) whole = 1;
        }
      }
    }
    if (!whole) rune_blas_on_pthreads(run, n, size, (char *)jobs, arg);
  }
  __atomic_sub_fetch(&rune_blas_pool_inside, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&rune_blas_lock);
}

/* the unit's entry point (every unit has one): unused */
void rune_blas_pool_run(void **b) { (void)b; }
"""

_lock = threading.Lock()
_routed = [None]   # None: not tried yet; else whether BLAS runs on the pool
_unit = [None]     # the loaded unit, once installed


def route(compiler):
    """Run NumPy's OpenBLAS parallel work on the kernels' OpenMP pool from now on;
    True when it does (once tried, the answer stays). The host backend calls it while
    rune is imported (rune/backends/cpu/threads.py: route_blas_with says why then); RUNE_BLAS_POOL=0
    leaves BLAS on its own threads."""
    if _routed[0] is not None:
        return _routed[0]
    with _lock:
        if _routed[0] is None:
            _routed[0] = _install(compiler)
        return _routed[0]


def _install(compiler):
    blas = threads.openblas()
    if not config.blas_pool() or blas is None or blas.set_callback is None or compiler is None:
        return False
    program = _build(compiler)
    if isinstance(program, CompileError):
        return False
    _unit[0] = program.lib
    callback = ctypes.cast(program.lib.rune_blas_pool, ctypes.c_void_p)
    blas.set_callback(callback)
    threads.blas_on_kernel_pool(True)
    threads.watch_openmp_team(lambda: counter("regions") > 0)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_unroute_in_child)
    return True


def _build(compiler):
    """The pool's unit, through the compile pipeline and its disk cache. Not counted in
    stats(): it is built while rune is imported, before any work of the program's."""
    kept = {name: COUNTERS[name] for name in ("kernels_compiled", "disk_cache_hits")}
    try:
        return pipeline.build(compiler, "", [(NAME, SOURCE, ())])[0]
    finally:
        COUNTERS.update(kept)


def counter(name):
    """The pool's counter `name` ("inside", "most_inside", "regions": see SOURCE); 0
    where the pool is not installed."""
    lib = _unit[0]
    return 0 if lib is None else ctypes.c_int.in_dll(lib, f"rune_blas_pool_{name}").value


def _unroute_in_child():
    """A forked child's OpenMP pool is not to be trusted: BLAS goes back to its own threads."""
    blas = threads.openblas()
    if blas is not None and blas.set_callback is not None:
        blas.set_callback(None)
    threads.blas_on_kernel_pool(False)
    _routed[0] = False
