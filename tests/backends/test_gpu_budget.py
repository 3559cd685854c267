"""ci/gpu-check's cost model (ci/gpu_budget.py) against the check's limits, and the
compile time the pipeline records for it."""
import importlib.util
import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


budget = _load("gpu_budget")
SCRIPT = (ROOT / "ci" / "gpu-check").read_text()


def _script_limits():
    """Each part's limit and kill grace as ci/gpu-check runs it."""
    limits = {"probe": (0, int(re.search(r"timeout (\d+) python - <<'PY'", SCRIPT).group(1)))}
    for name, grace_limit in (("smoke", r"timeout -k (\d+) (\d+) python ci/gpu_smoke.py"),
                              ("bench", r"timeout -k (\d+) (\d+) python -m bench.gpu")):
        k, t = re.search(grace_limit, SCRIPT).groups()
        limits[name] = (int(k), int(t))
    grace = int(re.search(r"timeout -s INT -k (\d+)", SCRIPT).group(1))
    for name, t in re.findall(r"run_part ([\w-]+) (\d+) tests/", SCRIPT):
        limits[name] = (grace, int(t))
    return limits


def _reference():
    return budget.predict(budget.counts(), budget.H100_CORE, 16)


def test_the_check_runs_each_part_under_the_limit_the_model_is_sized_for():
    limits = _script_limits()
    assert {k: t for k, (_, t) in limits.items()} == budget.LIMITS
    assert sum(k + t for k, t in limits.values()) + 30 + 60 < 600   # + the environment and budget steps
    deadline = re.search(r"RUNE_BENCH_DEADLINE=\$\(\( \$\(date \+%s\) \+ (\d+) - (\d+) \)\)", SCRIPT)
    assert int(deadline.group(1)) == budget.LIMITS["bench"] and int(deadline.group(2)) > 0


def test_every_part_has_30_percent_headroom_and_the_check_fits_5_minutes_cold():
    pred = _reference()
    assert set(pred) == set(budget.LIMITS)
    for part, (low, high) in pred.items():
        assert 0 < low <= high, part
        assert budget.LIMITS[part] >= budget.HEADROOM * high, (part, high, budget.LIMITS[part])
    assert sum(high for _, high in pred.values()) <= budget.TOTAL_MAX


def test_the_header_states_the_models_predictions_and_the_limits():
    pred = _reference()
    rows = dict((name, (int(p), int(t))) for name, p, t in
                re.findall(r"^#   ([\w-]+) +~(\d+) s +(\d+) s", SCRIPT, re.M))
    assert rows == {part: (round(high), budget.LIMITS[part]) for part, (_, high) in pred.items()}


def test_the_eager_part_counts_its_selection_and_its_kernels_scale_with_it():
    n = budget.counts()
    assert 0 < n["eager_tests"] < 40 and n["eager_samples"] < 150
    more = dict(n, eager_samples=2 * n["eager_samples"])
    low, high = budget.predict(n, 1.0, 16)["eager-op-table"]
    low2, high2 = budget.predict(more, 1.0, 16)["eager-op-table"]
    cold = round(n["eager_samples"] * budget.EAGER_COLD_PER_SAMPLE)
    assert high2 - high == pytest.approx((round(2 * n["eager_samples"] * budget.EAGER_COLD_PER_SAMPLE) - cold)
                                         * budget.CUPY_KERNEL_REF[1])


def test_measured_times_are_recorded_and_printed_against_the_prediction(tmp_path, capsys):
    (tmp_path / "budget.json").write_text(json.dumps({"predicted": {"smoke": [4, 13]}, "measured": {}}))
    budget.main(["measured", str(tmp_path), "smoke", "20.5", "0"])
    assert "smoke took 20 s (predicted 4-13 s, limit 45 s): OVER the prediction, exit 0" in capsys.readouterr().out
    budget.main(["measured", str(tmp_path), "smoke", "9", "0"])
    assert "within the prediction" in capsys.readouterr().out
    assert json.loads((tmp_path / "budget.json").read_text())["measured"] == {"smoke": 9.0}


class _FakeCompiler:
    """A Compiler (rune/backends/base.py) whose artifacts are the source's bytes."""
    name, suffix, batch = "fake", ".bin", 2

    def key(self, source):
        return "fake-" + str(hash(source))

    def symbols(self, unit):
        return ()

    def compile(self, source, names=()):
        from rune.backends.base import Binary
        return Binary(source.encode())

    def load(self, path, data=None):
        return object()

    def blame(self, log):
        return set()


def test_the_pipeline_adds_up_the_units_batches_and_time_it_compiles(monkeypatch):
    from rune.backends import pipeline
    monkeypatch.setenv("RUNE_CACHE", "0")
    before = pipeline.compile_time()
    units = [(f"u{i}", f"// unit {i} {id(before)}\n", ()) for i in range(5)]
    out = pipeline.build(_FakeCompiler(), "// prelude\n", units)
    assert len(out) == 5
    after = pipeline.compile_time()
    assert (after["units"] - before["units"], after["batches"] - before["batches"]) == (5, 3)   # batches of 2
    assert after["seconds"] > before["seconds"]
    pipeline.build(_FakeCompiler(), "// prelude\n", units)                     # all loaded: nothing compiled
    assert pipeline.compile_time() == after
