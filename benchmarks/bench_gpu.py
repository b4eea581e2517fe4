"""GPU benchmark: eager functx on CUDA (CuPy) beside PyTorch eager, JAX jit and hand-written CuPy.

Four float32 workloads, every system in this one process on the same card, TF32 off
everywhere (``NVIDIA_TF32_OVERRIDE=0``, PyTorch's ``allow_tf32`` flags off, JAX's default
matmul precision ``highest``, CuPy's default FP32 math):

1. ``mlp``: gradient of the mean squared error of a 1024-4096-4096-1024 tanh MLP, batch 1024,
   with respect to all weights and biases;
2. ``small_mlp``: the same for 256-256-256-10, batch 64 (dispatch-bound);
3. ``ln_gelu``: layer norm -> tanh-GELU -> scale on a (8192, 4096) input, gradient of
   ``sum(f(x) * G)`` (G fixed) with respect to the input; PyTorch idiomatically (the fused
   ``F.layer_norm`` and ``F.gelu(approximate="tanh")`` kernels) and with both written out
   in elementwise operations ("ops as functx": how functx composed them before its fused
   primitives); functx with ``functx.nn.layer_norm`` and ``functx.nn.gelu`` (the fused
   primitives of functx/primitives/fused.py);
4. ``block``: one pre-LN transformer block (d=768, 12 heads, sequence 512, batch 8, causal
   attention, 4x GELU MLP), gradient of ``sum(block(x) * G)`` with respect to all weights;
   PyTorch (``F.layer_norm``, ``F.gelu``) both with ``scaled_dot_product_attention`` and
   with the attention written out. functx uses ``functx.nn``'s layer norm, GELU and
   softmax (fused primitives, eager) and ``functx.numpy`` for the rest.
   Peak GPU memory of one gradient step is reported for each system.

Hand-written CuPy forward+backward passes are timed for workloads 1-2 (the floor for an eager
system on CuPy). Each step ends by waiting for the GPU. Before timing, every system's
gradient is compared with PyTorch's (relative max error). Times are medians of interleaved
repeats (see ``_harness.py``) with the 25th-75th percentile range.

Usage (on a machine with a GPU and CuPy; PyTorch and JAX optional)::

    python benchmarks/bench_gpu.py [--repeats 30] [--warmup 5] [--only mlp,block]
"""
from __future__ import annotations

import os

# Before any CUDA library starts: no TF32 anywhere, and JAX must not take 75% of the card.
os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("CUPY_TF32", "0")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
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

from _harness import git_commit, log, markdown_table, measure, relative_error  # noqa: E402

# Workload 3's PyTorch is the idiomatic one (fused F.layer_norm and F.gelu kernels);
# "pytorch (ops as functx)" writes both out with the elementwise operations functx uses.
TARGETS = {"mlp": ("cupy by hand", 1.1), "small_mlp": ("cupy by hand", 1.5),
           "ln_gelu": ("pytorch", 2.0), "block": ("pytorch (sdpa)", 2.0)}
TITLES = {
    "mlp": "MLP gradient, batch 1024, 1024-4096-4096-1024, tanh, mean squared error",
    "small_mlp": "small MLP gradient, batch 64, 256-256-256-10, tanh, mean squared error",
    "ln_gelu": "layer norm -> tanh-GELU -> scale on (8192, 4096), gradient w.r.t. the input",
    "block": "pre-LN transformer block (d=768, 12 heads, seq 512, batch 8, causal), "
             "gradient of all weights",
}
GELU_C = math.sqrt(2.0 / math.pi)
D_MODEL, HEADS, SEQ, BATCH = 768, 12, 512, 8


# ------------------------------------------------------------------------------------------
# Systems


def load_peers(no_peers: bool) -> dict[str, Any]:
    mods: dict[str, Any] = {}
    if no_peers:
        return mods
    if importlib.util.find_spec("torch"):
        import torch

        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.set_float32_matmul_precision("highest")
            mods["torch"] = torch
    if importlib.util.find_spec("jax"):
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
        if any(d.platform == "gpu" for d in jax.devices()):
            mods["jax"] = jax
    return mods


def cupy_sync() -> None:
    import cupy

    cupy.cuda.get_current_stream().synchronize()


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


def fx_block(p: dict, x: Any, mask: Any) -> Any:
    nb, s, d = x.shape
    dh = d // HEADS
    h = fx_layer_norm(x, p["ln1_g"], p["ln1_b"])
    qkv = fnp.transpose(fnp.reshape(h @ p["w_qkv"] + p["b_qkv"], (nb, s, 3, HEADS, dh)),
                        (2, 0, 3, 1, 4))
    q, k, v = qkv[0], qkv[1], qkv[2]
    att = fx_softmax(fnp.matmul(q, fnp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(dh)) + mask)
    o = fnp.reshape(fnp.transpose(fnp.matmul(att, v), (0, 2, 1, 3)), (nb, s, d))
    x = x + (o @ p["w_o"] + p["b_o"])
    h = fx_gelu(fx_layer_norm(x, p["ln2_g"], p["ln2_b"]) @ p["w_1"] + p["b_1"])
    return x + (h @ p["w_2"] + p["b_2"])


def fx_block_loss(p: dict, x: Any, mask: Any, G: Any) -> Any:
    return fnp.sum(fx_block(p, x, mask) * G)


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

    return {"mlp_loss": mlp_loss, "ln_gelu_loss": ln_gelu_loss, "block": block,
            "ln_gelu_loss_unfused": ln_gelu_loss_unfused}


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

    return {"mlp_loss": mlp_loss, "ln_gelu_loss": ln_gelu_loss, "block_loss": block_loss}


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
# Workloads: each returns {system: step function}, the gradients to compare, and notes


def _mlp_data(sizes: tuple[int, ...], batch: int, rng: np.random.Generator) -> tuple:
    params = [((rng.standard_normal((a, b)) / math.sqrt(a)).astype(np.float32),
               (rng.standard_normal(b) * 0.1).astype(np.float32))
              for a, b in zip(sizes, sizes[1:])]
    X = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    Y = rng.standard_normal((batch, sizes[-1])).astype(np.float32)
    return params, X, Y


def workload_mlp(sizes: tuple[int, ...], batch: int, peers: dict) -> tuple[dict, dict]:
    import cupy as cp

    params, X, Y = _mlp_data(sizes, batch, np.random.default_rng(0))
    dev = fx.device_put((params, X, Y), "cuda")
    grad = fx.grad(fx_mlp_loss)
    steps: dict[str, Callable] = {}
    outs: dict[str, Callable] = {}

    def fx_step():
        g = grad(*dev)
        cupy_sync()
        return g

    steps["functx"] = outs["functx"] = fx_step
    jgrad = fx.jit(fx.value_and_grad(fx_mlp_loss))  # the loss too: jit drops unused values

    def fx_jit_step():
        _, g = jgrad(*dev)
        cupy_sync()
        return g

    steps["functx jit"] = outs["functx jit"] = fx_jit_step

    def cp_step():
        g = cupy_mlp_grad(*dev)
        cp.cuda.get_current_stream().synchronize()
        return g

    steps["cupy by hand"] = outs["cupy by hand"] = cp_step
    _add_torch_jax(steps, outs, peers, "mlp_loss", (params, X, Y), diff=0)
    return steps, outs


def workload_ln_gelu(peers: dict) -> tuple[dict, dict]:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8192, 4096)).astype(np.float32)
    g = (1 + 0.1 * rng.standard_normal(4096)).astype(np.float32)
    b = (0.1 * rng.standard_normal(4096)).astype(np.float32)
    G = rng.standard_normal((8192, 4096)).astype(np.float32)
    dev = fx.device_put((x, g, b, G), "cuda")
    grad = fx.grad(fx_ln_gelu_loss)

    def fx_step():
        out = grad(*dev)
        cupy_sync()
        return out

    steps = {"functx": fx_step}
    outs = {"functx": fx_step}
    _add_torch_jax(steps, outs, peers, "ln_gelu_loss", (x, g, b, G), diff=0)
    return steps, outs


def _block_data() -> tuple:
    rng = np.random.default_rng(2)
    d = D_MODEL

    def w(a, b):
        return (rng.standard_normal((a, b)) / math.sqrt(a)).astype(np.float32)

    def v(n, scale=0.02, one=False):
        return ((1.0 if one else 0.0) + scale * rng.standard_normal(n)).astype(np.float32)

    p = {"ln1_g": v(d, one=True), "ln1_b": v(d), "w_qkv": w(d, 3 * d), "b_qkv": v(3 * d),
         "w_o": w(d, d), "b_o": v(d), "ln2_g": v(d, one=True), "ln2_b": v(d),
         "w_1": w(d, 4 * d), "b_1": v(4 * d), "w_2": w(4 * d, d), "b_2": v(d)}
    x = rng.standard_normal((BATCH, SEQ, d)).astype(np.float32)
    G = rng.standard_normal((BATCH, SEQ, d)).astype(np.float32)
    mask = np.triu(np.full((SEQ, SEQ), -1e9, np.float32), k=1)
    return p, x, mask, G


def workload_block(peers: dict) -> tuple[dict, dict]:
    p, x, mask, G = _block_data()
    dev = fx.device_put((p, x, mask, G), "cuda")
    grad = fx.grad(fx_block_loss)

    def fx_step():
        out = grad(*dev)
        cupy_sync()
        return out

    steps = {"functx": fx_step}
    outs = {"functx": fx_step}
    torch = peers.get("torch")
    if torch is not None:
        fns = torch_fns(torch)
        tp = {k: torch.tensor(a, device="cuda", requires_grad=True) for k, a in p.items()}
        tx, tmask, tG = (torch.tensor(a, device="cuda") for a in (x, mask, G))

        def make(sdpa: bool) -> Callable:
            def step():
                loss = (fns["block"](tp, tx, tmask, sdpa) * tG).sum()
                grads = torch.autograd.grad(loss, list(tp.values()))
                torch.cuda.synchronize()
                return dict(zip(tp, grads))
            return step

        steps["pytorch (sdpa)"] = outs["pytorch (sdpa)"] = make(True)
        steps["pytorch (no sdpa)"] = outs["pytorch (no sdpa)"] = make(False)
    jax = peers.get("jax")
    if jax is not None:
        gfn = jax.jit(jax.grad(jax_fns(jax)["block_loss"]))
        jargs = jax.device_put((p, x, mask, G), _jax_gpu(jax))

        def jstep():
            return jax.block_until_ready(gfn(*jargs))

        steps["jax jit"] = outs["jax jit"] = jstep
    return steps, outs


def _jax_gpu(jax: Any) -> Any:
    return next(d for d in jax.devices() if d.platform == "gpu")


def _add_torch_jax(steps: dict, outs: dict, peers: dict, name: str, host_args: tuple,
                   diff: int) -> None:
    torch = peers.get("torch")
    if torch is not None:
        fn = torch_fns(torch)[name]
        targs = _torch_tree(torch, host_args, requires_grad_arg=diff)
        leaves = [t for t in _torch_leaves(targs[diff])]

        def tstep():
            grads = torch.autograd.grad(fn(*targs), leaves)
            torch.cuda.synchronize()
            return grads

        steps["pytorch"] = outs["pytorch"] = tstep
        unfused = torch_fns(torch).get(name + "_unfused")
        if unfused is not None:
            def ustep():
                grads = torch.autograd.grad(unfused(*targs), leaves)
                torch.cuda.synchronize()
                return grads

            steps["pytorch (ops as functx)"] = outs["pytorch (ops as functx)"] = ustep
    jax = peers.get("jax")
    if jax is not None:
        gfn = jax.jit(jax.grad(jax_fns(jax)[name], argnums=diff))
        jargs = jax.device_put(host_args, _jax_gpu(jax))

        def jstep():
            return jax.block_until_ready(gfn(*jargs))

        steps["jax jit"] = outs["jax jit"] = jstep


def _torch_tree(torch: Any, args: tuple, requires_grad_arg: int) -> tuple:
    def conv(x, rg):
        if isinstance(x, np.ndarray):
            return torch.tensor(x, device="cuda", requires_grad=rg)
        if isinstance(x, (list, tuple)):
            return type(x)(conv(e, rg) for e in x)
        return x
    return tuple(conv(a, i == requires_grad_arg) for i, a in enumerate(args))


def _torch_leaves(x: Any) -> list:
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
        return [out.detach().cpu().numpy()]
    if hasattr(out, "get"):
        return [out.get()]
    return [np.asarray(out)]


# ------------------------------------------------------------------------------------------
# Main


def peak_memory(system: str, step: Callable, peers: dict) -> str:
    """Peak GPU memory of one step of ``system`` (and what was in use before it), in MiB."""
    mib = 2.0 ** 20
    if system == "functx":
        fx.reset_peak_memory_stats("cuda")
        before = fx.memory_stats("cuda")["bytes_in_use"]
        out = step()
        peak = fx.memory_stats("cuda")["peak_bytes_in_use"]
        del out
        return f"{peak / mib:.0f} MiB peak ({before / mib:.0f} MiB in use before the step)"
    if system.startswith("pytorch"):
        torch = peers["torch"]
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = step()
        peak = torch.cuda.max_memory_allocated()
        del out
        return f"{peak / mib:.0f} MiB peak ({before / mib:.0f} MiB in use before the step)"
    if system == "jax jit":
        jax = peers["jax"]
        out = step()
        stats = _jax_gpu(jax).memory_stats() or {}
        del out
        if "peak_bytes_in_use" in stats:
            return (f"{stats['peak_bytes_in_use'] / mib:.0f} MiB peak since JAX started "
                    "(the block is JAX's first workload)")
    return "n/a"


def run(name: str, peers: dict, repeats: int, warmup: int) -> str:
    log(f"== {name}")
    if name == "mlp":
        steps, outs = workload_mlp((1024, 4096, 4096, 1024), 1024, peers)
    elif name == "small_mlp":
        steps, outs = workload_mlp((256, 256, 256, 10), 64, peers)
    elif name == "ln_gelu":
        steps, outs = workload_ln_gelu(peers)
    else:
        steps, outs = workload_block(peers)
    reference = "pytorch (sdpa)" if "pytorch (sdpa)" in outs else (
        "pytorch" if "pytorch" in outs else "functx")
    ref = to_host_leaves(outs[reference]())
    notes = {}
    for system, f in list(outs.items()):
        try:
            got = to_host_leaves(f())
        except Exception as e:  # report it, time the others
            log(traceback.format_exc())
            notes[system] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            del steps[system]
            continue
        if len(got) != len(ref):
            notes[system] = f"{len(got)} gradients vs {len(ref)}"
            continue
        err = max(relative_error(g, r) for g, r in zip(got, ref))
        notes[system] = f"gradient max rel. error vs {reference}: {err:.1e}"
    log(f"   timing {list(steps)}")
    timings = measure(steps, repeats=repeats, warmup=warmup, block=10)
    for t in timings:
        log(f"   {t.name}: {t.median * 1e3:.3f} ms")
    memory = {}
    if name == "block":  # after timing: functx's peak tracking wraps CuPy's allocator
        import cupy

        allocator = cupy.cuda.get_allocator()
        memory = {system: peak_memory(system, f, peers) for system, f in steps.items()}
        cupy.cuda.set_allocator(allocator)
    lines = [f"#### {TITLES[name]}", "", markdown_table(timings, "ms/step", 1e3, "functx", notes)]
    lines += [f"- {system}: {note}" for system, note in notes.items() if system not in steps]
    if memory:
        lines += ["", "Peak GPU memory of one gradient step (bytes held by live arrays):", ""]
        lines += [f"- {system}: {text}" for system, text in memory.items()]
    base, limit = TARGETS[name]
    by_name = {t.name: t for t in timings}
    if base in by_name:
        ratio = by_name["functx"].median / by_name[base].median
        lines += ["", f"Target: functx ÷ {base} = {ratio:.2f} (target <= {limit}: "
                      f"{'met' if ratio <= limit else 'MISSED'})"]
    return "\n".join(lines)


def environment(peers: dict) -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    rt = cupy.cuda.runtime.runtimeGetVersion()
    lines = [f"- GPU: {name} ({props['totalGlobalMem'] / 2**30:.0f} GiB), CUDA runtime "
             f"{rt // 1000}.{rt % 1000 // 10}, driver {cupy.cuda.runtime.driverGetVersion()}",
             f"- functx at commit {git_commit(ROOT)}, CuPy {cupy.__version__}, NumPy "
             f"{np.__version__}, Python {sys.version.split()[0]}"]
    if "torch" in peers:
        lines.append(f"- PyTorch {peers['torch'].__version__} (allow_tf32 off for matmul and "
                     "cuDNN, float32 matmul precision 'highest')")
    if "jax" in peers:
        lines.append(f"- JAX {peers['jax'].__version__} (jit; default matmul precision "
                     "'highest')")
    lines.append(f"- NVIDIA_TF32_OVERRIDE={os.environ.get('NVIDIA_TF32_OVERRIDE')}, "
                 f"XLA_PYTHON_CLIENT_PREALLOCATE={os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE')}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--only", default="block,ln_gelu,mlp,small_mlp",
                    help="comma-separated workloads (block first: JAX's peak is per process)")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    if "cuda" not in fx.backends():
        sys.exit(f"No CUDA backend: {sys.modules['functx.backends'].cuda_status()}")
    peers = load_peers(args.no_peers)
    report = ["### GPU: eager functx (CuPy) beside PyTorch eager, JAX jit and CuPy by hand",
              "", environment(peers),
              f"- {args.repeats} timed steps per system after {args.warmup} warm-up steps, "
              "interleaved in blocks of 10; median and 25th-75th percentiles; each step waits "
              "for the GPU", ""]
    for name in args.only.split(","):
        try:
            report += [run(name.strip(), peers, args.repeats, args.warmup), ""]
        except Exception as e:  # keep going: the other workloads still get measured
            log(traceback.format_exc())
            report += [f"#### {TITLES[name.strip()]}", "",
                       f"failed: {type(e).__name__}: {e}", ""]
        print("\n".join(report[-2:]), file=sys.stderr, flush=True)
    report.append("(`functx ÷ system` above 1 means functx is slower than that system.)")
    print("\n".join(report))


if __name__ == "__main__":
    main()
