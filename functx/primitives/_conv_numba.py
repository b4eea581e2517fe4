"""Direct convolution kernels for the CPU, compiled with Numba (:func:`conv_numba`).

The CPU implementation of ``conv_general_dilated``. It runs the direct kernels where they
beat the NumPy path (:func:`_direct_pays`, by measurement: the register-tiled loops where
their tiles are mostly useful work, any loop where the NumPy path's matrix product would
have a tiny dimension, as in LeNet) and :func:`functx.primitives._conv_cpu.conv_cpu`, the
NumPy im2col/col2im path, otherwise, without Numba, and for dtypes other than float32 and
float64. Numba is imported on the first convolution, never at ``import functx``; the
kernels (in ``_conv_numba_kernels``, their register tiles in ``_conv_numba_tiles``) are
compiled once per dtype and layout and cached on disk (``cache=True``), so a second
process loads them.

Every convolution is one of three loops over a zero-padded (and ``lhs_dilation``-dilated)
copy of the input in 3-d form (1-d and 2-d convolutions get unit leading spatial axes),
made plane by plane on Numba's threads (``pad_planes``):

* **flat axpy** (``tiled_flat``; unit strides, more output than kernel positions: the
  forward pass and the input cotangent of a unit-stride convolution). With the padded
  input's spatial axes flattened, output position ``y`` reads input position ``y +
  offset(k)`` for each kernel position ``k``, so each (input channel, kernel position)
  adds one weight times one contiguous run of the input into the sums (which run at the
  padded row pitch; the extra columns are junk, never stored). A register tile holds the
  sums of 4 output channels x 4 vectors of positions (64 float32, 32 float64) in 16
  512-bit registers: each step loads 4 vectors of input and 4 weights (pre-arranged
  contiguous per tile) for 16 fused multiply-adds, over every input channel and kernel
  position, before the tile is stored once.
* **flat dot** (``tiled_dot``; unit kernel dilation, more kernel than output positions:
  the weight cotangent, whose "kernel" is the output cotangent). The kernel is laid out
  at the padded input's pitch (zeros in the extra columns, ``spread_rows``), so each output
  element is one long dot product per input channel. A tile makes 4 images x 4 output
  channels of them at once (8 vector loads per 16 multiply-adds), channel by channel, for
  each output position; where the tiles are fewer than 4 per thread the channels are
  split into chunks whose partial sums are added at the end.
* **rows**, for everything else (strided forward passes, dilated kernels): the sums of one
  output plane, row by row (no tiles).

Threads: the loops run over tiles (image x position block x channel block; image block x
channel block x chunk) with ``prange``, on Numba's threads, in its ``workqueue`` layer
unless the user picked one (functx's threading policy, in :mod:`functx.primitives._numba`:
OpenMP's spinning threads fought BLAS's), one launch at a time; no BLAS call is made.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from functx.primitives._conv_cpu import conv_cpu, scatters, scratch
from functx.primitives._numba import LAUNCH_LOCK, import_numba, numba_enabled, numba_installed
from functx.primitives._util import dilated_size, out_spatial

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

_KERNELS: dict[str, Callable] | None = None
_TILES_FIT = True  # whether the register tiles fit in the registers (set by _compile)

# The register tiles' shape (as functx.primitives._conv_numba_tiles, which imports Numba).
_FWD_ROWS = 4
_TILE_VECS = 4
_DOT_ROWS = 4
_VECTOR_BYTES = 64
# Parallel tasks per thread the weight gradient's loop aims at (it splits the sum over
# input channels into partial sums where its tiles are fewer).
_TASKS_PER_THREAD = 4


# Whether conv_numba uses the kernels at all (tests and benchmarks switch it off to
# compare; FUNCTX_NUMBA=0 too, see functx.primitives._numba), and whether it uses them
# everywhere rather than only where they pay (tests).
ENABLED = numba_installed()
FORCE = False


def _compile() -> dict[str, Callable]:
    """The kernels, loaded on first use (``import numba`` takes a quarter of a second; the
    kernels come from Numba's disk cache after the first process compiled them)."""
    global _KERNELS, _TILES_FIT
    if _KERNELS is not None:
        return _KERNELS
    import_numba()  # (with functx's threading policy) before the kernels' module imports it
    # A function-local import: the kernels' module imports Numba at its top.
    from functx.primitives import _conv_numba_kernels as kernels

    _TILES_FIT = kernels.wide_vectors()
    _KERNELS = {"tiled_flat": kernels.tiled_flat, "tiled_dot": kernels.tiled_dot,
                "rows": kernels.rows, "pad_planes": kernels.pad_planes,
                "spread_rows": kernels.spread_rows}
    return _KERNELS


# -- the layouts -----------------------------------------------------------------------------

def _as_3d(x: np.ndarray) -> np.ndarray:
    """``[A, B, *spatial]`` with unit spatial axes in front, to three spatial axes."""
    return x.reshape(x.shape[:2] + (1,) * (5 - x.ndim) + x.shape[2:])


def _padded_input(x: np.ndarray, padding, lhs_dilation, slack: int = 0,
                  junk_images: int = 0) -> tuple:
    """``x`` (3-d form) dilated by ``lhs_dilation`` and zero-padded (negative values crop),
    in a contiguous scratch array followed by ``slack`` zeros and room for ``junk_images``
    more images (uninitialised): (that array, the flat buffer with its tail). Copied plane
    by plane on Numba's threads (``pad_planes``)."""
    sizes = tuple(dilated_size(n, d) + lo + hi
                  for n, d, (lo, hi) in zip(x.shape[2:], lhs_dilation, padding))
    shape = x.shape[:2] + sizes
    size = math.prod(shape)
    flat = scratch(np, (size + slack + junk_images * math.prod(shape[1:]),), x.dtype,
                   "numba_x")
    buf = flat[:size].reshape(shape)
    flat[size:size + slack] = 0
    lo = np.array([p[0] for p in padding], dtype=np.int64)
    _launch(_compile()["pad_planes"], x, buf, lo, np.array(lhs_dilation, dtype=np.int64))
    return buf, flat


def conv_numba(xp: Any, lhs: np.ndarray, rhs: np.ndarray, *, window_strides, padding,
               lhs_dilation, rhs_dilation, feature_group_count) -> np.ndarray:
    """The CPU implementation of ``conv_general_dilated`` with Numba's direct kernels.

    Args:
        xp: the array module (NumPy).
        lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count:
            as :func:`functx.primitives.conv.conv_general_dilated`.

    Returns:
        The convolution, ``[N, O, *out_spatial]``; through
        :func:`~functx.primitives._conv_cpu.conv_cpu` where Numba is missing or turned off
        (``FUNCTX_NUMBA=0``) or the dtype is neither float32 nor float64.
    """
    params = dict(window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, feature_group_count=feature_group_count)
    if not ENABLED or lhs.dtype not in _DTYPES or lhs.dtype != rhs.dtype:
        return conv_cpu(xp, lhs, rhs, **params)
    spatial = out_spatial(lhs.shape[2:], rhs.shape[2:], window_strides, padding, lhs_dilation,
                          rhs_dilation)
    out_shape = (lhs.shape[0], rhs.shape[0]) + spatial
    if lhs.size == 0 or rhs.size == 0 or math.prod(out_shape) == 0:
        return np.zeros(out_shape, dtype=lhs.dtype)
    if not numba_enabled() or not FORCE and not _direct_pays(lhs, rhs, out_shape, **params):
        return conv_cpu(xp, lhs, rhs, **params)
    return direct_conv(lhs, rhs, out_shape, **params)


# The NumPy path's matrix product runs at BLAS speed; the copies around it dominate where
# one of its dimensions is tiny, and the direct kernels win there (bench_conv's LeNet: 1 -> 6
# channels forward and its weight gradient): the rule before the register tiles, kept for
# the ``rows`` loop (strided or dilated-kernel convolutions), which has no tiles.
_SMALL_DIM = 8
# The tiled loops win where their tiles are mostly useful work (a tile computes 4 output
# channels x 64 (float32) padded-pitch positions, so few channels per group or small images
# waste some of it), or where the NumPy path's product is small in some dimension (BLAS
# is slower there, and the copies around it weigh more). Measured single-threaded (process
# CPU time) on an AVX-512 Xeon (Emerald Rapids), direct against NumPy path, ms. Products
# large in every dimension: 3x3, 8 images, 64 -> 64 channels on 32x32 (tile efficiency
# 0.94): forward 5.6 against 10.5, input gradient 5.6 against 10.8; 128 -> 128 on 16x16
# (0.8): 5.7 against 7.3; 256 -> 256 on 8x8 (0.5): 9.3 against 6.6; a 1x1 kernel (a plain
# matrix product) 1.7 against 1.4. The weight gradient's loop (the flat dot) runs at about
# 80% of the forward's rate: on 32x32 6.4 against 8.4 ms (64 -> 64) and 7.7 against 8.6
# (32 -> 64), on 16x16 (128 -> 128) 7.6 against 6.1. Smaller products (LeNet's second
# convolution, 6 -> 16 channels, 5x5 on 14x14, batch 64): forward (efficiency 0.52) 0.62
# against 1.09, input gradient (0.57) 0.95 against 1.16, weight gradient (0.52) 0.76
# against 1.04; 16 -> 32 channels on 8x8, batch 64: forward (0.5) 0.81 against 1.07, weight
# gradient 0.78 against 0.95.
_MIN_TILE_EFFICIENCY = 0.7
_LARGE_DIM = 64  # a NumPy-path product at least this large in every dimension
_MIN_TILE_EFFICIENCY_SMALL = 0.35  # otherwise
_MIN_DOT_POSITIONS = 1024  # positions per row of a large flat dot's kernel (32x32 images)


def _tile_efficiency(rows: int, n: int, og: int, useful: int, computed: int) -> float:
    """The useful share of a tiled loop's products: ``og`` channels (and ``n`` images, the
    flat dot's; 0 for the forward's tiles) in blocks of ``rows``, ``useful`` of ``computed``
    positions."""
    share = og / (-(-og // rows) * rows)
    if n:
        share *= n / (-(-n // rows) * rows)
    return share * useful / computed


def _direct_pays(lhs, rhs, out_shape, *, window_strides, padding, lhs_dilation, rhs_dilation,
                 feature_group_count) -> bool:
    """Whether the direct kernels beat the NumPy path here (see the measurements above)."""
    groups = feature_group_count
    o, cg = rhs.shape[:2]
    kk, p = math.prod(rhs.shape[2:]), math.prod(out_shape[2:])
    og = o // groups
    if kk > p:  # rows: batch x output positions; columns: output channels
        dims = (lhs.shape[0] * p, o)
    elif scatters(lhs, rhs, out_shape, window_strides, any(d > 1 for d in lhs_dilation)):
        dims = (og * kk, cg)
    else:
        dims = (og, cg * kk)
    if min(dims) < _SMALL_DIM:
        return True
    _compile()
    if not _TILES_FIT:  # no AVX-512: the tiles spill out of the registers (as before them)
        return False
    large = min(dims) >= _LARGE_DIM
    least = _MIN_TILE_EFFICIENCY if large else _MIN_TILE_EFFICIENCY_SMALL
    # the padded input's sizes and pitches, in 3-d form
    sizes = [dilated_size(n, d) + lo + hi
             for n, d, (lo, hi) in zip(lhs.shape[2:], lhs_dilation, padding)]
    sizes = [1] * (3 - len(sizes)) + sizes
    pitches = (sizes[1] * sizes[2], sizes[2], 1)
    lanes = _VECTOR_BYTES // lhs.dtype.itemsize
    if all(s == 1 for s in window_strides) and kk <= p:
        if kk == 1:
            return False
        spatial = [1] * (3 - len(out_shape[2:])) + list(out_shape[2:])
        run = sum((y - 1) * q for y, q in zip(spatial, pitches)) + 1
        span = _TILE_VECS * lanes
        return _tile_efficiency(_FWD_ROWS, 0, og, p, -(-run // span) * span) >= least
    if kk > p and all(r == 1 for r in rhs_dilation):
        kernel = [1] * (3 - len(rhs.shape[2:])) + list(rhs.shape[2:])
        length = sum((k - 1) * q for k, q in zip(kernel, pitches)) + 1
        lpad = -(-length // lanes) * lanes
        return (kk >= _MIN_DOT_POSITIONS or not large) and _tile_efficiency(
            _DOT_ROWS, lhs.shape[0], og, kk, lpad) >= least
    return False


def _threads() -> int:
    """Numba's thread count (the kernels' parallel tasks)."""
    return import_numba().get_num_threads()


def _launch(kernel: Callable, *args: Any) -> None:
    with LAUNCH_LOCK:  # the workqueue layer takes one launch at a time (see _numba)
        kernel(*args)


def direct_conv(lhs: np.ndarray, rhs: np.ndarray, out_shape: tuple, *, window_strides,
                padding, lhs_dilation, rhs_dilation, feature_group_count) -> np.ndarray:
    """The convolution by the direct kernels (float32 or float64 operands of one dtype, no
    empty axis; see the module docstring)."""
    spatial = tuple(out_shape[2:])
    kernels = _compile()
    fill = 3 - len(spatial)
    strides = (1,) * fill + tuple(window_strides)
    rdil = (1,) * fill + tuple(rhs_dilation)
    lanes = _VECTOR_BYTES // lhs.dtype.itemsize
    w = _as_3d(rhs)
    kernel = w.shape[2:]
    flat = all(s == 1 for s in strides) and math.prod(kernel) <= math.prod(spatial)
    dot = not flat and all(r == 1 for r in rdil)
    # (the flat dot's tiles read DOT_ROWS images from any block's first)
    x, xf = _padded_input(_as_3d(lhs), ((0, 0),) * fill + tuple(padding),
                          (1,) * fill + tuple(lhs_dilation), slack=_TILE_VECS * lanes,
                          junk_images=_DOT_ROWS - 1 if dot else 0)
    out = np.empty(out_shape, dtype=lhs.dtype)
    out3 = _as_3d(out)
    zero = np.zeros((), lhs.dtype)[()]
    groups = feature_group_count
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    plane = math.prod(sizes)
    o, cg = w.shape[:2]
    og = o // groups
    pitch_d, pitch_h = sizes[1] * sizes[2], sizes[2]
    if flat:
        offs = np.array([a * rdil[0] * pitch_d + b * rdil[1] * pitch_h + e * rdil[2]
                         for a in range(kernel[0]) for b in range(kernel[1])
                         for e in range(kernel[2])], dtype=np.int64)
        kk = offs.size
        nob = -(-og // _FWD_ROWS)
        # wt[g, ob, c, k, b] = w[g og + ob FWD_ROWS + b, c, k], zeros past the group
        wt = np.zeros((groups, nob * _FWD_ROWS, cg, kk), w.dtype)
        w = np.ascontiguousarray(w)
        wt[:, :og] = w.reshape(groups, og, cg, kk)
        wt = np.ascontiguousarray(
            wt.reshape(groups, nob, _FWD_ROWS, cg, kk).transpose(0, 1, 3, 4, 2)).reshape(-1)
        _launch(kernels["tiled_flat"], xf, plane, c, wt, offs, out3, pitch_d, pitch_h, groups,
                zero)
    elif dot:
        length = (kernel[0] - 1) * pitch_d + (kernel[1] - 1) * pitch_h + kernel[2]
        lpad = -(-length // lanes) * lanes
        # the kernel at the padded input's pitches, zeros in the extra columns and the tail;
        # room for DOT_ROWS more rows (the last block's, never stored)
        wf = scratch(np, ((o + _DOT_ROWS) * cg * lpad,), w.dtype, "numba_w")
        _launch(kernels["spread_rows"], w, wf, lpad, pitch_d, pitch_h)
        o3 = out3.shape[2:]
        bases = np.array([a * strides[0] * pitch_d + b * strides[1] * pitch_h + e * strides[2]
                          for a in range(o3[0]) for b in range(o3[1]) for e in range(o3[2])],
                         dtype=np.int64)
        tasks = -(-n // _DOT_ROWS) * groups * -(-og // _DOT_ROWS)
        chunk = -(-cg // max(1, min(cg, -(-_TASKS_PER_THREAD * _threads() // tasks))))
        parts = np.empty((-(-cg // chunk), n, o, bases.size), dtype=lhs.dtype)
        _launch(kernels["tiled_dot"], xf, plane, c, wf, lpad, bases, parts, groups, chunk, zero)
        np.sum(parts, axis=0, out=out.reshape(parts.shape[1:]))
    else:
        _launch(kernels["rows"], x, np.ascontiguousarray(w), out3, strides, rdil, groups, zero)
    return out
