"""pmap and its collectives on several GPUs (NCCL), against vmap on the CPU.

Skips unless the CUDA backend sees at least two GPUs. Run on a 2- and a 4-GPU host::

    python -m pytest tests/test_multi_gpu.py -q

Checks every collective case of tests/test_collectives.py (each against vmap(axis_name=)
on the CPU, whose semantics test_collectives.py checks against JAX), gradients inside
pmap, float32/complex/bool/int operands, Sharded round trips, and a data-parallel
training step equal to the single-device step.
"""
from __future__ import annotations

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from tests.test_collectives import CASES, IDS

GPUS = fx.devices("cuda")
pytestmark = pytest.mark.skipif(len(GPUS) < 2, reason="needs at least two GPUs")
RNG = np.random.default_rng(2)


def _sizes():
    return [n for n in (2, 4, 8) if n <= len(GPUS)] if len(GPUS) >= 2 else [2]


def _shape(shape, n):
    # the cases' member shapes use N=4 where the axis size matters: use n instead
    return tuple(n if d == 4 else (2 * n if d == 8 else d) for d in shape)


@pytest.mark.parametrize("n", _sizes())
@pytest.mark.parametrize("name,body,shape", CASES, ids=IDS)
def test_collective_on_gpus_matches_cpu(n, name, body, shape):
    if name.startswith("ppermute"):
        perm = [(j, (j + 1) % n) for j in range(n)] if name == "ppermute" else [(0, n - 1)]
        f = lambda x: fx.lax.ppermute(x, "i", perm) * x  # noqa: E731
    else:
        f = body(fx.lax)
    x = RNG.normal(size=(n,) + _shape(shape, n))
    got = fx.pmap(f, axis_name="i", devices=GPUS[:n])(x)
    assert [s.device.id for s in got.shards] == [d.id for d in GPUS[:n]]
    np.testing.assert_allclose(np.asarray(got), fx.vmap(f, axis_name="i")(x), rtol=1e-12,
                               atol=1e-12)
    g = fx.pmap(fx.grad(lambda v: fnp.sum(f(v))), axis_name="i", devices=GPUS[:n])(x)
    want = fx.grad(lambda xs: fnp.sum(fx.vmap(f, axis_name="i")(xs)))(x)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.complex64,
                                   np.bool_])
def test_dtypes(dtype):
    n = len(GPUS)
    x = (RNG.normal(size=(n, 5, 3)) * 4).astype(dtype)
    ops = [lambda v: fx.lax.all_gather(v, "i"), lambda v: fx.lax.ppermute(
        v, "i", [(j, (j + 1) % n) for j in range(n)])]
    if dtype is not np.bool_:
        ops.append(lambda v: fx.lax.psum(v, "i"))
    for op in ops:
        got = np.asarray(fx.pmap(op, axis_name="i", devices=GPUS)(x))
        np.testing.assert_allclose(got, fx.vmap(op, axis_name="i")(x), rtol=2e-3, atol=1e-2)


def test_data_parallel_step_equals_single_device():
    n = len(GPUS)
    w = RNG.normal(size=(16, 8)).astype(np.float32)
    x = RNG.normal(size=(n * 4, 16)).astype(np.float32)

    def local_loss(w, x):
        return fnp.mean(fnp.tanh(x @ w) ** 2)

    step = fx.pmap(lambda w, x: fx.lax.pmean(fx.value_and_grad(local_loss)(w, x), "d"),
                   axis_name="d", devices=GPUS)
    ws = fx.device_put_replicated(w, GPUS)
    xs = fx.device_put_sharded(list(x.reshape(n, 4, 16)), GPUS)
    loss, g = step(ws, xs)
    want_loss, want_g = fx.value_and_grad(local_loss)(w, x)
    np.testing.assert_allclose(np.asarray(loss), np.full(n, want_loss), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(want_g, (n, 16, 8)), rtol=1e-4,
                               atol=1e-6)


@pytest.mark.parametrize("nested", [False, True])
def test_members_keep_their_literals_and_kernels_on_their_own_gpu(nested):
    # Lockstep (top-level collectives) and threads (a collective inside checkpoint) both
    # plan each member with its own device current: a literal (0.5, 1.0) made on GPU 0
    # for every member broke the others' kernels and cuBLAS handles.
    n = len(GPUS)
    x = RNG.normal(size=(n, 3, 64, 64)).astype(np.float32)

    def body(v):
        h = fnp.tanh(v * 0.5 + 1.0) @ v
        s = fx.lax.psum(h, "d")
        if nested:
            return fx.checkpoint(lambda a: fx.lax.psum(a * 2.0, "d"))(s)
        return s * 2.0

    got = fx.pmap(body, axis_name="d", devices=GPUS)(x)
    assert [fx.device_of(s).id for s in got.shards] == [d.id for d in GPUS]
    want = fx.vmap(body, axis_name="d")(x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-4, atol=2e-3)
