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
interface. The CPU implementation (``conv_cpu``, in ``functx/primitives/_conv_cpu.py`` with
the buffer helpers both share) makes the same choice with CPU-specific layouts: the batch
joins the matrix product's columns (one large product rather than one per image), the
windows are copied from one strided view, unit-stride convolutions work on "flat" rows
(long contiguous runs), and temporaries live in per-thread scratch buffers. The copies and
scatter-adds run on the calling thread; only the products use the BLAS library's threads
(see the note above ``_gather_cpu`` there). Where Numba is installed, the CPU's registered
implementation is ``conv_numba`` (``functx/primitives/_conv_numba.py``): direct,
multi-threaded kernels for the convolutions whose matrix product would have a tiny
dimension (few channels, as in LeNet), ``conv_cpu`` for the rest.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Any, Sequence

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray, abstractify
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives._batching import moveaxis
from functx.primitives._conv_numba import conv_numba
from functx.primitives._conv_cpu import (
    chunks,
    lhs_dilated,
    padded,
    scatter_plans,
    scatters,
    scratch,
)
from functx.primitives._util import dilated_size, ndim_of, out_spatial, same_dtypes
from functx.primitives.cuda import conv as _cuda
from functx.registry import Primitive
from functx.tracing import bind


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


# -- the generic implementation --------------------------------------------------------------
# Any array module (CuPy's where the CUDA plans do not apply); the CPU's own is conv_numba.

def _gather_conv(xp, x, w, out_shape, strides, rhs_dilation, groups):
    """The convolution of an already padded (and dilated) ``x``: im2col, then one matmul."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel, spatial = w.shape[2:], out_shape[2:]
    kk, p = math.prod(kernel), math.prod(spatial)
    og = o // groups
    out = xp.empty(out_shape, dtype=x.dtype)
    by_kernel = kk <= p  # loop over the shorter of kernel positions and output positions
    for a, b in chunks(n, c * kk * p * x.dtype.itemsize):
        xs = x[a:b]
        m = b - a
        if by_kernel:  # cols[n, c, *k, *y] = x[n, c, y * s + k * r]
            cols = scratch(xp, (m, c) + kernel + spatial, x.dtype, "cols")
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
            cols = scratch(xp, (m,) + spatial + (c,) + kernel, x.dtype, "cols")
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
    plans = scatter_plans(kernel, in_sizes, spatial, padding, lhs_dilation, rhs_dilation)
    for a, b in chunks(n, o * kk * pi * x.dtype.itemsize):
        m = b - a
        prod = scratch(xp, (m, groups, og * kk, pi), x.dtype, "cols")
        xp.matmul(wk, xp.reshape(x[a:b], (m, groups, cg, pi)), out=prod)
        prod = xp.reshape(prod, (m, o) + tuple(kernel) + tuple(in_sizes))
        for k, src, dst in plans:
            out[(slice(a, b), slice(None)) + dst] += prod[(slice(None), slice(None)) + k + src]
    return out

def _conv_impl(xp, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               feature_group_count):
    out_shape = (lhs.shape[0], rhs.shape[0]) + out_spatial(
        lhs.shape[2:], rhs.shape[2:], window_strides, padding, lhs_dilation, rhs_dilation)
    if lhs.size == 0 or rhs.size == 0 or math.prod(out_shape) == 0:
        return xp.zeros(out_shape, dtype=lhs.dtype)
    dilated = any(d > 1 for d in lhs_dilation)
    if scatters(lhs, rhs, out_shape, window_strides, dilated):
        return _scatter_conv(xp, lhs, rhs, out_shape, padding, lhs_dilation, rhs_dilation,
                             feature_group_count)
    if dilated:
        lhs = lhs_dilated(xp, lhs, lhs_dilation)
    return _gather_conv(xp, padded(xp, lhs, padding), rhs, out_shape, window_strides,
                        rhs_dilation, feature_group_count)


conv_general_dilated_p.def_impl(_conv_impl)
# On the CPU, Numba's direct kernels where they pay (functx/primitives/_conv_numba.py), else
# (and without Numba) the NumPy im2col/col2im of conv_cpu.
conv_general_dilated_p.def_impl(conv_numba, backend="cpu")
# On CUDA, im2col/col2im kernels and cuBLAS GEMMs (functx/primitives/cuda/conv.py; the generic rule
# where those plans do not apply).
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
