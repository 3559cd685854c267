"""Convolution layers (NHWC, kernels (*window, in, out) as `nx.conv` takes them)."""
import math

from .. import nx
from ..errors import ShapeError
from .layer_helpers import in_dtype_of, init_or_default, per_axis, split_keys
from .module import Module

__all__ = ["Conv", "ConvTranspose"]


def _kernel_size(name, kernel_size, in_channels, out_channels, groups):
    kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
    if not 1 <= len(kernel_size) <= 3:
        raise ShapeError(f"{name}: kernel_size must have 1 to 3 entries (spatial axes), got {kernel_size}")
    if in_channels % groups or out_channels % groups:
        raise ShapeError(f"{name}: in_channels {in_channels} and out_channels {out_channels} must divide by "
                         f"groups {groups}")
    return tuple(int(k) for k in kernel_size)


def _weights(key, shape, fan_in, use_bias, dtype, weight_init, bias_init):
    """(weight, bias): PyTorch's U(+-1/sqrt(fan_in)) unless initialisers are given."""
    wkey, bkey = split_keys(key, 2)
    weight = init_or_default(weight_init, wkey, shape, fan_in, dtype)
    return weight, init_or_default(bias_init, bkey, (shape[-1],), fan_in, dtype) if use_bias else None


def _batched(where, x, layer):
    """(x with a batch axis, whether one was added), x in the layer's dtype."""
    x = in_dtype_of(where, x, layer.weight)
    nd = len(layer.kernel_size)
    if x.ndim not in (nd + 1, nd + 2) or x.shape[-1] != layer.in_channels:
        raise ShapeError(f"{where}: expected an input (N, *spatial, {layer.in_channels}) "
                         f"or (*spatial, {layer.in_channels}) with {nd} spatial axes, got shape {x.shape}")
    single = x.ndim == nd + 1
    return (x[None] if single else x), single


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
        kernel_size = _kernel_size("Conv", kernel_size, in_channels, out_channels, groups)
        nd = len(kernel_size)
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = kernel_size
        self.strides = per_axis("Conv", "strides", strides, nd)
        self.dilation = per_axis("Conv", "dilation", dilation, nd)
        self.padding = padding if isinstance(padding, (str, int)) else tuple(tuple(p) for p in padding)
        fan_in = self.in_channels // self.groups * math.prod(kernel_size)
        self.weight, self.bias = _weights(key, kernel_size + (self.in_channels // self.groups, self.out_channels),
                                          fan_in, use_bias, dtype, weight_init, bias_init)

    def __call__(self, x):
        where = (f"Conv(in_channels={self.in_channels}, out_channels={self.out_channels}, "
                 f"kernel_size={self.kernel_size})")
        x, single = _batched(where, x, self)
        y = nx.conv(x, self.weight, self.strides, self.padding, self.dilation, self.groups)
        if self.bias is not None:
            y = y + self.bias
        return y[0] if single else y



def _transposed_pads(padding, output_padding, kernel_size, dilation):
    """The (lo, hi) padding of the ordinary convolution that computes a transposed
    one: the full window's overlap d * (k - 1), less the forward padding, plus the
    output padding on the high side (negative pads crop)."""
    nd = len(kernel_size)
    if isinstance(padding, str):
        if padding.upper() != "VALID":
            raise ShapeError(f"ConvTranspose: padding must be 'VALID', an int, or one int or (low, high) pair "
                             f"per spatial axis, got {padding!r}")
        padding = 0
    pairs = [(p, p) if isinstance(p, int) else tuple(p) for p in per_axis("ConvTranspose", "padding", padding, nd)]
    return tuple((d * (k - 1) - lo, d * (k - 1) - hi + op)
                 for (lo, hi), op, k, d in zip(pairs, output_padding, kernel_size, dilation))


class ConvTranspose(Module):
    """Transposed N-d convolution (PyTorch's ConvTranspose1d/2d/3d, the gradient of
    Conv with respect to its input, "deconvolution"): an (N, *spatial, C_in) input
    to (N, *out, C_out) with out = (n - 1) * stride - lo - hi + dilation * (k - 1)
    + output_padding + 1 per axis.

    kernel (*kernel_size, C_in / groups, C_out), initialised as PyTorch does.
    padding: the padding of the forward convolution this transposes (PyTorch's
    meaning: it crops the output): "VALID" or 0 (the default), an int, or one int
    or (low, high) pair per spatial axis. output_padding: extra size added on the
    high side of each axis (less than the stride or the dilation), to pick among
    the input sizes a strided forward convolution maps to one size.
    Computed as `nx.conv` of the input dilated by the strides (lhs_dilation)
    with the kernel flipped in space, so its gradients are convolutions too.
    """
    weight: object
    bias: object
    in_channels: int
    out_channels: int
    kernel_size: tuple
    strides: tuple
    padding: object
    output_padding: tuple
    dilation: tuple
    groups: int

    def __init__(self, key, in_channels, out_channels, kernel_size, strides=1, padding=0, output_padding=0,
                 dilation=1, groups=1, use_bias=True, dtype=nx.float32, weight_init=None, bias_init=None):
        kernel_size = _kernel_size("ConvTranspose", kernel_size, in_channels, out_channels, groups)
        nd = len(kernel_size)
        self.in_channels, self.out_channels, self.groups = int(in_channels), int(out_channels), int(groups)
        self.kernel_size = kernel_size
        self.strides = per_axis("ConvTranspose", "strides", strides, nd)
        self.dilation = per_axis("ConvTranspose", "dilation", dilation, nd)
        self.output_padding = per_axis("ConvTranspose", "output_padding", output_padding, nd)
        if any(op >= max(s, d) or op < 0 for op, s, d in zip(self.output_padding, self.strides, self.dilation)):
            raise ShapeError(f"ConvTranspose: output_padding {self.output_padding} must be non-negative and "
                             f"smaller than the strides {self.strides} or the dilation {self.dilation}")
        self.padding = padding if isinstance(padding, (str, int)) else tuple(
            p if isinstance(p, int) else tuple(p) for p in padding)
        fan_in = self.out_channels // self.groups * math.prod(kernel_size)   # PyTorch's: weight.size(1) * k
        self.weight, self.bias = _weights(key, kernel_size + (self.in_channels // self.groups, self.out_channels),
                                          fan_in, use_bias, dtype, weight_init, bias_init)

    def __call__(self, x):
        where = (f"ConvTranspose(in_channels={self.in_channels}, out_channels={self.out_channels}, "
                 f"kernel_size={self.kernel_size})")
        x, single = _batched(where, x, self)
        pads = _transposed_pads(self.padding, self.output_padding, self.kernel_size, self.dilation)
        kernel = nx.flip(self.weight, tuple(range(len(self.kernel_size))))
        y = nx.conv(x, kernel, 1, pads, self.dilation, self.groups, lhs_dilation=self.strides)
        if self.bias is not None:
            y = y + self.bias
        return y[0] if single else y
