"""``pmap``: one member of a named axis per device, collectives across the devices.

``pmap(f, axis_name="batch")(xs)`` runs ``f`` on every device with that device's slice of
``xs`` (``xs[k]`` on device ``k``), as ``jax.pmap`` does: ``f`` is traced once (per
argument signature) with the axis name in scope, and every member runs the trace with
``jit``'s lean executor (the trace's constants put on each device once; on CUDA its
clusters run as fused kernels). A collective (``functx.lax.psum``, ``all_gather``...) is
where the members meet and the cross-device implementation runs once for all (NCCL on
CUDA, functx/primitives/cuda/collectives.py; NumPy on the CPU). Two interpreters:

* **lockstep** (where every collective is an equation of the trace itself): the calling
  thread runs each member's steps up to the next collective with that member's device
  current, then the collective, and so on. On CUDA all of it is asynchronous launches, so
  the GPUs work in parallel while the host goes round;
* **threads** (where a collective sits inside a higher-order equation: a loop,
  ``checkpoint``, ``custom_vjp``): one thread per device (device 0's in the calling
  thread), each with an ``spmd`` axis frame; at a collective each member deposits its
  operand, the last to arrive runs the implementation for all, and each takes its result.
  If a member fails, the others stop at their next collective and the error is raised in
  the caller.

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

Not supported: collectives over an axis of a ``vmap`` *outside* the ``pmap``.
"""
from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from functx import named_axes, tracing, tree
from functx.backends import (Device, as_device, default_device, device_of, device_put,
                             devices as _all_devices, get_backend, owned_read_only, to_numpy)
from functx.errors import ArgumentError, DeviceError, FunctxError
from functx.ir import Trace, abstractify
from functx.tracing import Tracer, trace_function
from functx.transforms._args import check_callable
from functx.transforms.interpret import prune_with_last_uses
from functx.transforms.jit import executor, run_steps
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


_CPU0 = Device("cpu", 0)


class _Meeting:
    """Where the members of one pmap call (one thread per device) meet at each collective:
    each deposits its operand and waits; the last to arrive runs the cross-device
    implementation for all (``threading.Barrier``'s action), then each takes its result.
    One barrier per collective suffices: the next action can only run once every member
    has arrived again, so every member has taken its previous result by then."""

    def __init__(self, devs: list[Device]) -> None:
        self.n = len(devs)
        self.platform = devs[0].platform
        self.ids = [d.id for d in devs]
        self.slots: list = [None] * self.n
        self.calls: list = [None] * self.n
        self.results: list = []
        self.barrier = threading.Barrier(self.n, action=self._combine)

    def _combine(self) -> None:
        prim, params = self.calls[0]
        for k, (p, q) in enumerate(self.calls):
            if p is not prim or q != params:
                raise named_axes.AxisNameError(
                    f"pmap: the devices disagree at a collective: device 0 runs {prim.name} "
                    f"with {params}, device {k} runs {p.name} with {q}.")
        # host operands (Python scalars, 0-d NumPy constants) are combined on the host,
        # where bind expects their results
        on_host = all(device_of(x) in (None, _CPU0) for x in self.slots)
        platform = "cpu" if on_host else self.platform
        xs = [np.asarray(x) for x in self.slots] if on_host else list(self.slots)
        outs = named_axes.spmd_impl(prim, platform)(xs, self.ids, **params)
        self.results = ([owned_read_only(np.asarray(o)) for o in outs] if platform == "cpu"
                        else list(outs))


class _Member:
    """One device's member: the ``spmd`` of its thread's axis frame."""

    def __init__(self, meeting: _Meeting, index: int) -> None:
        self.meeting, self.index = meeting, index

    def collective(self, prim: Any, x: Any, params: dict) -> Any:
        m = self.meeting
        if x is None:  # axis_index: no operand, nothing to exchange
            return np.asarray(self.index, np.int32)
        m.slots[self.index] = x
        m.calls[self.index] = (prim, params)
        try:
            m.barrier.wait()
        except threading.BrokenBarrierError:
            raise _Aborted() from None
        return m.results[self.index]


class _Aborted(FunctxError):
    """Another member failed: this one stops at its next collective. (A FunctxError, so
    that bind passes it through unchanged.)"""


def _spmd_eval(trace: Any, dying: Any, per_device: list, devs: list[Device],
               frame: named_axes.AxisFrame) -> list:
    """Run ``trace`` on every device, meeting at collectives: in lockstep from the calling
    thread where every collective is an equation of the trace itself (see
    :func:`_lockstep_eval`), else one thread per device. Returns a list per output of the
    per-device values."""
    if _lockstep_ok(trace):
        outs = _lockstep_eval(trace, per_device, devs)
        if outs is not None:
            return outs
    return _threaded_eval(trace, per_device, devs, frame)


_LOCKSTEP_OK: "weakref.WeakKeyDictionary[Trace, bool]" = weakref.WeakKeyDictionary()


def _lockstep_ok(trace: Trace) -> bool:
    """Whether no collective hides inside a higher-order equation (a loop, ``checkpoint``,
    ``custom_vjp`` body): those meet only in the threaded interpreter."""
    ok = _LOCKSTEP_OK.get(trace)
    if ok is None:
        ok = _LOCKSTEP_OK[trace] = not any(
            not named_axes.is_collective(e.prim) and named_axes.uses_named_axes(e.prim, e.params)
            for e in trace.eqns)
    return ok


def _lockstep_eval(trace: Trace, per_device: list, devs: list[Device]) -> list | None:
    """The members run one after the other in the calling thread, segment by segment: each
    runs its executor's steps up to the next collective with its device current, then the
    collective runs once for all (``_Meeting``'s combination, without threads), and so on.

    Every member's plan has the same steps (one trace, constants per device). The host work
    is the same as with threads (one interpreter), but no member waits for a thread switch
    at a collective: with threads, a member woken at a barrier waits for the interpreter
    lock (up to ``sys.getswitchinterval()``), which cost an all-reduce of 256 MiB on four
    H100s 1.7 ms on top of NCCL's 1.3 ms. Returns None where a plan cannot be made (a
    constant on another backend): the threaded path then runs.
    """
    backend = get_backend(devs[0].platform)
    scopes = [contextlib.nullcontext() if d.platform == "cpu" else None for d in devs]
    plans = []
    for k, dev in enumerate(devs):  # (a plan puts its literals on the current device)
        with scopes[k] or default_device(dev):
            plans.append(executor(_member_trace(trace, dev)).plan(backend))
    if any(p is False for p in plans) or len({len(p[1]) for p in plans}) != 1:
        return None
    n = len(devs)
    on_cpu = backend.name == "cpu"
    envs = []
    for k, (template, _, _) in enumerate(plans):
        env = list(template)
        env[:len(trace.in_vars)] = [values[k] for values in per_device]
        envs.append(env)
    steps0 = plans[0][1]
    meeting = _Meeting(devs)
    start = 0
    for i in _meeting_points(steps0):
        if i > start:
            for k in range(n):  # each member up to the collective
                with scopes[k] or default_device(devs[k]):
                    run_steps(plans[k][1], envs[k], start, i, on_cpu)
        if i == len(steps0):
            break
        _, ins, params, outs, free, eqn = steps0[i]
        if not ins:  # axis_index: each member's own index
            results = [np.asarray(k, np.int32) for k in range(n)]
        else:
            for k in range(n):
                meeting.slots[k] = envs[k][plans[k][1][i][1][0]]
                meeting.calls[k] = (eqn.prim, params)
            meeting._combine()
            results = meeting.results
        for k in range(n):
            step = plans[k][1][i]
            envs[k][step[3] if type(step[3]) is int else step[3][0]] = results[k]
            for f in step[4]:
                envs[k][f] = None
        start = i + 1
    return [list(vals) for vals in zip(*([env[s] for s in plan[2]]
                                          for env, plan in zip(envs, plans)))]


_POINTS: dict = {}  # id(steps) -> (steps, the indices of their collectives + [len(steps)])


def _meeting_points(steps: list) -> list:
    hit = _POINTS.get(id(steps))
    if hit is None or hit[0] is not steps:
        points = [j for j, st in enumerate(steps) if named_axes.is_collective(st[5].prim)]
        hit = _POINTS[id(steps)] = (steps, points + [len(steps)])
        while len(_POINTS) > MEMBER_TRACES_KEPT:
            _POINTS.pop(next(iter(_POINTS)))
    return hit[1]


def _threaded_eval(trace: Any, per_device: list, devs: list[Device],
                   frame: named_axes.AxisFrame) -> list:
    """Run ``trace`` on every device, one thread per device, meeting at collectives."""
    n = len(devs)
    meeting = _Meeting(devs)
    results: list = [None] * n
    errors: list = [None] * n

    def member(k: int) -> None:
        dev = devs[k]
        scope = default_device(dev) if dev.platform != "cpu" else contextlib.nullcontext()
        try:
            with named_axes.axis_frame(frame.name, n, spmd=_Member(meeting, k)), scope:
                results[k] = executor(_member_trace(trace, dev))(per_device_args(k),
                                                                 get_backend(dev.platform))
        except _Aborted:
            pass
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
            errors[k] = e
            meeting.barrier.abort()

    def per_device_args(k: int) -> list:
        return [values[k] for values in per_device]

    threads = [threading.Thread(target=member, args=(k,), name=f"pmap member {k}")
               for k in range(1, n)]
    for t in threads:
        t.start()
    member(0)  # device 0 in the calling thread
    for t in threads:
        t.join()
    for k, e in enumerate(errors):
        if e is not None:
            raise e
    return [list(outs) for outs in zip(*results)]


# (id(trace), device) -> (trace, the trace with its constants on that device): made once per
# device, so a step neither copies its constants again nor plans its executor again
_MEMBER_TRACES: dict = {}
MEMBER_TRACES_KEPT = 256


def _member_trace(trace: Trace, dev: Device) -> Trace:
    """``trace`` with its constants on ``dev`` (each member runs it with jit's lean executor:
    one implementation call per step, fused kernels on CUDA)."""
    key = (id(trace), dev)
    hit = _MEMBER_TRACES.get(key)
    if hit is None or hit[0] is not trace:
        consts = tuple(_put(c, dev) for c in trace.const_values)
        hit = _MEMBER_TRACES[key] = (trace, Trace(trace.in_vars, trace.const_vars, consts,
                                                  trace.eqns, trace.outputs))
        while len(_MEMBER_TRACES) > MEMBER_TRACES_KEPT:
            _MEMBER_TRACES.pop(next(iter(_MEMBER_TRACES)))
    return hit[1]
