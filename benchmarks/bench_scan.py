"""Loops benchmark: ``grad`` of an RNN written with ``functx.lax.scan`` beside a Python loop
in functx, PyTorch eager and JAX ``jit(grad(scan))``.

The model: an Elman RNN ``h = tanh(x U + h W + b)``, hidden 256, batch 32, inputs of 64
features, float32, over T = 1000 and 10,000 steps; the loss is the mean of ``sum(h_t *
r)`` over the steps (every step's output is used). Each system computes the gradient with
respect to ``(W, U, b)``:

* ``functx scan``: ``jit(grad(loss))`` with ``lax.scan`` (one equation for the loop);
* ``functx scan, checkpoint="body"``: the body checkpointed (O(carry) kept per step);
* ``functx scan, checkpoint="sqrt"``: about sqrt(T) checkpointed segments (O(sqrt T));
* ``functx Python loop``: ``grad`` of the same loop written in Python (concrete tracing:
  one equation per operation per step), and ``jit`` of it for T <= 1000 (its trace grows
  with T);
* ``PyTorch eager``: the Python loop with autograd;
* ``JAX jit(scan)``: ``jax.jit(jax.grad(loss))`` with ``jax.lax.scan``.

Measured, each case in a fresh process (glibc's malloc thresholds fixed so freed arrays go
back to the system, as in bench_memory.py):

* ``trace``: functx: ``make_trace`` of the gradient function (what ``jit`` traces on its
  first call); JAX: ``jit(grad(loss)).lower(...).compile()`` (tracing and XLA
  compilation); "-" for the eager systems (the Python loop under ``grad`` retraces at
  every call, inside its step time);
* ``step``: the median of the timed calls;
* ``peak``: the growth of the resident set over one gradient evaluation (VmHWM reset
  before it); for functx also the NumPy allocations' peak (tracemalloc, exact);
* ``grad check``: the largest relative difference of the gradient to functx scan's.

Usage::

    python benchmarks/bench_scan.py [--T 1000 10000] [--hidden 256] [--batch 32]
                                    [--repeats 3] [--no-peers]

The report (markdown) goes to stdout, progress to stderr. Linux only (``/proc``).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import (MALLOC_ENV, CpuMeter, environment_report, log, mb,  # noqa: E402
                      relative_error, rss_growth, traced_peak)

SYSTEMS = ("functx-scan", "functx-scan-body", "functx-scan-sqrt", "functx-loop",
           "functx-loop-jit", "torch", "jax")
NAMES = {"functx-scan": "functx scan", "functx-scan-body": 'functx scan, checkpoint="body"',
         "functx-scan-sqrt": 'functx scan, checkpoint="sqrt"',
         "functx-loop": "functx Python loop (grad)", "functx-loop-jit": "functx Python loop (jit)",
         "torch": "PyTorch eager", "jax": "JAX jit(scan)"}
LOOP_JIT_MAX_T = 1000  # jit of the Python loop traces T steps: beyond this it takes minutes


def make_data(T: int, H: int, B: int, D: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    f32 = np.float32
    return {"W": (rng.standard_normal((H, H)) / np.sqrt(H)).astype(f32),
            "U": (rng.standard_normal((D, H)) / np.sqrt(D)).astype(f32),
            "b": np.zeros(H, f32), "h0": np.zeros((B, H), f32),
            "xs": rng.standard_normal((T, B, D)).astype(f32),
            "r": (rng.standard_normal(H) / np.sqrt(H)).astype(f32)}


# ------------------------------------------------------------------------------------------
# The systems: each returns (step function, gradient as NumPy arrays)


def functx_system(system: str, d: dict, device: str = "cpu"
                  ) -> tuple[Callable, Callable, Callable | None]:
    import functx as fx
    import functx.numpy as fnp
    from functx import lax

    T = d["xs"].shape[0]
    if device != "cpu":
        d = fx.device_put(d, device)
    xs, h0, r = d["xs"], d["h0"], d["r"]
    mode = {"functx-scan-body": "body", "functx-scan-sqrt": "sqrt"}.get(system)

    def loss_scan(p):
        def step(h, x):
            h = fnp.tanh(x @ p[1] + h @ p[0] + p[2])
            return h, h @ r
        return fnp.sum(lax.scan(step, h0, xs, checkpoint=mode)[1]) / T

    def loss_loop(p):
        h, total = h0, 0.0
        for t in range(T):
            h = fnp.tanh(xs[t] @ p[1] + h @ p[0] + p[2])
            total = total + fnp.sum(h @ r)
        return total / T

    params = (d["W"], d["U"], d["b"])
    if system == "functx-loop":
        g, trace = fx.grad(loss_loop), None
    else:
        raw = fx.grad(loss_loop if system == "functx-loop-jit" else loss_scan)
        g = fx.jit(raw)
        trace = lambda: fx.make_trace(raw)(params)  # noqa: E731 (what jit traces)
    return ((lambda: fx.block_until_ready(g(params))),
            (lambda out: [fx.to_numpy(x) for x in out]), trace)


def torch_system(d: dict, device: str = "cpu") -> tuple[Callable, Callable, None]:
    import torch

    torch.set_grad_enabled(True)
    W, U, b = (torch.tensor(d[k], requires_grad=True, device=device) for k in ("W", "U", "b"))
    xs, h0, r = (torch.tensor(d[k], device=device) for k in ("xs", "h0", "r"))
    T = xs.shape[0]

    def step():
        h, total = h0, 0.0
        for t in range(T):
            h = torch.tanh(xs[t] @ U + h @ W + b)
            total = total + (h @ r).sum()
        out = torch.autograd.grad(total / T, (W, U, b))
        if device != "cpu":
            torch.cuda.synchronize()
        return out

    return step, lambda out: [x.cpu().numpy() for x in out], None


def jax_system(d: dict) -> tuple[Callable, Callable, Callable]:
    import jax
    import jax.numpy as jnp

    xs, h0, r = (jnp.asarray(d[k]) for k in ("xs", "h0", "r"))
    T = d["xs"].shape[0]

    def loss(p):
        def step(h, x):
            h = jnp.tanh(x @ p[1] + h @ p[0] + p[2])
            return h, h @ r
        return jnp.sum(jax.lax.scan(step, h0, xs)[1]) / T

    g = jax.jit(jax.grad(loss))
    params = tuple(jnp.asarray(d[k]) for k in ("W", "U", "b"))

    def step():
        return jax.block_until_ready(g(params))

    def trace():  # tracing and XLA compilation
        return jax.jit(jax.grad(loss)).lower(params).compile()

    return step, lambda out: [np.asarray(x) for x in out], trace


# ------------------------------------------------------------------------------------------
# One case, in a fresh process


def gpu_peak(system: str, step: Callable) -> tuple[int, Any]:
    """The peak GPU memory of one gradient evaluation above what was held before it."""
    if system.startswith("functx"):
        import functx as fx
        fx.reset_peak_memory_stats("cuda")
        before = fx.memory_stats("cuda")["bytes_in_use"]
        out = step()
        stats = fx.memory_stats("cuda")
        # a step replayed as a CUDA graph keeps its working memory in the graph's own pool
        # (held before and after the step): count it as the step's
        return stats["peak_bytes_in_use"] - before + stats.get("cuda_graph_bytes", 0), out
    if system == "torch":
        import torch
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = step()
        return torch.cuda.max_memory_allocated() - before, out
    import jax
    stats = jax.devices()[0].memory_stats() or {}
    out = step()
    after = jax.devices()[0].memory_stats() or {}
    return after.get("peak_bytes_in_use", 0) - stats.get("bytes_in_use", 0), out


def run_case(system: str, T: int, H: int, B: int, D: int, repeats: int, ref: str,
             device: str = "cpu") -> dict:
    d = make_data(T, H, B, D)
    if system.startswith("functx"):
        step, to_np, trace = functx_system(system, d, device)
    elif system == "torch":
        step, to_np, trace = torch_system(d, device)
    else:
        step, to_np, trace = jax_system(d)
    trace_s = None
    if trace is not None:
        t0 = time.perf_counter()
        trace()
        trace_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = step()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = step()
        times.append(time.perf_counter() - t0)
    del out
    peak, out = rss_growth(step) if device == "cpu" else gpu_peak(system, step)
    traced = None
    if system.startswith("functx") and device == "cpu":
        traced, out = traced_peak(step)
    grads = to_np(out)
    err = None
    if ref and os.path.exists(ref):
        want = np.load(ref)
        err = max(relative_error(g, want[f"g{i}"]) for i, g in enumerate(grads))
    elif ref:
        np.savez(ref, **{f"g{i}": g for i, g in enumerate(grads)})
    step_s = statistics.median(times)
    return {"first": first, "step": step_s, "trace": trace_s, "peak": peak,
            "traced": traced, "err": err}


def spawn(args: list[str], device: str = "cpu") -> dict:
    env = dict(os.environ, **MALLOC_ENV)
    if device != "cpu":
        env.pop("JAX_PLATFORMS")  # JAX on its GPU
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"case {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--T", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    parser.add_argument("--case", nargs=2, metavar=("SYSTEM", "T"), help=argparse.SUPPRESS)
    parser.add_argument("--ref", default="", help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="cuda: every system on the GPU; peak = GPU memory above the "
                             "inputs (functx's and PyTorch's allocators, JAX's device stats)")
    args = parser.parse_args()
    if args.case:
        res = run_case(args.case[0], int(args.case[1]), args.hidden, args.batch, args.inputs,
                       args.repeats, args.ref, args.device)
        print(json.dumps(res))
        return

    systems = [s for s in args.systems if s in SYSTEMS]
    have = {m: importlib.util.find_spec(m) is not None for m in ("torch", "jax")}
    if args.no_peers:
        systems = [s for s in systems if s.startswith("functx")]
    systems = [s for s in systems if s.startswith("functx") or have[s]]
    meter = CpuMeter()
    modules = {}
    for m in ("torch", "jax"):
        if m in systems:
            modules[m] = __import__(m)
    print(f"# grad of an Elman RNN with scan (hidden {args.hidden}, batch {args.batch}, "
          f"{args.inputs} inputs, float32, {args.device.upper()})\n")
    print(environment_report(modules, ROOT))
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for T in args.T:
            ref = os.path.join(tmp, f"ref{T}.npz")
            rows = []
            for s in ["functx-scan"] + [s for s in systems if s != "functx-scan"]:
                if s == "functx-loop-jit" and T > LOOP_JIT_MAX_T:
                    continue
                if s not in systems and s != "functx-scan":
                    continue
                log(f"T={T}: {NAMES[s]}")
                res = spawn(["--case", s, str(T), "--hidden", str(args.hidden), "--batch",
                             str(args.batch), "--inputs", str(args.inputs), "--repeats",
                             str(args.repeats), "--ref", ref, "--device", args.device],
                            args.device)
                rows.append((s, res))
            base = dict(rows)["functx-scan"]
            print(f"\n## T = {T}\n")
            peak_name = "peak RSS MiB" if args.device == "cpu" else "peak GPU MiB"
            print(f"| system | trace s | step ms | functx scan ÷ system (step) | {peak_name} "
                  "| NumPy peak MiB | grad check |")
            print("|---|---:|---:|---:|---:|---:|---|")
            for s, r in rows:
                # (eager systems trace nothing ahead: the Python loop under grad retraces
                # at every call, which is in its step time)
                trace = "-" if r["trace"] is None else f"{r['trace']:.3f}"
                err = ("reference" if s == "functx-scan" else
                       "-" if r["err"] is None else f"{r['err']:.1e}")
                print(f"| {NAMES[s]} | {trace} | {r['step'] * 1e3:.1f} "
                      f"| {base['step'] / r['step']:.2f} | {mb(r['peak'])} "
                      f"| {mb(r['traced'])} | {err} |")
    print("\n" + meter.report())


if __name__ == "__main__":
    main()
