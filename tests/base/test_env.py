"""The RUNE_* environment variables: each accepts what the README says, and
anything else is an ArgumentError that names the variable, what it accepts and
what it holds, raised where the value is used (a jitted call, import)."""
import os
import subprocess
import sys

import pytest

import rune
from rune.base import config
from rune import nx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository


def _raises_naming(name, value, call):
    with pytest.raises(rune.ArgumentError) as info:
        call()
    message = str(info.value)
    assert name in message and repr(value) in message and "must be" in message, message
    return message


@pytest.mark.parametrize("value, want", [("0", False), ("1", True), (" off ", False), ("TRUE", True), ("", True)])
def test_flags_accept_the_usual_spellings(monkeypatch, value, want):
    for name, read in (("RUNE_CACHE", config.cache_enabled), ("RUNE_CUDA_COMPILE", config.cuda_compile)):
        monkeypatch.setenv(name, value)
        assert read() is want
        monkeypatch.delenv(name)
        assert read() is True


@pytest.mark.parametrize("name, read", [("RUNE_CACHE", config.cache_enabled),
                                        ("RUNE_CUDA_COMPILE", config.cuda_compile)])
@pytest.mark.parametrize("value", ["2", "enabled", "0x"])
def test_a_flag_that_is_neither_0_nor_1_is_an_argument_error(monkeypatch, name, read, value):
    monkeypatch.setenv(name, value)
    assert "0 or 1" in _raises_naming(name, value, read)


@pytest.mark.parametrize("name, read, minimum, default", [
    ("RUNE_JIT_CACHE_SIZE", config.jit_cache_size, 1, 4096),
    ("RUNE_HOST_DEVICES", config.host_devices, 1, 1),
    ("RUNE_COMPILE_MIN_SIZE", lambda: config.compile_min_size(4096), 0, 4096)])
def test_integer_variables(monkeypatch, name, read, minimum, default):
    monkeypatch.delenv(name, raising=False)
    assert read() == default
    monkeypatch.setenv(name, f" {minimum + 3} ")
    assert read() == minimum + 3
    monkeypatch.setenv(name, str(minimum))
    assert read() == minimum
    for bad in (str(minimum - 1), "many", "1.5", "1e3"):
        monkeypatch.setenv(name, bad)
        _raises_naming(name, bad, read)


def test_a_bad_compile_min_size_fails_the_jitted_call_that_reads_it(monkeypatch):
    # It used to be int()'d bare: a ValueError that did not say which variable.
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "lots")
    _raises_naming("RUNE_COMPILE_MIN_SIZE", "lots", lambda: rune.jit(lambda x: x + 1)(nx.ones(3)))


def test_a_bad_cache_flag_fails_the_jitted_call_that_reads_it(monkeypatch):
    # It used to count as "on": anything but "0" was.
    from rune.backends import pipeline as compiler   # the process's table of loaded units
    monkeypatch.setattr(compiler, "_LOADED", {})   # the kernel is looked up on disk, as in a new process
    monkeypatch.setenv("RUNE_CACHE", "nope")
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "0")
    _raises_naming("RUNE_CACHE", "nope", lambda: rune.jit(lambda x: x * 3.25 - 1)(nx.ones(3)))


def test_rune_cc_names_a_compiler_or_none(monkeypatch, tmp_path):
    monkeypatch.delenv("RUNE_CC", raising=False)
    assert config.c_compiler() is None
    monkeypatch.setenv("RUNE_CC", "NONE")
    assert config.c_compiler() == "none"
    monkeypatch.setenv("RUNE_CC", sys.executable)
    assert config.c_compiler() == os.path.abspath(sys.executable)
    missing = str(tmp_path / "no-such-cc")
    monkeypatch.setenv("RUNE_CC", missing)
    assert "names no file" in _raises_naming("RUNE_CC", missing, config.c_compiler)
    data = tmp_path / "cc.txt"
    data.write_text("not a program")
    data.chmod(0o644)
    monkeypatch.setenv("RUNE_CC", str(data))
    assert "not an executable" in _raises_naming("RUNE_CC", str(data), config.c_compiler)


def test_a_bad_rune_cc_fails_the_jitted_call(monkeypatch):
    monkeypatch.setenv("RUNE_CC", "no-such-compiler-anywhere")
    monkeypatch.setenv("RUNE_COMPILE_MIN_SIZE", "0")
    _raises_naming("RUNE_CC", "no-such-compiler-anywhere", lambda: rune.jit(lambda x: x - 2)(nx.ones(3)))


def test_cache_dir_is_made_absolute_and_home_is_its_default(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNE_CACHE_DIR", "rel/cache")
    assert config.cache_root() == str(tmp_path / "rel" / "cache")
    monkeypatch.setenv("RUNE_CACHE_DIR", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config.cache_root() == str(tmp_path / "home" / ".cache" / "rune")
    monkeypatch.setenv("HOME", "relative-home")     # not a place to put a cache
    assert config.cache_root() is None


def test_no_home_at_all_means_no_cache_folder(monkeypatch):
    import pwd

    def no_entry(uid):
        raise KeyError(uid)
    monkeypatch.delenv("RUNE_CACHE_DIR", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    assert config.cache_root() == os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".cache", "rune")
    monkeypatch.setattr(pwd, "getpwuid", no_entry)   # an unnamed uid in a container
    assert config.cache_root() is None


def test_default_device_has_the_form_of_a_device_name(monkeypatch):
    monkeypatch.delenv("RUNE_DEFAULT_DEVICE", raising=False)
    assert config.default_device() is None
    for good in ("cpu", "cuda:1", " cpu:0 "):
        monkeypatch.setenv("RUNE_DEFAULT_DEVICE", good)
        assert config.default_device() == good.strip()
    for bad in ("gpu", "cpu:", "cpu:x", "cpu0"):
        monkeypatch.setenv("RUNE_DEFAULT_DEVICE", bad)
        assert "'cpu:N'" in _raises_naming("RUNE_DEFAULT_DEVICE", bad, config.default_device)


def _import_rune(**env):
    e = dict(os.environ, **env)
    e.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-c", "import rune"], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=120)


def test_bad_device_variables_fail_import_naming_the_variable():
    bad_form = _import_rune(RUNE_DEFAULT_DEVICE="gpu:0")
    assert bad_form.returncode != 0
    assert "ArgumentError" in bad_form.stderr and "RUNE_DEFAULT_DEVICE" in bad_form.stderr, bad_form.stderr
    absent = _import_rune(RUNE_DEFAULT_DEVICE="cpu:3", RUNE_HOST_DEVICES="1")
    assert absent.returncode != 0
    assert "DeviceError" in absent.stderr and "RUNE_DEFAULT_DEVICE='cpu:3'" in absent.stderr, absent.stderr


def test_only_the_config_module_reads_rune_variables():
    # One place reads them, so none escapes validation.
    import pathlib
    import re
    pkg = pathlib.Path(rune.__file__).parent
    readers = [f"{path.relative_to(pkg)}:{n}" for path in pkg.rglob("*.py") if path != pkg / "config.py"
               for n, line in enumerate(path.read_text().splitlines(), 1)
               if re.search(r"\benviron\b|getenv", line) and "RUNE_" in line]
    assert readers == []
