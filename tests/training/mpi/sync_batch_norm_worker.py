"""Each of two ranks holds half a batch; BatchNorm(sync=True) on the halves must
give each rank its rows of a plain BatchNorm on the whole batch, the same
running statistics, its rows of the input's gradient, and the parameters'
gradients of the whole batch's loss (summed over the ranks, as data-parallel
training sums them)."""
import numpy as np

import rune
from rune import distributed, nn, nx

rank, size = distributed.rank(), distributed.size()
assert size == 2, size
x = np.random.default_rng(0).normal(size=(6, 3, 4)) * 2 + 1
ct = np.random.default_rng(1).normal(size=(6, 3, 4))
rows = slice(3 * rank, 3 * rank + 3)
whole = nn.BatchNorm(4, momentum=0.5, dtype=nx.float64)
synced = nn.BatchNorm(4, momentum=0.5, sync=True, dtype=nx.float64)


def loss(model, x, ct):
    y, new = nn.apply(model, x)
    return nx.sum(y * ct), (y, new)


grad = rune.value_and_grad(loss, argnums=(0, 1), has_aux=True)
(_, (y_whole, new_whole)), (g_whole, gx_whole) = grad(whole, nx.asarray(x), ct)
(_, (y_sync, new_sync)), (g_sync, gx_sync) = grad(synced, nx.asarray(x[rows]), ct[rows])
np.testing.assert_allclose(np.asarray(y_sync), np.asarray(y_whole)[rows], atol=1e-12)
for name in ("running_mean", "running_var"):
    np.testing.assert_allclose(np.asarray(getattr(new_sync, name)), np.asarray(getattr(new_whole, name)),
                               atol=1e-12)
# the input's gradient reaches across the ranks through the shared statistics
np.testing.assert_allclose(np.asarray(gx_sync), np.asarray(gx_whole)[rows], atol=1e-10)
summed = distributed.all_reduce(g_sync)
np.testing.assert_allclose(np.asarray(summed.weight), np.asarray(g_whole.weight), atol=1e-10)
np.testing.assert_allclose(np.asarray(summed.bias), np.asarray(g_whole.bias), atol=1e-10)
print(f"OK rank {rank}", flush=True)
