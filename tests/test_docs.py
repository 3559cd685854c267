"""The documentation runs: docs/callbacks.md as one program, and the seed walk-through.

Every ```python block of the page is executed in order in one namespace; the
stdout of each block must equal the ```text block that directly follows it
(or be empty when none follows), compared after stripping trailing whitespace.
Other fences (plain ``` blocks) are illustrations and are not run.
"""
import contextlib
import io
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "callbacks.md"
SEED = REPO.parent / "shared" / "seed" / "callbacks.py"

SEED_LINES = [
    "4 solves, 4 adjoint solves",
    "error below 1e-12: True",
    "8 solves, 8 adjoint solves",
]


def fenced_blocks(text):
    """[(language, first line number, source)] for each fenced block, in order."""
    blocks, lang, start, body = [], None, 0, []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if lang is None:
                lang, start, body = line[3:].strip() or "plain", number + 1, []
            else:
                blocks.append((lang, start, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    assert lang is None, f"{PAGE.name}: the fence opened at line {start - 1} is never closed"
    return blocks


def programs_with_output(blocks):
    """[(line, source, expected stdout)] pairing each python block with a following text block."""
    pairs = []
    for i, (lang, line, source) in enumerate(blocks):
        if lang == "text":
            assert i > 0 and blocks[i - 1][0] == "python", (
                f"{PAGE.name}: the text block at line {line} does not follow a python block")
        if lang == "python":
            follows = blocks[i + 1] if i + 1 < len(blocks) else None
            expected = follows[2] if follows is not None and follows[0] == "text" else ""
            pairs.append((line, source, expected))
    return pairs


def _normalize(out):
    return "\n".join(line.rstrip() for line in out.rstrip().splitlines())


def test_callbacks_page_runs_and_prints_what_it_shows():
    pairs = programs_with_output(fenced_blocks(PAGE.read_text()))
    assert pairs, f"{PAGE.name} has no python blocks"
    namespace = {"__name__": "docs_callbacks"}
    printed = []
    for line, source, expected in pairs:
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            exec(compile(source, f"{PAGE}:{line}", "exec"), namespace)
        assert _normalize(stdout.getvalue()) == _normalize(expected), (
            f"{PAGE.name}: the python block at line {line} printed something other than "
            f"the text block after it")
        printed += _normalize(stdout.getvalue()).splitlines()
    assert printed == SEED_LINES


def test_seed_walkthrough_prints_its_three_lines():
    if not SEED.is_file():
        pytest.skip(f"seed walk-through not found at {SEED} (it lives in the project's "
                    f"shared/ folder next to the repository); docs/callbacks.md is still tested")
    done = subprocess.run([sys.executable, str(SEED)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == SEED_LINES
