"""Every module of rune imports by its dotted path after `import rune`: no
function or attribute of a package stands in the way of a submodule of the same
name (as the function `rune.jit` once hid the compiler package), and every
source file is a module `pkgutil` finds (a folder without __init__.py is not).

The imports run in a fresh interpreter, one for all modules, so that what this
test session already imported cannot hide a failure.
"""
import importlib.util
import json
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(importlib.util.find_spec("rune").origin).parent

# Packages rune imports only when they are there (CUDA, MPI, plotting). A module
# that needs one may fail to import where it is missing, and only then.
OPTIONAL = {"cupy", "cupyx", "cuda", "nvidia", "mpi4py", "matplotlib"}

_IMPORT_EACH = r"""
import importlib.util, json, pkgutil, sys
import rune

names = sorted(m.name for m in pkgutil.walk_packages(rune.__path__, "rune."))
failed, lacking = {}, {}
for name in names:
    try:
        # `as` walks the dotted path by attribute, as code using the module does.
        exec(f"import {name} as _module")
    except ModuleNotFoundError as e:
        top = (e.name or "").partition(".")[0]
        if top != "rune" and importlib.util.find_spec(top) is None:
            lacking[name] = top  # a third-party package this machine lacks
        else:
            failed[name] = f"ModuleNotFoundError: {e}"
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"
print(json.dumps({"names": names, "failed": failed, "lacking": lacking}))
"""


def _import_each():
    run = subprocess.run([sys.executable, "-c", _IMPORT_EACH], cwd=PACKAGE.parent, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def _modules_on_disk():
    names = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) > 1:  # `rune` itself is what walk_packages walks
            names.add(".".join(parts))
    return names


def test_every_module_imports_by_its_dotted_path():
    found = _import_each()
    assert found["failed"] == {}, found["failed"]
    assert set(found["lacking"].values()) <= OPTIONAL, found["lacking"]
    assert set(found["names"]) == _modules_on_disk(), \
        f"not found by pkgutil (a folder without __init__.py?): {sorted(_modules_on_disk() - set(found['names']))}"


def test_a_shadowed_package_is_reported(tmp_path):
    # The check itself, on a made-up package whose __init__ binds a function to
    # the name of its subpackage `run` (as rune's did with `jit`), which breaks
    # `import shadowed.run.step as step`.
    package = tmp_path / "shadowed"
    (package / "run").mkdir(parents=True)
    (package / "__init__.py").write_text("from . import run as _run\n\n\ndef run():\n    pass\n")
    (package / "run" / "__init__.py").write_text("")
    (package / "run" / "step.py").write_text("")
    script = _IMPORT_EACH.replace("import rune", "import shadowed as rune").replace('"rune."', '"shadowed."')
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    failed = json.loads(run.stdout.strip().splitlines()[-1])["failed"]
    assert list(failed) == ["shadowed.run.step"], failed
