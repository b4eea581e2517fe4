"""Flash attention in float32 without tensor cores (issue 20): FlashAttention-2 forward and
backward kernels on plain float32 FMAs (no TF32, float32-accurate) behind the CUDA
``dot_product_attention`` and ``dot_product_attention_grad`` for float32 operands
(functx/primitives/cuda/attention.py takes this path for float32, no soft-cap, a 0-d bias
and head dims ``E == Ev`` in :data:`HEAD_DIMS`; ``attention.FLASH32 = False`` turns it off).

Both kernels run 256 threads as a 16 x 16 grid (``tx = tid % 16``, ``ty = tid / 16``) over
64 x 64 tiles; each thread owns a 4 x 4 register micro-tile of the logits (rows
``ty + 16 r``, columns ``tx + 16 c``: conflict-free 16-byte shared loads with rows padded
by 4 floats) and a 4 x ``E / 16`` micro-tile of the products with the probabilities (rows
``ty + 16 r``, columns ``tx * 4 + 64 h + m``, or ``tx * 2 + m`` for E = 32). The 16 threads
of a row are the lanes of one half-warp, so row maxima and sums are ``__shfl_xor_sync``.

Forward (``functx_flash32_fwd``): one block per (batch entry, tile of 64 query rows), the
Q tile in shared memory, a loop over tiles of 64 keys (up to the causal diagonal) with K
and V tiles double-buffered (``cp.async``: tile t + 1 loads while tile t is used).
``S = Q K^T`` in registers, scaled to base 2 (``scale * log2(e)`` folded in, ``exp2f``:
full precision without fast-math), masked (causal, tails), the online softmax in registers,
``P`` through shared memory, ``O += P V`` in registers (two barriers per tile), ``O / l``
at the end. With flags the same kernel writes the per-row log-sum-exp (base 2) and
``D = rowsum(dO * O)`` instead of the output (the backward's first pass).

Backward (``functx_flash32_bwd``): one block per (batch entry, tile of 64 keys), a loop
over tiles of 64 queries from the causal start. Per tile: ``S^T = K Q^T`` and
``dP^T = V dO^T`` in registers, ``P^T = exp2(S^T - lse)``, ``dS^T = P^T (dP^T - D)``,
both through shared memory for ``dV += P^T dO`` and ``dK += dS^T Q`` (registers); then
``dS`` (transposed into shared memory) for ``dQ += dS K``, added to dq (float32) with
``atomicAdd`` (16-byte vector atomics on sm_90). The next Q and dO tiles load
(``cp.async``) during the dQ product.

Two blocks per SM for ``E <= 64`` (about 105-109 KiB of shared memory and at most 128
registers a thread each), one at ``E = 128``. Accuracy: every product and sum in float32
(``fmaf``), ``exp2f`` and ``log2f`` at full precision, ``O / l`` divided: errors of a few
1e-7 of the largest magnitude, as the old float32 path's (tests/test_cuda_flash32.py).

Operands are read, and out, dq, dk and dv written, through their strides
(functx/primitives/cuda/_flash_layout.py) when the last axis is contiguous and the rows
16-byte aligned (else copied contiguous); outputs take their inputs' memory order.

A 0-d bias adds one constant to every logit, which the softmax ignores: the kernels read
it only to propagate a non-finite one (``-inf`` masks every row: zeros, as the reference;
NaN gives NaN). The source contains none of raw_function's placeholders. Importing this
module needs no CuPy. Everything runs on the current CuPy stream, with no host
synchronisation (graph-capturable).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from functx.primitives.cuda import _flash_layout as layout
from functx.primitives.cuda._kernels import raw_function

# Head dims with a kernel (E == Ev).
HEAD_DIMS = (32, 64, 128)

_TILE = 64  # query rows and keys per tile
_THREADS = 256
_PS = 80  # row stride (floats) of the 64 x 64 probability tiles in shared memory
_F32 = np.dtype(np.float32)

_SOURCE = layout.CUDA + r"""
#define FX_TILE 64
#define FX_PS 80
#define FX_DSS 68
#define FX_MINUS_INF __int_as_float((int)0xff800000u)
#define FX_POS_INF __int_as_float((int)0x7f800000u)

// Rows 0 .. 63 of a (rows, D) float32 tile at g (row stride rs) into shared memory (row
// stride D + 4) with cp.async, asynchronously (16-byte copies; g and rs 16-byte aligned);
// rows from `valid` on are zero-filled. Complete after fx_cp_commit, fx_cp_wait and a
// barrier.
template <int D>
__device__ __forceinline__ void fx_cp_tile(float* sm, const float* g, int rs, int valid) {
    constexpr int CH = D / 4;
    for (int c = threadIdx.x; c < FX_TILE * CH; c += blockDim.x) {
        const int r = c / CH, cc = c - r * CH;
        const bool ok = r < valid;
        const float* src = g + (ok ? (long long)r * rs + cc * 4 : 0LL);
        const unsigned dst = (unsigned)__cvta_generic_to_shared(sm + r * (D + 4) + cc * 4);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                     :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
    }
}

// A 0-d bias: 0 when finite (the softmax ignores a constant), else itself.
__device__ __forceinline__ float fx_bias(const float* bias) {
    const float b = bias[0];
    return (b - b == 0.f) ? 0.f : b;
}

// Maximum and sum over the 16 lanes of a half-warp (the threads of one row).
__device__ __forceinline__ float fx_half_max(float x) {
#pragma unroll
    for (int o = 1; o < 16; o <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

__device__ __forceinline__ float fx_half_sum(float x) {
#pragma unroll
    for (int o = 1; o < 16; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Column of element c (0 .. D/16 - 1) of thread tx's micro-tile of a (., D) product.
template <int D>
__device__ __forceinline__ int fx_col(int tx, int c) {
    return (D == 32) ? tx * 2 + c : (c >> 2) * 64 + tx * 4 + (c & 3);
}

// Thread tx's D/16 elements of a row of D floats (16- or 8-byte loads).
template <int D>
__device__ __forceinline__ void fx_load_cols(float* b, const float* row, int tx) {
    if (D == 32) {
        const float2 t = *reinterpret_cast<const float2*>(row + tx * 2);
        b[0] = t.x;
        b[1] = t.y;
    } else {
#pragma unroll
        for (int h = 0; h < D / 64; ++h) {
            const float4 t = *reinterpret_cast<const float4*>(row + h * 64 + tx * 4);
            b[4 * h] = t.x;
            b[4 * h + 1] = t.y;
            b[4 * h + 2] = t.z;
            b[4 * h + 3] = t.w;
        }
    }
}

template <int D>
__device__ __forceinline__ void fx_store_cols(float* row, int tx, const float* b) {
    if (D == 32) {
        *reinterpret_cast<float2*>(row + tx * 2) = make_float2(b[0], b[1]);
    } else {
#pragma unroll
        for (int h = 0; h < D / 64; ++h)
            *reinterpret_cast<float4*>(row + h * 64 + tx * 4) =
                make_float4(b[4 * h], b[4 * h + 1], b[4 * h + 2], b[4 * h + 3]);
    }
}

// row[fx_col(tx, c)] += b[c] for c < D/16 (global memory, atomically): 16- or 8-byte
// vector atomics on sm_90 and later (CUDA 12 or later), else one float at a time.
template <int D>
__device__ __forceinline__ void fx_atomic_add_cols(float* row, int tx, const float* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDACC_VER_MAJOR__) \
    && __CUDACC_VER_MAJOR__ >= 12
    if (D == 32) {
        atomicAdd(reinterpret_cast<float2*>(row + tx * 2), make_float2(b[0], b[1]));
    } else {
#pragma unroll
        for (int h = 0; h < D / 64; ++h)
            atomicAdd(reinterpret_cast<float4*>(row + h * 64 + tx * 4),
                      make_float4(b[4 * h], b[4 * h + 1], b[4 * h + 2], b[4 * h + 3]));
    }
#else
#pragma unroll
    for (int c = 0; c < D / 16; ++c) atomicAdd(row + fx_col<D>(tx, c), b[c]);
#endif
}

// acc[r][c] += sum_d A[ty + 16 r][d] * B[tx + 16 c][d]: two 64-row tiles of D floats in
// shared memory (row stride D + 4).
template <int D>
__device__ __forceinline__ void fx_nt(float (&acc)[4][4], const float* A, const float* B,
                                      int ty, int tx) {
    constexpr int RS = D + 4;
#pragma unroll 4
    for (int d = 0; d < D; d += 4) {
        float a[4][4], b[4][4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const float4 t = *reinterpret_cast<const float4*>(A + (ty + 16 * r) * RS + d);
            a[r][0] = t.x; a[r][1] = t.y; a[r][2] = t.z; a[r][3] = t.w;
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const float4 t = *reinterpret_cast<const float4*>(B + (tx + 16 * c) * RS + d);
            b[c][0] = t.x; b[c][1] = t.y; b[c][2] = t.z; b[c][3] = t.w;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(a[r][e], b[c][e], acc[r][c]);
    }
}

// acc[r][c] += sum_j P[ty + 16 r][j] * B[j][fx_col(tx, c)], j < 64: P a 64 x 64 tile (row
// stride ps), B a 64-row tile of D floats (row stride D + 4), both in shared memory.
template <int D>
__device__ __forceinline__ void fx_nn(float (&acc)[4][D / 16], const float* P, int ps,
                                      const float* B, int ty, int tx) {
    constexpr int RS = D + 4, DC = D / 16;
#pragma unroll 2
    for (int j = 0; j < FX_TILE; j += 4) {
        float p[4][4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const float4 t = *reinterpret_cast<const float4*>(P + (ty + 16 * r) * ps + j);
            p[r][0] = t.x; p[r][1] = t.y; p[r][2] = t.z; p[r][3] = t.w;
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float b[DC];
            fx_load_cols<D>(b, B + (j + e) * RS, tx);
#pragma unroll
            for (int r = 0; r < 4; ++r)
#pragma unroll
                for (int c = 0; c < DC; ++c) acc[r][c] = fmaf(p[r][e], b[c], acc[r][c]);
        }
    }
}

// The forward pass of one (batch entry, tile of 64 queries). q (N, L, D), k and v (N, S, D),
// out (N, L, D) (written with want_out), lse (N, L) (base 2, with want_stats), dout
// (N, L, D) and delta (N, L) (rowsum(dout * out), with want_stats); all float32; q, k, v,
// out and dout through their layouts lq, lk, lv, lo, lg (lse and delta contiguous). With
// want_stats == 2, out is the forward output, read for delta: the P V products (and the V
// tiles) are skipped.
// Shared memory (dynamic): the Q tile, two buffers of K and V tiles (row stride D + 4) and
// the P tile (64 x FX_PS).
template <int D>
__device__ __forceinline__ void fx_flash32_fwd(
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
        const float* __restrict__ bias, float* __restrict__ out, float* __restrict__ lse,
        const float* __restrict__ dout, float* __restrict__ delta, fx_lay lq, fx_lay lk,
        fx_lay lv, fx_lay lo, fx_lay lg, int nb, int L, int S, float scale_log2, int causal,
        int want_out, int want_stats) {
    extern __shared__ __align__(16) unsigned char fx_smem[];
    constexpr int RS = D + 4, DC = D / 16;
    float* sQ = reinterpret_cast<float*>(fx_smem);
    float* sK0 = sQ + FX_TILE * RS;
    float* sV0 = sK0 + FX_TILE * RS;
    float* sK1 = sV0 + FX_TILE * RS;
    float* sV1 = sK1 + FX_TILE * RS;
    float* sP = sV1 + FX_TILE * RS;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const long long n = blockIdx.x;
    const int n1 = (int)blockIdx.x / nb, n2 = (int)blockIdx.x - n1 * nb;
    const int i0 = (gridDim.y - 1 - blockIdx.y) * FX_TILE;  // the longest rows first
    q += fx_off(lq, n1, n2, i0);
    k += fx_off(lk, n1, n2, 0);
    v += fx_off(lv, n1, n2, 0);
    const float bb = fx_bias(bias);
    const bool pv = want_stats != 2;  // (uniform across the block)
    fx_cp_tile<D>(sQ, q, lq.rs, min(FX_TILE, L - i0));
    fx_cp_tile<D>(sK0, k, lk.rs, min(FX_TILE, S));
    if (pv) fx_cp_tile<D>(sV0, v, lv.rs, min(FX_TILE, S));
    fx_cp_commit();

    float o[4][DC], m[4], l[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        m[r] = FX_MINUS_INF;
        l[r] = 0.f;
#pragma unroll
        for (int c = 0; c < DC; ++c) o[r][c] = 0.f;
    }
    const int kend = causal ? min(S, i0 + FX_TILE) : S;
    for (int j0 = 0, it = 0; j0 < kend; j0 += FX_TILE, ++it) {
        const float* sK = (it & 1) ? sK1 : sK0;
        const float* sV = (it & 1) ? sV1 : sV0;
        fx_cp_wait<0>();
        __syncthreads();  // this tile is in; every thread is done with the previous one
        if (j0 + FX_TILE < kend) {  // the next tile into the other buffers (last read in
            // the previous iteration, before the barrier above)
            const int jn = j0 + FX_TILE;
            fx_cp_tile<D>((it & 1) ? sK0 : sK1, k + (long long)jn * lk.rs, lk.rs,
                          min(FX_TILE, S - jn));
            if (pv)
                fx_cp_tile<D>((it & 1) ? sV0 : sV1, v + (long long)jn * lv.rs, lv.rs,
                              min(FX_TILE, S - jn));
            fx_cp_commit();
        }
        float s[4][4];
#pragma unroll
        for (int r = 0; r < 4; ++r) s[r][0] = s[r][1] = s[r][2] = s[r][3] = 0.f;
        fx_nt<D>(s, sQ, sK, ty, tx);
        const bool mask = (j0 + FX_TILE > S) || (causal && j0 + FX_TILE - 1 > i0);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            float mx = m[r];
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                float x = s[r][c] * scale_log2 + bb;
                if (mask) {
                    const int j = j0 + tx + 16 * c, i = i0 + ty + 16 * r;
                    if (j >= S || (causal && j > i)) x = FX_MINUS_INF;
                }
                s[r][c] = x;
                mx = fmaxf(mx, x);
            }
            mx = fx_half_max(mx);
            const float base = (mx == FX_MINUS_INF) ? 0.f : mx;  // a row masked so far
            const float alpha = exp2f(m[r] - base);
            m[r] = mx;
            float rs = 0.f;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const float p = exp2f(s[r][c] - base);
                rs += p;
                if (pv) sP[(ty + 16 * r) * FX_PS + tx + 16 * c] = p;
            }
            l[r] = l[r] * alpha + rs;
#pragma unroll
            for (int c = 0; c < DC; ++c) o[r][c] *= alpha;
        }
        if (pv) {
            __syncthreads();
            fx_nn<D>(o, sP, FX_PS, sV, ty, tx);  // (sP is written again after the next
            // iteration's first barrier)
        }
    }

#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int i = i0 + ty + 16 * r;
        const float lr = fx_half_sum(l[r]);
#pragma unroll
        for (int c = 0; c < DC; ++c) o[r][c] = (lr == 0.f) ? 0.f : o[r][c] / lr;  // a fully
        // masked row gives zeros
        if (want_out && pv && i < L) fx_store_cols<D>(out + fx_off(lo, n1, n2, i), tx, o[r]);
        if (want_stats) {
            float acc = 0.f;
            if (i < L) {
                float g[DC];
                fx_load_cols<D>(g, dout + fx_off(lg, n1, n2, i), tx);
                if (!pv) fx_load_cols<D>(o[r], out + fx_off(lo, n1, n2, i), tx);
#pragma unroll
                for (int c = 0; c < DC; ++c) acc = fmaf(o[r][c], g[c], acc);
            }
            acc = fx_half_sum(acc);
            if (i < L && tx == 0) {
                lse[n * L + i] = (lr == 0.f) ? FX_POS_INF : m[r] + log2f(lr);
                delta[n * L + i] = acc;
            }
        }
    }
}

// The backward pass of one (batch entry, tile of 64 keys): dk, dv (N, S, D) written, dq
// (N, L, D) added to (atomicAdd; zeroed by the caller); lse and delta from fx_flash32_fwd
// (want_stats); all float32. Shared memory (dynamic): K, V, Q, dO tiles (row stride D + 4),
// P^T and dS^T (64 x FX_PS; the first is reused for dS, row stride FX_DSS) and 64 values
// each of lse and delta. q, k, v, dout, dq, dk, dv through their layouts lq, lk, lv, lg,
// ldq, ldk, ldv (lse and delta contiguous).
template <int D>
__device__ __forceinline__ void fx_flash32_bwd(
        const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
        const float* __restrict__ bias, const float* __restrict__ dout,
        const float* __restrict__ lse, const float* __restrict__ delta, float* __restrict__ dq,
        float* __restrict__ dk, float* __restrict__ dv, fx_lay lq, fx_lay lk, fx_lay lv,
        fx_lay lg, fx_lay ldq, fx_lay ldk, fx_lay ldv, int nb, int L, int S, float scale_log2,
        float scale, int causal) {
    extern __shared__ __align__(16) unsigned char fx_smem[];
    constexpr int RS = D + 4, DC = D / 16;
    float* sK = reinterpret_cast<float*>(fx_smem);
    float* sV = sK + FX_TILE * RS;
    float* sQ = sV + FX_TILE * RS;
    float* sO = sQ + FX_TILE * RS;  // dO
    float* sP = sO + FX_TILE * RS;  // P^T [key][query], then dS [query][key]
    float* sT = sP + FX_TILE * FX_PS;  // dS^T [key][query]
    float* sL = sT + FX_TILE * FX_PS;
    float* sD = sL + FX_TILE;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const long long n = blockIdx.x;
    const int n1 = (int)blockIdx.x / nb, n2 = (int)blockIdx.x - n1 * nb;
    const int j0 = blockIdx.y * FX_TILE;
    // The offsets of this batch entry's q, dout and dq (read in the loop from shared
    // memory, after barriers: registers would spill at E = 64).
    __shared__ long long fx_base[3];
    if (threadIdx.x == 0) {
        fx_base[0] = fx_off(lq, n1, n2, 0);
        fx_base[1] = fx_off(lg, n1, n2, 0);
        fx_base[2] = fx_off(ldq, n1, n2, 0);
    }
    lse += n * L;
    delta += n * L;
    k += fx_off(lk, n1, n2, j0);
    v += fx_off(lv, n1, n2, j0);
    const float bb = fx_bias(bias);
    const int istart = causal ? j0 : 0;  // (a multiple of the tile)
    fx_cp_tile<D>(sK, k, lk.rs, min(FX_TILE, S - j0));
    fx_cp_tile<D>(sV, v, lv.rs, min(FX_TILE, S - j0));
    if (istart < L) {
        fx_cp_tile<D>(sQ, q + fx_off(lq, n1, n2, istart), lq.rs, min(FX_TILE, L - istart));
        fx_cp_tile<D>(sO, dout + fx_off(lg, n1, n2, istart), lg.rs, min(FX_TILE, L - istart));
    }
    fx_cp_commit();

    float dka[4][DC], dva[4][DC];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < DC; ++c) dka[r][c] = dva[r][c] = 0.f;
    // lse and delta of query i0 + threadIdx.x (threads < 64), read one tile ahead.
    float nl = FX_POS_INF, nd = 0.f;
    if (threadIdx.x < FX_TILE && istart + (int)threadIdx.x < L) {
        nl = lse[istart + threadIdx.x];
        nd = delta[istart + threadIdx.x];
    }
    for (int i0 = istart; i0 < L; i0 += FX_TILE) {
        fx_cp_wait<0>();
        if (threadIdx.x < FX_TILE) {  // (sL and sD were last read before a barrier)
            sL[threadIdx.x] = nl;
            sD[threadIdx.x] = nd;
        }
        __syncthreads();
        // S^T = K Q^T and dP^T = V dO^T: keys ty + 16 r, queries tx + 16 c.
        float s[4][4], dp[4][4];
#pragma unroll
        for (int r = 0; r < 4; ++r)
            s[r][0] = s[r][1] = s[r][2] = s[r][3] = dp[r][0] = dp[r][1] = dp[r][2] =
                dp[r][3] = 0.f;
        fx_nt<D>(s, sK, sQ, ty, tx);
        fx_nt<D>(dp, sV, sO, ty, tx);
        // P^T = exp2(S^T - lse), masked; dS^T = P^T (dP^T - delta).
        const bool mask = (i0 + FX_TILE > L) || (j0 + FX_TILE > S)
                          || (causal && j0 + FX_TILE - 1 > i0);
        float lc[4], dc[4];  // lse and delta of this thread's queries
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            lc[c] = sL[tx + 16 * c];
            dc[c] = sD[tx + 16 * c];
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int col = tx + 16 * c;  // query i0 + col
                float p = exp2f(s[r][c] * scale_log2 + bb - lc[c]);
                if (mask) {
                    const int i = i0 + col, j = j0 + ty + 16 * r;
                    if (i >= L || j >= S || (causal && j > i)) p = 0.f;
                }
                const float ds = p * (dp[r][c] - dc[c]);
                sP[(ty + 16 * r) * FX_PS + col] = p;
                sT[(ty + 16 * r) * FX_PS + col] = ds;
                dp[r][c] = ds;
            }
        }
        __syncthreads();
        // dV += P^T dO, dK += dS^T Q (keys ty + 16 r).
        fx_nn<D>(dva, sP, FX_PS, sO, ty, tx);
        fx_nn<D>(dka, sT, FX_PS, sQ, ty, tx);
        __syncthreads();
        // The next Q and dO tiles (and lse, delta) load during the dQ product (which reads
        // none of them).
        const int in = i0 + FX_TILE;
        if (in < L) {
            fx_cp_tile<D>(sQ, q + fx_base[0] + (long long)in * lq.rs, lq.rs,
                          min(FX_TILE, L - in));
            fx_cp_tile<D>(sO, dout + fx_base[1] + (long long)in * lg.rs, lg.rs,
                          min(FX_TILE, L - in));
            fx_cp_commit();
            if (threadIdx.x < FX_TILE) {
                const int i = in + threadIdx.x;
                nl = (i < L) ? lse[i] : FX_POS_INF;
                nd = (i < L) ? delta[i] : 0.f;
            }
        }
        // dS = (dS^T)^T into sP (rows: queries), then dQ (queries ty + 16 r) += dS K.
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int c = 0; c < 4; ++c) sP[(tx + 16 * c) * FX_DSS + ty + 16 * r] = dp[r][c];
        __syncthreads();
        float acc[4][DC];
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
            for (int c = 0; c < DC; ++c) acc[r][c] = 0.f;
        fx_nn<D>(acc, sP, FX_DSS, sK, ty, tx);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int i = i0 + ty + 16 * r;
            if (i < L) {
#pragma unroll
                for (int c = 0; c < DC; ++c) acc[r][c] *= scale;
                fx_atomic_add_cols<D>(dq + fx_base[2] + (long long)i * ldq.rs, tx, acc[r]);
            }
        }
        // (no barrier: the next iteration writes sP only after its first barrier, and sL,
        // sD, sQ, sO were last read before the previous one)
    }
    fx_cp_wait<0>();  // (K and V when no query tile was visited)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int j = j0 + ty + 16 * r;
        if (j < S) {
#pragma unroll
            for (int c = 0; c < DC; ++c) dka[r][c] *= scale;
            fx_store_cols<D>(dk + fx_off(ldk, n1, n2, j), tx, dka[r]);
            fx_store_cols<D>(dv + fx_off(ldv, n1, n2, j), tx, dva[r]);
        }
    }
}
"""

_WRAPPERS = r"""
extern "C" __global__ void __launch_bounds__(256, @MINB@) functx_flash32_fwd_e@E@(
        const float* q, const float* k, const float* v, const float* bias, float* out,
        float* lse, const float* dout, float* delta, @FWD@, int nb, int L, int S,
        float scale_log2, int causal, int want_out, int want_stats) {
    fx_flash32_fwd<@E@>(q, k, v, bias, out, lse, dout, delta, @FWD@_CALL, nb, L, S, scale_log2,
                        causal, want_out, want_stats);
}

extern "C" __global__ void __launch_bounds__(256, @MINB@) functx_flash32_bwd_e@E@(
        const float* q, const float* k, const float* v, const float* bias, const float* dout,
        const float* lse, const float* delta, float* dq, float* dk, float* dv, @BWD@,
        int nb, int L, int S, float scale_log2, float scale, int causal) {
    fx_flash32_bwd<@E@>(q, k, v, bias, dout, lse, delta, dq, dk, dv, @BWD@_CALL, nb, L, S,
                        scale_log2, scale, causal);
}
"""


@functools.lru_cache(maxsize=None)
def source() -> str:
    """The CUDA C source of every float32 flash kernel (all head dims)."""
    # Blocks per SM the registers must allow (the shared memory allows as many): 2 for
    # E <= 64 (at most 128 registers a thread), else 1.
    wrappers = layout.wrappers(_WRAPPERS, {"@FWD@": ("q", "k", "v", "out", "dout"),
                                           "@BWD@": ("q", "k", "v", "dout", "dq", "dk", "dv")})
    return _SOURCE + "".join(wrappers.replace("@E@", str(e))
                             .replace("@MINB@", "2" if e <= 64 else "1") for e in HEAD_DIMS)


def _function(xp: Any, kind: str, e: int) -> Any:
    # The source has none of raw_function's placeholders; float32 adds no prefix.
    return raw_function(xp, source(), f"functx_flash32_{kind}_e{e}", _F32)


def supported(xp: Any, q: Any, k: Any, v: Any, b: Any, softcap: float | None) -> bool:
    """Whether the float32 flash kernels handle this attention call: CuPy arrays of
    float32, no soft-cap, a 0-d bias, head dims ``E == Ev`` in :data:`HEAD_DIMS` and at
    least one query and one key."""
    return layout.supported(xp, q, k, v, b, softcap, (_F32,), HEAD_DIMS)


def _bias(xp: Any, b: Any) -> Any:
    if not isinstance(b, xp.ndarray):
        b = xp.asarray(b)
    return b.astype(_F32, copy=False).reshape(())


def fwd_shared_bytes(e: int) -> int:
    """Dynamic shared memory of the forward kernel: the Q tile, two buffers of K and V
    tiles (rows padded by 4 floats) and the 64 x 80 P tile."""
    return 4 * (5 * _TILE * (e + 4) + _TILE * _PS)


def bwd_shared_bytes(e: int) -> int:
    """Dynamic shared memory of the backward kernel: K, V, Q and dO tiles (rows padded by
    4 floats), two 64 x 80 tiles (P^T, dS^T) and 64 floats each of lse and delta."""
    return 4 * (4 * _TILE * (e + 4) + 2 * _TILE * _PS + 2 * _TILE)


def _forward(xp: Any, ops: dict, nb: int, bias: Any, lse: Any, delta: Any, n: int,
             scale: float, causal: bool, want_out: bool, want_stats: int) -> None:
    """The forward kernel on ``ops`` (see
    :func:`functx.primitives.cuda._flash_layout.launch_forward`)."""
    e = ops["q"][0].shape[-1]
    layout.launch_forward(_function(xp, "fwd", e), fwd_shared_bytes(e), _THREADS, _TILE, ops,
                          nb, bias, lse, delta, n, scale, causal, want_out, want_stats)


def flash_attention(xp: Any, q: Any, k: Any, v: Any, b: Any, *, scale: float,
                    causal: bool) -> Any:
    """``dot_product_attention`` (float32, no soft-cap, 0-d bias) by the forward kernel.

    Args:
        xp: cupy.
        q, k, v: ``(..., L, E)``, ``(..., S, E)``, ``(..., S, E)`` of float32 (see
            :func:`supported`).
        b: the 0-d bias.
        scale, causal: as for ``dot_product_attention``.

    Returns:
        The output ``(..., L, E)``, float32.

    Raises:
        ValueError: more than 2**31 batch entries or 2**22 queries or keys.

    Example:
        >>> out = flash_attention(cupy, q, k, v, cupy.zeros((), q.dtype), scale=0.125,
        ...                       causal=True)
    """
    n, L, S = math.prod(q.shape[:-2]), q.shape[-2], k.shape[-2]
    layout.check_sizes("float32 flash attention", n, L, S, _TILE)
    ops, nb = layout.operands(xp, {"q": q, "k": k, "v": v})
    ops["out"] = layout.output_like(xp, q, _F32, nb)
    ops["dout"] = ops["out"]  # (unused)
    out = ops["out"][0]
    _forward(xp, ops, nb, _bias(xp, b), out, out, n, scale, causal, True, False)
    return out


def flash_attention_grad(xp: Any, q: Any, k: Any, v: Any, b: Any, g: Any, *, scale: float,
                         causal: bool, bias_grad: bool, out: Any = None) -> tuple:
    """``dot_product_attention_grad`` (float32, no soft-cap, 0-d bias) by the flash
    kernels: the forward kernel for each row's log-sum-exp and ``rowsum(g * out)``, then
    the backward kernel (dq added up in float32 atomics). Given the forward output ``out``,
    the forward kernel reads it for ``rowsum(g * out)`` and skips its ``P V`` products;
    without it, it computes the output again.

    Args:
        xp: cupy.
        q, k, v, b: as for :func:`flash_attention`.
        g: the output's cotangent ``(..., L, E)``.
        scale, causal: as for ``dot_product_attention_grad``.
        bias_grad: also return the bias's cotangent: zeros of its shape and dtype (the
            softmax ignores a constant added to every logit).
        out: the forward output ``(..., L, E)`` for these operands, or None.

    Returns:
        ``(dq, dk, dv)``, and ``dbias`` with ``bias_grad``, float32.

    Raises:
        ValueError: more than 2**31 batch entries or 2**22 queries or keys.

    Example:
        >>> dq, dk, dv = flash_attention_grad(cupy, q, k, v, cupy.zeros((), q.dtype), g,
        ...                                   scale=0.125, causal=True, bias_grad=False)
    """
    n, L, S, e = math.prod(q.shape[:-2]), q.shape[-2], k.shape[-2], q.shape[-1]
    layout.check_sizes("float32 flash attention", n, L, S, _TILE)
    ops, nb = layout.grad_operands(xp, q, k, v, g, out)
    bias = _bias(xp, b)
    lse, delta = xp.empty((n, L), _F32), xp.empty((n, L), _F32)
    _forward(xp, ops, nb, bias, lse, delta, n, scale, causal, False,
             2 if out is not None else 1)
    ops["dq"] = layout.output_like(xp, q, _F32, nb, zero=True)
    ops["dk"] = layout.output_like(xp, k, _F32, nb)
    ops["dv"] = layout.output_like(xp, v, _F32, nb)
    names = ("q", "k", "v", "dout", "dq", "dk", "dv")
    q1, k1, v1, g1, dq, dk, dv = (ops[a][0] for a in names)
    strides = sum((layout.args(ops[a][1]) for a in names), ())
    layout.launch(_function(xp, "bwd", e), (n, -(-S // _TILE)), _THREADS,
                  bwd_shared_bytes(e),
                  (q1, k1, v1, bias, g1, lse, delta, dq, dk, dv) + strides
                  + (np.int32(nb), np.int32(L), np.int32(S), np.float32(scale * layout.LOG2E),
                     np.float32(scale), np.int32(causal)))
    outs = (dq, dk, dv)
    if bias_grad:
        outs += (xp.zeros(tuple(np.shape(b)), np.dtype(getattr(b, "dtype", _F32))),)
    return outs
