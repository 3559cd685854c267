"""Sharding in one process: reduce_scatter and all_gather in a group of one (jit, grad,
errors), their device path on emulated NCCL ranks against NumPy, ZeRO's wrappers
against the plain optimizer, and the errors of fully_shard and sharded. The same on
real MPI processes: test_sharding_mpi.py and test_sharding_three_mpi.py."""
import numpy as np
import pytest

import rune
import rune.distributed as dist
from rune import nn, nx, optim
from rune.core import dtypes as dt

import test_distributed as td


def test_in_a_group_of_one_both_are_the_identity_also_in_jit_and_grad():
    x = {"w": nx.asarray(np.arange(6, dtype=np.float32).reshape(2, 3)), "b": nx.ones(5, dtype="bfloat16")}
    blocks = dist.reduce_scatter(x, "mean", axis=0)
    back = dist.all_gather(blocks, length={"b": 5, "w": 2})
    for k in x:
        assert np.asarray(back[k]).tobytes() == np.asarray(x[k]).tobytes()
    # the psum convention: d/dw sum(all_gather(3w)^2) = 18 w; reduce_scatter(mean) likewise
    g = rune.jit(rune.grad(lambda w: nx.sum(dist.all_gather(w * 3.0) ** 2)))(nx.ones(3))
    np.testing.assert_array_equal(np.asarray(g), [18.0] * 3)
    t = rune.jvp(lambda w: dist.reduce_scatter(w * 3.0, "mean"), (nx.ones(3),), (nx.ones(3),))[1]
    np.testing.assert_array_equal(np.asarray(t), [3.0] * 3)


def test_bad_arguments_are_errors_naming_the_leaf():
    with pytest.raises(rune.ArgumentError, match="reduce_scatter: op must be one of"):
        dist.reduce_scatter(nx.ones(2), "prod")
    with pytest.raises(rune.DTypeError, match=r"reduce_scatter: the leaf at \['n'\]: op 'mean' needs floating"):
        dist.reduce_scatter({"n": nx.ones(2, dtype="int32")}, "mean")
    with pytest.raises(rune.ArgumentError, match=r"all_gather: length 7 for the leaf at the root does not fit"):
        dist.all_gather(nx.ones(3), length=7)
    with pytest.raises(rune.NotDifferentiableError, match=r"reduce_scatter\(op='max', axis=0\) has no derivative"):
        rune.grad(lambda w: nx.sum(dist.reduce_scatter(w, "max")))(nx.ones(2))
    with pytest.raises(rune.UsageError, match="cannot run under vmap"):
        rune.vmap(lambda w: dist.reduce_scatter(w))(nx.ones((2, 3)))


def _emulated_cupy_with_moveaxis(size):
    cupy, communicator = _plain_emulated_cupy(size)
    cupy.moveaxis = lambda *a: np.moveaxis(*a).view(td._DeviceArray)
    return cupy, communicator


_plain_emulated_cupy = td._emulated_cupy


def test_the_device_path_on_two_emulated_nccl_ranks_against_numpy(monkeypatch):
    """reduce_scatter (sum, mean, max with a NaN on one rank, padding, bfloat16 in float32)
    and all_gather through rune/distributed/nccl_sharding.py and the CUDA communicator."""
    from rune.distributed import nccl_sharding
    from rune.distributed.scatter import flat_layout
    monkeypatch.setattr(td, "_emulated_cupy", _emulated_cupy_with_moveaxis)
    g = [np.random.default_rng(r) for r in range(2)]
    trees = [[g[r].standard_normal((5, 3)).astype(np.float32), g[r].standard_normal(7).astype(dt.bfloat16)]
             for r in range(2)]
    trees[1][0][4, 2] = np.nan
    layouts = [(0, 5, None), flat_layout((7,))]

    def work(group):
        mine = [a.view(td._DeviceArray) for a in trees[group.rank]]
        out = {op: nccl_sharding.reduce_scatter(group, mine, op, layouts, None) for op in ("sum", "mean", "max")}
        out["gather"] = nccl_sharding.all_gather(group, out["sum"], layouts, None)
        return out

    results = td._on_emulated_ranks(monkeypatch, 2, work)
    for op, reduce in (("sum", np.add), ("mean", np.add), ("max", np.fmax)):
        for k in range(2):
            wide = [t[k].astype(np.float32) for t in trees]
            whole = reduce(wide[0], wide[1]) / (2 if op == "mean" else 1)
            if op == "max":
                whole[np.isnan(wide[0]) | np.isnan(wide[1])] = np.nan
            whole = whole.astype(trees[0][k].dtype)
            padded = np.concatenate([whole, np.zeros((1,) + whole.shape[1:], whole.dtype)])   # 5 and 7 rows: one pad
            for r in range(2):
                np.testing.assert_array_equal(np.asarray(results[r][op][k]), padded[r * 3 if k == 0 else r * 4:][
                                              :3 if k == 0 else 4])
    for r in range(2):
        for k in range(2):
            want = (trees[0][k].astype(np.float32) + trees[1][k].astype(np.float32)).astype(trees[0][k].dtype)
            np.testing.assert_array_equal(np.asarray(results[r]["gather"][k]), want)


class _Two(nn.Module):
    a: nn.Linear
    b: nn.Linear

    def __init__(self, key):
        k1, k2 = nx.random.split(key)
        self.a = nn.Linear(k1, 3, 5)
        self.b = nn.Linear(k2, 5, 2)

    def __call__(self, x):
        return self.b(nn.relu(self.a(x)))


def test_zero_in_a_group_of_one_is_the_plain_optimizer_bit_for_bit():
    model = _Two(nx.random.key(0))
    fully = dist.fully_shard(model.replace(a=dist.fully_shard(model.a)))
    x = nx.asarray(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    loss = lambda m: nx.mean(m(x) ** 2)  # noqa: E731
    opt = optim.adamw(1e-2)

    def run(m, o):
        state = o.init(m)
        step = rune.jit(lambda m, s: (lambda g: (lambda u, s: (optim.apply_updates(m, u), s))(
            *o.update(g, s, m)))(rune.grad(loss)(m)))
        for _ in range(3):
            m, state = step(m, state)
        return m
    want = run(model, opt)
    for m in (run(model, dist.sharded(opt, 1)), run(model, dist.sharded(opt)), run(fully, dist.sharded(opt))):
        if isinstance(m, dist.FullyShard):
            m = m.gather()
            m = m.replace(a=m.a.gather())
        for a, b in zip(rune.tree.leaves(m), rune.tree.leaves(want)):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_a_fully_shard_module_outside_its_group_is_a_distributed_error():
    model = dist.fully_shard(_Two(nx.random.key(0)))
    blocks, layout = model.blocks, model._layout
    moved = dist.FullyShard(blocks, layout[:3] + (2,) + layout[4:])   # as if sharded among 2 processes
    with pytest.raises(rune.DistributedError, match=r"rank 0 of 1 calls a fully_shard module sharded for 2 "
                                                     r"processes \(its parameter at \.a\.weight holds 1/2"):
        moved(nx.ones((1, 3)))
    with pytest.raises(AttributeError, match=r"'a': a fully_shard module holds its parameters as blocks"):
        model.a


def test_sharded_refuses_an_unknown_stage():
    with pytest.raises(rune.UsageError, match="stage must be 1 .* or 2"):
        dist.sharded(optim.sgd(0.1), stage=3)


def test_a_sharded_checkpoint_is_a_folder_that_loads_with_a_template(tmp_path):
    model = dist.fully_shard(_Two(nx.random.key(0)))
    opt = dist.sharded(optim.adam(1e-2))
    tree = {"model": model, "opt": opt.init(model), "step": 4}
    rune.save(tmp_path / "ck", tree)
    assert sorted(p.name for p in (tmp_path / "ck").iterdir())[0] == "current"
    with pytest.raises(rune.RuneError, match="is a sharded checkpoint .* load it with like="):
        rune.load(tmp_path / "ck")
    got = rune.load(tmp_path / "ck", like=tree)
    assert got["step"] == 4 and isinstance(got["model"], dist.FullyShard)
    for a, b in zip(rune.tree.leaves(got), rune.tree.leaves(tree)):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    rune.save(tmp_path / "ck", tree)   # a second save replaces the first: one folder of shards
    assert len(list((tmp_path / "ck").iterdir())) == 2


def test_a_mask_of_whole_shapes_reaches_the_sharded_optimizer():
    """Inside `sharded` the optimizer sees flat blocks: a mask computed from them would
    decay nothing; one computed from `whole_view` decays the matrices as unsharded does."""
    model = _Two(nx.random.key(1))
    decay = lambda p: rune.tree.map(lambda x: x.ndim >= 2, p)  # noqa: E731
    assert [w.shape for w in rune.tree.leaves(dist.whole_view(dist.fully_shard(model)))] == \
        [tuple(x.shape) for x in rune.tree.leaves(model)]
    zeros = rune.tree.map(nx.zeros_like, model)

    def first_update(opt, m):
        return rune.tree.leaves(opt.update(zeros, opt.init(m), m)[0])
    want = first_update(optim.adamw(0.5, weight_decay=0.1, mask=decay), model)
    flags = decay(dist.whole_view(model))
    got = first_update(dist.sharded(optim.adamw(0.5, weight_decay=0.1, mask=lambda blocks: flags)), model)
    blind = first_update(dist.sharded(optim.adamw(0.5, weight_decay=0.1, mask=decay)), model)
    for w, g in zip(want, got):
        assert np.asarray(w).tobytes() == np.asarray(g).tobytes()
    assert all(not np.asarray(b).any() for b in blind)   # the flat blocks: nothing decayed
    assert any(np.asarray(w).any() for w in want)
