"""rune.debug: print inside traced code, the NaN switch naming the op and the
user's line, and tracebacks that show the user's frames (docs/debugging.md)."""
import inspect
import os
import subprocess
import sys
import traceback

import numpy as np
import pytest

import rune
from rune import nx
from rune.base import config
from rune.base.tracebacks import internal


def _line(fn, marker):
    """The file line of `fn`'s source that holds `marker` (an independent record of
    where the op is)."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, text in enumerate(lines) if marker in text)


def _printed(capsys):
    return capsys.readouterr().out.splitlines()


# ---------------------------------------------------------------- print

def _shows(x):
    rune.debug.print("x={} total={total}", x, total=x.sum())
    y = x * 2.0
    rune.debug.print("y={}", y)
    return (y * y).sum()


def _expected(x):
    return [f"x={x} total={x.sum()}", f"y={x * 2}"]


@pytest.mark.parametrize("how", ["eager", "jit", "grad", "jit of grad"])
def test_print_shows_the_values_in_program_order(how, capsys):
    x = np.array([0.5, 1.5, -2.0], np.float32)
    run = {"eager": _shows, "jit": rune.jit(_shows), "grad": rune.grad(_shows),
           "jit of grad": rune.jit(rune.grad(_shows))}[how]
    out = run(nx.asarray(x))
    assert _printed(capsys) == _expected(x)
    if "grad" in how:   # the print leaves the derivative alone: d/dx sum(4 x^2) = 8 x
        np.testing.assert_allclose(np.asarray(out), 8 * x, rtol=1e-6)


def test_print_under_vmap_prints_each_batch_element_in_order(capsys):
    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    rune.jit(rune.vmap(_shows))(nx.asarray(xs))
    # per element, each print's lanes together, the prints in program order
    assert _printed(capsys) == [f"x={r} total={r.sum()}" for r in xs] + [f"y={r * 2}" for r in xs]


def test_print_in_a_jitted_scan_runs_once_per_row(capsys):
    def step(total, x):
        rune.debug.print("total={} x={}", total, x)
        return total + x, None

    xs = np.array([1.0, 2.0, 3.0], np.float32)
    rune.jit(lambda v: rune.scan(step, nx.asarray(0.0), v)[0])(nx.asarray(xs))
    totals = np.concatenate([[0.0], np.cumsum(xs)[:-1]]).astype(np.float32)
    assert _printed(capsys) == [f"total={t} x={x}" for t, x in zip(totals, xs)]


def test_print_takes_python_values_and_checks_its_format():
    with pytest.raises(rune.UsageError, match="format string"):
        rune.debug.print(nx.ones(2))


# ---------------------------------------------------------------- NaNs

def _loss(x):
    y = nx.log(x)  # nan-here
    return (y * 2.0).sum()


def test_nans_off_lets_a_nan_through():
    out = rune.jit(_loss)(nx.asarray([1.0, -1.0]))
    with np.errstate(invalid="ignore"):
        assert np.isnan(float(out)) and np.isnan(2 * np.log(np.float32(-1.0)))


def test_nans_names_the_primitive_and_the_users_line():
    step = rune.jit(_loss)
    with rune.debug.nans():
        np.testing.assert_allclose(float(step(nx.asarray([1.0, 2.0]))), 2 * np.log(2.0), rtol=1e-6)
        with pytest.raises(rune.debug.NanError) as info:
            step(nx.asarray([1.0, -1.0]))
    message = str(info.value)
    assert message.startswith("log made a NaN") and "jit(_loss)" in message
    assert f'{__file__}", line {_line(_loss, "nan-here")}, in _loss' in message
    assert not rune.debug.nans_enabled()


def _scanned(xs):
    def step(total, x):
        return total + nx.sqrt(x - 1.0), None
    return rune.scan(step, nx.asarray(0.0), xs)[0]  # scan-here


def test_nans_finds_the_op_inside_a_loop_body():
    with rune.debug.nans(), pytest.raises(rune.debug.NanError) as info:
        rune.jit(_scanned)(nx.asarray([2.0, 0.5, 3.0]))
    message = str(info.value)
    assert message.startswith("sqrt made a NaN from operands without one, in the body of scan")
    assert f"line {_line(_scanned, 'scan-here')}" in message


def test_nans_names_the_argument_a_nan_came_in_through():
    with rune.debug.nans(), pytest.raises(rune.debug.NanError, match=r"argument kwargs\['b'\]"):
        rune.jit(lambda a, b: a + b)(nx.ones(2), b=nx.asarray([1.0, np.nan]))


def test_nans_switch_as_a_call_and_from_the_environment(monkeypatch):
    before = rune.debug.nans(True)
    try:
        assert rune.debug.nans_enabled()
    finally:
        rune.debug.nans(False)
    assert not rune.debug.nans_enabled() and repr(before) == "rune.debug.nans(True)"
    monkeypatch.setenv("RUNE_DEBUG_NANS", "1")
    assert config.debug_nans() is True
    monkeypatch.setenv("RUNE_DEBUG_NANS", "maybe")
    with pytest.raises(rune.ArgumentError, match="RUNE_DEBUG_NANS"):
        config.debug_nans()


def test_rune_debug_nans_in_the_environment_switches_it_on_at_import():
    program = ("import rune\nfrom rune import nx\nassert rune.debug.nans_enabled()\n"
               "rune.jit(lambda x: nx.log(x))(nx.asarray([-1.0]))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RUNE_DEBUG_NANS": "1"})
    assert done.returncode == 1 and "NanError: log made a NaN" in done.stderr, done.stderr


# ---------------------------------------------------------------- tracebacks

def _bad_model(x, w):
    return nx.dot(x, w)  # shape-error-here


def _failing_step():
    step = rune.jit(lambda x, w: _bad_model(x, w).sum())
    with pytest.raises(rune.ShapeError) as info:
        step(nx.ones((2, 5)), nx.ones((3, 4)))
    return info.value


def test_an_error_leaving_jit_shows_the_users_frames_only(monkeypatch):
    monkeypatch.delenv("RUNE_TRACEBACK", raising=False)
    error = _failing_step()
    frames = traceback.extract_tb(error.__traceback__)
    assert not [f for f in frames if internal(f.filename)]
    # the user's frames are all there, innermost last: the line that raised in rune is the user's call
    assert frames[-1].lineno == _line(_bad_model, "shape-error-here")
    assert any("RUNE_TRACEBACK=full" in note for note in error.__notes__)


def test_rune_traceback_full_keeps_rune_frames(monkeypatch):
    monkeypatch.setenv("RUNE_TRACEBACK", "full")
    frames = traceback.extract_tb(_failing_step().__traceback__)
    assert [f for f in frames if internal(f.filename)]
    assert frames[-1].filename.endswith("contractions.py")  # matmul raised
    monkeypatch.setenv("RUNE_TRACEBACK", "short")
    with pytest.raises(rune.ArgumentError, match="RUNE_TRACEBACK"):
        config.traceback_mode()


class _Model:
    def __init__(self, w):
        self.w = w

    def __hash__(self):
        return 0

    def __eq__(self, other):
        return self is other

    @rune.jit
    def __call__(self, x):
        return _bad_model(x, self.w)


def test_a_jitted_method_and_the_errors_behind_it_show_the_users_frames_only(monkeypatch):
    monkeypatch.delenv("RUNE_TRACEBACK", raising=False)
    rune.tree.register(_Model, lambda m: ((m.w,), None), lambda _, leaves: _Model(*leaves))
    with pytest.raises(rune.ShapeError) as info:
        _Model(nx.ones((3, 4)))(nx.ones((2, 5)))
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames and not [f for f in frames if internal(f.filename)]
    assert frames[-1].lineno == _line(_bad_model, "shape-error-here")
    with pytest.raises(rune.DTypeError) as info:   # raised while handling another error of rune's
        rune.jit(lambda a: a)(object())
    linked = info.value.__context__ or info.value.__cause__
    assert linked is not None
    assert not [f for f in traceback.extract_tb(linked.__traceback__) if internal(f.filename)]
