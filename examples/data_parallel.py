"""Data-parallel and fully sharded (FSDP) training of a small transformer with fx.pmap.

Trains the same model with the same global batch on 1, 2 and 4 devices and prints each
run's losses; they agree up to the order of the floating-point reductions.

* ``--mode dp``: parameters replicated on every device; each device computes the gradient
  of its slice of the batch, ``pmean`` averages them (one all-reduce, NCCL on GPUs).
* ``--mode fsdp``: every parameter is split over the devices (each holds ``1/N`` of it and
  of its optimizer state); a layer all-gathers its parameters just before using them.
  The gradient of ``all_gather`` is ``psum_scatter`` (a reduce-scatter), so ``grad`` of the
  loss with respect to the shards is already each device's block of the summed gradient:
  no extra code for the backward pass. With ``--remat`` each layer is a ``checkpoint``:
  the backward pass gathers its parameters again rather than keeping them, so a device
  holds about 1/N of the parameters plus one layer's.

On a machine without GPUs the devices are functx's virtual CPU devices (the same code
paths, NumPy for the collectives). With GPUs: ``--platform cuda``.

    python examples/data_parallel.py --devices 1 2 4 --steps 5
    python examples/data_parallel.py --mode fsdp --remat --platform cuda --devices 1 2 4
"""
from __future__ import annotations

import argparse
import math

import numpy as np

import functx as fx
import functx.numpy as fnp

D_MODEL, HEADS, D_FF, SEQ = 32, 4, 64, 8


def init_params(rng: np.random.Generator, layers: int, dtype) -> list:
    def dense(i, o):
        return (rng.normal(size=(i, o)) / math.sqrt(i)).astype(dtype)

    return [{"ln1": np.ones(D_MODEL, dtype), "wqkv": dense(D_MODEL, 3 * D_MODEL),
             "wo": dense(D_MODEL, D_MODEL), "ln2": np.ones(D_MODEL, dtype),
             "w1": dense(D_MODEL, D_FF), "w2": dense(D_FF, D_MODEL)}
            for _ in range(layers)] + [{"head": dense(D_MODEL, 1)}]


def block(p: dict, x):
    b, t, d = x.shape
    h = fx.nn.layer_norm(x, d, weight=p["ln1"])
    q, k, v = fnp.split(h @ p["wqkv"], 3, axis=-1)
    heads = lambda z: z.reshape(b, t, HEADS, d // HEADS)  # noqa: E731
    a = fx.nn.dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
    x = x + a.reshape(b, t, d) @ p["wo"]
    h = fx.nn.layer_norm(x, d, weight=p["ln2"])
    return x + fx.nn.gelu(h @ p["w1"]) @ p["w2"]


def loss_fn(params: list, x, y):
    for p in params[:-1]:
        x = block(p, x)
    pred = fnp.mean(x, axis=1) @ params[-1]["head"]
    return fnp.mean((pred[:, 0] - y) ** 2)


# -- FSDP: parameters as shards, gathered per layer -------------------------------------------

def shard_leaf(x: np.ndarray, n: int) -> np.ndarray:
    """``x`` flattened, zero-padded to a multiple of n, as (n, chunk): row k for device k."""
    flat = x.reshape(-1)
    chunk = -(-flat.size // n)
    return np.concatenate([flat, np.zeros(chunk * n - flat.size, x.dtype)]).reshape(n, chunk)


def gather_leaf(shard, shape, axis_name: str):
    """The whole parameter from this device's shard (an all-gather; its VJP reduce-scatters)."""
    full = fx.lax.all_gather(shard, axis_name, tiled=True)
    return full[: math.prod(shape)].reshape(shape)


def fsdp_loss(shards: list, shapes: list, x, y, remat: bool = False):
    for s, shp in zip(shards[:-1], shapes[:-1]):  # each layer gathers just before use
        def layer(s, x, shp=shp):
            return block({k: gather_leaf(s[k], shp[k], "dp") for k in s}, x)
        # with remat, the backward pass gathers the layer's parameters again instead of
        # keeping them (and the layer's activations) from the forward pass
        x = (fx.checkpoint(layer) if remat else layer)(s, x)
    head = gather_leaf(shards[-1]["head"], shapes[-1]["head"], "dp")
    pred = fnp.mean(x, axis=1) @ head
    return fnp.mean((pred[:, 0] - y) ** 2)


# -- training -----------------------------------------------------------------------------------

def train(n: int, mode: str, platform: str, steps: int, batch: int, layers: int,
          lr: float, dtype, seed: int = 0, remat: bool = False) -> list[float]:
    rng = np.random.default_rng(seed)
    params = init_params(rng, layers, dtype)
    data = rng.normal(size=(steps, batch, SEQ, D_MODEL)).astype(dtype)
    targets = rng.normal(size=(steps, batch)).astype(dtype)
    devs = fx.devices("cuda")[:n] if platform == "cuda" else [fx.Device("cpu", k)
                                                               for k in range(n)]
    if len(devs) < n:
        raise SystemExit(f"only {len(devs)} {platform} device(s); asked for {n}")

    if mode == "dp":
        def step(p, x, y):
            loss, g = fx.value_and_grad(loss_fn)(p, x, y)
            loss, g = fx.lax.pmean((loss, g), "dp")
            return fx.tree.map(lambda w, gw: w - lr * gw, p, g), loss

        state = fx.device_put_replicated(params, devs)
    else:
        shapes = [{k: v.shape for k, v in p.items()} for p in params]

        def step(s, x, y):
            loss, g = fx.value_and_grad(fsdp_loss)(s, shapes, x, y, remat)
            # g is each device's block of the summed gradient (all_gather's VJP is a
            # reduce-scatter): divide by n for the mean over devices
            new = fx.tree.map(lambda w, gw: w - lr * gw / n, s, g)
            return new, fx.lax.pmean(loss, "dp")

        state = fx.tree.map(lambda leaf: fx.device_put_sharded(list(shard_leaf(leaf, n)), devs),
                            params)
    pstep = fx.pmap(step, axis_name="dp", devices=devs)
    losses = []
    for t in range(steps):
        xs = data[t].reshape(n, batch // n, SEQ, D_MODEL)
        ys = targets[t].reshape(n, batch // n)
        state, loss = pstep(state, xs, ys)
        losses.append(float(np.asarray(loss)[0]))
    return losses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--mode", choices=["dp", "fsdp"], default="dp")
    ap.add_argument("--platform", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8, help="global batch (divisible by devices)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--float32", action="store_true", help="float32 (default: float64)")
    ap.add_argument("--remat", action="store_true",
                    help="fsdp: checkpoint each layer (gather again in the backward pass)")
    a = ap.parse_args()
    dtype = np.float32 if a.float32 else np.float64
    runs = {}
    for n in a.devices:
        runs[n] = train(n, a.mode, a.platform, a.steps, a.batch, a.layers, a.lr, dtype,
                        remat=a.remat)
        print(f"{a.mode} on {n} {a.platform} device(s): losses "
              + " ".join(f"{v:.10f}" for v in runs[n]))
    ref = np.array(runs[a.devices[0]])
    diff = max(float(np.max(np.abs(np.array(v) - ref) / np.abs(ref))) for v in runs.values())
    print(f"largest relative difference across device counts: {diff:.3e}")


if __name__ == "__main__":
    main()
