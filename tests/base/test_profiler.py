"""rune.profile: every plan step recorded with its time, bytes and device; a table
and a Chrome trace of them."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import rune
from rune import nx


def _plan_steps(jitted, *args):
    return jitted.plan(*args).steps


@pytest.mark.cc   # its plans hold compiled stretches
def test_each_step_of_each_run_is_one_event_with_the_bytes_it_wrote():
    x = nx.asarray(np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32))
    w = nx.asarray(np.ones((32, 16), np.float32))
    f = rune.jit(lambda x, w: (nx.tanh(x @ w + 1.0), nx.sum(x)))
    f(x, w)
    steps = _plan_steps(f, x, w)
    with rune.profile() as prof:
        for _ in range(3):
            f(x, w)
    assert len(prof.events) == 3 * len(steps)
    kinds = [e.kind for e in prof.events]
    assert kinds == kinds[:len(steps)] * 3                      # the same steps, in plan order, per call
    assert kinds.count("library") == 3                          # the one matmul of each call
    assert all(e.name.startswith("library call dot_general") for e in prof.events if e.kind == "library")
    assert set(kinds) <= {"library", "kernel", "numpy", "views"} and len(set(kinds)) >= 2
    assert all(e.seconds >= 0 and e.depth == 0 and e.device == "cpu" for e in prof.events)
    # the plan writes the (64, 16) float32 result and the float32 sum, and whatever it holds between steps
    assert sum(e.bytes for e in prof.events[:len(steps)]) >= 64 * 16 * 4 + 4
    with rune.profile() as quiet:
        pass
    f(x, w)   # no profile open: nothing recorded anywhere
    assert quiet.events == [] and len(prof.events) == 3 * len(steps)


def test_loop_bodies_nest_inside_their_loop_and_callbacks_are_steps():
    calls = []

    def body(c, r):
        y = rune.callback(lambda v: calls.append(1) or np.asarray(v) * 2, r, like=r)
        return c + nx.sum(y), y
    xs = nx.asarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    g = rune.jit(lambda xs: rune.scan(body, nx.zeros((), np.float32), xs))
    g(xs)
    with rune.profile() as prof:
        carry, ys = g(xs)
    assert float(carry) == 2 * 66
    loops = [e for e in prof.events if e.kind == "scan"]
    inner = [e for e in prof.events if e.depth == 1]
    callbacks = [e for e in prof.events if e.kind == "callback"]
    assert len(loops) == 1 and loops[0].depth == 0
    assert len(callbacks) == 4 and all(e.depth == 1 for e in callbacks)
    assert len(inner) % 4 == 0 and len(inner) >= 8      # every row runs the body's steps
    assert sum(e.seconds for e in inner) <= loops[0].seconds


@pytest.mark.cc   # its plans hold compiled stretches
def test_table_sums_by_step_and_the_trace_is_chrome_trace_json(tmp_path):
    f = rune.jit(lambda x: nx.exp(x) * 2.0)
    x = nx.asarray(np.ones(1000, np.float32))
    f(x)
    with rune.profile() as prof:
        for _ in range(5):
            f(x)
    (kind, name, calls, seconds, nbytes), = prof.summary()
    assert calls == 5 and nbytes == 5 * 4000
    assert abs(seconds - sum(e.seconds for e in prof.events)) < 1e-12
    table = prof.table()
    assert name[:40] in table and " 5 " in table
    path = prof.export(str(tmp_path / "trace.json"))
    events = json.load(open(path))["traceEvents"]
    assert len(events) == 5
    for e, ev in zip(events, prof.events):
        assert e["ph"] == "X" and e["name"] == ev.name and e["cat"] == ev.kind
        assert e["dur"] == ev.seconds * 1e6 and e["ts"] >= 0 and e["args"]["bytes"] == 4000
    assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-3 for a, b in zip(events, events[1:]))


def test_transfers_between_devices_are_recorded():
    code = """
import numpy as np, rune
from rune import nx
x = nx.asarray(np.ones(256, np.float32), device="cpu:0")
with rune.profile() as prof:
    nx.place(x, "cpu:1")
(e,) = [e for e in prof.events if e.kind == "transfer"]
print(e.name, e.bytes, e.device)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, RUNE_HOST_DEVICES="2"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cpu:0", "->", "cpu:1", "1024", "cpu:1"]


@pytest.mark.cc   # its plans hold compiled stretches
def test_kernel_compiles_are_recorded(monkeypatch):
    monkeypatch.setenv("RUNE_CACHE", "0")   # a compiler run, not a disk cache hit
    f = rune.jit(lambda x: nx.cos(x) * 3.0 - 0.25)
    x = nx.asarray(np.ones(5000, np.float32))
    with rune.profile() as prof:
        f(x)
    compiles = [e for e in prof.events if e.kind == "compile"]
    assert len(compiles) == 1 and compiles[0].name.startswith("1 C stretch") and compiles[0].seconds > 0
    kernel = [e for e in prof.events if e.kind == "kernel"]
    assert len(kernel) == 1 and kernel[0].seconds >= compiles[0].seconds   # compiled on its first run


def _sleeping(seconds):
    def run(v):
        time.sleep(seconds)
        return np.asarray(v)
    run.__name__ = f"sleep_{int(seconds * 1e3)}ms"
    return run


def _table_rows(table):
    """{step name: (calls, total ms, share %)} and the total ms of the footer, read from the text."""
    lines = table.splitlines()
    rows = {}
    for line in lines[2:-1]:
        kind, calls, total, mean, share, mb, name = line.split(None, 6)
        rows[name] = (int(calls), float(total), float(share.rstrip("%")))
    footer = float(lines[-1].split(", ")[1].split()[0])
    return rows, footer


def test_the_summary_and_the_table_put_the_costliest_step_first():
    # a cheap callback runs first in the plan and a 50 ms one after it: the order of
    # the rows is by total time, longest first, whatever the order the steps ran in
    def f(x):
        y = rune.callback(lambda v: np.asarray(v) + 1, x, like=x)
        return nx.exp(rune.callback(_sleeping(0.05), y, like=y)) * 2.0
    g = rune.jit(f)
    x = nx.asarray(np.ones(8, np.float32))
    g(x)
    with rune.profile() as prof:
        g(x)
    rows = prof.summary()
    totals = [r[3] for r in rows]
    assert len(rows) >= 3 and totals == sorted(totals, reverse=True)
    assert "sleep_50ms" in rows[0][1] and rows[0][3] >= 0.05
    assert rows[0][3] > 10 * sum(totals[1:])
    table, footer = _table_rows(prof.table())
    first = prof.table().splitlines()[2]
    assert "sleep_50ms" in first
    (slow,) = [v for k, v in table.items() if "sleep_50ms" in k]
    assert slow[0] == 1 and slow[2] >= 85.0 and footer >= 50.0


def test_nested_loops_count_each_step_once_and_shares_are_of_the_outermost_time():
    # an outer scan whose body is an inner scan whose body sleeps 20 ms: 4 sleeps,
    # each recorded once, the outer loop holding ~all of the time (not a third of it)
    def inner(c, r):
        y = rune.callback(_sleeping(0.02), r, like=r)
        return c + nx.sum(y), y

    def outer(c, row):
        s, ys = rune.scan(inner, nx.zeros((), np.float32), nx.reshape(row, (2, 1)))
        return c + s, ys
    g = rune.jit(lambda xs: rune.scan(outer, nx.zeros((), np.float32), xs))
    xs = nx.asarray(np.arange(4, dtype=np.float32).reshape(2, 2))
    g(xs)
    with rune.profile() as prof:
        carry, _ = g(xs)
    assert float(carry) == 6.0
    loops = sorted((e for e in prof.events if e.kind == "scan"), key=lambda e: e.depth)
    sleeps = [e for e in prof.events if e.kind == "callback"]
    assert [e.depth for e in loops] == [0, 1, 1] and len(sleeps) == 4 and {e.depth for e in sleeps} == {2}
    outermost = sum(e.seconds for e in prof.events if e.depth == 0)
    assert loops[0].seconds >= sum(e.seconds for e in loops[1:]) >= sum(e.seconds for e in sleeps) >= 0.08
    assert outermost <= 1.05 * loops[0].seconds + 0.005   # the loop is ~all the outermost time
    table, footer = _table_rows(prof.table())
    assert abs(footer - outermost * 1e3) <= 0.01
    shares = {}
    for kind, name, *_ in prof.summary():
        shares.setdefault(kind, []).append(table[name])
    (sleep_row,) = shares["callback"]
    assert sleep_row[0] == 4 and 80.0 <= sleep_row[2] <= 100.0
    assert max(r[2] for r in shares["scan"]) >= 90.0 and all(r[2] <= 100.0 for r in table.values())


def test_a_profile_reused_keeps_its_clock_and_one_reentered_records_each_step_once():
    g = rune.jit(lambda x: rune.callback(lambda v: np.asarray(v) * 2, x, like=x))
    x = nx.asarray(np.ones(4, np.float32))
    g(x)
    n = len(g.plan(x).steps)
    prof = rune.profile()
    with prof:
        g(x)
    first = [(e.start, e.seconds) for e in prof.events]
    assert len(first) == n and first[0][0] < 0.1
    time.sleep(0.2)
    with prof:
        with prof:          # entered again while open: nothing recorded twice
            g(x)
        g(x)                # still open after the inner block
    assert len(prof.events) == 3 * n
    assert [(e.start, e.seconds) for e in prof.events[:n]] == first      # the first events keep their times
    assert all(e.start >= 0.2 for e in prof.events[n:])                   # on the same clock, after the pause
    assert not rune.base.profiler.active()
    g(x)
    assert len(prof.events) == 3 * n
    time.sleep(0.2)
    with rune.profile() as other:      # another profile: its own clock, from its own start
        g(x)
    assert len(other.events) == n and other.events[0].start < 0.2
