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


def erf32_loop(x: Any, out: Any) -> None:
    """``out[i] = erf(x[i])`` for 1-d float32 ``x`` and ``out``."""
    for i in _prange(x.size):
        xi = np.float64(x[i])
        t = min(abs(xi), 4.0)
        small = t < 1.0
        mid = t < 2.5
        v = t * t if small else (t - (1.75 if mid else 3.25)) * (4.0 / 3.0)
        p = 0.0
        for k in range(_DEGREE, -1, -1):
            p = p * v + (_A[k] if small else (_B[k] if mid else _C[k]))
        r = t * p if small else 1.0 - p
        out[i] = np.float32(math.copysign(r, xi)) if xi == xi else x[i]


def erf32_numpy(x: np.ndarray) -> np.ndarray:
    """The same evaluation with NumPy operations (without Numba): the same float64
    operations in the same order, so the same bits."""
    xi = np.asarray(x, np.float32).astype(np.float64)
    t = np.minimum(np.abs(xi), 4.0)
    small, mid = t < 1.0, t < 2.5
    v = np.where(small, t * t, (t - np.where(mid, 1.75, 3.25)) * (4.0 / 3.0))
    p = np.zeros_like(v)
    for k in range(_DEGREE, -1, -1):
        p = p * v + np.where(small, _A[k], np.where(mid, _B[k], _C[k]))
    r = np.where(small, t * p, 1.0 - p)
    with np.errstate(invalid="ignore"):
        out = np.copysign(r, xi).astype(np.float32)
    return np.where(np.isnan(xi), np.asarray(x, np.float32), out)


def compiled(parallel: bool) -> Any:
    """The compiled loop (``parallel``: over every core), or None without Numba."""
    if numba_or_none() is None:
        return None
    kernel = _kernels.get(parallel)
    if kernel is None:
        kernel = _kernels[parallel] = compile_loop(erf32_loop, parallel)
    return kernel
