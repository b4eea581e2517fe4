"""GPU benchmark: functx on CUDA (eager and ``jit``) beside PyTorch eager, JAX jit and CuPy.

Gradient steps, every system in this one process on the same card, TF32 off everywhere
(``NVIDIA_TF32_OVERRIDE=0``, PyTorch's ``allow_tf32`` flags off, JAX's default matmul
precision ``highest``, CuPy's default FP32 math). Workloads (issue 20's rows):

1. ``ew24``: gradient of ``sum`` of a chain of 24 elementwise operations (``sin``, ``* 0.9``,
   ``tanh``, ``+ 0.1``, ``exp``, ``* 0.5``, repeated; the ``ew24`` of
   benchmarks/bench_jit_cpu.py) on a 4096 x 4096 float32 input;
2. ``mlp``: gradient of the mean squared error of a 1024-4096-4096-1024 tanh MLP, batch 1024,
   with respect to all weights and biases;
3. ``small_mlp``: the same for 256-256-256-10, batch 64 (dispatch-bound);
4. ``ln_gelu``: layer norm -> tanh-GELU -> scale on a (8192, 4096) input, gradient of
   ``sum(f(x) * G)`` (G fixed) with respect to the input; PyTorch idiomatically (the fused
   ``F.layer_norm`` and ``F.gelu(approximate="tanh")`` kernels) and with both written out
   in elementwise operations ("ops as functx"); functx with ``functx.nn.layer_norm`` and
   ``functx.nn.gelu``;
5. ``block``: one pre-LN transformer block (d=768, 12 heads, sequence 512, batch 8, causal
   attention, 4x GELU MLP), gradient of ``sum(block(x) * G)`` with respect to all weights;
   PyTorch (``F.layer_norm``, ``F.gelu``) both with ``scaled_dot_product_attention`` and
   with the attention written out. Peak GPU memory of one step is reported per system.

Systems: ``functx`` (eager ``fx.grad``), ``functx jit`` (``fx.jit(fx.value_and_grad(f))``:
the loss too, as PyTorch computes it), ``pytorch`` (eager autograd), ``jax jit``
(``jax.jit(jax.grad(f))``) and, for the float32 MLPs, ``cupy by hand`` (a hand-written
forward and backward pass: the floor for an eager system on CuPy).

``--dtype bfloat16`` adds the bfloat16 rows of ``mlp`` and ``block`` (inputs, weights and
computation in bfloat16 in every system; PyTorch with its default bfloat16 matmul
settings). A system that fails (functx's bfloat16 on CUDA, say) gets its error in the table
and the others are still timed.

Compile time: the first call of every ``jit`` system (``functx jit`` with an empty kernel
cache: this run sets ``FUNCTX_CACHE_DIR`` and ``CUPY_CACHE_DIR`` to a fresh temporary
folder) is timed before any other step of its workload runs. ``--cache-check`` then starts
a second process with the same cache folders that times functx jit's first call of
``ew24`` and ``mlp`` again (kernels found on disk).

Each step ends by waiting for the device. Before timing, every system's gradient is compared
with PyTorch's (relative max error). Times are medians of interleaved repeats (see
``_harness.py``) with the 25th-75th percentile range. The report ends with a summary table
(ratios functx ÷ peer, above 1 meaning functx is slower) and the issue's targets.

``--device cpu`` runs the same code on the CPU (functx's NumPy backend and its Numba
compiler, PyTorch CPU, JAX with ``JAX_PLATFORMS=cpu``): a smoke test, with ``--small``
shrinking every workload; its times say nothing about the GPU.

Usage::

    python benchmarks/bench_gpu.py                       # everything on the GPU (float32 + bfloat16)
    python benchmarks/bench_gpu.py --workloads ew24,mlp --dtype float32 --repeats 20
    python benchmarks/bench_gpu.py --cache-check         # + the second process's first calls
    python benchmarks/bench_gpu.py --device cpu --small --repeats 5 --warmup 1   # smoke test
"""
from __future__ import annotations

import os
import sys
import tempfile


def _argv_value(flag: str, default: str) -> str:
    """The value of ``flag`` on the command line, read before argparse (environment
    variables must be set before the CUDA libraries and JAX start)."""
    for i, a in enumerate(sys.argv):
        if a == flag and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return default


DEVICE = _argv_value("--device", "cuda")
CHILD = "--child-first-call" in sys.argv
# Before any CUDA library starts: no TF32 anywhere, and JAX must not take 75% of the card.
os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("CUPY_TF32", "0")
if DEVICE == "cpu":
    os.environ["JAX_PLATFORMS"] = "cpu"
if not CHILD:  # empty kernel caches: first calls compile; the --cache-check child reuses them
    _CACHE = tempfile.mkdtemp(prefix="functx-bench-gpu-")
    os.environ["FUNCTX_CACHE_DIR"] = _CACHE
    os.environ["CUPY_CACHE_DIR"] = os.path.join(_CACHE, "cupy")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import functx as fx  # noqa: E402
import functx.nn as fnn  # noqa: E402
import functx.numpy as fnp  # noqa: E402
from functx.backends import get_backend  # noqa: E402

from _harness import (CpuMeter, environment_report, git_commit, log, markdown_table,  # noqa: E402
                      measure, relative_error)
from bench_jit_cpu import ew24_fn  # noqa: E402  (the CPU compiler's 24-op chain)

# Eager functx's targets (issues 13/15): functx ÷ this system at most.
EAGER_TARGETS = {"mlp": ("cupy by hand", 1.1), "small_mlp": ("cupy by hand", 1.5),
                 "ln_gelu": ("pytorch", 2.0), "block": ("pytorch (sdpa)", 2.0)}
TITLES = {
    "ew24": "24 elementwise ops (sin, *, tanh, +, exp) on {n}x{n}, gradient of the sum",
    "mlp": "MLP gradient, batch {batch}, {sizes}, tanh, mean squared error",
    "small_mlp": "small MLP gradient, batch {batch}, {sizes}, tanh, mean squared error",
    "ln_gelu": "layer norm -> tanh-GELU -> scale on ({n}, {d}), gradient w.r.t. the input",
    "block": "pre-LN transformer block (d={d}, {heads} heads, seq {seq}, batch {batch}, "
             "causal), gradient of all weights",
}
ALL_WORKLOADS = ("block", "ew24", "mlp", "ln_gelu", "small_mlp")  # block first: JAX's peak
BF16_WORKLOADS = ("mlp", "block")  # the issue's bfloat16 rows
COMPILE_WORKLOADS = ("ew24", "mlp")  # the issue's compile-time rows (float32)
GELU_C = math.sqrt(2.0 / math.pi)
HEADS = 12
# seconds of untimed steps after each pause of the harness, before a block is timed (the
# host's clocks ramp back up: a 0.1 ms step timed right after a pause measures the ramp)
REWARM = 0.02


def sizes(small: bool) -> dict[str, dict]:
    """Each workload's dimensions (``--small``: a smoke test's)."""
    if small:
        return {"ew24": {"n": 256}, "ln_gelu": {"n": 256, "d": 512},
                "mlp": {"sizes": (64, 256, 256, 64), "batch": 64},
                "small_mlp": {"sizes": (256, 256, 256, 10), "batch": 64},
                "block": {"d": 96, "heads": HEADS, "seq": 32, "batch": 2}}
    return {"ew24": {"n": 4096}, "ln_gelu": {"n": 8192, "d": 4096},
            "mlp": {"sizes": (1024, 4096, 4096, 1024), "batch": 1024},
            "small_mlp": {"sizes": (256, 256, 256, 10), "batch": 64},
            "block": {"d": 768, "heads": HEADS, "seq": 512, "batch": 8}}


# ------------------------------------------------------------------------------------------
# Peers


def load_peers(device: str, no_peers: bool) -> tuple[dict[str, Any], list[str]]:
    """PyTorch and JAX on ``device`` (TF32 off), and why either is missing."""
    mods: dict[str, Any] = {}
    why: list[str] = []
    if no_peers:
        return mods, ["--no-peers: functx timed alone"]
    if importlib.util.find_spec("torch"):
        import torch

        if device == "cpu" or torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.set_float32_matmul_precision("highest")
            mods["torch"] = torch
        else:
            why.append(f"PyTorch {torch.__version__} sees no CUDA device")
    else:
        why.append("PyTorch is not installed")
    if importlib.util.find_spec("jax"):
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
        platform = "cpu" if device == "cpu" else "gpu"
        if any(d.platform == platform for d in jax.devices()):
            mods["jax"] = jax
        else:
            why.append(f"JAX {jax.__version__} sees no {platform} device")
    else:
        why.append("JAX is not installed")
    return mods, why


def jax_device(jax: Any, device: str) -> Any:
    platform = "cpu" if device == "cpu" else "gpu"
    return next(d for d in jax.devices() if d.platform == platform)


# ------------------------------------------------------------------------------------------
# Model code, once per system


def fx_layer_norm(x: Any, g: Any, b: Any, eps: float = 1e-5) -> Any:
    return fnn.layer_norm(x, (x.shape[-1],), g, b, eps)


def fx_gelu(x: Any) -> Any:
    return fnn.gelu(x, approximate="tanh")


def fx_softmax(x: Any) -> Any:
    return fnn.softmax(x, dim=-1)


def fx_mlp_loss(params: list, X: Any, Y: Any) -> Any:
    h = X
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = fnp.tanh(h)
    return fnp.mean((h - Y) ** 2)


def fx_ln_gelu_loss(x: Any, g: Any, b: Any, G: Any) -> Any:
    return fnp.sum(fx_gelu(fx_layer_norm(x, g, b)) * 0.5 * G)


def fx_block(p: dict, x: Any, mask: Any, sdpa: bool = False) -> Any:
    nb, s, d = x.shape
    dh = d // HEADS
    h = fx_layer_norm(x, p["ln1_g"], p["ln1_b"])
    qkv = fnp.transpose(fnp.reshape(h @ p["w_qkv"] + p["b_qkv"], (nb, s, 3, HEADS, dh)),
                        (2, 0, 3, 1, 4))
    q, k, v = qkv[0], qkv[1], qkv[2]
    if sdpa:  # functx's fused attention, as PyTorch's row uses its own
        o = fnn.scaled_dot_product_attention(q, k, v, is_causal=True)
    else:
        att = fx_softmax(fnp.matmul(q, fnp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(dh))
                         + mask)
        o = fnp.matmul(att, v)
    o = fnp.reshape(fnp.transpose(o, (0, 2, 1, 3)), (nb, s, d))
    x = x + (o @ p["w_o"] + p["b_o"])
    h = fx_gelu(fx_layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w_1"] + p["b_1"])
    return x + (h @ p["w_2"] + p["b_2"])


def fx_block_loss(p: dict, x: Any, mask: Any, G: Any) -> Any:
    return fnp.sum(fx_block(p, x, mask) * G)


def fx_block_loss_sdpa(p: dict, x: Any, mask: Any, G: Any) -> Any:
    return fnp.sum(fx_block(p, x, mask, sdpa=True) * G)


FX_LOSSES = {"ew24": ew24_fn(fnp), "mlp": fx_mlp_loss, "small_mlp": fx_mlp_loss,
             "ln_gelu": fx_ln_gelu_loss, "block": fx_block_loss}


def torch_fns(torch: Any) -> dict[str, Callable]:
    F = torch.nn.functional

    def gelu(x, fused=True):
        if fused:
            return F.gelu(x, approximate="tanh")
        return 0.5 * x * (1.0 + torch.tanh(GELU_C * (x + 0.044715 * (x * x * x))))

    def layer_norm(x, g, b, fused=True):
        if fused:
            return F.layer_norm(x, (x.shape[-1],), g, b, 1e-5)
        mu = x.mean(-1, keepdim=True)
        xc = x - mu
        return xc * (1.0 / torch.sqrt((xc * xc).mean(-1, keepdim=True) + 1e-5)) * g + b

    def mlp_loss(params, X, Y):
        h = X
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = torch.tanh(h)
        return ((h - Y) ** 2).mean()

    def ln_gelu_loss(x, g, b, G):
        return (gelu(layer_norm(x, g, b)) * 0.5 * G).sum()

    def ln_gelu_loss_unfused(x, g, b, G):
        return (gelu(layer_norm(x, g, b, False), False) * 0.5 * G).sum()

    def block(p, x, mask, sdpa):
        nb, s, d = x.shape
        dh = d // HEADS
        h = layer_norm(x, p["ln1_g"], p["ln1_b"])
        qkv = (h @ p["w_qkv"] + p["b_qkv"]).reshape(nb, s, 3, HEADS, dh).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if sdpa:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = torch.softmax(q @ k.transpose(-1, -2) * (1.0 / math.sqrt(dh)) + mask, dim=-1)
            o = att @ v
        o = o.permute(0, 2, 1, 3).reshape(nb, s, d)
        x = x + (o @ p["w_o"] + p["b_o"])
        h = gelu(layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w_1"] + p["b_1"])
        return x + (h @ p["w_2"] + p["b_2"])

    def block_loss(p, x, mask, G):
        return (block(p, x, mask, True) * G).sum()

    def block_loss_no_sdpa(p, x, mask, G):
        return (block(p, x, mask, False) * G).sum()

    return {"ew24": ew24_fn(torch), "mlp": mlp_loss, "small_mlp": mlp_loss,
            "ln_gelu": ln_gelu_loss, "block": block_loss,
            # extra PyTorch systems: name -> (workload, function)
            "pytorch (ops as functx)": ("ln_gelu", ln_gelu_loss_unfused),
            "pytorch (no sdpa)": ("block", block_loss_no_sdpa)}


def jax_fns(jax: Any) -> dict[str, Callable]:
    jnp = jax.numpy

    def gelu(x):
        return 0.5 * x * (1.0 + jnp.tanh(GELU_C * (x + 0.044715 * (x * x * x))))

    def layer_norm(x, g, b, eps=1e-5):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        xc = x - mu
        return xc * jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + eps) * g + b

    def mlp_loss(params, X, Y):
        h = X
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jnp.tanh(h)
        return jnp.mean((h - Y) ** 2)

    def ln_gelu_loss(x, g, b, G):
        return jnp.sum(gelu(layer_norm(x, g, b)) * 0.5 * G)

    def block_loss(p, x, mask, G):
        nb, s, d = x.shape
        dh = d // HEADS
        h = layer_norm(x, p["ln1_g"], p["ln1_b"])
        qkv = jnp.transpose((h @ p["w_qkv"] + p["b_qkv"]).reshape(nb, s, 3, HEADS, dh),
                            (2, 0, 3, 1, 4))
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = jax.nn.softmax(q @ jnp.swapaxes(k, -1, -2) * (1.0 / math.sqrt(dh)) + mask, axis=-1)
        o = jnp.transpose(att @ v, (0, 2, 1, 3)).reshape(nb, s, d)
        x = x + (o @ p["w_o"] + p["b_o"])
        h = gelu(layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w_1"] + p["b_1"])
        return jnp.sum((x + (h @ p["w_2"] + p["b_2"])) * G)

    return {"ew24": ew24_fn(jnp), "mlp": mlp_loss, "small_mlp": mlp_loss,
            "ln_gelu": ln_gelu_loss, "block": block_loss}


def cupy_mlp_grad(params: list, X: Any, Y: Any) -> list:
    """Forward and backward of the MLP by hand, with plain CuPy operations."""
    import cupy as cp

    hs, h = [X], X
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = cp.tanh(h)
        hs.append(h)
    diff = hs[-1] - Y
    d = diff * np.float32(2.0 / diff.size)
    grads = []
    for i in range(len(params) - 1, -1, -1):
        w = params[i][0]
        grads.append((hs[i].T @ d, d.sum(axis=0)))
        if i:
            d = (d @ w.T) * (1 - hs[i] * hs[i])
    return grads[::-1]


# ------------------------------------------------------------------------------------------
# Data (host arrays in the workload's dtype; argument 0 is differentiated)


def host_data(name: str, dims: dict, dtype: np.dtype) -> tuple:
    def cast(tree: Any) -> Any:
        if isinstance(tree, np.ndarray):
            return tree.astype(dtype)
        if isinstance(tree, dict):
            return {k: cast(v) for k, v in tree.items()}
        return type(tree)(cast(v) for v in tree)

    if name == "ew24":
        rng = np.random.default_rng(3)
        return cast((rng.standard_normal((dims["n"], dims["n"])).astype(np.float32),))
    if name in ("mlp", "small_mlp"):
        rng = np.random.default_rng(0)
        sz, batch = dims["sizes"], dims["batch"]
        params = [((rng.standard_normal((a, b)) / math.sqrt(a)).astype(np.float32),
                   (rng.standard_normal(b) * 0.1).astype(np.float32))
                  for a, b in zip(sz, sz[1:])]
        X = rng.standard_normal((batch, sz[0])).astype(np.float32)
        Y = rng.standard_normal((batch, sz[-1])).astype(np.float32)
        return cast((params, X, Y))
    if name == "ln_gelu":
        rng = np.random.default_rng(1)
        n, d = dims["n"], dims["d"]
        x = rng.standard_normal((n, d)).astype(np.float32)
        g = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
        b = (0.1 * rng.standard_normal(d)).astype(np.float32)
        G = rng.standard_normal((n, d)).astype(np.float32)
        return cast((x, g, b, G))
    rng = np.random.default_rng(2)
    d, seq, batch = dims["d"], dims["seq"], dims["batch"]

    def w(a, b):
        return (rng.standard_normal((a, b)) / math.sqrt(a)).astype(np.float32)

    def v(n, scale=0.02, one=False):
        return ((1.0 if one else 0.0) + scale * rng.standard_normal(n)).astype(np.float32)

    p = {"ln1_g": v(d, one=True), "ln1_b": v(d), "w_qkv": w(d, 3 * d), "b_qkv": v(3 * d),
         "w_o": w(d, d), "b_o": v(d), "ln2_g": v(d, one=True), "ln2_b": v(d),
         "w_1": w(d, 4 * d), "b_1": v(4 * d), "w_2": w(4 * d, d), "b_2": v(d)}
    x = rng.standard_normal((batch, seq, d)).astype(np.float32)
    G = rng.standard_normal((batch, seq, d)).astype(np.float32)
    mask = np.triu(np.full((seq, seq), -1e9, np.float32), k=1)
    return cast((p, x, mask, G))


def _torch_tree(torch: Any, x: Any, device: str, requires_grad: bool) -> Any:
    if isinstance(x, np.ndarray):
        if x.dtype.name == "bfloat16":  # PyTorch does not read ml_dtypes arrays
            t = torch.tensor(x.astype(np.float32), device=device).to(torch.bfloat16)
        else:
            t = torch.tensor(x, device=device)
        return t.requires_grad_(requires_grad)
    if isinstance(x, dict):
        return {k: _torch_tree(torch, v, device, requires_grad) for k, v in x.items()}
    return type(x)(_torch_tree(torch, e, device, requires_grad) for e in x)


def _torch_leaves(x: Any) -> list:
    """Leaves in the order of :func:`to_host_leaves` (dicts by sorted key)."""
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in _torch_leaves(x[k])]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in _torch_leaves(e)]
    return [x]


def to_host_leaves(out: Any) -> list[np.ndarray]:
    """The gradient leaves of any system's output, as NumPy arrays in a common order."""
    if isinstance(out, dict):
        return [l for k in sorted(out) for l in to_host_leaves(out[k])]
    if isinstance(out, (list, tuple)):
        return [l for e in out for l in to_host_leaves(e)]
    if hasattr(out, "detach"):
        return [out.detach().float().cpu().numpy()]
    if hasattr(out, "get"):
        return [out.get()]
    return [np.asarray(out)]


# ------------------------------------------------------------------------------------------
# Systems: factories that build a step (a jit factory also times the step's first call)


class Context:
    """What every factory needs: device, peers, and where first-call times go."""

    def __init__(self, device: str, peers: dict) -> None:
        self.device = device
        self.peers = peers
        self.fx_sync = get_backend("cuda").synchronize if device == "cuda" else (lambda: None)
        self.jax_first_workload: str | None = None


def _first_call(step: Callable) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def systems(name: str, host_args: tuple, ctx: Context, firsts: dict[str, float],
            row: str = "") -> dict[str, Callable[[], Callable]]:
    """Factories of the systems' steps of workload ``name`` (``row``: with its dtype);
    functx jit's first, so that its first call finds the kernel caches empty of this
    workload."""
    f = FX_LOSSES[name]
    device, peers = ctx.device, ctx.peers
    factories: dict[str, Callable[[], Callable]] = {}
    dev_args: list = []

    def fx_args() -> tuple:
        if not dev_args:
            dev_args.append(fx.device_put(host_args, device))
        return dev_args[0]

    def fx_jit(loss: Callable = f, system: str = "functx jit") -> Callable:
        args = fx_args()
        jgrad = fx.jit(fx.value_and_grad(loss))  # the loss too: jit drops unused values

        def step():
            _, g = jgrad(*args)
            ctx.fx_sync()
            return g
        firsts[system] = _first_call(step)
        return step

    def fx_eager() -> Callable:
        args = fx_args()
        grad = fx.grad(f)

        def step():
            g = grad(*args)
            ctx.fx_sync()
            return g
        return step

    factories["functx jit"] = fx_jit
    if name == "block":  # with functx's fused attention (PyTorch's row uses SDPA)
        factories["functx jit (sdpa)"] = lambda: fx_jit(fx_block_loss_sdpa, "functx jit (sdpa)")
    factories["functx"] = fx_eager
    if name in ("mlp", "small_mlp") and device == "cuda" and host_args[1].dtype == np.float32:
        def cupy_by_hand() -> Callable:
            args = fx_args()

            def step():
                g = cupy_mlp_grad(*args)
                ctx.fx_sync()
                return g
            return step
        factories["cupy by hand"] = cupy_by_hand
    torch = peers.get("torch")
    if torch is not None:
        fns = torch_fns(torch)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        variants = [("pytorch (sdpa)" if name == "block" else "pytorch", fns[name])]
        variants += [(k, v[1]) for k, v in fns.items() if isinstance(v, tuple) and v[0] == name]
        targs_box: list = []

        def make_torch(fn: Callable) -> Callable[[], Callable]:
            def factory() -> Callable:
                if not targs_box:
                    targs = tuple(_torch_tree(torch, a, device, i == 0)
                                  for i, a in enumerate(host_args))
                    targs_box.append((targs, _torch_leaves(targs[0])))
                targs, leaves = targs_box[0]

                def step():
                    grads = torch.autograd.grad(fn(*targs), leaves)
                    sync()
                    return grads
                return step
            return factory
        for system, fn in variants:
            factories[system] = make_torch(fn)
    jax = peers.get("jax")
    if jax is not None:
        def jax_jit() -> Callable:
            gfn = jax.jit(jax.grad(jax_fns(jax)[name]))
            jargs = jax.device_put(host_args, jax_device(jax, device))

            def step():
                return jax.block_until_ready(gfn(*jargs))
            if ctx.jax_first_workload is None:
                ctx.jax_first_workload = row
            firsts["jax jit"] = _first_call(step)
            return step
        factories["jax jit"] = jax_jit
    return factories


# ------------------------------------------------------------------------------------------
# One workload: build, check, time, memory


def peak_memory(system: str, step: Callable, ctx: Context, row: str) -> str:
    """Peak GPU memory of one step of ``system`` (and what was in use before it), in MiB."""
    mib = 2.0 ** 20
    if system.startswith("functx"):
        import cupy

        allocator = cupy.cuda.get_allocator()
        try:
            fx.reset_peak_memory_stats("cuda")
            before = fx.memory_stats("cuda")["bytes_in_use"]
            out = step()
            peak = fx.memory_stats("cuda")["peak_bytes_in_use"]
            del out
        finally:  # the peak tracker's allocation hook out of later timings
            cupy.cuda.set_allocator(allocator)
        return f"{peak / mib:.0f} MiB peak ({before / mib:.0f} MiB in use before the step)"
    if system.startswith("pytorch"):
        torch = ctx.peers["torch"]
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = step()
        peak = torch.cuda.max_memory_allocated()
        del out
        return f"{peak / mib:.0f} MiB peak ({before / mib:.0f} MiB in use before the step)"
    if system == "jax jit":
        if ctx.jax_first_workload != row:
            return "n/a (JAX reports a peak per process: only its first workload's is known)"
        step()
        stats = jax_device(ctx.peers["jax"], ctx.device).memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            return (f"{stats['peak_bytes_in_use'] / mib:.0f} MiB peak since JAX started "
                    "(this is JAX's first workload)")
    return "n/a"


def short_error(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"failed: {type(e).__name__}: {text[0][:160] if text else ''}"


def run(name: str, dtype: np.dtype, dims: dict, ctx: Context, repeats: int, warmup: int,
        results: dict, first_calls: dict) -> str:
    row = f"{name} {dtype.name}"
    log(f"== {row}")
    title = TITLES[name].format(**{k: ("-".join(map(str, v)) if isinstance(v, tuple) else v)
                                   for k, v in dims.items()})
    host_args = host_data(name, dims, dtype)
    firsts: dict[str, float] = {}
    notes: dict[str, str] = {}
    steps: dict[str, Callable] = {}
    for system, factory in systems(name, host_args, ctx, firsts, row).items():
        try:
            steps[system] = factory()
        except Exception as e:  # report it, time the others
            log(traceback.format_exc(limit=3))
            notes[system] = short_error(e)
    first_calls[row] = firsts
    reference = next((s for s in ("pytorch (sdpa)", "pytorch", "functx", "functx jit")
                      if s in steps), None)
    outs: dict[str, list] = {}
    for system, step in list(steps.items()):
        try:
            outs[system] = to_host_leaves(step())
        except Exception as e:
            log(traceback.format_exc(limit=3))
            notes[system] = short_error(e)
            del steps[system]
    if reference not in outs:
        reference = next(iter(outs), None)
    for system, got in outs.items():
        if system == reference:
            continue
        ref = outs[reference]
        if len(got) != len(ref):
            notes[system] = f"{len(got)} gradients vs {len(ref)} of {reference}"
            continue
        err = max(relative_error(g, r) for g, r in zip(got, ref))
        notes[system] = f"gradient max rel. error vs {reference}: {err:.1e}"
    lines = [f"#### {title}, {dtype.name}", ""]
    if not steps:
        return "\n".join(lines + ["Every system failed:", ""]
                         + [f"- {s}: {n}" for s, n in notes.items()])
    log(f"   timing {list(steps)}")
    timings = measure(steps, repeats=repeats, warmup=warmup, block=10, rewarm=REWARM)
    for t in timings:
        log(f"   {t.name}: {t.median * 1e3:.3f} ms")
    results[row] = {t.name: t.median for t in timings}
    results[row]["_failed"] = {s: n for s, n in notes.items() if s not in steps}
    lines.append(markdown_table(timings, "ms/step", 1e3,
                                "functx" if "functx" in steps else timings[0].name, notes))
    lines += [f"- {system}: {note}" for system, note in notes.items() if system not in steps]
    if name == "block" and ctx.device == "cuda":  # after timing (the tracker's hook)
        memory = {}
        for system, step in steps.items():
            try:
                memory[system] = peak_memory(system, step, ctx, row)
            except Exception as e:
                memory[system] = f"not measured ({short_error(e)})"
        lines += ["", "Peak GPU memory of one gradient step (bytes held by live arrays):", ""]
        lines += [f"- {system}: {text}" for system, text in memory.items()]
    if name in EAGER_TARGETS and dtype == np.float32:
        base, limit = EAGER_TARGETS[name]
        med = results[row]
        if base in med and "functx" in med:
            ratio = med["functx"] / med[base]
            lines += ["", f"Eager target: functx ÷ {base} = {ratio:.2f} (target <= {limit}: "
                          f"{'met' if ratio <= limit else 'MISSED'})"]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# Summary, compile times, the second process


def _ms(v: Any) -> str:
    return f"{v * 1e3:.3g}" if isinstance(v, float) else "—"


def _ratio(a: Any, b: Any) -> str:
    return f"{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) else "—"


def _functx_jit(name: str, med: dict) -> Any:
    """functx jit's time in the summary: for the block, with functx's fused attention
    (``functx jit (sdpa)``), as PyTorch's row uses its ``scaled_dot_product_attention``."""
    return med.get("functx jit (sdpa)", med.get("functx jit")) if name == "block" \
        else med.get("functx jit")


def issue_target(row: str, med: dict) -> str:
    """Issue 20's target for a row, and whether ``functx jit`` meets it."""
    name, dtype = row.split()
    fj = _functx_jit(name, med)
    jx = med.get("jax jit")
    pt = med.get("pytorch (sdpa)", med.get("pytorch"))
    if not isinstance(fj, float):
        return "functx jit did not run"
    if dtype == "bfloat16":
        if not isinstance(pt, float):
            return "no PyTorch"
        best = min(fj, med.get("functx", fj))
        r = best / pt
        return f"best functx ÷ pytorch {r:.2f} <= 1.2: {'met' if r <= 1.2 else 'MISSED'}"
    limits = {"ew24": 1.5, "ln_gelu": 1.3, "small_mlp": 1.5, "block": 1.0}
    if name not in limits:
        return ""
    peers = [v for v in (jx, pt if name == "block" else None) if isinstance(v, float)]
    if not peers:
        return "no peer"
    r = fj / min(peers)
    what = "min(jax jit, pytorch sdpa)" if name == "block" else "jax jit"
    return f"functx jit ÷ {what} {r:.2f} <= {limits[name]}: " + (
        "met" if r <= limits[name] else "MISSED")


def summary(results: dict) -> list[str]:
    lines = ["### Summary (medians, ms/step; ratios functx ÷ peer, above 1: functx slower)", "",
             "| workload | dtype | functx | functx jit | pytorch | jax jit | functx ÷ pytorch "
             "| functx jit ÷ pytorch | functx jit ÷ jax jit | functx jit ÷ functx | issue 20 target |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row, med in results.items():
        name, dtype = row.split()
        f, fj, jx = med.get("functx"), _functx_jit(name, med), med.get("jax jit")
        pt = med.get("pytorch (sdpa)", med.get("pytorch"))
        lines.append(f"| {name} | {dtype} | {_ms(f)} | {_ms(fj)} | {_ms(pt)} | {_ms(jx)} | "
                     f"{_ratio(f, pt)} | {_ratio(fj, pt)} | {_ratio(fj, jx)} | {_ratio(fj, f)} "
                     f"| {issue_target(row, med)} |")
    failed = [f"- {row}, {s}: {n}" for row, med in results.items()
              for s, n in med.get("_failed", {}).items()]
    if failed:
        lines += ["", "Systems that failed (not timed):", ""] + failed
    lines += ["", "(`pytorch` is PyTorch eager; for the block, with "
              "`scaled_dot_product_attention`, and `functx jit` with functx's own "
              "(`functx jit (sdpa)`; the attention written out is in the block's table).)"]
    return lines


def compile_table(first_calls: dict, second: dict | None) -> list[str]:
    lines = ["### First call of the jitted gradient step (trace + compile + run), seconds", "",
             "functx jit with empty kernel caches (a fresh `FUNCTX_CACHE_DIR` and "
             "`CUPY_CACHE_DIR`), timed before any other step of its workload ran"
             + ("; second process: a new process with the same caches (`--cache-check`)"
                if second is not None else "") + ". Target: functx's first call no slower "
             "than JAX's; a second process finds the kernels on disk.", "",
             "| workload | functx jit | functx jit, 2nd process | jax jit | functx ÷ jax |",
             "|---|---:|---:|---:|---:|"]
    for row, firsts in first_calls.items():
        fj, jx = firsts.get("functx jit"), firsts.get("jax jit")
        name = row.split()[0]
        s = (second or {}).get(name) if row.endswith("float32") else None
        s_text = f"{s:.3g}" if isinstance(s, float) else (s if isinstance(s, str) else "—")
        mark = "**" if name in COMPILE_WORKLOADS and row.endswith("float32") else ""
        lines.append(f"| {mark}{row}{mark} | {'—' if fj is None else f'{fj:.3g}'} | {s_text} "
                     f"| {'—' if jx is None else f'{jx:.3g}'} | {_ratio(fj, jx)} |")
    lines += ["", "(**bold**: the issue's compile-time rows; each workload's first call may "
              "find kernels that earlier workloads of this process compiled.)"]
    return lines


def child_first_calls(names: list[str], small: bool) -> int:
    """The second process: functx jit's first call of each workload, as JSON on stdout."""
    ctx = Context(DEVICE, {})
    # The device, its context and cuBLAS started by one small product, as in the parent,
    # whose earlier workloads did that: the first calls below are trace + kernels + run.
    warm = fx.device_put(np.ones((8, 8), np.float32), DEVICE)
    np.asarray(fx.to_numpy(warm @ warm))
    out: dict[str, Any] = {}
    for name in names:
        firsts: dict[str, float] = {}
        try:
            host_args = host_data(name, sizes(small)[name], np.dtype(np.float32))
            systems(name, host_args, ctx, firsts)["functx jit"]()
            out[name] = firsts["functx jit"]
        except Exception as e:
            out[name] = short_error(e)
    print(json.dumps(out))
    return 0


def second_process(names: list[str], small: bool) -> dict:
    cmd = [sys.executable, __file__, "--child-first-call", "--device", DEVICE,
           "--workloads", ",".join(names)] + (["--small"] if small else [])
    log(f"second process: {' '.join(cmd)}")
    try:
        child = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ),
                               timeout=300)
        return json.loads(child.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError, subprocess.TimeoutExpired, OSError) as e:
        tail = getattr(locals().get("child"), "stderr", "") or ""
        log(f"second process failed: {e}\n{tail[-1500:]}")
        return {n: f"second process failed: {type(e).__name__}" for n in names}


# ------------------------------------------------------------------------------------------
# Main


def environment(ctx: Context, why: list[str]) -> str:
    peers = ctx.peers
    if ctx.device == "cpu":
        lines = [environment_report({k: v for k, v in peers.items() if k != "jax"}, ROOT),
                 *([f"- JAX {peers['jax'].__version__} on the CPU (JAX_PLATFORMS=cpu), "
                    "float32"] if "jax" in peers else []),
                 "- device: CPU (functx's NumPy backend; `jit` through its Numba compiler); "
                 "a smoke test, not the GPU's numbers"]
    else:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        rt = cupy.cuda.runtime.runtimeGetVersion()
        lines = [f"- GPU (card): **{name}** ({props['totalGlobalMem'] / 2**30:.0f} GiB), CUDA "
                 f"runtime {rt // 1000}.{rt % 1000 // 10}, driver "
                 f"{cupy.cuda.runtime.driverGetVersion()}",
                 f"- functx at commit {git_commit(ROOT)}, CuPy {cupy.__version__}, NumPy "
                 f"{np.__version__}, Python {sys.version.split()[0]}"]
        if "torch" in peers:
            lines.append(f"- PyTorch {peers['torch'].__version__} (allow_tf32 off for matmul "
                         "and cuDNN, float32 matmul precision 'highest'; bfloat16 matmul "
                         "settings at their defaults)")
        if "jax" in peers:
            lines.append(f"- JAX {peers['jax'].__version__} (jit; default matmul precision "
                         "'highest')")
    lines.append(f"- NVIDIA_TF32_OVERRIDE={os.environ.get('NVIDIA_TF32_OVERRIDE')}, "
                 f"CUPY_TF32={os.environ.get('CUPY_TF32')}, "
                 f"XLA_PYTHON_CLIENT_PREALLOCATE={os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE')}"
                 f", JAX_PLATFORMS={os.environ.get('JAX_PLATFORMS')}")
    lines.append(f"- kernel caches (empty at the start): {os.environ.get('FUNCTX_CACHE_DIR')}")
    lines += [f"- missing peer: {w}" for w in why]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: a smoke test of the code paths (with --small)")
    ap.add_argument("--workloads", "--only", dest="workloads", default=",".join(ALL_WORKLOADS),
                    help="comma-separated, of " + ", ".join(ALL_WORKLOADS))
    ap.add_argument("--dtype", default="float32,bfloat16",
                    help="comma-separated: float32 (every workload), bfloat16 (the rows of "
                         + " and ".join(BF16_WORKLOADS) + ")")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--small", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--cache-check", action="store_true",
                    help="time functx jit's first call of ew24 and mlp in a second process "
                         "that shares this run's kernel caches")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--child-first-call", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    dtypes = [d.strip() for d in args.dtype.split(",") if d.strip()]
    bad = [n for n in names if n not in ALL_WORKLOADS] + [
        d for d in dtypes if d not in ("float32", "bfloat16")]
    if bad:
        log(f"Unknown workload(s) or dtype(s) {bad}: workloads {ALL_WORKLOADS}, dtypes "
            "float32, bfloat16.")
        return 2
    if args.child_first_call:
        return child_first_calls(names, args.small)
    if args.device == "cuda" and "cuda" not in fx.backends():
        log(f"No CUDA backend: {sys.modules['functx.backends'].cuda_status()}")
        return 1
    peers, why = load_peers(args.device, args.no_peers)
    ctx = Context(args.device, peers)
    dims = sizes(args.small)
    rows = [(n, np.dtype(np.float32)) for n in names if "float32" in dtypes]
    if "bfloat16" in dtypes:
        import ml_dtypes

        rows += [(n, np.dtype(ml_dtypes.bfloat16)) for n in names if n in BF16_WORKLOADS]
    where = "GPU" if args.device == "cuda" else "CPU (smoke test)"
    report = [f"### {where}: functx (eager and jit) beside PyTorch eager, JAX jit and CuPy "
              "by hand", "", environment(ctx, why),
              f"- command: python benchmarks/bench_gpu.py {' '.join(argv or sys.argv[1:])}"
              .rstrip(),
              f"- {args.repeats} timed steps per system after {args.warmup} warm-up steps, "
              f"interleaved in blocks of 10 (each after a 0.25 s pause and {REWARM * 1e3:.0f} ms "
              "of untimed steps); median and 25th-75th percentiles; each step waits "
              "for the device", ""]
    results: dict[str, dict] = {}
    first_calls: dict[str, dict] = {}
    t_start = time.perf_counter()
    meter = CpuMeter()
    for name, dtype in rows:
        try:
            report += [run(name, dtype, dims[name], ctx, args.repeats, args.warmup, results,
                           first_calls), ""]
        except Exception as e:  # keep going: the other workloads still get measured
            log(traceback.format_exc())
            report += [f"#### {name} {dtype.name}", "", short_error(e), ""]
        print("\n".join(report[-2:]), file=sys.stderr, flush=True)
    second = None
    if args.cache_check:
        todo = [n for n in COMPILE_WORKLOADS if f"{n} float32" in first_calls]
        second = second_process(todo, args.small) if todo else {}
    report += summary(results) + [""] + compile_table(first_calls, second)
    report += ["", f"- whole run: {time.perf_counter() - t_start:.0f} s"]
    if args.device == "cpu":
        report.append(meter.report())
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
