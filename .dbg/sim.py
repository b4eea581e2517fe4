"""CPU emulation of the float32 flash kernels: the CUDA source of _flash32.py compiled with
g++ (one std::thread per CUDA thread, std::barrier for __syncthreads and the shuffles,
cp.async landing either at issue or at the wait: MODE=0/1), driven through _flash32's own
host code with numpy as xp. Usage: python .dbg/sim.py [mode]"""
import ctypes, os, re, subprocess, sys
sys.path.insert(0, ".")  # run from the repository root
import numpy as np
from functx.primitives.cuda import _flash32 as F
from functx.primitives import attention as A

HDR = r"""
#include <barrier>
#include <thread>
#include <vector>
#include <cmath>
#include <cstring>
#include <atomic>
#include <algorithm>
#include <functional>
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__
#define __launch_bounds__(a, b)
struct dim3s { unsigned x, y, z; };
thread_local dim3s threadIdx;
dim3s blockIdx, gridDim, blockDim;
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
using std::min; using std::max;
alignas(16) unsigned char g_smem[240 * 1024];
std::barrier<>* g_bar;
float g_shfl[256];
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float x, int o) {
    g_shfl[threadIdx.x] = x; g_bar->arrive_and_wait();
    float y = g_shfl[threadIdx.x ^ o]; g_bar->arrive_and_wait(); return y;
}
inline unsigned __cvta_generic_to_shared(const void* p) {
    return (unsigned)((const unsigned char*)p - g_smem);
}
struct Pend { unsigned dst; const void* src; int n; };
thread_local std::vector<std::vector<Pend>> g_groups;
thread_local std::vector<Pend> g_open;
inline void fx_sim_land(const Pend& p) {
    if (p.n) std::memcpy(g_smem + p.dst, p.src, 16); else std::memset(g_smem + p.dst, 0, 16);
}
inline void fx_sim_cp(unsigned dst, const void* src, int n) {
#if MODE == 0
    fx_sim_land({dst, src, n});
#else
    g_open.push_back({dst, src, n});
#endif
}
inline void fx_sim_commit() { g_groups.push_back(g_open); g_open.clear(); }
inline void fx_sim_wait(int n) {
    while ((int)g_groups.size() > n) { for (auto& p : g_groups.front()) fx_sim_land(p); g_groups.erase(g_groups.begin()); }
}
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline float4 atomicAdd(float4* p, float4 v) { float* f = (float*)p; atomicAdd(f, v.x); atomicAdd(f + 1, v.y); atomicAdd(f + 2, v.z); atomicAdd(f + 3, v.w); return v; }
inline float2 atomicAdd(float2* p, float2 v) { float* f = (float*)p; atomicAdd(f, v.x); atomicAdd(f + 1, v.y); return v; }
"""

LAUNCH = r"""
extern "C" void sim_launch(int which, int E, int gx, int gy, void** a, int L, int S, float f1, float f2, int i1, int i2, int i3) {
    gridDim = {(unsigned)gx, (unsigned)gy, 1}; blockDim = {256, 1, 1};
    for (int bx = 0; bx < gx; ++bx) for (int by = 0; by < gy; ++by) {
        blockIdx = {(unsigned)bx, (unsigned)by, 0};
        std::memset(g_smem, 0xff, sizeof(g_smem));  // NaN garbage
        std::barrier<> bar(256); g_bar = &bar;
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < 256; ++t) ts.emplace_back([&, t]() {
            threadIdx = {t, 0, 0}; g_groups.clear(); g_open.clear();
            float** p = (float**)a;
            if (which == 0) {
                if (E == 32) functx_flash32_fwd_e32(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], L, S, f1, i1, i2, i3);
                if (E == 64) functx_flash32_fwd_e64(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], L, S, f1, i1, i2, i3);
                if (E == 128) functx_flash32_fwd_e128(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], L, S, f1, i1, i2, i3);
            } else {
                if (E == 32) functx_flash32_bwd_e32(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], L, S, f1, f2, i1);
                if (E == 64) functx_flash32_bwd_e64(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], L, S, f1, f2, i1);
                if (E == 128) functx_flash32_bwd_e128(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], L, S, f1, f2, i1);
            }
        });
        for (auto& th : ts) th.join();
    }
}
"""


def build(mode):
    src = F.source()
    src = src.replace("extern __shared__ __align__(16) unsigned char fx_smem[];",
                      "unsigned char* fx_smem = g_smem;")
    src, n1 = re.subn(r'asm volatile\("cp\.async\.cg\.shared\.global \[%0\], \[%1\], 16, %2;"\s*'
                      r'::\s*"r"\(dst\), "l"\(src\), "r"\(ok \? 16 : 0\) : "memory"\);',
                      "fx_sim_cp(dst, src, ok ? 16 : 0);", src)
    src, n2 = re.subn(r'asm volatile\("cp\.async\.commit_group;" ::: "memory"\);', "fx_sim_commit();", src)
    src, n3 = re.subn(r'asm volatile\("cp\.async\.wait_group %0;" :: "n"\(N\) : "memory"\);', "fx_sim_wait(N);", src)
    assert (n1, n2, n3) == (1, 1, 1), (n1, n2, n3)
    assert "asm" not in src
    path = f"/tmp/flash32_sim{mode}"
    with open(path + ".cpp", "w") as f:
        f.write(f"#define MODE {mode}\n" + ("#define __CUDA_ARCH__ 900\n" if os.environ.get("ARCH90") else "") + HDR + src + LAUNCH)
    subprocess.check_call(["g++", "-std=c++20", "-O2", "-fPIC", "-shared", "-pthread",
                           "-ffp-contract=off", "-o", path + ".so", path + ".cpp"])
    return ctypes.CDLL(path + ".so")


class Fn:
    def __init__(self, lib, which, e):
        self.lib, self.which, self.e = lib, which, e

    def __call__(self, grid, block, args, shared_mem=0):
        assert block == (256,)
        limit = 227 * 1024
        assert shared_mem <= limit, shared_mem
        arrs = [a for a in args if isinstance(a, np.ndarray)]
        scal = [a for a in args if not isinstance(a, np.ndarray)]
        for a in arrs:
            assert a.dtype == np.float32 and a.flags.c_contiguous
        ptrs = (ctypes.c_void_p * 10)(*[a.ctypes.data for a in arrs])
        if self.which == 0:
            L, S, sl, c, wo, ws = scal
            self.lib.sim_launch(0, self.e, grid[0], grid[1], ptrs, int(L), int(S), ctypes.c_float(sl), ctypes.c_float(0), int(c), int(wo), int(ws))
        else:
            L, S, sl, sc, c = scal
            self.lib.sim_launch(1, self.e, grid[0], grid[1], ptrs, int(L), int(S), ctypes.c_float(sl), ctypes.c_float(sc), int(c), 0, 0)


def main():
    mode = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    lib = build(mode)
    lib.sim_launch.argtypes = [ctypes.c_int] * 4 + [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_float, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    F._function = lambda xp, kind, e: Fn(lib, 0 if kind == "fwd" else 1, e)
    F._operand = lambda xp, a, n: np.ascontiguousarray(a).reshape((n,) + a.shape[-2:])
    rng = np.random.default_rng(1)
    worst = 0
    cases = [((2, 3), 64, 64, 64), ((2,), 17, 100, 64), ((), 1, 300, 128), ((3,), 300, 1, 64),
             ((1, 2), 100, 17, 128), ((2,), 130, 130, 32), ((1,), 200, 70, 32), ((1,), 65, 129, 64)]
    only = os.environ.get("CASES")
    if only and only.isdigit():
        cases = cases[:int(only)]
    elif only:
        cases = eval(only)
    for batch, L, S, E in cases:
        for causal in (False, True):
            shapes = [batch + (L, E), batch + (S, E), batch + (S, E), batch + (L, E)]
            x = [rng.standard_normal(s).astype(np.float32) for s in shapes]
            hi = [a.astype(np.float64) for a in x]
            sc = 1 / np.sqrt(E)
            b = np.zeros((), np.float32)
            want = [np.asarray(A.dot_product_attention(*hi[:3], scale=sc, causal=causal))]
            want += list(A.dot_product_attention_grad(*hi[:3], None, hi[3], scale=sc, causal=causal))
            got = [F.flash_attention(np, *x[:3], b, scale=sc, causal=causal)]
            got += list(F.flash_attention_grad(np, *x[:3], b, x[3], scale=sc, causal=causal, bias_grad=False))
            es = [float(np.max(np.abs(g - w))) / (float(np.max(np.abs(w))) or 1.0) for g, w in zip(got, want)]
            worst = max(worst, max(e if e == e else np.inf for e in es))
            print(f"{str(batch):8s} L={L:4d} S={S:4d} E={E:3d} c={int(causal)}  "
                  + " ".join(f"{e:.2e}" for e in es), flush=True)
    # 0-d bias: finite (ignored) and -inf (zeros)
    x = [rng.standard_normal(s).astype(np.float32) for s in [(2, 70, 64), (2, 90, 64), (2, 90, 64), (2, 70, 64)]]
    for bv in (3.5, -np.inf):
        got = F.flash_attention(np, *x[:3], np.float32(bv), scale=0.2, causal=True)
        want = np.asarray(A.dot_product_attention(*[a.astype(np.float64) for a in x[:3]], np.asarray(bv), scale=0.2, causal=True))
        g = F.flash_attention_grad(np, *x[:3], np.asarray(bv, np.float32), x[3], scale=0.2, causal=True, bias_grad=True)
        print("bias", bv, float(np.max(np.abs(got - want))), [float(np.max(np.abs(a))) for a in g[:3]] if bv < 0 else "", g[3])
    print("worst", worst, "OK" if worst < 1e-5 else "FAIL")


main()
