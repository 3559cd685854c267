"""The NumPy surface rune.nx covers: jax.numpy's public callables (a snapshot, so the
test needs no JAX), and NumPy's callables rune leaves out on purpose, each with why.

JAX_NUMPY was written from jax 0.10.2 beside NumPy 2.4.6 with
`sorted(n for n in dir(jax.numpy) if not n.startswith("_") and callable(getattr(jax.numpy, n)))`;
JAX_LINALG likewise from `jax.numpy.linalg`."""

JAX_NUMPY = frozenset("""
abs absolute acos acosh add all allclose amax amin angle any append apply_along_axis apply_over_axes arange
arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin argpartition argsort argwhere around array
array_equal array_equiv array_repr array_split array_str asarray asin asinh astype atan atan2 atanh atleast_1d
atleast_2d atleast_3d average bartlett bfloat16 bincount bitwise_and bitwise_count bitwise_invert
bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift bitwise_xor blackman block bool bool_
broadcast_arrays broadcast_shapes broadcast_to can_cast cbrt cdouble ceil character choose clip column_stack
complex128 complex64 complex_ complexfloating compress concat concatenate conj conjugate convolve copy copysign
corrcoef correlate cos cosh count_nonzero cov cross csingle cumprod cumsum cumulative_prod cumulative_sum
deg2rad degrees delete diag diag_indices diag_indices_from diagflat diagonal diff digitize divide divmod dot
double dsplit dstack dtype ediff1d einsum einsum_path empty empty_like equal exp exp2 expand_dims expm1 extract
eye fabs fill_diagonal finfo flatnonzero flexible flip fliplr flipud float16 float32 float64 float_ float_power
floating floor floor_divide fmax fmin fmod frexp from_dlpack frombuffer fromfile fromfunction fromiter
frompyfunc fromstring full full_like gcd generic geomspace get_printoptions gradient greater greater_equal
hamming hanning heaviside histogram histogram2d histogram_bin_edges histogramdd hsplit hstack hypot i0 identity
iinfo imag indices inexact inner insert int16 int32 int64 int8 int_ integer interp intersect1d invert isclose
iscomplex iscomplexobj isdtype isfinite isin isinf isnan isneginf isposinf isreal isrealobj isscalar issubdtype
iterable ix_ kaiser kron lcm ldexp left_shift less less_equal lexsort linspace load log log10 log1p log2
logaddexp logaddexp2 logical_and logical_not logical_or logical_xor logspace mask_indices matmul
matrix_transpose matvec max maximum mean median meshgrid min minimum mod modf moveaxis multiply nan_to_num
nanargmax nanargmin nancumprod nancumsum nanmax nanmean nanmedian nanmin nanpercentile nanprod nanquantile
nanstd nansum nanvar ndarray ndim negative nextafter nonzero not_equal number object_ ones ones_like outer
packbits pad partition percentile permute_dims piecewise place poly polyadd polyder polydiv polyfit polyint
polymul polysub polyval positive pow power printoptions prod promote_types ptp put put_along_axis quantile
rad2deg radians ravel ravel_multi_index real reciprocal remainder repeat reshape resize result_type
right_shift rint roll rollaxis roots rot90 round save savez searchsorted select set_printoptions setdiff1d
setxor1d shape sign signbit signedinteger sin sinc single sinh size sort sort_complex spacing split sqrt square
squeeze stack std subtract sum swapaxes take take_along_axis tan tanh tensordot tile trace trapezoid
transpose tri tril tril_indices tril_indices_from trim_zeros triu triu_indices triu_indices_from true_divide
trunc ufunc uint uint16 uint32 uint64 uint8 union1d unique unique_all unique_counts unique_inverse
unique_values unpackbits unravel_index unsignedinteger unstack unwrap vander var vdot vecdot vecmat vectorize
vsplit vstack where zeros zeros_like
""".split())

JAX_LINALG = frozenset("""
cholesky cond cross det diagonal eig eigh eigvals eigvalsh inv lstsq matmul matrix_norm matrix_power
matrix_rank matrix_transpose multi_dot norm outer pinv qr slogdet solve svd svdvals tensordot tensorinv
tensorsolve trace vecdot vector_norm
""".split())

# NumPy callables jax.numpy has that rune.nx leaves out, and why.
EXCLUDED = {
    # files and text: rune arrays go through NumPy for I/O (np.save(path, np.asarray(x))) and
    # checkpoints through rune.save / rune.load (safetensors)
    "load": "file I/O", "save": "file I/O", "savez": "file I/O", "fromfile": "file I/O",
    "fromstring": "text parsing",
    # printing options belong to NumPy, which prints rune arrays' values
    "array_repr": "printing", "array_str": "printing", "printoptions": "printing",
    "get_printoptions": "printing", "set_printoptions": "printing",
    # Python-object helpers: rune arrays hold numbers, never Python objects
    "frompyfunc": "Python objects", "object_": "Python objects", "ufunc": "NumPy's ufunc class",
}
