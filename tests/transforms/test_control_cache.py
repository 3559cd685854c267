"""Eager control flow reuses staged bodies only when they are provably the same.

An eager cond, switch, scan or while_loop keeps what it staged, keyed by the
fingerprints of its functions (code, closure cells, defaults, globals read)
and the operands' avals and structure. Every test here calls the same code
with something changed that the staged program depends on, and compares with
a Python loop over NumPy (the oracle); the counters show the reuse.
"""
import types

import numpy as np
import pytest

import rune
from rune import nx
from rune.core.fingerprint import fingerprint

@pytest.fixture(autouse=True, params=["0", "4096"], ids=["compiled", "numpy"])
def _stretches(request, monkeypatch):
    """Every test twice: with every stretch compiled (the suite's default), and
    with small stretches on NumPy, as users run them (plans then run as written
    straight-line functions, and while loops as one function)."""
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", request.param)
    rune.clear_caches()
    yield
    rune.clear_caches()


SCALE = nx.asarray(np.float32(2.0))   # a global array a branch reads
settings = types.ModuleType("settings")  # a module attribute a branch reads
settings.offset = 1.0


def close(got, want):
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def _x(n=4, dtype=np.float32):
    return np.linspace(-1.0, 1.0, n).astype(dtype)


def _scaled_by(w):
    return lambda v: v * w


def test_cond_closure_scalars_differ():
    x = _x()
    for w in (2.0, 3.0, -1.5, 2.0):
        got = rune.cond(nx.asarray(True), _scaled_by(w), lambda v: v, nx.asarray(x))
        close(got, x * np.float32(w))


def test_cond_closure_zero_and_negative_zero_differ():
    ones = nx.ones(3)
    for w in (0.0, -0.0, 0.0):
        got = np.asarray(rune.cond(nx.asarray(True), _scaled_by(w), lambda v: v, ones))
        assert np.all(np.signbit(got) == np.signbit(np.float32(w)))


def test_cond_closure_arrays_differ_and_change_identity():
    x = _x()
    w = nx.asarray(_x() + 3)

    def body(v):
        return v * w

    first = rune.cond(nx.asarray(True), body, lambda v: v, nx.asarray(x))
    close(first, x * (_x() + 3))
    w = nx.asarray(_x() - 7)  # the cell `body` reads now holds another array
    second = rune.cond(nx.asarray(True), body, lambda v: v, nx.asarray(x))
    close(second, x * (_x() - 7))
    for k in range(3):
        arr = nx.asarray(np.full(4, k, np.float32))
        close(rune.cond(nx.asarray(True), _scaled_by(arr), lambda v: v, nx.asarray(x)), x * k)


def test_cond_global_array_and_module_attribute_changes_are_seen():
    global SCALE
    x = _x()

    def body(v):
        return v * SCALE + settings.offset

    saved = SCALE, settings.offset
    try:
        for scale, offset in ((2.0, 1.0), (5.0, 1.0), (5.0, -4.0), (2.0, 1.0)):
            SCALE, settings.offset = nx.asarray(np.float32(scale)), offset
            got = rune.cond(nx.asarray(True), body, lambda v: v, nx.asarray(x))
            close(got, x * np.float32(scale) + np.float32(offset))
    finally:
        SCALE, settings.offset = saved


def test_cond_defaults_and_mutable_closures_are_respected():
    x = _x()
    for k in (1.0, 2.0):
        close(rune.cond(nx.asarray(True), lambda v, k=k: v + k, lambda v: v, nx.asarray(x)), x + k)
    state = [1.0]  # a list may change in place: never reused
    body = lambda v: v * state[0]  # noqa: E731
    for k in (1.0, 4.0, -2.0):
        state[0] = k
        close(rune.cond(nx.asarray(True), body, lambda v: v, nx.asarray(x)), x * k)
    host = np.ones(4, np.float32)  # a NumPy array may be written in place: never reused
    body = lambda v: v * host  # noqa: E731
    for k in (1.0, 3.0):
        host[:] = k
        close(rune.cond(nx.asarray(True), body, lambda v: v, nx.asarray(x)), x * k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_cond_dtypes_and_shapes(dtype):
    def branch(v):
        return v * 2 + 1

    for n in (1, 3, 8):
        x = (np.arange(n) - 1).astype(dtype)
        for pred in (True, False):
            got = rune.cond(nx.asarray(pred), branch, lambda v: v - 1, nx.asarray(x))
            want = x * 2 + 1 if pred else x - 1
            assert np.asarray(got).dtype == want.dtype
            close(got, want)


def test_switch_index_clamped_and_branch_count():
    x = _x()
    branches3 = [lambda v: v + 1, lambda v: v * 3, lambda v: -v]
    for index in (-2, 0, 1, 2, 7):
        want = [x + 1, x * 3, -x][min(max(index, 0), 2)]
        close(rune.switch(nx.asarray(index), branches3, nx.asarray(x)), want)
    close(rune.switch(nx.asarray(5), branches3[:2], nx.asarray(x)), x * 3)


def test_cond_pytree_operands_and_results():
    a, b = _x(), _x(3) + 2
    for pred in (True, False, True):
        got = rune.cond(nx.asarray(pred), lambda p: {"s": p[0].sum() + p[1].sum(), "a": p[0]},
                        lambda p: {"s": p[0].sum() - p[1].sum(), "a": -p[0]}, (nx.asarray(a), nx.asarray(b)))
        close(got["s"], a.sum() + b.sum() if pred else a.sum() - b.sum())
        close(got["a"], a if pred else -a)


def test_scan_closure_reverse_and_lengths():
    def run(w, xs, reverse):
        return rune.scan(lambda c, r: (c * w + r, c), nx.asarray(np.float32(1)), nx.asarray(xs), reverse=reverse)

    def oracle(w, xs, reverse):
        c, ys = np.float32(1), []
        for r in (xs[::-1] if reverse else xs):
            ys.append(c)
            c = c * np.float32(w) + r
        return c, np.stack(ys[::-1] if reverse else ys)

    for w, n, reverse in ((0.5, 5, False), (0.5, 5, True), (2.0, 5, False), (2.0, 7, True), (0.5, 5, False)):
        xs = _x(n)
        c, ys = run(w, xs, reverse)
        want_c, want_ys = oracle(w, xs, reverse)
        close(c, want_c)
        close(ys, want_ys)


def test_scan_weak_carry_widened_then_cached():
    for dtype in (np.float32, np.float64, np.float32):
        xs = np.arange(4, dtype=dtype)
        c, _ = rune.scan(lambda c, r: (c + r, None), 0.0, nx.asarray(xs))
        assert np.asarray(c).dtype == dtype
        close(c, xs.sum())


def test_while_closure_changes_and_carry_dtypes():
    def count(limit, step, start):
        return rune.while_loop(lambda s: s[0] < limit, lambda s: (s[0] + 1, s[1] * step), start)

    def oracle(limit, step, start):
        i, v = start
        while i < limit:
            i, v = i + 1, v * step
        return i, v

    for limit, step, start in ((5, 2.0, (0, 1.0)), (3, 2.0, (0, 1.0)), (5, 0.5, (0, 1.0)),
                               (4, 3.0, (np.int64(1), np.float64(2.0))), (5, 2.0, (0, 1.0))):
        i, v = count(limit, step, start)
        want_i, want_v = oracle(limit, step, start)
        assert int(i) == want_i
        close(v, want_v)


def test_fori_loop_bounds_and_closure():
    def total(lo, hi, w):
        return rune.fori_loop(lo, hi, lambda i, c: c + i.astype(np.float32) * w, nx.asarray(np.float32(0)))

    for lo, hi, w in ((0, 5, 1.0), (2, 5, 1.0), (0, 5, 3.0), (0, 8, 1.0), (0, 5, 1.0)):
        close(total(lo, hi, w), sum(i * w for i in range(lo, hi)))


def test_gradient_through_cond_with_closed_over_traced_value():
    x = nx.asarray(_x())

    def loss(w):
        return rune.cond(nx.asarray(True), lambda v: (v * w).sum(), lambda v: v.sum(), x)

    for w in (1.0, 2.0):
        close(rune.grad(loss)(nx.asarray(np.float32(w))), _x().sum())


def test_repeat_calls_build_no_new_plans():
    x = nx.asarray(_x())
    w = nx.asarray(_x() + 1)

    def calls():
        a = rune.cond(nx.asarray(False), lambda v: v * w, lambda v: v - w, x)
        b, _ = rune.scan(lambda c, r: (c + r * w, None), nx.zeros(4), nx.ones((3, 4)))
        c = rune.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] + w), (0, x))
        return a, b, c

    first = calls()
    calls()  # a branch reused for the first time builds its plan (the first call ran it op by op)
    before = rune.stats()
    for _ in range(3):
        again = calls()
        for g, e in zip(rune.tree.leaves(again), rune.tree.leaves(first)):
            close(g, np.asarray(e))
    after = rune.stats()
    assert after["compiles"] == before["compiles"] and after["traces"] == before["traces"]
    w = nx.asarray(_x() + 5)  # another array: staged afresh, new plans
    a, b, _ = calls()
    close(a, _x() - (_x() + 5))
    close(b, 3 * (_x() + 5))
    assert rune.stats()["compiles"] > after["compiles"]


def test_fingerprint_reports_what_it_cannot_prove():
    assert fingerprint(lambda v: v + 1) is not None
    assert fingerprint(lambda v: v + nx.sin(v)) is not None
    cells = [1]
    assert fingerprint(lambda v: v * cells[0]) is None
    assert fingerprint(lambda v: v * np.ones(3)) is not None  # np.ones is NumPy's: made when called
    host = np.ones(3)
    assert fingerprint(lambda v: v * host) is None
    a, b = fingerprint(_scaled_by(2.0)), fingerprint(_scaled_by(2.0))
    assert a[0] == b[0] and fingerprint(_scaled_by(3.0))[0] != a[0]
    arr = nx.ones(3)
    key, held = fingerprint(_scaled_by(arr))
    assert any(h is arr for h in held)


def test_written_loop_and_plans_count_as_the_plans_they_replace():
    """The first calls run the plans step by step; later ones run them written
    as straight-line functions (the while loop as one function): the same
    results and the same counters on every call."""
    def call():
        return rune.while_loop(lambda s: s[0] < 7, lambda s: (s[0] + 1, s[1] * 1.5 + s[0].astype(np.float32)),
                               (0, nx.asarray(np.float32(1))))

    i, v = 0, np.float32(1)
    while i < 7:
        i, v = i + 1, v * np.float32(1.5) + np.float32(i)
    seen = []
    for _ in range(5):
        rune.reset_stats()
        got_i, got_v = call()
        assert int(got_i) == 7
        close(got_v, v)
        s = rune.stats()
        seen.append((s["kernels_launched"], s["scalar_reads"]))
    assert seen == [seen[0]] * 5 and seen[0][1] == 8


def test_jitted_small_function_repeated_calls_agree():
    f = rune.jit(lambda v: nx.where(v > 0, v * 2.0, -v) + 1.0)
    for n in (1, 5, 1, 5, 1):
        x = _x(n) if n > 1 else np.float32([-0.5])
        for _ in range(3):
            rune.reset_stats()
            close(f(nx.asarray(x)), np.where(x > 0, x * 2, -x) + 1)
            assert rune.stats()["kernels_launched"] >= 1
    scalar = rune.jit(lambda v: v * 3.0 - 1.0)
    for k in range(4):  # 0-d values stay arrays through the written function
        out = scalar(nx.asarray(np.float32(k)))
        assert out.shape == () and float(out) == 3.0 * k - 1.0
        assert type(out._raw) is np.ndarray  # the host backend's buffers are arrays, never NumPy scalars


def test_clear_caches_forgets_staged_bodies():
    x = nx.asarray(_x())
    body = lambda v: v * 2.0  # noqa: E731
    for _ in range(2):
        rune.cond(nx.asarray(True), body, lambda v: v, x)
    before = rune.stats()["compiles"]
    rune.cond(nx.asarray(True), body, lambda v: v, x)
    assert rune.stats()["compiles"] == before
    rune.clear_caches()
    for _ in range(2):
        close(rune.cond(nx.asarray(True), body, lambda v: v, x), _x() * 2)
    assert rune.stats()["compiles"] == before + 1


def test_written_loop_is_bitwise_the_loop_of_plans():
    """A while loop written as one function (its float arithmetic and
    comparisons on NumPy scalars) gives bit for bit what the plans give op by
    op, through overflow to inf, inf - inf to NaN, and -0.0."""
    def call():
        def body(s):
            i, v, w, z = s
            return i + 1, v * 1e9 - v, w * w + 0.5, nx.where(v > 0.0, z * -1.0, z - v)
        return rune.while_loop(lambda s: (s[0] < 9) & (s[2] >= -1.0), body,
                               (0, nx.asarray(np.float32(1.5)), nx.asarray(np.float64(1e20)), nx.asarray(np.float32(-0.0))))

    def oracle():
        i, v, w, z = np.int32(0), np.asarray(np.float32(1.5)), np.asarray(np.float64(1e20)), np.asarray(np.float32(-0.0))
        while np.less(i, 9) and np.greater_equal(w, -1.0):
            i, v, w, z = (i + np.int32(1), np.subtract(np.multiply(v, np.float32(1e9)), v),
                          np.add(np.multiply(w, w), 0.5), np.where(np.greater(v, 0), np.multiply(z, np.float32(-1)), z - v))
        return i, v, w, z

    with np.errstate(over="ignore", invalid="ignore"):
        want = oracle()
        for _ in range(4):
            got = call()
            for g, e in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g), e)
                assert np.signbit(np.asarray(g)) == np.signbit(e) and np.asarray(g).dtype == e.dtype
    assert np.isnan(want[1]) and np.isinf(want[2])


@pytest.mark.parametrize("reverse", [False, True])
def test_written_scan_is_bitwise_the_scan_of_plans(reverse):
    """A scan body written as one loop gives, call after call, what the plan
    gives row by row (ys that are the incoming carry, a vector row, -0.0 and
    overflow included), counted alike."""
    rows = np.array([[1.0, -0.0], [3e38, 2.0], [0.5, -1.0], [-0.0, 4.0]], np.float32)

    def call():
        return rune.scan(lambda c, r: ((c[0] * 2.0 + r[0], c[1] - r), (c[0], c[1] * r[1])),
                         (nx.asarray(np.float32(-0.0)), nx.zeros(2)), nx.asarray(rows), reverse=reverse)

    def oracle():
        c0, c1, ys0, ys1 = np.float32(-0.0), np.zeros(2, np.float32), [], []
        for r in (rows[::-1] if reverse else rows):
            ys0.append(c0)
            ys1.append(c1 * r[1])
            c0, c1 = np.multiply(c0, np.float32(2)) + r[0], c1 - r
        if reverse:
            ys0, ys1 = ys0[::-1], ys1[::-1]
        return (c0, c1), (np.stack(ys0), np.stack(ys1))

    with np.errstate(over="ignore", invalid="ignore"):
        want = rune.tree.leaves(oracle())
        seen = []
        for _ in range(4):
            rune.reset_stats()
            got = rune.tree.leaves(call())
            seen.append(rune.stats()["kernels_launched"])
            for g, e in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g), e)
                assert np.array_equal(np.signbit(np.asarray(g)), np.signbit(e))
    assert seen == [seen[0]] * 4
