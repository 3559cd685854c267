"""Neural networks: `rune.nn`.

- functional (rune/nn/functional.py): activations, losses, normalisation,
  dropout, pooling and initialisers, as `jax.nn` names them: composites of
  `rune.nx` functions with no rules of their own.
- layers (rune/nn/modules.py): `Module`, a pytree whose array fields are its
  parameters, and Linear, Conv, Embedding, LayerNorm, RMSNorm, Dropout,
  MultiHeadAttention, MLP, Sequential; `partition`/`combine` to train a part.
- mixed precision (rune/nn/mixed_precision.py): `Policy` (dtypes of parameters,
  computation and outputs at module boundaries) and `DynamicLossScale`.
"""
from .functional import (avg_pool, cross_entropy, dropout, elu, gelu, glorot_normal, glorot_uniform,
                         he_normal, he_uniform, kaiming_normal, kaiming_uniform, layer_norm, leaky_relu,
                         lecun_normal, lecun_uniform, log_sigmoid, log_softmax, logsumexp, max_pool, normal,
                         one_hot, ones, relu, sigmoid, silu, softmax, softplus, swish, xavier_normal,
                         xavier_uniform, zeros)
from .mixed_precision import DynamicLossScale, Policy, all_finite, select_tree
from .modules import (MLP, Conv, Dropout, Embedding, Lambda, LayerNorm, Linear, Module, MultiHeadAttention,
                      RMSNorm, Sequential, combine, is_array, is_inexact_array, partition)
