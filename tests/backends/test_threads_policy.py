"""rune's thread policy (rune/backends/cpu/threads.py): RUNE_NUM_THREADS, the threads a
compiled kernel's parallel loops and a BLAS call actually run on, and the
OpenMP runtime loaded with idle threads that sleep."""
import ctypes
import os
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

import rune
from rune.base import config
from rune import nx
from rune.backends.cpu import threads
from rune.backends.cpu import compiler as cc
from rune.backends import pipeline

threadpoolctl = pytest.importorskip("threadpoolctl")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository

PROBE = r"""
int omp_get_num_threads(void);
void probe_run(void **buffers) {
  int *out = (int *)buffers[0];
  #pragma omp parallel
  {
    #pragma omp master
    out[0] = omp_get_num_threads();
  }
}
"""


def _raises_naming(value, call):
    with pytest.raises(rune.ArgumentError) as info:
        call()
    message = str(info.value)
    assert "RUNE_NUM_THREADS" in message and repr(value) in message and "positive integer" in message, message


def _forget_cpus():
    threads.machine_cpus.cache_clear()
    threads.usable_cpus.cache_clear()


@pytest.fixture
def fresh_cpus():
    """usable_cpus() read anew under the test's readers, and anew again after them."""
    _forget_cpus()
    yield
    _forget_cpus()


def test_rune_num_threads_defaults_to_the_usable_cpus_and_rejects_what_is_not_a_count(monkeypatch, fresh_cpus):
    monkeypatch.delenv("RUNE_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "_cgroup_quota", lambda: None)   # no quota: the affinity decides
    assert threads.num_threads() == len(os.sched_getaffinity(0))
    _forget_cpus()
    monkeypatch.setattr(threads, "_cgroup_quota", lambda: 1)      # a quota of one CPU's time
    assert threads.num_threads() == 1
    monkeypatch.setenv("RUNE_NUM_THREADS", " 3 ")
    assert threads.num_threads() == config.num_threads(1) == 3
    for bad in ("0", "-2", "many", "1.5", "2 threads"):
        monkeypatch.setenv("RUNE_NUM_THREADS", bad)
        _raises_naming(bad, threads.num_threads)


@pytest.mark.parametrize("name, value, expected", [("RUNE_NUM_THREADS", "-2", "a positive integer"),
                                                     ("RUNE_BLAS_POOL", "sometimes", "0 or 1")])
def test_a_bad_thread_variable_fails_import_rune(name, value, expected):
    # they were first read by a large operation, perhaps long after a typo was made
    env = dict(os.environ, PYTHONPATH=ROOT, **{name: value})
    p = subprocess.run([sys.executable, "-c", "import rune"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert f"ArgumentError: environment variable {name} must be {expected}" in p.stderr, p.stderr
    assert repr(value) in p.stderr.splitlines()[-1]


def test_the_import_check_rejects_every_bad_thread_count(monkeypatch):
    monkeypatch.delenv("RUNE_BLAS_POOL", raising=False)
    for bad in ("abc", "0", "-2", "2.5"):
        monkeypatch.setenv("RUNE_NUM_THREADS", bad)
        _raises_naming(bad, config.check_threads)
    monkeypatch.setenv("RUNE_NUM_THREADS", "3")
    config.check_threads()


def test_a_bad_rune_num_threads_fails_the_call_that_reads_it(monkeypatch):
    if threads._blas() is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS rune can find: no BLAS call reads it")
    monkeypatch.setenv("RUNE_NUM_THREADS", "lots")
    a = nx.ones((512, 512))
    _raises_naming("lots", lambda: a @ a)


def _fake_cgroup(monkeypatch, root, membership, files):
    """A process whose /proc/self/cgroup reads `membership` and whose cgroup files under
    /sys/fs/cgroup are `files` ({relative path: text}), all under `root`."""
    for rel, text in {"proc/self/cgroup": membership, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setattr(threads, "_CGROUP_ROOT", str(root))
    return threads._cgroup_quota()


V1 = "4:memory:/job\n3:cpuset:/\n2:cpu,cpuacct:/job\n1:name=systemd:/job\n"


@pytest.mark.parametrize("membership, files, cpus", [
    ("0::/job\n", {"sys/fs/cgroup/job/cpu.max": "50000 100000\n"}, 1),     # half a CPU: one thread, never 0
    ("0::/job\n", {"sys/fs/cgroup/job/cpu.max": "150000 100000\n"}, 2),    # rounded up
    ("0::/job\n", {"sys/fs/cgroup/job/cpu.max": "400000 100000\n"}, 4),
    ("0::/job\n", {"sys/fs/cgroup/job/cpu.max": "max 100000\n"}, None),    # no limit
    ("0::/\n", {"sys/fs/cgroup/cpu.max": "20000 100000\n"}, 1),           # a container's own root
    (V1, {"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us": "50000\n",
          "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us": "100000\n"}, 1),
    (V1, {"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us": "250000\n",
          "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us": "100000\n"}, 3),
    (V1, {"sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_quota_us": "-1\n",
          "sys/fs/cgroup/cpu,cpuacct/job/cpu.cfs_period_us": "100000\n"}, None),
    # a container listing its host's path while mounting its own cgroup at the root
    (V1, {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "150000\n",
          "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 2),
    ("0::/job\n", {}, None),                                                 # no cpu.max to read
    ("0::/job\n", {"sys/fs/cgroup/job/cpu.max": "garbled\n"}, None),
], ids=["v2-half", "v2-1.5", "v2-4", "v2-max", "v2-root", "v1-half", "v1-2.5", "v1-none", "v1-container-root",
        "v2-missing", "v2-garbled"])
def test_the_cgroup_cpu_quota_is_read_from_its_files_and_rounded_up(monkeypatch, tmp_path, membership, files, cpus):
    assert _fake_cgroup(monkeypatch, tmp_path, membership, files) == cpus


def test_a_quota_under_one_cpu_runs_one_thread_not_every_cpu(monkeypatch, tmp_path, fresh_cpus):
    # rounded down, half a CPU was 0, read as no limit: the process then used all 8 CPUs
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.delenv("RUNE_NUM_THREADS", raising=False)
    _fake_cgroup(monkeypatch, tmp_path, "0::/job\n", {"sys/fs/cgroup/job/cpu.max": "50000 100000\n"})
    assert threads.usable_cpus() == threads.num_threads() == 1


def test_running_tasks_are_read_from_proc_loadavg():
    assert threads.running_of("3.10 2.05 1.00 7/321 4567\n") == 7
    assert threads.running_of("garbled") is None


@pytest.fixture
def two_cpus(monkeypatch, fresh_cpus):
    """A whole machine of two CPUs with a policy of two threads; `feed(running)`
    makes the next reading of /proc/loadavg show that many running tasks."""
    clock = [1000.0]
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(threads, "_cgroup_quota", lambda: None)
    monkeypatch.setenv("RUNE_NUM_THREADS", "2")
    monkeypatch.setattr(threads.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(threads, "_sample", [-threads.math.inf, None])
    monkeypatch.setattr(threads, "_readings", threads.collections.deque(maxlen=4))
    monkeypatch.setattr(threads, "_spinning", {pool: [-threads.math.inf, 0] for pool in threads.SPIN_SECONDS})
    monkeypatch.setattr(threads, "_blas_pool", ["openblas"])
    shown = [1]
    monkeypatch.setattr(threads, "_read_running", lambda: shown[0])

    def feed(running, later=threads.SAMPLE_PERIOD * 1.5):
        clock[0] += later
        shown[0] = running
    feed.clock = clock
    return feed


def _decisions():
    """(BLAS threads for work that pays, a kernel's threads) now."""
    return threads.blas_threads(threads.BLAS_MIN_WORK), threads.parallel_threads()


def test_a_task_passing_through_one_reading_costs_no_threads_a_competitor_in_every_one_does(two_cpus):
    two_cpus(1)
    assert _decisions() == (2, 2)
    two_cpus(2)          # a system task shows in one reading: the fewer of the recent ones counts
    assert _decisions() == (2, 2)
    for _ in range(4):   # a competing process shows in every reading
        two_cpus(2)
    assert _decisions() == (1, 1)
    two_cpus(1)          # it ended
    assert _decisions() == (2, 2)


def test_a_pools_own_spinning_threads_are_free_to_it_and_busy_to_the_other_pool(two_cpus):
    """Just after parallel work a pool's idle thread spins and /proc/loadavg
    counts it: the next work on that pool runs on it, so it is free to that
    work, while work on the other pool must leave its core alone; another
    process's running task stays busy to both."""
    threads._spinning["openblas"][:] = [two_cpus.clock[0] + 60, 1]   # OpenBLAS's spinner, a while yet
    two_cpus(2)          # the reader and the spinner
    assert _decisions() == (2, 1)
    for _ in range(4):   # and a competitor's busy thread
        two_cpus(3)
    assert _decisions() == (1, 1)
    threads._spinning["openblas"][:] = [-threads.math.inf, 1]   # it stopped spinning long ago
    for _ in range(4):
        two_cpus(1)
    assert _decisions() == (2, 2)
    assert threads.blas_threads(threads.BLAS_MIN_WORK - 1) == 1


def test_blas_on_the_kernels_pool_shares_its_spinning_threads_with_the_kernels(two_cpus):
    threads.blas_on_kernel_pool(True)
    threads._spinning["openmp"][:] = [two_cpus.clock[0] + 60, 1]   # the kernels' pool, warm
    two_cpus(2)
    assert _decisions() == (2, 2)
    threads.blas_on_kernel_pool(False)
    assert _decisions() == (1, 2)   # OpenBLAS's own threads would wait for the spinning core


def _machine(monkeypatch, tmp_path, *, cpus, affinity, quota, running):
    """A machine of `cpus` CPUs whose /proc/loadavg shows `running` running tasks."""
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"9.00 9.00 9.00 {running}/900 12345\n")
    monkeypatch.setattr(threads, "_LOADAVG", str(loadavg))
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)))
    monkeypatch.setattr(threads, "_cgroup_quota", lambda: quota)
    _forget_cpus()
    monkeypatch.setattr(threads, "_sample", [-threads.math.inf, None])
    monkeypatch.setattr(threads, "_readings", threads.collections.deque(maxlen=4))
    return threads.free_cpus()


def test_the_hosts_load_bounds_threads_only_when_the_process_may_use_the_whole_host(monkeypatch, tmp_path,
                                                                                       fresh_cpus):
    # the whole host: 64 CPUs, 40 running tasks (one is the reader) leave 25
    assert _machine(monkeypatch, tmp_path, cpus=64, affinity=64, quota=None, running=40) == 25
    # a container on a busy node: its cpuset's or its quota's CPUs, whatever the host's load
    assert _machine(monkeypatch, tmp_path, cpus=64, affinity=4, quota=None, running=200) == 4
    assert _machine(monkeypatch, tmp_path, cpus=64, affinity=64, quota=3, running=200) == 3


class _FakeBLAS:
    """A process-wide BLAS thread count, as libopenblas keeps it."""

    def __init__(self, count):
        self.count = count

    def get(self):
        return self.count

    def set(self, n):
        self.count = n


def test_overlapping_blas_calls_from_two_threads_put_back_the_process_count(monkeypatch):
    blas = _FakeBLAS(16)
    monkeypatch.setattr(threads, "_blas", lambda: blas)
    monkeypatch.setattr(threads, "blas_threads", lambda work: work)   # work stands for the call's limit
    a_in, b_in, a_out, b_out = (threading.Event() for _ in range(4))
    seen = {}

    def a_body():
        seen["a inside"] = blas.get()
        a_in.set()
        assert b_in.wait(10)
        return "a"

    def b_body():
        seen["b inside"] = blas.get()
        b_in.set()
        assert a_out.wait(10)
        seen["b after a ended"] = blas.get()
        return "b"

    def run(limit, body, done):
        try:
            seen[limit] = threads.blas_call(limit, body)
        finally:
            done.set()

    # A (limit 4) starts, B (limit 1) starts, A ends, B ends
    ta = threading.Thread(target=run, args=(4, a_body, a_out))
    ta.start()
    assert a_in.wait(10)
    tb = threading.Thread(target=run, args=(1, b_body, b_out))
    tb.start()
    ta.join(10)
    tb.join(10)
    assert seen[4] == "a" and seen[1] == "b"
    assert seen["a inside"] == 4 and seen["b inside"] == 1
    assert seen["b after a ended"] == 1   # A's end does not lift B's limit
    assert blas.get() == 16               # the count the process had before either


@pytest.fixture
def roomy(monkeypatch):
    """A policy of two threads on a machine that has them free."""
    monkeypatch.setenv("RUNE_NUM_THREADS", "2")
    monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 8)


def _blas_threads():
    """The threads of NumPy's BLAS (SciPy may have loaded its own beside it)."""
    return [i["num_threads"] for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas" and "numpy" in i["filepath"]]


@pytest.fixture
def blas_seen(monkeypatch):
    """Each product rune makes: ("numpy", BLAS threads) for np.matmul, ("tiles", OpenMP
    threads, BLAS threads) for its tiles on the kernels' threads; BLAS is held at one
    thread either way, so that the bits do not follow the count
    (rune/backends/cpu/batched_matmul.py)."""
    from rune.backends.cpu import batched_matmul
    entries = batched_matmul._entries(cc.find())
    if threads._blas() is None or entries is None:
        pytest.skip("no OpenBLAS rune can find, or no C compiler for the tiled products")
    seen, matmul = [], np.matmul

    def numpy_product(*args, **kwargs):
        seen.append(("numpy", _blas_threads()))
        return matmul(*args, **kwargs)
    monkeypatch.setattr(np, "matmul", numpy_product)
    for dtype, (fn, gemm) in list(entries.items()):
        def tiles(*args, _fn=fn):
            seen.append(("tiles", args[-1], _blas_threads()))
            return _fn(*args)
        monkeypatch.setitem(batched_matmul._loaded["ready"], dtype, (tiles, gemm))
    return seen


@pytest.mark.parametrize("call", ["eager", "jit"])
def test_a_product_gets_threads_only_for_work_that_pays(roomy, blas_seen, call):
    matmul = (lambda a, b: a @ b) if call == "eager" else rune.jit(lambda a, b: a @ b)
    small, large = nx.ones((128, 128)), nx.ones((512, 512))   # 2**21 and 2**27 multiply-adds
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        outside = _blas_threads()
        np.asarray(matmul(small, small))
        np.asarray(matmul(large, large))
        assert _blas_threads() == outside   # put back after each call
    assert outside == [2]
    assert blas_seen == [("numpy", [1]), ("tiles", 2, [1])]


def test_a_product_stays_on_one_thread_when_the_policy_or_the_process_says_so(roomy, blas_seen, monkeypatch):
    large = nx.ones((512, 512))
    with threadpoolctl.threadpool_limits(1, user_api="blas"):   # never raised above the process's limit
        np.asarray(large @ large)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 1)    # the other running tasks fill the machine
        np.asarray(large @ large)
        monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 8)
        monkeypatch.setenv("RUNE_NUM_THREADS", "1")
        np.asarray(large @ large)
        assert _blas_threads() == [2]
    assert blas_seen == [("tiles", 1, [1])] * 3


def test_the_compiler_runs_at_most_rune_num_threads_builds_at_once(monkeypatch):
    import concurrent.futures
    sizes = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers=None, *args, **kwargs):
            sizes.append(max_workers)
            super().__init__(max_workers, *args, **kwargs)

    def fake_batch(compiler, prelude, units, keys, batch, failed):   # builds nothing, loads a stand-in
        for i in batch:
            pipeline._LOADED[keys[i]] = object()

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", Recording)
    monkeypatch.setattr(pipeline, "_compile_batch", fake_batch)
    monkeypatch.setattr(pipeline, "cached", lambda compiler, key, symbols: None)   # nothing on disk: all five batches build
    compiler = types.SimpleNamespace(key=lambda text: ("rune-test-pool", text), batch=cc.BATCH,
                                     symbols=lambda unit: ())
    units = [(f"u{i}", f"void u{i}_run(void **b) {{ }}", [f"u{i}"]) for i in range(5 * cc.BATCH)]
    monkeypatch.setenv("RUNE_NUM_THREADS", "2")
    pipeline.build(compiler, "", units)
    monkeypatch.setenv("RUNE_NUM_THREADS", "3")
    pipeline.build(compiler, "", [(n, t + " ", k) for n, t, k in units])
    assert sizes == [2, 3]


@pytest.fixture(scope="module")
def probe():
    """A compiled unit with a parallel region that writes how many threads ran it."""
    compiler = cc.find()
    if compiler is None:
        pytest.skip("no C compiler")
    [fn] = cc.build(compiler, "", [("probe", PROBE, ["probe"])])
    if threads._openmp is None:
        pytest.skip("the kernels link no OpenMP runtime rune can find")

    def run():
        out = np.zeros(1, np.int32)
        fn((ctypes.c_void_p * 1)(out.ctypes.data))
        return int(out[0])
    return run


def _openmp_threads():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "openmp"]


def test_a_parallel_kernel_runs_on_the_policys_threads(roomy, probe, monkeypatch):
    with threadpoolctl.threadpool_limits(2, user_api="openmp"):
        outside = _openmp_threads()
        assert probe() == 2
        monkeypatch.setenv("RUNE_NUM_THREADS", "1")
        assert probe() == 1
        monkeypatch.setenv("RUNE_NUM_THREADS", "2")
        monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 1)
        assert probe() == 1
        assert _openmp_threads() == outside   # the thread's OpenMP setting is put back
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):   # never raised above the process's limit
        monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 8)
        assert probe() == 1


def test_the_renderers_parallel_loops_reach_the_policy(monkeypatch):
    """A jit stretch over 2**21 elements has a parallel loop, and its entry point is the policy's."""
    f = rune.jit(lambda v: nx.exp(v) + 1.0)
    np.asarray(f(nx.ones(1 << 21, dtype="float32")))
    if threads._openmp is None:
        pytest.skip("no compiled kernels here")
    calls = []
    monkeypatch.setattr(threads, "parallel_threads", lambda: calls.append(1) or 1)
    g = rune.jit(lambda v: nx.exp(v) * 3.0)
    np.asarray(g(nx.ones(1 << 21, dtype="float32")))
    assert calls


SHOW_ENV = """
import ctypes, os, sys
import numpy as np
import rune
from rune import nx
from rune.backends.cpu import threads
np.asarray(rune.jit(lambda v: nx.exp(v) + 2.0)(nx.ones(1 << 21, dtype="float32")))
if threads._openmp is None:
    print("no-openmp"); sys.exit(0)
try:
    gomp = ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD)
    gomp.omp_display_env(1)   # verbose: with the spin count idle threads wait for
except (OSError, AttributeError):
    print("no-libgomp"); sys.exit(0)
print("environ:", os.environ.get("OMP_WAIT_POLICY"))
"""


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    """A kernel cache of the children below: the first compiles SHOW_ENV's kernel, the
    others load it from there (the runtime's environment is set at any load, compiled or
    cached: rune/backends/cpu/threads.py's load_kernel_library)."""
    return tmp_path_factory.mktemp("kernels")


def _kernel_runtime_env(kernel_cache, **env):
    clean = {k: v for k, v in os.environ.items() if k not in threads._KERNEL_ENV_SET_BY_USER}
    clean.update(env, RUNE_CACHE_DIR=str(kernel_cache), PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", SHOW_ENV], env=clean, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    if "no-openmp" in p.stdout or "no-libgomp" in p.stdout:
        pytest.skip("the kernels' OpenMP runtime is not libgomp")
    return p.stdout, p.stderr


def test_the_kernels_openmp_runtime_spins_idle_threads_briefly_then_lets_them_sleep(kernel_cache):
    out, shown = _kernel_runtime_env(kernel_cache)
    assert "GOMP_SPINCOUNT = '30000'" in shown, shown   # libgomp's own default spins 300000 times
    assert "environ: None" in out   # set for the runtime's load only


@pytest.mark.parametrize("name, value, spins", [("OMP_WAIT_POLICY", "active", "30000000000"),
                                                ("GOMP_SPINCOUNT", "12345", "12345")])
def test_a_wait_policy_the_user_set_is_kept(kernel_cache, name, value, spins):
    _, shown = _kernel_runtime_env(kernel_cache, **{name: value})
    assert f"GOMP_SPINCOUNT = '{spins}'" in shown, shown


@pytest.mark.cc
def test_a_costly_elementwise_loop_runs_on_the_threads_below_the_size_threshold():
    # 2048 x 256 floats: under the 2**20-point threshold, but tanh per point is the work of many adds
    x = nx.ones((2048, 256))
    gelu = rune.jit(lambda v: 0.5 * v * (1 + nx.tanh(0.79788456 * (v + 0.044715 * v * v * v)))).plan(x)
    cheap = rune.jit(lambda v: v * 2 + 1).plan(x)
    assert "omp parallel" in gelu.kernels[0].source
    assert "omp parallel" not in cheap.kernels[0].source
