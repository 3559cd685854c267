"""The names of rune/nx/shaping.py that are not ops on arrays (the op table's NOT_OPS): shape, size, ndim,
iterable, isscalar, frombuffer, fromiter, fromfunction, indices and vectorize, against NumPy (and JAX's
vectorize semantics), eagerly, under jit and vmap; and the errors of the shaping functions."""
import numpy as np
import pytest

import rune
from rune import nx


def test_shape_size_ndim_are_static_ints_eagerly_and_under_jit():
    a = np.zeros((2, 3, 4), np.float32)
    x = nx.asarray(a)
    for v in (a, x, [[1, 2], [3, 4]], 5.0):
        assert nx.shape(v) == np.shape(v) and nx.ndim(v) == np.ndim(v) and nx.size(v) == np.size(v)
    assert nx.size(x, 1) == 3 and nx.size(x, -1) == 4
    seen = []

    def f(t):
        seen.append((nx.shape(t), nx.size(t), nx.ndim(t), nx.size(t, 0)))
        return t

    rune.jit(f)(x)
    rune.vmap(f)(x)
    assert seen == [((2, 3, 4), 24, 3, 2), ((3, 4), 12, 2, 3)]
    with pytest.raises(rune.errors.AxisError, match="size: axis 3"):
        nx.size(x, 3)


def test_iterable_and_isscalar():
    assert nx.iterable(nx.zeros(3)) and not nx.iterable(nx.asarray(1.0)) and nx.iterable([1])
    assert not nx.iterable(2)
    # As JAX: a 0-d rune array is a scalar (rune has no separate scalar type); NumPy's rule elsewhere.
    assert nx.isscalar(nx.asarray(1.0)) and not nx.isscalar(nx.zeros(1))
    for v in (1, 2.5, np.float32(1), "s", np.zeros(()), [1], None):
        assert nx.isscalar(v) == np.isscalar(v), v


def test_frombuffer_and_fromiter_match_numpy():
    raw = np.arange(6, dtype=np.int16).tobytes()
    for kw in ({}, dict(count=2), dict(offset=4), dict(count=2, offset=2)):
        got = nx.frombuffer(raw, np.int16, **kw)
        want = np.frombuffer(raw, np.int16, **kw)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), want)
    assert nx.frombuffer(np.ones(2).tobytes()).dtype == nx.float64   # NumPy's default dtype: float64
    got = nx.fromiter((i * i for i in range(5)), np.float32, count=4)
    np.testing.assert_array_equal(np.asarray(got), np.fromiter((i * i for i in range(5)), np.float32, count=4))
    with pytest.raises(rune.errors.ArgumentError, match="frombuffer: cannot read"):
        nx.frombuffer(b"abc", np.int16)
    with pytest.raises(rune.errors.ArgumentError, match="fromiter: cannot read 5"):
        nx.fromiter(iter([1, 2]), np.int32, count=5)


def test_indices_and_fromfunction_match_numpy_also_under_jit():
    for dims in ((2, 3), (4,), (2, 1, 3), ()):
        got = nx.indices(dims)
        assert got.dtype == nx.int32   # rune's default int (NumPy: int64)
        np.testing.assert_array_equal(np.asarray(got), np.indices(dims))
    for g, w in zip(nx.indices((2, 3), dtype=nx.int8, sparse=True), np.indices((2, 3), sparse=True)):
        assert g.dtype == nx.int8
        np.testing.assert_array_equal(np.asarray(g), w)
    fn = lambda i, j: i * 10 + j  # noqa: E731
    np.testing.assert_array_equal(np.asarray(nx.fromfunction(fn, (3, 2), dtype=nx.float64)),
                                  np.fromfunction(fn, (3, 2)))
    x = nx.asarray(np.arange(6.0).reshape(3, 2))
    got = rune.jit(lambda x: x + nx.fromfunction(fn, (3, 2)))(x)
    np.testing.assert_array_equal(np.asarray(got), np.arange(6.0).reshape(3, 2) + np.fromfunction(fn, (3, 2)))
    with pytest.raises(rune.errors.ShapeError, match="indices: dimensions must be non-negative"):
        nx.indices((2, -1))


def test_vectorize_with_a_signature_broadcasts_over_leading_axes_like_a_loop():
    rng = np.random.default_rng(0)
    m, v = rng.standard_normal((4, 2, 3)), rng.standard_normal((1, 3))
    matvec = nx.vectorize(lambda a, b: a @ b, signature="(m,n),(n)->(m)")
    want = np.einsum("kmn,kn->km", m, np.broadcast_to(v, (4, 3)))
    for f in (matvec, rune.jit(matvec)):
        got = f(nx.asarray(m), nx.asarray(v))
        assert got.shape == (4, 2)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    # A loop axis of size 1 everywhere stays (expanded back), as in JAX.
    assert matvec(nx.asarray(m[:1]), nx.asarray(v)).shape == (1, 2)
    # Derivatives flow through the vmap.
    g = rune.grad(lambda m: nx.sum(matvec(m, nx.asarray(v))))(nx.asarray(m))
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(v[:, None, :], m.shape), rtol=1e-12)


def test_vectorize_elementwise_excluded_and_several_outputs():
    calls = []

    def f(a, b, scale, *, shift=0.0):
        calls.append(nx.shape(a))   # every mapped argument reaches pyfunc as a scalar
        return a * scale + b + shift, a - b

    a, b = np.arange(6.0).reshape(2, 3), np.array([1.0, 2.0, 3.0])
    vf = nx.vectorize(f, excluded={2})
    s, d = vf(nx.asarray(a), nx.asarray(b), 2.0, shift=0.5)
    np.testing.assert_array_equal(np.asarray(s), a * 2 + b + 0.5)
    np.testing.assert_array_equal(np.asarray(d), a - b)
    assert set(calls) == {()}
    # excluded by keyword name: a non-array static argument reaches the function unchanged.
    pick = nx.vectorize(lambda x, op: getattr(nx, op)(x), excluded={"op"})
    np.testing.assert_allclose(np.asarray(pick(nx.asarray(a), op="sin")), np.sin(a))
    # None arguments are not mapped (JAX's rule).
    maybe = nx.vectorize(lambda x, bias: x if bias is None else x + bias)
    np.testing.assert_array_equal(np.asarray(maybe(nx.asarray(a), None)), a)


def test_vectorize_errors_name_the_function_and_what_it_expected():
    f = nx.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")
    with pytest.raises(rune.errors.ShapeError, match="vectorize: core dimension 'n' is 3 .* 4"):
        f(nx.zeros(3), nx.zeros(4))
    with pytest.raises(rune.errors.ArgumentError, match="vectorize: .* is not a generalised-ufunc signature"):
        nx.vectorize(lambda a: a, signature="(n->")
    with pytest.raises(rune.errors.ShapeError, match="vectorize: output 0 has shape"):
        nx.vectorize(lambda a: a, signature="(n)->()")(nx.zeros((2, 3)))


def test_shaping_errors_name_the_function_and_argument():
    x = nx.zeros((2, 3))
    cases = [
        (lambda: nx.vsplit(nx.zeros(4), 2), rune.errors.ShapeError, "vsplit: expected an array of at least 2"),
        (lambda: nx.hsplit(x, 2), rune.errors.ShapeError, "hsplit: an axis of size 3 does not split into 2"),
        (lambda: nx.array_split(x, 0), rune.errors.ArgumentError, "array_split: the number of sections"),
        (lambda: nx.rot90(x, axes=(0, 0)), rune.errors.ArgumentError, "rot90: the axes must differ"),
        (lambda: nx.rot90(nx.zeros(3)), rune.errors.ShapeError, "rot90: expected an array of at least 2"),
        (lambda: nx.rollaxis(x, 0, 3), rune.errors.AxisError, "rollaxis: start 3"),
        (lambda: nx.resize(x, (2, -1)), rune.errors.ShapeError, "resize: new_shape must be non-negative"),
        (lambda: nx.block([[x], x]), rune.errors.ShapeError, "block: lists nested to different depths"),
        (lambda: nx.hstack([]), rune.errors.ShapeError, "hstack: expected a non-empty sequence"),
        (lambda: nx.trim_zeros(x, axis=2), rune.errors.AxisError, "trim_zeros: axis 2 is out of range"),
        (lambda: nx.hstack([x], dtype=nx.int32), rune.errors.DTypeError,
         "hstack: cannot cast float32 to int32 under casting='same_kind'"),
        (lambda: nx.vstack([x], casting="any"), rune.errors.ArgumentError, "vstack: casting must be"),
        (lambda: nx.trim_zeros(nx.zeros(3), "x"), rune.errors.ArgumentError, "trim_zeros: trim must be"),
        (lambda: nx.fliplr(nx.zeros(3)), rune.errors.ShapeError, "fliplr: expected an array of at least 2"),
    ]
    for fn, error, message in cases:
        with pytest.raises(error, match=message):
            fn()


def test_trim_zeros_gradient_flows_to_the_kept_elements():
    x = nx.asarray(np.array([0.0, 0.0, 1.5, 0.0, -2.0, 0.0]))
    g = rune.grad(lambda x: nx.sum(nx.trim_zeros(x) ** 2))(x)
    np.testing.assert_array_equal(np.asarray(g), [0, 0, 3.0, 0, -4.0, 0])


def test_copy_is_a_new_buffer_with_the_same_values():
    x = nx.asarray(np.arange(3.0))
    c = nx.copy(x)
    assert c is not x and c.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(c), np.arange(3.0))


def test_pad_modes_reject_what_numpy_rejects_with_rune_errors():
    x = nx.zeros((2, 3))
    with pytest.raises(rune.errors.ShapeError, match="pad: cannot pad the empty axis 0"):
        nx.pad(nx.zeros((0, 3)), 1, mode="edge")
    with pytest.raises(rune.errors.ArgumentError, match="pad: mode must be one of .*got 'bogus'"):
        nx.pad(x, 1, mode="bogus")
    with pytest.raises(rune.errors.ArgumentError, match="pad: mode must be one of .*keyword arguments"):
        nx.pad(x, 1, 5)   # np.pad's third argument is the mode
    with pytest.raises(rune.errors.ArgumentError, match="pad: stat_length must be"):
        nx.pad(x, 1, mode="mean", stat_length=0)
    with pytest.raises(rune.errors.ArgumentError, match="pad: reflect_type must be"):
        nx.pad(x, 1, mode="reflect", reflect_type="both")
    # "empty" leaves NumPy's new elements undefined; rune's are zeros, as JAX's.
    np.testing.assert_array_equal(np.asarray(nx.pad(nx.ones(2), 1, mode="empty")), [0, 1, 1, 0])


def test_where_of_one_argument_is_nonzero_exact_eagerly_sized_under_jit():
    c = np.array([[0, 2, 0], [1, 0, 3]])
    for got, want in zip(nx.where(nx.asarray(c)), np.where(c)):
        np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(rune.ConcretizationError, match="nonzero"):
        rune.jit(lambda c: nx.where(c))(nx.asarray(c))
    with pytest.raises(rune.errors.ArgumentError, match="where: give both x and y, or neither"):
        nx.where(nx.asarray(c), 1.0)
    with pytest.raises(rune.errors.ArgumentError, match="where: size and fill_value apply only"):
        nx.where(nx.asarray(c), 1.0, 2.0, size=3)


# np.<name> on a traced rune value runs rune's function (rune/nx/numpy_dispatch.py), NumPy's arguments intact.
_NUMPY_CALLS = {
    "append": lambda t: np.append(t, t[:1], axis=0), "array_split": lambda t: np.array_split(t, 3, axis=2),
    "atleast_2d": lambda t: np.atleast_2d(t[0, 0, 0]), "block": lambda t: np.block([t, t]),
    "column_stack": lambda t: np.column_stack([t[0, 0], t[1, 0]]), "copy": lambda t: np.copy(t),
    "dsplit": lambda t: np.dsplit(t, [1]), "dstack": lambda t: np.dstack([t, t]), "fliplr": lambda t: np.fliplr(t),
    "flipud": lambda t: np.flipud(t), "hsplit": lambda t: np.hsplit(t, 3), "hstack": lambda t: np.hstack([t, t]),
    "vsplit": lambda t: np.vsplit(t, 2), "vstack": lambda t: np.vstack((t, t)),
    "kron": lambda t: np.kron(t[0], t[1]), "resize": lambda t: np.resize(t, (5, 5)),
    "rollaxis": lambda t: np.rollaxis(t, 2, start=1), "rot90": lambda t: np.rot90(t, k=3, axes=(1, 2)),
    "pad": lambda t: np.pad(t, ((0, 1), (2, 0), (1, 1)), mode="reflect"),
    "where": lambda t: np.where(t > 3, t, 0.0),
}


@pytest.mark.parametrize("name", sorted(_NUMPY_CALLS))
def test_numpy_functions_on_traced_values_run_runes(name):
    a = np.arange(24.0).reshape(2, 3, 4)
    fn = _NUMPY_CALLS[name]
    got, want = rune.jit(fn)(nx.asarray(a)), fn(a)
    for g, w in zip(got, want) if isinstance(want, (list, tuple)) else [(got, want)]:
        assert g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12)


def test_static_arguments_traced_under_jit_are_errors_naming_function_and_argument():
    x, two = nx.ones((4, 4)), nx.asarray(2)
    cases = [(lambda t, n: nx.resize(t, n), "resize: new_shape is a traced"),
             (lambda t, n: nx.rot90(t, n), "rot90: k is a traced"),
             (lambda t, n: nx.rollaxis(t, n), "rollaxis: axis is a traced"),
             (lambda t, n: nx.array_split(t, n), "array_split: indices_or_sections is a traced"),
             (lambda t, n: nx.indices(n), "indices: dimensions is a traced")]
    for fn, message in cases:
        with pytest.raises(rune.ConcretizationError, match=message):
            rune.jit(fn)(x, two)
    with pytest.raises(rune.errors.ArgumentError, match="rot90: k must be an int, got 1.5"):
        nx.rot90(x, 1.5)
