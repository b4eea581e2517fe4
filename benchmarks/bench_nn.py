"""Benchmark: functx.nn operations beside PyTorch eager, in one process, on CPU or CUDA.

Forward + backward passes (``fx.vjp`` with a fixed random cotangent, or ``fx.grad`` of a
loss; PyTorch ``torch.autograd.grad``), float32. functx runs eagerly (``functx``) and under
``fx.jit`` (``functx jit``: the step traced once, then replayed):

1. ``attention``: ``scaled_dot_product_attention``, batch 4, 8 heads, sequence 256, head dim
   64, causal (functx's fused attention primitive, which keeps nothing of the scores'
   size), PyTorch's ``F.scaled_dot_product_attention`` and the same attention written out
   in PyTorch operations (``torch (math)``). Gradients with respect to query, key and value.
2. ``layer_norm``: ``layer_norm`` of a (4096, 1024) input with weight and bias; gradients
   with respect to all three.
3. ``softmax``: ``softmax`` over the last axis of (4096, 1000); gradient of the input.
4. ``log_softmax_nll``: ``nll_loss(log_softmax(x, dim=1), y)`` on (4096, 1000) logits.
5. ``cross_entropy``: ``cross_entropy(x, y)`` on the same logits.

With ``--device cuda`` the inputs live on the GPU (``fx.device_put``; PyTorch tensors on
``cuda``) and two workloads are added:

6. ``attention_big``: the attention of 1 with batch 8, 12 heads, sequence 512, head dim 64;
7. ``conv2d``: ``conv2d`` of a batch of 64 images, 64 -> 128 channels, 56 x 56, 3 x 3 kernel,
   padding 1 (PyTorch uses cuDNN); gradients with respect to input and weight.

``--dtype float32,float16,bfloat16`` repeats the two attention workloads in those dtypes
(functx's inputs as NumPy/ml_dtypes arrays of that dtype on the device, PyTorch's tensors
of that dtype); on CUDA, PyTorch's SDPA picks its flash kernel for float16/bfloat16, and
``torch flash`` forces it (``torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)``).
The other workloads run in float32 only. Issue 20's targets for attention on the GPU:
``functx jit`` within 1.3x of SDPA in float32, and within 1.5x of PyTorch's flash attention
in float16/bfloat16 (printed under each attention table).

TF32 is off everywhere (``NVIDIA_TF32_OVERRIDE=0``, ``CUPY_TF32=0``, PyTorch's
``allow_tf32`` flags off). Every step waits for the device before the clock is read. Before
timing, every system's gradients are compared with PyTorch's (largest relative error);
a disagreement is reported (and the step still timed). Times are medians of interleaved
repeats (see ``_harness.py``), at least 30 after warm-up, with the 25th-75th percentile
range. After timing, the peak memory of one step is reported: on CUDA for every system
(functx: CuPy's pool, PyTorch: its caching allocator), on the CPU for functx's attention
only (``tracemalloc``; PyTorch's CPU allocations are not traced).

A workload whose pieces are missing (PyTorch without CUDA, a functx primitive without a
CUDA kernel, ...) is skipped with the reason printed; the others still run. The issue's
targets are for the GPU: attention, layer_norm and softmax forward + backward within 2x
PyTorch eager. The CPU numbers are informational.

Usage::

    python benchmarks/bench_nn.py                  # CPU
    python benchmarks/bench_nn.py --device cuda    # GPU (everything, one command)
    python benchmarks/bench_nn.py --only attention,layer_norm --repeats 50
    python benchmarks/bench_nn.py --device cuda --only attention,attention_big \
        --dtype float32,float16,bfloat16                  # issue 20's attention rows
"""
from __future__ import annotations

import os

# Before any CUDA library starts: no TF32 anywhere.
os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")
os.environ.setdefault("CUPY_TF32", "0")

import argparse  # noqa: E402
import functools  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import functx as fx
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(ROOT))
    import functx as fx
import functx.nn as fnn  # noqa: E402
from functx.backends import cuda_status, get_backend  # noqa: E402

from _harness import (CpuMeter, Timing, environment_report, log, markdown_table,  # noqa: E402
                      measure, relative_error)

TARGET = 2.0  # on the GPU: functx at most 2x PyTorch eager
TOLERANCE = 1e-4  # float32 gradients' largest relative difference from PyTorch's
HALF_TOLERANCE = 3e-2  # the same for float16 and bfloat16 (a few of their roundings)
# Issue 20 on the GPU: functx jit ÷ PyTorch SDPA at most this, per dtype.
JIT_ATTENTION_TARGET = {"float32": 1.3, "float16": 1.5, "bfloat16": 1.5}
ATTENTION_WORKLOADS = ("attention", "attention_big")


# ------------------------------------------------------------------------------------------
# The device: moving arrays, waiting for work, reading memory


class Device:
    """Where the arrays live, for functx and PyTorch alike."""

    def __init__(self, name: str, torch: Any) -> None:
        self.name = name
        self.torch = torch
        self.cuda = name == "cuda"
        self._fx_sync = get_backend(name).synchronize if self.cuda else None

    def fx(self, x: np.ndarray) -> Any:
        """A functx array on this device."""
        return fx.device_put(x, self.name) if self.cuda else x

    def fx_sync(self) -> None:
        if self._fx_sync is not None:
            self._fx_sync()

    def t(self, x: np.ndarray, grad: bool = False) -> Any:
        """A PyTorch tensor on this device (a copy of ``x``; bfloat16 from ml_dtypes too)."""
        if x.dtype.name == "bfloat16":  # PyTorch does not read ml_dtypes arrays
            t = self.torch.tensor(x.astype(np.float32), device=self.name)
            return t.to(self.torch.bfloat16).requires_grad_(grad)
        return self.torch.tensor(x, device=self.name, requires_grad=grad)

    def t_sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()


def host(out: Any) -> list[np.ndarray]:
    """The arrays of a step's result (functx or PyTorch), as NumPy, in order."""
    if isinstance(out, (list, tuple)):
        return [a for e in out for a in host(e)]
    if hasattr(out, "detach"):
        return [out.detach().float().cpu().numpy()]
    return [np.asarray(fx.to_numpy(out))]


# ------------------------------------------------------------------------------------------
# Workloads: each returns {system: step} with "torch ..." systems when PyTorch is there.
# functx steps are first-class functions of functx arrays; every step waits for the device.


def fx_vjp_step(dev: Device, f: Callable, args: tuple, ct: Any) -> Callable:
    def step() -> Any:
        _, f_vjp = fx.vjp(f, *args)
        g = f_vjp(ct)
        dev.fx_sync()
        return g
    return step


def _forward_and_pullback(f: Callable, args: tuple, ct: Any) -> tuple:
    out, f_vjp = fx.vjp(f, *args)
    return out, f_vjp(ct)


def fx_jit_vjp_step(dev: Device, f: Callable, args: tuple, ct: Any) -> Callable:
    """The same step under ``functx.jit`` (traced once, then replayed). It returns the
    forward output too, as the eager step computes it: jit drops unused results, and a
    backward pass that needs no forward value (conv, layer_norm) would otherwise skip it."""
    step_fn = fx.jit(functools.partial(_forward_and_pullback, f))

    def step() -> Any:
        _, g = step_fn(args, ct)
        dev.fx_sync()
        return g
    return step


def fx_steps(dev: Device, f: Callable, args: tuple, ct: Any) -> dict[str, Callable]:
    """functx's eager and jit steps of one workload."""
    return {"functx": fx_vjp_step(dev, f, args, ct),
            "functx jit": fx_jit_vjp_step(dev, f, args, ct)}


def torch_grad_step(dev: Device, f: Callable, args: tuple, ct: Any = None) -> Callable:
    torch = dev.torch

    def step() -> Any:
        g = torch.autograd.grad(f(*args), args, ct)
        dev.t_sync()
        return g
    return step


def attention(dev: Device, shape: tuple[int, int, int, int], dtype: str = "float32"
              ) -> dict[str, Callable]:
    B, H, L, D = shape
    rng = np.random.default_rng(0)
    dt = np_dtype(dtype)
    q, k, v, ct = (rng.standard_normal((B, H, L, D)).astype(np.float32).astype(dt)
                   for _ in range(4))
    args = tuple(dev.fx(a) for a in (q, k, v))
    ct_fx = dev.fx(ct)
    steps = fx_steps(dev, lambda q, k, v: fnn.scaled_dot_product_attention(
        q, k, v, is_causal=True), args, ct_fx)
    torch = dev.torch
    if torch is not None:
        F = torch.nn.functional
        targs = tuple(dev.t(a, grad=True) for a in (q, k, v))
        ct_t = dev.t(ct)
        causal = torch.ones((L, L), dtype=torch.bool, device=dev.name).tril()
        scale = 1.0 / np.sqrt(D)

        def math_attention(q: Any, k: Any, v: Any) -> Any:
            s = (q * scale) @ k.transpose(-2, -1)
            return torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1) @ v

        steps["torch sdpa"] = torch_grad_step(
            dev, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            targs, ct_t)
        steps["torch (math)"] = torch_grad_step(dev, math_attention, targs, ct_t)
        if dev.cuda and dtype != "float32":
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def flash(q: Any, k: Any, v: Any) -> Any:
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)

            steps["torch flash"] = torch_grad_step(dev, flash, targs, ct_t)
    return steps


def np_dtype(name: str) -> np.dtype:
    """The NumPy dtype of ``name`` (bfloat16 from ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def layer_norm(dev: Device) -> dict[str, Callable]:
    rng = np.random.default_rng(1)
    n, d = 4096, 1024
    x = rng.standard_normal((n, d)).astype(np.float32)
    w = (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    b = (0.1 * rng.standard_normal(d)).astype(np.float32)
    ct = rng.standard_normal((n, d)).astype(np.float32)
    steps = fx_steps(dev, lambda x, w, b: fnn.layer_norm(x, (d,), w, b),
                     tuple(dev.fx(a) for a in (x, w, b)), dev.fx(ct))
    if dev.torch is not None:
        F = dev.torch.nn.functional
        steps["torch"] = torch_grad_step(dev, lambda x, w, b: F.layer_norm(x, (d,), w, b),
                                         tuple(dev.t(a, grad=True) for a in (x, w, b)),
                                         dev.t(ct))
    return steps


def _logits(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (2.0 * rng.standard_normal((4096, 1000))).astype(np.float32)
    return x, rng.integers(0, 1000, 4096)


def softmax(dev: Device) -> dict[str, Callable]:
    x, _ = _logits(2)
    ct = np.random.default_rng(3).standard_normal(x.shape).astype(np.float32)
    steps = fx_steps(dev, lambda x: fnn.softmax(x, dim=-1), (dev.fx(x),), dev.fx(ct))
    if dev.torch is not None:
        steps["torch"] = torch_grad_step(dev, lambda x: dev.torch.softmax(x, dim=-1),
                                         (dev.t(x, grad=True),), dev.t(ct))
    return steps


def _loss_workload(dev: Device, seed: int, fx_loss: Callable, torch_loss: Callable
                   ) -> dict[str, Callable]:
    x, y = _logits(seed)
    g = fx.grad(fx_loss)
    xf, yf = dev.fx(x), dev.fx(y)

    def fx_step() -> Any:
        out = g(xf, yf)
        dev.fx_sync()
        return out
    jg = fx.jit(fx.value_and_grad(fx_loss))  # the loss value too, as PyTorch computes it

    def fx_jit_step() -> Any:
        _, out = jg(xf, yf)
        dev.fx_sync()
        return out
    steps = {"functx": fx_step, "functx jit": fx_jit_step}
    if dev.torch is not None:
        xt, yt = dev.t(x, grad=True), dev.t(y)
        steps["torch"] = torch_grad_step(dev, lambda x: torch_loss(x, yt), (xt,))
    return steps


def log_softmax_nll(dev: Device) -> dict[str, Callable]:
    F = dev.torch.nn.functional if dev.torch is not None else None
    return _loss_workload(dev, 4, lambda x, y: fnn.nll_loss(fnn.log_softmax(x, dim=1), y),
                          lambda x, y: F.nll_loss(F.log_softmax(x, dim=1), y))


def cross_entropy(dev: Device) -> dict[str, Callable]:
    F = dev.torch.nn.functional if dev.torch is not None else None
    return _loss_workload(dev, 4, fnn.cross_entropy, lambda x, y: F.cross_entropy(x, y))


def conv2d(dev: Device) -> dict[str, Callable]:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 64, 56, 56)).astype(np.float32)
    w = (rng.standard_normal((128, 64, 3, 3)) / np.sqrt(64 * 9)).astype(np.float32)
    ct = rng.standard_normal((64, 128, 56, 56)).astype(np.float32)
    steps = fx_steps(dev, lambda x, w: fnn.conv2d(x, w, padding=1), (dev.fx(x), dev.fx(w)),
                     dev.fx(ct))
    if dev.torch is not None:
        F = dev.torch.nn.functional
        steps["torch"] = torch_grad_step(dev, lambda x, w: F.conv2d(x, w, padding=1),
                                         (dev.t(x, grad=True), dev.t(w, grad=True)), dev.t(ct))
    return steps


# name: (title, builder, the PyTorch system of the target, devices)
WORKLOADS: dict[str, tuple[str, Callable, str, tuple[str, ...]]] = {
    "attention": ("scaled_dot_product_attention forward + backward (batch 4, 8 heads, "
                  "seq 256, head dim 64, causal)",
                  lambda dev, dt="float32": attention(dev, (4, 8, 256, 64), dt), "torch sdpa",
                  ("cpu", "cuda")),
    "attention_big": ("scaled_dot_product_attention forward + backward (batch 8, 12 heads, "
                      "seq 512, head dim 64, causal)",
                      lambda dev, dt="float32": attention(dev, (8, 12, 512, 64), dt),
                      "torch sdpa", ("cuda",)),
    "layer_norm": ("layer_norm forward + backward (4096 x 1024, weight and bias)",
                   layer_norm, "torch", ("cpu", "cuda")),
    "softmax": ("softmax forward + backward (4096 x 1000, last axis)", softmax, "torch",
                ("cpu", "cuda")),
    "log_softmax_nll": ("log_softmax + nll_loss forward + backward (4096 x 1000, mean)",
                        log_softmax_nll, "torch", ("cpu", "cuda")),
    "cross_entropy": ("cross_entropy forward + backward (4096 x 1000, mean)", cross_entropy,
                      "torch", ("cpu", "cuda")),
    "conv2d": ("conv2d forward + backward (batch 64, 64 -> 128 channels, 56 x 56, 3 x 3, "
               "padding 1)", conv2d, "torch", ("cuda",)),
}


# ------------------------------------------------------------------------------------------
# Checking, timing, memory


def check(steps: dict[str, Callable], reference: str, tolerance: float = TOLERANCE
          ) -> dict[str, str]:
    """Runs every step once; a note per system: its error against ``reference``, or why it
    failed (failed systems are removed from ``steps``)."""
    notes: dict[str, str] = {}
    results: dict[str, list[np.ndarray]] = {}
    for name, step in list(steps.items()):
        try:
            results[name] = host(step())
        except Exception as e:  # report it, time the others
            log(traceback.format_exc())
            notes[name] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
            del steps[name]
    if reference not in results:
        for name in results:
            notes[name] = "not checked (no PyTorch result to compare with)"
        return notes
    want = results[reference]
    for name, got in results.items():
        if name == reference:
            continue
        if len(got) != len(want):
            notes[name] = f"MISMATCH: {len(got)} gradients, {reference} gives {len(want)}"
            continue
        err = max(relative_error(g, w) for g, w in zip(got, want))
        notes[name] = (f"grad rel. error vs {reference} {err:.1e}"
                       + ("" if err <= tolerance else " MISMATCH"))
    return notes


def peak_memory(dev: Device, name: str, step: Callable) -> str | None:
    """The peak memory one step adds to what was allocated before it, or None."""
    mib = 2.0 ** 20
    if not dev.cuda:
        if not name.startswith("functx"):
            return None
        tracemalloc.start()
        try:
            step()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return f"{peak / mib:.1f} MiB allocated at the peak of the step (tracemalloc)"
    if name.startswith("functx"):
        import cupy

        allocator = cupy.cuda.get_allocator()
        try:
            fx.reset_peak_memory_stats("cuda")
            before = fx.memory_stats("cuda")["bytes_in_use"]
            step()
            peak = fx.memory_stats("cuda")["peak_bytes_in_use"]
        finally:
            cupy.cuda.set_allocator(allocator)  # the peak tracker's hook out of the timings
    else:
        torch = dev.torch
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step()
        peak = torch.cuda.max_memory_allocated()
    return f"{(peak - before) / mib:.1f} MiB above the {before / mib:.1f} MiB in use before"


def run(name: str, dev: Device, repeats: int, warmup: int, memory: bool,
        dtype: str = "float32") -> list[str]:
    title, build, reference, _ = WORKLOADS[name]
    log(f"== {name} {dtype}")
    lines = [f"#### {title}" + ("" if dtype == "float32" else f", {dtype}"), ""]
    try:
        steps = build(dev, dtype) if name in ATTENTION_WORKLOADS else build(dev)
    except Exception as e:
        log(traceback.format_exc())
        return lines + [f"Skipped: building the workload failed ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:200] if str(e) else ''}).", ""]
    notes = check(steps, reference, TOLERANCE if dtype == "float32" else HALF_TOLERANCE)
    failed = [f"- {s}: {n}" for s, n in notes.items() if s not in steps]
    if not steps:
        return lines + ["Skipped: every system failed.", *failed, ""]
    log(f"   timing {list(steps)}")
    timings: list[Timing] = measure(steps, repeats=repeats, warmup=warmup, block=10,
                                    rewarm=0.02)
    for t in timings:
        log(f"   {t.name}: {t.median * 1e3:.3f} ms")
    lines += [markdown_table(timings, "ms/step", 1e3, "functx" if "functx" in steps
                             else timings[0].name, notes)]
    if failed:
        lines += ["", *failed]
    if memory and (dev.cuda or name.startswith("attention")):
        mem = {}
        for system, step in steps.items():
            try:
                text = peak_memory(dev, system, step)
            except Exception as e:
                text = f"not measured ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
            if text is not None:
                mem[system] = text
        if mem:
            lines += ["", "Peak memory of one step (live arrays):", ""]
            lines += [f"- {s}: {t}" for s, t in mem.items()]
    by_name = {t.name: t.median for t in timings}
    ratios = [f"{s} ÷ {reference}: {by_name[s] / by_name[reference]:.2f}"
              for s in ("functx", "functx jit") if s in by_name and reference in by_name]
    if ratios:
        target = ""
        if dev.cuda and name != "conv2d" and "functx" in by_name:
            met = by_name["functx"] / by_name[reference] <= TARGET
            target = f" (target on the GPU: functx <= {TARGET:.1f}x: {'met' if met else 'MISSED'})"
        lines += ["", "; ".join(ratios) + target]
    if name in ATTENTION_WORKLOADS and reference in by_name:
        limit = JIT_ATTENTION_TARGET[dtype]
        peer = "torch flash" if "torch flash" in by_name else reference
        if "functx jit" in by_name:
            r = by_name["functx jit"] / by_name[peer]
            verdict = ("met" if r <= limit else "MISSED") if dev.cuda else "GPU only"
            lines += ["", f"Issue 20 ({dtype}): functx jit ÷ {peer} = {r:.2f} (target on the "
                          f"GPU <= {limit}: {verdict})"]
        else:
            lines += ["", f"Issue 20 ({dtype}): functx jit did not run"]
    return lines + [""]


# ------------------------------------------------------------------------------------------
# Main


def load_torch(device: str) -> tuple[Any, str]:
    """PyTorch set up for the device (TF32 off), or None with the reason."""
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed (pip install torch): functx is timed alone"
    if device == "cuda":
        if not torch.cuda.is_available():
            return None, (f"PyTorch {torch.__version__} sees no CUDA device: functx is timed "
                          "alone")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    return torch, ""


def gpu_report(torch: Any) -> list[str]:
    lines = []
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        gpu = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        rt = cupy.cuda.runtime.runtimeGetVersion()
        lines.append(f"- GPU: {gpu} ({props['totalGlobalMem'] / 2**30:.0f} GiB), CUDA runtime "
                     f"{rt // 1000}.{rt % 1000 // 10}, CuPy {cupy.__version__}")
    except Exception as e:
        lines.append(f"- GPU: unknown ({type(e).__name__})")
    if torch is not None:
        lines.append(f"- PyTorch CUDA {torch.version.cuda}, cuDNN "
                     f"{torch.backends.cudnn.version()}; allow_tf32 off (matmul and cuDNN)")
    lines.append(f"- NVIDIA_TF32_OVERRIDE={os.environ.get('NVIDIA_TF32_OVERRIDE')}, "
                 f"CUPY_TF32={os.environ.get('CUPY_TF32')}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--only", help="comma-separated workloads: " + ", ".join(WORKLOADS))
    parser.add_argument("--repeats", type=int, default=30, help="timed steps per system")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per system")
    parser.add_argument("--quick", action="store_true", help="5 repeats, 1 warm-up (a smoke "
                        "test; not for reporting)")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument("--dtype", default="float32",
                        help="comma-separated dtypes of the attention workloads (float32, "
                             "float16, bfloat16); the other workloads run in float32 only")
    args = parser.parse_args(argv)
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    if any(d not in JIT_ATTENTION_TARGET for d in dtypes):
        log(f"Unknown dtype(s) in {dtypes}; choose from {list(JIT_ATTENTION_TARGET)}.")
        return 2
    repeats, warmup = (5, 1) if args.quick else (args.repeats, args.warmup)
    if args.device == "cuda" and "cuda" not in fx.backends():
        log(f"No CUDA backend in functx ({cuda_status()}): nothing to run on the GPU.")
        return 1
    names = ([n.strip() for n in args.only.split(",")] if args.only else
             [n for n, w in WORKLOADS.items() if args.device in w[3]])
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        log(f"Unknown workload(s) {unknown}; choose from {list(WORKLOADS)}.")
        return 2
    torch, why = load_torch(args.device)
    if why:
        log(why)
    dev = Device(args.device, torch)
    meter = CpuMeter()
    report = [f"### functx.nn vs PyTorch eager ({args.device.upper()}, float32"
              + ("" if dtypes == ["float32"] else f"; attention in {', '.join(dtypes)}")
              + ")", "",
              environment_report({"torch": torch} if torch is not None else {}, ROOT)]
    if dev.cuda:
        report += gpu_report(torch)
    report += [f"- command: python benchmarks/bench_nn.py {' '.join(argv or sys.argv[1:])}"
               .rstrip(),
               f"- {repeats} timed steps per system after {warmup} warm-up steps, interleaved "
               "in blocks of 10 (each after a 0.25 s pause and 20 ms of untimed steps); "
               "median and 25th-75th percentiles"
               + ("; each step waits for the GPU" if dev.cuda else ""), ""]
    if why:
        report += [f"Note: {why}.", ""]
    runs = [(n, d) for n in names
            for d in (dtypes if n in ATTENTION_WORKLOADS else ["float32"])]
    for name, dtype in runs:
        try:
            report += run(name, dev, repeats, warmup, not args.no_memory, dtype)
        except Exception as e:  # keep going: the other workloads still get measured
            log(traceback.format_exc())
            report += [f"#### {WORKLOADS[name][0]}, {dtype}", "",
                       f"failed: {type(e).__name__}: {e}", ""]
    if not dev.cuda:
        report.append(meter.report())
    report.append("(`functx ÷ system` above 1 means functx is slower than that system.)")
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
