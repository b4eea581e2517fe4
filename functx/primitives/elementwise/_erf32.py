"""float32 ``erf`` as one vectorisable loop, compiled with Numba on first use
(functx/primitives/elementwise/_transcendental.py calls :func:`compiled`).

The loop evaluates in float64 one polynomial per element, with no library call, so LLVM
turns it into SIMD code (4 doubles per AVX2 instruction) and ``parallel`` spreads it over
the cores. With ``t = min(|x|, 4)``:

* ``t < 1``: ``erf(x) = t * A(t^2)``, ``A`` of degree 11 (``erf(t)/t`` in ``t^2``);
* ``1 <= t < 2.5``: ``1 - B(u)`` with ``u = (t - 1.75) / 0.75``, ``B`` of degree 14 (erfc);
* ``2.5 <= t``: ``1 - C(u)`` with ``u = (t - 3.25) / 0.75``, ``C`` of degree 14 (erfc);
  ``erf(4) = 1 - 1.5e-8`` rounds to ``1.0f``, as every float32 ``erf`` beyond 3.92 does.

The three polynomials share one Horner loop whose coefficients are chosen per element (a
select per step, not a branch). They are the Chebyshev interpolants (degree 11 on ``[0, 1]``
in ``t^2``, 14 on each erfc interval) of the exact function, computed with mpmath at 40
digits and converted to monomials: relative error 3e-15 on ``[0, 1)`` and absolute error
below 2.2e-12 (on ``[1, 2.5)``) and 7e-14 (on ``[2.5, 4]``), against half an ulp of a float32
result of 3e-8 (near 1) or more. The sign comes back with ``copysign`` (``erf(-0) = -0``); NaN
stays NaN.

Accuracy of the float32 result (tests/test_elementwise_numerics.py): at most 1 ulp from the
exact value (the float64 value is rounded once; it can fall on the other side of a float32
rounding boundary only where the exact value lies within ~2e-12 of that boundary), and equal
to the correctly rounded value on every point of that test's sweeps (millions of float32s,
both tails, subnormals).

The loop is plain Python as well (``_prange = range``); without Numba, :func:`erf32_numpy`
evaluates the same operations on whole arrays.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.primitives._numba import compile_loop, numba_or_none

_kernels: dict = {}
_prange = range  # numba.prange in the parallel variant (functx.primitives._numba.compile_loop)


_A = (  # degree 0 first
    1.12837916709551,
    -0.37612638903146145,
    0.11283791669898874,
    -0.026866170521831382,
    0.005223976860019519,
    -0.0008548298675160972,
    0.00012054669180846156,
    -1.4915568196253542e-05,
    1.6362522122411365e-06,
    -1.5735956064114964e-07,
    1.2320621560017274e-08,
    -6.20881716410319e-10,
    0.0,
    0.0,
    0.0,
)
_B = (  # degree 0 first
    0.013328328780817578,
    -0.03958124697984659,
    0.05195038661902167,
    -0.03803510328334169,
    0.015219839818903418,
    -0.0015720050989173825,
    -0.0015952293368939176,
    0.0008088083859800581,
    -7.308822736530168e-05,
    -6.729447428494665e-05,
    2.49347757208108e-05,
    4.3747076940991974e-07,
    -2.1785323223758943e-06,
    2.7646524258055176e-07,
    8.563598346000844e-08,
)
_C = (  # degree 0 first
    4.302779463675178e-06,
    -2.189176990304282e-05,
    5.336118724444454e-05,
    -8.260718993082361e-05,
    9.067232148254266e-05,
    -7.446590109402217e-05,
    4.6902499103443984e-05,
    -2.2689457109782764e-05,
    8.173565291280575e-06,
    -1.9497753099056667e-06,
    1.3217528467037737e-07,
    1.262410108551465e-07,
    -6.16910761390851e-08,
    9.552301303829238e-09,
    8.805438529763757e-10,
)
_DEGREE = 14

# exp(z) for z <= 0 (exp_nonpositive): the Taylor polynomial of exp on [-300/512, 0],
# degree 13, then squared 9 times.
_EXP_COEF = tuple(1.0 / math.factorial(k) for k in range(14))  # degree 0 first
_EXP_DEGREE = 13
_EXP_SQUARINGS = 9
_EXP_MIN = -300.0   # below: 0 (|x| exp(-x^2/2) < 1e-128 there: nothing in float32)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
PARALLEL_MIN_SIZE = 1 << 18   # from this size the loops run on every core


def erf_erfc(a: float) -> tuple[float, float]:
    """``(erf(a), erfc(a))`` in float64 for a float64 ``a >= 0`` (not NaN): the polynomials
    above on ``t = min(a, 4)``. For ``a >= 4``, ``erf`` is ``1 - erfc(4)`` (``1.0f`` once
    rounded) and ``erfc`` 0 (below 1.6e-8). For ``a >= 1`` ``erfc`` is the polynomial itself
    (no cancellation): absolute error below 2.2e-12, relative below 1e-8 up to ``a = 2.5``
    and below 5e-6 up to 4. The scalar formula of every loop below (compiled inline)."""
    t = min(a, 4.0)
    small = t < 1.0
    mid = t < 2.5
    v = t * t if small else (t - (1.75 if mid else 3.25)) * (4.0 / 3.0)
    p = 0.0
    for k in range(_DEGREE, -1, -1):
        p = p * v + (_A[k] if small else (_B[k] if mid else _C[k]))
    r = t * p if small else 1.0 - p
    q = 1.0 - r if small else (p if a < 4.0 else 0.0)
    return r, q


def exp_nonpositive(z: float) -> float:
    """``exp(z)`` in float64 for ``z <= 0``, vectorisable (no library call): relative error
    below 2e-13 for ``z >= -300``; 0 below (and for NaN)."""
    zc = z if z > _EXP_MIN else _EXP_MIN
    r = zc * (1.0 / (1 << _EXP_SQUARINGS))
    p = 0.0
    for k in range(_EXP_DEGREE, -1, -1):
        p = p * r + _EXP_COEF[k]
    for _ in range(_EXP_SQUARINGS):
        p = p * p
    return p if z >= _EXP_MIN else 0.0


def erf32_loop(x: Any, out: Any) -> None:
    """``out[i] = erf(x[i])`` for 1-d float32 ``x`` and ``out``."""
    for i in _prange(x.size):
        xi = np.float64(x[i])
        r, _ = erf_erfc(abs(xi))
        out[i] = np.float32(math.copysign(r, xi)) if xi == xi else x[i]


def gelu32_loop(x: Any, out: Any) -> None:
    """``out[i] = gelu(x[i]) = x/2 (1 + erf(x/sqrt 2))`` for 1-d float32 ``x`` and ``out``
    (``1 + erf`` of a negative argument is ``erfc`` of its magnitude: no cancellation)."""
    for i in _prange(x.size):
        xi = np.float64(x[i])
        r, q = erf_erfc(abs(xi) * _INV_SQRT2)
        h = 1.0 + r if xi >= 0.0 else q
        out[i] = np.float32(0.5 * xi * h)


def gelu_grad32_loop(x: Any, g: Any, out: Any) -> None:
    """``out[i] = g[i] gelu'(x[i]) = g (Phi(x) + x phi(x))`` for 1-d float32 arrays."""
    for i in _prange(x.size):
        xi = np.float64(x[i])
        r, q = erf_erfc(abs(xi) * _INV_SQRT2)
        h = 1.0 + r if xi >= 0.0 else q
        e = exp_nonpositive(-0.5 * (xi * xi))
        out[i] = np.float32(np.float64(g[i]) * (0.5 * h + xi * e * _INV_SQRT_2PI))


# -- the same operations on whole arrays (without Numba) ---------------------------------------

def erf_erfc_numpy(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`erf_erfc` of a float64 array ``a >= 0``: the same float64 operations in the
    same order, so the same bits."""
    t = np.minimum(a, 4.0)
    small, mid = t < 1.0, t < 2.5
    v = np.where(small, t * t, (t - np.where(mid, 1.75, 3.25)) * (4.0 / 3.0))
    p = np.zeros_like(v)
    for k in range(_DEGREE, -1, -1):
        p = p * v + np.where(small, _A[k], np.where(mid, _B[k], _C[k]))
    r = np.where(small, t * p, 1.0 - p)
    q = np.where(small, 1.0 - r, np.where(a < 4.0, p, 0.0))
    return r, q


def exp_nonpositive_numpy(z: np.ndarray) -> np.ndarray:
    """:func:`exp_nonpositive` of a float64 array, with the same operations."""
    with np.errstate(invalid="ignore"):
        zc = np.where(z > _EXP_MIN, z, _EXP_MIN)
        r = zc * (1.0 / (1 << _EXP_SQUARINGS))
        p = np.zeros_like(r)
        for k in range(_EXP_DEGREE, -1, -1):
            p = p * r + _EXP_COEF[k]
        for _ in range(_EXP_SQUARINGS):
            p = p * p
        return np.where(z >= _EXP_MIN, p, 0.0)


def erf32_numpy(x: np.ndarray) -> np.ndarray:
    """:func:`erf32_loop` with NumPy operations (without Numba): the same bits."""
    xi = np.asarray(x, np.float32).astype(np.float64)
    r, _ = erf_erfc_numpy(np.abs(xi))
    with np.errstate(invalid="ignore"):
        out = np.copysign(r, xi).astype(np.float32)
    return np.where(np.isnan(xi), np.asarray(x, np.float32), out)


def _half_one_plus_erf_numpy(xi: np.ndarray) -> np.ndarray:
    r, q = erf_erfc_numpy(np.abs(xi) * _INV_SQRT2)
    return np.where(xi >= 0.0, 1.0 + r, q)


def gelu32_numpy(x: np.ndarray) -> np.ndarray:
    """:func:`gelu32_loop` with NumPy operations (without Numba): the same bits."""
    xi = np.asarray(x, np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return (0.5 * xi * _half_one_plus_erf_numpy(xi)).astype(np.float32)


def gelu_grad32_numpy(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """:func:`gelu_grad32_loop` with NumPy operations (without Numba): the same bits."""
    xi = np.asarray(x, np.float32).astype(np.float64)
    gi = np.asarray(g, np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        h = _half_one_plus_erf_numpy(xi)
        e = exp_nonpositive_numpy(-0.5 * (xi * xi))
        return (gi * (0.5 * h + xi * e * _INV_SQRT_2PI)).astype(np.float32)


# -- entry points ------------------------------------------------------------------------------

# (loop, inlined helpers, Numba options). The GELU loops contract multiply-adds into FMAs
# (30% faster); erf keeps separate roundings, the bits of erf32_numpy.
_FMA = {"fastmath": {"contract"}}
_LOOPS = {"erf": (erf32_loop, (erf_erfc,), {}),
          "gelu": (gelu32_loop, (erf_erfc,), _FMA),
          "gelu_grad": (gelu_grad32_loop, (erf_erfc, exp_nonpositive), _FMA)}


def compiled(parallel: bool, name: str = "erf") -> Any:
    """The compiled loop ``name`` (``"erf"``, ``"gelu"`` or ``"gelu_grad"``; ``parallel``:
    over every core), or None without Numba (or with ``FUNCTX_NUMBA=0``)."""
    if numba_or_none() is None:
        return None
    kernel = _kernels.get((name, parallel))
    if kernel is None:
        loop, helpers, options = _LOOPS[name]
        kernel = _kernels[(name, parallel)] = compile_loop(loop, parallel, helpers, **options)
    return kernel


def gelu32(x: np.ndarray) -> np.ndarray:
    """Exact GELU of a float32 NumPy array (any shape) in one pass: each element's float64
    value rounded once (see the module docstring)."""
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
    """``g * gelu'(x)`` (exact GELU) of float32 NumPy arrays of one shape in one pass."""
    x, g = np.asarray(x, np.float32), np.asarray(g, np.float32)
    fx, fg = np.ascontiguousarray(x).reshape(-1), np.ascontiguousarray(g).reshape(-1)
    kernel = compiled(fx.size >= PARALLEL_MIN_SIZE, "gelu_grad")
    if kernel is None:
        out = gelu_grad32_numpy(fx, fg)
    else:
        out = np.empty_like(fx)
        kernel(fx, fg, out)
    return out.reshape(x.shape)
