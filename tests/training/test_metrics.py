"""rune.metrics (a JSON-lines log) and `python -m rune.plot` (its curves as a PNG)."""
import json
import math
import re
import runpy
import sys
import warnings

import numpy as np
import pytest

import rune
from rune import metrics, nx


def _write(path, steps=12, loss_at=None):
    losses = [1.0 / (s + 1) for s in range(steps)]
    with metrics.Logger(path) as log:
        for s in range(steps):
            values = {"loss": nx.asarray(losses[s], nx.float32), "lr": 0.1 * 0.9 ** s}
            if s % 4 == 3:
                values["accuracy"] = np.float64(s / steps)
            log.log(s, **values)
    return losses


def test_a_log_round_trips_through_read(tmp_path):
    path = tmp_path / "run.jsonl"
    losses = _write(path)
    lines = path.read_text().splitlines()
    assert len(lines) == 12 and all(isinstance(json.loads(line), dict) for line in lines)
    table = metrics.read(path)
    assert table["step"] == list(range(12))
    np.testing.assert_allclose(table["loss"], np.float32(losses))      # float32 read out exactly
    assert table["lr"] == [0.1 * 0.9 ** s for s in range(12)]
    assert table["accuracy"] == [s / 12 if s % 4 == 3 else None for s in range(12)]   # absent: None


def test_non_finite_values_are_null_in_the_file_and_nan_when_read(tmp_path):
    path = tmp_path / "run.jsonl"
    with metrics.Logger(path) as log:
        log.log(0, loss=float("nan"), grad_norm=nx.asarray(np.inf), scale=-math.inf, ok=True, phase="warmup")
    line = path.read_text()
    assert json.loads(line) == {"step": 0, "loss": None, "grad_norm": None, "scale": None, "ok": True,
                                "phase": "warmup"}
    assert "NaN" not in line and "Infinity" not in line          # strict JSON for every reader
    table = metrics.read(path)
    assert all(math.isnan(table[k][0]) for k in ("loss", "grad_norm", "scale"))


def test_a_second_logger_appends_and_each_line_is_flushed_at_once(tmp_path):
    path = tmp_path / "run.jsonl"
    _write(path, steps=3)
    log = metrics.Logger(path)
    log.log(3, loss=0.2)
    assert metrics.read(path)["step"] == [0, 1, 2, 3]   # readable before the logger closes
    log.close()
    with pytest.raises(rune.ArgumentError, match="closed"):
        log.log(4, loss=0.1)


def test_a_torn_last_line_is_skipped_and_bad_values_are_refused(tmp_path):
    path = tmp_path / "run.jsonl"
    _write(path, steps=2)
    with open(path, "a") as f:
        f.write('{"step": 2, "lo')
    assert metrics.read(path)["step"] == [0, 1]
    with metrics.Logger(tmp_path / "other.jsonl") as log:
        with pytest.raises(rune.ArgumentError, match="loss must be a scalar, got an array of shape \\(2,\\)"):
            log.log(0, loss=nx.asarray([1.0, 2.0]))
        with pytest.raises(rune.ArgumentError, match="step must be an int"):
            log.log(0.5, loss=1.0)


def test_a_logger_opened_after_a_killed_run_ends_its_last_line_first(tmp_path):
    path = tmp_path / "run.jsonl"
    _write(path, steps=2)
    with open(path, "a") as f:
        f.write('{"step": 2, "lo')   # killed mid-line
    with metrics.Logger(path) as log:
        log.log(2, loss=0.5)
    assert metrics.read(path)["step"] == [0, 1, 2]
    assert metrics.read(path)["loss"][-1] == 0.5
    # a whole record that lost only its newline is kept
    with open(path, "a") as f:
        f.write('{"step": 3, "loss": 0.25}')
    with metrics.Logger(path) as log:
        log.log(4, loss=0.125)
    assert metrics.read(path)["step"] == [0, 1, 2, 3, 4]
    with open(path) as f:   # every line is JSON, for readers other than read()
        assert [json.loads(line)["step"] for line in f] == [0, 1, 2, 3, 4]
    # a log that is only a fragment
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"st')
    with metrics.Logger(torn) as log:
        log.log(0, loss=1.0)
    assert metrics.read(torn) == {"step": [0], "loss": [1.0]}


def test_curves_are_the_logged_series(tmp_path):
    from rune.plot import curves
    path = tmp_path / "run.jsonl"
    losses = _write(path)
    series = curves(metrics.read(path))
    assert list(series) == ["loss", "lr", "accuracy"]
    steps, values = series["loss"]
    assert steps == list(range(12))
    np.testing.assert_allclose(values, np.float32(losses))
    assert series["accuracy"] == ([3, 7, 11], [3 / 12, 7 / 12, 11 / 12])
    assert list(curves(metrics.read(path), ["accuracy"])) == ["accuracy"]


def test_the_figure_draws_each_log_s_series_in_its_metric_s_subplot(tmp_path):
    pytest.importorskip("matplotlib")
    from rune.plot import figure
    _write(tmp_path / "a.jsonl")
    _write(tmp_path / "b.jsonl", steps=8)
    drawn = figure([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], size=(600, 400))
    titled = {ax.get_title(): ax for ax in drawn.axes if ax.get_visible()}
    assert sorted(titled) == ["accuracy", "loss", "lr"]
    for name, ax in titled.items():
        lines = {line.get_label(): line.get_xydata() for line in ax.get_lines()}
        assert sorted(lines) == ["a.jsonl", "b.jsonl"]
        for label, xy in lines.items():
            table = metrics.read(tmp_path / label)
            logged = [(s, v) for s, v in zip(table["step"], table[name]) if v is not None]
            np.testing.assert_allclose(xy, np.array(logged, dtype=float))


def _python_m_rune_plot(*argv):
    """`python -m rune.plot argv...` run in this process (runpy runs the module as -m
    does, without an interpreter start-up); its exit status."""
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        # rune.plot is imported already (by `from rune import ...` here): runpy says so
        warnings.filterwarnings("ignore", "'rune.plot' found in sys.modules", RuntimeWarning)
        mp.setattr(sys, "argv", ["python -m rune.plot", *argv])
        try:
            runpy.run_module("rune.plot", run_name="__main__", alter_sys=True)
        except SystemExit as e:   # the module's sys.exit(main())
            return e.code
    raise AssertionError("python -m rune.plot ended without sys.exit")


# matplotlib says so of the small figure (as it did on the stderr of the process this once ran in)
@pytest.mark.filterwarnings("ignore:constrained_layout not applied:UserWarning")
def test_python_m_rune_plot_writes_a_png_of_the_requested_size(tmp_path, capsys):
    image = pytest.importorskip("matplotlib.image")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _write(tmp_path / "a" / "run.jsonl")
    _write(tmp_path / "b" / "run.jsonl", steps=8)
    out = tmp_path / "curves.png"
    status = _python_m_rune_plot(str(tmp_path / "a" / "run.jsonl"), str(tmp_path / "b" / "run.jsonl"),
                                 "-o", str(out), "--size", "640x360")
    assert status == 0 and capsys.readouterr().out == f"wrote {out}\n"
    pixels = image.imread(out)
    assert pixels.shape[:2] == (360, 640)
    assert pixels[..., :3].std() > 0.05      # something is drawn, not a blank canvas


def test_without_matplotlib_the_error_says_what_to_install(tmp_path, monkeypatch):
    from rune import plot
    path = tmp_path / "run.jsonl"
    _write(path, steps=2)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)   # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'rune\[plot\]'"):
        plot.plot(path, tmp_path / "out.png")
    assert plot.main([str(path), "-o", str(tmp_path / "out.png")]) == 1
    assert not (tmp_path / "out.png").exists()


def test_python_m_rune_plot_refuses_an_unknown_metric_naming_those_present(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    _write(tmp_path / "run.jsonl", steps=4)
    out = tmp_path / "curves.png"
    status = _python_m_rune_plot(str(tmp_path / "run.jsonl"), "-o", str(out), "--metrics", "loss", "los")
    written = capsys.readouterr()
    assert status == 2 and written.out == ""
    (line,) = written.err.splitlines()                       # one line, no traceback (none raised)
    assert line.startswith("python -m rune.plot: error: no metric 'los' in ")
    assert line.endswith("the metrics there: loss, lr, accuracy") and not out.exists()


def _bad_logs(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "torn.jsonl").write_text('{"step": 0, "loss": 1}\n{"step": 1, "lo\n{"step": 2, "loss": 3}\n')
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00\x81" * 8)
    (tmp_path / "nosteps.jsonl").write_text('{"loss": 1}\n')
    _write(tmp_path / "ok.jsonl", steps=2)
    return {
        "missing file": (["missing.jsonl"], r"no such log file: .*missing\.jsonl$"),
        "a folder": (["."], r"no such log file: "),
        "empty log": (["empty.jsonl"], r"the log .*empty\.jsonl is empty$"),
        "malformed log": (["torn.jsonl"], r"line 2 of .*torn\.jsonl is not JSON"),
        "not text": (["binary.jsonl"], r"binary\.jsonl is not a text file"),
        "no steps": (["nosteps.jsonl"], r"nosteps\.jsonl has no 'step' key"),
        "bad size": (["ok.jsonl", "--size", "640by480"], r"--size: expected WIDTHxHEIGHT.*'640by480'"),
        "zero size": (["ok.jsonl", "--size", "0x480"], r"--size: expected WIDTHxHEIGHT"),
        "no output folder": (["ok.jsonl", "-o", "nowhere/c.png"], r"No such file or directory"),
        "no logs": ([], r"the following arguments are required: logs"),
    }


@pytest.mark.parametrize("case", ["missing file", "a folder", "empty log", "malformed log", "not text", "no steps",
                                  "bad size", "zero size", "no output folder", "no logs"])
def test_python_m_rune_plot_mistakes_are_one_line_errors_with_exit_status_2(tmp_path, monkeypatch, capsys, case):
    pytest.importorskip("matplotlib")
    from rune import plot
    argv, message = _bad_logs(tmp_path)[case]
    monkeypatch.chdir(tmp_path)
    try:
        status = plot.main(argv)
    except SystemExit as e:           # argparse's own exit, for the command line's mistakes
        status = e.code
    err = capsys.readouterr().err
    assert status == 2
    (line,) = err.splitlines()
    assert line.startswith("python -m rune.plot: error: ")
    assert re.search(message, line), line
    assert not (tmp_path / "curves.png").exists()
