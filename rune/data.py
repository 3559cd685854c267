"""Batches for training: `rune.data.Loader`.

A Loader cuts a data set into batches, shuffled by an explicit key, split
among the ranks of a `rune.distributed` run, made on a background thread (or,
for a sequence of examples, in worker processes: `workers=N`) and placed on the
device ahead of the step that uses them.

Sources, told apart by their type:
- an array (NumPy, rune, or any array-like with a shape), or a tuple, dict,
  NamedTuple or registered pytree of them: columns sharing a leading axis of
  examples; a batch takes rows of every column;
- a list, or any object with `__len__` and `__getitem__` (a PyTorch-style
  data set): `source[i]` is example i, a pytree of arrays or scalars; a
  batch stacks examples leaf by leaf;
- any other iterable of examples: read in order, never shuffled; each epoch
  iterates it again (a generator therefore gives one epoch only).

Epoch e's order is `nx.random.permutation(nx.random.fold_in(key, e), n)`:
the same bits on every run, machine and device. With several ranks, each takes
its consecutive part of that order (`rank_share`, as `distributed.shard`
does), so every rank makes as many batches, hence as many collectives.

Where the device's backend has an `Uploader` (a GPU: pinned host memory and an
asynchronous copy on a side stream) a batch goes through it: the copy of the next
batch overlaps the step computing on this one.
"""
import itertools
import multiprocessing
import pickle
import queue
import signal
import sys
import threading
import traceback
import warnings
import weakref

import numpy as np

from .base.tracebacks import add_note
from . import distributed, nx, tree
from .backends import backend_for
from .core.array import Array
from .core.devices import current_default, get_device
from .distributed.sharding import rank_share
from .errors import ArgumentError, RuneError, RuneWarning, ShapeError, TreeError, UsageError
from .core import dtypes as dt
from .base.stats import COUNTERS

__all__ = ["Loader", "Batches"]

JOIN_TIMEOUT_S = 10.0   # how long closing waits for the thread to leave the source's code
_POLL_S = 0.05          # how often a waiting thread looks whether it was told to stop
_THREAD_NAME = "rune.data.Loader"


def _count(value, name, minimum=0):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ArgumentError(f"rune.data.Loader: {name} must be an int >= {minimum}, got {value!r}")
    return int(value)


# ---------------------------------------------------------------- sources

def _is_array(x):
    return isinstance(x, (np.ndarray, Array)) or (
        hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__getitem__"))


class _Columns:
    """Arrays sharing a leading axis of examples: a batch is the same rows of each."""
    indexable = True

    def __init__(self, source):
        leaves, self.structure = tree.flatten(source)
        paths = [path for path, _ in tree.flatten_with_paths(source)[0]]
        if not leaves:
            raise ArgumentError("rune.data.Loader: the source holds no arrays")
        for path, leaf in zip(paths, leaves):
            if not _is_array(leaf) or len(leaf.shape) == 0:
                raise ArgumentError(
                    f"rune.data.Loader: source{path} is {type(leaf).__name__} "
                    f"{getattr(leaf, 'shape', '')}, expected an array with a leading axis of examples (a "
                    f"tuple, dict or pytree of arrays is read as columns; pass a list for a sequence of examples)")
        lengths = {path: leaf.shape[0] for path, leaf in zip(paths, leaves)}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"source{p or ''}: {n}" for p, n in lengths.items())
            raise ShapeError(f"rune.data.Loader: the arrays of the source must have the same number of "
                             f"examples (leading axis), got {shown}")
        self.leaves, self.n = leaves, leaves[0].shape[0]

    def gather(self, indices, stop):
        del stop  # one gather per column: nothing to stop between
        return tree.unflatten(self.structure, [_rows(leaf, indices) for leaf in self.leaves])


def _rows(leaf, indices):
    if isinstance(leaf, np.ndarray):
        return np.take(leaf, indices, axis=0)
    if isinstance(leaf, Array):   # gathered where it lives: no round trip through the host
        return nx.take(leaf, nx.asarray(indices, device=leaf.device), axis=0)
    # an array-like (h5py, zarr): its own indexing, which h5py allows only with increasing
    # indices, so it reads each row once in order and NumPy puts them in the batch's order
    ordered, inverse = np.unique(np.asarray(indices), return_inverse=True)
    return np.asarray(leaf[ordered])[inverse.reshape(-1)]


class _Examples:
    """A sequence of examples (`len` and `[i]`): a batch stacks examples leaf by leaf."""
    indexable = True

    def __init__(self, source):
        self.source, self.n = source, len(source)

    def gather(self, indices, stop):
        examples = []
        for i in indices:
            if stop.is_set():
                return None
            i = int(i)
            try:
                examples.append(self.source[i])
            except Exception as e:
                add_note(e, f"(raised by the source of rune.data.Loader while reading example {i})")
                raise
        return _stack(examples, [int(i) for i in indices])


class _Stream:
    """An iterable of examples, read in order; every epoch iterates it anew."""
    indexable = False

    def __init__(self, source):
        self.source = source


def _stack(examples, where):
    """One batch from examples (pytrees of one structure): each leaf stacked along a new axis 0.
    `where[k]` names example k in errors."""
    flat = [tree.flatten(example) for example in examples]
    structure = flat[0][1]
    for k, (_, other) in enumerate(flat):
        if other != structure:
            raise TreeError(f"rune.data.Loader: example {where[k]} has the structure {other}, but example "
                            f"{where[0]} has {structure}; every example must have the same structure")
    columns = []
    paths = [p for p, _ in tree.flatten_with_paths(examples[0])[0]]
    for j, column in enumerate(zip(*(leaves for leaves, _ in flat))):
        shapes = sorted({str(np.shape(v)) for v in column})
        if len(shapes) > 1:
            raise ShapeError(f"rune.data.Loader: the leaf example{paths[j]} must have one shape in every example "
                             f"of a batch, got shapes {', '.join(shapes)} among examples {where}")
        try:
            if all(isinstance(v, (np.ndarray, np.generic)) for v in column):
                columns.append(np.stack(column))
            else:  # Python scalars take rune's dtypes (float32, int32), as nx.asarray gives them
                columns.append(np.asarray(nx.asarray(list(column), device="cpu")))
        except Exception as e:   # not a shape mismatch (those are refused above): a dtype, an overflow
            add_note(e, f"(raised by rune.data.Loader while stacking the leaf example{paths[j]} of examples {where})")
            raise
    return tree.unflatten(structure, columns)


def _source(source):
    if isinstance(source, Loader):
        raise ArgumentError("rune.data.Loader: the source is itself a Loader; pass its data set")
    if _is_array(source):
        return _Columns(source)
    if isinstance(source, list):
        return _Examples(source)
    if tree.structure(source) != tree.structure(0):   # a tuple, dict or registered pytree node
        return _Columns(source)
    if hasattr(source, "__len__") and hasattr(source, "__getitem__"):
        return _Examples(source)
    if hasattr(source, "__iter__"):
        return _Stream(source)
    raise ArgumentError(f"rune.data.Loader: expected arrays, a pytree of arrays, a sequence of examples "
                        f"(len and [i]) or an iterable of examples, got {type(source).__name__}")


# ---------------------------------------------------------------- placement

def _host_dtype(leaf):
    """A host batch leaf in a dtype rune holds (NumPy keeps its dtype, as nx.asarray does)."""
    return leaf if leaf.dtype in dt.ALL else np.asarray(nx.asarray(leaf, device="cpu"))


class _Placer:
    """Host batches onto a device with `nx.place`; nothing to wait for."""

    def __init__(self, device):
        self.device = device

    def __call__(self, batch):
        return tree.map(lambda leaf: nx.place(leaf, self.device), batch), None

    def wait(self, ready):
        del ready

    def settle(self):
        pass


class _Uploading:
    """Host batches onto a device through its backend's `Uploader` (on a GPU: pinned
    host memory and an asynchronous copy on a side stream, rune/backends/cuda/upload.py),
    so the copy of a batch overlaps the step computing on the last. Made in the
    consumer's thread, where the uploader's waits must happen."""

    def __init__(self, device, uploader):
        self.device, self.uploader = device, uploader

    def __call__(self, batch):
        leaves, structure = tree.flatten(batch)
        placed, uploads = [], []
        for leaf in leaves:
            if isinstance(leaf, Array) or leaf.dtype.kind not in "biufc" or leaf.nbytes == 0:
                placed.append(nx.place(leaf, self.device))   # not a plain NumPy buffer: rune's own copy
            else:
                uploads.append(np.ascontiguousarray(_host_dtype(leaf)))
                placed.append(None)
        raws, done = self.uploader.upload(uploads)
        raws = iter(raws)
        placed = [Array(next(raws), self.device) if p is None else p for p in placed]
        return tree.unflatten(structure, placed), done

    def wait(self, ready):
        self.uploader.wait(ready)

    def settle(self):
        self.uploader.settle()


def _placer_for(device):
    uploader = backend_for(device).uploader(device)
    return _Placer(device) if uploader is None else _Uploading(device, uploader)


# ---------------------------------------------------------------- worker processes

WORKER_JOIN_S = 1.0   # how long shutting workers down waits for each before terminating it


class _NeverStop:
    """The `stop` a worker's gather gets: a worker is stopped by its task queue."""

    @staticmethod
    def is_set():
        return False


def _worker_main(source, tasks, results, worker):
    """A worker process: batches of `source` for the (step, indices) its task queue
    gives, until None; an error goes back with the worker's traceback as text."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the main process's to handle
    results.cancel_join_thread()   # exiting never waits on results the main process dropped
    while True:
        task = tasks.get()
        if task is None:
            return
        step, indices = task
        try:
            results.put((step, "batch", source.gather(indices, _NeverStop)))
        except BaseException as e:
            results.put((step, "error", _portable_error(e, worker)))


def _portable_error(error, worker):
    """(the error itself if it pickles, else None; its type's name; its message; the
    worker's traceback as text)."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        pickle.loads(pickle.dumps(error))
        sent = error
    except Exception:
        sent = None
    return sent, type(error).__name__, str(error), f"(in worker process {worker} of rune.data.Loader)\n{text}"


def _raised_in_worker(payload):
    """The error a worker sent, to raise in the main process: itself where it pickled
    (else a RuneError naming its type), the worker's traceback as a note."""
    error, name, message, text = payload
    if error is None:
        error = RuneError(f"rune.data.Loader: a worker raised {name}: {message} (the error itself could not "
                          f"be sent to the main process; the worker's traceback follows)")
    add_note(error, text.rstrip())
    return error


def _start_method():
    # fork: the workers inherit the data set as it is (nothing to pickle, as PyTorch on
    # Linux); rune's kernels in a forked child run on one thread (rune/backends/cpu/threads.py).
    # Elsewhere spawn, which pickles the data set.
    return "fork" if sys.platform.startswith("linux") else "spawn"


class _Workers:
    """`n` processes making the batches of a sequence source, handed out in turn
    (batch k to worker k mod n), delivered in order, at most `ahead` in flight."""

    def __init__(self, source, n, ahead):
        context = multiprocessing.get_context(_start_method())
        self.ahead, self.closed = ahead, False
        self.results = context.Queue()
        self.tasks = [context.Queue() for _ in range(n)]
        self.processes = [context.Process(target=_worker_main, args=(source, q, self.results, w), daemon=True,
                                          name=f"rune.data.Loader worker {w}")
                          for w, q in enumerate(self.tasks)]
        with warnings.catch_warnings():   # (Python 3.12+: forking a process with threads; ours are ready for it)
            warnings.filterwarnings("ignore", ".*fork.*", DeprecationWarning)
            for process in self.processes:
                process.start()

    def batches(self, jobs, stop):
        """(step, batch) for each (step, indices) of `jobs`, in order; stops early when
        `stop` is set."""
        jobs = list(jobs)
        made, sent = {}, 0
        for k, (step, _) in enumerate(jobs):
            while sent < len(jobs) and sent - k < self.ahead:
                self.tasks[sent % len(self.tasks)].put((sent, jobs[sent][1]))
                sent += 1
            while k not in made:
                got = self._next(stop)
                if got is None:
                    return
                j, kind, payload = got
                made[j] = kind, payload
            kind, payload = made.pop(k)
            if kind == "error":   # raised at its batch: every batch before it is delivered first
                raise _raised_in_worker(payload)
            yield step, payload

    def _next(self, stop):
        while not stop.is_set():
            try:
                return self.results.get(timeout=_POLL_S)
            except queue.Empty:
                dead = [p for p in self.processes if not p.is_alive()]
                if dead:
                    raise RuneError(f"rune.data.Loader: worker process {dead[0].name} ended (exit code "
                                    f"{dead[0].exitcode}) before making its batch")
        return None

    def shutdown(self):
        """Tell every worker to stop, terminate those still busy after WORKER_JOIN_S
        (idempotent; never waits on a worker stuck in the source)."""
        if self.closed:
            return
        self.closed = True
        for q in self.tasks:
            q.cancel_join_thread()
            q.put(None)
        for process in self.processes:
            process.join(WORKER_JOIN_S)
            if process.is_alive():
                process.terminate()
                process.join(WORKER_JOIN_S)
        for q in self.tasks + [self.results]:
            q.cancel_join_thread()
            q.close()


# ---------------------------------------------------------------- the background thread

class _Producer:
    """Runs `work` (an iterator of items) on a thread, `depth` items ahead of the consumer.

    Holds no reference to the consumer's iterator, so dropping that iterator
    finalizes it, which stops this thread.
    """

    def __init__(self, work, depth, stop):
        self.queue, self.stop = queue.Queue(depth), stop
        self.thread = threading.Thread(target=self._run, args=(work,), name=_THREAD_NAME, daemon=True)
        self.thread.start()

    def _run(self, work):
        try:
            for item in work:
                if not self._put(("batch", item)):
                    return
            self._put(("end", None))
        except BaseException as e:   # everything reaches the consumer, with its traceback
            self._put(("error", e))
        finally:
            work.close()

    def _put(self, item):
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                pass
        return False

    def get(self):
        while True:
            try:
                return self.queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self.thread.is_alive() and self.queue.empty():
                    return "error", RuneError("rune.data.Loader: the background thread ended without a batch "
                                              "or an error (it was stopped)")


def _stop(producer, placer, workers=None):
    producer.stop.set()
    if threading.current_thread() is producer.thread:   # a garbage collection run by the thread itself
        return
    producer.thread.join(JOIN_TIMEOUT_S)
    if producer.thread.is_alive():
        warnings.warn(f"rune.data.Loader: the background thread is still inside the source after "
                      f"{JOIN_TIMEOUT_S:.0f} s; it ends when that call returns", RuneWarning, stacklevel=2)
    placer.settle()   # (the thread settled on its way out; this is for one still in the source)
    while not producer.queue.empty():   # drop the batches made ahead: their memory goes now
        producer.queue.get_nowait()
    _shut(workers)


def _shut(workers):
    if workers is not None:
        workers.shutdown()


def _close_work(work, workers):
    work.close()
    _shut(workers)


class Batches:
    """An iterator over one epoch's batches from some step on (made by `Loader.epoch`).

    Its thread stops when it is exhausted, closed (`close()`, or leaving a `with`
    block) or dropped; an error of the source is raised at the next batch.
    """

    def __init__(self, loader, epoch, start, device):
        self._loader, self.epoch = loader, epoch
        self._placer = _placer_for(device)
        stop = threading.Event()
        # worker processes start here, in the consumer's thread, before the background thread
        workers = _Workers(loader._source, loader.workers, 2 * loader.workers) if loader.workers else None
        work = loader._placed(epoch, start, self._placer, stop, workers)
        self._done = False
        if loader.prefetch:
            self._producer = _Producer(work, loader.prefetch, stop)
            self._close = weakref.finalize(self, _stop, self._producer, self._placer, workers)
        else:
            self._producer, self._work = None, work
            self._close = weakref.finalize(self, _close_work, work, workers)

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._producer is None:
            try:
                kind, item = "batch", next(self._work)
            except StopIteration:
                kind, item = "end", None
            except BaseException:
                self.close()
                raise
        else:
            kind, item = self._producer.get()
        if kind == "error":
            self.close()
            raise item
        if kind == "end":
            self.close()
            self._loader._finished(self.epoch)
            raise StopIteration
        step, batch, ready = item
        self._placer.wait(ready)
        self._loader._delivered(self.epoch, step)
        return batch

    def close(self):
        """Stop the thread and drop the batches made ahead (idempotent)."""
        self._done = True
        self._close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ---------------------------------------------------------------- the loader

class Loader:
    """Batches of a data set, shuffled by key, split among ranks, prefetched and placed on a device.

    source: arrays with a common leading axis of examples (or a tuple, dict or pytree
        of them), a sequence of examples (`len` and `[i]`), or an iterable of examples
        (see the module's docstring for how each is told apart).
    batch_size: examples per batch on this rank (each rank makes batches of this size).
    key: an `nx.random` key; epoch e is shuffled by `fold_in(key, e)`.
    shuffle: whether to shuffle (default: when a key is given); True needs a key.
    drop_last: drop each epoch's last, partial batch (keeps one compiled shape).
    device: where batches are placed (default: the default device when iteration starts).
    prefetch: how many batches the background thread makes ahead; 0 makes them in the
        consumer's thread when asked.
    shard: "auto" splits every epoch among the ranks of `rune.distributed` (a run of one
        process takes all), None gives every rank everything, (rank, size) names a split.
    workers: processes that read a sequence source's examples (`source[i]`, Python work:
        decoding, augmenting) and stack its batches, 2 x workers batches ahead; 0 (the
        default) reads them in the background thread. The batches and their order are
        those of workers=0. Workers are forked on Linux (the data set is inherited as it
        is), spawned elsewhere (it must pickle); a data set that draws random numbers
        should draw them from the index (workers share the parent's generator state). An
        error in a worker is raised at the batch it was making, with the worker's traceback
        as a note. They stop with the epoch (its end, `close()`, dropping it).

    `for batch in loader` runs the epoch and step where the loader stands (`state()`);
    `loader.epoch(e, start=s)` runs epoch e from step s.
    """

    def __init__(self, source, batch_size, *, key=None, shuffle=None, drop_last=False, device=None,
                 prefetch=2, shard="auto", workers=0):
        self._source = _source(source)
        self.batch_size = _count(batch_size, "batch_size", 1)
        self.prefetch = _count(prefetch, "prefetch")
        self.workers = _count(workers, "workers")
        if self.workers and not isinstance(self._source, _Examples):
            what = ("arrays, whose batches are gathered by one indexing each" if self._source.indexable else
                    "an iterable of examples, which is read in order by one reader")
            raise ArgumentError(f"rune.data.Loader: workers={self.workers} runs a data set's __getitem__ in "
                                f"worker processes, but the source is {what}; pass workers=0, or a sequence "
                                f"of examples (len and [i])")
        self.drop_last = bool(drop_last)
        self.shuffle = key is not None if shuffle is None else bool(shuffle)
        if self.shuffle and key is None:
            raise ArgumentError("rune.data.Loader: shuffle=True needs a key (key=nx.random.key(seed)); "
                                "epoch e is shuffled by nx.random.fold_in(key, e)")
        if self.shuffle and not self._source.indexable:
            raise ArgumentError(f"rune.data.Loader: an iterable of examples "
                                f"({type(self._source.source).__name__}) is read in order and cannot be "
                                f"shuffled; pass shuffle=False (or no key), or a sequence with len and [i]")
        self._key = None
        if key is not None:
            key = nx.asarray(key)
            if key.shape != (2,) or key.dtype != nx.uint32:
                raise ArgumentError(f"rune.data.Loader: key must be an nx.random key (uint32, shape (2,)), "
                                    f"got {key.dtype} {key.shape}")
            self._key = nx.place(key, "cpu")   # orders are drawn on the host
        self.device = None if device is None else get_device(device)
        self.rank, self.size = _split(shard)
        self._position = (0, 0)
        self._order = None   # (epoch, this rank's indices): the last one drawn
        self._lock = threading.Lock()

    # -- what an epoch holds

    def __len__(self):
        """Batches per epoch on this rank (a source that is an iterable has no length)."""
        if not self._source.indexable:
            raise UsageError("rune.data.Loader: an iterable of examples has no length; "
                             "pass a sequence (len and [i]) to know the batches per epoch")
        per = self._source.n // self.size
        return per // self.batch_size if self.drop_last else -(-per // self.batch_size)

    def indices(self, epoch):
        """This rank's example indices for `epoch`, in the order its batches take them.

        epoch: a non-negative int; the order is the same on every run and machine.
        """
        epoch = _count(epoch, "epoch")
        if not self._source.indexable:
            raise UsageError("rune.data.Loader: an iterable of examples is read in order; it has no indices")
        with self._lock:
            if self._order is not None and self._order[0] == epoch:
                return self._order[1]
        n = self._source.n
        if self.shuffle and n:
            order = np.asarray(nx.random.permutation(nx.random.fold_in(self._key, epoch), n))
        else:
            order = np.arange(n)
        mine = rank_share(order, self.rank, self.size)
        with self._lock:
            self._order = (epoch, mine)
        return mine

    # -- iteration

    def epoch(self, epoch, start=0):
        """An iterator (`Batches`) over `epoch`'s batches from step `start` on.

        epoch: a non-negative int. start: the first step (batch index in the epoch), to
        resume where a run stopped; 0 by default.
        """
        epoch, start = _count(epoch, "epoch"), _count(start, "start")
        if self._source.indexable and start > len(self):
            raise ArgumentError(f"rune.data.Loader: start={start} is past the end of an epoch of "
                                f"{len(self)} batches")
        device = self.device if self.device is not None else current_default()
        return Batches(self, epoch, start, device)

    def __iter__(self):
        return self.epoch(*self._position)

    def state(self):
        """Where the loader stands: {"epoch": e, "step": s}, the next batch to deliver.

        A dict of ints, to save with `rune.save` beside the parameters and give back
        to `restore` (then `for batch in loader` goes on from there).
        """
        epoch, step = self._position
        return {"epoch": epoch, "step": step}

    def restore(self, state):
        """Go back to a position that `state()` returned: the next iteration starts there.

        state: {"epoch": e, "step": s} (ints, or 0-d arrays as `rune.load` may give).
        """
        if not isinstance(state, dict) or set(state) != {"epoch", "step"}:
            raise ArgumentError(f"rune.data.Loader.restore: expected {{'epoch': e, 'step': s}} as state() "
                                f"returns, got {state!r}")
        epoch, step = (_count(_as_int(state[k]), k) for k in ("epoch", "step"))
        if self._source.indexable and step > len(self):
            raise ArgumentError(f"rune.data.Loader.restore: step {step} is past the end of an epoch of "
                                f"{len(self)} batches")
        self._position = (epoch, step)

    def _delivered(self, epoch, step):
        last = self._source.indexable and step + 1 == len(self)
        self._position = (epoch + 1, 0) if last else (epoch, step + 1)

    def _finished(self, epoch):
        if self._position[0] == epoch:
            self._position = (epoch + 1, 0)

    # -- what the background thread runs

    def _placed(self, epoch, start, placer, stop, workers=None):
        """(step, placed batch, copy event) for each batch of `epoch` from `start`. However
        it ends (the last batch, a close, an error), it first waits for the copies it
        queued: a batch made ahead and dropped gives its device memory back then."""
        try:
            for step, batch in self._host_batches(epoch, start, stop, workers):
                if stop.is_set():
                    return
                yield (step,) + placer(batch)
        finally:
            placer.settle()
            _shut(workers)

    def _host_batches(self, epoch, start, stop, workers=None):
        if not self._source.indexable:
            yield from self._stream_batches(epoch, start, stop)
            return
        mine, size = self.indices(epoch), self.batch_size
        if workers is not None:
            jobs = ((step, mine[step * size:(step + 1) * size]) for step in range(start, len(self)))
            try:
                yield from workers.batches(jobs, stop)
            except Exception as e:
                add_note(e, f"(making a batch of epoch {epoch} in a worker process of rune.data.Loader)")
                raise
            return
        for step in range(start, len(self)):
            rows = mine[step * size:(step + 1) * size]
            try:
                batch = self._source.gather(rows, stop)
            except Exception as e:
                add_note(e, f"(making batch {step} of epoch {epoch} in the background thread of rune.data.Loader)")
                raise
            if batch is None:   # told to stop midway
                return
            yield step, batch

    def _stream_batches(self, epoch, start, stop):
        # Every rank reads the whole stream in groups of size * batch_size examples and takes
        # its equal part of each, so all ranks make the same number of batches.
        examples = _Counted(self._source.source)
        for step in itertools.count():
            group = list(itertools.islice(examples, self.size * self.batch_size))
            per = len(group) // self.size
            if per == 0 or (per < self.batch_size and self.drop_last) or stop.is_set():
                return
            if step >= start:
                first = examples.read - len(group) + self.rank * per
                try:
                    yield step, _stack(rank_share(group, self.rank, self.size), list(range(first, first + per)))
                except Exception as e:
                    add_note(e, f"(making batch {step} of epoch {epoch} in the background thread of "
                             f"rune.data.Loader)")
                    raise
            if per < self.batch_size:
                return


class _Counted:
    """An iterator over `source` that counts the examples read, to name them in errors."""

    def __init__(self, source):
        self.iterator, self.read = iter(source), 0

    def __iter__(self):
        return self

    def __next__(self):
        try:
            example = next(self.iterator)
        except StopIteration:
            raise
        except Exception as e:
            add_note(e, f"(raised by the iterable of rune.data.Loader while reading example {self.read})")
            raise
        self.read += 1
        return example


def _as_int(value):
    """An integer 0-d array (as a loaded checkpoint may hold) as an int; anything else unchanged."""
    if isinstance(value, (Array, np.ndarray, np.generic)) and np.ndim(value) == 0 \
            and np.asarray(value).dtype.kind in "iu":
        return int(value)
    return value


def _split(shard):
    """(rank, size) of the split `shard` asks for."""
    if shard is None:
        return 0, 1
    if isinstance(shard, str) and shard == "auto":
        return distributed.rank(), distributed.size()
    if (isinstance(shard, tuple) and len(shard) == 2 and all(isinstance(v, (int, np.integer))
                                                            and not isinstance(v, bool) for v in shard)
            and 0 <= shard[0] < shard[1]):
        return int(shard[0]), int(shard[1])
    raise ArgumentError(f"rune.data.Loader: shard must be 'auto', None or (rank, size) with "
                        f"0 <= rank < size, got {shard!r}")

