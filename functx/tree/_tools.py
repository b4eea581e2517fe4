"""Pytree tools built on the core (as in ``jax.tree_util``): :func:`reduce`, :func:`all`,
:func:`transpose`, :func:`register_dataclass` and :class:`Partial`."""
from __future__ import annotations

import builtins
import dataclasses
import functools
from typing import Any, Callable, Sequence, TypeVar

from functx.tree._core import (IsLeaf, PyTree, PyTreeDef, flatten, flatten_up_to, leaves,
                               register_pytree_node, structure)
from functx.tree._keys import GetAttrKey

T = TypeVar("T")
_NO_INITIALIZER = object()

# Reductions and transposition

def reduce(function: Callable[[T, Any], T], tree: PyTree, initializer: Any = _NO_INITIALIZER,
           is_leaf: IsLeaf = None) -> T:
    """``functools.reduce`` over the leaves of ``tree`` (``jax.tree_util.tree_reduce``).

    Args:
      function: ``function(accumulated, leaf) -> accumulated``.
      tree: the pytree.
      initializer: the starting value; without it the first leaf starts.
      is_leaf: optional predicate that stops recursion, as in :func:`flatten`.
    Returns:
      The accumulated value.
    Raises:
      TypeError: if ``tree`` has no leaves and no ``initializer`` is given.

    Example:
      >>> reduce(lambda a, b: a + b, {'x': 1, 'y': (2, 3)}, 10)
      16
    """
    flat = leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        if not flat:
            raise TypeError(f"reduce() of the tree {structure(tree, is_leaf)!r}, which has no "
                            "leaves, needs an initializer.")
        return functools.reduce(function, flat)
    return functools.reduce(function, flat, initializer)


def all(tree: PyTree, *, is_leaf: IsLeaf = None) -> bool:
    """Whether every leaf of ``tree`` is truthy (True for a tree without leaves).

    Args:
      tree: the pytree.
      is_leaf: optional predicate that stops recursion, as in :func:`flatten`.
    Returns:
      ``builtins.all(leaves(tree))``.

    Example:
      >>> all({'a': True, 'b': (1, None)}), all([True, 0])
      (True, False)
    """
    return builtins.all(leaves(tree, is_leaf))


def transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
              pytree_to_transpose: PyTree) -> PyTree:
    """Turns a tree of structure ``outer`` of trees of structure ``inner`` inside out.

    Same rule as ``jax.tree_util.tree_transpose``: the leaves are read in flatten order as
    ``outer.num_leaves`` groups of ``inner.num_leaves``, and only the number of leaves is
    checked.

    Args:
      outer_treedef: the structure of the outer level.
      inner_treedef: the structure of each inner tree; None takes that of the first one.
      pytree_to_transpose: the tree to transpose.
    Returns:
      A tree of structure ``inner`` of trees of structure ``outer``.
    Raises:
      TypeError: if the tree does not have ``outer.num_leaves * inner.num_leaves`` leaves.
      ValueError: if ``inner_treedef`` is None and the tree lacks the outer structure.

    Example:
      >>> transpose(structure([0, 0]), structure((0, 0)), [(1, 2), (3, 4)])
      ([1, 3], [2, 4])
    """
    flat, treedef = flatten(pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = structure(flatten_up_to(outer_treedef, pytree_to_transpose)[0])
    inner_n, outer_n = inner_treedef.num_leaves, outer_treedef.num_leaves
    if len(flat) != inner_n * outer_n:
        raise TypeError(f"transpose: the tree {treedef!r} has {len(flat)} leaves, but an outer "
                        f"structure of {outer_n} leaves holding inner trees of {inner_n} needs "
                        f"{inner_n * outer_n}: expected {outer_treedef.compose(inner_treedef)!r}.")
    rows = [flat[i * inner_n:(i + 1) * inner_n] for i in range(outer_n)]
    return inner_treedef.unflatten([outer_treedef.unflatten(list(col)) for col in zip(*rows)]
                                   if outer_n else [outer_treedef.unflatten([])] * inner_n)


# ----------------------------------------------------------------------------------------
# Dataclasses and partial functions as pytrees

def register_dataclass(nodetype: type, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None,
                       drop_fields: Sequence[str] = ()) -> type:
    """Registers a dataclass (or any class built from keyword arguments) as a pytree node.

    ``data_fields`` are the children (their paths are :class:`GetAttrKey`); ``meta_fields``
    are static: they go into the ``PyTreeDef`` (so must be hashable) and transforms do not
    trace them. For a dataclass both may be left out: fields marked
    ``dataclasses.field(metadata=dict(static=True))`` are meta fields, the others data
    fields. Same signature and rules as ``jax.tree_util.register_dataclass``; usable as a
    decorator.

    Args:
      nodetype: the class; it is rebuilt as ``nodetype(**fields)``.
      data_fields: names of the fields that are children.
      meta_fields: names of the static fields.
      drop_fields: dataclass fields to leave out of both lists (their defaults are used).
    Returns:
      ``nodetype`` itself, registered.
    Raises:
      TypeError: only one of ``data_fields``/``meta_fields`` given, or neither for a class
        that is not a dataclass.
      ValueError: for a dataclass, the lists are not exactly its ``init`` fields (less
        ``drop_fields``), or they overlap; or the class is already registered.

    Example:
      >>> @register_dataclass
      ... @dataclasses.dataclass
      ... class Layer:
      ...     w: Any
      ...     act: str = dataclasses.field(default='relu', metadata=dict(static=True))
      >>> flatten(Layer(w=1.0))
      ([1.0], PyTreeDef(CustomNode(Layer[('relu',)], [*])))
    """
    name = getattr(nodetype, "__qualname__", repr(nodetype))
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError(f"register_dataclass({name}): give both data_fields and "
                            f"meta_fields, or neither; got data_fields={data_fields!r}, "
                            f"meta_fields={meta_fields!r}.")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass({name}): data_fields and meta_fields are "
                            "needed for a class that is not a dataclass.")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data, meta = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if {*data, *meta} != init:
            raise ValueError(
                f"register_dataclass({name}): data_fields and meta_fields must name exactly the "
                f"dataclass fields with init=True; missing {sorted(init - {*data, *meta})}, "
                f"unexpected {sorted({*data, *meta} - init)} (list unwanted fields in "
                "drop_fields).")
    if set(data) & set(meta):
        raise ValueError(f"register_dataclass({name}): data_fields and meta_fields overlap "
                         f"in {sorted(set(data) & set(meta))}; a field is one or the other.")

    def flatten_fn(x: Any) -> tuple[tuple, tuple]:
        return tuple(getattr(x, n) for n in data), tuple(getattr(x, n) for n in meta)

    def flatten_with_keys_fn(x: Any) -> tuple[list, tuple]:
        return ([(GetAttrKey(n), getattr(x, n)) for n in data],
                tuple(getattr(x, n) for n in meta))

    def unflatten_fn(aux: tuple, children: list) -> Any:
        return nodetype(**dict(zip(meta, aux)), **dict(zip(data, children)))

    register_pytree_node(nodetype, flatten_fn, unflatten_fn, flatten_with_keys_fn)
    return nodetype


class _CallableShim:
    """Wraps a ``functools.partial`` given to :class:`Partial`, so that its arguments are
    not merged into the Partial's (and stay out of the pytree); calls, hashes and compares
    as the wrapped function."""

    def __init__(self, fun: Callable) -> None:
        self.fun = fun

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self.fun(*args, **kw)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other: Any) -> bool:
        return self.fun == (other.fun if isinstance(other, _CallableShim) else other)

    def __repr__(self) -> str:
        return f"_CallableShim({self.fun!r})"


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree (as ``jax.tree_util.Partial``).

    The bound positional and keyword arguments are its children; the function is static
    (part of the ``PyTreeDef``). So a Partial can be passed through ``grad``, ``vmap`` or
    ``jit`` as an argument, its bound arrays being traced like any other leaves.

    Example:
      >>> add3 = Partial(lambda x, y, z: x + y + z, 1, z=10)
      >>> add3(2), leaves(add3)
      (13, [1, 10])
    """

    def __new__(cls, func: Callable, *args: Any, **kw: Any) -> Partial:
        if isinstance(func, functools.partial):
            # functools.partial.__new__ would merge func's own bound arguments into ours.
            original, func = func, _CallableShim(func)
            out = super().__new__(cls, func, *args, **kw)
            func.func, func.args, func.keywords = (original.func, original.args,
                                                   original.keywords)
            return out
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, cs: Partial(func, *cs[0], **cs[1]))
