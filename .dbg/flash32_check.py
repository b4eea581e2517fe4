"""GPU check of the float32 flash attention kernels (run from the repository root on the GPU):

    python .dbg/flash32_check.py            # errors per case, then timings
    python .dbg/flash32_check.py --time     # timings only

Errors: max error (relative to the reference's max |.|; a zero cotangent relative to the
largest of the three) of out, dq, dk, dv against the float64 CPU attention on the same
float32 inputs, flash32 and the old float32 path (FLASH32 = False) side by side.
Timings (CUDA events, medians of 50 after 5 warm-ups): forward and forward+backward at
(8, 12, 512, 64) causal float32: the flash32 kernels (eager primitive calls), the old path,
a jitted grad (CUDA graph), and torch's F.scaled_dot_product_attention in float32 (TF32
off; its default backend for float32: the memory-efficient kernel).
"""
import sys
import time

import cupy
import numpy as np

sys.path.insert(0, ".")
import functx as fx  # noqa: E402
import functx.nn as fnn  # noqa: E402
import functx.numpy as fnp  # noqa: E402
from functx.primitives import attention as A  # noqa: E402
from functx.primitives.cuda import attention as CA  # noqa: E402

RNG = np.random.default_rng(0)


def dev(x):
    return fx.device_put(x, fx.Device("cuda", 0))


def maxabs(x):
    return float(np.max(np.abs(np.asarray(x, np.float64)), initial=0.0))


def err(got, want, scale=None):
    got = cupy.asnumpy(got).astype(np.float64) if isinstance(got, cupy.ndarray) else got
    want = np.asarray(want, np.float64)
    return maxabs(got - want) / (scale or maxabs(want) or 1.0)


def check():
    print(f"{'case':40s} {'path':6s}  out       dq        dk        dv")
    worst = 0.0
    for batch, L, S, E in [((2, 3), 64, 64, 64), ((2,), 17, 100, 64), ((), 1, 300, 128),
                           ((3,), 300, 1, 64), ((1, 2), 100, 17, 128), ((2,), 130, 130, 32),
                           ((2, 4), 512, 512, 64), ((1, 2), 1000, 777, 128),
                           ((), 1000, 1000, 32)]:
        for causal in (False, True):
            shapes = [batch + (L, E), batch + (S, E), batch + (S, E), batch + (L, E)]
            low = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
            hi = [a.astype(np.float64) for a in low]
            sc = 1 / np.sqrt(E)
            want = [A.dot_product_attention(*hi[:3], scale=sc, causal=causal)]
            want += list(A.dot_product_attention_grad(*hi[:3], None, hi[3], scale=sc,
                                                      causal=causal))
            top = max(maxabs(w) for w in want[1:])
            scales = [None] + [maxabs(w) if maxabs(w) > 1e-9 * top else top for w in want[1:]]
            d = [dev(a) for a in low]
            res = {}
            for flag in (True, False):
                CA.FLASH32 = flag
                got = [A.dot_product_attention(*d[:3], scale=sc, causal=causal)]
                got += list(A.dot_product_attention_grad(*d[:3], None, d[3], scale=sc,
                                                         causal=causal))
                res[flag] = [err(g, w, s) for g, w, s in zip(got, want, scales)]
                name = f"{batch} L={L} S={S} E={E} c={int(causal)}"
                print(f"{name:40s} {'flash' if flag else 'old':6s} "
                      + " ".join(f"{e:.2e}" for e in res[flag]))
            CA.FLASH32 = True
            for a, b in zip(res[True], res[False]):
                worst = max(worst, a / 1e-5, a / max(2 * b, 1e-6))
    print(f"worst flash32 error / allowed (1e-5 and max(2 x old, 1e-6)): {worst:.2f} "
          f"({'OK' if worst <= 1 else 'FAIL'})")


def bench(fn, n=50):
    for _ in range(5):
        fn()
    cupy.cuda.Device().synchronize()
    ts = []
    for _ in range(n):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


def torch_bench(fn, n=50):
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return float(np.median(ts))


def timings():
    B, H, L, E = 8, 12, 512, 64
    print(f"\n({B}, {H}, {L}, {E}) causal float32, ms (median of 50), "
          f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    low = [RNG.standard_normal((B, H, L, E)).astype(np.float32) for _ in range(4)]
    q, k, v, g = (dev(a) for a in low)
    sc = 1 / np.sqrt(E)

    def fwd():
        A.dot_product_attention(q, k, v, scale=sc, causal=True)

    def step():
        A.dot_product_attention(q, k, v, scale=sc, causal=True)
        A.dot_product_attention_grad(q, k, v, None, g, scale=sc, causal=True)

    res = {}
    for flag, tag in ((True, "flash32"), (False, "old")):
        CA.FLASH32 = flag
        res[f"{tag} fwd"] = bench(fwd)
        res[f"{tag} fwd+bwd"] = bench(step)
    CA.FLASH32 = True

    def loss(q, k, v, w):
        return fnp.sum(fnn.scaled_dot_product_attention(q, k, v, is_causal=True) * w)

    jg = fx.jit(fx.grad(loss, argnums=(0, 1, 2)))
    res["jit(grad) flash32"] = bench(lambda: jg(q, k, v, g))
    try:
        import torch
        import torch.nn.functional as F

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        tq, tk, tv, tg = (torch.from_numpy(a).cuda() for a in low)
        for t in (tq, tk, tv):
            t.requires_grad_(True)

        def tfwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)

        def tstep():  # (autograd.grad: no accumulation into .grad)
            out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
            torch.autograd.grad(out, (tq, tk, tv), tg)

        res["torch fwd"] = torch_bench(tfwd)
        res["torch fwd+bwd"] = torch_bench(tstep)
        # Agreement with torch (float32 both).
        out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
        mine = A.dot_product_attention(q, k, v, scale=sc, causal=True)
        print(f"  |flash32 - torch| / max|torch| = "
              f"{err(mine, out.detach().cpu().numpy()):.2e}")
    except Exception as e:  # noqa: BLE001
        print("torch:", type(e).__name__, e)
    print("  " + "\n  ".join(f"{k:22s} {v:.3f}" for k, v in res.items()))
    if "torch fwd+bwd" in res:
        t = res["torch fwd+bwd"]
        print(f"  ratio to torch fwd+bwd: flash32 {res['flash32 fwd+bwd'] / t:.2f}, "
              f"old {res['old fwd+bwd'] / t:.2f}, jit(grad) {res['jit(grad) flash32'] / t:.2f}"
              f" (target <= 1.3); fwd: flash32 {res['flash32 fwd'] / res['torch fwd']:.2f}")


if __name__ == "__main__":
    t0 = time.time()
    if "--time" not in sys.argv:
        check()
    timings()
    print(f"({time.time() - t0:.0f} s)")
