"""Flash attention on tensor cores for float16 and bfloat16 operands (issue 20): the
FlashAttention-2 forward and backward kernels behind the CUDA ``dot_product_attention``
and ``dot_product_attention_grad`` (functx/primitives/cuda/attention.py takes this path
for float16/bfloat16 operands, no soft-cap, a 0-d bias and head dims ``E == Ev`` in
:data:`HEAD_DIMS`).

Forward (``functx_flash_fwd``): one block of 4 warps per (batch entry, tile of 64 query
rows), each warp owning 16 rows; the loop runs over tiles of 64 keys (up to the causal
diagonal). ``S = Q K^T`` on tensor cores (``mma.sync.m16n8k16``, float32 accumulators),
the online softmax on the accumulator fragments in registers (row maxima and sums across
the 4 threads of a quad), and ``P`` rounded to the operand type in registers and reused as
the A operand of ``P V`` (the C fragment of m16n8k16 is laid out as its A fragment). K and
V tiles are staged in shared memory, two buffers each, the next tile loaded with
``cp.async`` while the current one is used (rows padded by 16 bytes: conflict-free
``ldmatrix``; ``.trans`` for V). The logits are handled in base 2 (``scale * log2(e)`` folded in,
``ex2.approx``). With flags the same kernel also writes the per-row log-sum-exp (base 2)
and ``D = rowsum(dO * O)`` with ``O`` in float32 on chip (the backward's first pass; the
output itself is not written then).

Backward (``functx_flash_bwd``): one block of 4 warps per (batch entry, tile of 64 keys),
each warp owning 16 keys; the loop runs over tiles of 64 queries from the causal start.
Per tile: ``S^T = K Q^T``, ``P^T = exp2(S^T - lse)``, ``dV += P^T dO``,
``dP^T = V dO^T``, ``dS^T = P^T (dP^T - D)``, ``dK += dS^T Q`` (all in registers, P^T and
dS^T reused as A operands), and ``dQ += dS K`` through ``dS^T`` in shared memory, added
with float32 ``atomicAdd`` into a float32 scratch, cast to the dtype at the end. The next
Q and dO tiles are loaded with ``cp.async`` while the current ones are used (for
``E <= 64``; at 128 the shared memory would allow one block per SM).

Operands and outputs (in their inputs' memory order) go through their strides where the last
axis is contiguous and rows are 16-byte aligned, else are copied (_flash_layout.py).

A 0-d bias adds one constant to every logit, which the softmax ignores: the kernels read
it only to propagate a non-finite one (``-inf`` masks every row: zeros, as the reference;
NaN gives NaN). The sources need no header (raw ``unsigned short`` storage, conversions in
inline PTX); they are compiled per dtype on first use through
:func:`functx.primitives.cuda._kernels.raw_function` (which substitutes nothing in them).
Importing this module needs no CuPy. Everything runs on the current CuPy stream, with no
host synchronisation (graph-capturable).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from functx.primitives.cuda import _flash_layout as layout
from functx.primitives.cuda._kernels import BFLOAT16, raw_function

# Head dims with a kernel (E == Ev).
HEAD_DIMS = (32, 64, 128)

_TILE = 64  # query rows and keys per tile (4 warps of 16 rows)
_THREADS = 128

_SOURCE = layout.CUDA + r"""
#define FX_BF16 @BF16@
typedef unsigned int fx_u32;
typedef unsigned short fx_u16;

#define FX_TILE 64
#define FX_MINUS_INF __int_as_float((int)0xff800000u)
#define FX_POS_INF __int_as_float((int)0x7f800000u)

// Two floats rounded to the operand type and packed (lo in the low half).
__device__ __forceinline__ fx_u32 fx_pack(float lo, float hi) {
    fx_u32 r;
#if FX_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

// One element of the operand type to float.
__device__ __forceinline__ float fx_to_float(fx_u16 x) {
#if FX_BF16
    return __uint_as_float(((fx_u32)x) << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
#endif
}

__device__ __forceinline__ float fx_exp2(float x) {  // exp2(-inf) = 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// c += a b: m16n8k16, A row-major (4 registers), B column-major (2), C float32 (4).
__device__ __forceinline__ void fx_mma(float* c, const fx_u32* a, fx_u32 b0, fx_u32 b1) {
#if FX_BF16
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Four 8x8 matrices of 16-bit elements from shared memory (lane l gives a row address of
// matrix l / 8); .trans loads them transposed.
__device__ __forceinline__ void fx_ldm4(fx_u32* r, const fx_u16* p) {
    const fx_u32 a = (fx_u32)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
}

__device__ __forceinline__ void fx_ldm4_t(fx_u32* r, const fx_u16* p) {
    const fx_u32 a = (fx_u32)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a) : "memory");
}

// Rows 0 .. 63 of a (rows, D) tile at g (row stride rs) into shared memory (row stride
// D + 8) with cp.async, asynchronously (16-byte copies; D a multiple of 8, g and rs 16-byte
// aligned); rows from `valid` on are zero-filled. Complete after fx_cp_commit, fx_cp_wait
// and a barrier.
template <int D>
__device__ __forceinline__ void fx_cp_tile(fx_u16* sm, const fx_u16* g, int rs, int valid) {
    constexpr int CH = D / 8;
    for (int c = threadIdx.x; c < FX_TILE * CH; c += blockDim.x) {
        const int r = c / CH, cc = c - r * CH;
        const bool ok = r < valid;
        const fx_u16* src = g + (ok ? (long long)r * rs + cc * 8 : 0LL);
        const fx_u32 dst = (fx_u32)__cvta_generic_to_shared(sm + r * (D + 8) + cc * 8);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                     :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
    }
}

// A 0-d bias: 0 when finite (the softmax ignores a constant), else itself (base 2).
__device__ __forceinline__ float fx_bias(const fx_u16* bias) {
    const float b = fx_to_float(bias[0]);
    return (b - b == 0.f) ? 0.f : b;
}

__device__ __forceinline__ float fx_quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float fx_quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The forward pass of one (batch entry, tile of 64 queries). q (N, L, D), k and v (N, S, D),
// out (N, L, D) (written with want_out), lse (N, L) float32 (base 2, with want_stats),
// dout (N, L, D) and delta (N, L) float32 (rowsum(dout * out), with want_stats); q, k, v,
// out and dout through their layouts lq, lk, lv, lo, lg (lse and delta contiguous). With
// want_stats == 2, out is the forward output, read for delta: the P V products (and the V
// tiles) are skipped: the kernel for that is its own instance (PV false), so the other
// keeps its registers.
template <int D, bool PV>
__device__ __forceinline__ void fx_flash_fwd(
        const fx_u16* __restrict__ q, const fx_u16* __restrict__ k,
        const fx_u16* __restrict__ v, const fx_u16* __restrict__ bias,
        fx_u16* __restrict__ out, float* __restrict__ lse, const fx_u16* __restrict__ dout,
        float* __restrict__ delta, fx_lay lq, fx_lay lk, fx_lay lv, fx_lay lo, fx_lay lg,
        int nb, int L, int S, float scale_log2, int causal, int want_out, int want_stats) {
    // Two buffers of K and V tiles (dynamic shared memory): tile t + 1 is loaded
    // (cp.async) while tile t is used.
    extern __shared__ __align__(16) unsigned char fx_smem[];
    fx_u16* sK0 = reinterpret_cast<fx_u16*>(fx_smem);
    fx_u16* sV0 = sK0 + FX_TILE * (D + 8);
    fx_u16* sK1 = sV0 + FX_TILE * (D + 8);
    fx_u16* sV1 = sK1 + FX_TILE * (D + 8);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const long long n = blockIdx.x;
    const int n1 = (int)blockIdx.x / nb, n2 = (int)blockIdx.x - n1 * nb;
    const int i0 = (gridDim.y - 1 - blockIdx.y) * FX_TILE;  // the longest rows first
    // The offsets of this batch entry's k, v, out and dout (read from shared memory after
    // barriers: registers would spill at D = 64).
    __shared__ long long fx_base[4];
    if (threadIdx.x == 0) {
        fx_base[0] = fx_off(lk, n1, n2, 0);
        fx_base[1] = fx_off(lv, n1, n2, 0);
        fx_base[2] = fx_off(lo, n1, n2, 0);
        fx_base[3] = fx_off(lg, n1, n2, 0);
    }
    q += fx_off(lq, n1, n2, i0);
    const float bb = fx_bias(bias);
    constexpr bool pv = PV;

    // This warp's 16 rows of Q, as A fragments, through the second K buffer; the first
    // K and V tiles into the first buffers.
    fx_cp_tile<D>(sK1, q, lq.rs, min(FX_TILE, L - i0));
    fx_cp_tile<D>(sK0, k + fx_off(lk, n1, n2, 0), lk.rs, min(FX_TILE, S));
    if (pv) fx_cp_tile<D>(sV0, v + fx_off(lv, n1, n2, 0), lv.rs, min(FX_TILE, S));
    fx_cp_commit();
    fx_cp_wait<0>();
    __syncthreads();
    fx_u32 qf[D / 16][4];
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
        fx_ldm4(qf[ks], sK1 + (warp * 16 + (lane & 15)) * (D + 8) + ks * 16 + (lane >> 4) * 8);
    __syncthreads();

    float o[D / 8][4];
#pragma unroll
    for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
    float m[2] = {FX_MINUS_INF, FX_MINUS_INF}, l[2] = {0.f, 0.f};
    const int row0 = i0 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8
    const int kend = causal ? min(S, i0 + FX_TILE) : S;
    for (int j0 = 0, it = 0; j0 < kend; j0 += FX_TILE, ++it) {
        const fx_u16* sK = (it & 1) ? sK1 : sK0;
        const fx_u16* sV = (it & 1) ? sV1 : sV0;
        if (j0 + FX_TILE < kend) {  // the next tile into the other buffers (last read in
            // the previous iteration, which ended with a barrier)
            const int jn = j0 + FX_TILE;
            fx_cp_tile<D>((it & 1) ? sK0 : sK1, k + fx_base[0] + (long long)jn * lk.rs, lk.rs,
                          min(FX_TILE, S - jn));
            if (pv)
                fx_cp_tile<D>((it & 1) ? sV0 : sV1, v + fx_base[1] + (long long)jn * lv.rs,
                              lv.rs, min(FX_TILE, S - jn));
            fx_cp_commit();
            fx_cp_wait<1>();
        } else {
            fx_cp_wait<0>();
        }
        __syncthreads();
        float s[8][4];
#pragma unroll
        for (int nb = 0; nb < 8; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
            for (int nb2 = 0; nb2 < 4; ++nb2) {
                fx_u32 b[4];
                fx_ldm4(b, sK + (nb2 * 16 + (lane & 7) + (lane >> 4) * 8) * (D + 8) + ks * 16
                               + ((lane >> 3) & 1) * 8);
                fx_mma(s[2 * nb2], qf[ks], b[0], b[1]);
                fx_mma(s[2 * nb2 + 1], qf[ks], b[2], b[3]);
            }
        }
        const bool mask = (j0 + FX_TILE > S) || (causal && j0 + FX_TILE - 1 > i0 + warp * 16);
#pragma unroll
        for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float x = s[nb][e] * scale_log2 + bb;
                if (mask) {
                    const int j = j0 + nb * 8 + 2 * t4 + (e & 1), i = row0 + (e >> 1) * 8;
                    if (j >= S || (causal && j > i)) x = FX_MINUS_INF;
                }
                s[nb][e] = x;
            }
        }
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nb = 0; nb < 8; ++nb) {
            mx[0] = fmaxf(mx[0], fmaxf(s[nb][0], s[nb][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[nb][2], s[nb][3]));
        }
        float base[2], alpha[2], rs[2] = {0.f, 0.f};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fx_quad_max(mx[r]);
            base[r] = (mx[r] == FX_MINUS_INF) ? 0.f : mx[r];  // a row masked so far
            alpha[r] = fx_exp2(m[r] - base[r]);
            m[r] = mx[r];
        }
#pragma unroll
        for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) s[nb][e] = fx_exp2(s[nb][e] - base[e >> 1]);
            rs[0] += s[nb][0] + s[nb][1];
            rs[1] += s[nb][2] + s[nb][3];
        }
        l[0] = l[0] * alpha[0] + rs[0];
        l[1] = l[1] * alpha[1] + rs[1];
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
            o[d][0] *= alpha[0]; o[d][1] *= alpha[0];
            o[d][2] *= alpha[1]; o[d][3] *= alpha[1];
        }
        // O += P V, P's accumulator fragments reused as A fragments.
        if (pv) {
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                const fx_u32 a[4] = {fx_pack(s[2 * kk][0], s[2 * kk][1]),
                                     fx_pack(s[2 * kk][2], s[2 * kk][3]),
                                     fx_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                     fx_pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
                for (int d2 = 0; d2 < D / 16; ++d2) {
                    fx_u32 b[4];
                    fx_ldm4_t(b, sV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * (D + 8)
                                     + d2 * 16 + (lane >> 4) * 8);
                    fx_mma(o[2 * d2], a, b[0], b[1]);
                    fx_mma(o[2 * d2 + 1], a, b[2], b[3]);
                }
            }
        }
        __syncthreads();
    }

    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] = fx_quad_sum(l[r]);
        inv[r] = (l[r] == 0.f) ? 0.f : 1.f / l[r];  // a fully masked row gives zeros
    }
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
        o[d][0] *= inv[0]; o[d][1] *= inv[0];
        o[d][2] *= inv[1]; o[d][3] *= inv[1];
    }
    if (want_out && pv) {
        out += fx_base[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = row0 + r * 8;
            if (i < L) {
#pragma unroll
                for (int d = 0; d < D / 8; ++d)
                    *reinterpret_cast<fx_u32*>(out + (long long)i * lo.rs + d * 8 + 2 * t4) =
                        fx_pack(o[d][2 * r], o[d][2 * r + 1]);
            }
        }
    }
    if (want_stats) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = row0 + r * 8;
            float acc = 0.f;
            if (i < L && pv) {
                const fx_u16* dr = dout + fx_base[3] + (long long)i * lg.rs;
#pragma unroll
                for (int d = 0; d < D / 8; ++d) {
                    const fx_u32 w = *reinterpret_cast<const fx_u32*>(dr + d * 8 + 2 * t4);
                    acc += o[d][2 * r] * fx_to_float((fx_u16)(w & 0xffffu))
                         + o[d][2 * r + 1] * fx_to_float((fx_u16)(w >> 16));
                }
            } else if (i < L) {  // the stored output
                const fx_u16* dr = dout + fx_base[3] + (long long)i * lg.rs;
                const fx_u16* orow = out + fx_base[2] + (long long)i * lo.rs;
#pragma unroll 4
                for (int d = 0; d < D / 8; ++d) {
                    const fx_u32 w = *reinterpret_cast<const fx_u32*>(dr + d * 8 + 2 * t4);
                    const fx_u32 x = *reinterpret_cast<const fx_u32*>(orow + d * 8 + 2 * t4);
                    acc += fx_to_float((fx_u16)(x & 0xffffu)) * fx_to_float((fx_u16)(w & 0xffffu))
                         + fx_to_float((fx_u16)(x >> 16)) * fx_to_float((fx_u16)(w >> 16));
                }
            }
            acc = fx_quad_sum(acc);
            if (i < L && t4 == 0) {
                lse[n * L + i] = (l[r] == 0.f) ? FX_POS_INF : m[r] + log2f(l[r]);
                delta[n * L + i] = acc;
            }
        }
    }
}

// The backward pass of one (batch entry, tile of 64 keys): dk, dv (N, S, D) written in the
// operand type, dq (N, L, D) float32 added to (atomicAdd; zeroed by the caller). lse and
// delta from fx_flash_fwd (want_stats). Shared memory (dynamic): K, V, Q, dO tiles
// (row stride D + 8; Q and dO double-buffered for D <= 64), dS^T (64 x 72) and 64 values
// each of lse and delta. q, k, v, dout, dk and dv through their layouts lq, lk, lv, lg,
// ldk, ldv (lse, delta and dq contiguous).
template <int D>
__device__ __forceinline__ void fx_flash_bwd(
        const fx_u16* __restrict__ q, const fx_u16* __restrict__ k,
        const fx_u16* __restrict__ v, const fx_u16* __restrict__ bias,
        const fx_u16* __restrict__ dout, const float* __restrict__ lse,
        const float* __restrict__ delta, float* __restrict__ dq, fx_u16* __restrict__ dk,
        fx_u16* __restrict__ dv, fx_lay lq, fx_lay lk, fx_lay lv, fx_lay lg, fx_lay ldk,
        fx_lay ldv, int nb, int L, int S, float scale_log2, float scale, int causal) {
    extern __shared__ __align__(16) unsigned char fx_smem[];
    constexpr int RS = D + 8, DSS = FX_TILE + 8;
    fx_u16* sK = reinterpret_cast<fx_u16*>(fx_smem);
    fx_u16* sV = sK + FX_TILE * RS;
    // Q and dO tiles: two buffers each when D <= 64 (tile t + 1 loaded while tile t is
    // used), else one (loaded at the start of each iteration).
    constexpr int NB = (D <= 64) ? 2 : 1;
    fx_u16* sQ0 = sV + FX_TILE * RS;
    fx_u16* sO0 = sQ0 + FX_TILE * RS;  // dO
    fx_u16* sQ1 = (NB == 2) ? sO0 + FX_TILE * RS : sQ0;
    fx_u16* sO1 = (NB == 2) ? sQ1 + FX_TILE * RS : sO0;
    fx_u16* sS = sO0 + (2 * NB - 1) * FX_TILE * RS;  // dS^T: [key][query]
    float* sL = reinterpret_cast<float*>(sS + FX_TILE * DSS);
    float* sD = sL + FX_TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const long long n = blockIdx.x;
    const int n1 = (int)blockIdx.x / nb, n2 = (int)blockIdx.x - n1 * nb;
    const int j0 = blockIdx.y * FX_TILE;  // the longest (causal) loops first
    // The offsets of this batch entry's q, dout, dk and dv (read from shared memory:
    // registers would spill at D = 64).
    __shared__ long long fx_base[4];
    if (threadIdx.x == 0) {
        fx_base[0] = fx_off(lq, n1, n2, 0);
        fx_base[1] = fx_off(lg, n1, n2, 0);
        fx_base[2] = fx_off(ldk, n1, n2, 0);
        fx_base[3] = fx_off(ldv, n1, n2, 0);
    }
    __syncthreads();
    lse += n * L;
    delta += n * L;
    dq += n * L * D;
    k += fx_off(lk, n1, n2, j0);
    v += fx_off(lv, n1, n2, j0);
    const float bb = fx_bias(bias);
    const int istart = causal ? j0 : 0;  // (a multiple of the tile)
    fx_cp_tile<D>(sK, k, lk.rs, min(FX_TILE, S - j0));
    fx_cp_tile<D>(sV, v, lv.rs, min(FX_TILE, S - j0));
    if (istart < L) {
        fx_cp_tile<D>(sQ0, q + fx_base[0] + (long long)istart * lq.rs, lq.rs,
                      min(FX_TILE, L - istart));
        fx_cp_tile<D>(sO0, dout + fx_base[1] + (long long)istart * lg.rs, lg.rs,
                      min(FX_TILE, L - istart));
    }
    fx_cp_commit();

    float dk_acc[D / 8][4], dv_acc[D / 8][4];
#pragma unroll
    for (int d = 0; d < D / 8; ++d) {
        dk_acc[d][0] = dk_acc[d][1] = dk_acc[d][2] = dk_acc[d][3] = 0.f;
        dv_acc[d][0] = dv_acc[d][1] = dv_acc[d][2] = dv_acc[d][3] = 0.f;
    }
    const int key0 = j0 + warp * 16 + g;  // this thread's keys: key0 and key0 + 8
    for (int i0 = istart, it = 0; i0 < L; i0 += FX_TILE, ++it) {
        const fx_u16* sQ = (it & 1) ? sQ1 : sQ0;  // (the same buffers when NB == 1)
        const fx_u16* sO = (it & 1) ? sO1 : sO0;
        const int in = i0 + FX_TILE;
        if (NB == 2 && in < L) {  // the next tile into the other buffers (last read in the
            // previous iteration, which ended with a barrier)
            fx_cp_tile<D>((it & 1) ? sQ0 : sQ1, q + fx_base[0] + (long long)in * lq.rs, lq.rs,
                          min(FX_TILE, L - in));
            fx_cp_tile<D>((it & 1) ? sO0 : sO1, dout + fx_base[1] + (long long)in * lg.rs,
                          lg.rs, min(FX_TILE, L - in));
            fx_cp_commit();
            fx_cp_wait<1>();
        } else {
            if (NB == 1 && it > 0) {  // (the buffers were last read before the last barrier)
                fx_cp_tile<D>(sQ0, q + fx_base[0] + (long long)i0 * lq.rs, lq.rs,
                              min(FX_TILE, L - i0));
                fx_cp_tile<D>(sO0, dout + fx_base[1] + (long long)i0 * lg.rs, lg.rs,
                              min(FX_TILE, L - i0));
                fx_cp_commit();
            }
            fx_cp_wait<0>();
        }
        if (threadIdx.x < FX_TILE) {
            const int i = i0 + threadIdx.x;
            sL[threadIdx.x] = (i < L) ? lse[i] : FX_POS_INF;
            sD[threadIdx.x] = (i < L) ? delta[i] : 0.f;
        }
        __syncthreads();
        // S^T = K Q^T (16 keys x 64 queries per warp) and dP^T = V dO^T.
        float s[8][4], dp[8][4];
#pragma unroll
        for (int nb = 0; nb < 8; ++nb)
            s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] =
                dp[nb][0] = dp[nb][1] = dp[nb][2] = dp[nb][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
            fx_u32 ak[4], av[4];
            fx_ldm4(ak, sK + (warp * 16 + (lane & 15)) * RS + ks * 16 + (lane >> 4) * 8);
            fx_ldm4(av, sV + (warp * 16 + (lane & 15)) * RS + ks * 16 + (lane >> 4) * 8);
#pragma unroll
            for (int nb2 = 0; nb2 < 4; ++nb2) {
                const int off = (nb2 * 16 + (lane & 7) + (lane >> 4) * 8) * RS + ks * 16
                                + ((lane >> 3) & 1) * 8;
                fx_u32 b[4];
                fx_ldm4(b, sQ + off);
                fx_mma(s[2 * nb2], ak, b[0], b[1]);
                fx_mma(s[2 * nb2 + 1], ak, b[2], b[3]);
                fx_ldm4(b, sO + off);
                fx_mma(dp[2 * nb2], av, b[0], b[1]);
                fx_mma(dp[2 * nb2 + 1], av, b[2], b[3]);
            }
        }
        // P^T = exp2(S^T - lse), masked; dS^T = P^T (dP^T - delta).
        const bool mask = (i0 + FX_TILE > L) || (j0 + FX_TILE > S)
                          || (causal && j0 + FX_TILE - 1 > i0);
#pragma unroll
        for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int c = nb * 8 + 2 * t4 + (e & 1);  // query i0 + c
                float p = fx_exp2(s[nb][e] * scale_log2 + bb - sL[c]);
                if (mask) {
                    const int i = i0 + c, j = key0 + (e >> 1) * 8;
                    if (i >= L || j >= S || (causal && j > i)) p = 0.f;
                }
                s[nb][e] = p;
                dp[nb][e] = p * (dp[nb][e] - sD[c]);
            }
        }
        // dV += P^T dO, dK += dS^T Q (B operands: dO and Q, keys of k = queries).
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            const fx_u32 ap[4] = {fx_pack(s[2 * kk][0], s[2 * kk][1]),
                                  fx_pack(s[2 * kk][2], s[2 * kk][3]),
                                  fx_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  fx_pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
            const fx_u32 as[4] = {fx_pack(dp[2 * kk][0], dp[2 * kk][1]),
                                  fx_pack(dp[2 * kk][2], dp[2 * kk][3]),
                                  fx_pack(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                                  fx_pack(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
            // dS^T to shared memory for dQ: rows key - j0, columns query - i0.
            fx_u32* srow0 = reinterpret_cast<fx_u32*>(sS + (warp * 16 + g) * DSS + kk * 16
                                                      + 2 * t4);
            fx_u32* srow1 = reinterpret_cast<fx_u32*>(sS + (warp * 16 + g + 8) * DSS + kk * 16
                                                      + 2 * t4);
            srow0[0] = as[0];
            srow1[0] = as[1];
            srow0[4] = as[2];
            srow1[4] = as[3];
#pragma unroll
            for (int d2 = 0; d2 < D / 16; ++d2) {
                const int off = (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * RS + d2 * 16
                                + (lane >> 4) * 8;
                fx_u32 b[4];
                fx_ldm4_t(b, sO + off);
                fx_mma(dv_acc[2 * d2], ap, b[0], b[1]);
                fx_mma(dv_acc[2 * d2 + 1], ap, b[2], b[3]);
                fx_ldm4_t(b, sQ + off);
                fx_mma(dk_acc[2 * d2], as, b[0], b[1]);
                fx_mma(dk_acc[2 * d2 + 1], as, b[2], b[3]);
            }
        }
        __syncthreads();
        // dQ (this warp's 16 queries) += dS K: A = dS from dS^T (transposed loads), B = K.
        {
            float acc[D / 8][4];
#pragma unroll
            for (int d = 0; d < D / 8; ++d) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                fx_u32 a[4];
                fx_ldm4_t(a, sS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * DSS + warp * 16
                                 + ((lane >> 3) & 1) * 8);
#pragma unroll
                for (int d2 = 0; d2 < D / 16; ++d2) {
                    fx_u32 b[4];
                    fx_ldm4_t(b, sK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * RS
                                     + d2 * 16 + (lane >> 4) * 8);
                    fx_mma(acc[2 * d2], a, b[0], b[1]);
                    fx_mma(acc[2 * d2 + 1], a, b[2], b[3]);
                }
            }
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int i = i0 + warp * 16 + g + r * 8;
                if (i < L) {
                    float* row = dq + (long long)i * D + 2 * t4;
#pragma unroll
                    for (int d = 0; d < D / 8; ++d) {
                        atomicAdd(row + d * 8, acc[d][2 * r] * scale);
                        atomicAdd(row + d * 8 + 1, acc[d][2 * r + 1] * scale);
                    }
                }
            }
        }
        __syncthreads();
    }
    fx_cp_wait<0>();  // (K and V when no query tile was visited)
    dk += fx_base[2];
    dv += fx_base[3];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int j = key0 + r * 8;
        if (j < S) {
#pragma unroll
            for (int d = 0; d < D / 8; ++d) {
                *reinterpret_cast<fx_u32*>(dk + (long long)j * ldk.rs + d * 8 + 2 * t4) =
                    fx_pack(dk_acc[d][2 * r] * scale, dk_acc[d][2 * r + 1] * scale);
                *reinterpret_cast<fx_u32*>(dv + (long long)j * ldv.rs + d * 8 + 2 * t4) =
                    fx_pack(dv_acc[d][2 * r], dv_acc[d][2 * r + 1]);
            }
        }
    }
}

// dq (float32, contiguous (N, L, E)) rounded to the operand type into y (layout ly, nb):
// pairs of elements per thread (E even).
extern "C" __global__ void functx_flash_cast_@T@(const float2* __restrict__ x,
                                                fx_u16* __restrict__ y, long long pairs,
                                                int L, int E, long long y_s1, long long y_s2,
                                                int y_rs, int nb) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < pairs) {
        const float2 a = x[i];
        const long long row = 2 * i / E;  // of the N * L rows
        const int col = (int)(2 * i - row * E);
        const int n = (int)(row / L), r = (int)(row - (long long)n * L);
        const int n1 = n / nb, n2 = n - n1 * nb;
        *reinterpret_cast<fx_u32*>(y + fx_off(fx_lay{y_s1, y_s2, y_rs}, n1, n2, r) + col) =
            fx_pack(a.x, a.y);
    }
}
"""

# The forward kernel twice: "fwd" (with the P V products) and "stats" (without).
_FWD_WRAPPER = r"""
extern "C" __global__ void __launch_bounds__(128, @MINF@) functx_flash_@KIND@_e@E@_@T@(
        const fx_u16* q, const fx_u16* k, const fx_u16* v, const fx_u16* bias, fx_u16* out,
        float* lse, const fx_u16* dout, float* delta, @FWD@, int nb, int L, int S,
        float scale_log2, int causal, int want_out, int want_stats) {
    fx_flash_fwd<@E@, @PV@>(q, k, v, bias, out, lse, dout, delta, @FWD@_CALL, nb, L, S,
                            scale_log2, causal, want_out, want_stats);
}
"""

_WRAPPERS = (_FWD_WRAPPER.replace("@KIND@", "fwd").replace("@PV@", "true")
             + _FWD_WRAPPER.replace("@KIND@", "stats").replace("@PV@", "false") + r"""

extern "C" __global__ void __launch_bounds__(128, @MINB@) functx_flash_bwd_e@E@_@T@(
        const fx_u16* q, const fx_u16* k, const fx_u16* v, const fx_u16* bias,
        const fx_u16* dout, const float* lse, const float* delta, float* dq, fx_u16* dk,
        fx_u16* dv, @BWD@, int nb, int L, int S, float scale_log2, float scale,
        int causal) {
    fx_flash_bwd<@E@>(q, k, v, bias, dout, lse, delta, dq, dk, dv, @BWD@_CALL, nb, L, S,
                      scale_log2, scale, causal);
}
""")


def _tag(dtype: Any) -> str:
    return "bf16" if np.dtype(dtype) == BFLOAT16 else "f16"


def source(dtype: Any) -> str:
    """The CUDA C source of every flash kernel for ``dtype`` (float16 or bfloat16)."""
    return _source(_tag(dtype))


@functools.lru_cache(maxsize=None)
def _source(tag: str) -> str:
    body = _SOURCE.replace("@BF16@", "1" if tag == "bf16" else "0").replace("@T@", tag)
    # Blocks per SM the registers must allow (the shared memory allows them): forward 4
    # (at most 128 registers a thread) for E <= 64, else 3 (168); backward 3 for E <= 64.
    wrappers = layout.wrappers(_WRAPPERS, {"@FWD@": ("q", "k", "v", "out", "dout"),
                                           "@BWD@": ("q", "k", "v", "dout", "dk", "dv")})
    return body + "".join(wrappers.replace("@E@", str(e)).replace("@T@", tag)
                          .replace("@MINF@", "4" if e <= 64 else "3")
                          .replace("@MINB@", "3" if e <= 64 else "1") for e in HEAD_DIMS)


def _function(xp: Any, kind: str, e: int, dtype: Any) -> Any:
    tag = _tag(dtype)
    # The source has none of raw_function's placeholders; the float32 key adds no prefix.
    return raw_function(xp, source(dtype), f"functx_flash_{kind}_e{e}_{tag}",
                        np.dtype(np.float32))


def _function_cast(xp: Any, dtype: Any) -> Any:
    return raw_function(xp, source(dtype), f"functx_flash_cast_{_tag(dtype)}",
                        np.dtype(np.float32))


def supported(xp: Any, q: Any, k: Any, v: Any, b: Any, softcap: float | None) -> bool:
    """Whether the flash kernels handle this attention call: CuPy arrays of float16 or
    bfloat16, no soft-cap, a 0-d bias, head dims ``E == Ev`` in :data:`HEAD_DIMS` and at
    least one query and one key."""
    return layout.supported(xp, q, k, v, b, softcap, (np.dtype(np.float16), BFLOAT16),
                            HEAD_DIMS)


def _bias(xp: Any, b: Any, dt: np.dtype) -> Any:
    if not isinstance(b, xp.ndarray):
        b = xp.asarray(b)
    return b.astype(dt, copy=False).reshape(())


def _forward(xp: Any, ops: dict, nb: int, bias: Any, lse: Any, delta: Any, n: int,
             scale: float, causal: bool, want_out: bool, want_stats: int) -> None:
    """The forward kernel ("stats" where it reads the output: ``want_stats`` 2) on ``ops``
    (see :func:`functx.primitives.cuda._flash_layout.launch_forward`)."""
    q = ops["q"][0]
    e = q.shape[-1]
    fn = _function(xp, "stats" if want_stats == 2 else "fwd", e, q.dtype)
    layout.launch_forward(fn, _fwd_shared_bytes(e), _THREADS, _TILE, ops, nb, bias, lse, delta,
                          n, scale, causal, want_out, want_stats)


def flash_attention(xp: Any, q: Any, k: Any, v: Any, b: Any, *, scale: float,
                    causal: bool) -> Any:
    """``dot_product_attention`` (no soft-cap, 0-d bias) by the flash forward kernel.

    Args:
        xp: cupy.
        q, k, v: ``(..., L, E)``, ``(..., S, E)``, ``(..., S, E)`` of float16 or bfloat16
            (see :func:`supported`).
        b: the 0-d bias.
        scale, causal: as for ``dot_product_attention``.

    Returns:
        The output ``(..., L, E)`` in the operands' dtype.

    Example:
        >>> out = flash_attention(cupy, q, k, v, cupy.zeros((), q.dtype), scale=0.125,
        ...                       causal=True)
    """
    dt = np.dtype(q.dtype)
    n, L, S = math.prod(q.shape[:-2]), q.shape[-2], k.shape[-2]
    layout.check_sizes("flash attention", n, L, S, _TILE)
    ops, nb = layout.operands(xp, {"q": q, "k": k, "v": v})
    ops["out"] = layout.output_like(xp, q, dt, nb)
    ops["dout"] = ops["out"]  # (unused)
    out = ops["out"][0]
    _forward(xp, ops, nb, _bias(xp, b, dt), out, out, n, scale, causal, True, False)
    return out


def _fwd_shared_bytes(e: int) -> int:
    """Dynamic shared memory of the forward kernel: two buffers of K and V tiles (rows
    padded by 8 elements)."""
    return 2 * 4 * _TILE * (e + 8)


def _bwd_shared_bytes(e: int) -> int:
    """Dynamic shared memory of the backward kernel: K and V tiles, Q and dO tiles (two
    buffers each when ``e <= 64``), dS^T (64 x 72) and 64 floats each of lse and delta."""
    tiles = 2 + 2 * (2 if e <= 64 else 1)
    return 2 * (tiles * _TILE * (e + 8) + _TILE * (_TILE + 8)) + 2 * 4 * _TILE


def flash_attention_grad(xp: Any, q: Any, k: Any, v: Any, b: Any, g: Any, *, scale: float,
                         causal: bool, bias_grad: bool, out: Any = None) -> tuple:
    """``dot_product_attention_grad`` (no soft-cap, 0-d bias) by the flash kernels: the
    forward kernel for each row's log-sum-exp and ``rowsum(g * out)``, the backward kernel
    (dq added up in float32), and dq rounded to the dtype. Given the forward output
    ``out``, the forward kernel reads it for ``rowsum(g * out)`` (as FlashAttention-2 does)
    and skips its ``P V`` products; without it, it computes the output again.

    Args:
        xp: cupy.
        q, k, v, b: as for :func:`flash_attention`.
        g: the output's cotangent ``(..., L, E)``.
        scale, causal: as for ``dot_product_attention_grad``.
        bias_grad: also return the bias's cotangent: zeros of its shape and dtype (the
            softmax ignores a constant added to every logit).
        out: the forward output ``(..., L, E)`` for these operands, or None.

    Returns:
        ``(dq, dk, dv)``, and ``dbias`` with ``bias_grad``, in the operands' dtype.

    Example:
        >>> dq, dk, dv = flash_attention_grad(cupy, q, k, v, cupy.zeros((), q.dtype), g,
        ...                                   scale=0.125, causal=True, bias_grad=False)
    """
    dt = np.dtype(q.dtype)
    n, L, S, e = math.prod(q.shape[:-2]), q.shape[-2], k.shape[-2], q.shape[-1]
    layout.check_sizes("flash attention", n, L, S, _TILE)
    ops, nb = layout.grad_operands(xp, q, k, v, g, out)
    bias = _bias(xp, b, dt)
    f32 = np.dtype(np.float32)
    lse, delta = xp.empty((n, L), f32), xp.empty((n, L), f32)
    _forward(xp, ops, nb, bias, lse, delta, n, scale, causal, False,
             2 if out is not None else 1)
    dq32 = xp.zeros((n, L, e), f32)  # (contiguous scratch)
    ops["dk"] = layout.output_like(xp, k, dt, nb)
    ops["dv"] = layout.output_like(xp, v, dt, nb)
    names = ("q", "k", "v", "dout", "dk", "dv")
    q1, k1, v1, g1, dk, dv = (ops[a][0] for a in names)
    strides = sum((layout.args(ops[a][1]) for a in names), ())
    layout.launch(_function(xp, "bwd", e, dt), (n, -(-S // _TILE)), _THREADS,
                  _bwd_shared_bytes(e),
                  (q1, k1, v1, bias, g1, lse, delta, dq32, dk, dv) + strides
                  + (np.int32(nb), np.int32(L), np.int32(S), np.float32(scale * layout.LOG2E),
                     np.float32(scale), np.int32(causal)))
    dq, dq_strides = layout.output_like(xp, q, dt, nb)
    pairs = n * L * e // 2
    _function_cast(xp, dt)((-(-pairs // 256),), (256,),
                           (dq32, dq, np.int64(pairs), np.int32(L), np.int32(e))
                           + layout.args(dq_strides) + (np.int32(nb),))
    outs = (dq, dk, dv)
    if bias_grad:
        outs += (xp.zeros(tuple(np.shape(b)), np.dtype(getattr(b, "dtype", dt))),)
    return outs
