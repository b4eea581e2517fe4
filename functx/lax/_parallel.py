"""Collectives over named axes: ``jax.lax``'s parallel operators.

They run inside a map that names its axis, ``functx.vmap(f, axis_name="i")`` (or
``functx.pmap``), and combine the values of the axis' members. Their semantics,
derivatives and batching are described in :mod:`functx.primitives.collectives`; the named
axes in scope live in :mod:`functx.named_axes`. Operands may be pytrees (each leaf is
combined on its own). ``axis_index_groups`` (JAX's subgroups) is not supported.

Example:
    >>> f = fx.vmap(lambda x: x - fx.lax.pmean(x, "i"), axis_name="i")
    >>> f(np.array([1.0, 2.0, 6.0]))
    array([-2., -1.,  3.])
"""
from __future__ import annotations

import operator
from typing import Any, Hashable, Sequence

from functx import named_axes, tree
from functx import numpy as fnp
from functx.errors import ArgumentError
from functx.primitives import collectives as _c

AxisName = Any  # a name, or a tuple of names


def _names(op: str, axis_name: AxisName, groups: Any) -> tuple:
    if groups is not None:
        raise ArgumentError(f"{op}: axis_index_groups is not supported by functx; leave it "
                            "None (every member of the axis takes part).")
    names = named_axes.normalize_names(op, axis_name)
    for n in names:
        named_axes.axis_size(n, op)  # raises AxisNameError naming an unbound axis
    return names


def _one_name(op: str, axis_name: AxisName, groups: Any) -> tuple[tuple, int]:
    names = _names(op, axis_name, groups)
    if len(names) != 1:
        raise ArgumentError(f"{op}: functx supports one axis name here, got {axis_name!r}; "
                            "nest the operation once per axis instead.")
    return names, named_axes.axis_size(names[0], op)


def _axis(op: str, what: str, axis: int, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ArgumentError(f"{op}: {what}={axis} is out of range for an operand with "
                            f"{ndim} dimension(s) (the mapped axis is not counted).")
    return axis % ndim


def psum(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The sum of ``x`` over the members of the named axis (or axes: a tuple).

    Args:
        x: an array, scalar or pytree of them.
        axis_name: the name given to ``vmap``/``pmap``, or a tuple of names.
        axis_index_groups: not supported (None).

    Returns:
        The sum, the same on every member. ``psum(1, "i")`` is the axis size.

    Raises:
        AxisNameError: no enclosing map names the axis.

    Example:
        >>> fx.vmap(lambda x: fx.lax.psum(x, "i"), axis_name="i")(np.array([1., 2.]))
        array([3., 3.])
    """
    names = _names("psum", axis_name, axis_index_groups)
    return tree.map(lambda leaf: _c.psum(leaf, names), x)


def pmean(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The mean of ``x`` over the members of the named axis (or axes); see :func:`psum`."""
    names = _names("pmean", axis_name, axis_index_groups)
    n = 1
    for name in names:
        n *= named_axes.axis_size(name, "pmean")
    return tree.map(lambda leaf: fnp.true_divide(_c.psum(leaf, names), n), x)


def pmax(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The maximum of ``x`` over the members of the named axis (or axes). Its gradient
    goes to the members holding the maximum, split evenly among ties."""
    names = _names("pmax", axis_name, axis_index_groups)
    return tree.map(lambda leaf: _c.pmax(leaf, names), x)


def pmin(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """The minimum of ``x`` over the members of the named axis (or axes); see :func:`pmax`."""
    names = _names("pmin", axis_name, axis_index_groups)
    return tree.map(lambda leaf: _c.pmin(leaf, names), x)


def all_gather(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None,
               axis: int = 0, tiled: bool = False) -> Any:
    """Every member's ``x``, stacked along a new axis ``axis`` (or, with ``tiled=True``,
    concatenated along the existing axis ``axis``).

    Its VJP is :func:`psum_scatter`, as in JAX.

    Example:
        >>> fx.vmap(lambda x: fx.lax.all_gather(x, "i"), axis_name="i")(np.array([1., 2.]))
        array([[1., 2.],
               [1., 2.]])
    """
    names, n = _one_name("all_gather", axis_name, axis_index_groups)

    def one(leaf: Any) -> Any:
        leaf = fnp.asarray(leaf)
        a = _axis("all_gather", "axis", axis, leaf.ndim + (not tiled))
        return _c.all_gather(leaf, names, axis=a, tiled=tiled, axis_size=n)
    return tree.map(one, x)


def psum_scatter(x: Any, axis_name: AxisName, *, scatter_dimension: int = 0,
                 axis_index_groups: Any = None, tiled: bool = False) -> Any:
    """The sum over members, scattered: member ``i`` keeps block ``i`` along
    ``scatter_dimension`` (whose size must be the axis size, and which is dropped; with
    ``tiled=True`` a multiple of it, and kept). Its VJP is :func:`all_gather`."""
    names, n = _one_name("psum_scatter", axis_name, axis_index_groups)

    def one(leaf: Any) -> Any:
        leaf = fnp.asarray(leaf)
        d = _axis("psum_scatter", "scatter_dimension", scatter_dimension, leaf.ndim)
        return _c.psum_scatter(leaf, names, scatter_dimension=d, tiled=tiled, axis_size=n)
    return tree.map(one, x)


def all_to_all(x: Any, axis_name: AxisName, split_axis: int, concat_axis: int, *,
               axis_index_groups: Any = None, tiled: bool = False) -> Any:
    """Member ``i`` receives block ``i`` (along ``split_axis``) of every member's ``x`` and
    places them by sender along ``concat_axis``. Without ``tiled`` the split axis must have
    the axis size; it is removed and a new axis of that size is inserted at
    ``concat_axis``. With ``tiled`` the split axis is divided and the concat axis
    multiplied by the axis size."""
    names, n = _one_name("all_to_all", axis_name, axis_index_groups)

    def one(leaf: Any) -> Any:
        leaf = fnp.asarray(leaf)
        s = _axis("all_to_all", "split_axis", split_axis, leaf.ndim)
        c = _axis("all_to_all", "concat_axis", concat_axis, leaf.ndim)
        return _c.all_to_all(leaf, names, split_axis=s, concat_axis=c, tiled=tiled,
                             axis_size=n)
    return tree.map(one, x)


def ppermute(x: Any, axis_name: AxisName, perm: Sequence[tuple[int, int]]) -> Any:
    """Member ``dst`` receives member ``src``'s ``x`` for each ``(src, dst)`` in ``perm``;
    members that no pair sends to receive zeros. Its VJP is the inverse permutation.

    Raises:
        ArgumentError: an index is out of range, or a member sends or receives twice.

    Example:
        >>> shift = lambda x: fx.lax.ppermute(x, "i", [(0, 1), (1, 2), (2, 0)])
        >>> fx.vmap(shift, axis_name="i")(np.array([1., 2., 3.]))
        array([3., 1., 2.])
    """
    names, n = _one_name("ppermute", axis_name, None)
    pairs = tuple((operator.index(s), operator.index(d)) for s, d in perm)
    srcs, dsts = [s for s, _ in pairs], [d for _, d in pairs]
    if not all(0 <= i < n for i in srcs + dsts) or len(set(srcs)) != len(srcs) or \
            len(set(dsts)) != len(dsts):
        raise ArgumentError(f"ppermute: perm={list(pairs)} is not a partial permutation of "
                            f"the {n} members of axis {names[0]!r}: every index must be in "
                            "[0, n) and no member may send or receive twice.")
    return tree.map(lambda leaf: _c.ppermute(fnp.asarray(leaf), names, pairs), x)


def axis_index(axis_name: Hashable) -> Any:
    """This member's index along the named axis, an int32 scalar.

    Example:
        >>> fx.vmap(lambda x: x * fx.lax.axis_index("i"), axis_name="i")(np.ones(3))
        array([0., 1., 2.])
    """
    names, _ = _one_name("axis_index", axis_name, None)
    return _c.axis_index(names[0])


def axis_size(axis_name: AxisName) -> int:
    """The number of members of the named axis (the product, for a tuple of names): a
    Python int, known while tracing."""
    n = 1
    for name in named_axes.normalize_names("axis_size", axis_name):
        n *= named_axes.axis_size(name, "axis_size")
    return n


__all__ = ["psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "all_to_all",
           "ppermute", "axis_index", "axis_size"]
