"""Random sampling speed: functx.random beside numpy.random, JAX and PyTorch on the CPU.

Workloads: ``normal`` and ``uniform`` of 10**6 values in float32 and float64 (the issue's
target: within 2x of ``numpy.random``), and ``gamma(2.5)`` of 10**6 values. functx runs
eagerly (Threefry and the normal transform are compiled loops when Numba is installed);
JAX runs ``jax.jit`` of its sampler with a fixed shape (x64 enabled for float64); numpy uses
a ``default_rng`` Generator (PCG64; its normal is the ziggurat method, not an inverse CDF);
PyTorch uses ``torch.randn``/``torch.rand`` with a generator. The systems draw different
numbers (different generators): this compares speed only.

Usage (after ``pip install -e '.[jit]'``; jax and torch optional)::

    python benchmarks/bench_random.py [--quick] [--repeats N]
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import functx as fx  # noqa: F401
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(ROOT))
import functx.random as fxr

from _harness import environment_report, log, markdown_table, measure

N = 10**6
TARGET = 2.0  # functx within 2x of numpy.random for normal and uniform


def steps_for(kind: str, dt: Any, n: int) -> dict[str, Callable[[], object]]:
    key = fxr.key(0)
    rng = np.random.default_rng(0)
    steps: dict[str, Callable[[], object]] = {}
    if kind == "normal":
        steps["functx"] = lambda: fxr.normal(key, (n,), dt)
        steps["numpy"] = lambda: rng.standard_normal(n, dtype=dt)
    elif kind == "uniform":
        steps["functx"] = lambda: fxr.uniform(key, (n,), dt)
        steps["numpy"] = lambda: rng.random(n, dtype=dt)
    else:
        steps["functx"] = lambda: fxr.gamma(key, 2.5, (n,), dt)
        steps["numpy"] = lambda: rng.standard_gamma(2.5, n, dtype=dt)
    if importlib.util.find_spec("jax"):
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.random as jr
        jk = jr.PRNGKey(0)
        fn = {"normal": lambda k: jr.normal(k, (n,), dt),
              "uniform": lambda k: jr.uniform(k, (n,), dt),
              "gamma": lambda k: jr.gamma(k, 2.5, (n,), dt)}[kind]
        jitted = jax.jit(fn)
        steps["jax jit"] = lambda: jitted(jk).block_until_ready()
    if importlib.util.find_spec("torch") and kind != "gamma":
        import torch
        gen = torch.Generator().manual_seed(0)
        tdt = {np.float32: torch.float32, np.float64: torch.float64}[dt]
        draw = torch.randn if kind == "normal" else torch.rand
        steps["torch"] = lambda: draw(n, dtype=tdt, generator=gen)
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10**5 values, few repeats")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    n = 10**5 if args.quick else N
    repeats = 5 if args.quick else args.repeats
    print("# Random sampling on the CPU\n")
    print(environment_report({"numpy": np}, ROOT) + "\n")
    for kind in ("normal", "uniform", "gamma"):
        for dt in (np.float32, np.float64):
            log(f"{kind} {np.dtype(dt).name}")
            timings = measure(steps_for(kind, dt, n), repeats=repeats, warmup=3, block=5)
            print(f"## {kind}, {n} values, {np.dtype(dt).name}\n")
            print(markdown_table(timings, "ms", 1e3, "functx"))
            if kind != "gamma":
                fx_t = next(t for t in timings if t.name == "functx").median
                np_t = next(t for t in timings if t.name == "numpy").median
                verdict = "met" if fx_t <= TARGET * np_t else "missed"
                print(f"\nfunctx ÷ numpy = {fx_t / np_t:.2f} (target at most {TARGET}: "
                      f"{verdict})\n")
            else:
                print()


if __name__ == "__main__":
    main()
