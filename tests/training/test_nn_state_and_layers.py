"""rune.nn's state and modes (nn.field(state=True), nn.trainable, nn.apply,
train/eval) and the layers built on them or added with them (BatchNorm,
GroupNorm, InstanceNorm, ConvTranspose, pooling modules, orthogonal and
truncated-normal initialisers, nn.summary), against PyTorch's layers, NumPy
references and float64 equations."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import rune
from rune import nn, nx, optim

RNG = np.random.default_rng(7)
KEY = nx.random.key(3)


def a(x):
    return np.asarray(x, np.float64)


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(a(got), a(want), rtol=tol, atol=tol)


def channels_first(x):
    return np.moveaxis(np.asarray(x), -1, 1)


def torch_tensor(x, grad=False):
    torch = pytest.importorskip("torch")
    return torch.tensor(np.ascontiguousarray(x), dtype=torch.float64, requires_grad=grad)


# ---------------------------------------------------------------- BatchNorm

def np_batch_norm_steps(xs, momentum, eps):
    """float64: the outputs of training-mode steps over `xs` and the running
    statistics after them (Flax's update with the biased batch variance)."""
    mean, var, outs = np.zeros(xs[0].shape[-1]), np.ones(xs[0].shape[-1]), []
    for x in xs:
        axes = tuple(range(x.ndim - 1))
        m, v = x.mean(axes), x.var(axes)
        outs.append((x - m) / np.sqrt(v + eps))
        mean, var = momentum * mean + (1 - momentum) * m, momentum * var + (1 - momentum) * v
    return outs, mean, var


def test_batch_norm_trains_on_batch_statistics_and_evaluates_on_running_ones_as_torch():
    torch = pytest.importorskip("torch")
    xs = [(RNG.normal(size=(4, 3, 5, 6)) * 2 + 1.5) for _ in range(3)]
    bn = nn.BatchNorm(6, momentum=0.8, dtype=nx.float64).replace(
        weight=nx.asarray(RNG.normal(size=6)), bias=nx.asarray(RNG.normal(size=6)))
    tb = torch.nn.BatchNorm2d(6, momentum=0.2, dtype=torch.float64)   # torch's momentum is 1 - ours
    with torch.no_grad():
        tb.weight.copy_(torch_tensor(a(bn.weight))), tb.bias.copy_(torch_tensor(a(bn.bias)))
    outs, mean, var = np_batch_norm_steps(xs, 0.8, 1e-5)
    for x, want in zip(xs, outs):
        y, bn = nn.apply(bn, nx.asarray(x))
        close(y, want * a(bn.weight) + a(bn.bias), 1e-10)
        close(channels_first(y), tb(torch_tensor(channels_first(x))).detach().numpy(), 1e-10)
    close(bn.running_mean, mean, 1e-12)
    close(bn.running_mean, tb.running_mean.numpy(), 1e-12)
    close(bn.running_var, var, 1e-12)    # torch's running variance is the unbiased one: the equations are the oracle
    # evaluation: the running statistics normalise, as torch's eval with the same ones
    with torch.no_grad():
        tb.running_var.copy_(torch_tensor(a(bn.running_var)))
    tb.eval()
    x = RNG.normal(size=(2, 3, 5, 6))
    close(channels_first(bn.eval()(nx.asarray(x))), tb(torch_tensor(channels_first(x))).detach().numpy(), 1e-10)
    out, same = nn.apply(bn.eval(), nx.asarray(x))
    assert a(same.running_mean).tolist() == a(bn.running_mean).tolist()   # evaluation updates nothing


def test_batch_norm_gradients_match_torch():
    torch = pytest.importorskip("torch")
    x = RNG.normal(size=(5, 4, 3))
    bn = nn.BatchNorm(3, dtype=nx.float64).replace(weight=nx.asarray(RNG.normal(size=3)))
    ct = RNG.normal(size=(5, 4, 3))

    def loss(model, x):
        y, _ = nn.apply(model, x)
        return nx.sum(y * ct)
    g_model, g_x = rune.grad(loss, argnums=(0, 1))(bn, nx.asarray(x))
    tb = torch.nn.BatchNorm1d(3, dtype=torch.float64)
    with torch.no_grad():
        tb.weight.copy_(torch_tensor(a(bn.weight)))
    tx = torch_tensor(channels_first(x), grad=True)
    (tb(tx) * torch_tensor(channels_first(ct))).sum().backward()
    close(channels_first(g_x), tx.grad.numpy(), 1e-10)
    close(g_model.weight, tb.weight.grad.numpy(), 1e-10)
    close(g_model.bias, tb.bias.grad.numpy(), 1e-10)
    # evaluation mode reads the running statistics through stop_gradient
    g_eval = rune.grad(lambda m: nx.sum(m.eval()(nx.asarray(x))))(bn)
    assert not a(g_eval.running_mean).any() and not a(g_eval.running_var).any()


@pytest.mark.cc
def test_state_flows_out_of_a_jitted_step_and_the_optimizer_leaves_it_alone():
    # adamw decays every leaf it is given: running statistics given to it would shrink
    k1, k2 = nx.random.split(KEY)
    model = nn.Sequential(nn.Linear(k1, 3, 4), nn.BatchNorm(4, momentum=0.5), nn.relu, nn.Dropout(0.25),
                          nn.Linear(k2, 4, 2))
    trainable = nn.trainable(model)
    assert rune.tree.leaves(trainable) == [True, True, True, True, False, False, True, True]
    opt = optim.adamw(1e-2, weight_decay=0.5)
    params, _ = nn.partition(model, nn.trainable(model))
    opt_state = opt.init(params)

    @rune.jit
    def step(model, opt_state, x, y, key):
        params, rest = nn.partition(model, nn.trainable(model))

        def loss_fn(params):
            logits, new = nn.apply(nn.combine(params, rest), x, key=key)
            return nx.mean(nn.cross_entropy(logits, y)), new
        (loss, new), grads = rune.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return nn.combine(optim.apply_updates(params, updates), new), opt_state, loss

    xs = [RNG.normal(size=(8, 3)).astype(np.float32) for _ in range(3)]
    y = nx.asarray(RNG.integers(0, 2, 8))
    mean, var = np.zeros(4), np.ones(4)
    for i, x in enumerate(xs):
        h = a(x) @ a(model.layers[0].weight) + a(model.layers[0].bias)   # the BatchNorm's input, this step
        mean, var = 0.5 * mean + 0.5 * h.mean(0), 0.5 * var + 0.5 * h.var(0)
        model, opt_state, loss = step(model, opt_state, nx.asarray(x), y, nx.random.key(i))
        close(model.layers[1].running_mean, mean, 1e-5)
        close(model.layers[1].running_var, var, 1e-5)
    assert model.layers[3].training and not model.eval().layers[3].training
    assert not model.eval().layers[1].training and model.eval().train().layers[1].training


def test_checkpoints_save_and_load_the_state(tmp_path):
    bn = nn.BatchNorm(3)
    _, bn = nn.apply(bn, nx.asarray(RNG.normal(size=(4, 3)).astype(np.float32) + 2))
    path = str(tmp_path / "bn.safetensors")
    rune.save(path, bn)
    back = rune.load(path, like=nn.BatchNorm(3))
    assert a(back.running_mean).tolist() == a(bn.running_mean).tolist() != [0.0, 0.0, 0.0]
    assert a(back.running_var).tolist() == a(bn.running_var).tolist()


def test_state_under_a_mixed_precision_policy_comes_back_in_the_parameter_dtype():
    model = nn.Sequential(nn.BatchNorm(3, momentum=0.0))      # momentum 0: the running mean is the batch's
    mixed = nn.Policy(compute="float16").apply(model)
    x = RNG.normal(size=(6, 3)).astype(np.float32)
    _, new = nn.apply(mixed, nx.asarray(x))
    assert new.layers[0].running_mean.dtype == nx.float32 and new.policy is mixed.policy
    close(new.layers[0].running_mean, a(x).mean(0), 2e-3)


def test_misuses_of_state_are_errors_that_say_what_to_do():
    x = nx.ones((2, 3))
    with pytest.raises(rune.UsageError, match=r"BatchNorm in training mode .* nn\.apply"):
        nn.BatchNorm(3)(x)

    class Bad(nn.Module):
        weight: object
        count: object = nn.field(state=True)

        def __call__(self, x):
            nn.update_state(self, weight=x)
            return x
    with pytest.raises(rune.UsageError, match="state fields .*'count'.*not \\['weight'\\]"):
        nn.apply(Bad(nx.ones(2), nx.zeros(())), x)
    with pytest.raises(rune.TreeError, match="Bad.count is declared nn.field\\(state=True\\)"):
        Bad(nx.ones(2), 3)

    class Ensemble(nn.Module):      # BatchNorms stacked and run by vmap: copies, not the model's modules
        norms: nn.BatchNorm

        def __call__(self, x):
            return rune.vmap(lambda norm, x: norm(x))(self.norms, x)
    stacked = rune.vmap(lambda _: nn.BatchNorm(3))(nx.arange(2))
    with pytest.raises(rune.UsageError, match="BatchNorm updated its state but is not a module of the model"):
        nn.apply(Ensemble(stacked), nx.ones((2, 4, 3)))


# ---------------------------------------------------------------- GroupNorm, InstanceNorm

@pytest.mark.parametrize("kind", ["group", "instance"])
def test_group_and_instance_norm_match_torch(kind):
    torch = pytest.importorskip("torch")
    x = RNG.normal(size=(2, 5, 4, 6)) * 3 + 1
    layer = (nn.GroupNorm(3, 6, dtype=nx.float64) if kind == "group" else nn.InstanceNorm(6, dtype=nx.float64))
    layer = layer.replace(weight=nx.asarray(RNG.normal(size=6)), bias=nx.asarray(RNG.normal(size=6)))
    t = (torch.nn.GroupNorm(3, 6, dtype=torch.float64) if kind == "group"
         else torch.nn.InstanceNorm2d(6, affine=True, dtype=torch.float64))
    with torch.no_grad():
        t.weight.copy_(torch_tensor(a(layer.weight))), t.bias.copy_(torch_tensor(a(layer.bias)))
    ct = RNG.normal(size=x.shape)
    g_layer, g_x = rune.grad(lambda m, x: nx.sum(m(x) * ct), argnums=(0, 1))(layer, nx.asarray(x))
    tx = torch_tensor(channels_first(x), grad=True)
    ty = t(tx)
    (ty * torch_tensor(channels_first(ct))).sum().backward()
    close(channels_first(layer(nx.asarray(x))), ty.detach().numpy(), 1e-10)
    close(channels_first(g_x), tx.grad.numpy(), 1e-10)
    close(g_layer.weight, t.weight.grad.numpy(), 1e-10)


# ---------------------------------------------------------------- ConvTranspose and nx.conv's lhs_dilation

def torch_transposed_weight(w, nd, groups):
    """Ours (*k, in/G, out) as torch's ConvTranspose weight (in, out/G, *k)."""
    k, (cin_g, cout) = w.shape[:nd], w.shape[-2:]
    w = np.asarray(w).reshape(k + (cin_g, groups, cout // groups))
    w = np.moveaxis(w, list(range(nd)), list(range(3, 3 + nd)))     # (in/G, G, out/G, *k)
    return np.swapaxes(w, 0, 1).reshape((groups * cin_g, cout // groups) + k).copy()


@pytest.mark.parametrize("nd,kw", [
    (1, dict(strides=2, padding=1, output_padding=1)),
    (2, dict(strides=(2, 3), padding=(1, 0), dilation=(1, 2), groups=2)),
    (3, dict(strides=2)),
])
def test_conv_transpose_matches_torch_with_gradients(nd, kw):
    torch = pytest.importorskip("torch")
    layer = nn.ConvTranspose(KEY, 4, 6, (3,) * nd, dtype=nx.float64, **kw)
    x = RNG.normal(size=(2,) + (4,) * nd + (4,))
    ct_shape = layer(nx.asarray(x)).shape
    ct = RNG.normal(size=ct_shape)
    g_layer, g_x = rune.grad(lambda m, x: nx.sum(m(x) * ct), argnums=(0, 1))(layer, nx.asarray(x))
    groups = kw.get("groups", 1)
    t = getattr(torch.nn, f"ConvTranspose{nd}d")(4, 6, 3, stride=kw.get("strides", 1), padding=kw.get("padding", 0),
                                                 output_padding=kw.get("output_padding", 0),
                                                 dilation=kw.get("dilation", 1), groups=groups, dtype=torch.float64)
    with torch.no_grad():
        t.weight.copy_(torch_tensor(torch_transposed_weight(a(layer.weight), nd, groups)))
        t.bias.copy_(torch_tensor(a(layer.bias)))
    tx = torch_tensor(channels_first(x), grad=True)
    ty = t(tx)
    (ty * torch_tensor(channels_first(ct))).sum().backward()
    close(channels_first(layer(nx.asarray(x))), ty.detach().numpy(), 1e-10)
    close(channels_first(g_x), tx.grad.numpy(), 1e-10)
    close(torch_transposed_weight(a(g_layer.weight), nd, groups), t.weight.grad.numpy(), 1e-10)
    close(g_layer.bias, t.bias.grad.numpy(), 1e-10)


def test_conv_lhs_dilation_is_a_conv_of_the_input_with_zeros_between():
    x = RNG.normal(size=(1, 4, 3, 2))
    w = RNG.normal(size=(2, 3, 2, 5))
    holes = np.zeros((1, 7, 7, 2))
    holes[:, ::2, ::3] = x                                     # lhs_dilation (2, 3), written out
    for padding in ["VALID", "SAME", ((1, 2), (0, 1))]:
        close(nx.conv(nx.asarray(x), nx.asarray(w), padding=padding, lhs_dilation=(2, 3)),
              a(nx.conv(nx.asarray(holes), nx.asarray(w), padding=padding)), 1e-12)


# ---------------------------------------------------------------- pooling

def test_pooling_modules_match_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = RNG.normal(size=(2, 7, 9, 3))
    tx = torch_tensor(channels_first(x))
    close(channels_first(nn.MaxPool(2)(nx.asarray(x))), F.max_pool2d(tx, 2).numpy(), 1e-12)
    close(channels_first(nn.AvgPool((3, 2), strides=(2, 1))(nx.asarray(x))),
          F.avg_pool2d(tx, (3, 2), stride=(2, 1)).numpy(), 1e-12)
    for size in [(3, 4), 1, (7, 2)]:    # bins overlapping, one bin, an axis kept
        close(channels_first(nn.AdaptiveAvgPool(size)(nx.asarray(x))), F.adaptive_avg_pool2d(tx, size).numpy(),
              1e-12)
    close(nn.GlobalAvgPool()(nx.asarray(x)), x.mean((1, 2)), 1e-12)
    assert nn.GlobalAvgPool(keepdims=True)(nx.asarray(x)).shape == (2, 1, 1, 3)
    x1 = RNG.normal(size=(2, 10, 3))     # 1-d: PyTorch's bins on a length not divided by the size
    close(channels_first(nn.AdaptiveAvgPool(4)(nx.asarray(x1))),
          F.adaptive_avg_pool1d(torch_tensor(channels_first(x1)), 4).numpy(), 1e-12)
    with pytest.raises(rune.ShapeError, match="AdaptiveAvgPool"):
        nn.AdaptiveAvgPool((2, 2, 2))(nx.asarray(x))


# ---------------------------------------------------------------- initialisers

@pytest.mark.parametrize("shape,axis", [((4, 6), -1), ((6, 4), -1), ((3, 3, 2, 5), -1), ((5, 3), 0)])
def test_orthogonal_gives_orthonormal_columns_or_rows(shape, axis):
    w = a(nn.orthogonal(2.0, axis)(KEY, shape))
    m = np.moveaxis(w, axis, -1).reshape(-1, shape[axis])
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    close(gram, 4.0 * np.eye(len(gram)), 1e-5)


def test_truncated_normal_is_bounded_with_the_truncated_spread():
    w = a(nn.truncated_normal(0.5, -2.0, 2.0)(KEY, (40000,)))
    assert w.min() >= -1.0 and w.max() <= 1.0
    # the spread of a standard normal truncated to +-2: sqrt(1 - 4 phi(2) / (2 Phi(2) - 1)) = 0.8796
    assert abs(w.std() - 0.5 * 0.87962566) < 0.01 and abs(w.mean()) < 0.01


# ---------------------------------------------------------------- summary

def test_summary_lists_each_call_with_shapes_and_counts():
    k1, k2 = nx.random.split(KEY)
    model = nn.Sequential(nn.Conv(k1, 1, 4, 3), nn.BatchNorm(4), nn.relu, nn.GlobalAvgPool(), nn.Linear(k2, 4, 2))
    text = nn.summary(model, nx.ones((2, 5, 5, 1)))
    lines = text.splitlines()
    assert re.match(r"path +layer +inputs +outputs +params +state", lines[0])
    rows = {line.split()[0]: line for line in lines[2:-2]}
    assert list(rows) == ["(model)", ".layers[0]", ".layers[1]", ".layers[2]", ".layers[3]", ".layers[4]"]
    assert "Conv(in_channels=1, out_channels=4, kernel_size=(3, 3))" in rows[".layers[0]"]
    assert rows[".layers[0]"].split()[-2:] == ["40", "0"]              # 3*3*1*4 + 4
    assert rows[".layers[1]"].split()[-2:] == ["8", "8"]               # weight, bias | running mean, var
    assert "float32[2, 5, 5, 4]" in rows[".layers[1]"] and "float32[2, 2]" in rows[".layers[4]"]
    assert rows["(model)"].split()[-2:] == ["58", "8"]
    assert lines[-1] == "parameters: 58 trainable, 8 state (264 bytes)"
    # under a policy the layers run as copies: the rows keep the paths of the originals
    mixed = nn.summary(nn.Policy(compute="float16").apply(model), nx.ones((2, 5, 5, 1))).splitlines()
    assert [line.split()[0] for line in mixed[2:-2]] == list(rows)
    assert "float16[2, 5, 5, 4]" in mixed[4]
    with pytest.raises(rune.ArgumentError, match="expected a Module"):
        nn.summary(nx.ones(3))


# ---------------------------------------------------------------- SyncBatchNorm across processes

def _mpiexec():
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


@pytest.mark.mpi
def test_sync_batch_norm_over_two_processes_equals_one_over_the_whole_batch():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi", "sync_batch_norm_worker.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "MPI_", "HYDRA_"))}
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([_mpiexec(), "-n", "2", sys.executable, script], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert sorted(re.findall(r"OK rank (\d)", out)) == ["0", "1"], out
