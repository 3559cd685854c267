"""The training examples run (tiny settings, a few seconds each) and their metric moves."""
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(script, *args):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", script), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_digits_cnn_learns_checkpoints_and_resumes(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    ckpt = str(tmp_path / "digits.safetensors")
    out = _run("train_digits.py", "--epochs", "1", "--limit", "320", "--no-progress", "--checkpoint", ckpt)
    accuracy = float(re.search(r"final test accuracy ([0-9.]+)", out).group(1))
    assert accuracy > 0.3, out  # chance is 0.1
    assert os.path.exists(ckpt)
    out = _run("train_digits.py", "--epochs", "2", "--limit", "320", "--no-progress", "--checkpoint", ckpt,
               "--resume")
    assert "resumed from" in out and "epoch   2" in out and "epoch   1 " not in out, out


def test_char_transformer_loss_falls():
    out = _run("train_charlm.py", "--steps", "24", "--log-every", "8", "--batch-size", "8", "--seq-len", "32",
               "--d-model", "32", "--max-chars", "200000", "--sample-chars", "20", "--lr", "1e-2")
    losses = [float(v) for v in re.findall(r"step +\d+  loss ([0-9.]+)", out)]
    first = float(re.search(r"first step ([0-9.]+)", out).group(1))
    assert len(losses) == 3 and losses[-1] < first - 0.5, out
    assert "--- sample ---" in out
