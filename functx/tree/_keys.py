"""Key paths: how each leaf of a pytree is reached from the root, as in ``jax.tree_util``.

A key path is a tuple of entries, one per level: :class:`DictKey` (a dict key, printed
``['w']``), :class:`SequenceKey` (a list or tuple position, ``[0]``), :class:`GetAttrKey`
(a namedtuple, attrs or registered dataclass field, ``.w``) and :class:`FlattenedIndexKey`
(the position of a child of another registered node, ``[<flat index 0>]``).
:func:`keystr` joins them into text. The entries are frozen dataclasses: they compare and
hash by value (an entry of one class never equals one of another) and work with ``match``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    """A dict (OrderedDict, defaultdict) key on a key path; prints as ``['name']``."""

    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """A list or tuple position on a key path; prints as ``[0]``."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """An attribute (namedtuple, attrs or registered dataclass field); prints as ``.name``."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    """The position of a child of a node registered with :func:`register_pytree_node`;
    prints as ``[<flat index 0>]``."""

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def keystr(keys: Sequence[Any], *, simple: bool = False, separator: str = "") -> str:
    """A key path as text, as ``jax.tree_util.keystr``: ``['layers'][0].w``.

    Args:
      keys: a key path (a sequence of key entries, or of anything printable).
      simple: write each entry as its bare key (``layers``, ``0``, ``w``): shorter, but
        ambiguous (``0`` may be a list position or a dict key).
      separator: put between the entries (``'/'`` with ``simple=True`` gives
        ``layers/0/w``).
    Returns:
      The joined text (``''`` for the root's empty path).

    Example:
      >>> path = (DictKey('layers'), SequenceKey(0), GetAttrKey('w'))
      >>> keystr(path), keystr(path, simple=True, separator='/')
      ("['layers'][0].w", 'layers/0/w')
    """
    if not simple:
        return separator.join(str(k) for k in keys)
    return separator.join(str(_bare_key(k)) for k in keys)


def _bare_key(k: Any) -> Any:
    t = type(k)
    if t is DictKey or t is FlattenedIndexKey:
        return k.key
    if t is SequenceKey:
        return k.idx
    if t is GetAttrKey:
        return k.name
    return k


KeyEntry = DictKey | SequenceKey | GetAttrKey | FlattenedIndexKey
KeyPath = tuple[KeyEntry, ...]
