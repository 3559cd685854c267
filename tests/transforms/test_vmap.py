"""vmap against Python loops that stack per-lane results."""
import numpy as np
import pytest

import rune
from rune import nx

f64 = nx.float64
rng = np.random.default_rng(0)


def loop(f, *args, in_axes):
    """The reference: run `f` lane by lane and stack."""
    size = next(np.asarray(a).shape[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else nx.asarray(np.take(np.asarray(a), i, ax)) for a, ax in zip(args, in_axes)])
            for i in range(size)]
    return np.stack([np.asarray(o) for o in outs])


@pytest.mark.parametrize("in_axes", [(0, None), (1, None), (-1, 0), (0, 1)])
def test_in_axes_variants(in_axes):
    a = rng.normal(size=(3, 3))
    b = rng.normal(size=(3, 3))
    f = lambda x, y: nx.tanh(x) @ nx.ones((3, 2), f64) + nx.sum(y)
    got = rune.vmap(f, in_axes=in_axes)(nx.asarray(a), nx.asarray(b))
    np.testing.assert_allclose(np.asarray(got), loop(f, a, b, in_axes=in_axes), rtol=1e-12)


def test_out_axes_and_unbatched_results_broadcast():
    x = nx.asarray(rng.normal(size=(4, 3)))
    got = rune.vmap(lambda r: (r * 2, nx.ones(2, f64)), out_axes=(1, 0))(x)
    np.testing.assert_allclose(np.asarray(got[0]), (np.asarray(x) * 2).T)
    np.testing.assert_array_equal(np.asarray(got[1]), np.ones((4, 2)))


def test_pytree_in_axes_prefix_and_closure_constants():
    w = nx.asarray(rng.normal(size=(3,)))
    data = {"a": nx.asarray(rng.normal(size=(5, 3))), "b": nx.asarray(rng.normal(size=(3,)))}
    got = rune.vmap(lambda d: nx.sum(d["a"] * d["b"] * w), in_axes=({"a": 0, "b": None},))(data)
    ref = (np.asarray(data["a"]) * np.asarray(data["b"]) * np.asarray(w)).sum(1)
    np.testing.assert_allclose(np.asarray(got), ref)


def test_nested_vmap_matches_outer_product():
    x, y = nx.asarray(rng.normal(size=(3,))), nx.asarray(rng.normal(size=(4,)))
    got = rune.vmap(lambda a: rune.vmap(lambda b: a * b)(y))(x)
    np.testing.assert_allclose(np.asarray(got), np.outer(np.asarray(x), np.asarray(y)))


def test_errors():
    x = nx.ones((3, 2))
    with pytest.raises(rune.ShapeError, match="different sizes"):
        rune.vmap(lambda a, b: a + b)(x, nx.ones((4, 2)))
    with pytest.raises(rune.ShapeError, match="out of range"):
        rune.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(rune.ShapeError, match="scalar"):
        rune.vmap(lambda a: a)(nx.scalar(1.0))
    with pytest.raises(rune.ShapeError, match="maps no argument"):
        rune.vmap(lambda a: a, in_axes=None)(x)


def _mlp_loss(params, x, y):
    h = nx.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"]
    return -nx.sum(nx.log_softmax(logits) * y)


def test_per_example_gradients_match_a_loop_of_grads():
    params = {"w1": nx.asarray(rng.normal(size=(4, 8))), "b1": nx.asarray(rng.normal(size=(8,))),
              "w2": nx.asarray(rng.normal(size=(8, 3)))}
    xs = nx.asarray(rng.normal(size=(6, 4)))
    ys = nx.asarray(np.eye(3)[rng.integers(0, 3, 6)])
    per_example = rune.vmap(rune.grad(_mlp_loss), in_axes=(None, 0, 0))
    for fn in (per_example, rune.jit(per_example)):
        got = fn(params, xs, ys)
        for k in params:
            ref = np.stack([np.asarray(rune.grad(_mlp_loss)(params, xs[i], ys[i])[k]) for i in range(6)])
            np.testing.assert_allclose(np.asarray(got[k]), ref, rtol=1e-10, atol=1e-12)


def test_grad_of_vmap_and_vmap_of_jit():
    x = nx.asarray(rng.normal(size=(5, 3)))
    g = rune.grad(lambda x: nx.sum(rune.vmap(lambda r: nx.sin(r) * nx.sum(r))(x)))(x)
    xn = np.asarray(x)
    ref = np.cos(xn) * xn.sum(1, keepdims=True) + np.sin(xn).sum(1, keepdims=True)
    np.testing.assert_allclose(np.asarray(g), ref, rtol=1e-12)
    got = rune.vmap(rune.jit(lambda r: r @ r))(x)
    np.testing.assert_allclose(np.asarray(got), (xn * xn).sum(1))


def test_scan_cond_while_under_vmap():
    xs = nx.asarray(rng.normal(size=(3, 5)))
    f = lambda r: rune.scan(lambda c, v: (c * 0.5 + v, c * v), nx.scalar(1.0, f64), r)
    carry, ys = rune.vmap(f)(xs)
    for i in range(3):
        c_ref, y_ref = f(xs[i])
        assert float(carry[i]) == pytest.approx(float(c_ref))
        np.testing.assert_allclose(np.asarray(ys[i]), np.asarray(y_ref))
    g = lambda r: rune.cond(r[0] > 0, lambda a: a * 2, lambda a: -a, r)
    np.testing.assert_allclose(np.asarray(rune.vmap(g)(xs)), loop(g, np.asarray(xs), in_axes=(0,)))
    w = lambda r: rune.while_loop(lambda c: nx.sum(c) < 20.0, lambda c: c * 2 + 1, r)
    pos = nx.abs(xs)
    np.testing.assert_allclose(np.asarray(rune.vmap(w)(pos)), loop(w, np.asarray(pos), in_axes=(0,)))


def test_callback_sequential_runs_once_per_lane_in_order():
    seen = []

    def host(v):
        seen.append(v.tolist())
        return v * 10

    x = nx.asarray([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out = rune.vmap(lambda r: rune.callback(host, r, like=r))(x)
    assert seen == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 10)
    assert rune.stats()["callbacks_run"] == 3


def test_callback_batched_runs_once_with_leading_axis():
    shapes = []

    def host(v, s):
        shapes.append((v.shape, s.shape))
        return v + s[:, None]

    x = nx.ones((4, 2))
    out = rune.vmap(lambda r: rune.callback(host, r, nx.scalar(1.0), like=r, vmap_method="batched"))(x)
    assert shapes == [((4, 2), (4,))]
    np.testing.assert_array_equal(np.asarray(out), np.full((4, 2), 2.0))
    with pytest.raises(rune.CallbackError, match="shape"):
        rune.vmap(lambda r: rune.callback(lambda v: v[0], r, like=r, vmap_method="batched"))(x)


def test_custom_vjp_rule_is_used_per_lane():
    @rune.custom_vjp
    def f(x):
        return nx.sin(x), lambda ct: ct * 100.0

    x = nx.asarray([0.1, 0.2, 0.3], f64)
    np.testing.assert_allclose(np.asarray(rune.vmap(rune.grad(f))(x)), [100.0] * 3)
    np.testing.assert_allclose(np.asarray(rune.grad(lambda x: nx.sum(rune.vmap(f)(x)))(x)), [100.0] * 3)


def test_custom_jvp_under_vmap():
    f = rune.custom_jvp(lambda x: nx.exp(x), lambda p, t: (nx.exp(p[0]), t[0] * 3.0))
    x = nx.asarray([0.0, 1.0], f64)
    _, t = rune.jvp(rune.vmap(f), (x,), (nx.ones(2, f64),))
    np.testing.assert_allclose(np.asarray(t), [3.0, 3.0])


def test_random_keys_mapped_and_captured():
    keys = nx.random.split(nx.random.key(0), 3)
    draws = rune.vmap(lambda k: nx.random.uniform(k, (4,)))(keys)
    for i in range(3):
        np.testing.assert_array_equal(np.asarray(draws[i]), np.asarray(nx.random.uniform(keys[i], (4,))))
    assert len({tuple(np.asarray(d).tolist()) for d in draws}) == 3
    k = nx.random.key(1)
    same = rune.vmap(lambda x: nx.random.normal(k, (2,)) + x * 0)(nx.zeros(3))
    np.testing.assert_array_equal(np.asarray(same[0]), np.asarray(same[2]))
