"""Bytes of live rune arrays per device: `rune.memory_stats()`, as PyTorch's
`torch.cuda.memory_allocated` / `max_memory_allocated`.

Counting starts at the first call of `memory_stats` or `reset_peak_memory` (until
then it costs nothing): the Arrays alive at that moment are counted once, then
every Array counts its buffer's bytes when made and takes them off when it goes
(rune/core/array.py installs the counting `__init__` and `__del__`; a donated
Array's bytes come off when the call takes its buffer, rune/compiler/donation.py).

"Live" means held by a rune Array: the intermediates a jitted plan keeps to itself
(buffers reused by liveness) are not Arrays and are not counted; what a step
returns, and what the caller still holds, is. An Array that views another's
buffer (a basic slice on the host, a leaf of a collective's packed result)
counts its own bytes.

Keys are device names ("cpu:0", "cuda:1"): a str hashes in C, and this layer
knows nothing of devices.
"""
import threading

_current = {}   # device name -> bytes held by live Arrays now
_peak = {}      # device name -> the most `_current` reached since the last reset
_starters = []  # functions that start counting and return the live Arrays' [(device name, bytes)]
counting = False
_lock = threading.Lock()


def on_start(starter):
    """Register `starter` (rune/core/array.py): called once, when counting starts."""
    _starters.append(starter)


# Arrays are made and dropped on several threads (a data loader's, the garbage
# collector's); each count is a read and a write, so it is taken under a lock,
# reentrant because an Array's end may run (garbage collection) inside a count.
_counts_lock = threading.RLock()


def allocated(name, nbytes):
    """An Array on device `name` took a buffer of `nbytes`."""
    with _counts_lock:
        now = _current.get(name, 0) + nbytes
        _current[name] = now
        if now > _peak.get(name, 0):
            _peak[name] = now


def freed(name, nbytes):
    """An Array on device `name` let go of a buffer of `nbytes` (ignored before counting starts)."""
    if counting:
        with _counts_lock:
            _current[name] = _current.get(name, 0) - nbytes


def _start():
    global counting
    with _lock:
        if counting:
            return
        live = [entry for start in _starters for entry in start()]
        counting = True
        for name, nbytes in live:
            allocated(name, nbytes)


def memory_stats(device=None):
    """{"current": bytes, "peak": bytes} of live rune Arrays on `device` (a Device or
    its name: "cpu:0"; "cpu" and "cuda" mean index 0), or {device name: that dict}
    for every device that has held one when `device` is None. The peak is the most
    held at once since the last `reset_peak_memory` (or since counting started: the
    first call of either function)."""
    _start()
    if device is None:
        return {name: _entry(name) for name in sorted(set(_current) | set(_peak))}
    return _entry(_name(device))


def reset_peak_memory(device=None):
    """Start the peak over at what is held now (on `device`, or on every device)."""
    _start()
    for name in (list(_current) if device is None else [_name(device)]):
        _peak[name] = _current.get(name, 0)


def _entry(name):
    return {"current": _current.get(name, 0), "peak": _peak.get(name, 0)}


def _name(device):
    name = getattr(device, "name", device)
    if not isinstance(name, str):
        from ..errors import ArgumentError
        raise ArgumentError(f"memory_stats: device must be a Device or a name such as 'cpu:0', got {device!r}")
    return name if ":" in name else name + ":0"
