"""rune.nx covers every NumPy callable jax.numpy has, but those EXCLUDED with a reason
(tests/api/numpy_surface.py), and nx.linalg every name of jax.numpy.linalg."""
import inspect

import numpy as np

from rune import nx

from numpy_surface import EXCLUDED, JAX_LINALG, JAX_NUMPY


def _public_callables(module):
    return {n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))
            and not inspect.ismodule(getattr(module, n))}


def test_every_numpy_callable_jax_numpy_has_is_in_nx_or_excluded_with_a_reason():
    wanted = (_public_callables(np) & JAX_NUMPY) - set(EXCLUDED)
    missing = sorted(n for n in wanted if not hasattr(nx, n))
    assert not missing, f"{len(missing)} of NumPy's callables jax.numpy has are missing from rune.nx: {missing}"
    listed = sorted(n for n in wanted if n not in nx.__all__)
    assert not listed, f"present but not in rune.nx.__all__: {listed}"


def test_the_exclusions_are_real_and_stay_out():
    assert set(EXCLUDED) <= JAX_NUMPY   # each is a name a JAX user could reach for
    assert all(EXCLUDED.values())
    assert not set(EXCLUDED) & set(nx.__all__), "an excluded name is public: take it off EXCLUDED"


def test_linalg_has_every_name_of_jax_numpy_linalg():
    missing = sorted(n for n in JAX_LINALG if not hasattr(nx.linalg, n))
    assert not missing, f"missing from rune.nx.linalg: {missing}"


def test_public_namespaces_list_only_public_names():
    for space in (nx, nx.linalg, nx.fft, nx.random):
        private = [n for n in dir(space) if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))]
        assert not private, f"dir({space.__name__}) lists private names: {private}"


def test_docs_numpy_lists_every_function_of_each_family():
    import pathlib
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "numpy.md").read_text()
    for family in nx._NUMPY_FAMILIES:
        missing = [n for n in family.__all__ if f"`{n}`" not in page]
        assert not missing, f"docs/numpy.md does not list {family.__name__}'s {missing}"
