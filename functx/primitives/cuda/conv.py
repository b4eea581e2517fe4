"""CUDA implementation of ``conv_general_dilated`` (functx/primitives/conv.py): im2col/col2im
kernels and cuBLAS GEMMs.

The generic rule (functx/primitives/conv.py) builds its column buffers with one strided
copy per kernel (or output) position and adds its products back with one strided
read-modify-write per kernel position; on a GPU those passes, the padded copy and the
transposed copies of the weight gradient's operands cost more than the matrix products.
Here each plan takes one kernel and one batched GEMM per chunk of the batch:

* **gather** (as many kernel positions as output positions, or fewer: the forward pass):
  an im2col kernel writes ``cols[n, c, k, y] = lhs[n, c, y * s + k * r - lo]`` (0 in the
  padding and in the holes of an ``lhs_dilation``), reading ``lhs`` through its own strides
  (no padded or dilated copy); then ``out[n] (O, P) = w (O, C*K) @ cols[n] (C*K, P)``
  straight into the output.
* **scatter** (unit strides, chosen as the generic rule chooses it: the input gradient):
  the GEMM first, ``prod[n] (O*K, Pin) = w (O*K, C) @ lhs[n] (C, Pin)``, then a col2im
  kernel that computes every output element once as the sum, over the kernel positions
  reaching it, of the products (no atomics, no read-modify-write passes, a fixed order).
* **weight** (more kernel positions than output positions: the weight gradient, whose
  "kernel" is the output cotangent): ``cols[c, n, y, k]`` by the same im2col kernel, then
  one GEMM batched over the input channels, ``part[c] (O, N*P) = rhs[:, c] (O, K) @
  cols[c]^T`` (``rhs`` read through its strides: the transposed cotangent the VJP passes
  needs no copy), and the sum over ``c`` as a GEMM with a vector of ones. The result is
  returned as a transposed view of the ``(O, N, *out)`` sums, which the VJP's own
  transposition turns back into a contiguous array.

bfloat16 runs these plans on float32 copies of the operands and rounds the result once
(the CPU computes it in float32 too). Other cases (feature groups, float16, more than 3
spatial axes, sizes past 32-bit index arithmetic) run the generic implementation. Kernels index with 32-bit integers within a
row and 64-bit offsets; spatial axes are padded to three with leading axes of size 1.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import ml_dtypes
import numpy as np

from functx.primitives._util import out_spatial
from functx.primitives.cuda._kernels import CTYPE, raw_function
from functx.primitives.cuda.linalg import gemm_strided_batched as gemm

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

# Largest column (or product) buffer of one chunk, in bytes.
_CHUNK_BYTES = 1 << 28
_INT_MAX = 2**31 - 1

_SOURCE = r"""
typedef CTYPE T;

// The input coordinate of dilated position q along one axis: false in a hole of the lhs
// dilation or outside [0, n).
__device__ __forceinline__ bool functx_coord(int q, int dil, int n, int* i) {
    if (q < 0) return false;
    if (dil > 1) {
        if (q % dil) return false;
        q /= dil;
    }
    if (q >= n) return false;
    *i = q;
    return true;
}

// One block per row (a, b, o) of cols, rows in C order; the row holds, for every inner
// position j = (j0, j1, j2), x[a * sa + b * sb + i . s] with input coordinates i from the
// dilated positions o * mo + j * mj - lo (0 where there is no input element).
extern "C" __global__ void functx_im2col(
        const T* x, T* cols, long long rows, int nb, long long sa, long long sb,
        int o0n, int o1n, int o2n, int j0n, int j1n, int j2n,
        int mo0, int mo1, int mo2, int mj0, int mj1, int mj2,
        int lo0, int lo1, int lo2, int d0, int d1, int d2, int n0, int n1, int n2,
        long long s0, long long s1, long long s2) {
    const int on = o0n * o1n * o2n;
    const long long jn = (long long)j0n * j1n * j2n;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const int o = (int)(row % on);
        const long long ab = row / on;
        const long long b = ab % nb, a = ab / nb;
        const int o2 = o % o2n, o1 = (o / o2n) % o1n, o0 = o / (o2n * o1n);
        const T* xr = x + a * sa + b * sb;
        T* out = cols + row * jn;
        const int q0 = o0 * mo0 - lo0, q1 = o1 * mo1 - lo1, q2 = o2 * mo2 - lo2;
        for (int r = threadIdx.y; r < j0n * j1n; r += blockDim.y) {
            const int j0 = r / j1n, j1 = r - j0 * j1n;
            int i0 = 0, i1 = 0;
            const bool ok = functx_coord(q0 + j0 * mj0, d0, n0, &i0)
                && functx_coord(q1 + j1 * mj1, d1, n1, &i1);
            const T* xrow = xr + i0 * s0 + i1 * s1;
            T* orow = out + (long long)r * j2n;
            for (int j2 = threadIdx.x; j2 < j2n; j2 += blockDim.x) {
                int i2 = 0;
                orow[j2] = (ok && functx_coord(q2 + j2 * mj2, d2, n2, &i2)) ? xrow[i2 * s2]
                                                                            : (T)0;
            }
        }
    }
}

// One block per row (n, o) of out: out[row, y] = sum over kernel positions k of
// prod[row, k, i], i the input position that k carries to y (y = lo + i * d - k * r per
// axis), in a fixed order.
extern "C" __global__ void functx_col2im(
        const T* prod, T* out, long long rows, int y0n, int y1n, int y2n,
        int k0n, int k1n, int k2n, int r0, int r1, int r2, int lo0, int lo1, int lo2,
        int d0, int d1, int d2, int n0, int n1, int n2) {
    const long long pin = (long long)n0 * n1 * n2;
    const long long kn = (long long)k0n * k1n * k2n;
    const long long yn = (long long)y0n * y1n * y2n;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* pr = prod + row * kn * pin;
        T* orow = out + row * yn;
        for (int r = threadIdx.y; r < y0n * y1n; r += blockDim.y) {
            const int y0 = r / y1n, y1 = r - y0 * y1n;
            for (int y2 = threadIdx.x; y2 < y2n; y2 += blockDim.x) {
                T acc = 0;
                for (int k0 = 0; k0 < k0n; ++k0) {
                    int i0;
                    if (!functx_coord(y0 + k0 * r0 - lo0, d0, n0, &i0)) continue;
                    for (int k1 = 0; k1 < k1n; ++k1) {
                        int i1;
                        if (!functx_coord(y1 + k1 * r1 - lo1, d1, n1, &i1)) continue;
                        for (int k2 = 0; k2 < k2n; ++k2) {
                            int i2;
                            if (!functx_coord(y2 + k2 * r2 - lo2, d2, n2, &i2)) continue;
                            acc += pr[((long long)(k0 * k1n + k1) * k2n + k2) * pin
                                      + ((long long)i0 * n1 + i1) * n2 + i2];
                        }
                    }
                }
                orow[(long long)r * y2n + y2] = acc;
            }
        }
    }
}
"""


def _function(xp: Any, name: str, dtype: Any) -> Any:
    return raw_function(xp, _SOURCE, name, np.dtype(dtype))


def _block(inner: int) -> tuple[int, int]:
    """A 2-D block: x along the innermost axis of a row (a multiple of 32), y over the rest."""
    bx = min(256, max(32, -(-inner // 32) * 32))
    return bx, max(1, 256 // bx)


def _grid(rows: int) -> int:
    return min(rows, _INT_MAX)


def _three(v: Any, fill: int) -> list[int]:
    """A per-spatial-axis tuple padded in front to three axes."""
    v = [int(a) for a in v]
    return [fill] * (3 - len(v)) + v


def _chunks(n: int, row_bytes: int) -> list[tuple[int, int]]:
    step = max(1, _CHUNK_BYTES // max(row_bytes, 1))
    return [(i, min(i + step, n)) for i in range(0, n, step)]


def _im2col(xp: Any, x: Any, cols: Any, a_axis: int, outer: tuple, inner: tuple,
            geometry: dict) -> None:
    """Fill ``cols`` (rows (a, b, outer position), columns: inner positions) from ``x``
    (``[N, C, *in]``); ``a_axis`` is the axis of ``x`` (0 or 1) that ``a`` runs over."""
    isz = x.itemsize
    sa, sb = x.strides[a_axis] // isz, x.strides[1 - a_axis] // isz
    spatial = [s // isz for s in x.strides[2:]]
    s = [0] * (3 - len(spatial)) + spatial
    (o_sizes, o_mult), (j_sizes, j_mult) = outer, inner
    rows = x.shape[a_axis] * x.shape[1 - a_axis] * math.prod(o_sizes)
    bx, by = _block(j_sizes[-1])
    args = ([x, cols, np.int64(rows), np.int32(x.shape[1 - a_axis]), np.int64(sa),
             np.int64(sb)]
            + [np.int32(v) for v in _three(o_sizes, 1) + _three(j_sizes, 1)
               + _three(o_mult, 0) + _three(j_mult, 0) + _three(geometry["lo"], 0)
               + _three(geometry["dil"], 1) + _three(x.shape[2:], 1)]
            + [np.int64(v) for v in s])
    _function(xp, "functx_im2col", x.dtype)((_grid(rows),), (bx, by), tuple(args))


def conv_general_dilated(xp: Any, lhs: Any, rhs: Any, *, window_strides: tuple,
                         padding: tuple, lhs_dilation: tuple, rhs_dilation: tuple,
                         feature_group_count: int, fallback: Callable) -> Any:
    """The convolution on CUDA (see the module docstring); ``fallback`` is the generic
    implementation, used where these plans do not apply."""
    params = dict(window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, feature_group_count=feature_group_count)
    dt = np.dtype(lhs.dtype)
    if dt == _BFLOAT16:  # float32 inside, rounded once
        return conv_general_dilated(xp, lhs.astype(np.float32), rhs.astype(np.float32),
                                    fallback=fallback, **params).astype(dt)
    nd = lhs.ndim - 2
    n, c = lhs.shape[:2]
    o = rhs.shape[0]
    kernel, in_sizes = tuple(rhs.shape[2:]), tuple(lhs.shape[2:])
    spatial = out_spatial(in_sizes, kernel, window_strides, padding, lhs_dilation,
                          rhs_dilation)
    out_shape = (n, o) + spatial
    kk, p, pin = math.prod(kernel), math.prod(spatial), math.prod(in_sizes)
    dilated = any(d > 1 for d in lhs_dilation)
    sizes = (lhs.size, rhs.size, math.prod(out_shape), c * kk * p, o * kk * pin)
    if (feature_group_count != 1 or dt not in CTYPE or not 1 <= nd <= 3 or min(sizes) == 0
            or max(sizes) > _INT_MAX or max(n * c * kk, n * o, c * n * p) > _INT_MAX
            or any(s % lhs.itemsize for s in lhs.strides)):
        return fallback(xp, lhs, rhs, **params)
    lo = [lo for lo, _ in padding]
    geometry = {"lo": lo, "dil": list(lhs_dilation)}
    if (all(s == 1 for s in window_strides) and kk <= p
            and (dilated or o * pin < c * p)):
        return _scatter_plan(xp, lhs, rhs, out_shape, lo, lhs_dilation, rhs_dilation)
    if kk <= p:
        return _gather_plan(xp, lhs, rhs, out_shape, window_strides, rhs_dilation, geometry)
    return _weight_plan(xp, lhs, rhs, out_shape, window_strides, rhs_dilation, geometry)


def _gather_plan(xp, lhs, rhs, out_shape, strides, rhs_dilation, geometry):
    n, c = lhs.shape[:2]
    o = rhs.shape[0]
    kernel, spatial = tuple(rhs.shape[2:]), tuple(out_shape[2:])
    kk, p = math.prod(kernel), math.prod(spatial)
    w = xp.reshape(xp.ascontiguousarray(rhs), (1, o, c * kk))
    out = xp.empty(out_shape, dtype=lhs.dtype)
    out3 = xp.reshape(out, (n, o, p))
    for a, b in _chunks(n, c * kk * p * lhs.itemsize):
        cols = xp.empty((b - a, c * kk, p), dtype=lhs.dtype)
        _im2col(xp, lhs[a:b], cols, 0, (kernel, rhs_dilation), (spatial, strides), geometry)
        gemm(xp, xp.broadcast_to(w, (b - a, o, c * kk)), cols, out=out3[a:b])
    return out


def _scatter_plan(xp, lhs, rhs, out_shape, lo, lhs_dilation, rhs_dilation):
    n, c = lhs.shape[:2]
    o = rhs.shape[0]
    kernel, in_sizes, spatial = tuple(rhs.shape[2:]), tuple(lhs.shape[2:]), tuple(out_shape[2:])
    kk, pin = math.prod(kernel), math.prod(in_sizes)
    # wk[(o, k), c]: the weights of each kernel position as a matrix over input channels.
    wk = xp.ascontiguousarray(xp.transpose(xp.reshape(rhs, (o, c, kk)), (0, 2, 1)))
    wk = xp.reshape(wk, (1, o * kk, c))
    x3 = xp.reshape(lhs, (n, c, pin))
    out = xp.empty(out_shape, dtype=lhs.dtype)
    bx, by = _block(spatial[-1])
    col2im = _function(xp, "functx_col2im", lhs.dtype)
    for a, b in _chunks(n, o * kk * pin * lhs.itemsize):
        prod = xp.empty((b - a, o * kk, pin), dtype=lhs.dtype)
        gemm(xp, xp.broadcast_to(wk, (b - a, o * kk, c)), x3[a:b], out=prod)
        rows = (b - a) * o
        args = ([prod, out[a:b], np.int64(rows)]
                + [np.int32(v) for v in _three(spatial, 1) + _three(kernel, 1)
                   + _three(rhs_dilation, 0) + _three(lo, 0) + _three(lhs_dilation, 1)
                   + _three(in_sizes, 1)])
        col2im((_grid(rows),), (bx, by), tuple(args))
    return out


def _weight_plan(xp, lhs, rhs, out_shape, strides, rhs_dilation, geometry):
    n, c = lhs.shape[:2]
    o = rhs.shape[0]
    kernel, spatial = tuple(rhs.shape[2:]), tuple(out_shape[2:])
    kk, p = math.prod(kernel), math.prod(spatial)
    # rhs[:, c] as (O, K) matrices, batched over c (a copy only if the kernel axes of rhs
    # do not flatten to one stride).
    w3 = xp.reshape(xp.transpose(rhs, (1, 0) + tuple(range(2, rhs.ndim))), (c, o, kk))
    sums = xp.empty((1, 1, o * n * p), dtype=lhs.dtype)
    for i, (a, b) in enumerate(_chunks(c, n * p * kk * lhs.itemsize)):
        cols = xp.empty((b - a, n * p, kk), dtype=lhs.dtype)
        _im2col(xp, lhs[:, a:b], cols, 1, (spatial, strides), (kernel, rhs_dilation),
                geometry)
        part = xp.empty((b - a, o, n * p), dtype=lhs.dtype)
        gemm(xp, w3[a:b], xp.transpose(cols, (0, 2, 1)), out=part)
        ones = xp.ones((1, 1, b - a), dtype=lhs.dtype)
        gemm(xp, ones, xp.reshape(part, (1, b - a, o * n * p)), out=sums, beta=float(i > 0))
    res = xp.reshape(sums, (o, n) + spatial)
    return xp.transpose(res, (1, 0) + tuple(range(2, res.ndim)))
