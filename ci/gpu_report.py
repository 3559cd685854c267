"""ci/gpu-check's summary: gpu-check.json and gpu-check.md from the parts' reports.

    python ci/gpu_report.py OUT part=exit_code ...

A test part's count comes from its junit report against the number of tests it
selected (written at collection): tests a time limit cut before they reported
count as failed, so a cut run can never read as green. The exit status is 0
only when every part exited 0 and nothing failed or went missing.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

TEST_PARTS = ("cuda-tests", "jit-op-table", "eager-op-table")


def _outcome(case):
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "skipped" if case.find("skipped") is not None else "passed"


def test_part(out, name):
    """(cases, selected): the part's reported cases, and how many it selected (None: unknown)."""
    cases = []
    try:
        for case in ET.parse(os.path.join(out, f"{name}.xml")).iter("testcase"):
            cases.append({"part": name, "test": f"{case.get('classname')}::{case.get('name')}",
                          "outcome": _outcome(case), "seconds": float(case.get("time") or 0)})
    except (OSError, ET.ParseError):
        pass
    try:
        with open(os.path.join(out, f"{name}.selected")) as f:
            selected = int(f.read())
    except (OSError, ValueError):
        selected = None
    missing = (selected - len(cases)) if selected is not None else (0 if cases else 1)
    if missing > 0:
        cases.append({"part": name, "test": f"{name}: {missing} selected test(s) never reported",
                      "outcome": "failed", "seconds": 0.0, "count": missing,
                      "note": "cut by the part's time limit, or the part did not start"})
    elif not any(c["outcome"] == "passed" for c in cases):
        # every test skipped (no GPU seen by the tests, no NVRTC headers): nothing was checked
        cases.append({"part": name, "test": f"{name}: no test passed (all {len(cases)} skipped)",
                      "outcome": "failed", "seconds": 0.0})
    return cases, selected


def summarize(out, exit_codes):
    cases, selected = [], {}
    for name in TEST_PARTS:
        part_cases, selected[name] = test_part(out, name)
        cases += part_cases
    summary = {k: sum(c.get("count", 1) for c in cases if c["outcome"] == k) for k in ("passed", "failed", "skipped")}
    smoke = _json(os.path.join(out, "smoke.json"), [])
    benches = _json(os.path.join(out, "bench.json"), [])
    report = {"exit_codes": exit_codes, "summary": summary, "selected": selected, "smoke": smoke,
              "tests": cases, "benches": benches, "device": _text(os.path.join(out, "device.txt"))}
    ok = all(rc == 0 for rc in exit_codes.values()) and summary["failed"] == 0
    return report, ok


def markdown(out, report):
    s = report["summary"]
    codes = ", ".join(f"{k} {v}" for k, v in report["exit_codes"].items())
    lines = [f"{s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped; exit codes: {codes}", "",
             "| smoke check | outcome | s | output |", "|---|---|---|---|"]
    lines += [f"| {c['check']} | {c['outcome']} | {c['seconds']} | {c['tail'][-200:]} |" for c in report["smoke"]]
    lines.append("")
    bench = _text(os.path.join(out, "bench.md"))
    if bench:
        lines += [bench, ""]
    lines += ["| test | outcome | s |", "|---|---|---|"]
    lines += [f"| {c['test']} | {c['outcome']} | {c['seconds']:.2f} |" for c in report["tests"]]
    return "\n".join(lines) + "\n"


def _json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def _text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def main(argv):
    out, parts = argv[0], argv[1:]
    exit_codes = {k: int(v) for k, v in (p.split("=", 1) for p in parts)}
    report, ok = summarize(out, exit_codes)
    with open(os.path.join(out, "gpu-check.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(out, "gpu-check.md"), "w") as f:
        f.write(markdown(out, report))
    s = report["summary"]
    print(f"gpu-check: {s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped; "
          f"smoke failures {sum(c['outcome'] == 'FAIL' for c in report['smoke'])}; "
          f"exit codes {exit_codes}: {'OK' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
