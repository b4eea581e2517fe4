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
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Iterable

PyTree = Any
IsLeaf = Callable[[Any], bool] | None
_MISSING = object()


class _Node:
    """How one node type flattens, rebuilds, names a child's path key and prints."""

    __slots__ = ("cls", "flatten", "unflatten", "key", "show")

    def __init__(self, cls, flatten, unflatten, key=None, show=None):
        self.cls, self.flatten, self.unflatten = cls, flatten, unflatten
        self.key = key or (lambda aux, i: f"[{i}]")
        self.show = show or (
            lambda aux, cs: f"CustomNode({cls.__name__}[{aux!r}], [{', '.join(cs)}])")


def _sorted_keys(d: dict) -> tuple:
    try:
        return tuple(sorted(d))
    except TypeError:
        return tuple(sorted(d, key=lambda k: (type(k).__name__, repr(k))))


def _dict_flatten(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], keys


def _show_dict(keys, cs):
    return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(keys, cs)) + "}"


def _show_fields(name, fields, cs):
    return f"{name}(" + ", ".join(f"{f}={c}" for f, c in zip(fields, cs)) + ")"


# Explicitly registered node types (built-ins and user types); registering twice is an error.
_registry: dict[type, _Node] = {}
# Dispatch cache: every type seen so far -> its node handler, or None for a leaf type.
_dispatch: dict[type, _Node | None] = {}


def _register(node: _Node) -> None:
    if node.cls in _registry:
        raise ValueError(f"Type {node.cls.__module__}.{node.cls.__qualname__} is already "
                         "registered as a pytree node; register each type only once.")
    _registry[node.cls] = _dispatch[node.cls] = node


_register(_Node(tuple, lambda t: (t, None), lambda aux, cs: tuple(cs), show=lambda aux, cs:
                "(" + ", ".join(cs) + ("," if len(cs) == 1 else "") + ")"))
_register(_Node(list, lambda t: (t, None), lambda aux, cs: list(cs),
                show=lambda aux, cs: "[" + ", ".join(cs) + "]"))
_register(_Node(dict, _dict_flatten, lambda keys, cs: dict(zip(keys, cs)),
                key=lambda keys, i: f"[{keys[i]!r}]", show=_show_dict))
_register(_Node(type(None), lambda n: ((), None), lambda aux, cs: None,
                show=lambda aux, cs: "None"))
_register(_Node(collections.OrderedDict, lambda d: (list(d.values()), tuple(d)),
                lambda keys, cs: collections.OrderedDict(zip(keys, cs)),
                key=lambda keys, i: f"[{keys[i]!r}]",
                show=lambda keys, cs: f"OrderedDict({_show_dict(keys, cs)})"))
_register(_Node(collections.defaultdict,
                lambda d: ([d[k] for k in _sorted_keys(d)], (d.default_factory, _sorted_keys(d))),
                lambda aux, cs: collections.defaultdict(aux[0], zip(aux[1], cs)),
                key=lambda aux, i: f"[{aux[1][i]!r}]",
                show=lambda aux, cs: f"defaultdict({aux[0]!r}, {_show_dict(aux[1], cs)})"))


def _classify(cls: type) -> _Node | None:
    """Finds (and caches) the handler of a type not registered explicitly: None = leaf."""
    node = None
    fields = getattr(cls, "_fields", None)
    if issubclass(cls, tuple) and isinstance(fields, tuple):
        node = _Node(cls, lambda t: (t, None), lambda aux, cs: cls(*cs),
                     key=lambda aux, i: f".{fields[i]}",
                     show=lambda aux, cs: _show_fields(cls.__name__, fields, cs))
    elif getattr(cls, "__attrs_attrs__", None) is not None:
        attrs_ = [a for a in cls.__attrs_attrs__ if a.init]
        names = tuple(a.name for a in attrs_)
        aliases = tuple(getattr(a, "alias", None) or a.name.lstrip("_") for a in attrs_)
        node = _Node(cls, lambda o: ([getattr(o, n) for n in names], None),
                     lambda aux, cs: cls(**dict(zip(aliases, cs))),
                     key=lambda aux, i: f".{names[i]}",
                     show=lambda aux, cs: _show_fields(cls.__name__, names, cs))
    _dispatch[cls] = node
    return node


def _handler(cls: type) -> _Node | None:
    node = _dispatch.get(cls, _MISSING)
    return _classify(cls) if node is _MISSING else node


def register_pytree_node(cls: type, flatten_fn: Callable[[Any], tuple[Iterable, Any]],
                         unflatten_fn: Callable[[Any, Iterable], Any]) -> None:
    """Registers ``cls`` as a pytree node type (same signature as ``jax.tree_util``).

    Args:
      cls: the node type; instances are matched by exact type.
      flatten_fn: ``flatten_fn(obj) -> (children, aux_data)``; ``aux_data`` must be
        hashable and comparable, since it becomes part of the (hashed) ``PyTreeDef``.
      unflatten_fn: ``unflatten_fn(aux_data, children) -> obj``; ``children`` is a list.
    Returns:
      None.
    Raises:
      TypeError: if ``cls`` is not a type.
      ValueError: if ``cls`` is already registered (built-in node types included).

    Example:
      >>> class Pair:
      ...     def __init__(self, a, b): self.a, self.b = a, b
      >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
      ...                      lambda aux, cs: Pair(*cs))
      >>> leaves(Pair(1, (2, 3)))
      [1, 2, 3]
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree_node expects a class, got {cls!r}; pass the type.")
    _register(_Node(cls, flatten_fn, unflatten_fn))


def register_leaf_type(cls: type) -> None:
    """Declares that instances of ``cls`` are leaves, even if it is an attrs class or a
    namedtuple (functx's own ``ShapeDtype`` is registered this way).

    Args:
      cls: the type to treat as a leaf.

    Example:
      >>> Spec = collections.namedtuple("Spec", "shape")
      >>> register_leaf_type(Spec)
      >>> leaves([Spec((2,))])
      [Spec(shape=(2,))]
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_leaf_type expects a class, got {cls!r}; pass the type.")
    _dispatch[cls] = None


def register_pytree_node_class(cls: type) -> type:
    """Class decorator registering ``cls`` via its ``tree_flatten`` / ``tree_unflatten``.

    Args:
      cls: a class defining ``tree_flatten(self) -> (children, aux)`` and the classmethod
        ``tree_unflatten(cls, aux, children)``.
    Returns:
      ``cls`` itself, unchanged.
    Raises:
      ValueError: if ``cls`` is already registered.

    Example:
      >>> @register_pytree_node_class
      ... class Box:
      ...     def __init__(self, x): self.x = x
      ...     def tree_flatten(self): return (self.x,), None
      ...     @classmethod
      ...     def tree_unflatten(cls, aux, children): return cls(*children)
      >>> leaves(Box([1, 2]))
      [1, 2]
    """
    register_pytree_node(cls, lambda o: o.tree_flatten(), cls.tree_unflatten)
    return cls


# Internal structure: a leaf is None; a node is the tuple (handler, aux_data, children).

def _count(node) -> tuple[int, int]:
    """(number of leaves, number of nodes including leaves) under ``node``."""
    if node is None:
        return 1, 1
    n_leaves, n_nodes = 0, 1
    for c in node[2]:
        a, b = _count(c)
        n_leaves, n_nodes = n_leaves + a, n_nodes + b
    return n_leaves, n_nodes


def _show(node) -> str:
    return "*" if node is None else node[0].show(node[1], [_show(c) for c in node[2]])


class PyTreeDef:
    """Immutable, hashable description of a pytree's structure (leaves replaced by ``*``).

    Two treedefs are equal when they have the same node types, aux data (e.g. dict keys)
    and shapes; the hash is computed once, on first use, so it is cheap as a cache key.
    """

    __slots__ = ("_node", "_num_leaves", "_hash")

    def __init__(self, node, num_leaves: int | None = None):
        object.__setattr__(self, "_node", node)
        object.__setattr__(self, "_num_leaves",
                           _count(node)[0] if num_leaves is None else num_leaves)
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name, value):
        raise AttributeError("PyTreeDef is immutable.")

    @property
    def num_leaves(self) -> int:
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        return _count(self._node)[1]

    def children(self) -> list[PyTreeDef]:
        """The treedefs of the root's children (an empty list for a leaf or ``None``)."""
        return [] if self._node is None else [PyTreeDef(c) for c in self._node[2]]

    def unflatten(self, leaves: Iterable[Any]) -> PyTree:
        """Builds the pytree of this structure with ``leaves``; see :func:`unflatten`."""
        leaves = leaves if isinstance(leaves, list) else list(leaves)
        if len(leaves) != self._num_leaves:
            raise ValueError(f"{self!r} expects {self._num_leaves} leaves but "
                             f"{len(leaves)} were given; pass exactly one value per leaf.")
        return _unflatten(self._node, iter(leaves))

    def __eq__(self, other) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self is other or self._node == other._node

    def __hash__(self) -> int:
        if self._hash is None:
            try:
                object.__setattr__(self, "_hash", hash(self._node))
            except TypeError as e:
                raise TypeError(f"{self!r} cannot be hashed because some node's aux data is "
                                f"unhashable ({e}); make flatten_fn return hashable aux "
                                "data (e.g. a tuple instead of a list).") from None
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({_show(self._node)})"


def _flatten(x, out: list, is_leaf: IsLeaf):
    if is_leaf is not None and is_leaf(x):
        out.append(x)
        return None
    node = _dispatch.get(type(x), _MISSING)
    if node is _MISSING:
        node = _classify(type(x))
    if node is None:
        out.append(x)
        return None
    children, aux = node.flatten(x)
    return node, aux, tuple([_flatten(c, out, is_leaf) for c in children])


def _unflatten(node, it):
    if node is None:
        return next(it)
    return node[0].unflatten(node[1], [_unflatten(c, it) for c in node[2]])


def flatten(tree: PyTree, is_leaf: IsLeaf = None) -> tuple[list[Any], PyTreeDef]:
    """Flattens a pytree into its leaves (depth first, dict keys sorted) and its structure.

    Args:
      tree: the pytree.
      is_leaf: optional predicate; a subtree for which it returns True is kept as a leaf.
    Returns:
      ``(leaves, treedef)``: a new list of leaves and the ``PyTreeDef`` of ``tree``.
    Raises:
      Only what a user-registered ``flatten_fn`` or ``is_leaf`` raises.

    Example:
      >>> flatten({'w': 1, 'b': (2, None)})
      ([2, 1], PyTreeDef({'b': (*, None), 'w': *}))
    """
    out: list = []
    node = _flatten(tree, out, is_leaf)
    return out, PyTreeDef(node, len(out))


def unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> PyTree:
    """Rebuilds a pytree of structure ``treedef`` from ``leaves`` (inverse of flatten).

    Args:
      treedef: the structure, as returned by :func:`flatten` or :func:`structure`.
      leaves: one value per leaf, in flatten order.
    Returns:
      A new pytree; dicts are built with their keys in sorted order.
    Raises:
      ValueError: if the number of leaves differs from ``treedef.num_leaves``.

    Example:
      >>> unflatten(structure((0, [0, 0])), [1, 2, 3])
      (1, [2, 3])
    """
    return treedef.unflatten(leaves)


def leaves(tree: PyTree, is_leaf: IsLeaf = None) -> list[Any]:
    """The leaves of ``tree`` in flatten order.

    Args:
      tree: the pytree.
      is_leaf: optional predicate that stops recursion, as in :func:`flatten`.
    Returns:
      A new list of leaves.
    Raises:
      Only what a user-registered ``flatten_fn`` or ``is_leaf`` raises.

    Example:
      >>> leaves([3, {'b': 2, 'a': 1}, None])
      [3, 1, 2]
    """
    out: list = []
    _flatten(tree, out, is_leaf)
    return out


def structure(tree: PyTree, is_leaf: IsLeaf = None) -> PyTreeDef:
    """The ``PyTreeDef`` of ``tree``.

    Args:
      tree: the pytree.
      is_leaf: optional predicate that stops recursion, as in :func:`flatten`.
    Returns:
      The structure of ``tree``.
    Raises:
      Only what a user-registered ``flatten_fn`` or ``is_leaf`` raises.

    Example:
      >>> structure((1, [2, 3], None))
      PyTreeDef((*, [*, *], None))
    """
    return flatten(tree, is_leaf)[1]


def _first_difference(a, b, prefix_ok: bool, path: str = ""):
    """First place where structures ``a`` and ``b`` differ: (path, sub_a, sub_b) or None.

    With ``prefix_ok``, a leaf of ``a`` matches any subtree of ``b``.
    """
    if a is None and (prefix_ok or b is None):
        return None
    if a is None or b is None or a[0] is not b[0] or a[1] != b[1] or len(a[2]) != len(b[2]):
        return path or "the root", a, b
    for i, (ca, cb) in enumerate(zip(a[2], b[2])):
        found = _first_difference(ca, cb, prefix_ok, path + a[0].key(a[1], i))
        if found:
            return found
    return None


def _mismatch(what: str, a: PyTreeDef, b: PyTreeDef, prefix_ok: bool) -> ValueError:
    diff = _first_difference(a._node, b._node, prefix_ok)
    where = (f" They first differ at {diff[0]}: {_show(diff[1])} vs {_show(diff[2])}."
             if diff else "")
    return ValueError(f"{what}: expected structure {a!r} but got {b!r}.{where}")


def map(f: Callable[..., Any], tree: PyTree, *rest: PyTree, is_leaf: IsLeaf = None) -> PyTree:
    """Applies ``f`` leafwise to one or more pytrees of the same structure.

    Args:
      f: called as ``f(leaf, *leaves_of_rest)`` once per leaf of ``tree``.
      tree: the first pytree; it fixes the output structure.
      *rest: more pytrees, each with exactly the structure of ``tree``.
      is_leaf: optional predicate that stops recursion, applied to every tree.
    Returns:
      A pytree with the structure of ``tree`` holding the results of ``f``.
    Raises:
      ValueError: if a tree in ``rest`` has a different structure; the message shows both
        structures and the first place where they differ.

    Example:
      >>> map(lambda x, y: x + y, {'a': 1, 'b': (2, 3)}, {'a': 10, 'b': (20, 30)})
      {'a': 11, 'b': (22, 33)}
    """
    flat, treedef = flatten(tree, is_leaf)
    if not rest:
        return _unflatten(treedef._node, iter([f(x) for x in flat]))
    columns = [flat]
    for i, other in enumerate(rest):
        other_flat, other_def = flatten(other, is_leaf)
        if other_def != treedef:
            raise _mismatch(f"map() needs every tree to have the structure of the first one, "
                            f"but tree number {i + 2} does not", treedef, other_def, False)
        columns.append(other_flat)
    return _unflatten(treedef._node, iter([f(*xs) for xs in zip(*columns)]))


def _up_to(node, x, out: list) -> bool:
    if node is None:
        out.append(x)
        return True
    handler, aux, kids = node
    if _handler(type(x)) is not handler:
        return False
    children, x_aux = handler.flatten(x)
    children = list(children)
    if x_aux != aux or len(children) != len(kids):
        return False
    return all(_up_to(k, c, out) for k, c in zip(kids, children))


def flatten_up_to(prefix_treedef: PyTreeDef, tree: PyTree) -> list[PyTree]:
    """Flattens ``tree`` only as deep as ``prefix_treedef`` goes.

    Args:
      prefix_treedef: a structure that must be a prefix of ``tree``'s structure.
      tree: the pytree to split.
    Returns:
      A list with one entry per leaf of ``prefix_treedef``: the subtree of ``tree`` there.
    Raises:
      ValueError: if ``tree`` does not have ``prefix_treedef`` as a prefix; the message
        names both structures and the first place where they differ.

    Example:
      >>> flatten_up_to(structure((0, 0)), ([1, 2], {'a': 3}))
      [[1, 2], {'a': 3}]
    """
    out: list = []
    if not _up_to(prefix_treedef._node, tree, out):
        raise _mismatch("The tree does not have the expected prefix structure (each leaf of "
                        "the prefix may stand for a whole subtree)",
                        prefix_treedef, structure(tree), True)
    return out


def broadcast_prefix(prefix_tree: PyTree, full_tree: PyTree,
                     is_leaf: IsLeaf = None) -> list[Any]:
    """For each leaf of ``full_tree``, the leaf of ``prefix_tree`` that covers it.

    This is the prefix semantics of ``vmap``'s ``in_axes``: a leaf of the prefix applies to
    the whole subtree of ``full_tree`` at its position.

    Args:
      prefix_tree: a pytree whose structure is a prefix of ``full_tree``'s.
      full_tree: the pytree to broadcast against (flattened without ``is_leaf``).
      is_leaf: predicate applied to ``prefix_tree`` only; pass ``lambda x: x is None`` to
        make ``None`` a prefix leaf (as in ``in_axes``).
    Returns:
      A list as long as ``leaves(full_tree)``.
    Raises:
      ValueError: if ``prefix_tree``'s structure is not a prefix of ``full_tree``'s.

    Example:
      >>> broadcast_prefix((0, None), ([1, 2], {'p': 3}), is_leaf=lambda x: x is None)
      [0, 0, None]
    """
    prefix_leaves, prefix_def = flatten(prefix_tree, is_leaf)
    out: list = []
    for p, sub in zip(prefix_leaves, flatten_up_to(prefix_def, full_tree)):
        out.extend([p] * len(leaves(sub)))
    return out
