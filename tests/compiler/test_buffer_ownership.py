"""A result rune handed out is never written again while anything can read it.

Compiled C stretches keep their outputs' memory from call to call, and host
collectives their results' (rune/backends/cpu/blocks.py): the memory is reused
only once the array handed out over it is gone. These tests hold a previous
result in every way Python and NumPy offer, call again with other inputs, and
compare the held value with its NumPy oracle. Each runs twice: on this
interpreter, and with `sys.getrefcount` answering one less, as Python 3.14's
borrowed stack references do (the interpreter detail reuse must not depend on).
"""
import sys
import types

import numpy as np
import pytest

import rune
from rune import nx

pytestmark = pytest.mark.cc

N = 4096   # a compiled stretch on the host from this many elements (RUNE_COMPILE_MIN_SIZE)
_RNG = np.random.default_rng(27)


@pytest.fixture(params=["this interpreter", "lower reference counts"])
def interpreter(request, monkeypatch):
    if request.param == "lower reference counts":
        real = sys.getrefcount
        probe = object()
        through = (lambda o: real(o))(probe) - real(probe)   # a wrapper's own references

        def lowered(o):
            return real(o) - through - 1

        assert lowered(probe) == real(probe) - 1
        monkeypatch.setattr(sys, "getrefcount", lowered)
    return request.param


def _inputs(k, shape=(N,)):
    return [_RNG.standard_normal(shape).astype(np.float32) for _ in range(k)]


class _Capsule:
    """A DLPack producer answering with a capsule taken earlier."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def _held_in_generator(value):
    yield
    yield value


# Each holder: (hold(result) -> held, read(held) -> a NumPy array of the value held).
HOLDERS = {
    "local": (lambda out: out, np.asarray),
    "list": (lambda out: [out], lambda held: np.asarray(held[0])),
    "closure": (lambda out: (lambda: out), lambda held: np.asarray(held())),
    "generator frame": (lambda out: next(g := _held_in_generator(out)) or g, lambda held: np.asarray(next(held))),
    "np.asarray": (np.asarray, lambda held: held),
    "a view": (lambda out: np.asarray(out).reshape(1, -1), lambda held: held[0]),
    "memoryview": (lambda out: memoryview(np.asarray(out)), np.asarray),
    "DLPack capsule": (lambda out: out.__dlpack__(), lambda held: np.from_dlpack(_Capsule(held))),
    "np.from_dlpack": (np.from_dlpack, lambda held: held),
    "attribute": (lambda out: types.SimpleNamespace(value=out), lambda held: np.asarray(held.value)),
}


def _check_held_results(f, oracle, inputs):
    """Call `f` on the first input, hold its result in each way of HOLDERS, call it
    again on the others (dropping and keeping results): every held value is still
    its oracle's."""
    held = {}
    for name, (hold, _) in HOLDERS.items():
        held[name] = hold(f(*inputs[0]))
    kept = [f(*args) for args in inputs[1:]]
    for args in inputs[1:]:
        f(*args)
    for name, (_, read) in HOLDERS.items():
        np.testing.assert_allclose(read(held[name]), oracle(*inputs[0]), rtol=1e-6, err_msg=name)
    for args, out in zip(inputs[1:], kept):
        np.testing.assert_allclose(np.asarray(out), oracle(*args), rtol=1e-6)


def test_a_held_result_of_a_compiled_stretch_keeps_its_values(interpreter):
    f = rune.jit(lambda x: x * 2.0 + 1.0)
    _check_held_results(f, lambda x: x * 2 + 1, [(x,) for x in map(nx.asarray, _inputs(3))])


def test_a_result_held_in_a_local_survives_the_next_call(interpreter):
    f = rune.jit(lambda x: x * 2.0 + 1.0)
    x1, x2 = _inputs(2)
    a = f(nx.asarray(x1))
    b = f(nx.asarray(x2))
    np.testing.assert_allclose(np.asarray(a), x1 * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(b), x2 * 2 + 1, rtol=1e-6)


def _scan_step(c, x):
    c = c * 0.5 + x
    return c, c * 2.0


def _scan_oracle(c, xs):
    ys = []
    for x in xs:
        c = c * 0.5 + x
        ys.append(c * 2)
    return c, np.stack(ys)


def test_scan_rows_made_by_a_compiled_stretch_keep_their_values(interpreter):
    f = rune.jit(lambda c, xs: rune.scan(_scan_step, c, xs))
    (c,), (xs,) = _inputs(1), _inputs(1, (4, N))
    carry, ys = f(nx.asarray(c), nx.asarray(xs))
    want_carry, want_ys = _scan_oracle(c, xs)
    again = f(nx.asarray(-c), nx.asarray(xs))
    np.testing.assert_allclose(np.asarray(ys), want_ys, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(carry), want_carry, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(again[1]), _scan_oracle(-c, xs)[1], rtol=1e-5)


def _while_body(state):
    i, before, now = state
    return i + 1, now, now * 0.5 + before


def test_a_while_loop_carrying_the_last_two_values_of_a_compiled_stretch(interpreter):
    f = rune.jit(lambda a, b: rune.while_loop(lambda s: s[0] < 5, _while_body, (0, a, b)))
    a, b = _inputs(2)
    before, now = a.astype(np.float64), b.astype(np.float64)
    for _ in range(5):
        before, now = now, now * 0.5 + before
    _, got_before, got_now = f(nx.asarray(a), nx.asarray(b))
    f(nx.asarray(b), nx.asarray(a))
    np.testing.assert_allclose(np.asarray(got_before), before, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got_now), now, rtol=1e-5, atol=1e-5)


def test_a_held_result_of_a_compiled_stretch_in_a_cond_branch(interpreter):
    f = rune.jit(lambda p, x: rune.cond(p, lambda v: v * 2.0 + 1.0, lambda v: v * 3.0 - 1.0, x))
    branch = {True: lambda x: x * 2 + 1, False: lambda x: x * 3 - 1}
    inputs = [(p, nx.asarray(x)) for p, x in zip([True, False, True], _inputs(3))]
    _check_held_results(f, lambda p, x: branch[p](np.asarray(x)), inputs)


def test_an_output_comes_back_in_the_memory_of_a_dropped_one():
    """Reuse is kept where it is safe: the memory of a result nothing holds any more
    (page faults of new memory are what reuse saves), alternating between two blocks
    when the caller holds the last result while making the next."""
    f = rune.jit(lambda x: x * 2.0 + 1.0)
    x = nx.asarray(_inputs(1)[0])

    def where(a):
        return np.asarray(a).__array_interface__["data"][0]

    first = where(f(x))
    assert where(f(x)) == first
    y = f(x)
    addresses = set()
    for _ in range(4):
        y = f(y)
        addresses.add(where(y))
    assert len(addresses) == 2


# ---------------------------------------------------------------- host collectives' result buffers

def test_a_held_collective_result_buffer_is_never_handed_out_again(interpreter):
    from rune.distributed import host
    f32 = np.dtype(np.float32)
    n = host.POOL_MIN_BYTES // 4
    host._pool.clear()
    try:
        held = {}
        for k, (name, (hold, _)) in enumerate(HOLDERS.items()):
            buf = host._result_buffer(n, f32)
            buf[:] = k
            held[name] = hold(buf)
            del buf
        for _ in range(3):
            host._result_buffer(n, f32)[:] = -1
        for k, (name, (_, read)) in enumerate(HOLDERS.items()):
            assert np.all(read(held[name]) == k), name
    finally:
        host._pool.clear()


# ---------------------------------------------------------------- donated buffers

def _owned_gpu_arrays():
    """`make(n)`: a CuPy array over host memory (never dereferenced: CuPy builds arrays
    without a GPU) whose allocation an owner holds, as a GPU stretch's outputs are."""
    pytest.importorskip("cupy")
    from rune.backends.cuda.owned import CupyOwner
    kept = []

    def make(n):
        host = np.zeros(n, np.float32)
        kept.append(host)
        memory = types.SimpleNamespace(ptr=host.ctypes.data, mem=types.SimpleNamespace(size=host.nbytes),
                                       device_id=0)
        return CupyOwner(memory).array((n,), np.float32)

    return make


def _donate(*arrays, alias=()):
    """What jit's donating call does with `arrays` donated (and `alias` passed
    beside them): {position: the buffer taken}, the leaves deleted."""
    from rune.compiler import donation
    leaves = list(arrays) + list(alias)
    raws = [x._raw for x in leaves]
    taken = donation.take(leaves, raws, range(len(arrays)), "jit(step)")
    assert all(isinstance(x._raw, donation.DeletedBuffer) for x in arrays)
    return {i: (buffer is raws[i]) for i, buffer in taken.items()}


def test_a_donated_buffer_is_taken_only_when_nothing_else_reads_it(interpreter):
    from rune.core.array import Array
    make = _owned_gpu_arrays()
    cpu = nx.asarray(0.0).device

    def leaf(raw):
        return Array(raw, cpu)

    alone = _donate(leaf(make(8)))   # (not in the assert: pytest's rewriting would hold the array)
    x = leaf(make(8))
    other = Array(x._raw, cpu)    # another Array over the same buffer
    with_other = _donate(x)
    x = leaf(make(8))
    view = x._raw[2:]             # a view keeps the memory readable
    with_view = _donate(x)
    x = leaf(make(8))
    held = [x._raw]               # a caller's own reference to the buffer
    with_held = _donate(x)
    lent = leaf(make(8))
    lent._shared = True           # lent to foreign code (DLPack, __cuda_array_interface__)
    twice = leaf(make(8))
    of_view = leaf(make(8)[2:])   # a view itself
    not_owned = leaf(nx.asarray(np.zeros(8, np.float32))._raw)   # memory rune made no owner for
    refused = [_donate(lent), _donate(twice, alias=[twice]), _donate(of_view), _donate(not_owned)]
    assert alone == {0: True}
    assert with_other == with_view == with_held == {} and (other._raw.shape, view.shape) == ((8,), (6,))
    assert refused == [{}, {}, {}, {}] and held


def test_an_array_lent_or_borrowed_through_dlpack_is_marked_never_to_be_donated():
    lent, kept = nx.asarray(np.arange(8.0)), nx.asarray(np.arange(8.0))
    np.from_dlpack(lent)   # a consumer's zero-copy view, gone at once: rune cannot see how long such views live
    borrowed = nx.from_dlpack(np.arange(8.0))
    assert (getattr(lent, "_shared", False), getattr(kept, "_shared", False), borrowed._shared) == (True, False, True)


def test_the_handle_left_after_a_refused_donation_keeps_the_memory_owned_once():
    """Where another Array still reads a donated buffer, the call reads it through a
    new handle held by the same owner: once that Array is the last one, the memory
    is its alone, and a later donation of it is refused while the Array lives."""
    from rune.core.array import Array
    make = _owned_gpu_arrays()
    cpu = nx.asarray(0.0).device
    x = Array(make(8), cpu)
    other = Array(x._raw, cpu)
    from rune.compiler import donation
    raws = [x._raw]
    assert donation.take([x], raws, [0], "jit(step)") == {}
    fed_back = Array(raws[0], cpu)   # the call returned its input (jit(lambda x: x))
    del raws
    assert _donate(fed_back) == {}   # `other` still reads the memory
    del other
