"""Backends and devices: CPU through NumPy, CUDA through CuPy.

A :class:`Backend` says which array module implements a device kind's arrays, how to move
arrays to and from the host, how to synchronise and how to read memory use. The backend of
an array is read from its type (``numpy.ndarray`` is CPU, ``cupy.ndarray`` is CUDA). The
CUDA backend exists only when ``import cupy`` succeeds *and* CuPy sees at least one GPU
(set ``FUNCTX_DISABLE_CUDA=1`` to leave it out); everything else works without it. Its
record is built in functx/backends/_cuda.py (the primitives' kernels: functx/primitives/cuda/).

A :class:`Device` is one device of a backend (``cpu:0``, ``cuda:0``, ``cuda:1``...):

* :func:`devices` lists them; :func:`device_put` moves arrays (pytrees of arrays) onto one;
  :func:`to_numpy` copies them back to the host;
* :func:`default_device` (a thread-local context manager) says where arrays created from
  nothing live (``functx.numpy.zeros``, ``ones``, ``full``, ``eye``, ``arange``...);
* :func:`from_dlpack` wraps a DLPack-capable array (PyTorch, JAX, CuPy, NumPy) without
  copying; CuPy arrays are themselves DLPack producers (``torch.from_dlpack(x)``,
  ``jax.dlpack.from_dlpack(x)``) and also offer ``__cuda_array_interface__``;
* :func:`memory_stats` / :func:`reset_peak_memory_stats` read a device's memory use.

Mixing devices in one operation is an error that names both devices: functx never copies
between devices silently. Python scalars have no device and join the other operands; so do
0-d NumPy arrays and NumPy scalars (functx.numpy turns Python scalars into those), as 0-d
CPU tensors do in PyTorch: they are placed on the device once per value and cached.

Arrays functx returns on the CPU are read-only; CuPy arrays have no read-only flag, so on
CUDA that guarantee is by convention only (functx never writes into an array it returned).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import types
from typing import Any, Callable, Iterator

import attrs
import numpy as np

from functx import ir, tree
from functx.errors import DeviceError, DTypeError, FunctxError


def _zero(x: Any) -> int:
    return 0


def _nothing() -> None:
    return None


@attrs.frozen(slots=True)
class Backend:
    """What functx needs to know about one device kind.

    Attributes:
        name: ``"cpu"`` or ``"cuda"``.
        xp: the array module (``numpy`` or ``cupy``).
        array_types: the concrete array types that live on this backend.
        to_host: returns a NumPy copy of an array of this backend.
        from_host: moves a NumPy array onto this backend (the current device).
        synchronize: waits for queued work to finish.
        memory_stats: returns a dict of memory figures (bytes in use, peak...).
        read_only_outputs: whether arrays produced here are marked read-only.
        device_count: how many devices of this kind there are.
        device_id: which of them an array of this backend lives on.
        put: ``put(x, device_id)``: a host array, or an array of this backend, on that
            device (``x`` itself when it is already there).
        scalar_from_host: a 0-d host array (or NumPy scalar) as a 0-d array of this backend
            on the current device (may be cached: callers never write into it).
        use_device: ``use_device(device_id)``: a context manager making that device current.
        reset_peak_memory: starts the peak-memory figure of :func:`memory_stats` afresh.
        supports_dtype: whether arrays of a dtype can live here.
        adapt_impl: ``adapt_impl(fn, prim)``: the implementation ``fn`` of primitive
            ``prim`` (with ``xp`` bound) as this backend runs it, or None to run it as it
            is. :meth:`functx.registry.Primitive.impl_for` applies it once per primitive
            (CUDA wraps every implementation in its bfloat16 guard, see
            functx/backends/_cuda.py).
    """

    name: str
    xp: Any
    array_types: tuple
    to_host: Callable[[Any], np.ndarray]
    from_host: Callable[[np.ndarray], Any]
    synchronize: Callable[[], None]
    memory_stats: Callable[[], dict]
    read_only_outputs: bool = False
    device_count: int = 1
    device_id: Callable[[Any], int] = _zero
    put: Callable[[Any, int], Any] | None = None
    scalar_from_host: Callable[[Any], Any] | None = None
    use_device: Callable[[int], Any] | None = None
    reset_peak_memory: Callable[[], None] = _nothing
    supports_dtype: Callable[[np.dtype], bool] = lambda dtype: True
    adapt_impl: Callable[[Callable, Any], Callable] | None = None

    def __repr__(self) -> str:
        return f"Backend({self.name})"


def _cpu_memory_stats() -> dict:
    import resource
    return {"peak_bytes": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024}


_cpu_put = lambda x, device_id: _read_only_copy(np.asarray(x))  # noqa: E731


def _read_only_copy(x: np.ndarray) -> np.ndarray:
    """``x`` itself if read-only, else a read-only copy (never the caller's writable array)."""
    if x.flags.writeable:
        x = x.copy()
        x.flags.writeable = False
    return x


def _cpu_device_count() -> int:
    """``FUNCTX_CPU_DEVICES`` (default 1): how many CPU "devices" functx shows. They all
    compute with NumPy in this process; several of them let ``pmap`` and its collectives
    run their multi-device code paths on a machine without GPUs (tests, CI), as JAX's
    ``--xla_force_host_platform_device_count`` does."""
    try:
        return max(1, int(os.environ.get("FUNCTX_CPU_DEVICES", "1") or 1))
    except ValueError:
        return 1


CPU = Backend(
    name="cpu",
    xp=np,
    array_types=(np.ndarray, np.generic),
    to_host=np.asarray,
    from_host=np.asarray,
    synchronize=lambda: None,
    memory_stats=_cpu_memory_stats,
    read_only_outputs=True,
    put=_cpu_put,
    scalar_from_host=np.asarray,
    use_device=lambda device_id: contextlib.nullcontext(),
    device_count=_cpu_device_count(),
)

_BACKENDS: dict[str, Backend] = {"cpu": CPU}
BY_TYPE: dict[type, Backend] = {t: CPU for t in (np.ndarray,)}
# Python scalars carry no device: they join whatever device the other operands are on.
_NO_DEVICE = (bool, int, float, complex)
# bind's marker for "the arguments span backends": see resolve_mixed.
MIXED = Backend(name="mixed", xp=None, array_types=(), to_host=np.asarray,
                from_host=np.asarray, synchronize=lambda: None, memory_stats=dict)


def register_backend(backend: Backend) -> None:
    """Add a backend (the CUDA backend registers itself this way when CuPy sees a GPU)."""
    _BACKENDS[backend.name] = backend
    for t in backend.array_types:
        BY_TYPE[t] = backend
        if backend is not CPU:
            ir.DEVICE_ARRAY_TYPES.add(t)  # abstract values of these arrays are memoised


def backends() -> dict[str, Backend]:
    """The available backends by name; ``"cpu"`` is always there."""
    return dict(_BACKENDS)


def get_backend(name: str) -> Backend:
    """The backend called ``name``.

    Raises:
        DeviceError: no such backend is available on this machine.
    """
    try:
        return _BACKENDS[name]
    except KeyError:
        raise DeviceError(f"No backend called {name!r} is available here; the available "
                          f"backends are {sorted(_BACKENDS)}." + _cuda_hint(name)) from None


def _cuda_hint(name: str) -> str:
    if name != "cuda":
        return ""
    return (" CUDA needs CuPy (pip install cupy-cuda12x or cupy-cuda13x) and a visible GPU; "
            f"here: {_CUDA_STATUS}.")


def backend_of(x: Any) -> Backend | None:
    """The backend an array lives on, or None for Python scalars."""
    b = BY_TYPE.get(type(x))
    if b is not None:
        return b
    if isinstance(x, _NO_DEVICE):
        return None
    if isinstance(x, np.generic):
        return CPU
    for backend in _BACKENDS.values():
        if backend is not CPU and isinstance(x, backend.array_types):
            return backend
    if isinstance(x, np.ndarray):
        return CPU
    return None


# ----------------------------------------------------------------------------------------
# Traced values: a hook that functx.tracing registers
#
# backends sits below tracing, so it cannot import the tracer class. functx.tracing
# registers it here when it is imported; device_of then looks through tracers to the
# values they carry, and device_put / to_numpy refuse traced values. Until then (backends
# imported on its own) there are no tracers, and nothing is a traced value.

_tracer_type: type | None = None


def _no_value(x: Any) -> Any:
    return None


_tracer_value: Callable[[Any], Any] = _no_value


def register_tracer_type(tracer_type: type, value_of: Callable[[Any], Any]) -> None:
    """Tell the device functions which type is a traced value (called by functx.tracing).

    Args:
        tracer_type: the exact type of traced values (``functx.Tracer``; subclasses are not
            looked for).
        value_of: returns the value a tracer carries: an array, another tracer (nested
            transforms), or None where the value is abstract.

    Example:
        >>> register_tracer_type(Tracer, lambda t: t._value)   # in functx/tracing.py
    """
    global _tracer_type, _tracer_value
    _tracer_type = tracer_type
    _tracer_value = value_of


# ----------------------------------------------------------------------------------------
# Devices


@attrs.frozen(slots=True, repr=False, cache_hash=True)  # (hashed in every jit cache key)
class Device:
    """One device: a backend name and an index (``cpu:0``, ``cuda:0``, ``cuda:1``...).

    Example:
        >>> fx.devices()
        [cpu:0, cuda:0]
        >>> fx.Device("cuda", 0).backend
        Backend(cuda)
    """

    platform: str
    id: int = 0

    @property
    def backend(self) -> Backend:
        """The backend of this device (raises DeviceError if it is not available)."""
        return get_backend(self.platform)

    def __repr__(self) -> str:
        return f"{self.platform}:{self.id}"

    __str__ = __repr__


_DEVICES: dict = {}  # (platform, id) -> its Device (see device_of)
_ALIASES = {"gpu": "cuda"}

_LOCAL_INDEX: dict[str, int] = {}  # platform -> what its name alone means (default 0)


def set_local_device(device: "Device") -> None:
    """Make ``device`` what its platform's name alone (``"cuda"``, a :class:`Backend`)
    means in this process (``functx.distributed.initialize`` gives each process its GPU,
    as ``torch.cuda.set_device`` does). Explicit indices (``"cuda:1"``) are unaffected."""
    _LOCAL_INDEX[device.platform] = device.id


def as_device(device: Any) -> Device:
    """A :class:`Device` from a Device, a backend, or a string (``"cpu"``, ``"cuda"``,
    ``"cuda:1"``, ``"gpu"``; no index: device 0, or :func:`set_local_device`'s).

    Raises:
        DeviceError: no such device is available here.
        TypeError: ``device`` is none of those.
    """
    if isinstance(device, Device):
        dev = device
    elif isinstance(device, Backend):
        dev = Device(device.name, _LOCAL_INDEX.get(device.name, 0))
    elif isinstance(device, str):
        name, _, index = device.strip().lower().partition(":")
        name = _ALIASES.get(name, name)
        try:
            dev = Device(name, int(index) if index else _LOCAL_INDEX.get(name, 0))
        except ValueError:
            raise DeviceError(f"Cannot read the device {device!r}: write a backend name with "
                              "an optional index, such as 'cpu', 'cuda' or 'cuda:1'.") from None
    else:
        raise TypeError(f"Expected a device (functx.Device, or a string such as 'cuda' or "
                        f"'cuda:0'), got {type(device).__name__} {device!r:.60}.")
    backend = get_backend(dev.platform)
    if not 0 <= dev.id < backend.device_count:
        raise DeviceError(f"There is no device {dev}: the {dev.platform} backend has "
                          f"{backend.device_count} device(s), {dev.platform}:0 to "
                          f"{dev.platform}:{backend.device_count - 1}.")
    return dev


def devices(platform: str | None = None) -> list[Device]:
    """Every device functx can use (CPU first), or those of one backend.

    Example:
        >>> fx.devices()          # on a machine with one GPU and CuPy
        [cpu:0, cuda:0]
        >>> fx.devices("cuda")    # [] without CuPy or a GPU
        [cuda:0]
    """
    names = [platform] if platform is not None else list(_BACKENDS)
    out = []
    for name in names:
        b = _BACKENDS.get(_ALIASES.get(name, name))
        if b is not None:
            out.extend(Device(b.name, i) for i in range(b.device_count))
    return out


def device_of(x: Any) -> Device | None:
    """The device an array lives on (tracers are looked through to the value they carry);
    None for Python scalars and values whose device is not known (abstract tracers)."""
    while type(x) is _tracer_type:
        x = _tracer_value(x)
    b = backend_of(x)
    if b is None:
        return None
    key = (b.name, b.device_id(x) if b is not CPU else 0)  # one object per device: jit's
    return _DEVICES.get(key) or _DEVICES.setdefault(key, Device(*key))  # keys compare by id


_local = threading.local()


def get_default_device() -> Device:
    """The device where arrays created from nothing live in this thread (``cpu:0`` unless
    inside :func:`default_device`)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else _CPU_DEVICE


def default_backend() -> Backend:
    """The backend of :func:`get_default_device` (the hot path of creation functions)."""
    stack = getattr(_local, "stack", None)
    return stack[-1].backend if stack else CPU


_CPU_DEVICE = Device("cpu", 0)


def inputs_device_scope(values: Any) -> Any:
    """A context in which arrays created from nothing live on the device of ``values``.

    Transforms that trace abstractly (``vmap``, ``checkpoint``, ``linearize``) enter it, so
    that constants the traced function makes (``zeros_like`` of a tracer, ...) land where
    its inputs are. It is the first non-CPU device among ``values``; a no-op where all are
    on the CPU or have no device.
    """
    for x in values:
        dev = device_of(x)
        if dev is not None and dev.platform != "cpu":
            return default_device(dev)
    return contextlib.nullcontext()


@contextlib.contextmanager
def default_device(device: Any) -> Iterator[Device]:
    """Within the block, arrays created from nothing live on ``device`` (this thread only).

    ``functx.numpy.zeros``, ``ones``, ``empty``, ``full``, ``eye``, ``identity``, ``tri``,
    ``arange`` (and ``*_like`` of values without a device) create their arrays there. On
    CUDA the device is also made CuPy's current device for the block. Arrays passed in are
    never moved: use :func:`device_put` for those.

    Args:
        device: a :class:`Device` or a string (``"cpu"``, ``"cuda"``, ``"cuda:1"``).

    Raises:
        DeviceError: the device is not available here.

    Example:
        >>> with fx.default_device("cuda"):
        ...     w = fnp.zeros((3, 3))      # a cupy.ndarray on cuda:0
    """
    dev = as_device(device)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(dev)
    try:
        with dev.backend.use_device(dev.id):
            yield dev
    finally:
        stack.pop()


# ----------------------------------------------------------------------------------------
# Moving arrays


def _check_not_traced(x: Any, fname: str) -> None:
    if type(x) is _tracer_type:
        raise FunctxError(
            f"{fname} got a traced {x.aval} value. Moving values between devices inside a "
            "transformed function is not supported: move the arrays before calling the "
            "transformed function (its outputs stay on the device of its inputs).")


def _put_leaf(x: Any, dev: Device) -> Any:
    if type(x) is _tracer_type:
        if device_of(x) == dev:
            return x
        _check_not_traced(x, "device_put")
    target = dev.backend
    src = backend_of(x)
    if src is None:
        if not hasattr(x, "__array__") and not isinstance(x, (list, tuple) + _NO_DEVICE):
            raise TypeError(f"device_put: a leaf is a {type(x).__name__} ({x!r:.60}), not an "
                            "array or a Python scalar.")
        x = np.asarray(x)
        src = CPU
    if src is not CPU and src is not target:
        x = src.to_host(x)
    dtype = np.dtype(x.dtype)
    if not target.supports_dtype(dtype):
        raise DTypeError(
            f"device_put: arrays of dtype {dtype} cannot live on {dev}: the {target.name} "
            f"backend ({_module_version(target.xp)}) does not support that dtype. Convert "
            "them first (e.g. x.astype(np.float32)), or keep them on the CPU.")
    return target.put(x, dev.id)


def _module_version(xp: Any) -> str:
    return f"{getattr(xp, '__name__', xp)} {getattr(xp, '__version__', '')}".strip()


def device_put(x: Any, device: Any = None) -> Any:
    """``x`` (an array, a Python scalar, or a pytree of them) on ``device``.

    Arrays already on that device are returned as they are (no copy); others are copied
    (through the host between different backends). Python scalars and lists become arrays.
    On the CPU the results are read-only (copies of writable inputs).

    Args:
        x: an array or pytree of arrays.
        device: a :class:`Device` or a string (``"cpu"``, ``"cuda"``, ``"cuda:1"``);
            default: :func:`get_default_device`.

    Returns:
        The same structure with every leaf on ``device``.

    Raises:
        DeviceError: the device is not available here.
        DTypeError: the device's backend does not support a leaf's dtype (CuPy without
            ml_dtypes has no bfloat16, for example).

    Example:
        >>> x = fx.device_put(np.ones(3), "cuda")   # a cupy.ndarray
        >>> params = fx.device_put({"w": w, "b": b}, fx.devices("cuda")[0])
    """
    dev = get_default_device() if device is None else as_device(device)
    return tree.map(lambda leaf: _put_leaf(leaf, dev), x)


def to_numpy(x: Any) -> Any:
    """Host (NumPy) copies of the arrays in ``x`` (a pytree); CPU arrays are returned as
    they are. Python scalars are left alone.

    Raises:
        FunctxError: a leaf is a traced value (inside a transform).

    Example:
        >>> grads_host = fx.to_numpy(fx.grad(loss)(params_gpu, X_gpu, Y_gpu))
    """
    def leaf(v: Any) -> Any:
        _check_not_traced(v, "to_numpy")
        b = backend_of(v)
        if b is None:
            return v
        return np.asarray(v) if b is CPU else b.to_host(v)

    return tree.map(leaf, x)


def block_until_ready(x: Any) -> Any:
    """Waits until the arrays in ``x`` (a pytree) are computed, and returns ``x``.

    GPU work is queued and runs asynchronously: time a step with it, or the clock stops
    before the GPU is done. Each device holding a leaf is synchronised once (its backend's
    ``synchronize``, on that device). CPU arrays are always ready: a no-op there. Python
    scalars, other leaves and traced values whose value is abstract are left alone.

    Args:
        x: an array or a pytree of arrays.

    Returns:
        ``x`` itself.

    Example:
        >>> t0 = time.perf_counter()
        >>> loss = fx.block_until_ready(step(params, batch))
        >>> print(time.perf_counter() - t0)
    """
    done = set()
    for leaf in tree.leaves(x):
        dev = device_of(leaf)
        if dev is None or dev.platform == "cpu" or dev in done:
            continue
        done.add(dev)
        backend = dev.backend
        with backend.use_device(dev.id):
            backend.synchronize()
    return x


_DLPACK_CPU, _DLPACK_CUDA, _DLPACK_CUDA_HOST, _DLPACK_CUDA_MANAGED = 1, 2, 3, 13


def from_dlpack(x: Any) -> Any:
    """An array sharing memory with ``x``, any object with ``__dlpack__`` (a PyTorch tensor,
    a JAX array, a CuPy or NumPy array): no copy is made.

    Host memory gives a read-only NumPy array (functx's convention on the CPU), GPU memory a
    CuPy array on the same GPU. The other direction needs no function: CuPy arrays are
    DLPack producers (``torch.from_dlpack(x)``, ``jax.dlpack.from_dlpack(x)``); NumPy arrays
    too, except that DLPack consumers may refuse read-only arrays (copy with ``np.array(x)``
    first).

    Raises:
        DeviceError: ``x`` lives on a GPU but the CUDA backend is not available, or on a
            device kind functx does not know.
        TypeError: ``x`` has no ``__dlpack__`` method.

    Example:
        >>> x = fx.from_dlpack(torch.ones(3, device="cuda"))   # cupy.ndarray, zero-copy
    """
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack needs an object with __dlpack__ (a PyTorch tensor, JAX "
                        f"array, CuPy or NumPy array), got {type(x).__name__}.")
    kind, _ = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else (_DLPACK_CPU, 0)
    kind = int(kind)
    if kind == _DLPACK_CPU:
        out = np.from_dlpack(x)
        if out.flags.writeable:
            out = out.view()
            out.flags.writeable = False
        return out
    if kind in (_DLPACK_CUDA, _DLPACK_CUDA_MANAGED, _DLPACK_CUDA_HOST):
        cuda = get_backend("cuda")
        return cuda.xp.from_dlpack(x)
    raise DeviceError(f"from_dlpack: {type(x).__name__} lives on DLPack device type {kind}, "
                      "which functx has no backend for (it knows CPU (1) and CUDA (2)).")


# ----------------------------------------------------------------------------------------
# Operations whose arguments span devices


def _describe(a: Any, b: Backend) -> str:
    try:
        aval = str(ir.abstractify(a))
    except Exception:  # pragma: no cover - only for the message
        aval = type(a).__name__
    return f"{aval} on {b.name}:{b.device_id(a) if b is not CPU else 0}"


def _two_devices(op_name: str, a: Any, ba: Backend, c: Any, bc: Backend) -> DeviceError:
    return DeviceError(
        f"{op_name} got arrays on two devices: {_describe(a, ba)} and {_describe(c, bc)}. "
        "functx never copies between devices silently. Move one operand first with "
        "functx.device_put(x, device), or create constants on the right device with "
        "functx.default_device(...).")


def backend_of_args(args: tuple, op_name: str) -> Backend:
    """The single backend of an operation's arguments (CPU when none carries a device).

    Raises:
        DeviceError: the arguments live on different devices.
    """
    found = None
    first = None
    for a in args:
        b = BY_TYPE.get(type(a))
        if b is None:
            b = backend_of(a)
            if b is None:
                continue
        if found is None:
            found, first = b, a
        elif b is not found:
            raise _two_devices(op_name, first, found, a, b)
    return found or CPU


def resolve_mixed(args: tuple, op_name: str) -> tuple[Backend, tuple]:
    """The backend and arguments of an operation whose arguments span backends.

    0-d host arrays and NumPy scalars join the device of the other operands (as Python
    scalars do; cached per value by the backend). Anything else is an error.

    Raises:
        DeviceError: the operation mixes devices (naming both), e.g. a CPU array of
            shape (3,) with a CUDA array.
    """
    target = first = None
    host = None
    for a in args:
        b = BY_TYPE.get(type(a)) or backend_of(a)
        if b is None:
            continue
        if b is CPU:
            if host is None and np.ndim(a) != 0:
                host = a
            continue
        if target is None:
            target, first = b, a
        elif b is not target:
            raise _two_devices(op_name, first, target, a, b)
    if target is None:
        return CPU, args
    if host is not None:
        raise _two_devices(op_name, host, CPU, first, target)
    out = [target.scalar_from_host(a) if (BY_TYPE.get(type(a)) or backend_of(a)) is CPU
           else a for a in args]
    return target, tuple(out)


def finalize_cpu(out: Any, args: tuple) -> np.ndarray:
    """Turn an impl's result into a read-only NumPy array that shares no memory with a
    writeable argument.

    A fresh result (it owns its memory) is only marked read-only. An input returned as it
    is, or a view into a writeable input (``reshape``, ``transpose``, ``broadcast_to``...
    of the caller's array), is copied: the caller may write to that array later, and a
    result must not change when it does. Views of read-only arrays (functx's own results)
    stay views: nothing can write to them. (A read-only view the caller made of their own
    writeable array counts as read-only: functx looks at the flag of the argument only.)
    """
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    if out.base is None and out.flags.writeable:  # the common case: a fresh result
        for a in args:
            if out is a:  # the caller's own array, returned as it is
                out = out.copy()
                break
        out.flags.writeable = False
        return out
    for a in args:  # a view (or a read-only array): of a writeable argument?
        if type(a) is np.ndarray and a.flags.writeable and (
                out is a or np.may_share_memory(out, a)):
            out = out.copy()
            break
    if out.flags.writeable:  # a view of a temporary of the impl (no argument's memory)
        out.flags.writeable = False
    return out


def owned_read_only(x: Any) -> Any:
    """``x`` itself unless it is a writeable NumPy array (the caller's, which they may write
    to later): then a read-only copy. Transforms use it for the values a closure keeps for
    later (``vjp``'s residuals, ``linearize``'s constants, ``jit``'s captured constants), so
    that those are snapshots. functx's own results are read-only and are never copied; CuPy
    arrays have no read-only flag and are kept as they are (by convention the caller does
    not write to an array that a functx closure holds).
    """
    if type(x) is np.ndarray and x.flags.writeable:
        x = x.copy()
        x.flags.writeable = False
    return x


# ----------------------------------------------------------------------------------------
# Memory


def format_bytes(n: int | None) -> str:
    """``n`` bytes for a person: ``512 bytes``, ``1.5 KiB``, ``3.2 MiB``, ``1.1 GiB``."""
    if n is None:
        return "n/a"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if abs(n) >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


class MemoryStats(dict):
    """The figures of :func:`memory_stats`: a plain dict of byte counts (as returned by
    earlier versions), which shows itself with readable sizes in a REPL and as a small
    table in a notebook."""

    def __repr__(self) -> str:
        return "MemoryStats(" + ", ".join(f"{k}={format_bytes(v)}" for k, v in self.items()) + ")"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td style='text-align:left'>{k}</td>"
                       f"<td style='text-align:right'>{format_bytes(v)}</td></tr>"
                       for k, v in self.items())
        return f"<table><tr><th>memory</th><th>size</th></tr>{rows}</table>"


def memory_stats(device: Any = None) -> MemoryStats:
    """Memory figures of a device, in bytes (a dict; it displays with readable sizes).

    On CUDA: ``bytes_in_use`` (held by live arrays in CuPy's default memory pool),
    ``bytes_reserved`` (taken from the GPU by the pool), ``peak_bytes_reserved`` (the
    pool's high-water mark: it only grows until memory is released), ``peak_bytes_in_use``
    (the high-water mark of ``bytes_in_use`` since :func:`reset_peak_memory_stats`, or None
    if it was never called), ``device_free_bytes``, ``device_total_bytes`` and
    ``cuda_graph_bytes`` (the working memory that jitted steps replayed as CUDA graphs hold in
    their own pools, counted in the figures above too). On the CPU:
    ``peak_bytes`` (the process's peak resident size).

    Args:
        device: a :class:`Device` or string; default: :func:`get_default_device`.
    """
    dev = get_default_device() if device is None else as_device(device)
    b = dev.backend
    with b.use_device(dev.id):
        return MemoryStats(b.memory_stats())


def reset_peak_memory_stats(device: Any = None) -> None:
    """Start ``peak_bytes_in_use`` of :func:`memory_stats` afresh (from the bytes in use
    now). On CUDA the first call installs a small allocation hook that keeps the figure
    (about a microsecond per allocation); the CPU has nothing to reset."""
    dev = get_default_device() if device is None else as_device(device)
    b = dev.backend
    with b.use_device(dev.id):
        b.reset_peak_memory()


# ----------------------------------------------------------------------------------------
# The CUDA backend: registered when CuPy imports and sees a GPU

_CUDA_STATUS = "not checked"


def _register_cuda() -> None:
    global _CUDA_STATUS
    if os.environ.get("FUNCTX_DISABLE_CUDA", "").strip() not in ("", "0"):
        _CUDA_STATUS = "disabled by FUNCTX_DISABLE_CUDA"
        return
    try:
        import cupy

        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:  # ImportError, CUDARuntimeError (no driver, no GPU), ...
        _CUDA_STATUS = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return
    if count <= 0:
        _CUDA_STATUS = "CuPy sees no GPU"
        return
    # Imported here: only where CuPy sees a GPU, and after Backend above exists (the module
    # imports it from this package).
    from functx.backends import _cuda

    register_backend(_cuda.make_backend(cupy, count))
    _CUDA_STATUS = f"CuPy {cupy.__version__} sees {count} GPU(s)"


def cuda_status() -> str:
    """Why the CUDA backend is (or is not) available, in words."""
    return _CUDA_STATUS


_register_cuda()


# ----------------------------------------------------------------------------------------
# functx.backends is also a function
#
# The public API has a function ``functx.backends()`` (the available backends by name),
# and this module is ``functx.backends`` too. With a plain module one of them shadows the
# other as the attribute ``backends`` of the package: the function made
# ``import functx.backends as fb`` give the function, not this module. So the module itself
# is callable: ``functx.backends`` is this module, and ``functx.backends()`` calls
# :func:`backends`.


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`backends`."""

    def __call__(self) -> dict[str, Backend]:
        """The available backends by name; ``"cpu"`` is always there."""
        return backends()


sys.modules[__name__].__class__ = _CallableModule
