"""Convolution layers (NHWC, kernels (*window, in, out) as `nx.conv` takes them)."""
import math

from .. import nx
from ..errors import ShapeError
from .layer_helpers import in_dtype_of, init_or_default, per_axis, split_keys
from .module import Module

__all__ = ["Conv"]


class Conv(Module):
    """N-d convolution (cross-correlation) of an (N, *spatial, C_in) or (*spatial,
    C_in) input with a (*kernel_size, C_in / groups, C_out) kernel (NHWC, `nx.conv`).

    kernel_size: a tuple with one entry per spatial axis (its length gives 1, 2 or
    3 spatial axes), or an int for a square 2-d window. padding: "SAME" (the
    default, as Flax), "VALID", or (low, high) pairs.
    """
    weight: object
    bias: object
    in_channels: int
    out_channels: int
    kernel_size: tuple
    strides: tuple
    padding: object
    dilation: tuple
    groups: int

    def __init__(self, key, in_channels, out_channels, kernel_size, strides=1, padding="SAME", dilation=1,
                 groups=1, use_bias=True, dtype=nx.float32, weight_init=None, bias_init=None):
        kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        nd = len(kernel_size)
        if not 1 <= nd <= 3:
            raise ShapeError(f"Conv: kernel_size must have 1 to 3 entries (spatial axes), got {kernel_size}")
        if in_channels % groups or out_channels % groups:
            raise ShapeError(f"Conv: in_channels {in_channels} and out_channels {out_channels} must divide by "
                             f"groups {groups}")
        wkey, bkey = split_keys(key, 2)
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = kernel_size
        self.strides = per_axis("Conv", "strides", strides, nd)
        self.dilation = per_axis("Conv", "dilation", dilation, nd)
        self.padding = padding if isinstance(padding, (str, int)) else tuple(tuple(p) for p in padding)
        fan_in = self.in_channels // self.groups * math.prod(kernel_size)
        self.weight = init_or_default(weight_init, wkey, kernel_size + (self.in_channels // self.groups, self.out_channels),
                            fan_in, dtype)
        self.bias = init_or_default(bias_init, bkey, (self.out_channels,), fan_in, dtype) if use_bias else None

    def __call__(self, x):
        where = (f"Conv(in_channels={self.in_channels}, out_channels={self.out_channels}, "
                 f"kernel_size={self.kernel_size})")
        x = in_dtype_of(where, x, self.weight)
        nd = len(self.kernel_size)
        if x.ndim not in (nd + 1, nd + 2) or x.shape[-1] != self.in_channels:
            raise ShapeError(f"{where}: expected an input (N, *spatial, {self.in_channels}) "
                             f"or (*spatial, {self.in_channels}) with {nd} spatial axes, got shape {x.shape}")
        single = x.ndim == nd + 1
        y = nx.conv(x[None] if single else x, self.weight, self.strides, self.padding, self.dilation, self.groups)
        if self.bias is not None:
            y = y + self.bias
        return y[0] if single else y

