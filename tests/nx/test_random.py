"""rune's public API against its documented public API (README, docs/): random.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import numpy as np
import pytest

import rune
from rune import nx

from api_support import A, same_bits


# ---------------------------------------------------------------- random

def test_random_key_and_uniform_defaults():
    k = nx.random.key(0)
    u = nx.random.uniform(k, (1000,))
    assert u.dtype == nx.float32 and u.shape == (1000,)
    a = A(u)
    assert a.min() >= 0.0 and a.max() < 1.0 and abs(a.mean() - 0.5) < 0.05


def test_random_uniform_positional_jax_order():
    u = nx.random.uniform(nx.random.key(1), (2000,), nx.float64, -2.0, 5.0)
    a = A(u)
    assert u.dtype == nx.float64 and a.min() >= -2.0 and a.max() < 5.0
    assert abs(a.mean() - 1.5) < 0.2


def test_random_uniform_keywords():
    u = nx.random.uniform(nx.random.key(1), shape=(10,), dtype=nx.float32, minval=3.0, maxval=4.0)
    assert A(u).min() >= 3.0 and A(u).max() < 4.0


def test_random_uniform_default_shape_scalar():
    assert nx.random.uniform(nx.random.key(0)).shape == ()


def test_random_normal():
    z = nx.random.normal(nx.random.key(2), (20000,), nx.float64)
    a = A(z)
    assert z.dtype == nx.float64
    assert abs(a.mean()) < 0.05 and abs(a.std() - 1.0) < 0.05
    assert nx.random.normal(nx.random.key(2), (3,)).dtype == nx.float32


def test_random_bernoulli():
    b = nx.random.bernoulli(nx.random.key(3), 0.3, (5000,))
    assert b.dtype == nx.bool and b.shape == (5000,)
    assert abs(A(b).mean() - 0.3) < 0.05
    assert not A(nx.random.bernoulli(nx.random.key(3), 0.0, (100,))).any()
    assert A(nx.random.bernoulli(nx.random.key(3), 1.0, (100,))).all()


def test_random_bernoulli_default_p():
    b = nx.random.bernoulli(nx.random.key(4), shape=(4000,))
    assert abs(A(b).mean() - 0.5) < 0.05


def test_random_randint():
    r = nx.random.randint(nx.random.key(5), (2000,), 0, 10)
    a = A(r)
    assert r.dtype == nx.int32 and a.min() >= 0 and a.max() <= 9
    assert set(a.tolist()) == set(range(10))


def test_random_randint_keywords():
    r = nx.random.randint(nx.random.key(5), shape=(100,), minval=-3, maxval=-1)
    assert set(A(r).tolist()) <= {-3, -2}


def test_random_split_default_two():
    ks = nx.random.split(nx.random.key(0))
    assert len(ks) == 2
    k1, k2 = ks
    assert not same_bits(nx.random.uniform(k1, (4,)), nx.random.uniform(k2, (4,)))


def test_random_split_num():
    ks = nx.random.split(nx.random.key(0), 3)
    assert len(ks) == 3
    vals = [A(nx.random.uniform(ks[i], (4,))).tobytes() for i in range(3)]
    assert len(set(vals)) == 3
    assert len(nx.random.split(nx.random.key(0), num=4)) == 4


def test_random_split_differs_from_parent():
    k = nx.random.key(0)
    k1, _ = nx.random.split(k)
    assert not same_bits(nx.random.uniform(k, (4,)), nx.random.uniform(k1, (4,)))


def test_random_fold_in():
    k = nx.random.key(0)
    a = nx.random.uniform(nx.random.fold_in(k, 1), (4,))
    b = nx.random.uniform(nx.random.fold_in(k, 1), (4,))
    c = nx.random.uniform(nx.random.fold_in(k, 2), (4,))
    assert same_bits(a, b) and not same_bits(a, c)
    assert not same_bits(a, nx.random.uniform(k, (4,)))


def test_random_deterministic_bit_identical():
    for fn in (lambda k: nx.random.uniform(k, (64,)), lambda k: nx.random.normal(k, (64,), nx.float64),
               lambda k: nx.random.randint(k, (64,), 0, 100), lambda k: nx.random.bernoulli(k, 0.5, (64,))):
        assert same_bits(fn(nx.random.key(42)), fn(nx.random.key(42)))


def test_random_different_seeds_differ():
    assert not same_bits(nx.random.uniform(nx.random.key(0), (8,)), nx.random.uniform(nx.random.key(1), (8,)))


def test_random_jit_matches_eager_bitwise():
    # The random bits and everything computed from them with correctly rounded
    # operations are bit-identical under jit; normal's log and cos are compiled
    # to libm/libmvec, which differ from NumPy's own SIMD routines by a few ulp.
    k = nx.random.key(7)
    assert same_bits(nx.random.uniform(k, (32,)), rune.jit(lambda k: nx.random.uniform(k, (32,)))(k))
    eager = nx.random.normal(k, (32,))
    jitted = rune.jit(lambda k: nx.random.normal(k, (32,)))(k)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=8 * 2.0 ** -23, atol=1e-6)


def test_random_vmap_over_keys():
    ks = nx.random.split(nx.random.key(0), 4)
    batched = rune.vmap(lambda k: nx.random.uniform(k, (3,)))(ks)
    assert batched.shape == (4, 3)
    for i in range(4):
        assert same_bits(batched[i], nx.random.uniform(ks[i], (3,)))


@pytest.mark.parametrize("sampler", ["uniform", "normal"])
def test_random_float_samplers_reject_other_dtypes(sampler):
    fn = getattr(nx.random, sampler)
    for d in (nx.int32, nx.uint8, nx.bool):
        with pytest.raises(rune.DTypeError, match=f"random.{sampler}: dtype must be a float.*{np.dtype(d).name}"):
            fn(nx.random.key(0), (3,), dtype=d)
    for d in (nx.float16, nx.bfloat16, nx.float32, nx.float64):
        assert fn(nx.random.key(0), (3,), dtype=d).dtype == d


@pytest.mark.parametrize("seed", [-2**63, -2**40 - 5, -1, 2**63, 2**64 - 1])  # wider seeds raise (test_random_exact)
def test_random_key_takes_any_64_bit_seed_modulo_2_64(seed):
    wrapped = seed % 2**64
    assert A(nx.random.key(seed)).tolist() == [wrapped >> 32, wrapped & 0xFFFFFFFF]
    assert same_bits(nx.random.uniform(nx.random.key(seed), (4,)), nx.random.uniform(nx.random.key(wrapped), (4,)))
