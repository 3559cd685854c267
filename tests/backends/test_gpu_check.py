"""ci/gpu-check without a GPU, and its summary's counting of cut runs."""
import importlib.util
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]   # the repository


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_report = _load("gpu_report")


def _gpu_visible():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.mark.skipif(_gpu_visible(), reason="checks what a machine without a GPU gets")
def test_gpu_check_without_a_gpu_fails_at_once_and_loudly(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "ci" / "gpu-check")], capture_output=True, text=True,
                          env=dict(os.environ, OUT=str(tmp_path)), timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "gpu-check: FAILED: no usable NVIDIA GPU" in done.stderr
    assert not (tmp_path / "cuda-tests.xml").exists()   # no part ran


def _junit(path, outcomes):
    cases = "".join(f'<testcase classname="t" name="n{i}" time="0.1">{body}</testcase>'
                    for i, body in enumerate({"passed": "", "failed": "<failure/>", "skipped": "<skipped/>"}[o]
                                             for o in outcomes))
    path.write_text(f'<testsuites><testsuite name="pytest">{cases}</testsuite></testsuites>')


def _parts(tmp_path, reported, selected):
    for name in gpu_report.TEST_PARTS:
        _junit(tmp_path / f"{name}.xml", reported)
        (tmp_path / f"{name}.selected").write_text(str(selected))
    (tmp_path / "device.txt").write_text("cuda:0\n")
    return {"smoke": 0, **{name: 0 for name in gpu_report.TEST_PARTS}, "bench": 0}


def test_a_part_cut_by_its_time_limit_counts_its_unreported_tests_as_failed(tmp_path):
    codes = _parts(tmp_path, ["passed", "passed", "skipped"], selected=5)
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 1
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert report["summary"] == {"passed": 6, "failed": 6, "skipped": 3}   # 2 never reported, in each of 3 parts
    assert "2 selected test(s) never reported" in (tmp_path / "gpu-check.md").read_text()


def test_a_part_whose_tests_all_skipped_checked_nothing_and_fails(tmp_path):
    codes = _parts(tmp_path, ["skipped", "skipped"], selected=2)
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 1
    assert "no test passed (all 2 skipped)" in (tmp_path / "gpu-check.md").read_text()


def test_a_complete_green_run_is_green_and_a_failing_exit_code_is_not(tmp_path):
    codes = _parts(tmp_path, ["passed", "skipped"], selected=2)
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 0
    codes["bench"] = 2
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 1
    os.remove(tmp_path / "jit-op-table.xml")       # a part that never started
    os.remove(tmp_path / "jit-op-table.selected")
    codes["bench"] = 0
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 1


def _bench(tmp_path, records):
    (tmp_path / "bench.json").write_text(json.dumps(records))


PLAN = {"case": "device-to-device copy", "GBps": 2000.0, "cases": ["W1 chain", "MLP step"]}


def test_a_bench_cut_by_its_limit_counts_when_rune_has_a_figure_for_every_case(tmp_path):
    codes = _parts(tmp_path, ["passed"], selected=1)
    codes["bench"] = 124
    _bench(tmp_path, [PLAN, {"case": "W1 chain", "us": {"rune": 900.0, "torch": 950.0}},
                      {"case": "MLP step", "us": {"rune": 300.0}, "partial": True}])   # cut in torch.compile
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 0
    assert "bench cut by its time limit (exit 124)" in (tmp_path / "gpu-check.md").read_text()
    _bench(tmp_path, [PLAN, {"case": "W1 chain", "us": {"rune": 900.0}}])               # cut inside rune's MLP
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 1
    codes["bench"] = 1                                                                 # failed, not cut
    _bench(tmp_path, [PLAN, {"case": "W1 chain", "us": {"rune": 9.0}}, {"case": "MLP step", "us": {"rune": 3.0}}])
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 1


# bench/gpu.py without JAX and PyTorch (blocked: importing them takes seconds) and
# without a GPU: its deadline logic and what it writes before a peer runs.
_BENCH_DEADLINE = """
import json, os, sys, time
sys.modules["jax"] = sys.modules["torch"] = None
from bench import gpu
path = sys.argv[1]
now, gpu.time.time = gpu.time.time, lambda: 1_700_000_000.0   # a fixed clock: the check is of the arithmetic
os.environ[gpu.DEADLINE_ENV] = "1700000090.5"
assert gpu.seconds_left() == 90.5                # the variable is read as a Unix time
gpu.time.time = now
del os.environ[gpu.DEADLINE_ENV]
assert gpu.seconds_left() is None                # no variable: no deadline
gpu.seconds_left = lambda: 30.0                  # then a fixed time left, whatever this machine's speed
seen, called = [], []

def fake_case(copy_bw):
    times = {"rune": 2e-6}
    def jax_peer():          # 12 s needed, 30 left: measured, after rune's figure is on disk
        with open(path) as f:
            seen.append(json.load(f)[-1])
        called.append("jax.jit")
        return 1e-6
    gpu.guarded(times, "jax.jit", jax_peer)
    gpu.guarded(times, "torch", lambda: called.append("torch"), need=gpu.PEER_SECONDS["torch.compile"])
    return gpu.Row("fake", "per call", times)

gpu.CASES = (("fake", fake_case),)
def report(records):
    with open(path, "w") as f:
        json.dump(records, f)
rows, records = gpu.measure(report)
print(json.dumps({"seen": seen, "called": called, "records": records, "md": gpu.markdown(records)}))
"""


def test_the_bench_skips_a_peer_that_could_run_past_its_deadline_and_keeps_runes_figure(tmp_path):
    import sys
    done = subprocess.run([sys.executable, "-c", _BENCH_DEADLINE, str(tmp_path / "bench.json")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["called"] == ["jax.jit"]                                  # torch.compile's 60 s did not fit
    assert out["seen"] == [{"case": "fake", "us": {"rune": 2.0}, "partial": True}]
    copy, fake = out["records"]
    assert copy["cases"] == ["fake"]
    assert fake["us"] == {"rune": 2.0, "jax.jit": 1.0} and "partial" not in fake
    assert fake["library_errors"]["torch"].startswith("skipped: needs up to 60 s, ")
    assert "torch skipped: needs up to 60 s" in out["md"]
