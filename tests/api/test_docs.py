"""The documentation runs: every page of docs/ as one program each, and the seed walk-through.

Every ```python block of a page is executed in order in one namespace; the
stdout of each block must equal the ```text block that directly follows it
(or be empty when none follows), compared after stripping trailing whitespace.
Other fences (plain ``` blocks) are illustrations and are not run.
"""
import contextlib
import io
import pathlib
import runpy

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]   # the repository
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
    # run as `python callbacks.py` runs it, in this process (runpy: no interpreter start-up)
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        runpy.run_path(str(SEED), run_name="__main__")
    assert stdout.getvalue().splitlines() == SEED_LINES


# ---------------------------------------------------------------- README: jit on methods, as in JAX

def _traces_of(call):
    """How many traces `call()` made."""
    import rune
    before = rune.stats()["traces"]
    call()
    return rune.stats()["traces"] - before


def test_readme_jit_on_a_method_with_static_self_keys_the_cache_by_the_object():
    import functools

    import numpy as np

    import rune
    from rune import nx

    class Scale:
        def __init__(self, k):
            self.k = k

        @functools.partial(rune.jit, static_argnums=0)
        def __call__(self, x):
            return x * self.k

    x = nx.array([1.0, 2.0])
    twice = Scale(2.0)
    assert _traces_of(lambda: np.testing.assert_array_equal(twice(x), [2.0, 4.0])) == 1
    assert _traces_of(lambda: twice(x)) == 0
    # Hashed by identity (the class defines no __hash__): an equal-valued object traces
    # anew, and the same object after a change of attribute replays the old trace.
    assert _traces_of(lambda: Scale(2.0)(x)) == 1
    twice.k = 5.0
    np.testing.assert_array_equal(twice(x), [2.0, 4.0])


def test_readme_jit_on_a_method_of_a_registered_pytree_traces_its_fields():
    import dataclasses

    import numpy as np

    import rune
    from rune import nx

    @dataclasses.dataclass
    class Affine:
        w: object
        b: object

        @rune.jit
        def __call__(self, x):
            return x * self.w + self.b

    rune.tree.register(Affine)
    x = nx.array([1.0, 2.0])
    assert _traces_of(lambda: np.testing.assert_array_equal(Affine(nx.array(2.0), 1.0)(x), [3.0, 5.0])) == 1
    # New field values of the same shapes are arguments, not constants: no retrace.
    assert _traces_of(lambda: np.testing.assert_array_equal(Affine(nx.array(3.0), 0.0)(x), [3.0, 6.0])) == 0


def test_readme_jit_on_a_method_of_a_plain_or_unhashable_self_is_a_clear_error():
    import dataclasses
    import functools

    import rune
    from rune import nx

    class Plain:
        k = 2.0

        @rune.jit
        def __call__(self, x):
            return x * self.k

    @dataclasses.dataclass
    class Unhashable:   # eq=True sets __hash__ to None
        k: float

        @functools.partial(rune.jit, static_argnums=0)
        def __call__(self, x):
            return x * self.k

    x = nx.array([1.0, 2.0])
    with pytest.raises(rune.DTypeError, match=r"args\[0\] has type Plain.*static.*rune\.tree\.register"):
        Plain()(x)
    with pytest.raises(rune.ArgumentError, match=r"static arguments must be hashable, and args\[0\] is not .*Unhashable.*__hash__"):
        Unhashable(2.0)(x)
