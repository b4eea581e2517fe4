"""Scalar rules: how a fusible primitive computes one element, for code generators.

A compiler (``functx.compiler``) fuses chains of elementwise, broadcasting and reduction
primitives into one loop nest. It never names a primitive: it asks each primitive's
``scalar`` slot (a :class:`ScalarRule`, registered beside the primitive's other rules with
``prim.def_scalar(...)`` or ``prim.def_scalar_reduction(...)``) how to compute one element
of the output from one element of each input.

The per-element computation is a small expression tree, :class:`Expr`, over a fixed
vocabulary (:data:`OPS` and :data:`FUNCTIONS`) that every code generator renders in its own
language: the CPU compiler writes Numba-Python (``np.sin(a)``, ``(a if c else b)``), a CUDA
generator writes C (``sinf(a)``, ``(c ? a : b)``). Every node carries its dtype, so a
generator can pick single-precision functions for float32 and never computes float32
values in float64.

Rules are written with the operators of :class:`Expr` and the constructors below::

    sin_p.def_scalar(lambda x, *, out: call("sin", x))
    logistic_p.def_scalar(lambda x, *, out: 1 / (1 + call("exp", -x)))
    max_p.def_scalar(lambda x, y, *, out: where((x > y) | (x != x), x, y))

A rule receives one :class:`Expr` per input (already of the input's dtype), ``out`` (the
output's abstract value) and the primitive's parameters as keywords. It returns an
:class:`Expr` of the output's dtype, or None where it cannot express the operation for these
dtypes or parameters (the equation then runs unfused, as before).

Three kinds of rule:

* ``"elementwise"``: one output element from the inputs' elements at the same position,
  operands broadcast as NumPy does (aligned at the right, size-1 axes repeated);
* ``"broadcast"``: the same, with ``operand_axes(in_avals, out, **params)`` saying which
  output axis each input axis maps to (``broadcast_in_dim``'s ``broadcast_dimensions``;
  an axis of size 1 is never read, wherever it maps), or None where the primitive is no
  index map for these shapes (a ``reshape`` that regroups axes: only one that inserts or
  removes unit axes fuses);
* ``"reduction"``: ``combine(acc, x)`` folds one element into an accumulator that starts at
  ``identity(dtype)``; ``axes(**params)`` are the reduced axes of the input, and
  ``accumulator(dtype)`` the accumulator's dtype (a float32 sum accumulates in float64 and
  is rounded once: additions only, as accurate as NumPy's pairwise sum). ``combine``
  returns None for dtypes it does not fuse.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["Expr", "ScalarRule", "OPS", "FUNCTIONS", "const", "call", "where", "cast", "var",
           "default_operand_axes"]

# Functions a code generator must render (each of a float operand, same dtype out, except
# isfinite/isnan: bool out). pow and atan2 take two operands.
FUNCTIONS = frozenset({
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "exp",
    "expm1", "log", "log1p", "sqrt", "erf", "floor", "ceil", "rint", "abs", "pow",
    "isfinite", "isnan",
})

# Node kinds: leaves ("var", "const"), "call" (FUNCTIONS), operators, "where", "cast".
OPS = frozenset({
    "var", "const", "call", "neg", "not", "add", "sub", "mul", "div", "rem", "eq", "ne", "lt",
    "le", "gt", "ge", "and", "or", "xor", "where", "cast",
})

_BOOL = np.dtype(bool)


class Expr:
    """One node of a per-element expression: ``op`` (in :data:`OPS`), its operand nodes
    ``args``, its ``dtype``, and ``value`` (a leaf's name for ``var``, the number for
    ``const``, the function's name for ``call``). Immutable; compared by identity.

    Arithmetic operators build nodes (``x * y``, ``1 - x``, ``-x``, ``x < y``, ``p & q``);
    a Python number becomes a constant of the other operand's dtype.
    """

    __slots__ = ("op", "args", "dtype", "value")

    def __init__(self, op: str, args: tuple, dtype: Any, value: Any = None) -> None:
        self.op, self.args, self.dtype, self.value = op, tuple(args), np.dtype(dtype), value

    def __repr__(self) -> str:
        if self.op in ("var", "const"):
            return f"{self.value!r}:{self.dtype.name}"
        head = self.value if self.op == "call" else self.op
        return f"{head}({', '.join(map(repr, self.args))})"

    # -- operators -------------------------------------------------------------------------
    def _bin(self, op: str, other: Any, reflected: bool = False, dtype: Any = None) -> "Expr":
        other = other if isinstance(other, Expr) else const(other, self.dtype)
        a, b = (other, self) if reflected else (self, other)
        return Expr(op, (a, b), self.dtype if dtype is None else dtype)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __truediv__(self, o): return self._bin("div", o)
    def __rtruediv__(self, o): return self._bin("div", o, True)
    def __mod__(self, o): return self._bin("rem", o)
    def __neg__(self): return Expr("neg", (self,), self.dtype)
    def __invert__(self): return Expr("not", (self,), self.dtype)
    def __and__(self, o): return self._bin("and", o)
    def __or__(self, o): return self._bin("or", o)
    def __xor__(self, o): return self._bin("xor", o)
    def __lt__(self, o): return self._bin("lt", o, dtype=_BOOL)
    def __le__(self, o): return self._bin("le", o, dtype=_BOOL)
    def __gt__(self, o): return self._bin("gt", o, dtype=_BOOL)
    def __ge__(self, o): return self._bin("ge", o, dtype=_BOOL)
    def eq(self, o: Any) -> "Expr": return self._bin("eq", o, dtype=_BOOL)
    def ne(self, o: Any) -> "Expr": return self._bin("ne", o, dtype=_BOOL)
    __hash__ = object.__hash__


def var(name: str, dtype: Any) -> Expr:
    """A leaf: the element of the operand ``name`` (code generators choose the names)."""
    return Expr("var", (), dtype, name)


def const(value: Any, dtype: Any) -> Expr:
    """A constant of ``dtype`` (``value`` is a Python or NumPy number)."""
    dtype = np.dtype(dtype)
    return Expr("const", (), dtype, np.asarray(value).astype(dtype).item())


def call(name: str, *args: Expr, dtype: Any = None) -> Expr:
    """The function ``name`` of :data:`FUNCTIONS` applied to ``args`` (result of the first
    operand's dtype unless ``dtype`` is given)."""
    if name not in FUNCTIONS:
        raise ValueError(f"scalar rules: {name!r} is not one of the functions code generators "
                         f"render ({', '.join(sorted(FUNCTIONS))}).")
    return Expr("call", args, args[0].dtype if dtype is None else dtype, name)


def where(pred: Expr, on_true: Any, on_false: Any) -> Expr:
    """``on_true`` where the bool ``pred`` holds, else ``on_false``."""
    like = on_true if isinstance(on_true, Expr) else on_false
    t = on_true if isinstance(on_true, Expr) else const(on_true, like.dtype)
    f = on_false if isinstance(on_false, Expr) else const(on_false, like.dtype)
    return Expr("where", (pred, t, f), like.dtype)


def cast(x: Expr, dtype: Any) -> Expr:
    """``x`` converted to ``dtype`` as NumPy's ``astype`` does (bool: ``x != 0``)."""
    dtype = np.dtype(dtype)
    return x if x.dtype == dtype else Expr("cast", (x,), dtype)


def default_operand_axes(in_avals: tuple, out: Any, **params: Any) -> tuple:
    """NumPy broadcasting: input axis ``i`` of an ``n``-d input maps to output axis
    ``out.ndim - n + i``."""
    return tuple(tuple(range(out.ndim - a.ndim, out.ndim)) for a in in_avals)


class ScalarRule:
    """A primitive's scalar rule (see the module docstring): ``kind`` is ``"elementwise"``,
    ``"broadcast"`` or ``"reduction"``."""

    __slots__ = ("kind", "expr", "operand_axes", "combine", "identity", "axes", "accumulator")

    def __init__(self, kind: str, expr: Callable | None = None,
                 operand_axes: Callable | None = None, combine: Callable | None = None,
                 identity: Callable | None = None, axes: Callable | None = None,
                 accumulator: Callable | None = None) -> None:
        self.kind = kind
        self.expr = expr
        self.operand_axes = operand_axes or default_operand_axes
        self.combine, self.identity, self.axes = combine, identity, axes
        # reductions: the accumulator's dtype for an input dtype (None: the input's)
        self.accumulator = accumulator

    def __repr__(self) -> str:
        return f"ScalarRule({self.kind})"
