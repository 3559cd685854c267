"""The documentation runs: every page of docs/ as one program each, and the seed walk-through.

Every ```python block of a page is executed in order in one namespace; the
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
PAGES = sorted((REPO / "docs").glob("*.md"))
SEED = REPO.parent / "shared" / "seed" / "callbacks.py"

SEED_LINES = [
    "4 solves, 4 adjoint solves",
    "error below 1e-12: True",
    "8 solves, 8 adjoint solves",
]


def fenced_blocks(text, page=PAGE):
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
    assert lang is None, f"{page.name}: the fence opened at line {start - 1} is never closed"
    return blocks


def programs_with_output(blocks, page=PAGE):
    """[(line, source, expected stdout)] pairing each python block with a following text block."""
    pairs = []
    for i, (lang, line, source) in enumerate(blocks):
        if lang == "text":
            assert i > 0 and blocks[i - 1][0] == "python", (
                f"{page.name}: the text block at line {line} does not follow a python block")
        if lang == "python":
            follows = blocks[i + 1] if i + 1 < len(blocks) else None
            expected = follows[2] if follows is not None and follows[0] == "text" else ""
            pairs.append((line, source, expected))
    return pairs


def _normalize(out):
    return "\n".join(line.rstrip() for line in out.rstrip().splitlines())


def run_page(page):
    """Run every python block of `page` in one namespace, checking each one's
    stdout against the text block after it; returns all the lines printed."""
    pairs = programs_with_output(fenced_blocks(page.read_text(), page), page)
    assert pairs, f"{page.name} has no python blocks"
    namespace = {"__name__": "docs_" + page.stem.replace("-", "_")}
    printed = []
    for line, source, expected in pairs:
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            exec(compile(source, f"{page}:{line}", "exec"), namespace)
        assert _normalize(stdout.getvalue()) == _normalize(expected), (
            f"{page.name}: the python block at line {line} printed something other than "
            f"the text block after it:\n{stdout.getvalue()}")
        printed += _normalize(stdout.getvalue()).splitlines()
    return printed


def test_callbacks_page_runs_and_prints_what_it_shows():
    assert run_page(PAGE) == SEED_LINES


@pytest.mark.parametrize("page", [p for p in PAGES if p != PAGE], ids=lambda p: p.name)
def test_every_page_runs_and_prints_what_it_shows(page):
    run_page(page)


def test_seed_walkthrough_prints_its_three_lines():
    if not SEED.is_file():
        pytest.skip(f"seed walk-through not found at {SEED} (it lives in the project's "
                    f"shared/ folder next to the repository); docs/callbacks.md is still tested")
    done = subprocess.run([sys.executable, str(SEED)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == SEED_LINES
