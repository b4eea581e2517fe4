"""Backend records: one per device kind (CPU through NumPy, CUDA through CuPy).

A :class:`Backend` says which array module implements a device's arrays, how to move
arrays to and from the host, how to synchronise and how to read memory use. The backend of
an array is read from its type; mixing devices in one operation is an error.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs
import numpy as np

from functx.errors import DeviceError


@attrs.frozen(slots=True)
class Backend:
    """What functx needs to know about one device kind.

    Attributes:
        name: ``"cpu"`` or ``"cuda"``.
        xp: the array module (``numpy`` or ``cupy``).
        array_types: the concrete array types that live on this backend.
        to_host: returns a NumPy copy of an array of this backend.
        from_host: moves a NumPy array onto this backend.
        synchronize: waits for queued work to finish.
        memory_stats: returns a dict of memory figures (bytes in use, peak).
        read_only_outputs: whether arrays produced here are marked read-only.
    """

    name: str
    xp: Any
    array_types: tuple
    to_host: Callable[[Any], np.ndarray]
    from_host: Callable[[np.ndarray], Any]
    synchronize: Callable[[], None]
    memory_stats: Callable[[], dict]
    read_only_outputs: bool = False

    def __repr__(self) -> str:
        return f"Backend({self.name})"


def _cpu_memory_stats() -> dict:
    import resource

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak_bytes": int(peak_kib) * 1024}


CPU = Backend(
    name="cpu",
    xp=np,
    array_types=(np.ndarray, np.generic),
    to_host=np.asarray,
    from_host=np.asarray,
    synchronize=lambda: None,
    memory_stats=_cpu_memory_stats,
    read_only_outputs=True,
)

_BACKENDS: dict[str, Backend] = {"cpu": CPU}
_BY_TYPE: dict[type, Backend] = {t: CPU for t in (np.ndarray,)}
# Python scalars carry no device: they join whatever device the other operands are on.
_NO_DEVICE = (bool, int, float, complex)


def register_backend(backend: Backend) -> None:
    """Add a backend (the CUDA backend registers itself this way when CuPy sees a GPU)."""
    _BACKENDS[backend.name] = backend
    for t in backend.array_types:
        _BY_TYPE[t] = backend


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
                          f"backends are {sorted(_BACKENDS)}.") from None


def backend_of(x: Any) -> Backend | None:
    """The backend an array lives on, or None for Python scalars."""
    b = _BY_TYPE.get(type(x))
    if b is not None:
        return b
    if isinstance(x, _NO_DEVICE):
        return None
    if isinstance(x, np.generic):
        return CPU
    for backend in _BACKENDS.values():
        if isinstance(x, backend.array_types):
            return backend
    return None


def backend_of_args(args: tuple, op_name: str) -> Backend:
    """The single backend of an operation's arguments (CPU when none carries a device).

    Raises:
        DeviceError: the arguments live on different devices.
    """
    found = None
    for a in args:
        b = _BY_TYPE.get(type(a))
        if b is None:
            b = backend_of(a)
            if b is None:
                continue
        if found is None:
            found = b
        elif b is not found:
            raise DeviceError(
                f"{op_name} got arrays on two devices, {found.name} and {b.name}; functx never "
                "copies between devices silently. Move one operand with "
                "functx.device_put(x, device) first.")
    return found or CPU


def finalize_cpu(out: Any, args: tuple) -> np.ndarray:
    """Turn an impl's result into a read-only NumPy array that aliases no input."""
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    if out.flags.writeable:
        for a in args:
            if out is a:
                out = out.view()
                break
        out.flags.writeable = False
    return out
