"""Train a tiny GPT on characters of Python's standard library, in bfloat16.

    python examples/train_gpt.py                         # 300 steps, then a sampled line
    python examples/train_gpt.py --tiny --steps 30       # a few seconds
    python examples/train_gpt.py --steps 600 --resume    # go on from the checkpoint
    python examples/train_gpt.py --compute-dtype float16 # with dynamic loss scaling
    python -m rune.plot checkpoints/gpt.jsonl -o curves.png

A port of nanoGPT's model and training loop written with rune's library alone.
The text is the character corpus of examples/train_charlm.py (its `load_text`,
`encode` and `windows`: the standard library's .py files, no download).

The model (`GPT`): token and position embeddings (`nn.Embedding`), --layers
pre-LayerNorm blocks (`Block`: `nn.LayerNorm`, causal self-attention whose
queries, keys and values come from one fused (d, 3d) `nn.Linear` and meet in
`nn.dot_product_attention(causal=True)`, `nn.LayerNorm`, a GELU MLP), a final
`nn.LayerNorm`, and an output projection tied to the token embedding
(`embedding.attend(x)` = x @ table.T: one matrix, its gradient the sum of both
uses). Initialised as GPT-2: N(0, 0.02), the residual projections scaled by
1/sqrt(2 * layers).

Training: the passes run in bfloat16 under `nn.Policy(param="float32",
compute="bfloat16", output="float32")` (float32 master weights, gradients and
AdamW state; float32 logits for the loss); `--compute-dtype float16` adds
`nn.DynamicLossScale` (float16's exponent is too narrow for small gradients:
the loss is scaled up, the gradients down, and a step with non-finite
gradients is skipped). AdamW (`rune.optim`) with weight decay on the Linear
layers' matrices only (a mask: biases, LayerNorms and the embeddings are not
decayed), a linear warm-up then cosine decay of the rate (`optim.warmup_cosine`),
gradient clipping by global norm, and `--accumulate K` batches per update
(`optim.MultiSteps`); the whole step is one `rune.jit` function.

The model, optimizer state (accumulated gradients included), loss scale, step
count and the Loader's position are saved with `rune.save` every --save-every
steps and when the run ends; `--resume` loads them and goes on with the same
batches, so its losses are the uninterrupted run's, bit for bit, and the
JSON-lines log (`rune.metrics.Logger(resume_step=)`) drops what a stopped run
logged past its checkpoint. At the end a line is sampled from a prompt
(greedy with --temperature 0, else drawn by key). On a GPU when rune lists
one, on the host otherwise.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

import rune
from rune import metrics, nn, nx, optim
from rune.data import Loader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # the example whose corpus this one reads
from train_charlm import encode, load_text, unigram_entropy, windows, with_blas_threads  # noqa: E402

TINY = dict(steps=20, batch_size=8, seq_len=32, d_model=32, heads=2, layers=2, max_chars=100_000,
            sample_chars=40, save_every=0)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention over the earlier positions: queries, keys and
    values from one (d, 3d) product (nanoGPT's c_attn), then an output projection."""
    qkv: nn.Linear
    proj: nn.Linear
    heads: int

    def __init__(self, key, d_model, heads, residual_std):
        k_qkv, k_proj = nx.random.split(key)
        self.qkv = nn.Linear(k_qkv, d_model, 3 * d_model, weight_init=nn.normal(0.02), bias_init=nn.zeros)
        self.proj = nn.Linear(k_proj, d_model, d_model, weight_init=nn.normal(residual_std), bias_init=nn.zeros)
        self.heads = int(heads)

    def __call__(self, x):
        batch, length, d = x.shape
        q, k, v = (nx.reshape(t, (batch, length, self.heads, d // self.heads))
                   for t in nx.split(self.qkv(x), 3, axis=-1))
        y = nn.dot_product_attention(q, k, v, causal=True)
        return self.proj(nx.reshape(y, (batch, length, d)))


class Block(nn.Module):
    """x + attention(ln1(x)), then + mlp(ln2(x)): a pre-LayerNorm transformer block."""
    ln1: nn.LayerNorm
    attention: CausalSelfAttention
    ln2: nn.LayerNorm
    up: nn.Linear
    down: nn.Linear

    def __init__(self, key, d_model, heads, residual_std):
        k_attention, k_up, k_down = nx.random.split(key, 3)
        self.ln1 = nn.LayerNorm(d_model)
        self.attention = CausalSelfAttention(k_attention, d_model, heads, residual_std)
        self.ln2 = nn.LayerNorm(d_model)
        self.up = nn.Linear(k_up, d_model, 4 * d_model, weight_init=nn.normal(0.02), bias_init=nn.zeros)
        self.down = nn.Linear(k_down, 4 * d_model, d_model, weight_init=nn.normal(residual_std), bias_init=nn.zeros)

    def __call__(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.down(nn.gelu(self.up(self.ln2(x))))


class GPT(nn.Module):
    """Next-token logits (B, T, vocab) of token ids (B, T), T <= context."""
    token: nn.Embedding
    position: nn.Embedding
    blocks: tuple
    ln_f: nn.LayerNorm

    def __init__(self, key, vocab, context, d_model, heads, layers):
        k_token, k_position, *k_blocks = nx.random.split(key, 2 + layers)
        self.token = nn.Embedding(k_token, vocab, d_model, weight_init=nn.normal(0.02))
        self.position = nn.Embedding(k_position, context, d_model, weight_init=nn.normal(0.02))
        # GPT-2: the projections into the residual stream are scaled down with depth
        residual_std = 0.02 / math.sqrt(2 * layers)
        self.blocks = tuple(Block(k, d_model, heads, residual_std) for k in k_blocks)
        self.ln_f = nn.LayerNorm(d_model)

    def __call__(self, tokens):
        x = self.token(tokens) + self.position(nx.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.token.attend(self.ln_f(x))   # the output projection is the token table (tied)


def loss_fn(model, windows):
    """Mean next-token cross-entropy (nats) of a batch of windows (B, T + 1)."""
    return nn.cross_entropy(model(windows[:, :-1]), windows[:, 1:], reduction="mean")


def decay_mask(model):
    """True at the Linear layers' weight matrices, False elsewhere: weight decay
    leaves the biases, the LayerNorms and the embeddings (the tied read-out
    included) alone, as nanoGPT's parameter groups do."""
    def mark(node):
        if isinstance(node, nn.Linear):
            return rune.tree.map(lambda _: False, node).replace(weight=True)
        return False
    return rune.tree.map(mark, model, is_leaf=lambda node: isinstance(node, nn.Linear))


def make_optimizer(args):
    """(AdamW after global-norm clipping, warm-up + cosine schedule of the update
    count), updating once every --accumulate batches on their mean gradient."""
    updates = max(args.steps // args.accumulate, 1)
    warmup = max(updates // 10, 1)
    schedule = optim.warmup_cosine(0.0, args.lr, warmup, max(updates, warmup + 1), end_value=args.lr / 10)
    adamw = optim.adamw(schedule, b1=0.9, b2=0.95, weight_decay=args.weight_decay, mask=decay_mask)
    optimizer = optim.chain(optim.clip_by_global_norm(1.0), adamw)
    return (optim.MultiSteps(optimizer, args.accumulate) if args.accumulate > 1 else optimizer), schedule


def make_step(optimizer):
    """One jitted training step: (model, opt_state, scale, windows) -> the new
    (model, opt_state, scale) and the loss; scale is an nn.DynamicLossScale
    (float16 compute) or None (no loss scaling)."""
    loss_and_grad = rune.value_and_grad(loss_fn)

    def gradients(model, scale, batch):
        if scale is None:
            return loss_and_grad(model, batch)
        scaled, grads = rune.value_and_grad(lambda m: scale.scale(loss_fn(m, batch)))(model)
        return scaled / scale.loss_scale, scale.unscale(grads)

    @rune.jit
    def step(model, opt_state, scale, batch):
        loss, grads = gradients(model, scale, batch)
        updates, new_opt_state = optimizer.update(grads, opt_state, model)
        new_model = optim.apply_updates(model, updates)
        if scale is None:
            return new_model, new_opt_state, None, loss
        finite = nn.all_finite(grads)   # else the step is skipped and the scale shrinks
        new_model, new_opt_state = nn.select_tree(finite, (new_model, new_opt_state), (model, opt_state))
        return new_model, new_opt_state, scale.adjust(finite), loss
    return step


def sample_line(model, prompt, index, lookup, context, device, key, temperature, max_chars):
    """The prompt and the characters drawn after it, one at a time, up to the end
    of the line or max_chars: the most likely one with temperature 0, else one
    drawn from softmax(logits / temperature) by `key`. The model sees the last
    `context` characters (padded with newlines: one compiled signature)."""
    def choose(model, window, key):
        logits = model(window)[0, -1]
        if temperature == 0:
            return nx.argmax(logits)
        return nx.random.categorical(key, logits / temperature)
    pick = rune.jit(choose)
    newline = index.get("\n", 0)
    ids = [index.get(c, newline) for c in prompt]
    for i in range(max_chars):
        window = ([newline] * context + ids)[-context:]
        ids.append(int(pick(model, nx.asarray(np.array([window], np.int32), device=device),
                              nx.random.fold_in(key, i))))
        if ids[-1] == newline:
            break
    return "".join(lookup[i] for i in ids).rstrip("\n")


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="batches to train on in all")
    parser.add_argument("--tiny", action="store_true",
                        help=f"a model and run of seconds ({', '.join(f'{k}={v}' for k, v in TINY.items())}); "
                             f"options given explicitly win")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64, help="the context, in characters")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3, help="the peak learning rate")
    parser.add_argument("--weight-decay", type=float, default=0.1,
                        help="AdamW's decoupled weight decay, on the Linear layers' matrices only")
    parser.add_argument("--accumulate", type=int, default=1, metavar="K",
                        help="update once every K batches, on the mean of their gradients")
    parser.add_argument("--compute-dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16",
                        help="the dtype of the forward and backward passes (parameters stay float32; "
                             "float16 adds dynamic loss scaling)")
    parser.add_argument("--loss-scale", type=float, default=2.0 ** 15,
                        help="float16: the dynamic loss scale's first value (halved after each step whose "
                             "gradients overflow, which is skipped)")
    parser.add_argument("--max-chars", type=int, default=2_000_000)
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop (and checkpoint) after this many steps in all; --resume goes on from there")
    parser.add_argument("--checkpoint", default=os.path.join("checkpoints", "gpt.safetensors"))
    parser.add_argument("--save-every", type=int, default=100, help="also checkpoint every this many steps (0: "
                                                                     "only at the end)")
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    parser.add_argument("--log", default=None,
                        help="the JSON-lines metrics log (default: next to --checkpoint, ending in .jsonl)")
    parser.add_argument("--prompt", default="def ")
    parser.add_argument("--sample-chars", type=int, default=120, help="at most this many sampled characters")
    parser.add_argument("--temperature", type=float, default=0.8, help="0 samples greedily")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: a GPU if listed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="host BLAS threads (default 1: small matrices, often a busy machine)")
    args = parser.parse_args(argv)
    if args.tiny:   # the tiny sizes as defaults, so that explicit options still win
        parser.set_defaults(**TINY)
        args = parser.parse_args(argv)
    if args.accumulate < 1 or args.steps < 1:
        parser.error(f"--accumulate and --steps must be at least 1, got {args.accumulate} and {args.steps}")
    if args.log is None:
        args.log = os.path.splitext(args.checkpoint)[0] + ".jsonl"
    return args


def main(argv=None):
    args = parse(argv)
    return with_blas_threads(args.blas_threads, train, args)


def train(args):
    device = args.device or ("cuda" if rune.devices("cuda") else "cpu")
    lookup, index, data = encode(load_text(args.max_chars))
    print(f"device {device}: {len(data):,} characters, {len(lookup)} distinct (unigram entropy "
          f"{unigram_entropy(data, len(lookup)):.3f} nats); compute {args.compute_dtype}")
    loader = Loader(windows(data, args.seq_len), args.batch_size, key=nx.random.key(args.seed + 1),
                    drop_last=True, device=device)
    policy = nn.Policy(param="float32", compute=args.compute_dtype, output="float32")
    model = GPT(nx.random.key(args.seed), len(lookup), args.seq_len, args.d_model, args.heads, args.layers)
    model = rune.place(policy.apply(model), device)
    optimizer, schedule = make_optimizer(args)
    state = {"model": model, "opt": optimizer.init(model), "data": loader.state(), "step": 0}
    if args.compute_dtype == "float16":
        state["scale"] = rune.place(nn.DynamicLossScale(args.loss_scale), device)
    if args.resume and os.path.exists(args.checkpoint):
        state = rune.load(args.checkpoint, device=device, like=state)
        loader.restore(state["data"])
        print(f"resumed from {args.checkpoint} at step {int(state['step'])}")
    model, opt_state, scale, done = state["model"], state["opt"], state.get("scale"), int(state["step"])
    step = make_step(optimizer)
    stop = args.steps if args.max_steps is None else min(args.steps, args.max_steps)

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.checkpoint)), exist_ok=True)
        saved = {"model": model, "opt": opt_state, "data": loader.state(), "step": done}
        rune.save(args.checkpoint, saved if scale is None else dict(saved, scale=scale))

    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    losses, start = [], time.perf_counter()
    with metrics.Logger(args.log, resume_step=done) as log:   # a fresh run (done = 0) starts a fresh log
        while done < stop:
            with iter(loader) as batches:   # the rest of the epoch the loader stands in
                for batch in batches:
                    tick = time.perf_counter()
                    model, opt_state, scale, loss = step(model, opt_state, scale, batch)
                    loss, done = float(loss), done + 1
                    seconds = time.perf_counter() - tick
                    lr = float(schedule((done - 1) // args.accumulate))   # the rate of the update this batch joins
                    scaled = {} if scale is None else {"loss_scale": float(scale.loss_scale)}   # after the step
                    log.log(done, loss=loss, lr=lr, step_time=seconds, **scaled)
                    print(f"step {done:5d}  loss {loss:.4f}  lr {lr:.2e}  {seconds * 1e3:6.1f} ms"
                          + "".join(f"  loss scale {v:g}" for v in scaled.values()))
                    losses.append(loss)
                    if args.save_every and done % args.save_every == 0:
                        save()
                    if done >= stop:
                        break
    save()
    print(f"{'stopped' if done < args.steps else 'done'} at step {done} ({time.perf_counter() - start:.1f} s); "
          f"checkpoint {args.checkpoint}")
    if args.sample_chars:
        line = sample_line(model, args.prompt, index, lookup, args.seq_len, device, nx.random.key(args.seed + 2),
                           args.temperature, args.sample_chars)
        print(f"sample: {line}")
    return losses


if __name__ == "__main__":
    main()
