"""Placement, devices and transfers; errors; conversions; operators; random numbers.

Placement tests need two host devices. RUNE_HOST_DEVICES is read when rune is
imported, so `test_two_devices_*` run in a child pytest process started with
RUNE_HOST_DEVICES=2 (`test_placement_with_two_host_devices`); in a process
that already has them (the child, or a run with the variable set) they run
directly (tests/host_devices.py). Everything else runs in this process against NumPy.
"""
import math

import numpy as np
import pytest

import rune
from rune import nx

from host_devices import TWO, child, run_two_devices_tests, two_devices

@pytest.mark.skipif(TWO, reason="this process already has two host devices")
def test_placement_with_two_host_devices():
    run_two_devices_tests(__file__)


def _have_gpu():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def dev(name):
    """The Device named `name`."""
    return nx.zeros(0, device=name).device


def _values(shape=(2, 3), dtype=np.float32):
    return np.arange(math.prod(shape), dtype=dtype).reshape(shape)


# ---------------------------------------------------------------- devices and placement (child)

@two_devices
def test_two_devices_listed():
    cpus = rune.devices("cpu")
    assert [str(d) for d in cpus] == ["cpu:0", "cpu:1"]
    assert [str(d) for d in rune.devices()[:2]] == ["cpu:0", "cpu:1"]
    d1 = cpus[1]
    assert (d1.platform, d1.index, d1.name) == ("cpu", 1, "cpu:1")
    assert d1 != cpus[0] and d1 == rune.devices()[1]
    assert nx.zeros(1).device == cpus[0]  # the default is cpu:0


@two_devices
def test_two_devices_place_moves_and_counts_one_transfer():
    a = nx.asarray(_values())
    rune.reset_stats()
    b = nx.place(a, "cpu:1")
    assert str(b.device) == "cpu:1" and str(a.device) == "cpu:0"
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(np.asarray(b), _values())
    s = rune.stats()
    assert s["transfers"] == 1 and s["bytes_moved"] == _values().nbytes
    assert s["host_to_device"] == 0 and s["device_to_host"] == 0  # host to host: not an accelerator copy
    # Distinct devices never share a buffer.
    assert not np.shares_memory(np.asarray(a), np.asarray(b))
    # Back again: one more transfer, same values.
    c = nx.place(b, dev("cpu:0"))
    assert str(c.device) == "cpu:0"
    assert rune.stats()["transfers"] == 2 and rune.stats()["bytes_moved"] == 2 * _values().nbytes
    np.testing.assert_array_equal(np.asarray(c), _values())


@two_devices
def test_two_devices_place_where_it_lies_is_free():
    a = nx.asarray(_values())
    b = nx.place(a, "cpu:1")
    rune.reset_stats()
    assert nx.place(b, "cpu:1") is b
    assert nx.place(b, dev("cpu:1")) is b
    assert nx.place(a, "cpu") is a and nx.place(a, "cpu:0") is a
    assert rune.stats()["transfers"] == 0 and rune.stats()["bytes_moved"] == 0


@two_devices
def test_two_devices_place_other_values():
    x = nx.place(np.arange(3.0), "cpu:1")
    assert isinstance(x, nx.Array) and str(x.device) == "cpu:1" and x.dtype == np.float64
    y = nx.place(2.5, "cpu:1")
    assert str(y.device) == "cpu:1" and y.dtype == np.float32 and y.item() == 2.5


@two_devices
def test_two_devices_mixing_devices_raises():
    a = nx.asarray(_values())
    b = nx.place(nx.asarray(_values()), "cpu:1")
    rune.reset_stats()
    checks = [("add", lambda: a + b), ("mul", lambda: b * a), ("add", lambda: nx.add(b, a)),
              ("dot_general", lambda: nx.matmul(a, b.T)), ("select", lambda: nx.where(a > 1, a, b)),
              ("concatenate", lambda: nx.concatenate([a, b])), ("max", lambda: nx.maximum(a, b)),
              ("lt", lambda: a < b),
              ("dynamic_update_slice", lambda: nx.dynamic_update_slice(b, a[:1], (nx.zeros((), nx.int32, "cpu:1"),) * 2))]
    for op, thunk in checks:
        with pytest.raises(rune.DeviceMismatchError) as info:
            thunk()
        msg = str(info.value)
        assert "cpu:0" in msg and "cpu:1" in msg and op in msg, (op, msg)
        assert isinstance(info.value, ValueError) and isinstance(info.value, rune.RuneError)
    # Nothing moved silently, and nothing is broken afterwards.
    assert rune.stats()["transfers"] == 0
    np.testing.assert_array_equal(np.asarray(a + nx.place(b, "cpu:0")), 2 * _values())


@two_devices
def test_two_devices_clip_mismatch_names_clip():
    a = nx.asarray(_values())
    b = nx.place(nx.asarray(_values()), "cpu:1")
    lo, hi = nx.asarray(1.0), nx.place(nx.asarray(4.0), "cpu:1")
    for thunk in (lambda: nx.clip(b, lo, 4.0), lambda: nx.clip(a, 1.0, hi), lambda: nx.clip(a, lo, hi),
                  lambda: rune.jit(lambda x: nx.clip(x, lo))(b)):
        with pytest.raises(rune.DeviceMismatchError, match=r"^clip: operands are on different devices"):
            thunk()
    np.testing.assert_array_equal(np.asarray(nx.clip(b, 1.0, hi)), np.clip(_values(), 1.0, 4.0))


@two_devices
def test_two_devices_index_array_on_another_device_raises():
    b = nx.place(nx.asarray(_values()), "cpu:1")
    idx = nx.asarray(np.array([1, 0], np.int32))  # on cpu:0
    rune.reset_stats()
    with pytest.raises(rune.DeviceMismatchError):
        nx.take(b, idx, axis=1)
    assert rune.stats()["transfers"] == 0


@two_devices
def test_two_devices_python_scalars_meet_arrays_where_they_lie():
    b = nx.place(nx.asarray(_values()), "cpu:1")
    rune.reset_stats()
    results = [b + 1, 2.0 * b, b ** 2, 1 - b, b / 2, b // 2, b % 2, -b, b > 1, 3 == b,
               nx.where(b > 2, b, 0.0), nx.where(b > 2, 1.0, 0.0 * b), nx.maximum(b, 0), nx.clip(b, 1, 4),
               nx.mean(b), nx.var(b, axis=0), nx.softmax(b), nx.log_softmax(b), nx.logsumexp(b, axis=1),
               nx.sum(b, keepdims=True), nx.argmax(b, axis=1), nx.any(b > 3), nx.sin(b), b.T, b[1, ::-1],
               b[None, ..., 1:], nx.reshape(b, (3, 2)), nx.stack([b, b]), nx.split(b, 3, axis=1)[2],
               nx.full_like(b, 3), nx.zeros_like(b), nx.ones_like(b, dtype=nx.int32), nx.astype(b, nx.int8),
               nx.einsum("ij,kj->ik", b, b), b @ b.T]
    for r in results:
        assert str(r.device) == "cpu:1", r
    assert rune.stats()["transfers"] == 0
    np.testing.assert_allclose(np.asarray(nx.where(b > 2, b, 0.0)), np.where(_values() > 2, _values(), 0))
    # Ops that build constant index or value arrays place them with their operand.
    more = [b[np.array([1, 0])], b[:, [2, 0]], b.at[0, 1].set(7.0), b.at[np.array([1, 1])].add(1.0),
            nx.pad(b, 1, constant_values=2.0), nx.take(b, np.array([2, 0]), axis=1),
            nx.dynamic_update_slice(b, nx.place(nx.ones((1, 2)), "cpu:1"), (1, 0)),
            nx.dynamic_slice(b, (1, 1), (1, 2))]
    for r in more:
        assert str(r.device) == "cpu:1", r
    np.testing.assert_array_equal(np.asarray(more[2]), np.where(np.arange(6).reshape(2, 3) == 1, 7, _values()))


@two_devices
@pytest.mark.parametrize("draw", [
    pytest.param(lambda k: nx.random.fold_in(k, 3), id="fold_in"),
    pytest.param(lambda k: nx.random.randint(k, (4,), 0, 10), id="randint"),
])
def test_two_devices_random_with_python_ints_on_cpu1(draw):
    k = nx.random.key(0, device="cpu:1")
    out = draw(k)
    assert str(out.device) == "cpu:1"
    np.testing.assert_array_equal(np.asarray(out), np.asarray(draw(nx.random.key(0))))


@two_devices
def test_two_devices_random_is_the_same_on_both_devices():
    k0, k1 = nx.random.key(7), nx.random.key(7, device="cpu:1")
    assert str(k1.device) == "cpu:1"
    for draw in (lambda k: nx.random.uniform(k, (50,)), lambda k: nx.random.normal(k, (50,), nx.float64),
                 lambda k: nx.random.bernoulli(k, 0.3, (50,)), lambda k: nx.random.split(k, 3)):
        a, b = draw(k0), draw(k1)
        assert str(b.device) == "cpu:1"
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@two_devices
def test_two_devices_default_device_context():
    cpu1 = dev("cpu:1")
    a = nx.asarray(_values())
    with rune.default_device("cpu:1") as d:
        assert d == cpu1
        made = [nx.zeros(3), nx.ones((2,)), nx.full(2, 1.5), nx.arange(4), nx.linspace(0, 1, 3), nx.eye(2),
                nx.asarray([1, 2]), nx.array(np.ones(2)), nx.scalar(3.0), nx.random.key(1),
                nx.create(nx.int32, (2,), [1, 2]), nx.add(1, 2)]
        for x in made:
            assert x.device == cpu1, x
        # Arrays already placed stay where they are; mixing is still an error.
        assert str(a.device) == "cpu:0"
        with pytest.raises(rune.DeviceMismatchError):
            a + nx.zeros((2, 3))
        with rune.default_device(dev("cpu:0")):
            assert str(nx.zeros(1).device) == "cpu:0"
        assert nx.zeros(1).device == cpu1
    assert str(nx.zeros(1).device) == "cpu:0"
    # An exception inside the block restores the default.
    with pytest.raises(RuntimeError):
        with rune.default_device("cpu:1"):
            raise RuntimeError("boom")
    assert str(nx.zeros(1).device) == "cpu:0"


@two_devices
def test_two_devices_place_pytree():
    a = nx.asarray(_values())
    already = nx.place(nx.ones(4), "cpu:1")
    tree = {"w": a, "layers": [nx.zeros(3), (np.arange(2.0), already)], "none": None}
    rune.reset_stats()
    out = rune.place(tree, "cpu:1")
    assert set(out) == {"w", "layers", "none"} and out["none"] is None
    leaves = [out["w"], out["layers"][0], out["layers"][1][0], out["layers"][1][1]]
    assert all(isinstance(x, nx.Array) and str(x.device) == "cpu:1" for x in leaves)
    assert isinstance(out["layers"], list) and isinstance(out["layers"][1], tuple)
    assert out["layers"][1][1] is already
    assert rune.stats()["transfers"] == 2  # a and the zeros; the NumPy leaf is created there
    np.testing.assert_array_equal(np.asarray(out["w"]), _values())


@two_devices
def test_two_devices_creation_with_device():
    rune.reset_stats()
    made = [nx.zeros(3, device="cpu:1"), nx.ones((2, 2), nx.int8, device="cpu:1"),
            nx.full((2,), 7, device="cpu:1"), nx.arange(5, device="cpu:1"), nx.linspace(0, 1, 4, device="cpu:1"),
            nx.eye(3, device="cpu:1"), nx.identity(2, device="cpu:1"), nx.scalar(1.0, device="cpu:1"),
            nx.create(nx.float64, (2,), [1, 2], device="cpu:1"), nx.asarray(np.ones(3), device="cpu:1"),
            nx.array([1, 2, 3], device="cpu:1"), nx.random.key(3, device="cpu:1"),
            nx.from_dlpack(np.arange(3), device="cpu:1")]
    for x in made:
        assert str(x.device) == "cpu:1", x
    assert rune.stats()["transfers"] == 0  # built where they belong
    b = made[0]
    assert str(nx.zeros_like(b).device) == "cpu:1" and str(nx.full_like(b, 2.0).device) == "cpu:1"
    assert str(nx.ones_like(b, device="cpu:0").device) == "cpu:0"
    np.testing.assert_array_equal(np.asarray(made[3]), np.arange(5))
    assert np.asarray(made[1]).dtype == np.int8


@two_devices
def test_two_devices_host_reads_of_cpu1_arrays():
    b = nx.place(nx.asarray(_values()), "cpu:1")
    np.testing.assert_array_equal(np.asarray(b), _values())
    assert b.tolist() == _values().tolist() and b[1, 2].item() == 5.0
    np.testing.assert_array_equal(np.from_dlpack(b), _values())
    assert "cpu:1" in repr(b)


@two_devices
def test_two_devices_unknown_devices():
    x = nx.zeros(2)
    with pytest.raises(rune.DeviceError, match="RUNE_HOST_DEVICES"):
        nx.place(x, "cpu:2")
    with pytest.raises(rune.DeviceError, match="cpu:5"):
        nx.zeros(2, device="cpu:5")


def test_default_device_from_environment():
    code = ("import rune; from rune import nx\n"
            "print(nx.zeros(2).device, nx.asarray([1]).device, nx.add(1.0, 2).device, nx.random.key(0).device)\n"
            "with rune.default_device('cpu:0'):\n"
            "    print(nx.zeros(1).device)\n")
    run = child(code, {"RUNE_HOST_DEVICES": "2", "RUNE_DEFAULT_DEVICE": "cpu:1"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["cpu:1"] * 4 + ["cpu:0"]


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_bad_host_device_count_is_reported(value):
    run = child("import rune", {"RUNE_HOST_DEVICES": value})
    assert run.returncode != 0
    assert "ArgumentError" in run.stderr and "RUNE_HOST_DEVICES" in run.stderr and repr(value) in run.stderr


# ---------------------------------------------------------------- device names (this process)

@pytest.mark.skipif(_have_gpu(), reason="a GPU is present")
def test_devices_without_a_gpu():
    assert [str(d) for d in rune.devices()] == ["cpu:0"]
    assert rune.devices("cuda") == []


@pytest.mark.skipif(_have_gpu(), reason="a GPU is present")
def test_cuda_without_a_gpu_is_a_clear_error():
    x = nx.zeros(2)
    for thunk in (lambda: nx.place(x, "cuda"), lambda: nx.place(x, "cuda:0"),
                  lambda: nx.zeros(2, device="cuda"), lambda: rune.place({"a": x}, "cuda")):
        with pytest.raises(rune.DeviceError) as info:
            thunk()
        assert isinstance(info.value, ValueError) and isinstance(info.value, rune.RuneError)
        msg = str(info.value)
        assert "cuda" in msg and "not available" in msg, msg
    with pytest.raises(rune.DeviceError):
        with rune.default_device("cuda"):
            pass
    assert rune.devices("cuda") == [] and str(nx.zeros(1).device) == "cpu:0"


@pytest.mark.parametrize("spec", ["tpu", "cpu:x", "gpu:0", 3, None, "cpu:-1"])
def test_unknown_device_names(spec):
    with pytest.raises(rune.DeviceError) as info:
        nx.place(nx.zeros(2), spec)
    assert isinstance(info.value, ValueError)
    assert repr(spec) in str(info.value) or str(spec) in str(info.value)


def test_stats_is_a_snapshot():
    s = rune.stats()
    s["transfers"] = 99
    assert rune.stats()["transfers"] == 0
    assert {"transfers", "host_to_device", "device_to_host", "bytes_moved"} <= set(s)


# ---------------------------------------------------------------- errors (section 1.4)

def test_bad_axis():
    x = nx.zeros((2, 3))
    for thunk, op in [(lambda: nx.sum(x, axis=2), "sum"), (lambda: nx.mean(x, axis=-3), "mean"),
                      (lambda: nx.argmax(x, axis=5), "argmax"), (lambda: nx.expand_dims(x, 4), "expand_dims"),
                      (lambda: nx.flip(x, 2), "flip"), (lambda: nx.concatenate([x, x], axis=2), "concatenate"),
                      (lambda: nx.sum(x, axis=(0, 0)), "sum"), (lambda: nx.softmax(x, axis=3), "max")]:
        with pytest.raises(rune.ShapeError) as info:
            thunk()
        assert isinstance(info.value, ValueError)
        assert op in str(info.value), str(info.value)


def test_bad_reshape_names_both_shapes():
    x = nx.zeros((2, 3))
    with pytest.raises(rune.ShapeError) as info:
        x.reshape(4, 2)
    msg = str(info.value)
    assert "reshape" in msg and "(2, 3)" in msg and "(4, 2)" in msg
    with pytest.raises(rune.ShapeError):
        nx.reshape(x, (-1, -1))
    with pytest.raises(rune.ShapeError):
        nx.reshape(x, (4, -1))


def test_other_shape_errors():
    x = nx.zeros((2, 3))
    cases = [lambda: nx.matmul(x, x), lambda: nx.squeeze(x, 0), lambda: nx.transpose(x, (0, 0)),
             lambda: nx.broadcast_to(x, (3, 3)), lambda: nx.concatenate([x, nx.zeros((3, 2))]),
             lambda: nx.stack([x, nx.zeros(3)]), lambda: nx.split(x, 4, axis=1),
             lambda: nx.max(nx.zeros((0,))), lambda: nx.einsum("ii->i", nx.zeros((2, 3))),
             lambda: nx.einsum("ij,jk->ik", x), lambda: nx.pad(x, ((1, 1),) * 3),
             lambda: nx.dynamic_slice(x, (0, 0), (3, 1)), lambda: nx.matmul(x, 2.0)]
    for thunk in cases:
        with pytest.raises(rune.ShapeError):
            thunk()
    with pytest.raises(rune.ShapeError, match=r"\(2, 3\) @ \(2, 3\)"):
        nx.matmul(x, x)


def test_broadcast_to_error_names_both_shapes():
    with pytest.raises(rune.ShapeError) as info:
        nx.broadcast_to(nx.zeros((2, 3)), (3, 3))
    assert "(2, 3)" in str(info.value) and "(3, 3)" in str(info.value)


@pytest.mark.parametrize("op,prim", [(nx.add, "add"), (nx.multiply, "mul"), (nx.maximum, "max"),
                                     (nx.less, "lt"), (nx.bitwise_and, "and")])
def test_bad_broadcast_names_both_shapes_and_the_op(op, prim):
    a, b = nx.zeros((2, 3), nx.int32), nx.zeros((4,), nx.int32)
    for x, y in ((a, b), (b, a)):
        with pytest.raises(rune.ShapeError) as info:
            op(x, y)
        msg = str(info.value)
        assert "(2, 3)" in msg and "(4,)" in msg and (op.__name__ in msg or prim in msg), msg
        assert isinstance(info.value, ValueError)


def test_bad_broadcast_in_where_and_composites():
    with pytest.raises(rune.ShapeError, match=r"select|where"):
        nx.where(nx.zeros((2, 3)) > 0, nx.zeros((2, 3)), nx.zeros((4,)))
    with pytest.raises(rune.ShapeError, match=r"\(2, 3\)"):
        nx.clip(nx.zeros((2, 3)), nx.zeros(4), 1.0)
    with pytest.raises(rune.ShapeError, match=r"\(3,\)"):
        nx.zeros((2, 3)) @ nx.zeros((3, 2)) + nx.zeros(3)


def test_out_of_bounds_static_index():
    x = nx.asarray(_values())
    for idx in (2, -3, (0, 3), (1, -4), (0, 0, 0)):
        with pytest.raises(rune.IndexingError) as info:
            x[idx]
        assert isinstance(info.value, IndexError) and isinstance(info.value, rune.RuneError)
    with pytest.raises(IndexError, match="out of bounds"):
        x[0, 3]
    with pytest.raises(rune.IndexingError, match="3"):
        x[0, 3]
    with pytest.raises(rune.IndexingError):
        x.at[5].set(1.0)
    # A boolean mask works alone (x[mask]); combined with other indices it is refused.
    for bad in (1.5, "a", (Ellipsis, Ellipsis), (x > 2, 0), True):
        with pytest.raises(rune.IndexingError):
            x[bad]
    with pytest.raises(rune.IndexingError):
        x[np.array([0.5])]
    with pytest.raises(rune.IndexingError):
        x.at[:, 0].set(nx.zeros(3))  # 3 values for 2 positions


def test_bitwise_on_floats_is_a_dtype_error():
    f = nx.zeros(3)
    i = nx.zeros(3, nx.int32)
    for thunk, op in [(lambda: f & f, "bitwise_and"), (lambda: f | i, "bitwise_or"), (lambda: f ^ 1, "bitwise_xor"),
                      (lambda: ~f, "invert"), (lambda: nx.left_shift(f, 1), "left_shift"),
                      (lambda: nx.right_shift(i, f), "right_shift"), (lambda: True & f, "bitwise_and")]:
        with pytest.raises(rune.DTypeError) as info:
            thunk()
        assert isinstance(info.value, TypeError)
        assert op in str(info.value) and "float" in str(info.value), str(info.value)


def test_other_dtype_errors():
    with pytest.raises(rune.DTypeError, match="take"):
        nx.take(nx.zeros(3), np.array([0.5]))
    with pytest.raises(rune.DTypeError):
        nx.zeros(2, dtype="complex256")
    with pytest.raises(rune.DTypeError):
        nx.asarray(["a", "b"])
    with pytest.raises(rune.DTypeError):
        nx.asarray(np.zeros(2, "datetime64[s]"))


@pytest.mark.parametrize("thunk", [lambda b: b - b, lambda b: -b, lambda b: nx.subtract(b, True)],
                         ids=["sub", "neg", "sub-weak"])
def test_bool_arithmetic_errors_are_rune_errors(thunk):
    with pytest.raises(rune.DTypeError):
        thunk(nx.asarray(np.array([True, False])))


@pytest.mark.parametrize("op", [nx.argmax, nx.argmin])
def test_argmax_of_empty_is_a_shape_error(op):
    with pytest.raises(rune.ShapeError):
        op(nx.zeros((0,)))


def test_errors_leave_nothing_broken():
    x = nx.asarray(_values())
    before = rune.stats()
    for thunk in (lambda: x.reshape(5), lambda: x[9], lambda: x & x, lambda: nx.sum(x, 7)):
        with pytest.raises(rune.RuneError):
            thunk()
    assert rune.stats() == before
    np.testing.assert_array_equal(np.asarray(x + 1), _values() + 1)


def test_error_hierarchy():
    for cls, builtin in [(rune.ShapeError, ValueError), (rune.DTypeError, TypeError),
                         (rune.DeviceError, ValueError), (rune.DeviceMismatchError, ValueError),
                         (rune.IndexingError, IndexError)]:
        assert issubclass(cls, rune.RuneError) and issubclass(cls, builtin)


# ---------------------------------------------------------------- conversions

def test_numpy_asarray():
    x = nx.asarray(_values((2, 3), np.int16))
    a = np.asarray(x)
    assert isinstance(a, np.ndarray) and a.dtype == np.int16
    np.testing.assert_array_equal(a, _values((2, 3), np.int16))
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert np.array(nx.asarray(2.5)).shape == ()
    b = nx.asarray(np.ones(3, "bfloat16"))
    assert np.asarray(b).dtype == np.dtype("bfloat16")


def test_dlpack_round_trip_with_numpy():
    for dtype in (np.float32, np.float64, np.int32, np.int8, np.uint8, np.bool_):
        host = _values((2, 3)).astype(dtype)
        x = nx.asarray(host)
        out = np.from_dlpack(x)
        assert out.dtype == host.dtype and out.shape == host.shape
        np.testing.assert_array_equal(out, host)
        y = nx.from_dlpack(host)
        assert isinstance(y, nx.Array) and y.dtype == host.dtype and str(y.device) == "cpu:0"
        np.testing.assert_array_equal(np.asarray(y), host)
        np.testing.assert_array_equal(np.asarray(nx.from_dlpack(np.from_dlpack(x))), host)
    # Strided (transposed) and zero-size arrays go through too.
    x = nx.asarray(_values((2, 3)))
    np.testing.assert_array_equal(np.from_dlpack(x.T), _values((2, 3)).T)
    np.testing.assert_array_equal(np.asarray(nx.from_dlpack(_values((3, 4))[:, ::2])), _values((3, 4))[:, ::2])
    assert np.from_dlpack(nx.zeros((0, 3))).shape == (0, 3)
    # Zero-copy on the host: NumPy sees the array's own buffer.
    assert np.shares_memory(np.from_dlpack(x), np.asarray(x))
    assert x.__dlpack_device__()[0] == 1  # kDLCPU


def test_item_and_tolist():
    for dtype, pytype in ((np.float32, float), (np.float64, float), (np.int32, int), (np.uint8, int),
                          (np.bool_, bool)):
        x = nx.asarray(np.array([[3]], dtype))
        v = x.item()
        assert type(v) is pytype and v == pytype(3)
    assert nx.asarray(2.5).item() == 2.5
    with pytest.raises(ValueError, match="one element"):
        nx.zeros(3).item()
    v = _values((2, 3, 2), np.int64)
    assert nx.asarray(v).tolist() == v.tolist()
    assert nx.asarray(np.float32(1.5)).tolist() == 1.5
    assert nx.zeros((0, 2)).tolist() == []
    assert float(nx.asarray(1.5)) == 1.5 and int(nx.asarray(7)) == 7 and bool(nx.asarray(True))
    assert [10, 20, 30][nx.asarray(np.int32(1))] == 20
    with pytest.raises(TypeError):
        [1, 2][nx.asarray(1.0)]


def test_transpose_property():
    for shape in ((), (4,), (2, 3), (2, 3, 4)):
        v = _values(shape) if shape else np.float32(1.0)
        x = nx.asarray(np.asarray(v))
        assert x.T.shape == np.asarray(v).T.shape
        np.testing.assert_array_equal(np.asarray(x.T), np.asarray(v).T)


# ---------------------------------------------------------------- operators

def test_arithmetic_operators_match_numpy():
    a = np.array([[-7, -3, 5], [9, 0, 4]], np.int32)
    b = np.array([[2, 3, -2], [4, 5, -3]], np.int32)
    x, y = nx.asarray(a), nx.asarray(b)
    pairs = [(x + y, a + b), (x - y, a - b), (x * y, a * b), (x // y, a // b), (x % y, a % b),
             (x ** 2, a ** 2), (2 ** abs(y), 2 ** abs(b)), (x & y, a & b), (x | y, a | b), (x ^ y, a ^ b),
             (~x, ~a), (-x, -a), (+x, a), (abs(x), abs(a)), (x @ y.T, a @ b.T), (7 // y, 7 // b),
             (7 % y, 7 % b), (1 - x, 1 - a), (3 & x, 3 & a), (x | 8, a | 8), (5 ^ x, 5 ^ a)]
    for got, want in pairs:
        assert got.dtype == want.dtype, (got, want.dtype)
        np.testing.assert_array_equal(np.asarray(got), want)
    # True division gives floats (float64 for int32, as NumPy: float32 would round ints above 2**24).
    assert (x / y).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(x / y), a / b)


def test_float_operators_match_numpy():
    rng = np.random.default_rng(0)
    a = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    b = rng.uniform(-2.0, 2.0, (4,)).astype(np.float32)
    x, y = nx.asarray(a), nx.asarray(b)
    pairs = [(x / y, a / b), (x // y, a // b), (x % y, a % b), (x ** y, a ** b), (2.0 / x, 2.0 / a),
             (x ** 0.5, a ** 0.5), (1.5 % y, 1.5 % b), (x @ a.T, a @ a.T), (a.T @ x, a.T @ a), (-x, -a)]
    for got, want in pairs:
        assert isinstance(got, nx.Array) and got.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_comparison_operators():
    a = np.array([1.0, 2.0, np.nan, 4.0], np.float32)
    b = np.array([2.0, 2.0, np.nan, 3.0], np.float32)
    x, y = nx.asarray(a), nx.asarray(b)
    for got, want in [(x < y, a < b), (x <= y, a <= b), (x > y, a > b), (x >= y, a >= b), (x == y, a == b),
                      (x != y, a != b), (x < 2, a < 2), (2 < x, 2 < a), (x == 2.0, a == 2.0),
                      (b == x, b == a), (2 != x, 2 != a)]:
        assert isinstance(got, nx.Array) and got.dtype == np.bool_
        np.testing.assert_array_equal(np.asarray(got), want)
    with pytest.raises(TypeError):
        hash(x)
    with pytest.raises(ValueError):
        bool(x)


def test_numpy_array_on_the_left_defers_to_rune():
    a = np.ones((2, 3), np.float32)
    x = nx.asarray(_values())
    for got, want in [(a + x, a + _values()), (a * x, a * _values()), (a @ x.T, a @ _values().T),
                      (a - x, a - _values()), (a < x, a < _values())]:
        assert isinstance(got, nx.Array)
        np.testing.assert_array_equal(np.asarray(got), want)


# ---------------------------------------------------------------- random numbers

N = 100_000


def test_random_is_deterministic():
    k = nx.random.key(42)
    for draw in (lambda k: nx.random.uniform(k, (1000,)), lambda k: nx.random.normal(k, (10, 10)),
                 lambda k: nx.random.randint(k, (50,), 0, 100), lambda k: nx.random.bernoulli(k, 0.5, (64,)),
                 lambda k: nx.random.split(k, 4), lambda k: nx.random.fold_in(k, 5)):
        np.testing.assert_array_equal(np.asarray(draw(k)), np.asarray(draw(nx.random.key(42))))
    a = np.asarray(nx.random.uniform(nx.random.key(0), (1000,)))
    b = np.asarray(nx.random.uniform(nx.random.key(1), (1000,)))
    assert not np.array_equal(a, b)


def test_random_shapes_and_dtypes():
    k = nx.random.key(0)
    assert k.shape == (2,) and k.dtype == np.uint32
    assert nx.random.split(k).shape == (2, 2) and nx.random.split(k, 5).shape == (5, 2)
    assert nx.random.split(k).dtype == np.uint32
    f = nx.random.fold_in(k, 3)
    assert f.shape == (2,) and f.dtype == np.uint32
    for shape in ((), (3,), (2, 3), (0, 4)):
        assert nx.random.uniform(k, shape).shape == shape
        assert nx.random.normal(k, shape).shape == shape
        assert nx.random.randint(k, shape, 0, 5).shape == shape
        assert nx.random.bernoulli(k, 0.5, shape).shape == shape
    assert nx.random.uniform(k, 4).shape == (4,)
    assert nx.random.uniform(k, (3,)).dtype == np.float32
    for d in (nx.float16, nx.bfloat16, nx.float32, nx.float64):
        assert nx.random.uniform(k, (3,), d).dtype == d
        assert nx.random.normal(k, (3,), d).dtype == d
    assert nx.random.randint(k, (3,), 0, 5).dtype == np.int32
    for d in (nx.int8, nx.uint8, nx.int64):
        assert nx.random.randint(k, (3,), 0, 5, dtype=d).dtype == d
    assert nx.random.bernoulli(k, 0.5, (3,)).dtype == np.bool_
    assert nx.random.bernoulli(k, np.array([0.1, 0.9], np.float32)).shape == (2,)


def test_random_rejects_bad_keys_and_dtypes():
    with pytest.raises(rune.RuneError, match="key"):
        nx.random.uniform(nx.zeros(3), (2,))
    with pytest.raises(rune.RuneError, match="key"):
        nx.random.normal(nx.zeros(2, nx.int32), (2,))
    with pytest.raises(rune.RuneError, match="float"):
        nx.random.uniform(nx.random.key(0), (2,), nx.int32)


@pytest.mark.parametrize("dtype,lo,hi", [(nx.float32, 0.0, 1.0), (nx.float32, -2.0, 3.0),
                                         (nx.float64, -2.0, 3.0), (nx.float16, 0.0, 1.0),
                                         (nx.bfloat16, 0.0, 1.0), (nx.float64, 5.0, 5.5)])
def test_uniform_range_and_mean(dtype, lo, hi):
    u = np.asarray(nx.random.uniform(nx.random.key(3), (N,), dtype, lo, hi)).astype(np.float64)
    assert u.min() >= lo and u.max() < hi
    assert abs(u.mean() - (lo + hi) / 2) < 0.01 * (hi - lo)
    assert abs(u.var() - (hi - lo) ** 2 / 12) < 0.02 * (hi - lo) ** 2 / 12 + 1e-3 * (hi - lo) ** 2
    # Every tenth of the range gets about a tenth of the draws.
    counts = np.histogram(u, bins=10, range=(lo, hi))[0] / N
    assert np.all(np.abs(counts - 0.1) < 0.01)


@pytest.mark.parametrize("dtype", [nx.float32, nx.float64])
def test_normal_moments(dtype):
    z = np.asarray(nx.random.normal(nx.random.key(11), (N,), dtype)).astype(np.float64)
    assert np.all(np.isfinite(z))
    assert abs(z.mean()) < 0.02
    assert abs(z.std() - 1.0) < 0.02
    assert abs(np.mean(np.abs(z) < 1.0) - 0.6827) < 0.01
    assert abs(np.mean(z ** 4) - 3.0) < 0.15  # kurtosis of a normal


def test_split_and_fold_in_give_different_streams():
    k = nx.random.key(5)
    keys = nx.random.split(k, 4)
    rows = {tuple(np.asarray(keys[i]).tolist()) for i in range(4)}
    assert len(rows) == 4 and tuple(np.asarray(k).tolist()) not in rows
    folded = [nx.random.fold_in(k, i) for i in range(1, 5)]
    assert len({tuple(np.asarray(f).tolist()) for f in folded} | rows) == 8
    streams = [np.asarray(nx.random.uniform(kk, (N,))).astype(np.float64)
               for kk in [k, keys[0], keys[1], folded[0], folded[1]]]
    for i in range(len(streams)):
        for j in range(i + 1, len(streams)):
            assert not np.array_equal(streams[i], streams[j])
            assert abs(np.corrcoef(streams[i], streams[j])[0, 1]) < 0.02
    # Splitting is deterministic and fold_in depends on its data only.
    np.testing.assert_array_equal(np.asarray(nx.random.split(k, 4)), np.asarray(keys))
    np.testing.assert_array_equal(np.asarray(nx.random.fold_in(k, 3)), np.asarray(folded[2]))


@pytest.mark.parametrize("n", [2, 4])
def test_fold_in_zero_is_not_the_first_split_key(n):
    k = nx.random.key(5)
    first = np.asarray(nx.random.split(k, n))[0]
    assert not np.array_equal(np.asarray(nx.random.fold_in(k, 0)), first)


def test_randint_range():
    r = np.asarray(nx.random.randint(nx.random.key(9), (N,), -3, 7))
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 6
    freq = np.bincount(r + 3, minlength=10) / N
    assert np.all(np.abs(freq - 0.1) < 0.01)
    small = np.asarray(nx.random.randint(nx.random.key(9), (1000,), 5, 6, dtype=nx.uint8))
    assert small.dtype == np.uint8 and np.all(small == 5)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 0.9, 1.0])
def test_bernoulli_frequency(p):
    b = np.asarray(nx.random.bernoulli(nx.random.key(13), p, (N,)))
    assert b.dtype == np.bool_
    assert abs(b.mean() - p) < 0.01
    if p in (0.0, 1.0):
        assert b.all() == bool(p) and b.any() == bool(p)


def test_bernoulli_with_array_probabilities():
    p = np.array([0.1, 0.5, 0.9], np.float32)
    b = np.asarray(nx.random.bernoulli(nx.random.key(2), p, (N, 3)))
    np.testing.assert_allclose(b.mean(axis=0), p, atol=0.01)


@two_devices
def test_two_devices_jit_device_places_inputs_also_when_traced_through():
    f = rune.jit(lambda x: x * 2, device="cpu:1")
    x = nx.ones(2)  # on cpu:0
    assert str(f(x).device) == "cpu:1"
    assert str(rune.vmap(f)(nx.ones((3, 2))).device) == "cpu:1"
    g = rune.grad(lambda x: nx.sum(f(x)))(x)
    assert str(g.device) == "cpu:0"  # the gradient lies with its input
    np.testing.assert_array_equal(np.asarray(g), [2.0, 2.0])


@two_devices
def test_two_devices_jit_keys_on_the_default_device():
    # jit changes speed, never placement: each call lies where eager would put it.
    make = lambda: nx.ones(3) * 2  # noqa: E731
    f = rune.jit(make)
    assert str(f().device) == "cpu:0"
    with rune.default_device("cpu:1"):
        assert str(f().device) == str(make().device) == "cpu:1"
    assert str(f().device) == "cpu:0" and rune.stats()["cache_hits"] == 1
    add = lambda x: x + nx.ones(3)  # noqa: E731
    g = rune.jit(add)
    x = nx.ones(3)                   # on cpu:0
    g(x)
    with rune.default_device("cpu:1"):
        for fn in (add, g):          # the cached call raises as eager does
            with pytest.raises(rune.DeviceMismatchError):
                fn(x)


@two_devices
def test_two_devices_jit_device_places_every_output():
    x = nx.ones(2)  # on cpu:0
    f = rune.jit(lambda x: {"y": x * 2, "const": nx.ones(2), "scalar": 3.0, "same": x}, device="cpu:1")
    for out in (f(x), f(x), rune.vmap(f)(nx.ones((3, 2)))):
        assert {k: str(v.device) for k, v in out.items()} == dict.fromkeys(out, "cpu:1")
    out = f(x)
    np.testing.assert_array_equal(np.asarray(out["y"]), [2.0, 2.0])
    assert out["scalar"].aval.weak and float(out["scalar"]) == 3.0
    with rune.default_device("cpu:1"):  # the caller's default does not matter: traced on cpu:1
        f(x)
    assert rune.stats()["traces"] == 1  # vmap traces through; the caller's default is not in the key
