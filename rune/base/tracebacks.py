"""Tracebacks that show the user's frames: rune's own are taken out of an error
leaving rune's API (as JAX's jax_traceback_filtering), and the user's line of
the code running now is found by the same rule.

A frame is rune's own when its file lies in the rune package or is code rune
wrote at run time (file names "<rune ...>"). RUNE_TRACEBACK=full keeps every
frame (rune/base/config.py).
"""
import linecache
import os
import sys
import types

from . import config

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
NOTE = ("(rune's internal frames were removed from this traceback; set the environment variable "
        "RUNE_TRACEBACK=full to see them)")


def internal(filename):
    """Whether code in `filename` is rune's own."""
    return filename.startswith(_PACKAGE) or filename.startswith("<rune")


def filtered(tb):
    """The traceback `tb` without rune's frames (the user's frames, in order)."""
    kept = []
    while tb is not None:
        if not internal(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def hide_internal_frames(error):
    """Take rune's frames out of `error`'s traceback, in place, unless RUNE_TRACEBACK=full;
    a note on the error says so. Called by an API entry point as the error leaves it,
    whose own frame is then gone too (a bare `raise` adds no frame)."""
    try:
        if error.__traceback__ is None or config.traceback_mode() == "full":
            return
    except Exception:   # a bad RUNE_TRACEBACK must not hide the error being reported
        return
    # (again at each entry point it leaves: a jitted function inside another's trace
    # filters first, and the outer one takes out the frames added since)
    error.with_traceback(filtered(error.__traceback__))
    if sys.version_info < (3, 11):
        _rethrown_as_is(error)
    if NOTE not in getattr(error, "__notes__", ()):
        add_note(error, NOTE)
    seen = {id(error)}
    linked = error.__cause__ or error.__context__
    while linked is not None and id(linked) not in seen:   # the errors it was raised from, shown above it
        seen.add(id(linked))
        linked.with_traceback(filtered(linked.__traceback__))
        linked = linked.__cause__ or linked.__context__


def _rethrown_as_is(error):
    """Make the entry point's bare `raise` re-raise `error` with its (filtered) traceback on
    Python 3.10, where `raise` takes the traceback the interpreter saved for the exception
    being handled, not `error.__traceback__` (3.11 and later read only the exception):
    PyErr_SetExcInfo sets that saved state to the error and its traceback. It takes (steals)
    a reference to each argument, hence the increments."""
    import ctypes
    api = ctypes.pythonapi
    parts = (type(error), error, error.__traceback__)
    for part in parts:
        api.Py_IncRef(ctypes.py_object(part))
    api.PyErr_SetExcInfo.argtypes = [ctypes.py_object] * 3
    api.PyErr_SetExcInfo.restype = None
    api.PyErr_SetExcInfo(*parts)


class Source:
    """Where user code stands: a file, a line, a function, the line's text."""
    __slots__ = ("filename", "lineno", "function")

    def __init__(self, filename, lineno, function):
        self.filename, self.lineno, self.function = filename, lineno, function

    @property
    def text(self):
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self):
        text = self.text
        return f'File "{self.filename}", line {self.lineno}, in {self.function}' + (f"\n    {text}" if text else "")


def user_source(frame=None):
    """The innermost frame of user code on the stack (from `frame`, else the caller's),
    as a Source, or None when every frame is rune's."""
    frame = frame or sys._getframe(1)
    while frame is not None and internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    return Source(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def add_note(error, text):
    """PEP 678's `error.add_note(text)`; on Python 3.10, which has no add_note (and does not
    print notes), the note is still kept in `error.__notes__` for code that reads it."""
    if hasattr(error, "add_note"):
        error.add_note(text)
    else:
        notes = getattr(error, "__notes__", None)
        if not isinstance(notes, list):
            notes = []
            try:
                error.__notes__ = notes
            except AttributeError:   # an error type that takes no attributes: nothing to keep it in
                return
        notes.append(text)
