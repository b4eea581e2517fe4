"""CUDA implementation of ``dot_product_attention`` and its gradient
(functx/primitives/attention.py): cuBLAS strided batched GEMMs on raw pointers around one
fused row kernel per pass.

Per chunk of the flattened batch and per block of query rows: cuBLAS GEMMs for the logits
(and, backward, for ``ct @ v^T``), ONE row kernel (one block per row of the logits, built
on the row helpers of functx/primitives/cuda/_kernels.py), and GEMMs for the products with
the probabilities. With a causal mask and large logits the queries are cut into blocks of
_ATTENTION_BLOCK_ROWS rows (at most 8 blocks), each with only the keys its rows may see,
so that the GEMMs skip much of the masked upper triangle (the blocks add their parts of
dk and dv with beta = 1). Each block costs its own cuBLAS calls, about 15-20 us of host
time each: 256 rows was the fastest on an H200 for L = 512 (0.86 ms per forward and
backward step, against 1.07 ms with 128 and 1.03 ms unblocked). The row kernels compute
scale, soft-cap, bias and the causal mask (from the indices) on the fly in each pass over
the row (the row stays in L1/L2), with an online maximum and sum in the first pass. The
bias is read through its broadcast strides (up to three collapsed batch dimensions), so a
(L, S) or (B, 1, 1, S) bias is never expanded. The flattened batch is cut into chunks so
that one scratch array of a chunk's block of logits holds at most _ATTENTION_SCRATCH_BYTES.

Flash: float16 and bfloat16 calls with no soft-cap, a 0-d bias and head dims E == Ev in
(32, 64, 128) run FlashAttention-2 kernels on tensor cores instead (functx/primitives/cuda/
_flash.py: no logits in memory, no float32 copies of the operands); :data:`FLASH` = False
forces the path above. Float32 calls under the same conditions run FlashAttention-2 kernels
on plain float32 FMAs (_flash32.py; no TF32); :data:`FLASH32` = False forces the path above.

The two functions are impl rules ``fn(xp, *arrays, **params, fallback)`` with ``xp`` =
cupy, registered next to their primitives with the generic implementation as
``fallback`` (used where an operand is empty). Importing this module needs no CuPy;
kernels are compiled on first use and kept (functx/primitives/cuda/_kernels.py).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from functx.primitives.cuda import _flash as flash
from functx.primitives.cuda import _flash32 as flash32
from functx.primitives.cuda._kernels import ROW_HELPERS, compute_dtype, raw_function, row_launch
from functx.primitives.cuda.linalg import Gemm

_ATTENTION_SCRATCH_BYTES = 64 << 20
_ATTENTION_BLOCK_ABOVE = 1 << 22  # logits (N * L * S) from which causal rows are blocked
_ATTENTION_BLOCK_ROWS = 256  # rows of a causal block (at most 8 blocks)

# Whether float16/bfloat16 calls that the flash kernels support (functx/primitives/cuda/
# _flash.py: no soft-cap, a 0-d bias, E == Ev in (32, 64, 128)) take them; False forces the
# path above for every call (tests and benchmarks compare the two).
FLASH = True
# Whether float32 calls under the same conditions take the float32 flash kernels (functx/
# primitives/cuda/_flash32.py: plain float32 FMAs, no TF32); False forces the path above.
FLASH32 = True

_SOURCE = ROW_HELPERS + r"""
// scale * s, soft-capped (cap > 0; t = tanh(scale * s / cap)), plus the bias.
__device__ __forceinline__ T functx_attn_logit(T s, T scale, T cap, T b, T* t) {
    T x = s * scale;
    if (cap > (T)0) {
        *t = tanh(x / cap);
        x = cap * *t;
    }
    return x + b;
}

// The bias row of logits row i of batch n (batch index split over three dimensions).
__device__ __forceinline__ const T* functx_attn_bias_row(
        const T* bias, long long n, int i, long long bd1, long long bd2, long long bs0,
        long long bs1, long long bs2, long long bsl) {
    const long long i2 = n % bd2, i1 = (n / bd2) % bd1, i0 = n / (bd2 * bd1);
    return bias + i0 * bs0 + i1 * bs1 + i2 * bs2 + (long long)i * bsl;
}

// The maximum M and sum Z of exp(x - M) of the logits x[0:end] of one row, block-wide
// (online: one pass). A NaN logit makes both NaN; a row of -inf gives M = -inf, Z = 0.
__device__ void functx_attn_stats(const T* sr, const T* br, long long bss, int end, T scale,
                                  T cap, T* buf, T* M, T* Z) {
    T m = NEG_INF, l = 0, t = 0;
    for (int j = threadIdx.x; j < end; j += blockDim.x) {
        const T x = functx_attn_logit(sr[j], scale, cap, br[j * bss], &t);
        if (x > m) {
            l = l * exp(m - x) + (T)1;
            m = x;
        } else if (x != x) {
            m = x;
            l = x;
        } else if (x > NEG_INF) {
            l += exp(x - m);
        }
    }
    const T mm = functx_block_max(m, buf);
    const T lt = (m == NEG_INF) ? (T)0 : l * exp(m - mm);
    *M = mm;
    *Z = functx_block_sum(lt, buf);
}

// Row r of a scratch block of Lb rows of Sc logits per batch entry: batch n0 + r / Lb,
// query i0 + r % Lb, keys 0 .. Sc - 1 (the causal mask may end the row earlier).
#define FUNCTX_ATTN_ROW_SETUP                                                           \
    __shared__ T buf[33];                                                               \
    const long long r = blockIdx.x;                                                     \
    const long long n = n0 + r / Lb;                                                    \
    const int i = i0 + (int)(r % Lb);                                                   \
    T* sr = s + r * (long long)Sc;                                                      \
    const T* br = functx_attn_bias_row(bias, n, i, bd1, bd2, bs0, bs1, bs2, bsl);       \
    const int end = causal ? min(Sc, i + 1) : Sc;                                       \
    T M, Z, t = 0;                                                                      \
    functx_attn_stats(sr, br, bss, end, scale, cap, buf, &M, &Z);                       \
    const bool empty = (M == NEG_INF);

// In place: the raw logits q k^T of a block become the probabilities.
extern "C" __global__ void functx_attention_fwd(
        T* s, const T* bias, int Lb, int Sc, int i0, long long n0, long long bd1,
        long long bd2, long long bs0, long long bs1, long long bs2, long long bsl,
        long long bss, T scale, T cap, int causal) {
    FUNCTX_ATTN_ROW_SETUP
    for (int j = threadIdx.x; j < Sc; j += blockDim.x) {
        T p = 0;
        if (j < end && !empty)
            p = exp(functx_attn_logit(sr[j], scale, cap, br[j * bss], &t) - M) / Z;
        sr[j] = p;
    }
}

// In place: s (raw logits q k^T) becomes p, dp (ct v^T) becomes ds times the soft-cap's
// derivative; with write_dsb, dsb (row r at dso + (r / Lb) * dsn + (r % Lb) * dsi) gets ds
// itself (the bias's cotangent, before the cap).
extern "C" __global__ void functx_attention_bwd(
        T* s, T* dp, T* dsb, long long dso, long long dsn, long long dsi, int write_dsb,
        const T* bias,
        int Lb, int Sc, int i0, long long n0, long long bd1, long long bd2, long long bs0,
        long long bs1, long long bs2, long long bsl, long long bss, T scale, T cap,
        int causal) {
    FUNCTX_ATTN_ROW_SETUP
    T* dr = dp + r * (long long)Sc;
    T* gr = dsb + dso + (r / Lb) * dsn + (r % Lb) * dsi;
    T acc = 0;
    if (!empty) {
        for (int j = threadIdx.x; j < end; j += blockDim.x)
            acc += exp(functx_attn_logit(sr[j], scale, cap, br[j * bss], &t) - M) / Z * dr[j];
    }
    const T D = functx_block_sum(acc, buf);
    for (int j = threadIdx.x; j < Sc; j += blockDim.x) {
        T p = 0, g = 0;
        t = 0;
        if (j < end && !empty) {
            p = exp(functx_attn_logit(sr[j], scale, cap, br[j * bss], &t) - M) / Z;
            g = p * (dr[j] - D);
        }
        if (write_dsb) gr[j] = g;
        if (cap > (T)0) g *= (T)1 - t * t;
        sr[j] = p;
        dr[j] = g;
    }
}
"""


def _attention_bias(xp: Any, b: Any, scores: tuple[int, ...], ct: Any) -> tuple[Any, tuple]:
    """The bias (in dtype ``ct``) and its layout for the row kernels: ``(bd1, bd2, bs0, bs1,
    bs2, bsl, bss)``, its batch dimensions collapsed to three (sizes ``bd0`` (implied),
    ``bd1``, ``bd2``) and strides in elements; copied where they do not collapse."""
    if not isinstance(b, xp.ndarray):
        b = xp.asarray(b)
    full = xp.broadcast_to(b.astype(ct, copy=False), scores)
    for _ in range(2):
        isz = full.itemsize
        strides = [st // isz for st in full.strides]
        dims: list[tuple[int, int]] = []
        for size, st in zip(full.shape[:-2], strides[:-2]):
            if size == 1:
                continue
            if dims and dims[-1][1] == st * size:
                dims[-1] = (dims[-1][0] * size, st)
            else:
                dims.append((size, st))
        if len(dims) <= 3:
            break
        full = xp.ascontiguousarray(full)
    (_, bs0), (bd1, bs1), (bd2, bs2) = [(1, 0)] * (3 - len(dims)) + dims
    return full, tuple(np.int64(a) for a in (bd1, bd2, bs0, bs1, bs2, strides[-2],
                                               strides[-1]))


def _attention_setup(xp: Any, q: Any, k: Any, v: Any, b: Any, causal: bool,
                     extra: tuple = ()) -> tuple:
    """The compute dtype, sizes, contiguous 3-D ``(N, ., .)`` operands, the bias and its
    layout, the chunk size over N and the row blocks ``(r0, r1, c1)`` of an attention call:
    with a causal mask and large logits, blocks of about 256 queries, each with the keys
    ``0 .. c1 - 1`` its queries may see (the GEMMs skip most of the masked triangle)."""
    ct = compute_dtype(q.dtype)
    lead, (L, E), S, Ev = tuple(q.shape[:-2]), q.shape[-2:], k.shape[-2], v.shape[-1]
    N = math.prod(lead)
    ops = [xp.ascontiguousarray(a.astype(ct, copy=False)).reshape((N,) + tuple(a.shape[-2:]))
           for a in (q, k, v) + extra]
    bias, layout = _attention_bias(xp, b, lead + (L, S), ct)
    nblocks = (min(8, L // _ATTENTION_BLOCK_ROWS)
               if causal and N * L * S > _ATTENTION_BLOCK_ABOVE else 1)
    if nblocks > 1:
        lb = -(-L // nblocks)
        blocks = [(r0, min(L, r0 + lb), min(S, r0 + lb)) for r0 in range(0, L, lb)]
    else:
        blocks = [(0, L, S)]
    per_n = max((r1 - r0) * c1 for r0, r1, c1 in blocks)
    chunks = max(1, -(-N * per_n * ct.itemsize // _ATTENTION_SCRATCH_BYTES))
    nc = max(1, -(-N // chunks))
    row_launch(S, nc * L)  # checks the sizes
    return ct, (N, L, S, E, Ev), ops, bias, layout, nc, blocks, nc * per_n


def dot_product_attention(xp: Any, q: Any, k: Any, v: Any, b: Any, *, scale: float,
                          causal: bool, softcap: float | None, fallback: Callable) -> Any:
    """Fused attention: per chunk and row block, a GEMM, one row kernel, a GEMM;
    ``fallback`` (the generic implementation) where an operand is empty."""
    if 0 in q.shape or 0 in k.shape or 0 in v.shape:  # nothing for the kernels to do
        return fallback(xp, q, k, v, b, scale=scale, causal=causal, softcap=softcap)
    if FLASH and flash.supported(xp, q, k, v, b, softcap):
        return flash.flash_attention(xp, q, k, v, b, scale=scale, causal=causal)
    if FLASH32 and flash32.supported(xp, q, k, v, b, softcap):
        return flash32.flash_attention(xp, q, k, v, b, scale=scale, causal=causal)
    dt = np.dtype(q.dtype)
    lead = tuple(q.shape[:-2])
    ct, (N, L, S, E, Ev), (q3, k3, v3), bias, layout, nc, blocks, size = _attention_setup(
        xp, q, k, v, b, causal)
    out = xp.empty((N, L, Ev), ct)
    s = xp.empty(size, ct)
    isz = ct.itemsize
    qp, kp, vp, op, sp = (a.data.ptr for a in (q3, k3, v3, out, s))
    gemm = Gemm(xp, ct)
    fn = raw_function(xp, _SOURCE, "functx_attention_fwd", ct)
    params = (ct.type(scale), ct.type(softcap or 0), np.int32(causal))
    for n0 in range(0, N, nc):
        m = min(N, n0 + nc) - n0
        for r0, r1, c1 in blocks:
            lb = r1 - r0
            gemm(m, lb, c1, E, (qp + (n0 * L + r0) * E * isz, E, L * E, False),
                 (kp + n0 * S * E * isz, E, S * E, True), (sp, c1, lb * c1))
            grid, block = row_launch(c1, m * lb)
            fn(grid, block, (s, bias, np.int32(lb), np.int32(c1), np.int32(r0), np.int64(n0),
                             *layout, *params))
            gemm(m, lb, Ev, c1, (sp, c1, lb * c1, False), (vp + n0 * S * Ev * isz, Ev,
                                                           S * Ev, False),
                 (op + (n0 * L + r0) * Ev * isz, Ev, L * Ev))
    out = out.reshape(lead + (L, Ev))
    return out if ct == dt else out.astype(dt)


def dot_product_attention_grad(xp: Any, q: Any, k: Any, v: Any, b: Any, g: Any, out: Any,
                               *, scale: float, causal: bool, softcap: float | None,
                               bias_grad: bool, fallback: Callable) -> tuple:
    """The fused attention's input cotangents: per chunk and row block, two GEMMs, one row
    kernel, three GEMMs (row blocks add their parts of dk and dv); ``dbias`` summed from a
    full ``(N, L, S)`` array. ``fallback`` (the generic implementation) where an operand is
    empty. ``out`` (the forward output) is read by the flash kernels only."""
    if 0 in q.shape or 0 in k.shape or 0 in v.shape:  # nothing for the kernels to do
        return fallback(xp, q, k, v, b, g, out, scale=scale, causal=causal, softcap=softcap,
                        bias_grad=bias_grad)
    if FLASH and flash.supported(xp, q, k, v, b, softcap):
        return flash.flash_attention_grad(xp, q, k, v, b, g, scale=scale, causal=causal,
                                          bias_grad=bias_grad, out=out)
    if FLASH32 and flash32.supported(xp, q, k, v, b, softcap):
        return flash32.flash_attention_grad(xp, q, k, v, b, g, scale=scale, causal=causal,
                                            bias_grad=bias_grad, out=out)
    dt = np.dtype(q.dtype)
    lead = tuple(q.shape[:-2])
    ct, (N, L, S, E, Ev), (q3, k3, v3, g3), bias, layout, nc, blocks, size = \
        _attention_setup(xp, q, k, v, b, causal, (g,))
    add = len(blocks) > 1  # row blocks add up dk and dv (and see only some keys)
    new = xp.zeros if add else xp.empty
    dq = xp.empty((N, L, E), ct)
    dk, dv = new((N, S, E), ct), new((N, S, Ev), ct)
    s, dp = xp.empty(size, ct), xp.empty(size, ct)
    dsb = new((N, L, S), ct) if bias_grad else dp
    isz = ct.itemsize
    qp, kp, vp, gp, sp, dpp, dqp, dkp, dvp = (a.data.ptr for a in (q3, k3, v3, g3, s, dp,
                                                                   dq, dk, dv))
    gemm = Gemm(xp, ct)
    fn = raw_function(xp, _SOURCE, "functx_attention_bwd", ct)
    params = (ct.type(scale), ct.type(softcap or 0), np.int32(causal))
    beta = 1.0 if add else 0.0
    for n0 in range(0, N, nc):
        m = min(N, n0 + nc) - n0
        for r0, r1, c1 in blocks:
            lb = r1 - r0
            qb = (qp + (n0 * L + r0) * E * isz, E, L * E)
            gb = (gp + (n0 * L + r0) * Ev * isz, Ev, L * Ev)
            kb = (kp + n0 * S * E * isz, E, S * E)
            vb = (vp + n0 * S * Ev * isz, Ev, S * Ev)
            sb, dpb = (sp, c1, lb * c1), (dpp, c1, lb * c1)
            gemm(m, lb, c1, E, (*qb, False), (*kb, True), sb)
            gemm(m, lb, c1, Ev, (*gb, False), (*vb, True), dpb)
            grid, block = row_launch(c1, m * lb)
            fn(grid, block, (s, dp, dsb, np.int64((n0 * L + r0) * S), np.int64(L * S),
                             np.int64(S), np.int32(bias_grad), bias, np.int32(lb),
                             np.int32(c1), np.int32(r0), np.int64(n0), *layout, *params))
            gemm(m, c1, Ev, lb, (*sb, True), (*gb, False),
                 (dvp + n0 * S * Ev * isz, Ev, S * Ev), beta=beta)
            gemm(m, lb, E, c1, (*dpb, False), (*kb, False),
                 (dqp + (n0 * L + r0) * E * isz, E, L * E), alpha=scale)
            gemm(m, c1, E, lb, (*dpb, True), (*qb, False),
                 (dkp + n0 * S * E * isz, E, S * E), alpha=scale, beta=beta)
    outs = [a.reshape(lead + a.shape[1:]) for a in (dq, dk, dv)]
    if bias_grad:
        full = dsb.reshape(lead + (L, S))
        shape = tuple(b.shape)
        extra = full.ndim - len(shape)
        axes = tuple(range(extra)) + tuple(extra + i for i, d in enumerate(shape)
                                           if d == 1 and full.shape[extra + i] != 1)
        outs.append((full.sum(axis=axes) if axes else full).reshape(shape))
    return tuple(o if ct == dt else o.astype(dt) for o in outs)
