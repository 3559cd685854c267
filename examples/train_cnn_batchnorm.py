"""Train a small CNN with batch normalisation on the 8x8 digits (scikit-learn's).

    python examples/train_cnn_batchnorm.py              # 98.6% test accuracy after 10 epochs (seed 0)
    python examples/train_cnn_batchnorm.py --epochs 2 --limit 320

The model: conv 3x3x16 - BatchNorm - relu - conv 3x3x32 stride 2 - BatchNorm -
relu - global average pool - dropout - dense 10, written with rune.nn's layers
alone. What it shows (docs/modules.md, "State and modes"):

- BatchNorm's running statistics are state (`nn.field(state=True)`): the
  optimizer (adamw, whose weight decay would shrink them) gets only
  `nn.partition(model, nn.trainable(model))`'s parameters;
- the new running statistics leave the jitted step as a return value:
  `logits, model = nn.apply(model, x, key=key)` inside the loss, the model the
  aux value of `value_and_grad`;
- `model.eval()` for testing: BatchNorm normalises with its running statistics
  and Dropout is off; in training mode Dropout needs its key;
- `nn.summary` prints the layers, and `rune.save` writes parameters and
  running statistics together (--checkpoint).

Needs scikit-learn: pip install -e '.[examples]'
"""
import argparse
import os
import sys

import numpy as np

import rune
from rune import nn, nx, optim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_digits import load_data  # noqa: E402  (the same data and split as the digits example)

CLASSES = 10


def make_model(key):
    k1, k2, k3 = nx.random.split(key, 3)
    return nn.Sequential(
        nn.Conv(k1, 1, 16, 3), nn.BatchNorm(16, momentum=0.9), nn.relu,
        nn.Conv(k2, 16, 32, 3, strides=2), nn.BatchNorm(32, momentum=0.9), nn.relu,
        nn.GlobalAvgPool(), nn.Dropout(0.1), nn.Linear(k3, 32, CLASSES))


def make_step(opt):
    @rune.jit
    def step(model, opt_state, x, y, key):
        params, rest = nn.partition(model, nn.trainable(model))

        def loss_fn(params):
            logits, new_model = nn.apply(nn.combine(params, rest), x, key=key)
            return nx.mean(nn.cross_entropy(logits, y)), new_model

        (loss, new_model), grads = rune.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return nn.combine(optim.apply_updates(params, updates), new_model), opt_state, loss
    return step


@rune.jit
def predict(model, x):
    return nx.argmax(model(x), axis=-1)


def accuracy(model, images, labels, batch_size=256):
    """Test accuracy in evaluation mode (running statistics, no dropout)."""
    model = model.eval()
    right = 0
    for i in range(0, len(labels), batch_size):
        right += int(np.sum(np.asarray(predict(model, nx.asarray(images[i:i + batch_size]))) ==
                            labels[i:i + batch_size]))
    return right / len(labels)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--limit", type=int, default=None, help="train on the first N training images only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default=None, help="save the trained model (parameters and running statistics)")
    args = p.parse_args(argv)

    (x_train, y_train), (x_test, y_test) = load_data()
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    key = nx.random.key(args.seed)
    model = make_model(key)
    print(nn.summary(model.eval(), nx.asarray(x_train[:args.batch_size])))
    opt = optim.adamw(args.lr, weight_decay=args.weight_decay)
    opt_state = opt.init(nn.partition(model, nn.trainable(model))[0])
    step = make_step(opt)
    rng = np.random.default_rng(args.seed)
    batches = len(y_train) // args.batch_size      # whole batches only: one compiled step
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(y_train))
        losses = []
        for b in range(batches):
            rows = order[b * args.batch_size:(b + 1) * args.batch_size]
            key = nx.random.fold_in(key, epoch * batches + b)
            model, opt_state, loss = step(model, opt_state, nx.asarray(x_train[rows]), nx.asarray(y_train[rows]),
                                          key)
            losses.append(float(loss))
        print(f"epoch {epoch:3d}  loss {np.mean(losses):.4f}  test accuracy {accuracy(model, x_test, y_test):.4f}")
    final = accuracy(model, x_test, y_test)
    print(f"final test accuracy {final:.4f}")
    if args.checkpoint:
        rune.save(args.checkpoint, model)
        print(f"saved {args.checkpoint}")
    return model, final


if __name__ == "__main__":
    main()
