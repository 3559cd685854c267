"""ci/gpu-check's summary: gpu-check.json and gpu-check.md from the parts' reports.

    python ci/gpu_report.py OUT part=exit_code ...

A test part's count comes from its junit report against the number of tests it
selected (written at collection): tests a time limit cut before they reported
count as failed, so a cut run can never read as green. The exit status is 0
only when every part exited 0 and nothing failed or went missing, but for a bench
cut by its time limit (exit 124 or 137 from `timeout`) that still wrote rune's
figure for every case it planned: only a peer library's figure was lost then.
"""
import json
import os
import sys
import xml.etree.ElementTree as ET

TEST_PARTS = ("cuda-tests", "jit-op-table", "eager-op-table")
CUT = (124, 137)   # `timeout`'s exit status at the limit, and after its KILL


def rune_rows_missing(benches):
    """The cases bench/gpu.py planned (listed in its first record) that have no figure of
    rune's in `benches`; None when the plan is not known."""
    planned = next((r["cases"] for r in benches if "cases" in r), None)
    if planned is None:
        return None
    measured = {r["case"] for r in benches if "rune" in r.get("us", {})}
    return [c for c in planned if c not in measured]


def accepted_codes(exit_codes, benches):
    """The exit codes that count: a bench cut by its limit with rune's rows all present counts as 0."""
    codes = dict(exit_codes)
    if codes.get("bench") in CUT and rune_rows_missing(benches) == []:
        codes["bench"] = 0
    return codes


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
    counted = accepted_codes(exit_codes, benches)
    if counted != exit_codes:
        report["bench_note"] = (f"bench cut by its time limit (exit {exit_codes['bench']}) with rune's figure "
                                f"for every case: accepted; peers' figures may be missing")
    ok = all(rc == 0 for rc in counted.values()) and summary["failed"] == 0
    return report, ok


def markdown(out, report):
    s = report["summary"]
    codes = ", ".join(f"{k} {v}" for k, v in report["exit_codes"].items())
    lines = [f"{s['passed']} passed, {s['failed']} failed, {s['skipped']} skipped; exit codes: {codes}", "",
             *([report["bench_note"], ""] if "bench_note" in report else []),
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
