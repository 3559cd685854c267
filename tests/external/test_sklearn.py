"""scikit-learn's array API dispatch accepts rune arrays: PCA fits on them and
matches its NumPy fit. Skipped without scikit-learn. Runs in a subprocess because
SciPy must see SCIPY_ARRAY_API=1 before it is first imported.

(Estimators that write into arrays — LinearDiscriminantAnalysis assigns
means[i, :] — cannot take rune's immutable arrays, as they cannot take JAX's.)
"""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]   # the repository

SCRIPT = r"""
import numpy as np, sklearn
from sklearn.decomposition import PCA
from rune import nx
rng = np.random.default_rng(0)
X = rng.standard_normal((40, 5)) * np.array([3.0, 2.0, 1.0, 0.5, 0.1])
ref = PCA(n_components=3, svd_solver="full").fit(X)
with sklearn.config_context(array_api_dispatch=True):
    pca = PCA(n_components=3, svd_solver="full").fit(nx.asarray(X))
    Z = pca.transform(nx.asarray(X))
assert isinstance(pca.components_, nx.Array) and isinstance(Z, nx.Array), type(Z)
np.testing.assert_allclose(np.asarray(pca.explained_variance_), ref.explained_variance_, rtol=1e-10)
np.testing.assert_allclose(np.asarray(pca.components_), ref.components_, rtol=1e-8, atol=1e-10)
np.testing.assert_allclose(np.asarray(Z), ref.transform(X), rtol=1e-8, atol=1e-10)
print("ok")
"""


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed")
def test_pca_fits_rune_arrays_like_numpy():
    env = dict(os.environ, SCIPY_ARRAY_API="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout[-2000:] + done.stderr[-4000:]
