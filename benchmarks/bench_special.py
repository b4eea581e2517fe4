"""CPU benchmark: exact GELU and special functions in float32, functx beside PyTorch.

Workloads, each run side by side in this one process (PyTorch is not a functx dependency):

1. ``gelu``: exact GELU ``x * Phi(x)`` (``approximate="none"``, through ``erf``) of the
   hidden activations of a small transformer MLP, x: float32[1024, 3072] (a batch of 8
   sequences of 128 tokens, hidden size 4 * 768): the forward pass, and the gradient of
   ``sum(gelu(x) * g)`` (forward + backward). functx runs ``functx.nn.gelu`` (the fused
   primitive; in float32 one compiled loop for the forward pass and one for ``gelu_grad``,
   a float64 formula per element: functx/primitives/elementwise/_gelu32.py); PyTorch
   ``torch.nn.functional.gelu``. Row ``functx erf in float64 (before)`` times the
   previous implementation of the forward pass for comparison: functx's own float64
   ``erf`` tables, rounded to float32 (what issue 15 measured as 65x slower than PyTorch).
2. ``special``: ``erf``, ``gammaln``, ``digamma`` and ``log_ndtr`` of a float32[1024, 3072]
   array, functx (``functx.scipy.special``) beside ``torch.special``.

With ``--one-thread`` every system runs on one thread (``OMP_NUM_THREADS``,
``NUMBA_NUM_THREADS``, ``torch.set_num_threads(1)``) and the times are CPU time of the
process (``time.process_time``): the per-element cost, which other work on a shared
machine disturbs least.

Every result is checked against PyTorch's (relative error at most 1e-5) before timing.
Times are medians of interleaved repeats (``_harness.py``) with the 25th-75th percentile
range. Thread settings are left at their defaults and printed.

Usage::

    python benchmarks/bench_special.py [--quick] [--repeats N] [--only gelu|special] [--one-thread]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
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
from functx import nn as fnn
from functx.primitives import elementwise as fx_elementwise
from functx.scipy import special as fsp

from _harness import CpuMeter, environment_report, log, markdown_table, measure, relative_error

SHAPE = (1024, 3072)
TOLERANCE = 1e-5
TARGET = 1.5  # functx's exact GELU (forward, and forward + backward) within 1.5x PyTorch's


def gelu_steps(torch: Any, x: np.ndarray, g: np.ndarray) -> tuple[dict, dict, dict]:
    """(forward steps, gradient steps, results) of exact GELU for functx and PyTorch."""
    xt, gt = torch.from_numpy(x), torch.from_numpy(g)
    F = torch.nn.functional

    def fx_loss(v: Any) -> Any:
        return fnp.sum(fnn.gelu(v, approximate="none") * g)

    fx_grad = fx.grad(fx_loss)

    def torch_grad() -> Any:
        v = xt.clone().requires_grad_(True)
        (F.gelu(v, approximate="none") * gt).sum().backward()
        return v.grad

    def before() -> np.ndarray:  # the float64 tables of functx's own erf, rounded once
        x64 = x.astype(np.float64)
        erf = fx_elementwise.erf_impl(np, x64 * (1 / math.sqrt(2)))
        return (0.5 * x64 * (1 + erf)).astype(np.float32)

    forward = {"functx": lambda: fnn.gelu(x, approximate="none"),
               "torch": lambda: F.gelu(xt, approximate="none"),
               "functx erf in float64 (before)": before}
    backward = {"functx": lambda: fx_grad(x), "torch": torch_grad}
    return forward, backward, {"torch": lambda r: r.numpy()}


def special_steps(torch: Any, x: np.ndarray) -> list[tuple[str, dict]]:
    """(name, steps) of each special function, functx and torch.special."""
    xt = torch.from_numpy(x)
    xp = np.abs(x) + 0.1  # positive arguments for gammaln and digamma
    xpt = torch.from_numpy(xp)
    ts = torch.special
    return [
        ("erf", {"functx": lambda: fsp.erf(x), "torch": lambda: ts.erf(xt)}),
        ("gammaln", {"functx": lambda: fsp.gammaln(xp), "torch": lambda: ts.gammaln(xpt)}),
        ("digamma", {"functx": lambda: fsp.digamma(xp), "torch": lambda: ts.digamma(xpt)}),
        ("log_ndtr", {"functx": lambda: fsp.log_ndtr(x), "torch": lambda: ts.log_ndtr(xt)}),
    ]


def check(steps: dict[str, Callable], reference: str = "torch") -> float:
    """The largest relative error of any system's result against ``reference``'s."""
    want = np.asarray(steps[reference]())
    errs = [relative_error(np.asarray(f()), want) for n, f in steps.items() if n != reference]
    return max(errs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 repeats and 2 warm-up runs instead of 30 and 3")
    parser.add_argument("--repeats", type=int, help="timed repeats per system")
    parser.add_argument("--only", choices=("gelu", "special"),
                        help="run only the GELU rows or only the special functions")
    parser.add_argument("--one-thread", action="store_true",
                        help="one thread per system, times in process CPU time")
    args = parser.parse_args(argv)
    clock = time.process_time if args.one_thread else time.perf_counter
    if args.one_thread:  # before Numba is imported (functx imports it on first use)
        os.environ["OMP_NUM_THREADS"] = os.environ["NUMBA_NUM_THREADS"] = "1"
    repeats = args.repeats or (10 if args.quick else 30)
    warmup = 2 if args.quick else 3
    try:
        import torch
    except ImportError:
        log("PyTorch is not installed: nothing to compare with (pip install torch).")
        return 1
    if args.one_thread:
        torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    g = rng.standard_normal(SHAPE).astype(np.float32)
    meter = CpuMeter()
    report = [f"# functx vs PyTorch: exact GELU and special functions (CPU, float32 "
              f"{SHAPE[0]}x{SHAPE[1]})", ""]
    status = 0
    forward, backward, _ = gelu_steps(torch, x, g)
    summary = []
    gelu_rows = (("exact GELU, forward", forward),
                 ("exact GELU, gradient of sum(gelu(x) * g)", backward))
    for title, steps in gelu_rows if args.only != "special" else ():
        log(f"{title}...")
        err = check(steps)
        report += [f"## {title}", "", f"Results agree with PyTorch's (relative error "
                   f"{err:.1e}).", ""]
        if err > TOLERANCE:
            report.append("functx DISAGREES with PyTorch: not timed.")
            status = 1
            continue
        timings = measure(steps, repeats, warmup, clock=clock)
        report += [markdown_table(timings, "ms", 1e3, "functx"), ""]
        t = {x_.name: x_.median for x_ in timings}
        r = t["functx"] / t["torch"]
        summary.append(f"- {title}: functx ÷ torch = {r:.2f} (target <= {TARGET}: "
                       f"{'met' if r <= TARGET else 'MISSED'})")
        if "functx erf in float64 (before)" in t:
            summary.append(f"- {title}: the float64 path before ÷ functx now = "
                           f"{t['functx erf in float64 (before)'] / t['functx']:.1f}")
    report += ["## Special functions (functx.scipy.special vs torch.special)", ""]
    rows = ["| function | functx ms | torch ms | functx ÷ torch | rel. error |",
            "|---|---:|---:|---:|---:|"]
    for name, steps in special_steps(torch, x) if args.only != "gelu" else ():
        log(f"{name}...")
        err = check(steps)
        timings = {t_.name: t_.median for t_ in measure(steps, repeats, warmup, clock=clock)}
        rows.append(f"| {name} | {timings['functx'] * 1e3:.3g} | {timings['torch'] * 1e3:.3g} "
                    f"| {timings['functx'] / timings['torch']:.2f} | {err:.1e} |")
    report += rows + ["", "## Summary", ""] + summary + ["", "## Environment", "",
                                                         environment_report({"torch": torch},
                                                                            ROOT),
                                                         meter.report()]
    print("\n".join(report))
    return status


if __name__ == "__main__":
    sys.exit(main())
