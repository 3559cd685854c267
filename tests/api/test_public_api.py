"""The public surface: `__all__` of rune, rune.nx and its submodules, what `dir()`
shows, and a docstring for every public function (a one-line summary, then
every argument by name)."""
import inspect
import re
import types

import numpy as np
import pytest

import rune
from rune import nx

SUBMODULES = {"linalg": nx.linalg, "fft": nx.fft, "random": nx.random}
NAMESPACES = {"nx": nx, **{f"nx.{name}": module for name, module in SUBMODULES.items()}}

# Every name section 1.1 of the design lists for rune.nx (and 1.4's conv and
# reduce_window), by group.
PUBLIC_NX = {
    "array and submodules": "Array from_dlpack place linalg fft random",
    "dtypes": "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64 "
              "complex64 complex128",
    "creation": "array asarray scalar create zeros ones full zeros_like ones_like full_like arange linspace eye",
    "elementwise": "exp log log1p expm1 sqrt rsqrt sin cos tan tanh sinh cosh asin acos atan atan2 erf sigmoid "
                   "floor ceil round sign abs clip maximum minimum where isnan isfinite "
                   "add subtract multiply divide floor_divide remainder power negative",
    "comparisons, logical, bitwise": "equal not_equal less less_equal greater greater_equal logical_and "
                                     "logical_or logical_xor logical_not bitwise_and bitwise_or bitwise_xor "
                                     "invert left_shift right_shift",
    "casts and reductions": "cast astype sum mean prod max min argmax argmin any all var std logsumexp",
    "shapes": "reshape transpose expand_dims squeeze broadcast_to concatenate stack split flip pad take "
              "dynamic_slice dynamic_update_slice",
    "products and softmax": "matmul dot einsum outer softmax log_softmax",
    "training": "conv reduce_window",
}
PUBLIC_RANDOM = "key split fold_in uniform normal bernoulli randint"


def _public_callables():
    """(qualified name, function) for every public function of rune.nx and its submodules."""
    out = []
    for prefix, module in NAMESPACES.items():
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value) and not isinstance(value, (type, types.ModuleType)):
                out.append((f"{prefix}.{name}", value))
    return out


def _mentions(doc, word):
    return re.search(rf"(?<![\w.]){re.escape(word)}(?!\w)", doc) is not None


@pytest.mark.parametrize("module", [rune, nx, *SUBMODULES.values()], ids=lambda m: m.__name__)
def test_every_name_in_all_resolves_once(module):
    assert len(set(module.__all__)) == len(module.__all__), "a name is listed twice"
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names what it lacks: {missing}"


@pytest.mark.parametrize("module", [rune, nx], ids=lambda m: m.__name__)
def test_all_holds_every_public_name_of_the_namespace(module):
    # Internal modules (ops, creation, dtypes, autodiff, ...) are the only public-looking names left out.
    left_out = [name for name, value in vars(module).items() if not name.startswith("_")
                and name not in module.__all__ and not isinstance(value, types.ModuleType)]
    assert not left_out, f"public in {module.__name__} but not in its __all__: {left_out}"


@pytest.mark.parametrize("name", sorted(SUBMODULES))
def test_submodule_all_holds_every_function_defined_there(name):
    module = SUBMODULES[name]
    left_out = [n for n, value in vars(module).items()
                if not n.startswith("_") and inspect.isfunction(value) and value.__module__ == module.__name__
                and n not in module.__all__]
    assert not left_out, f"functions of {module.__name__} not in its __all__: {left_out}"


def test_nx_all_lists_the_designed_api():
    for group, names in PUBLIC_NX.items():
        missing = [name for name in names.split() if name not in nx.__all__]
        assert not missing, f"nx.__all__ lacks the design's {group}: {missing}"
    missing = [name for name in PUBLIC_RANDOM.split() if name not in nx.random.__all__]
    assert not missing, f"nx.random.__all__ lacks {missing}"
    assert {"linalg", "fft", "random"} <= set(nx.__all__)
    # The Array API namespace's own entries are public too.
    assert {"__array_api_version__", "__array_namespace_info__", "e", "pi", "inf", "nan", "newaxis"} <= set(
        nx.__all__)


def test_dir_shows_the_public_api_and_no_internal_modules():
    shown = dir(nx)
    assert set(nx.__all__) <= set(shown)
    modules = {name for name in shown if isinstance(getattr(nx, name), types.ModuleType)}
    assert modules == {"linalg", "fft", "random"}
    assert not [name for name in shown if name.startswith("_") and not name.startswith("__")]
    modules = {name for name in dir(rune) if isinstance(getattr(rune, name), types.ModuleType)}
    assert modules <= {"nx", "nn", "optim", "data", "debug", "metrics", "distributed", "tree"}, modules
    assert set(rune.__all__) <= set(dir(rune))


def test_internal_modules_stay_importable_by_path():
    # Hidden from dir(), not removed: rune's own code imports them by their dotted paths.
    from rune.nx import creation, ops  # noqa: F401
    from rune.core import dtypes
    import rune.nx.array_api
    assert rune.nx.ops.add is nx.add and rune.nx.array_api.asarray is nx.asarray
    assert callable(creation.zeros) and dtypes.float32 == nx.float32


@pytest.mark.parametrize("name,function", _public_callables(), ids=lambda v: v if isinstance(v, str) else "")
def test_public_function_has_a_summary_line_and_names_its_arguments(name, function):
    doc = inspect.getdoc(function)
    assert doc, f"{name} has no docstring"
    lines = doc.splitlines()
    assert lines[0].strip() and lines[0].rstrip().endswith("."), (
        f"{name}: the docstring's first line is not a one-line sentence: {lines[0]!r}")
    assert len(lines) == 1 or not lines[1].strip(), f"{name}: the summary runs past its first line"
    parameters = inspect.signature(function).parameters.values()
    unnamed = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               and not _mentions(doc, p.name)]
    assert not unnamed, f"{name}{inspect.signature(function)}: the docstring never names {unnamed}"


def test_the_docstring_check_catches_a_missing_argument():
    def scale(x, factor):
        """`x` scaled.

        x: an array."""
    assert not _mentions(inspect.getdoc(scale), "factor")
    assert _mentions("x: an array.", "x") and not _mentions("max(x)", "a")
    assert not _mentions("np.sum(y)", "sum") and _mentions("dtype= and", "dtype")


def test_dtypes_in_all_are_numpy_dtypes_or_scalar_types():
    for name in PUBLIC_NX["dtypes"].split():
        assert np.dtype(getattr(nx, name)).name in (name, "bool"), name
