"""The one compile pipeline of every platform: rendered units to loaded Programs.

`build(compiler, prelude, units)` takes rendered units `(name, source, kernels)`
and a platform's `Compiler` (rune/backends/base.py; C: rune/backends/cpu/compiler.py,
CUDA: rune/backends/cuda/nvrtc.py) and gives each unit the `Program` holding it:

1. a unit's key is `compiler.key(prelude + source)`; a key this process loaded
   before is served from memory;
2. else from rune's disk cache (rune/backends/disk_cache.py; `RUNE_CACHE_DIR`,
   `RUNE_CACHE=0`), counted in `stats()["disk_cache_hits"]`: an entry whose
   artifact is missing, damaged or lacks the unit's functions is a miss;
3. the rest are compiled, up to `compiler.batch` units to one source (a compiler
   run has a fixed cost whatever it holds), the batches on a pool of threads
   (cc and NVRTC both release the GIL); each run counts in
   `stats()["kernels_compiled"]`. The artifact goes into the cache (written
   atomically) and each unit gets an entry pointing at it. A batch is compiled
   holding the cache's lock for its keys (`disk_cache.compiling`): a process
   that finds another compiling the same batch (MPI ranks on one machine, test
   workers) waits for it, then takes from the cache what it built and compiles
   only the rest.

A batch the compiler rejects is split: the units its log points at are built
alone (each then fails with its own source and messages), the rest together
again; where the log names no line, units are built alone until one fails, and
if the first two both fail so, the toolchain fails whatever it is given and
every unit of the batch gets that message (three runs in all). A unit that does
not build gets its CompileError instead of a Program, so that it fails only
itself.
"""
import concurrent.futures
import os
import threading
import time

from ..base.tuning import MAX_COMPILE_THREADS
from .cpu import threads
from ..errors import CompileError
from ..base.stats import COUNTERS
from . import disk_cache
from .base import Binary, SourceRejected


_LOADED = {}   # unit key -> Program, for this process
_OPENED = {}     # artifact path -> Program: one load per file, whichever units it holds
_COUNT_LOCK = threading.Lock()
_COMPILING = {"seconds": 0.0, "units": 0, "batches": 0}   # wall time of build()'s compiles, this process


def compile_time():
    """{"seconds", "units", "batches"}: the wall time this process spent compiling in
    `build` (batches on threads counted once, as waited for), the units compiled and
    the batches they went in (ci/gpu-check prints it per part)."""
    with _COUNT_LOCK:
        return dict(_COMPILING)


def compile_threads():
    """How many compiler runs go at once: RUNE_NUM_THREADS, by default the usable
    CPUs, at most MAX_COMPILE_THREADS."""
    return max(1, min(threads.num_threads(), MAX_COMPILE_THREADS))


def build(compiler, prelude, units):
    """One Program, or the CompileError of a unit that does not build, for each of
    `units` ([(name, source, kernels)]: its rendered kernels, or their names), in order."""
    keys = [compiler.key(prelude + text) for _, text, _ in units]
    missing = [i for i in range(len(units)) if not _found(compiler, units, keys, i)]
    out = [_LOADED.get(k) for k in keys]
    todo = list({keys[i]: i for i in reversed(missing)}.values())[::-1]   # one build per distinct key
    batches = [todo[j:j + compiler.batch] for j in range(0, len(todo), compiler.batch)]
    failed = {}   # key -> the CompileError of a unit that did not build
    workers = min(len(batches), compile_threads())
    start = time.perf_counter()
    # NVRTC and cc release the GIL and NVRTC takes no process-wide lock (two compiles on
    # two threads are both runnable throughout), so threads overlap as processes would.
    if workers > 1:
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="rune-compile") as pool:
            built = list(pool.map(lambda b: _build_batch(compiler, prelude, units, keys, b, failed), batches))
    else:
        built = [_build_batch(compiler, prelude, units, keys, b, failed) for b in batches]
    if batches:
        with _COUNT_LOCK:
            _COMPILING["seconds"] += time.perf_counter() - start
            _COMPILING["units"] += sum(built)
            _COMPILING["batches"] += sum(1 for n in built if n)
    for i in missing:
        out[i] = _LOADED.get(keys[i]) or failed[keys[i]]
    return out


def cached(compiler, key, symbols):
    """The Program that rune's disk cache holds for `key`, defining `symbols`, or None;
    a hit is counted in `stats()["disk_cache_hits"]`."""
    hit = disk_cache.lookup(key)
    if hit is None:
        return None
    try:
        program = _open(compiler, hit[0], None)
    except OSError:
        return None
    if not all(program.has(s) for s in symbols):
        return None
    with _COUNT_LOCK:
        COUNTERS["disk_cache_hits"] += 1
    return program


def compile_source(compiler, source, names=()):
    """`compiler.compile(source, names)`, counted in `stats()["kernels_compiled"]`
    whether or not it succeeds."""
    try:
        return compiler.compile(source, names)
    finally:
        with _COUNT_LOCK:
            COUNTERS["kernels_compiled"] += 1


def _open(compiler, path, data):
    """The artifact at `path` (or, with no path, `data` alone) loaded, once per file."""
    if path is None:
        return compiler.load(None, data)
    program = _OPENED.get(path)
    if program is None:
        program = _OPENED[path] = compiler.load(path, data)
    return program


def _layout(prelude, texts):
    """The batched source of `texts` after `prelude`, and the first line of each text in it."""
    head = prelude if not prelude or prelude.endswith("\n") else prelude + "\n"
    starts, line = [], head.count("\n") + 1
    for t in texts:
        starts.append(line)
        line += t.count("\n") + 2   # the text and the blank line joining it to the next
    return head + "\n\n".join(texts), starts, line


def _build_batch(compiler, prelude, units, keys, batch, failed):
    """Compile the units `batch` unless another process compiles them at the same time:
    then wait for it and load from the disk cache what it built (looked up again after
    the lock is taken, whoever held it), compiling only what is still missing. The
    number of units compiled here."""
    with disk_cache.compiling([keys[i] for i in batch]):
        rest = [i for i in batch if not _found(compiler, units, keys, i)]
        if rest:
            _compile_batch(compiler, prelude, units, keys, rest, failed)
    return len(rest)


def _found(compiler, units, keys, i):
    """Whether unit i is now loaded, from this process's table or the disk cache."""
    if keys[i] in _LOADED:
        return True
    program = cached(compiler, keys[i], compiler.symbols(units[i]))
    if program is not None:
        _LOADED[keys[i]] = program
    return program is not None


def _compile_batch(compiler, prelude, units, keys, batch, failed):
    """Build the units `batch` (indices into `units`) into one artifact and register its
    Program in _LOADED for each; the error of each unit that does not build goes to
    `failed`."""
    source, starts, end = _layout(prelude, [units[i][1] for i in batch])
    names = tuple(k if isinstance(k, str) else k.name for i in batch for k in units[i][2])
    try:
        data = compile_source(compiler, source, names)
    except SourceRejected as e:
        if len(batch) == 1:
            failed[keys[batch[0]]] = e
        else:
            _isolate(compiler, prelude, units, keys, batch, failed, compiler.blame(e.log), starts, end)
        return
    except CompileError as e:
        for i in batch:
            failed[keys[i]] = e
        return
    what = f"{compiler.name} exited 0 for kernel(s) {', '.join(names)}, but"
    data = data if isinstance(data, Binary) else Binary(data)
    output = data.log.strip() or "(no output)"
    entry = disk_cache.store_library(data, compiler.suffix)
    try:
        program = _open(compiler, None if entry is None else entry[0], data)
    except OSError as e:
        if entry is not None:   # not an artifact at all: keep it out of the cache
            _OPENED.pop(entry[0], None)
            try:
                os.unlink(entry[0])
            except OSError:
                pass
        error = CompileError(f"{what} what it wrote ({len(data)} bytes) does not load: {e}; its output:\n{output}")
        for i in batch:
            failed[keys[i]] = error
        return
    for i in batch:
        symbols = compiler.symbols(units[i])
        absent = [s for s in symbols if not program.has(s)]
        if absent:
            failed[keys[i]] = CompileError(f"{what} what it wrote has no function {absent[0]}; "
                                           f"its output:\n{output}")
            continue
        _LOADED[keys[i]] = program
        if entry is not None:
            disk_cache.store_entry(keys[i], entry[0], entry[1], symbols[0] if symbols else "")


def _isolate(compiler, prelude, units, keys, batch, failed, lines, starts, end):
    """The compiler rejected a batch: build the units its log points at alone (to report
    each with its own source), then the rest together again. Where the log names no line
    of a unit, units are built alone until one fails; if the first two both fail so, the
    compiler fails whatever it is given (a missing library, say) and every unit of the
    batch gets that message, at the cost of three runs."""
    at_fault = {batch[j] for line in lines for j in range(len(batch))
                if starts[j] <= line < (starts[j + 1] if j + 1 < len(batch) else end)}
    if not at_fault:
        for i in batch:
            _compile_batch(compiler, prelude, units, keys, [i], failed)
            if keys[i] in failed:
                at_fault = {i}
                break
        if batch[0] in at_fault:
            _compile_batch(compiler, prelude, units, keys, [batch[1]], failed)
            if keys[batch[1]] in failed:
                alike = CompileError(f"every kernel built with it fails alike; the first:\n{failed[keys[batch[0]]]}")
                for i in batch[2:]:
                    failed[keys[i]] = alike
                return
    for i in at_fault:
        if keys[i] not in failed and keys[i] not in _LOADED:
            _compile_batch(compiler, prelude, units, keys, [i], failed)
    rest = [i for i in batch if keys[i] not in failed and keys[i] not in _LOADED]
    if rest:
        _compile_batch(compiler, prelude, units, keys, rest, failed)
