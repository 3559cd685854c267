"""Input pipelines: a training step fed by `rune.data.Loader` (batches made and placed
on a background thread, ahead of the step) against the same step fed by a plain loop
that gathers and places each batch just before the step.

Two sources: NumPy columns (a batch is a gather of rows) and a data set of examples
read one by one through `__getitem__` (as a PyTorch Dataset), whose batches cost
more host time to make. Both loops see the same batches in the same order; what
differs is whether making the next batch overlaps the step. Below 1x: the
Loader hides part of that time.

Then worker processes: an image-decoding-like data set (each example inflated with
zlib, its rows un-delta-filtered one by one as PNG's Sub filter is, blurred row by row,
flipped by index: Python work that holds the GIL), read by the Loader with workers=2
against workers=0, batches only (no step), a whole epoch each time (the workers'
start, once per epoch, included).
"""
import time
import zlib

import numpy as np

import rune
from rune import nn, nx, optim
from rune.data import Loader

from .common import Row, print_table

EXAMPLES, FEATURES, HIDDEN, CLASSES, BATCH = 4096, 512, 256, 10, 128
REPEAT = 5


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((EXAMPLES, FEATURES)).astype(np.float32), \
        rng.integers(0, CLASSES, EXAMPLES).astype(np.int32)


class _Examples:
    """A data set read one example at a time, as a PyTorch-style Dataset is."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i] * np.float32(1.0 / 255), self.y[i]   # a little per-example work (scaling)


class _Images:
    """IMAGES compressed 64 x 64 x 3 images, decoded and augmented in __getitem__ (about a
    millisecond each, as a small JPEG's decoding): uint8 out, normalised on the device."""

    def __init__(self):
        rng = np.random.default_rng(2)
        pixels = rng.integers(0, 256, (IMAGES, 64, 64 * 3), dtype=np.uint8)
        deltas = np.diff(pixels, axis=1, prepend=np.zeros((IMAGES, 1, 64 * 3), np.uint8))   # the Sub filter
        self.blobs = [zlib.compress(d.tobytes(), 6) for d in deltas]

    def __len__(self):
        return len(self.blobs)

    def __getitem__(self, i):
        rows = np.frombuffer(zlib.decompress(self.blobs[i]), np.uint8).reshape(64, 64 * 3).copy()
        for r in range(1, len(rows)):   # undo the filter row by row, as a decoder does
            rows[r] += rows[r - 1]
        image = rows.reshape(64, 64, 3)
        blurred = image.astype(np.uint16)
        for r in range(1, 63):   # an augmentation written row by row: a vertical 3-tap blur
            blurred[r] = (image[r - 1].astype(np.uint16) + 2 * image[r] + image[r + 1]) // 4
        out = blurred.astype(np.uint8)
        return (out[:, ::-1] if i % 2 else out), np.int32(i % CLASSES)


IMAGES, IMAGE_BATCH = 1024, 32


def _loader_seconds(loader):
    """Seconds per batch of a whole epoch of `loader`, the min over REPEAT epochs."""
    best = float("inf")
    for epoch in range(REPEAT):
        start, count = time.perf_counter(), 0
        for batch in loader.epoch(epoch):
            count += 1
        best = min(best, (time.perf_counter() - start) / count)
    return best


def worker_rows():
    """The image-decoding data set through the Loader with workers=2 and workers=0."""
    images = _Images()
    times = {name: _loader_seconds(Loader(images, IMAGE_BATCH, key=nx.random.key(3), shard=None, workers=w))
             for name, w in (("rune", 2), ("workers=0", 0))}
    return [Row(f"image-decoding data set ({IMAGE_BATCH} x 64x64x3 per batch), Loader workers=2", "per batch",
                times)]


def _train_step():
    optimizer = optim.sgd(1e-2)
    k1, k2 = nx.random.split(nx.random.key(0))
    params = {"w1": nn.glorot_uniform(k1, (FEATURES, HIDDEN)), "w2": nn.glorot_uniform(k2, (HIDDEN, CLASSES))}

    def loss(p, x, y):
        return nx.mean(nn.cross_entropy(nn.relu(x @ p["w1"]) @ p["w2"], y))

    @rune.jit
    def step(p, state, x, y):
        value, grads = rune.value_and_grad(loss)(p, x, y)
        updates, state = optimizer.update(grads, state, p)
        return optim.apply_updates(p, updates), state, value

    return step, params, optimizer.init(params)


def _epoch_seconds(batches_of_epoch):
    """Seconds per step of a whole epoch, the min over REPEAT epochs (after one warm-up)."""
    step, params, state = _train_step()
    best = float("inf")
    for epoch in range(REPEAT + 1):
        start, count = time.perf_counter(), 0
        for x, y in batches_of_epoch(epoch):
            params, state, value = step(params, state, x, y)
            count += 1
        value.item()   # the last step is done
        if epoch:
            best = min(best, (time.perf_counter() - start) / count)
    return best


def _plain_loop(loader, make_batch):
    """The same epochs, each batch made and placed in the loop just before its step."""
    def epoch(e):
        order = loader.indices(e)
        for i in range(0, len(order) - BATCH + 1, BATCH):
            yield rune.tree.map(nx.asarray, make_batch(order[i:i + BATCH]))   # on the default device
    return epoch


def run():
    x, y = _data()
    key = nx.random.key(1)
    rows = []
    examples = _Examples(x, y)
    cases = (
        ("NumPy columns", (x, y), lambda rows_: (x[rows_], y[rows_])),
        ("examples via __getitem__", examples,
         lambda rows_: tuple(np.stack(c) for c in zip(*(examples[int(i)] for i in rows_)))),
    )
    for name, source, make_batch in cases:
        loader = Loader(source, BATCH, key=key, drop_last=True, shard=None, prefetch=2)
        fed = _epoch_seconds(loader.epoch)
        plain = _epoch_seconds(_plain_loop(loader, make_batch))
        rows.append(Row(f"MLP step ({BATCH} x {FEATURES}) fed from {name}", "per step",
                        {"rune": fed, "plain loop": plain}))
    print_table("input pipeline: rune.data.Loader (prefetch 2) vs a plain loop placing each batch before "
                "its step", rows, note="rune/plain loop below 1x: making batches overlaps the step")
    workers = worker_rows()
    print_table("worker processes: rune.data.Loader(workers=2) vs workers=0 (the background thread alone), "
                "batches only", workers, note="rune/workers=0 below 1x: the workers decode in parallel")
    return rows + workers


if __name__ == "__main__":
    run()
