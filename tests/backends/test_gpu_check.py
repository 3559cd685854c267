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


def test_the_time_limits_add_up_to_less_than_one_device_command():
    """The parts' `timeout`s, kill grace included, fit a device command's 600 s, so the summary is
    always written; the expected times the header promises add up to about 7 minutes."""
    import re
    text = (ROOT / "ci" / "gpu-check").read_text()
    direct = [(int(k or 0), int(t)) for k, t in re.findall(r"timeout (?:-k (\d+) )?(\d+) python", text)]
    grace = int(re.search(r"timeout -s INT -k (\d+)", text).group(1))
    parts = [(grace, int(t)) for t in re.findall(r"run_part [\w-]+ (\d+)", text)]
    assert len(direct) == 3 and len(parts) == 3
    assert sum(k + t for k, t in direct + parts) < 600
    expected = [int(n) for n in re.findall(r"^#   [\w-]+ +~(\d+) s", text, re.M)]
    assert len(expected) == 6 and sum(expected) <= 420


def test_a_complete_green_run_is_green_and_a_failing_exit_code_is_not(tmp_path):
    codes = _parts(tmp_path, ["passed", "skipped"], selected=2)
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 0
    codes["bench"] = 2
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 1
    os.remove(tmp_path / "jit-op-table.xml")       # a part that never started
    os.remove(tmp_path / "jit-op-table.selected")
    codes["bench"] = 0
    assert gpu_report.main([str(tmp_path), *(f"{k}={v}" for k, v in codes.items())]) == 1
