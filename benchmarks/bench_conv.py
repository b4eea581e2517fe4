"""CPU benchmark: convolutions in functx beside PyTorch, in one process.

Three workloads, float32, each checked against PyTorch's gradients before it is timed:

1. ``conv2d``: forward and backward (input and weight gradients, one random cotangent) of
   ``conv2d`` on a batch of 16 images, 32 -> 64 channels, 32 x 32, 3 x 3 kernel, padding 1.
2. ``conv2d 64``: the same for issue 17's row: a batch of 8 images, 64 -> 64 channels.
3. ``lenet``: the gradient of the cross-entropy loss of a LeNet-5-style network (conv 5x5
   1 -> 6, padding 2, relu, max pool 2; conv 5x5 6 -> 16, relu, max pool 2; linear 400 ->
   120 -> 84 -> 10 with relus) on a batch of 64 28 x 28 images, with respect to a dict of
   its ten parameters.

functx runs eagerly and under ``functx.jit`` (``functx jit``: traced once, then replayed
without the tracing and bookkeeping of each call), with its CPU convolution as configured
(Numba's direct kernels where they pay, when Numba is installed) and, as ``functx jit
numpy``, with the direct kernels switched off (the NumPy im2col/col2im path alone). Times
are medians of interleaved repeats (see ``_harness.py``) with the 25th-75th percentile
range. Thread settings are left
at their defaults and printed, unless ``--threads N`` caps PyTorch's intra-op threads and
NumPy's BLAS threads (through threadpoolctl) at N alike; functx starts no threads of its
own. The target is functx within 2x of PyTorch's CPU time.

Usage::

    python benchmarks/bench_conv.py [--quick] [--repeats N] [--threads N]
"""
from __future__ import annotations

import argparse
import sys
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
import functx.nn as fnn
import functx.numpy as fnp
from functx.primitives import _conv_numba

from _harness import (CpuMeter, environment_report, log, markdown_table, measure,
                      relative_error)

TARGET = 2.0  # functx's time at most 2x PyTorch's
NUMBA_KERNELS = _conv_numba.ENABLED  # as configured (the steps below switch it)
TOLERANCE = 1e-4  # float32 gradients' largest relative difference from PyTorch's


def conv_workload(torch: Any, n: int = 16, c: int = 32) -> tuple[dict, dict]:
    """Steps and their results (as NumPy) of conv2d forward + backward: ``n`` images of
    ``c`` channels, 32 x 32, to 64 channels."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, 32, 32)).astype(np.float32)
    w = (rng.standard_normal((64, c, 3, 3)) / np.sqrt(c * 9)).astype(np.float32)
    ct = rng.standard_normal((n, 64, 32, 32)).astype(np.float32)

    def conv(x: Any, w: Any) -> Any:
        return fnn.conv2d(x, w, padding=1)

    def fx_step() -> Any:
        _, f_vjp = fx.vjp(conv, x, w)
        return f_vjp(ct)

    def forward_and_pullback(x: Any, w: Any, ct: Any) -> tuple:
        out, f_vjp = fx.vjp(conv, x, w)
        return out, f_vjp(ct)

    # The forward output is returned too, as PyTorch computes it: jit drops unused results,
    # and the cotangents of a convolution need no forward value.
    fx_jit = fx.jit(forward_and_pullback)

    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ctt = torch.tensor(ct)

    def torch_step() -> Any:
        out = torch.nn.functional.conv2d(xt, wt, padding=1)
        return torch.autograd.grad(out, (xt, wt), ctt)

    steps = {"functx": fx_step, "functx jit": lambda: fx_jit(x, w, ct)[1], "torch": torch_step}
    results = {"functx": lambda r: [np.asarray(v) for v in r],
               "torch": lambda r: [v.numpy() for v in r]}
    results["functx jit"] = results["functx"]
    return steps, results


def lenet_params(rng: np.random.Generator) -> dict[str, np.ndarray]:
    shapes = {"c1": (6, 1, 5, 5), "c2": (16, 6, 5, 5), "f1": (120, 400), "f2": (84, 120),
              "f3": (10, 84)}
    params = {}
    for name, shape in shapes.items():
        fan_in = int(np.prod(shape[1:]))
        params[f"{name}_w"] = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        params[f"{name}_b"] = (0.1 * rng.standard_normal(shape[0])).astype(np.float32)
    return params


def lenet_loss(F: Any, flatten: Callable) -> Callable:
    """The LeNet loss against a torch.nn.functional-like module ``F``."""
    def loss(p: dict, x: Any, y: Any) -> Any:
        h = F.max_pool2d(F.relu(F.conv2d(x, p["c1_w"], p["c1_b"], padding=2)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, p["c2_w"], p["c2_b"])), 2)
        h = flatten(h)
        h = F.relu(F.linear(h, p["f1_w"], p["f1_b"]))
        h = F.relu(F.linear(h, p["f2_w"], p["f2_b"]))
        return F.cross_entropy(F.linear(h, p["f3_w"], p["f3_b"]), y)
    return loss


def lenet_workload(torch: Any) -> tuple[dict, dict]:
    """Steps and their results (as NumPy) of one LeNet gradient."""
    rng = np.random.default_rng(1)
    params = lenet_params(rng)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    fx_loss = lenet_loss(fnn, lambda h: fnp.reshape(h, (h.shape[0], -1)))
    g_fx = fx.grad(fx_loss)
    names = sorted(params)
    pt = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    xt, yt = torch.tensor(x), torch.tensor(y)
    loss_t = lenet_loss(torch.nn.functional, lambda h: h.flatten(1))

    def torch_step() -> Any:
        return dict(zip(names, torch.autograd.grad(loss_t(pt, xt, yt), [pt[k] for k in names])))

    # the loss value too, as PyTorch computes it
    jit_fx = fx.jit(fx.value_and_grad(fx_loss))
    steps = {"functx": lambda: g_fx(params, x, y), "functx jit": lambda: jit_fx(params, x, y)[1],
             "torch": torch_step}
    results = {"functx": lambda g: {k: np.asarray(v) for k, v in g.items()},
               "torch": lambda g: {k: v.numpy() for k, v in g.items()}}
    results["functx jit"] = results["functx"]
    return steps, results


def with_numpy_conv(steps: dict, results: dict) -> tuple[dict, dict]:
    """``steps`` plus ``functx jit numpy``: the jit step with the direct kernels off (each
    step sets the switch, so the interleaved timing can alternate them)."""
    def setting(step: Callable, on: bool) -> Callable:
        def run() -> Any:
            _conv_numba.ENABLED = on
            return step()
        return run

    out = {name: setting(step, NUMBA_KERNELS) if name.startswith("functx") else step
           for name, step in steps.items()}
    if NUMBA_KERNELS:
        out["functx jit numpy"] = setting(steps["functx jit"], False)
        results = dict(results, **{"functx jit numpy": results["functx jit"]})
    return out, results


def check(results: dict, steps: dict) -> float:
    """The largest relative difference between functx's gradients (eager and jit) and
    PyTorch's."""
    want = results["torch"](steps["torch"]())
    errors = []
    for name in [k for k in steps if k != "torch"]:
        got = results[name](steps[name]())
        if isinstance(want, dict):
            errors += [relative_error(got[k], want[k]) for k in want]
        else:
            errors += [relative_error(g, w) for g, w in zip(got, want)]
    return max(errors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 repeats and 2 warm-up runs instead of 40 and 5")
    parser.add_argument("--repeats", type=int, help="timed repeats per system")
    parser.add_argument("--threads", type=int,
                        help="cap every library's threads at this number (default: as is)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (10 if args.quick else 40)
    warmup = 2 if args.quick else 5
    try:
        import torch
    except ImportError:
        log("PyTorch is not installed: nothing to compare with (pip install torch).")
        return 1

    limits = None
    if args.threads:
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(args.threads)
        limits = threadpool_limits(args.threads)  # kept alive until the end of main
        if NUMBA_KERNELS:
            import numba

            numba.set_num_threads(args.threads)
    meter = CpuMeter()
    threads = f", {args.threads} threads each" if args.threads else ""
    report = [f"# functx vs PyTorch: convolutions (CPU, float32{threads})", ""]
    status = 0
    for title, build in [("conv2d forward + backward (16x32x32x32, 3x3, 32 -> 64, padding 1)",
                          conv_workload),
                         ("conv2d forward + backward (8x64x32x32, 3x3, 64 -> 64, padding 1)",
                          lambda torch: conv_workload(torch, 8, 64)),
                         ("LeNet-5 gradient step (batch 64, 28 x 28)", lenet_workload)]:
        log(f"{title}...")
        steps, results = with_numpy_conv(*build(torch))
        err = check(results, steps)
        if err > TOLERANCE:
            log(f"  functx's gradient differs from PyTorch's (relative error {err:.1e})")
            report += [f"## {title}", "", f"functx's gradient is WRONG (relative error "
                       f"{err:.1e}); not timed.", ""]
            status = 1
            continue
        timings = measure(steps, repeats, warmup)
        t = {x.name: x.median for x in timings}
        report += [f"## {title}", "", f"Gradients agree with PyTorch's (relative error "
                   f"{err:.1e}).", "", markdown_table(timings, "ms", 1e3, "functx"), ""]
        for name in [k for k in t if k != "torch"]:
            ratio = t[name] / t["torch"]
            report.append(f"{name} ÷ torch: {ratio:.2f} (target <= {TARGET:.1f}: "
                          f"{'met' if ratio <= TARGET else 'MISSED'})")
        report.append("")
    if NUMBA_KERNELS:
        import numba

        try:
            layer = numba.threading_layer()
        except ValueError:  # no parallel kernel ran
            layer = "(none started)"
        kernels = (f"Numba {numba.__version__} direct kernels where they pay, threading layer "
                   f"{layer}, {numba.get_num_threads()} threads")
    else:
        kernels = "Numba not installed: the NumPy im2col/col2im path only"
    report += ["## Environment", "", f"CPU convolution: {kernels}.", "",
               environment_report({"torch": torch}, ROOT), meter.report()]
    print("\n".join(report))
    del limits
    return status


if __name__ == "__main__":
    sys.exit(main())
