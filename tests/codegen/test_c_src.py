"""The C helper text of the kernels' preludes lives in rune/codegen/c_src/ as C files:
they ship with the package, and the preludes made from them are whole C (no template
placeholder or reader's note left in)."""
import fnmatch
import pathlib

import pytest

import rune
from rune.codegen import helpers
from rune.codegen.c import CDialect
from rune.codegen.cuda import CudaDialect

CODEGEN = pathlib.Path(rune.__file__).parent / "codegen"
PYPROJECT = CODEGEN.parent.parent / "pyproject.toml"


def test_every_c_file_is_package_data():
    tomllib = pytest.importorskip("tomllib")
    if not PYPROJECT.exists():
        pytest.skip("an installed rune: no pyproject.toml beside it")
    globs = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["rune.codegen"]
    files = sorted(p.relative_to(CODEGEN).as_posix() for p in (CODEGEN / "c_src").iterdir())
    assert files, "rune/codegen/c_src holds no files"
    missing = [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert not missing, f"pyproject.toml's package-data for rune.codegen ({globs}) leaves out {missing}"


@pytest.mark.parametrize("dialect", [CDialect(), CudaDialect()], ids=["CDialect", "CudaDialect"])
def test_the_prelude_is_filled_in_and_free_of_notes(dialect):
    text = dialect.prelude()
    assert "${" not in text
    assert not [line for line in text.splitlines() if line.startswith("// ")]
    # one definition of each helper family per C type
    for t in ("float", "double", "int8", "int16", "int32", "int64", "uint8", "uint64"):
        assert text.count(f" rn_floordiv_{t}(") == 1, t
    for s in ("rn_c64", "rn_c128"):
        assert text.count(f"typedef struct {{ {'float' if s == 'rn_c64' else 'double'} re, im; }} {s};") == 1


def test_read_drops_only_the_leading_notes():
    text = helpers.read("float_divmod.h")
    assert text.startswith("/* NumPy's npy_divmod")
    assert "${t}" in text and "${ln2}" in text   # a template until instantiated
    filled = helpers.instantiate(text, t="double", s="", ln2="((double)0x1.62e42fefa39efp-1)")
    assert "RN_FN double rn_logaddexp_double(double a, double b) {" in filled
    with pytest.raises(KeyError):
        helpers.instantiate(text, t="double", s="")
