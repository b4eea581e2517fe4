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
"""

from __future__ import annotations

import collections
import weakref
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
# Dispatch, strong part: registered types (nodes and leaves) and types that can never be freed
# (built-in / C extension types such as int, float, np.ndarray) -> node handler, None = leaf.
_dispatch: dict[type, _Node | None] = {}
# Dispatch, weak part: Python-defined classes met while flattening, keyed by id(cls) and
# dropped by a weakref callback when the class is collected (the callback runs before the
# class's memory, and so its id, can be reused). The handlers stored here never reference
# their class (it travels in the aux data), or the class could never be collected.
_heap_dispatch: dict[int, _Node | None] = {}
_heap_refs: dict[int, weakref.ref] = {}
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: the type was created at run time and can be freed


def _forget(key: int) -> Callable[[weakref.ref], None]:
    def callback(_ref: weakref.ref) -> None:
        _heap_dispatch.pop(key, None)
        _heap_refs.pop(key, None)
    return callback


def _cache(cls: type, node: _Node | None) -> None:
    if cls.__flags__ & _HEAPTYPE:
        key = id(cls)
        _heap_refs[key] = weakref.ref(cls, _forget(key))
        _heap_dispatch[key] = node
    else:
        _dispatch[cls] = node


def _register(node: _Node) -> None:
    if node.cls in _registry:
        raise ValueError(f"Type {node.cls.__module__}.{node.cls.__qualname__} is already "
                         "registered as a pytree node; register each type only once.")
    _registry[node.cls] = _dispatch[node.cls] = node
    _heap_dispatch.pop(id(node.cls), None)


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
    """Finds (and caches) the handler of a type not registered explicitly: None = leaf.

    The handlers of namedtuples and attrs classes put the class itself in the aux data and
    close over field names only, so the (weak) dispatch cache does not keep the class alive.
    """
    node = None
    fields = getattr(cls, "_fields", None)
    if issubclass(cls, tuple) and isinstance(fields, tuple):
        node = _Node(None, lambda t: (t, type(t)), lambda c, cs: c(*cs),
                     key=lambda c, i: f".{fields[i]}",
                     show=lambda c, cs: _show_fields(c.__name__, fields, cs))
    elif getattr(cls, "__attrs_attrs__", None) is not None:
        attrs_ = [a for a in cls.__attrs_attrs__ if a.init]
        names = tuple(a.name for a in attrs_)
        aliases = tuple(getattr(a, "alias", None) or a.name.lstrip("_") for a in attrs_)
        node = _Node(None, lambda o: ([getattr(o, n) for n in names], type(o)),
                     lambda c, cs: c(**dict(zip(aliases, cs))),
                     key=lambda c, i: f".{names[i]}",
                     show=lambda c, cs: _show_fields(c.__name__, names, cs))
    _cache(cls, node)
    return node


def _handler(cls: type) -> _Node | None:
    node = _dispatch.get(cls, _MISSING)
    if node is _MISSING:
        node = _heap_dispatch.get(id(cls), _MISSING)
        if node is _MISSING:
            node = _classify(cls)
    return node


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
    _heap_dispatch.pop(id(cls), None)


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


# Internal structure ("spec"): a flat tuple describing the tree in pre-order (depth first,
# parent before children), one entry per node: None for a leaf, (handler, aux_data,
# number_of_children) for an inner node. Being flat, it compares and hashes without recursion.

def _subtree_end(spec: tuple, i: int) -> int:
    """The index just past the subtree of ``spec`` that starts at index ``i``."""
    need = 1
    while need:
        e = spec[i]
        i += 1
        need += -1 if e is None else e[2] - 1
    return i


def _show(spec: tuple) -> str:
    """The text of a spec, built bottom up (children are on the stack, first child on top)."""
    stack: list[str] = []
    for e in reversed(spec):
        if e is None:
            stack.append("*")
            continue
        n = e[2]
        kids = stack[-n:][::-1] if n else []
        if n:
            del stack[-n:]
        stack.append(e[0].show(e[1], kids))
    return stack[0]


class PyTreeDef:
    """Immutable, hashable description of a pytree's structure (leaves replaced by ``*``).

    Two treedefs are equal when they have the same node types, aux data (e.g. dict keys)
    and shapes; the hash is computed once, on first use, so it is cheap as a cache key.
    """

    __slots__ = ("_spec", "_num_leaves", "_hash")

    def __init__(self, spec: tuple, num_leaves: int | None = None):
        object.__setattr__(self, "_spec", spec)
        object.__setattr__(self, "_num_leaves",
                           spec.count(None) if num_leaves is None else num_leaves)
        object.__setattr__(self, "_hash", None)

    def __setattr__(self, name, value):
        raise AttributeError("PyTreeDef is immutable.")

    @property
    def num_leaves(self) -> int:
        return self._num_leaves

    @property
    def num_nodes(self) -> int:
        return len(self._spec)

    def children(self) -> list[PyTreeDef]:
        """The treedefs of the root's children (an empty list for a leaf or ``None``)."""
        spec, out, i = self._spec, [], 1
        while i < len(spec):
            j = _subtree_end(spec, i)
            out.append(PyTreeDef(spec[i:j]))
            i = j
        return out

    def unflatten(self, leaves: Iterable[Any]) -> PyTree:
        """Builds the pytree of this structure with ``leaves``; see :func:`unflatten`."""
        leaves = leaves if isinstance(leaves, list) else list(leaves)
        if len(leaves) != self._num_leaves:
            raise ValueError(f"{self!r} expects {self._num_leaves} leaves but "
                             f"{len(leaves)} were given; pass exactly one value per leaf.")
        return _unflatten(self._spec, leaves)

    def __eq__(self, other) -> bool:
        if not isinstance(other, PyTreeDef):
            return NotImplemented
        return self is other or self._spec == other._spec

    def __hash__(self) -> int:
        if self._hash is None:
            try:
                object.__setattr__(self, "_hash", hash(self._spec))
            except TypeError as e:
                raise TypeError(f"{self!r} cannot be hashed because some node's aux data is "
                                f"unhashable ({e}); make flatten_fn return hashable aux "
                                "data (e.g. a tuple instead of a list).") from None
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({_show(self._spec)})"


def _flatten(tree: PyTree, out: list, is_leaf: IsLeaf) -> tuple:
    """Appends the leaves of ``tree`` to ``out`` and returns its spec.

    Iterative: ``it`` iterates over the children of the node being visited and ``stack``
    holds its ancestors' iterators, so a node's leaf children are handled in one tight loop
    and depth costs no Python frames.
    """
    spec: list = []
    add_leaf, add_entry = out.append, spec.append
    dispatch, heap = _dispatch.get, _heap_dispatch.get
    stack: list = []  # the iterators of the open ancestors of the node being visited
    it = iter((tree,))
    while True:
        for x in it:
            if is_leaf is not None and is_leaf(x):
                add_leaf(x)
                add_entry(None)
                continue
            cls = type(x)
            node = dispatch(cls, _MISSING)
            if node is _MISSING:
                node = heap(id(cls), _MISSING)
                if node is _MISSING:
                    node = _classify(cls)
            if node is None:
                add_leaf(x)
                add_entry(None)
                continue
            children, aux = node.flatten(x)
            if type(children) is not list and type(children) is not tuple:
                children = list(children)
            add_entry((node, aux, len(children)))
            stack.append(it)
            it = iter(children)
            break
        else:
            if not stack:
                return tuple(spec)
            it = stack.pop()


def _unflatten(spec: tuple, leaves: list) -> PyTree:
    """Builds the tree of ``spec`` bottom up: walking the spec backwards, a node's children
    are the top entries of the stack (its first child on top)."""
    stack: list = []
    push = stack.append
    k = len(leaves)
    for e in reversed(spec):
        if e is None:
            k -= 1
            push(leaves[k])
            continue
        n = e[2]
        if n:
            kids = stack[-n:]
            del stack[-n:]
            kids.reverse()
        else:
            kids = []
        push(e[0].unflatten(e[1], kids))
    return stack[0]


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
    spec = _flatten(tree, out, is_leaf)
    return out, PyTreeDef(spec, len(out))


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


def _first_difference(a: tuple, b: tuple, prefix_ok: bool):
    """First place where specs ``a`` and ``b`` differ: (path, sub_a, sub_b) or None.

    With ``prefix_ok``, a leaf of ``a`` matches any subtree of ``b``. Walks both specs
    together; ``frames`` holds [entry, index of the next child, path] of the open nodes.
    """
    i = j = 0
    frames: list = []
    while i < len(a):
        if frames:
            top = frames[-1]
            path = top[2] + top[0][0].key(top[0][1], top[1])
            top[1] += 1
        else:
            path = ""
        ea, eb = a[i], b[j]
        if ea is None and (prefix_ok or eb is None):
            i, j = i + 1, _subtree_end(b, j)
        elif ea is None or eb is None or ea[0] is not eb[0] or ea[1] != eb[1] or ea[2] != eb[2]:
            return path or "the root", a[i:_subtree_end(a, i)], b[j:_subtree_end(b, j)]
        else:
            i, j = i + 1, j + 1
            frames.append([ea, 0, path])
        while frames and frames[-1][1] == frames[-1][0][2]:
            frames.pop()
    return None


def _mismatch(what: str, a: PyTreeDef, b: PyTreeDef, prefix_ok: bool) -> ValueError:
    diff = _first_difference(a._spec, b._spec, prefix_ok)
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
        return _unflatten(treedef._spec, [f(x) for x in flat])
    columns = [flat]
    for i, other in enumerate(rest):
        other_flat, other_def = flatten(other, is_leaf)
        if other_def != treedef:
            raise _mismatch(f"map() needs every tree to have the structure of the first one, "
                            f"but tree number {i + 2} does not", treedef, other_def, False)
        columns.append(other_flat)
    return _unflatten(treedef._spec, [f(*xs) for xs in zip(*columns)])


def _up_to(spec: tuple, x: PyTree, out: list) -> bool:
    """Splits ``x`` along the prefix ``spec`` (pre-order, with an explicit stack)."""
    todo = [x]
    for e in spec:
        x = todo.pop()
        if e is None:
            out.append(x)
            continue
        handler, aux, n = e
        if _handler(type(x)) is not handler:
            return False
        children, x_aux = handler.flatten(x)
        children = list(children)
        if x_aux != aux or len(children) != n:
            return False
        children.reverse()
        todo.extend(children)
    return True


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
    if not _up_to(prefix_treedef._spec, tree, out):
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
