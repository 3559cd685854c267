"""The eager op table on a GPU where the eager GPU code is rune's own (ci/gpu-check's
eager-op-table part).

Every eager GPU op is a CuPy kernel, and each distinct (op, operand dtypes) is one
cold NVRTC compile of CuPy's on a fresh machine (0.2-0.44 s): the whole table, even
one sample per dtype combination, made 588 of them, too many for the part's minute.
Where an eager op is just CuPy's ufunc, CuPy's own tests cover it and the jit part
compares rune's compiled kernels with the host; what only this part can check is the
code rune wrote for arrays of any module and that runs on CuPy here:
float_semantics (floor division and remainder, conversions), scatter_device (`at`),
the complex rules (multiply, divide, abs, hypot and the parts) and the ops computed
in float32 or float64 around CuPy's loops (mathfuncs' `low`, erf, sigmoid, rsqrt),
with float32 and bfloat16 operands (complex64 for the complex rules, float64 for
scatter, whose samples are float64), one sample per combination of operand dtypes
and target dtype.
"""
import pytest

import rune
from op_table import TABLE
from test_cuda_backend import _assert_same, _on

F32, BF16, C64, F64 = "float32", "bfloat16", "complex64", "float64"
REAL = (F32, BF16)
# case -> the operand dtypes sampled (those of its floating and complex operands)
OWN = {
    **{name: REAL for name in ("floor_divide", "remainder", "astype", "cast")},       # float_semantics
    **{name: REAL for name in ("acosh", "asinh", "atanh", "log2", "log10", "trunc",   # mathfuncs' low
                               "copysign", "logaddexp", "nextafter", "erf", "sigmoid", "rsqrt")},
    **{name: (*REAL, C64) for name in ("hypot", "real", "imag", "conj", "abs", "make_complex", "angle")},
    **{name: (C64,) for name in ("multiply", "divide")},                              # complex rules
    "at": (F32, F64),                                                                 # scatter_device
}


def _dtype(a):
    return str(getattr(a, "dtype", type(a).__name__))


def _inexact(a):
    return hasattr(a, "dtype") and (a.dtype.kind in "fc" or _dtype(a) == BF16)


def own_samples(case):
    """The case's samples that this part runs: none for a case not in OWN; else one per
    combination of operand dtypes and `dtype=` target whose floating/complex operands
    all have a dtype OWN lists for it."""
    keep = OWN.get(case.name)
    if keep is None:
        return []
    first = {}
    for s in case.samples:
        inexact = [_dtype(a) for a in s.args if _inexact(a)]
        if s.bug or not inexact or any(d not in keep for d in inexact):
            continue
        first.setdefault((tuple(_dtype(a) for a in s.args), str(s.kwargs.get("dtype"))), s)
    return list(first.values())


def selected():
    return [(c, own_samples(c)) for c in TABLE if own_samples(c)]


@pytest.mark.cuda
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c, _ in selected()])
def test_eager_ops_rune_computes_itself_on_cuda_match_the_host(case):
    for sample in own_samples(case):
        cpu = case.fn(*_on("cpu", sample.args), **sample.kwargs)
        with rune.default_device("cuda:0"):
            gpu = case.fn(*_on("cuda:0", sample.args), **sample.kwargs)
        _assert_same(case, sample, gpu, cpu)


def test_the_selection_covers_every_own_case_with_samples_of_its_dtypes():
    """Every case named in OWN has samples of the dtypes it lists (a renamed case or
    changed samples would silently drop it from the GPU check)."""
    chosen = dict((c.name, s) for c, s in selected())
    assert set(chosen) == set(OWN)
    for name, samples in chosen.items():
        seen = {_dtype(a) for s in samples for a in s.args if _inexact(a)}
        assert seen <= set(OWN[name]) and seen, (name, seen)
    assert {BF16} <= {_dtype(a) for s in chosen["floor_divide"] for a in s.args}
    assert sum(map(len, chosen.values())) < 150     # ci/gpu-check's eager part sized for this
