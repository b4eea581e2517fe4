"""Memory benchmark: gradient checkpointing in functx beside HIPS autograd, PyTorch and JAX.

The model: a residual MLP of ``L`` pre-norm blocks ``h + W2 gelu(W1 layer_norm(h) + b1) + b2``
(layer norm without affine parameters, tanh-approximated GELU), width 1024, batch 256,
float32, and the mean squared error against a random target. Each system computes the
same gradient under these configurations:

* ``no checkpoint``;
* ``checkpoint per block`` (``fx.checkpoint``, ``autograd.checkpoint``,
  ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``, ``jax.checkpoint``);
* ``checkpoint_sequential, S segments`` with ``S = round(sqrt(L))``
  (``fx.checkpoint_sequential``, ``torch.utils.checkpoint.checkpoint_sequential``; for JAX
  the same split written with ``jax.checkpoint``; the last segment is not checkpointed);
* ``dots_saveable per block`` (functx and JAX policies; PyTorch's selective checkpoint
  saving ``aten.mm``/``aten.addmm``).

Measured, each case in a fresh process:

* ``activation peak``: the peak memory of one gradient evaluation with respect to the
  *input* only (parameters held constant, so no parameter gradients are allocated): the
  memory of activations, residuals and temporary cotangents, which checkpointing trades
  for time;
* ``kept after forward``: what the forward pass holds for the backward pass (functx:
  ``fx.vjp``; autograd: ``make_vjp``; PyTorch: the graph after the forward pass; JAX: not
  observable under jit);
* ``step peak``: the peak of one training step, the gradient with respect to every
  parameter (so it includes the parameter gradients, 8 MiB per block);
* ``step time``: the median training step, configurations of one system interleaved in one
  process, and the ratio to the same system without checkpoint;
* ``gradients``: against functx without checkpoint at the same ``L``: ``bit-identical``, or
  the largest relative difference.

How memory is measured: for the NumPy-based systems (functx, autograd) with
``tracemalloc``, which counts NumPy's allocations exactly; for every system also as the
growth of the resident set over the step (``VmHWM`` after ``/proc/self/clear_refs`` reset
it, minus ``VmRSS`` before), with glibc's ``MALLOC_MMAP_THRESHOLD_`` fixed so that freed
arrays go back to the system at once. PyTorch's and JAX's allocators are invisible to
``tracemalloc``, so their figures are RSS only. Linux only.

Usage::

    python benchmarks/bench_memory.py [--quick] [--repeats N] [--no-peers]

``--quick`` runs ``L = 4, 8`` and one timed repeat (a smoke test). The report (markdown) goes
to stdout, progress to stderr.
"""
from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import functx as fx
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(ROOT))
    import functx as fx
import functx.numpy as fnp

from _harness import (MALLOC_ENV, CpuMeter, environment_report, log, mb, rss_growth,
                      traced_peak)

WIDTH, BATCH, DTYPE = 1024, 256, np.float32
EPS, GELU_C, GELU_K = 1e-5, 0.7978845608028654, 0.044715
CONFIGS = ("none", "block", "seq", "dots")
CONFIG_NAMES = {"none": "no checkpoint", "block": "checkpoint per block",
                "seq": "checkpoint_sequential, {S} segments", "dots": "dots_saveable per block"}
SYSTEM_CONFIGS = {"functx": CONFIGS, "autograd": ("none", "block"), "torch": CONFIGS,
                  "jax": CONFIGS}
TARGET_BLOCK_MEMORY = 0.25  # checkpoint per block: activation peak <= 1/4 of no checkpoint
TARGET_TIME = 1.5           # full recomputation: step time <= 1.5x no checkpoint


def segments_for(L: int) -> int:
    return max(1, round(math.sqrt(L)))


# ------------------------------------------------------------------------------------------
# Data and models


def make_data(L: int, seed: int = 0) -> tuple[list, np.ndarray, np.ndarray]:
    """Parameters (one dict per block), an input batch and a target, all float32."""
    rng = np.random.default_rng(seed)
    scale = 1 / math.sqrt(WIDTH)
    params = [{"w1": (rng.standard_normal((WIDTH, WIDTH)) * scale).astype(DTYPE),
               "b1": (0.1 * rng.standard_normal(WIDTH)).astype(DTYPE),
               "w2": (rng.standard_normal((WIDTH, WIDTH)) * scale / 4).astype(DTYPE),
               "b2": (0.1 * rng.standard_normal(WIDTH)).astype(DTYPE)} for _ in range(L)]
    x = rng.standard_normal((BATCH, WIDTH)).astype(DTYPE)
    y = rng.standard_normal((BATCH, WIDTH)).astype(DTYPE)
    return params, x, y


def block_fn(xnp: Any, mean: Callable, sqrt: Callable, tanh: Callable) -> Callable:
    """One block written against a NumPy-like module."""
    def block(p: dict, h: Any) -> Any:
        c = h - mean(h)
        n = c / sqrt(mean(c * c) + EPS)
        a = n @ p["w1"] + p["b1"]
        g = 0.5 * a * (1.0 + tanh(GELU_C * (a + GELU_K * a * a * a)))
        return h + (g @ p["w2"] + p["b2"])
    return block


def sequential(block: Callable, params: list, config: str, checkpoint: Callable,
               seq: Callable | None) -> Callable:
    """``h -> blocks(h)`` under a configuration (checkpoint: a per-block wrapper)."""
    L = len(params)
    if config == "none":
        def run(h: Any) -> Any:
            for p in params:
                h = block(p, h)
            return h
    elif config in ("block", "dots"):
        wrapped = checkpoint(block)

        def run(h: Any) -> Any:
            for p in params:
                h = wrapped(p, h)
            return h
    elif config == "seq" and seq is not None:
        fns = [functools.partial(block, p) for p in params]
        return lambda h: seq(fns, segments_for(L), h)
    elif config == "seq":  # the same split written with a per-segment checkpoint
        S = segments_for(L)
        size, extra = divmod(L, S)
        groups, start = [], 0
        for s in range(S):
            groups.append(params[start:start + size + (s < extra)])
            start += size + (s < extra)

        def seg(ps: list) -> Callable:
            def run_seg(h: Any) -> Any:
                for p in ps:
                    h = block(p, h)
                return h
            return run_seg

        stages = [checkpoint(lambda ps, h, f=seg: f(ps)(h)) for _ in groups[:-1]]

        def run(h: Any) -> Any:
            for st, ps in zip(stages, groups[:-1]):
                h = st(ps, h)
            return seg(groups[-1])(h)
    else:
        raise ValueError(config)
    return run


class System:
    """One library: a training step, an input-gradient step and a forward-only pass."""

    numpy_based = False

    def __init__(self, config: str, L: int) -> None:
        self.config, self.L = config, L

    def train_step(self) -> Any: ...
    def input_step(self) -> Any: ...
    def forward_kept(self) -> Any: ...
    def grads_to_numpy(self, g: Any) -> np.ndarray: ...


def flat(blocks: list) -> np.ndarray:
    return np.concatenate([np.asarray(b[k], np.float32).ravel()
                           for b in blocks for k in ("w1", "b1", "w2", "b2")])


class Functx(System):
    numpy_based = True

    def __init__(self, config: str, L: int) -> None:
        super().__init__(config, L)
        from functx import checkpoint_policies as cp

        self.params, self.x, self.y = make_data(L)
        block = block_fn(fnp, lambda v: fnp.mean(v, axis=-1, keepdims=True), fnp.sqrt,
                         fnp.tanh)
        policy = cp.dots_saveable if config == "dots" else None
        ck = functools.partial(fx.checkpoint, policy=policy)
        y = self.y

        def loss(params: list, x: Any) -> Any:
            run = sequential(block, params, config, ck,
                             lambda fns, S, h: fx.checkpoint_sequential(fns, S)(h))
            d = run(x) - y
            return fnp.mean(d * d)

        self.loss = loss
        self.g_params = fx.grad(loss)
        self.g_input = fx.grad(loss, argnums=1)

    def train_step(self) -> Any:
        return self.g_params(self.params, self.x)

    def input_step(self) -> Any:
        return self.g_input(self.params, self.x)

    def forward_kept(self) -> Any:
        return fx.vjp(self.loss, self.params, self.x)

    def grads_to_numpy(self, g: Any) -> np.ndarray:
        return flat(g)


class Autograd(System):
    numpy_based = True

    def __init__(self, config: str, L: int) -> None:
        super().__init__(config, L)
        import autograd
        import autograd.numpy as anp

        self.autograd = autograd
        self.params, self.x, self.y = make_data(L)
        block = block_fn(anp, lambda v: anp.mean(v, axis=-1, keepdims=True), anp.sqrt,
                         anp.tanh)
        y = self.y

        def loss(params: list, x: Any) -> Any:
            run = sequential(block, params, config, autograd.checkpoint, None)
            d = run(x) - y
            return anp.mean(d * d)

        self.loss = loss
        self.g_params = autograd.grad(loss)
        self.g_input = autograd.grad(loss, 1)

    def train_step(self) -> Any:
        return self.g_params(self.params, self.x)

    def input_step(self) -> Any:
        return self.g_input(self.params, self.x)

    def forward_kept(self) -> Any:
        return self.autograd.make_vjp(lambda p: self.loss(p, self.x))(self.params)

    def grads_to_numpy(self, g: Any) -> np.ndarray:
        return flat(g)


class Torch(System):
    def __init__(self, config: str, L: int) -> None:
        super().__init__(config, L)
        import torch
        import torch.utils.checkpoint as tc

        self.torch = torch
        params, x, y = make_data(L)
        self.params = [{k: torch.from_numpy(v).requires_grad_(True) for k, v in p.items()}
                       for p in params]
        self.const_params = [{k: torch.from_numpy(v) for k, v in p.items()} for p in params]
        self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)
        block = block_fn(torch, lambda v: v.mean(dim=-1, keepdim=True), torch.sqrt,
                         torch.tanh)
        if config == "dots":
            ops = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default]
            context = functools.partial(tc.create_selective_checkpoint_contexts, ops)
            extra = {"context_fn": context}
        else:
            extra = {}

        def ck(fn: Callable) -> Callable:
            return lambda *a: tc.checkpoint(fn, *a, use_reentrant=False, **extra)

        def seq(fns: list, S: int, h: Any) -> Any:
            return tc.checkpoint_sequential(fns, S, h, use_reentrant=False)

        def loss(params: list, x: Any) -> Any:
            d = sequential(block, params, config, ck, seq)(x) - self.y
            return (d * d).mean()

        self.loss = loss

    def train_step(self) -> Any:
        loss = self.loss(self.params, self.x)
        leaves = [p[k] for p in self.params for k in ("w1", "b1", "w2", "b2")]
        return self.torch.autograd.grad(loss, leaves)

    def input_step(self) -> Any:
        x = self.x.clone().requires_grad_(True)
        return self.torch.autograd.grad(self.loss(self.const_params, x), x)

    def forward_kept(self) -> Any:
        return self.loss(self.params, self.x)

    def grads_to_numpy(self, g: Any) -> np.ndarray:
        return np.concatenate([t.detach().numpy().ravel() for t in g])


class Jax(System):
    def __init__(self, config: str, L: int) -> None:
        super().__init__(config, L)
        import jax
        import jax.numpy as jnp

        self.jax = jax
        params, x, y = make_data(L)
        self.params = jax.device_put(params)
        self.x, y = jax.device_put(x), jax.device_put(y)
        block = block_fn(jnp, lambda v: jnp.mean(v, axis=-1, keepdims=True), jnp.sqrt,
                         jnp.tanh)
        policy = jax.checkpoint_policies.dots_saveable if config == "dots" else None
        ck = functools.partial(jax.checkpoint, policy=policy)

        def loss(params: list, x: Any) -> Any:
            d = sequential(block, params, config, ck, None)(x) - y
            return jnp.mean(d * d)

        self.g_params = jax.jit(jax.grad(loss))
        self.g_input = jax.jit(jax.grad(loss, argnums=1))

    def train_step(self) -> Any:
        return self.jax.block_until_ready(self.g_params(self.params, self.x))

    def input_step(self) -> Any:
        return self.jax.block_until_ready(self.g_input(self.params, self.x))

    def forward_kept(self) -> Any:
        return None

    def grads_to_numpy(self, g: Any) -> np.ndarray:
        return flat(g)


SYSTEMS = {"functx": Functx, "autograd": Autograd, "torch": Torch, "jax": Jax}


# ------------------------------------------------------------------------------------------
# Measuring one case (in its own process)


def run_memory_case(system: str, config: str, L: int, ref_dir: str) -> dict:
    sysobj = SYSTEMS[system](config, L)
    res: dict[str, Any] = {"system": system, "config": config, "L": L}
    g = sysobj.train_step()  # warm-up (and compilation for JAX)
    grads = sysobj.grads_to_numpy(g)
    del g
    ref_path = Path(ref_dir) / f"ref_L{L}.npy"
    if system == "functx" and config == "none":
        np.save(ref_path, grads)
        ref = grads
    else:
        ref = np.load(ref_path)
    res["bit_identical"] = bool(grads.dtype == ref.dtype and np.array_equal(grads, ref))
    res["rel_err"] = float(np.max(np.abs(grads.astype(np.float64) - ref))
                           / np.max(np.abs(ref)))
    del grads, ref
    res["step_rss"] = rss_growth(sysobj.train_step)[0]
    if system == "jax":
        sysobj.input_step()  # compilation
    res["act_rss"] = rss_growth(sysobj.input_step)[0]
    if system == "jax":
        res["kept_rss"] = None
    else:
        res["kept_rss"] = rss_growth(sysobj.forward_kept)[0]
    if sysobj.numpy_based:
        res["step_tm"] = traced_peak(sysobj.train_step)[0]
        res["act_tm"] = traced_peak(sysobj.input_step)[0]
        gc.collect()
        tracemalloc.start()
        held = [sysobj.forward_kept()]  # alive while measured
        res["kept_tm"] = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        held.clear()
    return res


def run_timing(system: str, L: int, configs: tuple, repeats: int) -> dict:
    """Training-step times of every configuration of one system, interleaved."""
    objs = {c: SYSTEMS[system](c, L) for c in configs}
    for o in objs.values():
        o.train_step()
    times: dict[str, list] = {c: [] for c in configs}
    for r in range(repeats):
        order = list(configs[r % len(configs):]) + list(configs[:r % len(configs)])
        for c in order:
            gc.collect()
            t0 = time.perf_counter()
            objs[c].train_step()
            times[c].append(time.perf_counter() - t0)
    out = {"system": system, "L": L, "times": times}
    if system == "functx":
        out["matmuls"] = count_matmuls(objs)
    return out


def count_matmuls(objs: dict) -> str:
    """The number of matrix products one training step runs, per configuration (counted by
    wrapping dot_general's implementation): a deterministic measure of recomputation."""
    from functx.primitives.linalg import dot_general_p

    rule = dot_general_p.impls["generic"]
    calls = [0]

    def counting(xp: Any, *args: Any, **params: Any) -> Any:
        calls[0] += 1
        return rule(xp, *args, **params)

    counts = {}
    dot_general_p.def_impl(counting)
    try:
        for c, o in objs.items():
            calls[0] = 0
            o.train_step()
            counts[c] = calls[0]
    finally:
        dot_general_p.def_impl(rule)
    return ", ".join(f"{c}: {n} matrix products ({n / counts['none']:.2f}x)"
                     for c, n in counts.items())


# ------------------------------------------------------------------------------------------
# The driver


def spawn(args: list[str], fixed_malloc: bool) -> dict:
    """Run this script on one case in a fresh process (glibc's thresholds fixed for the
    memory cases only: it makes every array allocation a fresh mapping, which costs time)."""
    env = dict(os.environ, **MALLOC_ENV) if fixed_malloc else dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"case {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory_cell(r: dict, key: str) -> str:
    """tracemalloc bytes with the RSS growth in parentheses (NumPy systems), or RSS."""
    tm, rss = r.get(f"{key}_tm"), r.get(f"{key}_rss")
    if tm is not None:
        return f"{mb(tm)} ({mb(rss)})"
    return mb(rss)


def config_label(config: str, L: int) -> str:
    return CONFIG_NAMES[config].format(S=segments_for(L))


def grad_cell(r: dict) -> str:
    return "bit-identical" if r["bit_identical"] else f"rel. diff {r['rel_err']:.1e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--case", help=argparse.SUPPRESS)
    ap.add_argument("--timing", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.case:
        system, config, L, ref_dir = json.loads(a.case)
        print(json.dumps(run_memory_case(system, config, L, ref_dir)))
        return
    if a.timing:
        system, L, configs, repeats = json.loads(a.timing)
        print(json.dumps(run_timing(system, L, tuple(configs), repeats)))
        return

    main_L, scale_Ls = (8, (4, 8)) if a.quick else (32, (16, 32, 64))
    repeats = 1 if a.quick else a.repeats
    systems = ["functx"] + ([] if a.no_peers else
                            [s for s in ("autograd", "torch", "jax")
                             if importlib.util.find_spec(s)])
    meter = CpuMeter()
    results: dict[tuple, dict] = {}
    with tempfile.TemporaryDirectory() as ref_dir:
        cases = [("functx", c, main_L) for c in CONFIGS]
        cases += [("functx", c, L) for L in scale_Ls if L != main_L
                  for c in ("none", "block", "seq")]
        cases += [(s, c, main_L) for s in systems[1:] for c in SYSTEM_CONFIGS[s]]
        cases.sort(key=lambda t: (t[2], t[0] != "functx" or t[1] != "none"))
        for system, config, L in cases:
            log(f"memory: {system} {config} L={L}")
            results[(system, config, L)] = spawn(
                ["--case", json.dumps([system, config, L, ref_dir])], fixed_malloc=True)
    timings = {}
    for s in systems:
        log(f"timing: {s} L={main_L}")
        timings[s] = spawn(["--timing", json.dumps([s, main_L, SYSTEM_CONFIGS[s], repeats])],
                           fixed_malloc=False)

    mods = {name: __import__(name) for name in systems[1:] if name != "jax"}
    print("# Memory benchmark: gradient checkpointing\n")
    print(environment_report(mods, ROOT))
    if "jax" in systems:
        import jax

        print(f"- JAX {jax.__version__} on {jax.devices()[0].platform}, float32, "
              "jax.jit(jax.grad(...)) compiled before measuring")
    print(f"- residual MLP, width {WIDTH}, batch {BATCH}, float32; "
          f"{repeats} timed training step(s) per configuration, interleaved; median shown")
    print(f"\n#### L = {main_L} blocks\n")
    print("Memory in MB (2^20 bytes): tracemalloc, with the resident-set growth in "
          "parentheses; PyTorch and JAX: resident-set growth only.\n")
    print("| system | configuration | activation peak | kept after forward | step peak "
          "| step time (s), median (min) | ÷ no checkpoint, median (min) "
          "| gradients vs functx |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for s in systems:
        t = timings[s]["times"]
        base, base_min = statistics.median(t["none"]), min(t["none"])
        for c in SYSTEM_CONFIGS[s]:
            r = results[(s, c, main_L)]
            med, low = statistics.median(t[c]), min(t[c])
            print(f"| {s} | {config_label(c, main_L)} | {memory_cell(r, 'act')} "
                  f"| {memory_cell(r, 'kept')} | {memory_cell(r, 'step')} "
                  f"| {med:.2f} ({low:.2f}) | {med / base:.2f} ({low / base_min:.2f}) "
                  f"| {grad_cell(r)} |")
    print("\n#### Scaling with depth (functx)\n")
    print("| L | configuration | activation peak | kept after forward | step peak "
          "| gradients |")
    print("|---:|---|---:|---:|---:|---|")
    for L in scale_Ls:
        for c in ("none", "block", "seq"):
            r = results[("functx", c, L)]
            print(f"| {L} | {config_label(c, L)} | {memory_cell(r, 'act')} "
                  f"| {memory_cell(r, 'kept')} | {memory_cell(r, 'step')} | {grad_cell(r)} |")

    print("\n#### Targets\n")
    act = {k: v["act_tm"] for k, v in results.items() if k[0] == "functx"}
    ratio = act[("functx", "block", main_L)] / act[("functx", "none", main_L)]
    print(f"- checkpoint per block, activation peak ÷ no checkpoint: {ratio:.3f} "
          f"(target ≤ {TARGET_BLOCK_MEMORY}): {'met' if ratio <= TARGET_BLOCK_MEMORY else 'MISSED'}")
    seq = [act[("functx", "seq", L)] for L in scale_Ls]
    none = [act[("functx", "none", L)] for L in scale_Ls]
    growth = ", ".join(f"{b / a:.2f}" for a, b in zip(seq, seq[1:]))
    growth_none = ", ".join(f"{b / a:.2f}" for a, b in zip(none, none[1:]))
    print(f"- sqrt(L) segments, activation peak growth per doubling of L: {growth} "
          f"(sqrt(2) = 1.41; without checkpoint: {growth_none})")
    t = timings["functx"]["times"]
    tr = statistics.median(t["block"]) / statistics.median(t["none"])
    tr_min = min(t["block"]) / min(t["none"])
    print(f"- full recomputation (checkpoint per block), step time ÷ no checkpoint: {tr:.2f} "
          f"by medians, {tr_min:.2f} by minima (target ≤ {TARGET_TIME}): "
          f"{'met' if max(tr, tr_min) <= TARGET_TIME else 'MISSED'}")
    print(f"  (per step: {timings['functx']['matmuls']})")
    same = all(r["bit_identical"] for k, r in results.items() if k[0] == "functx")
    print(f"- functx gradients bit-identical to no checkpoint in every configuration: "
          f"{'yes' if same else 'NO'}")
    print(meter.report())


if __name__ == "__main__":
    main()
