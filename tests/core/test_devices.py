"""rune's public API against its documented public API (README, docs/): devices (in process), devices (subprocess, RUNE_HOST_DEVICES=2).

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import pytest

import rune
from rune import nx

from api_support import run_script, stat


# ---------------------------------------------------------------- devices (in process)

def test_devices_lists_cpu0():
    ds = rune.devices()
    assert str(ds[0]) == "cpu:0"
    assert all(isinstance(d, rune.Device) for d in ds)


def test_devices_kind_filter():
    assert [str(d) for d in rune.devices("cpu")][0] == "cpu:0"


def test_device_equality():
    assert rune.devices()[0] == rune.devices()[0]
    assert nx.zeros(2).device == rune.devices()[0]


def test_nx_place_same_device_no_copy():
    x = nx.array([1.0, 2.0])
    rune.reset_stats()
    y = nx.place(x, "cpu")
    assert y is x or stat("transfer") == 0
    assert y.tolist() == [1.0, 2.0]
    assert str(y.device) == "cpu:0"


def test_nx_place_device_object():
    x = nx.array([1.0])
    assert str(nx.place(x, rune.devices()[0]).device) == "cpu:0"
    assert str(nx.place(x, "cpu:0").device) == "cpu:0"


def test_rune_place_pytree():
    tree = {"w": nx.ones((2,)), "b": (nx.zeros(()), None)}
    out = rune.place(tree, "cpu")
    assert set(out) == {"w", "b"} and out["b"][1] is None
    assert str(out["w"].device) == "cpu:0" and isinstance(out["b"], tuple)


def test_default_device_context_manager():
    with rune.default_device("cpu"):
        assert str(nx.zeros(2).device) == "cpu:0"
    with rune.default_device(rune.devices()[0]):
        assert str(nx.array([1.0]).device) == "cpu:0"


def _no_gpu():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() == 0
    except Exception:
        return True


@pytest.mark.skipif(not _no_gpu(), reason="a GPU is present")
def test_place_cuda_without_gpu_raises_rune_error():
    with pytest.raises(rune.RuneError) as ei:
        nx.place(nx.ones(2), "cuda")
    assert "cuda" in str(ei.value).lower()
    assert rune.devices("cuda") == []


@pytest.mark.skipif(not _no_gpu(), reason="a GPU is present")
def test_unknown_device_string_raises():
    with pytest.raises(rune.RuneError):
        nx.zeros(2, device="cpu:5")


# ---------------------------------------------------------------- devices (subprocess, RUNE_HOST_DEVICES=2)

DEVICE_SCRIPT = r'''
import json, traceback
import numpy as np
import rune
from rune import nx

results = {}

def check(fn):
    try:
        fn()
        results[fn.__name__] = [True, ""]
    except BaseException as e:
        results[fn.__name__] = [False, "".join(traceback.format_exception(type(e), e, e.__traceback__))[-1500:]]
    return fn

def dev(x):
    return str(x.device)

x0 = nx.array([1.0, 2.0, 3.0])
d1 = rune.devices()[1] if len(rune.devices()) > 1 else "cpu:1"

@check
def two_host_devices():
    assert [str(d) for d in rune.devices()] == ["cpu:0", "cpu:1"], rune.devices()

@check
def place_string():
    y = nx.place(x0, "cpu:1")
    assert dev(y) == "cpu:1" and y.tolist() == [1.0, 2.0, 3.0] and dev(x0) == "cpu:0"

@check
def place_device_object():
    y = nx.place(x0, d1)
    assert y.device == d1

@check
def place_same_device_no_copy():
    y = nx.place(x0, "cpu:1")
    rune.reset_stats()
    z = nx.place(y, "cpu:1")
    s = dict(rune.stats())
    moved = {k: v for k, v in s.items() if ("transfer" in k or "to_" in k or "bytes" in k) and v}
    assert z is y or not moved, moved

@check
def place_back_and_forth_values():
    y = nx.place(nx.place(x0, "cpu:1"), "cpu:0")
    assert dev(y) == "cpu:0" and y.tolist() == [1.0, 2.0, 3.0]

def _expect_mismatch(thunk, opnames):
    try:
        thunk()
    except rune.DeviceMismatchError as e:
        assert isinstance(e, rune.RuneError)
        m = str(e)
        assert "cpu:0" in m and "cpu:1" in m, m
        assert any(o in m for o in opnames), m
    else:
        raise AssertionError("no DeviceMismatchError")

@check
def mismatch_add_operator():
    y = nx.place(x0, "cpu:1")
    _expect_mismatch(lambda: x0 + y, ["add", "+"])

@check
def mismatch_matmul():
    y = nx.place(x0, "cpu:1")
    _expect_mismatch(lambda: nx.matmul(x0, y), ["matmul", "@", "dot"])

@check
def mismatch_concatenate():
    y = nx.place(x0, "cpu:1")
    _expect_mismatch(lambda: nx.concatenate([x0, y]), ["concatenate"])

@check
def mismatch_where():
    y = nx.place(x0, "cpu:1")
    _expect_mismatch(lambda: nx.where(x0 > 1, x0, y), ["where", "select"])

@check
def mismatch_at_set():
    y = nx.place(x0, "cpu:1")
    _expect_mismatch(lambda: x0.at[0].set(y[0]), ["set", "scatter", "at"])

@check
def mismatch_under_jit():
    y = nx.place(x0, "cpu:1")
    _expect_mismatch(lambda: rune.jit(lambda a, b: a * b)(x0, y), ["mul", "*", "jit"])

@check
def state_usable_after_mismatch():
    y = nx.place(x0, "cpu:1")
    before = dict(rune.stats())
    try:
        x0 + y
    except rune.DeviceMismatchError:
        pass
    assert dict(rune.stats()) == before, (before, rune.stats())
    assert (x0 + x0).tolist() == [2.0, 4.0, 6.0]

@check
def python_scalars_follow_array():
    y = nx.place(x0, "cpu:1")
    assert dev(y + 1.0) == "cpu:1" and dev(2 * y) == "cpu:1" and dev(nx.maximum(y, 0.0)) == "cpu:1"

@check
def ops_keep_device():
    y = nx.place(nx.array([[1.0, 2.0], [3.0, 4.0]]), "cpu:1")
    outs = [nx.sin(y), y.sum(), y[0], y.reshape(4), y.T, y @ y, y.at[0, 0].set(5.0), nx.softmax(y), y[nx.place(nx.array([1]), "cpu:1")]]
    assert all(dev(o) == "cpu:1" for o in outs), [dev(o) for o in outs]

@check
def creation_device_kw():
    outs = [nx.zeros((2,), device="cpu:1"), nx.ones((2,), device="cpu:1"), nx.full((2,), 1.0, device="cpu:1"),
            nx.array([1.0], device="cpu:1"), nx.asarray([1.0], device="cpu:1"), nx.arange(3, device="cpu:1"),
            nx.linspace(0.0, 1.0, 3, device="cpu:1"), nx.eye(2, device="cpu:1"),
            nx.scalar(1.0, nx.float32, device="cpu:1"), nx.create(nx.float32, (1,), [1.0], device="cpu:1"),
            nx.zeros_like(x0, device="cpu:1"), nx.ones_like(x0, device="cpu:1"), nx.full_like(x0, 2.0, device="cpu:1"),
            nx.zeros((2,), device=d1)]
    assert all(dev(o) == "cpu:1" for o in outs), [dev(o) for o in outs]

@check
def like_functions_follow_input_device():
    y = nx.place(x0, "cpu:1")
    assert dev(nx.zeros_like(y)) == "cpu:1" and dev(nx.ones_like(y)) == "cpu:1" and dev(nx.full_like(y, 3.0)) == "cpu:1"

@check
def default_device_context():
    with rune.default_device("cpu:1"):
        a = nx.zeros((2,))
        b = nx.array([1.0])
        with rune.default_device("cpu:0"):
            c = nx.ones((1,))
        d = nx.arange(2)
    e = nx.zeros((2,))
    assert [dev(a), dev(b), dev(c), dev(d), dev(e)] == ["cpu:1", "cpu:1", "cpu:0", "cpu:1", "cpu:0"]

@check
def default_device_context_restored_after_exception():
    try:
        with rune.default_device("cpu:1"):
            raise KeyError("x")
    except KeyError:
        pass
    assert dev(nx.zeros(1)) == "cpu:0"

@check
def rune_place_tree():
    t = {"a": x0, "b": [nx.zeros((1,)), None], "c": (nx.ones(()),)}
    out = rune.place(t, "cpu:1")
    assert dev(out["a"]) == "cpu:1" and dev(out["b"][0]) == "cpu:1" and out["b"][1] is None and dev(out["c"][0]) == "cpu:1"
    assert isinstance(out["b"], list) and isinstance(out["c"], tuple)

@check
def jit_device_kw_places():
    g = rune.jit(lambda a: a * 2.0, device="cpu:1")
    r = g(x0)
    assert dev(r) == "cpu:1" and r.tolist() == [2.0, 4.0, 6.0]

@check
def jit_result_follows_inputs():
    g = rune.jit(lambda a: a + 1.0)
    y = nx.place(x0, "cpu:1")
    assert dev(g(y)) == "cpu:1" and dev(g(x0)) == "cpu:0"

@check
def jit_retraces_per_device():
    n = []
    def f(a):
        n.append(1)
        return a * 3.0
    g = rune.jit(f)
    g(x0); g(nx.place(x0, "cpu:1")); g(x0); g(nx.place(x0, "cpu:1"))
    assert len(n) == 2, len(n)

@check
def grad_keeps_device():
    y = nx.place(x0, "cpu:1")
    g = rune.grad(lambda a: (a * a).sum())(y)
    assert dev(g) == "cpu:1" and g.tolist() == [2.0, 4.0, 6.0]

@check
def vmap_scan_keep_device():
    y = nx.place(x0, "cpu:1")
    v = rune.vmap(lambda a: a * 2.0)(y)
    c, ys = rune.scan(lambda c, r: (c + r, c), nx.place(nx.array(0.0), "cpu:1"), y)
    assert dev(v) == "cpu:1" and dev(c) == "cpu:1" and dev(ys) == "cpu:1"

@check
def callback_args_on_host_result_like_device():
    seen = []
    def fn(a):
        seen.append(str(getattr(a, "device", "cpu:0")))
        return np.asarray(a) * 2
    y = nx.place(nx.array([1.0, 2.0]), "cpu:1")
    r = rune.callback(fn, y, like=y)
    assert seen == ["cpu:0"], seen
    assert dev(r) == "cpu:1" and r.tolist() == [2.0, 4.0]

@check
def callback_host_false_receives_where_lies():
    seen = []
    def fn(a):
        seen.append(str(a.device))
        return a
    y = nx.place(nx.array([1.0, 2.0]), "cpu:1")
    r = rune.callback(fn, y, like=y, host=False)
    assert seen == ["cpu:1"], seen
    assert dev(r) == "cpu:1"

@check
def callback_spec_device():
    r = rune.callback(lambda a: np.asarray(a) + 1, x0, like=rune.Spec((3,), nx.float32, device="cpu:1"))
    assert dev(r) == "cpu:1" and r.tolist() == [2.0, 3.0, 4.0]

@check
def callback_in_jit_places_result():
    y = nx.place(nx.array([1.0, 2.0]), "cpu:1")
    g = rune.jit(lambda a: rune.callback(lambda b: np.asarray(b) + 1, a, like=a) * 2.0)
    r = g(y)
    assert dev(r) == "cpu:1" and r.tolist() == [4.0, 6.0]

@check
def random_bit_identical_across_devices():
    k = nx.random.key(3)
    a = nx.random.uniform(k, (16,))
    b = nx.random.uniform(nx.place(k, "cpu:1"), (16,))
    assert dev(b) == "cpu:1"
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    with rune.default_device("cpu:1"):
        c = nx.random.normal(nx.random.key(3), (16,))
    assert dev(c) == "cpu:1"
    assert np.asarray(c).tobytes() == np.asarray(nx.random.normal(nx.random.key(3), (16,))).tobytes()

@check
def mismatch_scan_closure():
    w = nx.place(nx.array(2.0), "cpu:1")
    try:
        rune.scan(lambda c, x: (c + w * x, None), nx.array(0.0), nx.arange(3.0))
    except rune.DeviceMismatchError as e:
        assert "cpu:0" in str(e) and "cpu:1" in str(e), str(e)
    else:
        raise AssertionError("no DeviceMismatchError")

@check
def mismatch_cond_operands():
    y = nx.place(x0, "cpu:1")
    try:
        rune.cond(True, lambda a, b: a + b, lambda a, b: a - b, x0, y)
    except rune.DeviceMismatchError:
        pass
    else:
        raise AssertionError("no DeviceMismatchError")

@check
def mismatch_under_grad_and_vmap():
    y = nx.place(x0, "cpu:1")
    for thunk in (lambda: rune.grad(lambda a: (a * y).sum())(x0), lambda: rune.vmap(lambda a, b: a * b)(x0, y)):
        try:
            thunk()
        except rune.DeviceMismatchError:
            pass
        else:
            raise AssertionError("no DeviceMismatchError")

@check
def callback_like_elsewhere_under_jit():
    g = rune.jit(lambda a: rune.callback(lambda b: np.asarray(b) * 2, a, like=rune.Spec((3,), nx.float32, device="cpu:1")))
    r = g(x0)
    assert dev(r) == "cpu:1" and r.tolist() == [2.0, 4.0, 6.0]

@check
def mismatch_index_array_elsewhere():
    y = nx.place(x0, "cpu:1")
    try:
        y[nx.array([0, 1])]
    except rune.DeviceMismatchError:
        pass
    else:
        raise AssertionError("no DeviceMismatchError for an index array on cpu:0")

@check
def np_asarray_from_other_device():
    assert np.asarray(nx.place(x0, "cpu:1")).tolist() == [1.0, 2.0, 3.0]

print("@@RESULTS@@" + json.dumps(results))
'''

ENV_SCRIPT = r'''
import json
import rune
from rune import nx
print("@@RESULTS@@" + json.dumps({"zeros": str(nx.zeros((2,)).device), "array": str(nx.array([1.0]).device),
                                   "key": str(nx.random.key(0).device)}))
'''




@pytest.fixture(scope="module")
def two_devices():
    return run_script(DEVICE_SCRIPT, RUNE_HOST_DEVICES="2")


DEVICE_CHECKS = [
    "two_host_devices", "place_string", "place_device_object", "place_same_device_no_copy",
    "place_back_and_forth_values", "mismatch_add_operator", "mismatch_matmul", "mismatch_concatenate",
    "mismatch_where", "mismatch_at_set", "mismatch_under_jit", "state_usable_after_mismatch",
    "python_scalars_follow_array", "ops_keep_device", "creation_device_kw",
    "like_functions_follow_input_device", "default_device_context",
    "default_device_context_restored_after_exception", "rune_place_tree", "jit_device_kw_places",
    "jit_result_follows_inputs", "jit_retraces_per_device", "grad_keeps_device", "vmap_scan_keep_device",
    "callback_args_on_host_result_like_device", "callback_host_false_receives_where_lies",
    "callback_spec_device", "callback_in_jit_places_result", "random_bit_identical_across_devices",
    "np_asarray_from_other_device", "mismatch_scan_closure", "mismatch_cond_operands",
    "mismatch_under_grad_and_vmap", "callback_like_elsewhere_under_jit",
    "mismatch_index_array_elsewhere",
]


@pytest.mark.parametrize("name", DEVICE_CHECKS)
def test_host_devices(two_devices, name):
    ok, detail = two_devices[name]
    assert ok, detail


def test_env_default_device():
    r = run_script(ENV_SCRIPT, RUNE_HOST_DEVICES="2", RUNE_DEFAULT_DEVICE="cpu:1")
    assert r == {"zeros": "cpu:1", "array": "cpu:1", "key": "cpu:1"}, r
