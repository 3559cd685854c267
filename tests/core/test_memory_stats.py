"""rune.memory_stats: bytes of live rune Arrays per device, current and peak, against
the NumPy byte counts of what each test makes and drops (docs/distributed.md)."""
import gc

import pytest

import rune
from rune import nx


def _now():
    gc.collect()
    return rune.memory_stats("cpu")["current"]


def test_current_and_peak_follow_arrays_made_and_dropped():
    base = _now()
    x = nx.ones((1000,), nx.float32)
    y = nx.zeros((10, 10), nx.float64)
    assert _now() - base == 4000 + 800
    rune.reset_peak_memory("cpu")
    z = x + x                                   # one more float32[1000]
    assert rune.memory_stats("cpu:0")["peak"] - base == 4000 + 800 + 4000
    del x, y, z
    assert _now() == base
    assert rune.memory_stats("cpu")["peak"] - base == 8800   # the peak stays until reset
    rune.reset_peak_memory()
    assert rune.memory_stats()["cpu:0"] == {"current": base, "peak": base}


def test_arrays_alive_before_counting_starts_are_counted_once():
    # Counting may have started in an earlier test; either way an Array made before this
    # call and dropped after it leaves the count where it was.
    x = nx.ones((256,), nx.float64)
    before = _now()
    del x
    assert _now() == before - 2048


def test_a_donated_argument_is_counted_once():
    # Donation deletes the argument and hands its buffer to the call's output (on a GPU;
    # host buffers are never reused): the bytes come off the argument when it is taken,
    # the output counts them again, and the deleted Array's end takes nothing more off.
    from rune.compiler import donation
    x = nx.ones((4096,), nx.float32)
    base = _now()
    donation.take([x], [x._raw], [0], "f")
    assert _now() == base - 4096 * 4
    del x
    assert _now() == base - 4096 * 4


def test_a_device_it_cannot_read_is_an_error():
    with pytest.raises(rune.ArgumentError, match="memory_stats: device must be a Device"):
        rune.memory_stats(3)


def test_arrays_made_and_dropped_on_several_threads_add_up():
    import sys
    import threading
    base = _now()

    def churn():
        for _ in range(20000):
            x = nx.ones((16,), nx.float32)
            del x
    threads = [threading.Thread(target=churn) for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # threads switch often: an unguarded read-and-write loses counts
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert _now() == base
