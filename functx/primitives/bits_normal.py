"""``bits_to_normal``: standard normal values from random bits, in one pass.

``functx.random.normal`` draws bits with the Threefry generator and maps them to normal
values as ``jax.random.normal`` does: the bits' top mantissa bits make ``f`` uniform in
``[0, 1)``, ``u = max(lo, f * (1 - lo) + lo)`` is uniform in ``(-1, 1)`` (``lo`` the float
just above -1) and the value is ``sqrt(2) * erf_inv(u)``, with XLA's ``erf_inv``: Giles'
polynomials ("Approximating the erfinv function", GPU Computing Gems, 2011) in
``w = -log(1 - u*u)`` (float32: two branches, at ``w = 5``; float64: three, at ``w = 6.25``
and ``16``; the tail ones in ``sqrt(w)``), with ``w`` computed accurately near ``|u| = 1``
(``log((1 - |u|)(1 + |u|))``, where XLA's ``log1p(-u*u)`` loses digits). So the values are
JAX's to rounding.

It is a primitive for speed: written with primitives it is about 130 full-size operations
(three polynomials of degree 8 to 22 and their selects); on the CPU it is one compiled loop
when Numba is installed (all cores), else NumPy operations with each polynomial evaluated
only on the entries that use it (also on CuPy). Bits are not differentiable: the VJP and
JVP are zero. float16 and bfloat16 values are computed in float32 and rounded once.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import ml_dtypes

from functx.errors import DTypeError
from functx.ir import AbstractArray
from functx.primitives._batching import unary_batch
from functx.primitives._numba import njit_variant, numba_or_none
from functx.primitives._util import fmt, is_extension_float
from functx.primitives.elementwise._common import quiet
from functx.registry import Primitive
from functx.tracing import bind

# (branch taken while w < bound, whether the polynomial's variable is sqrt(w), its centre,
# coefficients from the highest degree).
ERFINV_F32 = (
    (5.0, False, 2.5, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                       0.00021858087, -0.00125372503, -0.00417768164, 0.246640727,
                       1.50140941)),
    (math.inf, True, 3.0, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                           0.00573950773, -0.0076224613, 0.00943887047, 1.00167406,
                           2.83297682)),
)
ERFINV_F64 = (
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
    (math.inf, True, 5.0, (
        -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
        -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
        2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
        -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
        7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
        1.0103004648645343977, 4.8499064014085844221)),
)
# Below this many elements the NumPy path runs (no compile, and no thread start-up).
NUMBA_MIN_SIZE = 1 << 14


def _table(dt: np.dtype) -> tuple:
    return ERFINV_F64 if dt == np.float64 else ERFINV_F32


def unit_floats_from_bits(xp: Any, bits: Any, dt: np.dtype) -> Any:
    """``[0, 1)`` floats of ``dt`` from unsigned bits of the same width: the top mantissa
    bits under the exponent of 1, minus 1 (as ``jax.random.uniform``)."""
    info = ml_dtypes.finfo(dt)
    ut = np.dtype(f"u{dt.itemsize}")
    one_bits = ut.type(np.array(1.0, dt).view(ut))
    mant = (bits >> ut.type(info.bits - info.nmant)) | one_bits
    return mant.view(dt) - dt.type(1)


def open_unit_interval(xp: Any, f: Any, dt: np.dtype) -> Any:
    """``u = max(lo, f * (1 - lo) + lo)``: ``f`` in ``[0, 1)`` mapped into ``(-1, 1)``."""
    lo = np.nextafter(dt.type(-1), dt.type(0))
    return xp.maximum(lo, f * (dt.type(1) - lo) + lo)


def erf_inv_xp(xp: Any, x: Any) -> Any:
    """XLA's ``erf_inv`` of a float32 or float64 array with array operations, each
    polynomial on its own entries only."""
    dt = np.dtype(x.dtype)
    table = _table(dt)
    flat = xp.reshape(x, (-1,))
    a = xp.abs(flat)
    with quiet(invalid="ignore", divide="ignore"):
        small = a < 0.5
        w = xp.empty_like(flat)
        xs = flat[small]
        w[small] = -xp.log1p(-(xs * xs))
        ab = a[~small]
        w[~small] = -xp.log((dt.type(1) - ab) * (dt.type(1) + ab))
        out = xp.empty_like(flat)
        lower = -np.inf
        for bound, of_sqrt, centre, coefs in table:
            sel = (w >= lower) & (w < bound) if bound != np.inf else (w >= lower)
            lower = bound
            v = w[sel]
            t = (xp.sqrt(v) if of_sqrt else v) - dt.type(centre)
            p = xp.full(t.shape, coefs[0], dt)
            for c in coefs[1:]:
                p *= t
                p += dt.type(c)
            out[sel] = p
        out *= flat
        at_one = a == 1
        out[at_one] = xp.copysign(dt.type(np.inf), flat[at_one])
        out[xp.isnan(w)] = np.nan  # |x| > 1 or NaN
    return xp.reshape(out, x.shape)


_kernels: dict[tuple[np.dtype, bool], Any] = {}
# From this many elements the compiled loop runs on all cores (about 40 ns per float64
# value on one core: the degree-22 polynomial is a chain of dependent multiply-adds).
PARALLEL_MIN_SIZE = 1 << 18


def _compiled(dt: np.dtype, parallel: bool) -> Any:
    """The Numba kernel for float32 or float64 (compiled once per process, cached on disk):
    bits to ``sqrt(2) * erf_inv(u)`` in one loop, on all cores when ``parallel``."""
    kernel = _kernels.get((dt, parallel))
    if kernel is not None:
        return kernel
    numba = numba_or_none()
    table = _table(dt)
    ut = np.dtype(f"u{dt.itemsize}")
    info = ml_dtypes.finfo(dt)
    shift = ut.type(info.bits - info.nmant)
    # Constants are frozen into the compiled code.
    b1 = dt.type(table[0][0])
    b2 = dt.type(table[1][0]) if len(table) == 3 else dt.type(np.inf)
    c0, c1, c2 = dt.type(table[0][2]), dt.type(table[1][2]), dt.type(table[-1][2])
    p0, p1 = np.array(table[0][3], dt), np.array(table[1][3], dt)
    p2 = np.array(table[-1][3], dt)
    one, half = dt.type(1), dt.type(0.5)
    lo = np.nextafter(dt.type(-1), dt.type(0))
    span = dt.type(one - lo)
    sqrt2 = dt.type(math.sqrt(2.0))
    as_float = numba.float64 if dt == np.float64 else numba.float32

    scale = dt.type(2.0 ** -info.nmant)  # the mantissa bits m give f = m * 2**-nmant exactly

    def kernel(bits, out):  # pragma: no cover (compiled)
        for i in numba.prange(bits.size):
            f = as_float(bits[i] >> shift) * scale
            v = f * span + lo
            if v < lo:
                v = lo
            a = abs(v)
            if a < half:
                w = -math.log1p(-(v * v))
            else:
                w = -math.log((one - a) * (one + a))
            if w < b1:
                t = w - c0
                p = p0[0]
                for j in range(1, p0.size):
                    p = p * t + p0[j]
            elif w < b2:
                t = math.sqrt(w) - c1
                p = p1[0]
                for j in range(1, p1.size):
                    p = p * t + p1[j]
            else:
                t = math.sqrt(w) - c2
                p = p2[0]
                for j in range(1, p2.size):
                    p = p * t + p2[j]
            out[i] = sqrt2 * (p * v)
    kernel = njit_variant(kernel, f"{dt.name}_{'parallel' if parallel else 'serial'}",
                          parallel=parallel, fastmath=False, error_model="numpy")
    _kernels[(dt, parallel)] = kernel
    return kernel


def bits_to_normal_impl(xp: Any, bits: Any, *, dtype: np.dtype) -> Any:
    dt = np.dtype(dtype)
    bits = xp.asarray(bits)
    if xp is np and dt.itemsize >= 4 and bits.size >= NUMBA_MIN_SIZE and numba_or_none():
        flat = np.ascontiguousarray(bits).reshape(-1)
        out = np.empty(flat.size, dt)
        _compiled(dt, flat.size >= PARALLEL_MIN_SIZE)(flat, out)
        return out.reshape(bits.shape)
    u = open_unit_interval(xp, unit_floats_from_bits(xp, bits, dt), dt)
    work = dt if dt.itemsize >= 4 else np.dtype(np.float32)
    y = erf_inv_xp(xp, u.astype(work, copy=False))
    return (work.type(math.sqrt(2.0)) * y).astype(dt, copy=False)


bits_to_normal_p = Primitive("bits_to_normal")


def _float_aval(name: str, bits: AbstractArray, dtype: np.dtype) -> AbstractArray:
    dt = np.dtype(dtype)
    if dt.kind != "f" and not is_extension_float(dt):
        raise DTypeError(f"{name} makes floating-point values, not {dt.name}.")
    want = np.dtype(f"u{dt.itemsize}")
    if np.dtype(bits.dtype) != want:
        raise DTypeError(f"{name} to {dt.name} needs {want.name} bits (one value's width) "
                         f"but got {fmt((bits,))}.")
    return AbstractArray(bits.shape, dt, False)


bits_to_normal_p.def_abstract_eval(lambda bits, *, dtype: _float_aval("bits_to_normal", bits,
                                                                       dtype))


bits_to_normal_p.def_impl(bits_to_normal_impl)
bits_to_normal_p.def_zero_vjp()
bits_to_normal_p.def_jvp(lambda tangents, primals, out, **params: None)
bits_to_normal_p.def_batch(unary_batch(bits_to_normal_p))


def _uniform_compiled(dt: np.dtype, parallel: bool) -> Any:
    """The Numba kernel of :func:`unit_floats_from_bits` (one pass)."""
    kernel = _kernels.get((dt, parallel, "uniform"))
    if kernel is not None:
        return kernel
    numba = numba_or_none()
    info = ml_dtypes.finfo(dt)
    shift = np.dtype(f"u{dt.itemsize}").type(info.bits - info.nmant)
    scale = dt.type(2.0 ** -info.nmant)
    as_float = numba.float64 if dt == np.float64 else numba.float32

    def kernel(bits, out):  # pragma: no cover (compiled)
        for i in numba.prange(bits.size):
            out[i] = as_float(bits[i] >> shift) * scale
    kernel = njit_variant(kernel, f"{dt.name}_{'parallel' if parallel else 'serial'}",
                          parallel=parallel)
    _kernels[(dt, parallel, "uniform")] = kernel
    return kernel


def bits_to_uniform_impl(xp: Any, bits: Any, *, dtype: np.dtype) -> Any:
    dt = np.dtype(dtype)
    bits = xp.asarray(bits)
    if xp is np and dt.itemsize >= 4 and bits.size >= NUMBA_MIN_SIZE and numba_or_none():
        flat = np.ascontiguousarray(bits).reshape(-1)
        out = np.empty(flat.size, dt)
        _uniform_compiled(dt, flat.size >= PARALLEL_MIN_SIZE)(flat, out)
        return out.reshape(bits.shape)
    return unit_floats_from_bits(xp, bits, dt)


bits_to_uniform_p = Primitive("bits_to_uniform")
bits_to_uniform_p.def_abstract_eval(lambda bits, *, dtype: _float_aval("bits_to_uniform", bits,
                                                                         dtype))
bits_to_uniform_p.def_impl(bits_to_uniform_impl)
bits_to_uniform_p.def_zero_vjp()
bits_to_uniform_p.def_jvp(lambda tangents, primals, out, **params: None)
bits_to_uniform_p.def_batch(unary_batch(bits_to_uniform_p))


def bits_to_uniform(bits: Any, dtype: Any) -> Any:
    """Floats of ``dtype`` in ``[0, 1)`` from unsigned ``bits`` of the same width: the top
    mantissa bits (a multiple of ``2**-nmant``), as ``jax.random.uniform``."""
    return bind(bits_to_uniform_p, bits, dtype=np.dtype(dtype))


def bits_to_normal(bits: Any, dtype: Any) -> Any:
    """Standard normal values of ``dtype`` from unsigned ``bits`` of the same width (the
    transform of ``jax.random.normal``; see the module docstring)."""
    return bind(bits_to_normal_p, bits, dtype=np.dtype(dtype))
