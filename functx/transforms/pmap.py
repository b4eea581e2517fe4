"""``pmap``: one member of a named axis per device, collectives across the devices.

``pmap(f, axis_name="batch")(xs)`` runs ``f`` on every device with that device's slice of
``xs`` (``xs[k]`` on device ``k``), as ``jax.pmap`` does: ``f`` is traced once (per
argument signature) with the axis name in scope, and the trace is run in lockstep on the
devices. Ordinary equations run on each device in turn (on CUDA, kernel launches are
asynchronous, so the devices compute concurrently); a collective equation
(``functx.lax.psum``, ``all_gather``...) is one cross-device operation: NCCL on CUDA
(``functx/primitives/cuda/collectives.py``), NumPy on the CPU.

Why ``pmap`` and not ``shard_map``: a 1-d device axis and a per-device program is the
whole of data parallelism and FSDP, and its semantics are exactly ``vmap(axis_name=)``'s
(the same collectives, the same rules), which the CPU tests check. A ``shard_map`` over a
mesh with several axes is the natural next step; it would reuse this interpreter with one
frame per mesh axis.

Results are :class:`Sharded`: one array per device, kept where they are, so a training
step's outputs feed the next step without copies. ``numpy.asarray(s)`` stacks them on the
host. :func:`device_put_sharded` and :func:`device_put_replicated` place inputs.

**The fake multi-device CPU.** On the CPU every member runs in this process with NumPy;
the members are virtual devices ``cpu:0``, ``cpu:1``... (any number: the mapped size).
``FUNCTX_CPU_DEVICES=N`` makes ``functx.devices()`` list N of them too. This is how the
test suite runs the multi-device code paths without GPUs.

**Under other transforms.** Called with traced values (``grad(pmap(f))``, ``jit(pmap(f))``,
``vmap(pmap(f))``), ``pmap`` is ``vmap(f, axis_name=...)`` over the stacked values: the
same numbers, on one device. Take gradients inside ``pmap`` for multi-device training (as
with ``jax.pmap``).

Not yet: collectives inside a higher-order primitive inside ``pmap`` (``checkpoint``,
``custom_vjp`` functions whose body calls a collective): their sub-traces run per device,
where a collective has no members (an ``AxisNameError`` says so). Collectives over an axis
of a ``vmap`` *outside* the ``pmap`` are not supported either.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from functx import named_axes, tracing, tree
from functx.backends import (Device, as_device, device_put, devices as _all_devices,
                             get_backend, owned_read_only, to_numpy)
from functx.errors import ArgumentError, DeviceError
from functx.ir import abstractify
from functx.tracing import Tracer, bind, trace_function
from functx.transforms._args import check_callable
from functx.transforms.interpret import prune_with_last_uses, walk
from functx.transforms.vmap import vmap

__all__ = ["pmap", "Sharded", "device_put_sharded", "device_put_replicated"]


class Sharded:
    """An array split along its first axis over devices: ``shards[k]`` lives on
    ``devices[k]``. ``numpy.asarray(s)`` (or ``functx.to_numpy``) stacks them on the host.

    Attributes:
        shards: one array per device.
        devices: the devices, in the order of the mapped axis.
    """

    __slots__ = ("shards", "devices")

    def __init__(self, shards: Sequence[Any], devices: Sequence[Device]) -> None:
        if len(shards) != len(devices) or not shards:
            raise ArgumentError(f"Sharded needs one shard per device, got {len(shards)} "
                                f"shard(s) for {len(devices)} device(s).")
        self.shards = list(shards)
        self.devices = tuple(devices)

    @property
    def shape(self) -> tuple:
        return (len(self.shards),) + tuple(np.shape(self.shards[0]))

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.shards[0].dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return len(self.shards)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.stack([np.asarray(to_numpy(s)) for s in self.shards])
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        return (f"Sharded({self.dtype}{list(self.shape)} over "
                f"{', '.join(map(str, self.devices))})")


def _resolve_devices(devices: Sequence[Any] | None, n: int, fname: str) -> list[Device]:
    if devices is None:
        gpus = _all_devices("cuda")
        if len(gpus) >= n:
            return gpus[:n]
        return [Device("cpu", k) for k in range(n)]  # the fake multi-device CPU
    devs = [d if isinstance(d, Device) and d.platform == "cpu" else as_device(d)
            for d in devices]
    if len(devs) != n:
        raise ArgumentError(f"{fname}: the mapped axis has size {n} but {len(devs)} devices "
                            "were given; give one device per member.")
    if len({d.platform for d in devs}) != 1 or len(set(devs)) != len(devs):
        raise DeviceError(f"{fname}: the devices {devs} must be distinct devices of one "
                          "backend.")
    return devs


def _put(x: Any, dev: Device) -> Any:
    if dev.platform == "cpu":  # virtual CPU devices: host arrays
        return owned_read_only(np.asarray(to_numpy(x)))
    return device_put(x, dev)


def device_put_sharded(shards: Sequence[Any], devices: Sequence[Any]) -> Any:
    """Place ``shards[k]`` (a pytree) on ``devices[k]``: a pytree of :class:`Sharded`.

    Example:
        >>> xs = fx.device_put_sharded([np.ones(3), np.zeros(3)], fx.devices("cuda")[:2])
    """
    devs = _resolve_devices(devices, len(devices), "device_put_sharded")
    if len(shards) != len(devs):
        raise ArgumentError(f"device_put_sharded: {len(shards)} shards for {len(devs)} "
                            "devices; give one shard per device.")
    return tree.map(lambda *xs: Sharded([_put(x, d) for x, d in zip(xs, devs)], devs),
                    *shards)


def device_put_replicated(x: Any, devices: Sequence[Any]) -> Any:
    """A copy of ``x`` (a pytree) on each of ``devices``: a pytree of :class:`Sharded`.

    Example:
        >>> params = fx.device_put_replicated(params, fx.devices("cuda"))
    """
    devs = _resolve_devices(devices, len(devices), "device_put_replicated")
    return tree.map(lambda leaf: Sharded([_put(leaf, d) for d in devs], devs), x)


def _is_sharded(x: Any) -> bool:
    return isinstance(x, Sharded)


def pmap(f: Callable, axis_name: Hashable | None = None, *, in_axes: Any = 0,
         out_axes: Any = 0, devices: Sequence[Any] | None = None) -> Callable:
    """Run ``f`` on several devices, one member of the axis ``axis_name`` on each.

    Args:
        f: a function of arrays (pytrees of arrays), written for one member; it may call
            the collectives of :mod:`functx.lax` over ``axis_name``.
        axis_name: the name collectives use for the device axis.
        in_axes: 0 (split the leading axis over the devices) or None (the same value on
            every device), per positional argument (a tuple) or for all. :class:`Sharded`
            arguments are used where they are.
        out_axes: 0 (a :class:`Sharded` result) or None (the value of device 0, for
            results that are the same everywhere, such as a ``pmean``'d loss).
        devices: the devices, one per member; default: the first GPUs, or as many
            virtual CPU devices as members where there are not enough GPUs.

    Returns:
        The mapped function.

    Raises:
        ArgumentError: sizes along the mapped axis differ, or do not match ``devices``.
        AxisNameError: ``f`` uses a collective over an axis no map names.

    Example:
        >>> step = fx.pmap(lambda x: x / fx.lax.psum(x, "d"), axis_name="d")
        >>> np.asarray(step(np.array([1.0, 3.0])))
        array([0.25, 0.75])
    """
    check_callable(f, "pmap")
    fname = f"pmap({getattr(f, '__name__', 'f')})"
    cache: dict = {}

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        per_arg = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        if len(per_arg) != len(args):
            raise ArgumentError(f"{fname}: in_axes has {len(per_arg)} entries for "
                                f"{len(args)} arguments.")
        for a in per_arg:
            if a not in (0, None):
                raise ArgumentError(f"{fname}: in_axes entries must be 0 or None, got {a!r}.")
        if out_axes not in (0, None):
            raise ArgumentError(f"{fname}: out_axes must be 0 or None, got {out_axes!r}.")
        leaves, in_tree = tree.flatten(args, is_leaf=_is_sharded)
        axes = []
        for a, spec in zip(args, per_arg):
            axes.extend([spec] * len(tree.leaves(a, is_leaf=_is_sharded)))
        if any(type(x) is Tracer for x in leaves):
            # under another transform: the same numbers as vmap over the stacked values
            stacked = tree.map(lambda x: np.asarray(x) if _is_sharded(x) else x, args,
                               is_leaf=_is_sharded)
            return vmap(f, in_axes=tuple(per_arg), out_axes=out_axes,
                        axis_name=axis_name)(*stacked)
        sizes = {len(x) if _is_sharded(x) else np.shape(x)[0]
                 for x, a in zip(leaves, axes) if a == 0}
        if len(sizes) != 1:
            raise ArgumentError(f"{fname}: the mapped arguments have sizes {sorted(sizes)} "
                                "along axis 0; they must all have one size (the number of "
                                "devices), and at least one argument must be mapped.")
        n = sizes.pop()
        devs = _resolve_devices(devices, n, fname)
        per_device = [_split(x, a, devs, fname) for x, a in zip(leaves, axes)]
        example = [pd[0] for pd in per_device]
        key = (in_tree, tuple(devs), tuple((abstractify(x), a) for x, a in zip(example, axes)))
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = _trace(f, fname, axis_name, n, devs, in_tree, example)
        trace, dying, out_tree = hit
        with named_axes.axis_frame(axis_name, n, spmd=tuple(devs)) as frame:
            outs = _spmd_eval(trace, dying, per_device, devs, frame)
        if out_axes is None:
            return tree.unflatten(out_tree, [o[0] for o in outs])
        return tree.unflatten(out_tree, [Sharded(o, devs) for o in outs])

    return mapped


def _split(x: Any, axis: int | None, devs: list[Device], fname: str) -> list:
    if _is_sharded(x):
        if axis is None:
            raise ArgumentError(f"{fname}: a Sharded argument must be mapped (in_axes 0).")
        if tuple(x.devices) != tuple(devs):
            return [_put(s, d) for s, d in zip(x.shards, devs)]
        return list(x.shards)
    if axis is None:
        return [_put(x, d) for d in devs]
    host_or_device = x
    return [_put(host_or_device[k], d) for k, d in enumerate(devs)]


def _trace(f: Callable, fname: str, axis_name: Hashable, n: int, devs: list,
           in_tree: Any, example: list) -> tuple:
    args = tree.unflatten(in_tree, example)
    with named_axes.axis_frame(axis_name, n, spmd=tuple(devs)) as frame:
        def f_in_frame(*a: Any) -> Any:
            frame.builder = tracing.innermost_abstract_builder()
            return f(*a)

        trace, out_tree, _ = trace_function(f_in_frame, tuple(args), {}, fname)
    trace, dying = prune_with_last_uses(trace)
    return trace, dying, out_tree


def _spmd_eval(trace: Any, dying: Any, per_device: list, devs: list[Device],
               frame: named_axes.AxisFrame) -> list:
    """Run ``trace`` on every device in lockstep; each env value is a list over devices."""
    n = len(devs)
    platform = devs[0].platform
    backend = get_backend(platform)
    ids = [d.id for d in devs]
    env = dict(zip(trace.in_vars, per_device))
    for v, c in zip(trace.const_vars, trace.const_values):
        env[v] = [_put(c, d) for d in devs]

    def rule(eqn: Any, ins: list) -> Any:
        prim = eqn.prim
        if named_axes.is_collective(prim):
            names = eqn.params["axis_name"]
            if names != (frame.name,):
                other = [a for a in names if a != frame.name]
                raise named_axes.AxisNameError(
                    f"{prim.name} over {names!r} inside pmap over axis {frame.name!r}: the "
                    f"axes {other} belong to no map inside the pmap (collectives over a "
                    "vmap outside pmap are not supported).")
            xs = ins[0] if ins else [None] * n
            outs = named_axes.spmd_impl(prim, platform)(xs, ids, **eqn.params)
            return [owned_read_only(o) for o in outs] if platform == "cpu" else outs
        results = []
        for k, dev in enumerate(devs):
            with backend.use_device(dev.id if platform != "cpu" else 0):
                results.append(bind(prim, *[v[k] for v in ins], **eqn.params))
        if prim.multiple_results:
            return [list(r) for r in zip(*results)]
        return results

    return walk(trace, env, rule, dying, literal=lambda a: [a.value] * n)
