"""A training log as JSON lines: `rune.metrics.Logger` writes, `rune.metrics.read` reads.

Each `log(step, **values)` call is one line, `{"step": 12, "loss": 0.31, ...}`,
flushed at once, so a run that crashes keeps every line it logged and another
process (`python -m rune.plot`, `tail -f`, pandas' `read_json(lines=True)`)
can read the file while it grows. A file that exists is appended to: a resumed
run continues its log. A run killed while writing a line leaves it without its
newline; the next Logger ends that line first (a whole record is kept, a torn
fragment, which no reader can parse, is cut off), so its records do not run on
into the fragment.

JSON has no NaN or infinity: a non-finite value (a diverged loss) is written
as `null`, and `read` gives it back as `float("nan")`; the line stays valid
JSON for every reader.
"""
import json
import math
import numbers
import os

import numpy as np

from .core.array import Array
from .errors import ArgumentError

__all__ = ["Logger", "read"]


def _plain(name, value):
    """`value` as a JSON scalar: arrays of one element read out, non-finite floats as None."""
    if isinstance(value, (Array, np.ndarray, np.generic)):
        if np.size(value) != 1:
            raise ArgumentError(f"rune.metrics.Logger.log: {name} must be a scalar, got an array of "
                                f"shape {tuple(np.shape(value))}")
        value = np.asarray(value).reshape(()).item()
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else None
    raise ArgumentError(f"rune.metrics.Logger.log: {name} must be a number, a bool, a string or a "
                        f"one-element array, got {type(value).__name__}")


def _end_last_line(path):
    """Make the log at `path` (if any) end with a newline, as Logger needs to append:
    a last line without one (a killed run) gets it when it is a whole JSON object,
    and is cut off when it is a torn fragment (`read` would refuse it mid-file)."""
    try:
        f = open(path, "r+b")
    except (FileNotFoundError, IsADirectoryError):
        return   # open(path, "a") below creates it, or says why not
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        start = 0   # of the last line: after the last newline, searched backwards in blocks
        end = size
        while end > 0:
            block = max(0, end - 65536)
            f.seek(block)
            cut = f.read(end - block).rfind(b"\n")
            if cut >= 0:
                start = block + cut + 1
                break
            end = block
        f.seek(start)
        try:
            whole = isinstance(json.loads(f.read()), dict)
        except ValueError:   # JSONDecodeError and UnicodeDecodeError
            whole = False
        if whole:
            f.seek(size)
            f.write(b"\n")
        else:
            f.truncate(start)


class Logger:
    """A JSON-lines log of scalars per step, appended to `path` (a context manager).

    path: the file (created if missing, appended to if it exists).
    """

    def __init__(self, path):
        self.path = path
        _end_last_line(path)
        self._file = open(path, "a", encoding="utf-8")

    def log(self, step, **values):
        """Write one line: `step` and every value in `values`, flushed at once.

        step: the training step (an int) the values belong to.
        values: scalars by name (loss=, accuracy=, lr=, ...): Python numbers, bools,
            strings, or one-element NumPy or rune arrays (read out with `.item()`).
        """
        if self._file is None:
            raise ArgumentError(f"rune.metrics.Logger.log: the log {self.path} is closed")
        record = {"step": _plain("step", step)}
        if not isinstance(record["step"], int) or isinstance(record["step"], bool):
            raise ArgumentError(f"rune.metrics.Logger.log: step must be an int, got {step!r}")
        record.update((name, _plain(name, value)) for name, value in values.items())
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        self._file.flush()

    def close(self):
        """Close the file (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read(path):
    """The log at `path` as one list per key, each as long as the file has lines.

    path: a file written by `Logger`. A line that lacks a key has None in that key's
    list; a value logged non-finite (written as null) comes back as float("nan").
    A torn last line (a run killed while writing it) is skipped.
    """
    records = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if number == len(lines):   # no newline after it: the write was cut short
                continue
            raise ArgumentError(f"rune.metrics.read: line {number} of {path} is not JSON: {e}") from None
        if not isinstance(records[-1], dict):
            raise ArgumentError(f"rune.metrics.read: line {number} of {path} is not a JSON object")
    keys = list(dict.fromkeys(key for record in records for key in record))
    return {key: [_value(record, key) for record in records] for key in keys}


def _value(record, key):
    if key not in record:
        return None
    value = record[key]
    return float("nan") if value is None else value
