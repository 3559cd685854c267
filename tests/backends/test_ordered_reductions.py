"""rune/backends/ordered_reductions.py: eager float sums and products in the compiled
kernels' order (rune/codegen/reductions.py). Both of its folds, the array-module one
(CuPy's, and the host's without a C compiler) and the host's compiled one, give the
C kernels' bits (the oracle: a jitted program, every stretch compiled) on every float
and complex dtype, full and axis reductions, rows shorter than a lane, than a block,
and crossing blocks, with -0.0, infinities and overflowing lanes among the values;
the power-of-two case also against a Python loop of the order."""
import types

import ml_dtypes
import numpy as np
import pytest

import rune
from rune import nx
from rune.backends import ordered_reductions
from rune.codegen.reductions import REDUCE_BLOCK, REDUCE_LANES

pytestmark = pytest.mark.cc

DTYPES = (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.complex64, np.complex128)
# (shape, reduced axes): one element, under a lane, under a block, a block, crossing
# blocks, an odd number of blocks, rows, columns (few and many: the host's two folds),
# middle, inner and outer axes, empty
CASES = (((1,), (0,)), ((5,), (0,)), ((77,), (0,)), ((REDUCE_BLOCK,), (0,)),
         ((3 * REDUCE_BLOCK + 7,), (0,)), ((5 * REDUCE_BLOCK,), (0,)), ((6, 700), (1,)),
         ((1030, 3), (0,)), ((700, 70), (0,)), ((3, 600, 80), (1,)), ((4, 3, 600), (0, 2)), ((2, 5, 33), (1, 2)), ((3, 4, 45), (0, 1, 2)),
         ((0,), (0,)), ((3, 0), (1,)), ((0, 3), (0,)), ((0, 3), (0, 1)), ((0, 3), (1,)))

# NumPy under another name: the array-module fold, as on CuPy
AS_ANOTHER_MODULE = types.SimpleNamespace(**{n: getattr(np, n) for n in dir(np) if not n.startswith("__")})


def _values(rng, shape, dtype, op):
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-8, 8, shape)
    if op == "reduce_prod":
        x = 1 + x / 512
    elif x.size > 12:
        x.flat[:4] = (-0.0, np.inf, 3e38, 3e38)   # -0.0 added to +0.0; inf; a float32 lane overflows
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    with np.errstate(over="ignore"):   # 3e38 is inf in the 16-bit floats
        return x.astype(dtype)


def _inputs():
    rng = np.random.default_rng(31)
    out = []
    for op in ordered_reductions.RULES:
        for dtype in DTYPES:
            if np.dtype(dtype) not in ordered_reductions.SERVED[op]:
                continue
            out += [(op, np.dtype(dtype), axes, _values(rng, shape, dtype, op)) for shape, axes in CASES]
    return out


@pytest.fixture(scope="module")
def kernels_bits():
    """The cases and their C kernels' results: one jitted program (one build)."""
    cases = _inputs()
    fns = {"reduce_sum": nx.sum, "reduce_prod": nx.prod}
    program = rune.jit(lambda xs: [fns[op](x, axis=axes) for (op, _, axes, _), x in zip(cases, xs)])
    xs = [nx.asarray(x) for *_, x in cases]
    assert program.plan(xs).kernels
    return cases, [np.asarray(r) for r in program(xs)]


def _bits(a):
    return np.atleast_1d(a).view(np.uint8)


@pytest.mark.parametrize("xp", [np, AS_ANOTHER_MODULE], ids=["host fold", "array-module fold"])
def test_both_folds_give_the_c_kernels_bits(kernels_bits, xp):
    cases, want = kernels_bits
    for (op, dtype, axes, x), w in zip(cases, want):
        got = np.asarray(ordered_reductions.ordered(xp, op, x, axes))
        what = f"{op} of {dtype}{x.shape} over {axes}"
        assert got.dtype == w.dtype and got.shape == w.shape, what
        assert np.array_equal(_bits(got), _bits(w)), f"{what}: {got.ravel()[:3]} vs {w.ravel()[:3]}"


def test_the_eager_table_reduces_in_the_kernels_order(kernels_bits):
    """nx.sum and nx.prod eagerly (the primitive table) give the kernels' bits; NumPy's
    own float32 sums (pairwise) differ on these cases."""
    cases, want = kernels_bits
    fns = {"reduce_sum": nx.sum, "reduce_prod": nx.prod}
    numpy_differs = 0
    for (op, dtype, axes, x), w in zip(cases, want):
        got = np.asarray(fns[op](nx.asarray(x), axis=axes))
        assert np.array_equal(_bits(got), _bits(w)), f"eager {op} of {dtype}{x.shape} over {axes}"
        if op == "reduce_sum" and dtype == np.float32:
            with np.errstate(over="ignore"):
                numpy_differs += not np.array_equal(_bits(np.sum(x, axis=axes)), _bits(w))
    assert numpy_differs >= 3


def test_a_power_of_two_of_blocks_is_the_python_loop_of_the_order():
    """An independent spelling of the order: each lane in index order in float32, the
    halving tree of the lanes, the blocks pairwise in float64."""
    x = np.random.default_rng(5).standard_normal(8 * REDUCE_BLOCK).astype(np.float32)
    partials = []
    for block in x.reshape(-1, REDUCE_BLOCK):
        lanes = [np.float32(0)] * REDUCE_LANES
        for j, v in enumerate(block):
            lanes[j % REDUCE_LANES] = np.float32(lanes[j % REDUCE_LANES] + v)
        while len(lanes) > 1:
            half = len(lanes) // 2
            lanes = [np.float32(lanes[i] + lanes[i + half]) for i in range(half)]
        partials.append(float(lanes[0]))
    while len(partials) > 1:
        partials = [partials[i] + partials[i + 1] for i in range(0, len(partials), 2)]
    want = np.float32(partials[0])
    for xp in (np, AS_ANOTHER_MODULE):
        assert ordered_reductions.ordered(xp, "reduce_sum", x, (0,)) == want
