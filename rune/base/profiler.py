"""`rune.profile()`: where a program's time goes, step by step.

    with rune.profile() as prof:
        for _ in range(10):
            params, loss = step(params, batch)
    print(prof.table())            # the steps that took longest, summed by step
    prof.export("trace.json")      # Chrome trace events: open in Perfetto or chrome://tracing

While a profile is open, every step a jitted plan runs (a compiled kernel
stretch, a library call such as a matmul, a NumPy stretch, a host callback, a
loop or a branch with the steps of its body nested inside), every compile of
kernels and every copy between devices is recorded with its wall time, the
bytes it wrote and its device; a step names itself through the plan step
protocol (its `profile_kind` and the first line of its `describe()`,
rune/compiler/plan.py). Nothing is recorded, and nothing costs more than
one check per plan run, when no profile is open.

Times are wall-clock times on the host. A GPU step's time is the time to queue
it unless something waits for the GPU inside it; `synchronize=True` makes
each recorded step wait for its device, so that GPU kernels show their own time
(at the cost of the overlap that queueing gives).
"""
import collections
import json
import os
import threading
import time

from . import contexts

_OPEN = []            # the open profiles, innermost last
_LOCK = threading.Lock()


class Event:
    """One recorded step: what ran, for how long, what it wrote, where."""
    __slots__ = ("kind", "name", "start", "seconds", "bytes", "device", "thread", "depth")

    def __init__(self, kind, name, start, seconds, nbytes, device, thread, depth):
        self.kind, self.name, self.start, self.seconds = kind, name, start, seconds
        self.bytes, self.device, self.thread, self.depth = nbytes, device, thread, depth

    def __repr__(self):
        return (f"Event({self.kind}, {self.name!r}, {self.seconds * 1e6:.1f} us, {self.bytes} B, "
                f"{self.device})")


class Profile:
    """The events recorded while it is open (`rune.profile()`).

    Its clock starts when it is first entered: an event's `start` is seconds
    since then. Entered again after it closed, it goes on recording on the same
    clock (its earlier events keep their times); entered again while open (a
    `with prof:` inside another), the inner block changes nothing and every step
    is still recorded once."""

    def __init__(self, synchronize=False):
        self.synchronize = synchronize
        self.events = []
        self._origin = None
        self._entered = 0                 # open blocks of this profile (nested `with`s)
        self._local = threading.local()   # nesting depth per thread

    def __enter__(self):
        with _LOCK:
            if self._origin is None:
                self._origin = time.perf_counter()
            self._entered += 1
            first = self._entered == 1
            if first:
                _OPEN.append(self)
        if first:
            contexts.opened()
        return self

    def __exit__(self, *exc):
        with _LOCK:
            self._entered -= 1
            last = self._entered == 0
            if last:
                _OPEN.remove(self)
        if last:
            contexts.closed()
        return False

    # -- recording (called by the plan runner, the compilers and transfers)

    def _enter(self):
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        return depth

    def _leave(self, depth):
        self._local.depth = depth

    def _add(self, kind, name, start, seconds, nbytes, device, depth):
        event = Event(kind, name, start - self._origin, seconds, nbytes, device, threading.get_ident(), depth)
        with _LOCK:
            self.events.append(event)

    # -- reading

    def summary(self):
        """[(kind, name, calls, total seconds, bytes)] summed over events of the same
        kind and name, longest total first. A step's time includes the steps nested
        in it (a loop's body), which also have rows of their own; a step nested in
        one of its own kind and name (a loop in a loop of the same description)
        adds its call and bytes but not its time, which the outer one holds already,
        so no total exceeds the time the profile saw."""
        rows = collections.OrderedDict()
        for e, counted in _outermost_of_their_row(self.events):
            row = rows.setdefault((e.kind, e.name), [0, 0.0, 0])
            row[0] += 1
            row[1] += e.seconds if counted else 0.0
            row[2] += e.bytes
        return sorted(((k, n, c, s, b) for (k, n), (c, s, b) in rows.items()), key=lambda r: -r[3])

    def table(self, top=15):
        """The `top` steps by total time, as text: kind, calls, total and mean time,
        share of the outermost steps' time, bytes written, and what the step is."""
        rows = self.summary()
        outer = sum(e.seconds for e in self.events if e.depth == 0) or 1.0
        lines = [f"{'kind':10s} {'calls':>6s} {'total ms':>9s} {'mean us':>9s} {'share':>6s} {'MB':>8s}  step",
                 "-" * 78]
        for kind, name, calls, seconds, nbytes in rows[:top]:
            lines.append(f"{kind:10s} {calls:6d} {seconds * 1e3:9.3f} {seconds / calls * 1e6:9.1f} "
                         f"{100 * seconds / outer:5.1f}% {nbytes / 1e6:8.3f}  {name}")
        if len(rows) > top:
            lines.append(f"... {len(rows) - top} more")
        lines.append(f"{len(self.events)} events, {outer * 1e3:.3f} ms in outermost steps")
        return "\n".join(lines)

    def __str__(self):
        return self.table()

    def trace_events(self):
        """The events in Chrome's trace event format (complete events, microseconds)."""
        pid = os.getpid()
        return [{"name": e.name, "cat": e.kind, "ph": "X", "ts": e.start * 1e6, "dur": e.seconds * 1e6,
                 "pid": pid, "tid": e.thread, "args": {"bytes": e.bytes, "device": e.device}}
                for e in self.events]

    def export(self, path):
        """Write a Chrome trace event file (opens in Perfetto or chrome://tracing)."""
        with open(path, "w") as f:
            json.dump({"traceEvents": self.trace_events(), "displayTimeUnit": "ms"}, f)
        return path


def _outermost_of_their_row(events):
    """(event, whether no event of the same kind and name encloses it), for each
    event in order. Within a thread a step's nested steps start after it and are
    deeper: a sweep by (start, depth) keeps the chain of steps enclosing each one."""
    counted = {}
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e.thread].append(e)
    for thread_events in by_thread.values():
        chain, open_rows = [], collections.Counter()   # the enclosing steps, and their rows
        for e in sorted(thread_events, key=lambda e: (e.start, e.depth)):
            while chain and chain[-1].depth >= e.depth:
                done = chain.pop()
                open_rows[(done.kind, done.name)] -= 1
            key = (e.kind, e.name)
            counted[id(e)] = open_rows[key] == 0
            chain.append(e)
            open_rows[key] += 1
    return [(e, counted[id(e)]) for e in events]


def profile(synchronize=False):
    """A context manager recording every plan step, compile and transfer while open."""
    return Profile(synchronize=synchronize)


def active():
    """Whether any profile is open (the one check a plan run makes)."""
    return bool(_OPEN)


class span:
    """Record the block as one event in every open profile (no cost when none is)."""
    __slots__ = ("kind", "name", "device", "nbytes", "_start", "_depths")

    def __init__(self, kind, name, device=None, nbytes=0):
        self.kind, self.name, self.device, self.nbytes = kind, name, device, nbytes

    def __enter__(self):
        self._depths = [(p, p._enter()) for p in list(_OPEN)]
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        seconds = time.perf_counter() - self._start
        for p, depth in self._depths:
            p._leave(depth)
            p._add(self.kind, self.name, self._start, seconds, self.nbytes, self.device, depth)
        return False


def _nbytes(value):
    return int(getattr(value, "nbytes", 0) or 0)


def run_steps(steps, env, device=None, donated=None):
    """Run a plan's steps recording each: its kind, what it is, its time and the
    bytes of the values it wrote (the env slots it changed). `donated`: the
    buffers given to steps, {id(step): {output slot: buffer}}, as `Plan.run` takes them."""
    profiles = list(_OPEN)
    sync = any(p.synchronize for p in profiles)
    for step in steps:
        given = donated.get(id(step)) if donated else None
        before = list(env)
        depths = [(p, p._enter()) for p in profiles]
        start = time.perf_counter()
        try:
            if given is None:
                step.run(env)
            else:
                step.run(env, given)
            if sync:
                _settle(env)
        finally:
            seconds = time.perf_counter() - start
            for p, depth in depths:
                p._leave(depth)
        written = [v for v, old in zip(env, before) if v is not old]
        nbytes = sum(_nbytes(v) for v in written)
        name = step_name(step)
        where = device or _where(written)
        for p, depth in depths:
            p._add(step.profile_kind, name, start, seconds, nbytes, where, depth)


def _where(values):
    """The device of the values a step wrote: a GPU's for CuPy arrays, else the host."""
    for v in values:
        if type(v).__module__.startswith("cupy"):
            return f"cuda:{v.device.id}"
    return "cpu"


def _settle(env):
    """Wait for every GPU holding a value of the plan (a step may write on several)."""
    waited = set()
    for v in env:
        if type(v).__module__.startswith("cupy") and v.device.id not in waited:
            waited.add(v.device.id)
            v.device.synchronize()


def step_name(step):
    """The first line of the step's own description, short."""
    try:
        text = step.describe()
    except Exception:  # a description is a courtesy: the step's class names it otherwise
        text = type(step).__name__
    first = str(text).splitlines()[0] if text else type(step).__name__
    return first if len(first) <= 100 else first[:97] + "..."
