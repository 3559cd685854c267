"""Window geometry shared by the convolution and pooling primitives, their
rules and the backends: how far dilated elements reach, how many windows fit."""


def dilate(n, d):
    """The extent of `n` elements with `d - 1` holes between neighbours."""
    return 0 if n == 0 else (n - 1) * d + 1


def window_count(n, window, stride, lo=0, hi=0, dilation=1, window_dilation=1):
    """How many windows fit along one axis (padding may be negative: a crop)."""
    span = dilate(n, dilation) + lo + hi
    extent = dilate(window, window_dilation)
    return 0 if span < extent else (span - extent) // stride + 1
