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
V tiles are staged in shared memory (rows padded by 16 bytes: conflict-free ``ldmatrix``;
``.trans`` for V). The logits are handled in base 2 (``scale * log2(e)`` folded in,
``ex2.approx``). With flags the same kernel also writes the per-row log-sum-exp (base 2)
and ``D = rowsum(dO * O)`` with ``O`` in float32 on chip (the backward's first pass; the
output itself is not written then).

Backward (``functx_flash_bwd``): one block of 4 warps per (batch entry, tile of 64 keys),
each warp owning 16 keys; the loop runs over tiles of 64 queries from the causal start.
Per tile: ``S^T = K Q^T``, ``P^T = exp2(S^T - lse)``, ``dV += P^T dO``,
``dP^T = V dO^T``, ``dS^T = P^T (dP^T - D)``, ``dK += dS^T Q`` (all in registers, P^T and
dS^T reused as A operands), and ``dQ += dS K`` through ``dS^T`` in shared memory, added
with float32 ``atomicAdd`` into a float32 scratch, cast to the dtype at the end.

A 0-d bias adds one constant to every logit, which the softmax ignores: the kernels read
it only to propagate a non-finite one (``-inf`` masks every row: zeros, as the reference;
NaN gives NaN). The sources need no header (raw ``unsigned short`` storage, conversions in
inline PTX); they are compiled per dtype on first use through
:func:`functx.primitives.cuda._kernels.raw_function` (which substitutes nothing in them).
Importing this module needs no CuPy. Everything runs on the current CuPy stream, with no
host synchronisation (graph-capturable).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.primitives.cuda._kernels import BFLOAT16, raw_function

# Head dims with a kernel (E == Ev).
HEAD_DIMS = (32, 64, 128)

_TILE = 64  # query rows and keys per tile (4 warps of 16 rows)
_THREADS = 128
_LOG2E = 1.4426950408889634

_SOURCE = r"""
#define FX_BF16 @BF16@
typedef unsigned int fx_u32;
typedef unsigned short fx_u16;

#define FX_TILE 64
#define FX_NEG_INF __int_as_float((int)0xff800000u)
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

// Rows 0 .. 63 of a (rows, D) tile at g into shared memory (row stride D + 8); rows from
// `valid` on are zeros. 16-byte loads (D a multiple of 8, g 16-byte aligned).
template <int D>
__device__ __forceinline__ void fx_load_tile(fx_u16* sm, const fx_u16* g, int valid) {
    constexpr int CH = D / 8;
    for (int c = threadIdx.x; c < FX_TILE * CH; c += blockDim.x) {
        const int r = c / CH, cc = c - r * CH;
        uint4 x = make_uint4(0u, 0u, 0u, 0u);
        if (r < valid) x = *reinterpret_cast<const uint4*>(g + (long long)r * D + cc * 8);
        *reinterpret_cast<uint4*>(sm + r * (D + 8) + cc * 8) = x;
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
// dout (N, L, D) and delta (N, L) float32 (rowsum(dout * out), with want_stats).
template <int D>
__device__ __forceinline__ void fx_flash_fwd(
        const fx_u16* __restrict__ q, const fx_u16* __restrict__ k,
        const fx_u16* __restrict__ v, const fx_u16* __restrict__ bias,
        fx_u16* __restrict__ out, float* __restrict__ lse, const fx_u16* __restrict__ dout,
        float* __restrict__ delta, int L, int S, float scale_log2, int causal, int want_out,
        int want_stats) {
    __shared__ __align__(16) fx_u16 sK[FX_TILE * (D + 8)];
    __shared__ __align__(16) fx_u16 sV[FX_TILE * (D + 8)];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const long long n = blockIdx.x;
    const int i0 = (gridDim.y - 1 - blockIdx.y) * FX_TILE;  // the longest rows first
    q += (n * L + i0) * D;
    k += n * S * D;
    v += n * S * D;
    const float bb = fx_bias(bias);

    // This warp's 16 rows of Q, as A fragments, through shared memory.
    fx_load_tile<D>(sK, q, min(FX_TILE, L - i0));
    __syncthreads();
    fx_u32 qf[D / 16][4];
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
        fx_ldm4(qf[ks], sK + (warp * 16 + (lane & 15)) * (D + 8) + ks * 16 + (lane >> 4) * 8);
    __syncthreads();

    float o[D / 8][4];
#pragma unroll
    for (int d = 0; d < D / 8; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
    float m[2] = {FX_NEG_INF, FX_NEG_INF}, l[2] = {0.f, 0.f};
    const int row0 = i0 + warp * 16 + g;  // this thread's rows: row0 and row0 + 8
    const int kend = causal ? min(S, i0 + FX_TILE) : S;
    for (int j0 = 0; j0 < kend; j0 += FX_TILE) {
        fx_load_tile<D>(sK, k + (long long)j0 * D, min(FX_TILE, S - j0));
        fx_load_tile<D>(sV, v + (long long)j0 * D, min(FX_TILE, S - j0));
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
                    if (j >= S || (causal && j > i)) x = FX_NEG_INF;
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
            base[r] = (mx[r] == FX_NEG_INF) ? 0.f : mx[r];  // a row masked so far
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
    if (want_out) {
        out += n * L * D;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = row0 + r * 8;
            if (i < L) {
#pragma unroll
                for (int d = 0; d < D / 8; ++d)
                    *reinterpret_cast<fx_u32*>(out + (long long)i * D + d * 8 + 2 * t4) =
                        fx_pack(o[d][2 * r], o[d][2 * r + 1]);
            }
        }
    }
    if (want_stats) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int i = row0 + r * 8;
            float acc = 0.f;
            if (i < L) {
                const fx_u16* dr = dout + (n * L + i) * D;
#pragma unroll
                for (int d = 0; d < D / 8; ++d) {
                    const fx_u32 w = *reinterpret_cast<const fx_u32*>(dr + d * 8 + 2 * t4);
                    acc += o[d][2 * r] * fx_to_float((fx_u16)(w & 0xffffu))
                         + o[d][2 * r + 1] * fx_to_float((fx_u16)(w >> 16));
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
"""

_WRAPPERS = r"""
extern "C" __global__ void __launch_bounds__(128) functx_flash_fwd_e@E@_@T@(
        const fx_u16* q, const fx_u16* k, const fx_u16* v, const fx_u16* bias, fx_u16* out,
        float* lse, const fx_u16* dout, float* delta, int L, int S, float scale_log2,
        int causal, int want_out, int want_stats) {
    fx_flash_fwd<@E@>(q, k, v, bias, out, lse, dout, delta, L, S, scale_log2, causal,
                      want_out, want_stats);
}
"""


def _tag(dtype: Any) -> str:
    return "bf16" if np.dtype(dtype) == BFLOAT16 else "f16"


def source(dtype: Any) -> str:
    """The CUDA C source of every flash kernel for ``dtype`` (float16 or bfloat16)."""
    tag = _tag(dtype)
    body = _SOURCE.replace("@BF16@", "1" if tag == "bf16" else "0")
    return body + "".join(_WRAPPERS.replace("@E@", str(e)).replace("@T@", tag)
                          for e in HEAD_DIMS)


def _function(xp: Any, kind: str, e: int, dtype: Any) -> Any:
    tag = _tag(dtype)
    # The source has none of raw_function's placeholders; the float32 key adds no prefix.
    return raw_function(xp, source(dtype), f"functx_flash_{kind}_e{e}_{tag}",
                        np.dtype(np.float32))


def is_cupy(xp: Any) -> bool:
    """Whether ``xp`` is CuPy (the flash kernels run on CuPy arrays only)."""
    return getattr(xp, "__name__", "") == "cupy"


def supported(xp: Any, q: Any, k: Any, v: Any, b: Any, softcap: float | None) -> bool:
    """Whether the flash kernels handle this attention call: CuPy arrays of float16 or
    bfloat16, no soft-cap, a 0-d bias, head dims ``E == Ev`` in :data:`HEAD_DIMS` and at
    least one query and one key."""
    if not is_cupy(xp) or softcap is not None or np.ndim(b) != 0:
        return False
    dt = np.dtype(q.dtype)
    if dt != np.float16 and dt != BFLOAT16:
        return False
    e = q.shape[-1]
    return (e in HEAD_DIMS and k.shape[-1] == e and v.shape[-1] == e
            and q.shape[-2] >= 1 and k.shape[-2] >= 1 and math.prod(q.shape[:-2]) >= 1)


def _operand(xp: Any, a: Any, n: int) -> Any:
    """``a`` as a C-contiguous ``(n, rows, E)`` array whose data is 16-byte aligned."""
    a = xp.ascontiguousarray(a).reshape((n,) + tuple(a.shape[-2:]))
    return a if a.data.ptr % 16 == 0 else a.copy()


def _bias(xp: Any, b: Any, dt: np.dtype) -> Any:
    if not isinstance(b, xp.ndarray):
        b = xp.asarray(b)
    return b.astype(dt, copy=False).reshape(())


def _forward(xp: Any, q3: Any, k3: Any, v3: Any, bias: Any, out: Any, lse: Any, dout: Any,
             delta: Any, scale: float, causal: bool, want_out: bool,
             want_stats: bool) -> None:
    n, L, e = q3.shape
    S = k3.shape[1]
    fn = _function(xp, "fwd", e, q3.dtype)
    grid = (n, -(-L // _TILE))
    fn(grid, (_THREADS,), (q3, k3, v3, bias, out, lse, dout, delta, np.int32(L),
                           np.int32(S), np.float32(scale * _LOG2E), np.int32(causal),
                           np.int32(want_out), np.int32(want_stats)))


def _check_sizes(n: int, L: int, S: int) -> None:
    if n >= 2**31 or -(-max(L, S) // _TILE) >= 65536:
        raise ValueError(f"the flash attention kernels support fewer than 2**31 batch "
                         f"entries and fewer than {65536 * _TILE} queries and keys (got "
                         f"{n}, {L} and {S}).")


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
    lead, L, S = tuple(q.shape[:-2]), q.shape[-2], k.shape[-2]
    n = math.prod(lead)
    _check_sizes(n, L, S)
    q3, k3, v3 = (_operand(xp, a, n) for a in (q, k, v))
    out = xp.empty(q3.shape, dt)
    _forward(xp, q3, k3, v3, _bias(xp, b, dt), out, out, out, out, scale, causal, True,
             False)
    return out.reshape(tuple(q.shape))
