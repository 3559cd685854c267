"""The char-LM example's weight decay: AdamW's decay reaches the weight matrices
and embeddings only, never the biases or the layer norms."""
import numpy as np
from test_examples import _example

import rune
from rune import nx


def test_the_char_lm_decays_matrices_but_not_biases_or_norms():
    charlm = _example("train_charlm")
    model = charlm.CharTransformer(nx.random.key(0), vocab=11, seq_len=8, d_model=8, heads=2, layers=1)
    paths = [path for path, _ in rune.tree.flatten_with_paths(model)[0]]
    flags = dict(zip(paths, rune.tree.leaves(charlm.decay_mask(model))))
    assert flags[".embed.weight"] and flags[".readout.weight"] and flags[".blocks[0].up.weight"]
    assert not flags[".blocks[0].up.bias"] and not flags[".ln_f.weight"] and not flags[".blocks[0].ln1.bias"]
    lr, wd = 1e-2, 0.1
    optimizer, schedule = charlm.make_optimizer(lr, steps=1, weight_decay=wd)
    # zero gradients: Adam's direction is 0, so the first update is the decay alone,
    # -lr(0) * wd * p on the masked leaves and 0 elsewhere; the schedule's rate at step 1 is lr
    zeros = rune.tree.map(nx.zeros_like, model)
    state = optimizer.update(zeros, optimizer.init(model), model)[1]
    updates, _ = optimizer.update(zeros, state, model)
    rate = float(schedule(1))
    assert abs(rate - lr) < 1e-9
    for path, p, u in zip(paths, rune.tree.leaves(model), rune.tree.leaves(updates)):
        want = -rate * wd * np.asarray(p) if flags[path] else np.zeros(p.shape)
        np.testing.assert_allclose(np.asarray(u), want, rtol=1e-6, atol=1e-12, err_msg=path)


def test_the_char_lm_accumulates_k_batches_into_one_update():
    # --accumulate 2: two half batches make the update that one whole batch makes
    # (the loss is a mean over the batch, so the gradients' mean is the whole batch's)
    charlm = _example("train_charlm")
    model = charlm.CharTransformer(nx.random.key(1), vocab=7, seq_len=6, d_model=8, heads=2, layers=1)
    tokens = nx.random.randint(nx.random.key(2), (4, 7), 0, 7, nx.int32)
    grad = rune.grad(charlm.loss_fn)
    whole, _ = charlm.make_optimizer(1e-2, steps=20, weight_decay=0.1)
    split, _ = charlm.make_optimizer(1e-2, steps=40, weight_decay=0.1, accumulate=2)
    g = grad(model, tokens)
    # a first update for each (the warm-up's rate at update 0 is 0), then the one compared
    w_state = whole.update(g, whole.init(model), model)[1]
    want, _ = whole.update(g, w_state, model)
    state = split.init(model)
    for _ in range(2):
        state = split.update(g, state, model)[1]
    first, state = split.update(grad(model, tokens[:2]), state, model)
    got, state = split.update(grad(model, tokens[2:]), state, model)
    assert all(not np.any(np.asarray(u)) for u in rune.tree.leaves(first))   # no update on the first half
    assert any(np.any(np.asarray(u)) for u in rune.tree.leaves(want))
    for g, w in zip(rune.tree.leaves(got), rune.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-4, atol=1e-7)
