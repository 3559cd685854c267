"""Two host devices for tests that place arrays on cpu:1.

RUNE_HOST_DEVICES is read when rune is imported, so a test file's
`test_two_devices_*` run in a child pytest process started with
RUNE_HOST_DEVICES=2; in a process that already has two host devices (that
child, or a run with the variable set) they run directly.
"""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HOSTS = os.environ.get("RUNE_HOST_DEVICES", "1").strip()
TWO = _HOSTS.isdigit() and int(_HOSTS) >= 2
two_devices = pytest.mark.skipif(not TWO, reason="runs in the RUNE_HOST_DEVICES=2 child process")


def child(code_or_args, env_extra, pytest_args=None):
    """Run `python -c code_or_args`, or pytest with `pytest_args`, from the repository
    with `env_extra` added to the environment."""
    env = dict(os.environ, **env_extra)
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable] + (["-m", "pytest"] + pytest_args if pytest_args else ["-c", code_or_args])
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)


def run_two_devices_tests(path):
    """Run the `two_devices` tests of the file `path` in a child with two host devices;
    they must all pass (none skipped)."""
    run = child(None, {"RUNE_HOST_DEVICES": "2"}, [path, "-q", "-p", "no:cacheprovider", "-k", "two_devices"])
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout.splitlines()[-1], run.stdout[-2000:]
