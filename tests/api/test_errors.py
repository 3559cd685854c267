"""rune's public API against its documented public API (README, docs/): errors (1.4).

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import pytest

import rune
from rune import nx

from api_support import f32, f64, is_concrete, mentions_shape, stats


# ---------------------------------------------------------------- errors (1.4)

def test_shape_mismatch_error():
    with pytest.raises(rune.RuneError) as ei:
        nx.ones((3,)) + nx.ones((4,))
    e = ei.value
    assert isinstance(e, (ValueError, TypeError))
    m = str(e)
    assert mentions_shape(m, (3,)) and mentions_shape(m, (4,)), m
    assert "add" in m or "+" in m, m


def test_matmul_mismatch_error():
    with pytest.raises(rune.RuneError) as ei:
        nx.ones((2, 3)) @ nx.ones((4, 2))
    assert isinstance(ei.value, (ValueError, TypeError))
    assert "matmul" in str(ei.value) or "@" in str(ei.value)


def test_reshape_mismatch_error():
    with pytest.raises(rune.RuneError) as ei:
        nx.ones((6,)).reshape(4, 2)
    assert isinstance(ei.value, (ValueError, TypeError))
    m = str(ei.value)
    assert "reshape" in m and mentions_shape(m, (4, 2)), m


def test_bad_axis_error():
    with pytest.raises(rune.RuneError) as ei:
        nx.ones((2, 3)).sum(axis=5)
    assert isinstance(ei.value, (ValueError, IndexError))


def test_concatenate_mismatch_error():
    with pytest.raises(rune.RuneError) as ei:
        nx.concatenate([nx.ones((2, 3)), nx.ones((2, 4))])
    assert isinstance(ei.value, (ValueError, TypeError))


def test_bad_dtype_error():
    with pytest.raises(rune.RuneError) as ei:
        nx.zeros((2,), dtype="not_a_dtype")
    assert isinstance(ei.value, (TypeError, ValueError))


def test_failed_eager_op_leaves_stats_unchanged():
    nx.ones(2) + 1.0
    before = stats()
    with pytest.raises(rune.RuneError):
        nx.ones((3,)) + nx.ones((4,))
    assert stats() == before


def test_failed_jit_leaves_state_usable_and_counters_unchanged():
    before = stats()
    g = rune.jit(lambda x: float(x))
    with pytest.raises(rune.ConcretizationError):
        g(nx.array(1.0))
    assert stats() == before
    x = nx.sin(f32(1.0))
    assert is_concrete(x)
    assert float(nx.array(2.0)) == 2.0
    assert rune.jit(lambda v: v + 1.0)(f32(1.0)).tolist() == [2.0]


def test_failed_jit_retry_raises_again():
    g = rune.jit(lambda x: x.item())
    for _ in range(2):
        with pytest.raises(rune.ConcretizationError):
            g(nx.array(1.0))


def test_error_inside_grad_leaves_state_usable():
    def f(x):
        raise KeyError("user bug")
    with pytest.raises(KeyError):
        rune.grad(f)(f64(1.0))
    assert is_concrete(nx.exp(f64(1.0)))
    assert float(nx.array(3.0)) == 3.0
    assert rune.grad(lambda x: (x * x).sum())(f64(2.0)).tolist() == [4.0]


def test_error_inside_vmap_and_scan_leaves_state_usable():
    def bad(x):
        raise KeyError("user bug")
    with pytest.raises(KeyError):
        rune.vmap(bad)(f32(1.0, 2.0))
    with pytest.raises(KeyError):
        rune.scan(lambda c, x: bad(x), nx.array(0.0), f32(1.0))
    assert float(nx.array(2.0) * 2.0) == 4.0


def test_user_exception_passes_through_jit_unchanged():
    def f(x):
        raise KeyError("mine")
    with pytest.raises(KeyError):
        rune.jit(f)(f32(1.0))
    assert rune.trace(lambda x: x + 1.0)(f32(1.0)) is not None
