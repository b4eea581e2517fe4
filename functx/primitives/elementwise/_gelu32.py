"""Exact GELU and its gradient for float32 on the CPU, each one vectorisable loop compiled
with Numba on first use (``functx.primitives.fused`` calls :func:`gelu32` and
:func:`gelu_grad32`; issue 15).

Per element, in float64, rounded once to float32 at the end::

    gelu(x)          = x/2 h(x)
    g * gelu'(x)     = g (h(x)/2 + x e / sqrt(2 pi))
    h(x) = 1 + erf(x / sqrt 2) = erfc(t)  (x < 0),  2 - erfc(t)  (x >= 0),  t = |x| / sqrt 2
    erfc(t) = e R(t),  e = exp(-t^2) = exp(-x^2/2),  R = erfcx (the scaled erfc)

so ``1 + erf`` never cancels (the negative side is ``erfc`` itself, accurate relative to its
value down to the underflow of the result), and the gradient reuses ``e``. No library call
is made, so LLVM turns each loop into SIMD code (8 doubles per AVX-512 instruction) and
``parallel`` spreads it over the cores:

* ``R(t)``: a degree-14 polynomial in ``u``, an affine function of ``s = 1 / (1 + t/3)``
  mapping ``t`` in ``[0, 10.5]`` onto ``[-1, 1]`` (``t`` is clamped there: beyond,
  ``x e R`` is below 1e-48 and rounds to 0 in float32). The coefficients are the Chebyshev
  interpolant of ``erfcx`` at 200 nodes, computed with mpmath at 40 digits, converted to
  monomials: relative error 5e-12.
* ``exp(z)`` for ``z <= 0`` (:func:`exp_nonpositive`): ``z = n ln2 + r``, ``|r| <= ln2/2``
  (``n`` rounded with the 1.5 * 2^52 trick, ``ln2`` in two parts), the Taylor polynomial of
  degree 11 in ``r``, times ``2^n`` built in the exponent bits; relative error 1e-14. It is
  0 below ``z = -300`` (``|x| > 24.5``: ``x e`` below 1e-129, nothing in float32).

The loops contract multiply-adds into FMAs. Accuracy of the float32 results against the
exact values (tests/test_gelu_kernel.py, millions of points over both tails and the
subnormals): gelu within 0.5001 ulp everywhere (correctly rounded but for a few per
million); the gradient within 0.502 ulp, plus about 1e-14 |g| near the zero of ``gelu'``
(``x = -0.7518``), where its float64 value is a difference.

Special values follow the float64 implementation of ``functx.primitives.fused``: NaN gives
NaN; ``gelu(+inf) = +inf``, ``gelu(-inf) = NaN`` (``-inf * 0``), the gradient NaN at both
infinities; ``gelu(-0) = -0``.

The loops are plain Python as well (``_prange = range``); without Numba (or with
``FUNCTX_NUMBA=0``), :func:`gelu32_numpy` and :func:`gelu_grad32_numpy` evaluate the same
formulas on whole arrays (without FMAs: the float32 results agree to 1 ulp and are nearly
always equal).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.primitives._numba import compile_loop, numba_or_none

__all__ = ["gelu32", "gelu_grad32", "gelu32_numpy", "gelu_grad32_numpy", "compiled",
           "exp_nonpositive", "PARALLEL_MIN_SIZE"]

_kernels: dict = {}
_prange = range  # numba.prange in the parallel variant (functx.primitives._numba.compile_loop)

PARALLEL_MIN_SIZE = 1 << 18   # from this size the loops run on every core

_R = (  # erfcx(t) = sum _R[k] u^k, u = _US s + _UB, s = 1 / (1 + t / _LAM); degree 0 first
    0.2654619219973239,
    0.3586229174661711,
    0.22366884999254466,
    0.1066747865608395,
    0.03716437579651989,
    0.008248284262586798,
    0.0005171313482966667,
    -0.0003028033811663691,
    -7.131690102515449e-05,
    1.1486724894677592e-05,
    5.350682564383281e-06,
    -6.677875830172987e-07,
    -3.850524773755149e-07,
    4.628129575421297e-08,
    2.2009577370250238e-08,
)
_R_DEGREE = 14
_T_MAX = 10.5
_LAM = 3.0
_S_MIN = 1.0 / (1.0 + _T_MAX / _LAM)
_US = 2.0 / (1.0 - _S_MIN)
_UB = -2.0 * _S_MIN / (1.0 - _S_MIN) - 1.0

_EXP_COEF = tuple(1.0 / math.factorial(k) for k in range(12))  # degree 0 first
_EXP_DEGREE = 11
_EXP_MIN = -300.0
_LOG2E = 1.0 / math.log(2.0)
_LN2_HI = float.fromhex("0x1.62e42fee00000p-1")   # ln 2, high 32 bits: n * _LN2_HI is exact
_LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
_ROUND = 6755399441055744.0   # 1.5 * 2^52: (v + _ROUND) - _ROUND rounds v to an integer
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def exp_nonpositive(z: float) -> float:
    """``exp(z)`` in float64 for ``z <= 0``, vectorisable (see the module docstring);
    0 below -300 and for NaN."""
    zc = z if z > _EXP_MIN else _EXP_MIN
    n = (zc * _LOG2E + _ROUND) - _ROUND
    r = (zc - n * _LN2_HI) - n * _LN2_LO
    p = 0.0
    for k in range(_EXP_DEGREE, -1, -1):
        p = p * r + _EXP_COEF[k]
    scale = np.int64((np.int64(n) + 1023) << 52).view(np.float64)   # 2^n
    return p * scale if z >= _EXP_MIN else 0.0


def gelu_parts(xi: float) -> tuple[float, float]:
    """``(1 + erf(x / sqrt 2), exp(-x^2 / 2))`` in float64 for a float64 ``x``: the scalar
    formula of both loops (compiled inline)."""
    e = exp_nonpositive(-0.5 * (xi * xi))
    t = min(abs(xi) * _INV_SQRT2, _T_MAX)
    u = _US / (1.0 + t * (1.0 / _LAM)) + _UB
    p = 0.0
    for k in range(_R_DEGREE, -1, -1):
        p = p * u + _R[k]
    erfc = e * p
    return (2.0 - erfc if xi >= 0.0 else erfc), e


def gelu32_loop(x: Any, out: Any) -> None:
    """``out[i] = gelu(x[i])`` for 1-d float32 ``x`` and ``out``."""
    for i in _prange(x.size):
        xi = np.float64(x[i])
        h, _ = gelu_parts(xi)
        out[i] = np.float32(0.5 * xi * h)


def gelu_grad32_loop(x: Any, g: Any, out: Any) -> None:
    """``out[i] = g[i] gelu'(x[i])`` for 1-d float32 arrays."""
    for i in _prange(x.size):
        xi = np.float64(x[i])
        h, e = gelu_parts(xi)
        out[i] = np.float32(np.float64(g[i]) * (0.5 * h + xi * e * _INV_SQRT_2PI))


# -- the same formulas on whole arrays (without Numba) -----------------------------------------

def _parts_numpy(xi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gelu_parts` of a float64 array."""
    with np.errstate(invalid="ignore", over="ignore"):
        z = -0.5 * (xi * xi)
        zc = np.where(z > _EXP_MIN, z, _EXP_MIN)
        n = (zc * _LOG2E + _ROUND) - _ROUND
        r = (zc - n * _LN2_HI) - n * _LN2_LO
        p = np.zeros_like(r)
        for k in range(_EXP_DEGREE, -1, -1):
            p = p * r + _EXP_COEF[k]
        scale = ((n.astype(np.int64) + 1023) << 52).view(np.float64)
        e = np.where(z >= _EXP_MIN, p * scale, 0.0)
        t = np.minimum(np.abs(xi) * _INV_SQRT2, _T_MAX)
        u = _US / (1.0 + t * (1.0 / _LAM)) + _UB
        p = np.zeros_like(u)
        for k in range(_R_DEGREE, -1, -1):
            p = p * u + _R[k]
        erfc = e * p
        return np.where(xi >= 0.0, 2.0 - erfc, erfc), e


def gelu32_numpy(x: np.ndarray) -> np.ndarray:
    """:func:`gelu32_loop` with NumPy operations (without Numba)."""
    xi = np.asarray(x, np.float32).astype(np.float64)
    h, _ = _parts_numpy(xi)
    with np.errstate(invalid="ignore"):
        return (0.5 * xi * h).astype(np.float32)


def gelu_grad32_numpy(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """:func:`gelu_grad32_loop` with NumPy operations (without Numba)."""
    xi = np.asarray(x, np.float32).astype(np.float64)
    gi = np.asarray(g, np.float32).astype(np.float64)
    h, e = _parts_numpy(xi)
    with np.errstate(invalid="ignore", over="ignore"):
        return (gi * (0.5 * h + xi * e * _INV_SQRT_2PI)).astype(np.float32)


# -- entry points ------------------------------------------------------------------------------

# FMA contraction (fastmath "contract"); error_model "numpy": a float division by zero
# would raise in Python's model, a branch that stops LLVM vectorising the loop.
_OPTIONS = {"fastmath": {"contract"}, "error_model": "numpy"}
_LOOPS = {"gelu": gelu32_loop, "gelu_grad": gelu_grad32_loop}


def compiled(parallel: bool, name: str = "gelu") -> Any:
    """The compiled loop ``name`` (``"gelu"`` or ``"gelu_grad"``; ``parallel``: over every
    core), or None without Numba (or with ``FUNCTX_NUMBA=0``)."""
    if numba_or_none() is None:
        return None
    kernel = _kernels.get((name, parallel))
    if kernel is None:
        kernel = _kernels[(name, parallel)] = compile_loop(
            _LOOPS[name], parallel, (gelu_parts, exp_nonpositive), **_OPTIONS)
    return kernel


def gelu32(x: np.ndarray) -> np.ndarray:
    """Exact GELU of a float32 NumPy array (any shape, any layout) in one pass.

    Example:
        >>> gelu32(np.array([1.0], np.float32))
        array([0.8413448], dtype=float32)
    """
    x = np.asarray(x, np.float32)
    flat = np.ascontiguousarray(x).reshape(-1)
    kernel = compiled(flat.size >= PARALLEL_MIN_SIZE, "gelu")
    if kernel is None:
        out = gelu32_numpy(flat)
    else:
        out = np.empty_like(flat)
        kernel(flat, out)
    return out.reshape(x.shape)


def gelu_grad32(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``g * gelu'(x)`` (exact GELU) of float32 NumPy arrays of one shape in one pass.

    Example:
        >>> gelu_grad32(np.array([0.0], np.float32), np.array([2.0], np.float32))
        array([1.], dtype=float32)
    """
    x, g = np.asarray(x, np.float32), np.asarray(g, np.float32)
    fx, fg = np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(g).reshape(-1)
    kernel = compiled(fx.size >= PARALLEL_MIN_SIZE, "gelu_grad")
    if kernel is None:
        out = gelu_grad32_numpy(fx, fg)
    else:
        out = np.empty_like(fx)
        kernel(fx, fg, out)
    return out.reshape(x.shape)
