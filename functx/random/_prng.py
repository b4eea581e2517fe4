"""functx.random's generator and keys: argument checks, the Threefry-2x32 bits over 64-bit
counters, :func:`key`, :func:`split`, :func:`fold_in` and the raw :func:`bits`.

The package docstring (``functx.random``) describes the scheme; the samplers built on these
bits are in ``_distributions``. Use both through ``functx.random``.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from functx import numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.primitives import bits as _bits
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.tracing import Tracer

Array = Any  # a NumPy/CuPy array or a tracer
U32 = np.dtype(np.uint32)
_U64 = np.dtype(np.uint64)
UINT = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: U32, 64: _U64}


# ----------------------------------------------------------------------------------------
# Argument checks


def is_array(x: Any) -> bool:
    return type(x) is Tracer or (hasattr(x, "shape") and hasattr(x, "dtype")
                                 and not isinstance(x, np.generic))


def check_key(name: str, key: Any) -> Array:
    """``key`` if it is a key (a uint32 array of shape (2,)); else an error naming the
    function ``name`` (e.g. ``"functx.random.uniform"``).

    Raises:
        DTypeError: not an array, or not uint32.
        ShapeError: a uint32 array of another shape (e.g. a batch of keys).
    """
    if isinstance(key, np.generic) or not is_array(key):
        raise DTypeError(
            f"{name} needs a key, a uint32 array of shape (2,), but got "
            f"{type(key).__name__} {key!r:.60}. Make one with functx.random.key(seed) (and "
            "new ones with functx.random.split(key)).")
    if np.dtype(key.dtype) != U32:
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


def shape_tuple(name: str, shape: Any) -> tuple[int, ...]:
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


def check_param_shapes(name: str, shape: tuple[int, ...], **params: Any) -> None:
    """Parameter arrays must broadcast to exactly ``shape`` (as in jax.random).

    Raises:
        ShapeError: naming the parameters and their shapes.
    """
    shapes = {k: tuple(np.shape(v)) if not is_array(v) else tuple(v.shape)
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


def finfo(dtype: Any) -> Any:
    """Machine limits of a float dtype, bfloat16 and the other ml_dtypes floats included
    (``np.finfo`` knows only NumPy's own)."""
    return ml_dtypes.finfo(np.dtype(dtype))


def float_dtype(name: str, dtype: Any, complex_ok: bool = False) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind != "f" and not (complex_ok and dt.kind == "c"):
        kinds = "floating-point or complex" if complex_ok else "floating-point"
        raise DTypeError(f"functx.random.{name} draws {kinds} values; dtype {dt.name} is "
                         "not one. Pass e.g. dtype=np.float32 or np.float64.")
    return dt


def const(like: Any, value: Any, dtype: Any, shape: Sequence[int] = ()) -> Array:
    """A constant on ``like``'s device (memoised; read-only)."""
    return _shape.constant(like, value, tuple(shape), np.dtype(dtype))


def as_param(name: str, what: str, value: Any, dtype: np.dtype, like: Any) -> Array:
    """A sampler's parameter (Python number or array) as an array of ``dtype``."""
    if is_array(value):
        return value if value.dtype == dtype else fnp.astype(value, dtype)
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"functx.random.{name}: {what} must be a number or an array, not "
                        f"{value!r:.60}.")
    if arr.ndim == 0:
        return const(like, arr.astype(dtype)[()], dtype)
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
        hi = const(like, 0, U32, shape)
        lo = xp.arange(n, dtype=U32).reshape(shape)
    else:  # pragma: no cover - 2**32 elements do not fit in a test
        idx = xp.arange(n, dtype=_U64).reshape(shape)
        hi, lo = (idx >> np.uint64(32)).astype(U32), idx.astype(U32)
    if xp is np:
        lo.flags.writeable = hi.flags.writeable = False
    return hi, lo


def _traced_counters(k1: Array, shape: tuple[int, ...]) -> tuple[Array, Array]:
    """The counters of :func:`_counters`, computed inside the trace when the key is traced.

    The index is a sum of one small ``arange`` per axis, and a zero derived from the key makes
    the sum part of the trace: a trace (a checkpointed block, a vmapped function) then holds
    O(sum(shape)) constants instead of two counter arrays as large as the request.
    """
    zero = _ew.mul(k1, const(k1, 0, U32))  # a traced 0
    lo = _shape.broadcast_in_dim(zero, shape, ())
    hi = lo
    stride = 1
    for ax in reversed(range(len(shape))):
        xp = _shape.array_module(k1)
        r = xp.arange(shape[ax], dtype=U32) * U32.type(stride)
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


def random_bits(key: Array, bit_width: int, shape: tuple[int, ...]) -> Array:
    """Unsigned integers of ``bit_width`` bits (8, 16, 32 or 64), uniform over their range
    (the ``random_bits`` primitive: counters implicit, words xor-ed or concatenated)."""
    k1, k2 = _words(key)
    out = _bits.random_bits(k1, k2, shape, 64 if bit_width == 64 else 32)
    return out if bit_width >= 32 else _ew.convert_element_type(out, new_dtype=UINT[bit_width])


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
            and not is_array(seed):
        raise DTypeError(f"functx.random.key needs an integer seed, not {type(seed).__name__} "
                         f"{seed!r:.60}.")
    if isinstance(seed, int):
        if not -2**63 <= seed < 2**64:
            raise ValueError(f"functx.random.key: the seed {seed} does not fit in 64 bits; use "
                             "a seed in [-2**63, 2**64).")
        out = np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], dtype=U32)
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
    lo = _ew.convert_element_type(seed, new_dtype=U32)
    if np.dtype(seed.dtype).itemsize == 8:
        hi = _ew.convert_element_type(
            _bits.shift_right_logical(seed, const(seed, 32, seed.dtype)), new_dtype=U32)
    else:
        hi = const(seed, 0, U32)
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
    key = check_key("functx.random.split", key)
    shape = shape_tuple("split", num)
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
    key = check_key("functx.random.fold_in", key)
    if isinstance(data, (bool, np.bool_)):
        raise DTypeError("functx.random.fold_in needs integer data, not a bool.")
    if isinstance(data, int):
        if not 0 <= data < 2**32:
            raise ValueError(f"functx.random.fold_in: data {data} is outside [0, 2**32); fold "
                             "in a uint32 value (e.g. data % 2**32).")
        d = const(key, data, U32)
    else:
        if isinstance(data, np.generic) or not is_array(data):
            data = fnp.asarray(data)
        if np.dtype(data.dtype).kind not in "iu":
            raise DTypeError(f"functx.random.fold_in needs integer data, but got dtype "
                             f"{np.dtype(data.dtype).name}.")
        if tuple(data.shape) != ():
            raise ShapeError(f"functx.random.fold_in folds in one integer, but got shape "
                             f"{tuple(data.shape)}; use functx.vmap for a batch.")
        d = data if data.dtype == U32 else _ew.convert_element_type(data, new_dtype=U32)
    k1, k2 = _words(key)
    b1, b2 = _bits.threefry2x32(k1, k2, const(key, 0, U32), d)
    return _stack_words(b1, b2)



# ----------------------------------------------------------------------------------------
# Raw bits


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
    key = check_key("functx.random.bits", key)
    dt = np.dtype(dtype)
    if dt.kind != "u":
        raise DTypeError(f"functx.random.bits draws unsigned integers; dtype {dt.name} is not "
                         "one. Use uint8, uint16, uint32 or uint64.")
    return random_bits(key, dt.itemsize * 8, shape_tuple("bits", shape))
