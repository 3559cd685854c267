"""rune's public API against its documented public API (README, docs/): CUDA (only where a GPU is present).

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import numpy as np
import pytest

import rune
from rune import nx

from api_support import close, f32, same_bits, stat


# ---------------------------------------------------------------- CUDA (only where a GPU is present)

@pytest.mark.cuda
def test_cuda_devices_listed():
    assert "cuda:0" in [str(d) for d in rune.devices()]
    assert [str(d) for d in rune.devices("cuda")][0] == "cuda:0"


@pytest.mark.cuda
def test_cuda_place_roundtrip_and_ops():
    y = nx.place(f32(1.0, 2.0), "cuda")
    assert str(y.device) == "cuda:0"
    z = nx.sin(y) * 2.0
    assert str(z.device) == "cuda:0"
    close(z, np.sin([1.0, 2.0]).astype(np.float32) * 2)
    assert str(nx.place(z, "cpu").device) == "cpu:0"


@pytest.mark.cuda
def test_cuda_mismatch_and_transfer_counts():
    rune.reset_stats()
    y = nx.place(f32(1.0, 2.0), "cuda")
    assert stat("bytes") >= 8
    with pytest.raises(rune.DeviceMismatchError):
        y + f32(1.0, 2.0)


@pytest.mark.cuda
def test_cuda_jit_and_random_bit_identical():
    k = nx.random.key(0)
    a = nx.random.uniform(k, (64,))
    b = rune.jit(lambda k: nx.random.uniform(k, (64,)))(nx.place(k, "cuda"))
    assert str(b.device) == "cuda:0" and same_bits(a, b)


@pytest.mark.cuda
def test_cuda_callback_host_and_device():
    seen = []
    def fn(a):
        seen.append(str(getattr(a, "device", "cpu:0")))
        return a
    y = nx.place(f32(1.0), "cuda")
    r = rune.callback(fn, y, like=y)
    r2 = rune.callback(fn, y, like=y, host=False)
    assert seen == ["cpu:0", "cuda:0"] and str(r.device) == "cuda:0" and str(r2.device) == "cuda:0"
