"""FSDP memory per GPU against data parallelism (issue 18's target: about 1/N of the
parameter and optimizer memory plus one layer).

The transformer of ``examples/data_parallel.py`` at d = 1024, 8 heads, d_ff 4096, sequence
64, 8 layers (384 MiB of float32 parameters, 48 MiB per layer; plain SGD, so no optimizer
state), batch 2 per GPU, so that parameters rather than activations dominate. Each mode
runs ``fx.pmap`` of one training step on 1, 2 and 4 GPUs: ``dp`` (replicated parameters,
``pmean`` of the gradient) and ``fsdp`` (each GPU holds a 1/N shard of every parameter;
each layer all-gathers its parameters just before use inside ``checkpoint``, so the
backward pass gathers again instead of keeping them; the gradient comes back
reduce-scattered). Printed per row: the peak memory of one step on the busiest GPU
(CuPy's pool, ``fx.memory_stats``), what the GPU held before the step (the state), and
params / N + one layer for reference.

    python benchmarks/bench_fsdp_memory.py            # needs >= 2 GPUs (uses up to 4)
    SMALL=1 FUNCTX_CPU_DEVICES=4 python benchmarks/bench_fsdp_memory.py   # CPU smoke test
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

import functx as fx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_multi_gpu import load_example  # noqa: E402

SMALL = bool(os.environ.get("SMALL"))


def main() -> None:
    ex = load_example()
    ex.D_MODEL, ex.HEADS, ex.D_FF, ex.SEQ = (32, 4, 64, 8) if SMALL else (1024, 8, 4096, 64)
    layers, per_gpu = (2, 2) if SMALL else (8, 2)
    rng = np.random.default_rng(0)
    params = ex.init_params(rng, layers, np.float32)
    p_bytes = sum(v.nbytes for p in params for v in p.values())
    layer_bytes = sum(v.nbytes for v in params[0].values())
    shapes = [{k: v.shape for k, v in p.items()} for p in params]
    devices = fx.devices("cuda") or [fx.Device("cpu", k) for k in range(4)]
    mib = 2.0 ** 20
    print(f"parameters {p_bytes / mib:.0f} MiB, one layer {layer_bytes / mib:.0f} MiB, "
          f"SGD (no optimizer state), batch {per_gpu} per GPU, on {devices[0].platform}\n")
    print("| GPUs | mode | peak per GPU MiB | held before the step MiB | params / N + one "
          "layer MiB |\n|---:|---|---:|---:|---:|")
    for n in (k for k in (1, 2, 4) if k <= len(devices)):
        devs = devices[:n]
        x = rng.normal(size=(n, per_gpu, ex.SEQ, ex.D_MODEL)).astype(np.float32)
        y = rng.normal(size=(n, per_gpu)).astype(np.float32)
        xs, ys = fx.device_put_sharded(list(x), devs), fx.device_put_sharded(list(y), devs)

        def fsdp_step(s, x, y, n=n):
            loss, g = fx.value_and_grad(ex.fsdp_loss)(s, shapes, x, y, True)
            return (fx.tree.map(lambda w, gw: w - 1e-3 * gw / n, s, g),
                    fx.lax.pmean(loss, "dp"))

        def dp_step(p, x, y):
            loss, g = fx.value_and_grad(ex.loss_fn)(p, x, y)
            loss, g = fx.lax.pmean((loss, g), "dp")
            return fx.tree.map(lambda w, gw: w - 1e-3 * gw, p, g), loss

        for mode, fn in (("dp", dp_step), ("fsdp", fsdp_step)):
            state = (fx.device_put_replicated(params, devs) if mode == "dp" else fx.tree.map(
                lambda leaf: fx.device_put_sharded(list(ex.shard_leaf(leaf, n)), devs),
                params))
            step = fx.pmap(fn, axis_name="dp", devices=devs)
            state, loss = step(state, xs, ys)
            np.asarray(loss)
            for d in devs:
                fx.reset_peak_memory_stats(d)
            held = max(fx.memory_stats(d).get("bytes_in_use") or 0 for d in devs)
            state, loss = step(state, xs, ys)
            np.asarray(loss)
            peak = max(fx.memory_stats(d).get("peak_bytes_in_use") or 0 for d in devs)
            print(f"| {n} | {mode} | {peak / mib:.0f} | {held / mib:.0f} | "
                  f"{(p_bytes / n + layer_bytes) / mib:.0f} |", flush=True)
            del state, step


if __name__ == "__main__":
    main()
