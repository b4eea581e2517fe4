"""pmap on the fake multi-device CPU (virtual devices cpu:0..n-1): every collective against
vmap(axis_name=) (the same semantics, checked against JAX in test_collectives.py), grad
inside and outside pmap, Sharded inputs and outputs, device_put_sharded/replicated, errors.
The same code paths run NCCL on several GPUs (tests/test_multi_gpu.py, for the lead)."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.named_axes import AxisNameError
from tests.test_collectives import CASES, IDS, N

RNG = np.random.default_rng(1)


@pytest.mark.parametrize("name,body,shape", CASES, ids=IDS)
def test_pmap_matches_vmap(name, body, shape):
    x = RNG.normal(size=(N,) + shape)
    f = body(fx.lax)
    got = fx.pmap(f, axis_name="i")(x)
    assert isinstance(got, fx.Sharded) and len(got.shards) == N
    assert [str(d) for d in got.devices] == [f"cpu:{k}" for k in range(N)]
    np.testing.assert_allclose(np.asarray(got), fx.vmap(f, axis_name="i")(x), rtol=1e-12)


@pytest.mark.parametrize("name,body,shape", CASES, ids=IDS)
def test_grad_inside_and_outside_pmap(name, body, shape):
    x = RNG.normal(size=(N,) + shape)
    f = body(fx.lax)
    inside = np.asarray(fx.pmap(fx.grad(lambda v: fnp.sum(f(v))), axis_name="i")(x))
    want = fx.grad(lambda xs: fnp.sum(fx.vmap(f, axis_name="i")(xs)))(x)
    np.testing.assert_allclose(inside, want, rtol=1e-10, atol=1e-12)
    outside = fx.grad(lambda xs: fnp.sum(fx.pmap(f, axis_name="i")(xs)))(x)
    np.testing.assert_allclose(outside, want, rtol=1e-10, atol=1e-12)


def test_sharded_inputs_replicated_parameters_and_out_axes_none():
    devs = [fx.Device("cpu", k) for k in range(3)]
    w = RNG.normal(size=(4,))
    xs = [RNG.normal(size=(5, 4)) for _ in range(3)]
    ws = fx.device_put_replicated({"w": w}, devs)
    assert isinstance(ws["w"], fx.Sharded) and np.asarray(ws["w"]).shape == (3, 4)
    batch = fx.device_put_sharded(xs, devs)

    def local_loss(p, x):
        return fnp.mean((x @ p["w"]) ** 2)

    def loss(p, x):
        return fx.lax.pmean(local_loss(p, x), "d")

    # data parallelism as in JAX: local gradients, averaged over the devices
    step = fx.pmap(lambda p, x: fx.lax.pmean(fx.value_and_grad(local_loss)(p, x), "d"),
                   axis_name="d", devices=devs)
    (l, g) = step(ws, batch)
    full = np.concatenate(xs)
    np.testing.assert_allclose(np.asarray(l), np.full(3, np.mean((full @ w) ** 2)))
    np.testing.assert_allclose(np.asarray(g["w"])[1], 2 * full.T @ (full @ w) / len(full))
    scalar = fx.pmap(loss, axis_name="d", in_axes=(0, 0), out_axes=None)(ws, batch)
    np.testing.assert_allclose(scalar, np.mean((full @ w) ** 2))
    # unmapped arguments are replicated
    out = fx.pmap(lambda x, c: x + c, axis_name="d", in_axes=(0, None))(np.ones((2, 3)), 5.0)
    np.testing.assert_allclose(np.asarray(out), np.full((2, 3), 6.0))


def test_pmap_traces_once_per_signature():
    calls = []

    def f(x):
        calls.append(1)
        return fx.lax.psum(x, "d")

    p = fx.pmap(f, axis_name="d")
    for _ in range(3):
        p(np.ones((2, 3)))
    assert len(calls) == 1
    p(np.ones((2, 4)))
    assert len(calls) == 2


def test_pmap_errors():
    with pytest.raises(fx.ArgumentError, match="sizes"):
        fx.pmap(lambda a, b: a + b, axis_name="d")(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(fx.ArgumentError, match="devices"):
        fx.pmap(lambda a: a, axis_name="d", devices=[fx.Device("cpu", 0)])(np.ones((2, 3)))
    with pytest.raises(AxisNameError, match="unbound axis name 'e'"):
        fx.pmap(lambda a: fx.lax.psum(a, "e"), axis_name="d")(np.ones((2, 3)))
    with pytest.raises(fx.ArgumentError, match="in_axes"):
        fx.pmap(lambda a: a, axis_name="d", in_axes=1)(np.ones((2, 3)))


def test_cpu_devices_environment_variable():
    code = "import functx as fx; print(fx.devices('cpu'))"
    env = dict(os.environ, FUNCTX_CPU_DEVICES="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.strip() == "[cpu:0, cpu:1, cpu:2]"


def test_local_device_is_what_a_platform_name_means():
    # one process per device (functx.distributed.initialize): "cpu"/"cuda" without an
    # index means the process's own device; explicit indices keep their meaning
    code = ("import functx as fx, numpy as np; from functx import backends as b; "
            "b.set_local_device(fx.Device('cpu', 2)); "
            "print(b.as_device('cpu'), b.as_device('cpu:0'), b.as_device(b.CPU))")
    env = dict(os.environ, FUNCTX_CPU_DEVICES="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.split() == ["cpu:2", "cpu:0", "cpu:2"]


@pytest.mark.parametrize("mode", ["dp", "fsdp", "fsdp --remat"])
def test_data_parallel_example_same_losses_on_1_2_4_devices(mode):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, FUNCTX_DISABLE_CUDA="1")
    out = subprocess.run([sys.executable, os.path.join(root, "examples", "data_parallel.py"),
                          "--mode", *mode.split(), "--steps", "3"], env=env, capture_output=True,
                         text=True, timeout=300, cwd=root)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = [ln for ln in out.stdout.splitlines() if "losses" in ln]
    assert len(lines) == 3
    runs = [np.array([float(v) for v in ln.split("losses")[1].split()]) for ln in lines]
    for r in runs[1:]:
        np.testing.assert_allclose(r, runs[0], rtol=1e-12)
    assert np.all(np.isfinite(runs[0])) and runs[0][0] > 0


def test_checkpoint_and_custom_vjp_bodies_with_collectives_inside_pmap():
    x = RNG.normal(size=(3, 4))
    body = lambda v: fnp.sin(fx.lax.psum(v, "d")) * v  # noqa: E731
    f = fx.checkpoint(body)
    got = fx.pmap(fx.grad(lambda v: fnp.sum(f(v))), axis_name="d")(x)
    want = fx.grad(lambda xs: fnp.sum(fx.vmap(body, axis_name="d")(xs)))(x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    jitted = fx.pmap(fx.jit(lambda v: fx.lax.pmean(v, "d")), axis_name="d")(x)
    np.testing.assert_allclose(np.asarray(jitted), np.broadcast_to(x.mean(0), x.shape))


@pytest.mark.parametrize("nested", [False, True])
def test_a_failing_member_stops_the_others(nested):
    # top-level collectives only: the members run in lockstep in the calling thread; a
    # collective inside checkpoint: one thread per member, meeting at barriers
    def f(v):
        s = fx.lax.psum(v, "d")
        t = fx.pure_callback(_fail_on_member_1, v, v)
        if nested:
            return fx.checkpoint(lambda a: fx.lax.psum(a, "d"))(t + s)
        return t + fx.lax.psum(s, "d")

    with pytest.raises(Exception, match="member 1 fails on purpose"):
        fx.pmap(f, axis_name="d")(np.arange(3.0))
    ok = fx.pmap(f, axis_name="d")(np.arange(3.0) + 2)
    want = (np.arange(3.0) + 2) + 9 * (1 if nested else 3)
    np.testing.assert_allclose(np.asarray(ok), want if not nested else
                               np.full(3, np.sum(np.arange(3.0) + 2 + 9)))


def _fail_on_member_1(v):
    if float(np.asarray(v)) == 1.0:
        raise RuntimeError("member 1 fails on purpose")
    return v


def test_a_body_calling_a_collective_on_a_value_the_same_everywhere():
    # psum(v) is the same on every member (unbatched under vmap); a checkpoint body that
    # sums it again still depends on the axis: vmap batches it (it used to run it outside
    # the map: "unbound axis name"), and pmap agrees
    def inner(a):
        return fx.lax.psum(a * 2.0, "d")

    def f(v):
        s = fx.lax.psum(v, "d")
        return fx.checkpoint(inner)(s)

    x = np.arange(6.0).reshape(3, 2)
    want = np.broadcast_to(x.sum(0) * 6, x.shape)
    np.testing.assert_allclose(np.asarray(fx.vmap(f, axis_name="d")(x)), want)
    np.testing.assert_allclose(np.asarray(fx.pmap(f, axis_name="d")(x)), want)


@pytest.mark.parametrize("loop", ["scan", "cond", "while"])
def test_loop_bodies_calling_collectives_under_vmap_and_pmap(loop):
    # the loops' batching rules map their bodies over the axis being batched, so a
    # collective in the body sums over the members (it raised "unbound axis name")
    def f(v):
        if loop == "scan":
            return fx.lax.scan(lambda c, _: (fx.lax.psum(c * 2.0, "d"), None), v, None,
                               length=2)[0]
        if loop == "cond":
            return fx.lax.cond(v[0] > 1, lambda a: fx.lax.psum(a, "d") * 2.0,
                               lambda a: fx.lax.psum(a, "d") * 4.0, v)
        return fx.lax.while_loop(lambda c: c[1] < 2,
                                 lambda c: (fx.lax.psum(c[0], "d"), c[1] + 1), (v, 0))[0]

    x = np.arange(6.0).reshape(3, 2)
    total = x.sum(0)
    want = {"scan": np.broadcast_to(12 * total, x.shape),
            "cond": np.stack([4 * total if row[0] <= 1 else 2 * total for row in x]),
            "while": np.broadcast_to(3 * total, x.shape)}[loop]
    np.testing.assert_allclose(np.asarray(fx.vmap(f, axis_name="d")(x)), want)
    np.testing.assert_allclose(np.asarray(fx.pmap(f, axis_name="d")(x)), want)
