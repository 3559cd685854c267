"""Every eager operation goes through `bind` into the eval interpreter, and
binary ones on concrete Arrays (with an Array or a literal) take a short path
there (`rune.core.trace.bind_binary` runs them without `EvalInterpreter.process`).
Its results must be exactly those of the general path: a second
EvalInterpreter made current runs that path (the short one only triggers when
the module's own `EVAL` is current), so every case below is computed both ways
and compared (values bit for bit, dtype, weakness, device, errors and
warnings), and against NumPy where NumPy defines the answer.
"""
import operator
import os
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx
from rune.core.array import Array
from rune.core.prims import P
from rune.core.trace import EVAL, EvalInterpreter, bind, using

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository

FUNCTIONS = ("add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "maximum",
             "minimum", "atan2", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
             "equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
DTYPES = (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int8, np.uint8, np.bool_,
          np.complex64)


def _array(values, dtype, weak=False):
    host = np.asarray(values).astype(dtype)
    return Array(host, nx.asarray(host).device, weak)


def _operands(dtype):
    """(label, x, y) pairs covering the short path's cases and its neighbours."""
    nd = _array([3, 1, 0, 2, 5, 7, 1, 4], dtype)
    other = _array([1, 2, 1, 3, 1, 2, 2, 1], dtype)
    zero_d = _array(2, dtype)
    weak = _array([2, 1, 3, 1, 2, 1, 1, 2], dtype, weak=True)
    return [("nd-nd", nd, other), ("nd-0d", nd, zero_d), ("0d-0d", zero_d, zero_d),
            ("weak-weak", weak, weak), ("nd-weak", nd, weak), ("nd-int", nd, 2), ("int-nd", 3, nd),
            ("nd-float", nd, 2.5), ("float-nd", 1.5, nd), ("0d-int", zero_d, 1), ("nd-bool", nd, True),
            ("nd-big-int", nd, 1000), ("nd-other-dtype", nd, _array([1, 2, 1, 3, 1, 2, 2, 1], np.int16))]


def _run(fn, x, y):
    """(result or exception, the warnings raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = fn(x, y)
        except Exception as e:  # compared below: both paths must fail alike
            out = e
    return out, [(w.category, str(w.message)) for w in caught]


def _general(fn, x, y):
    with using(EvalInterpreter()):
        return _run(fn, x, y)


def _same(short, general):
    (a, wa), (b, wb) = short, general
    assert wa == wb
    if isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b)
        return
    assert type(a) is Array and type(b) is Array
    assert type(a._raw) is np.ndarray  # never a NumPy scalar, 0-d included
    assert (a.dtype, a.shape, a.weak, a.device) == (b.dtype, b.shape, b.weak, b.device)
    assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_short_path_matches_general_path(name, dtype):
    fn = getattr(nx, name)
    for label, x, y in _operands(dtype):
        short = _run(fn, x, y)
        _same(short, _general(fn, x, y))


@pytest.mark.parametrize("symbol", ("add", "sub", "mul", "truediv", "lt", "eq"))
def test_operators_take_the_short_path_and_agree_with_numpy(symbol):
    op = getattr(operator, symbol)
    host = np.arange(1, 9, dtype=np.float32)
    x = nx.asarray(host)
    for y, host_y in ((x, host), (2, 2), (2.5, 2.5), (nx.asarray(host[0]), host[0])):
        for args, host_args in (((x, y), (host, host_y)), ((y, x), (host_y, host))):
            got, want = op(*args), op(*host_args)
            assert got.dtype == want.dtype and not got.weak
            np.testing.assert_array_equal(np.asarray(got), want)
            _same(_run(op, *args), _general(op, *args))


def test_warnings_and_errors_are_those_of_the_general_path():
    big = _array([3e38, 1.0], np.float32)
    short = _run(operator.mul, big, 10.0)  # float32 overflow: NumPy's warning, unguarded on both paths
    assert short[1] and short[1][0][0] is RuntimeWarning
    _same(short, _general(operator.mul, big, 10.0))
    ints = _array([1, 2], np.int32)
    failed = _run(nx.power, ints, -1)  # the backend refuses: reported once, as a rune error
    assert isinstance(failed[0], rune.RuneError) and "pow" in str(failed[0])
    _same(failed, _general(nx.power, ints, -1))
    _same(_run(nx.divide, _array([1.0, 0.0], np.float32), 0.0),  # divide is guarded: no warning
          _general(nx.divide, _array([1.0, 0.0], np.float32), 0.0))


def test_transformations_still_trace_concrete_arrays():
    c = nx.asarray(np.arange(4, dtype=np.float32))
    program = rune.trace(lambda y: c * 2 + y)(c)
    assert [e.prim.name for e in program.eqns] == ["mul", "add"]  # staged, not computed eagerly
    np.testing.assert_allclose(np.asarray(rune.jit(lambda y: c * 2 + y)(c)), np.arange(4) * 3)
    x = nx.asarray(np.float32(3.0))
    assert float(rune.grad(lambda v: v * v * 2 + 1)(x)) == 12.0
    batched = rune.vmap(lambda row: row * c + 1)(nx.asarray(np.ones((2, 4), np.float32)))
    np.testing.assert_array_equal(np.asarray(batched), np.ones((2, 4)) * np.arange(4) + 1)


def test_every_eager_operation_reaches_the_eval_interpreter(monkeypatch):
    # With a second EvalInterpreter current, `bind` takes no short path: each
    # primitive an nx function runs must show up in `process`, literal
    # arithmetic (folded by the eval interpreter under any transformation) too.
    seen = []
    real = EvalInterpreter.process

    def process(self, prim, args, params):
        seen.append(prim.name)
        return real(self, prim, args, params)

    monkeypatch.setattr(EvalInterpreter, "process", process)
    x, i = nx.asarray(np.arange(4, dtype=np.float32)), nx.asarray(np.arange(4, dtype=np.int32))
    with using(EvalInterpreter()):
        for fn, want in ((lambda: x * x, ["mul"]), (lambda: x * 2, ["mul"]), (lambda: 2 - x, ["sub"]),
                         (lambda: i + 1.5, ["convert", "add"]), (lambda: nx.exp(x), ["exp"]),
                         (lambda: nx.add(np.float32(2), np.float32(3)), ["add"]),
                         (lambda: nx.multiply(np.int8(100), 2), ["mul"])):
            seen.clear()
            fn()
            assert seen == want


@pytest.mark.parametrize("name", ("add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power",
                                  "maximum", "atan2", "less"))
@pytest.mark.parametrize("types", [(np.float32, np.float32), (np.int8, int), (float, np.float16),
                                   (np.int32, np.int32)], ids=lambda t: "-".join(x.__name__ for x in t))
def test_literal_arithmetic_is_a_literal_with_rune_semantics(name, types):
    # A NumPy scalar among the operands keeps the result a NumPy scalar, folded
    # now whatever is current; its value is what the same operation gives on
    # 0-d arrays of those dtypes (an independent path: arrays, not literals).
    a, b = types[0](7), types[1](2)
    fn = getattr(nx, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = fn(a, b)
        want = fn(*(v if type(v) in (int, float) else nx.asarray(np.asarray(v)) for v in (a, b)))
    assert isinstance(got, np.generic) and got.dtype == want.dtype, (type(got), want.dtype)
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    staged = rune.trace(lambda x: x + fn(a, b))(nx.zeros((), want.dtype))
    assert [e.prim.name for e in staged.eqns] == ["add"]  # folded while staging, not staged


def test_literals_alone_are_folded_on_the_host_by_the_eval_interpreter():
    out = bind(P["mul"], np.float32(1.5), np.float32(4))
    assert type(out) is np.float32 and out == 6.0
    assert EVAL.process(P["max"], (np.int8(-3), np.int8(2)), {}) == np.int8(2)
    with pytest.raises(rune.RuneError, match="pow"):
        bind(P["pow"], np.int32(2), np.int32(-1))  # the backend refuses: a rune error, as for arrays


def test_read_scalar_is_a_counted_read():
    x = nx.asarray(np.int32(7))
    before = rune.stats()["scalar_reads"]
    assert x.read_scalar() == 7 and type(x.read_scalar()) is int
    assert rune.stats()["scalar_reads"] == before + 2


def test_from_dlpack_shares_host_memory_and_is_never_donated():
    host = np.arange(6, dtype=np.float32)
    x = nx.from_dlpack(host)
    assert x.device == nx.asarray(1).device and x._shared
    assert np.shares_memory(np.from_dlpack(x), host)
    np.testing.assert_array_equal(np.asarray(x * 2), host * 2)


_TWO_DEVICES = """
import numpy as np, pytest, rune
from rune import nx
from rune.core.devices import default_device
a = nx.asarray(np.arange(4, dtype=np.float32), device="cpu:1")
b = nx.asarray(np.ones(4, np.float32), device="cpu:0")
assert str((a * 2 + 1).device) == "cpu:1" and str((2 * a).device) == "cpu:1"
assert str((a * a).device) == "cpu:1" and str(nx.asarray(np.float32(2), device="cpu:1").__mul__(3).device) == "cpu:1"
with default_device("cpu:1"):
    assert str((b * 2).device) == "cpu:0"  # an op runs where its array is, not on the default
with pytest.raises(rune.DeviceMismatchError, match="^mul: operands are on different devices"):
    a * b
print("ok")
"""


def test_two_host_devices_place_results_as_the_general_path():
    env = dict(os.environ, RUNE_HOST_DEVICES="2")
    run = subprocess.run([sys.executable, "-c", _TWO_DEVICES], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
