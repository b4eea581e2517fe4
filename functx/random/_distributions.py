"""functx.random's samplers: :func:`uniform`, :func:`normal`, :func:`truncated_normal`,
:func:`bernoulli`, :func:`randint`, :func:`gumbel`, :func:`categorical` and
:func:`permutation`, all built on the bits of ``_prng``.

The package docstring (``functx.random``) describes the scheme and what matches
``jax.random``; use these through ``functx.random``.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from functx import numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.primitives import bits as _bits
from functx.primitives import bits_normal as _bits_normal
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _ix
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives.misc import stop_gradient
from functx.random._prng import (
    U32,
    UINT,
    Array,
    as_param,
    check_key,
    check_param_shapes,
    const,
    finfo,
    float_dtype,
    is_array,
    random_bits,
    shape_tuple,
    split,
)


# ----------------------------------------------------------------------------------------
# Samplers


def _unit_floats(key: Array, shape: tuple[int, ...], dtype: np.dtype) -> Array:
    """Floats in [0, 1) with every mantissa bit random (1.m - 1, as in JAX)."""
    return _bits_normal.bits_to_uniform(random_bits(key, finfo(dtype).bits, shape), dtype)


def _uniform(name: str, key: Array, shape: tuple[int, ...], dt: np.dtype, minval: Any,
             maxval: Any) -> Array:
    check_param_shapes(name, shape, minval=minval, maxval=maxval)
    floats = _unit_floats(key, shape, dt)
    if (type(minval) in (int, float) and type(maxval) in (int, float)
            and minval == 0 and maxval == 1):
        return floats  # exactly what the general formula gives, in four operations less
    lo = as_param(name, "minval", minval, dt, key)
    hi = as_param(name, "maxval", maxval, dt, key)
    out = _ew.add(_ew.mul(floats, _ew.sub(hi, lo)), lo)
    out = _ew.max(lo, out)
    return out if tuple(out.shape) == shape else fnp.broadcast_to(out, shape)


def uniform(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.float64,
            minval: Any = 0.0, maxval: Any = 1.0) -> Array:
    """Uniform floats in ``[minval, maxval)``.

    Each value is ``minval + f * (maxval - minval)`` for ``f`` in ``[0, 1)`` with all of its
    mantissa bits random (a multiple of ``2**-52`` for float64, ``2**-23`` for float32),
    and never below ``minval``. Differentiable with respect to ``minval`` and ``maxval``.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: a float dtype (float16, float32 or float64, the default).
        minval, maxval: numbers or arrays that broadcast to ``shape``.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not a float dtype. ShapeError: ``minval``/``maxval`` do not
            broadcast to ``shape``.

    Example:
        >>> functx.random.uniform(functx.random.key(0), (3,), minval=-1.0, maxval=1.0)
    """
    key = check_key("functx.random.uniform", key)
    dt = float_dtype("uniform", dtype)
    return _uniform("uniform", key, shape_tuple("uniform", shape), dt, minval, maxval)


# Giles' polynomials as XLA evaluates them (the tables of functx.primitives.bits_normal, whose
# compiled kernel draws normal values with them): the composite below is their differentiable
# form, for truncated_normal (whose bounds carry gradients).
_ERFINV_F32, _ERFINV_F64 = _bits_normal.ERFINV_F32, _bits_normal.ERFINV_F64


def _erfinv(x: Array) -> Array:
    """The inverse error function on ``(-1, 1)`` (±inf at ±1), for real floats.

    Giles' polynomials in ``w = -log(1 - x*x)``, as XLA evaluates them (but with ``w``
    accurate near ±1, where XLA's ``log1p(-x*x)`` loses digits); float16 is computed in
    float32. Composite, so it is differentiable (the derivative of the polynomial).
    """
    dt = np.dtype(x.dtype)
    if dt.itemsize < 4:
        return _ew.convert_element_type(
            _erfinv(_ew.convert_element_type(x, new_dtype=np.float32)), new_dtype=dt)
    table = _ERFINV_F64 if dt == np.float64 else _ERFINV_F32
    # w = -log(1 - x*x): log1p(-x*x) near 0; near +-1, where x*x would round away the
    # small 1 - x*x, the product (1 - |x|)(1 + |x|) with 1 - |x| exact (Giles' form).
    one = const(x, 1.0, dt)
    at_one = _ew.eq(_ew.abs(x), one)
    y = x
    x = _ew.select(at_one, const(x, 0.0, dt), x)  # no log(0) nor inf arithmetic at +-1
    a = _ew.abs(x)
    w = _ew.select(_ew.lt(a, const(x, 0.5, dt)), _ew.log1p(_ew.neg(_ew.mul(x, x))),
                   _ew.log(_ew.mul(_ew.sub(one, a), _ew.add(one, a))))
    w = _ew.neg(w)
    # The tail branches (variable sqrt(w)) are used only beyond the first bound: elsewhere
    # they see w = bound, so that their unused gradients are finite (no sqrt'(0)).
    first = const(x, table[0][0], dt)
    sqrt_w = _ew.sqrt(_ew.select(_ew.lt(w, first), first, w))
    result = None
    for bound, of_sqrt, centre, coefs in reversed(table):
        t = _ew.sub(sqrt_w if of_sqrt else w, const(x, centre, dt))
        p = const(x, coefs[0], dt)
        for c in coefs[1:]:
            p = _ew.add(const(x, c, dt), _ew.mul(p, t))
        result = p if result is None else _ew.select(_ew.lt(w, const(x, bound, dt)), p, result)
    result = _ew.mul(result, x)
    inf = _ew.select(_ew.gt(y, const(y, 0.0, dt)), const(y, np.inf, dt), const(y, -np.inf, dt))
    return _ew.select(at_one, inf, result)


def _normal_real(key: Array, shape: tuple[int, ...], dt: np.dtype) -> Array:
    return _bits_normal.bits_to_normal(random_bits(key, finfo(dt).bits, shape), dt)


def normal(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.float64) -> Array:
    """Standard normal values (mean 0, variance 1), by inverting the CDF of uniforms.

    ``sqrt(2) * erfinv(u)`` for ``u`` uniform in ``(-1, 1)``, as ``jax.random.normal``. For
    a complex dtype, real and imaginary parts are independent with variance 1/2 each.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: a float (or complex) dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point or complex.

    Example:
        >>> w = functx.random.normal(functx.random.key(0), (784, 256), np.float32) * 0.05
    """
    key = check_key("functx.random.normal", key)
    dt = float_dtype("normal", dtype, complex_ok=True)
    shape = shape_tuple("normal", shape)
    if dt.kind == "f":
        return _normal_real(key, shape, dt)
    real_dt = np.dtype(f"f{dt.itemsize // 2}")
    k_re, k_im = (_shape.reshape(_shape.slice(split(key), (i, 0), (i + 1, 2)), (2,))
                  for i in (0, 1))
    re = _ew.convert_element_type(_normal_real(k_re, shape, real_dt), new_dtype=dt)
    im = _ew.convert_element_type(_normal_real(k_im, shape, real_dt), new_dtype=dt)
    im = _ew.mul(im, const(im, 1j, dt))
    return _ew.div(_ew.add(re, im), const(re, np.sqrt(2.0), dt))


def _nextafter(x: Array, toward_inf: bool) -> Array:
    """The float next to ``x`` toward +inf (or -inf), from its bits (infinities toward
    themselves stay; NaN stays NaN)."""
    dt = np.dtype(x.dtype)
    it = np.dtype(f"i{dt.itemsize}")
    i = _bits.bitcast_convert_type(x, new_dtype=it)
    one = const(i, 1, it)
    zero = const(x, 0.0, dt)
    # Away from zero the magnitude bits grow by one; toward zero they shrink by one.
    away = _ew.gt(x, zero) if toward_inf else _ew.lt(x, zero)
    step = _ew.select(away, _ew.add(i, one), _ew.sub(i, one))
    tiny = np.array(finfo(dt).smallest_subnormal * (1 if toward_inf else -1), dt)
    out = _bits.bitcast_convert_type(step, new_dtype=dt)
    out = _ew.select(_ew.eq(x, zero), const(x, tiny[()], dt), out)
    limit = const(x, np.inf if toward_inf else -np.inf, dt)
    keep = _ew.or_(_ew.eq(x, limit), _ew.ne(x, x))
    return _ew.select(keep, x, out)


def truncated_normal(key: Array, lower: Any, upper: Any,
                     shape: int | Sequence[int] | None = None,
                     dtype: Any = np.float64) -> Array:
    """Standard normal values conditioned on ``lower < x < upper``.

    Inverts the CDF between ``erf(lower/sqrt 2)`` and ``erf(upper/sqrt 2)`` (as
    ``jax.random.truncated_normal``); results are clipped into the open interval, so they
    lie strictly inside it even after rounding.

    Args:
        key: a key.
        lower, upper: the bounds (numbers or arrays, possibly infinite).
        shape: the result's shape (None: the broadcast shape of ``lower`` and ``upper``).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: the bounds do not
            broadcast to ``shape``.

    Example:
        >>> w = functx.random.truncated_normal(functx.random.key(0), -2.0, 2.0, (256, 128))
    """
    key = check_key("functx.random.truncated_normal", key)
    dt = float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = np.broadcast_shapes(np.shape(lower) if not is_array(lower) else lower.shape,
                                    np.shape(upper) if not is_array(upper) else upper.shape)
    shape = shape_tuple("truncated_normal", shape)
    check_param_shapes("truncated_normal", shape, lower=lower, upper=upper)
    lo = as_param("truncated_normal", "lower", lower, dt, key)
    hi = as_param("truncated_normal", "upper", upper, dt, key)
    sqrt2 = const(key, np.sqrt(2.0), dt)
    a = _ew.erf(_ew.div(lo, sqrt2))
    b = _ew.erf(_ew.div(hi, sqrt2))
    u = _uniform("truncated_normal", key, shape, dt, a, b)
    out = _ew.mul(sqrt2, _erfinv(u))
    lo_open = _nextafter(stop_gradient(lo), toward_inf=True)
    hi_open = _nextafter(stop_gradient(hi), toward_inf=False)
    return _ew.min(_ew.max(out, lo_open), hi_open)


def bernoulli(key: Array, p: Any = 0.5, shape: int | Sequence[int] | None = None) -> Array:
    """Booleans that are True with probability ``p``.

    ``uniform(key, shape, p.dtype) < p``, as ``jax.random.bernoulli``.

    Args:
        key: a key.
        p: the probability: a Python number (float64) or a float array.
        shape: the result's shape (None: ``p``'s shape).

    Returns:
        A bool array of ``shape``.

    Raises:
        DTypeError: ``p`` is an integer or bool array. ShapeError: ``p`` does not
            broadcast to ``shape``.

    Example:
        >>> keep = functx.random.bernoulli(functx.random.key(0), 0.9, (128,))
    """
    key = check_key("functx.random.bernoulli", key)
    if is_array(p) or isinstance(p, np.generic):
        dt = np.dtype(p.dtype)
        if dt.kind != "f":
            raise DTypeError(f"functx.random.bernoulli needs a floating-point probability p, "
                             f"but got an array of dtype {dt.name}; convert it with "
                             ".astype(np.float32) or .astype(np.float64).")
    elif isinstance(p, (int, float)) and not isinstance(p, bool):
        dt = np.dtype(np.float64)
    else:
        raise TypeError(f"functx.random.bernoulli: p must be a number or a float array, not "
                        f"{p!r:.60}.")
    p_shape = tuple(np.shape(p)) if not is_array(p) else tuple(p.shape)
    shape = p_shape if shape is None else shape_tuple("bernoulli", shape)
    check_param_shapes("bernoulli", shape, p=p)
    u = _unit_floats(key, shape, dt)
    return _ew.lt(u, as_param("bernoulli", "p", p, dt, key))


def _convert_and_clip(x: Array, dtype: np.dtype) -> Array:
    """Integer ``x`` converted to the integer ``dtype``, clipped into its range (not
    wrapped)."""
    src, dst = np.iinfo(x.dtype), np.iinfo(dtype)
    lo, hi = max(src.min, dst.min), min(src.max, dst.max)
    if (lo, hi) != (src.min, src.max):
        x = _ew.clamp(const(x, lo, x.dtype), x, const(x, hi, x.dtype))
    return x if x.dtype == dtype else _ew.convert_element_type(x, new_dtype=dtype)


def _int_param(name: str, what: str, value: Any, like: Any) -> Array:
    """``minval``/``maxval`` as an integer array (Python ints as int64, floats truncated)."""
    if is_array(value) or isinstance(value, np.generic):
        v = value if is_array(value) else fnp.asarray(value)
        return v if np.dtype(v.dtype).kind in "iu" else fnp.astype(v, np.int64)
    arr = np.asarray(value)
    if arr.dtype.kind not in "iufb":
        raise TypeError(f"functx.random.{name}: {what} must be an integer or an integer "
                        f"array, not {value!r:.60}.")
    if arr.dtype.kind in "iu" and arr.ndim == 0 and not -2**63 <= int(arr) < 2**63:
        raise ValueError(f"functx.random.{name}: {what}={value} does not fit in int64.")
    return fnp.asarray(arr.astype(np.int64) if arr.dtype.kind != "u" else arr)


def _urem(x: Array, span: Array) -> Array:
    """``x % span`` for unsigned integers, with XLA's ``x % 0 == x``."""
    zero = _ew.eq(span, const(span, 0, span.dtype))
    return _ew.select(zero, x, _ew.rem(x, _ew.select(zero, const(span, 1, span.dtype), span)))


def _randint(key: Array, shape: tuple[int, ...], minval: Array, maxval: Array,
             dt: np.dtype) -> Array:
    nbits = dt.itemsize * 8
    ut = UINT[nbits]
    out_of_range = _ew.gt(maxval, _convert_and_clip(
        const(maxval, np.iinfo(dt).max, dt), np.dtype(maxval.dtype)))
    minval = _convert_and_clip(minval, dt)
    maxval = _convert_and_clip(maxval, dt)
    keys = split(key)
    k1, k2 = (_shape.reshape(_shape.slice(keys, (i, 0), (i + 1, 2)), (2,)) for i in (0, 1))
    higher, lower = random_bits(k1, nbits, shape), random_bits(k2, nbits, shape)
    span = _ew.convert_element_type(_ew.sub(maxval, minval), new_dtype=ut)
    one = const(span, 1, ut)
    span = _ew.select(_ew.le(maxval, minval), one, span)  # an empty range gives minval
    span = _ew.select(_ew.and_(out_of_range, _ew.gt(maxval, minval)), _ew.add(span, one), span)
    # (higher * 2**nbits + lower) % span, without a 2 * nbits-bit product.
    multiplier = _urem(const(span, 2 ** (nbits // 2), ut), span)
    multiplier = _urem(_ew.mul(multiplier, multiplier), span)
    offset = _ew.add(_ew.mul(_urem(higher, span), multiplier), _urem(lower, span))
    offset = _urem(offset, span)
    out = _ew.add(minval, _ew.convert_element_type(offset, new_dtype=dt))
    return out if tuple(out.shape) == shape else fnp.broadcast_to(out, shape)


def randint(key: Array, shape: int | Sequence[int], minval: Any, maxval: Any,
            dtype: Any = np.int64) -> Array:
    """Random integers in ``[minval, maxval)``, as ``jax.random.randint``.

    Each value is ``minval + (2 * nbits random bits) % (maxval - minval)``: nearly
    uniform (the bias is below ``span / 2**nbits``; exactly uniform for powers of two).
    Types narrower than 32 bits are drawn as int32 and converted. Where ``maxval <= minval``
    the result is ``minval``. ``maxval`` may exceed the dtype (``randint(k, s, 0, 256,
    np.uint8)`` covers all of uint8).

    Args:
        key: a key.
        shape: the result's shape.
        minval, maxval: integers or integer arrays that broadcast to ``shape``.
        dtype: an integer dtype; int64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not an integer dtype. ShapeError: ``minval``/``maxval`` do
            not broadcast to ``shape``.

    Example:
        >>> functx.random.randint(functx.random.key(0), (5,), 0, 10)
    """
    key = check_key("functx.random.randint", key)
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise DTypeError(f"functx.random.randint draws integers; dtype {dt.name} is not an "
                         "integer dtype.")
    shape = shape_tuple("randint", shape)
    check_param_shapes("randint", shape, minval=minval, maxval=maxval)
    lo = _int_param("randint", "minval", minval, key)
    hi = _int_param("randint", "maxval", maxval, key)
    if dt.itemsize >= 4:
        return _randint(key, shape, lo, hi, dt)
    info, i32 = np.iinfo(dt), np.dtype(np.int32)
    lo = fnp.clip(fnp.astype(lo, i32), int(info.min), int(info.max))
    hi = fnp.clip(fnp.astype(hi, i32), int(info.min), int(info.max) + 1)
    return _ew.convert_element_type(_randint(key, shape, lo, hi, i32), new_dtype=dt)


def gumbel(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.float64) -> Array:
    """Standard Gumbel values: ``-log(-log(u))`` for ``u`` uniform in ``[tiny, 1)``.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point.
    """
    key = check_key("functx.random.gumbel", key)
    dt = float_dtype("gumbel", dtype)
    return _gumbel(key, shape_tuple("gumbel", shape), dt)


def _gumbel(key: Array, shape: tuple[int, ...], dt: np.dtype) -> Array:
    u = _uniform("gumbel", key, shape, dt, float(finfo(dt).tiny), 1.0)
    return _ew.neg(_ew.log(_ew.neg(_ew.log(u))))


def categorical(key: Array, logits: Array, axis: int = -1,
                shape: Sequence[int] | None = None) -> Array:
    """Samples of categorical distributions given by unnormalised log-probabilities.

    The Gumbel-max trick, as ``jax.random.categorical``: ``argmax(logits + gumbel)`` along
    ``axis``. Sampling is with replacement.

    Args:
        key: a key.
        logits: float array; ``softmax(logits, axis)`` are the probabilities (``-inf``
            excludes a category).
        axis: the axis of the categories.
        shape: the result's shape (None: ``logits``' shape without ``axis``); it must end
            with that batch shape (broadcasting), extra leading axes draw more samples.

    Returns:
        int64 indices into ``axis``, of ``shape``.

    Raises:
        DTypeError: ``logits`` is not floating-point. ShapeError: ``shape`` does not fit
            the batch shape, or ``axis`` is out of range.

    Example:
        >>> functx.random.categorical(functx.random.key(0), np.log([0.2, 0.8]), shape=(5,))
    """
    key = check_key("functx.random.categorical", key)
    logits = logits if is_array(logits) else fnp.asarray(logits)
    if np.dtype(logits.dtype).kind != "f":
        raise DTypeError(f"functx.random.categorical needs floating-point logits, but got "
                         f"dtype {np.dtype(logits.dtype).name}.")
    ndim = len(logits.shape)
    if not -ndim <= axis < ndim:
        raise ShapeError(f"functx.random.categorical: axis {axis} is out of range for logits "
                         f"of shape {tuple(logits.shape)}.")
    axis = axis % ndim
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch_shape if shape is None else shape_tuple("categorical", shape)
    check_param_shapes("categorical", shape, batch=np.empty(batch_shape))
    prefix = shape[:len(shape) - len(batch_shape)]
    logits_shape = list(shape[len(prefix):])
    logits_shape.insert(axis, logits.shape[axis])
    g = _gumbel(key, prefix + tuple(logits_shape), np.dtype(logits.dtype))
    full = fnp.add(g, fnp.reshape(logits, (1,) * len(prefix) + tuple(logits.shape)))
    return fnp.argmax(full, axis=len(prefix) + axis)


# ----------------------------------------------------------------------------------------
# permutation: sorting by random keys


def _stable_argsort_rows(keys: Array) -> Array:
    """For uint32 ``keys`` of shape ``(m, n)``, the int64 column order that sorts each row,
    ties kept in order: a least-significant-bit-first radix sort (32 stable passes, each a
    cumsum and a scatter), built from primitives so that it runs on every backend."""
    m, n = keys.shape
    i64 = np.dtype(np.int64)
    xp = _shape.array_module(keys)
    cols = xp.arange(n, dtype=i64).reshape(1, n)
    rows = (xp.arange(m, dtype=i64) * n).reshape(m, 1)
    if xp is np:
        cols.flags.writeable = rows.flags.writeable = False
    order = _shape.broadcast_in_dim(cols, (m, n), (0, 1))
    one_u = const(keys, 1, U32)
    for b in range(32):
        bit = _ew.and_(_bits.shift_right_logical(keys, const(keys, b, U32)), one_u)
        bit = _ew.convert_element_type(bit, new_dtype=i64)
        ones_upto = _red.cumsum(bit, axis=1)  # ones at or before each position
        n_zeros = _ew.sub(const(bit, n, i64), _shape.slice(ones_upto, (0, n - 1), (m, n)))
        ones_before = _ew.sub(ones_upto, bit)
        # zeros keep their order at the front, ones keep theirs after all the zeros
        pos = _ew.select(_ew.eq(bit, const(bit, 1, i64)), _ew.add(n_zeros, ones_before),
                         _ew.sub(cols, ones_before))
        flat = _shape.reshape(_ew.add(pos, rows), (m * n,))

        def moved(x: Array) -> Array:
            base = const(x, 0, x.dtype, (m * n,))
            return _shape.reshape(_ix.scatter(base, flat, _shape.reshape(x, (m * n,)),
                                              axis=0), (m, n))
        order = moved(order)
        if b < 31:
            keys = moved(keys)
    return order


def _shuffle(key: Array, x: Array, axis: int) -> Array:
    """``x`` sorted along ``axis`` by fresh random uint32 keys, repeated (JAX's rounds)."""
    size = math.prod(x.shape)
    rounds = math.ceil(3 * math.log(max(1, size)) / math.log(np.iinfo(np.uint32).max))
    if rounds == 0 or x.shape[axis] <= 1:
        return x
    for _ in range(rounds):
        keys = split(key)
        key = _shape.reshape(_shape.slice(keys, (0, 0), (1, 2)), (2,))
        subkey = _shape.reshape(_shape.slice(keys, (1, 0), (2, 2)), (2,))
        sort_keys = fnp.moveaxis(random_bits(subkey, 32, tuple(x.shape)), axis, -1)
        moved = fnp.moveaxis(x, axis, -1)
        lead = tuple(moved.shape[:-1])
        n = moved.shape[-1]
        order = _stable_argsort_rows(fnp.reshape(sort_keys, (-1, n)))
        rows = fnp.take_along_axis(fnp.reshape(moved, (-1, n)), order, axis=1)
        x = fnp.moveaxis(fnp.reshape(rows, lead + (n,)), -1, axis)
    return x


def permutation(key: Array, x: int | Array, axis: int = 0, independent: bool = False) -> Array:
    """A random permutation of ``range(x)``, or ``x`` shuffled along ``axis``.

    As ``jax.random.permutation`` (the same result): sorts by random 32-bit keys, in as
    many rounds as make ties negligible. Differentiable with respect to ``x``.

    Args:
        key: a key.
        x: an int ``n`` (permute ``0..n-1``, int64) or an array of rank >= 1.
        axis: the axis to shuffle along.
        independent: shuffle each slice along ``axis`` independently (otherwise whole
            slices move together).

    Returns:
        The permuted values.

    Raises:
        DTypeError: ``x`` is a 0-d non-integer. ShapeError: ``axis`` out of range.

    Example:
        >>> order = functx.random.permutation(functx.random.key(0), 10)
    """
    key = check_key("functx.random.permutation", key)
    if isinstance(x, (int, np.integer)) or (is_array(x) and tuple(x.shape) == ()):
        if isinstance(x, bool) or np.dtype(getattr(x, "dtype", np.int64)).kind not in "iu":
            raise DTypeError("functx.random.permutation: x must be an int or an array of rank "
                             f">= 1, not {x!r:.60}.")
        n = operator.index(x) if isinstance(x, (int, np.integer)) else int(x)
        if n < 0:
            raise ValueError(f"functx.random.permutation: x={n} is negative.")
        return _shuffle(key, fnp.arange(n, dtype=np.int64), 0)
    x = x if is_array(x) else fnp.asarray(x)
    ndim = len(x.shape)
    if ndim == 0:
        raise DTypeError(f"functx.random.permutation: x must be an int or an array of rank "
                         f">= 1, not a 0-d array of dtype {np.dtype(x.dtype).name}.")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"functx.random.permutation: axis {axis} is out of range for an array "
                         f"of shape {tuple(x.shape)}.")
    axis = axis % ndim
    if independent or ndim == 1:
        return _shuffle(key, x, axis)
    order = _shuffle(key, fnp.arange(x.shape[axis], dtype=np.int64), 0)
    return fnp.take(x, order, axis=axis)
