"""rune's tuning constants live in one place (rune/base/tuning.py): each is
explained by the comment above it and read by the module it tunes, and no
module defines its own number for one of them."""
import ast
import pathlib
import re

import rune.base.tuning as tuning

ROOT = pathlib.Path(tuning.__file__).parents[1]


def _constants():
    tree = ast.parse(pathlib.Path(tuning.__file__).read_text())
    return [(n.targets[0].id, n.lineno) for n in tree.body if isinstance(n, ast.Assign)]


def test_every_constant_says_why_above_it():
    lines = pathlib.Path(tuning.__file__).read_text().splitlines()
    for name, lineno in _constants():
        above = lineno - 2
        while above >= 0 and re.match(r"[A-Z_]+ = ", lines[above]):   # a group shares its comment
            above -= 1
        assert lines[above].startswith("#") and not lines[above].startswith("# ----"), name


def test_every_constant_is_read_by_the_module_it_tunes():
    sources = {p: p.read_text() for p in ROOT.rglob("*.py") if p.name != "tuning.py"}
    for name, _ in _constants():
        readers = [p for p, text in sources.items() if re.search(rf"from [.\w]*tuning import [^\n]*\b{name}\b", text)
                   or re.search(rf"from [.\w]*tuning import \([^)]*\b{name}\b", text)]
        assert readers, f"{name} is defined in rune/base/tuning.py but no module imports it"
