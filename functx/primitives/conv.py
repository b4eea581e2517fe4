"""conv_general_dilated: N-d convolution with strides, padding, dilations and feature groups.

Layout is fixed (PyTorch's): ``lhs`` is ``[N, C, *spatial]``, ``rhs`` (the weights) is
``[O, C // feature_group_count, *kernel]`` and the output is ``[N, O, *out_spatial]``. As in
XLA, the operation is a cross-correlation of the ``lhs`` dilated by ``lhs_dilation`` (holes
of ``lhs_dilation - 1`` zeros between neighbours) and padded by ``padding`` (``(low,
high)`` per spatial axis; negative values crop) with the kernel dilated by
``rhs_dilation``, taken every ``window_strides`` positions::

    out[n, o, y] = sum_{c, k} rhs[o, c, k] * lhs_dp[n, g(o) * C_g + c, y * s + k * r]

so that ``out_size = (dilated_in + low + high - dilated_kernel) // stride + 1`` (0 when the
padded input is shorter than the dilated kernel). Output channel ``o`` reads the input
channels of its group ``g(o) = o // (O // feature_group_count)``. XLA's
``batch_group_count`` is not a parameter: the weight cotangent of a grouped convolution is a
feature-grouped convolution of rearranged operands (see the VJP rule), so the family closes
without it.

The implementation gathers the windows into one column buffer (an ``im2col``, filled by a
loop over kernel positions or over output positions, whichever is shorter) and does one
(batched) matrix product. A unit-stride convolution may instead multiply first and
scatter-add the products into the output (``col2im``): it does so when the input is
dilated (a transposed convolution, as in the input cotangent of a strided convolution), so
the dilation's zeros are never multiplied, and when it moves less data (fewer output than
input channels, as in most input cotangents). Both are written against the array-module
interface. The CPU implementation (``_conv_cpu``) makes the same choice with CPU-specific
layouts: the batch joins the matrix product's columns (one large product rather than one
per image), the windows are copied from one strided view, unit-stride convolutions work on
"flat" rows (long contiguous runs), and temporaries live in per-thread scratch buffers.
The copies and scatter-adds run on the calling thread; only the products use the BLAS
library's threads (see the note above ``_gather_cpu``).
"""
from __future__ import annotations

import functools
import itertools
import math
import threading
from typing import Any, Sequence

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray, abstractify
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives._batching import moveaxis
from functx.primitives._util import dilated_size, ndim_of, out_spatial, same_dtypes
from functx.primitives.cuda import conv as _cuda
from functx.registry import Primitive
from functx.tracing import bind

# Largest column buffer one matrix product works on (bytes); bigger batches go in chunks.
_COLS_BYTES = 1 << 27


# -- the shape rule --------------------------------------------------------------------------

conv_general_dilated_p = Primitive("conv_general_dilated")


@conv_general_dilated_p.def_abstract_eval
def _conv_aval(lhs: AbstractArray, rhs: AbstractArray, *, window_strides: tuple,
               padding: tuple, lhs_dilation: tuple, rhs_dilation: tuple,
               feature_group_count: int) -> AbstractArray:
    name = "conv_general_dilated"
    dtype = same_dtypes(name, lhs, rhs)
    if dtype.kind != "f" and dtype.name != "bfloat16":
        raise DTypeError(f"{name} needs real floating-point operands but got {lhs} and {rhs}. "
                         "Convert them with x.astype(np.float32) (or float64) first.")
    nd = lhs.ndim - 2
    if lhs.ndim < 2 or rhs.ndim != lhs.ndim:
        raise ShapeError(f"{name} needs lhs [N, C, *spatial] and rhs [O, C/groups, *kernel] of "
                         f"one rank (at least 2) but got {lhs} and {rhs}.")
    for what, v in (("window_strides", window_strides), ("padding", padding),
                    ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(v) != nd:
            raise ShapeError(f"{name}: {what}={v} needs one entry per spatial axis ({nd}) of "
                             f"{lhs}.")
    for what, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if any(int(s) < 1 for s in v):
            raise ShapeError(f"{name}: {what} must be positive integers but got {v}.")
    if any(len(p) != 2 for p in padding):
        raise ShapeError(f"{name}: padding must hold one (low, high) pair per spatial axis "
                         f"but got {padding}.")
    g = feature_group_count
    if g < 1:
        raise ShapeError(f"{name}: feature_group_count must be a positive integer but got {g}.")
    n, c = lhs.shape[:2]
    o, cg = rhs.shape[:2]
    if c != cg * g or o % g:
        raise ShapeError(
            f"{name}: lhs {lhs} has {c} channels and rhs {rhs} is [O={o}, C/groups={cg}, ...] "
            f"with feature_group_count={g}: the lhs channels must equal rhs.shape[1] * groups "
            f"({cg * g}) and the output channels O must be divisible by groups.")
    if any(k < 1 for k in rhs.shape[2:]):
        raise ShapeError(f"{name}: the kernel's spatial sizes must be positive but rhs is {rhs}.")
    for i, (size, (lo, hi), ld) in enumerate(zip(lhs.shape[2:], padding, lhs_dilation)):
        if dilated_size(size, ld) + lo + hi < 0:
            raise ShapeError(f"{name}: padding {(lo, hi)} of spatial axis {i} crops more than "
                             f"the (dilated) input {lhs} holds.")
    spatial = out_spatial(lhs.shape[2:], rhs.shape[2:], window_strides, padding, lhs_dilation,
                          rhs_dilation)
    return AbstractArray((n, o) + spatial, dtype, lhs.weak_type and rhs.weak_type)


# -- the implementation ----------------------------------------------------------------------

_SCRATCH = threading.local()
_SCRATCH_MAX = 1 << 26  # bytes: larger temporaries are allocated afresh


def _scratch(xp: Any, shape: Sequence[int], dtype: Any, slot: str) -> Any:
    """An uninitialised array for a temporary that never leaves the implementation.

    On NumPy it is a view of a buffer kept per thread and slot between calls: a fresh large
    allocation is paged in (and zeroed by the kernel) on first touch, which costs as much as
    the copies into it. CuPy's memory pool already makes allocation cheap.
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if xp is not np or nbytes > _SCRATCH_MAX:
        return xp.empty(tuple(shape), dtype=dtype)
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = {}
    buf = bufs.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[slot] = np.empty(max(nbytes, 1), np.uint8)
    return buf[:nbytes].view(dtype).reshape(tuple(shape))


def _padded(xp: Any, x: Any, padding: Sequence[tuple[int, int]]) -> Any:
    """``x`` zero-padded on its spatial axes (negative padding crops), in scratch memory."""
    if all(lo == 0 and hi == 0 for lo, hi in padding):
        return x
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(x.shape[2:], padding))
    x = x[(slice(None), slice(None)) + crop]
    if all(lo <= 0 and hi <= 0 for lo, hi in padding):
        return x
    shape = x.shape[:2] + tuple(n + max(lo, 0) + max(hi, 0)
                                for n, (lo, hi) in zip(x.shape[2:], padding))
    out = _scratch(xp, shape, x.dtype, "padded")
    out[...] = 0
    out[(slice(None), slice(None)) + tuple(slice(max(lo, 0), max(lo, 0) + n) for n, (lo, _)
                                           in zip(x.shape[2:], padding))] = x
    return out


def _lhs_dilated(xp: Any, x: Any, lhs_dilation: Sequence[int]) -> Any:
    """``x`` with ``d - 1`` zeros between neighbours on its spatial axes."""
    shape = x.shape[:2] + tuple(dilated_size(n, d) for n, d in zip(x.shape[2:], lhs_dilation))
    out = xp.zeros(shape, dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dilation)] = x
    return out


def _chunks(n: int, row_bytes: int, most: int | None = None) -> list[tuple[int, int]]:
    """Batch ranges whose column buffers stay under ``_COLS_BYTES`` (at least one row each,
    at most ``most`` rows)."""
    step = max(1, min(_COLS_BYTES // max(row_bytes, 1), most or n))
    return [(i, min(i + step, n)) for i in range(0, n, step)]


def _gather_conv(xp, x, w, out_shape, strides, rhs_dilation, groups):
    """The convolution of an already padded (and dilated) ``x``: im2col, then one matmul."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel, spatial = w.shape[2:], out_shape[2:]
    kk, p = math.prod(kernel), math.prod(spatial)
    og = o // groups
    out = xp.empty(out_shape, dtype=x.dtype)
    by_kernel = kk <= p  # loop over the shorter of kernel positions and output positions
    for a, b in _chunks(n, c * kk * p * x.dtype.itemsize):
        xs = x[a:b]
        m = b - a
        if by_kernel:  # cols[n, c, *k, *y] = x[n, c, y * s + k * r]
            cols = _scratch(xp, (m, c) + kernel + spatial, x.dtype, "cols")
            for k in itertools.product(*map(range, kernel)):
                cols[(slice(None), slice(None)) + k] = xs[(slice(None), slice(None)) + tuple(
                    slice(ki * r, ki * r + (yn - 1) * s + 1, s)
                    for ki, r, yn, s in zip(k, rhs_dilation, spatial, strides))]
            if groups == 1:
                xp.matmul(xp.reshape(w, (o, cg * kk)), xp.reshape(cols, (m, c * kk, p)),
                          out=xp.reshape(out[a:b], (m, o, p)))
            else:
                xp.matmul(xp.reshape(w, (groups, og, cg * kk)),
                          xp.reshape(cols, (m, groups, cg * kk, p)),
                          out=xp.reshape(out[a:b], (m, groups, og, p)))
        else:  # cols[n, *y, c, *k] = x[n, c, y * s + k * r]
            cols = _scratch(xp, (m,) + spatial + (c,) + kernel, x.dtype, "cols")
            for y in itertools.product(*map(range, spatial)):
                cols[(slice(None),) + y] = xs[(slice(None), slice(None)) + tuple(
                    slice(yi * s, yi * s + (kn - 1) * r + 1, r)
                    for yi, s, kn, r in zip(y, strides, kernel, rhs_dilation))]
            # One product with the batch folded into the rows (few output positions, many
            # kernel positions: the weight gradient's shape).
            if groups == 1:
                res = xp.matmul(xp.reshape(cols, (m * p, c * kk)),
                                xp.reshape(w, (o, cg * kk)).T)  # [m*p, o]
                res = xp.transpose(xp.reshape(res, (m, p, o)), (0, 2, 1))
            else:
                cols = xp.transpose(xp.reshape(cols, (m * p, groups, cg * kk)), (1, 0, 2))
                wt = xp.transpose(xp.reshape(w, (groups, og, cg * kk)), (0, 2, 1))
                res = xp.reshape(xp.matmul(cols, wt), (groups, m, p, og))  # [g, m*p, og]
                res = xp.transpose(res, (1, 0, 3, 2))  # [m, g, og, p]
            out[a:b] = xp.reshape(res, (m, o) + spatial)
    return out


def _scatter_plans(kernel, in_sizes, spatial, padding, lhs_dilation, rhs_dilation) -> list:
    """``(k, src, dst)`` per kernel position ``k`` that reaches the output: the slices of the
    input positions it carries and of the output positions they land on (see
    :func:`_scatter_conv`)."""
    plans = []
    for k in itertools.product(*map(range, kernel)):
        src, dst = [], []
        for ki, (lo, _), d, r, ni, ny in zip(k, padding, lhs_dilation, rhs_dilation, in_sizes,
                                              spatial):
            i0 = max(0, -((lo - ki * r) // d))  # smallest i with lo + i*d - k*r >= 0
            i1 = min(ni, (ny - 1 - lo + ki * r) // d + 1)
            if i1 <= i0:
                break
            y0 = lo + i0 * d - ki * r
            src.append(slice(i0, i1))
            dst.append(slice(y0, y0 + (i1 - i0 - 1) * d + 1, d))
        else:
            plans.append((k, tuple(src), tuple(dst)))
    return plans


def _scatter_conv(xp, x, w, out_shape, padding, lhs_dilation, rhs_dilation, groups):
    """A unit-stride convolution of the ``lhs_dilation``-dilated ``x`` without forming it.

    Input element ``x[i]`` sits at ``lo + i * D`` of the dilated, padded input, so kernel
    position ``k`` carries it to output position ``y = lo + i * D - k * r``: multiply the
    undilated ``x`` by every kernel position first, then add each product into its strided
    output positions (col2im).
    """
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel, in_sizes, spatial = w.shape[2:], x.shape[2:], out_shape[2:]
    kk, pi = math.prod(kernel), math.prod(in_sizes)
    og = o // groups
    # wk[g, og * k, cg]: the weights of each kernel position as a matrix over input channels.
    wk = xp.reshape(xp.transpose(xp.reshape(w, (groups, og, cg, kk)), (0, 1, 3, 2)),
                    (groups, og * kk, cg))
    out = xp.zeros(out_shape, dtype=x.dtype)
    plans = _scatter_plans(kernel, in_sizes, spatial, padding, lhs_dilation, rhs_dilation)
    for a, b in _chunks(n, o * kk * pi * x.dtype.itemsize):
        m = b - a
        prod = _scratch(xp, (m, groups, og * kk, pi), x.dtype, "cols")
        xp.matmul(wk, xp.reshape(x[a:b], (m, groups, cg, pi)), out=prod)
        prod = xp.reshape(prod, (m, o) + tuple(kernel) + tuple(in_sizes))
        for k, src, dst in plans:
            out[(slice(a, b), slice(None)) + dst] += prod[(slice(None), slice(None)) + k + src]
    return out


def _scatters(lhs, rhs, out_shape, window_strides, dilated: bool) -> bool:
    """Whether to multiply first and scatter-add (col2im) rather than gather (im2col).

    Only with unit strides and a kernel smaller than the output: when it never multiplies
    the dilation's zeros, or when its products (output channels x input positions) are
    fewer than the gathered columns (input channels x output positions).
    """
    return all(s == 1 for s in window_strides) and math.prod(rhs.shape[2:]) <= math.prod(
        out_shape[2:]) and (dilated or rhs.shape[0] * math.prod(lhs.shape[2:])
                            < lhs.shape[1] * math.prod(out_shape[2:]))


def _conv_impl(xp, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               feature_group_count):
    out_shape = (lhs.shape[0], rhs.shape[0]) + out_spatial(
        lhs.shape[2:], rhs.shape[2:], window_strides, padding, lhs_dilation, rhs_dilation)
    if lhs.size == 0 or rhs.size == 0 or math.prod(out_shape) == 0:
        return xp.zeros(out_shape, dtype=lhs.dtype)
    dilated = any(d > 1 for d in lhs_dilation)
    if _scatters(lhs, rhs, out_shape, window_strides, dilated):
        return _scatter_conv(xp, lhs, rhs, out_shape, padding, lhs_dilation, rhs_dilation,
                             feature_group_count)
    if dilated:
        lhs = _lhs_dilated(xp, lhs, lhs_dilation)
    return _gather_conv(xp, _padded(xp, lhs, padding), rhs, out_shape, window_strides,
                        rhs_dilation, feature_group_count)


# -- the CPU implementation ------------------------------------------------------------------
# The generic rule multiplies image by image (a batched matmul is one BLAS call per image,
# and a product over a few thousand columns keeps few threads busy) and writes the output
# in its [N, O, ...] layout. On the CPU the batch joins the product's columns instead:
# cols[C * K, N * P] (or, with more kernel than output positions, the rows: cols[N * P,
# C * K]), one product per chunk of the batch, then one transposing copy into [N, O, P];
# the col2im multiplies [O * K, C] by the whole batch's x[C, N * P] alike. The window
# copies come from one strided view (one copy, not one per kernel position) and unit-stride
# convolutions work on flat rows (below).
#
# The copies and scatter-adds run on the calling thread. Threads of our own for them were
# measured (bench_conv's three convolutions on a 16-core host, interleaved, medians) no
# faster at 2 threads (24.0 against 23.6 ms) and 2.5x slower at 16 (39 against 16 ms): the
# BLAS library's threads spin for a while after each product and take the cores. So did
# giving each thread whole images with the BLAS library single-threaded meanwhile
# (conv2d 21.5 against 19.8 ms at 16 threads, LeNet 25.5 against 17.2): the threads then
# contend for the interpreter lock between their NumPy calls.

# Products up to about this many multiply-adds run through BLAS's small-matrix kernels
# (OpenBLAS: no packing), which made the few-channel convolutions of small networks 2x
# faster in chunks of a few images than as one product over the whole batch.
_SMALL_PRODUCT = 1 << 20


def _small_rows(per_row: int) -> int | None:
    """How many images' products to take at once when one image's product of ``per_row``
    multiply-adds is small (None: all of them)."""
    return max(1, _SMALL_PRODUCT // per_row) if per_row < _SMALL_PRODUCT else None


def _windows_view(x: np.ndarray, kernel: Sequence[int], spatial: Sequence[int],
                  strides: Sequence[int], rhs_dilation: Sequence[int]) -> np.ndarray:
    """``v[n, c, *y, *k] = x[n, c, y * s + k * r]``: the windows of the padded ``x`` as a
    read-only strided view (nothing is copied)."""
    st = x.strides[2:]
    return np.lib.stride_tricks.as_strided(
        x, tuple(x.shape[:2]) + tuple(spatial) + tuple(kernel),
        tuple(x.strides[:2]) + tuple(t * s for t, s in zip(st, strides))
        + tuple(t * r for t, r in zip(st, rhs_dilation)), writeable=False)


def _gather_cpu(x, w, out_shape, strides, rhs_dilation, groups):
    """:func:`_gather_conv` with the batch in the product's columns (or rows)."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel, spatial = tuple(w.shape[2:]), tuple(out_shape[2:])
    nd = len(kernel)
    kk, p = math.prod(kernel), math.prod(spatial)
    og = o // groups
    dt = x.dtype
    view = _windows_view(x, kernel, spatial, strides, rhs_dilation)
    ys, ks = tuple(range(2, 2 + nd)), tuple(range(2 + nd, 2 + 2 * nd))
    out = np.empty(out_shape, dtype=dt)
    if kk <= p:  # cols[c, *k, n, *y]: batch and output positions are the columns
        for a, b in _chunks(n, c * kk * p * dt.itemsize, _small_rows(og * cg * kk * p)):
            m = b - a
            src = view[a:b].transpose((1,) + ks + (0,) + ys)
            cols = _scratch(np, (c,) + kernel + (m,) + spatial, dt, "cols")
            np.copyto(cols, src)
            res = _scratch(np, (groups, og, m * p), dt, "res")
            np.matmul(np.reshape(w, (groups, og, cg * kk)),
                      cols.reshape(groups, cg * kk, m * p), out=res)
            np.copyto(out[a:b].reshape(m, o, p), res.reshape(o, m, p).transpose(1, 0, 2))
        return out
    # cols[n, *y, c, *k]: batch and output positions are the rows (the weight cotangent's
    # shape: few output positions, many kernel positions)
    for a, b in _chunks(n, c * kk * p * dt.itemsize):
        m = b - a
        src = view[a:b].transpose((0,) + ys + (1,) + ks)
        cols = _scratch(np, (m,) + spatial + (c,) + kernel, dt, "cols")
        np.copyto(cols, src)
        if groups == 1:
            res = _scratch(np, (m * p, o), dt, "res")
            np.matmul(cols.reshape(m * p, c * kk), np.reshape(w, (o, c * kk)).T, out=res)
            np.copyto(out[a:b].reshape(m, o, p), res.reshape(m, p, o).transpose(0, 2, 1))
        else:
            res = _scratch(np, (groups, m * p, og), dt, "res")
            np.matmul(cols.reshape(m * p, groups, cg * kk).transpose(1, 0, 2),
                      np.reshape(w, (groups, og, cg * kk)).transpose(0, 2, 1), out=res)
            np.copyto(out[a:b].reshape(m, groups, og, p),
                      res.reshape(groups, m, p, og).transpose(1, 0, 3, 2))
    return out


def _scatter_cpu(x, w, out_shape, padding, lhs_dilation, rhs_dilation, groups):
    """:func:`_scatter_conv` with the batch in the product's columns: ``prod[O * K, N * P]
    = wk[O * K, C] @ x[C, N * P]``, scatter-added into ``acc[O, N, *out]``."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel, in_sizes, spatial = tuple(w.shape[2:]), tuple(x.shape[2:]), tuple(out_shape[2:])
    kk, pi, p = math.prod(kernel), math.prod(in_sizes), math.prod(spatial)
    og = o // groups
    dt = x.dtype
    # wk[g, og * k, cg]: the weights of each kernel position as a matrix over input channels.
    wk = np.reshape(np.transpose(np.reshape(w, (groups, og, cg, kk)), (0, 1, 3, 2)),
                    (groups, og * kk, cg))
    plans = _scatter_plans(kernel, in_sizes, spatial, padding, lhs_dilation, rhs_dilation)
    out = np.empty(out_shape, dtype=dt)
    for a, b in _chunks(n, o * kk * pi * dt.itemsize):
        m = b - a
        if m == 1:
            xt = x[a]
        else:
            xt = _scratch(np, (c, m) + in_sizes, dt, "xt")
            np.copyto(xt, x[a:b].swapaxes(0, 1))
        prod = _scratch(np, (groups, og * kk, m * pi), dt, "cols")
        np.matmul(wk, np.reshape(xt, (groups, cg, m * pi)), out=prod)
        prod = prod.reshape((o,) + kernel + (m,) + in_sizes)
        acc = _scratch(np, (o, m) + spatial, dt, "acc")
        acc[...] = 0
        for k, src, dst in plans:
            acc[(slice(None), slice(None)) + dst] += prod[(slice(None),) + k + (slice(None),)
                                                          + src]
        np.copyto(out[a:b].reshape(m, o, p), acc.reshape(o, m, p).transpose(1, 0, 2))
    return out


# Unit-stride convolutions on "flat" rows: with the spatial axes of the (padded) input
# flattened, output position y reads input position y + k * r at a fixed flat offset for
# each kernel position k, so the windows are long contiguous runs (a copy or an add of whole
# planes) instead of rows of a few elements, whose per-row overhead dominated the copies.
# The price: the product also runs over the padded rows' extra columns (junk, never read
# back), so it is used only where they are few.
_FLAT_JUNK = 1.25  # the most the product may grow by junk columns...
_FLAT_JUNK_CHEAP = 2.0  # ...or the col2im's, where it costs at most 64 multiply-adds per sum


def _flat_scatter_pays(junk: float, per_element: int) -> bool:
    """Whether flat rows pay for a col2im whose product grows by the factor ``junk`` and
    costs ``per_element`` multiply-adds per element: with few input channels the product is
    cheap beside the scatter-adds (each reads and writes the sums) that flat rows speed up."""
    return junk <= _FLAT_JUNK or (junk <= _FLAT_JUNK_CHEAP and per_element <= 64)


def _pitches(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of an array of spatial ``sizes``."""
    return tuple(math.prod(sizes[i + 1:]) for i in range(len(sizes)))


def _flat_padded(x, padding, reach: int) -> np.ndarray:
    """``x`` zero-padded (negative padding crops) as planes of :func:`_padded_sizes` in a
    flat scratch buffer, with a zeroed tail where reading ``reach`` elements from the last
    plane's start runs past its end."""
    n, c = x.shape[:2]
    sizes = _padded_sizes(x, padding)
    x = x[(slice(None), slice(None)) + tuple(
        slice(max(-lo, 0), size - max(-hi, 0)) for size, (lo, hi) in zip(x.shape[2:], padding))]
    pads = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    plane = math.prod(sizes)
    buf = _scratch(np, (n * c * plane + max(reach - plane, 0),), x.dtype, "padded")
    padded = buf[:n * c * plane].reshape((n, c) + sizes)
    for i, ((lo, hi), size) in enumerate(zip(pads, sizes)):
        before = (slice(None),) * (2 + i)
        padded[before + (slice(0, lo),)] = 0
        padded[before + (slice(size - hi, size),)] = 0
    buf[n * c * plane:] = 0
    np.copyto(padded[(slice(None), slice(None)) + tuple(
        slice(lo, size - hi) for (lo, hi), size in zip(pads, sizes))], x)
    return buf


def _padded_sizes(x, padding) -> tuple[int, ...]:
    """The spatial sizes of ``x`` padded by ``padding`` (negative values crop)."""
    return tuple(size + lo + hi for size, (lo, hi) in zip(x.shape[2:], padding))


def _gather_flat(x, w, out_shape, padding, rhs_dilation, groups):
    """:func:`_gather_cpu` for unit strides and more output than kernel positions on flat
    rows: ``cols[c, *k, n, j] = x_padded_flat[n, c, j + offset(k)]`` with ``j`` running
    over the output rows at the padded row pitch."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel, spatial = tuple(w.shape[2:]), tuple(out_shape[2:])
    nd = len(kernel)
    kk = math.prod(kernel)
    og = o // groups
    dt = x.dtype
    sizes = _padded_sizes(x, padding)
    pitch = _pitches(sizes)
    plane = math.prod(sizes)
    run = spatial[0] * pitch[0]
    # The last plane's junk columns read past its end: a zeroed tail keeps them in bounds.
    buf = _flat_padded(
        x, padding, sum((k - 1) * r * t for k, r, t in zip(kernel, rhs_dilation, pitch)) + run)
    item = dt.itemsize
    view = np.lib.stride_tricks.as_strided(
        buf, (n, c) + kernel + (run,), (c * plane * item, plane * item)
        + tuple(r * t * item for r, t in zip(rhs_dilation, pitch)) + (item,), writeable=False)
    out = np.empty(out_shape, dtype=dt)
    keep = (slice(None),) * 3 + tuple(slice(0, y) for y in spatial[1:])
    for a, b in _chunks(n, c * kk * run * item, _small_rows(og * cg * kk * run)):
        m = b - a
        src = view[a:b].transpose((1,) + tuple(range(2, 2 + nd)) + (0, 2 + nd))
        cols = _scratch(np, (c,) + kernel + (m, run), dt, "cols")
        np.copyto(cols, src)
        res = _scratch(np, (groups, og, m * run), dt, "res")
        np.matmul(np.reshape(w, (groups, og, cg * kk)), cols.reshape(groups, cg * kk, m * run),
                  out=res)
        res = res.reshape((o, m, spatial[0]) + sizes[1:])[keep]
        np.copyto(out[a:b], res.swapaxes(0, 1))
    return out


def _scatter_flat(x, w, out_shape, padding, rhs_dilation, groups):
    """:func:`_scatter_cpu` for an undilated input on flat rows: ``x`` is laid out at the
    row pitch of the sums (zeros in the extra columns), so kernel position ``k`` adds its
    whole product plane into the sums at one flat offset.

    Where it pays, the last kernel axis is gathered instead (a partial im2col): the product
    runs over (last-axis kernel position, input channel) pairs, against one copy of ``x``
    per last-axis position, each shifted by one kernel step, and only the other kernel
    positions are scatter-added. For a 3x3 kernel that is 3 copies and 3 adds instead of 9
    adds (a copy cost about a quarter of an add on the machines measured), and the product
    is no larger: the input gradient of bench_conv's convolution went from 6.6 to 5.5 ms.
    """
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel, in_sizes, spatial = tuple(w.shape[2:]), tuple(x.shape[2:]), tuple(out_shape[2:])
    nd = len(kernel)
    kk = math.prod(kernel)
    og = o // groups
    dt = x.dtype
    lows = [lo for lo, _ in padding]
    # The sums live at margin + y: input i lands at margin + lo + i - k * r >= 0.
    margin = [max(0, (k - 1) * r - lo) for k, r, lo in zip(kernel, rhs_dilation, lows)]
    sizes = [mg + max(lo + i, y) for mg, lo, i, y in zip(margin, lows, in_sizes, spatial)]
    pitch = _pitches(sizes)
    run = in_sizes[0] * pitch[0]
    # one more row: the extra input columns (zeros) of the last row land past the end
    total = (sizes[0] + 1) * pitch[0]
    last, last_r = kernel[-1], rhs_dilation[-1]
    # Gather when the copies (last * c per column) cost less than the adds they save
    # ((last - 1) * other kernel positions * o per column), an add counting double.
    gathered = last if 1 < last and last * c <= 2 * (last - 1) * (kk // last) * o else 1
    # Each image's columns are followed (and the first preceded) by `lead` zeros: the
    # shifted copies read them where the input ends.
    lead = (gathered - 1) * last_r
    step = run + lead
    # The kernel positions scatter-added. Gathered, each stands for its whole last-axis row
    # and adds at the offset of the row's last position: the product's columns start `lead`
    # before each image's input, as that position's copy is shifted by `lead`.
    scattered = list(itertools.product(*map(range, kernel[:-1]),
                                       range(last) if gathered == 1 else (last - 1,)))
    offsets = [sum((mg + lo - ki * r) * t for mg, lo, ki, r, t
                   in zip(margin, lows, k, rhs_dilation, pitch)) for k in scattered]
    # wk[g, (og, scattered k), (gathered k, cg)]
    wk = np.reshape(np.transpose(np.reshape(w, (groups, og, cg, kk // gathered, gathered)),
                                 (0, 1, 3, 4, 2)), (groups, og * len(scattered), gathered * cg))
    out = np.empty(out_shape, dtype=dt)
    keep = (slice(None), slice(None)) + tuple(slice(mg, mg + y) for mg, y in zip(margin, spatial))
    for a, b in _chunks(n, o * kk * step * dt.itemsize):
        m = b - a
        xt = _scratch(np, (c, m * step + lead), dt, "xt")
        xt[:, m * step:] = 0
        images = xt[:, :m * step].reshape(c, m, step)
        images[:, :, :lead] = 0
        body = images[:, :, lead:].reshape((c, m, in_sizes[0]) + tuple(sizes[1:]))
        for i in range(1, nd):
            body[(slice(None),) * (2 + i) + (slice(in_sizes[i], None),)] = 0
        np.copyto(body[(slice(None),) * 3 + tuple(slice(0, i) for i in in_sizes[1:])],
                  x[a:b].swapaxes(0, 1))
        if gathered == 1:
            cols = xt.reshape(groups, cg, m * step)
        else:
            by_group = xt.reshape(groups, cg, m * step + lead)
            cols = _scratch(np, (groups, gathered, cg, m * step), dt, "cols")
            for j in range(gathered):
                cols[:, j] = by_group[:, :, j * last_r:j * last_r + m * step]
            cols = cols.reshape(groups, gathered * cg, m * step)
        prod = _scratch(np, (groups, wk.shape[1], m * step), dt, "res")
        np.matmul(wk, cols, out=prod)
        prod = prod.reshape(o, len(scattered), m, step)
        acc = _scratch(np, (o, m, total), dt, "acc")
        acc[...] = 0
        for k, at in enumerate(offsets):
            acc[:, :, at:at + step] += prod[:, k]
        sums = acc[:, :, :math.prod(sizes)].reshape((o, m) + tuple(sizes))[keep]
        np.copyto(out[a:b], sums.swapaxes(0, 1))
    return out


def _conv_cpu(xp, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
              feature_group_count):
    """The NumPy implementation: :func:`_conv_impl`'s choices, CPU-specific layouts."""
    out_shape = (lhs.shape[0], rhs.shape[0]) + out_spatial(
        lhs.shape[2:], rhs.shape[2:], window_strides, padding, lhs_dilation, rhs_dilation)
    if lhs.size == 0 or rhs.size == 0 or math.prod(out_shape) == 0:
        return np.zeros(out_shape, dtype=lhs.dtype)
    dilated = any(d > 1 for d in lhs_dilation)
    kernel, spatial, in_sizes = rhs.shape[2:], out_shape[2:], lhs.shape[2:]
    if _scatters(lhs, rhs, out_shape, window_strides, dilated):
        if not dilated and _flat_scatter_pays(math.prod(
                max(lo + i, y) + max(0, (k - 1) * r - lo) for (lo, _), i, y, k, r
                in zip(padding[1:], in_sizes[1:], spatial[1:], kernel[1:], rhs_dilation[1:])
        ) / math.prod(in_sizes[1:]), rhs.shape[1]):
            return _scatter_flat(lhs, rhs, out_shape, padding, rhs_dilation,
                                 feature_group_count)
        return _scatter_cpu(lhs, rhs, out_shape, padding, lhs_dilation, rhs_dilation,
                            feature_group_count)
    if dilated:
        lhs = _lhs_dilated(np, lhs, lhs_dilation)
        in_sizes = lhs.shape[2:]
    if all(s == 1 for s in window_strides) and math.prod(kernel) <= math.prod(spatial) and \
            math.prod(i + lo + hi for i, (lo, hi) in zip(in_sizes[1:], padding[1:])) \
            <= _FLAT_JUNK * math.prod(spatial[1:]):
        return _gather_flat(lhs, rhs, out_shape, padding, rhs_dilation, feature_group_count)
    return _gather_cpu(_padded(np, lhs, padding), rhs, out_shape, window_strides,
                       rhs_dilation, feature_group_count)


conv_general_dilated_p.def_impl(_conv_impl)
conv_general_dilated_p.def_impl(_conv_cpu, backend="cpu")
# On CUDA, im2col/col2im kernels and cuBLAS GEMMs (functx/primitives/cuda/conv.py; the
# generic rule where those plans do not apply).
conv_general_dilated_p.def_impl(functools.partial(_cuda.conv_general_dilated,
                                                  fallback=_conv_impl), backend="cuda")


# -- reverse mode ----------------------------------------------------------------------------

def _zeros(like: Any, shape: Sequence[int]) -> Any:
    return _shape.constant(like, 0, tuple(shape), like.dtype)


def _swap01(x: Any) -> Any:
    return _shape.transpose(x, (1, 0) + tuple(range(2, ndim_of(x))))


@conv_general_dilated_p.def_vjp(save_inputs=(0, 1), selective=True)
def _conv_vjp(ct, ins, out, *, window_strides, padding, lhs_dilation, rhs_dilation,
              feature_group_count, needs=(True, True)):
    """Both cotangents are convolutions again (so the rule differentiates to any order).

    The lhs cotangent convolves ``ct`` (dilated by the strides) with the flipped kernel whose
    in/out channels are swapped within each group; strides become ``lhs_dilation`` and vice
    versa. Its high padding makes the result exactly as long as the input: where the
    forward's windows never reached the last input rows, that padding is negative and those
    rows get zeros. The rhs cotangent convolves the input (channels as the batch, batch
    rows grouped as features) with ``ct`` as the kernel, strides and rhs dilation swapping
    roles; its result is exactly the kernel's size.
    """
    lhs, rhs = ins
    g = feature_group_count
    n, c = lhs.shape[:2]
    o, cg = rhs.shape[:2]
    og = o // g
    kernel, in_sizes, out_sizes = rhs.shape[2:], lhs.shape[2:], ct.shape[2:]
    nd = len(kernel)
    spatial_axes = tuple(range(2, 2 + nd))
    kd = [dilated_size(k, r) for k, r in zip(kernel, rhs_dilation)]
    ld = [dilated_size(i, d) for i, d in zip(in_sizes, lhs_dilation)]
    od = [dilated_size(y, s) for y, s in zip(out_sizes, window_strides)]
    empty = math.prod(ct.shape) == 0 or math.prod(lhs.shape) == 0 or math.prod(rhs.shape) == 0
    ct_lhs = ct_rhs = None
    if needs[0]:
        if empty:
            ct_lhs = _zeros(ct, lhs.shape)
        else:
            if g == 1:
                w = _swap01(rhs)
            else:
                w = _shape.reshape(rhs, (g, og, cg) + tuple(kernel))
                w = _shape.transpose(w, (0, 2, 1) + tuple(range(3, 3 + nd)))
                w = _shape.reshape(w, (c, og) + tuple(kernel))
            w = _shape.rev(w, spatial_axes)
            before = [k - 1 - lo for k, (lo, _) in zip(kd, padding)]
            after = [l + k - 1 - y - b for l, k, y, b in zip(ld, kd, od, before)]
            ct_lhs = bind(conv_general_dilated_p, ct, w, window_strides=tuple(lhs_dilation),
                          padding=tuple(zip(before, after)), lhs_dilation=tuple(window_strides),
                          rhs_dilation=tuple(rhs_dilation), feature_group_count=g)
    if needs[1]:
        if empty:
            ct_rhs = _zeros(ct, rhs.shape)
        else:
            if g == 1:
                lhs_t, ct_t = _swap01(lhs), _swap01(ct)
            else:  # lhs_t[c, (g, n)] = lhs[n, (g, c)]; ct_t[(g, o), n] = ct[n, (g, o)]
                lhs_t = _shape.reshape(lhs, (n, g, cg) + tuple(in_sizes))
                lhs_t = _shape.transpose(lhs_t, (2, 1, 0) + tuple(range(3, 3 + nd)))
                lhs_t = _shape.reshape(lhs_t, (cg, g * n) + tuple(in_sizes))
                ct_t = _shape.reshape(ct, (n, g, og) + tuple(out_sizes))
                ct_t = _shape.transpose(ct_t, (1, 2, 0) + tuple(range(3, 3 + nd)))
                ct_t = _shape.reshape(ct_t, (o, n) + tuple(out_sizes))
            pads = tuple((lo, y - l + k - lo - 1)
                         for (lo, _), y, l, k in zip(padding, od, ld, kd))
            res = bind(conv_general_dilated_p, lhs_t, ct_t, window_strides=tuple(rhs_dilation),
                       padding=pads, lhs_dilation=tuple(lhs_dilation),
                       rhs_dilation=tuple(window_strides), feature_group_count=g)
            ct_rhs = _swap01(res)  # [cg, o, *k] -> [o, cg, *k]
    return ct_lhs, ct_rhs


# -- forward mode ----------------------------------------------------------------------------

@conv_general_dilated_p.def_jvp
def _conv_jvp(tangents, primals, out, **params):
    """Bilinear: ``conv(t_lhs, rhs) + conv(lhs, t_rhs)``."""
    (t_lhs, t_rhs), (lhs, rhs) = tangents, primals
    terms = []
    if t_lhs is not None:
        terms.append(bind(conv_general_dilated_p, t_lhs, rhs, **params))
    if t_rhs is not None:
        terms.append(bind(conv_general_dilated_p, lhs, t_rhs, **params))
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else _ew.add(terms[0], terms[1])


# -- batching --------------------------------------------------------------------------------

@conv_general_dilated_p.def_batch
def _conv_batch(args, dims, *, feature_group_count, **params):
    """Fold the vmapped axis into the convolution (as JAX does), never a loop.

    * lhs only: into the batch axis N (``[B, N, ...] -> [B*N, ...]``);
    * rhs only: into the output channels, ordered (group, B, O/groups) so each group's
      outputs still read that group's inputs;
    * both: into the feature groups (``B * groups`` groups): example b's channels only
      meet example b's weights.
    """
    lhs, rhs = args
    ld, rd = dims
    g = feature_group_count
    if rd is None:
        x = moveaxis(lhs, ld, 0)
        b, n = x.shape[:2]
        out = bind(conv_general_dilated_p, _shape.reshape(x, (b * n,) + tuple(x.shape[2:])),
                   rhs, feature_group_count=g, **params)
        return _shape.reshape(out, (b, n) + tuple(out.shape[1:])), 0
    w = moveaxis(rhs, rd, 0)
    b, o, cg = w.shape[:3]
    kernel = tuple(w.shape[3:])
    nd = len(kernel)
    if ld is None:
        n = lhs.shape[0]
        if g > 1:  # [b, g, og, ...] -> [g, b, og, ...]
            w = _shape.reshape(w, (b, g, o // g, cg) + kernel)
            w = _shape.transpose(w, (1, 0) + tuple(range(2, 4 + nd)))
        out = bind(conv_general_dilated_p, lhs, _shape.reshape(w, (b * o, cg) + kernel),
                   feature_group_count=g, **params)
        spatial = tuple(out.shape[2:])
        if g > 1:  # [n, g, b, og, ...] -> [n, b, g, og, ...]
            out = _shape.reshape(out, (n, g, b, o // g) + spatial)
            out = _shape.transpose(out, (0, 2, 1) + tuple(range(3, 4 + nd)))
        return _shape.reshape(out, (n, b, o) + spatial), 1
    x = moveaxis(lhs, ld, 1)  # [n, b, c, ...] -> [n, b*c, ...]
    n, _, c = x.shape[:3]
    x = _shape.reshape(x, (n, b * c) + tuple(x.shape[3:]))
    out = bind(conv_general_dilated_p, x, _shape.reshape(w, (b * o, cg) + kernel),
               feature_group_count=b * g, **params)
    return _shape.reshape(out, (n, b, o) + tuple(out.shape[2:])), 1


# -- the wrapper -----------------------------------------------------------------------------

def _tuple(v: Any, nd: int) -> tuple[int, ...]:
    return (1,) * nd if v is None else tuple(int(s) for s in v)


def _string_padding(mode: str, in_sizes: Sequence[int], kernel: Sequence[int],
                    strides: Sequence[int], lhs_dilation: Sequence[int],
                    rhs_dilation: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """JAX's 'VALID' (none) and 'SAME' (output size ceil(in / stride), extra at the end)."""
    mode_u = mode.upper()
    if mode_u == "VALID":
        return tuple((0, 0) for _ in in_sizes)
    if mode_u != "SAME":
        raise ShapeError(f"conv_general_dilated: padding must be 'SAME', 'VALID' or a sequence "
                         f"of (low, high) pairs, but got {mode!r}.")
    pads = []
    for n, k, s, ld, rd in zip(in_sizes, kernel, strides, lhs_dilation, rhs_dilation):
        n = dilated_size(n, ld)
        total = max((-(-n // s) - 1) * s + dilated_size(k, rd) - n, 0)
        pads.append((total // 2, total - total // 2))
    return tuple(pads)


@functools.lru_cache(maxsize=1024)
def _checked(lhs: AbstractArray, rhs: AbstractArray, params: tuple) -> None:
    _conv_aval(lhs, rhs, **dict(params))


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int] | None = None,
                         padding: str | Sequence[tuple[int, int]] = "VALID",
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         feature_group_count: int = 1) -> Any:
    """The N-d convolution (cross-correlation) of ``lhs`` with the kernel ``rhs``.

    Args:
        lhs: ``[N, C, *spatial]``, a real floating-point array.
        rhs: ``[O, C // feature_group_count, *kernel]`` of ``lhs``'s dtype.
        window_strides: one positive stride per spatial axis (default all 1).
        padding: ``(low, high)`` per spatial axis (negative values crop), or ``'VALID'``
            (none) or ``'SAME'`` (output size ``ceil(in / stride)``).
        lhs_dilation: dilation of the input, one per spatial axis (default 1; a dilation
            ``d`` puts ``d - 1`` zeros between neighbours: a transposed convolution).
        rhs_dilation: dilation of the kernel (default 1; atrous convolution).
        feature_group_count: the number of channel groups; output channel ``o`` reads the
            input channels of group ``o // (O // groups)``.

    Returns:
        ``[N, O, *out_spatial]`` with ``out = (dilated_in + low + high - dilated_kernel) //
        stride + 1`` on each spatial axis.

    Raises:
        ShapeError: ranks, channel counts, parameter lengths or values do not fit.
        DTypeError: the operands are not of one real floating-point dtype.

    Example:
        >>> x, w = np.ones((1, 1, 5)), np.ones((1, 1, 3))
        >>> conv_general_dilated(x, w, (1,), ((1, 1),))
        array([[[2., 3., 3., 3., 2.]]])
    """
    nd = ndim_of(lhs) - 2
    strides = _tuple(window_strides, nd)
    lhs_dil = _tuple(lhs_dilation, nd)
    rhs_dil = _tuple(rhs_dilation, nd)
    if isinstance(padding, str):
        padding = _string_padding(padding, tuple(lhs.shape[2:]), tuple(rhs.shape[2:]), strides,
                                  lhs_dil, rhs_dil)
    pads = tuple(tuple(int(v) for v in pair) for pair in padding)
    params = dict(window_strides=strides, padding=pads, lhs_dilation=lhs_dil,
                  rhs_dilation=rhs_dil, feature_group_count=int(feature_group_count))
    _checked(abstractify(lhs), abstractify(rhs), tuple(params.items()))
    return bind(conv_general_dilated_p, lhs, rhs, **params)
