"""Train a small CNN on the 8x8 handwritten digits that ship with scikit-learn.

    python examples/train_digits.py                 # about 98.5% test accuracy
    python examples/train_digits.py --resume        # continue from the last checkpoint
    python examples/train_digits.py --compute-dtype bfloat16
    python examples/train_digits.py --device cpu --epochs 3 --limit 500
    mpiexec -n 2 python examples/train_digits.py    # data parallel over 2 processes
    python -m rune.plot checkpoints/digits.jsonl -o curves.png

The model: conv 3x3x16 - relu - conv 3x3x32 - relu - max pool 2 - dense 64 -
relu - dense 10, an `nn.Module` made of `nn.Conv` (NHWC) and `nn.Linear`
layers: a pytree, so the gradient is a model of the same shape and the
optimizer, `rune.save` and the collectives take it as they take any tree. One
jitted function does a whole training step: the loss and its gradient
(`rune.value_and_grad`) and the Adam update (`rune.optim.adam`). On a GPU
when rune lists one, on the host otherwise.

Batches come from `rune.data.Loader`: epoch e is shuffled by
`fold_in(key, e)`, made on a background thread and placed on the device ahead
of the step. `--compute-dtype bfloat16` runs the forward and backward passes
in bfloat16 under `nn.Policy(param="float32", compute="bfloat16",
output="float32")`: parameters, their gradients and the Adam state stay
float32, the logits come back float32 for the loss.

Every step appends a line to a JSON-lines log (`rune.metrics.Logger`, --log,
next to the checkpoint by default): step, loss, learning rate, step time and
images/s; every epoch a line with the mean training loss and the test
accuracy. After every epoch (and when --max-steps stops a run mid-epoch) the
model, the optimizer state, the step count and the Loader's position
(`loader.state()`) are saved with `rune.save`, so --resume continues at the
same epoch and step with the same batches, and the log goes on from the next
step (`Logger(resume_step=)` drops what a stopped run logged past its last
checkpoint). `--tensorboard DIR` writes the same values as TensorBoard event
files (`tensorboard --logdir DIR` shows them).

Launched by `mpiexec -n N` it trains data-parallel (`rune.distributed`): the
Loader gives each process its share of every epoch's order, batches of
--batch-size each, and the jitted step ends by averaging the gradients over
the processes (`all_reduce(grads, "mean")`), so every process applies the
same update and the parameters stay bit-identical (checked after every
epoch). Process 0 prints, evaluates, logs and writes the checkpoint, which
every process reads on --resume. Needs mpi4py and an MPI:
pip install -e '.[distributed]'.

Needs scikit-learn and tqdm: pip install -e '.[examples]'
"""
import argparse
import os
import sys
import time

import numpy as np

import rune
import rune.distributed as dist
from rune import metrics, nn, nx, optim
from rune.data import Loader

CLASSES = 10


def load_data(test_fraction=0.2, seed=0):
    """(x_train, y_train), (x_test, y_test) as NumPy arrays: images (n, 8, 8, 1)
    scaled to [0, 1], integer labels; a fixed shuffled split."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(len(labels) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return (images[train], labels[train]), (images[test], labels[test])


class DigitsCNN(nn.Module):
    conv1: nn.Conv
    conv2: nn.Conv
    dense1: nn.Linear
    dense2: nn.Linear

    def __init__(self, key):
        k1, k2, k3, k4 = nx.random.split(key, 4)
        # He initialisation for the relu layers, Glorot for the logits, zero biases
        self.conv1 = nn.Conv(k1, 1, 16, (3, 3), weight_init=nn.he_normal, bias_init=nn.zeros)
        self.conv2 = nn.Conv(k2, 16, 32, (3, 3), weight_init=nn.he_normal, bias_init=nn.zeros)
        self.dense1 = nn.Linear(k3, 4 * 4 * 32, 64, weight_init=nn.he_normal, bias_init=nn.zeros)
        self.dense2 = nn.Linear(k4, 64, CLASSES, weight_init=nn.glorot_uniform, bias_init=nn.zeros)

    def __call__(self, images):
        h = nn.relu(self.conv1(images))
        h = nn.relu(self.conv2(h))
        h = nn.max_pool(h, 2)                                    # (n, 4, 4, 32)
        h = nn.relu(self.dense1(nx.reshape(h, (h.shape[0], -1))))
        return self.dense2(h)


def loss_fn(model, images, labels):
    return nx.mean(nn.cross_entropy(model(images), labels))


def make_step(optimizer, data_parallel=False):
    loss_and_grad = rune.value_and_grad(loss_fn)

    def step(model, opt_state, images, labels):
        loss, grads = loss_and_grad(model, images, labels)
        if data_parallel:  # one collective: the mean gradient and loss over every process's batch
            grads, loss = dist.all_reduce((grads, loss), "mean")
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss
    return rune.jit(step)


@rune.jit
def correct(model, images, labels):
    return nx.sum(nx.argmax(model(images), axis=-1) == labels)


def accuracy(model, images, labels, batch=512):
    hits = sum(int(correct(model, images[i:i + batch], labels[i:i + batch]))
               for i in range(0, images.shape[0], batch))
    return hits / images.shape[0]


def default_device():
    if not rune.devices("cuda"):
        return "cpu"
    return dist.device() if dist.size() > 1 else "cuda"  # a GPU per process of a node


def check_replicas(params):
    """Fail unless every process holds bit-identical parameters; returns their digest."""
    import hashlib
    data = b"".join(np.asarray(leaf).tobytes() for leaf in rune.tree.leaves(params))
    digest = np.frombuffer(hashlib.sha256(data).digest()[:8], np.int64)
    every = np.asarray(dist.all_gather(nx.asarray(digest)))
    if (every != digest).any():
        raise RuntimeError(f"parameters differ between processes: digests {every.view(np.uint64).tolist()}")
    return digest.view(np.uint64)[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--compute-dtype", choices=("float32", "bfloat16"), default="float32",
                        help="the dtype of the forward and backward passes (parameters stay float32)")
    parser.add_argument("--limit", type=int, default=None, help="use only this many training images")
    parser.add_argument("--max-steps", type=int, default=None,
                        help="stop (and checkpoint) after this many steps in all; --resume goes on from there")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: a GPU if listed)")
    parser.add_argument("--checkpoint", default=os.path.join("checkpoints", "digits.safetensors"))
    parser.add_argument("--log", default=None,
                        help="the JSON-lines metrics log (default: next to --checkpoint, ending in .jsonl)")
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    parser.add_argument("--tensorboard", metavar="DIR",
                        help="also write TensorBoard event files to DIR (needs tensorboardX: pip install "
                             "'rune[tensorboard]')")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true",
                        help="no tqdm bar (there is none either when stderr is not a terminal)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="host BLAS threads (default 1: this model's matrices are small)")
    args = parser.parse_args(argv)
    if args.log is None:
        args.log = os.path.splitext(args.checkpoint)[0] + ".jsonl"
    # The host's matmuls here are a few hundred kFLOP each: starting BLAS threads
    # for them costs more than it gives (ten times more on a busy 2-core machine).
    from threadpoolctl import threadpool_limits
    with threadpool_limits(args.blas_threads, user_api="blas"):
        return train(args)


def train(args):
    from tqdm import tqdm

    dist.initialize()
    world, lead = dist.size(), dist.rank() == 0   # process 0 prints, evaluates, logs and saves
    say = print if lead else (lambda *a, **k: None)
    device = args.device or default_device()
    (x_train, y_train), (x_test, y_test) = load_data(seed=args.seed)
    if args.limit:
        x_train, y_train = x_train[:args.limit], y_train[:args.limit]
    x_test, y_test = nx.asarray(x_test, device=device), nx.asarray(y_test, device=device)
    # Whole batches only (one compiled signature); under mpiexec each process takes its share.
    loader = Loader((x_train, y_train), args.batch_size, key=nx.random.key(args.seed + 1), drop_last=True,
                    device=device)

    optimizer = optim.adam(args.lr)
    policy = nn.Policy(param="float32", compute=args.compute_dtype, output="float32")
    model = rune.place(policy.apply(DigitsCNN(nx.random.key(args.seed))), device)
    if world > 1:   # the same key gives the same parameters; the broadcast makes sure of it
        model = dist.broadcast(model, root=0)
    state = {"model": model, "opt": optimizer.init(model), "data": loader.state(), "step": 0}
    if args.resume and os.path.exists(args.checkpoint):
        state = rune.load(args.checkpoint, device=device, like=state)
        loader.restore(state["data"])
        say(f"resumed from {args.checkpoint} at epoch {loader.state()['epoch'] + 1}, "
            f"step {loader.state()['step']} of {len(loader)} (step {int(state['step'])} in all)")
    model, opt_state, done = state["model"], state["opt"], int(state["step"])
    log = None
    if lead:   # a fresh run (done = 0) starts a fresh log; a resumed one keeps the lines up to its checkpoint
        os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
        log = metrics.Logger(args.log, resume_step=done, tensorboard=args.tensorboard)
    step = make_step(optimizer, data_parallel=world > 1)
    say(f"device {device}: {x_train.shape[0]} training / {x_test.shape[0]} test digits, "
        f"batch {args.batch_size}, Adam lr {args.lr}, compute {args.compute_dtype}"
        + (f", {world} processes (data parallel: {x_train.shape[0] // world} digits and batch "
           f"{args.batch_size} each)" if world > 1 else ""))

    def save():
        os.makedirs(os.path.dirname(os.path.abspath(args.checkpoint)), exist_ok=True)
        rune.save(args.checkpoint, {"model": model, "opt": opt_state, "data": loader.state(), "step": done})

    start = time.perf_counter()
    test_acc = accuracy(model, x_test, y_test) if lead else None
    stopped = args.max_steps is not None and done >= args.max_steps
    while loader.state()["epoch"] < args.epochs and not stopped:
        epoch, first = loader.state()["epoch"] + 1, loader.state()["step"]   # epochs count from 1 here
        # A bar only on a terminal: piped into a log or a CI job, its carriage returns are noise.
        bar = tqdm(total=len(loader) - first, desc=f"epoch {epoch}/{args.epochs}", leave=False, unit="batch",
                   disable=args.no_progress or not lead or not sys.stderr.isatty())
        total, count, tick = 0.0, 0, time.perf_counter()
        with iter(loader) as batches:
            for images, labels in batches:
                model, opt_state, loss = step(model, opt_state, images, labels)
                loss, done, count = float(loss), done + 1, count + 1
                now = time.perf_counter()
                seconds, tick = now - tick, now
                total += loss
                if lead:
                    log.log(done, loss=loss, lr=args.lr, step_time=seconds,
                            images_per_s=args.batch_size * world / seconds)
                bar.update()
                bar.set_postfix(loss=f"{total / count:.4f}", img_s=f"{args.batch_size * world / seconds:.0f}")
                if args.max_steps is not None and done >= args.max_steps:
                    stopped = True
                    break
        bar.close()
        if world > 1:
            say(f"parameters identical on all {world} ranks: {check_replicas(model):016x}")
        if not lead:
            continue
        test_acc = accuracy(model, x_test, y_test)
        save()
        if loader.state()["step"] == 0:   # the epoch ran to its end
            log.log(done, epoch=epoch, epoch_loss=total / max(count, 1), test_accuracy=test_acc)
            tqdm.write(f"epoch {epoch:3d}  loss {total / max(count, 1):.4f}  test accuracy {test_acc:.2%}  "
                       f"({time.perf_counter() - start:.1f} s)")
        else:
            tqdm.write(f"stopped at step {done} (--max-steps), epoch {epoch} step {loader.state()['step']}; "
                       f"test accuracy {test_acc:.2%}; --resume goes on from there")
    if world > 1:
        dist.barrier()   # the checkpoint is written before any process ends
        if not lead:
            return None
    log.close()
    seconds = time.perf_counter() - start
    print(f"final test accuracy {test_acc:.4f} in {seconds:.1f} s (chance {1 / CLASSES:.2f})")
    return test_acc


if __name__ == "__main__":
    main()
