"""float32 ``sin``, ``cos``, ``tanh``, ``exp``, ``expm1``, ``log``, ``log1p`` in float32
arithmetic, for the CPU code generator (:mod:`functx.compiler.cpu`) to call in its fused
loops: the same functions as :mod:`functx.compiler._vecmath` (vectorisable: arithmetic,
comparisons, selects and bit views only), but evaluated in float32 (16 AVX-512 lanes per
instruction instead of 8) rather than in float64 rounded once.

* ``exp``: ``x`` clamped to ``[-104, 89]`` (beyond, float32 ``exp`` is 0 or inf), ``x = k
  ln2 + r`` (``k`` the round-to-nearest of ``x log2(e)``, from adding ``1.5 * 2**23``; Cody-Waite
  with ``ln2`` in two float32 parts, the first of 9 bits so that ``k ln2_hi`` and ``x - k
  ln2_hi`` are exact), ``e**r = 1 + r + r**2 P(r)``, ``P`` of degree 5 (Cephes ``expf``),
  times ``2**(k // 2)`` and ``2**(k - k // 2)`` built from bits (two factors: ``k`` runs
  from -150 to 128, and the second product rounds once into the subnormals).
* ``expm1``: the same reduction (``x`` clamped to ``[-18, 89]``), ``expm1(x) = 2**k (e**r -
  1) + (2**k - 1)`` with ``e**r - 1 = r + r**2 P(r)`` (``k = 0`` near 0: no cancellation);
  ``k = 128`` as ``2**127`` times 2 at the end.
* ``tanh(x) = sign(x) e / (e + 2)``, ``e = expm1(2|x|)`` (``|x|`` clamped at 9.5, where
  ``tanh`` is 1.0f since 9.01): relatively accurate near 0 as well.
* ``log``: ``x = 2**k m`` from the bits (subnormals scaled by ``2**23`` first), ``m`` in
  ``[sqrt(1/2), sqrt(2))`` by subtracting the bits of ``sqrt(1/2)`` before splitting (no
  select), ``f = m - 1`` (exact), ``log(1 + f) = f - f**2/2 + f**3 P(f)``, ``P`` of degree 8
  (Cephes ``logf``), plus ``k ln2`` in two parts. ``log1p(x) = log(u) + c / u`` with ``u =
  1 + x`` rounded and ``c = x - (u - 1)`` its rounding error (exact for every ``x > -1``).
* ``sin``/``cos``: the argument reduction stays in float64, the Payne-Hanek reduction of
  :mod:`functx.compiler._vecmath` without tables (exact for every float32: ``|x| 2/pi = 4n
  + q + f``, ``|f| <= 1/2`` with an absolute error below ``2**-58``); ``r = f pi/2`` is then
  rounded to float32 as ``r + r_lo`` and ``sin r``, ``cos r`` are odd/even polynomials of
  degree 7/8 in float32 (Cephes ``sinf``/``cosf`` on ``[-pi/4, pi/4]``) with ``r_lo`` as a
  first-order correction.
* ``sin32_moderate``/``cos32_moderate`` (:data:`MODERATE`): the same polynomials after a
  cheaper reduction, right for ``|x| <= MODERATE_MAX = 2**20`` (and NaN) only: ``|x| = k
  pi/2 + r`` by two-part Cody-Waite in float64, ``pi/2 = _PIO2_HI + _PIO2_LO`` with
  ``_PIO2_HI`` of 33 bits. Why it is exact enough: ``k <= 667544 < 2**20``, so ``k
  _PIO2_HI`` is exact; ``|x| - k _PIO2_HI`` is exact (both are multiples of ``2**-32``, the
  difference is below ``2**20``); ``k _PIO2_LO`` rounds by at most ``2**-67.6`` and the
  split of ``pi/2`` misses by ``3.5e-27``, ``k`` times that at most ``2**-68.5``; so ``r``
  is within ``2**-66.9`` plus a rounding of ``2**-53 |r|``. The float32 closest to a
  multiple of ``pi/2`` up to ``2**20`` is 252.89821 (``k = 161``, ``|r| = 4.2e-9 =
  2**-27.8``; found over the three float32 nearest each ``k pi/2``): ``r`` is right to
  ``2**-39`` relative everywhere, against float32's ``2**-24``. Checked exhaustively
  (benchmarks/exhaustive_sincos32.py), every float32 in ``[0, 2**20]`` with and without
  FMA (odd/even: the sign is exact): at most 1 ulp, 0.94% of them off by 1 ulp (``sin32``:
  6% on random bit patterns). Half the cost of ``sin32`` in a dependent chain (1.57 against
  3.08 ns per call on one AVX-512 core; benchmarks/README.md, session 10). A vectorised
  loop computes both sides of a select, so the choice between the two is made per block of
  a kernel, not per element: :mod:`functx.compiler.cpu` computes a block of a parallel flat
  kernel or full reduction with these, OR-ing ``|x| > MODERATE_MAX`` over their
  arguments, and computes it again with ``sin32``/``cos32`` when that is set.

Accuracy (tests/test_vecmath32.py, against the float64 NumPy function rounded to float32,
on 2M random bit patterns over the whole float32 range, every third float32 of some binades,
dense sweeps, subnormals and the special values, with and without fused multiply-adds;
:data:`MAX_ULP` is the bound asserted). Measured on ~12M such points:

========  =======  =======================  =========================
function  max ulp  points off by 1 ulp      points off by 2 ulp
========  =======  =======================  =========================
exp       1        6%                       0
expm1     2        7%                       24 (3 with FMA)
tanh      2        11%                      ~4500
log       1        4%                       0
log1p     1        6%                       0
sin       1        6%                       0
cos       1        6%                       0
========  =======  =======================  =========================

(``sin32_moderate``, ``cos32_moderate``: every float32 up to ``2**20``: at most 1 ulp,
0.94% off by 1 ulp; the tests assert :data:`MAX_ULP` on ~6M of them.)

(:mod:`functx.compiler._vecmath`: at most 1 ulp, correctly rounded but on a few dozen
points.) sin/cos still compute their reduction in float64 (about 80% of ``sin32``'s cost;
the moderate versions' is a few float64 operations).
Specials as :mod:`functx.compiler._vecmath` (and NumPy): NaN in, NaN out;
``sin``/``cos`` of +-inf are NaN; ``sin(-0) = -0``; ``tanh(+-inf) = +-1``; ``exp``
overflows to inf and underflows to 0 (through the subnormals) where float32's correctly
rounded ``exp`` does; ``exp(-inf) = 0``, ``expm1(-inf) = -1``; ``log(0) = -inf``, ``log`` of
a negative number NaN, ``log(inf) = inf``; ``log1p(-1) = -inf``. No floating-point warnings.

Each function calls :func:`functx.compiler._vecmath.prefer_wide_vectors`: the loop it is
inlined into gets 512-bit vectors (16 float32 lanes), where LLVM's cost model would choose
256-bit ones on recent Intel CPUs, 8 lanes, and these functions would be no faster than
_vecmath's (benchmarks/README.md, session 9).

Every constant is a float32 (or int32) global: a Python float would make Numba compute in
float64. The functions are plain Python as well (NumPy scalars); :func:`numba_helpers`
compiles them with Numba (``inline='always'``) through
:func:`functx.compiler._vecmath.compile_inline`.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from functx.compiler._vecmath import REDUCTION, compile_inline, prefer_wide_vectors
from functx.compiler._vecmath import VERSION as _VECMATH_VERSION

__all__ = ["FUNCTIONS", "MODERATE", "MODERATE_MAX", "VERSION", "MAX_ULP", "numba_helpers",
           "sin32", "cos32", "sin32_moderate", "cos32_moderate", "tanh32", "exp32", "expm1_32",
           "log32", "log1p32"]

# The float32 function for each scalar-rule name (the names of functx.compiler._vecmath).
FUNCTIONS = {"sin": "sin32", "cos": "cos32", "tanh": "tanh32", "exp": "exp32",
             "expm1": "expm1_32", "log": "log32", "log1p": "log1p32"}

# The cheaper sin and cos for |x| <= MODERATE_MAX (and NaN) that kernels call where a block
# of elements has no other argument (functx.compiler.cpu), with the same MAX_ULP.
MODERATE = {"sin": "sin32_moderate", "cos": "cos32_moderate"}

# The largest distance, in float32 steps, from the float64 NumPy function rounded to
# float32, measured by tests/test_vecmath32.py (which asserts it), with or without FMA.
MAX_ULP = {"sin": 2, "cos": 2, "tanh": 2, "exp": 1, "expm1": 2, "log": 1, "log1p": 2}

# A fingerprint of this file and of _vecmath's (its reduction constants, compile_inline):
# the generated kernels name it, so that Numba's disk cache of a kernel is not reused after
# these functions change.
VERSION = hashlib.sha256(Path(__file__).read_bytes()
                         + _VECMATH_VERSION.encode()).hexdigest()[:16]

_F = np.float32
_I = np.int32
_ONE, _HALF, _TWO, _ZERO = _F(1.0), _F(0.5), _F(2.0), _F(0.0)
_INF, _NAN = _F(np.inf), _F(np.nan)

# exp: x = k ln2 + r; ln2 = _LN2_HI + _LN2_LO, _LN2_HI of 9 bits (k ln2_hi exact)
_LOG2E = _F(1.4426950408889634)
_SHIFT = _F(12582912.0)  # 1.5 * 2**23: t = v + it has round(v) in its low bits
_SHIFT_BITS = _I(0x4B400000)
_LN2_HI, _LN2_LO = _F(0.693359375), _F(-2.12194440e-4)
_EXP_MIN, _EXP_MAX = _F(-104.0), _F(89.0)
_EXPM1_MIN = _F(-18.0)  # expm1 is -1.0f below -17.33
_TANH_MAX = _F(9.5)     # tanh is 1.0f above 9.01
# e**r = 1 + r + r**2 (P0 + P1 r + ... + P5 r**5) on |r| <= ln2/2 (Cephes expf)
_P0, _P1, _P2 = _F(5.0000001201e-1), _F(1.6666665459e-1), _F(4.1665795894e-2)
_P3, _P4, _P5 = _F(8.3334519073e-3), _F(1.3981999507e-3), _F(1.9875691500e-4)
_BIAS = _I(127)
_K_MAX = _I(127)

# log: log(1 + f) = f - f**2/2 + f**3 (L0 + L1 f + ... + L8 f**8), f in [sqrt(1/2) - 1,
# sqrt(2) - 1) (Cephes logf)
_L0, _L1, _L2 = _F(3.3333331174e-1), _F(-2.4999993993e-1), _F(2.0000714765e-1)
_L3, _L4, _L5 = _F(-1.6668057665e-1), _F(1.4249322787e-1), _F(-1.2420140846e-1)
_L6, _L7, _L8 = _F(1.1676998740e-1), _F(-1.1514610310e-1), _F(7.0376836292e-2)
_SQRT_HALF_BITS = _I(0x3F3504F3)  # sqrt(1/2)
_EXP_MASK = _I(-0x800000)         # 0xFF800000: sign and exponent bits
_MIN_NORMAL = _F(2.0 ** -126)
_TWO23 = _F(2.0 ** 23)
_SUB_K = _F(23.0)

# sin r = r + r**3 (S0 + S1 z + S2 z**2), cos r = 1 - z/2 + z**2 (C0 + C1 z + C2 z**2),
# z = r**2, |r| <= pi/4 (Cephes sinf, cosf)
_S0, _S1, _S2 = _F(-1.6666654611e-1), _F(8.3321608736e-3), _F(-1.9515295891e-4)
_C0, _C1, _C2 = _F(4.166664568298827e-2), _F(-1.388731625493765e-3), _F(2.443315711809948e-5)
_PI_2 = 1.5707963267948966  # (float64: the reduction's part)
# the moderate reduction (float64): |x| = k pi/2 + r, pi/2 = _PIO2_HI + _PIO2_LO, _PIO2_HI of
# 33 bits (k _PIO2_HI exact for k < 2**20); k from adding 1.5 * 2**52
_TWO_OVER_PI = 0.6366197723675814
_PIO2_HI, _PIO2_LO = 1.5707963267341256, 6.077100506506192e-11
_SHIFT64 = 6755399441055744.0
# the largest |x| the moderate sin/cos are for (inclusive)
MODERATE_MAX = _F(2.0 ** 20)

(_D00, _D01, _D02, _D03), (_D10, _D11, _D12, _D13), (_D20, _D21, _D22, _D23), \
    (_D30, _D31, _D32, _D33) = REDUCTION


def exp32(x: Any) -> Any:
    """``exp`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    xc = min(max(x, _EXP_MIN), _EXP_MAX)  # (NaN: see the last line)
    t = xc * _LOG2E + _SHIFT
    k = t - _SHIFT
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    r2 = r * r
    p = (_P0 + _P1 * r) + r2 * (_P2 + _P3 * r) + (r2 * r2) * (_P4 + _P5 * r)
    e = _ONE + (r + r2 * p)
    ki = np.float32(t).view(np.int32) - _SHIFT_BITS
    k1 = ki >> 1
    s1 = np.int32((k1 + _BIAS) << 23).view(np.float32)
    s2 = np.int32((ki - k1 + _BIAS) << 23).view(np.float32)
    y = e * s1 * s2
    return y if x == x else x


def expm1_32(x: Any) -> Any:
    """``expm1`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    xc = min(max(x, _EXPM1_MIN), _EXP_MAX)
    t = xc * _LOG2E + _SHIFT
    k = t - _SHIFT
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    r2 = r * r
    p = (_P0 + _P1 * r) + r2 * (_P2 + _P3 * r) + (r2 * r2) * (_P4 + _P5 * r)
    u = r + r2 * p  # e**r - 1
    ki = np.float32(t).view(np.int32) - _SHIFT_BITS
    kc = min(ki, _K_MAX)  # k = 128: 2**127, times 2 at the end
    s = np.int32((kc + _BIAS) << 23).view(np.float32)
    y = (s * u + (s - _ONE)) * np.int32((ki - kc + _BIAS) << 23).view(np.float32)
    return y if (x == x) & (x != _ZERO) else x  # NaN, and expm1(-0) = -0


def tanh32(x: Any) -> Any:
    """``tanh`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    a = min(abs(x), _TANH_MAX)
    a2 = a + a  # e = expm1(2a) as in expm1_32, k <= 28
    t = a2 * _LOG2E + _SHIFT
    k = t - _SHIFT
    r = (a2 - k * _LN2_HI) - k * _LN2_LO
    r2 = r * r
    p = (_P0 + _P1 * r) + r2 * (_P2 + _P3 * r) + (r2 * r2) * (_P4 + _P5 * r)
    s = np.int32(np.float32(t).view(np.int32) - _SHIFT_BITS + _BIAS << 23).view(np.float32)
    e = s * (r + r2 * p) + (s - _ONE)
    y = e / (e + _TWO)
    y = -y if x < _ZERO else y  # (an OR of the sign bit made a fused loop unvectorisable)
    return y if (x == x) & (x != _ZERO) else x  # NaN, and tanh(-0) = -0


def _log_parts(x: Any) -> Any:
    """``(f, k, lo)`` for a positive, finite float32 ``x = 2**k (1 + f)``: ``log(x) =
    (f + lo) + k ln2_hi``, ``lo`` the small terms."""
    sub = x < _MIN_NORMAL
    xs = x * (_TWO23 if sub else _ONE)
    b = np.float32(xs).view(np.int32)
    d = b - _SQRT_HALF_BITS
    k = _F(d >> 23) - (_SUB_K if sub else _ZERO)
    # m = 2**-k xs in [sqrt(1/2), sqrt(2)), f = m - 1 (exact)
    f = np.int32(b - (d & _EXP_MASK)).view(np.float32) - _ONE
    z = f * f
    z2 = z * z
    p = (((_L0 + _L1 * f) + z * (_L2 + _L3 * f))
         + z2 * ((_L4 + _L5 * f) + z * (_L6 + _L7 * f)) + (z2 * z2) * _L8)
    return f, k, f * z * p + k * _LN2_LO - _HALF * z


def _log_special(y: Any, v: Any) -> Any:
    """``v`` where float32 ``y`` is positive and finite, else ``log(y)`` from IEEE rules."""
    special = -_INF if y == _ZERO else (y if y == _INF else _NAN)  # NaN: NaN, < 0
    return v if (y > _ZERO) & (y < _INF) else special


def log32(x: Any) -> Any:
    """``log`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    ok = (x > _ZERO) & (x < _INF)
    f, k, lo = _log_parts(x if ok else _ONE)
    return _log_special(x, (f + lo) + k * _LN2_HI)


def log1p32(x: Any) -> Any:
    """``log1p`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    u = x + _ONE
    ok = (u > _ZERO) & (u < _INF)
    uu = u if ok else _ONE
    c = x - (uu - _ONE)  # the rounding error of 1 + x (exact; a negligible 1/x above 2**24)
    f, k, lo = _log_parts(uu)
    v = (f + (lo + c / uu)) + k * _LN2_HI
    v = x if x == _ZERO else v  # log1p(-0) = -0
    return _log_special(u, v)


def _sin_quadrant32(rd: Any, q: Any, negate: Any) -> Any:
    """``sin(rd)`` (``q`` 0), ``cos(rd)`` (1), ``-sin(rd)`` (2) or ``-cos(rd)`` (3), negated
    if ``negate``, for a float64 ``|rd| <= pi/4`` (a little more is harmless): ``rd`` is
    rounded to float32 ``r`` and ``rl = rd - r`` is a first-order correction of the float32
    polynomials."""
    r = np.float32(rd)
    rl = np.float32(rd - np.float64(r))
    z = r * r
    sn = r + (r * z * ((_S0 + _S1 * z) + (z * z) * _S2) + rl)
    cs = ((z * z * ((_C0 + _C1 * z) + (z * z) * _C2) - r * rl) - _HALF * z) + _ONE
    v = cs if (q == 1.0) | (q == 3.0) else sn
    return -v if (q >= 2.0) != negate else v


def _sin_turns32(x: Any, shift: float) -> Any:
    """``sin((|x| 2/pi + shift) pi/2)`` for a float32 ``x``, negated if ``x`` is negative
    and ``shift`` 0 (``sin``): the float64 reduction of ``_vecmath._sin_turns`` (see there),
    then float32 polynomials."""
    a = np.float64(abs(x))
    b1 = 1.0 if a >= 2.0 ** 51 else 0.0
    b2 = 1.0 if a >= 2.0 ** 79 else 0.0
    b3 = 1.0 if a >= 2.0 ** 107 else 0.0
    s = 2.0 ** -84 if a >= 2.0 ** 107 else (2.0 ** -56 if a >= 2.0 ** 79 else (
        2.0 ** -28 if a >= 2.0 ** 51 else 1.0))
    d0 = _D00 + b1 * (_D10 - _D00) + b2 * (_D20 - _D10) + b3 * (_D30 - _D20)
    d1 = _D01 + b1 * (_D11 - _D01) + b2 * (_D21 - _D11) + b3 * (_D31 - _D21)
    d2 = _D02 + b1 * (_D12 - _D02) + b2 * (_D22 - _D12) + b3 * (_D32 - _D22)
    d3 = _D03 + b1 * (_D13 - _D03) + b2 * (_D23 - _D13) + b3 * (_D33 - _D23)
    ab = a * s
    p0 = ab * d0
    p1 = ab * d1
    t0 = p0 - 4.0 * np.floor(p0 * 0.25)
    t1 = p1 - 4.0 * np.floor(p1 * 0.25)
    k = np.floor(t0 + t1 + 0.5)
    f = (((t0 - k) + t1) + ab * d2) + ab * d3
    k = k + shift
    q = k - 4.0 * np.floor(k * 0.25)
    return _sin_quadrant32(f * _PI_2, q, (shift == 0.0) & (np.float32(x).view(np.int32)
                                                         < np.int32(0)))


def _sin_moderate32(x: Any, shift: float) -> Any:
    """``_sin_turns32`` for ``|x| <= MODERATE_MAX`` (and NaN): ``|x| = k pi/2 + r`` by a
    two-part Cody-Waite reduction in float64 (``|x| - k _PIO2_HI`` exact, ``r`` within
    ``2**-66.9 + 2**-53 |r|``: see the module docstring), then the same polynomials."""
    a = np.float64(abs(x))
    t = a * _TWO_OVER_PI + _SHIFT64
    k = t - _SHIFT64
    rd = (a - k * _PIO2_HI) - k * _PIO2_LO  # |rd| <= pi/4 (and a rounding)
    k = k + shift
    q = k - 4.0 * np.floor(k * 0.25)  # (from t's bits as an int64: not vectorised in ew24)
    return _sin_quadrant32(rd, q, (shift == 0.0) & (np.float32(x).view(np.int32) < np.int32(0)))


def sin32_moderate(x: Any) -> Any:
    """``sin`` of a float32 ``x`` with ``|x| <= MODERATE_MAX`` or NaN (see the module
    docstring): as :func:`sin32` there, cheaper; other arguments give wrong values."""
    prefer_wide_vectors()
    return _sin_moderate32(x, 0.0)


def cos32_moderate(x: Any) -> Any:
    """``cos`` of a float32 ``x`` with ``|x| <= MODERATE_MAX`` or NaN (see
    :func:`sin32_moderate`)."""
    prefer_wide_vectors()
    return _sin_moderate32(x, 1.0)


def sin32(x: Any) -> Any:
    """``sin`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    return _sin_turns32(x, 0.0)  # sin(-0) = -0


def cos32(x: Any) -> Any:
    """``cos`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    return _sin_turns32(x, 1.0)


_compiled: dict = {}


def numba_helpers(*names: str) -> tuple:
    """The named functions (values of :data:`FUNCTIONS`) compiled with Numba
    (``inline='always'``: each caller compiles its own copy), built once per process.

    Raises:
        ImportError: Numba is not installed.
    """
    if not _compiled:
        compile_inline(globals(), ("_log_parts", "_log_special", "_sin_quadrant32",
                                   "_sin_turns32", "_sin_moderate32", *FUNCTIONS.values(),
                                   *MODERATE.values()), _compiled)
    return tuple(_compiled[n] for n in names)
