"""Floating-point decomposition and integer arithmetic: frexp, ldexp, modf, nextafter,
spacing, gcd, lcm, packbits, unpackbits.

``frexp``, ``ldexp``, ``nextafter`` and ``spacing`` read and build the bits of the floats
(``bitcast_convert_type``), so they are exact, subnormals included. Gradients: ``frexp``'s
mantissa and ``ldexp`` are differentiable in the float (``d mantissa/dx = 2**-exponent``,
``d ldexp(x, n)/dx = 2**n``), ``modf``'s fractional part has gradient 1 and its integral
part 0; ``nextafter``/``spacing`` have none (their values are bit patterns).

Differences from NumPy:
    * ``gcd``/``lcm`` use a fixed number of Euclid steps under a trace (enough for the
      dtype's range), so they work under ``jit``/``vmap``.
    * ``frexp`` of float16 returns int32 exponents (as NumPy); of bfloat16 too.
    * ``spacing`` of negative float16 values is negative, as for the other dtypes (NumPy
      returns a positive spacing for float16 only).
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from functx.errors import ArgumentError, DTypeError
from functx.numpy import _reductions as _r
from functx.numpy import _shape as _fshape
from functx.numpy import _ufuncs as _uf
from functx.numpy._promotion import astype, is_tracer, promote_args_dtype, result_type
from functx.numpy._ufunc_base import as_ufunc, quiet_unused_branch, to_inexact
from functx.primitives import bits as _bits
from functx.primitives.misc import stop_gradient

__all__ = ["frexp", "ldexp", "modf", "nextafter", "spacing", "gcd", "lcm", "packbits",
           "unpackbits"]


def _format(name: str, dt: np.dtype) -> tuple[np.dtype, int, int]:
    """(unsigned dtype of the same width, mantissa bits, exponent bias) of a float dtype."""
    if dt == np.float64:
        return np.dtype(np.uint64), 52, 1023
    if dt == np.float32:
        return np.dtype(np.uint32), 23, 127
    if dt == np.float16:
        return np.dtype(np.uint16), 10, 15
    if dt.name == "bfloat16":
        return np.dtype(np.uint16), 7, 127
    raise DTypeError(f"functx.numpy.{name} needs a real floating-point operand, got {dt}; "
                     f"complex numbers have no binary exponent.")


def _u(v: int, udt: np.dtype) -> np.ndarray:
    return np.asarray(v, udt)


def _pow2(n: Any, dt: np.dtype) -> Any:
    """``2.0 ** n`` of dtype ``dt`` for integers ``n`` in the normal exponent range (exact)."""
    udt, mant, bias = _format("ldexp", dt)
    e = astype(_uf.add(n, bias), udt)
    return _bits.bitcast_convert_type(_bits.shift_left(e, _u(mant, udt)), new_dtype=dt)


def _exponent(x: Any) -> Any:
    """The int32 exponent ``e`` with ``x = m * 2**e``, ``0.5 <= |m| < 1`` (0 for zero, inf
    and NaN); exact for subnormals."""
    dt = x.dtype
    udt, mant, bias = _format("frexp", dt)
    tiny = float(np.finfo(dt).tiny)
    x = stop_gradient(x)
    sub = _uf.logical_and(_uf.not_equal(x, 0), _uf.less(_uf.absolute(x), tiny))
    k = mant + 2
    xs = _uf.where(sub, _uf.multiply(x, _pow2(np.asarray(k, np.int32), dt)), x)
    bits = _bits.bitcast_convert_type(xs, new_dtype=udt)
    raw = _uf.bitwise_and(_bits.shift_right_logical(bits, _u(mant, udt)),
                          _u((1 << (8 * udt.itemsize - 1 - mant)) - 1, udt))
    e = _uf.subtract(astype(raw, np.int32), np.int32(bias - 1))
    e = _uf.where(sub, _uf.subtract(e, np.int32(k)), e)
    special = _uf.logical_or(_uf.equal(x, 0), _uf.logical_not(_uf.isfinite(x)))
    return _uf.where(special, np.int32(0), e)


def _scale(x: Any, n: Any) -> Any:
    """``x * 2**n`` for ``n`` within about twice the exponent range, as two exact factors."""
    h = _uf.floor_divide(n, 2)
    return _uf.multiply(_uf.multiply(x, _pow2(h, x.dtype)), _pow2(_uf.subtract(n, h), x.dtype))


@as_ufunc
def frexp(x):
    """The mantissa ``m`` (``0.5 <= |m| < 1``) and int32 exponent ``e`` of each float, with
    ``x == m * 2**e`` (``(x, 0)`` for zero, inf and NaN).

    Example:
        >>> fnp.frexp(np.array([3.0, 0.25]))
        (array([0.75, 0.5 ]), array([ 2, -1], dtype=int32))
    """
    x = to_inexact(x)
    e = _exponent(x)
    special = _uf.logical_or(_uf.equal(x, 0), _uf.logical_not(_uf.isfinite(x)))
    with quiet_unused_branch():
        m = _uf.where(special, x, _scale(x, _uf.negative(e)))
    return m, e


@as_ufunc
def ldexp(x1, x2):
    """``x1 * 2**x2`` for integer ``x2``, rounded once (exact unless the result is
    subnormal, which rounds as NumPy's; overflow gives inf).

    Raises:
        DTypeError: ``x2`` is not an integer.

    Example:
        >>> fnp.ldexp(np.array([1.5, 3.0]), np.array([2, -1]))
        array([6. , 1.5])
    """
    n = _fshape.as_array(x2)
    if n.dtype.kind not in "iub":
        raise DTypeError(f"functx.numpy.ldexp: the exponent x2 must be integers, got dtype "
                         f"{n.dtype}; round and cast it with astype first.")
    x = _fshape.as_array(x1)
    x = astype(x, result_type(x, 1.0) if x.dtype.kind in "iub" else x.dtype)
    if x.dtype.kind == "c":
        raise DTypeError("functx.numpy.ldexp needs a real floating-point x1, got complex.")
    with quiet_unused_branch():
        return _ldexp(x, n)


def _ldexp(x: Any, n: Any) -> Any:
    dt = x.dtype
    _, mant, bias = _format("ldexp", dt)
    emax, emin = bias, 1 - bias
    e = _exponent(x)
    special = _uf.logical_or(_uf.equal(x, 0), _uf.logical_not(_uf.isfinite(x)))
    m2 = _uf.where(special, x, _scale(x, _uf.subtract(np.int32(1), e)))  # 1 <= |m2| < 2
    t = _uf.subtract(_uf.add(astype(e, np.int64), astype(n, np.int64)), np.int64(1))
    t = _uf.clip(t, emin - mant - 3, emax + 1)
    big = _uf.greater(t, emax)
    normal = _uf.multiply(m2, _pow2(_uf.minimum(t, emax), dt))
    low = _uf.less(t, emin)
    shift = mant + 2
    tiny = _uf.multiply(_uf.multiply(m2, _pow2(_uf.maximum(_uf.add(t, shift), emin), dt)),
                        _pow2(np.asarray(-shift, np.int64), dt))
    r = _uf.where(low, tiny, normal)
    inf = _uf.multiply(_uf.sign(x), np.asarray(np.inf, dt))
    r = _uf.where(_uf.logical_and(big, _uf.logical_not(special)), inf, r)
    return _uf.where(special, x, r)


@as_ufunc
def modf(x):
    """The fractional and integral parts of each value, both with ``x``'s sign
    (``modf(inf) == (0, inf)``).

    Example:
        >>> fnp.modf(np.array([-0.5, 1.5]))
        (array([-0.5,  0.5]), array([-0.,  1.]))
    """
    x = to_inexact(x)
    whole = _uf.trunc(x)
    with quiet_unused_branch():
        frac = _uf.where(_uf.isinf(x), _uf.copysign(np.zeros((), x.dtype), x),
                         _uf.subtract(x, stop_gradient(whole)))
    return frac, stop_gradient(whole)


def _next_bits(x: Any, toward_bigger_magnitude: Any) -> Any:
    udt, _, _ = _format("nextafter", x.dtype)
    bits = _bits.bitcast_convert_type(x, new_dtype=udt)
    one = _u(1, udt)
    return _bits.bitcast_convert_type(
        _uf.where(toward_bigger_magnitude, _uf.add(bits, one), _uf.subtract(bits, one)),
        new_dtype=x.dtype)


@as_ufunc
def nextafter(x1, x2):
    """The next representable float after ``x1`` in the direction of ``x2`` (no gradient).

    Example:
        >>> float(fnp.nextafter(1.0, 2.0) - 1.0) == float(np.finfo(np.float64).eps)
        True
    """
    (a, b), dt = promote_args_dtype("nextafter", x1, x2)
    if dt.kind in "iub":
        dt = result_type(dt, 1.0)
        a, b = astype(a, dt), astype(b, dt)
    a, b = stop_gradient(a), stop_gradient(b)
    tiny = np.asarray(np.finfo(dt).smallest_subnormal, dt)
    step = _next_bits(a, _uf.equal(_uf.greater(b, a), _uf.greater(a, 0)))
    from_zero = _uf.where(_uf.greater(b, a), tiny, _uf.negative(tiny))
    r = _uf.where(_uf.equal(a, 0), from_zero, step)
    r = _uf.where(_uf.equal(a, b), b, r)
    return _uf.where(_uf.logical_or(_uf.isnan(a), _uf.isnan(b)), np.asarray(np.nan, dt), r)


@as_ufunc
def spacing(x):
    """The distance from ``x`` to the next float away from zero (negative for negative
    ``x``; NaN for inf and NaN; no gradient).

    Example:
        >>> float(fnp.spacing(1.0)) == float(np.finfo(np.float64).eps)
        True
    """
    x = stop_gradient(to_inexact(x))
    dt = x.dtype
    tiny = np.asarray(np.finfo(dt).smallest_subnormal, dt)
    with np.errstate(over="ignore", invalid="ignore"):
        away = _next_bits(x, np.True_)
        r = _uf.subtract(away, x)
    r = _uf.where(_uf.equal(x, 0), tiny, r)
    return _uf.where(_uf.logical_not(_uf.isfinite(x)), np.asarray(np.nan, dt), r)


def _euclid_steps(dt: np.dtype) -> int:
    # Consecutive Fibonacci numbers are the worst case: about log_phi(2**bits) steps.
    return int(8 * dt.itemsize * 1.4405) + 2


def _gcd_abs(a: Any, b: Any) -> Any:
    zero = np.zeros((), a.dtype)
    one = np.ones((), a.dtype)
    concrete = not (is_tracer(a) or is_tracer(b))
    for _ in range(_euclid_steps(a.dtype)):
        if concrete and not _fshape.to_host(b).any():
            break
        done = _uf.equal(b, zero)
        rem = _uf.where(done, zero, _uf.remainder(a, _uf.where(done, one, b)))
        a = _uf.where(done, a, b)
        b = rem
    return a


def _int_pair(name: str, x1: Any, x2: Any) -> tuple[Any, Any]:
    (a, b), dt = promote_args_dtype(name, x1, x2)
    if dt.kind not in "iu":
        raise DTypeError(f"functx.numpy.{name} needs integer operands, got {dt}; cast them "
                         f"with astype first.")
    return _uf.absolute(a), _uf.absolute(b)


@as_ufunc
def gcd(x1, x2):
    """The greatest common divisor of the absolute values (``gcd(0, 0) == 0``).

    Example:
        >>> fnp.gcd(np.array([12, -4]), np.array([-18, 6]))
        array([6, 2])
    """
    a, b = _int_pair("gcd", x1, x2)
    return _gcd_abs(a, b)


@as_ufunc
def lcm(x1, x2):
    """The least common multiple of the absolute values (0 if either is 0).

    Example:
        >>> fnp.lcm(np.array([12, -4]), np.array([-18, 6]))
        array([36, 12])
    """
    a, b = _int_pair("lcm", x1, x2)
    g = _gcd_abs(a, b)
    zero = np.zeros((), g.dtype)
    safe = _uf.where(_uf.equal(g, zero), np.ones((), g.dtype), g)
    return _uf.where(_uf.equal(g, zero), zero, _uf.multiply(_uf.floor_divide(a, safe), b))


# ----------------------------------------------------------------------------------------
# bit packing

_BITORDERS = ("big", "little")


def _bitorder(name: str, bitorder: str) -> np.ndarray:
    if bitorder not in _BITORDERS:
        raise ArgumentError(f"functx.numpy.{name}: bitorder must be 'big' or 'little', not "
                            f"{bitorder!r}.")
    return np.arange(7, -1, -1, dtype=np.uint8) if bitorder == "big" else np.arange(
        8, dtype=np.uint8)


def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Any:
    """The truth values of ``a`` packed 8 to a byte (uint8) along ``axis`` (flattened if
    None), zero-padded to a multiple of 8.

    Raises:
        DTypeError: ``a`` is not boolean or integer.

    Example:
        >>> fnp.packbits(np.array([1, 0, 1, 1]))
        array([176], dtype=uint8)
    """
    a = _fshape.as_array(a)
    if a.dtype.kind not in "biu":
        raise DTypeError(f"functx.numpy.packbits needs a boolean or integer array, got "
                         f"{a.dtype}.")
    shifts = _bitorder("packbits", bitorder)
    if axis is None:
        a, axis = _fshape.ravel(a), 0
    ax = _fshape.norm_axis(axis, len(a.shape), "packbits")
    n = a.shape[ax]
    nbytes = -(-n // 8)
    bits = astype(_uf.not_equal(a, 0), np.uint8)
    if nbytes * 8 != n:
        pad = [(0, 0)] * len(a.shape)
        pad[ax] = (0, nbytes * 8 - n)
        bits = _fshape.pad(bits, pad)
    shape = tuple(a.shape[:ax]) + (nbytes, 8) + tuple(a.shape[ax + 1:])
    bits = _fshape.reshape(bits, shape)
    wshape = [1] * len(shape)
    wshape[ax + 1] = 8
    shifts = _fshape.on_device_of(a, shifts.reshape(wshape))
    weighted = _bits.shift_left(bits, _fshape.broadcast_to(shifts, shape))
    return astype(_r.sum(weighted, axis=ax + 1), np.uint8)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None,
               bitorder: str = "big") -> Any:
    """The bits of the uint8 array ``a`` as 0/1 uint8 values along ``axis`` (flattened if
    None); ``count`` keeps that many (negative: drops that many from the end; more than
    there are: zero-padded).

    Raises:
        DTypeError: ``a`` is not uint8.

    Example:
        >>> fnp.unpackbits(np.array([176], dtype=np.uint8), count=4)
        array([1, 0, 1, 1], dtype=uint8)
    """
    a = _fshape.as_array(a)
    if a.dtype != np.uint8:
        raise DTypeError(f"functx.numpy.unpackbits needs a uint8 array, got {a.dtype}.")
    shifts = _bitorder("unpackbits", bitorder)
    if axis is None:
        a, axis = _fshape.ravel(a), 0
    ax = _fshape.norm_axis(axis, len(a.shape), "unpackbits")
    x = _fshape.expand_dims(a, ax + 1)
    shape = tuple(a.shape[:ax + 1]) + (8,) + tuple(a.shape[ax + 1:])
    sshape = [1] * len(shape)
    sshape[ax + 1] = 8
    shifts = _fshape.on_device_of(a, shifts.reshape(sshape))
    bits = _uf.bitwise_and(_bits.shift_right_logical(_fshape.broadcast_to(x, shape),
                                                     _fshape.broadcast_to(shifts, shape)),
                           np.uint8(1))
    out_shape = tuple(a.shape[:ax]) + (a.shape[ax] * 8,) + tuple(a.shape[ax + 1:])
    bits = _fshape.reshape(bits, out_shape)
    if count is None:
        return bits
    count = int(count)
    n = out_shape[ax]
    keep = builtins.max(n + count, 0) if count < 0 else count
    if keep <= n:
        return _fshape.slice_axis(bits, 0, keep, ax)
    pad = [(0, 0)] * len(out_shape)
    pad[ax] = (0, keep - n)
    return _fshape.pad(bits, pad)
