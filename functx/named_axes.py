"""The environment of named axes: which mapped axes are in scope, and how big they are.

``vmap(f, axis_name="batch")`` (and ``pmap``) give the axis they map a *name*; inside ``f``
the collectives of ``functx.lax`` (``psum``, ``all_gather``, ``axis_index``...) refer to it
by that name. This module (layer 3, beside ``tracing``) keeps the names in scope as a
thread-local stack of :class:`AxisFrame` s, innermost last:

* a mapping transform enters :func:`axis_frame` for as long as it runs (tracing ``f`` and
  interpreting the trace); anonymous maps push a frame too (``name`` None), so that the
  innermost frame is always the map whose interpreter is running;
* a collective's public function looks its axis up with :func:`axis_size` (an unbound name
  is an :class:`AxisNameError`, JAX's "unbound axis name");
* a collective's batching rule asks :func:`innermost` which axis the running ``vmap`` maps:
  if it is the collective's axis, the rule carries out the collective along the batch
  dimension; otherwise the collective passes through to an outer map.

Primitives whose meaning depends on the named axes (every collective) are marked with
:func:`register_collective`. ``vmap`` asks :func:`is_collective` (it never names a
primitive) and calls such a primitive's batching rule even when none of its inputs is
batched: ``psum`` of a value that is the same for every member is ``n`` times it, and
``axis_index`` has no inputs at all.

Example:
    >>> with axis_frame("i", 4):
    ...     axis_size("i")
    4
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Hashable, Iterator

from functx import ir
from functx.errors import FunctxError


class AxisNameError(FunctxError, NameError):
    """A collective named an axis that no enclosing ``vmap``/``pmap`` maps."""


class AxisFrame:
    """One mapped axis in scope: its name (None for an anonymous map) and its size.

    ``builder`` is the abstract trace builder the map traces its function with (set by the
    map while it traces): a collective whose operands are not traced at that level (a
    constant, a Python scalar, ``axis_index`` with no operand at all) is recorded there, so
    that the map's interpreter sees it. ``spmd`` is for a map whose members are devices
    (``pmap``), None for ``vmap``.
    """

    __slots__ = ("name", "size", "builder", "spmd")

    def __init__(self, name: Hashable | None, size: int, spmd: Any = None) -> None:
        self.name = name
        self.size = size
        self.builder: Any = None
        self.spmd = spmd

    def __repr__(self) -> str:
        return f"AxisFrame({self.name!r}, size={self.size})"


_local = threading.local()


def _stack() -> list[AxisFrame]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextlib.contextmanager
def axis_frame(name: Hashable | None, size: int, spmd: Any = None) -> Iterator[AxisFrame]:
    """Within the block, the axis ``name`` of ``size`` members is in scope (innermost).

    Args:
        name: the axis name (any hashable but a tuple), or None for an anonymous map.
        size: the number of members (batch size, or devices).
        spmd: for pmap's interpreter only (see :class:`AxisFrame`).

    Raises:
        AxisNameError: ``name`` is a tuple (tuples name several axes at once).
    """
    if isinstance(name, tuple):
        raise AxisNameError(f"An axis name cannot be a tuple ({name!r}): tuples name several "
                            "axes at once in collectives. Use a string such as 'batch'.")
    frame = AxisFrame(name, int(size), spmd)
    stack = _stack()
    stack.append(frame)
    try:
        yield frame
    finally:
        stack.pop()


@contextlib.contextmanager
def reentered(frame: AxisFrame | None) -> Iterator[None]:
    """Enter ``frame`` again (a batching rule that maps a sub-trace over the same axis, such
    as checkpoint's, re-enters the running map's frame); a no-op for None."""
    if frame is None:
        yield
        return
    stack = _stack()
    stack.append(frame)
    try:
        yield
    finally:
        stack.pop()


def innermost() -> AxisFrame | None:
    """The frame of the innermost running map (None outside any map)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def bound_names() -> list:
    """The names in scope, outermost first (anonymous maps left out)."""
    return [f.name for f in _stack() if f.name is not None]


def find(name: Hashable) -> AxisFrame | None:
    """The innermost frame named ``name``, or None."""
    for frame in reversed(_stack()):
        if frame.name == name:
            return frame
    return None


def find_innermost(names: tuple) -> AxisFrame | None:
    """The innermost frame whose name is one of ``names``, or None."""
    for frame in reversed(_stack()):
        if frame.name is not None and frame.name in names:
            return frame
    return None


def unbound_error(op: str, name: Hashable) -> AxisNameError:
    """The error for ``op`` naming an axis that is not in scope."""
    bound = bound_names()
    where = (f"the axes in scope here are {bound}" if bound else
             "no named axis is in scope here")
    return AxisNameError(
        f"{op}: unbound axis name {name!r}: {where}. A collective must run inside a "
        f"mapping transform that names its axis, e.g. functx.vmap(f, axis_name={name!r}) "
        f"or functx.pmap(f, axis_name={name!r}); it cannot run on a single array outside "
        "one.")


def axis_size(name: Hashable, op: str = "axis_size") -> int:
    """The size of the named axis in scope.

    Raises:
        AxisNameError: no enclosing map names ``name``.
    """
    frame = find(name)
    if frame is None:
        raise unbound_error(op, name)
    return frame.size


def normalize_names(op: str, axis_name: Any) -> tuple:
    """``axis_name`` (one name or a tuple of them) as a non-empty tuple of names.

    Raises:
        AxisNameError: the tuple is empty, has repeats, or holds None.
    """
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if not names or None in names or len(set(names)) != len(names):
        raise AxisNameError(f"{op}: axis_name must be a name or a tuple of distinct names, "
                            f"got {axis_name!r}.")
    return names


_COLLECTIVES: set = set()


def register_collective(prim: Any) -> Any:
    """Mark ``prim`` as depending on the named axes (its ``axis_name`` param): its batching
    rule is called even where no input is batched. Returns ``prim``."""
    _COLLECTIVES.add(prim)
    return prim


def is_collective(prim: Any) -> bool:
    """Whether ``prim`` was marked with :func:`register_collective`."""
    return prim in _COLLECTIVES


def _sub_traces(value: Any) -> list:
    """The traces in an equation parameter (a body, a tuple of branches)."""
    if isinstance(value, ir.Trace):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _sub_traces(v)]
    return []


_CALLS: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()


def calls_collectives(trace: Any) -> bool:
    """Whether ``trace`` or a body inside it (a loop's, ``checkpoint``'s) runs a collective
    (memoised per trace: traces are immutable)."""
    hit = _CALLS.get(trace)
    if hit is None:
        hit = _CALLS[trace] = any(uses_named_axes(e.prim, e.params) for e in trace.eqns)
    return hit


def uses_named_axes(prim: Any, params: dict) -> bool:
    """Whether an equation depends on the named axes in scope: a collective, or a
    higher-order primitive whose body runs one. Such an equation goes to its batching rule
    even where no input is batched (``psum`` of a value the same on every member is not
    the value itself)."""
    if prim in _COLLECTIVES:
        return True
    return any(calls_collectives(t) for v in params.values() for t in _sub_traces(v))


# Cross-device implementations, for maps whose members are devices (pmap): prim -> backend
# name -> fn(values, device_ids, **params) -> one output per device. ``values`` holds each
# device's operands (a list per operand), in the order of the mapped axis.
_SPMD: dict = {}


def register_spmd_impl(prim: Any, backend: str, fn: Any) -> None:
    """Register how ``prim`` combines the values of several devices of ``backend``."""
    _SPMD.setdefault(prim, {})[backend] = fn


def spmd_impl(prim: Any, backend: str) -> Any:
    """The cross-device implementation of ``prim`` on ``backend``.

    Raises:
        AxisNameError: there is none.
    """
    fn = _SPMD.get(prim, {}).get(backend)
    if fn is None:
        raise AxisNameError(f"{getattr(prim, 'name', prim)} has no implementation across "
                            f"several {backend} devices, so it cannot run inside pmap there.")
    return fn


__all__ = ["AxisFrame", "AxisNameError", "axis_frame", "reentered", "innermost",
           "bound_names", "find", "find_innermost", "unbound_error", "axis_size", "normalize_names",
           "register_collective", "is_collective", "calls_collectives", "uses_named_axes", "register_spmd_impl", "spmd_impl"]
