"""The Numba kernels of :mod:`functx.primitives._conv_numba` (see its docstring).

This module imports Numba at its top: only ``_conv_numba`` imports it, on the first
convolution it computes, so ``import functx`` never loads Numba. The kernels are
module-level functions so that Numba's disk cache (``cache=True``) finds them again in the
next process (closures' cache entries are keyed on their cells, which differ per process).
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

# Numba's floating-point flags: reassociation lets LLVM vectorize the dot products' sums
# (as BLAS does); no flag that assumes away NaNs or infinities.
FASTMATH = frozenset({"reassoc", "contract"})

njit = numba.njit(parallel=True, cache=True, fastmath=set(FASTMATH), nogil=True)
inner = numba.njit(fastmath=set(FASTMATH), nogil=True, cache=True, inline="always")


@inner
def axpy4(a0, a1, a2, a3, xs, w0, w1, w2, w3):
    for j in range(xs.shape[0]):
        v = xs[j]
        a0[j] += w0 * v
        a1[j] += w1 * v
        a2[j] += w2 * v
        a3[j] += w3 * v


@inner
def axpy1(a, xs, wv):
    for j in range(xs.shape[0]):
        a[j] += wv * xs[j]


@njit
def axpy_flat(xp, w, offs, out, pitch_d, pitch_h, groups, zero):
    """out[n, o, y] = sum_{c, k} w[o, c, k] xp[n, g c, flat(y) + offs[k]]."""
    n_img = xp.shape[0]
    o_all, cg, kk = w.shape
    od, oh, ow = out.shape[2], out.shape[3], out.shape[4]
    og = o_all // groups
    run = (od - 1) * pitch_d + (oh - 1) * pitch_h + ow
    nob = (og + 3) // 4
    for t in prange(n_img * groups * nob):
        n = t // (groups * nob)
        g = (t // nob) % groups
        o0 = g * og + (t % nob) * 4
        nb = min(4, (g + 1) * og - o0)
        a0 = np.zeros(run, dtype=xp.dtype)
        a1 = np.zeros(run, dtype=xp.dtype)
        a2 = np.zeros(run, dtype=xp.dtype)
        a3 = np.zeros(run, dtype=xp.dtype)
        for c in range(cg):
            xc = xp[n, g * cg + c]
            for k in range(kk):
                off = offs[k]
                xs = xc[off:off + run]
                if nb == 4:
                    axpy4(a0, a1, a2, a3, xs, w[o0, c, k], w[o0 + 1, c, k],
                          w[o0 + 2, c, k], w[o0 + 3, c, k])
                else:
                    axpy1(a0, xs, w[o0, c, k])
                    if nb > 1:
                        axpy1(a1, xs, w[o0 + 1, c, k])
                    if nb > 2:
                        axpy1(a2, xs, w[o0 + 2, c, k])
        for b in range(nb):
            ab = a0 if b == 0 else (a1 if b == 1 else (a2 if b == 2 else a3))
            for yd in range(od):
                for yh in range(oh):
                    at = yd * pitch_d + yh * pitch_h
                    dst = out[n, o0 + b, yd, yh]
                    for yw in range(ow):
                        dst[yw] = ab[at + yw]


@njit
def dot_flat(xp, wp, length, bases, out, groups, zero):
    """out[n, o, p] = sum_c sum_{j < length} wp[o, c, j] xp[n, g c, bases[p] + j]."""
    n_img = xp.shape[0]
    o_all, cg = wp.shape[:2]
    n_out = bases.shape[0]
    og = o_all // groups
    for t in prange(n_img * o_all):
        n = t // o_all
        o = t % o_all
        g = o // og
        acc = np.zeros(n_out, dtype=xp.dtype)
        for c in range(cg):
            xc = xp[n, g * cg + c]
            wc = wp[o, c, :length]
            for p in range(n_out):
                xs = xc[bases[p]:bases[p] + length]
                s = zero
                for j in range(length):
                    s += wc[j] * xs[j]
                acc[p] += s
        for p in range(n_out):
            out[n, o, p] = acc[p]


@njit
def rows(xp, w, out, strides, dils, groups, zero):
    """out[n, o, y] = sum_{c, k} w[o, c, k] xp[n, g c, y * s + k * r], row by row."""
    n_img = xp.shape[0]
    o_all, cg, kd, kh, kw = w.shape
    od, oh, ow = out.shape[2], out.shape[3], out.shape[4]
    sd, sh, sw = strides
    rd, rh, rw = dils
    og = o_all // groups
    for t in prange(n_img * o_all):
        n = t // o_all
        o = t % o_all
        g = o // og
        acc = np.zeros((od, oh, ow), dtype=xp.dtype)
        for c in range(cg):
            xc = xp[n, g * cg + c]
            for a in range(kd):
                for b in range(kh):
                    for e in range(kw):
                        wv = w[o, c, a, b, e]
                        base = e * rw
                        for yd in range(od):
                            i = yd * sd + a * rd
                            for yh in range(oh):
                                j = yh * sh + b * rh
                                for yw in range(ow):
                                    acc[yd, yh, yw] += wv * xc[i, j, base + yw * sw]
        out[n, o] = acc
