"""Collectives over named axes: psum, pmax, pmin, all_gather, psum_scatter, all_to_all,
ppermute, axis_index (the user functions, with pmean and axis_size, are in functx.lax).

A collective combines the values of all *members* of a named mapped axis
(``vmap(f, axis_name="i")``; see :mod:`functx.named_axes`). Every primitive has the param
``axis_name``, a tuple of names; those whose output shape depends on the axis size also
carry ``axis_size`` (so shape rules stay pure functions of their params, as in JAX).

Semantics are JAX's (``jax.lax``), seen from one member (SPMD):

* ``psum``/``pmax``/``pmin``: the sum/max/min over the members, the same on every member.
* ``all_gather(x, axis, tiled)``: the members' ``x`` stacked along a new axis ``axis``
  (concatenated along ``axis`` if ``tiled``).
* ``psum_scatter(x, scatter_dimension, tiled)``: the sum over members, of which member
  ``i`` keeps block ``i`` along ``scatter_dimension`` (of size 1, dropped, unless tiled).
* ``all_to_all(x, split_axis, concat_axis, tiled)``: member ``i`` receives block ``i`` of
  ``x`` along ``split_axis`` from every member ``j``, placed at position ``j`` along
  ``concat_axis``.
* ``ppermute(x, perm)``: member ``dst`` receives ``x`` of member ``src`` for each
  ``(src, dst)`` in ``perm``; members no pair sends to receive zeros.
* ``axis_index()``: the member's index (int32).

Derivatives follow JAX's SPMD view, in which the loss is the sum of the members' losses:
``psum``'s VJP is ``psum`` of the cotangent, ``all_gather``'s is ``psum_scatter``,
``psum_scatter``'s is ``all_gather``, ``all_to_all``'s swaps the axes, ``ppermute``'s is
the inverse permutation; ``pmax``/``pmin`` send the summed cotangent to the members holding
the extremum, split evenly among ties (as ``reduce_max`` does; JAX has no rule for them).

**Batching.** A collective's batching rule asks :func:`functx.named_axes.innermost` which
axis the running ``vmap`` maps. If it is the collective's own axis, the rule carries the
collective out along the batch dimension with ordinary primitives (a sum, a transpose, a
gather); otherwise the collective passes through to the enclosing map that names it.

**Implementation.** Inside ``pmap`` each device's member runs in its own thread with an
``spmd`` frame; the implementation hands the operand to the frame, which waits for every
member and runs the cross-device implementation (``named_axes.spmd_impl``: NumPy on the
CPU, NCCL on CUDA, registered at the end of this module). Outside any map there are no
members: the implementation raises :class:`~functx.named_axes.AxisNameError` ("unbound
axis name").
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from functx import backends, named_axes
from functx.ir import AbstractArray
from functx.errors import ShapeError
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import linear_jvp, moveaxis, to_front
from functx.primitives._util import shape_of
from functx.primitives.cuda import collectives as _cuda
from functx.registry import Primitive
from functx.tracing import Tracer, bind

# ----------------------------------------------------------------------------------------
# Shared pieces


def bind_collective(prim: Primitive, *args: Any, **params: Any) -> Any:
    """``bind(prim, *args, **params)``, recorded by the builder of the map that names the
    collective's axis where no operand is traced at that map's level (constants, Python
    scalars, ``axis_index``): the map's interpreter then carries it out."""
    frame = named_axes.find_innermost(params["axis_name"])
    builder = None if frame is None else frame.builder
    if builder is not None and builder.active:
        top = 0
        for a in args:
            if type(a) is Tracer and a._builder.level > top:
                top = a._builder.level
        if top < builder.level:
            return builder.process(prim, args, params)
    return bind(prim, *args, **params)


def _member_impl(prim: Primitive) -> Callable:
    """The implementation: a member of a map whose members are devices (``pmap`` runs one
    thread per device, with an ``spmd`` frame) meets the other members there; anywhere
    else the axis has no members (AxisNameError: unbound axis name)."""
    def impl(xp: Any, *args: Any, axis_name: tuple, **params: Any) -> Any:
        frame = named_axes.find_innermost(axis_name)
        if frame is None or frame.spmd is None:
            raise named_axes.unbound_error(prim.name, axis_name[0])
        if axis_name != (frame.name,):
            other = [a for a in axis_name if a != frame.name]
            raise named_axes.AxisNameError(
                f"{prim.name} over {axis_name!r} inside pmap over axis {frame.name!r}: the "
                f"axes {other} belong to no map inside the pmap (collectives over a vmap "
                "outside pmap are not supported).")
        return frame.spmd.collective(prim, args[0] if args else None,
                                     dict(params, axis_name=axis_name))
    return impl


def _same_aval(x: AbstractArray, **params: Any) -> AbstractArray:
    return x


def _collective_batch(prim: Primitive, matched: Callable,
                      passthrough: Callable | None = None) -> Callable:
    """A collective's batching rule.

    ``matched(x, n, rest, **params)`` carries the collective out when the running map is
    the collective's axis: ``x`` has the members along axis 0 (an unbatched operand is
    broadcast to them), ``n`` is the axis size and ``rest`` the collective's other axis
    names; it returns ``(out, out_dim)``. Otherwise the collective passes through:
    ``passthrough(args, dims, **params)``, by default the primitive applied as it is with
    the batch axis where it was (right for elementwise collectives).
    """
    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple:
        names = params["axis_name"]
        frame = named_axes.innermost()
        if frame is None or frame.name is None or frame.name not in names:
            if all(d is None for d in dims):
                return bind_collective(prim, *args, **params), None
            if passthrough is None:
                return bind_collective(prim, *args, **params), dims[0]
            return passthrough(args, dims, **params)
        rest = tuple(a for a in names if a != frame.name)
        xs = [to_front(x, d, frame.size) for x, d in zip(args, dims)]
        return matched(*xs, frame.size, rest, **params)
    return rule


def _front_passthrough(prim: Primitive, axis_params: Sequence[str]) -> Callable:
    """Pass-through of a collective with axis params: the batch moves to the front and each
    axis param shifts by one; the result is batched along axis 0."""
    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple:
        x = to_front(args[0], dims[0])
        new = dict(params)
        for p in axis_params:
            new[p] = params[p] + 1
        return bind_collective(prim, x, **new), 0
    return rule


def _check_axis(op: str, axis: int, ndim: int, what: str) -> int:
    if not 0 <= axis < ndim:
        raise ShapeError(f"{op}: {what}={axis} is out of range for an operand with {ndim} "
                         "dimension(s) (normalised, non-negative axes expected).")
    return axis


# ----------------------------------------------------------------------------------------
# psum, pmax, pmin


def _psum_matched(x: Any, n: int, rest: tuple, *, axis_name: tuple) -> tuple:
    out = _red.reduce_sum(x, (0,))
    return (psum(out, rest) if rest else out), None


psum_p = named_axes.register_collective(Primitive("psum"))
psum_p.def_abstract_eval(_same_aval)
psum_p.def_impl(_member_impl(psum_p))
psum_p.def_vjp(lambda ct, ins, out, *, axis_name: (psum(ct, axis_name),))
psum_p.def_jvp(linear_jvp(psum_p))
psum_p.def_batch(_collective_batch(psum_p, _psum_matched))


def psum(x: Any, axis_name: tuple) -> Any:
    """The sum of ``x`` over the members of the named axes (a tuple of names)."""
    return bind_collective(psum_p, x, axis_name=tuple(axis_name))


def _extremum(name: str, reduce: Callable) -> Primitive:
    prim = named_axes.register_collective(Primitive(name))

    def matched(x: Any, n: int, rest: tuple, *, axis_name: tuple) -> tuple:
        out = reduce(x, (0,))
        return (bind_collective(prim, out, axis_name=rest) if rest else out), None

    def vjp(ct: Any, ins: tuple, out: Any, *, axis_name: tuple) -> tuple:
        x = ins[0]
        if not np.issubdtype(np.dtype(x.dtype), np.inexact):
            return (None,)
        hit = _ew.convert_element_type(_ew.eq(x, out), new_dtype=x.dtype)
        share = _ew.div(psum(ct, axis_name), psum(hit, axis_name))
        return (_ew.mul(share, hit),)

    def jvp(tangents: Sequence[Any], primals: Sequence[Any], out: Any, *,
            axis_name: tuple) -> Any:
        t, x = tangents[0], primals[0]
        if t is None:
            return None
        hit = _ew.convert_element_type(_ew.eq(x, out), new_dtype=x.dtype)
        return _ew.div(psum(_ew.mul(t, hit), axis_name), psum(hit, axis_name))

    prim.def_abstract_eval(_same_aval)
    prim.def_impl(_member_impl(prim))
    prim.def_vjp(vjp, save_inputs=(0,), save_output=True)
    prim.def_jvp(jvp)
    prim.def_batch(_collective_batch(prim, matched))
    return prim


pmax_p = _extremum("pmax", _red.reduce_max)
pmin_p = _extremum("pmin", _red.reduce_min)


def pmax(x: Any, axis_name: tuple) -> Any:
    """The maximum of ``x`` over the members of the named axes."""
    return bind_collective(pmax_p, x, axis_name=tuple(axis_name))


def pmin(x: Any, axis_name: tuple) -> Any:
    """The minimum of ``x`` over the members of the named axes."""
    return bind_collective(pmin_p, x, axis_name=tuple(axis_name))


# ----------------------------------------------------------------------------------------
# all_gather and psum_scatter (each the other's transpose)


def _all_gather_aval(x: AbstractArray, *, axis_name: tuple, axis: int, tiled: bool,
                     axis_size: int) -> AbstractArray:
    shape = tuple(x.shape)
    if tiled:
        _check_axis("all_gather", axis, len(shape), "axis")
        new = shape[:axis] + (shape[axis] * axis_size,) + shape[axis + 1:]
    else:
        _check_axis("all_gather", axis, len(shape) + 1, "axis")
        new = shape[:axis] + (axis_size,) + shape[axis:]
    return AbstractArray(new, x.dtype, x.weak_type)


def _all_gather_matched(x: Any, n: int, rest: tuple, *, axis_name: tuple, axis: int,
                        tiled: bool, axis_size: int) -> tuple:
    out = moveaxis(x, 0, axis)  # the members, stacked at `axis`: the same on every member
    if tiled:
        shape = shape_of(out)
        out = _shape.reshape(out, shape[:axis] + (shape[axis] * shape[axis + 1],)
                             + shape[axis + 2:])
    return out, None


all_gather_p = named_axes.register_collective(Primitive("all_gather"))
all_gather_p.def_abstract_eval(_all_gather_aval)
all_gather_p.def_impl(_member_impl(all_gather_p))
all_gather_p.def_vjp(lambda ct, ins, out, *, axis_name, axis, tiled, axis_size: (
    psum_scatter(ct, axis_name, scatter_dimension=axis, tiled=tiled, axis_size=axis_size),))
all_gather_p.def_jvp(linear_jvp(all_gather_p))
all_gather_p.def_batch(_collective_batch(all_gather_p, _all_gather_matched,
                                         _front_passthrough(all_gather_p, ("axis",))))


def all_gather(x: Any, axis_name: tuple, *, axis: int, tiled: bool, axis_size: int) -> Any:
    """The members' ``x`` stacked along a new ``axis`` (concatenated along it if tiled)."""
    return bind_collective(all_gather_p, x, axis_name=tuple(axis_name), axis=axis,
                           tiled=bool(tiled), axis_size=axis_size)


def _psum_scatter_aval(x: AbstractArray, *, axis_name: tuple, scatter_dimension: int,
                       tiled: bool, axis_size: int) -> AbstractArray:
    shape = tuple(x.shape)
    d = _check_axis("psum_scatter", scatter_dimension, len(shape), "scatter_dimension")
    if tiled:
        if shape[d] % axis_size:
            raise ShapeError(f"psum_scatter: with tiled=True the scatter dimension {d} of "
                             f"{x} must be divisible by the axis size {axis_size}.")
        new = shape[:d] + (shape[d] // axis_size,) + shape[d + 1:]
    else:
        if shape[d] != axis_size:
            raise ShapeError(f"psum_scatter: the scatter dimension {d} of {x} must equal "
                             f"the axis size {axis_size} (or pass tiled=True to scatter "
                             "blocks of a dimension divisible by it).")
        new = shape[:d] + shape[d + 1:]
    return AbstractArray(new, x.dtype, x.weak_type)


def _psum_scatter_matched(x: Any, n: int, rest: tuple, *, axis_name: tuple,
                          scatter_dimension: int, tiled: bool, axis_size: int) -> tuple:
    total = _red.reduce_sum(x, (0,))
    d = scatter_dimension
    if tiled:
        shape = shape_of(total)
        total = _shape.reshape(total, shape[:d] + (n, shape[d] // n) + shape[d + 1:])
    return moveaxis(total, d, 0), 0  # member i keeps block i


psum_scatter_p = named_axes.register_collective(Primitive("psum_scatter"))
psum_scatter_p.def_abstract_eval(_psum_scatter_aval)
psum_scatter_p.def_impl(_member_impl(psum_scatter_p))
psum_scatter_p.def_vjp(lambda ct, ins, out, *, axis_name, scatter_dimension, tiled, axis_size: (
    all_gather(ct, axis_name, axis=scatter_dimension, tiled=tiled, axis_size=axis_size),))
psum_scatter_p.def_jvp(linear_jvp(psum_scatter_p))
psum_scatter_p.def_batch(_collective_batch(
    psum_scatter_p, _psum_scatter_matched,
    _front_passthrough(psum_scatter_p, ("scatter_dimension",))))


def psum_scatter(x: Any, axis_name: tuple, *, scatter_dimension: int, tiled: bool,
                 axis_size: int) -> Any:
    """The sum over members, of which each keeps its block along ``scatter_dimension``."""
    return bind_collective(psum_scatter_p, x, axis_name=tuple(axis_name),
                           scatter_dimension=scatter_dimension, tiled=bool(tiled),
                           axis_size=axis_size)


# ----------------------------------------------------------------------------------------
# all_to_all


def _all_to_all_aval(x: AbstractArray, *, axis_name: tuple, split_axis: int,
                     concat_axis: int, tiled: bool, axis_size: int) -> AbstractArray:
    shape = list(x.shape)
    s = _check_axis("all_to_all", split_axis, len(shape), "split_axis")
    c = _check_axis("all_to_all", concat_axis, len(shape), "concat_axis")
    if tiled:
        if shape[s] % axis_size:
            raise ShapeError(f"all_to_all: with tiled=True the split axis {s} of {x} must be "
                             f"divisible by the axis size {axis_size}.")
        shape[s] //= axis_size
        shape[c] *= axis_size
    else:
        if shape[s] != axis_size:
            raise ShapeError(f"all_to_all: the split axis {s} of {x} must equal the axis "
                             f"size {axis_size} (or pass tiled=True).")
        del shape[s]
        shape.insert(c, axis_size)
    return AbstractArray(tuple(shape), x.dtype, x.weak_type)


def _all_to_all_matched(x: Any, n: int, rest: tuple, *, axis_name: tuple, split_axis: int,
                        concat_axis: int, tiled: bool, axis_size: int) -> tuple:
    # x[j, ...]: member j's operand. Member i receives block i of every x[j].
    if tiled:
        shape = shape_of(x)
        s = split_axis + 1
        x = _shape.reshape(x, shape[:s] + (n, shape[s] // n) + shape[s + 1:])
    y = moveaxis(x, split_axis + 1, 0)  # y[i, j, ...]
    y = moveaxis(y, 1, concat_axis + 1)  # j at concat_axis of member i's result
    if tiled:  # merge j (major) with the concat axis
        shape = shape_of(y)
        c = concat_axis + 1
        y = _shape.reshape(y, shape[:c] + (shape[c] * shape[c + 1],) + shape[c + 2:])
    return y, 0


all_to_all_p = named_axes.register_collective(Primitive("all_to_all"))
all_to_all_p.def_abstract_eval(_all_to_all_aval)
all_to_all_p.def_impl(_member_impl(all_to_all_p))
all_to_all_p.def_vjp(lambda ct, ins, out, *, axis_name, split_axis, concat_axis, tiled,
                     axis_size: (all_to_all(ct, axis_name, split_axis=concat_axis,
                                            concat_axis=split_axis, tiled=tiled,
                                            axis_size=axis_size),))
all_to_all_p.def_jvp(linear_jvp(all_to_all_p))
all_to_all_p.def_batch(_collective_batch(
    all_to_all_p, _all_to_all_matched,
    _front_passthrough(all_to_all_p, ("split_axis", "concat_axis"))))


def all_to_all(x: Any, axis_name: tuple, *, split_axis: int, concat_axis: int, tiled: bool,
               axis_size: int) -> Any:
    """Block ``i`` of ``x`` along ``split_axis`` goes to member ``i``, which places the
    blocks it receives along ``concat_axis`` by sender."""
    return bind_collective(all_to_all_p, x, axis_name=tuple(axis_name),
                           split_axis=split_axis, concat_axis=concat_axis,
                           tiled=bool(tiled), axis_size=axis_size)


# ----------------------------------------------------------------------------------------
# ppermute and axis_index


def _ppermute_matched(x: Any, n: int, rest: tuple, *, axis_name: tuple,
                      perm: tuple) -> tuple:
    source = {dst: src for src, dst in perm}
    shape = shape_of(x)
    pieces = []
    for dst in range(n):
        src = source.get(dst)
        if src is None:
            pieces.append(_shape.constant(x, 0, (1,) + shape[1:], x.dtype))
        else:
            pieces.append(_shape.slice(x, (src,) + (0,) * (len(shape) - 1),
                                       (src + 1,) + shape[1:], (1,) * len(shape)))
    return _shape.concatenate(pieces, 0), 0


ppermute_p = named_axes.register_collective(Primitive("ppermute"))
ppermute_p.def_abstract_eval(_same_aval)
ppermute_p.def_impl(_member_impl(ppermute_p))
ppermute_p.def_vjp(lambda ct, ins, out, *, axis_name, perm: (
    ppermute(ct, axis_name, tuple((dst, src) for src, dst in perm)),))
ppermute_p.def_jvp(linear_jvp(ppermute_p))
ppermute_p.def_batch(_collective_batch(ppermute_p, _ppermute_matched))


def ppermute(x: Any, axis_name: tuple, perm: tuple) -> Any:
    """Member ``dst`` receives ``x`` of member ``src`` for each pair of ``perm``."""
    return bind_collective(ppermute_p, x, axis_name=tuple(axis_name),
                           perm=tuple((int(s), int(d)) for s, d in perm))


def _axis_index_matched(n: int, rest: tuple, *, axis_name: tuple) -> tuple:
    # a constant (it depends on no operand), made on the device arrays are created on
    out = backends.default_backend().xp.arange(n, dtype=np.int32)
    return backends.owned_read_only(out), 0


axis_index_p = named_axes.register_collective(Primitive("axis_index"))
axis_index_p.def_abstract_eval(lambda *, axis_name: AbstractArray((), np.dtype(np.int32)))
axis_index_p.def_impl(_member_impl(axis_index_p))
axis_index_p.def_zero_vjp()
axis_index_p.def_jvp(lambda tangents, primals, out, *, axis_name: None)
axis_index_p.def_batch(_collective_batch(axis_index_p, _axis_index_matched))


def axis_index(axis_name: Any) -> Any:
    """This member's index along the named axis (an int32 scalar)."""
    return bind_collective(axis_index_p, axis_name=(axis_name,))


# ----------------------------------------------------------------------------------------
# Across devices (pmap): each device holds one member's operand. The host implementations
# serve the CPU (and fake CPU devices); CUDA's call NCCL (functx/primitives/cuda/collectives.py).


def _host_psum(xs: list, ids: list, *, axis_name: tuple) -> list:
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return [total] * len(xs)


def _host_extremum(fn: Callable) -> Callable:
    def impl(xs: list, ids: list, *, axis_name: tuple) -> list:
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return [out] * len(xs)
    return impl


def _host_all_gather(xs: list, ids: list, *, axis_name: tuple, axis: int, tiled: bool,
                     axis_size: int) -> list:
    out = np.concatenate(xs, axis=axis) if tiled else np.stack(xs, axis=axis)
    return [out] * len(xs)


def _host_psum_scatter(xs: list, ids: list, *, axis_name: tuple, scatter_dimension: int,
                       tiled: bool, axis_size: int) -> list:
    total = _host_psum(xs, ids, axis_name=axis_name)[0]
    blocks = np.split(total, axis_size, axis=scatter_dimension)
    return [b if tiled else np.squeeze(b, scatter_dimension) for b in blocks]


def _host_all_to_all(xs: list, ids: list, *, axis_name: tuple, split_axis: int,
                     concat_axis: int, tiled: bool, axis_size: int) -> list:
    n = axis_size
    blocks = [np.split(x, n, axis=split_axis) for x in xs]  # blocks[j][i]: j sends i
    outs = []
    for i in range(n):
        got = [blocks[j][i] if tiled else np.squeeze(blocks[j][i], split_axis)
               for j in range(n)]
        outs.append(np.concatenate(got, axis=concat_axis) if tiled
                    else np.stack(got, axis=concat_axis))
    return outs


def _host_ppermute(xs: list, ids: list, *, axis_name: tuple, perm: tuple) -> list:
    source = {dst: src for src, dst in perm}
    return [xs[source[d]] if d in source else np.zeros_like(xs[d]) for d in range(len(xs))]


def _host_axis_index(xs: list, ids: list, *, axis_name: tuple) -> list:
    return [np.asarray(i, np.int32) for i in range(len(xs))]


def _register_spmd() -> None:
    host = {psum_p: _host_psum, pmax_p: _host_extremum(np.maximum),
            pmin_p: _host_extremum(np.minimum), all_gather_p: _host_all_gather,
            psum_scatter_p: _host_psum_scatter, all_to_all_p: _host_all_to_all,
            ppermute_p: _host_ppermute, axis_index_p: _host_axis_index}
    cuda = {psum_p: _cuda.psum, pmax_p: _cuda.pmax, pmin_p: _cuda.pmin,
            all_gather_p: _cuda.all_gather, psum_scatter_p: _cuda.psum_scatter,
            all_to_all_p: _cuda.all_to_all, ppermute_p: _cuda.ppermute,
            axis_index_p: _cuda.axis_index}
    for prim, fn in host.items():
        named_axes.register_spmd_impl(prim, "cpu", fn)
    for prim, fn in cuda.items():
        named_axes.register_spmd_impl(prim, "cuda", fn)


_register_spmd()
