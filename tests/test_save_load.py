"""rune.save / rune.load: safetensors files keyed by pytree paths, structure in
the metadata, every dtype kept, atomic writes."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

safetensors = pytest.importorskip("safetensors")
import safetensors.numpy  # noqa: E402

import rune
from rune import nx, optim

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tree():
    rng = np.random.default_rng(0)
    return {
        "params": {"layers": [{"w": nx.asarray(rng.standard_normal((3, 2)).astype(ml_dtypes.bfloat16)),
                               "b": nx.zeros((2,), nx.float32)},
                              {"w": nx.asarray(rng.standard_normal((2, 2)))}],
                   "embed": nx.asarray(rng.integers(-5, 5, (4, 3)).astype(np.int8))},
        "mask": nx.asarray(np.array([True, False, True])),
        "step": 7, "lr": 0.5, "done": False, "nothing": None,
        "opt": optim.adam(1e-3).init({"w": nx.ones((2,))}),
        "pair": (nx.asarray(np.uint16(3)), nx.arange(3, dtype=nx.uint64)),
        "by_id": {3: nx.asarray(np.float16(1.5)), 10: nx.asarray(np.uint32(4))},
    }


def _same(a, b):
    la, sa = rune.tree.flatten(a)
    lb, sb = rune.tree.flatten(b)
    assert sa == sb
    for x, y in zip(la, lb):
        assert type(x) is type(y)
        if isinstance(x, nx.Array):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        else:
            assert x == y


def test_round_trip_keeps_structure_dtypes_and_python_scalars(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    tree = _tree()
    rune.save(path, tree)
    _same(rune.load(path), tree)
    # The file is ordinary safetensors: keys are pytree paths, dtypes native.
    with safetensors.safe_open(str(path), framework="numpy") as f:
        keys = set(f.keys())
        meta = json.loads(f.metadata()["rune.tree"])
    assert {"params/layers/0/w", "params/layers/1/w", "params/embed", "mask", "opt/0/mu/w", "pair/1", "by_id/3", "by_id/10"} <= keys
    assert meta["version"] == 1
    header = json.loads(path.read_bytes()[8:8 + int.from_bytes(path.read_bytes()[:8], "little")])
    assert header["params/layers/0/w"]["dtype"] == "BF16" and header["mask"]["dtype"] == "BOOL"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_load_against_an_expected_tree(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    tree = _tree()
    rune.save(path, tree)
    _same(rune.load(path, like=tree), tree)
    wrong_dtype = dict(tree, mask=nx.zeros((3,), nx.int32))
    with pytest.raises(rune.DTypeError, match="mask"):
        rune.load(path, like=wrong_dtype)
    wrong_shape = dict(tree, params=dict(tree["params"], embed=nx.zeros((4, 4), nx.int8)))
    with pytest.raises(rune.ShapeError, match="params/embed"):
        rune.load(path, like=wrong_shape)
    missing = dict(tree, params={"layers": tree["params"]["layers"][:1], "embed": tree["params"]["embed"]})
    with pytest.raises(rune.TreeError, match="params/layers"):
        rune.load(path, like=missing)
    spec_like = {"a": rune.Spec((2,), nx.float32)}
    rune.save(path, {"a": nx.ones((2,))})
    assert rune.load(path, like=spec_like)["a"].tolist() == [1.0, 1.0]


def test_files_from_safetensors_numpy_load_as_flat_dicts(tmp_path):
    path = tmp_path / "foreign.safetensors"
    data = {"encoder.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "flags": np.array([True, False])}
    safetensors.numpy.save_file(data, str(path))
    got = rune.load(path)
    assert set(got) == set(data)
    for k in data:
        assert isinstance(got[k], nx.Array) and got[k].dtype == data[k].dtype
        np.testing.assert_array_equal(np.asarray(got[k]), data[k])
    # and rune's files read with safetensors.numpy (every dtype it knows)
    rune.save(path, {"w": nx.ones((2,)), "n": nx.arange(3)})
    plain = safetensors.numpy.load_file(str(path))
    assert plain["w"].tolist() == [1.0, 1.0] and plain["n"].dtype == np.int32


def test_unsavable_leaves_are_named(tmp_path):
    with pytest.raises(rune.TreeError, match="params/f"):
        rune.save(tmp_path / "x.safetensors", {"params": {"f": object()}})


CHILD = textwrap.dedent("""
    import os, sys, time
    import rune
    from rune import nx
    path = sys.argv[1]
    real_replace = os.replace
    def stall(src, dst):          # the new file is written and flushed: stop just before the rename
        print("written", flush=True)
        time.sleep(60)
    os.replace = stall
    rune.save(path, {"w": nx.full((1000, 100), 2.0)})
""")


def test_a_save_killed_mid_write_leaves_the_old_checkpoint(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    rune.save(path, {"w": nx.full((1000, 100), 1.0)})
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], cwd=REPO, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline().strip() == "written"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    old = rune.load(path)
    assert old["w"].shape == (1000, 100) and float(old["w"][0, 0]) == 1.0
    rune.save(path, {"w": nx.full((2,), 3.0)})  # a stale temporary file does not get in the way
    assert rune.load(path)["w"].tolist() == [3.0, 3.0]


def test_placement_of_loaded_arrays_and_optimizer_states(tmp_path):
    code = textwrap.dedent("""
        import sys
        import rune
        from rune import nx, optim
        params = {"w": nx.ones((2,), device="cpu:1")}
        state = optim.adam(0.1).init(params)
        assert all(str(x.device) == "cpu:1" for x in rune.tree.leaves(state)), state
        step = rune.jit(lambda p, s: optim.adam(0.1).update(p, s, p))
        updates, state = step(params, state)
        assert str(updates["w"].device) == "cpu:1" and str(state[0].mu["w"].device) == "cpu:1"
        rune.save(sys.argv[1], {"params": params, "state": state})
        back = rune.load(sys.argv[1], device="cpu:1")
        assert all(str(x.device) == "cpu:1" for x in rune.tree.leaves(back))
        assert type(back["state"][0]) is optim.ScaleByAdamState
        print("ok")
    """)
    env = dict(os.environ, RUNE_HOST_DEVICES="2")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "c.safetensors")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
