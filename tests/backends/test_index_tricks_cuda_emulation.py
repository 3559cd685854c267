"""The index tricks' op-table rows (tests/op_table_index_tricks.py) planned for a CUDA device and
their kernels run by the CPU emulation of CUDA (tests/cuda_emu), against the host's jit: what a GPU
would compute, checked on machines without one (ci/gpu-check runs the same rows on a real GPU)."""
import shutil

import numpy as np
import pytest

import rune
from rune import nx

from op_table import TABLE, widest

pytestmark = [pytest.mark.cc,
              pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ to build the CUDA emulation")]


def _rows():
    """(case, sample): the first sample of each traced row whose arguments are all arrays (what the
    emulation takes); one per row keeps the compile and the run to a few seconds."""
    rows = {}
    for c in TABLE:
        if c.fn.__module__ in ("op_table_index_tricks", "rune.nx.index_tricks") and c.traced:
            for s in c.samples:
                if all(isinstance(a, np.ndarray) for a in s.args):
                    rows.setdefault(c.name, (c, s))
    return list(rows.values())


def test_index_tricks_kernels_for_cuda_compute_what_the_host_computes():
    pytest.importorskip("cupy")
    import cuda_emu
    from rune.backends.cuda.backend import BACKEND
    from rune.codegen.cuda import DeviceProps
    from rune.compiler.target import TargetStretch
    props = DeviceProps(sm_count=3, max_threads_per_block=512, arch="sm_80")
    planned = []
    for case, sample in _rows():
        fn = (lambda c, kw: lambda *a: c.fn(*a, **kw))(case, sample.kwargs)
        args = list(sample.args)
        plan = rune.jit(fn).plan(*[nx.asarray(a) for a in args], target="cuda")
        built = {id(s): BACKEND.compiled_stretch(s.eqns, s.unit, rune.devices()[0], props)
                 for s in plan.steps if type(s) is TargetStretch}
        planned.append((f"{case.name}:{sample.id}", fn, args, plan, built))
    units = [(s.text, s.kernels) for *_, built in planned for s in built.values()]
    assert units, "nothing lowered for CUDA"
    library = cuda_emu.Library(next(s for *_, b in planned for s in b.values()).prelude, units)
    for where, fn, args, plan, built in planned:
        got = cuda_emu.run_plan(plan, args, library, {k: (s.text, s.kernels) for k, s in built.items()})
        want = rune.tree.leaves(rune.jit(fn)(*[nx.asarray(a) for a in args]))
        assert len(got) == len(want), where
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert np.shape(g) == w.shape, where
            np.testing.assert_allclose(np.asarray(g).astype(widest(w.dtype)), w.astype(widest(w.dtype)),
                                       rtol=1e-6, atol=1e-6, err_msg=where)
