"""Devices and backends without a GPU: Device parsing, devices(), device_put, to_numpy,
default_device, from_dlpack, memory_stats, and the device-mixing rules.

The device plumbing (placement, scalars joining a device, mixing errors, zeros on the
right device in grad, creation on the default device) is exercised on a *fake* device: a
backend whose arrays are a NumPy subclass, registered for the test only. It runs
everywhere, so CI checks the device logic that tests/test_cuda.py checks with CuPy on a GPU.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import types
from typing import Any

import numpy as np
import pytest

import functx as fx
import functx.backends as B
import functx.numpy as fnp
from functx.backends._cuda import bfloat16_guard
from functx.errors import DeviceError, DTypeError, FunctxError


# -- a fake device ------------------------------------------------------------------------------

class FakeArray(np.ndarray):
    """An array of the fake device: NumPy underneath, but a type of its own."""

    def __array_wrap__(self, arr: Any, context: Any = None, return_scalar: bool = False) -> Any:
        return np.asarray(arr).view(FakeArray)  # 0-d results stay arrays, as in CuPy

    def __getitem__(self, index: Any) -> Any:
        out = super().__getitem__(index)
        return out if isinstance(out, np.ndarray) else np.asarray(out).view(FakeArray)


def _fake(out: Any) -> Any:
    if isinstance(out, tuple):
        return tuple(_fake(o) for o in out)
    if isinstance(out, (np.ndarray, np.generic)) and type(out) is not FakeArray:
        return np.asarray(out).view(FakeArray)
    return out


class _FakeUfunc:
    def __init__(self, ufunc: np.ufunc) -> None:
        self._ufunc = ufunc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _fake(self._ufunc(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._ufunc, name)
        return (lambda *a, **k: _fake(attr(*a, **k))) if callable(attr) else attr


class _FakeXP:
    """NumPy (or one of its submodules, such as numpy.fft), with every result made a
    FakeArray (like CuPy: arrays in, arrays out)."""

    def __init__(self, module: Any = np, name: str = "fake_xp") -> None:
        self._module = module
        self.__name__ = name

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._module, name)
        if isinstance(attr, np.ufunc):
            return _FakeUfunc(attr)
        if isinstance(attr, types.ModuleType):
            return _FakeXP(attr, f"{self.__name__}.{name}")
        if callable(attr) and not isinstance(attr, type):
            return lambda *a, **k: _fake(attr(*a, **k))
        return attr


def _put(x: Any, device_id: int) -> FakeArray:
    return x if type(x) is FakeArray else np.array(x).view(FakeArray)


FAKE = B.Backend(
    name="fakegpu", xp=_FakeXP(), array_types=(FakeArray,),
    to_host=lambda x: np.array(x, subok=False), from_host=lambda a: np.array(a).view(FakeArray),
    synchronize=lambda: None, memory_stats=lambda: {"bytes_in_use": 0},
    put=_put, scalar_from_host=lambda a: np.array(a).view(FakeArray),
    use_device=lambda i: contextlib.nullcontext(),
    supports_dtype=lambda dt: dt != np.float16,
    # CUDA's bfloat16 guard, so that FUNCTX_TEST_DEVICE=fakegpu runs it too
    adapt_impl=lambda fn, prim: bfloat16_guard(fn, prim, FakeArray))


@pytest.fixture
def fake():
    """The fake device, registered for one test (and left registered if it already was:
    tests/test_cuda.py registers it for a whole session with FUNCTX_TEST_DEVICE=fakegpu)."""
    registered = B._BACKENDS.get("fakegpu") is FAKE
    B.register_backend(FAKE)
    try:
        yield fx.Device("fakegpu", 0)
    finally:
        if not registered:
            B._BACKENDS.pop("fakegpu", None)
            B.BY_TYPE.pop(FakeArray, None)


def on_fake(x: np.ndarray) -> FakeArray:
    return np.array(x).view(FakeArray)


# -- devices, Device ----------------------------------------------------------------------------

def test_devices_lists_cpu_first_and_filters_by_platform() -> None:
    devs = fx.devices()
    assert devs[0] == fx.Device("cpu", 0) and repr(devs[0]) == "cpu:0"
    assert all(isinstance(d, fx.Device) for d in devs)
    assert fx.devices("cpu") == [fx.Device("cpu", 0)]
    assert fx.devices("tpu") == []
    cuda = fx.devices("cuda")
    assert cuda == [d for d in devs if d.platform == "cuda"]
    assert fx.devices("gpu") == cuda


def test_device_strings_are_parsed_and_checked() -> None:
    assert B.as_device("cpu") == B.as_device("CPU:0") == B.as_device(fx.Device("cpu"))
    assert B.as_device(B.CPU) == fx.Device("cpu", 0)
    with pytest.raises(DeviceError, match="cpu:1.*1 device"):
        B.as_device("cpu:1")
    with pytest.raises(DeviceError, match="'tpu'.*available backends are"):
        B.as_device("tpu")
    with pytest.raises(DeviceError, match="Cannot read the device 'cuda:x'"):
        B.as_device("cuda:x")
    with pytest.raises(TypeError, match="Expected a device"):
        B.as_device(3)


def test_functx_backends_is_the_module_and_lists_the_backends_when_called() -> None:
    """``import functx.backends`` gives the module (the package's function of the same name
    used to shadow it), and ``fx.backends()`` still lists the backends."""
    import functx.backends as fb
    from functx import backends

    assert isinstance(fb, types.ModuleType) and fb is sys.modules["functx.backends"]
    assert fx.backends is fb and backends is fb
    assert fb.get_backend is fx.get_backend and fb.Device is fx.Device
    listed = fx.backends()
    assert type(listed) is dict and listed["cpu"] is fb.CPU
    assert listed == fb.backends() and set(listed) == {d.platform for d in fx.devices()}
    listed.pop("cpu")
    assert "cpu" in fx.backends()  # a copy each call


@pytest.mark.skipif("cuda" in B._BACKENDS, reason="CUDA is available on this machine")
def test_missing_cuda_is_explained() -> None:
    assert fx.devices("cuda") == []
    with pytest.raises(DeviceError, match="CUDA needs CuPy"):
        fx.device_put(np.ones(2), "cuda")
    assert B.cuda_status() != "not checked"


def test_library_imports_with_cuda_disabled() -> None:
    code = ("import functx as fx, functx.numpy as fnp, sys, numpy as np; "
            "print(fx.devices(), sys.modules['functx.backends'].cuda_status()); "
            "print(fx.grad(lambda x: fnp.sum(fnp.sin(x)))(np.zeros(2)))")
    env = dict(os.environ, FUNCTX_DISABLE_CUDA="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=120).stdout
    assert out.splitlines() == ["[cpu:0] disabled by FUNCTX_DISABLE_CUDA", "[1. 1.]"]


# -- device_put, to_numpy on the CPU ------------------------------------------------------------

def test_device_put_cpu_gives_read_only_arrays_that_alias_nothing_writable() -> None:
    w = np.arange(3.0)
    r = np.arange(2.0)
    r.flags.writeable = False
    out = fx.device_put({"w": w, "r": r, "s": 2.5, "l": [1, 2]}, "cpu")
    assert not out["w"].flags.writeable and not np.shares_memory(out["w"], w)
    assert out["r"] is r  # already a read-only CPU array: no copy
    assert out["s"].shape == () and out["s"].dtype == np.float64
    np.testing.assert_array_equal(out["w"], w)
    w[0] = 7.0
    assert out["w"][0] == 0.0
    with pytest.raises(TypeError, match="not an array"):
        fx.device_put(object(), "cpu")


def test_to_numpy_passes_host_values_and_refuses_tracers() -> None:
    x = np.ones(2)
    tree = fx.to_numpy({"a": x, "b": 3})
    assert tree["a"] is x and tree["b"] == 3
    with pytest.raises(FunctxError, match="to_numpy got a traced"):
        fx.grad(lambda v: fx.to_numpy(v).sum())(np.ones(2))


def test_default_device_is_thread_local_and_nests() -> None:
    assert fx.get_default_device() == fx.Device("cpu")
    seen = []
    with fx.default_device("cpu") as d:
        assert d == fx.Device("cpu") and fx.get_default_device() == d
        t = threading.Thread(target=lambda: seen.append(fx.get_default_device()))
        t.start()
        t.join()
    assert seen == [fx.Device("cpu")]
    with pytest.raises(DeviceError):
        with fx.default_device("tpu"):
            pass
    assert fx.get_default_device() == fx.Device("cpu")


def test_memory_stats_on_cpu() -> None:
    stats = fx.memory_stats("cpu")
    assert stats["peak_bytes"] > 0
    fx.reset_peak_memory_stats("cpu")  # nothing to reset, but allowed


# -- DLPack -------------------------------------------------------------------------------------

def test_from_dlpack_shares_memory_with_torch_and_jax() -> None:
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.float64)
    x = fx.from_dlpack(t)
    assert type(x) is np.ndarray and not x.flags.writeable
    t[0] = 42.0  # zero-copy: the change is visible through x
    assert x[0] == 42.0
    assert fx.grad(lambda v: fnp.sum(v * v))(x)[0] == 84.0
    jnp = pytest.importorskip("jax.numpy")
    jax = pytest.importorskip("jax")
    y = fx.from_dlpack(jax.device_put(jnp.arange(3.0), jax.devices("cpu")[0]))
    np.testing.assert_array_equal(y, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(fx.from_dlpack(np.arange(2)), [0, 1])
    with pytest.raises(TypeError, match="__dlpack__"):
        fx.from_dlpack([1, 2])
    # The other direction: torch reads a functx result (a copy, as it is read-only).
    np.testing.assert_array_equal(torch.from_numpy(np.array(x)).numpy(), x)


# -- the fake device: placement ----------------------------------------------------------------

def test_device_put_and_to_numpy_round_trip(fake: fx.Device) -> None:
    assert fake in fx.devices() and fx.devices("fakegpu") == [fake]
    tree = {"w": np.arange(6.0).reshape(2, 3), "b": np.float32(1.5)}
    on = fx.device_put(tree, fake)
    assert type(on["w"]) is FakeArray and type(on["b"]) is FakeArray
    assert fx.device_of(on["w"]) == fake and fx.device_of(tree["w"]) == fx.Device("cpu")
    assert fx.device_put(on["w"], "fakegpu") is on["w"]  # already there: no copy
    back = fx.to_numpy(on)
    assert type(back["w"]) is np.ndarray and back["b"].dtype == np.float32
    np.testing.assert_array_equal(back["w"], tree["w"])
    cpu = fx.device_put(on, "cpu")
    assert type(cpu["w"]) is np.ndarray and not cpu["w"].flags.writeable
    with pytest.raises(DTypeError, match="float16 cannot live on fakegpu:0"):
        fx.device_put(np.ones(2, np.float16), fake)


def test_default_device_places_new_arrays(fake: fx.Device) -> None:
    host = np.ones((2, 2))
    with fx.default_device(fake):
        made = [fnp.zeros(3), fnp.ones((2, 2), np.float32), fnp.empty(2), fnp.full((2,), 7),
                fnp.full((2,), 2.5, np.float32), fnp.eye(2), fnp.identity(3), fnp.arange(4),
                fnp.arange(0.5, 2.0, 0.5), fnp.zeros_like(3.0), fnp.full((2, 2), [1, 2])]
        kept = fnp.zeros_like(host)  # *_like follows its argument's device
    assert all(type(a) is FakeArray for a in made), [type(a) for a in made]
    expected = [np.zeros(3), np.ones((2, 2), np.float32), np.zeros(2), np.full((2,), 7),
                np.full((2,), 2.5, np.float32), np.eye(2), np.identity(3), np.arange(4),
                np.arange(0.5, 2.0, 0.5), np.zeros(()), np.full((2, 2), [1, 2])]
    for a, e in zip(made, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_array_equal(np.asarray(a), e)
    assert type(kept) is np.ndarray
    assert type(fnp.ones_like(on_fake(host))) is FakeArray  # outside the block too
    assert type(fnp.zeros(2, device="fakegpu")) is FakeArray
    assert type(fnp.zeros(2)) is np.ndarray


def test_like_argument_creates_on_the_device_of_its_array(fake: fx.Device) -> None:
    x = on_fake(np.ones(3))
    made = [fnp.zeros(2, like=x), fnp.ones(2, like=x), fnp.empty(2, like=x),
            fnp.full(2, 3.0, like=x), fnp.eye(2, like=x), fnp.identity(2, like=x),
            fnp.tri(2, like=x), fnp.arange(3, like=x)]
    assert all(type(a) is FakeArray for a in made), [type(a) for a in made]
    assert type(fnp.zeros(2, like=np.ones(1))) is np.ndarray
    # Inside grad, like= looks through the tracer to the device of its value.
    g = fx.grad(lambda v: fnp.sum(v * fnp.arange(3, like=v)))(x)
    assert type(g) is FakeArray
    np.testing.assert_array_equal(np.asarray(g), [0.0, 1.0, 2.0])


# -- the fake device: operations ---------------------------------------------------------------

def test_scalars_and_0d_host_arrays_join_the_device(fake: fx.Device) -> None:
    x = on_fake(np.array([1.0, -2.0, 3.0]))
    outs = [fnp.add(fnp.multiply(fnp.tanh(x), 2.0), 1), fnp.add(x, np.float64(1.0)),
            fnp.maximum(x, np.asarray(0.0)), fnp.where(fnp.greater(x, 0), x, 0.0),
            fnp.power(2, x), fnp.add(np.asarray(1.0), x)]
    for out in outs:
        assert type(out) is FakeArray
    np.testing.assert_allclose(np.asarray(outs[0]), np.tanh([1.0, -2.0, 3.0]) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(outs[3]), [1.0, 0.0, 3.0])


def test_mixing_devices_is_an_error_naming_both(fake: fx.Device) -> None:
    x = on_fake(np.ones(3))
    with pytest.raises(DeviceError, match=r"add got arrays on two devices: f64\[3\] on "
                                          r"cpu:0 and f64\[3\] on fakegpu:0") as e:
        fnp.add(np.ones(3), x)
    assert "device_put" in str(e.value) and "test_backends.py" in str(e.value)
    with pytest.raises(DeviceError, match=r"dot_general got arrays on two devices"):
        fnp.matmul(x, np.ones((3, 2)))
    with pytest.raises(DeviceError, match="two devices"):
        fx.grad(lambda v: fnp.sum(v * np.ones(3)))(x)


def test_grad_runs_on_the_device_end_to_end(fake: fx.Device) -> None:
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 3)), "b": rng.standard_normal(3)}
    X, Y = rng.standard_normal((5, 4)), rng.standard_normal((5, 3))

    def loss(p, X, Y):
        h = fnp.tanh(X @ p["w"] + p["b"])
        return fnp.mean((h - Y) ** 2) + 0.1 * fnp.sum(p["w"] ** 2)

    g_cpu = fx.grad(loss)(params, X, Y)
    dev = fx.device_put((params, X, Y), fake)
    g_dev = fx.grad(loss)(*dev)
    assert type(g_dev["w"]) is FakeArray and type(g_dev["b"]) is FakeArray
    for k in params:
        np.testing.assert_allclose(np.asarray(g_dev[k]), g_cpu[k], rtol=1e-12)
    value, g = fx.value_and_grad(loss, argnums=(0, 1))(*dev)
    assert type(value) is FakeArray and type(g[1]) is FakeArray


def test_zero_cotangents_are_made_on_the_device(fake: fx.Device) -> None:
    x, y = on_fake(np.ones(3)), on_fake(np.ones(2))
    gx, gy = fx.grad(lambda a, b: fnp.sum(fnp.sin(a)), argnums=(0, 1))(x, y)
    assert type(gy) is FakeArray and not np.any(np.asarray(gy))
    # Nested: the inner grad's zeros are made from a tracer whose value is on the device.
    hy = fx.grad(lambda b: fnp.sum(fx.grad(lambda a, c: fnp.sum(a * a), argnums=1)(b, b)))(y)
    assert type(hy) is FakeArray


def test_forward_mode_and_vmap_stay_on_the_device(fake: fx.Device) -> None:
    x = on_fake(np.linspace(-1, 1, 6).reshape(2, 3))
    out, t = fx.jvp(lambda v: fnp.sum(fnp.exp(v) * 3.0, axis=1), (x,), (fnp.ones_like(x),))
    assert type(out) is FakeArray and type(t) is FakeArray
    np.testing.assert_allclose(np.asarray(t), np.sum(np.exp(np.asarray(x)) * 3, axis=1))
    v = fx.vmap(lambda row: fnp.dot(row, row) + 1.0)(x)
    assert type(v) is FakeArray
    np.testing.assert_allclose(np.asarray(v), np.sum(np.asarray(x) ** 2, axis=1) + 1)


class OtherArray(np.ndarray):
    """An array of a second fake device kind."""


def test_resolve_mixed_places_host_scalars_and_rejects_two_device_kinds(
        fake: fx.Device) -> None:
    x = on_fake(np.ones(2))
    backend, args = B.resolve_mixed((np.float32(2.0), x, 3.0), "mul")
    assert backend is FAKE and type(args[0]) is FakeArray and args[2] == 3.0
    assert args[0].dtype == np.float32 and args[1] is x
    assert B.backend_of_args((1.0, x), "mul") is FAKE
    with pytest.raises(DeviceError, match="two devices"):
        B.backend_of_args((np.ones(2), x), "mul")
    other = B.Backend(name="fake2", xp=np, array_types=(OtherArray,), to_host=np.asarray,
                      from_host=np.asarray, synchronize=lambda: None, memory_stats=dict)
    B.register_backend(other)
    try:
        with pytest.raises(DeviceError, match="f64\\[2\\] on fakegpu:0 and f64\\[2\\] on fake2:0"):
            fnp.multiply(x, np.ones(2).view(OtherArray))
    finally:
        B._BACKENDS.pop("fake2")
        B.BY_TYPE.pop(OtherArray)


# -- block_until_ready -------------------------------------------------------------------------

class SyncArray(np.ndarray):
    """An array of a fake two-device backend that records its synchronisations."""


def test_block_until_ready_on_the_cpu_returns_the_tree() -> None:
    t = {"w": np.ones(3), "n": [1, 2.5], "s": None, "name": "text"}
    assert fx.block_until_ready(t) is t
    x = np.arange(3.0)
    assert fx.block_until_ready(x) is x and fx.block_until_ready(2.0) == 2.0
    # Inside transforms it passes traced values through.
    g = fx.grad(lambda v: fnp.sum(fx.block_until_ready(v * v)))(np.arange(3.0))
    np.testing.assert_allclose(g, [0.0, 2.0, 4.0])
    np.testing.assert_allclose(fx.jit(lambda v: fx.block_until_ready(v) + 1)(x), x + 1)


def test_block_until_ready_on_the_fake_device(fake: fx.Device) -> None:
    x = on_fake(np.arange(4.0))
    out = fx.grad(lambda v: fnp.sum(fnp.sin(v)))(x)
    assert fx.block_until_ready(out) is out and type(out) is FakeArray
    t = {"a": out, "b": [np.ones(2), 3.0]}
    assert fx.block_until_ready(t) is t
    np.testing.assert_allclose(np.asarray(out), np.cos(np.arange(4.0)))


def test_block_until_ready_synchronises_each_device_once() -> None:
    events: list = []

    @contextlib.contextmanager
    def use_device(i: int) -> Any:
        events.append(("on", i))
        yield

    backend = B.Backend(name="fakesync", xp=np, array_types=(SyncArray,), to_host=np.asarray,
                        from_host=np.asarray, synchronize=lambda: events.append("sync"),
                        memory_stats=dict, device_count=2,
                        device_id=lambda x: getattr(x, "dev", 0), use_device=use_device)
    B.register_backend(backend)
    try:
        a0, b0 = np.ones(2).view(SyncArray), np.zeros(3).view(SyncArray)
        a1 = np.ones(1).view(SyncArray)
        a1.dev = 1
        t = {"a": [a0, b0], "b": (a1, np.ones(2), 2.0, None), "c": "text"}
        assert fx.block_until_ready(t) is t
        assert events == [("on", 0), "sync", ("on", 1), "sync"]
        events.clear()
        assert fx.block_until_ready(a1) is a1 and events == [("on", 1), "sync"]
        events.clear()
        fx.block_until_ready({"cpu": np.ones(2), "none": None})
        assert events == []
    finally:
        B._BACKENDS.pop("fakesync")
        B.BY_TYPE.pop(SyncArray)
        fx.ir.DEVICE_ARRAY_TYPES.discard(SyncArray)


def test_memory_stats_read_well_in_a_notebook():
    stats = fx.memory_stats("cpu")
    assert isinstance(stats, dict) and stats["peak_bytes"] > 0  # still the dict of bytes
    assert repr(stats).startswith("MemoryStats(peak_bytes=") and "iB" in repr(stats)
    html = stats._repr_html_()
    assert html.startswith("<table>") and "<td style='text-align:left'>peak_bytes</td>" in html


@pytest.mark.parametrize("n, text", [(0, "0 bytes"), (1023, "1023 bytes"), (1024, "1.0 KiB"),
                                     (3 * 2**20 // 2, "1.5 MiB"), (5 * 2**30, "5.0 GiB"),
                                     (None, "n/a")])
def test_format_bytes(n, text):
    from functx.backends import format_bytes

    assert format_bytes(n) == text


# -- CUDA's bfloat16 guard (functx/backends/_cuda.py), on NumPy arrays ------------------------

def _guarded(fn: Any, prim_name: str) -> Any:
    """``fn`` as the guard runs it for the registered primitive ``prim_name``, with NumPy's
    ndarray standing in for cupy.ndarray."""
    return bfloat16_guard(fn, fx.registry[prim_name], np.ndarray)


def test_bfloat16_guard_rounds_float32_results_the_shape_rule_gives_as_bfloat16() -> None:
    import ml_dtypes

    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = np.array([1.0, 2.5, -3.0], bf16)
    calls = []

    def promotes(a, b):  # what cupy.where does with bfloat16: a float32 result
        calls.append((a.dtype, b.dtype))
        return np.add(a.astype(np.float32), b.astype(np.float32))

    out = _guarded(promotes, "add")(x, x)
    assert out.dtype == bf16 and calls == [(bf16, bf16)]
    np.testing.assert_array_equal(out.astype(np.float32), [2.0, 5.0, -6.0])
    # a float32 result the shape rule asks for is left alone (convert_element_type)
    conv = _guarded(lambda a, *, new_dtype: a.astype(new_dtype), "convert_element_type")
    assert conv(x, new_dtype=np.dtype(np.float32)).dtype == np.float32
    # no bfloat16 argument: the implementation runs as it is (its float32 result kept)
    assert _guarded(promotes, "add")(np.ones(2, np.float16), np.ones(2, np.float16)).dtype \
        == np.float32


def test_bfloat16_guard_retries_in_float32_where_there_is_no_kernel() -> None:
    import ml_dtypes

    bf16 = np.dtype(ml_dtypes.bfloat16)
    x = np.array([0.5, 1.5], bf16)
    seen = []

    def no_bf16_kernel(a):
        seen.append(a.dtype)
        if a.dtype == bf16:
            raise TypeError("no loop matching the specified signature (bfloat16)")
        return np.tanh(a)

    out = _guarded(no_bf16_kernel, "tanh")(x)
    assert seen == [bf16, np.float32] and out.dtype == bf16
    np.testing.assert_array_equal(out, np.tanh(x.astype(np.float32)).astype(bf16))

    def always_fails(a):
        raise TypeError(f"broken for {a.dtype}")

    with pytest.raises(TypeError, match="broken for bfloat16"):  # the first error
        _guarded(always_fails, "tanh")(x)

    def other_error(a):
        seen.append(a.dtype)
        raise ValueError("a user's error")

    seen.clear()
    with pytest.raises(ValueError, match="a user's error"):  # not a missing kernel: no retry
        _guarded(other_error, "tanh")(x)
    assert seen == [bf16]

    def refuses(a):
        raise DTypeError("tanh refuses this on purpose")

    with pytest.raises(DTypeError, match="on purpose"):  # functx's own errors: no retry
        _guarded(refuses, "tanh")(x)


def test_small_products_run_on_one_blas_thread_and_the_pool_is_restored() -> None:
    from functx.backends import _blas

    before = _blas.blas_threads()
    if before is None:
        pytest.skip("NumPy's OpenBLAS is not visible here (another BLAS)")
    seen = []

    def product(x, y):
        seen.append(_blas.blas_threads())
        return x @ y

    x, y = np.ones((8, 4)), np.ones((4, 3))
    np.testing.assert_array_equal(_blas.run_small(8 * 4 * 3, product, x, y), np.full((8, 3), 4.0))
    _blas.run_small(_blas.SMALL_MACS, product, x, y)  # big enough: the pool as it was
    assert seen == [1 if before > 1 else before, before]
    assert _blas.blas_threads() == before
    # and the primitive gives the same product either way
    a, b = np.random.default_rng(0).standard_normal((2, 64, 40))
    np.testing.assert_allclose(np.asarray(fx.jit(lambda p, q: p @ q.T)(a, b)), a @ b.T,
                               rtol=1e-12)
