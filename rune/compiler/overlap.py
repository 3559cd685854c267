"""Communication overlapped with compute: collectives as a start step and a wait step.

A collective in a plan is a callback step whose function can start itself
without waiting (`fn.start(arrays)` returns a handle whose `result()` waits:
rune/distributed/collectives.py runs host collectives on a communication thread,
through the same MPI calls as a synchronous one, so results are bit for bit the
same). This pass, run on a plan's lowered steps (rune/compiler/plan.py), splits
each such step into

  - a `CollectiveStart`, moved back to just after the last step that makes one
    of its inputs (an earlier collective's wait moved back with it), and
  - a `CollectiveWait`, moved forward to just before the first step that reads
    its results (or the plan's end),

so the compute between them (the backward of the next layer) runs while the
collective communicates. Neither moves past an effect (a callback, a loop or
branch, which may hold collectives, another collective's start or wait): every
rank issues its collectives, and runs its callbacks, in program order, as MPI
requires. So at most one collective is in flight at a time, and none is when the
plan returns. A wait never moves past a step that reads or writes the
collective's inputs or results; it also counts as reading the inputs, so a
buffer the communication still reads is never donated to a later step.

A collective over many leaves that are made at different points (a tree of
gradients, made layer by layer in the backward pass) is first cut into buckets,
DDP's: its leaves in the order they are made, a bucket closed once it holds
`BUCKET_BYTES` (the last one takes the rest), each bucket a collective of its
own started when its last leaf is made. Only collectives that act leaf by leaf
and element by element (`fn.split`: all_reduce, reduce_scatter) are cut, so each
element's result is the same whichever bucket carries it.

RUNE_OVERLAP=0 in the environment (read when a plan is built) keeps every
collective one synchronous step, as before.
"""
from ..base import config
from ..nx.buffers import Array
from .control_steps import CallbackStep


# A bucket's size before the next leaf opens another: DDP's 25 MB. Each bucket is a
# collective of its own (a signature exchange, an MPI call): on the 2-core host, 1 MiB
# buckets of 13 MB of gradients made a data-parallel step about 1.3x slower (bench/distributed.py).
BUCKET_BYTES = 25 << 20


class _Part:
    """A bucket of a collective step: the step's fields for a subset of its leaves."""
    __slots__ = ("fn", "in_devices", "ins", "outs")

    def __init__(self, fn, in_devices, ins, outs):
        self.fn, self.in_devices, self.ins, self.outs = fn, in_devices, tuple(ins), tuple(outs)


def enabled():
    """Whether plans built now split their collectives (RUNE_OVERLAP, default on)."""
    return config.overlap()


class CollectiveStart:
    """Start a collective: its operands handed to `fn.start`; the handle goes to the
    `token` slot, which only the matching `CollectiveWait` reads."""
    profile_kind = "collective start"   # how rune.profile names this step
    kernels = ()
    plans = ()
    takes_donations = False

    def __init__(self, step, token):
        self.fn, self.in_devices = step.fn, step.in_devices
        self.ins, self.token = step.ins, token

    def reads(self):
        return self.ins

    def writes(self):
        return (self.token,)

    def run(self, env):
        env[self.token] = self.fn.start([Array(env[i], d) for i, d in zip(self.ins, self.in_devices)])

    def describe(self):
        return f"collective start {self.fn.name} ({len(self.ins)} in)"


class CollectiveWait:
    """Wait for a started collective and write its results."""
    profile_kind = "collective wait"   # how rune.profile names this step
    kernels = ()
    plans = ()
    takes_donations = False

    def __init__(self, step, token):
        self.fn, self.token = step.fn, token
        self.ins, self.outs = step.ins, step.outs

    def reads(self):
        return (self.token,) + self.ins   # the inputs stay alive until the communication is done

    def writes(self):
        return self.outs

    def run(self, env):
        handle, env[self.token] = env[self.token], None
        for o, r in zip(self.outs, handle.result()):
            env[o] = r._raw

    def describe(self):
        return f"collective wait {self.fn.name} ({len(self.outs)} out)"


def _startable(step):
    return type(step) is CallbackStep and callable(getattr(step.fn, "start", None))


def _is_effect(step):
    """Steps whose order among themselves is the program's: callbacks and collectives
    (every rank in the same order), and loops and branches (their bodies may hold them)."""
    return type(step) in (CallbackStep, CollectiveStart, CollectiveWait) or bool(step.plans)


def split_collectives(steps, new_slot):
    """`steps` with each startable collective split into a start and a wait, moved
    apart as far as the rules above allow. `new_slot()` gives a fresh plan slot."""
    if not enabled() or not any(_startable(s) for s in steps):
        return steps
    out = []
    made_at, fence = {}, -1   # slot -> the index in `out` of the step making it; the last effect's
    for step in steps:
        if _startable(step):
            for part in _bucketed(step, made_at, fence):
                token = new_slot()
                out += [CollectiveStart(part, token), CollectiveWait(part, token)]
        else:
            out.append(step)
        for s in out[-1].writes():
            made_at[s] = len(out) - 1
        if _is_effect(out[-1]):
            fence = len(out) - 1
    for k in range(len(out)):
        if type(out[k]) is CollectiveStart:
            _hoist(out, k)
    for k in range(len(out) - 1, -1, -1):
        if type(out[k]) is CollectiveWait:
            _sink(out, k)
    return out


def _bucketed(step, made_at, fence):
    """The collective `step` cut into buckets by when its leaves are made (after the
    last effect, `fence`, every leaf is as early as any); [step] when uncut."""
    n = len(step.ins)
    split = getattr(step.fn, "split", None)
    if n < 2 or split is None:
        return [step]
    ready = [max(made_at.get(s, -1), fence) for s in step.ins]
    order = sorted(range(n), key=lambda i: ready[i])
    groups, size = [[]], 0
    for i in order:
        if groups[-1] and size >= BUCKET_BYTES and ready[i] != ready[groups[-1][-1]]:
            groups.append([])
            size = 0
        groups[-1].append(i)
        aval = step.fn.in_avals[i]
        size += _nbytes(aval)
    if len(groups) == 1:
        return [step]
    fns = split(groups)
    if fns is None:
        return [step]
    return [_Part(fn, [step.in_devices[i] for i in g], [step.ins[i] for i in g], [step.outs[i] for i in g])
            for fn, g in zip(fns, groups)]


def _nbytes(aval):
    count = 1
    for d in aval.shape:
        count *= d
    return count * aval.dtype.itemsize


def _hoist(steps, k):
    """Move the start at `k` back past compute that does not make its inputs. Waits of
    earlier collectives that it meets move back with it, still before it (a wait may
    come earlier: that only shortens its overlap; `_sink` then moves it forward again,
    up to this start)."""
    ins = set(steps[k].ins)
    g = k   # the group moving back: earlier collectives' waits met on the way, then the start
    while g > 0:
        before = steps[g - 1]
        if type(before) is CollectiveWait:
            g -= 1
        elif _is_effect(before) or ins.intersection(before.writes()):
            break
        else:
            steps[g - 1:k + 1] = steps[g:k + 1] + [before]
            g -= 1
            k -= 1


def _sink(steps, k):
    """Move the wait at `k` forward past compute that neither reads its results nor
    writes its inputs or results (reading an input the communication also reads is safe)."""
    wait = steps[k]
    outs, touched = set(wait.outs), set(wait.ins) | set(wait.outs)
    while k + 1 < len(steps):
        after = steps[k + 1]
        if _is_effect(after) or outs.intersection(after.reads()) or touched.intersection(after.writes()):
            break
        steps[k + 1], steps[k] = wait, after
        k += 1
