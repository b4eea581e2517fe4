"""Per-element expressions (:mod:`functx.registry.scalar`) rendered as C/CUDA C.

The CPU generator renders the registry's scalar rules as Numba-Python; a CUDA generator
(issue 20) renders the same trees as C statements for NVRTC. This module is that second
rendering, kept beside the Numba one so that the vocabulary stays renderable in both: a
function of float32 operands uses the single-precision C function (``sinf``), float64 the
double one (``sin``), constants carry their type (``0.9f``), and ``where`` is ``c ? a : b``.

Example:
    >>> lines, name = render_c(logistic_expr)
    >>> print("\\n".join(lines))
    float t1 = fabsf(x);
    ...
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.registry.scalar import Expr

__all__ = ["render_c", "CEmitter", "C_TYPES", "c_literal"]

C_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
           np.dtype(np.bool_): "bool", np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}

# float64 names; the float32 function appends "f" (sinf, expf, erff...)
_C_FUNCS = {
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
    "atan2": "atan2", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "exp": "exp",
    "expm1": "expm1", "log": "log", "log1p": "log1p", "sqrt": "sqrt", "erf": "erf",
    "floor": "floor", "ceil": "ceil", "rint": "rint", "abs": "fabs", "pow": "pow",
}
# and/or/xor are NumPy's bitwise (logical on bool) operators; C's & | ^ are both
_C_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "eq": "==", "ne": "!=", "lt": "<",
          "le": "<=", "gt": ">", "ge": ">=", "and": "&", "or": "|", "xor": "^"}


def c_literal(v: Any, dtype: np.dtype) -> str:
    """A number as a C literal of ``dtype`` (``0.5f``, ``INFINITY``, ``3LL``, ``true``)."""
    if dtype == np.bool_:
        return "true" if v else "false"
    if dtype.kind == "f":
        if v != v:
            return "NAN" if dtype.itemsize == 4 else "(double)NAN"
        if not math.isfinite(v):
            return ("" if v > 0 else "-") + ("INFINITY" if dtype.itemsize == 4 else "(double)INFINITY")
        text = repr(float(v))
        return text + "f" if dtype.itemsize == 4 else text
    return str(int(v)) + ("LL" if dtype.itemsize == 8 else "")


class CEmitter:
    """Renders per-element expressions as C statements into ``lines``: one typed temporary
    per node, each shared node once across every expression rendered by this emitter
    (names ``{prefix}1``, ``{prefix}2``...), and equal nodes once too: a node whose C text
    was written before (``tanhf(t6)`` of a GELU's forward and of its derivative) reuses
    that temporary. ``var`` leaves are written as their names."""

    def __init__(self, prefix: str = "t") -> None:
        self.lines: list[str] = []
        self.prefix = prefix
        self._memo: dict = {}
        self._texts: dict = {}  # (dtype, C text) -> the temporary holding it

    def __call__(self, e: Expr) -> str:
        """The name or literal holding ``e``'s value (its statements appended to ``lines``)."""
        got = self._memo.get(id(e))
        if got is not None:
            return got[1]
        if e.op == "var":
            return e.value
        if e.op == "const":
            return c_literal(e.value, e.dtype)
        a = [self(x) for x in e.args]
        f32 = any(x.dtype == np.float32 for x in e.args)
        integer = e.args[0].dtype.kind in "iu" if e.args else False
        if e.op == "call":
            if e.value in ("isfinite", "isnan"):
                text = f"{e.value}({a[0]})"
            elif e.value == "abs" and integer:
                text = f"({a[0]} < 0 ? -{a[0]} : {a[0]})"
            else:
                text = f"{_C_FUNCS[e.value]}{'f' if f32 else ''}({', '.join(a)})"
        elif e.op in _C_OPS:
            text = f"({a[0]} {_C_OPS[e.op]} {a[1]})"
        elif e.op == "rem":  # NumPy's remainder takes the sign of the divisor
            m = f"({a[0]} % {a[1]})" if integer else f"fmod{'f' if f32 else ''}({a[0]}, {a[1]})"
            text = f"(({m} != 0 && (({m} < 0) != ({a[1]} < 0))) ? {m} + {a[1]} : {m})"
            if integer:  # NumPy: x % 0 == 0 (C: undefined)
                text = f"({a[1]} == 0 ? 0 : {text})"
        elif e.op == "neg":
            text = f"(-{a[0]})"
        elif e.op == "not":
            text = f"(!{a[0]})" if e.dtype == np.bool_ else f"(~{a[0]})"
        elif e.op == "where":
            text = f"({a[0]} ? {a[1]} : {a[2]})"
        elif e.op == "cast":
            text = f"({a[0]} != 0)" if e.dtype == np.bool_ else f"({C_TYPES[e.dtype]})({a[0]})"
        else:
            raise ValueError(f"the C renderer cannot render {e.op!r}")
        name = self._texts.get((e.dtype, text))
        if name is None:
            name = self._texts[(e.dtype, text)] = f"{self.prefix}{len(self._texts) + 1}"
            self.lines.append(f"{C_TYPES[e.dtype]} {name} = {text};")
        self._memo[id(e)] = (e, name)  # keep e alive: ids of dead nodes recur
        return name


def render_c(expr: Expr) -> tuple[list[str], str]:
    """C statements computing ``expr`` (one typed temporary per node, shared nodes once) and
    the name or literal holding its value. ``var`` leaves are written as their names."""
    em = CEmitter()
    result = em(expr)
    return em.lines, result
