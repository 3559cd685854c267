"""rune's public API against its documented public API (README, docs/): stats.

Written from the design document only, as a user reads it. NumPy is the oracle.
"""
import rune

from api_support import f32, stats


# ---------------------------------------------------------------- stats

def test_stats_is_mapping_of_counts():
    s = stats()
    assert s and all(isinstance(v, int) for v in s.values())


def test_reset_stats_zeroes():
    rune.jit(lambda x: x * 7.0)(f32(1.0))
    rune.reset_stats()
    assert all(v == 0 for v in stats().values())


def test_stats_has_documented_counters():
    s = stats()
    for frag in ("compile", "hit", "callback", "bytes"):
        assert any(frag in k for k in s), (frag, sorted(s))


def test_stats_has_kernels_launched_counter():
    assert any("kernel" in k or "launch" in k for k in stats()), sorted(stats())


def test_stats_returns_snapshot():
    s = rune.stats()
    rune.jit(lambda x: x * 9.0)(f32(1.0))
    assert all(v == 0 for v in dict(s).values())
