"""A fusion cluster as a per-element program and a loop nest, for every code generator.

:class:`Program` turns a :class:`~functx.compiler.partition.Cluster` into what a generator
renders: the loads (each input read through one stride per iteration axis, 0 where it is
broadcast), one expression DAG (:class:`~functx.registry.scalar.Expr`) per value, the
reductions (an element expression, the rule that folds it and the accumulator's dtype) and
the stores. :class:`LoopNest` orders and merges the iteration axes: adjacent axes that
every operand walks contiguously become one loop, so an elementwise chain over whole arrays
is one flat loop. Neither names a language: the CUDA generator (C for NVRTC) renders the
program; the CPU generator (Numba) walks the cluster itself but orders and merges its loops
with the same :class:`LoopNest`.

Example:
    >>> prog = Program(cluster)
    >>> [l.name for l in prog.loads], [str(e) for _, e in prog.stores]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.compiler.partition import (Cluster, accumulator_dtype, compute_dtype,
                                       literal_expr, operand_dtype, scalar_expr)
from functx.ir import Literal, Var
from functx.registry.scalar import Expr, cast, const, var

__all__ = ["Program", "Load", "Reduction", "LoopNest", "contiguous_strides"]


def contiguous_strides(shape: tuple) -> list:
    """Element strides of a C-contiguous array of ``shape``."""
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


class Load:
    """An input read at every iteration point: ``name`` (the leaf's name in the program),
    ``input`` (its index among the cluster's inputs), ``var`` and ``strides`` (one per
    iteration axis; 0 along the axes it is broadcast over)."""

    __slots__ = ("name", "input", "var", "strides")

    def __init__(self, name: str, input: int, v: Var, strides: list) -> None:
        self.name, self.input, self.var, self.strides = name, input, v, strides


class Reduction:
    """A reduction of the cluster: its result ``var``, the primitive's scalar ``rule``,
    the accumulator dtype ``acc`` and the ``element`` expression (of dtype ``acc``) folded
    at every iteration point."""

    __slots__ = ("var", "rule", "acc", "element")

    def __init__(self, v: Var, rule: Any, acc: np.dtype, element: Expr) -> None:
        self.var, self.rule, self.acc, self.element = v, rule, acc, element

    def identity(self) -> Any:
        return self.rule.identity(self.acc)


class Program:
    """The per-element program of a cluster (see the module docstring).

    Attributes:
        cluster: the cluster.
        loads: the :class:`Load` s, one per (input, axis mapping).
        values: the expression of each elementwise result (variable -> Expr).
        reductions: the :class:`Reduction` s (all over ``cluster.reduce_axes`` but the
            cluster's ``totals``); in a phased row cluster, an expression reads reduction
            ``j``'s result for its row as the leaf ``rv{j}``.
        stores: ``(var, Expr)`` of the elementwise results used after the cluster.
        compute: the generator's map of storage to compute dtypes.
    """

    def __init__(self, c: Cluster, compute: dict | None = None) -> None:
        self.cluster, self.compute = c, compute
        self.loads: list[Load] = []
        self.values: dict = {}
        self.reductions: list[Reduction] = []
        keyed: dict = {}
        row_results: dict = {}  # reduction result -> its index
        index = {v: i for i, v in enumerate(c.inputs)}
        rank = len(c.shape)

        def load(v: Var, axes: tuple) -> Expr:
            got = keyed.get((v, axes))
            if got is None:
                shape = tuple(v.aval.shape)
                st = contiguous_strides(shape)
                by_axis = [0] * rank
                for i, a in enumerate(axes):
                    if shape[i] != 1:  # a unit axis is never read, wherever it maps
                        by_axis[a] = st[i]
                ld = Load(f"a{len(self.loads)}", index[v], v, by_axis)
                self.loads.append(ld)
                got = keyed[(v, axes)] = var(ld.name, self.dtype(v))
            return got

        for e in c.eqns:
            rule = e.prim.scalar
            if rule.kind == "reduction":
                x = e.inputs[0]
                src = self.values.get(x)
                if src is None:
                    src = load(x, tuple(range(rank)))
                acc = accumulator_dtype(rule, src.dtype)
                row_results[e.outputs[0]] = len(self.reductions)
                self.reductions.append(Reduction(e.outputs[0], rule, acc, cast(src, acc)))
                continue
            like = operand_dtype(e, compute)
            avals = tuple(a.aval for a in e.inputs)
            axes = rule.operand_axes(avals, e.outputs[0].aval, **e.params)
            leaves = []
            for a, ax in zip(e.inputs, axes):
                if type(a) is Literal:
                    lit = literal_expr(a, like)
                    dt = compute_dtype(lit.dtype, compute)
                    leaves.append(lit if dt == lit.dtype else const(lit.value, dt))
                elif a in self.values:
                    leaves.append(self.values[a])
                elif a in row_results:  # a phased row cluster's reduction, per row
                    leaves.append(var(f"rv{row_results[a]}", self.dtype(a)))
                else:
                    leaves.append(load(a, tuple(ax)))
            self.values[e.outputs[0]] = scalar_expr(e, leaves, compute)
        reduced = {r.var for r in self.reductions}
        self.stores = [(v, self.values[v]) for v in c.outputs if v not in reduced]

    def dtype(self, v: Var) -> np.dtype:
        """The compute dtype of a variable's elements."""
        return compute_dtype(v.aval.dtype, self.compute)

    def loop_nest(self, order: list | None = None) -> "LoopNest":
        """The iteration axes in ``order`` (default: the kept axes, then the reduced ones)
        with one stride vector per load, per elementwise store (``"store"``) and for the
        reductions' results (``"kept"``), merged."""
        c = self.cluster
        red = tuple(c.reduce_axes or ())
        if order is None:
            order = [a for a in range(len(c.shape)) if a not in red] + list(red)
        nest = LoopNest(c.shape, red, order)
        for ld in self.loads:
            nest.add(ld.name, ld.strides)
        nest.add("store", contiguous_strides(c.shape))
        kept = [a for a in range(len(c.shape)) if a not in red]
        by_axis = [0] * len(c.shape)
        for s, a in zip(contiguous_strides(tuple(c.shape[a] for a in kept)), kept):
            by_axis[a] = s
        nest.add("kept", by_axis)
        nest.merge()
        return nest


class LoopNest:
    """Loops over an iteration shape in a given axis order: ``sizes``, ``reduced`` (per
    loop) and, per named operand, its stride for each loop (:meth:`stride`)."""

    def __init__(self, shape: tuple, reduce_axes: tuple, order: list) -> None:
        self.order = list(order)
        self.sizes = [int(shape[a]) for a in self.order]
        self.reduced = [a in reduce_axes for a in self.order]
        self.strides: dict = {}

    def add(self, name: str, strides_by_axis: list) -> None:
        self.strides[name] = [strides_by_axis[a] for a in self.order]

    def merge(self) -> None:
        """Merge adjacent loops of the same kind that every operand walks contiguously;
        drop loops of size 1."""
        ops = list(self.strides.values())
        j = len(self.sizes) - 2
        while j >= 0:
            if self.reduced[j] == self.reduced[j + 1] and all(
                    s[j] == s[j + 1] * self.sizes[j + 1] for s in ops):
                self.sizes[j] *= self.sizes[j + 1]
                for s in ops:
                    s[j] = s[j + 1]
                    del s[j + 1]
                del self.sizes[j + 1], self.reduced[j + 1]
            j -= 1
        keep = [k for k, d in enumerate(self.sizes) if d != 1]
        self.sizes = [self.sizes[k] for k in keep]
        self.reduced = [self.reduced[k] for k in keep]
        for name in self.strides:
            self.strides[name] = [self.strides[name][k] for k in keep]

    @property
    def n_kept(self) -> int:
        """The number of kept (not reduced) loops; they come first in the default order."""
        return sum(not r for r in self.reduced)

    def stride(self, name: str) -> list:
        return self.strides[name]
