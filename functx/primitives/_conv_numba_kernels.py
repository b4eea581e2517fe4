"""The Numba kernels of :mod:`functx.primitives._conv_numba` (see its docstring).

This module imports Numba at its top: only ``_conv_numba`` imports it, on the first
convolution it computes, so ``import functx`` never loads Numba. The kernels are
module-level functions so that Numba's disk cache (``cache=True``) finds them again in the
next process (closures' cache entries are keyed on their cells, which differ per process).
``tiled_flat`` and ``tiled_dot`` step through register tiles of
:mod:`functx.primitives._conv_numba_tiles`; ``rows`` is plain loops; ``pad_planes`` and
``spread_rows`` make their zero-padded operands in parallel.
"""
from __future__ import annotations

import numba
import numpy as np
from numba import prange

from functx.primitives._conv_numba_tiles import (DOT_ROWS, FWD_ROWS, tile_accumulate,
                                                 tile_alloc, tile_copy, tile_dot, tile_fwd,
                                                 tile_lanes, tile_positions, tile_zero,
                                                 wide_vectors)

# Numba's floating-point flags: reassociation lets LLVM vectorize the dot products' sums
# (as BLAS does); no flag that assumes away NaNs or infinities.
FASTMATH = frozenset({"reassoc", "contract"})

njit = numba.njit(parallel=True, cache=True, fastmath=set(FASTMATH), nogil=True)


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



@njit
def tiled_flat(xf, plane, c_all, wt, offs, out, pitch_d, pitch_h, groups, zero):
    """out[n, o, y] = sum_{c, k} w[o, c, k] xf[(n C + g cg + c) plane + flat(y) + offs[k]]
    by register tiles of FWD_ROWS output channels x tile_positions(zero) flat positions.

    ``wt[((g nob + ob) cg + c) kk + k, b]`` (flat) holds ``w[g og + ob FWD_ROWS + b, c,
    k]`` (zeros past the group's channels); ``xf`` has a tile row of zeros past its last
    plane.
    """
    n_img, o_all = out.shape[0], out.shape[1]
    od, oh, ow = out.shape[2], out.shape[3], out.shape[4]
    og = o_all // groups
    cg = c_all // groups
    kk = offs.shape[0]
    nob = (og + FWD_ROWS - 1) // FWD_ROWS
    run = (od - 1) * pitch_d + (oh - 1) * pitch_h + ow
    span = tile_positions(zero)
    npb = (run + span - 1) // span
    for t in prange(n_img * npb * groups * nob):
        gob = t % (groups * nob)
        pb = (t // (groups * nob)) % npb
        n = t // (groups * nob * npb)
        g = gob // nob
        o0 = g * og + (gob % nob) * FWD_ROWS
        nb = min(FWD_ROWS, (g + 1) * og - o0)
        y0 = pb * span
        acc = tile_alloc(zero)
        tmpp = tile_alloc(zero)
        tmp = numba.carray(tmpp, (FWD_ROWS, span))
        tile_zero(acc)
        xbase = (n * c_all + g * cg) * plane + y0
        wbase = gob * cg * kk
        for c in range(cg):
            xc = xbase + c * plane
            wc = (wbase + c * kk) * FWD_ROWS
            for k in range(kk):
                tile_fwd(acc, xf, xc + offs[k], wt, wc + k * FWD_ROWS)
        tile_copy(acc, tmpp)
        # the tile's flat positions back to (yd, yh, yw), one padded row's run at a time,
        # skipping the padding's columns
        y = y0
        end = min(y0 + span, run)
        while y < end:
            yd = y // pitch_d
            yh = (y - yd * pitch_d) // pitch_h
            yw = y - yd * pitch_d - yh * pitch_h
            stop = min(end, y - yw + pitch_h)
            if yh < oh and yw < ow:
                m = min(stop - y, ow - yw)
                for b in range(nb):
                    dst = out[n, o0 + b, yd, yh]
                    for j in range(m):
                        dst[yw + j] = tmp[b, y - y0 + j]
            y = stop


@njit
def tiled_dot(xf, plane, c_all, wf, lpad, bases, out, groups, chunk, zero):
    """out[h, b, o, p] = sum_{c in chunk h} sum_{j < lpad} wf[(o cg + c) lpad + j]
    xf[(b C + g cg + c) plane + bases[p] + j]: partial sums over chunks of ``chunk`` input
    channels, by register tiles of DOT_ROWS images x DOT_ROWS output channels.

    ``wf`` is zero past each row's kernel, and has room for DOT_ROWS more rows; ``xf`` has
    room for DOT_ROWS - 1 more images and ``lpad`` elements past its last plane.
    """
    n_chunks, n_img, o_all, n_out = out.shape
    og = o_all // groups
    cg = c_all // groups
    nbb = (n_img + DOT_ROWS - 1) // DOT_ROWS
    nob = (og + DOT_ROWS - 1) // DOT_ROWS
    lanes = tile_lanes(zero)
    for t in prange(n_chunks * nbb * groups * nob):
        gob = t % (groups * nob)
        bb = (t // (groups * nob)) % nbb
        h = t // (groups * nob * nbb)
        g = gob // nob
        o0 = g * og + (gob % nob) * DOT_ROWS
        ob_last = (g + 1) * og - 1
        b0 = bb * DOT_ROWS
        acc = tile_alloc(zero)
        sums = np.zeros(n_out * DOT_ROWS * DOT_ROWS * lanes, dtype=xf.dtype)
        # rows past the last image or the group's last channel are junk (never stored):
        # ``xf`` and ``wf`` have room for them
        c_lo = h * chunk
        c_hi = min(cg, c_lo + chunk)
        xs = c_all * plane
        ws = cg * lpad
        # input channel by channel (its rows stay in the L1 cache for every p); the tile's
        # sums for each output position gathered in ``sums``, one vector per accumulator
        for c in range(c_lo, c_hi):
            xc = (b0 * c_all + g * cg + c) * plane
            wc = (o0 * cg + c) * lpad
            for p in range(n_out):
                tile_zero(acc)
                xo = xc + bases[p]
                for j in range(0, lpad, lanes):
                    tile_dot(acc, xf, xo + j, xs, wf, wc + j, ws)
                tile_accumulate(acc, sums, p * DOT_ROWS * DOT_ROWS * lanes)
        for p in range(n_out):
            for i in range(min(DOT_ROWS, n_img - b0)):
                for q in range(min(DOT_ROWS, ob_last + 1 - o0)):
                    at = (p * DOT_ROWS * DOT_ROWS + i * DOT_ROWS + q) * lanes
                    s = zero
                    for e in range(lanes):
                        s += sums[at + e]
                    out[h, b0 + i, o0 + q, p] = s


@numba.njit(cache=True, nogil=True)
def _span(n, lo, d, size):
    """The input indices ``i`` (``i0 <= i < i1``) whose place ``lo + i d`` is in [0, size)."""
    i0 = 0 if lo >= 0 else (-lo + d - 1) // d
    i1 = min(n, (size - 1 - lo) // d + 1) if size - 1 - lo >= 0 else 0
    return i0, max(i0, i1)


@njit
def pad_planes(x, buf, lo, dil):
    """buf[n, c] = zeros with buf[n, c, lo + i dil] = x[n, c, i] where that lies inside
    (``x``: any strides; 3 spatial axes), plane by plane in parallel."""
    n_img, c_all = x.shape[0], x.shape[1]
    s0, s1, s2 = buf.shape[2], buf.shape[3], buf.shape[4]
    a0, a1 = _span(x.shape[2], lo[0], dil[0], s0)
    b0, b1 = _span(x.shape[3], lo[1], dil[1], s1)
    e0, e1 = _span(x.shape[4], lo[2], dil[2], s2)
    for t in prange(n_img * c_all):
        n = t // c_all
        c = t % c_all
        dst = buf[n, c]
        src = x[n, c]
        dst.reshape(s0 * s1 * s2)[:] = 0
        for i in range(a0, a1):
            for j in range(b0, b1):
                row = dst[lo[0] + i * dil[0], lo[1] + j * dil[1]]
                if dil[2] == 1:
                    row[lo[2] + e0:lo[2] + e1] = src[i, j, e0:e1]
                else:
                    for k in range(e0, e1):
                        row[lo[2] + k * dil[2]] = src[i, j, k]


@njit
def spread_rows(w, wf, lpad, pitch_d, pitch_h):
    """wf[(o cg + c) lpad + a pitch_d + b pitch_h + e] = w[o, c, a, b, e], zeros elsewhere
    (``w``: any strides), row by row in parallel."""
    o_all, cg, kd, kh, kw = w.shape
    for t in prange(o_all * cg):
        o = t // cg
        c = t % cg
        row = wf[t * lpad:(t + 1) * lpad]
        for j in range(lpad):
            row[j] = 0
        for a in range(kd):
            for b in range(kh):
                at = a * pitch_d + b * pitch_h
                for e in range(kw):
                    row[at + e] = w[o, c, a, b, e]
