"""Simplification rules: algebraic identities a primitive knows about itself.

The trace optimisation passes (``functx.compiler.passes``) never name a primitive. Each
primitive may register ``prim.def_simplify(rule)`` beside its other rules; the
simplification pass calls it for every equation of that primitive::

    rule(args: list[Operand], out: AbstractArray, **params) -> None | Operand | Rewrite

* ``args`` describe the inputs: each :class:`Operand` has the input's ``aval``, its ``value``
  where it is a known constant (a Literal or a constant of the trace; else None), and its
  ``producer`` (the :class:`Rewrite` record ``(prim, args, params)`` of the equation that
  computed it, or None) so a rule can look one step up (``transpose`` of ``transpose``);
* returning None keeps the equation; returning one of the operands (``args[0]``, or one
  of a producer's ``args``) forwards it in place of the output (``x * 1 -> x``), and
  returning a :class:`Rewrite` replaces the equation by that one (whose operands are
  Operands it was given, or new constants made with :func:`literal`).

A forwarded operand or a rewrite must have the output's shape and dtype (the pass checks,
and keeps the equation otherwise). Rules must be exact for every input value, NaN and
infinities included (``x * 0`` is not 0 for ``x = inf``).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

__all__ = ["Operand", "Rewrite", "literal", "known_scalar"]


class Operand:
    """An input of an equation as a simplification rule sees it (see the module docstring).
    ``atom`` is the pass's own handle on it."""

    __slots__ = ("aval", "value", "producer", "atom")

    def __init__(self, aval: Any, value: Any = None, producer: "Rewrite | None" = None,
                 atom: Any = None) -> None:
        self.aval, self.value, self.producer, self.atom = aval, value, producer, atom

    @classmethod
    def of(cls, r: "Rewrite") -> "Operand":
        """An operand computed by a new equation ``r`` (the pass emits it first): a rule
        that replaces one equation by two returns the outer one with this as an operand."""
        return cls(r.prim.abstract_eval(*[a.aval for a in r.args], **r.params), None, r)

    @property
    def shape(self) -> tuple:
        return tuple(self.aval.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.aval.dtype)

    def __repr__(self) -> str:
        return f"Operand({self.aval}{'' if self.value is None else ' = ' + repr(self.value)})"


class Rewrite(NamedTuple):
    """One equation to emit: primitive, operands (:class:`Operand`), parameters."""

    prim: Any
    args: tuple
    params: dict


def literal(value: Any, dtype: Any) -> Operand:
    """A new 0-d constant operand (for a :class:`Rewrite`)."""
    # the pass turns it into a Literal; aval's type is duck-typed (shape, dtype, weak_type)
    arr = np.asarray(value, dtype=dtype)
    return Operand(_Aval((), arr.dtype), arr)


def known_scalar(op: Operand) -> Any:
    """The operand's value as a Python number when it is a known constant whose elements
    are all equal (a 0-d literal, or a constant array of one repeated value); else None."""
    v = op.value
    if v is None:
        return None
    v = np.asarray(v)
    if v.size == 0:
        return None
    first = v.reshape(-1)[0]
    if v.size > 1 and not bool(np.all(v == first)):
        return None
    return first.item()


class _Aval(NamedTuple):
    shape: tuple
    dtype: np.dtype
    weak_type: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape)
