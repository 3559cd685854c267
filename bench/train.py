"""Training steps of the two examples: the digits CNN (batch 32, 8x8x1 images,
conv-conv-pool-dense-dense, Adam) and the character transformer (batch 32,
64 characters, d_model 64, 2 layers, AdamW), one whole step each (loss,
gradient, optimizer update) as `rune.jit` compiles it.

PyTorch runs the same steps eagerly (autograd, torch.optim.Adam / AdamW) when it
is installed; JAX runs them under jax.jit when installed (Adam, AdamW and clipping written out).
The libraries are timed in alternation, a batch of steps each per round, the best
of six rounds kept, so a slow spell of a shared machine hits them alike. The first
table gives every library one thread from the start, in a child process
(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and RUNE_NUM_THREADS at 1, XLA's CPU pool
at one thread: it cannot be limited once jax has run); the second lets each use
its default threads.
"""
import contextlib
import functools
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np

import rune
from rune import nn, nx, optim

from .common import Row, jax, per_call_each, print_table, torch

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
BATCH = 32


def _example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _one_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def digits_batch():
    rng = np.random.default_rng(0)
    return rng.random((BATCH, 8, 8, 1), dtype=np.float32), rng.integers(0, 10, BATCH).astype(np.int32)


def rune_digits_step():
    digits = _example("train_digits")
    opt = optim.adam(1e-3)
    params = digits.DigitsCNN(nx.random.key(0))
    state = opt.init(params)
    step = digits.make_step(opt)
    x, y = (nx.asarray(a) for a in digits_batch())
    return _carried(lambda p, s: step(p, s, x, y), params, state)


def _carried(step, params, state):
    """A training loop's step: each call continues from the last one's parameters
    and optimizer state, as the examples and PyTorch's in-place optimizers do
    (the arrays jit sees are fresh every call, as in real training)."""
    carry = [params, state]

    def run():
        carry[0], carry[1], loss = step(*carry)
        return loss.item()
    return run


def torch_digits_step():
    nn_ = torch.nn
    model = nn_.Sequential(nn_.Conv2d(1, 16, 3, padding=1), nn_.ReLU(), nn_.Conv2d(16, 32, 3, padding=1),
                           nn_.ReLU(), nn_.MaxPool2d(2), nn_.Flatten(), nn_.Linear(4 * 4 * 32, 64), nn_.ReLU(),
                           nn_.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    x, y = digits_batch()
    tx, ty = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(y).long()

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(tx), ty)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def jax_digits_step():
    jnp, lax = jax.numpy, jax.lax
    rng = np.random.default_rng(0)
    shapes = {"c1": (3, 3, 1, 16), "c2": (3, 3, 16, 32), "d1": (512, 64), "d2": (64, 10)}
    params = {k: jnp.asarray(rng.standard_normal(s).astype(np.float32) * 0.1) for k, s in shapes.items()}
    dims = ("NHWC", "HWIO", "NHWC")

    def loss(p, x, y):
        h = jax.nn.relu(lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dims))
        h = jax.nn.relu(lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME", dimension_numbers=dims))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").reshape(x.shape[0], -1)
        z = jax.nn.relu(h @ p["d1"]) @ p["d2"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(z), y[:, None], 1))

    @jax.jit
    def step(p, m, v, t, x, y):
        value, g = jax.value_and_grad(loss)(p, x, y)
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = jax.tree_util.tree_map(lambda p, m, v: p - 1e-3 * (m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8), p, m, v)
        return p, m, v, value

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    x, y = (jnp.asarray(a) for a in digits_batch())
    return lambda: step(params, zeros, zeros, 1.0, x, y)[3].block_until_ready()


def rune_charlm_step(compute="float32"):
    """examples/train_charlm.py's step; compute="bfloat16" runs the passes in bfloat16 as its
    --compute-dtype does (nn.Policy: float32 parameters and outputs)."""
    lm = _example("train_charlm")
    vocab, seq = 100, 64
    model = lm.CharTransformer(nx.random.key(0), vocab, seq, d_model=64, heads=4, layers=2, hidden=256)
    if compute != "float32":
        model = nn.Policy(param="float32", compute=compute, output="float32").apply(model)
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(1e-3, weight_decay=0.01))
    state = opt.init(model)
    step = lm.make_step(opt)
    tokens = nx.asarray(np.random.default_rng(0).integers(0, vocab, (BATCH, seq + 1)).astype(np.int32))
    return _carried(lambda m, s: step(m, s, tokens), model, state)


def torch_charlm_step(compute="float32"):
    """The same transformer in PyTorch: pre-norm blocks, causal attention, tanh GELU, AdamW + clipping;
    compute="bfloat16": the forward pass under torch.autocast (CPU, bfloat16; float32 parameters)."""
    vocab, seq, d, heads, layers = 100, 64, 64, 4, 2
    F = torch.nn.functional

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.qkv, self.out = torch.nn.Linear(d, 3 * d, bias=False), torch.nn.Linear(d, d, bias=False)
            self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).unbind(2)
            scores = torch.einsum("bthd,bshd->bhts", q, k) / (d // heads) ** 0.5
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            w = torch.softmax(scores.masked_fill(~mask, -1e9), -1)
            x = x + self.out(torch.einsum("bhts,bshd->bthd", w, v).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.position = torch.nn.Embedding(vocab, d), torch.nn.Parameter(torch.zeros(seq, d))
            self.blocks = torch.nn.ModuleList(Block() for _ in range(layers))
            self.ln_f, self.readout = torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab, bias=False)

        def forward(self, tokens):
            x = self.embed(tokens) + self.position[:tokens.shape[1]]
            for block in self.blocks:
                x = block(x)
            return self.readout(self.ln_f(x))

    model = Model()
    opt = torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=0.01)
    tokens = torch.from_numpy(np.random.default_rng(0).integers(0, vocab, (BATCH, seq + 1))).long()

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=compute == "bfloat16"):
            logits = model(tokens[:, :-1]).float()
        loss = F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()
    return step


def jax_charlm_step(compute="float32"):
    """The same transformer in jax.numpy under jax.jit: pre-norm blocks, causal attention,
    tanh GELU, global-norm clipping and AdamW written out; compute="bfloat16": the passes on
    the parameters cast to bfloat16, the logits back to float32."""
    jnp = jax.numpy
    low = jnp.dtype(compute)
    vocab, seq, d, heads, layers, hidden = 100, 64, 64, 4, 2, 256
    rng = np.random.default_rng(0)

    def dense(i, o, scale=None):
        return jnp.asarray(rng.standard_normal((i, o)).astype(np.float32) * (scale or 1 / np.sqrt(i)))

    def norm():
        return {"g": jnp.ones(d, jnp.float32), "b": jnp.zeros(d, jnp.float32)}

    params = {"embed": dense(vocab, d, 0.02), "position": dense(seq, d, 0.02), "ln_f": norm(),
              "readout": dense(d, vocab),
              "blocks": [{"ln1": norm(), "ln2": norm(), "qkv": dense(d, 3 * d), "out": dense(d, d),
                          "up": dense(d, hidden), "up_b": jnp.zeros(hidden, jnp.float32),
                          "down": dense(hidden, d), "down_b": jnp.zeros(d, jnp.float32)}
                         for _ in range(layers)]}

    def layer_norm(x, p):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]

    def block(x, p):
        b, t, _ = x.shape
        q, k, v = jnp.split((layer_norm(x, p["ln1"]) @ p["qkv"]).reshape(b, t, 3 * heads, d // heads), 3, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // heads)
        scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, jnp.finfo(low).min)
        x = x + jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, -1), v).reshape(b, t, d) @ p["out"]
        h = jax.nn.gelu(layer_norm(x, p["ln2"]) @ p["up"] + p["up_b"], approximate=True)
        return x + h @ p["down"] + p["down_b"]

    def loss(p, tokens):
        p = jax.tree_util.tree_map(lambda a: a.astype(low), p)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        x = p["embed"][inputs] + p["position"][:inputs.shape[1]]
        for bp in p["blocks"]:
            x = block(x, bp)
        logp = jax.nn.log_softmax((layer_norm(x, p["ln_f"]) @ p["readout"]).astype(jnp.float32))
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], -1))

    tree = jax.tree_util

    @jax.jit
    def step(p, m, v, t, tokens):
        value, g = jax.value_and_grad(loss)(p, tokens)
        norm2 = sum(jnp.sum(x * x) for x in tree.tree_leaves(g))
        g = tree.tree_map(lambda x: x * jnp.minimum(1.0, 1.0 / jnp.sqrt(norm2)), g)
        m = tree.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = tree.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = tree.tree_map(lambda p, m, v: p - 1e-3 * ((m / (1 - 0.9 ** t)) / (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
                                                      + 0.01 * p), p, m, v)
        return p, m, v, value

    zeros = tree.tree_map(jnp.zeros_like, params)
    tokens = jnp.asarray(rng.integers(0, vocab, (BATCH, seq + 1)).astype(np.int32))
    carry = [params, zeros, zeros]

    def run():
        carry[0], carry[1], carry[2], value = step(*carry, 1.0, tokens)
        return float(value)
    return run


def where_the_time_goes(step, calls=20, top=8):
    """rune.profile's table of `calls` warm calls of a rune training step."""
    step()
    with rune.profile() as prof:
        for _ in range(calls):
            step()
    return prof.table(top=top)


SETTLE_SECONDS = 0.3   # the last library's idle threads spin a while (OpenBLAS ~0.1 s): let them stop
MODELS = (("digits", "digits CNN train step (batch 32)"), ("charlm", "char transformer train step (32 x 64)"),
          ("charlm_bf16", "GPT step, bf16 (the char transformer, 32 x 64, bfloat16 compute)"))


def _makers(model):
    """{library: the function making its step} of `model`."""
    charlm = {"rune": rune_charlm_step, "torch": torch_charlm_step, "jax.jit": jax_charlm_step}
    return {"digits": {"rune": rune_digits_step, "torch": torch_digits_step, "jax.jit": jax_digits_step},
            "charlm": charlm,
            "charlm_bf16": {name: functools.partial(make, "bfloat16") for name, make in charlm.items()}}[model]


def _steps(model):
    """{library: step} of `model` for rune and every installed peer."""
    makers = _makers(model)
    installed = {"rune": True, "torch": torch is not None, "jax.jit": jax is not None}
    return {name: make() for name, make in makers.items() if installed[name]}


def step_times():
    """{model: {library: seconds per step}}, the libraries timed in alternation."""
    return {model: per_call_each(_steps(model), budget=3.0, repeat=6, settle=SETTLE_SECONDS)
            for model, _ in MODELS}


def _rows(times, label):
    return [Row(title + label, "per step", times[model]) for model, title in MODELS if model in times]


# One thread for every library at once, from the start: XLA's CPU pool ignores
# threadpoolctl and is sized when jax first runs, so the one-thread table comes
# from a child process started with every library's thread setting at one.
_ONE_THREAD_ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
                   "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "RUNE_NUM_THREADS": "1"}
_CHILD = "import json; from bench import train; print(json.dumps(train.step_times()))"


def one_thread_times():
    """step_times() in a child process where every library runs on one thread, or None if it fails."""
    env = dict(os.environ, **_ONE_THREAD_ENV)
    env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _ONE_THREAD_ENV["XLA_FLAGS"]).strip()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", _CHILD], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        print(f"(the one-thread child failed: {proc.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run():
    note = ("torch: eager autograd + torch.optim.Adam / AdamW; jax: jax.jit of the step with Adam / AdamW written "
            "out; the libraries are timed in alternation (the best of 6 rounds each)")
    rows = []
    one = one_thread_times()
    if one is not None:
        rows = _rows(one, "")
        print_table("training steps (examples/train_digits.py, examples/train_charlm.py), one thread "
                    "(a child process: OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, RUNE_NUM_THREADS = 1, XLA on one "
                    "thread)", rows, note=note)
    threaded = _rows(step_times(), ", default threads")
    print_table("the same steps, each library with its default threads", threaded, note=note)
    rows += threaded
    with _one_thread():
        for model, title in MODELS:
            print(f"\nwhere rune's {title.split(' train')[0]} step spends its time (rune.profile, 20 steps, "
                  "one BLAS thread):")
            print(where_the_time_goes(_makers(model)["rune"]()))
    return rows


if __name__ == "__main__":
    run()
