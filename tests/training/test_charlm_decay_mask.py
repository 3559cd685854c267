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
