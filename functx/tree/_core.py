"""The pytree machinery: node registry, flat ``PyTreeDef``, flatten/unflatten, map,
prefixes and key paths (the package docstring of :mod:`functx.tree` describes pytrees).

Every walk here uses an explicit stack, not recursion, so trees of any depth work; a
``PyTreeDef`` is stored flat (pre-order), so comparing and hashing deep structures does not
recurse either.
"""

from __future__ import annotations

import collections
import weakref
from typing import Any, Callable, Iterable

from functx.tree._keys import DictKey, FlattenedIndexKey, GetAttrKey, KeyPath, SequenceKey

PyTree = Any
IsLeaf = Callable[[Any], bool] | None
PathIsLeaf = Callable[..., bool] | None
_MISSING = object()


def _seq_key(aux: Any, i: int) -> SequenceKey:
    return SequenceKey(i)


class _Node:
    """How one node type flattens, rebuilds, names a child's path key and prints.

    ``key(aux, i)`` is the key path entry of child ``i``, unless ``flatten_keys`` (a
    user's ``flatten_with_keys_fn``: ``x -> ([(key, child), ...], aux)``) is given.
    """

    __slots__ = ("cls", "flatten", "unflatten", "key", "show", "flatten_keys")

    def __init__(self, cls, flatten, unflatten, key=None, show=None, flatten_keys=None):
        self.cls, self.flatten, self.unflatten = cls, flatten, unflatten
        self.flatten_keys = flatten_keys
        self.key = key or (lambda aux, i: FlattenedIndexKey(i))
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


_register(_Node(tuple, lambda t: (t, None), lambda aux, cs: tuple(cs), key=_seq_key,
                show=lambda aux, cs: "(" + ", ".join(cs) + ("," if len(cs) == 1 else "") + ")"))
_register(_Node(list, lambda t: (t, None), lambda aux, cs: list(cs), key=_seq_key,
                show=lambda aux, cs: "[" + ", ".join(cs) + "]"))
_register(_Node(dict, _dict_flatten, lambda keys, cs: dict(zip(keys, cs)),
                key=lambda keys, i: DictKey(keys[i]), show=_show_dict))
_register(_Node(type(None), lambda n: ((), None), lambda aux, cs: None,
                show=lambda aux, cs: "None"))
_register(_Node(collections.OrderedDict, lambda d: (list(d.values()), tuple(d)),
                lambda keys, cs: collections.OrderedDict(zip(keys, cs)),
                key=lambda keys, i: DictKey(keys[i]),
                show=lambda keys, cs: f"OrderedDict({_show_dict(keys, cs)})"))
_register(_Node(collections.defaultdict,
                lambda d: ([d[k] for k in _sorted_keys(d)], (d.default_factory, _sorted_keys(d))),
                lambda aux, cs: collections.defaultdict(aux[0], zip(aux[1], cs)),
                key=lambda aux, i: DictKey(aux[1][i]),
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
                     key=lambda c, i: GetAttrKey(fields[i]),
                     show=lambda c, cs: _show_fields(c.__name__, fields, cs))
    elif getattr(cls, "__attrs_attrs__", None) is not None:
        attrs_ = [a for a in cls.__attrs_attrs__ if a.init]
        names = tuple(a.name for a in attrs_)
        aliases = tuple(getattr(a, "alias", None) or a.name.lstrip("_") for a in attrs_)
        node = _Node(None, lambda o: ([getattr(o, n) for n in names], type(o)),
                     lambda c, cs: c(**dict(zip(aliases, cs))),
                     key=lambda c, i: GetAttrKey(names[i]),
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
                         unflatten_fn: Callable[[Any, Iterable], Any],
                         flatten_with_keys_fn: Callable[[Any], tuple[Iterable, Any]] | None = None
                         ) -> None:
    """Registers ``cls`` as a pytree node type (same signature as ``jax.tree_util``).

    Args:
      cls: the node type; instances are matched by exact type.
      flatten_fn: ``flatten_fn(obj) -> (children, aux_data)``; ``aux_data`` must be
        hashable and comparable, since it becomes part of the (hashed) ``PyTreeDef``.
      unflatten_fn: ``unflatten_fn(aux_data, children) -> obj``; ``children`` is a list.
      flatten_with_keys_fn: optional ``fn(obj) -> ([(key, child), ...], aux_data)``, giving
        the key path entries of the children (e.g. :class:`GetAttrKey`) that
        :func:`flatten_with_path` reports; without it they are :class:`FlattenedIndexKey`.
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
    _register(_Node(cls, flatten_fn, unflatten_fn, flatten_keys=flatten_with_keys_fn))


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

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """The structure of this tree with every leaf replaced by ``inner``'s structure.

        Example:
          >>> structure([0, None]).compose(structure((0, 0)))
          PyTreeDef([(*, *), None])
        """
        spec: list = []
        for e in self._spec:
            if e is None:
                spec.extend(inner._spec)
            else:
                spec.append(e)
        return PyTreeDef(tuple(spec), self._num_leaves * inner._num_leaves)

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


def _entry_text(key: Any) -> str:
    """A key path entry in structure-mismatch messages (a flat index reads ``[i]``)."""
    return f"[{key.key}]" if type(key) is FlattenedIndexKey else str(key)


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
            path = top[2] + _entry_text(top[0][0].key(top[0][1], top[1]))
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


# ----------------------------------------------------------------------------------------
# Key paths (jax.tree_util's flatten_with_path family)


def _flatten_with_path(tree: PyTree, is_leaf: PathIsLeaf,
                       takes_path: bool) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """:func:`_flatten` that also builds each leaf's key path (iterative in the same way:
    ``it`` iterates over ``(path, child)`` pairs of the node being visited)."""
    out: list = []
    spec: list = []
    add_leaf, add_entry = out.append, spec.append
    stack: list = []
    it = iter((((), tree),))
    while True:
        for path, x in it:
            if is_leaf is not None and (is_leaf(path, x) if takes_path else is_leaf(x)):
                add_leaf((path, x))
                add_entry(None)
                continue
            node = _handler(type(x))
            if node is None:
                add_leaf((path, x))
                add_entry(None)
                continue
            if node.flatten_keys is None:
                children, aux = node.flatten(x)
                key = node.key
                pairs = [(path + (key(aux, i),), c) for i, c in enumerate(children)]
            else:
                keyed, aux = node.flatten_keys(x)
                pairs = [(path + (k,), c) for k, c in keyed]
            add_entry((node, aux, len(pairs)))
            stack.append(it)
            it = iter(pairs)
            break
        else:
            if not stack:
                return out, PyTreeDef(tuple(spec), len(out))
            it = stack.pop()


def flatten_with_path(tree: PyTree, is_leaf: PathIsLeaf = None, is_leaf_takes_path: bool = False
                      ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """:func:`flatten` that also gives each leaf's key path (``jax.tree_util`` signature).

    Args:
      tree: the pytree.
      is_leaf: optional predicate that stops recursion, as in :func:`flatten`.
      is_leaf_takes_path: call ``is_leaf(path, x)`` instead of ``is_leaf(x)``.
    Returns:
      ``([(path, leaf), ...], treedef)``: each path is a tuple of key entries
      (:class:`DictKey`, :class:`SequenceKey`, :class:`GetAttrKey`,
      :class:`FlattenedIndexKey`); ``treedef`` is what :func:`flatten` gives.
    Raises:
      Only what a user-registered ``flatten_fn`` or ``is_leaf`` raises.

    Example:
      >>> flatten_with_path({'w': [1, 2]})[0]
      [((DictKey(key='w'), SequenceKey(idx=0)), 1), ((DictKey(key='w'), SequenceKey(idx=1)), 2)]
    """
    return _flatten_with_path(tree, is_leaf, is_leaf_takes_path)


def leaves_with_path(tree: PyTree, is_leaf: PathIsLeaf = None,
                     is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    """The ``(key path, leaf)`` pairs of ``tree`` in flatten order.

    Args:
      tree: the pytree.
      is_leaf: optional predicate that stops recursion, as in :func:`flatten`.
      is_leaf_takes_path: call ``is_leaf(path, x)`` instead of ``is_leaf(x)``.
    Returns:
      A list of ``(path, leaf)``; see :func:`flatten_with_path`.
    Raises:
      Only what a user-registered ``flatten_fn`` or ``is_leaf`` raises.

    Example:
      >>> [(keystr(p), x) for p, x in leaves_with_path({'layers': [{'b': 0}]})]
      [("['layers'][0]['b']", 0)]
    """
    return _flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def map_with_path(f: Callable[..., Any], tree: PyTree, *rest: PyTree, is_leaf: PathIsLeaf = None,
                  is_leaf_takes_path: bool = False) -> PyTree:
    """:func:`map` that also passes each leaf's key path: ``f(path, leaf, *others)``.

    Args:
      f: called as ``f(path, leaf, *leaves_of_rest)`` once per leaf of ``tree``.
      tree: the first pytree; it fixes the output structure.
      *rest: more pytrees, each with exactly the structure of ``tree`` (as in :func:`map`).
      is_leaf: optional predicate that stops recursion, applied to every tree.
      is_leaf_takes_path: call ``is_leaf(path, x)`` instead of ``is_leaf(x)``.
    Returns:
      A pytree with the structure of ``tree`` holding the results of ``f``.
    Raises:
      ValueError: if a tree in ``rest`` has a different structure (naming where).

    Example:
      >>> map_with_path(lambda p, x: f"{keystr(p)}={x}", {'a': [1], 'b': 2})
      {'a': ["['a'][0]=1"], 'b': "['b']=2"}
    """
    pairs, treedef = _flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    columns = [[p for p, _ in pairs], [x for _, x in pairs]]
    for i, other in enumerate(rest):
        other_pairs, other_def = _flatten_with_path(other, is_leaf, is_leaf_takes_path)
        if other_def != treedef:
            raise _mismatch(f"map_with_path() needs every tree to have the structure of the "
                            f"first one, but tree number {i + 2} does not", treedef, other_def,
                            False)
        columns.append([x for _, x in other_pairs])
    return _unflatten(treedef._spec, [f(*xs) for xs in zip(*columns)])
