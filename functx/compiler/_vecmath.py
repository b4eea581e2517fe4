"""float32 ``sin``, ``cos``, ``tanh``, ``exp``, ``expm1``, ``log``, ``log1p`` as plain
arithmetic, for the CPU code generator (:mod:`functx.compiler.cpu`) to call in its fused
loops instead of libm.

Numba turns ``np.sin(x)`` on a float32 into a call of the scalar libm function, which LLVM
cannot vectorise (without Intel's SVML): a fused loop calling it ran 5-30x slower per element
than NumPy's own SIMD loop. These functions use only arithmetic, comparisons, selects, bit
views, so a loop calling them vectorises (AVX2/AVX-512; a table lookup, a gather, made
``sin`` twice as slow). Each evaluates in float64 and rounds once to float32:

* ``exp``/``expm1``: ``x = k ln2 + r``, ``|r| <= ln2/2`` (``k`` from the round-to-nearest of
  ``x log2(e)`` by adding ``1.5 * 2**52``, whose low bits are ``k``); ``e**r - 1 = r q(r)``
  with ``q`` of degree 7 (relative error 5e-12); ``2**k`` from its bits. ``exp = 2**k (1 +
  r q)``, ``expm1 = 2**k r q + (2**k - 1)`` (no cancellation: ``k = 0`` near 0). ``x`` is
  clamped to ``[-104, 89]`` first, beyond which float32 ``exp`` is 0 or inf anyway.
* ``tanh(x) = sign(x) e / (e + 2)`` with ``e = expm1(2|x|)`` (``|x|`` clamped at 20, where
  ``tanh`` is 1.0f since 9.01): relatively accurate for small ``x`` too.
* ``log``: ``x = 2**e m`` from the float64 bits, ``m`` in ``[sqrt(1/2), sqrt(2))``,
  ``log(m) = 2 atanh(s)``, ``s = (m - 1) / (m + 1)``, ``atanh(s) / s`` of degree 5 in ``s**2``
  (relative error 3e-14). ``log1p(x) = log(y) - c`` with ``y = 1 + x`` in float64 (exact
  for ``2**-29 <= |x| < 2**29``) and ``c = (y - 1) - x`` its rounding error below.
* ``sin``/``cos``: Payne-Hanek reduction, exact for every float32, without tables.
  ``|x| = M 2**u`` (``M`` of 24 bits); for ``b = clamp(u // 28, 0, 3)`` the constants
  ``(2**28b 2/pi) mod 4`` cut into four chunks of 28 bits (bits ``2**1`` down to
  ``2**-110``) are chosen per element, and ``|x| 2**-28b`` (less than ``2**51``) times each
  chunk is an exact product in float64. The products, reduced mod 4, give the quadrant ``k``
  and ``f = |x| 2/pi - k`` in ``[-1/2, 1/2]`` with an absolute error below ``2**-58``
  (against ``|f| > 2**-31`` for every float32). ``sin(f pi/2) / f`` and ``cos(f pi/2)`` are
  polynomials of degree 5 in ``f**2`` (errors 5e-15 and 8e-14). Inf and NaN give NaN.

Accuracy (tests/test_vecmath.py, against the float64 NumPy function rounded to float32, on
every float32 of sampled exponent ranges, dense sweeps and the special values): the float64
result is within about 1e-11 (relative) of the exact value, so the float32 result is at most
**1 ulp** from the correctly rounded one for every function (``sin``, ``cos``, ``tanh``,
``exp``, ``expm1``, ``log``, ``log1p``), and differs from it only where the exact value lies
within ~1e-4 ulp of a rounding boundary. Specials follow NumPy: NaN in, NaN out; ``sin``/``cos``
of +-inf are NaN; ``sin(-0) = -0``; ``tanh(+-inf) = +-1``; ``exp`` overflows to inf and
underflows to 0 (through the subnormals) where float32's correctly rounded ``exp`` does;
``exp(-inf) = 0``, ``expm1(-inf) = -1``; ``log(0) = -inf``, ``log`` of a negative number NaN,
``log(inf) = inf``; ``log1p(-1) = -inf``. No floating-point warnings are raised.

float64 keeps Numba's libm calls (and NumPy's loops, :data:`functx.compiler.cpu.NUMPY_SPEEDUP`):
matching NumPy's float64 accuracy needs double-double arithmetic, not done here.

The exact steps (the products of the reduction, ``p - 4 floor(p / 4)``, ``k`` from the
shifter) stay exact with fused multiply-adds, and the rest only gains from them: the
generated kernels calling these functions allow contraction (``fastmath={'contract'}``),
and the accuracy test runs both ways.

The functions are plain Python as well (NumPy scalars); :func:`numba_helpers` compiles them
with Numba (``inline='always'``, so every fused loop gets its own vectorised copy), through
:func:`compile_inline`, which :mod:`functx.compiler._vecmath32` (the same functions in float32
arithmetic, the CPU generator's default: :data:`functx.compiler.cpu.FLOAT32_MATH`) shares. Each
function calls :func:`prefer_wide_vectors`: the loop it is inlined into uses 512-bit vectors.
"""
from __future__ import annotations

import hashlib
import importlib
import math
import types
from pathlib import Path
from typing import Any

import numpy as np

from functx.primitives._numba import import_numba

__all__ = ["FUNCTIONS", "VERSION", "REDUCTION", "numba_helpers", "compile_inline",
           "prefer_wide_vectors", "sin32", "cos32", "tanh32", "exp32",
           "expm1_32", "log32", "log1p32"]

# The float32 function for each scalar-rule name (functx.registry.scalar's "call" nodes).
FUNCTIONS = {"sin": "sin32", "cos": "cos32", "tanh": "tanh32", "exp": "exp32",
             "expm1": "expm1_32", "log": "log32", "log1p": "log1p32"}

# A fingerprint of this file: the generated kernels name it, so that Numba's disk cache of
# a kernel (keyed by the kernel's own source) is not reused after these functions change.
VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

_LN2 = 0.6931471805599453
_LOG2E = 1.4426950408889634
_SHIFTER = 6755399441055744.0  # 1.5 * 2**52: x + it rounds x to an integer in the low bits
_SQRT2 = 1.4142135623730951
_PI_2 = 1.5707963267948966

# e**r - 1 = r * (Q0 + Q1 r + ... + Q7 r**7) on |r| <= ln2/2 (Chebyshev interpolant).
_Q0, _Q1, _Q2 = 0.9999999999954015, 0.4999999999995403, 0.16666666788451925
_Q3, _Q4, _Q5 = 0.041666666788408045, 0.008333282945609807, 0.0013888838517765398
_Q6, _Q7 = 0.00019907963190556895, 2.4868263861817314e-05
# atanh(s) / s = A0 + A1 z + ... + A5 z**5, z = s**2 <= (3 - 2 sqrt 2)**2.
_A0, _A1, _A2 = 0.9999999999999735, 0.3333333333982248, 0.19999997435489686
_A3, _A4, _A5 = 0.1428608420710169, 0.11087075399026866, 0.09804796182579203
# sin(f pi/2) / f and cos(f pi/2) in z = f**2, |f| <= 1/2.
_S0, _S1, _S2 = 1.57079632679489, -0.645964097504309, 0.07969262615574459
_S3, _S4, _S5 = -0.004681752591439732, 0.00016042926494994533, -3.556386091810803e-06
_C0, _C1, _C2 = 0.9999999999999444, -1.233700550120159, 0.2536695071536924
_C3, _C4, _C5 = -0.02086346800209199, 0.0009191617361689659, -2.4850961962407894e-05


def _two_over_pi_bits(bits: int) -> int:
    """``floor(2/pi * 2**bits)``, from Machin's formula in integers (exact: the 64 guard
    bits absorb the truncation of the series' terms)."""
    scale = 1 << (bits + 64)

    def arctan_inv(n: int) -> int:  # atan(1/n) * scale
        total, term, k, n2 = 0, scale // n, 0, n * n
        while term:
            total += term // (2 * k + 1) if k % 2 == 0 else -(term // (2 * k + 1))
            term //= n2
            k += 1
        return total

    pi = 16 * arctan_inv(5) - 4 * arctan_inv(239)  # pi * 2**(bits + 64)
    return (2 << (2 * bits + 128)) // pi >> 64


def _reduction_constants() -> tuple:
    """``D[b][j]``: the 28-bit chunk ``j`` (bits ``2**(1 - 28j)`` down to ``2**(-26 - 28j)``)
    of ``(2**(28b) 2/pi) mod 4``, for ``b`` in 0..3."""
    P = 800
    two_over_pi = _two_over_pi_bits(P)
    rows = []
    for b in range(4):
        unit = P - 28 * b  # 2**(28b) 2/pi mod 4, in units of 2**-unit
        w = two_over_pi % (4 << unit)
        rows.append(tuple(math.ldexp((w >> (unit - 26 - 28 * j)) & ((1 << 28) - 1), -26 - 28 * j)
                          for j in range(4)))
    return tuple(rows)


# D[b][j] (see _reduction_constants), also for functx.compiler._vecmath32's reduction
REDUCTION = _reduction_constants()
(_D00, _D01, _D02, _D03), (_D10, _D11, _D12, _D13), (_D20, _D21, _D22, _D23), \
    (_D30, _D31, _D32, _D33) = REDUCTION


def _expm1_parts(x: Any) -> tuple:
    """``(2**k, e**r - 1)`` with ``x = k ln2 + r`` (float64 ``x`` in [-104, 89])."""
    t = x * _LOG2E + _SHIFTER
    k = t - _SHIFTER
    r = x - k * _LN2
    r2 = r * r  # Estrin's scheme: a shorter dependency chain than Horner's (latency)
    q = (((_Q0 + _Q1 * r) + (_Q2 + _Q3 * r) * r2)
         + ((_Q4 + _Q5 * r) + (_Q6 + _Q7 * r) * r2) * (r2 * r2))
    # (bit views written out: each helper call costs an inlining per call site in Numba)
    return np.int64((np.float64(t).view(np.int64) + 1023) << 52).view(np.float64), r * q


def exp32(x: Any) -> Any:
    """``exp`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    xd = np.float64(x)
    s, u = _expm1_parts(min(max(xd, -104.0), 89.0))  # (NaN: see the last line)
    y = np.float32(s + s * u)
    return y if xd == xd else x


def expm1_32(x: Any) -> Any:
    """``expm1`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    xd = np.float64(x)
    s, u = _expm1_parts(min(max(xd, -104.0), 89.0))
    y = np.float32(s * u + (s - 1.0))
    return y if (xd == xd) & (xd != 0.0) else x  # NaN, and expm1(-0) = -0


def tanh32(x: Any) -> Any:
    """``tanh`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    xd = np.float64(x)
    a = min(abs(xd), 20.0)
    s, u = _expm1_parts(a + a)
    e = s * u + (s - 1.0)
    y = np.float32(math.copysign(e / (e + 2.0), xd))
    return y if xd == xd else x


def _log_positive(y: Any) -> Any:
    """``log`` of a positive, finite, normal float64."""
    b = np.float64(y).view(np.int64)
    e = (b >> 52) - 1023
    m = np.int64((b & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000).view(np.float64)  # in [1, 2)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    ef = np.float64(e + 1 if big else e)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    z2 = z * z
    p = (_A0 + _A1 * z) + z2 * ((_A2 + _A3 * z) + z2 * (_A4 + _A5 * z))
    return ef * _LN2 + 2.0 * s * p


def _log_special(y: Any, v: Any) -> Any:
    """``v`` where ``y`` is positive and finite, else ``log(y)`` from IEEE rules."""
    special = -np.inf if y == 0.0 else (y if y == np.inf else np.nan)  # NaN: NaN, < 0
    return v if (y > 0.0) & (y < np.inf) else special


def log32(x: Any) -> Any:
    """``log`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    xd = np.float64(x)
    ok = (xd > 0.0) & (xd < np.inf)
    v = _log_positive(xd if ok else 1.0)
    return np.float32(_log_special(xd, v))


def log1p32(x: Any) -> Any:
    """``log1p`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    xd = np.float64(x)
    y = 1.0 + xd
    ok = (y > 0.0) & (y < np.inf)
    # 1 + x is exact for 2**-29 <= |x| < 2**29; below, c is its rounding error and
    # log1p(x) = log(y) - c / y to 2**-58 (and y = 1 + O(2**-29)); c = 0 for |x| >= 1
    c = ((y - 1.0) - xd) if abs(xd) < 1.0 else 0.0
    v = _log_positive(y if ok else 1.0) - c
    v = xd if xd == 0.0 else v  # log1p(-0) = -0
    return np.float32(_log_special(y, v))


def _sin_turns(a: Any, shift: float) -> Any:
    """``sin((a 2/pi + shift) pi/2)`` for float64 ``a = |x|`` (a float32): the reduction to
    ``a 2/pi + shift = 4n + q + f`` with ``f`` in [-1/2, 1/2], ``q`` in {0, 1, 2, 3}, then
    ``+-sin(f pi/2)`` or ``+-cos(f pi/2)`` (see the module docstring). One function, not
    two: Numba inlines every call at every call site, nested calls included."""
    # |x| = M 2**u, M < 2**24; b = clamp(u // 28, 0, 3), a 2**-28b = M 2**(u - 28b) < 2**51.
    # The constants for b are chosen by arithmetic on 0/1 flags, exact (the D[.][j] share one
    # grid): Numba turns each `x if c else y` into basic blocks, and thousands of them in a
    # kernel made compiling it (SSA, type inference) several times slower.
    b1 = 1.0 if a >= 2.0 ** 51 else 0.0
    b2 = 1.0 if a >= 2.0 ** 79 else 0.0
    b3 = 1.0 if a >= 2.0 ** 107 else 0.0
    s = 2.0 ** -84 if a >= 2.0 ** 107 else (2.0 ** -56 if a >= 2.0 ** 79 else (
        2.0 ** -28 if a >= 2.0 ** 51 else 1.0))  # (selects: the shortest path to ab)
    d0 = _D00 + b1 * (_D10 - _D00) + b2 * (_D20 - _D10) + b3 * (_D30 - _D20)
    d1 = _D01 + b1 * (_D11 - _D01) + b2 * (_D21 - _D11) + b3 * (_D31 - _D21)
    d2 = _D02 + b1 * (_D12 - _D02) + b2 * (_D22 - _D12) + b3 * (_D32 - _D22)
    d3 = _D03 + b1 * (_D13 - _D03) + b2 * (_D23 - _D13) + b3 * (_D33 - _D23)
    ab = a * s
    p0 = ab * d0  # exact products of 24 and 28 bits (p0 < 2**53, p1 < 2**25)
    p1 = ab * d1
    t0 = p0 - 4.0 * np.floor(p0 * 0.25)  # exact (mod 4)
    t1 = p1 - 4.0 * np.floor(p1 * 0.25)
    k = np.floor(t0 + t1 + 0.5)
    f = (((t0 - k) + t1) + ab * d2) + ab * d3  # (t0 - k) + t1 is exact where f is small
    k = k + shift
    q = k - 4.0 * np.floor(k * 0.25)
    z = f * f
    z2 = z * z
    s = f * ((_S0 + _S1 * z) + z2 * ((_S2 + _S3 * z) + z2 * (_S4 + _S5 * z)))
    c = (_C0 + _C1 * z) + z2 * ((_C2 + _C3 * z) + z2 * (_C4 + _C5 * z))
    v = c if (q == 1.0) | (q == 3.0) else s
    return -v if q >= 2.0 else v


def sin32(x: Any) -> Any:
    """``sin`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    xd = np.float64(x)
    return np.float32(_sin_turns(abs(xd), 0.0) * math.copysign(1.0, xd))  # sin(-0) = -0


def cos32(x: Any) -> Any:
    """``cos`` of a float32 (see the module docstring)."""
    prefer_wide_vectors()
    return np.float32(_sin_turns(abs(np.float64(x)), 1.0))


def prefer_wide_vectors() -> None:
    """Nothing in Python. Compiled (:func:`compile_inline`), it gives the function whose
    code it is inlined into, the loop calling these functions, the LLVM attribute
    ``"prefer-vector-width"="512"``: LLVM's cost model for recent Intel CPUs prefers 256-bit
    vectors, and a float32 loop calling the functions of :mod:`functx.compiler._vecmath32`
    then runs 8 lanes per instruction instead of 16 (1.5-2x slower: session 9). Harmless
    where the CPU has no 512-bit vectors."""


def _prefer_wide_vectors_intrinsic() -> Any:
    """:func:`prefer_wide_vectors` as a Numba intrinsic (no code; an attribute of the
    function being compiled: llvmlite knows no string attributes, hence ``set.add``)."""
    numba = import_numba()
    extending = importlib.import_module("numba.extending")  # (Numba, imported lazily)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        try:
            set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        except TypeError:  # an llvmlite whose attribute sets are no sets: LLVM's choice
            pass
        return context.get_dummy_value()

    def prefer_wide_vectors(typingctx: Any) -> Any:
        return numba.types.none(), codegen
    return extending.intrinsic(prefer_wide_vectors)


_compiled: dict = {}


def compile_inline(namespace: dict, names: tuple, into: dict) -> None:
    """Compile the functions ``names`` of the module globals ``namespace`` with Numba
    (``inline='always'``, ``error_model='numpy'``) into ``into`` (name -> dispatcher). The
    compiled copies call each other through a copy of ``namespace`` in which each name is
    replaced by its compiled version as it is built, so a function must come after the
    ones it calls; ``prefer_wide_vectors`` is the intrinsic (see there).

    Raises:
        ImportError: Numba is not installed.
    """
    njit = import_numba().njit
    glb = dict(namespace)
    glb["prefer_wide_vectors"] = _prefer_wide_vectors_intrinsic()
    for name in names:
        fn = glb[name]
        copy = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__)
        copy.__module__, copy.__qualname__ = fn.__module__, fn.__qualname__
        glb[name] = into[name] = njit(inline="always", error_model="numpy")(copy)


def numba_helpers(*names: str) -> tuple:
    """The named functions (values of :data:`FUNCTIONS`) compiled with Numba
    (``inline='always'``: each caller compiles its own copy), built once per process.

    Raises:
        ImportError: Numba is not installed.
    """
    if not _compiled:
        compile_inline(globals(), ("_expm1_parts", "_log_positive", "_log_special",
                                   "_sin_turns", *FUNCTIONS.values()), _compiled)
    return tuple(_compiled[n] for n in names)
