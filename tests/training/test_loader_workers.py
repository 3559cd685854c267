"""rune.data.Loader(workers=N): a data set's __getitem__ run in worker processes gives
the batches of workers=0, in the same order, bit for bit (checked against a NumPy
oracle of the same permutation); an error in a worker is raised in the main process
with the worker's traceback; closing, dropping or breaking out of an epoch never
hangs (pytest-timeout), and the workers are gone afterwards."""
import gc
import multiprocessing
import os
import time

import numpy as np
import pytest

import rune
from rune import nx
from rune.backends.cpu import threads
from rune.data import Loader
from rune.errors import ArgumentError

pytestmark = [pytest.mark.timeout(60)]


class Decoded:
    """An image-like data set: each example computed in Python from its index (a stand-in
    for decoding and augmenting), with the worker's pid beside it to show who made it."""

    def __init__(self, n=45, bad=None, slow=None):
        self.n, self.bad, self.slow = n, bad, slow

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError(f"example {i} is corrupt")
        if i == self.slow:
            time.sleep(30)   # stuck far past any test's patience: shutting down must not wait for it
        return {"image": _image(i), "label": i % 7, "pid": os.getpid()}


def _image(i):
    return (np.arange(12, dtype=np.float32).reshape(3, 4) * (i + 1)) % 5


def _collect(loader, epoch=0):
    return [{k: np.asarray(v) for k, v in batch.items()} for batch in loader.epoch(epoch)]


@pytest.mark.parametrize("prefetch", [0, 2])
def test_workers_give_the_batches_of_workers_zero_in_order(prefetch):
    key = nx.random.key(3)
    plain = _collect(Loader(Decoded(), 8, key=key, prefetch=prefetch))
    loader = Loader(Decoded(), 8, key=key, prefetch=prefetch, workers=2)
    for epoch in (0, 1):
        order = loader.indices(epoch)   # the oracle: NumPy on the epoch's permutation
        batches = _collect(loader, epoch)
        assert len(batches) == -(-len(order) // 8)
        for step, batch in enumerate(batches):
            rows = order[step * 8:(step + 1) * 8]
            np.testing.assert_array_equal(batch["image"], np.stack([_image(int(i)) for i in rows]))
            np.testing.assert_array_equal(batch["label"], rows % 7)
            assert os.getpid() not in set(batch["pid"].tolist())   # made in the workers
        if epoch == 0:
            for mine, theirs in zip(batches, plain):
                for k in ("image", "label"):
                    assert np.array_equal(mine[k], theirs[k]) and mine[k].dtype == theirs[k].dtype
    assert {int(p) for b in batches for p in b["pid"]} .__len__() == 2   # both workers took batches


def test_resuming_mid_epoch_with_workers():
    loader = Loader(Decoded(), 8, key=nx.random.key(4), workers=2)
    whole = _collect(loader)
    tail = [{k: np.asarray(v) for k, v in b.items()} for b in loader.epoch(0, start=3)]
    for a, b in zip(whole[3:], tail):
        np.testing.assert_array_equal(a["image"], b["image"])
    assert len(tail) == len(whole) - 3


def test_an_error_in_a_worker_surfaces_with_its_traceback():
    loader = Loader(Decoded(bad=21), 5, workers=2)   # no shuffle: example 21 is in batch 4
    seen = []
    with pytest.raises(KeyError, match="example 21 is corrupt") as info:
        for batch in loader:
            seen.append(np.asarray(batch["label"]))
    assert len(seen) == 4   # every batch before the broken one arrived, in order
    notes = "\n".join(info.value.__notes__)
    assert "in worker process" in notes and "__getitem__" in notes and "Traceback" in notes
    assert "reading example 21" in notes


def _children():
    return [p for p in multiprocessing.active_children() if p.name.startswith("rune.data.Loader worker")]


@pytest.mark.timeout(20)   # a hang fails here: a worker would sleep 30 s at example 150
@pytest.mark.parametrize("how", ["close", "break", "drop"])
def test_leaving_an_epoch_early_stops_the_workers_without_a_hang(how):
    loader = Loader(Decoded(n=200, slow=150), 4, workers=2)
    batches = loader.epoch(0)
    next(batches)
    if how == "close":
        batches.close()
    elif how == "break":
        with batches:
            for _ in batches:
                break
    else:
        del batches
        gc.collect()
    assert not _children()


@pytest.mark.timeout(10)   # close must not wait for the stuck worker's 30 s sleep
def test_a_stuck_worker_is_terminated_at_close():
    loader = Loader(Decoded(n=40, slow=5), 4, workers=2, prefetch=1)
    batches = loader.epoch(0)
    next(batches)   # batch 1 (examples 4-7) is stuck in a worker
    batches.close()
    assert not _children()


def test_workers_need_a_sequence_of_examples():
    with pytest.raises(ArgumentError, match="workers=2 runs a data set's __getitem__"):
        Loader(np.zeros((10, 3)), 2, workers=2)
    with pytest.raises(ArgumentError, match="iterable of examples"):
        Loader(iter([1, 2, 3]), 2, workers=1)
    with pytest.raises(ArgumentError, match="workers must be an int >= 0"):
        Loader(Decoded(), 2, workers=-1)


class Computed:
    """A data set whose examples are computed by a parallel compiled rune kernel (1 << 20
    elements: the C renderer's parallel threshold), run in forked workers after the parent
    ran it on two OpenMP threads (rune/backends/cpu/threads.py, "fork")."""

    size = 1 << 20

    def __init__(self):
        self.kernel = rune.jit(lambda x, i: x * 2.5 + i)
        self.x = np.linspace(-1, 1, self.size, dtype=np.float32)

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return np.asarray(self.kernel(nx.asarray(self.x), nx.asarray(np.float32(i))))[::4096]


@pytest.mark.cc
def test_workers_forked_after_parallel_kernels_compute_and_never_hang(monkeypatch):
    monkeypatch.setenv("RUNE_NUM_THREADS", "2")
    monkeypatch.setattr(threads, "free_cpus", lambda pool=None: 8)
    data = Computed()
    first = data[0]   # the parent's kernel, on two threads: its OpenMP team is started
    assert threads._openmp_team[0], "the parent's kernel ran on one thread: nothing to test"
    want = [(data.x * np.float32(2.5) + np.float32(i))[::4096] for i in range(4)]
    np.testing.assert_array_equal(first, want[0])
    batches = [np.asarray(b) for b in Loader(data, 2, workers=2)]
    np.testing.assert_array_equal(np.concatenate(batches), np.stack(want))
