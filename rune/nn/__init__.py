"""Neural networks: `rune.nn`.

- functional (rune/nn/functional.py): activations, losses, normalisation,
  dropout, pooling and initialisers, as `jax.nn` names them: composites of
  `rune.nx` functions with no rules of their own.
- the Module machinery (rune/nn/module.py): `Module`, a pytree whose array
  fields are its parameters; `partition`/`combine` to train a part; state and
  modes: `field(state=True)` (arrays that do not train), `trainable` (the
  filter of the ones that do), `Module.train()`/`.eval()`, `update_state` and
  `apply` (a call returning the model with its new state).
- layers by kind: linear.py (Linear, MLP), convolution.py (Conv,
  ConvTranspose), embedding.py (Embedding; its attend() is a tied read-out),
  normalization.py (LayerNorm, RMSNorm, BatchNorm, GroupNorm, InstanceNorm),
  pooling.py (MaxPool, AvgPool, AdaptiveAvgPool, GlobalAvgPool), stochastic.py
  (Dropout), attention.py (MultiHeadAttention and its parts causal_mask and
  dot_product_attention), containers.py (Sequential, Lambda); layer_helpers.py
  holds what they share.
- summarize.py: `summary(model, *example_args)`, a table of the layers.
- losses (rune/nn/losses.py): regression, binary, distribution and NLL losses
  with reduction="none"|"sum"|"mean" (cross_entropy is in functional).
- mixed precision (rune/nn/mixed_precision.py): `Policy` (dtypes of parameters,
  computation and outputs at module boundaries) and `DynamicLossScale`.
"""
from .functional import (avg_pool, cross_entropy, dropout, elu, gelu, glorot_normal, glorot_uniform,
                         he_normal, he_uniform, kaiming_normal, kaiming_uniform, layer_norm, leaky_relu,
                         lecun_normal, lecun_uniform, log_sigmoid, log_softmax, logsumexp, max_pool, normal,
                         one_hot, ones, orthogonal, relu, sigmoid, silu, softmax, softplus, swish,
                         truncated_normal, xavier_normal, xavier_uniform, zeros)
from .losses import (absolute_error, binary_cross_entropy, cosine_distance, cosine_similarity, huber_loss,
                     kl_divergence, l2_loss, nll_loss, sigmoid_binary_cross_entropy, smooth_l1_loss, squared_error)
from .mixed_precision import DynamicLossScale, Policy, all_finite, select_tree
from .module import Module, apply, combine, field, is_array, is_inexact_array, partition, trainable, update_state
from .attention import MultiHeadAttention, causal_mask, dot_product_attention
from .containers import Lambda, Sequential
from .convolution import Conv, ConvTranspose
from .embedding import Embedding
from .linear import MLP, Linear
from .pooling import AdaptiveAvgPool, AvgPool, GlobalAvgPool, MaxPool
from .normalization import BatchNorm, GroupNorm, InstanceNorm, LayerNorm, RMSNorm
from .stochastic import Dropout
from .summarize import summary
