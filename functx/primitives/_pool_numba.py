"""Max pooling kernels for the CPU, compiled with Numba: the CPU implementations of
``max_pool`` and ``max_pool_grad`` (``functx/primitives/pooling.py``).

Each kernel visits the windows of an already padded input in 3-d form (``[P, D, H, W]``,
``P = N * C`` planes; 1-d and 2-d pooling get unit leading spatial axes) and keeps, per
window, its first maximum in row-major order, NaN counting as the maximum (a value
replaces the best so far when it is greater, or when it is NaN and the best is not):

* :func:`max_pool_loop` writes the maximum;
* :func:`max_pool_grad_loop` zeroes the plane of ``dx`` and adds each window's cotangent at
  the position of its first maximum (recomputed from ``x``: no index array is kept between
  the passes, as in XLA's ``select_and_scatter_add``).

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

from functx.primitives._numba import compile_loop, numba_installed, numba_or_none

__all__ = ["ENABLED", "PARALLEL_WORK", "DTYPES", "max_pool_numba", "max_pool_grad_numba"]

# Whether the CPU implementations use the kernels (tests switch it off to compare them with
# the NumPy path; FUNCTX_NUMBA=0 turns Numba off altogether, see functx.primitives._numba).
ENABLED = numba_installed()
# The dtypes the kernels are compiled for; others (float16, bfloat16) take the NumPy path.
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Window elements visited (output size times window size) from which the planes are spread
# over the threads. Measured (process CPU time against wall time, 2-core and 16-core
# Xeons): below about 32k element visits (a few tens of microseconds of work) the serial
# loop wins; LeNet's two poolings (64 x 6 x 14 x 14 and 64 x 16 x 5 x 5 windows of 4)
# visit 301k and 102k.
PARALLEL_WORK = 1 << 15

_prange = range  # numba.prange in the parallel variants (functx.primitives._numba.compile_loop)
_kernels: dict[tuple[str, bool], Callable] = {}


def max_pool_loop(x, out, kd, kh, kw, sd, sh, sw, dd, dh, dw):  # pragma: no cover (Numba)
    """``out[p, a, b, c]``: the maximum of the window at ``(a sd, b sh, c sw)`` of plane
    ``p`` of ``x`` (elements ``dd``, ``dh``, ``dw`` apart); NaN wins."""
    planes, od, oh, ow = out.shape
    for p in _prange(planes):
        for a in range(od):
            for b in range(oh):
                for c in range(ow):
                    a0, b0, c0 = a * sd, b * sh, c * sw
                    best = x[p, a0, b0, c0]
                    for i in range(kd):
                        for j in range(kh):
                            for k in range(kw):
                                v = x[p, a0 + i * dd, b0 + j * dh, c0 + k * dw]
                                if v > best or (v != v and best == best):
                                    best = v
                    out[p, a, b, c] = best


def max_pool_grad_loop(x, g, dx, kd, kh, kw, sd, sh, sw, dd, dh, dw):  # pragma: no cover
    """``dx`` (of ``x``'s shape): every window's ``g`` added at its first maximum."""
    planes, od, oh, ow = g.shape
    _, nd_, nh, nw = x.shape
    for p in _prange(planes):
        for a in range(nd_):
            for b in range(nh):
                for c in range(nw):
                    dx[p, a, b, c] = 0
        for a in range(od):
            for b in range(oh):
                for c in range(ow):
                    a0, b0, c0 = a * sd, b * sh, c * sw
                    best = x[p, a0, b0, c0]
                    ba, bb, bc = a0, b0, c0
                    for i in range(kd):
                        for j in range(kh):
                            for k in range(kw):
                                ai, bj, ck = a0 + i * dd, b0 + j * dh, c0 + k * dw
                                v = x[p, ai, bj, ck]
                                if v > best or (v != v and best == best):
                                    best = v
                                    ba, bb, bc = ai, bj, ck
                    dx[p, ba, bb, bc] += g[p, a, b, c]


def usable(x: Any) -> bool:
    """Whether the kernels run for the NumPy array ``x``: turned on, Numba importable (and
    not off with ``FUNCTX_NUMBA=0``), a float32/float64 array."""
    return (ENABLED and isinstance(x, np.ndarray) and x.dtype in DTYPES
            and numba_or_none() is not None)


def _compiled(name: str, parallel: bool) -> Callable:
    key = (name, parallel)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _kernels[key] = compile_loop(globals()[name], parallel)
    return kernel


def _as_3d(x: np.ndarray) -> np.ndarray:
    """``[N, C, *spatial]`` (1 to 3 spatial axes) as contiguous ``[N * C, D, H, W]``."""
    x = np.ascontiguousarray(x)
    spatial = x.shape[2:]
    return x.reshape((x.shape[0] * x.shape[1],) + (1,) * (3 - len(spatial)) + spatial)


def _params(window, strides, dilation) -> tuple:
    fill = 3 - len(window)
    return ((1,) * fill + tuple(window) + (1,) * fill + tuple(strides)
            + (1,) * fill + tuple(dilation))


def max_pool_numba(x: np.ndarray, out_sizes: tuple, window, strides, dilation) -> np.ndarray:
    """``max_pool`` of the padded ``x`` ``[N, C, *spatial]`` (float32/float64, see
    :func:`usable`) by :func:`max_pool_loop`; ``out_sizes`` are its spatial output sizes."""
    out = np.empty(tuple(x.shape[:2]) + tuple(out_sizes), x.dtype)
    if out.size == 0:
        return out
    work = out.size * int(np.prod(window))
    kernel = _compiled("max_pool_loop", work >= PARALLEL_WORK)
    kernel(_as_3d(x), _as_3d(out), *_params(window, strides, dilation))
    return out


def max_pool_grad_numba(x: np.ndarray, g: np.ndarray, window, strides,
                        dilation) -> np.ndarray:
    """``max_pool_grad`` by :func:`max_pool_grad_loop` (``g`` of ``x``'s dtype)."""
    dx = np.empty(x.shape, x.dtype)
    if dx.size == 0:
        return dx
    if g.size == 0:
        dx[...] = 0
        return dx
    work = g.size * int(np.prod(window))
    kernel = _compiled("max_pool_grad_loop", work >= PARALLEL_WORK)
    kernel(_as_3d(x), _as_3d(g), _as_3d(dx), *_params(window, strides, dilation))
    return dx
