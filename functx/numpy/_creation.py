"""Array creation: zeros, ones, full, eye, arange, linspace... and the constants pi, e, inf, nan.

Creation functions with static arguments make their arrays on the default device
(``functx.default_device``, the CPU unless set): read-only NumPy arrays made by
``functx.numpy._promotion.host_array`` on the CPU, CuPy arrays on CUDA. ``*_like`` functions
make them on the device of their argument (the default device for Python scalars and
abstract tracers). ``full``/``full_like`` with a traced fill value broadcast the
tracer, and ``linspace`` with traced ``start``/``stop`` is built from primitives, so both
are differentiable. The default dtype is float64, as in NumPy.

Differences from NumPy:
    * ``empty``/``empty_like`` return zeros (functx arrays are never uninitialised).
    * ``arange`` needs concrete numbers (its length depends on them); a tracer whose value
      is unknown raises ConcretizationError.
    * ``linspace`` always uses ``start + i * step`` (NumPy switches to ``i / div * delta`` when
      ``step`` underflows to 0); the last value is exactly ``stop`` when ``endpoint``.
    * ``order=`` is accepted and ignored (C order). ``device=`` (a ``functx.Device`` or a
      string such as ``"cuda"``) overrides the default device, and so does ``like=`` (an
      array: the result goes to its device, as NumPy's ``like=`` hands creation to CuPy).
    * ``linspace`` is computed on the device of ``start``/``stop`` (the CPU for Python
      numbers), not on the default device.
"""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any

import numpy as np

from functx import backends as _backends
from functx import tracing as _tracing
from functx.numpy import _shape as _fshape
from functx.numpy._promotion import host_array, asarray, astype, is_tracer, result_type
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _pshape
from functx.primitives.misc import stop_gradient

__all__ = [
    "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
    "eye", "identity", "arange", "linspace", "tri", "pi", "e", "inf", "nan", "euler_gamma",
]

pi, e, inf, nan, euler_gamma = np.pi, np.e, np.inf, np.nan, np.euler_gamma


def _shape_tuple(shape: Any) -> tuple[builtins.int, ...]:
    if isinstance(shape, (tuple, list)):
        return tuple(operator.index(d) for d in shape)
    return (operator.index(shape),)


def _device(device: Any, like: Any) -> Any:
    """``device``, else the device of ``like`` (an array or concrete tracer), else None."""
    if device is None and like is not None:
        return _backends.device_of(like)
    return device


def _target(device: Any) -> _backends.Backend:
    """The backend new arrays go to: ``device``'s, else the default device's."""
    if device is None:
        return _backends.default_backend()
    return _backends.as_device(device).backend


def _new(device: Any, make: Any) -> Any:
    """``make(xp)`` with the array module of the target device: a read-only NumPy array on
    the CPU, else an array of that backend (made on its current device, which
    ``functx.default_device`` sets)."""
    b = _target(device)
    if b is _backends.CPU:
        return host_array(make(np))
    if isinstance(device, (str, _backends.Device)):
        with b.use_device(_backends.as_device(device).id):
            return make(b.xp)
    return make(b.xp)


def _placed(device: Any, host: np.ndarray) -> Any:
    """A host array made with NumPy (for NumPy's exact dtype rules), on the target device."""
    b = _target(device)
    if b is _backends.CPU:
        return host_array(host)
    dev = _backends.as_device(device) if device is not None else _backends.get_default_device()
    return b.put(host, dev.id)


# dtypes a device's own array module makes directly (others: made by NumPy, then moved)
_DEVICE_MADE = frozenset(np.dtype(t) for t in (np.bool_, np.int32, np.int64, np.float32,
                                               np.float64, np.complex64, np.complex128))


def _made(device: Any, dtype: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``numpy.<name>(*args, dtype=dtype, **kwargs)`` on the target device: on a GPU made
    there by the backend's array module (an n x n identity is one kernel, not an n x n host
    array and a copy), elsewhere as :func:`_placed` does."""
    b = _target(device)
    if b is not _backends.CPU and b.use_device is not None and np.dtype(dtype) in _DEVICE_MADE:
        dev = _backends.as_device(device) if device is not None else \
            _backends.get_default_device()
        with b.use_device(dev.id):
            return getattr(b.xp, name)(*args, dtype=np.dtype(dtype), **kwargs)
    return _placed(device, getattr(np, name)(*args, dtype=dtype, **kwargs))


def _like_device(a: Any, device: Any) -> Any:
    """The device ``*_like`` functions create on: ``device``, else ``a``'s, else None (the
    default device)."""
    if device is not None:
        return device
    return _backends.device_of(a)


def _traced_fill(shape: tuple, fill_value: Any, dtype: Any, device: Any) -> Any:
    """Inside an abstract trace (``jit``, ``make_trace``, ``eval_shape``, ``vmap``,
    ``checkpoint``): ``full(shape, fill_value, dtype)`` recorded as a broadcast of a 0-d
    fill value, an equation of the trace rather than a constant of the trace's full size
    (which tracing would allocate only to read its shape, and jit would keep). None
    elsewhere (eager, or under a concrete transform innermost: the array is made as
    before), and for 0-d shapes (as cheap as the equation).
    """
    builder = _tracing.innermost_abstract_builder()
    if builder is None or not shape:
        return None
    scalar = _new(device, lambda xp: xp.full((), fill_value, dtype=dtype))
    return builder.process(_pshape.broadcast_in_dim_p, (scalar,),
                           {"shape": shape, "broadcast_dimensions": ()})


def zeros(shape: Any, dtype: Any = float, order: str = "C", *, like: Any = None,
          device: Any = None) -> Any:
    """An array of zeros (default dtype float64) on the default device (read-only on the
    CPU)."""
    shape = _shape_tuple(shape)
    device = _device(device, like)
    traced = _traced_fill(shape, 0, float if dtype is None else dtype, device)
    if traced is not None:
        return traced
    return _new(device, lambda xp: xp.zeros(shape, dtype=dtype))


def ones(shape: Any, dtype: Any = None, order: str = "C", *, like: Any = None,
         device: Any = None) -> Any:
    """An array of ones (default dtype float64) on the default device (read-only on the
    CPU)."""
    shape = _shape_tuple(shape)
    device = _device(device, like)
    traced = _traced_fill(shape, 1, float if dtype is None else dtype, device)
    if traced is not None:
        return traced
    return _new(device, lambda xp: xp.ones(shape, dtype=dtype))


def empty(shape: Any, dtype: Any = float, order: str = "C", *, like: Any = None,
          device: Any = None) -> np.ndarray:
    """Same as :func:`zeros` (functx arrays are never uninitialised)."""
    return zeros(shape, dtype, device=_device(device, like))


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", *,
         like: Any = None, device: Any = None) -> Any:
    """An array of ``shape`` filled with ``fill_value`` (which broadcasts to ``shape``).

    The dtype defaults to the fill value's (a Python float gives float64). A traced fill
    value is broadcast with primitives (so gradients flow back to it); otherwise the
    result is a new array on the default device (read-only on the CPU).
    """
    shape = _shape_tuple(shape)
    device = _device(device, like)
    if is_tracer(fill_value):
        value = fill_value if dtype is None else astype(fill_value, dtype)
        return _fshape.broadcast_to(value, shape)
    if isinstance(fill_value, (list, tuple)) and builtins.any(map(is_tracer, fill_value)):
        return full(shape, asarray(fill_value, dtype))
    if _backends.backend_of(fill_value) not in (None, _backends.CPU):  # a device array
        return _fshape.broadcast_to(fill_value if dtype is None else astype(fill_value, dtype),
                                    shape)
    if isinstance(fill_value, (builtins.bool, builtins.int, builtins.float, builtins.complex,
                               np.generic)) or (type(fill_value) is np.ndarray
                                                and fill_value.ndim == 0):
        dt = np.full((), fill_value, dtype=dtype).dtype  # NumPy's dtype rules
        traced = _traced_fill(shape, fill_value, dt, device)
        if traced is not None:
            return traced
    if isinstance(fill_value, (builtins.bool, builtins.int, builtins.float, builtins.complex,
                               np.generic)) and _target(device) is not _backends.CPU:
        dt = np.full((), fill_value, dtype=dtype).dtype  # NumPy's dtype rules
        return _new(device, lambda xp: xp.full(shape, fill_value, dtype=dt))
    return _placed(device, np.full(shape, fill_value, dtype=dtype))


def _like_shape(a: Any, shape: Any) -> tuple[builtins.int, ...]:
    if shape is not None:
        return _shape_tuple(shape)
    return tuple(a.shape) if hasattr(a, "shape") else np.shape(a)


def _like_dtype(a: Any, dtype: Any) -> np.dtype:
    if dtype is not None:
        return np.dtype(dtype)
    dt = getattr(a, "dtype", None)
    return dt if isinstance(dt, np.dtype) else np.asarray(a).dtype


def zeros_like(a: Any, dtype: Any = None, order: str = "K", subok: builtins.bool = True,
               shape: Any = None, *, device: Any = None) -> np.ndarray:
    """Zeros with the shape and dtype of ``a``, on ``a``'s device (a tracer's shape is
    known, so this is a constant even inside transforms)."""
    return zeros(_like_shape(a, shape), _like_dtype(a, dtype), device=_like_device(a, device))


def ones_like(a: Any, dtype: Any = None, order: str = "K", subok: builtins.bool = True,
              shape: Any = None, *, device: Any = None) -> np.ndarray:
    """Ones with the shape and dtype of ``a``, on ``a``'s device (a constant even inside
    transforms)."""
    return ones(_like_shape(a, shape), _like_dtype(a, dtype), device=_like_device(a, device))


def empty_like(prototype: Any, dtype: Any = None, order: str = "K", subok: builtins.bool = True,
               shape: Any = None, *, device: Any = None) -> np.ndarray:
    """Same as :func:`zeros_like`."""
    return zeros_like(prototype, dtype, shape=shape, device=device)


def full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K",
              subok: builtins.bool = True, shape: Any = None, *, device: Any = None) -> Any:
    """An array with the shape and dtype of ``a`` filled with ``fill_value`` (may be traced),
    on ``a``'s device."""
    return full(_like_shape(a, shape), fill_value, _like_dtype(a, dtype),
                device=_like_device(a, device))


def eye(N: builtins.int, M: Any = None, k: builtins.int = 0, dtype: Any = float,
        order: str = "C", *, like: Any = None, device: Any = None) -> np.ndarray:
    """An ``N x M`` array with ones on the ``k``-th diagonal and zeros elsewhere."""
    return _made(_device(device, like), dtype, "eye", N, M, k)


def identity(n: builtins.int, dtype: Any = None, *, like: Any = None) -> np.ndarray:
    """The ``n x n`` identity matrix (default dtype float64)."""
    return eye(n, dtype=dtype if dtype is not None else float, like=like)


def tri(N: builtins.int, M: Any = None, k: builtins.int = 0, dtype: Any = float, *,
        like: Any = None) -> np.ndarray:
    """An ``N x M`` array with ones at and below the ``k``-th diagonal, zeros elsewhere."""
    return _made(_device(None, like), dtype, "tri", N, M, k)


def _concrete_number(x: Any) -> Any:
    """A Python number for an ``arange`` argument (a tracer's value must be known). The
    result's length carries no derivative, so a differentiated value is read through
    stop_gradient (``float(x)`` itself refuses: see ``functx.tracing.Tracer``), as JAX's
    ``arange`` reads a concrete value under ``grad``."""
    if is_tracer(x):
        return stop_gradient(x).item()
    return x


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *,
           like: Any = None, device: Any = None) -> np.ndarray:
    """Evenly spaced values in ``[start, stop)`` (NumPy's rules for the length and dtype).

    Raises:
        ConcretizationError: an argument is a tracer whose value is not known (inside
            ``make_trace``/``jit``): the length of the result depends on it.
    """
    args = [_concrete_number(v) for v in (start, stop, step) if v is not None]
    if stop is None and step is not None:
        args = [0] + args
    return _placed(_device(device, like), np.arange(*args, dtype=dtype))


def linspace(start: Any, stop: Any, num: builtins.int = 50, endpoint: builtins.bool = True,
             retstep: builtins.bool = False, dtype: Any = None, axis: builtins.int = 0, *,
             device: Any = None) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop`` (``stop`` excluded unless
    ``endpoint``).

    ``start``/``stop`` may be arrays (the values run along a new axis ``axis``) and may be
    traced: the result is ``start + i * step`` built from primitives (with the last value
    exactly ``stop``), so it is differentiable with respect to both. Integer ``dtype``
    floors the values, as NumPy does. With ``retstep`` also returns the step (NaN when
    there is no step, i.e. ``num - endpoint <= 0``).
    """
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"functx.numpy.linspace: Number of samples, {num}, must be "
                         "non-negative.")
    start = start if is_tracer(start) else asarray(start)
    stop = stop if is_tracer(stop) else asarray(stop)
    dt = result_type(start, stop, float(num))
    start, stop = astype(start, dt), astype(stop, dt)
    delta = _ew.sub(stop, start)
    div = num - 1 if endpoint else num
    extra = len(delta.shape)
    # The host constants below live where start and stop do (a device array's scalars join
    # its device in each operation, but these are not scalars).
    steps = _fshape.on_device_of(delta, host_array(
        np.arange(num, dtype=dt).reshape((num,) + (1,) * extra)))
    if div > 0:
        step = _ew.div(delta, np.full((), div, dt))
        y = _ew.mul(steps, step)
    else:
        step = _fshape.broadcast_to(_fshape.on_device_of(delta, np.full((), math.nan, dt)),
                                    tuple(delta.shape))
        y = _ew.mul(steps, delta)
    y = _ew.add(y, start)
    if endpoint and num > 1:
        last = np.arange(num).reshape((num,) + (1,) * extra) == num - 1
        y = _ew.select(_fshape.on_device_of(delta, host_array(last)), stop, y)
    if axis != 0:
        y = _fshape.moveaxis(y, 0, axis)
    if dtype is not None:
        out_dt = np.dtype(dtype)
        if out_dt.kind in "iu":
            y = _ew.floor(y)
        y = astype(y, out_dt)
    return (y, step) if retstep else y
