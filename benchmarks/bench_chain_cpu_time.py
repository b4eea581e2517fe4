"""Per-op process CPU time of ``bench_cpu.py``'s chain workload (eager ``grad`` of a
1000-op elementwise chain on float64[10]): functx through functx.numpy, functx's primitives
directly and PyTorch's eager autograd, in one process, interleaved.

Process CPU time (``time.process_time``) rather than wall-clock time: the development
machine is shared, and this workload is single-threaded. Compare two functx checkouts by
running this script alternately with ``PYTHONPATH`` set to each, in fresh processes:

    PYTHONPATH=/path/to/checkout python benchmarks/bench_chain_cpu_time.py [--repeats 15]

Prints one line: ``name=median_us_per_op`` per system, then the functx ÷ torch ratios.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cpu import CHAIN_LEN, chain_steps  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed gradients per system")
    args = parser.parse_args()
    try:
        import torch
        mods = {"torch": torch}
    except ImportError:
        mods = {}
    x0 = np.linspace(0.1, 1.0, 10)
    steps, _, _ = chain_steps(mods, x0)
    names = [n for n in ("functx", "functx primitives", "torch") if n in steps]
    for n in names:
        for _ in range(3):
            steps[n]()
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.repeats):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.process_time()
            steps[n]()
            samples[n].append((time.process_time() - t0) / CHAIN_LEN * 1e6)
    med = {n: statistics.median(s) for n, s in samples.items()}
    line = " ".join(f"{n.replace(' ', '_')}={m:.3f}" for n, m in med.items())
    if "torch" in med:
        line += (f" ratio_numpy={med['functx'] / med['torch']:.3f}"
                 f" ratio_prims={med['functx primitives'] / med['torch']:.3f}")
    print(line)


if __name__ == "__main__":
    main()
