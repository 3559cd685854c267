"""Train a small character-level transformer on Python's own standard library source.

    python examples/train_charlm.py                   # a few hundred steps, then samples
    python examples/train_charlm.py --compute-dtype bfloat16
    python examples/train_charlm.py --steps 2000 --device cuda
    mpiexec -n 2 python examples/train_charlm.py --shard zero3   # parameters sharded over 2 processes
    python -m rune.plot checkpoints/charlm.jsonl -o curves.png

Every Python installation carries its standard library as source, so the text
needs no download: the .py files next to `os.py`, in sorted order, up to
--max-chars characters (the last tenth held out for validation).

The model, made of `rune.nn` modules: token and position embeddings
(`nn.Embedding`), --layers pre-norm blocks (`Block`: `nn.LayerNorm`, causal
`nn.MultiHeadAttention`, `nn.LayerNorm`, a GELU MLP of two `nn.Linear`), a final layer norm
and a linear read-out. AdamW with a warm-up then cosine-decaying learning rate,
global-norm clipping and weight decay on the matrices only (a mask leaves the
biases and layer norms alone) (`rune.optim`); one jitted function per training
step. `--compute-dtype bfloat16` runs the passes in bfloat16 under
`nn.Policy(param="float32", compute="bfloat16", output="float32")`.

The batches come from `rune.data.Loader` over every window of seq-len + 1
characters of the text (a strided view, no copy), shuffled by key, a new order
each epoch; `--accumulate K` updates once every K batches, on their mean
gradient (`optim.MultiSteps`). Every step appends a line to a JSON-lines log
(`rune.metrics.Logger`, --log, and TensorBoard files with --tensorboard DIR):
loss, learning rate, step time, characters/s; the validation loss closes it.
The loss is compared with the unigram entropy of the text (what a model that
ignores context achieves) and a few lines are sampled at the end.
"""
import argparse
import glob
import itertools
import math
import os
import time

import numpy as np

import rune
from rune import metrics, nn, nx, optim
from rune.data import Loader


def load_text(max_chars):
    """The standard library's .py files, concatenated, as one string."""
    folder = os.path.dirname(os.__file__)
    parts, size = [], 0
    for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        parts.append(text)
        size += len(text)
        if size >= max_chars:
            break
    return "".join(parts)[:max_chars]


def encode(text):
    """(the distinct characters, sorted; {character: id}; the text as int32 ids)."""
    lookup = sorted(set(text))
    index = {c: i for i, c in enumerate(lookup)}
    return lookup, index, np.array([index[c] for c in text], np.int32)


def unigram_entropy(tokens, vocab):
    """The entropy (nats) of the character frequencies: the loss of the best
    model that ignores context."""
    p = np.bincount(tokens, minlength=vocab) / len(tokens)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def windows(tokens, seq_len):
    """Every window of seq_len + 1 consecutive tokens, (n, seq_len + 1): a read-only
    view of `tokens`, so a batch copies only its own rows. A window is the input
    (its first seq_len tokens) and the target (its last seq_len)."""
    return np.lib.stride_tricks.sliding_window_view(tokens, seq_len + 1)


def _scaled(init, factor):
    """An initialiser: `init`'s draw times `factor`."""
    return lambda key, shape, dtype=nx.float32: init(key, shape, dtype) * factor


def causal_attention(key, heads, d_model, residual_scale):
    """Self-attention without biases, initialised as GPT-2: the query, key and value
    projections drawn as one (d, 3d) Glorot matrix, the output projection (into the
    residual stream) Glorot scaled by residual_scale."""
    k_qkv, k_out = nx.random.split(key)
    attention = nn.MultiHeadAttention(key, heads, d_model, use_bias=False)
    q, k, v = nx.split(nn.glorot_uniform(k_qkv, (d_model, 3 * d_model)), 3, axis=1)
    out = _scaled(nn.glorot_uniform, residual_scale)(k_out, (d_model, d_model))
    return attention.replace(q_proj=attention.q_proj.replace(weight=q), k_proj=attention.k_proj.replace(weight=k),
                             v_proj=attention.v_proj.replace(weight=v), out_proj=attention.out_proj.replace(weight=out))


class Block(nn.Module):
    """A pre-norm transformer block: x + attention(norm(x)), then + a GELU MLP of norm(x)."""
    ln1: nn.LayerNorm
    attention: nn.MultiHeadAttention
    ln2: nn.LayerNorm
    up: nn.Linear
    down: nn.Linear

    def __init__(self, key, d_model, heads, hidden, residual_scale):
        k_attention, k_up, k_down = nx.random.split(key, 3)
        self.ln1 = nn.LayerNorm(d_model)
        self.attention = causal_attention(k_attention, heads, d_model, residual_scale)
        self.ln2 = nn.LayerNorm(d_model)
        # He for the GELU layer, Glorot scaled by residual_scale for the one into the residual stream
        self.up = nn.Linear(k_up, d_model, hidden, weight_init=nn.he_normal, bias_init=nn.zeros)
        self.down = nn.Linear(k_down, hidden, d_model, weight_init=_scaled(nn.glorot_uniform, residual_scale),
                              bias_init=nn.zeros)

    def __call__(self, x):
        x = x + self.attention(self.ln1(x), causal=True)
        return x + self.down(nn.gelu(self.up(self.ln2(x))))


class CharTransformer(nn.Module):
    """Next-character logits (B, T, vocab) of token ids (B, T), T <= seq_len."""
    embed: nn.Embedding
    position: nn.Embedding
    blocks: tuple
    ln_f: nn.LayerNorm
    readout: nn.Linear

    def __init__(self, key, vocab, seq_len, d_model=64, heads=4, layers=2, hidden=None):
        hidden = 4 * d_model if hidden is None else hidden
        k_embed, k_position, k_readout, *k_blocks = nx.random.split(key, 3 + layers)
        # Small embeddings (GPT-2's N(0, 0.02)); the blocks' residual projections are
        # scaled by 1/sqrt(2 * layers) so the residual stream's variance stays put with depth.
        self.embed = nn.Embedding(k_embed, vocab, d_model, weight_init=nn.normal(0.02))
        self.position = nn.Embedding(k_position, seq_len, d_model, weight_init=nn.normal(0.02))
        self.blocks = tuple(Block(k, d_model, heads, hidden, 1 / math.sqrt(2 * layers)) for k in k_blocks)
        self.ln_f = nn.LayerNorm(d_model)
        self.readout = nn.Linear(k_readout, d_model, vocab, use_bias=False, weight_init=nn.glorot_uniform)

    def __call__(self, tokens):
        x = self.embed(tokens) + self.position(nx.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.readout(self.ln_f(x))


def loss_fn(model, windows):
    """Mean next-character cross-entropy (nats) of a batch of windows (B, T + 1)."""
    return nx.mean(nn.cross_entropy(model(windows[:, :-1]), windows[:, 1:]))


def decay_mask(params):
    """True for the weight matrices and embeddings (two axes or more), False for
    the biases and the layer norms' scales and offsets, which weight decay would
    only pull towards 0 (GPT-2's and nanoGPT's choice)."""
    return rune.tree.map(lambda p: p.ndim >= 2, params)


def make_optimizer(lr, steps, weight_decay, accumulate=1, mask=decay_mask, clip=optim.clip_by_global_norm):
    """AdamW after global-norm clipping, its rate warming up over the first tenth of
    the updates then decaying (cosine) to lr / 10, its weight decay on the matrices
    only (`decay_mask`); with accumulate = k > 1, one update per k batches, on the
    mean of their gradients (`optim.MultiSteps`: a batch k times larger in the
    memory of one). steps counts batches; (optimizer, schedule of the update count).
    mask and clip: as for a sharded optimizer (`data_parallel`)."""
    updates = max(steps // accumulate, 1)
    warmup = max(updates // 10, 1)
    schedule = optim.warmup_cosine(0.0, lr, warmup, max(updates, warmup + 1), end_value=lr / 10)
    adamw = optim.adamw(schedule, b1=0.9, b2=0.99, weight_decay=weight_decay, mask=mask)
    optimizer = optim.chain(clip(1.0), adamw)
    return (optim.MultiSteps(optimizer, accumulate) if accumulate > 1 else optimizer), schedule


def make_step(optimizer, average=False):
    """One jitted training step: (model, opt_state, windows) -> (model, opt_state, loss);
    average: the gradients averaged over the processes first (unsharded data parallelism)."""
    loss_and_grad = rune.value_and_grad(loss_fn)

    @rune.jit
    def step(model, opt_state, windows):
        loss, grads = loss_and_grad(model, windows)
        if average:
            grads = rune.distributed.all_reduce(grads, "mean")
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss
    return step


def data_parallel(shard, model, make):
    """--shard under `mpiexec -n N`: (model, optimizer, whether the step averages the
    gradients). Each process trains on its own batches. "none" averages the gradients
    with all_reduce (every process holds everything); zero1 and zero2 keep 1/N of
    AdamW's state per process (`rune.distributed.sharded`; zero2 receives only its
    block of the mean gradient), zero3 the parameters too (`fully_shard` of every
    block, then of the model). A sharded optimizer sees flat blocks, so the weight
    decay mask is made from the whole shapes (`whole_view`) and the clipping norm
    sums over every process's blocks (`rune.distributed.clip_by_global_norm`)."""
    dist = rune.distributed
    if shard == "none":
        return model, make(), dist.size() > 1
    if shard == "zero3":
        model = dist.fully_shard(model.replace(blocks=tuple(dist.fully_shard(b) for b in model.blocks)))
    flags = decay_mask(dist.whole_view(model))   # (a function: a fully_shard model is callable)
    optimizer = make(mask=lambda blocks: flags, clip=dist.clip_by_global_norm)
    return model, dist.sharded(optimizer, stage=1 if shard == "zero1" else 2), False


def memory_line(what):
    """This process's bytes of live rune arrays (rune.memory_stats), as a line to print."""
    held = rune.memory_stats()
    mib = lambda n: f"{n / 2**20:.3f} MiB"  # noqa: E731
    per = ", ".join(f"{d} {mib(v['current'])} (peak {mib(v['peak'])})" for d, v in held.items())
    return f"process {rune.distributed.rank()} of {rune.distributed.size()}, {what}: {per}"


def forever(loader):
    """The loader's batches, epoch after epoch."""
    while True:
        yield from loader


def sample(model, prompt, chars, lookup, index, seq_len, device, rng, temperature=0.8):
    """Characters drawn one at a time from the model's softmax, conditioned on the
    last seq_len characters (a fixed window, so one compiled signature)."""
    next_logits = rune.jit(lambda m, w: m(w)[0, -1])
    pad = index.get("\n", 0)
    text = [index.get(c, pad) for c in prompt]
    for _ in range(chars):
        window = ([pad] * seq_len + text)[-seq_len:]
        z = np.asarray(next_logits(model, nx.asarray(np.array([window], np.int32), device=device)), np.float64)
        p = np.exp((z - z.max()) / temperature)
        text.append(int(rng.choice(len(p), p=p / p.sum())))
    return "".join(lookup[i] for i in text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--weight-decay", type=float, default=0.01,
                        help="AdamW's decoupled weight decay, on the weight matrices and embeddings only")
    parser.add_argument("--accumulate", type=int, default=1, metavar="K",
                        help="update once every K batches, on the mean of their gradients (default 1)")
    parser.add_argument("--compute-dtype", choices=("float32", "bfloat16"), default="float32",
                        help="the dtype of the forward and backward passes (parameters stay float32)")
    parser.add_argument("--max-chars", type=int, default=2_000_000)
    parser.add_argument("--sample-chars", type=int, default=300)
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: a GPU if listed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=50, help="print the mean loss every this many steps")
    parser.add_argument("--log", default=os.path.join("checkpoints", "charlm.jsonl"),
                        help="the JSON-lines metrics log, one line per step (started afresh)")
    parser.add_argument("--tensorboard", metavar="DIR",
                        help="also write TensorBoard event files to DIR (needs tensorboardX: pip install "
                             "'rune[tensorboard]')")
    parser.add_argument("--shard", choices=("none", "zero1", "zero2", "zero3"), default="none",
                        help="under mpiexec -n N, data parallel over N processes: none averages the gradients, "
                             "zero1/zero2 shard AdamW's state (and the gradients), zero3 the parameters too; "
                             "each process prints its memory")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="host BLAS threads (default 1: small matrices, often a busy machine)")
    args = parser.parse_args(argv)
    return with_blas_threads(args.blas_threads, train, args)


def with_blas_threads(count, run, *args):
    """run(*args) with the host BLAS on `count` threads (threadpoolctl, where installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # only a speed knob
        return run(*args)
    with threadpool_limits(count, user_api="blas"):
        return run(*args)


def train(args):
    device = args.device or ("cuda" if rune.devices("cuda") else "cpu")
    if args.device is None and rune.distributed.size() > 1:
        device = rune.distributed.device()   # one GPU per process (NCCL needs that), or the host
    text = load_text(args.max_chars)
    lookup, index, data = encode(text)
    split = int(len(data) * 0.9)
    train_data, valid_data = data[:split], data[split:]
    floor = unigram_entropy(train_data, len(lookup))
    print(f"device {device}: {len(text):,} characters of the standard library, {len(lookup)} distinct; "
          f"unigram entropy {floor:.3f} nats; compute {args.compute_dtype}")

    policy = nn.Policy(param="float32", compute=args.compute_dtype, output="float32")
    model = CharTransformer(nx.random.key(args.seed), len(lookup), args.seq_len, args.d_model, args.heads,
                            args.layers)
    model = rune.place(policy.apply(model), device)
    if args.accumulate < 1:
        raise SystemExit(f"--accumulate must be at least 1, got {args.accumulate}")
    parallel = args.shard != "none" or rune.distributed.size() > 1
    if parallel:
        rune.memory_stats()   # counting starts: the lines below report this process's arrays
    schedule = make_optimizer(args.lr, args.steps, args.weight_decay, args.accumulate)[1]
    model, optimizer, average = data_parallel(
        args.shard, model, lambda **kw: make_optimizer(args.lr, args.steps, args.weight_decay, args.accumulate,
                                                       **kw)[0])
    opt_state = optimizer.init(model)
    if parallel:   # (before the loader makes batches)
        print(memory_line(f"--shard {args.shard}, parameters and optimizer state"), flush=True)
    step = make_step(optimizer, average)
    evaluate = rune.jit(loss_fn)
    rank = rune.distributed.rank()
    if rank:   # each process its own batches and log
        args.log, args.tensorboard = f"{os.path.splitext(args.log)[0]}.rank{rank}.jsonl", None
    batches = forever(Loader(windows(train_data, args.seq_len), args.batch_size, key=nx.random.key(args.seed + rank),
                             drop_last=True, device=device))

    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    if os.path.exists(args.log):
        os.remove(args.log)
    chars = args.batch_size * args.seq_len
    with metrics.Logger(args.log, tensorboard=args.tensorboard) as log:
        start, first, recent = time.perf_counter(), None, []
        tick = start
        for i in range(1, args.steps + 1):
            model, opt_state, loss = step(model, opt_state, next(batches))
            loss = float(loss)
            now = time.perf_counter()
            seconds, tick = now - tick, now
            # the rate of the update this batch's gradient goes into
            lr = float(schedule((i - 1) // args.accumulate))
            log.log(i, loss=loss, lr=lr, step_time=seconds, chars_per_s=chars / seconds)
            first = loss if first is None else first
            recent = (recent + [loss])[-args.log_every:]
            if i % args.log_every == 0 or i == args.steps:
                rate = i * chars / (now - start)
                print(f"step {i:5d}  loss {sum(recent) / len(recent):.3f}  ({rate:,.0f} chars/s)")
        batches.close()   # stops the loader's thread and drops the batches it made ahead
        if parallel:
            print(memory_line(f"--shard {args.shard}, after {args.steps} steps"), flush=True)
        valid = Loader(windows(valid_data, args.seq_len), args.batch_size, key=nx.random.key(1), drop_last=True,
                       device=device, prefetch=0)
        with valid.epoch(0) as held_out:
            valid_loss = float(np.mean([float(evaluate(model, tokens)) for tokens in itertools.islice(held_out, 4)]))
        log.log(args.steps, validation_loss=valid_loss)
    final = sum(recent) / len(recent)
    print(f"loss: first step {first:.3f}, last {len(recent)} steps {final:.3f}, validation {valid_loss:.3f}; "
          f"unigram entropy {floor:.3f} nats ({time.perf_counter() - start:.1f} s)")
    if args.sample_chars:
        print("--- sample ---")
        print(sample(model, "def ", args.sample_chars, lookup, index, args.seq_len, device,
                     np.random.default_rng(args.seed)))
    return first, final, valid_loss, floor


if __name__ == "__main__":
    main()
