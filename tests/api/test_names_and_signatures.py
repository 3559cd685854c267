"""rune's public API against its documented public API (README, docs/): names, signatures.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import inspect

import pytest

import rune
from rune import nx

from api_support import params


# ---------------------------------------------------------------- names

RUNE_NAMES = [
    "nx", "tree", "grad", "value_and_grad", "vjp", "jvp", "vmap", "jacfwd", "jacrev",
    "hessian", "stop_gradient", "checkpoint", "scan", "cond", "while_loop", "fori_loop",
    "custom_vjp", "custom_jvp", "callback", "Spec", "jit", "trace", "stats", "reset_stats",
    "devices", "Device", "default_device", "place", "RuneError", "DeviceMismatchError",
    "NotDifferentiableError", "CallbackError", "ConcretizationError",
]

NX_NAMES = [
    "Array", "place", "from_dlpack", "random",
    # dtypes
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint32", "float16", "bfloat16",
    "float32", "float64",
    # creation
    "array", "asarray", "scalar", "create", "zeros", "ones", "full", "zeros_like",
    "ones_like", "full_like", "arange", "linspace", "eye",
    # elementwise math
    "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sinh",
    "cosh", "asin", "acos", "atan", "atan2", "erf", "sigmoid", "floor", "ceil", "round",
    "sign", "abs", "clip", "maximum", "minimum", "where", "isnan", "isfinite",
    "cast", "astype",
    # reductions
    "sum", "mean", "prod", "max", "min", "argmax", "argmin", "any", "all", "var", "std",
    "logsumexp",
    # shape ops
    "reshape", "transpose", "expand_dims", "squeeze", "broadcast_to", "concatenate",
    "stack", "split", "flip", "pad", "take", "dynamic_slice", "dynamic_update_slice",
    "matmul", "dot", "einsum", "outer", "softmax", "log_softmax",
]

# "the elementwise math of NumPy (arithmetic, ..., comparisons, logical, bitwise)"
NX_NUMPY_NAMES = [
    "add", "subtract", "multiply", "divide", "floor_divide", "power", "negative", "remainder",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_not", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "invert",
]

RANDOM_NAMES = ["key", "split", "fold_in", "uniform", "normal", "bernoulli", "randint"]
TREE_NAMES = ["flatten", "unflatten", "map", "leaves", "structure", "register"]


@pytest.mark.parametrize("name", RUNE_NAMES)
def test_rune_exports(name):
    assert hasattr(rune, name), f"rune.{name} missing"


@pytest.mark.parametrize("name", NX_NAMES)
def test_nx_exports(name):
    assert hasattr(nx, name), f"rune.nx.{name} missing"


@pytest.mark.parametrize("name", NX_NUMPY_NAMES)
def test_nx_numpy_elementwise_names(name):
    assert callable(getattr(nx, name, None)), f"rune.nx.{name} missing"


@pytest.mark.parametrize("name", RANDOM_NAMES)
def test_nx_random_exports(name):
    assert callable(getattr(nx.random, name, None)), f"rune.nx.random.{name} missing"


@pytest.mark.parametrize("name", TREE_NAMES)
def test_tree_exports(name):
    assert callable(getattr(rune.tree, name, None)), f"rune.tree.{name} missing"


def test_error_classes_derive_from_rune_error():
    assert issubclass(rune.RuneError, Exception)
    for cls in (rune.DeviceMismatchError, rune.NotDifferentiableError, rune.CallbackError,
                rune.ConcretizationError):
        assert issubclass(cls, rune.RuneError), cls


def test_concretization_error_is_a_type_error_like_jax():
    # JAX's ConcretizationTypeError is a TypeError.
    assert issubclass(rune.ConcretizationError, TypeError)


# ---------------------------------------------------------------- signatures

def test_sig_grad():
    p = params(rune.grad)
    assert [q.name for q in p[1:3]] == ["argnums", "has_aux"]
    assert p[1].default == 0 and p[2].default is False


def test_sig_value_and_grad():
    p = params(rune.value_and_grad)
    assert [q.name for q in p[1:3]] == ["argnums", "has_aux"]
    assert p[1].default == 0 and p[2].default is False


def test_sig_vjp():
    p = params(rune.vjp)
    assert p[1].kind is inspect.Parameter.VAR_POSITIONAL


def test_sig_jvp():
    p = params(rune.jvp)
    assert [q.name for q in p[1:3]] == ["primals", "tangents"]


def test_sig_vmap():
    p = params(rune.vmap)
    assert [q.name for q in p[1:3]] == ["in_axes", "out_axes"]
    assert p[1].default == 0 and p[2].default == 0


@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "hessian"])
def test_sig_jacobians_argnums_default_zero(name):
    sig = inspect.signature(getattr(rune, name))
    assert sig.parameters["argnums"].default == 0


def test_sig_scan():
    p = params(rune.scan)
    assert [q.name for q in p[1:5]] == ["init", "xs", "length", "reverse"]
    assert p[3].default is None and p[4].default is False


def test_sig_cond():
    p = params(rune.cond)
    assert [q.name for q in p[:3]] == ["pred", "true_fn", "false_fn"]
    assert p[3].kind is inspect.Parameter.VAR_POSITIONAL


def test_sig_while_loop():
    assert [q.name for q in params(rune.while_loop)] == ["cond_fn", "body_fn", "init"]


def test_sig_fori_loop():
    assert [q.name for q in params(rune.fori_loop)] == ["lower", "upper", "body_fn", "init"]


def test_sig_callback():
    sig = inspect.signature(rune.callback)
    p = list(sig.parameters.values())
    assert p[1].kind is inspect.Parameter.VAR_POSITIONAL
    like = sig.parameters["like"]
    assert like.kind is inspect.Parameter.KEYWORD_ONLY and like.default is inspect.Parameter.empty
    assert sig.parameters["host"].default is True
    assert sig.parameters["vmap_method"].default == "sequential"


def test_sig_jit():
    p = params(rune.jit)
    assert [q.name for q in p[1:5]] == ["static_argnums", "static_argnames", "donate_argnums", "device"]
    assert p[1].default == () and p[2].default == () and p[3].default == () and p[4].default is None


def test_sig_spec():
    s = rune.Spec((2, 3), nx.float32)
    assert tuple(s.shape) == (2, 3) and s.dtype == nx.float32
    assert s.device is None
    s2 = rune.Spec((1,), nx.float64, "cpu")
    assert str(s2.device).startswith("cpu")


def test_sig_random_uniform():
    assert [q.name for q in params(nx.random.uniform)][:5] == ["key", "shape", "dtype", "minval", "maxval"]


def test_sig_random_normal():
    assert [q.name for q in params(nx.random.normal)][:3] == ["key", "shape", "dtype"]


def test_sig_random_bernoulli():
    assert [q.name for q in params(nx.random.bernoulli)][:3] == ["key", "p", "shape"]


def test_sig_random_randint():
    assert [q.name for q in params(nx.random.randint)][:4] == ["key", "shape", "minval", "maxval"]


def test_sig_random_split():
    p = params(nx.random.split)
    assert [q.name for q in p[:2]] == ["key", "num"] and p[1].default == 2


def test_sig_random_fold_in():
    assert [q.name for q in params(nx.random.fold_in)][:2] == ["key", "data"]


def test_sig_scalar_and_create():
    assert [q.name for q in params(nx.scalar)][:2] == ["value", "dtype"]
    assert [q.name for q in params(nx.create)][:3] == ["dtype", "shape", "data"]
