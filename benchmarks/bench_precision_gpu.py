"""GPU benchmark of precisions: float32, TF32, float16 and bfloat16 in functx beside PyTorch.

Every system in this one process on the same card:

1. ``matmul``: a 4096 x 4096 x 4096 product (TFLOP/s): float32 (``precision="highest"``,
   functx's default), float32 with TF32 (``fx.default_matmul_precision("tensorfloat32")``;
   PyTorch's ``allow_tf32``), float16 and bfloat16 (tensor cores, float32 accumulation);
2. ``mlp``: the gradient of the mean squared error of a 1024-4096-4096-1024 tanh MLP, batch
   1024 (the issue's big MLP), in float32 and in bfloat16, functx eager against PyTorch eager
   (the bfloat16 target: within 1.2x of PyTorch bfloat16 eager);
3. ``ln_gelu``: layer norm -> tanh-GELU -> scale on (8192, 4096), gradient w.r.t. the input,
   in bfloat16 (functx's fused row kernels load and store bfloat16) against PyTorch's fused
   ``F.layer_norm``/``F.gelu``.

TF32 is off except in the rows that ask for it (``NVIDIA_TF32_OVERRIDE`` must not be 0:
it would turn TF32 off in cuBLAS for the whole process). Each step waits for the GPU; times
are medians of interleaved repeats (``_harness.py``) with the 25th-75th percentiles. Before
timing, each functx result is compared with PyTorch's (relative max error).

Usage (on a machine with a GPU, CuPy 14 and ml_dtypes; PyTorch optional)::

    python benchmarks/bench_precision_gpu.py [--repeats 30] [--warmup 5] [--only matmul,mlp]
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import functx as fx  # noqa: E402
import functx.nn as fnn  # noqa: E402
import functx.numpy as fnp  # noqa: E402

from _harness import git_commit, log, markdown_table, measure, relative_error  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
# name -> (NumPy dtype, TF32)
PRECISIONS = {"float32": (np.dtype(np.float32), False), "tf32": (np.dtype(np.float32), True),
              "float16": (np.dtype(np.float16), False), "bfloat16": (BF16, False)}


def sync() -> None:
    import cupy

    cupy.cuda.get_current_stream().synchronize()


def torch_dtype(torch: Any, dt: np.dtype) -> Any:
    return {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
            BF16: torch.bfloat16}[dt]


def to_torch(torch: Any, a: np.ndarray) -> Any:
    """A CUDA tensor of ``a``'s values and dtype (bfloat16 through float32)."""
    if a.dtype == BF16:
        return torch.from_numpy(a.astype(np.float32)).cuda().to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


def torch_host(t: Any) -> np.ndarray:
    return t.detach().float().cpu().numpy()


class Tf32:
    """PyTorch's TF32 switch for a block (restored after)."""

    def __init__(self, torch: Any, on: bool) -> None:
        self.torch, self.on = torch, on

    def __enter__(self) -> None:
        self.old = self.torch.backends.cuda.matmul.allow_tf32
        self.torch.backends.cuda.matmul.allow_tf32 = self.on

    def __exit__(self, *exc: Any) -> None:
        self.torch.backends.cuda.matmul.allow_tf32 = self.old


def fx_precision(tf32: bool) -> Any:
    return fx.default_matmul_precision("tensorfloat32" if tf32 else "float32")


# ------------------------------------------------------------------------------------------
# Workloads: each returns ({system: step}, {system: result for the error check}, flops)


def workload_matmul(torch: Any | None, n: int = 4096) -> tuple[dict, dict, float]:
    rng = np.random.default_rng(0)
    a32, b32 = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    steps: dict[str, Callable] = {}
    outs: dict[str, Callable] = {}
    for name, (dt, tf32) in PRECISIONS.items():
        a, b = fx.device_put((a32.astype(dt), b32.astype(dt)), "cuda")

        def fx_step(a=a, b=b, tf32=tf32):
            with fx_precision(tf32):
                out = fnp.matmul(a, b)
            sync()
            return out

        steps[f"functx {name}"] = outs[f"functx {name}"] = fx_step
        if torch is not None:
            ta, tb = (to_torch(torch, m).to(torch_dtype(torch, dt)) for m in (a32, b32))

            def torch_step(ta=ta, tb=tb, tf32=tf32):
                with Tf32(torch, tf32):
                    out = ta @ tb
                torch.cuda.synchronize()
                return out

            steps[f"pytorch {name}"] = outs[f"pytorch {name}"] = torch_step
    return steps, outs, 2.0 * n ** 3


def _mlp_data(dt: np.dtype, rng: np.random.Generator) -> tuple:
    sizes, batch = (1024, 4096, 4096, 1024), 1024
    params = [((rng.standard_normal((a, b)) / math.sqrt(a)).astype(dt),
               (rng.standard_normal(b) * 0.1).astype(dt)) for a, b in zip(sizes, sizes[1:])]
    X = rng.standard_normal((batch, sizes[0])).astype(dt)
    return params, X, rng.standard_normal((batch, sizes[-1])).astype(dt)


def fx_mlp_loss(params: list, X: Any, Y: Any) -> Any:
    h = X
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = fnp.tanh(h)
    return fnp.mean((h - Y) ** 2)


def workload_mlp(torch: Any | None) -> tuple[dict, dict, float]:
    steps: dict[str, Callable] = {}
    outs: dict[str, Callable] = {}
    grad = fx.grad(fx_mlp_loss)
    for name in ("float32", "bfloat16"):
        dt = PRECISIONS[name][0]
        data = _mlp_data(dt, np.random.default_rng(1))
        dev = fx.device_put(data, "cuda")

        def fx_step(dev=dev):
            g = grad(*dev)
            sync()
            return g[0][0]

        steps[f"functx {name}"] = outs[f"functx {name}"] = fx_step
        if torch is not None:
            params = [(to_torch(torch, w).requires_grad_(), to_torch(torch, b).requires_grad_())
                      for w, b in data[0]]
            X, Y = to_torch(torch, data[1]), to_torch(torch, data[2])

            def torch_step(params=params, X=X, Y=Y):
                h = X
                for i, (w, b) in enumerate(params):
                    h = h @ w + b
                    if i < len(params) - 1:
                        h = torch.tanh(h)
                loss = ((h - Y) ** 2).mean()
                g = torch.autograd.grad(loss, [p for wb in params for p in wb])
                torch.cuda.synchronize()
                return g[0]

            steps[f"pytorch {name}"] = outs[f"pytorch {name}"] = torch_step
    return steps, outs, 0.0


def workload_ln_gelu(torch: Any | None) -> tuple[dict, dict, float]:
    rng = np.random.default_rng(2)
    x, G = (rng.standard_normal((8192, 4096)).astype(BF16) for _ in range(2))
    g = (1 + 0.1 * rng.standard_normal(4096)).astype(BF16)
    b = (0.1 * rng.standard_normal(4096)).astype(BF16)
    dev = fx.device_put((x, g, b, G), "cuda")

    def loss(x, g, b, G):
        return fnp.sum(fnn.gelu(fnn.layer_norm(x, (4096,), g, b, 1e-5), approximate="tanh")
                       * 0.5 * G)

    grad = fx.grad(loss)

    def fx_step():
        out = grad(*dev)
        sync()
        return out

    steps = {"functx bfloat16": fx_step}
    outs = dict(steps)
    if torch is not None:
        F = torch.nn.functional
        tx, tg, tb, tG = (to_torch(torch, a) for a in (x, g, b, G))
        tx.requires_grad_()

        def torch_step():
            y = F.gelu(F.layer_norm(tx, (4096,), tg, tb, 1e-5), approximate="tanh")
            out = torch.autograd.grad((y * 0.5 * tG).sum(), [tx])[0]
            torch.cuda.synchronize()
            return out

        steps["pytorch bfloat16"] = outs["pytorch bfloat16"] = torch_step
    return steps, outs, 0.0


WORKLOADS = {"matmul": ("4096^3 matmul (TFLOP/s in the note column)", workload_matmul),
             "mlp": ("MLP gradient, batch 1024, 1024-4096-4096-1024, tanh", workload_mlp),
             "ln_gelu": ("layer norm -> tanh-GELU -> scale on (8192, 4096) in bfloat16, "
                         "gradient w.r.t. the input", workload_ln_gelu)}


def run(name: str, torch: Any | None, repeats: int, warmup: int) -> str:
    title, make = WORKLOADS[name]
    steps, outs, flops = make(torch)
    notes = {}
    for system, fn in outs.items():
        if system.startswith("functx") and torch is not None:
            peer = "pytorch" + system[len("functx"):]
            if peer in outs:
                got, want = fn(), outs[peer]()
                got = fx.to_numpy(got[0] if isinstance(got, (tuple, list)) else got)
                err = relative_error(np.asarray(got, np.float32), torch_host(want))
                notes[system] = f"error vs {peer}: {err:.1e}"
    timings = measure(steps, repeats, warmup)
    if flops:
        for t in timings:
            notes[t.name] = (notes.get(t.name, "") + f" {flops / t.median / 1e12:.0f} TFLOP/s"
                             ).strip()
    reference = "pytorch bfloat16" if "pytorch bfloat16" in steps else timings[0].name
    return "\n".join([f"#### {title}", "", markdown_table(timings, "ms", 1e3, reference, notes)])


def environment(torch: Any | None) -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    lines = [f"- GPU: {name}, CuPy {cupy.__version__}, ml_dtypes {ml_dtypes.__version__}",
             f"- functx at commit {git_commit(ROOT)}, NumPy {np.__version__}"]
    if torch is not None:
        lines.append(f"- PyTorch {torch.__version__} (allow_tf32 only in the tf32 rows)")
    lines.append(f"- NVIDIA_TF32_OVERRIDE={os.environ.get('NVIDIA_TF32_OVERRIDE')}, "
                 f"CUPY_TF32={os.environ.get('CUPY_TF32')}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--only", default="matmul,mlp,ln_gelu")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    if "cuda" not in fx.backends():
        sys.exit(f"No CUDA backend: {sys.modules['functx.backends'].cuda_status()}")
    if os.environ.get("NVIDIA_TF32_OVERRIDE") == "0":
        log("NVIDIA_TF32_OVERRIDE=0: the tf32 rows will run in float32")
    torch = None
    if not args.no_peers and importlib.util.find_spec("torch"):
        import torch as _torch

        if _torch.cuda.is_available():
            torch = _torch
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
    report = ["### GPU precisions: float32, TF32, float16, bfloat16 (functx beside PyTorch)",
              "", environment(torch),
              f"- {args.repeats} timed steps per system after {args.warmup} warm-up steps; "
              "median and 25th-75th percentiles; each step waits for the GPU", ""]
    for name in args.only.split(","):
        try:
            report += [run(name.strip(), torch, args.repeats, args.warmup), ""]
        except Exception as e:  # keep going: the other workloads still get measured
            log(traceback.format_exc())
            report += [f"#### {name}", "", f"failed: {type(e).__name__}: {e}", ""]
        print("\n".join(report[-2:]), file=sys.stderr, flush=True)
    print("\n".join(report))


if __name__ == "__main__":
    main()
