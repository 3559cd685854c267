"""The fast paths of calling compiled code give what the full path gives.

A cached jit call of one array is written as the function's own `__call__`
(rune/compiler/api.py, `Jitted._write_hot_call`) behind one process-wide count
of open traces, default-device blocks and profiles (rune/base/contexts.py); a
compiled C stretch keeps the addresses of the arrays it saw last
(rune/backends/cpu/stretch.py). The oracles: NumPy, the same function called
with a profile open (which always takes the full path), and finite
differences."""
import threading

import numpy as np
import pytest

import rune
from rune.base import contexts
from rune import nx
from rune.compiler import api

pytestmark = pytest.mark.cc


@pytest.fixture(autouse=True)
def _tiny_plans_stay_numpy(monkeypatch, request):
    # The suite compiles every stretch (conftest); a call is written only for a plan of
    # NumPy stretches, which tiny ones are by default.
    if "compiled_stretch" not in request.node.name:
        monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "4096")


def _written(f):
    return type(f) is not api.Jitted and "__call__" in vars(type(f))


def _warm(f, x, calls=4):
    for _ in range(calls):
        f(x)


def test_the_written_call_gives_numpy_results_and_counts_as_the_full_path_does():
    base = np.linspace(-2, 2, 7, dtype=np.float32)
    x = nx.asarray(base)
    f = rune.jit(lambda v: v * 2.0 + 1.0)
    _warm(f, x)
    assert _written(f), "a repeated one-array call should be written as the class's __call__"
    rune.reset_stats()
    out = f(x)
    fast = rune.stats()
    np.testing.assert_array_equal(np.asarray(out), base * np.float32(2) + np.float32(1))
    assert out.dtype == nx.float32 and out.device == x.device
    rune.reset_stats()
    with rune.profile():   # an open profile sends the call down the full path
        full_out = f(x)
    full = rune.stats()
    np.testing.assert_array_equal(np.asarray(full_out), np.asarray(out))
    for counter in ("cache_hits", "kernels_launched", "traces", "compiles"):
        assert fast[counter] == full[counter], counter


def test_under_a_trace_the_jitted_function_is_traced_not_run():
    x = nx.asarray(np.array([0.5, 1.5, -2.0]))
    f = rune.jit(lambda v: nx.sin(v) * v)
    _warm(f, x)
    assert _written(f)
    g = rune.grad(lambda v: nx.sum(f(v)))(x)
    v, h = np.array([0.5, 1.5, -2.0]), 1e-6
    numeric = ((np.sin(v + h) * (v + h)) - (np.sin(v - h) * (v - h))) / (2 * h)
    np.testing.assert_allclose(np.asarray(g), numeric, rtol=1e-6)
    assert contexts.OPEN[0] == 0, "the count of open contexts returns to zero after the trace"


def test_inside_a_default_device_block_the_call_takes_the_full_path_with_the_same_result():
    x = nx.asarray(np.arange(5.0))
    f = rune.jit(lambda v: v - 3.0)
    _warm(f, x)
    with rune.default_device("cpu:0"):
        assert contexts.OPEN[0] > 0
        out = f(x)
    np.testing.assert_array_equal(np.asarray(out), np.arange(5.0) - 3.0)


def test_an_open_profile_records_the_call():
    x = nx.asarray(np.ones(3, np.float32))
    f = rune.jit(lambda v: v + 1.0)
    _warm(f, x)
    with rune.profile() as prof:
        f(x)
    assert prof.events, "a call made while a profile is open must be recorded"


def test_signatures_that_alternate_do_not_rewrite_the_class_each_call(monkeypatch):
    written = []
    real = api._hot_call
    monkeypatch.setattr(api, "_hot_call", lambda *a: written.append(a[1]) or real(*a))
    f = rune.jit(lambda v: v * 3.0)
    a32, a64 = nx.asarray(np.ones(4, np.float32)), nx.asarray(np.ones(4, np.float64))
    for _ in range(10):
        np.testing.assert_array_equal(np.asarray(f(a32)), np.full(4, 3.0, np.float32))
        np.testing.assert_array_equal(np.asarray(f(a64)), np.full(4, 3.0))
    assert written == [], "alternating signatures wrote a call"
    _warm(f, a64)
    assert len(written) == 1 and _written(f)


def test_clear_cache_forgets_the_written_call():
    x = nx.asarray(np.ones(2))
    f = rune.jit(lambda v: v / 2.0)
    _warm(f, x)
    assert _written(f)
    f.clear_cache()
    assert not _written(f)
    traces = rune.stats()["traces"]
    np.testing.assert_array_equal(np.asarray(f(x)), np.full(2, 0.5))
    assert rune.stats()["traces"] == traces + 1


def test_calls_with_other_arguments_still_go_through_the_full_path():
    x = nx.asarray(np.ones(3))
    f = rune.jit(lambda v, w=None: v + 1.0 if w is None else v + w)
    _warm(f, x)
    np.testing.assert_array_equal(np.asarray(f(x, x)), np.full(3, 2.0))
    np.testing.assert_array_equal(np.asarray(f(v=x)), np.full(3, 2.0))
    np.testing.assert_array_equal(np.asarray(f(nx.asarray(np.ones(3, np.float32)))), np.full(3, 2.0, np.float32))
    with pytest.raises(TypeError):
        f()


def test_a_trace_open_in_another_thread_leaves_this_threads_calls_right():
    x = nx.asarray(np.arange(4.0))
    f = rune.jit(lambda v: v * v)
    _warm(f, x)
    inside, release = threading.Event(), threading.Event()

    def traced(v):
        inside.set()
        release.wait(10)
        return nx.sum(v * v)

    worker = threading.Thread(target=lambda: rune.grad(traced)(nx.asarray(np.ones(2))))
    worker.start()
    try:
        assert inside.wait(10)
        assert contexts.OPEN[0] > 0
        np.testing.assert_array_equal(np.asarray(f(x)), np.arange(4.0) ** 2)
    finally:
        release.set()
        worker.join()


# ---------------------------------------------------------------- addresses kept by a C stretch

def _big_stretch():
    # Large enough to compile whatever RUNE_COMPILE_MIN_SIZE says, and more than one op.
    return rune.jit(lambda a, b: nx.tanh(a * b) + a - b)


def _expected(a, b):
    return np.tanh(a * b) + a - b


def test_a_compiled_stretch_reads_new_arrays_not_the_addresses_of_the_last_ones():
    rng = np.random.default_rng(0)
    f = _big_stretch()
    arrays = [rng.standard_normal((64, 80)) for _ in range(6)]
    a, b = nx.asarray(arrays[0]), nx.asarray(arrays[1])
    for _ in range(3):   # the same arrays again and again: the kept addresses
        np.testing.assert_allclose(np.asarray(f(a, b)), _expected(arrays[0], arrays[1]), rtol=1e-12)
    for k in range(2, 6):   # a new array each call, the old one freed (its memory free to come back)
        a = nx.asarray(arrays[k])
        np.testing.assert_allclose(np.asarray(f(a, b)), _expected(arrays[k], arrays[1]), rtol=1e-12)
        del a
    for k in range(4):   # arrays made and dropped in a loop: the allocator hands addresses back
        fresh = rng.standard_normal((64, 80))
        out = f(nx.asarray(fresh.copy()), b)
        np.testing.assert_allclose(np.asarray(out), _expected(fresh, arrays[1]), rtol=1e-12)


def test_a_compiled_stretch_reads_a_view_and_an_output_fed_back():
    rng = np.random.default_rng(1)
    f = _big_stretch()
    wide = rng.standard_normal((64, 160))
    b = rng.standard_normal((64, 80))
    # a strided input (copied to a contiguous one for the kernel), then the contiguous original
    np.testing.assert_allclose(np.asarray(f(nx.asarray(wide)[:, ::2], nx.asarray(b))), _expected(wide[:, ::2], b),
                               rtol=1e-12)
    a = nx.asarray(wide[:, :80].copy())
    out = f(a, nx.asarray(b))
    for _ in range(3):   # each output is the next input: the stretch's own output array comes back
        expected = _expected(np.asarray(out), b)
        out = f(out, nx.asarray(b))
        np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-12)
