"""Parameter initializers with ``jax.nn.initializers``' names, arguments and results.

An *initializer* is a function ``init(key, shape, dtype=None) -> array``: ``key`` is a
functx.random key, ``shape`` an int or a tuple of ints and ``dtype`` the result's dtype
(None: float64, functx's default float dtype, as ``jnp.float_`` with ``jax_enable_x64``).
The builders (:func:`he_normal`, :func:`variance_scaling`, :func:`orthogonal`...) return
initializers; :func:`zeros` and :func:`ones` are initializers themselves::

    >>> import functx.random as fxr, functx.nn.init as init
    >>> k1, k2 = fxr.split(fxr.key(0))
    >>> w = init.he_normal()(k1, (784, 256), np.float32)          # a dense kernel (in, out)
    >>> c = init.glorot_uniform()(k2, (3, 3, 16, 32))              # a conv kernel (HWIO)
    >>> b = init.zeros(k2, (256,))

Fans. :func:`variance_scaling` (and so the Glorot, He and LeCun initializers) scales by the
kernel's fans, computed by :func:`compute_fans` as JAX does: ``in_axis`` (default -2) and
``out_axis`` (default -1) hold the input and output features, ``batch_axis`` (default none)
axes that are ignored, and every other axis is the *receptive field* (a convolution's
spatial axes): ``fan_in = in_size * receptive_field_size`` and ``fan_out = out_size *
receptive_field_size``. The defaults fit dense kernels ``(in, out)`` and convolution kernels
in JAX's HWIO layout ``(*spatial, in, out)``. For PyTorch's OIHW layout ``(out, in,
*spatial)`` pass ``in_axis=1, out_axis=0``.

Values. The draws are functx.random's, which reproduce ``jax.random`` (bit for bit for
uniform, to rounding for the normals), and the scale constants are JAX's, computed in the
result dtype as JAX does: with the same key, shape and dtype an initializer returns JAX's
values to rounding. :func:`orthogonal` orthonormalises the columns of a normal draw with
Gram-Schmidt (twice, in blocks) where JAX calls a QR factorisation: the result is the same
matrix, the Q of the QR factorisation whose R has a positive diagonal.

Every initializer is a composite of functx operations: it works on any device (the result
lives on the key's device), under ``jit`` and under ``vmap`` over a batch of keys.

Dtypes: float16, float32, float64 and complex64/complex128 (complex draws as in JAX: a
uniform disk, or a normal truncated in modulus). bfloat16 results are float32 draws
rounded to bfloat16 (their values differ from JAX's bfloat16 draws).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Literal, Protocol, Sequence

import numpy as np

import functx.numpy as fnp
from functx import random as fxr
from functx.errors import ArgumentError, DTypeError, ShapeError
from functx.random._prng import check_key

__all__ = [
    "Initializer", "compute_fans", "zeros", "ones", "constant", "uniform", "normal",
    "truncated_normal", "variance_scaling", "glorot_uniform", "glorot_normal",
    "xavier_uniform", "xavier_normal", "lecun_uniform", "lecun_normal", "he_uniform",
    "he_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "delta_orthogonal",
]

DTypeLike = Any
Array = Any
# The standard deviation of a standard normal truncated to (-2, 2), and JAX's constant for
# the complex normal truncated to modulus 2 (see variance_scaling).
TRUNCATED_NORMAL_STDDEV = 0.87962566103423978
COMPLEX_TRUNCATED_NORMAL_STDDEV = 0.95311164380491208
_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")
# Columns orthonormalised together by orthogonal's block Gram-Schmidt.
_BLOCK = 32


class Initializer(Protocol):
    """The type of an initializer: ``init(key, shape, dtype=None) -> array``."""

    def __call__(self, key: Array, shape: int | Sequence[int],
                 dtype: DTypeLike = None) -> Array: ...


# ----------------------------------------------------------------------------------------
# Arguments


def _shape(name: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise ArgumentError(f"functx.nn.init.{name}: shape must be an int or a sequence of "
                            f"ints, but got {shape!r:.60}.") from None
    if any(d < 0 for d in out):
        raise ArgumentError(f"functx.nn.init.{name}: shape {out} has a negative dimension.")
    return out


def _float_dtype(name: str, dtype: DTypeLike, complex_ok: bool = True) -> np.dtype:
    dt = np.dtype(np.float64 if dtype is None else dtype)
    if dt.kind not in ("fc" if complex_ok else "f") and dt.name != "bfloat16":
        kinds = "floating-point or complex" if complex_ok else "real floating-point"
        raise DTypeError(f"functx.nn.init.{name} draws {kinds} values, but dtype {dt.name} "
                         "is not one. Pass e.g. dtype=np.float32, or leave it out for "
                         "float64.")
    return dt


def _work_dtype(dt: np.dtype) -> np.dtype:
    """The dtype the draws are made in: ``dt``, but float32 for bfloat16."""
    return np.dtype(np.float32) if dt.name == "bfloat16" else dt


def _finish(x: Array, dt: np.dtype) -> Array:
    return x if np.dtype(x.dtype) == dt else fnp.astype(x, dt)


def _axis(name: str, what: str, axis: Any, ndim: int) -> int:
    try:
        a = operator.index(axis)
    except TypeError:
        raise ArgumentError(f"functx.nn.init.{name}: {what} must be an int, but got "
                            f"{axis!r:.60}.") from None
    if not -ndim <= a < ndim:
        raise ArgumentError(f"functx.nn.init.{name}: {what}={a} is out of range for a "
                            f"{ndim}-d shape.")
    return a % ndim


def _axes(what: str, axes: Any, shape: tuple[int, ...]) -> int:
    """The product of the sizes of ``axes`` (an int or a sequence of ints) in ``shape``."""
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    size = 1
    for a in axes:
        size *= shape[_axis("compute_fans", what, a, len(shape))]
    return size


def compute_fans(shape: Sequence[int], in_axis: int | Sequence[int] = -2,
                 out_axis: int | Sequence[int] = -1,
                 batch_axis: int | Sequence[int] = ()) -> tuple[float, float]:
    """The effective input and output sizes (``fan_in``, ``fan_out``) of a kernel.

    As ``jax.nn.initializers``: the axes in none of ``in_axis``, ``out_axis`` and
    ``batch_axis`` are the receptive field (a convolution's spatial axes), of size
    ``prod(shape) / in_size / out_size / batch_size``; ``fan_in = in_size *
    receptive_field_size`` and ``fan_out = out_size * receptive_field_size`` (floats,
    computed in that order, so they are JAX's to the bit).

    Args:
        shape: the kernel's shape.
        in_axis: the axis (or axes) of the input features.
        out_axis: the axis (or axes) of the output features.
        batch_axis: axes to ignore (e.g. a stack of independent kernels).

    Returns:
        ``(fan_in, fan_out)`` as floats.

    Raises:
        ShapeError: ``shape`` has fewer than 2 dimensions and ``in_axis`` is the default.
        ArgumentError: an axis is out of range.
        ZeroDivisionError: one of the named axes has size 0.

    Example:
        >>> compute_fans((3, 3, 16, 32))    # a 3x3 conv kernel, 16 -> 32 channels (HWIO)
        (144.0, 288.0)
        >>> compute_fans((64, 16, 3, 3), in_axis=1, out_axis=0)   # PyTorch's OIHW
        (144.0, 576.0)
    """
    shape = tuple(operator.index(d) for d in shape)
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ShapeError(f"functx.nn.init: cannot compute the fans of a {len(shape)}-d "
                         f"kernel of shape {shape} with the default in_axis=-2; a kernel has "
                         "at least 2 dimensions (or pass in_axis explicitly).")
    in_size = _axes("in_axis", in_axis, shape)
    out_size = _axes("out_axis", out_axis, shape)
    batch_size = _axes("batch_axis", batch_axis, shape)
    receptive_field_size = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field_size, out_size * receptive_field_size


# ----------------------------------------------------------------------------------------
# Constants


def zeros(key: Array, shape: int | Sequence[int], dtype: DTypeLike = None) -> Array:
    """An initializer: an array of zeros (``key`` is ignored but for the device).

    Args:
        key: a functx.random key; the result lives on its device.
        shape: the result's shape.
        dtype: the result's dtype (default float64); any dtype.

    Returns:
        An array of zeros.

    Example:
        >>> init.zeros(fxr.key(0), (2, 3), np.float32)
    """
    return fnp.zeros(_shape("zeros", shape), np.float64 if dtype is None else dtype, like=key)


def ones(key: Array, shape: int | Sequence[int], dtype: DTypeLike = None) -> Array:
    """An initializer: an array of ones (``key`` is ignored but for the device).

    Args:
        key: a functx.random key; the result lives on its device.
        shape: the result's shape.
        dtype: the result's dtype (default float64); any dtype.

    Returns:
        An array of ones.

    Example:
        >>> init.ones(fxr.key(0), (3,))
    """
    return fnp.ones(_shape("ones", shape), np.float64 if dtype is None else dtype, like=key)


def constant(value: Any, dtype: DTypeLike = None) -> Initializer:
    """An initializer that fills arrays with ``value``.

    Args:
        value: the fill value (a number, or an array that broadcasts to the shape).
        dtype: the initializer's default dtype (None: float64).

    Returns:
        ``init(key, shape, dtype=dtype)`` returning ``full(shape, value, dtype)``.

    Example:
        >>> init.constant(-7.0)(fxr.key(0), (2, 3), np.float32)
    """
    def init(key: Array, shape: int | Sequence[int], dtype: DTypeLike = dtype) -> Array:
        return fnp.full(_shape("constant", shape), value,
                        np.float64 if dtype is None else dtype, like=key)

    return init


# ----------------------------------------------------------------------------------------
# Plain distributions


def uniform(scale: float = 1e-2, dtype: DTypeLike = None) -> Initializer:
    """An initializer drawing uniformly from ``[0, scale)`` (as ``jax.nn.initializers``).

    Args:
        scale: the upper bound.
        dtype: the initializer's default dtype (None: float64); real only.

    Returns:
        ``init(key, shape, dtype=dtype)``.

    Raises:
        DTypeError (when called): the dtype is not a real floating-point dtype.

    Example:
        >>> init.uniform(10.0)(fxr.key(42), (2, 3))
    """
    def init(key: Array, shape: int | Sequence[int], dtype: DTypeLike = dtype) -> Array:
        dt = _float_dtype("uniform", dtype, complex_ok=False)
        wdt = _work_dtype(dt)
        x = fxr.uniform(check_key("functx.nn.init.uniform", key), _shape("uniform", shape),
                        wdt)
        return _finish(fnp.multiply(x, np.asarray(scale, wdt)), dt)

    return init


def normal(stddev: float = 1e-2, dtype: DTypeLike = None) -> Initializer:
    """An initializer drawing from a normal distribution of mean 0 and ``stddev``.

    Args:
        stddev: the standard deviation.
        dtype: the initializer's default dtype (None: float64); complex dtypes draw real
            and imaginary parts with variance ``stddev**2 / 2`` each.

    Returns:
        ``init(key, shape, dtype=dtype)``.

    Raises:
        DTypeError (when called): the dtype is not floating-point or complex.

    Example:
        >>> init.normal(0.02)(fxr.key(0), (512, 512), np.float32)
    """
    def init(key: Array, shape: int | Sequence[int], dtype: DTypeLike = dtype) -> Array:
        dt = _float_dtype("normal", dtype)
        wdt = _work_dtype(dt)
        x = fxr.normal(check_key("functx.nn.init.normal", key), _shape("normal", shape), wdt)
        return _finish(fnp.multiply(x, np.asarray(stddev, wdt)), dt)

    return init


def truncated_normal(stddev: float = 1e-2, dtype: DTypeLike = None, lower: float = -2.0,
                     upper: float = 2.0) -> Initializer:
    """An initializer drawing from a normal distribution truncated to
    ``(lower * stddev, upper * stddev)``.

    As in JAX, ``stddev`` is the standard deviation *before* truncation (the draws' is
    smaller: 0.88 * stddev with the default bounds); :func:`variance_scaling` corrects for
    the truncation, this does not. The argument order is JAX's (``dtype`` second).

    Args:
        stddev: the standard deviation of the untruncated normal.
        dtype: the initializer's default dtype (None: float64); real only.
        lower, upper: the bounds, in units of ``stddev``.

    Returns:
        ``init(key, shape, dtype=dtype)``.

    Raises:
        DTypeError (when called): the dtype is not a real floating-point dtype.

    Example:
        >>> init.truncated_normal(0.02)(fxr.key(0), (768, 768), np.float32)
    """
    def init(key: Array, shape: int | Sequence[int], dtype: DTypeLike = dtype) -> Array:
        dt = _float_dtype("truncated_normal", dtype, complex_ok=False)
        wdt = _work_dtype(dt)
        x = fxr.truncated_normal(check_key("functx.nn.init.truncated_normal", key), lower,
                                 upper, _shape("truncated_normal", shape), wdt)
        return _finish(fnp.multiply(x, np.asarray(stddev, wdt)), dt)

    return init


# ----------------------------------------------------------------------------------------
# Variance scaling


def _real_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(np.zeros((), dt).real.dtype)


def _polar(key: Array, radius: Array, dt: np.dtype) -> Array:
    """``radius * exp(i theta)`` for a uniform angle ``theta`` drawn with ``key``."""
    rdt = _real_dtype(dt)
    theta = fnp.multiply(fxr.uniform(key, tuple(radius.shape), rdt), np.asarray(2 * np.pi, rdt))
    re = fnp.astype(fnp.multiply(radius, fnp.cos(theta)), dt)
    im = fnp.astype(fnp.multiply(radius, fnp.sin(theta)), dt)
    return fnp.add(re, fnp.multiply(im, np.asarray(1j, dt)))


def _complex_uniform(key: Array, shape: tuple[int, ...], dt: np.dtype) -> Array:
    """Uniform on a disk of the complex plane, mean 0 and ``E|z|^2 = 1``."""
    k_r, k_theta = fxr.split(key)
    rdt = _real_dtype(dt)
    radius = fnp.sqrt(fnp.multiply(fxr.uniform(k_r, shape, rdt), np.asarray(2, rdt)))
    return _polar(k_theta, radius, dt)


def _complex_truncated_normal(key: Array, upper: float, shape: tuple[int, ...],
                              dt: np.dtype) -> Array:
    """A complex normal (``E|z|^2 = 1`` before truncation) with its modulus truncated to
    ``upper``: ``|z|^2`` is an exponential variable truncated to ``upper**2``."""
    k_r, k_theta = fxr.split(key)
    rdt = _real_dtype(dt)
    t = fnp.multiply(fxr.uniform(k_r, shape, rdt), np.asarray(-math.expm1(-upper ** 2), rdt))
    radius = fnp.sqrt(fnp.negative(fnp.log1p(fnp.negative(t))))
    return _polar(k_theta, radius, dt)


def variance_scaling(scale: float,
                     mode: Literal["fan_in", "fan_out", "fan_avg", "fan_geo_avg"],
                     distribution: Literal["truncated_normal", "normal", "uniform"],
                     in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                     batch_axis: int | Sequence[int] = (),
                     dtype: DTypeLike = None) -> Initializer:
    """An initializer whose variance is ``scale / n``, ``n`` from the kernel's fans.

    ``n`` is ``fan_in`` (``mode="fan_in"``), ``fan_out``, their mean (``"fan_avg"``) or
    their geometric mean (``"fan_geo_avg"``), with the fans of :func:`compute_fans`. The
    draws have mean 0 and standard deviation ``sqrt(scale / n)``:

    * ``"truncated_normal"``: a normal truncated to two of its standard deviations, scaled
      up by ``1 / 0.8796...`` so that the truncated draws have the target variance
      (complex: the modulus is truncated, with JAX's constant ``0.9531...``, which leaves
      the variance 1.9 % above the target, as in JAX);
    * ``"normal"``: a normal;
    * ``"uniform"``: uniform on ``[-sqrt(3 scale / n), sqrt(3 scale / n))`` (complex:
      uniform on a disk).

    Args:
        scale: the variance's scale (a positive number).
        mode: ``"fan_in"``, ``"fan_out"``, ``"fan_avg"`` or ``"fan_geo_avg"``.
        distribution: ``"truncated_normal"``, ``"normal"`` or ``"uniform"``.
        in_axis, out_axis, batch_axis: the kernel's axes, as in :func:`compute_fans`.
        dtype: the initializer's default dtype (None: float64).

    Returns:
        ``init(key, shape, dtype=dtype)``.

    Raises:
        ArgumentError: ``mode`` or ``distribution`` is not one of those.
        DTypeError (when called): the dtype is not floating-point or complex.
        ShapeError (when called): the shape has fewer than 2 dimensions (default axes).

    Example:
        >>> he = init.variance_scaling(2.0, "fan_in", "truncated_normal")
        >>> w = he(fxr.key(0), (3, 3, 16, 32))
    """
    if mode not in _MODES:
        raise ArgumentError(f"functx.nn.init.variance_scaling: mode must be one of {_MODES}, "
                            f"not {mode!r}.")
    if distribution not in _DISTRIBUTIONS:
        raise ArgumentError(f"functx.nn.init.variance_scaling: distribution must be one of "
                            f"{_DISTRIBUTIONS}, not {distribution!r}.")

    def init(key: Array, shape: int | Sequence[int], dtype: DTypeLike = dtype) -> Array:
        name = "variance_scaling"
        dt = _float_dtype(name, dtype)
        wdt = _work_dtype(dt)
        shape = _shape(name, shape)
        key = check_key(f"functx.nn.init.{name}", key)
        if math.prod(shape) == 0:
            return fnp.zeros(shape, dt, like=key)
        fan_in, fan_out = compute_fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        # The constants are computed in the result dtype, in JAX's order of operations.
        variance = np.asarray(scale / denominator, wdt)
        complex_ = wdt.kind == "c"
        if distribution == "truncated_normal":
            c = COMPLEX_TRUNCATED_NORMAL_STDDEV if complex_ else TRUNCATED_NORMAL_STDDEV
            stddev = np.sqrt(variance) / np.asarray(c, wdt)
            x = (_complex_truncated_normal(key, 2.0, shape, wdt) if complex_ else
                 fxr.truncated_normal(key, -2, 2, shape, wdt))
        elif distribution == "normal":
            stddev = np.sqrt(variance)
            x = fxr.normal(key, shape, wdt)
        elif complex_:
            stddev = np.sqrt(variance)
            x = _complex_uniform(key, shape, wdt)
        else:
            stddev = np.sqrt(3 * variance)
            x = fxr.uniform(key, shape, wdt, -1.0, 1.0)
        return _finish(fnp.multiply(x, np.asarray(stddev, wdt)), dt)

    return init


def _scaled(scale: float, mode: str, distribution: str, name: str, doc: str) -> Any:
    def builder(in_axis: int | Sequence[int] = -2, out_axis: int | Sequence[int] = -1,
                batch_axis: int | Sequence[int] = (), dtype: DTypeLike = None) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis=in_axis,
                                out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)

    builder.__name__ = builder.__qualname__ = name
    builder.__doc__ = f"""{doc}

    :func:`variance_scaling` with ``scale={scale}``, ``mode="{mode}"`` and
    ``distribution="{distribution}"``.

    Args:
        in_axis, out_axis, batch_axis: the kernel's axes, as in :func:`compute_fans`
            (defaults: dense ``(in, out)`` and HWIO convolution kernels).
        dtype: the initializer's default dtype (None: float64).

    Returns:
        ``init(key, shape, dtype=dtype)``.

    Raises:
        DTypeError (when called): the dtype is not floating-point or complex.
        ShapeError (when called): the shape has fewer than 2 dimensions (default axes).

    Example:
        >>> w = init.{name}()(fxr.key(0), (3, 3, 16, 32), np.float32)
    """
    return builder


glorot_uniform = _scaled(1.0, "fan_avg", "uniform", "glorot_uniform",
                         "A Glorot (Xavier) uniform initializer: variance 2 / (fan_in + fan_out).")
glorot_normal = _scaled(1.0, "fan_avg", "truncated_normal", "glorot_normal",
                        "A Glorot (Xavier) normal initializer: variance 2 / (fan_in + fan_out).")
lecun_uniform = _scaled(1.0, "fan_in", "uniform", "lecun_uniform",
                        "A LeCun uniform initializer: variance 1 / fan_in.")
lecun_normal = _scaled(1.0, "fan_in", "truncated_normal", "lecun_normal",
                       "A LeCun normal initializer: variance 1 / fan_in.")
he_uniform = _scaled(2.0, "fan_in", "uniform", "he_uniform",
                     "A He (Kaiming) uniform initializer: variance 2 / fan_in.")
he_normal = _scaled(2.0, "fan_in", "truncated_normal", "he_normal",
                    "A He (Kaiming) normal initializer: variance 2 / fan_in.")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


# ----------------------------------------------------------------------------------------
# Orthogonal


def _project_out(q: Array, v: Array) -> Array:
    """``v`` minus its projection on the orthonormal columns of ``q``."""
    qh = fnp.transpose(fnp.conj(q) if np.dtype(q.dtype).kind == "c" else q)
    return fnp.subtract(v, fnp.matmul(q, fnp.matmul(qh, v)))


def _orthonormalize_panel(p: Array) -> Array:
    """The orthonormalised columns of ``p`` (classical Gram-Schmidt, twice per column)."""
    q = None
    for j in range(p.shape[1]):
        v = p[:, j]
        if q is not None:
            v = _project_out(q, _project_out(q, v))
        sq = (fnp.real(fnp.multiply(v, fnp.conj(v))) if np.dtype(v.dtype).kind == "c"
              else fnp.square(v))
        v = fnp.divide(v, fnp.sqrt(fnp.sum(sq)))
        q = v[:, None] if q is None else fnp.concatenate([q, v[:, None]], axis=1)
    return q


def _orthonormal_columns(a: Array) -> Array:
    """The Q of ``a = QR`` (``a`` of shape (m, n), m >= n) with ``diag(R) > 0``.

    Block classical Gram-Schmidt with reorthogonalisation (BCGS2): each block of columns is
    made orthogonal to the previous blocks (a matrix product) and orthonormalised within
    itself (Gram-Schmidt, twice per column), and all that is done twice, the second pass
    restoring the orthogonality that the first lost to rounding. Column ``j`` of the result
    is ``a``'s column ``j`` less its components along the previous ones, normalised: the QR
    factor with a positive diagonal, as in JAX's ``orthogonal`` (QR, then the signs of R's
    diagonal).
    """
    q = None
    for start in range(0, a.shape[1], _BLOCK):
        p = a[:, start:start + _BLOCK]
        for _ in range(2):
            if q is not None:
                p = _project_out(q, p)
            p = _orthonormalize_panel(p)
        q = p if q is None else fnp.concatenate([q, p], axis=1)
    return q


def orthogonal(scale: float = 1.0, column_axis: int = -1,
               dtype: DTypeLike = None) -> Initializer:
    """An initializer of (uniformly distributed) orthogonal matrices, times ``scale``.

    The array is seen as a matrix whose columns run along ``column_axis`` (the other axes,
    in order, make the rows). If it has at least as many rows as columns, the columns are
    orthonormal; otherwise the rows are. The matrix is drawn as in JAX: the Q factor (with
    a positive-diagonal R) of a normal matrix of shape ``(max(r, c), min(r, c))``,
    transposed when there are fewer rows than columns.

    Args:
        scale: the factor the orthogonal matrix is multiplied by.
        column_axis: the axis of the columns.
        dtype: the initializer's default dtype (None: float64); complex dtypes give unitary
            matrices.

    Returns:
        ``init(key, shape, dtype=dtype)``.

    Raises:
        ShapeError (when called): the shape has fewer than 2 dimensions.
        ArgumentError (when called): ``column_axis`` is out of range.
        DTypeError (when called): the dtype is not floating-point or complex.

    Example:
        >>> w = init.orthogonal()(fxr.key(0), (256, 128))     # w.T @ w == I
    """
    def init(key: Array, shape: int | Sequence[int], dtype: DTypeLike = dtype) -> Array:
        dt = _float_dtype("orthogonal", dtype)
        wdt = _work_dtype(dt)
        shape = _shape("orthogonal", shape)
        key = check_key("functx.nn.init.orthogonal", key)
        if len(shape) < 2:
            raise ShapeError(f"functx.nn.init.orthogonal needs a shape of at least 2 "
                             f"dimensions, but got {shape}.")
        col = _axis("orthogonal", "column_axis", column_axis, len(shape))
        if math.prod(shape) == 0:
            return fnp.zeros(shape, dt, like=key)
        n_rows, n_cols = math.prod(shape) // shape[col], shape[col]
        z = fxr.normal(key, (max(n_rows, n_cols), min(n_rows, n_cols)), wdt)
        # Gram-Schmidt in at least single precision, rounded back to float16 afterwards.
        q = _orthonormal_columns(fnp.astype(z, np.float32) if wdt == np.float16 else z)
        q = fnp.astype(q, wdt) if q.dtype != wdt else q
        if n_rows < n_cols:
            q = fnp.transpose(q)
        rest = tuple(d for i, d in enumerate(shape) if i != col)
        q = fnp.moveaxis(fnp.reshape(q, rest + (n_cols,)), -1, col)
        return _finish(fnp.multiply(q, np.asarray(scale, wdt)), dt)

    return init


def delta_orthogonal(scale: float = 1.0, column_axis: int = -1,
                     dtype: DTypeLike = None) -> Initializer:
    """An initializer of delta-orthogonal convolution kernels (Xiao et al., 2018).

    The kernel (3-d, 4-d or 5-d, spatial axes first: ``(*spatial, in, out)``) is zero but
    for its spatial centre (index ``(k - 1) // 2`` along each spatial axis), which holds an
    :func:`orthogonal` ``(in, out)`` matrix times ``scale``.

    Args:
        scale: the factor the orthogonal matrix is multiplied by.
        column_axis: the axis of the columns of that ``(in, out)`` matrix (-1 or 0/1).
        dtype: the initializer's default dtype (None: float64).

    Returns:
        ``init(key, shape, dtype=dtype)``.

    Raises:
        ShapeError (when called): the shape is not 3-, 4- or 5-d, or ``in > out``.
        DTypeError (when called): the dtype is not floating-point or complex.

    Example:
        >>> w = init.delta_orthogonal()(fxr.key(0), (3, 3, 16, 32))
    """
    ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dtype)

    def init(key: Array, shape: int | Sequence[int], dtype: DTypeLike = dtype) -> Array:
        dt = _float_dtype("delta_orthogonal", dtype)
        shape = _shape("delta_orthogonal", shape)
        if len(shape) not in (3, 4, 5):
            raise ShapeError(f"functx.nn.init.delta_orthogonal needs a 3-, 4- or 5-d shape "
                             f"(spatial axes, then in and out), but got {shape}.")
        if shape[-1] < shape[-2]:
            raise ShapeError(f"functx.nn.init.delta_orthogonal needs in <= out (fan_in <= "
                             f"fan_out), but shape {shape} has {shape[-2]} > {shape[-1]}.")
        if math.prod(shape) == 0:
            return fnp.zeros(shape, dt, like=key)
        matrix = ortho(key, shape[-2:], dt)
        spatial = shape[:-2]
        w = fnp.reshape(matrix, (1,) * len(spatial) + shape[-2:])
        pads = [((k - 1) // 2, k - 1 - (k - 1) // 2) for k in spatial] + [(0, 0), (0, 0)]
        return fnp.pad(w, pads)

    return init
