"""CPU benchmark of sorting: ``sort`` and ``top_k`` (k=100) of 10^6 float32, forward and
forward + backward, functx against PyTorch eager and JAX ``jit`` in one process.

Workloads (x of 10^6 float32 standard-normal values, w fixed weights):

1. ``sort``: the sorted values (PyTorch's ``sort`` returns values and indices; JAX's
   ``jnp.sort``; functx's ``fnp.sort``, eager and under ``jit``);
2. ``sort_grad``: the gradient of ``sum(sort(x) * w)`` (the forward pass and the backward
   scatter through the permutation);
3. ``top_k``: the 100 largest values and their indices (``torch.topk``, ``lax.top_k``);
4. ``top_k_grad``: the gradient of ``sum(top_k(x, 100).values * w[:100])``.

Every result is checked against NumPy (values) or against functx's gradient before timing.
Times are medians of interleaved repeats (``_harness.py``), with the ratio to PyTorch
(target of issue 15: functx within 1.5x of PyTorch). Thread settings are the libraries'
defaults; NumPy's sort (functx's CPU path) is single-threaded.

``--device cuda`` runs the same workloads on the GPU, every system in this one process on the
same card: functx (eager and ``jit``) on ``functx.device_put`` copies of x and w, PyTorch
eager on ``torch.device("cuda")`` (TF32 off), JAX ``jit`` on its GPU backend (default matmul
precision "highest"). The inputs are put on the device once, before timing; every timed step
ends by waiting for the device (CuPy's current stream, ``torch.cuda.synchronize``,
``block_until_ready``). The report names the card.

Usage: ``python benchmarks/bench_sort.py [--quick] [--no-peers] [--torch-threads N]
[--device {cpu,cuda}]``
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
sys.path.insert(0, str(ROOT))
import functx as fx  # noqa: E402
import functx.lax as flax  # noqa: E402
import functx.numpy as fnp  # noqa: E402
from _harness import CpuMeter, environment_report, measure, relative_error  # noqa: E402

N, K = 10**6, 100


def _have(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _table(title: str, timings: list, ref: str) -> str:
    base = next((t.median for t in timings if t.name == ref), None)
    lines = [f"### {title}", "", f"| system | median (ms) | IQR (ms) | time ÷ {ref} |",
             "|---|---:|---:|---:|"]
    for t in timings:
        lo, hi = t.quartiles
        ratio = f"{t.median / base:.2f}" if base else "-"
        lines.append(f"| {t.name} | {t.median * 1e3:.2f} | {lo * 1e3:.2f}–{hi * 1e3:.2f} "
                     f"| {ratio} |")
    return "\n".join(lines) + "\n"


def _check(name: str, got: Any, want: Any, tol: float = 1e-6) -> None:
    err = relative_error(np.asarray(got), np.asarray(want))
    if err > tol:
        raise SystemExit(f"{name}: result differs from the reference (relative error {err:.2e})")


def _host(x: Any) -> Any:
    """A NumPy copy of a result of any system (functx/CuPy, PyTorch, JAX, NumPy)."""
    if hasattr(x, "detach"):  # a torch tensor
        return x.detach().cpu().numpy()
    if isinstance(x, np.ndarray) or "jax" in type(x).__module__:
        return np.asarray(x)
    return np.asarray(fx.to_numpy(x))


def _functx_sync(device: str) -> Callable[[Any], Any]:
    """``out`` after waiting for functx's work on ``device`` (CuPy's current stream)."""
    if device == "cpu":
        return lambda out: out
    if device == "cuda":
        import cupy

        stream_sync = cupy.cuda.get_current_stream().synchronize
    else:
        stream_sync = fx.get_backend(device.split(":")[0]).synchronize

    def done(out: Any) -> Any:
        stream_sync()
        return out
    return done


def workloads(x: np.ndarray, w: np.ndarray, peers: bool,
              device: str = "cpu") -> dict[str, dict[str, Callable]]:
    if device != "cpu":
        return _device_workloads(x, w, peers, device)
    wk = w[:K]
    sort_loss = lambda x: (fnp.sort(x) * w).sum()  # noqa: E731
    topk_loss = lambda x: (flax.top_k(x, K)[0] * wk).sum()  # noqa: E731
    fx_sort_jit = fx.jit(fnp.sort)
    fx_grad = fx.grad(sort_loss)
    fx_grad_jit = fx.jit(fx.grad(sort_loss))
    fx_topk_jit = fx.jit(lambda x: flax.top_k(x, K))
    fx_topk_grad = fx.grad(topk_loss)
    fx_topk_grad_jit = fx.jit(fx.grad(topk_loss))
    out: dict[str, dict[str, Callable]] = {
        "sort": {"functx": lambda: fnp.sort(x), "functx jit": lambda: fx_sort_jit(x)},
        "sort_grad": {"functx": lambda: fx_grad(x), "functx jit": lambda: fx_grad_jit(x)},
        "top_k": {"functx": lambda: flax.top_k(x, K), "functx jit": lambda: fx_topk_jit(x)},
        "top_k_grad": {"functx": lambda: fx_topk_grad(x),
                       "functx jit": lambda: fx_topk_grad_jit(x)},
    }
    want = {"sort": np.sort(x), "top_k": -np.sort(-x)[:K]}
    for name in ("sort", "top_k"):
        for system, f in out[name].items():
            r = f()
            _check(f"{name} {system}", r[0] if isinstance(r, tuple) else r, want[name])
    g_sort, g_topk = fx_grad(x), fx_topk_grad(x)
    _check("sort_grad functx jit", fx_grad_jit(x), g_sort)
    _check("top_k_grad functx jit", fx_topk_grad_jit(x), g_topk)
    if peers and _have("torch"):
        import torch

        tx, tw, twk = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(wk)

        def torch_grad(fn: Callable) -> Callable:
            def step() -> Any:
                xr = tx.detach().requires_grad_()
                (fn(xr) * (tw if fn is torch_sort else twk)).sum().backward()
                return xr.grad
            return step

        def torch_sort(v: Any) -> Any:
            return torch.sort(v).values

        def torch_topk(v: Any) -> Any:
            return torch.topk(v, K).values

        out["sort"]["torch"] = lambda: torch.sort(tx)
        out["sort_grad"]["torch"] = torch_grad(torch_sort)
        out["top_k"]["torch"] = lambda: torch.topk(tx, K)
        out["top_k_grad"]["torch"] = torch_grad(torch_topk)
        _check("sort torch", out["sort"]["torch"]().values.numpy(), want["sort"])
        _check("top_k torch", out["top_k"]["torch"]().values.numpy(), want["top_k"])
        # torch's default sort is not stable: tied values (10^6 float32 have some) may swap
        # their weights, so compare the gradients as multisets
        _check("sort_grad torch", np.sort(out["sort_grad"]["torch"]().numpy()), np.sort(g_sort))
        _check("top_k_grad torch", out["top_k_grad"]["torch"]().numpy(), g_topk)
    if peers and _have("jax"):
        import jax
        import jax.numpy as jnp

        jx, jw, jwk = jnp.asarray(x), jnp.asarray(w), jnp.asarray(wk)
        j_sort = jax.jit(jnp.sort)
        j_sort_grad = jax.jit(jax.grad(lambda v: (jnp.sort(v) * jw).sum()))
        j_topk = jax.jit(lambda v: jax.lax.top_k(v, K))
        j_topk_grad = jax.jit(jax.grad(lambda v: (jax.lax.top_k(v, K)[0] * jwk).sum()))
        out["sort"]["jax jit"] = lambda: j_sort(jx).block_until_ready()
        out["sort_grad"]["jax jit"] = lambda: j_sort_grad(jx).block_until_ready()
        out["top_k"]["jax jit"] = lambda: j_topk(jx)[0].block_until_ready()
        out["top_k_grad"]["jax jit"] = lambda: j_topk_grad(jx).block_until_ready()
        _check("sort jax", j_sort(jx), want["sort"])
        _check("top_k jax", j_topk(jx)[0], want["top_k"])
        _check("sort_grad jax", j_sort_grad(jx), g_sort)
        _check("top_k_grad jax", j_topk_grad(jx), g_topk)
    return out


def _device_workloads(x_host: np.ndarray, w_host: np.ndarray, peers: bool,
                      device: str) -> dict[str, dict[str, Callable]]:
    """:func:`workloads` on a GPU: every system's inputs put on the device once, every step
    synchronised; results checked on the host."""
    done = _functx_sync(device)
    x, w = fx.device_put((x_host, w_host), device)
    wk = w[:K]
    sort_loss = lambda x: (fnp.sort(x) * w).sum()  # noqa: E731
    topk_loss = lambda x: (flax.top_k(x, K)[0] * wk).sum()  # noqa: E731
    fx_sort_jit = fx.jit(fnp.sort)
    fx_grad = fx.grad(sort_loss)
    fx_grad_jit = fx.jit(fx.grad(sort_loss))
    fx_topk_jit = fx.jit(lambda x: flax.top_k(x, K))
    fx_topk_grad = fx.grad(topk_loss)
    fx_topk_grad_jit = fx.jit(fx.grad(topk_loss))
    out: dict[str, dict[str, Callable]] = {
        "sort": {"functx": lambda: done(fnp.sort(x)), "functx jit": lambda: done(fx_sort_jit(x))},
        "sort_grad": {"functx": lambda: done(fx_grad(x)),
                      "functx jit": lambda: done(fx_grad_jit(x))},
        "top_k": {"functx": lambda: done(flax.top_k(x, K)),
                  "functx jit": lambda: done(fx_topk_jit(x))},
        "top_k_grad": {"functx": lambda: done(fx_topk_grad(x)),
                       "functx jit": lambda: done(fx_topk_grad_jit(x))},
    }
    want = {"sort": np.sort(x_host), "top_k": -np.sort(-x_host)[:K]}
    for name in ("sort", "top_k"):
        for system, f in out[name].items():
            r = f()
            _check(f"{name} {system}", _host(r[0] if isinstance(r, tuple) else r), want[name])
    g_sort, g_topk = _host(fx_grad(x)), _host(fx_topk_grad(x))
    _check("sort_grad functx jit", _host(fx_grad_jit(x)), g_sort)
    _check("top_k_grad functx jit", _host(fx_topk_grad_jit(x)), g_topk)
    if peers and _have("torch"):
        import torch

        if not torch.cuda.is_available():
            raise SystemExit(f"PyTorch {torch.__version__} sees no CUDA device: rerun with "
                             "--no-peers, or with a CUDA build of PyTorch.")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        dev = torch.device(device)
        tx, tw = torch.as_tensor(x_host, device=dev), torch.as_tensor(w_host, device=dev)
        twk = tw[:K]
        sync = torch.cuda.synchronize

        def torch_done(r: Any) -> Any:
            sync()
            return r

        def torch_grad(fn: Callable, weights: Any) -> Callable:
            def step() -> Any:
                xr = tx.detach().requires_grad_()
                (fn(xr) * weights).sum().backward()
                sync()
                return xr.grad
            return step

        out["sort"]["torch"] = lambda: torch_done(torch.sort(tx))
        out["sort_grad"]["torch"] = torch_grad(lambda v: torch.sort(v).values, tw)
        out["top_k"]["torch"] = lambda: torch_done(torch.topk(tx, K))
        out["top_k_grad"]["torch"] = torch_grad(lambda v: torch.topk(v, K).values, twk)
        _check("sort torch", _host(out["sort"]["torch"]().values), want["sort"])
        _check("top_k torch", _host(out["top_k"]["torch"]().values), want["top_k"])
        # torch's default sort is not stable: tied values may swap their weights
        _check("sort_grad torch", np.sort(_host(out["sort_grad"]["torch"]())), np.sort(g_sort))
        _check("top_k_grad torch", _host(out["top_k_grad"]["torch"]()), g_topk)
    if peers and _have("jax"):
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_default_matmul_precision", "highest")
        try:
            gpu = jax.devices("gpu")[0]
        except RuntimeError as e:  # (a JAX without a GPU backend on a GPU host)
            print(f"JAX on {device} skipped: {str(e).splitlines()[0]}", file=sys.stderr)
            return out
        jx, jw = jax.device_put(x_host, gpu), jax.device_put(w_host, gpu)
        jwk = jw[:K]
        j_sort = jax.jit(jnp.sort)
        j_sort_grad = jax.jit(jax.grad(lambda v: (jnp.sort(v) * jw).sum()))
        j_topk = jax.jit(lambda v: jax.lax.top_k(v, K))
        j_topk_grad = jax.jit(jax.grad(lambda v: (jax.lax.top_k(v, K)[0] * jwk).sum()))
        out["sort"]["jax jit"] = lambda: j_sort(jx).block_until_ready()
        out["sort_grad"]["jax jit"] = lambda: j_sort_grad(jx).block_until_ready()
        out["top_k"]["jax jit"] = lambda: j_topk(jx)[0].block_until_ready()
        out["top_k_grad"]["jax jit"] = lambda: j_topk_grad(jx).block_until_ready()
        _check("sort jax", _host(j_sort(jx)), want["sort"])
        _check("top_k jax", _host(j_topk(jx)[0]), want["top_k"])
        _check("sort_grad jax", _host(j_sort_grad(jx)), g_sort)
        _check("top_k_grad jax", _host(j_topk_grad(jx)), g_topk)
    return out


def _card_name() -> str:
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--no-peers", action="store_true", help="functx only")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="PyTorch intra-op threads (default: its own; functx's NumPy "
                             "sort uses one)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where every system runs (default: cpu)")
    args = parser.parse_args()
    if args.device != "cpu":  # before JAX starts: not 75% of the card for JAX alone
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.torch_threads and not args.no_peers and _have("torch"):
        import torch

        torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    w = rng.standard_normal(N).astype(np.float32)
    repeats, warmup = (6, 1) if args.quick else (20, 2)
    meter = CpuMeter()
    modules: dict[str, object] = {}
    for name in ("torch", "jax"):
        if not args.no_peers and _have(name):
            modules[name] = __import__(name)
    where = "CPU" if args.device == "cpu" else f"{args.device}: {_card_name()}"
    report = [f"# sort and top_k of 10^6 float32 ({where})", ""]
    for name, steps in workloads(x, w, not args.no_peers, args.device).items():
        timings = measure(steps, repeats=repeats, warmup=warmup, block=3)
        ref = "torch" if "torch" in steps else "functx"
        report.append(_table(name, timings, ref))
    report += ["## Environment", "", environment_report(modules, ROOT), meter.report()]
    print("\n".join(report))


if __name__ == "__main__":
    main()
