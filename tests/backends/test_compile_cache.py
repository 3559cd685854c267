"""The kernel cache on disk and the compiler's output, under hostile conditions.

A cache folder that cannot be used (no home folder, read-only, a file in the
way, a full disk, mounted noexec) never fails a jitted call: one RuneWarning,
and the kernel is built and loaded privately. A damaged or substituted cache
entry is rebuilt. A compiler that "succeeds" without a usable library is a
CompileError with its output. The cache key changes with each thing that
changes the library built. Real compilers, real files, real mounts (as root;
the tests that need a mount skip, saying why, where mounting is not allowed).
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

import rune
from rune import nx
from rune.backends import compile_pending, disk_cache, pipeline
from rune.backends.cpu import compiler



pytestmark = pytest.mark.cc
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository
X = np.linspace(-2, 2, 7, dtype=np.float32)


@pytest.fixture(autouse=True)
def _fresh_process_state(monkeypatch, tmp_path):
    """Each test sees an empty in-process kernel table and its own cache folder,
    as a new process would (the disk is what is under test)."""
    compile_pending()   # stretches other tests planned are built before the environment changes
    monkeypatch.setattr(pipeline, "_LOADED", {})
    monkeypatch.setattr(disk_cache, "_WARNED", set())
    monkeypatch.setenv("RUNE_CACHE", "1")
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "0")
    monkeypatch.setenv("RUNE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RUNE_CC", raising=False)


def _kernel(c):
    """A jitted one-kernel function; distinct `c`s give distinct kernels (the
    constant is part of the C source)."""
    return rune.jit(lambda x: x * c + 0.5)


def _run(c):
    """Run kernel `c` on X, check it against NumPy; (kernels compiled, disk hits)."""
    before = rune.stats()
    got = np.asarray(_kernel(c)(nx.asarray(X)))
    np.testing.assert_array_equal(got, X * np.float32(c) + np.float32(0.5))
    after = rune.stats()
    return (after["kernels_compiled"] - before["kernels_compiled"],
            after["disk_cache_hits"] - before["disk_cache_hits"])


def _forget_loaded(monkeypatch):
    monkeypatch.setattr(pipeline, "_LOADED", {})   # as a new process: only the disk remembers


@contextlib.contextmanager
def _rune_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    caught[:] = [w for w in caught if issubclass(w.category, rune.RuneWarning)]


@contextlib.contextmanager
def _tmpfs(path, options):
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"needs a tmpfs mount ({options}), which this machine does not allow "
                    f"(root in a container that permits mounts): {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


# ---------------------------------------------------------------- a cache folder that cannot be used

def test_a_cache_dir_that_is_a_file_warns_once_and_builds_privately(monkeypatch, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    monkeypatch.setenv("RUNE_CACHE_DIR", str(blocker))
    with _rune_warnings() as caught:
        assert _run(1.125) == (1, 0)
        assert _run(1.25) == (1, 0)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert str(blocker) in str(caught[0].message) and "RUNE_CACHE_DIR" in str(caught[0].message)
    assert blocker.read_text() == "a file, not a folder"


def test_no_home_folder_warns_and_writes_nothing_relative(monkeypatch, tmp_path):
    import pwd

    def no_entry(uid):
        raise KeyError(uid)
    monkeypatch.delenv("RUNE_CACHE_DIR")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)   # a uid without a password entry (containers)
    monkeypatch.chdir(tmp_path)
    with _rune_warnings() as caught:
        assert _run(1.375) == (1, 0)
    assert len(caught) == 1 and "no home folder" in str(caught[0].message)
    assert sorted(os.listdir(tmp_path)) == []   # no "~/.cache" under the working folder


def test_a_read_only_home_warns_and_builds_privately(monkeypatch, tmp_path):
    home = tmp_path / "home"
    monkeypatch.delenv("RUNE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(home))
    with _read_only(home):
        with _rune_warnings() as caught:
            assert _run(1.5) == (1, 0)
        assert len(caught) == 1 and str(home) in str(caught[0].message)
        assert os.listdir(home) == []


@contextlib.contextmanager
def _read_only(path):
    """`path` as a read-only folder: a read-only mount as root (who ignores file
    modes), its mode bits otherwise."""
    if os.geteuid() == 0:
        with _tmpfs(path, "ro,size=1m"):
            yield
    else:
        path.mkdir()
        path.chmod(0o555)
        try:
            yield
        finally:
            path.chmod(0o755)


def test_a_read_only_shared_cache_serves_its_kernels_and_builds_the_missing_one(monkeypatch, tmp_path):
    shared = tmp_path / "shared"
    monkeypatch.setenv("RUNE_CACHE_DIR", str(shared))
    if os.geteuid() != 0:
        pytest.skip("needs root to remount a filled tmpfs read-only")
    with _tmpfs(shared, "size=4m"):
        assert _run(1.625) == (1, 0)                       # filled by someone with write access
        done = subprocess.run(["mount", "-o", "remount,ro", str(shared)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        _forget_loaded(monkeypatch)
        with _rune_warnings() as caught:
            assert _run(1.625) == (0, 1)                   # served from the read-only cache
            assert _run(1.75) == (1, 0)                    # not there: built privately
            assert _run(1.875) == (1, 0)
        assert len(caught) == 1 and str(shared) in str(caught[0].message), [str(w.message) for w in caught]


def test_a_full_disk_warns_and_builds_privately(monkeypatch, tmp_path):
    full = tmp_path / "full"
    monkeypatch.setenv("RUNE_CACHE_DIR", str(full))
    with _tmpfs(full, "size=64k"):
        (full / "kernels").mkdir()
        with open(full / "filler", "wb", buffering=0) as f, pytest.raises(OSError):
            while True:   # until the disk is full (ENOSPC)
                f.write(b"\0" * 4096)
        with _rune_warnings() as caught:
            assert _run(2.125) == (1, 0)
        assert len(caught) == 1 and "No space left" in str(caught[0].message), [str(w.message) for w in caught]
        assert not [n for n in os.listdir(full / "kernels") if n.startswith(".tmp-")]  # no half-written file


def test_a_noexec_cache_loads_its_libraries_from_private_copies(monkeypatch, tmp_path):
    cache = tmp_path / "noexec"
    monkeypatch.setenv("RUNE_CACHE_DIR", str(cache))
    with _tmpfs(cache, "noexec,size=4m"):
        with _rune_warnings() as caught:
            assert _run(2.25) == (1, 0)
            _forget_loaded(monkeypatch)
            assert _run(2.25) == (0, 1)        # the cached library, loaded from a private copy
        assert len(caught) == 1 and "do not load" in str(caught[0].message), [str(w.message) for w in caught]


def test_a_noexec_cache_and_temporary_folder_load_from_memory(monkeypatch, tmp_path):
    import tempfile
    if not hasattr(os, "memfd_create"):
        pytest.skip("no in-memory files (os.memfd_create) on this system")
    cache, tmp = tmp_path / "noexec-cache", tmp_path / "noexec-tmp"
    monkeypatch.setenv("RUNE_CACHE_DIR", str(cache))
    with _tmpfs(cache, "noexec,size=4m"), _tmpfs(tmp, "noexec,size=4m"):
        monkeypatch.setattr(tempfile, "tempdir", str(tmp))   # where the compiler and private copies go
        with _rune_warnings():
            assert _run(2.375) == (1, 0)
            assert _run(2.5) == (1, 0)     # a second in-memory library is not mistaken for the first
            _forget_loaded(monkeypatch)
            assert _run(2.375) == (0, 1)
            assert _run(2.5) == (0, 1)


# ---------------------------------------------------------------- damaged entries are rebuilt

def _entries(tmp_path):
    return sorted((tmp_path / "cache" / "kernels").glob("*.json"))


@pytest.mark.parametrize("damage", ["missing key", "not an object", "folder for the entry",
                                    "folder for the library", "truncated library", "escaping name"])
def test_a_damaged_entry_is_rebuilt_and_then_served(monkeypatch, tmp_path, damage):
    assert _run(3.125) == (1, 0)
    entry, = _entries(tmp_path)
    record = json.loads(entry.read_text())
    lib = entry.parent / record["lib"]
    if damage == "missing key":
        del record["symbol"]
        entry.write_text(json.dumps(record))
    elif damage == "not an object":
        entry.write_text("[1, 2]")
    elif damage == "folder for the entry":
        entry.unlink()
        (entry / "inner").mkdir(parents=True)
    elif damage == "folder for the library":
        lib.unlink()
        (lib / "inner").mkdir(parents=True)
    elif damage == "truncated library":   # a new file: this process has the old one mapped
        (tmp_path / "part").write_bytes(lib.read_bytes()[:200])
        os.replace(tmp_path / "part", lib)
    else:
        outside = tmp_path / "elsewhere.so"
        shutil.copy(lib, outside)
        entry.write_text(json.dumps(dict(record, lib="../../elsewhere.so")))
    _forget_loaded(monkeypatch)
    with _rune_warnings() as caught:
        assert _run(3.125) == (1, 0)
    assert caught == []
    _forget_loaded(monkeypatch)
    assert _run(3.125) == (0, 1)


# ---------------------------------------------------------------- a compiler that succeeds without a library

_FAKE_COMPILERS = """
import json, os, sys, numpy as np, rune
from rune import nx
out = {}
for name in sys.argv[1:]:
    os.environ["RUNE_CC"] = name
    try:
        rune.jit(lambda x: x * 4.0625 + 1)(nx.ones(3))
        out[os.path.basename(name)] = None
    except rune.CompileError as e:
        out[os.path.basename(name)] = str(e)
print(json.dumps(out))
"""


def _fake_cc(path, body):
    path.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fakecc 1.0; exit 0; fi\n"
                    "for a in \"$@\"; do if [ \"$prev\" = -o ]; then out=$a; fi; prev=$a; done\n" + body)
    path.chmod(0o755)
    return str(path)


def test_a_compiler_that_exits_0_without_a_usable_library_is_a_compile_error(tmp_path):
    real = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    (tmp_path / "empty.c").write_text("int rune_unrelated_symbol;\n")
    fakes = [
        _fake_cc(tmp_path / "writes-nothing", "echo 'nothing to do' >&2\nexit 0\n"),
        _fake_cc(tmp_path / "writes-garbage", "echo 'wrote it' \necho garbage > \"$out\"\nexit 0\n"),
        _fake_cc(tmp_path / "writes-no-entry",
                 f"echo 'built elsewhere'\nexec {real} -shared -fPIC -o \"$out\" {tmp_path / 'empty.c'}\n")]
    # RUNE_BLAS_POOL=0: no BLAS pool unit built at import, so the cache holds only this program's units
    env = dict(os.environ, RUNE_CACHE_DIR=str(tmp_path / "cache"), RUNE_COMPILE_MIN_SIZE="0",
               RUNE_BLAS_POOL="0")
    done = subprocess.run([sys.executable, "-c", _FAKE_COMPILERS, *fakes], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert "wrote no library" in got["writes-nothing"] and "nothing to do" in got["writes-nothing"]
    assert "does not load" in got["writes-garbage"] and "wrote it" in got["writes-garbage"]
    assert "has no function rn_" in got["writes-no-entry"] and "built elsewhere" in got["writes-no-entry"]
    for name, message in got.items():
        assert "writes-" in message and "exited 0" in message, (name, message)
    assert not list((tmp_path / "cache" / "kernels").glob("*.json"))   # nothing bad was cached


@pytest.mark.parametrize("names_the_line", [True, False])
def test_a_kernel_the_compiler_rejects_fails_only_its_own_stretch(monkeypatch, tmp_path, names_the_line):
    real = compiler.find().path
    picky = tmp_path / "picky-cc"
    where = "unit.c:$line:5: " if names_the_line else ""
    picky.write_text(f"""#!/bin/sh
if [ "$1" = --version ]; then exec {real} --version; fi
for a in "$@"; do case "$a" in *.c) src=$a;; esac; done
line=$(grep -n '0x1.3000000000000p+2' "$src" | head -1 | cut -d: -f1)
if [ -n "$line" ]; then echo "{where}error: this compiler rejects 4.75" >&2; exit 1; fi
exec {real} "$@"
""")
    picky.chmod(0o755)
    monkeypatch.setenv("RUNE_CC", str(picky))
    x = nx.asarray(X)
    good, bad, other = _kernel(1.0625), _kernel(4.75), _kernel(1.1875)
    for jf in (good, bad, other):
        jf.plan(x)
    before = rune.stats()["kernels_compiled"]
    compile_pending()   # one batch for the three: the bad unit must not sink the others
    # the batch, the bad unit alone, then the rest again (without a line to go by, units
    # are tried alone in order until one fails: one run more)
    assert rune.stats()["kernels_compiled"] - before == (3 if names_the_line else 4)
    np.testing.assert_array_equal(np.asarray(good(x)), X * np.float32(1.0625) + np.float32(0.5))
    np.testing.assert_array_equal(np.asarray(other(x)), X * np.float32(1.1875) + np.float32(0.5))
    for _ in range(2):   # and every time it is run
        with pytest.raises(rune.CompileError, match=r"(?s)rejected kernel.*rejects 4\.75.*--- source ---"):
            bad(x)


def test_a_compiler_that_rejects_everything_costs_three_runs_and_fails_every_stretch(monkeypatch, tmp_path):
    broken = tmp_path / "broken-cc"
    broken.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo broken 1.0; exit 0; fi\n"
                      "echo 'ld: cannot find -lmvec' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("RUNE_CC", str(broken))
    x = nx.asarray(X)
    fns = [_kernel(5 + k / 8) for k in range(5)]
    for jf in fns:
        jf.plan(x)
    before = rune.stats()["kernels_compiled"]
    compile_pending()
    # the batch, then the first two units alone: both fail naming no line of theirs
    assert rune.stats()["kernels_compiled"] - before == 3
    for jf in fns:
        with pytest.raises(rune.CompileError, match="cannot find -lmvec"):
            jf(x)


# ---------------------------------------------------------------- the key

def test_each_part_of_the_key_changes_it(monkeypatch, tmp_path):
    real = compiler.find()
    base = real.key("unit source")
    assert real.key("unit source") == base
    assert real.key("other unit source") != base
    # the compiler's path: the same compiler reached through a wrapper elsewhere
    wrapper = tmp_path / "cc-wrapper"
    wrapper.write_text(f"#!/bin/sh\nexec {real.path} \"$@\"\n")
    wrapper.chmod(0o755)
    other_path = compiler.Compiler(str(wrapper))
    assert other_path.version == real.version and other_path.key("unit source") != base
    # its version: a wrapper that says it is another release
    liar = tmp_path / "cc-newer"
    liar.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo cc 99.0; exit 0; fi\n"
                    f"exec {real.path} \"$@\"\n")
    liar.chmod(0o755)
    assert compiler.Compiler(str(liar)).version == "cc 99.0"
    keys = {base, other_path.key("unit source"), compiler.Compiler(str(liar)).key("unit source")}
    for name, value in (("FLAGS", compiler.FLAGS + ("-fno-unroll-loops",)),
                        ("LIBS", compiler.LIBS + ("-ldl",)),
                        ("_cpu_features", lambda: "another CPU"),
                        ("_platform", lambda: "another system")):
        with monkeypatch.context() as m:
            m.setattr(compiler, name, value)
            keys.add(compiler.Compiler(real.path).key("unit source"))
    with monkeypatch.context() as m:
        m.setattr(disk_cache, "ABI_VERSION", "rune-kernels-0")
        keys.add(real.key("unit source"))
    assert len(keys) == 8
    assert compiler.Compiler(real.path).key("unit source") == base   # all of it is deterministic


def test_the_platform_part_names_the_system_and_the_cpu_part_reads_it(monkeypatch):
    import platform
    assert sys.platform in compiler._platform() and platform.machine() in compiler._platform()
    if os.path.exists("/proc/cpuinfo"):
        assert len(compiler._cpu_features()) == 64   # a hash of the model and flag lines


_W = """
import json, sys, numpy as np, rune
from rune import nx
from rune.backends.cpu import compiler
compiler.FLAGS = compiler.FLAGS + tuple(sys.argv[1:])
x = np.linspace(-1, 1, 9, dtype=np.float32)
y = np.asarray(rune.jit(lambda v: v * 5.25 - 1)(nx.asarray(x)))
print(json.dumps({"stats": rune.stats(), "y": y.tolist()}))
"""


def _process(tmp_path, *flags):
    # RUNE_BLAS_POOL=0: no BLAS pool unit built at import, so the cache holds only this program's units
    env = dict(os.environ, RUNE_CACHE_DIR=str(tmp_path / "cache"), RUNE_CACHE="1", RUNE_COMPILE_MIN_SIZE="0",
               RUNE_BLAS_POOL="0")
    done = subprocess.run([sys.executable, "-c", _W, *flags], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_process_with_other_flags_recompiles(tmp_path):
    first = _process(tmp_path)
    assert first["stats"]["kernels_compiled"] == 1
    other = _process(tmp_path, "-fno-tree-vectorize")
    assert other["stats"]["kernels_compiled"] == 1 and other["stats"]["disk_cache_hits"] == 0
    again = _process(tmp_path)
    assert again["stats"]["kernels_compiled"] == 0 and again["stats"]["disk_cache_hits"] == 1
    want = (np.linspace(-1, 1, 9, dtype=np.float32) * np.float32(5.25) - np.float32(1)).tolist()
    assert first["y"] == other["y"] == again["y"] == want


# ---------------------------------------------------------------- the checksum

def test_a_cached_library_swapped_for_another_that_loads_is_rebuilt(tmp_path):
    first = _process(tmp_path)
    assert first["stats"]["kernels_compiled"] == 1
    kdir = tmp_path / "cache" / "kernels"
    entry, = [e for e in kdir.glob("*.json")]
    record = json.loads(entry.read_text())
    # An impostor with the same entry point that writes nothing: loaded as is, the
    # output would be whatever the fresh buffer held.
    impostor = tmp_path / "impostor.c"
    impostor.write_text(f"void {record['symbol']}(void **b) {{ (void)b; }}\n")
    cc = compiler.find().path
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(kdir / record["lib"]), str(impostor)], check=True)
    second = _process(tmp_path)
    assert second["stats"]["kernels_compiled"] == 1 and second["stats"]["disk_cache_hits"] == 0
    assert second["y"] == first["y"]
    third = _process(tmp_path)
    assert third["stats"]["kernels_compiled"] == 0 and third["y"] == first["y"]


# ---------------------------------------------------------------- one cache for every platform

_SECOND_PROCESS = """
import json, os, sys, time, numpy as np, rune
from rune import nx
from rune.backends import backend_for, stretch
from rune.compiler.target import TargetStretch
from rune.core.devices import Device, get_device

# (no function of rune's math library: its own units would join the counts; its test is below)
fns = [lambda x: nx.sqrt(x * x + 1.0) * 2.0 + 1.0, lambda x: nx.sum(x * x, axis=0) - nx.max(x)]
spec = rune.Spec((64, 33), "float32")
x = nx.asarray(np.linspace(-1, 1, 64 * 33, dtype=np.float32).reshape(64, 33))
built, cuda = [], []
for platform in sys.argv[1].split(","):
    if platform == "cuda":
        from rune.codegen.cuda import DeviceProps
        device = Device("cuda", 0)   # no GPU needed: units are compiled, never launched
        backend = backend_for(device)
        steps = [s for f in fns for s in rune.jit(f).plan(spec, target="cuda").steps if type(s) is TargetStretch]
        cuda = [backend.compiled_stretch(s.eqns, s.unit, device, DeviceProps()) for s in steps]
        built += cuda
    else:
        built += [s for f in fns for s in rune.jit(f).plan(x).steps if type(s).__name__ == "CompiledStretch"]
if len(sys.argv) > 2:   # argv[2:]: a folder and a count, a barrier: start compiling with the others
    folder, count = sys.argv[2], int(sys.argv[3])
    open(os.path.join(folder, str(os.getpid())), "w").close()
    while len(os.listdir(folder)) < count:
        time.sleep(0.002)
rune.reset_stats()
done = stretch.compile_pending(batch=1 if len(sys.argv) > 2 else None)   # with a barrier, a run per unit
stats = rune.stats()
paths, functions = [], True
if cuda:   # the Programs the stretches' launchers hold
    launched = lambda s: {k.program for k in s._launch.__closure__[0].cell_contents}
    paths = sorted(p.path for p in set().union(*map(launched, cuda)))
    functions = all(p.has(ln.name) for s in cuda for p in launched(s) for k in s.kernels for ln in k.launches)
ys = [np.asarray(rune.jit(f)(x)).tolist() for f in fns] if "c" in sys.argv[1].split(",") else []
print(json.dumps({"stats": stats, "built": len(built), "done": done, "ys": ys,
                  "names": [s.name for s in built], "paths": paths, "functions": functions}))
"""


def second_process_oracle():
    """NumPy's values of _SECOND_PROCESS's two functions."""
    x = np.linspace(-1, 1, 64 * 33, dtype=np.float32).reshape(64, 33)
    return [np.sqrt(x * x + 1) * 2 + 1, np.sum(x * x, axis=0) - np.max(x)]


@pytest.mark.parametrize("platform", ["c", pytest.param("cuda", marks=pytest.mark.nvrtc)],
                         ids=["shared-library", "cubin"])
def test_a_second_process_takes_every_platforms_units_from_the_one_disk_cache(tmp_path, platform):
    """Two processes sharing RUNE_CACHE_DIR build the same units: the first compiles
    them (C: the system compiler; CUDA: rune's NVRTC call, no GPU needed) into the
    cache, the second compiles nothing and loads each unit from it."""
    # RUNE_BLAS_POOL=0: no BLAS pool unit built at import, so the cache holds only this program's units
    env = dict(os.environ, RUNE_CACHE_DIR=str(tmp_path / "shared"), RUNE_CACHE="1", RUNE_COMPILE_MIN_SIZE="0",
               RUNE_BLAS_POOL="0")
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _SECOND_PROCESS, platform], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["built"] == 2 and first["done"] == 2 and second["done"] == 2
    assert first["names"] == second["names"]
    assert first["stats"]["kernels_compiled"] == 1 and first["stats"]["disk_cache_hits"] == 0
    assert second["stats"]["kernels_compiled"] == 0 and second["stats"]["disk_cache_hits"] == 2
    if platform == "c":
        for got, want in zip(second["ys"], second_process_oracle()):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    suffix = ".cubin" if platform == "cuda" else ".so"
    artifacts = list((tmp_path / "shared" / "kernels").glob("lib-*" + suffix))
    assert len(artifacts) == 1 and artifacts[0].read_bytes()[:4] == b"\x7fELF"
    if platform == "cuda":   # loaded from the cache's cubin, which defines every kernel launched
        assert second["paths"] == [str(artifacts[0])] and second["functions"]


@pytest.mark.nvrtc
def test_a_cuda_unit_nvrtc_rejects_fails_alone_and_the_rest_of_its_batch_is_cached():
    """NVRTC's log names the rejected unit's line: it is built alone and fails (each
    time its launcher runs), the other two build together again into the cache;
    no GPU needed."""
    from types import SimpleNamespace as K
    from rune.backends.cuda import launch, nvrtc

    def unit(name, body):
        source = f'extern "C" __global__ void {name}_k0(float *p) {{ {body} }}'
        return name, source, [K(name=f"{name}_k0", launches=[K(name=f"{name}_k0", grid=1, block=32, shared=0)],
                                scratch=[], args=[("buffer", 0)])]

    units = [unit("rn_good", "p[0] = 1.0f;"), unit("rn_bad", "p[0] = undeclared_name;"),
             unit("rn_other", "p[0] = 2.0f;")]
    compiler = nvrtc.compiler("sm_90")
    runs = launch.launchers(compiler, "", units)
    assert rune.stats()["kernels_compiled"] == 3   # the batch, the bad unit alone, the other two
    with pytest.raises(launch.KernelCompileError, match=r"(?s)NVRTC could not compile rn_bad_k0 .*undeclared_name"):
        runs[1]([])
    pipeline._LOADED.clear()   # as a new process (the fixture gave this test its own table)
    rune.reset_stats()
    programs = pipeline.build(compiler, "", units)
    assert rune.stats()["kernels_compiled"] == 1 and rune.stats()["disk_cache_hits"] == 2
    assert programs[0] is programs[2] and programs[0].has("rn_other_k0") and not programs[0].has("rn_bad_k0")
    assert isinstance(programs[1], launch.KernelCompileError)
