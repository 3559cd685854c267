"""Train a two-layer MLP to classify three interleaved spirals.

The data (3000 points, three classes) and the initial weights come from
rune's counter-based random numbers. The loss and its gradient are one jitted
function, `rune.jit(rune.value_and_grad(loss))`; Adam is written with
`rune.tree.map` over the parameter dict and jitted too. Everything is placed
on a GPU when rune sees one, on the host otherwise.

Run from the repository root: python examples/train_mlp.py
"""
import math
import time

import rune
from rune import nx

CLASSES = 3
POINTS_PER_CLASS = 1000
HIDDEN = 64
STEPS = 1500
LEARNING_RATE = 0.01
LOG_EVERY = 150


def spirals(key, points_per_class=POINTS_PER_CLASS, classes=CLASSES, noise=0.25):
    """Points on `classes` noisy spiral arms: (inputs (n, 2) float32, labels (n,) int32)."""
    k_radius, k_noise = nx.random.split(key)
    n = points_per_class * classes
    labels = nx.arange(n, dtype=nx.int32) // points_per_class
    radius = nx.random.uniform(k_radius, (n,), minval=0.0, maxval=1.0)
    # Each arm winds 1.75 turns outward; arms are rotated a third of a turn apart.
    angle = (radius * 3.5 * math.pi + labels.astype(nx.float32) * (2.0 * math.pi / classes)
             + nx.random.normal(k_noise, (n,)) * noise)
    inputs = nx.stack([radius * nx.cos(angle), radius * nx.sin(angle)], axis=1)
    return inputs, labels


def split_train_test(inputs, labels, test_every=5):
    """Every `test_every`-th point held out for testing.

    The points of a class are independent draws, so a strided split is as good
    as a shuffled one, and each class keeps its share in both halves.
    """
    n = inputs.shape[0]
    rows = nx.arange(n, dtype=nx.int32).reshape(n // test_every, test_every)
    test, train = rows[:, 0], rows[:, 1:].reshape(-1)
    return (inputs[train], labels[train]), (inputs[test], labels[test])


def init_params(key, sizes=(2, HIDDEN, CLASSES)):
    """He-initialized weights and zero biases, as a dict pytree."""
    k1, k2 = nx.random.split(key)
    (d_in, d_hidden, d_out) = sizes
    return {
        "w1": nx.random.normal(k1, (d_in, d_hidden)) * math.sqrt(2.0 / d_in),
        "b1": nx.zeros((d_hidden,), dtype=nx.float32),
        "w2": nx.random.normal(k2, (d_hidden, d_out)) * math.sqrt(2.0 / d_hidden),
        "b2": nx.zeros((d_out,), dtype=nx.float32),
    }


def logits(params, x):
    h = nx.maximum(x @ params["w1"] + params["b1"], 0.0)
    return h @ params["w2"] + params["b2"]


def loss(params, x, onehot):
    """Mean softmax cross-entropy."""
    logp = nx.log_softmax(logits(params, x), axis=-1)
    return -(logp * onehot).sum(axis=-1).mean()


def accuracy(params, x, labels):
    return (nx.argmax(logits(params, x), axis=-1) == labels).astype(nx.float32).mean()


def adam_init(params):
    zeros = rune.tree.map(nx.zeros_like, params)
    return {"m": zeros, "v": zeros}


def adam_update(params, grads, state, lr_t, b1=0.9, b2=0.999, eps=1e-8):
    """One Adam step; `lr_t` already holds the bias correction for this step."""
    m = rune.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = rune.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    params = rune.tree.map(lambda p, m, v: p - lr_t * m / (nx.sqrt(v) + eps), params, m, v)
    return params, {"m": m, "v": v}


def main():
    device = "cuda" if any(d.platform == "cuda" for d in rune.devices()) else "cpu"
    print(f"device: {device}")

    k_data, k_init = nx.random.split(nx.random.key(0))
    inputs, labels = spirals(k_data)
    (x_train, y_train), (x_test, y_test) = split_train_test(inputs, labels)
    onehot = (y_train[:, None] == nx.arange(CLASSES, dtype=nx.int32)).astype(nx.float32)
    x_train, onehot, y_train, x_test, y_test = rune.place(
        (x_train, onehot, y_train, x_test, y_test), device)
    params = rune.place(init_params(k_init), device)
    opt_state = adam_init(params)
    print(f"data: {x_train.shape[0]} train / {x_test.shape[0]} test points, {CLASSES} classes; "
          f"MLP 2-{HIDDEN}-{CLASSES}, Adam lr {LEARNING_RATE}, {STEPS} full-batch steps")

    loss_and_grad = rune.jit(rune.value_and_grad(loss))
    update = rune.jit(adam_update)
    evaluate = rune.jit(accuracy)

    start = time.perf_counter()
    for step in range(1, STEPS + 1):
        value, grads = loss_and_grad(params, x_train, onehot)
        lr_t = LEARNING_RATE * math.sqrt(1 - 0.999 ** step) / (1 - 0.9 ** step)
        params, opt_state = update(params, grads, opt_state, lr_t)
        if step % LOG_EVERY == 0 or step == 1:
            print(f"step {step:5d}  loss {value.item():.4f}")
    seconds = time.perf_counter() - start

    train_acc = evaluate(params, x_train, y_train).item()
    test_acc = evaluate(params, x_test, y_test).item()
    chance = 1.0 / CLASSES
    w1 = params["w1"]
    print(f"trained in {seconds:.1f} s on {w1.device} ({w1.dtype.name} parameters)")
    print(f"train accuracy {train_acc:.1%}, test accuracy {test_acc:.1%} (chance {chance:.1%})")
    assert test_acc > 0.9, f"test accuracy {test_acc:.1%} does not beat chance by a wide margin"
    print("accuracy beats chance by a wide margin: True")


if __name__ == "__main__":
    main()
