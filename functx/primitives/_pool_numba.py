"""Max pooling kernels for the CPU, compiled with Numba: the CPU implementations of
``max_pool`` and ``max_pool_grad`` (``functx/primitives/pooling.py``).

Each kernel visits the windows of an already padded input as flat planes (``[P, D*H*W]``,
``P = N * C``; 1-d and 2-d pooling get unit leading spatial axes; a window's elements are
offsets from its first) and keeps, per
window, its first maximum in row-major order, NaN counting as the maximum (a value
replaces the best so far when it is greater, or when it is NaN and the best is not):

* :func:`max_pool_loop` writes the maximum;
* :func:`max_pool_grad_loop` zeroes the plane of ``dx`` and adds each window's cotangent at
  the position of its first maximum (recomputed from ``x``: no index array is kept between
  the passes, as in XLA's ``select_and_scatter_add``); where the windows tile the plane
  (stride equal to the window, no dilation, as in LeNet's 2x2 pooling) each window writes
  all its elements instead, so ``dx`` is written once and never read.

The functions are plain Python with their outer loop over planes written ``for p in
_prange(P)``; :func:`functx.primitives._numba.compile_loop` compiles them with ``prange``
(the planes spread over Numba's threads: each plane of ``dx`` is written by one task) or
``range`` (one thread), cached on disk. Numba is imported on the first call, never at
``import functx``. Small work stays on the calling thread (:data:`PARALLEL_WORK`): waking
the threads costs more than it saves there.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from functx.primitives._numba import (compile_loop, import_numba, numba_installed,
                                      numba_or_none)

__all__ = ["ENABLED", "PARALLEL_WORK", "DTYPES", "max_pool_numba", "max_pool_grad_numba"]

# Whether the CPU implementations use the kernels (tests switch it off to compare them with
# the NumPy path; FUNCTX_NUMBA=0 turns Numba off altogether, see functx.primitives._numba).
ENABLED = numba_installed()
# The dtypes the kernels are compiled for; others (float16, bfloat16) take the NumPy path.
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Window elements visited (output size times window size) from which the planes are spread
# over the threads (with more than one). Measured (.dbg/threshold.py, 2x2 windows, float32,
# wall time, medians) on a loaded 2-core Xeon with 2 threads: a parallel launch costs about
# 35 us more than the serial loop on Numba's workqueue layer (tiny work: 50 against 14 us)
# and 4 us on its TBB layer (18.5 against 14 us); the serial loops take about 1 ns per
# element visited forward and 2 backward (65k: 66 and 121 us; LeNet's first pooling, 301k:
# 253 and 508 us). The threshold is where the serial forward loop takes about twice the
# workqueue launch's cost, so that a machine with idle cores gains from there on (this one,
# whose second core was busy, gained at no size). LeNet's two poolings visit 301k and 102k
# elements.
PARALLEL_WORK = 1 << 16

_prange = range  # numba.prange in the parallel variants (functx.primitives._numba.compile_loop)
_kernels: dict[tuple[str, bool], Callable] = {}


def later_wins(best, v):  # pragma: no cover (inlined into the Numba kernels)
    """Whether ``v``, later in the window, replaces ``best``: greater, or NaN where ``best``
    is not (bitwise, so that the kernels select rather than branch)."""
    return (v > best) | ((v != v) & (best == best))


def max_pool_loop(x, out, offs, sd, sh, sw, pd, ph):  # pragma: no cover (Numba)
    """``out[p, a, b, c]``: the maximum of the window at ``(a sd, b sh, c sw)`` of the flat
    plane ``x[p]`` (pitches ``pd``, ``ph``; ``offs`` the window elements' offsets)."""
    planes = x.shape[0]
    od, oh, ow = out.shape[1:]
    kk = offs.size
    for p in _prange(planes):
        xp = x[p]
        op = out[p]
        for a in range(od):
            for b in range(oh):
                row = a * sd * pd + b * sh * ph
                for c in range(ow):
                    base = row + c * sw
                    best = xp[base + offs[0]]
                    for k in range(1, kk):
                        v = xp[base + offs[k]]
                        best = v if later_wins(best, v) else best
                    op[a, b, c] = best


def max_pool_grad_loop(x, g, dx, offs, sd, sh, sw, pd, ph, tiles, zero):  # pragma: no cover
    """``dx`` (flat planes of ``x``'s shape): every window's ``g`` added at its first
    maximum. ``tiles``: the windows tile the planes exactly (no overlap, no gap), so each
    window writes all its elements (``g`` at the maximum, ``zero`` elsewhere) and nothing
    is zeroed or read back first."""
    planes = x.shape[0]
    od, oh, ow = g.shape[1:]
    kk = offs.size
    for p in _prange(planes):
        xp = x[p]
        dp = dx[p]
        gp = g[p]
        if not tiles:
            for i in range(dp.size):
                dp[i] = zero
        for a in range(od):
            for b in range(oh):
                row = a * sd * pd + b * sh * ph
                for c in range(ow):
                    base = row + c * sw
                    best = xp[base + offs[0]]
                    at = 0
                    for k in range(1, kk):
                        v = xp[base + offs[k]]
                        take = later_wins(best, v)
                        best = v if take else best
                        at = k if take else at
                    gv = gp[a, b, c]
                    if tiles:
                        for k in range(kk):
                            dp[base + offs[k]] = gv if k == at else zero
                    else:
                        dp[base + offs[at]] += gv


def max_pool22_loop(x, out, offs, sd, sh, sw, pd, ph):  # pragma: no cover (Numba)
    """:func:`max_pool_loop` for 2x2 windows (``offs`` = ``0, e1, e2, e2 + e1``): the
    first maxima of the two rows, then of the two (first wins ties: the first maximum of
    the window), so the comparisons form a tree rather than a chain (twice as fast)."""
    planes = x.shape[0]
    od, oh, ow = out.shape[1:]
    e1, e2 = offs[1], offs[2]
    for p in _prange(planes):
        xp = x[p]
        op = out[p]
        for a in range(od):
            for b in range(oh):
                row = a * sd * pd + b * sh * ph
                for c in range(ow):
                    j = row + c * sw
                    v0, v1, v2, v3 = xp[j], xp[j + e1], xp[j + e2], xp[j + e2 + e1]
                    m01 = v1 if later_wins(v0, v1) else v0
                    m23 = v3 if later_wins(v2, v3) else v2
                    op[a, b, c] = m23 if later_wins(m01, m23) else m01


def max_pool22_grad_loop(x, g, dx, offs, sd, sh, sw, pd, ph, tiles,
                         zero):  # pragma: no cover (Numba)
    """:func:`max_pool_grad_loop` for 2x2 windows, the maxima found as in
    :func:`max_pool22_loop`."""
    planes = x.shape[0]
    od, oh, ow = g.shape[1:]
    e1, e2 = offs[1], offs[2]
    for p in _prange(planes):
        xp = x[p]
        dp = dx[p]
        gp = g[p]
        if not tiles:
            for i in range(dp.size):
                dp[i] = zero
        for a in range(od):
            for b in range(oh):
                row = a * sd * pd + b * sh * ph
                for c in range(ow):
                    j = row + c * sw
                    v0, v1, v2, v3 = xp[j], xp[j + e1], xp[j + e2], xp[j + e2 + e1]
                    t1 = later_wins(v0, v1)
                    t3 = later_wins(v2, v3)
                    t = later_wins(v1 if t1 else v0, v3 if t3 else v2)
                    gv = gp[a, b, c]
                    if tiles:
                        # (bitwise: Numba's ``~`` of a bool is ``not``; comparisons of
                        # bools or ``and`` made this loop 2.5x slower)
                        dp[j] = zero if t | t1 else gv
                        dp[j + e1] = gv if t1 & ~t else zero
                        dp[j + e2] = gv if t & ~t3 else zero
                        dp[j + e2 + e1] = gv if t & t3 else zero
                    else:
                        dp[(j + e2 if t else j) + (e1 if (t3 if t else t1) else 0)] += gv


def usable(x: Any) -> bool:
    """Whether the kernels run for the NumPy array ``x``: turned on, Numba importable (and
    not off with ``FUNCTX_NUMBA=0``), a float32/float64 array."""
    return (ENABLED and isinstance(x, np.ndarray) and x.dtype in DTYPES
            and numba_or_none() is not None)


def _compiled(name: str, window3: tuple, work: int) -> Callable:
    """The kernel ``name`` (the 2x2 one for 2x2 windows), over the threads where the work
    (window elements visited) pays for waking them."""
    if window3 == (1, 2, 2):
        name = name.replace("max_pool", "max_pool22")
    parallel = work >= PARALLEL_WORK and _threads() > 1
    key = (name, parallel)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _kernels[key] = compile_loop(globals()[name], parallel, (later_wins,))
    return kernel


def _threads() -> int:
    return import_numba().get_num_threads()


def _planes(x: np.ndarray) -> np.ndarray:
    """``[N, C, *spatial]`` as contiguous flat planes ``[N * C, prod(spatial)]``."""
    x = np.ascontiguousarray(x)
    return x.reshape(x.shape[0] * x.shape[1], -1)


def _out_3d(y: np.ndarray) -> np.ndarray:
    """``[N, C, *out]`` (contiguous) as ``[N * C, D, H, W]``."""
    out = y.shape[2:]
    return y.reshape((y.shape[0] * y.shape[1],) + (1,) * (3 - len(out)) + out)


def _geometry(sizes, window, strides, dilation) -> tuple:
    """``((offs, sd, sh, sw, pd, ph), window3)``: the window elements' offsets in a flat
    plane, the strides and the plane's pitches, and the window, in 3-d form.

    Raises:
        ValueError: parameters that do not fit ``sizes`` (the kernels index without bounds
            checks: the shape rule has been applied, but ``bind`` may skip it).
    """
    nd = len(sizes)
    if not (1 <= nd <= 3 and len(window) == len(strides) == len(dilation) == nd
            and all(k >= 1 and s >= 1 and d >= 1 and (k - 1) * d < n
                    for n, k, s, d in zip(sizes, window, strides, dilation))):
        raise ValueError(f"max pooling kernels: window={window}, strides={strides}, "
                         f"dilation={dilation} do not fit the spatial sizes {tuple(sizes)}.")
    fill = 3 - len(sizes)
    sizes = (1,) * fill + tuple(sizes)
    window = (1,) * fill + tuple(window)
    strides = (1,) * fill + tuple(strides)
    dilation = (1,) * fill + tuple(dilation)
    pd, ph = sizes[1] * sizes[2], sizes[2]
    offs = np.array([i * dilation[0] * pd + j * dilation[1] * ph + k * dilation[2]
                     for i in range(window[0]) for j in range(window[1])
                     for k in range(window[2])], dtype=np.int64)
    return (offs,) + strides + (pd, ph), window


def max_pool_numba(x: np.ndarray, out_sizes: tuple, window, strides, dilation,
                   out: np.ndarray | None = None) -> np.ndarray:
    """``max_pool`` of the padded ``x`` ``[N, C, *spatial]`` (float32/float64, see
    :func:`usable`) by :func:`max_pool_loop`; ``out_sizes`` are its spatial output sizes.
    ``out``: a C-contiguous array of the result's shape and dtype to write it into (jit's
    memory planner), else a new one."""
    if out is None:
        out = np.empty(tuple(x.shape[:2]) + tuple(out_sizes), x.dtype)
    if out.size == 0:
        return out
    geometry, window3 = _geometry(x.shape[2:], window, strides, dilation)
    kernel = _compiled("max_pool_loop", window3, out.size * int(np.prod(window)))
    kernel(_planes(x), _out_3d(out), *geometry)
    return out


def max_pool_grad_numba(x: np.ndarray, g: np.ndarray, window, strides, dilation,
                        out: np.ndarray | None = None) -> np.ndarray:
    """``max_pool_grad`` by :func:`max_pool_grad_loop` (``g`` of ``x``'s dtype), into
    ``out`` where given (as :func:`max_pool_numba`)."""
    dx = np.empty(x.shape, x.dtype) if out is None else out
    if dx.size == 0:
        return dx
    if g.size == 0:
        dx[...] = 0
        return dx
    out = g.shape[2:]
    if tuple(g.shape[:2]) != tuple(x.shape[:2]) or len(out) != len(window) or any(
            (o - 1) * s + (k - 1) * d >= n for n, k, s, d, o
            in zip(x.shape[2:], window, strides, dilation, out)):
        raise ValueError(f"max_pool_grad: the cotangent's shape {g.shape} does not fit the "
                         f"input's {x.shape} with window={window}, strides={strides}, "
                         f"dilation={dilation}.")
    tiles = all(s == k and (k == 1 or d == 1) and o * s == n for n, k, s, d, o
                in zip(x.shape[2:], window, strides, dilation, out))
    geometry, window3 = _geometry(x.shape[2:], window, strides, dilation)
    kernel = _compiled("max_pool_grad_loop", window3, g.size * int(np.prod(window)))
    kernel(_planes(x), _out_3d(np.ascontiguousarray(g)), _planes(dx), *geometry, tiles,
           np.zeros((), x.dtype)[()])
    return dx
