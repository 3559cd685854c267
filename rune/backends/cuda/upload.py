"""Host batches onto one GPU through pinned host memory and an asynchronous copy on
a side stream (`CudaBackend.uploader`, the `rune.backends.base.Uploader` of a GPU),
so the copy of a batch overlaps the step computing on the last (rune.data.Loader).
Importing this module never imports CuPy: the uploader does, when made.
"""
import collections

import numpy as np

from ...base.stats import COUNTERS
from ..base import Uploader


class PinnedUploader(Uploader):
    """Made in the consumer's thread: the consumer's current stream (where rune runs
    its steps) is the one that must wait for each copy, and the one whose queued
    work each copy waits for (its freed memory may be handed out to the batch)."""

    def __init__(self, device):
        import cupy
        self.cupy, self.device = cupy, device
        with cupy.cuda.Device(device.index):
            self.compute = cupy.cuda.get_current_stream()
            self.side = cupy.cuda.Stream(non_blocking=True)
        # (copy done, the pinned and device buffers it uses): kept until the copy is done,
        # so neither goes back to its pool while the side stream still reads or writes it
        self.in_flight = collections.deque()

    def upload(self, hosts):
        """Device copies of `hosts` (contiguous NumPy arrays), queued on the side stream:
        (the device buffers, the event their copies are done at)."""
        cupy = self.cupy
        with cupy.cuda.Device(self.device.index):
            while self.in_flight and self.in_flight[0][0].done:
                self.in_flight.popleft()
            # Every destination first, from the compute stream's pool (the stream that
            # uses and frees it): it may be memory the consumer freed while kernels it
            # queued still read or write it. The event the side stream waits for is
            # recorded only after the last allocation, so it follows all those kernels.
            with self.compute:
                raws = [cupy.empty(host.shape, host.dtype) for host in hosts]
            queued = cupy.cuda.Event(disable_timing=True)
            queued.record(self.compute)
            self.side.wait_event(queued)
            pinned = []
            for host, raw in zip(hosts, raws):
                memory = cupy.cuda.alloc_pinned_memory(host.nbytes)
                staged = np.frombuffer(memory, host.dtype, host.size).reshape(host.shape)
                staged[...] = host
                raw.set(staged, stream=self.side)
                pinned.append(memory)
                COUNTERS["transfers"] += 1
                COUNTERS["host_to_device"] += 1
                COUNTERS["bytes_moved"] += host.nbytes
            done = cupy.cuda.Event(disable_timing=True)
            done.record(self.side)
            self.in_flight.append((done, pinned, raws))
        return raws, done

    def wait(self, ready):
        """Make the consumer's stream wait for the copy (called in the consumer's thread)."""
        if ready is not None:
            with self.cupy.cuda.Device(self.device.index):
                self.cupy.cuda.get_current_stream().wait_event(ready)

    def settle(self):
        """Wait until every copy queued is done, then let go of its buffers: before the
        batches made ahead are dropped (their device memory goes back to the compute
        stream's pool, which may hand it out while a copy still writes it)."""
        self.side.synchronize()
        self.in_flight.clear()
