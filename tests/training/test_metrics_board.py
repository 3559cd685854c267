"""rune.metrics.Logger on resume (the log cut back to the checkpoint's step) and
writing TensorBoard event files, read back with TensorBoard's own reader."""
import json
import math
import sys

import numpy as np
import pytest

import rune
from rune import metrics, nx


def _write(path, steps, **extra):
    with metrics.Logger(path) as log:
        for step in steps:
            log.log(step, loss=1.0 / step, **extra)


def test_a_resumed_log_drops_the_lines_past_the_checkpoint(tmp_path):
    path = str(tmp_path / "log.jsonl")
    _write(path, range(1, 9))
    with metrics.Logger(path) as log:
        log.log(5, epoch=1)   # an epoch line at the checkpoint's step stays
    with open(path, "a") as f:
        f.write('{"step": 9, "lo')   # a run killed mid-line
    before = [json.loads(line) for line in open(path).read().split("\n")[:-1]]
    with metrics.Logger(path, resume_step=5) as log:
        log.log(6, loss=0.5)
    kept = [r for r in before if r["step"] <= 5] + [{"step": 6, "loss": 0.5}]
    assert [json.loads(line) for line in open(path).read().splitlines()] == kept
    assert metrics.read(path)["step"] == [1, 2, 3, 4, 5, 5, 6]
    # resume_step=0: a fresh log for a run that logs from step 1
    with metrics.Logger(path, resume_step=0) as log:
        log.log(1, loss=2.0)
    assert metrics.read(path) == {"step": [1], "loss": [2.0]}
    # a new file, and a checked argument
    with metrics.Logger(str(tmp_path / "new.jsonl"), resume_step=np.int64(3)) as log:
        log.log(4, loss=1.0)
    with pytest.raises(rune.ArgumentError, match="resume_step must be an int"):
        metrics.Logger(path, resume_step=2.5)


def _board_scalars(logdir):
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = accumulator.EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: ([e.step for e in acc.Scalars(tag)], [e.value for e in acc.Scalars(tag)])
            for tag in acc.Tags()["scalars"]}


def test_tensorboard_event_files_hold_the_logged_scalars_and_a_resume_purges_the_rest(tmp_path):
    pytest.importorskip("tensorboardX")
    path, board = str(tmp_path / "log.jsonl"), tmp_path / "board"
    with metrics.Logger(path, tensorboard=str(board)) as log:
        for step in range(1, 7):
            log.log(step, loss=nx.asarray(1.0 / step, nx.float64), lr=0.1, diverged=step == 6,
                    note="text is not a scalar")
        log.log(6, nan=float("nan"), inf=math.inf)
    # stopped after step 6, resumed from the checkpoint of step 3: steps 4.. are logged again
    with metrics.Logger(path, resume_step=3, tensorboard=str(board)) as log:
        for step in (4, 5):
            log.log(step, loss=10.0 * step, lr=0.1, diverged=False)
    scalars = _board_scalars(board)
    assert scalars["nan"] == scalars["inf"] == ([], [])   # logged at step 6 only: purged
    steps, loss = scalars["loss"]
    assert steps == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(loss, [1.0, 0.5, 1 / 3, 40.0, 50.0], rtol=1e-6)
    assert scalars["diverged"] == ([1, 2, 3, 4, 5], [0.0] * 5)
    # the JSON lines say the same
    assert metrics.read(path)["loss"] == [1.0, 0.5, 1 / 3, 40.0, 50.0]
    # without a resume, non-finite values reach TensorBoard as they are
    with metrics.Logger(str(tmp_path / "other.jsonl"), tensorboard=str(tmp_path / "other")) as log:
        log.log(1, nan=float("nan"), inf=-math.inf)
    other = _board_scalars(tmp_path / "other")
    assert math.isnan(other["nan"][1][0]) and other["inf"][1] == [-math.inf]


def test_without_tensorboardx_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(ImportError, match=r"rune\[tensorboard\]"):
        metrics.Logger(str(tmp_path / "log.jsonl"), tensorboard=str(tmp_path / "board"))
