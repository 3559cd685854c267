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


def _digits_stderr(tmp_path, stderr):
    """train_digits.py's stderr at a tiny size (two batches), the progress bar left on."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = [sys.executable, os.path.join(REPO, "examples", "train_digits.py"), "--epochs", "1", "--limit", "64",
            "--checkpoint", str(tmp_path / "digits.safetensors")]
    if stderr == "pipe":
        done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "final test accuracy" in done.stdout, done.stdout
        return done.stderr
    import fcntl
    import pty
    import struct
    import termios
    parent, child = pty.openpty()
    # A new pseudo-terminal is 0 columns wide, which tqdm would fill with a bar of no characters.
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    with subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=child) as proc:
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(parent, 4096)
            except OSError:  # the terminal's other end closed: the script has ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=300) == 0, b"".join(chunks)[-3000:]
    os.close(parent)
    return b"".join(chunks).decode(errors="replace")


def test_digits_progress_bar_is_quiet_when_stderr_is_not_a_terminal(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    err = _digits_stderr(tmp_path, "pipe")
    assert "\r" not in err and "batch/s" not in err and "epoch 1/1" not in err, err


def test_digits_progress_bar_shows_on_a_terminal(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("tqdm")
    if not hasattr(os, "openpty") or sys.platform == "win32":
        pytest.skip("no pseudo-terminals on this platform")
    assert "epoch 1/1" in _digits_stderr(tmp_path, "tty")
