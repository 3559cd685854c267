"""rune.save / rune.load: safetensors files keyed by pytree paths, structure in
the metadata, every dtype kept, atomic writes."""
import dataclasses
import inspect
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
from typing import NamedTuple

import ml_dtypes
import numpy as np
import pytest

safetensors = pytest.importorskip("safetensors")
import safetensors.numpy  # noqa: E402

import rune
from rune import nx, optim

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository
OPT_STATES = (optim.ScaleByAdamState, optim.ScaleByScheduleState)


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
    _same(rune.load(path, classes=OPT_STATES), tree)
    # The file is ordinary safetensors: keys are pytree paths, dtypes native.
    with safetensors.safe_open(str(path), framework="numpy") as f:
        keys = set(f.keys())
        meta = json.loads(f.metadata()["rune.tree"])
    assert {"params/layers/0/w", "params/layers/1/w", "params/embed", "mask", "opt/0/mu/w", "pair/1", "by_id/3", "by_id/10"} <= keys
    assert meta["version"] == 2
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
    (stale,) = [n for n in os.listdir(tmp_path) if n != path.name]     # the killed save's full temporary
    assert stale.startswith(".ckpt.safetensors.rune-save-") and f"-{child.pid}-" in stale
    assert os.path.getsize(tmp_path / stale) > 1000 * 100 * 4
    old = rune.load(path)      # the old checkpoint, and the dead process's temporary gone
    assert old["w"].shape == (1000, 100) and float(old["w"][0, 0]) == 1.0
    assert os.listdir(tmp_path) == [path.name]
    (tmp_path / stale).write_bytes(b"left by a killed save")
    rune.save(path, {"w": nx.full((2,), 3.0)})  # a save removes it too
    assert rune.load(path)["w"].tolist() == [3.0, 3.0] and os.listdir(tmp_path) == [path.name]


def test_only_temporaries_of_dead_processes_of_this_host_are_removed(tmp_path):
    path = tmp_path / "c.safetensors"
    rune.save(path, {"w": nx.ones(2)})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)      # reaped by run: no process has this id now (bar a reuse)
    prefix = f".c.safetensors.rune-save-{socket.gethostname()[:32]}-"
    kept = [f"{prefix}{os.getppid()}-abc.tmp",                        # a live process: a save under way
            f".c.safetensors.rune-save-otherhost-{dead_pid}-abc.tmp",  # another host's (a shared folder)
            f".d.safetensors.rune-save-{socket.gethostname()}-{dead_pid}-abc.tmp",   # another target's
            ".c.safetensors.tmp"]                                     # not a rune temporary
    for name in kept + [f"{prefix}{dead_pid}-abc.tmp"]:
        (tmp_path / name).write_bytes(b"x")
    rune.save(path, {"w": nx.zeros(2)})
    assert sorted(os.listdir(tmp_path)) == sorted(kept + [path.name])


def test_a_save_to_a_symbolic_link_writes_through_to_its_target(tmp_path):
    (tmp_path / "runs").mkdir()
    real = tmp_path / "runs" / "step_100.safetensors"
    rune.save(real, {"w": nx.ones(2)})
    link = tmp_path / "latest.safetensors"
    link.symlink_to(os.path.join("runs", "step_100.safetensors"))    # relative, as `ln -s` makes them
    rune.save(link, {"w": nx.full((3,), 5.0)})
    assert link.is_symlink() and os.readlink(link) == os.path.join("runs", "step_100.safetensors")
    assert rune.load(real)["w"].tolist() == [5.0, 5.0, 5.0] and rune.load(link)["w"].tolist() == [5.0] * 3
    assert sorted(os.listdir(tmp_path)) == ["latest.safetensors", "runs"] and os.listdir(tmp_path / "runs") == [
        "step_100.safetensors"]
    dangling = tmp_path / "next.safetensors"
    dangling.symlink_to("runs/step_200.safetensors")                  # as open(path, "wb"): creates the target
    rune.save(dangling, {"w": nx.zeros(1)})
    assert dangling.is_symlink() and rune.load(tmp_path / "runs" / "step_200.safetensors")["w"].tolist() == [0.0]


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
        back = rune.load(sys.argv[1], device="cpu:1", classes=(optim.ScaleByAdamState, optim.ScaleByScheduleState))
        assert all(str(x.device) == "cpu:1" for x in rune.tree.leaves(back))
        assert type(back["state"][0]) is optim.ScaleByAdamState
        print("ok")
    """)
    env = dict(os.environ, RUNE_HOST_DEVICES="2")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "c.safetensors")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# ---------------------------------------------------------------- what a file may make load do

class Pair(NamedTuple):
    a: object
    b: object


@dataclasses.dataclass
class Box:
    w: object
    n: object = None


class Registered:
    """A pytree node with its own flatten: only a template can rebuild it (its aux is not in the file)."""

    def __init__(self, xs, tag):
        self.xs, self.tag = list(xs), tag


rune.tree.register(Registered, lambda r: (r.xs, r.tag), lambda tag, xs: Registered(xs, tag))


def _raw(path, tree_doc, tensors=None, metadata=None):
    """A safetensors file holding `tensors` and, under rune.tree, the JSON `tree_doc` as given."""
    meta = dict(metadata or {})
    if tree_doc is not None:
        meta["rune.tree"] = tree_doc if isinstance(tree_doc, str) else json.dumps(tree_doc)
    safetensors.numpy.save_file(tensors or {}, str(path), metadata=meta)
    return path


def test_load_never_imports_or_calls_a_class_the_file_names(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "rune_ckpt_trap.py").write_text(textwrap.dedent(f"""
        import pathlib, typing
        pathlib.Path({str(marker)!r}).write_text("ran")
        class Evil(typing.NamedTuple):
            a: object
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    x = {"a": np.ones(2, np.float32)}
    named = {"version": 2, "tree": {"t": "tuple", "name": "rune_ckpt_trap:Evil", "f": ["a"],
                                    "c": [{"t": "leaf"}]}}
    old_style = {"version": 2, "tree": {"t": "namedtuple", "cls": "rune_ckpt_trap:Evil", "c": [{"t": "leaf"}]}}
    for doc in (named, old_style):
        path = _raw(tmp_path / "trap.safetensors", doc, x)
        with pytest.raises(rune.RuneError, match="rune_ckpt_trap:Evil|namedtuple") as e:
            rune.load(path)
        assert str(path) in str(e.value)
        assert not marker.exists() and "rune_ckpt_trap" not in sys.modules
    path = _raw(tmp_path / "trap.safetensors", named, x)
    with pytest.raises(rune.TreeError, match=r"at the root the file holds a Evil .*classes=\(Evil,\)"):
        rune.load(path)
    # Allowing a class of another name does not let the file pick one.
    with pytest.raises(rune.TreeError, match="Evil"):
        rune.load(tmp_path / "trap.safetensors", classes=(Pair,))
    assert not marker.exists()


def test_namedtuples_dataclasses_and_registered_nodes_come_back_through_like_or_classes(tmp_path):
    path = tmp_path / "c.safetensors"
    tree = {"p": Pair(nx.ones((2,)), Box(nx.arange(3), 4)), "r": Registered([nx.zeros((1,)), 2.5], "tag"),
            "opt": optim.adam(0.1).init({"w": nx.ones((2,))})}
    rune.save(path, tree)
    back = rune.load(path, like=tree)
    assert type(back["p"]) is Pair and type(back["p"].b) is Box and back["p"].b.n == 4
    assert back["p"].b.w.tolist() == [0, 1, 2] and back["r"].tag == "tag" and back["r"].xs[1] == 2.5
    assert type(back["opt"][0]) is optim.ScaleByAdamState
    without_registered = {"p": tree["p"], "opt": tree["opt"]}
    rune.save(path, without_registered)
    back = rune.load(path, classes=(Pair, Box) + OPT_STATES)
    _same(back["opt"], tree["opt"])
    assert type(back["p"]) is Pair and type(back["p"].b) is Box and back["p"].b.n == 4
    assert back["p"].a.tolist() == [1.0, 1.0] and back["p"].b.w.tolist() == [0, 1, 2]
    with pytest.raises(rune.TreeError, match=r"at p/b the file holds a Box .*classes=\(Box,\)"):
        rune.load(path, classes=(Pair,) + OPT_STATES)
    rune.save(path, tree)
    with pytest.raises(rune.TreeError, match="at r the file holds a Registered"):
        rune.load(path, classes=(Pair, Box) + OPT_STATES)
    with pytest.raises(rune.UsageError, match="classes="):
        rune.load(path, classes=(dict,))
    # The template decides the containers; the file's must match them.
    rune.save(path, {"p": Pair(nx.ones((2,)), {"w": nx.arange(3), "n": 4})})
    with pytest.raises(rune.TreeError, match=r"at p/b expected a Box with fields \['w', 'n'\], the file has a dict"):
        rune.load(path, like={"p": Pair(nx.ones((2,)), Box(nx.arange(3), 4))})


def test_only_classes_saved_from_a_script_match_by_qualified_name_alone(tmp_path):
    x = {"a": np.ones(2, np.float32), "b": np.zeros(1, np.float32)}

    def named(module):
        return _raw(tmp_path / "p.safetensors", {"version": 2, "tree": {
            "t": "tuple", "name": f"{module}:Pair", "f": ["a", "b"], "c": [{"t": "leaf"}, {"t": "leaf"}]}}, x)

    # a script's Pair was __main__'s when saved, and is this module's when imported
    back = rune.load(named("__main__"), classes=(Pair,))
    assert type(back) is Pair and back.a.tolist() == [1.0, 1.0]
    assert type(rune.load(named(Pair.__module__), classes=(Pair,))) is Pair
    # another library's Pair is not ours
    with pytest.raises(rune.TreeError, match=r"p.safetensors: at the root the file holds a Pair \(other_lib:Pair\)"):
        rune.load(named("other_lib"), classes=(Pair,))


def test_a_save_keeps_the_mode_of_the_file_it_replaces_or_takes_the_umasks(tmp_path):
    path = tmp_path / "c.safetensors"
    old_mask = os.umask(0o027)
    try:
        rune.save(path, {"w": nx.ones(2)})
    finally:
        os.umask(old_mask)
    assert os.stat(path).st_mode & 0o7777 == 0o640   # as open() makes a new file: 0o666 & ~umask
    os.chmod(path, 0o644)
    rune.save(path, {"w": nx.zeros(2)})
    assert os.stat(path).st_mode & 0o7777 == 0o644
    assert rune.load(path)["w"].tolist() == [0.0, 0.0]


def test_load_signature_follows_the_design():
    params = list(inspect.signature(rune.load).parameters.values())
    assert [p.name for p in params] == ["path", "like", "device", "classes"]
    assert params[1].default is None and params[2].default is None
    assert params[3].kind is inspect.Parameter.KEYWORD_ONLY


# ---------------------------------------------------------------- damaged and foreign files

def _truncated(tmp_path):
    path = tmp_path / "f.safetensors"
    rune.save(path, {"w": nx.ones((100,))})
    path.write_bytes(path.read_bytes()[:-50])
    return path


def _header(tmp_path, length, body):
    path = tmp_path / "f.safetensors"
    path.write_bytes(struct.pack("<Q", length) + body)
    return path


def _deep(depth):
    node = {"t": "leaf"}
    for _ in range(depth):
        node = {"t": "list", "c": [node]}
    return {"version": 2, "tree": node}


W = {"w": np.ones(2, np.float32)}
DAMAGED = {
    "empty": (lambda p: (p / "f.safetensors").write_bytes(b"") or p / "f.safetensors", "not a readable safetensors"),
    "text": (lambda p: (p / "f.safetensors").write_text("step,loss\n1,0.5\n") and p / "f.safetensors",
             "not a readable safetensors"),
    "truncated": (_truncated, "not a readable safetensors"),
    "header length 2**60": (lambda p: _header(p, 2 ** 60, b"{}"), "not a readable safetensors"),
    "header not JSON": (lambda p: _header(p, 8, b"not json"), "not a readable safetensors"),
    "folder": (lambda p: p, "is a folder"),
    "tree metadata not JSON": (lambda p: _raw(p / "f.safetensors", "{'t': 'leaf'", W), "not readable JSON"),
    "tree metadata nested past RecursionError": (
        lambda p: _raw(p / "f.safetensors", "[" * 100000 + "]" * 100000, W), "not readable JSON"),
    "tree metadata not an object": (lambda p: _raw(p / "f.safetensors", [1, 2], W), "'version' and 'tree'"),
    "future version": (lambda p: _raw(p / "f.safetensors", {"version": 3, "tree": {"t": "leaf"}}, W),
                       "version 3 .*newer rune"),
    "unknown node": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {"t": "set", "c": []}}, W),
                     "malformed at the root"),
    "child counts differ": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {
        "t": "dict", "k": ["w", "v"], "c": [{"t": "leaf"}]}}, W), "2 keys or fields but 1 children"),
    "children not a list": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {
        "t": "list", "c": {"0": {"t": "leaf"}}}}, W), "list of children"),
    "deep nesting": (lambda p: _raw(p / "f.safetensors", _deep(150), {"": np.ones(1, np.float32)}),
                     "nested more than 100"),
    "leaf without tensor": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {
        "t": "dict", "k": ["v"], "c": [{"t": "leaf"}]}}, W), "no tensor 'v'"),
    "tensor without leaf": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {"t": "none"}}, W),
                            r"does not place: \['w'\]"),
    "Python int stored as a vector": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {
        "t": "dict", "k": ["w"], "c": [{"t": "leaf", "py": "int"}]}}, W), "Python int at w"),
    # lists and dicts where names belong: unhashable, so a membership test alone raised TypeError
    "node kind a list": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {"t": []}}, W),
                         "malformed at the root"),
    "Python type a list": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {
        "t": "leaf", "py": []}}, W), "unknown leaf tags"),
    "complex dtype an object": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {
        "t": "leaf", "dtype": {}}}, W), "unknown leaf tags"),
    "complex stored badly": (lambda p: _raw(p / "f.safetensors", {"version": 2, "tree": {
        "t": "dict", "k": ["w"], "c": [{"t": "leaf", "dtype": "complex128"}]}}, W), "float64 pairs"),
}


@pytest.mark.parametrize("case", DAMAGED)
def test_a_damaged_or_foreign_file_is_an_error_naming_the_file(tmp_path, case):
    make, expect = DAMAGED[case]
    path = make(tmp_path)
    with pytest.raises(rune.RuneError, match=expect) as e:
        rune.load(path)
    assert str(path) in str(e.value)
    with pytest.raises(rune.RuneError):
        rune.load(path, like={"w": nx.ones((2,), nx.float32)})


# ---------------------------------------------------------------- names, dtypes, atomic writes

def test_paths_that_would_collide_keep_their_own_tensors(tmp_path):
    path = tmp_path / "c.safetensors"
    tree = {"a/b": nx.asarray([1.0]), "a": {"b": nx.asarray([2.0]), "~1": nx.asarray([3.0])},
            "a~1b": nx.asarray([4.0]), "": nx.asarray([5.0])}
    rune.save(path, tree)
    _same(rune.load(path), tree)
    _same(rune.load(path, like=tree), tree)
    with safetensors.safe_open(str(path), framework="numpy") as f:
        assert len(list(f.keys())) == 5   # five leaves, five tensors
        assert f.get_tensor("a/b").tolist() == [2.0] and f.get_tensor("a~1b").tolist() == [1.0]
    # An int key and a str key of one dict share a path ("3"): still two tensors.
    rune.save(path, {3: nx.asarray([6.0]), "3": nx.asarray([7.0])})
    back = rune.load(path)
    assert back[3].tolist() == [6.0] and back["3"].tolist() == [7.0] and len(back) == 2


def test_complex_and_low_precision_leaves_round_trip(tmp_path):
    path = tmp_path / "c.safetensors"
    rng = np.random.default_rng(1)
    c128 = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    tree = {"c128": nx.asarray(c128), "c64": nx.asarray(c128.astype(np.complex64)),
            "c0d": nx.asarray(np.complex128(1 - 2j)), "py": 3 + 4j,
            "bf16": nx.asarray(rng.standard_normal(5).astype(ml_dtypes.bfloat16)),
            "f16": nx.asarray(np.array([65504, -0.0, 6e-8, np.inf], np.float16))}
    rune.save(path, tree)
    for back in (rune.load(path), rune.load(path, like=tree)):
        _same(back, tree)
        for k in ("c128", "c64", "c0d", "bf16", "f16"):
            assert np.asarray(back[k]).tobytes() == np.asarray(tree[k]).tobytes(), k
    plain = safetensors.numpy.load_file(str(path))   # other readers see float pairs
    assert plain["c128"].dtype == np.float64 and plain["c128"].shape == (3, 2, 2)
    np.testing.assert_array_equal(plain["c128"][..., 1], c128.imag)


def test_a_python_int_outside_int64_is_refused_naming_its_path(tmp_path):
    path = tmp_path / "c.safetensors"
    rune.save(path, {"n": [2 ** 63 - 1, -2 ** 63]})
    assert rune.load(path)["n"] == [2 ** 63 - 1, -2 ** 63]
    with pytest.raises(rune.ScalarOverflowError, match=r"n/1 .*outside int64"):
        rune.save(path, {"n": [0, 2 ** 63]})


@pytest.mark.parametrize("bad_leaf", [object(), 2 ** 70, np.array(["text"])])
def test_a_save_that_fails_leaves_the_previous_file_whole(tmp_path, bad_leaf):
    path = tmp_path / "c.safetensors"
    rune.save(path, {"w": nx.full((3,), 1.0)})
    before = path.read_bytes()
    with pytest.raises(rune.RuneError, match="z/bad"):
        rune.save(path, {"w": nx.full((1000,), 2.0), "z": {"bad": bad_leaf}})
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["c.safetensors"]
    with pytest.raises(rune.ArgumentError, match="is a folder"):
        rune.save(tmp_path, {"w": nx.ones(1)})


def test_a_write_that_fails_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    rune.save(path, {"w": nx.full((3,), 1.0)})
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space"):
        rune.save(path, {"w": nx.full((1000,), 2.0)})
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["c.safetensors"]
