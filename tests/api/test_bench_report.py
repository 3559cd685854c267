"""`python -m bench --json/--plot` write what they promise (on made-up rows: no timing here)."""
import json

import pytest

from bench.__main__ import plot, write_json
from bench.common import Row


def _rows():
    a = Row("train: digits CNN train step (batch 32)", "per step", {"rune": 0.002, "torch": 0.004})
    b = Row("eager: x * 2 + 1", "per op", {"rune": 3e-6})
    a.bench, b.bench = "train", "eager"
    return [a, b]


def test_json_holds_every_figure_versions_and_the_machine(tmp_path):
    path = tmp_path / "bench.json"
    write_json(str(path), _rows(), (1.0, 0.5, 0.25))
    data = json.loads(path.read_text())
    assert data["versions"]["numpy"] and data["machine"]["cpus"] and data["machine"]["load_average"] == [1.0, 0.5, 0.25]
    first = data["rows"][0]
    assert first["bench"] == "train" and first["us"] == {"rune": 2000.0, "torch": 4000.0}
    assert first["ratios"] == {"torch": 0.5} and data["rows"][1]["ratios"] == {}


def test_plot_writes_an_image(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "ratios.png"
    assert plot(str(path), _rows())
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_failing_peer_library_loses_only_its_own_gpu_figure():
    from bench import gpu
    times = {"rune": 1e-6}
    gpu._LIBRARY_ERRORS.clear()
    gpu.guarded(times, "torch", lambda: 1 / 0)          # as a torch.compile without a toolchain
    gpu.guarded(times, "jax.jit", lambda: 2e-6)
    assert times == {"rune": 1e-6, "jax.jit": 2e-6}
    assert gpu._LIBRARY_ERRORS == {"torch": "ZeroDivisionError: division by zero"}
