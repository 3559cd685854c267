"""Constants of rune's numeric rules that its eager backends and its kernel renderer
both compute with, kept in one place so that every target follows the same rule.

HYPOT_SCALES: part dtype -> (big, down, small, up) for hypot (and |z|): when either
operand exceeds `big` both are scaled by `down` and the root by 1/down; when both
are below `small`, by `up` and 1/up. Powers of two, so the scaling is exact but for
an underflow of the smaller operand that cannot show beside the larger one's
square. The bands keep the larger operand's square normal and finite: float32
parts span 277 binades, squares stay safe over about 125.
"""
import numpy as np

HYPOT_SCALES = {
    np.dtype(np.float32): (2.0 ** 50, 2.0 ** -70, 2.0 ** -50, 2.0 ** 100),
    np.dtype(np.float64): (2.0 ** 500, 2.0 ** -600, 2.0 ** -500, 2.0 ** 600),
}
