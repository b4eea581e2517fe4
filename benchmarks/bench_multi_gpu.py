"""Multi-GPU benchmark: weak scaling of data-parallel training with fx.pmap, FSDP memory,
and the bus bandwidth of functx's psum against NCCL's own all-reduce.

1. ``scaling``: one data-parallel training step (forward, backward, pmean of the
   gradients, SGD update) of examples/data_parallel.py's transformer at d=512, 8 heads,
   FF 2048, sequence 256, 4 layers, float32, with the per-GPU batch fixed (8), on 1, 2, 4...
   GPUs. Weak-scaling efficiency = t(1 GPU) / t(N GPUs) (target: >= 90% on 4 GPUs).
   The same step in FSDP mode (parameters sharded, all-gathered per layer, each layer a
   checkpoint so the backward pass gathers again) is timed too,
   and the peak memory per GPU of one DP and one FSDP step is reported.
2. ``busbw``: all-reduce of a 256 MiB float32 buffer per GPU: ``fx.pmap(psum)`` on
   placed inputs, against ``cupy.cuda.nccl`` allReduce called directly (grouped, one
   stream per GPU). Bus bandwidth = bytes * 2 (N - 1) / N / time, as nccl-tests reports
   it (target: functx within 10% of NCCL). Timed two ways: each call waited for (latency,
   the host's launch time included), and 10 calls back to back before one wait, per call,
   as nccl-tests times its figure (the host's work then overlaps the GPUs').

Times are medians of interleaved repeats (_harness.py), each step waiting for every GPU.

Usage (a host with 2 or more GPUs and CuPy)::

    python benchmarks/bench_multi_gpu.py [--repeats 20] [--warmup 3] [--only scaling,busbw]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")
os.environ.setdefault("CUPY_TF32", "0")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import functx as fx  # noqa: E402
from _harness import Timing, environment_report, log, markdown_table, measure  # noqa: E402


def load_example():
    spec = importlib.util.spec_from_file_location("data_parallel",
                                                  ROOT / "examples" / "data_parallel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.D_MODEL, mod.HEADS, mod.D_FF, mod.SEQ = 512, 8, 2048, 256
    return mod


def sync(tree) -> None:
    for leaf in fx.tree.leaves(tree, is_leaf=lambda x: isinstance(x, fx.Sharded)):
        fx.block_until_ready(leaf.shards if isinstance(leaf, fx.Sharded) else leaf)


def scaling(gpus, repeats: int, warmup: int) -> str:
    ex = load_example()
    per_gpu, layers, lr = 8, 4, 1e-3
    rng = np.random.default_rng(0)
    params = ex.init_params(rng, layers, np.float32)
    shapes = [{k: v.shape for k, v in p.items()} for p in params]
    steps, timings_dp, notes, mem = {}, [], {}, []
    sizes = [n for n in (1, 2, 4, 8) if n <= len(gpus)]
    for n in sizes:
        devs = gpus[:n]
        x = rng.normal(size=(n, per_gpu, ex.SEQ, ex.D_MODEL)).astype(np.float32)
        y = rng.normal(size=(n, per_gpu)).astype(np.float32)
        xs = fx.device_put_sharded(list(x), devs)
        ys = fx.device_put_sharded(list(y), devs)

        def dp_step(p, x, y):
            loss, g = fx.value_and_grad(ex.loss_fn)(p, x, y)
            loss, g = fx.lax.pmean((loss, g), "dp")
            return fx.tree.map(lambda w, gw: w - lr * gw, p, g), loss

        def fsdp_step(s, x, y, n=n):
            loss, g = fx.value_and_grad(ex.fsdp_loss)(s, shapes, x, y, True)  # remat
            return fx.tree.map(lambda w, gw: w - lr * gw / n, s, g), fx.lax.pmean(loss, "dp")

        for mode, fn in (("dp", dp_step), ("fsdp", fsdp_step)):
            if mode == "dp":
                state = fx.device_put_replicated(params, devs)
            else:
                state = fx.tree.map(lambda leaf: fx.device_put_sharded(
                    list(ex.shard_leaf(leaf, n)), devs), params)
            pstep = fx.pmap(fn, axis_name="dp", devices=devs)
            box = {"s": state}

            def run(pstep=pstep, box=box, xs=xs, ys=ys):
                box["s"], loss = pstep(box["s"], xs, ys)
                sync(loss)

            run()
            for d in devs:
                fx.reset_peak_memory_stats(d)
            run()
            peak = max(fx.memory_stats(d).get("peak_bytes_in_use") or 0 for d in devs)
            mem.append(f"- {mode} on {n} GPU(s): peak memory per GPU "
                       f"{fx.backends.format_bytes(peak)}")
            steps[f"{mode} x{n}"] = run
    log("timing the training steps")
    timings = measure(steps, repeats, warmup, block=5)
    by = {t.name: t for t in timings}
    for mode in ("dp", "fsdp"):
        t1 = by[f"{mode} x1"].median
        for n in sizes:
            eff = t1 / by[f"{mode} x{n}"].median
            notes[f"{mode} x{n}"] = f"weak-scaling efficiency {eff:.0%}"
            timings_dp.append(by[f"{mode} x{n}"])
    return ("### Data-parallel and FSDP training step, per-GPU batch 8 (weak scaling)\n\n"
            + markdown_table(timings_dp, "ms/step", 1e3, "dp x1", notes) + "\n\n"
            + "\n".join(mem))


def busbw(gpus, repeats: int, warmup: int) -> str:
    import cupy
    from cupy.cuda import nccl

    n = len(gpus)
    count = (256 << 20) // 4
    ids = [d.id for d in gpus]
    bufs, outs = [], []
    for d in ids:
        with cupy.cuda.Device(d):
            bufs.append(cupy.ones(count, cupy.float32))
            outs.append(cupy.empty(count, cupy.float32))
    comms = nccl.NcclCommunicator.initAll(ids)
    xs = fx.Sharded(bufs, gpus)
    ps = fx.pmap(lambda x: fx.lax.psum(x, "d"), axis_name="d", devices=gpus)

    def sync_all():
        for d in ids:
            with cupy.cuda.Device(d):
                cupy.cuda.get_current_stream().synchronize()

    def raw_nccl_once():
        nccl.groupStart()
        for c, b, o, d in zip(comms, bufs, outs, ids):
            with cupy.cuda.Device(d):
                c.allReduce(b.data.ptr, o.data.ptr, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                            cupy.cuda.get_current_stream().ptr)
        nccl.groupEnd()

    def waited(call):  # one call, waited for on every GPU (latency, host time included)
        def run():
            call()
            sync_all()
        return run

    functx_psum, raw_nccl = waited(lambda: ps(xs)), waited(raw_nccl_once)

    def back_to_back(call):  # as nccl-tests times: BACK_TO_BACK calls, then one wait
        def run():
            for _ in range(BACK_TO_BACK):
                call()
            sync_all()
        return run

    got = np.asarray(fx.to_numpy(ps(xs).shards[0][:4]))
    assert np.allclose(got, n), got
    timings = measure({"NCCL allReduce": raw_nccl, "functx psum": functx_psum,
                       "NCCL allReduce, back to back": back_to_back(raw_nccl_once),
                       "functx psum, back to back": back_to_back(lambda: ps(xs))},
                      repeats, warmup, block=5)
    size = count * 4
    timings = [Timing(t.name, tuple(v / BACK_TO_BACK for v in t.samples))  # per call
               if "back to back" in t.name else t for t in timings]
    notes = {t.name: f"bus bandwidth {size * 2 * (n - 1) / n / t.median / 1e9:.1f} GB/s"
             for t in timings}
    return (f"### All-reduce of 256 MiB float32 per GPU on {n} GPUs\n\n"
            "Each call waits for every GPU (latency, host time included); \"back to back\": "
            f"{BACK_TO_BACK} calls, then one wait, per call (nccl-tests' method).\n\n"
            + markdown_table(timings, "ms", 1e3, "NCCL allReduce", notes))


BACK_TO_BACK = 10


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--only", default="scaling,busbw")
    a = ap.parse_args()
    gpus = fx.devices("cuda")
    if len(gpus) < 2:
        raise SystemExit("bench_multi_gpu.py needs at least two GPUs visible to CuPy.")
    import cupy

    names = [cupy.cuda.runtime.getDeviceProperties(d.id)["name"].decode() for d in gpus]
    print(f"## functx multi-GPU benchmark on {len(gpus)} x {names[0]}\n")
    print(environment_report({}, ROOT) + "\n")
    for part in a.only.split(","):
        log(f"running {part}")
        print({"scaling": scaling, "busbw": busbw}[part](gpus, a.repeats, a.warmup) + "\n")


if __name__ == "__main__":
    main()
