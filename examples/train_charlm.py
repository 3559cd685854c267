"""Train a small character-level transformer on Python's own standard library source.

    python examples/train_charlm.py                   # a few hundred steps, then samples
    python examples/train_charlm.py --steps 2000 --device cuda

Every Python installation carries its standard library as source, so the text
needs no download: the .py files next to `os.py`, in sorted order, up to
--max-chars characters (the last tenth held out for validation).

The model: token and position embeddings, --layers pre-norm blocks of causal
multi-head self-attention and a GELU MLP (layer norm before each), a final
layer norm and a linear read-out. AdamW with a warm-up then cosine-decaying
learning rate and global-norm clipping (`rune.optim`); one jitted function per
training step. The loss is compared with the unigram entropy of the text (what
a model that ignores context achieves) and a few lines are sampled at the end.
"""
import argparse
import glob
import math
import os
import time

import numpy as np

import rune
from rune import nn, nx, optim


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


def unigram_entropy(tokens, vocab):
    """The entropy (nats) of the character frequencies: the loss of the best
    model that ignores context."""
    p = np.bincount(tokens, minlength=vocab) / len(tokens)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def init_params(key, vocab, seq_len, d_model, layers, hidden):
    keys = iter(nx.random.split(key, 4 + 4 * layers))
    normal = nn.normal(0.02)
    blocks = []
    for _ in range(layers):
        blocks.append({
            "ln1": {"gamma": nx.ones((d_model,)), "beta": nx.zeros((d_model,))},
            "qkv": nn.glorot_uniform(next(keys), (d_model, 3 * d_model)),
            "out": nn.glorot_uniform(next(keys), (d_model, d_model)) / math.sqrt(2 * layers),
            "ln2": {"gamma": nx.ones((d_model,)), "beta": nx.zeros((d_model,))},
            "up": {"w": nn.he_normal(next(keys), (d_model, hidden)), "b": nx.zeros((hidden,))},
            "down": {"w": nn.glorot_uniform(next(keys), (hidden, d_model)) / math.sqrt(2 * layers),
                     "b": nx.zeros((d_model,))},
        })
    return {"embed": normal(next(keys), (vocab, d_model)), "position": normal(next(keys), (seq_len, d_model)),
            "blocks": blocks, "ln_f": {"gamma": nx.ones((d_model,)), "beta": nx.zeros((d_model,))},
            "readout": nn.glorot_uniform(next(keys), (d_model, vocab))}


def attention(block, x, heads):
    """Causal multi-head self-attention of x (B, T, D)."""
    b, t, d = x.shape
    qkv = nx.reshape(x @ block["qkv"], (b, t, 3, heads, d // heads))
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]                     # (B, T, H, Dh)
    scores = nx.einsum("bthd,bshd->bhts", q, k) / math.sqrt(d // heads)
    causal = nx.arange(t)[:, None] >= nx.arange(t)[None, :]                # s <= t
    weights = nn.softmax(nx.where(causal, scores, -1e9), axis=-1)
    mixed = nx.einsum("bhts,bshd->bthd", weights, v)
    return nx.reshape(mixed, (b, t, d)) @ block["out"]


def logits(params, tokens, heads):
    t = tokens.shape[1]
    x = params["embed"][tokens] + params["position"][:t]
    for block in params["blocks"]:
        x = x + attention(block, nn.layer_norm(x, **block["ln1"]), heads)
        h = nn.layer_norm(x, **block["ln2"])
        h = nn.gelu(h @ block["up"]["w"] + block["up"]["b"])
        x = x + h @ block["down"]["w"] + block["down"]["b"]
    return nn.layer_norm(x, **params["ln_f"]) @ params["readout"]


def loss_fn(params, tokens, heads):
    """Mean next-character cross-entropy (nats) of a batch of windows (B, T + 1)."""
    return nx.mean(nn.cross_entropy(logits(params, tokens[:, :-1], heads), tokens[:, 1:]))


def batches(data, batch, seq_len, rng):
    while True:
        starts = rng.integers(0, len(data) - seq_len - 1, batch)
        yield np.stack([data[s:s + seq_len + 1] for s in starts])


def sample(params, prompt, chars, lookup, index, seq_len, heads, device, rng, temperature=0.8):
    """Characters drawn one at a time from the model's softmax, conditioned on the
    last seq_len characters (a fixed window, so one compiled signature)."""
    next_logits = rune.jit(lambda p, w: logits(p, w, heads)[0, -1], static_argnums=())
    pad = index.get("\n", 0)
    text = [index.get(c, pad) for c in prompt]
    for _ in range(chars):
        window = ([pad] * seq_len + text)[-seq_len:]
        z = np.asarray(next_logits(params, nx.asarray(np.array([window], np.int32), device=device)), np.float64)
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
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--max-chars", type=int, default=2_000_000)
    parser.add_argument("--sample-chars", type=int, default=300)
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: a GPU if listed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="host BLAS threads (default 1: small matrices, often a busy machine)")
    args = parser.parse_args(argv)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # only a speed knob
        return train(args)
    with threadpool_limits(args.blas_threads, user_api="blas"):
        return train(args)


def train(args):
    device = args.device or ("cuda" if rune.devices("cuda") else "cpu")
    text = load_text(args.max_chars)
    lookup = sorted(set(text))
    index = {c: i for i, c in enumerate(lookup)}
    data = np.array([index[c] for c in text], np.int32)
    split = int(len(data) * 0.9)
    train_data, valid_data = data[:split], data[split:]
    floor = unigram_entropy(train_data, len(lookup))
    print(f"device {device}: {len(text):,} characters of the standard library, {len(lookup)} distinct; "
          f"unigram entropy {floor:.3f} nats")

    params = rune.place(init_params(nx.random.key(args.seed), len(lookup), args.seq_len, args.d_model,
                                    args.layers, 4 * args.d_model), device)
    warmup = max(args.steps // 10, 1)
    schedule = optim.warmup_cosine(0.0, args.lr, warmup, max(args.steps, warmup + 1), end_value=args.lr / 10)
    optimizer = optim.chain(optim.clip_by_global_norm(1.0),
                            optim.adamw(schedule, b1=0.9, b2=0.99, weight_decay=args.weight_decay))
    opt_state = optimizer.init(params)
    loss_and_grad = rune.value_and_grad(loss_fn)

    @rune.jit
    def step(params, opt_state, tokens):
        loss, grads = loss_and_grad(params, tokens, args.heads)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optim.apply_updates(params, updates), opt_state, loss

    evaluate = rune.jit(lambda p, tokens: loss_fn(p, tokens, args.heads))
    rng = np.random.default_rng(args.seed)
    stream = batches(train_data, args.batch_size, args.seq_len, rng)
    start, first, recent = time.perf_counter(), None, []
    for i in range(1, args.steps + 1):
        tokens = nx.asarray(next(stream), device=device)
        params, opt_state, loss = step(params, opt_state, tokens)
        loss = float(loss)
        first = loss if first is None else first
        recent = (recent + [loss])[-args.log_every:]
        if i % args.log_every == 0 or i == args.steps:
            rate = i * args.batch_size * args.seq_len / (time.perf_counter() - start)
            print(f"step {i:5d}  loss {sum(recent) / len(recent):.3f}  ({rate:,.0f} chars/s)")
    valid = batches(valid_data, args.batch_size, args.seq_len, np.random.default_rng(1))
    valid_loss = float(np.mean([float(evaluate(params, nx.asarray(next(valid), device=device)))
                                for _ in range(4)]))
    final = sum(recent) / len(recent)
    print(f"loss: first step {first:.3f}, last {len(recent)} steps {final:.3f}, validation {valid_loss:.3f}; "
          f"unigram entropy {floor:.3f} nats ({time.perf_counter() - start:.1f} s)")
    if args.sample_chars:
        print("--- sample ---")
        print(sample(params, "def ", args.sample_chars, lookup, index, args.seq_len, args.heads, device,
                     np.random.default_rng(args.seed)))
    return first, final, valid_loss, floor


if __name__ == "__main__":
    main()
