"""The training examples run (tiny settings, a few seconds each) and their metric moves.

They run in this process (no interpreter start-up, and the kernels compiled by one run
serve the next): a script run is `runpy` with its sys.argv, as `python examples/X.py
...` runs it; a run of its `main(argv)` otherwise."""
import contextlib
import importlib.util
import io
import json
import math
import os
import re
import runpy
import sys
import threading

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository
STEP_KEYS = {"step", "loss", "lr", "step_time", "images_per_s"}
EPOCH_KEYS = {"step", "epoch", "epoch_loss", "test_accuracy"}


def _script(name, *argv):
    """examples/<name>.py run as a script with these arguments, in this process; (its
    stdout, its stderr). Its stderr is not a terminal."""
    path = os.path.join(REPO, "examples", name + ".py")
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        mp.setattr(sys, "argv", [path, *argv])
        mp.syspath_prepend(os.path.dirname(path))   # as `python examples/X.py` puts its folder first
        runpy.run_path(path, run_name="__main__")
    return out.getvalue(), err.getvalue()


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _example(name):
    """An example script imported as a module, to call its main() in this process
    (no interpreter start-up per run)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(REPO, "examples", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def digits():
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    return _example("train_digits")


def _digits_run(digits, folder, name, *args):
    """train_digits.main on 160 digits (5 batches of 32 an epoch); the lines of its log."""
    ckpt = os.path.join(folder, name + ".safetensors")
    digits.main(["--limit", "160", "--no-progress", "--checkpoint", ckpt, *args])
    return _lines(os.path.join(folder, name + ".jsonl"))


@pytest.fixture(scope="module")
def float32_run(digits, tmp_path_factory):
    """An uninterrupted 2-epoch float32 run, the reference, run as the script is (its
    progress bar not turned off): (its folder, its stdout, its stderr)."""
    folder = str(tmp_path_factory.mktemp("digits"))
    out, err = _script("train_digits", "--epochs", "2", "--limit", "160",
                       "--checkpoint", os.path.join(folder, "whole.safetensors"))
    return folder, out, err


@pytest.fixture(scope="module")
def float32_log(float32_run):
    return _lines(os.path.join(float32_run[0], "whole.jsonl"))


def test_digits_script_learns_and_checkpoints(float32_run, float32_log):
    folder, out, _ = float32_run
    accuracy = float(re.search(r"final test accuracy ([0-9.]+)", out).group(1))
    assert accuracy > 0.3, out  # chance is 0.1
    assert accuracy == pytest.approx(float32_log[-1]["test_accuracy"], abs=1e-4)   # printed to 4 places
    assert "epoch   1 " in out and "epoch   2 " in out, out
    assert os.path.exists(os.path.join(folder, "whole.safetensors"))   # the log went beside it (float32_log)


def test_digits_log_holds_every_step_and_epoch(float32_log):
    steps = [line for line in float32_log if "loss" in line]
    epochs = [line for line in float32_log if "epoch" in line]
    assert all(set(line) == STEP_KEYS for line in steps), steps
    assert [line["step"] for line in steps] == list(range(1, 11))
    assert all(line["lr"] == 2e-3 and 0 < line["loss"] < 5 for line in steps), steps
    assert all(math.isclose(line["images_per_s"] * line["step_time"], 32, rel_tol=1e-9) for line in steps)
    assert [(line["step"], line["epoch"]) for line in epochs] == [(5, 1), (10, 2)]
    assert all(set(line) == EPOCH_KEYS and 0 <= line["test_accuracy"] <= 1 for line in epochs), epochs
    first, second = ([line["loss"] for line in steps[i:i + 5]] for i in (0, 5))
    assert math.isclose(epochs[0]["epoch_loss"], np.mean(first), rel_tol=1e-9)
    assert math.isclose(epochs[1]["epoch_loss"], np.mean(second), rel_tol=1e-9)


def test_digits_resume_continues_at_the_saved_loader_position(digits, float32_log, tmp_path, capsys):
    # a whole first epoch; resumed at the start of the second, stopped in its middle; resumed there
    first = _digits_run(digits, str(tmp_path), "run", "--epochs", "1")
    assert [line["step"] for line in first] == [1, 2, 3, 4, 5, 5]
    capsys.readouterr()
    stopped = _digits_run(digits, str(tmp_path), "run", "--epochs", "2", "--max-steps", "7", "--resume")
    out = capsys.readouterr().out
    assert "resumed from" in out and "at epoch 2, step 0 of 5 (step 5 in all)" in out, out
    assert "epoch   1 " not in out, out
    assert "stopped at step 7" in out, out
    assert [line["step"] for line in stopped] == [1, 2, 3, 4, 5, 5, 6, 7]
    resumed = _digits_run(digits, str(tmp_path), "run", "--epochs", "2", "--resume")
    out = capsys.readouterr().out
    assert "at epoch 2, step 2 of 5 (step 7 in all)" in out and "epoch   2 " in out, out   # the saved loader.state()
    assert [line["step"] for line in resumed] == [line["step"] for line in float32_log]
    # The same batches in the same order from the same model and Adam state: the
    # losses of the uninterrupted run, step for step.
    np.testing.assert_allclose([line.get("loss", np.nan) for line in resumed],
                               [line.get("loss", np.nan) for line in float32_log], rtol=1e-6)
    assert resumed[-1]["epoch"] == 2 and resumed[-1]["test_accuracy"] == float32_log[-1]["test_accuracy"]


def test_digits_bfloat16_compute_trains_and_logs(digits, float32_log, tmp_path, capsys):
    log = _digits_run(digits, str(tmp_path), "bf16", "--epochs", "2", "--compute-dtype", "bfloat16")
    assert "compute bfloat16" in capsys.readouterr().out
    steps = [line for line in log if "loss" in line]
    assert [line["step"] for line in steps] == list(range(1, 11))
    assert all(set(line) == STEP_KEYS for line in steps), steps
    # The same first batch and initial model: the first loss differs from float32's by
    # bfloat16 rounding only (about 3 significant digits), and differs.
    reference = float32_log[0]["loss"]
    assert steps[0]["loss"] != reference and math.isclose(steps[0]["loss"], reference, rel_tol=2e-2)
    assert log[-1]["epoch"] == 2 and log[-1]["test_accuracy"] > 0.3, log[-1]   # chance is 0.1


def test_char_transformer_loss_falls(tmp_path, capsys):
    log = str(tmp_path / "charlm.jsonl")
    _example("train_charlm").main(["--steps", "24", "--log-every", "8", "--batch-size", "8", "--seq-len", "32",
                                   "--d-model", "32", "--max-chars", "200000", "--sample-chars", "20",
                                   "--lr", "1e-2", "--log", log])
    out = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"step +\d+  loss ([0-9.]+)", out)]
    first = float(re.search(r"first step ([0-9.]+)", out).group(1))
    assert len(losses) == 3 and losses[-1] < first - 0.5, out
    assert "--- sample ---" in out
    lines = _lines(log)
    assert [line["step"] for line in lines] == list(range(1, 25)) + [24]
    assert all(set(line) == {"step", "loss", "lr", "step_time", "chars_per_s"} for line in lines[:-1])
    assert lines[0]["loss"] == pytest.approx(first, abs=5e-4)
    assert np.mean([line["loss"] for line in lines[16:24]]) == pytest.approx(losses[-1], abs=5e-4)
    assert lines[0]["lr"] == 0 and max(line["lr"] for line in lines[:-1]) == pytest.approx(1e-2)  # warm-up from 0
    assert set(lines[-1]) == {"step", "validation_loss"} and lines[-1]["validation_loss"] < first


def test_digits_progress_bar_is_quiet_when_stderr_is_not_a_terminal(float32_run):
    err = float32_run[2]   # the reference ran without --no-progress
    assert "\r" not in err and "batch/s" not in err and "epoch 1/" not in err, err


@contextlib.contextmanager
def _stderr_on_a_terminal():
    """sys.stderr a new pseudo-terminal 100 columns wide; yields a list that holds what
    was written to it once the block ends."""
    import fcntl
    import pty
    import struct
    import termios
    parent, child = pty.openpty()
    # A new pseudo-terminal is 0 columns wide, which tqdm would fill with a bar of no characters.
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    chunks = []

    def read():   # drained as it is written: a full terminal buffer would block the writer
        while True:
            try:
                chunk = os.read(parent, 4096)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    text = []
    try:
        with open(child, "w", encoding="utf-8", closefd=True) as terminal, \
                pytest.MonkeyPatch.context() as mp:
            mp.setattr(sys, "stderr", terminal)
            yield text
    finally:
        reader.join(timeout=60)
        os.close(parent)
        text.append(b"".join(chunks).decode(errors="replace"))


def test_digits_progress_bar_shows_on_a_terminal(digits, tmp_path):
    if not hasattr(os, "openpty") or sys.platform == "win32":
        pytest.skip("no pseudo-terminals on this platform")
    with _stderr_on_a_terminal() as written:   # two batches, the bar left on
        digits.main(["--epochs", "1", "--limit", "64", "--checkpoint", str(tmp_path / "digits.safetensors")])
    assert "epoch 1/1" in written[0], written


def test_cnn_with_batch_norm_learns_and_keeps_its_running_statistics(tmp_path):
    pytest.importorskip("sklearn")
    example = _example("train_cnn_batchnorm")
    ckpt = str(tmp_path / "cnn.safetensors")
    model, accuracy = example.main(["--epochs", "2", "--limit", "320", "--checkpoint", ckpt])
    assert accuracy > 0.25, accuracy   # chance is 0.1
    norm = model.layers[1]
    assert norm.training and float(np.max(np.abs(np.asarray(norm.running_mean)))) > 0   # the updates came out
    back = example.rune.load(ckpt, like=example.make_model(example.nx.random.key(1)))   # state saved with the rest
    np.testing.assert_array_equal(np.asarray(back.layers[1].running_var), np.asarray(norm.running_var))


@pytest.fixture(scope="module")
def gpt():
    return _example("train_gpt")


def _gpt_run(gpt, folder, *args):
    """train_gpt.main, tiny, in bfloat16, two batches per update, no sample unless asked; (its losses,
    the lines of its log)."""
    ckpt = os.path.join(folder, "gpt.safetensors")
    losses = gpt.main(["--tiny", "--steps", "12", "--accumulate", "2", "--lr", "1e-2", "--sample-chars", "0",
                       "--checkpoint", ckpt, *args])
    return losses, _lines(os.path.join(folder, "gpt.jsonl"))


def test_gpt_weight_decay_mask_marks_the_linear_matrices_only(gpt):
    model = gpt.GPT(gpt.nx.random.key(0), vocab=11, context=8, d_model=8, heads=2, layers=2)
    marks = dict(gpt.rune.tree.flatten_with_paths(gpt.decay_mask(model))[0])
    decayed = sorted(path for path, mark in marks.items() if mark)
    assert decayed == sorted(f".blocks[{i}].{name}.weight" for i in range(2)
                             for name in ("attention.qkv", "attention.proj", "up", "down")), decayed
    assert marks[".token.weight"] is False and marks[".position.weight"] is False   # the tied read-out too


def test_gpt_bf16_learns_and_a_resumed_run_continues_bit_for_bit(gpt, tmp_path, capsys):
    whole, whole_log = _gpt_run(gpt, str(tmp_path / "whole"), "--sample-chars", "8", "--temperature", "0")
    out = capsys.readouterr().out
    assert "compute bfloat16" in out and "sample: def " in out, out
    assert [line["step"] for line in whole_log] == list(range(1, 13))
    assert [line["loss"] for line in whole_log] == whole
    assert np.mean(whole[-4:]) < whole[0] - 0.3, whole   # from ln(vocab) ~ 4.5 nats
    # stopped at step 7, in the middle of an accumulation (MultiSteps holds one batch's gradient)
    stopped, _ = _gpt_run(gpt, str(tmp_path / "run"), "--max-steps", "7")
    assert stopped == whole[:7] and "stopped at step 7" in capsys.readouterr().out
    resumed, log = _gpt_run(gpt, str(tmp_path / "run"), "--resume")
    assert "at step 7" in capsys.readouterr().out
    # the same model, optimizer state, accumulated gradient and batches: the same losses, bit for bit
    assert resumed == whole[7:]
    assert [(line["step"], line["loss"], line["lr"]) for line in log] == \
        [(line["step"], line["loss"], line["lr"]) for line in whole_log]


# The host's float16 matmul rounds its float32 sums with NumPy, which warns where they overflow
# (rune/backends/cpu/batched_matmul.py): here on purpose, in the steps the loss scale skips.
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_gpt_float16_trains_with_a_dynamic_loss_scale(gpt, tmp_path, capsys):
    # from 2**18 the gradients of the weights overflow float16's 65504 (2**15 would not)
    losses, log = _gpt_run(gpt, str(tmp_path), "--compute-dtype", "float16", "--steps", "10", "--accumulate", "1",
                           "--loss-scale", str(2.0 ** 18))
    assert "compute float16" in capsys.readouterr().out
    assert len(losses) == 10 and np.all(np.isfinite(losses)), losses
    # jmp's rules: halved after each step whose gradients overflowed (the step skipped), kept
    # after a finite one (no growth before 2000 of them); it settles, and the steps then train
    scales = [2.0 ** 18] + [line["loss_scale"] for line in log]
    assert all(new in (old, old / 2) for old, new in zip(scales, scales[1:])), scales
    assert scales[1] == 2.0 ** 17 and scales[-1] == scales[-5], scales
    assert np.mean(losses[-2:]) < losses[0] - 0.2, losses
