"""The CPU implementation of conv_general_dilated (:func:`conv_cpu`), and the sizing,
chunking and scratch-buffer helpers it shares with the generic rule in
``functx.primitives.conv`` (which registers both; see its docstring for the algorithms).
"""
from __future__ import annotations

import itertools
import math
import threading
from typing import Any, Sequence

import numpy as np

from functx.backends._blas import run_small
from functx.primitives._util import dilated_size, out_spatial

# -- sizes -----------------------------------------------------------------------------------

# Largest column buffer one matrix product works on (bytes); bigger batches go in chunks.
_COLS_BYTES = 1 << 27


# -- buffers and chunks (the generic rule uses them too) -------------------------------------

_SCRATCH = threading.local()
_SCRATCH_MAX = 1 << 26  # bytes: larger temporaries are allocated afresh


def scratch(xp: Any, shape: Sequence[int], dtype: Any, slot: str) -> Any:
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


def padded(xp: Any, x: Any, padding: Sequence[tuple[int, int]]) -> Any:
    """``x`` zero-padded on its spatial axes (negative padding crops), in scratch memory."""
    if all(lo == 0 and hi == 0 for lo, hi in padding):
        return x
    crop = tuple(slice(max(-lo, 0), n - max(-hi, 0)) for n, (lo, hi) in zip(x.shape[2:], padding))
    x = x[(slice(None), slice(None)) + crop]
    if all(lo <= 0 and hi <= 0 for lo, hi in padding):
        return x
    shape = x.shape[:2] + tuple(n + max(lo, 0) + max(hi, 0)
                                for n, (lo, hi) in zip(x.shape[2:], padding))
    out = scratch(xp, shape, x.dtype, "padded")
    out[...] = 0
    out[(slice(None), slice(None)) + tuple(slice(max(lo, 0), max(lo, 0) + n) for n, (lo, _)
                                           in zip(x.shape[2:], padding))] = x
    return out


def lhs_dilated(xp: Any, x: Any, lhs_dilation: Sequence[int]) -> Any:
    """``x`` with ``d - 1`` zeros between neighbours on its spatial axes."""
    shape = x.shape[:2] + tuple(dilated_size(n, d) for n, d in zip(x.shape[2:], lhs_dilation))
    out = xp.zeros(shape, dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dilation)] = x
    return out


def chunks(n: int, row_bytes: int, most: int | None = None) -> list[tuple[int, int]]:
    """Batch ranges whose column buffers stay under ``_COLS_BYTES`` (at least one row each,
    at most ``most`` rows)."""
    step = max(1, min(_COLS_BYTES // max(row_bytes, 1), most or n))
    return [(i, min(i + step, n)) for i in range(0, n, step)]


def scatter_plans(kernel, in_sizes, spatial, padding, lhs_dilation, rhs_dilation) -> list:
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



def scatters(lhs, rhs, out_shape, window_strides, dilated: bool) -> bool:
    """Whether to multiply first and scatter-add (col2im) rather than gather (im2col).

    Only with unit strides and a kernel smaller than the output: when it never multiplies
    the dilation's zeros, or when its products (output channels x input positions) are
    fewer than the gathered columns (input channels x output positions).
    """
    return all(s == 1 for s in window_strides) and math.prod(rhs.shape[2:]) <= math.prod(
        out_shape[2:]) and (dilated or rhs.shape[0] * math.prod(lhs.shape[2:])
                            < lhs.shape[1] * math.prod(out_shape[2:]))



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
        for a, b in chunks(n, c * kk * p * dt.itemsize, _small_rows(og * cg * kk * p)):
            m = b - a
            src = view[a:b].transpose((1,) + ks + (0,) + ys)
            cols = scratch(np, (c,) + kernel + (m,) + spatial, dt, "cols")
            np.copyto(cols, src)
            res = scratch(np, (groups, og, m * p), dt, "res")
            run_small(o * cg * kk * m * p, np.matmul, np.reshape(w, (groups, og, cg * kk)),
                      cols.reshape(groups, cg * kk, m * p), out=res)
            np.copyto(out[a:b].reshape(m, o, p), res.reshape(o, m, p).transpose(1, 0, 2))
        return out
    # cols[n, *y, c, *k]: batch and output positions are the rows (the weight cotangent's
    # shape: few output positions, many kernel positions)
    for a, b in chunks(n, c * kk * p * dt.itemsize):
        m = b - a
        src = view[a:b].transpose((0,) + ys + (1,) + ks)
        cols = scratch(np, (m,) + spatial + (c,) + kernel, dt, "cols")
        np.copyto(cols, src)
        if groups == 1:
            res = scratch(np, (m * p, o), dt, "res")
            run_small(m * p * c * kk * o, np.matmul, cols.reshape(m * p, c * kk),
                      np.reshape(w, (o, c * kk)).T, out=res)
            np.copyto(out[a:b].reshape(m, o, p), res.reshape(m, p, o).transpose(0, 2, 1))
        else:
            res = scratch(np, (groups, m * p, og), dt, "res")
            run_small(m * p * cg * kk * o, np.matmul,
                      cols.reshape(m * p, groups, cg * kk).transpose(1, 0, 2),
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
    plans = scatter_plans(kernel, in_sizes, spatial, padding, lhs_dilation, rhs_dilation)
    out = np.empty(out_shape, dtype=dt)
    for a, b in chunks(n, o * kk * pi * dt.itemsize):
        m = b - a
        if m == 1:
            xt = x[a]
        else:
            xt = scratch(np, (c, m) + in_sizes, dt, "xt")
            np.copyto(xt, x[a:b].swapaxes(0, 1))
        prod = scratch(np, (groups, og * kk, m * pi), dt, "cols")
        run_small(o * kk * cg * m * pi, np.matmul, wk, np.reshape(xt, (groups, cg, m * pi)),
                  out=prod)
        prod = prod.reshape((o,) + kernel + (m,) + in_sizes)
        acc = scratch(np, (o, m) + spatial, dt, "acc")
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
    buf = scratch(np, (n * c * plane + max(reach - plane, 0),), x.dtype, "padded")
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
    for a, b in chunks(n, c * kk * run * item, _small_rows(og * cg * kk * run)):
        m = b - a
        src = view[a:b].transpose((1,) + tuple(range(2, 2 + nd)) + (0, 2 + nd))
        cols = scratch(np, (c,) + kernel + (m, run), dt, "cols")
        np.copyto(cols, src)
        res = scratch(np, (groups, og, m * run), dt, "res")
        run_small(o * cg * kk * m * run, np.matmul, np.reshape(w, (groups, og, cg * kk)),
                  cols.reshape(groups, cg * kk, m * run), out=res)
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
    for a, b in chunks(n, o * kk * step * dt.itemsize):
        m = b - a
        xt = scratch(np, (c, m * step + lead), dt, "xt")
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
            cols = scratch(np, (groups, gathered, cg, m * step), dt, "cols")
            for j in range(gathered):
                cols[:, j] = by_group[:, :, j * last_r:j * last_r + m * step]
            cols = cols.reshape(groups, gathered * cg, m * step)
        prod = scratch(np, (groups, wk.shape[1], m * step), dt, "res")
        run_small(wk.shape[0] * wk.shape[1] * wk.shape[2] * m * step, np.matmul, wk, cols,
                  out=prod)
        prod = prod.reshape(o, len(scattered), m, step)
        acc = scratch(np, (o, m, total), dt, "acc")
        acc[...] = 0
        for k, at in enumerate(offsets):
            acc[:, :, at:at + step] += prod[:, k]
        sums = acc[:, :, :math.prod(sizes)].reshape((o, m) + tuple(sizes))[keep]
        np.copyto(out[a:b], sums.swapaxes(0, 1))
    return out


def conv_cpu(xp, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
              feature_group_count):
    """The NumPy implementation: :func:`_conv_impl`'s choices, CPU-specific layouts."""
    out_shape = (lhs.shape[0], rhs.shape[0]) + out_spatial(
        lhs.shape[2:], rhs.shape[2:], window_strides, padding, lhs_dilation, rhs_dilation)
    if lhs.size == 0 or rhs.size == 0 or math.prod(out_shape) == 0:
        return np.zeros(out_shape, dtype=lhs.dtype)
    dilated = any(d > 1 for d in lhs_dilation)
    kernel, spatial, in_sizes = rhs.shape[2:], out_shape[2:], lhs.shape[2:]
    if scatters(lhs, rhs, out_shape, window_strides, dilated):
        if not dilated and _flat_scatter_pays(math.prod(
                max(lo + i, y) + max(0, (k - 1) * r - lo) for (lo, _), i, y, k, r
                in zip(padding[1:], in_sizes[1:], spatial[1:], kernel[1:], rhs_dilation[1:])
        ) / math.prod(in_sizes[1:]), rhs.shape[1]):
            return _scatter_flat(lhs, rhs, out_shape, padding, rhs_dilation,
                                 feature_group_count)
        return _scatter_cpu(lhs, rhs, out_shape, padding, lhs_dilation, rhs_dilation,
                            feature_group_count)
    if dilated:
        lhs = lhs_dilated(np, lhs, lhs_dilation)
        in_sizes = lhs.shape[2:]
    if all(s == 1 for s in window_strides) and math.prod(kernel) <= math.prod(spatial) and \
            math.prod(i + lo + hi for i, (lo, hi) in zip(in_sizes[1:], padding[1:])) \
            <= _FLAT_JUNK * math.prod(spatial[1:]):
        return _gather_flat(lhs, rhs, out_shape, padding, rhs_dilation, feature_group_count)
    return _gather_cpu(padded(np, lhs, padding), rhs, out_shape, window_strides,
                       rhs_dilation, feature_group_count)
