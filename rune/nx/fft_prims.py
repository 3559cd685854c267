"""The FFT primitive: one library call (NumPy's pocketfft on the host) over
the trailing `len(lengths)` axes, in NumPy's default ("backward")
normalization. `kind` is one of
  fft   complex -> complex, the unnormalized DFT;
  ifft  complex -> complex, the inverse DFT (divided by the transform size);
  rfft  real -> complex, the DFT's non-negative frequencies (last axis n -> n // 2 + 1);
  irfft complex -> real, the inverse of rfft (last axis n // 2 + 1 -> n).
`lengths` are the transform sizes (the output sizes for irfft). nx.fft
(rune/nx/fft.py) moves the user's axes to the end, pads or truncates to `n`/`s`
and scales for `norm`; derivative and batching rules: rune/fft_rules.py.
"""
from ..core.aval import Aval
from ..core.primitive import abstract_rules, primitive
from ..errors import DTypeError
from ..core import dtypes as dt

fft_p = primitive("fft")
KINDS = ("fft", "ifft", "rfft", "irfft")


def _fft(x, *, kind, lengths):
    k = len(lengths)
    lead, last = x.shape[:-k], tuple(lengths)
    if kind == "rfft":
        if not dt.is_float(x.dtype):
            raise DTypeError(f"fft (rfft): expected a real float operand, got {x.dtype.name}")
        return Aval(lead + last[:-1] + (last[-1] // 2 + 1,), dt.complex_dtype(x.dtype), x.device)
    if not dt.is_complex(x.dtype):
        raise DTypeError(f"fft ({kind}): expected a complex operand, got {x.dtype.name}")
    if kind == "irfft":
        return Aval(lead + last, dt.real_dtype(x.dtype), x.device)
    return Aval(x.shape, x.dtype, x.device)


abstract_rules[fft_p] = _fft
