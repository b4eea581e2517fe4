"""CPU benchmark of linear-algebra gradients: functx vs PyTorch eager vs JAX ``jit``.

Workloads (float64, gradients with respect to every input):

1. ``slogdet+solve 1024``: ``grad`` of ``slogdet(A).logabsdet + sum(solve(A, B))`` for A of
   1024 x 1024 (well conditioned) and B of 1024 x 64;
2. ``slogdet+solve 256x64``: the same for a batch of 256 matrices 64 x 64 with B 64 x 8;
3. ``gp nll 2000``: ``grad`` of a Gaussian-process negative log marginal likelihood at N=2000
   (RBF kernel, 3 hyperparameters) through ``cholesky``, ``cho_solve`` and the log
   determinant from the factor's diagonal.

Systems: functx eager ``grad`` and functx ``jit(grad)`` (on CUDA, jit replays each step as one
CUDA graph), PyTorch eager and JAX ``jit``. Every system's result is checked against functx's
before timing; times are medians of interleaved repeats (``_harness.py``), with the ratio of
each functx row to each peer (functx ÷ peer: below 1, functx is faster).

``--device cuda`` runs the same workloads on the GPU, every system in this one process on the
same card: functx's arrays put there with ``functx.device_put`` (eager ``grad``, as on the
CPU; arrays created inside, such as the GP's identity, on ``functx.default_device("cuda")``),
PyTorch eager on ``torch.device("cuda")`` (TF32 off), JAX ``jit`` on its GPU backend (default
matmul precision "highest"). Inputs are put on the device once, before timing; every timed
step ends by waiting for the device (CuPy's current stream, ``torch.cuda.synchronize``,
``block_until_ready``). The card's name is printed with the table.

Usage: ``python benchmarks/bench_linalg.py [--quick] [--device {cpu,cuda}] [--only SUBSTRING]
[--one-thread]``.
``--only 256x64`` runs the workloads whose title contains the substring; ``--one-thread``
runs every library on one thread (OpenBLAS, MKL, OpenMP, Numba, PyTorch, XLA) and times
process CPU time instead of wall time: per-element cost, steadier on a shared machine.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

if "--one-thread" in sys.argv:  # before NumPy, SciPy, Numba, PyTorch or JAX start threads
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                 "NUMBA_NUM_THREADS"):
        os.environ[_var] = "1"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen"
                               "=false intra_op_parallelism_threads=1").strip()
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import functx as fx  # noqa: E402
import functx.numpy as fnp  # noqa: E402
import functx.scipy.linalg as fsl  # noqa: E402
from _harness import environment_report, measure, relative_error  # noqa: E402


def _have(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _problem(batch: tuple, n: int, k: int, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + (n, n)) / np.sqrt(n) + 2 * np.eye(n)
    b = rng.standard_normal(batch + (n, k))
    return a, b


def _gp_data(n: int) -> tuple:
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(-5, 5, n))
    y = np.sin(x) + 0.1 * rng.standard_normal(n)
    return np.array([0.0, 0.0, np.log(0.1)]), x, y


def _gp_nll(ns: Any, chol: Callable, cho_solve: Callable, params: Any, x: Any, y: Any) -> Any:
    """The GP negative log marginal likelihood written against a NumPy-like namespace."""
    log_ell, log_sf, log_sn = params[0], params[1], params[2]
    d = (x[:, None] - x[None, :]) / ns.exp(log_ell)
    k = ns.exp(2 * log_sf) * ns.exp(-0.5 * d * d) + (ns.exp(2 * log_sn) + 1e-6) * ns.eye(len(x))
    L = chol(k)
    alpha = cho_solve(L, y)
    diag = ns.diagonal(L) if hasattr(ns, "diagonal") else ns.diag(L)
    return 0.5 * ns.sum(y * alpha) + ns.sum(ns.log(diag)) + 0.5 * len(x) * np.log(2 * np.pi)


def _workloads(quick: bool) -> list:
    big = _problem((), 512 if quick else 1024, 64)
    small = _problem((64 if quick else 256,), 64, 8)
    return [("slogdet+solve 1024" if not quick else "slogdet+solve 512", big),
            ("slogdet+solve 256x64" if not quick else "slogdet+solve 64x64", small),
            ("gp nll 2000" if not quick else "gp nll 500", _gp_data(500 if quick else 2000))]


def _functx_steps(device: str = "cpu", jit: bool = False) -> dict:
    f = lambda a, b: fnp.sum(fnp.linalg.slogdet(a).logabsdet) + fnp.sum(fnp.linalg.solve(a, b))
    g = fx.grad(f, argnums=(0, 1))
    gp = fx.grad(lambda p, x, y: _gp_nll(
        fnp, lambda k: fsl.cholesky(k, lower=True),
        lambda L, v: fsl.cho_solve((L, True), v), p, x, y))
    if jit:  # (on CUDA, jit replays each step as one CUDA graph)
        g, gp = fx.jit(g), fx.jit(gp)
    if device == "cpu":
        return {"solve": g, "gp": gp}
    sync = _device_sync(device)

    def on_device(fn: Callable) -> Callable:
        def step(*args: Any) -> Any:
            with fx.default_device(device):  # (the GP's eye is created inside)
                out = fn(*args)
            sync()
            return out
        return step
    return {"solve": on_device(g), "gp": on_device(gp),
            "put": lambda data: fx.device_put(data, device), "host": fx.to_numpy}


def _device_sync(device: str) -> Callable[[], None]:
    """Waits for functx's work on ``device`` (CuPy's current stream on CUDA)."""
    if device == "cuda":
        import cupy

        return cupy.cuda.get_current_stream().synchronize
    backend = fx.get_backend(device.split(":")[0])
    return backend.synchronize


def _torch_steps(device: str = "cpu") -> dict:
    import torch

    if "--one-thread" in sys.argv:
        torch.set_num_threads(1)
    if device != "cpu":
        if not torch.cuda.is_available():
            raise SystemExit(f"PyTorch {torch.__version__} sees no CUDA device: run with a "
                             "CUDA build of PyTorch, or uninstall it to time functx and JAX only.")
        return _torch_device_steps(torch, device)

    def solve(a, b):
        a = torch.tensor(a, requires_grad=True)
        b = torch.tensor(b, requires_grad=True)
        (torch.linalg.slogdet(a).logabsdet.sum() + torch.linalg.solve(a, b).sum()).backward()
        return a.grad.numpy(), b.grad.numpy()

    def gp(p, x, y):
        p = torch.tensor(p, requires_grad=True)
        x, y = torch.tensor(x), torch.tensor(y)
        tns = type("ns", (), dict(exp=torch.exp, eye=lambda n: torch.eye(n, dtype=torch.float64),
                                  sum=torch.sum, log=torch.log, diag=torch.diagonal))
        nll = _gp_nll(tns, torch.linalg.cholesky,
                      lambda L, v: torch.cholesky_solve(v[:, None], L)[:, 0], p, x, y)
        nll.backward()
        return p.grad.numpy()
    return {"solve": solve, "gp": gp}


def _torch_device_steps(torch: Any, device: str) -> dict:
    """PyTorch eager on the GPU: the inputs put there once (``put``), each step a fresh leaf
    of them (no copy), ending with ``torch.cuda.synchronize``."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(device)
    leaf = lambda t: t.detach().requires_grad_()  # noqa: E731

    def solve(a, b):
        a, b = leaf(a), leaf(b)
        (torch.linalg.slogdet(a).logabsdet.sum() + torch.linalg.solve(a, b).sum()).backward()
        torch.cuda.synchronize()
        return a.grad, b.grad

    def gp(p, x, y):
        p = leaf(p)
        tns = type("ns", (), dict(exp=torch.exp, sum=torch.sum, log=torch.log,
                                  diag=torch.diagonal,
                                  eye=lambda n: torch.eye(n, dtype=torch.float64, device=dev)))
        nll = _gp_nll(tns, torch.linalg.cholesky,
                      lambda L, v: torch.cholesky_solve(v[:, None], L)[:, 0], p, x, y)
        nll.backward()
        torch.cuda.synchronize()
        return p.grad
    return {"solve": solve, "gp": gp,
            "put": lambda data: tuple(torch.as_tensor(d, device=dev) for d in data),
            "host": lambda out: tuple(t.detach().cpu().numpy() for t in out)
            if isinstance(out, tuple) else out.detach().cpu().numpy()}


def _jax_steps(device: str = "cpu") -> dict:
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    jax.config.update("jax_enable_x64", True)
    if device != "cpu":
        jax.config.update("jax_default_matmul_precision", "highest")
    f = lambda a, b: jnp.sum(jnp.linalg.slogdet(a)[1]) + jnp.sum(jnp.linalg.solve(a, b))
    g = jax.jit(jax.grad(f, argnums=(0, 1)))
    gp = jax.jit(jax.grad(lambda p, x, y: _gp_nll(
        jnp, lambda k: jsl.cholesky(k, lower=True),
        lambda L, v: jsl.cho_solve((L, True), v), p, x, y)))
    done = lambda out: jax.block_until_ready(out)
    steps = {"solve": lambda a, b: done(g(a, b)), "gp": lambda p, x, y: done(gp(p, x, y))}
    if device != "cpu":
        gpu = jax.devices("gpu")[0]
        steps["put"] = lambda data: tuple(jax.device_put(d, gpu) for d in data)
    return steps


def _card_name() -> str:
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where every system runs (default: cpu)")
    ap.add_argument("--only", default="", help="run the workloads whose title has this")
    ap.add_argument("--one-thread", action="store_true",
                    help="every library on one thread, timed in process CPU time")
    args = ap.parse_args()
    if args.device != "cpu":  # before JAX starts: not 75% of the card for JAX alone
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    systems = {"functx": _functx_steps(args.device),
               "functx jit": _functx_steps(args.device, jit=True)}
    missing = []
    if _have("torch"):
        systems["torch eager"] = _torch_steps(args.device)
    if _have("jax"):
        try:
            systems["jax jit"] = _jax_steps(args.device)
        except RuntimeError as e:  # (a JAX without a GPU backend on a GPU host)
            missing.append(f"JAX on {args.device}: {str(e).splitlines()[0]}")
    repeats, warmup = (5, 1) if args.quick else (15, 2)
    mods = {}
    for name in ("numpy", "scipy", "torch", "jax"):
        if _have(name):
            mods[name] = __import__(name)
    print(environment_report(mods, ROOT))
    if args.device != "cpu":
        print(f"- device: {args.device}, card **{_card_name()}**; every system on it (inputs put "
              "there before timing, each step synchronised)")
    for why in missing:
        print(f"- missing peer: {why}")
    clock = time.process_time if args.one_thread else time.perf_counter
    print(f"\nclock: {'process CPU time, one thread each' if args.one_thread else 'wall'}; "
          f"load average at the start: {_loadavg()}")
    print("\n| workload | functx ms | functx jit ms | torch eager ms | jax jit ms | functx ÷ torch "
          "| functx ÷ jax | functx jit ÷ torch | functx jit ÷ jax |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for title, data in _workloads(args.quick):
        if args.only not in title:
            continue
        kind = "gp" if title.startswith("gp") else "solve"
        put = {name: s.get("put", lambda d: d)(data) for name, s in systems.items()}
        steps = {name: (lambda s=s, d=put[name]: s[kind](*d)) for name, s in systems.items()}
        host = {name: s.get("host", lambda out: out) for name, s in systems.items()}
        ref = host["functx"](steps["functx"]())
        for name, step in steps.items():
            got = host[name](step())
            err = max(relative_error(np.asarray(g), np.asarray(r))
                      for g, r in zip(got if isinstance(got, tuple) else (got,),
                                      ref if isinstance(ref, tuple) else (ref,)))
            if err > 1e-6:
                raise SystemExit(f"{title}: {name} differs from functx (relative error {err:.2e})")
        timings = {t.name: t.median for t in measure(steps, repeats, warmup, block=5, clock=clock)}
        cell = lambda n: f"{timings[n] * 1e3:.1f}" if n in timings else "-"
        ratio = lambda a, b: f"{timings[a] / timings[b]:.2f}" if b in timings else "-"
        print(f"| {title} | {cell('functx')} | {cell('functx jit')} | {cell('torch eager')} | "
              f"{cell('jax jit')} | {ratio('functx', 'torch eager')} | "
              f"{ratio('functx', 'jax jit')} | {ratio('functx jit', 'torch eager')} | "
              f"{ratio('functx jit', 'jax jit')} |", flush=True)
    print(f"\nload average at the end: {_loadavg()}")


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    main()
