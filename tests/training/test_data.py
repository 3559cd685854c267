"""rune.data.Loader: batches against hand-written NumPy loops over the same orders,
sharding, resuming, errors from the background thread, and its thread's lifetime."""
import gc
import threading
import time
import traceback
from typing import NamedTuple

import numpy as np
import pytest

import rune
from rune import nx
from rune.data import Loader

N, FEATURES = 23, 3


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((N, FEATURES)).astype(np.float32), np.arange(N, dtype=np.int32) * 10


def _order(key, epoch, n=N):
    """Epoch `epoch`'s order as the Loader's contract states it."""
    return np.asarray(nx.random.permutation(nx.random.fold_in(key, epoch), n))


def _numpy_batches(arrays, order, batch, drop_last=False):
    """The hand-written loop: consecutive slices of `order`, rows of every array."""
    stop = len(order) - len(order) % batch if drop_last else len(order)
    return [tuple(a[order[i:i + batch]] for a in arrays) for i in range(0, stop, batch)]


def _host(batches):
    return [rune.tree.map(np.asarray, b) for b in batches]


def _loader_threads():
    return [t for t in threading.enumerate() if t.name == "rune.data.Loader"]


def _assert_no_loader_thread():
    deadline = time.monotonic() + 5.0
    while _loader_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _loader_threads()


def _labels(batches):
    return np.concatenate([np.asarray(b[1]) for b in batches]) // 10


# ---------------------------------------------------------------- order and contents

def test_batches_equal_a_numpy_loop_over_the_epoch_permutation():
    x, y = _data()
    key = nx.random.key(7)
    loader = Loader((x, y), 5, key=key, shard=None)
    got = list(loader.epoch(2))
    want = _numpy_batches((x, y), _order(key, 2), 5)
    assert len(got) == len(want) == len(loader) == 5
    for g, w in zip(got, want):
        assert all(isinstance(leaf, nx.Array) for leaf in g)
        assert g[0].dtype == nx.float32 and g[1].dtype == nx.int32
        np.testing.assert_array_equal(np.asarray(g[0]), w[0])
        np.testing.assert_array_equal(np.asarray(g[1]), w[1])


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_example_once_per_epoch_and_the_partial_batch(drop_last):
    x, y = _data()
    batches = list(Loader((x, y), 5, key=nx.random.key(1), drop_last=drop_last, shard=None).epoch(0))
    sizes = [len(np.asarray(b[1])) for b in batches]
    seen = _labels(batches)
    assert len(set(seen.tolist())) == len(seen)          # no example twice
    if drop_last:
        assert sizes == [5] * 4 and len(seen) == 20
    else:
        assert sizes == [5, 5, 5, 5, 3] and sorted(seen.tolist()) == list(range(N))
    for b in batches:                                     # rows stay together
        np.testing.assert_array_equal(np.asarray(b[0]), x[np.asarray(b[1]) // 10])


def test_without_a_key_the_order_is_the_source_order():
    x, y = _data()
    assert _labels(list(Loader((x, y), 4, shard=None))).tolist() == list(range(N))


def test_epochs_differ_and_the_same_key_gives_the_same_order():
    x, y = _data()
    a = Loader((x, y), 6, key=nx.random.key(3), shard=None)
    b = Loader((x, y), 6, key=nx.random.key(3), shard=None)
    c = Loader((x, y), 6, key=nx.random.key(4), shard=None)
    e0, e1 = _labels(list(a.epoch(0))), _labels(list(a.epoch(1)))
    assert sorted(e0.tolist()) == sorted(e1.tolist()) and not np.array_equal(e0, e1)
    np.testing.assert_array_equal(_labels(list(b.epoch(1))), e1)
    assert not np.array_equal(_labels(list(c.epoch(1))), e1)


# ---------------------------------------------------------------- ranks

@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_shards_partition_the_epoch_with_equal_batch_counts(size, drop_last):
    x, y = _data()
    key = nx.random.key(5)
    per_rank = [list(Loader((x, y), 4, key=key, drop_last=drop_last, shard=(r, size)).epoch(1))
                for r in range(size)]
    counts = {len(batches) for batches in per_rank}
    assert len(counts) == 1
    share = N // size
    order = _order(key, 1)
    for r, batches in enumerate(per_rank):      # rank r: its consecutive part of the epoch's order
        mine = order[r * share:(r + 1) * share]
        want = _numpy_batches((x, y), mine, 4, drop_last)
        assert len(batches) == len(want)
        for g, w in zip(_host(batches), want):
            np.testing.assert_array_equal(g[0], w[0])
            np.testing.assert_array_equal(g[1], w[1])
    taken = np.concatenate([_labels(b) for b in per_rank])
    assert len(set(taken.tolist())) == len(taken)   # disjoint
    if not drop_last:
        assert sorted(taken.tolist()) == sorted(order[:share * size].tolist())


def test_auto_shard_in_a_single_process_takes_everything():
    x, y = _data()
    assert sorted(_labels(list(Loader((x, y), 4)))) == list(range(N))


# ---------------------------------------------------------------- resuming

def test_epoch_from_a_step_gives_the_remaining_batches():
    x, y = _data()
    loader = Loader((x, y), 4, key=nx.random.key(9), shard=None)
    whole = _host(loader.epoch(3))
    tail = _host(loader.epoch(3, start=4))
    assert len(tail) == 2
    for g, w in zip(tail, whole[4:]):
        np.testing.assert_array_equal(g[0], w[0])
        np.testing.assert_array_equal(g[1], w[1])
    assert list(loader.epoch(3, start=len(loader))) == []
    with pytest.raises(rune.ArgumentError, match="start=7 is past the end of an epoch of 6 batches"):
        loader.epoch(3, start=7)


def test_state_round_trips_through_a_checkpoint_and_resumes(tmp_path):
    x, y = _data()
    key = nx.random.key(11)
    reference = Loader((x, y), 4, key=key, shard=None)
    uninterrupted = [np.asarray(b[1]) for _ in range(2) for b in reference]   # epochs 0 and 1
    assert reference.state() == {"epoch": 2, "step": 0}

    first = Loader((x, y), 4, key=key, shard=None)
    seen = []
    for b in first:                     # stop after 8 batches: epoch 1, step 2
        seen.append(np.asarray(b[1]))
        if len(seen) == 6:
            break
    for b in first:
        seen.append(np.asarray(b[1]))
        if len(seen) == 8:
            break
    assert first.state() == {"epoch": 1, "step": 2}
    rune.save(tmp_path / "ckpt.safetensors", {"data": first.state()})

    resumed = Loader((x, y), 4, key=key, shard=None)
    resumed.restore(rune.load(tmp_path / "ckpt.safetensors")["data"])
    seen += [np.asarray(b[1]) for b in resumed]
    assert len(seen) == len(uninterrupted)
    for g, w in zip(seen, uninterrupted):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(rune.ArgumentError, match="expected"):
        resumed.restore({"epoch": 1})


# ---------------------------------------------------------------- sources

class _Squares:
    """A PyTorch-style data set: example i is ({"x": [i, i*i]}, i), failing at `bad`."""

    def __init__(self, n, bad=None):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"example {i} is damaged")
        return {"x": np.array([i, i * i], np.float32)}, i


def test_a_sequence_of_examples_stacks_pytrees_leaf_by_leaf():
    key = nx.random.key(2)
    batches = list(Loader(_Squares(11), 4, key=key, shard=None).epoch(0))
    order = _order(key, 0, 11)
    assert len(batches) == 3
    for k, (features, label) in enumerate(batches):
        rows = order[4 * k:4 * k + 4]
        np.testing.assert_array_equal(np.asarray(features["x"]), np.stack([rows, rows * rows], 1))
        np.testing.assert_array_equal(np.asarray(label), rows)
        assert label.dtype == nx.int32   # Python ints take rune's default integer type


class _Stream:
    """An iterable (no len, no indexing) of (features, label) tuples; every epoch anew."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return ((np.full(2, i, np.float32), np.int32(i)) for i in range(self.n))


def test_an_iterable_of_examples_in_order_and_every_epoch_again():
    loader = Loader(_Stream(10), 4, shard=None)
    for epoch in range(2):
        batches = _host(loader.epoch(epoch))
        assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        assert all(np.array_equal(b[0], np.stack([b[1], b[1]], 1)) for b in batches)
    assert [b[1].tolist() for b in _host(Loader(_Stream(10), 4, drop_last=True, shard=None))] == [
        [0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(rune.UsageError, match="no length"):
        len(loader)
    with pytest.raises(rune.ArgumentError, match="cannot be shuffled"):
        Loader(_Stream(10), 4, key=nx.random.key(0))


def test_an_iterable_is_split_among_ranks_with_equal_counts():
    # 11 examples, 2 ranks, batches of 3: groups of 6 read by both; the last group (5)
    # gives each rank 2; the example left over goes to no rank.
    got = [[b[1].tolist() for b in _host(Loader(_Stream(11), 3, shard=(r, 2)))] for r in range(2)]
    assert got == [[[0, 1, 2], [6, 7]], [[3, 4, 5], [8, 9]]]
    resumed = [b[1].tolist() for b in _host(Loader(_Stream(11), 3, shard=(1, 2)).epoch(0, start=1))]
    assert resumed == [[8, 9]]


class _Pair(NamedTuple):
    image: np.ndarray
    label: np.ndarray


@pytest.mark.parametrize("wrap", [dict, _Pair, tuple], ids=["dict", "namedtuple", "tuple"])
def test_columns_in_a_pytree_keep_its_structure(wrap):
    x, y = _data()
    source = {"image": x, "label": y} if wrap is dict else wrap((x, y)) if wrap is tuple else _Pair(x, y)
    key = nx.random.key(6)
    batches = list(Loader(source, 8, key=key, shard=None).epoch(0))
    order = _order(key, 0)
    assert all(rune.tree.structure(b) == rune.tree.structure(source) for b in batches)
    leaves = [rune.tree.leaves(b) for b in batches]
    np.testing.assert_array_equal(np.concatenate([np.asarray(b[0]) for b in leaves]), x[order])
    np.testing.assert_array_equal(np.concatenate([np.asarray(b[1]) for b in leaves]), y[order])


def test_rune_array_columns_are_gathered_where_they_live():
    x, y = _data()
    key = nx.random.key(8)
    batches = list(Loader((nx.asarray(x), y), 6, key=key, shard=None).epoch(0))
    np.testing.assert_array_equal(np.concatenate([np.asarray(b[0]) for b in batches]), x[_order(key, 0)])


class _IncreasingOnly:
    """An array-like indexed as an h5py dataset is: a list of indices must increase strictly."""

    def __init__(self, array):
        self.array, self.shape, self.dtype = array, array.shape, array.dtype
        self.reads = 0

    def __getitem__(self, index):
        index = np.asarray(index)
        if index.ndim != 1 or np.any(np.diff(index) <= 0):
            raise TypeError(f"Indexing elements must be in increasing order, got {index.tolist()}")
        self.reads += 1
        return self.array[index]


def test_shuffled_batches_of_an_array_like_that_takes_only_increasing_indices():
    x, y = _data()
    key = nx.random.key(13)
    source = (_IncreasingOnly(x), y)
    batches = _host(Loader(source, 5, key=key, shard=None, prefetch=0).epoch(0))
    want = _numpy_batches((x, y), _order(key, 0), 5)
    assert len(batches) == len(want) and source[0].reads == len(want)
    for got, expected in zip(batches, want):
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    # repeated indices too read each row once, in increasing order
    np.testing.assert_array_equal(rune.data._rows(_IncreasingOnly(x), np.array([4, 1, 4, 0])), x[[4, 1, 4, 0]])


def test_stacking_errors_other_than_shapes_name_the_leaf_and_keep_their_class():
    with pytest.raises(rune.ShapeError, match=r"example\['x'\] must have one shape.*\(2,\), \(3,\)"):
        list(Loader([{"x": np.ones(2)}, {"x": np.ones(3)}], 2, prefetch=0))
    for examples, error in (([{"id": 2 ** 40}, {"id": 1}], OverflowError), ([{"s": "a"}, {"s": "b"}], TypeError)):
        with pytest.raises(error) as caught:
            list(Loader(examples, 2, prefetch=0))
        assert not isinstance(caught.value, rune.ShapeError)
        leaf = next(iter(examples[0]))
        assert f"stacking the leaf example['{leaf}'] of examples [0, 1]" in " ".join(caught.value.__notes__)


def test_sources_that_do_not_fit_are_clear_errors():
    x, y = _data()
    with pytest.raises(rune.ShapeError, match=r"same number of examples.*23.*22"):
        Loader((x, y[:-1]), 4)
    with pytest.raises(rune.ArgumentError, match=r"source\[1\] is float.*leading axis.*list"):
        Loader((x, 1.5), 4)
    with pytest.raises(rune.ArgumentError, match="shuffle=True needs a key"):
        Loader(x, 4, shuffle=True)
    with pytest.raises(rune.ArgumentError, match="batch_size must be an int >= 1"):
        Loader(x, 0)
    with pytest.raises(rune.ArgumentError, match=r"shard must be 'auto', None or \(rank, size\)"):
        Loader(x, 4, shard=(2, 2))
    with pytest.raises(rune.TreeError, match="example 1 has the structure"):
        list(Loader([{"a": 1}, {"b": 2}], 2, prefetch=0))


# ---------------------------------------------------------------- the background thread

def test_an_error_of_the_source_reaches_the_consumer_with_its_traceback():
    loader = Loader(_Squares(20, bad=13), 4, shard=None)
    delivered = []
    with pytest.raises(ValueError, match="example 13 is damaged") as caught:
        for _, label in loader:
            delivered.append(np.asarray(label).tolist())
    assert delivered == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    frames = [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert "__getitem__" in frames                  # where it was raised, in the source
    notes = " ".join(caught.value.__notes__)   # on every Python rune supports (3.10 without add_note)
    assert "example 13" in notes and "batch 3 of epoch 0" in notes
    _assert_no_loader_thread()


def test_prefetching_gives_the_batches_made_without_a_thread():
    x, y = _data()
    key = nx.random.key(12)
    ahead = _host(Loader((x, y), 4, key=key, prefetch=3, shard=None).epoch(1))
    inline = _host(Loader((x, y), 4, key=key, prefetch=0, shard=None).epoch(1))
    assert len(ahead) == len(inline) == 6
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(ahead, inline))


def test_no_thread_is_left_after_the_end_a_close_a_break_or_dropping_the_iterator():
    x, y = _data()
    loader = Loader((x, y), 2, key=nx.random.key(0), shard=None)
    list(loader.epoch(0))
    _assert_no_loader_thread()

    batches = loader.epoch(0)
    next(batches)
    assert _loader_threads()                       # it runs ahead of the consumer
    batches.close()
    assert not _loader_threads()
    with pytest.raises(StopIteration):
        next(batches)

    for _ in loader.epoch(1):
        break
    gc.collect()
    _assert_no_loader_thread()

    with loader.epoch(2) as batches:
        next(batches)
    assert not _loader_threads()

    batches = loader.epoch(3)
    next(batches)
    del batches
    gc.collect()
    _assert_no_loader_thread()


def test_batches_go_to_the_device_asked_or_the_default_one():
    x, y = _data()
    device = rune.devices("cpu")[-1]     # cpu:N when RUNE_HOST_DEVICES gives several host devices
    batch = next(iter(Loader((x, y), 4, device=device, shard=None)))
    assert {leaf.device for leaf in batch} == {device}
    with rune.default_device(device):
        batches = Loader((x, y), 4, shard=None).epoch(0)   # the default where iteration starts
    assert {leaf.device for leaf in next(batches)} == {device}
    batches.close()


@pytest.mark.cuda
def test_on_a_gpu_batches_come_through_pinned_memory_and_equal_the_host_loop():
    x, y = _data()
    key = nx.random.key(13)
    loader = Loader((x, y), 4, key=key, device="cuda:0", shard=None)
    got = list(loader.epoch(0))
    want = _numpy_batches((x, y), _order(key, 0), 4)
    assert all(str(leaf.device) == "cuda:0" for b in got for leaf in b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g[0] * 2.0), w[0] * 2.0)   # used by a step on the GPU
        np.testing.assert_array_equal(np.asarray(g[1]), w[1])
    assert len(got) == len(want)
    _assert_no_loader_thread()


@pytest.mark.cuda
def test_on_a_gpu_steps_queued_between_batches_and_an_early_close_keep_every_value():
    """Steps queued on the compute stream free memory of the batches' size while the side
    stream copies the next batches into buffers from the same pool; an early close drops
    batches whose copies may still run, and the whole epoch after it reuses that memory.
    Integer-valued floats: every step is exact, so the results equal NumPy's bit for bit."""
    rng = np.random.default_rng(3)
    x, y = (rng.integers(-4, 5, (48, 64, 1024)).astype(np.float32) for _ in range(2))
    key = nx.random.key(5)
    loader = Loader((x, y), 4, key=key, device="cuda:0", prefetch=3, shard=None)
    order = _order(key, 0, 48)
    for close_at in (2, None):
        results = []
        with loader.epoch(0) as batches:
            for step, (a, b) in enumerate(batches):
                t = a
                for _ in range(6):   # each step's temporaries freed while later kernels are queued
                    t = t * 0.5 + b
                results.append(t)
                if step == close_at:
                    break
        assert len(results) == (3 if close_at else 12)
        for step, t in enumerate(results):
            rows = order[4 * step:4 * step + 4]
            want = x[rows]
            for _ in range(6):
                want = want * np.float32(0.5) + y[rows]
            np.testing.assert_array_equal(np.asarray(t), want, err_msg=f"step {step}, close at {close_at}")


# ---------------------------------------------------------------- the pinned-copy path, on a stand-in for CuPy

class _Recorder:
    """A stand-in for the parts of CuPy the pinned-copy path uses, recording in `log`
    what a GPU would be asked, in order: ("alloc", stream, buffer), ("record", stream,
    event), ("wait", stream, event), ("copy", stream, buffer), ("sync", stream) and
    ("free", buffer) when a device buffer's memory goes back to the pool. An event
    recorded on the side stream is done only once that stream is synchronized (its
    copies are still in flight until then)."""

    def __init__(self):
        import contextlib
        import types
        import weakref
        log, current, ids = [], [], iter(range(1 << 30))
        self.log = log

        class Stream:
            def __init__(self, name="side", non_blocking=True):
                self.name, self.recorded = name, []

            def __enter__(self):
                current.append(self)

            def __exit__(self, *exc):
                current.pop()

            def wait_event(self, event):
                log.append(("wait", self.name, event.id))

            def synchronize(self):
                log.append(("sync", self.name))
                for event in self.recorded:
                    event.done = True

        compute = Stream("compute")

        class Event:
            def __init__(self, disable_timing=True):
                self.id, self.done = next(ids), False

            def record(self, stream):
                log.append(("record", stream.name, self.id))
                stream.recorded.append(self)
                self.done = stream is compute   # the consumer's queued work is not what is watched

        class DeviceBuffer(np.ndarray):
            def set(self, host, stream):
                log.append(("copy", stream.name, self.id))
                self[...] = host

        def empty(shape, dtype):
            raw = np.empty(shape, dtype).view(DeviceBuffer)
            raw.id = next(ids)
            log.append(("alloc", (current or [compute])[-1].name, raw.id))
            weakref.finalize(raw, log.append, ("free", raw.id))
            return raw

        cuda = types.SimpleNamespace(Device=lambda index: contextlib.nullcontext(), Stream=Stream, Event=Event,
                                     get_current_stream=lambda: (current or [compute])[-1],
                                     alloc_pinned_memory=bytearray)
        self.module = types.SimpleNamespace(cuda=cuda, empty=empty)


@pytest.fixture
def recorder(monkeypatch):
    import sys
    import types
    from rune.backends.cuda.upload import PinnedUploader
    fake = _Recorder()
    monkeypatch.setitem(sys.modules, "cupy", fake.module)
    # the GPU's backend as far as the Loader asks it: CUDA's uploader over the stand-in
    monkeypatch.setattr(rune.data, "backend_for", lambda device: types.SimpleNamespace(uploader=PinnedUploader))
    return fake


def _gpu():
    from rune.core.devices import Device
    return Device("cuda", 0)   # a name only: the stand-in does the work


def test_a_batch_is_copied_only_after_its_buffers_are_taken_and_the_compute_stream_reached(recorder):
    """The event the side stream waits for is recorded after the last destination buffer
    is allocated: a buffer may be memory the consumer freed while its queued kernels
    still use it, and the copy must follow those kernels."""
    from rune.backends.cuda.upload import PinnedUploader
    from rune.data import _Uploading
    x, y = _data()
    copier = _Uploading(_gpu(), PinnedUploader(_gpu()))
    batch, done = copier((x[:4], y[:4]))
    np.testing.assert_array_equal(batch[0]._raw, x[:4])
    np.testing.assert_array_equal(batch[1]._raw, y[:4])
    log = recorder.log
    kinds = [e[0] for e in log]
    allocs = [k for k, e in enumerate(log) if e[0] == "alloc"]
    (queued,) = [k for k, e in enumerate(log) if e[:2] == ("record", "compute")]
    (waited,) = [k for k, e in enumerate(log) if e[:2] == ("wait", "side")]
    copies = [k for k, e in enumerate(log) if e[0] == "copy"]
    assert len(allocs) == len(copies) == 2 and {log[k][1] for k in allocs} == {"compute"}
    assert max(allocs) < queued < waited < min(copies) and log[waited][2] == log[queued][2]
    assert kinds[-1] == "record" and log[-1] == ("record", "side", done.id) and max(copies) < len(log) - 1


def test_closing_early_waits_for_the_copies_in_flight_before_their_buffers_go(recorder):
    """Batches made ahead and dropped by an early close (or the end of the loop): their
    device buffers go back to the pool only after the side stream has finished its
    copies into them."""
    x, y = _data()
    for close in ("close", "drop", "prefetch=0"):
        recorder.log.clear()
        loader = Loader((x, y), 2, key=nx.random.key(1), device=_gpu(), shard=None,
                        prefetch=0 if close == "prefetch=0" else 3)
        batches = loader.epoch(0)
        first = next(batches)
        deadline = time.monotonic() + 5.0
        while close != "prefetch=0" and batches._producer.queue.qsize() < 3 and time.monotonic() < deadline:
            time.sleep(0.01)    # the thread makes 3 batches ahead (their copies never complete here)
        if close == "drop":
            del batches
            gc.collect()
        else:
            batches.close()
        _assert_no_loader_thread()
        log = recorder.log
        made = {e[2] for e in log if e[0] == "alloc"}
        frees = [k for k, e in enumerate(log) if e[0] == "free" and e[1] in made]
        synced = [k for k, e in enumerate(log) if e == ("sync", "side")]
        assert close == "prefetch=0" or len(frees) >= 6, (close, log)   # 3 batches of 2 leaves
        assert synced and all(min(synced) < k for k in frees), (close, log)
        np.testing.assert_array_equal(first[1]._raw, _numpy_batches((x, y), _order(nx.random.key(1), 0), 2)[0][1])
        del first
