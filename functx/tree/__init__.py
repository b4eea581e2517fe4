"""Pytrees: nested containers of arrays, flattened to a list of leaves and a structure.

A pytree is a nested structure of *nodes* whose *leaves* are anything else. Nodes are
tuple, list, dict (children in sorted key order, as in JAX), ``None`` (a node with no
children, not a leaf), namedtuples (any tuple subclass with ``_fields``),
``collections.OrderedDict`` (insertion order), ``collections.defaultdict`` (sorted keys),
attrs classes (the fields with ``init=True``, in order) and types registered with
:func:`register_pytree_node`. Subclasses of list and dict, arrays, scalars and strings are
leaves. Types are matched exactly (by ``type(x)``), as in JAX.

Decisions not fixed by the design brief:

* Dict keys that cannot be compared with each other (e.g. ``{1: a, 'x': b}``) are ordered
  by ``(type name, repr(key))`` instead of raising.
* :func:`map` requires every tree to have exactly the first tree's structure, with
  ``is_leaf`` applied to all of them; use :func:`broadcast_prefix` for prefix semantics.
* ``PyTreeDef.num_nodes`` counts leaves too, as JAX does.
* Every function here walks trees with an explicit stack, not recursion, so trees of any
  depth work (JAX handles depth 500+ too); a ``PyTreeDef`` is stored flat (pre-order), so
  comparing and hashing deep structures does not recurse either.
* The dispatch cache of types met while flattening holds Python-defined (heap) classes
  weakly: a namedtuple or attrs class created on the fly can be garbage collected once
  nothing else uses it. A ``PyTreeDef`` keeps the classes of its nodes alive (they are its
  aux data), so it can always be unflattened.

Key paths (:func:`flatten_with_path`, :func:`map_with_path`, :func:`leaves_with_path`,
:func:`keystr`) use ``jax.tree_util``'s key classes and formats: :class:`DictKey` for dict
keys (``['w']``), :class:`SequenceKey` for list/tuple positions (``[0]``),
:class:`GetAttrKey` for namedtuple, attrs and :func:`register_dataclass` fields (``.w``) and
:class:`FlattenedIndexKey` for the children of other registered nodes
(``[<flat index 0>]``). Structure-mismatch messages write the last as ``[0]``.

Layout: the node registry, ``PyTreeDef`` and the walks are in ``functx/tree/_core.py``, the
key path entries and :func:`keystr` in ``_keys.py``, and :func:`reduce`, :func:`all`,
:func:`transpose`, :func:`register_dataclass` and :class:`Partial` in ``_tools.py``. Flat
vectors of a pytree's arrays (``ravel_pytree``) are in :mod:`functx.flatten_util`, which
needs ``functx.numpy`` (this package is the lowest layer).

Example:
    >>> from functx import tree
    >>> tree.map(lambda x: x * 2, {'w': 1, 'b': (2, None)})
    {'b': (4, None), 'w': 2}
    >>> [tree.keystr(p) for p, _ in tree.leaves_with_path({'layers': [{'w': 0}]})]
    ["['layers'][0]['w']"]
"""

from functx.tree._core import (
    IsLeaf,
    PathIsLeaf,
    PyTree,
    PyTreeDef,
    broadcast_prefix,
    flatten,
    flatten_up_to,
    flatten_with_path,
    leaves,
    leaves_with_path,
    map,
    map_with_path,
    register_leaf_type,
    register_pytree_node,
    register_pytree_node_class,
    structure,
    unflatten,
)
from functx.tree._keys import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    KeyEntry,
    KeyPath,
    SequenceKey,
    keystr,
)
from functx.tree._tools import Partial, all, reduce, register_dataclass, transpose

__all__ = [
    "PyTree", "PyTreeDef", "IsLeaf", "PathIsLeaf",
    "flatten", "unflatten", "leaves", "structure", "map", "flatten_up_to", "broadcast_prefix",
    "register_pytree_node", "register_pytree_node_class", "register_leaf_type",
    "register_dataclass", "Partial",
    "flatten_with_path", "leaves_with_path", "map_with_path", "keystr",
    "KeyEntry", "KeyPath", "DictKey", "SequenceKey", "GetAttrKey", "FlattenedIndexKey",
    "reduce", "all", "transpose",
]
