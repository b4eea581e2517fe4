"""functx ``jit`` on the CPU: the compiler (fused Numba kernels) against replay and JAX.

Workloads (issue 17's rows), each the gradient step under ``jit``:

1. ``chain``: ``sum(op_999(... op_0(x)))`` for x: float64[10], ops cycling ``sin``,
   ``* 0.9``, ``+ 0.3``, ``tanh`` (as benchmarks/bench_cpu.py);
2. ``ew24``: 24 elementwise ops on float32 1024x1024, cycling ``sin``, ``* 0.9``,
   ``tanh``, ``+ 0.1``, ``exp``, ``* 0.5``, then ``sum``;
3. ``mlp``: the 784-256-256-10 tanh MLP, mean squared error, batch 128, float32 (as
   benchmarks/bench_cpu.py).

Systems: ``functx jit (numba)`` (the compiler: passes + fused kernels), ``functx jit
(replay)`` (``FUNCTX_JIT_COMPILER=none``: the trace replayed op by op) and ``jax jit``.
Every system's gradient is checked against functx eager first.

Compile time: the first call of each jitted step, for functx with an empty kernel cache (a
fresh ``FUNCTX_CACHE_DIR``) and for JAX; then a second process with the same cache dir
times functx's first call again (kernels loaded from Numba's disk cache).

Usage::

    python benchmarks/bench_jit_cpu.py [--quick] [--only chain|ew24|mlp] [--repeats N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
if "--child" in sys.argv or "FUNCTX_CACHE_DIR" not in os.environ:
    # an empty kernel cache for this run (the child process reuses the parent's)
    os.environ.setdefault("FUNCTX_CACHE_DIR", tempfile.mkdtemp(prefix="functx-bench-"))
try:
    import functx as fx
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(ROOT))
    import functx as fx
import functx.compiler
import functx.numpy as fnp

from _harness import environment_report, log, markdown_table, measure

SIZES = (784, 256, 256, 10)
BATCH = 128
TARGETS = {"chain": 3.0, "ew24": 0.6, "mlp": 1.0}  # functx compiled ÷ jax jit, at most


def chain_fn(xnp: Any) -> Callable:
    ops = (xnp.sin, lambda x: x * 0.9, lambda x: x + 0.3, xnp.tanh)

    def f(x: Any) -> Any:
        for i in range(1000):
            x = ops[i % 4](x)
        return xnp.sum(x)
    return f


def ew24_fn(xnp: Any) -> Callable:
    ops = (xnp.sin, lambda x: x * 0.9, xnp.tanh, lambda x: x + 0.1, xnp.exp, lambda x: x * 0.5)

    def f(x: Any) -> Any:
        for i in range(24):
            x = ops[i % 6](x)
        return xnp.sum(x)
    return f


def mlp_fn(xnp: Any) -> Callable:
    def loss(p: dict, x: Any, y: Any) -> Any:
        h1 = xnp.tanh(x @ p["w1"] + p["b1"])
        h2 = xnp.tanh(h1 @ p["w2"] + p["b2"])
        out = h2 @ p["w3"] + p["b3"]
        return xnp.mean((out - y) ** 2)
    return loss


def workload(name: str) -> tuple[Callable, tuple, float]:
    """(function of (xnp) -> loss, arguments, tolerance)."""
    rng = np.random.default_rng(0)
    if name == "chain":
        return chain_fn, (np.linspace(-1.0, 1.0, 10),), 1e-9
    if name == "ew24":
        return ew24_fn, (rng.standard_normal((1024, 1024)).astype(np.float32),), 1e-4
    params = {}
    for i, (m, n) in enumerate(zip(SIZES[:-1], SIZES[1:]), start=1):
        params[f"w{i}"] = (rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32)
        params[f"b{i}"] = (0.1 * rng.standard_normal(n)).astype(np.float32)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    return mlp_fn, (params, x, y), 1e-4


def functx_step(name: str, compiler: str) -> tuple[Callable, float]:
    """A jitted gradient step with ``compiler`` and its first call's time (seconds)."""
    fn, args, _ = workload(name)
    old = functx.compiler.set_jit_compiler(compiler)
    try:
        g = fx.jit(fx.grad(fn(fnp)))
        t0 = time.perf_counter()
        g(*args)
        first = time.perf_counter() - t0
    finally:
        functx.compiler.set_jit_compiler(old)
    return (lambda: g(*args)), first


def leaves(tree: Any) -> list:
    return [np.asarray(v) for v in fx.tree.leaves(tree)]


def max_rel_error(got: Any, want: Any) -> float:
    errs = [float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-30))
            for g, w in zip(leaves(got), leaves(want))]
    return max(errs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 repeats instead of 30")
    parser.add_argument("--only", choices=("chain", "ew24", "mlp"))
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [args.only] if args.only else ["chain", "ew24", "mlp"]
    if args.child:  # the second process: first calls with the disk cache
        print(json.dumps({n: functx_step(n, "numba")[1] for n in names}))
        return 0
    repeats = args.repeats or (10 if args.quick else 30)
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    print("## functx jit on the CPU: compiled (Numba) vs replay vs JAX jit\n")
    print(environment_report({"jax": jax}, ROOT))
    print(f"- command: python benchmarks/bench_jit_cpu.py {' '.join(argv or sys.argv[1:])}".rstrip())
    print(f"- {repeats} timed repeats per system, interleaved in blocks; medians")
    print(f"- kernel cache: {os.environ['FUNCTX_CACHE_DIR']} (empty at the start)")
    firsts: dict = {}
    summary = []
    for name in names:
        fn, wargs, tol = workload(name)
        log(f"{name}: compiling and checking...")
        want = fx.grad(fn(fnp))(*wargs)
        steps: dict = {}
        steps["functx jit (numba)"], f_first = functx_step(name, "numba")
        steps["functx jit (replay)"], r_first = functx_step(name, "none")
        jargs = jax.tree_util.tree_map(jnp.asarray, wargs)
        gj = jax.jit(jax.grad(fn(jnp)))
        t0 = time.perf_counter()
        jax.block_until_ready(gj(*jargs))
        j_first = time.perf_counter() - t0
        steps["jax jit"] = lambda: jax.block_until_ready(gj(*jargs))
        firsts[name] = {"functx jit (numba)": f_first, "functx jit (replay)": r_first,
                        "jax jit": j_first}
        notes = {}
        for sys_name, step in steps.items():
            err = max_rel_error(step(), want)
            notes[sys_name] = f"max rel. error vs eager {err:.1e}" + (
                "" if err <= tol else " (DISAGREES)")
        timings = measure(steps, repeats, warmup=3, block=5, settle=0.1)
        print(f"\n### {name}: jit(grad), "
              f"{ {'chain': '1000-op chain, float64[10]', 'ew24': '24 ops, float32 1024x1024', 'mlp': 'MLP 784-256-256-10, batch 128, float32'}[name] }\n")
        print(markdown_table(timings, "ms", 1e3, "functx jit (numba)", notes))
        med = {t.name: t.median for t in timings}
        r = med["functx jit (numba)"] / med["jax jit"]
        summary.append(f"- {name}: functx compiled ÷ JAX jit = {r:.2f} (target <= "
                       f"{TARGETS[name]}: {'met' if r <= TARGETS[name] else 'MISSED'}); "
                       f"compiled ÷ replay = {med['functx jit (numba)'] / med['functx jit (replay)']:.2f}")
    log("second process (disk cache)...")
    child = subprocess.run([sys.executable, __file__, "--child"] + (
        ["--only", args.only] if args.only else []), capture_output=True, text=True,
        env=dict(os.environ))
    try:
        second = json.loads(child.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        second = {}
        print(f"\n(second process failed: {child.stderr[-500:]})")
    print("\n### First call (trace + compile), seconds\n")
    print("| workload | functx numba, empty cache | functx numba, 2nd process (disk cache) "
          "| functx replay | JAX jit |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        f = firsts[name]
        s = second.get(name)
        print(f"| {name} | {f['functx jit (numba)']:.2f} | "
              f"{'n/a' if s is None else f'{s:.2f}'} | {f['functx jit (replay)']:.2f} | "
              f"{f['jax jit']:.2f} |")
    print("\n### Targets\n")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
