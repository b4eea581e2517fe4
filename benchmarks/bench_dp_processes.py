"""Data-parallel training with one process per GPU (functx.distributed), weak scaling.

The model and per-GPU batch of ``bench_multi_gpu.py``'s scaling rows (the transformer of
``examples/data_parallel.py`` at d=512, 8 heads, d_ff 2048, sequence 256, 4 layers, 8
sequences per GPU, float32), trained the way a multi-process script does it: each rank runs
``jit(value_and_grad)`` of its own batch (which returns the gradient as one flat bucket),
one NCCL all-reduce of that bucket (``functx.distributed.all_reduce``), and a jitted SGD
update. Each jitted step replays as a CUDA graph, so a rank's host time per step is a few
launches, and the ranks do not share one Python interpreter (as ``pmap``'s threads do).

Run it under the launcher for each GPU count; rank 0 prints one markdown row (GPUs, median
ms per step of the slowest rank, rank 0's quartiles, the bucket size, rank 0's first three
losses):

    for n in 1 2 4; do
        python -m functx.distributed.launch --nproc-per-node $n benchmarks/bench_dp_processes.py
    done

With ``--busbw`` each rank instead all-reduces 256 MiB of float32 (functx's
``distributed.all_reduce`` against NCCL's ``allReduce`` on the same communicator) and rank 0
prints ``| ranks | call | ms | bus bandwidth GB/s |`` rows.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import functx as fx
from functx.flatten_util import ravel_pytree

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_multi_gpu import load_example  # noqa: E402  (the model of the scaling rows)

STEPS, WARMUP, PER_GPU, LAYERS, LR = 30, 5, 8, 4, 1e-4
SMOKE = "--smoke" in sys.argv  # tiny sizes (a CPU check of the script)
BUSBW = "--busbw" in sys.argv  # instead: all-reduce bus bandwidth of 256 MiB per rank


def busbw(g, repeats: int = 20) -> None:
    """``functx.distributed.all_reduce`` of 256 MiB of float32 per rank against the same
    NCCL communicator's ``allReduce`` called directly (in place of functx's out-of-place
    call: the same bytes); bus bandwidth = bytes * 2 (N - 1) / N / time, as nccl-tests."""
    import cupy
    from cupy.cuda import nccl

    n, count = g.world_size, (256 << 20) // 4
    x = cupy.ones(count, cupy.float32)
    out = cupy.empty_like(x)
    comm = g._nccl._comm  # cupyx.distributed's NcclCommunicator of this process
    stream = cupy.cuda.get_current_stream()

    def raw():
        comm.allReduce(x.data.ptr, out.data.ptr, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                       stream.ptr)

    def functx_all_reduce():
        return fx.distributed.all_reduce(x)

    rows = []
    for name, f in (("NCCL allReduce", raw), ("functx.distributed.all_reduce",
                                              functx_all_reduce)):
        times = []
        for t in range(repeats + 3):
            stream.synchronize()
            g.barrier()
            t0 = time.perf_counter()
            f()
            stream.synchronize()
            if t >= 3:
                times.append(time.perf_counter() - t0)
        med = float(np.median(times))
        rows.append((name, med))
    if g.rank == 0:
        for name, med in rows:
            bw = count * 4 * 2 * (n - 1) / n / med / 1e9
            print(f"| {n} | {name} | {med * 1e3:.3f} | {bw:.1f} |", flush=True)


def main() -> None:
    D = fx.distributed
    g = D.initialize(timeout=120, check_shapes=False)
    rank, n = g.rank, g.world_size
    if BUSBW:
        busbw(g)
        D.shutdown()
        return
    ex = load_example()
    if SMOKE:
        ex.D_MODEL, ex.HEADS, ex.D_FF, ex.SEQ = 32, 4, 64, 8
    rng = np.random.default_rng(0)
    dev = "cuda" if g.backend == "nccl" else "cpu"  # (the TCP backend: a CPU smoke test)
    params = fx.device_put(ex.init_params(rng, LAYERS, np.float32), dev)
    _, unravel = ravel_pytree(params)
    data = np.random.default_rng(1 + rank)
    x = fx.device_put(data.normal(size=(PER_GPU, ex.SEQ, ex.D_MODEL)).astype(np.float32), dev)
    y = fx.device_put(data.normal(size=(PER_GPU,)).astype(np.float32), dev)

    @fx.jit
    def grads(p, x, y):
        loss, gr = fx.value_and_grad(ex.loss_fn)(p, x, y)
        return loss, ravel_pytree(gr)[0]  # one bucket: one all-reduce

    @fx.jit
    def update(p, flat):
        return fx.tree.map(lambda w, gw: w - LR * gw, p, unravel(flat / n))

    xp = fx.get_backend(dev).xp
    sync = xp.cuda.Device().synchronize if dev == "cuda" else (lambda: None)
    steps, warmup = (STEPS, WARMUP) if dev == "cuda" else (3, 0)
    times, first = [], []
    for t in range(warmup + steps):
        sync()
        t0 = time.perf_counter()
        loss, flat = grads(params, x, y)
        flat = D.all_reduce(flat)
        params = update(params, flat)
        sync()
        if t < 3:
            first.append(float(fx.to_numpy(loss)))
        if t >= warmup:
            times.append(time.perf_counter() - t0)
    ms = np.median(times) * 1e3
    all_ms = fx.to_numpy(D.all_gather(xp.asarray([ms], xp.float64))).ravel()
    if rank == 0:
        print(f"| {n} | {np.max(all_ms):.2f} | {np.percentile(times, 25) * 1e3:.2f}–"
              f"{np.percentile(times, 75) * 1e3:.2f} | {flat.size * 4 / 2**20:.1f} MiB | "
              f"{' '.join(f'{v:.6f}' for v in first)} |", flush=True)
    D.shutdown()


if __name__ == "__main__":
    main()
