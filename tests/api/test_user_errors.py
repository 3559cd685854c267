"""Errors about the user's call (README, docs/): arguments that must be refused, and
failures that must name the user's function, argument and value, never rune's
internals. Each class of mistake is checked in every function that takes it."""
import numpy as np
import pytest

import rune
from rune import nx


def f32(*v):
    return nx.asarray(np.array(v, np.float32))


# ---------------------------------------------------------------- argnums (one selector)

ARGNUM_USERS = {
    "grad": lambda f, a: rune.grad(f, argnums=a),
    "value_and_grad": lambda f, a: rune.value_and_grad(f, argnums=a),
    "jacfwd": lambda f, a: rune.jacfwd(f, argnums=a),
    "jacrev": lambda f, a: rune.jacrev(f, argnums=a),
    "hessian": lambda f, a: rune.hessian(f, argnums=a),
}


@pytest.mark.parametrize("name", sorted(ARGNUM_USERS))
@pytest.mark.parametrize("argnums", [(0, 0), (1, -1), [0, 1, 0]])
def test_repeated_argnums_are_refused(name, argnums):
    f = lambda a, b: nx.sum(a * a * b)
    with pytest.raises(rune.ArgumentError, match=f"{name.split('_')[-1]}.*more than once") as e:
        ARGNUM_USERS[name](f, argnums)(f32(1.0, 2.0), f32(3.0, 4.0))
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize("name", sorted(ARGNUM_USERS))
def test_argnums_out_of_range_or_not_int(name):
    f = lambda a: nx.sum(a * a)
    with pytest.raises(rune.ArgumentError, match="1 positional"):
        ARGNUM_USERS[name](f, 3)(f32(1.0))
    with pytest.raises(rune.UsageError, match="tuple of ints"):
        ARGNUM_USERS[name](f, (0.0,))(f32(1.0))


def test_distinct_argnums_still_differentiate_each():
    g = rune.grad(lambda a, b: nx.sum(a * a * b), argnums=(1, 0))(f32(1.0, 2.0), f32(3.0, 4.0))
    np.testing.assert_allclose(np.asarray(g[0]), [1.0, 4.0])
    np.testing.assert_allclose(np.asarray(g[1]), [6.0, 16.0])


# ---------------------------------------------------------------- derivative transformations

@pytest.mark.parametrize("dtype", [nx.int32, nx.bool_])
def test_grad_of_an_integer_output_is_a_dtype_error(dtype):
    with pytest.raises(rune.DTypeError, match=r"grad.*" + dtype.name + r".*real \(float\) output") as e:
        rune.grad(lambda a: nx.sum(a).astype(dtype))(f32(1.0, 2.0))
    assert isinstance(e.value, TypeError)
    with pytest.raises(rune.ShapeError, match="scalar"):  # a shape problem stays a shape error
        rune.grad(lambda a: a.astype(nx.int32))(f32(1.0, 2.0))


@pytest.mark.parametrize("primals, tangents", [
    ("x", "x"), ("x", ("x",)), (("x",), "x")])
def test_jvp_needs_tuple_primals_and_tangents(primals, tangents):
    x = f32(1.0)
    pick = lambda v: (x,) if isinstance(v, tuple) else x
    with pytest.raises(rune.UsageError, match=r"jvp: (primals|tangents) must be a tuple or list.*Array"):
        rune.jvp(lambda a: a * 2, pick(primals), pick(tangents))
    out, t = rune.jvp(lambda a: a * 2, [x], [x])  # lists are accepted, as in JAX
    assert float(t) == 2.0


# ---------------------------------------------------------------- shapes (one normaliser)

KEY = nx.random.key(0)
SHAPE_TAKERS = {
    "zeros": lambda s: nx.zeros(s),
    "ones": lambda s: nx.ones(s),
    "full": lambda s: nx.full(s, 1.0),
    "create": lambda s: nx.create(nx.float32, s, []),
    "Spec": lambda s: rune.Spec(s, nx.float32),
    "random.uniform": lambda s: nx.random.uniform(KEY, s),
    "random.normal": lambda s: nx.random.normal(KEY, s),
    "random.randint": lambda s: nx.random.randint(KEY, s, 0, 3),
    "random.bernoulli": lambda s: nx.random.bernoulli(KEY, 0.5, s),
}


@pytest.mark.parametrize("name", sorted(SHAPE_TAKERS))
def test_negative_shapes_are_refused_by_the_function_called(name):
    with pytest.raises(rune.ShapeError, match=rf"^{name}: shape \(-1,\) has a negative") as e:
        SHAPE_TAKERS[name]((-1,))
    assert "random_bits" not in str(e.value)


@pytest.mark.parametrize("name", sorted(SHAPE_TAKERS))
@pytest.mark.parametrize("shape", [(2.0,), 2.0, (True,), "ab", None])
def test_non_integer_shapes_are_refused(name, shape):
    if shape is None and name == "random.bernoulli":
        return  # bernoulli's shape=None means p's shape
    with pytest.raises(rune.UsageError, match=rf"^{name}: a shape is an int or a sequence of ints") as e:
        SHAPE_TAKERS[name](shape)
    assert isinstance(e.value, TypeError)


def test_integer_shapes_of_every_spelling_are_accepted():
    for shape in (3, (3,), [3], np.int64(3), (np.int32(3),), np.array([3]), (nx.array(3),)):
        assert nx.zeros(shape).shape == (3,)
        assert rune.Spec(shape, nx.float32).shape == (3,)
        assert nx.random.uniform(KEY, shape).shape == (3,)
    assert nx.zeros(()).shape == () and nx.zeros((0, 2)).shape == (0, 2)
    with pytest.raises(rune.ShapeError, match="random.split"):
        nx.random.split(KEY, -1)
    with pytest.raises(rune.UsageError, match="eye"):
        nx.eye(2.0)
    with pytest.raises(rune.UsageError, match="linspace"):
        nx.linspace(0, 1, 2.5)


# ---------------------------------------------------------------- control flow arguments

ROWS = f32(1.0, 2.0, 3.0)


@pytest.mark.parametrize("unroll", [1, 2, 7, True, False])
def test_scan_unroll_is_accepted_and_changes_nothing(unroll):
    step = lambda c, x: (c * 0.5 + x, c)
    carry, ys = rune.scan(step, f32(0.0)[0], ROWS, unroll=unroll)
    ref_carry, ref_ys = rune.scan(step, f32(0.0)[0], ROWS)
    assert float(carry) == float(ref_carry) and np.asarray(ys).tolist() == np.asarray(ref_ys).tolist()
    g = rune.grad(lambda r: rune.scan(step, f32(0.0)[0], r, unroll=unroll)[0])(ROWS)
    np.testing.assert_allclose(np.asarray(g), [0.25, 0.5, 1.0])


@pytest.mark.parametrize("kwargs, match", [
    (dict(unroll=0), "unroll must be a positive int or a bool, got 0"),
    (dict(unroll=1.5), "unroll must be a positive int or a bool, got 1.5"),
    (dict(length=-1), "length must be a non-negative int, got -1"),
    (dict(length=3.0), "length must be a non-negative int, got 3.0")])
def test_scan_refuses_bad_unroll_and_length(kwargs, match):
    with pytest.raises(rune.ArgumentError, match=f"scan: {match}"):
        rune.scan(lambda c, x: (c, None), 0, None if "length" in kwargs else ROWS, **kwargs)


@pytest.mark.parametrize("pred", [lambda c: c, lambda c: c * 1.0, lambda c: c - 3.0])
def test_while_loop_predicate_must_be_boolean(pred):
    with pytest.raises(rune.DTypeError, match=r"while_loop: cond_fn must return a boolean scalar, got "
                                              r"(int32|float64)\[\].*compare explicitly"):
        rune.while_loop(pred, lambda c: c - 1, 3)
    assert int(rune.while_loop(lambda c: c > 0, lambda c: c - 1, 3)) == 0


@pytest.mark.parametrize("lower, upper, bad", [
    (0.0, 3, "lower must be an integer scalar, got float 0.0"),
    (0, 3.5, "upper must be an integer scalar, got float 3.5"),
    (0, True, "upper must be an integer scalar, got bool True"),
    (0, f32(3.0)[0], r"upper must be an integer scalar, got float32\[\]")])
def test_fori_loop_bounds_must_be_integers(lower, upper, bad):
    with pytest.raises(rune.DTypeError, match=f"fori_loop: {bad}"):
        rune.fori_loop(lower, upper, lambda i, c: c + i, 0)
    with pytest.raises(rune.DTypeError, match="fori_loop: upper must be an integer scalar, got float32"):
        rune.jit(lambda n: rune.fori_loop(0, n, lambda i, c: c + i, 0))(3.0)
    assert int(rune.fori_loop(np.int64(0), nx.array(4), lambda i, c: c + i, 0)) == 6
    assert int(rune.jit(lambda n: rune.fori_loop(0, n, lambda i, c: c + i, 0))(4)) == 6


def test_switch_needs_branches():
    for branches in ([], ()):
        with pytest.raises(rune.ArgumentError, match="switch: branches must be a non-empty list"):
            rune.switch(0, branches, f32(1.0))
    with pytest.raises(rune.UsageError, match="switch: branch 1 must be a function, got int"):
        rune.switch(0, [lambda x: x, 3], f32(1.0))


# ---------------------------------------------------------------- callbacks

def test_callback_passes_keyword_arguments_to_fn_and_places_array_ones_on_the_host():
    seen = []

    def host(a, *, scale, offset=0.0):
        seen.append((type(scale).__name__, scale.device if hasattr(scale, "device") else None))
        return a * np.asarray(scale) + offset

    x, s = f32(1.0, 2.0), f32(3.0, 4.0)
    out = rune.callback(host, x, like=x, scale=s, offset=f32(1.0)[0])
    assert np.asarray(out).tolist() == [4.0, 9.0]
    assert seen[-1][1] == rune.devices()[0]  # placed on the host, as positional arrays are
    jitted = rune.jit(lambda a, b: rune.callback(host, a, like=a, scale=b))
    assert np.asarray(jitted(x, s)).tolist() == [3.0, 8.0]
    for method in ("sequential", "batched"):
        batched = rune.vmap(lambda a, b: rune.callback(host, a, like=a, scale=b, vmap_method=method))
        assert np.asarray(batched(x, s)).tolist() == [3.0, 8.0]
    grads = rune.grad(lambda a: nx.sum(a * rune.callback(host, rune.stop_gradient(a), like=a, scale=s)))(x)
    assert np.asarray(grads).tolist() == [3.0, 8.0]  # the callback is a constant: d(a * c)/da = c


class _Unconvertible:
    def __array__(self, *args, **kwargs):
        raise RuntimeError("no array here")


@pytest.mark.parametrize("result, match", [
    ({"u": (0, np.array([1j, 2j]))}, r"result\['u'\]\[1\]: expected dtype float32, got complex128"),
    ({"u": (0, np.array([None, None]))}, r"result\['u'\]\[1\]: expected dtype float32, got object"),
    ({"u": (0, _Unconvertible())}, r"result\['u'\]\[1\]: converting the _Unconvertible to an array "
                                   r"raised RuntimeError: no array here"),
    ({"u": (1e6, np.zeros(2, np.float32))}, r"result\['u'\]\[0\]: 1000000.0 does not fit in float16 \(it would become inf\)"),
    ({"u": (70000, np.zeros(2, np.float32))}, r"result\['u'\]\[0\]: 70000 does not fit in float16"),
])
def test_callback_results_that_cannot_be_taken_name_the_callback_and_leaf(result, match):
    def solver(a):
        return result

    like = {"u": (nx.zeros((), nx.float16), nx.zeros((2,), nx.float32))}
    with pytest.raises(rune.CallbackError, match="callback solver " + match):
        rune.callback(solver, f32(1.0), like=like)
    with pytest.raises(rune.CallbackError, match="callback solver " + match):
        rune.jit(lambda a: rune.callback(solver, a, like=like))(f32(1.0))


def test_callback_float16_results_in_range_and_non_finite_ones_are_kept():
    for value, expected in ((65504.0, 65504.0), (float("inf"), np.inf), (-1e-9, -0.0)):
        out = rune.callback(lambda a: value, f32(1.0), like=nx.zeros((), nx.float16))
        assert out.dtype == nx.float16 and float(out) == expected
    assert np.isnan(float(rune.callback(lambda a: float("nan"), f32(1.0), like=nx.zeros((), nx.float16))))


# ---------------------------------------------------------------- array functions

def test_concatenate_of_nothing_says_so():
    for empty in ([], (), iter([])):
        with pytest.raises(rune.ShapeError, match="concatenate: expected a non-empty sequence of arrays"):
            nx.concatenate(empty)


@pytest.mark.parametrize("fn", [nx.softmax, nx.log_softmax])
def test_softmax_names_itself_and_takes_empty_axes(fn):
    name = fn.__name__
    with pytest.raises(rune.ShapeError, match=f"^{name}: axis -1 is out of range for an array of rank 0"):
        fn(f32(1.0)[0])
    with pytest.raises(rune.ShapeError, match=f"^{name}: axis 2 is out of range"):
        fn(nx.ones((2, 3)), axis=2)
    for shape, axis in (((0,), -1), ((0, 3), 0), ((2, 0), 1), ((0, 3), 1)):
        out = fn(nx.zeros(shape), axis=axis)  # nothing to normalise: an empty result, as in JAX
        assert out.shape == shape and out.dtype == nx.float32
        g = rune.grad(lambda v: nx.sum(fn(v, axis=axis)))(nx.zeros(shape))
        assert g.shape == shape
    assert float(fn(f32(2.0)[0], axis=None)) == (1.0 if fn is nx.softmax else 0.0)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_take_numpy_initial(name):
    fn, ref = getattr(nx, name), getattr(np, name)
    data = np.array([[1.0, 2.0], [3.0, -4.0]], np.float32)
    x = nx.asarray(data)
    for kwargs in (dict(), dict(axis=0), dict(axis=1, keepdims=True), dict(axis=(0, 1))):
        for initial in (2.5, 0, -10.0):
            np.testing.assert_array_equal(np.asarray(fn(x, initial=initial, **kwargs)),
                                          ref(data, initial=initial, **kwargs))
            np.testing.assert_array_equal(np.asarray(rune.jit(lambda v: fn(v, initial=initial, **kwargs))(x)),
                                          ref(data, initial=initial, **kwargs))
    empty = np.zeros((0, 3), np.float32)
    for kwargs in (dict(axis=0), dict(), dict(axis=1, keepdims=True)):
        got = fn(nx.asarray(empty), initial=7.0, **kwargs)
        np.testing.assert_array_equal(np.asarray(got), ref(empty, initial=7.0, **kwargs))
    assert fn(nx.asarray(np.array([1, 2], np.int32)), initial=9).dtype == nx.int32
    # initial takes part in the derivative as a constant: a gradient only where x wins
    v = f32(1.0, 2.0)
    g = rune.grad(lambda a: fn(a, initial=1.5))(v)
    assert np.asarray(g).tolist() == ([0.0, 1.0] if name == "max" else [1.0, 0.0])
    with pytest.raises(rune.ShapeError, match=f"{name}: initial must be a scalar"):
        fn(x, initial=f32(1.0, 2.0))
    with pytest.raises(rune.ShapeError, match=f"{name}: reduction over an empty axis"):
        fn(nx.asarray(empty), axis=0)  # without initial there is still no identity


@pytest.mark.parametrize("data, where", [
    ([[1, 2], [3]], r"x\[1\] has shape \(1,\) and x\[0\] has shape \(2,\)"),
    ([[1, 2], 3], r"x\[1\] has shape \(\) and x\[0\] has shape \(2,\)"),
    ([[[1], [2]], [[3], [4, 5]]], r"x\[1\]\[1\] has shape \(2,\) and x\[1\]\[0\] has shape \(1,\)"),
    ([[[1], [2]], [[3, 4], [5, 6]]], r"x\[1\] has shape \(2, 2\) and x\[0\] has shape \(2, 1\)")])
def test_array_of_a_ragged_list_says_where(data, where):
    for make in (nx.array, nx.asarray):
        with pytest.raises(rune.ShapeError, match="array: nested sequences must be rectangular, but " + where):
            make(data)


# ---------------------------------------------------------------- environment variables

@pytest.mark.parametrize("name, value, expected", [
    ("RUNE_COMPILE_MIN_SIZE", "4k", "an integer >= 0"),
    ("RUNE_CACHE", "maybe", "0 or 1"),
    ("RUNE_CC", "definitely-not-a-compiler", "a C compiler"),
])
def test_a_bad_environment_variable_fails_the_jitted_call_naming_it(monkeypatch, name, value, expected):
    # The variable, what it accepts and what it holds; an ArgumentError (a ValueError).
    from rune.backends import pipeline as compiler   # the process's table of loaded units
    monkeypatch.setattr(compiler, "_LOADED", {})   # the kernel is looked up on disk, as in a new process
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "0")
    monkeypatch.setenv(name, value)
    with pytest.raises(rune.ArgumentError) as e:
        rune.jit(lambda x: x * 6.5 - 2)(f32(1.0, 2.0))
    message = str(e.value)
    assert f"environment variable {name}" in message and expected in message and repr(value) in message
    assert isinstance(e.value, ValueError)


def test_compile_errors_and_rune_warnings_are_public():
    assert issubclass(rune.CompileError, rune.RuneError) and issubclass(rune.CompileError, RuntimeError)
    assert issubclass(rune.RuneWarning, UserWarning)
    from rune.backends.cpu import compiler
    assert compiler.CompileError is rune.CompileError   # one class, wherever it is raised
