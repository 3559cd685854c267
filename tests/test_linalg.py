"""nx.linalg beyond the op table: errors for users, and what has no derivative yet."""
import numpy as np
import pytest

import rune
from rune import nx


def test_svd_and_qr_say_they_have_no_derivative_but_svdvals_does():
    a = nx.asarray(np.arange(6.0).reshape(2, 3) + np.eye(2, 3))
    with pytest.raises(rune.NotDifferentiableError, match="linalg_svd"):
        rune.grad(lambda x: nx.sum(nx.linalg.svd(x, full_matrices=False).U))(a)
    with pytest.raises(rune.NotDifferentiableError, match="linalg_qr"):
        rune.grad(lambda x: nx.sum(nx.linalg.qr(x).R))(a)
    np.testing.assert_allclose(rune.grad(lambda x: nx.sum(nx.linalg.svdvals(x)))(a),
                               sum(np.outer(u, v) for u, v in zip(*(lambda u, s, vh: (u.T, vh))(
                                   *np.linalg.svd(np.asarray(a), full_matrices=False)))), rtol=1e-9)


def test_shape_errors_name_the_function():
    with pytest.raises(rune.ShapeError, match="linalg.inv: expected square matrices"):
        nx.linalg.inv(nx.zeros((2, 3)))
    with pytest.raises(rune.ShapeError, match="linalg.det: expected a stack of matrices"):
        nx.linalg.det(nx.zeros((3,)))
    with pytest.raises(rune.ShapeError, match="linalg.solve"):
        nx.linalg.solve(nx.eye(3), nx.zeros((4,)))


def test_singular_matrices_give_nan_not_an_exception():
    out = nx.linalg.inv(nx.zeros((2, 2)))
    assert np.isnan(np.asarray(out)).all()
    assert float(nx.linalg.det(nx.zeros((2, 2)))) == 0.0


@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_modes_match_numpy(mode):
    a = np.random.default_rng(3).standard_normal((2, 5, 3))
    q, r = nx.linalg.qr(nx.asarray(a), mode=mode)
    want_q, want_r = np.linalg.qr(a, mode=mode)
    assert q.shape == want_q.shape and r.shape == want_r.shape
    np.testing.assert_allclose(np.abs(np.asarray(r)), np.abs(want_r), atol=1e-10)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a, atol=1e-10)
