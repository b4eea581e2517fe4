"""Partition a trace into fusion clusters: chains of elementwise and broadcasting
equations over one iteration shape, with optional trailing reductions.

Which equations are fusible, and how each computes one element, comes from the registry
(``prim.scalar``, :mod:`functx.registry.scalar`): this module names no primitive. It is
shared by the code generators (the CPU's Numba loops, :mod:`functx.compiler.cpu`; a CUDA
generator later): a :class:`Cluster` says what to compute, a generator says how.

With ``rows`` (CUDA's), a row cluster may also read its own row reductions' results: a
*phased* cluster, one block of threads per row (see :func:`partition`).

The partition is greedy, in trace order. An equation joins a recent cluster of its
iteration shape when every input it reads is computed inside that cluster (by an
elementwise equation, not a reduction) or before the cluster runs; the cluster runs at the
place of its first equation. A cluster is kept only where fusing pays
(:func:`worth_fusing`); the others dissolve back into single equations.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from functx.ir import Eqn, Literal, Trace, Var
from functx.registry.scalar import Expr, const, var

__all__ = ["Cluster", "partition", "fusible", "calls", "worth_fusing", "compute_dtype",
           "accumulator_dtype", "host_literal", "FUSIBLE_DTYPES", "SEARCH"]

# dtypes the generated loops load, compute and store
FUSIBLE_DTYPES = frozenset(np.dtype(d) for d in ("float32", "float64", "bool", "int32", "int64"))
# how many of the most recent clusters of a shape an equation may join
SEARCH = 4
# the shortest row of a phased row cluster (see partition)
MIN_ROW = 32


class Cluster:
    """Equations fused into one loop nest over ``shape`` (the elementwise equations'
    output shape, the reductions' input shape).

    Attributes:
        eqns: the equations, in trace order.
        shape: the iteration shape.
        reduce_axes: the axes of ``shape`` the reductions reduce (all the same but the
            totals), or None.
        totals: in a row cluster, the results of the reductions over every axis (a loss).
        phased: a row cluster whose equations read its row reductions' results
            (broadcast back along the rows) or that holds totals: see :func:`partition`.
        inputs: the variables read from outside (inputs, constants, other steps' results).
        outputs: the variables used after the cluster (filled by :func:`partition`).
    """

    __slots__ = ("eqns", "shape", "reduce_axes", "inputs", "outputs", "totals", "phased",
                 "_made", "_reduced", "_rows")

    def __init__(self, shape: tuple) -> None:
        self.eqns: list[Eqn] = []
        self.shape = tuple(shape)
        self.reduce_axes: tuple | None = None
        self.inputs: list[Var] = []
        self.outputs: list[Var] = []
        self.totals: set = set()
        self.phased = False
        self._made: set = set()      # elementwise results computed here
        self._reduced: set = set()   # reduction results computed here
        self._rows: set = set()      # row-shaped elementwise results (phased clusters)

    def __repr__(self) -> str:
        names = " ".join(e.prim.name for e in self.eqns)
        return f"Cluster({list(self.shape)}: {names})"

    def add(self, e: Eqn, is_reduction: bool, axes: tuple | None) -> None:
        self.eqns.append(e)
        for a in e.inputs:
            if type(a) is Var and a in self._reduced:
                self.phased = True
            elif type(a) is Var and a not in self._made and a not in self.inputs:
                self.inputs.append(a)
        (self._reduced if is_reduction else self._made).update(e.outputs)
        if not is_reduction and tuple(e.outputs[0].aval.shape) != self.shape:
            self._rows.update(e.outputs)  # one value per row (see partition)
            self.phased = True
        if is_reduction and self.reduce_axes not in (None, axes):
            self.totals.update(e.outputs)
            self.phased = True
        elif is_reduction:
            self.reduce_axes = axes

    @property
    def n_compute(self) -> int:
        """Equations that compute (not the ones that only map indices, as broadcasts)."""
        return sum(e.prim.scalar.kind != "broadcast" for e in self.eqns)


def host_literal(a: Literal) -> np.ndarray:
    """A literal's value as a host array (a literal traced on CUDA may hold a 0-d CuPy
    array: it is read once, when the trace is compiled)."""
    v = a.value
    get = getattr(v, "get", None) if type(v) is not np.ndarray else None
    return np.asarray(get() if get is not None else v)


def literal_expr(a: Literal, like: np.dtype | None) -> Expr:
    """A literal as a constant expression; a weak-typed one takes the dtype ``like`` of its
    equation's other operands, as the primitive's implementation does."""
    dtype = like if (a.aval.weak_type and like is not None) else a.aval.dtype
    return const(host_literal(a).item(), dtype)


def operand_dtype(e: Eqn, compute: dict | None = None) -> np.dtype | None:
    """The (compute) dtype of the first variable operand of ``e`` (what a weak literal
    joins)."""
    for a in e.inputs:
        if type(a) is Var:
            return compute_dtype(a.aval.dtype, compute)
    return None


def accumulator_dtype(rule: Any, dtype: np.dtype) -> np.dtype:
    """The dtype a reduction rule accumulates elements of ``dtype`` in."""
    return np.dtype(rule.accumulator(dtype)) if rule.accumulator else np.dtype(dtype)


def scalar_expr(e: Eqn, leaves: list, compute: dict | None = None) -> Expr | None:
    """The equation's per-element expression on ``leaves`` (one Expr per input), from its
    primitive's scalar rule (elementwise and broadcast kinds); None if it declines. With
    ``compute``, the rule sees the output's compute dtype."""
    out = e.outputs[0].aval
    if compute and np.dtype(out.dtype) in compute:
        out = out.update(dtype=compute[np.dtype(out.dtype)])
    return e.prim.scalar.expr(*leaves, out=out, **e.params)


def calls(expr: Expr) -> set:
    """The function names (``call`` nodes) in a per-element expression."""
    found, stack, seen = set(), [expr], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.op == "call":
            found.add(x.value)
        stack.extend(x.args)
    return found


def compute_dtype(dtype: Any, compute: dict | None) -> np.dtype:
    """The dtype a generator computes values stored as ``dtype`` in (``compute`` maps
    storage dtypes to compute dtypes: the CUDA generator computes bfloat16 and float16 in
    float32, rounding once when it stores)."""
    dtype = np.dtype(dtype)
    return compute.get(dtype, dtype) if compute else dtype


def fusible(e: Eqn, policy: Callable | None = None, compute: dict | None = None
            ) -> tuple[str, tuple] | None:
    """``(kind, iteration shape)`` if the equation may join a cluster, else None.

    ``policy(e, expr)`` (a code generator's) may refuse an equation whose per-element
    expression ``expr`` it computes worse than the unfused implementation does; ``compute``
    is the generator's map of storage to compute dtypes (see :func:`compute_dtype`)."""
    rule = e.prim.scalar
    if rule is None or e.prim.multiple_results or not e.inputs:
        return None
    avals = [a.aval for a in e.inputs] + [v.aval for v in e.outputs]
    if any(compute_dtype(a.dtype, compute) not in FUSIBLE_DTYPES for a in avals):
        return None
    like = operand_dtype(e, compute)
    leaves = [literal_expr(a, like) if type(a) is Literal
              else var(f"x{i}", compute_dtype(a.aval.dtype, compute))
              for i, a in enumerate(e.inputs)]
    if rule.kind == "reduction":
        x = e.inputs[0]
        if type(x) is not Var or x.aval.size == 0:
            return None
        acc = accumulator_dtype(rule, leaves[0].dtype)
        if rule.combine(var("acc", acc), leaves[0]) is None:
            return None
        return "reduction", tuple(x.aval.shape)
    out = e.outputs[0].aval
    if out.size == 0:
        return None
    if rule.kind == "broadcast" and rule.operand_axes(
            tuple(a.aval for a in e.inputs), out, **e.params) is None:
        return None  # no index map for these shapes (a reshape that regroups axes)
    try:
        expr = scalar_expr(e, leaves, compute)
    except Exception:
        return None
    if expr is None or (policy is not None and not policy(e, expr)):
        return None
    return rule.kind, tuple(out.shape)


def worth_fusing(c: Cluster) -> bool:
    """A cluster pays when it saves passes over memory or calls: at least two computing
    equations, or a reduction fed by at least one."""
    n = c.n_compute
    return n >= 2


def partition(trace: Trace, policy: Callable | None = None, compute: dict | None = None,
              worth: Callable[[Cluster], bool] | None = None, rows: int = 0) -> list:
    """The trace's equations as a list of steps in execution order: each an :class:`Eqn`
    run as it is or a :class:`Cluster` (its ``outputs`` set: the values used later).
    ``policy`` is the code generator's veto and ``compute`` its compute dtypes (see
    :func:`fusible`); ``worth`` says which clusters to keep (default :func:`worth_fusing`).

    ``rows`` (a generator that runs a block of threads per row, as CUDA's, gives the
    longest row it takes; 0 for none) lets a *row cluster* (one whose reductions reduce
    its last axis, rows of at most ``rows`` elements) go on past its reductions: a
    broadcast of a row reduction's result back along the rows joins it (the layer norm's
    ``x - mean``), so do elementwise equations on the row statistics (``(K,)`` or
    ``(K, 1)``: ``rsqrt(var + eps)``, a unit-axis reshape), later row reductions (its
    variance) and reductions over every axis (a loss). The generator computes such a
    *phased* cluster row by row, in phases separated by its row reductions."""
    items: list = []
    where: dict = {}   # var -> index in items of the step computing it
    recent: dict = {}  # shape -> indices of the most recent clusters of that shape
    row_clusters: dict = {}  # kept shape -> indices of row clusters (rows > 0)
    for e in trace.eqns:
        info = fusible(e, policy, compute)
        target = None
        if info is not None:
            kind, shape = info
            axes = tuple(e.prim.scalar.axes(**e.params)) if kind == "reduction" else None
            near = recent.get(shape, [])[-SEARCH:]
            if rows and kind != "reduction":  # a row statistic may join its row cluster
                kept = shape[:-1] if shape[-1:] == (1,) else shape
                near = sorted(set(near) | set(row_clusters.get(kept, [])[-SEARCH:]))
            for idx in reversed(near):
                if _can_join(items[idx], idx, e, where, kind, axes, rows):
                    target = idx
                    break
            if target is None:
                items.append(Cluster(shape))
                target = len(items) - 1
                recent.setdefault(shape, []).append(target)
            c = items[target]
            c.add(e, kind == "reduction", axes)
            if rows and _is_row(c, rows) and target not in row_clusters.get(c.shape[:-1], ()):
                row_clusters.setdefault(c.shape[:-1], []).append(target)
        else:
            items.append(e)
            target = len(items) - 1
        for v in e.outputs:
            where[v] = target
    return _finish(items, trace, worth or worth_fusing)


def _is_row(c: Cluster, rows: int) -> bool:
    """Whether ``c`` is a row cluster that may hold phases (see :func:`partition`)."""
    rank = len(c.shape)
    return rows > 0 and c.reduce_axes == (rank - 1,) and MIN_ROW <= c.shape[-1] <= rows


def _row_shaped(c: Cluster, shape: tuple) -> bool:
    """Whether ``shape`` is ``c``'s row shape: its kept axes, with or without the last
    axis as a unit axis (a row statistic, ``(K, 1)`` or ``(K,)``)."""
    shape = tuple(shape)
    return shape != c.shape and (shape == c.shape[:-1] or shape == c.shape[:-1] + (1,))


def _reads_per_row(c: Cluster, e: Eqn, a: Var) -> bool:
    """Whether ``e`` reads the row-shaped value ``a`` one value per row of ``c``: its axes
    of size above 1 map to ``c``'s kept axes of those sizes, in order (a ``(K,)`` operand
    broadcast NumPy's way against ``(K, R)`` aligns with the rows' axis: refused)."""
    avals = tuple(x.aval for x in e.inputs)
    maps = e.prim.scalar.operand_axes(avals, e.outputs[0].aval, **e.params)
    want = [i for i in range(len(c.shape) - 1) if c.shape[i] != 1]
    return maps is not None and all(
        [m for m, d in zip(ax, a.aval.shape) if d != 1] == want
        for x, ax in zip(e.inputs, maps) if x is a)


def _can_join(c: Cluster, idx: int, e: Eqn, where: dict, kind: str, axes: tuple | None,
              rows: int = 0) -> bool:
    out_shape = tuple(e.outputs[0].aval.shape)
    if kind != "reduction" and out_shape != c.shape and not (  # one value per row
            _is_row(c, rows) and _row_shaped(c, out_shape)):
        return False
    if kind == "reduction" and c.reduce_axes not in (None, axes):
        if not (_is_row(c, rows) and axes == tuple(range(len(c.shape)))):
            return False
    for a in e.inputs:
        if type(a) is not Var:
            continue
        if a in c._reduced or a in c._rows:  # a row statistic: read per row, in a phase
            if a not in c.totals and _is_row(c, rows) and _reads_per_row(c, e, a):
                continue
            return False
        if a in c._made:
            continue
        if where.get(a, -1) >= idx:
            return False
    return True


def _finish(items: list, trace: Trace, worth: Callable) -> list:
    """Dissolve the clusters not worth fusing, and set each cluster's outputs."""
    steps: list = []
    for it in items:
        if isinstance(it, Cluster) and not worth(it):
            steps.extend(it.eqns)
        else:
            steps.append(it)
    used_after: set = {a for a in trace.outputs if type(a) is Var}
    for it in reversed(steps):
        eqns = it.eqns if isinstance(it, Cluster) else [it]
        if isinstance(it, Cluster):
            made = {v for e in eqns for v in e.outputs}
            it.outputs = [v for e in eqns for v in e.outputs if v in used_after]
            used_after.update(it.inputs)
            used_after -= made - set(it.outputs)
        else:
            used_after.update(a for a in it.inputs if type(a) is Var)
    return steps
