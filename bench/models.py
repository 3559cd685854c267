"""The functions the benches differentiate, written once per library.

`chain`: a 100-op elementwise chain (sin, mul, add, tanh, repeated) summed to a
scalar. `mlp_loss`: a 784-256-10 ReLU MLP with softmax cross-entropy, the mean
over the batch. Each library gets the same math in its own spelling, and the
same float32 data.
"""
import numpy as np

from rune import nx

from .common import jax, torch

CHAIN_OPS = 100
CHAIN_SIZE = 16
SIZES = (784, 256, 10)
BATCH = 128


def make_chain(ns):
    """The chain written with the namespace `ns` (nx, numpy, jax.numpy or torch)."""
    def chain(x):
        for _ in range(CHAIN_OPS // 4):
            x = ns.tanh(ns.sin(x) * 0.9 + 0.1)
        return x.sum()
    return chain


def chain_input():
    return np.linspace(-1.0, 1.0, CHAIN_SIZE, dtype=np.float32)


def mlp_data(seed=0):
    """Float32 parameters (w1, b1, w2, b2), a batch of inputs and one-hot labels."""
    rng = np.random.default_rng(seed)
    d_in, d_hidden, d_out = SIZES
    params = (
        (rng.standard_normal((d_in, d_hidden)) / np.sqrt(d_in)).astype(np.float32),
        np.zeros(d_hidden, np.float32),
        (rng.standard_normal((d_hidden, d_out)) / np.sqrt(d_hidden)).astype(np.float32),
        np.zeros(d_out, np.float32),
    )
    x = rng.standard_normal((BATCH, d_in)).astype(np.float32)
    y = np.eye(d_out, dtype=np.float32)[rng.integers(0, d_out, BATCH)]
    return params, x, y


def mlp_loss_rune(params, x, y):
    w1, b1, w2, b2 = params
    h = nx.maximum(x @ w1 + b1, 0.0)
    logp = nx.log_softmax(h @ w2 + b2, axis=-1)
    return -(logp * y).sum(axis=-1).mean()


def mlp_value_and_grad_numpy(params, x, y):
    """The batched loss and its gradient by a hand-written backward pass: the floor."""
    w1, b1, w2, b2 = params
    pre = x @ w1 + b1
    h = np.maximum(pre, 0.0)
    z = h @ w2 + b2
    z = z - z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    loss = -(logp * y).sum(axis=-1).mean()
    dz = (np.exp(logp) * y.sum(axis=-1, keepdims=True) - y) / x.shape[0]
    dh = (dz @ w2.T) * (pre > 0)
    return loss, (x.T @ dh, dh.sum(axis=0), h.T @ dz, dz.sum(axis=0))


if jax is not None:
    jnp = jax.numpy

    def mlp_loss_jax(params, x, y):
        w1, b1, w2, b2 = params
        h = jnp.maximum(x @ w1 + b1, 0.0)
        logp = jax.nn.log_softmax(h @ w2 + b2, axis=-1)
        return -(logp * y).sum(axis=-1).mean()


if torch is not None:
    def mlp_loss_torch(params, x, y):
        w1, b1, w2, b2 = params
        h = torch.relu(x @ w1 + b1)
        logp = torch.log_softmax(h @ w2 + b2, dim=-1)
        return -(logp * y).sum(dim=-1).mean()
