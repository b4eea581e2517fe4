"""Random numbers from explicit keys: a counter-based generator (Threefry-2x32, 20 rounds).

There is no hidden state. A *key* is an ordinary ``uint32`` array of shape ``(2,)`` (JAX's
raw key, ``jax.random.PRNGKey(seed)``): :func:`key` makes one from a seed, :func:`split`
turns one key into several independent ones and :func:`fold_in` derives a key from a key
and an integer (a step number, a layer index). A sampler given the same key and arguments
returns the same values every time; use a key for one purpose only and split it to get
more. Because keys are plain arrays, they trace, ``vmap`` (a batch of keys is an ``(n, 2)``
array) and ``checkpoint`` like any other value: recomputation under ``checkpoint`` draws
exactly the same numbers, so dropout masks are reproduced.

Example:
    >>> import functx.random as fxr
    >>> k = fxr.key(0)
    >>> k_init, k_drop = fxr.split(k)
    >>> w = fxr.normal(k_init, (3, 4))
    >>> mask = fxr.bernoulli(fxr.fold_in(k_drop, 7), 0.9, (4,))

The bits. Everything is built from uint32 primitives whose results are defined for every
input (``functx.primitives.bits``: the Threefry block function ``threefry2x32``, shifts and
bit casts; wrapping ``add``, ``xor``, ``or``), so every backend produces the same bits.
They are JAX's bits for the ``threefry2x32`` implementation with
``jax_threefry_partitionable=True`` (JAX's default since 0.5): element ``i`` (C order) of
an array of shape ``S`` drawn with key ``(k1, k2)`` comes from
``threefry2x32((k1, k2), (hi(i), lo(i)))``, ``i`` read as a 64-bit counter; 32-bit draws
xor the two output words, 64-bit draws concatenate them (first word high). So element
``i`` does not depend on the shape requested, and ``split(k, n)[i]`` equals
``fold_in(k, i)``. :func:`key`, :func:`split`, :func:`fold_in`, :func:`bits`,
:func:`bernoulli`, :func:`randint`, :func:`permutation`, :func:`categorical` and
:func:`uniform` on ``[0, 1)`` reproduce ``jax.random`` bit for bit. With other bounds
``uniform`` rounds ``f * (maxval - minval)`` and ``+ minval`` separately, where XLA fuses
them into one multiply-add: the last bit may differ from JAX's (functx's rounding is the
same on every backend). :func:`normal` and :func:`truncated_normal` use JAX's algorithms
and XLA's ``erf_inv`` polynomials (Giles), with ``w = -log(1 - u*u)`` evaluated accurately
near ``|u| = 1``: they agree with JAX to rounding.

Dtypes: the defaults are NumPy's (float64, int64; JAX's with ``jax_enable_x64``). Pass
``dtype=np.float32`` for single precision. An integer seed is read as a 64-bit integer (JAX
with ``jax_enable_x64``): ``key(-1)`` is ``[2**32 - 1, 2**32 - 1]``.

Differences from ``jax.random``: no typed (``jax.random.key``) keys, no ``out_sharding``;
``categorical`` samples with replacement only and ``permutation`` sorts with a stable
radix sort built from primitives (32 passes of about fifteen operations each per round:
0.3 s for 60000 elements on one CPU core; a sort primitive would be faster, with the same
result).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from functx import numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.primitives import bits as _bits
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _ix
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives.misc import stop_gradient
from functx.tracing import Tracer

__all__ = [
    "key", "split", "fold_in", "bits", "uniform", "normal", "truncated_normal", "bernoulli",
    "randint", "categorical", "permutation", "gumbel",
]

Array = Any  # a NumPy/CuPy array or a tracer
_U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
_UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: _U32, 64: _U64}


# ----------------------------------------------------------------------------------------
# Argument checks


def _is_array(x: Any) -> bool:
    return type(x) is Tracer or (hasattr(x, "shape") and hasattr(x, "dtype")
                                 and not isinstance(x, np.generic))


def _check_key(name: str, key: Any) -> Array:
    """``key`` if it is a key (a uint32 array of shape (2,)); else an error naming the
    function ``name`` (e.g. ``"functx.random.uniform"``).

    Raises:
        DTypeError: not an array, or not uint32.
        ShapeError: a uint32 array of another shape (e.g. a batch of keys).
    """
    if isinstance(key, np.generic) or not _is_array(key):
        raise DTypeError(
            f"{name} needs a key, a uint32 array of shape (2,), but got "
            f"{type(key).__name__} {key!r:.60}. Make one with functx.random.key(seed) (and "
            "new ones with functx.random.split(key)).")
    if np.dtype(key.dtype) != _U32:
        raise DTypeError(
            f"{name} needs a key, a uint32 array of shape (2,), but got an "
            f"array of dtype {np.dtype(key.dtype).name} and shape {tuple(key.shape)}. Make "
            "keys with functx.random.key(seed), not from integers directly.")
    if tuple(key.shape) != (2,):
        extra = (" For a batch of keys, map over them with functx.vmap." if
                 len(key.shape) > 1 and key.shape[-1] == 2 else "")
        raise ShapeError(
            f"{name} needs one key, a uint32 array of shape (2,), but got "
            f"shape {tuple(key.shape)}.{extra}")
    return key


def _shape_tuple(name: str, shape: Any) -> tuple[int, ...]:
    """``shape`` (an int or a sequence of ints) as a tuple of non-negative ints.

    Raises:
        ShapeError: a negative size. TypeError: not integers.
    """
    try:
        out = ((operator.index(shape),) if not isinstance(shape, (tuple, list))
               else tuple(operator.index(d) for d in shape))
    except TypeError:
        raise TypeError(f"functx.random.{name}: shape must be an int or a tuple of ints, not "
                        f"{shape!r}.") from None
    if any(d < 0 for d in out):
        raise ShapeError(f"functx.random.{name}: shape {out} has a negative size.")
    return out


def _check_param_shapes(name: str, shape: tuple[int, ...], **params: Any) -> None:
    """Parameter arrays must broadcast to exactly ``shape`` (as in jax.random).

    Raises:
        ShapeError: naming the parameters and their shapes.
    """
    shapes = {k: tuple(np.shape(v)) if not _is_array(v) else tuple(v.shape)
              for k, v in params.items()}
    try:
        full = np.broadcast_shapes(shape, *shapes.values())
    except ValueError:
        full = None
    if full != shape:
        got = ", ".join(f"{k} of shape {s}" for k, s in shapes.items())
        raise ShapeError(
            f"functx.random.{name}: the parameters ({got}) must broadcast to the requested "
            f"shape {shape}, and broadcasting them with it must give that shape. Pass a "
            "shape that contains theirs (or shape=None where allowed).")


def _float_dtype(name: str, dtype: Any, complex_ok: bool = False) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind != "f" and not (complex_ok and dt.kind == "c"):
        kinds = "floating-point or complex" if complex_ok else "floating-point"
        raise DTypeError(f"functx.random.{name} draws {kinds} values; dtype {dt.name} is "
                         "not one. Pass e.g. dtype=np.float32 or np.float64.")
    return dt


def _const(like: Any, value: Any, dtype: Any, shape: Sequence[int] = ()) -> Array:
    """A constant on ``like``'s device (memoised; read-only)."""
    return _shape.constant(like, value, tuple(shape), np.dtype(dtype))


def _as_param(name: str, what: str, value: Any, dtype: np.dtype, like: Any) -> Array:
    """A sampler's parameter (Python number or array) as an array of ``dtype``."""
    if _is_array(value):
        return value if value.dtype == dtype else fnp.astype(value, dtype)
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"functx.random.{name}: {what} must be a number or an array, not "
                        f"{value!r:.60}.")
    if arr.ndim == 0:
        return _const(like, arr.astype(dtype)[()], dtype)
    return fnp.asarray(arr, dtype)


# ----------------------------------------------------------------------------------------
# The generator: Threefry-2x32 over 64-bit counters


def _words(key: Array) -> tuple[Array, Array]:
    """The two uint32 words of a key, as 0-d arrays."""
    return tuple(_shape.reshape(_shape.slice(key, (i,), (i + 1,)), ()) for i in (0, 1))


def _counters(like: Any, shape: tuple[int, ...]) -> tuple[Array, Array]:
    """The high and low uint32 words of each element's C-order index (read-only constants
    on ``like``'s device)."""
    n = math.prod(shape)
    xp = _shape.array_module(like)
    if n < 2**32:
        hi = _const(like, 0, _U32, shape)
        lo = xp.arange(n, dtype=_U32).reshape(shape)
    else:  # pragma: no cover - 2**32 elements do not fit in a test
        idx = xp.arange(n, dtype=_U64).reshape(shape)
        hi, lo = (idx >> np.uint64(32)).astype(_U32), idx.astype(_U32)
    if xp is np:
        lo.flags.writeable = hi.flags.writeable = False
    return hi, lo


def _traced_counters(k1: Array, shape: tuple[int, ...]) -> tuple[Array, Array]:
    """The counters of :func:`_counters`, computed inside the trace when the key is traced.

    The index is a sum of one small ``arange`` per axis, and a zero derived from the key makes
    the sum part of the trace: a trace (a checkpointed block, a vmapped function) then holds
    O(sum(shape)) constants instead of two counter arrays as large as the request.
    """
    zero = _ew.mul(k1, _const(k1, 0, _U32))  # a traced 0
    lo = _shape.broadcast_in_dim(zero, shape, ())
    hi = lo
    stride = 1
    for ax in reversed(range(len(shape))):
        xp = _shape.array_module(k1)
        r = xp.arange(shape[ax], dtype=_U32) * _U32.type(stride)
        r = r.reshape(tuple(n if i == ax else 1 for i, n in enumerate(shape)))
        lo = _ew.add(lo, r)  # broadcasts the small constant against the traced index
        stride *= shape[ax]
    return hi, lo


def _hash(key: Array, shape: tuple[int, ...]) -> tuple[Array, Array]:
    k1, k2 = _words(key)
    if type(k1) is Tracer and shape and math.prod(shape) < 2**32:
        hi, lo = _traced_counters(k1, shape)
    else:
        hi, lo = _counters(key, shape)
    return _bits.threefry2x32(k1, k2, hi, lo)


def _random_bits(key: Array, bit_width: int, shape: tuple[int, ...]) -> Array:
    """Unsigned integers of ``bit_width`` bits (8, 16, 32 or 64), uniform over their range."""
    b1, b2 = _hash(key, shape)
    if bit_width == 64:
        hi = _bits.shift_left(_ew.convert_element_type(b1, new_dtype=_U64), _const(b1, 32, _U64))
        return _ew.or_(hi, _ew.convert_element_type(b2, new_dtype=_U64))
    out = _ew.xor(b1, b2)
    return out if bit_width == 32 else _ew.convert_element_type(out, new_dtype=_UINT[bit_width])


def _stack_words(b1: Array, b2: Array) -> Array:
    axis = len(b1.shape)
    return _shape.concatenate([_shape.expand_dims(b1, (axis,)),
                               _shape.expand_dims(b2, (axis,))], axis)


# ----------------------------------------------------------------------------------------
# Keys


def key(seed: int | Array) -> Array:
    """A key (a uint32 array of shape ``(2,)``) made from an integer seed.

    The seed is read as a 64-bit integer: its high and low 32 bits are the key's words, so
    seeds below ``2**32`` give ``[0, seed]`` (``jax.random.PRNGKey(seed)``). A seed array of
    a 32-bit (or narrower) dtype has no high word. The seed may be traced (e.g. under
    ``vmap`` over seeds).

    Args:
        seed: a Python int in ``[-2**63, 2**64)`` or a 0-d integer array.

    Returns:
        The key, ``uint32[2]``.

    Raises:
        DTypeError: the seed is not an integer. ShapeError: the seed array is not 0-d.
        ValueError: a Python int outside the 64-bit range.

    Example:
        >>> functx.random.key(42)
        array([ 0, 42], dtype=uint32)
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) \
            and not _is_array(seed):
        raise DTypeError(f"functx.random.key needs an integer seed, not {type(seed).__name__} "
                         f"{seed!r:.60}.")
    if isinstance(seed, int):
        if not -2**63 <= seed < 2**64:
            raise ValueError(f"functx.random.key: the seed {seed} does not fit in 64 bits; use "
                             "a seed in [-2**63, 2**64).")
        out = np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], dtype=_U32)
        out.flags.writeable = False
        return out
    if isinstance(seed, np.generic):
        seed = fnp.asarray(seed)
    if np.dtype(seed.dtype).kind not in "iu":
        raise DTypeError(f"functx.random.key needs an integer seed, but got an array of dtype "
                         f"{np.dtype(seed.dtype).name}; convert it with .astype(np.int64).")
    if tuple(seed.shape) != ():
        raise ShapeError(f"functx.random.key needs a scalar seed, but got shape "
                         f"{tuple(seed.shape)}. For many keys, use functx.vmap(key) over the "
                         "seeds, or split one key.")
    lo = _ew.convert_element_type(seed, new_dtype=_U32)
    if np.dtype(seed.dtype).itemsize == 8:
        hi = _ew.convert_element_type(
            _bits.shift_right_logical(seed, _const(seed, 32, seed.dtype)), new_dtype=_U32)
    else:
        hi = _const(seed, 0, _U32)
    return _shape.concatenate([_shape.reshape(hi, (1,)), _shape.reshape(lo, (1,))], 0)


def split(key: Array, num: int | Sequence[int] = 2) -> Array:
    """``num`` new keys from ``key``, independent of each other and of ``key``'s own draws.

    Args:
        key: a key.
        num: how many keys (an int), or the shape of the array of keys (a tuple).

    Returns:
        ``uint32[*num, 2]``; ``split(key, n)[i]`` equals ``fold_in(key, i)``.

    Raises:
        DTypeError, ShapeError: ``key`` is not a key, or ``num`` is negative.

    Example:
        >>> k_params, k_dropout = functx.random.split(functx.random.key(0))
    """
    key = _check_key("functx.random.split", key)
    shape = _shape_tuple("split", num)
    return _stack_words(*_hash(key, shape))


def fold_in(key: Array, data: int | Array) -> Array:
    """A new key derived from ``key`` and the integer ``data`` (a step, an index...).

    Different ``data`` give independent keys; ``fold_in(key, i)`` equals ``split(key, n)[i]``.

    Args:
        key: a key.
        data: a Python int in ``[0, 2**32)`` or a 0-d integer array (taken modulo ``2**32``;
            it may be traced).

    Returns:
        The new key, ``uint32[2]``.

    Raises:
        DTypeError, ShapeError: ``key`` is not a key, or ``data`` is not an integer scalar.
        ValueError: a Python int outside ``[0, 2**32)``.

    Example:
        >>> step_key = functx.random.fold_in(functx.random.key(0), 1000)
    """
    key = _check_key("functx.random.fold_in", key)
    if isinstance(data, (bool, np.bool_)):
        raise DTypeError("functx.random.fold_in needs integer data, not a bool.")
    if isinstance(data, int):
        if not 0 <= data < 2**32:
            raise ValueError(f"functx.random.fold_in: data {data} is outside [0, 2**32); fold "
                             "in a uint32 value (e.g. data % 2**32).")
        d = _const(key, data, _U32)
    else:
        if isinstance(data, np.generic) or not _is_array(data):
            data = fnp.asarray(data)
        if np.dtype(data.dtype).kind not in "iu":
            raise DTypeError(f"functx.random.fold_in needs integer data, but got dtype "
                             f"{np.dtype(data.dtype).name}.")
        if tuple(data.shape) != ():
            raise ShapeError(f"functx.random.fold_in folds in one integer, but got shape "
                             f"{tuple(data.shape)}; use functx.vmap for a batch.")
        d = data if data.dtype == _U32 else _ew.convert_element_type(data, new_dtype=_U32)
    k1, k2 = _words(key)
    b1, b2 = _bits.threefry2x32(k1, k2, _const(key, 0, _U32), d)
    return _stack_words(b1, b2)


# ----------------------------------------------------------------------------------------
# Samplers


def bits(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.uint32) -> Array:
    """Uniformly random unsigned integers (every bit independent and fair).

    Args:
        key: a key.
        shape: the result's shape.
        dtype: uint8, uint16, uint32 (the default: the generator's word) or uint64.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not an unsigned integer dtype.

    Example:
        >>> functx.random.bits(functx.random.key(0), (2,))
        array([4070199207, 4202968722], dtype=uint32)
    """
    key = _check_key("functx.random.bits", key)
    dt = np.dtype(dtype)
    if dt.kind != "u":
        raise DTypeError(f"functx.random.bits draws unsigned integers; dtype {dt.name} is not "
                         "one. Use uint8, uint16, uint32 or uint64.")
    return _random_bits(key, dt.itemsize * 8, _shape_tuple("bits", shape))


def _unit_floats(key: Array, shape: tuple[int, ...], dtype: np.dtype) -> Array:
    """Floats in [0, 1) with every mantissa bit random (1.m - 1, as in JAX)."""
    info = np.finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    ut = _UINT[nbits]
    rbits = _random_bits(key, nbits, shape)
    one_bits = int(np.array(1.0, dtype).view(ut))
    mant = _bits.shift_right_logical(rbits, _const(rbits, nbits - nmant, ut))
    floats = _bits.bitcast_convert_type(_ew.or_(mant, _const(rbits, one_bits, ut)),
                                        new_dtype=dtype)
    return _ew.sub(floats, _const(floats, 1.0, dtype))


def _uniform(name: str, key: Array, shape: tuple[int, ...], dt: np.dtype, minval: Any,
             maxval: Any) -> Array:
    _check_param_shapes(name, shape, minval=minval, maxval=maxval)
    floats = _unit_floats(key, shape, dt)
    if (type(minval) in (int, float) and type(maxval) in (int, float)
            and minval == 0 and maxval == 1):
        return floats  # exactly what the general formula gives, in four operations less
    lo = _as_param(name, "minval", minval, dt, key)
    hi = _as_param(name, "maxval", maxval, dt, key)
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
    key = _check_key("functx.random.uniform", key)
    dt = _float_dtype("uniform", dtype)
    return _uniform("uniform", key, _shape_tuple("uniform", shape), dt, minval, maxval)


# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): the polynomials
# XLA's erf_inv evaluates, as (branch taken while w < bound, whether the polynomial's
# variable is sqrt(w), its centre, coefficients from the highest degree). Single precision
# branches at w = 5; double precision at w = 6.25 and 16.
_ERFINV_F32 = (
    (5.0, False, 2.5, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)),
    (None, True, 3.0, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)),
)
_ERFINV_F64 = (
    (6.25, False, 3.125, (
        -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
        1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
        6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
        2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
        1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
        4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
        0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
        0.24015818242558961693, 1.6536545626831027356)),
    (16.0, True, 3.25, (
        2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
        1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
        2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
        6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
        0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
        -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
        3.0838856104922207635)),
    (None, True, 5.0, (
        -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
        -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
        2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
        -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
        7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
        1.0103004648645343977, 4.8499064014085844221)),
)


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
    one = _const(x, 1.0, dt)
    at_one = _ew.eq(_ew.abs(x), one)
    y = x
    x = _ew.select(at_one, _const(x, 0.0, dt), x)  # no log(0) nor inf arithmetic at +-1
    a = _ew.abs(x)
    w = _ew.select(_ew.lt(a, _const(x, 0.5, dt)), _ew.log1p(_ew.neg(_ew.mul(x, x))),
                   _ew.log(_ew.mul(_ew.sub(one, a), _ew.add(one, a))))
    w = _ew.neg(w)
    # The tail branches (variable sqrt(w)) are used only beyond the first bound: elsewhere
    # they see w = bound, so that their unused gradients are finite (no sqrt'(0)).
    first = _const(x, table[0][0], dt)
    sqrt_w = _ew.sqrt(_ew.select(_ew.lt(w, first), first, w))
    result = None
    for bound, of_sqrt, centre, coefs in reversed(table):
        t = _ew.sub(sqrt_w if of_sqrt else w, _const(x, centre, dt))
        p = _const(x, coefs[0], dt)
        for c in coefs[1:]:
            p = _ew.add(_const(x, c, dt), _ew.mul(p, t))
        result = p if result is None else _ew.select(_ew.lt(w, _const(x, bound, dt)), p, result)
    result = _ew.mul(result, x)
    inf = _ew.select(_ew.gt(y, _const(y, 0.0, dt)), _const(y, np.inf, dt), _const(y, -np.inf, dt))
    return _ew.select(at_one, inf, result)


def _normal_real(key: Array, shape: tuple[int, ...], dt: np.dtype) -> Array:
    lo = float(np.nextafter(np.array(-1.0, dt), np.array(0.0, dt)))
    u = _uniform("normal", key, shape, dt, lo, 1.0)
    return _ew.mul(_const(u, np.sqrt(2.0), dt), _erfinv(u))


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
    key = _check_key("functx.random.normal", key)
    dt = _float_dtype("normal", dtype, complex_ok=True)
    shape = _shape_tuple("normal", shape)
    if dt.kind == "f":
        return _normal_real(key, shape, dt)
    real_dt = np.dtype(f"f{dt.itemsize // 2}")
    k_re, k_im = (_shape.reshape(_shape.slice(split(key), (i, 0), (i + 1, 2)), (2,))
                  for i in (0, 1))
    re = _ew.convert_element_type(_normal_real(k_re, shape, real_dt), new_dtype=dt)
    im = _ew.convert_element_type(_normal_real(k_im, shape, real_dt), new_dtype=dt)
    im = _ew.mul(im, _const(im, 1j, dt))
    return _ew.div(_ew.add(re, im), _const(re, np.sqrt(2.0), dt))


def _nextafter(x: Array, toward_inf: bool) -> Array:
    """The float next to ``x`` toward +inf (or -inf), from its bits (infinities toward
    themselves stay; NaN stays NaN)."""
    dt = np.dtype(x.dtype)
    it = np.dtype(f"i{dt.itemsize}")
    i = _bits.bitcast_convert_type(x, new_dtype=it)
    one = _const(i, 1, it)
    zero = _const(x, 0.0, dt)
    # Away from zero the magnitude bits grow by one; toward zero they shrink by one.
    away = _ew.gt(x, zero) if toward_inf else _ew.lt(x, zero)
    step = _ew.select(away, _ew.add(i, one), _ew.sub(i, one))
    tiny = np.array(np.finfo(dt).smallest_subnormal * (1 if toward_inf else -1), dt)
    out = _bits.bitcast_convert_type(step, new_dtype=dt)
    out = _ew.select(_ew.eq(x, zero), _const(x, tiny[()], dt), out)
    limit = _const(x, np.inf if toward_inf else -np.inf, dt)
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
    key = _check_key("functx.random.truncated_normal", key)
    dt = _float_dtype("truncated_normal", dtype)
    if shape is None:
        shape = np.broadcast_shapes(np.shape(lower) if not _is_array(lower) else lower.shape,
                                    np.shape(upper) if not _is_array(upper) else upper.shape)
    shape = _shape_tuple("truncated_normal", shape)
    _check_param_shapes("truncated_normal", shape, lower=lower, upper=upper)
    lo = _as_param("truncated_normal", "lower", lower, dt, key)
    hi = _as_param("truncated_normal", "upper", upper, dt, key)
    sqrt2 = _const(key, np.sqrt(2.0), dt)
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
    key = _check_key("functx.random.bernoulli", key)
    if _is_array(p) or isinstance(p, np.generic):
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
    p_shape = tuple(np.shape(p)) if not _is_array(p) else tuple(p.shape)
    shape = p_shape if shape is None else _shape_tuple("bernoulli", shape)
    _check_param_shapes("bernoulli", shape, p=p)
    u = _unit_floats(key, shape, dt)
    return _ew.lt(u, _as_param("bernoulli", "p", p, dt, key))


def _convert_and_clip(x: Array, dtype: np.dtype) -> Array:
    """Integer ``x`` converted to the integer ``dtype``, clipped into its range (not
    wrapped)."""
    src, dst = np.iinfo(x.dtype), np.iinfo(dtype)
    lo, hi = max(src.min, dst.min), min(src.max, dst.max)
    if (lo, hi) != (src.min, src.max):
        x = _ew.clamp(_const(x, lo, x.dtype), x, _const(x, hi, x.dtype))
    return x if x.dtype == dtype else _ew.convert_element_type(x, new_dtype=dtype)


def _int_param(name: str, what: str, value: Any, like: Any) -> Array:
    """``minval``/``maxval`` as an integer array (Python ints as int64, floats truncated)."""
    if _is_array(value) or isinstance(value, np.generic):
        v = value if _is_array(value) else fnp.asarray(value)
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
    zero = _ew.eq(span, _const(span, 0, span.dtype))
    return _ew.select(zero, x, _ew.rem(x, _ew.select(zero, _const(span, 1, span.dtype), span)))


def _randint(key: Array, shape: tuple[int, ...], minval: Array, maxval: Array,
             dt: np.dtype) -> Array:
    nbits = dt.itemsize * 8
    ut = _UINT[nbits]
    out_of_range = _ew.gt(maxval, _convert_and_clip(
        _const(maxval, np.iinfo(dt).max, dt), np.dtype(maxval.dtype)))
    minval = _convert_and_clip(minval, dt)
    maxval = _convert_and_clip(maxval, dt)
    keys = split(key)
    k1, k2 = (_shape.reshape(_shape.slice(keys, (i, 0), (i + 1, 2)), (2,)) for i in (0, 1))
    higher, lower = _random_bits(k1, nbits, shape), _random_bits(k2, nbits, shape)
    span = _ew.convert_element_type(_ew.sub(maxval, minval), new_dtype=ut)
    one = _const(span, 1, ut)
    span = _ew.select(_ew.le(maxval, minval), one, span)  # an empty range gives minval
    span = _ew.select(_ew.and_(out_of_range, _ew.gt(maxval, minval)), _ew.add(span, one), span)
    # (higher * 2**nbits + lower) % span, without a 2 * nbits-bit product.
    multiplier = _urem(_const(span, 2 ** (nbits // 2), ut), span)
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
    key = _check_key("functx.random.randint", key)
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise DTypeError(f"functx.random.randint draws integers; dtype {dt.name} is not an "
                         "integer dtype.")
    shape = _shape_tuple("randint", shape)
    _check_param_shapes("randint", shape, minval=minval, maxval=maxval)
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
    key = _check_key("functx.random.gumbel", key)
    dt = _float_dtype("gumbel", dtype)
    return _gumbel(key, _shape_tuple("gumbel", shape), dt)


def _gumbel(key: Array, shape: tuple[int, ...], dt: np.dtype) -> Array:
    u = _uniform("gumbel", key, shape, dt, float(np.finfo(dt).tiny), 1.0)
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
    key = _check_key("functx.random.categorical", key)
    logits = logits if _is_array(logits) else fnp.asarray(logits)
    if np.dtype(logits.dtype).kind != "f":
        raise DTypeError(f"functx.random.categorical needs floating-point logits, but got "
                         f"dtype {np.dtype(logits.dtype).name}.")
    ndim = len(logits.shape)
    if not -ndim <= axis < ndim:
        raise ShapeError(f"functx.random.categorical: axis {axis} is out of range for logits "
                         f"of shape {tuple(logits.shape)}.")
    axis = axis % ndim
    batch_shape = tuple(d for i, d in enumerate(logits.shape) if i != axis)
    shape = batch_shape if shape is None else _shape_tuple("categorical", shape)
    _check_param_shapes("categorical", shape, batch=np.empty(batch_shape))
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
    one_u = _const(keys, 1, _U32)
    for b in range(32):
        bit = _ew.and_(_bits.shift_right_logical(keys, _const(keys, b, _U32)), one_u)
        bit = _ew.convert_element_type(bit, new_dtype=i64)
        ones_upto = _red.cumsum(bit, axis=1)  # ones at or before each position
        n_zeros = _ew.sub(_const(bit, n, i64), _shape.slice(ones_upto, (0, n - 1), (m, n)))
        ones_before = _ew.sub(ones_upto, bit)
        # zeros keep their order at the front, ones keep theirs after all the zeros
        pos = _ew.select(_ew.eq(bit, _const(bit, 1, i64)), _ew.add(n_zeros, ones_before),
                         _ew.sub(cols, ones_before))
        flat = _shape.reshape(_ew.add(pos, rows), (m * n,))

        def moved(x: Array) -> Array:
            base = _const(x, 0, x.dtype, (m * n,))
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
        sort_keys = fnp.moveaxis(_random_bits(subkey, 32, tuple(x.shape)), axis, -1)
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
    key = _check_key("functx.random.permutation", key)
    if isinstance(x, (int, np.integer)) or (_is_array(x) and tuple(x.shape) == ()):
        if isinstance(x, bool) or np.dtype(getattr(x, "dtype", np.int64)).kind not in "iu":
            raise DTypeError("functx.random.permutation: x must be an int or an array of rank "
                             f">= 1, not {x!r:.60}.")
        n = operator.index(x) if isinstance(x, (int, np.integer)) else int(x)
        if n < 0:
            raise ValueError(f"functx.random.permutation: x={n} is negative.")
        return _shuffle(key, fnp.arange(n, dtype=np.int64), 0)
    x = x if _is_array(x) else fnp.asarray(x)
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
