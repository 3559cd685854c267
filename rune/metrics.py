"""A training log as JSON lines: `rune.metrics.Logger` writes, `rune.metrics.read` reads.

Each `log(step, **values)` call is one line, `{"step": 12, "loss": 0.31, ...}`,
flushed at once, so a run that crashes keeps every line it logged and another
process (`python -m rune.plot`, `tail -f`, pandas' `read_json(lines=True)`)
can read the file while it grows. A file that exists is appended to: a resumed
run continues its log. A run killed while writing a line leaves it without its
newline; the next Logger ends that line first (a whole record is kept, a torn
fragment, which no reader can parse, is cut off), so its records do not run on
into the fragment.

A run resumed from a checkpoint passes `resume_step` (the step count the
checkpoint was saved at): the lines a stopped run logged past it, which the
resumed run trains and logs again, are dropped first, so the log reads as one
run.

JSON has no NaN or infinity: a non-finite value (a diverged loss) is written
as `null`, and `read` gives it back as `float("nan")`; the line stays valid
JSON for every reader.

With `tensorboard=logdir` the same values also go to TensorBoard event files
in that directory, written by tensorboardX (`pip install 'rune[tensorboard]'`):
numbers and bools as scalars, strings as text, and on resume the events past
`resume_step` are purged from TensorBoard's view as the JSON lines are from the
file.
"""
import json
import math
import numbers
import os
import time

import numpy as np

from .core.array import Array
from .errors import ArgumentError

__all__ = ["Logger", "read"]

INSTALL_HINT = "pip install 'rune[tensorboard]' (or pip install tensorboardX)"


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


def _keep_until(path, last_step):
    """Drop the lines of the log at `path` (if any) whose step is past last_step,
    and a torn last line; the file is replaced whole, so a run killed meanwhile
    leaves the old log or the new one, never a part."""
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return
    kept = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:   # JSONDecodeError and UnicodeDecodeError
            if number < len(lines):   # not a torn last line: left for `read` to report
                kept.append(line)
            continue
        step = record.get("step") if isinstance(record, dict) else None
        if not (isinstance(step, int) and step > last_step):
            kept.append(line)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "wb") as f:
        f.write(b"".join(line + b"\n" for line in kept))
    os.replace(temporary, path)


def _board(logdir, resume_step):
    """A tensorboardX SummaryWriter for logdir; on resume it purges the events
    past resume_step (TensorBoard hides them when it reads the new file)."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise ImportError(f"rune.metrics.Logger(tensorboard=...) needs tensorboardX, which is not installed: "
                          f"{INSTALL_HINT}") from None
    # Event files are named by the second they were opened in: two in one second would
    # be one file, truncated by the second. The suffix keeps them apart, in the order
    # TensorBoard must read them (a resumed run's purge comes after what it purges).
    return SummaryWriter(logdir, purge_step=None if resume_step is None else resume_step + 1,
                         filename_suffix=f".{time.time_ns()}")


def _board_write(board, step, values):
    """values (checked by `_plain` already) as TensorBoard scalars, non-finite ones
    included, and texts."""
    for name, value in values.items():
        if isinstance(value, str):
            board.add_text(name, value, step)
        else:
            board.add_scalar(name, float(np.asarray(value).reshape(())), step)


class Logger:
    """A JSON-lines log of scalars per step, appended to `path` (a context manager).

    path: the file (created if missing, appended to if it exists).
    resume_step: for a run resumed from a checkpoint, the step count it was saved
        at: the lines already in the file with a larger step are dropped (a
        stopped run logged them after its last checkpoint; the resumed run logs
        those steps again). 0 starts the log afresh for a run that logs from step
        1. None (the default) keeps every line.
    tensorboard: a directory to write TensorBoard event files to as well
        (through tensorboardX, an optional extra), or None.
    """

    def __init__(self, path, resume_step=None, tensorboard=None):
        if resume_step is not None:
            if not isinstance(resume_step, numbers.Integral) or isinstance(resume_step, bool):
                raise ArgumentError(f"rune.metrics.Logger: resume_step must be an int or None, "
                                    f"got {resume_step!r}")
            resume_step = int(resume_step)
        self.path = path
        self._file = None
        self._board = None if tensorboard is None else _board(tensorboard, resume_step)
        if resume_step is None:
            _end_last_line(path)
        else:
            _keep_until(path, resume_step)
        self._file = open(path, "a", encoding="utf-8")

    def log(self, step, **values):
        """Write one line: `step` and every value in `values`, flushed at once (and
        the same values to TensorBoard, when asked, which flushes its own file).

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
        if self._board is not None:
            _board_write(self._board, record["step"], values)

    def close(self):
        """Close the file and the TensorBoard writer (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._board is not None:
            self._board.close()
            self._board = None

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
