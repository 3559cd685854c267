"""rune's float32 math library (rune/codegen/c_src/rn_math.h) compiled once per machine,
a function at a time, and loaded into the process's global scope.

A C kernel that calls a library function declares it (rune/codegen/c.py: the simd and
const attributes) and calls its SIMD clone by name, as loops call libmvec's
(`_ZGVeN16v_rn_expf`: 16 floats on AVX-512). Each function and its clones are a unit of
the compile pipeline here (`CDialect.math_function`), so cached on disk (keyed by the
library's text, the compiler and the CPU) and built once per machine, instead of
compiled into every unit that calls them; functions wanted together are built in one
compiler run. A kernel's library leaves those names undefined and the loader resolves
them in the global scope, so the functions it calls are loaded there first: the C
compiler's `load` calls `load(compiler, needed(library bytes))` when the loader reports
one missing (a program without transcendental functions never builds any).

One process holds one definition of each name, from the first compiler that loaded it
(RUNE_CC is read once per process).
"""
import re
import threading

from ...errors import CompileError
from ...codegen import mathlib
from .. import pipeline

_NAMES = re.compile(b"|".join(re.escape(fn.encode()) + rb"(?![A-Za-z0-9_])" for fn in mathlib.functions()))
_lock = threading.Lock()
_loaded = set()   # the functions this process has loaded


def names_in(message):
    """Whether a loader's message names one of the library's functions (an undefined
    symbol: `rn_expf`, or a SIMD clone such as `_ZGVeN16v_rn_expf`)."""
    return _NAMES.search(message.encode()) is not None


def needed(library):
    """The library's functions that the bytes of a shared library name (its undefined
    symbols are in its string table), sorted."""
    return sorted({m.decode() for m in _NAMES.findall(library)})


def load(compiler, functions):
    """The library's `functions` built by `compiler` (from the disk cache when there) and
    loaded into the global scope, once per process. Raises a function's CompileError if
    it does not build."""
    with _lock:
        missing = [fn for fn in functions if fn not in _loaded]
        if not missing:
            return
        from ...codegen.c import CDialect
        dialect = CDialect()
        units = [(*dialect.math_function(fn), ()) for fn in missing]
        for fn, program in zip(missing, pipeline.build(compiler.global_scope(), dialect.math_library(), units)):
            if isinstance(program, CompileError):
                raise program
            _loaded.add(fn)
