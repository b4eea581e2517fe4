"""CPU benchmark: eager reverse mode in functx beside HIPS autograd, PyTorch and JAX.

Two workloads, each run side by side in this one process by functx and by whichever of
``autograd``, ``torch`` and ``jax`` are importable (none of them is a functx dependency):

1. ``chain``: the gradient of ``sum(op_999(... op_0(x)))`` for a (10,) float64 array, where
   the 1000 elementwise ops cycle through ``sin``, ``* 0.9``, ``+ 0.3`` and ``tanh``. The
   arrays are tiny, so this measures the per-operation overhead of recording and
   differentiating; reported as microseconds per op (forward + backward time / 1000).
2. ``mlp``: the gradient of the mean squared error of a 784-256-256-10 tanh network
   against one-hot targets, batch 128, in float32 and float64, beside a hand-written NumPy
   forward and backward pass of the same model (the floor an eager system can reach);
   reported as milliseconds per step. Rows ``functx vjp`` and ``functx vjp read-only``
   take the same gradient through ``vjp``, whose closure keeps snapshots of the caller's
   writeable NumPy inputs (copies) and keeps functx's own read-only arrays as they are:
   the difference between them is the cost of those snapshots.

Before timing, every system's gradient is checked against a reference (autograd's for the
chain, the hand-written NumPy one for the MLP); a system that disagrees is reported and not
timed. Times are medians of interleaved repeats (see ``_harness.py``) with the 25th-75th
percentile range. Thread settings are left at their defaults and printed.

Usage (after ``pip install -e .``; ``pip install autograd jax torch`` for the peers)::

    python benchmarks/bench_cpu.py [--quick] [--only chain|mlp] [--repeats N] [--no-peers]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
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
import functx.numpy as fnp
from functx.primitives import elementwise as fx_elementwise
from functx.primitives import reduction as fx_reduction

from _harness import (CpuMeter, Timing, environment_report, log, markdown_table, measure,
                      relative_error)

CHAIN_LEN = 1000
CHAIN_MUL, CHAIN_ADD = 0.9, 0.3
SIZES = (784, 256, 256, 10)
BATCH = 128
# Largest relative difference from the reference gradient that counts as agreement.
TOLERANCE = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-9}
TARGET_PER_OP = 0.7  # functx's per-op time at most 0.7x autograd's
TARGET_MLP = 1.3     # functx's MLP step at most 1.3x the hand-written NumPy step


# ------------------------------------------------------------------------------------------
# Optional peers


def load_peers() -> dict[str, Any]:
    """Import whichever of autograd, torch and jax are installed (JAX on the CPU, x64 on)."""
    mods: dict[str, Any] = {}
    if importlib.util.find_spec("autograd"):
        import autograd
        import autograd.numpy

        mods["autograd"] = autograd
    if importlib.util.find_spec("torch"):
        import torch

        mods["torch"] = torch
    if importlib.util.find_spec("jax"):
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy

        jax.config.update("jax_enable_x64", True)
        mods["jax"] = jax
    return mods


# ------------------------------------------------------------------------------------------
# Workload 1: a chain of 1000 elementwise ops


def chain_fn(sin: Callable, tanh: Callable, scale: Callable, shift: Callable,
             total: Callable) -> Callable:
    """``f(x) = total(op_999(... op_0(x)))`` with op_i cycling sin, scale, shift, tanh."""
    ops = (sin, scale, shift, tanh)

    def f(x: Any) -> Any:
        for i in range(CHAIN_LEN):
            x = ops[i % 4](x)
        return total(x)

    return f


def chain_steps(mods: dict[str, Any], x0: np.ndarray) -> tuple[dict, dict, dict]:
    """Per system: a step computing the chain's gradient, its result as NumPy, and a note.

    Returns:
        ``(steps, to_numpy, notes)``: name -> step function, name -> function turning the
        step's result into a NumPy array, name -> note for the table.
    """
    steps: dict[str, Callable] = {}
    conv: dict[str, Callable] = {}
    notes: dict[str, str] = {}
    ident = np.asarray

    f = chain_fn(fnp.sin, fnp.tanh, lambda x: x * CHAIN_MUL, lambda x: x + CHAIN_ADD, fnp.sum)
    g = fx.grad(f)
    steps["functx"], conv["functx"] = (lambda: g(x0)), ident
    notes["functx"] = "functx.numpy and operators"

    mul_c, add_c = np.asarray(CHAIN_MUL), np.asarray(CHAIN_ADD)
    el = fx_elementwise
    f_prim = chain_fn(el.sin, el.tanh, lambda x: el.mul(x, mul_c), lambda x: el.add(x, add_c),
                      lambda x: fx_reduction.reduce_sum(x, (0,)))
    g_prim = fx.grad(f_prim)
    steps["functx primitives"], conv["functx primitives"] = (lambda: g_prim(x0)), ident
    notes["functx primitives"] = "the primitive wrappers called directly (no functx.numpy layer)"

    if "autograd" in mods:
        ag, anp = mods["autograd"], mods["autograd"].numpy
        g_ag = ag.grad(chain_fn(anp.sin, anp.tanh, lambda x: x * CHAIN_MUL,
                                lambda x: x + CHAIN_ADD, anp.sum))
        steps["autograd"], conv["autograd"] = (lambda: g_ag(x0)), ident

    if "torch" in mods:
        torch = mods["torch"]
        f_t = chain_fn(torch.sin, torch.tanh, lambda x: x * CHAIN_MUL, lambda x: x + CHAIN_ADD,
                       torch.sum)
        xt = torch.tensor(x0, requires_grad=True)

        def torch_step() -> Any:
            return torch.autograd.grad(f_t(xt), xt)[0]

        steps["torch"], conv["torch"] = torch_step, lambda t: t.detach().numpy()
        notes["torch"] = "eager autograd"

    if "jax" in mods:
        jax, jnp = mods["jax"], mods["jax"].numpy
        f_j = chain_fn(jnp.sin, jnp.tanh, lambda x: x * CHAIN_MUL, lambda x: x + CHAIN_ADD,
                       jnp.sum)
        xj = jnp.asarray(x0)
        g_eager, g_jit = jax.grad(f_j), jax.jit(jax.grad(f_j))
        steps["jax eager"] = lambda: g_eager(xj).block_until_ready()
        steps["jax jit"] = lambda: g_jit(xj).block_until_ready()
        conv["jax eager"] = conv["jax jit"] = np.asarray
        notes["jax eager"] = "jax.grad, op by op (no jit)"
        notes["jax jit"] = "jax.jit(jax.grad(f)), compiled before timing; not eager"
    return steps, conv, notes


# ------------------------------------------------------------------------------------------
# Workload 2: an MLP loss


def mlp_data(dtype: Any, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Parameters, a batch of inputs and one-hot targets for the 784-256-256-10 network."""
    rng = np.random.default_rng(seed)
    params = {}
    for i, (m, n) in enumerate(zip(SIZES[:-1], SIZES[1:]), start=1):
        params[f"w{i}"] = (rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype)
        params[f"b{i}"] = (0.1 * rng.standard_normal(n)).astype(dtype)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(dtype)
    y = np.eye(SIZES[-1], dtype=dtype)[rng.integers(0, SIZES[-1], BATCH)]
    return params, x, y


def mlp_loss_fn(xnp: Any) -> Callable:
    """The MLP loss written against a NumPy-like module (functx.numpy, autograd.numpy, ...)."""
    def loss(p: dict, x: Any, y: Any) -> Any:
        h1 = xnp.tanh(x @ p["w1"] + p["b1"])
        h2 = xnp.tanh(h1 @ p["w2"] + p["b2"])
        out = h2 @ p["w3"] + p["b3"]
        return xnp.mean((out - y) ** 2)

    return loss


def numpy_mlp_grad(p: dict, x: np.ndarray, y: np.ndarray) -> tuple[Any, dict]:
    """Hand-written NumPy forward and backward pass of the MLP loss: (loss, gradient)."""
    h1 = np.tanh(x @ p["w1"] + p["b1"])
    h2 = np.tanh(h1 @ p["w2"] + p["b2"])
    diff = h2 @ p["w3"] + p["b3"] - y
    loss = np.mean(diff * diff)
    d_out = diff * (2.0 / diff.size)
    g = {"w3": h2.T @ d_out, "b3": d_out.sum(axis=0)}
    d_h2 = (d_out @ p["w3"].T) * (1 - h2 * h2)
    g["w2"], g["b2"] = h1.T @ d_h2, d_h2.sum(axis=0)
    d_h1 = (d_h2 @ p["w2"].T) * (1 - h1 * h1)
    g["w1"], g["b1"] = x.T @ d_h1, d_h1.sum(axis=0)
    return loss, g


def mlp_steps(mods: dict[str, Any], dtype: Any) -> tuple[dict, dict, dict]:
    """Per system: a step computing the MLP gradient, its result as NumPy, and a note."""
    params, x, y = mlp_data(dtype)
    steps: dict[str, Callable] = {}
    conv: dict[str, Callable] = {}
    notes: dict[str, str] = {}
    as_np = lambda g: {k: np.asarray(v) for k, v in g.items()}  # noqa: E731

    g_fx = fx.grad(mlp_loss_fn(fnp))
    steps["functx"], conv["functx"] = (lambda: g_fx(params, x, y)), as_np
    # vjp keeps its residuals for later, so it snapshots the caller's writeable arrays it
    # needs (here: all of them); functx's own arrays are read-only and are not copied
    loss_fx = mlp_loss_fn(fnp)
    ro = [fx.tree.map(fnp.asarray, a) for a in (params, x, y)]
    one = np.ones((), dtype)

    def vjp_step(p: dict, x: Any, y: Any) -> dict:
        return fx.vjp(loss_fx, p, x, y)[1](one)[0]

    steps["functx vjp"], conv["functx vjp"] = (lambda: vjp_step(params, x, y)), as_np
    notes["functx vjp"] = "fx.vjp then f_vjp(1.0): writeable NumPy inputs, snapshot by vjp"
    steps["functx vjp read-only"] = lambda: vjp_step(*ro)
    conv["functx vjp read-only"] = as_np
    notes["functx vjp read-only"] = "the same with functx (read-only) arrays: nothing copied"
    steps["numpy by hand"] = lambda: numpy_mlp_grad(params, x, y)
    conv["numpy by hand"] = lambda r: as_np(r[1])
    notes["numpy by hand"] = "hand-written forward + backward (the target's baseline)"

    if "autograd" in mods:
        g_ag = mods["autograd"].grad(mlp_loss_fn(mods["autograd"].numpy))
        steps["autograd"], conv["autograd"] = (lambda: g_ag(params, x, y)), as_np

    if "torch" in mods:
        torch = mods["torch"]
        loss_t = mlp_loss_fn(torch)
        names = sorted(params)
        pt = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
        xt, yt = torch.tensor(x), torch.tensor(y)

        def torch_step() -> dict:
            grads = torch.autograd.grad(loss_t(pt, xt, yt), [pt[k] for k in names])
            return dict(zip(names, grads))

        steps["torch"] = torch_step
        conv["torch"] = lambda g: {k: v.detach().numpy() for k, v in g.items()}
        notes["torch"] = "eager autograd"

    if "jax" in mods:
        jax, jnp = mods["jax"], mods["jax"].numpy
        loss_j = mlp_loss_fn(jnp)
        pj = {k: jnp.asarray(v) for k, v in params.items()}
        xj, yj = jnp.asarray(x), jnp.asarray(y)
        g_eager, g_jit = jax.grad(loss_j), jax.jit(jax.grad(loss_j))
        steps["jax eager"] = lambda: jax.block_until_ready(g_eager(pj, xj, yj))
        steps["jax jit"] = lambda: jax.block_until_ready(g_jit(pj, xj, yj))
        conv["jax eager"] = conv["jax jit"] = as_np
        notes["jax eager"] = "jax.grad, op by op (no jit)"
        notes["jax jit"] = "compiled before timing; not eager"
    return steps, conv, notes


# ------------------------------------------------------------------------------------------
# Running and reporting


def check_and_time(steps: dict, conv: dict, notes: dict, reference: str, dtype: Any,
                   repeats: int, warmup: int) -> list[Timing]:
    """Check each system's gradient against ``reference``'s, then time those that agree."""
    want = conv[reference](steps[reference]())
    tol = TOLERANCE[np.dtype(dtype)]
    agreeing = {}
    for name, step in steps.items():
        got = conv[name](step())
        if isinstance(want, dict):
            err = max(relative_error(got[k], want[k]) for k in want)
        else:
            err = relative_error(got, want)
        if err <= tol:
            agreeing[name] = step
        else:
            log(f"  {name}: gradient differs from {reference}'s (relative error {err:.2e} > "
                f"{tol:.0e}); not timed")
            notes[name] = f"WRONG GRADIENT (rel. error {err:.1e}), not timed"
    log(f"  gradients agree with {reference}'s: {', '.join(agreeing)}; timing "
        f"{repeats} repeats after {warmup} warm-up runs")
    return measure(agreeing, repeats, warmup)


def ratio(timings: list[Timing], a: str, b: str) -> float | None:
    """median(a) / median(b), or None if either is missing."""
    t = {x.name: x.median for x in timings}
    return t[a] / t[b] if a in t and b in t else None


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "not measured"
    return f"{value:.2f} (target <= {target:.2f}: {'met' if value <= target else 'MISSED'})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 repeats and 2 warm-up runs instead of 50 and 5 (a smoke test)")
    parser.add_argument("--only", choices=("chain", "mlp"), help="run one workload")
    parser.add_argument("--repeats", type=int, help="timed repeats per system")
    parser.add_argument("--no-peers", action="store_true",
                        help="time only functx and the hand-written NumPy version (importing "
                             "PyTorch or JAX slows NumPy down in the same process)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (10 if args.quick else 50)
    warmup = 2 if args.quick else 5

    log("loading peers...")
    mods = {} if args.no_peers else load_peers()
    print("## functx CPU benchmark\n")
    print(environment_report(mods, ROOT))
    print(f"- command: python benchmarks/bench_cpu.py {' '.join(sys.argv[1:] if argv is None else argv)}"
          .rstrip())
    print(f"- {repeats} timed repeats per system after {warmup} warm-up runs, interleaved in "
          "blocks of 10; median and 25th-75th percentiles")
    meter = CpuMeter()
    summary = []

    if args.only in (None, "chain"):
        log("chain: checking gradients...")
        x0 = np.linspace(-1.0, 1.0, 10)
        steps, conv, notes = chain_steps(mods, x0)
        reference = "autograd" if "autograd" in steps else "functx"
        timings = check_and_time(steps, conv, notes, reference, np.float64, repeats, warmup)
        print(f"\n### Eager grad of a {CHAIN_LEN}-op elementwise chain, x: float64[10]\n")
        print(markdown_table(timings, "µs/op", 1e6 / CHAIN_LEN, "functx", notes))
        summary.append("- per-op time, functx ÷ autograd: "
                       + verdict(ratio(timings, "functx", "autograd"), TARGET_PER_OP))

    if args.only in (None, "mlp"):
        for dtype in (np.float32, np.float64):
            name = np.dtype(dtype).name
            log(f"mlp {name}: checking gradients...")
            steps, conv, notes = mlp_steps(mods, dtype)
            timings = check_and_time(steps, conv, notes, "numpy by hand", dtype, repeats, warmup)
            print(f"\n### Eager grad of an MLP loss {'-'.join(map(str, SIZES))} (tanh, mean "
                  f"squared error), batch {BATCH}, {name}\n")
            print(markdown_table(timings, "ms/step", 1e3, "functx", notes))
            summary.append(f"- MLP {name} step, functx ÷ hand-written NumPy: "
                           + verdict(ratio(timings, "functx", "numpy by hand"), TARGET_MLP))

    print("\n### Targets\n")
    print("\n".join(summary))
    print(meter.report())
    print("\n(`functx ÷ system` above 1 means functx is slower than that system.)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
