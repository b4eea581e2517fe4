"""From an optimised trace to what ``jit`` runs on the CPU, and its readable form.

:func:`fuse` replaces every fusion cluster of a trace by one equation of the ``fused``
primitive, whose parameter is the cluster's :class:`~functx.compiler.cpu.Kernel`; ``jit``'s
executor then runs the fused trace like any other (one step per kernel).
:class:`Lowered` is what ``jit(f).lower(*args)`` returns: ``as_text()`` shows the optimised
trace, its clusters and the generated kernel sources.
"""
from __future__ import annotations

import warnings
from typing import Any

from functx.compiler.cpu import Kernel, fuse_policy
from functx.compiler.cuda import COMPUTE, ROW_MAX, CudaKernel, cuda_policy, cuda_worth
from functx.compiler.partition import MIN_ROW, Cluster, fusible, partition
from functx.compiler.passes import PASSES, expand, optimize
from functx.errors import FunctxError
from functx.ir import AbstractArray, Eqn, Printer, Trace, Var
from functx.primitives._numba import numba_enabled, numba_installed
from functx.registry import Primitive, Registry

__all__ = ["fuse", "expand_rows", "fused_p", "accumulate_p", "fold_accumulations", "Lowered",
           "numba_available"]

# The primitive of a fused kernel lives in a registry of its own: it exists only in the
# traces jit runs (never traced by a user, never differentiated), so it has no other rules.
FUSED_REGISTRY = Registry()
fused_p = Primitive("fused", multiple_results=True, registry=FUSED_REGISTRY)
fused_p.def_abstract_eval(lambda *avals, kernel: tuple(
    AbstractArray(shape, dtype) for shape, dtype in kernel.out_avals))
fused_p.def_impl(lambda xp, *arrays, kernel: kernel(*arrays))
# into preallocated outputs (jit's memory planner); in place where the kernel allows it
fused_p.def_impl_out(lambda xp, *arrays, out, kernel: kernel(*arrays, outs=out),
                     alias=lambda params: params["kernel"].inplace)


# A sum whose operand is a product computed only for it, ``add(c, dot_general(a, b))``, as
# one step that adds the product into ``c``'s memory (a GEMM with beta = 1: no addition
# kernel, no product buffer). ``c`` is copied first unless the memory planner hands the
# step ``c``'s own buffer (``c`` dies there: a gradient accumulated across a loop's steps,
# a residual connection). CUDA only (``Primitive.def_accumulate``).
accumulate_p = Primitive("accumulate", registry=FUSED_REGISTRY)
accumulate_p.def_abstract_eval(lambda *avals, prim, params, acc: avals[acc])


def _accumulate(xp: Any, *arrays: Any, prim: Primitive, params: dict, acc: int) -> Any:
    return prim.accumulate_for("cuda")(xp, *arrays[:acc], acc=arrays[acc].copy(), **params)


def _accumulate_into(xp: Any, *arrays: Any, out: Any, prim: Primitive, params: dict,
                     acc: int) -> Any:
    if out is not arrays[acc]:
        out[...] = arrays[acc]
    return prim.accumulate_for("cuda")(xp, *arrays[:acc], acc=out, **params)


accumulate_p.def_impl(_accumulate, backend="cuda")
accumulate_p.def_impl_out(_accumulate_into, backend="cuda",
                          alias=lambda params: {(params["acc"], 0)})


def fold_accumulations(trace: Trace, target: str) -> Trace:
    """``trace`` with each ``add(c, p)`` whose operand ``p`` is read only there and made by
    a primitive that can add its result into given memory on ``target`` (see
    :data:`accumulate_p`) written as one ``accumulate`` equation."""
    uses: dict[int, int] = {}
    for e in trace.eqns:
        for v in e.inputs:
            uses[id(v)] = uses.get(id(v), 0) + 1
    for v in trace.outputs:
        uses[id(v)] = uses.get(id(v), 0) + 2
    producer = {id(v): e for e in trace.eqns if not e.prim.multiple_results
                for v in e.outputs}
    folded: dict[int, Eqn] = {}
    gone: set[int] = set()
    for e in trace.eqns:
        if not e.prim.sums_operands or len(e.inputs) != 2:
            continue
        out = e.outputs[0].aval
        for j in (1, 0):
            p, c = e.inputs[j], e.inputs[1 - j]
            q = producer.get(id(p))
            if (q is None or type(c) is not Var or uses.get(id(p)) != 1 or id(q) in gone
                    or q.prim.accumulate_for(target) is None
                    or any(tuple(a.shape) != tuple(out.shape) or a.dtype != out.dtype
                           for a in (p.aval, c.aval))):
                continue
            folded[id(e)] = Eqn(accumulate_p, tuple(q.inputs) + (c,),
                                {"prim": q.prim, "params": q.params, "acc": len(q.inputs)},
                                e.outputs, e.source)
            gone.add(id(q))
            break
    if not folded:
        return trace
    eqns = tuple(folded.get(id(e), e) for e in trace.eqns if id(e) not in gone)
    return Trace(trace.in_vars, trace.const_vars, trace.const_values, eqns, trace.outputs)


def expand_rows(trace: Trace) -> Trace:
    """``trace`` with the fused primitives that have an expansion (``prim.expand``: layer
    norm and its gradient, softmax, log_softmax) written as their formulas where the CUDA
    generator fuses those into a row kernel with a neighbour (a fusible equation over the
    same shape, or another expandable one, makes an operand or reads the result), then
    optimised again (the forward and backward passes' statistics are computed once)."""
    producer = {v: e for e in trace.eqns for v in e.outputs}
    readers: dict = {}
    for e in trace.eqns:
        for a in e.inputs:
            if type(a) is Var:
                readers.setdefault(a, []).append(e)

    def fuses(e: Eqn, shape: tuple) -> bool:
        info = fusible(e, cuda_policy, COMPUTE)
        return info is not None and info[1] == shape

    def want(e: Eqn) -> bool:
        if e.prim.multiple_results or type(e.inputs[0]) is not Var:
            return False
        shape = tuple(e.inputs[0].aval.shape)
        if not (shape and MIN_ROW <= shape[-1] <= ROW_MAX):
            return False
        near = [producer[a] for a in e.inputs if a in producer]
        near += [r for v in e.outputs for r in readers.get(v, ())]
        return any(n.prim.expand is not None or fuses(n, shape) for n in near)

    if not any(e.prim.expand is not None and want(e) for e in trace.eqns):
        return trace
    return optimize(expand(trace, want), PASSES[1:])


_warned: list = []


def numba_available() -> bool:
    """Whether jit may compile with Numba (:func:`functx.primitives._numba.numba_enabled`:
    installed, and not turned off with ``FUNCTX_NUMBA=0``; checked without importing it);
    warns once if it is not installed."""
    if numba_enabled():
        return True
    if not numba_installed() and not _warned:
        _warned.append(True)
        warnings.warn("functx.jit: Numba is not installed, so jit replays traces one "
                      "primitive at a time instead of compiling fused kernels. Install it "
                      "(pip install 'functx[jit]' or pip install numba), or set "
                      "FUNCTX_JIT_COMPILER=none to silence this.", stacklevel=3)
    return False


def fuse(trace: Trace, target: str = "cpu") -> tuple[Trace, list]:
    """``trace`` with each fusion cluster as one ``fused`` equation, and the kernels:
    Numba loop nests for ``target="cpu"``, CUDA C kernels for ``"cuda"``."""
    if target == "cuda":
        trace = expand_rows(trace)
        trace = fold_accumulations(trace, target)
        steps, make = partition(trace, cuda_policy, COMPUTE, cuda_worth, ROW_MAX), CudaKernel
    else:
        steps, make = partition(trace, fuse_policy), Kernel
    eqns, kernels = [], []
    for s in steps:
        if isinstance(s, Cluster):
            k = make(s, len(kernels))
            kernels.append(k)
            eqns.append(Eqn(fused_p, tuple(s.inputs), {"kernel": k}, tuple(k.outputs),
                            s.eqns[0].source))
        else:
            eqns.append(s)
    fused = Trace(trace.in_vars, trace.const_vars, trace.const_values, tuple(eqns),
                  trace.outputs)
    return fused, kernels


class Lowered:
    """A jitted function lowered for one signature (``jit(f).lower(*args)``).

    Attributes:
        trace: the optimised trace (after the passes).
        fused: the trace the CPU executor runs (clusters as ``fused`` equations).
        kernels: the generated kernels, each with ``.source`` and ``.cluster``.
    """

    def __init__(self, trace: Trace, fused: Trace, kernels: list, compiler: str,
                 target: str = "cpu") -> None:
        self.trace, self.fused, self.kernels, self.compiler = trace, fused, kernels, compiler
        self.target = target

    def as_text(self) -> str:
        """The optimised trace, the fused trace with its clusters, and every kernel's
        source, as one readable text (like JAX's ``lower(...).as_text()``)."""
        parts = [f"# compiler: {self.compiler} (target: {self.target})", "# optimised trace",
                 str(self.trace)]
        if self.kernels:
            parts += ["", "# fused trace (each `fused` equation is one kernel)", str(self.fused)]
            for k in self.kernels:
                printer = Printer()
                body = "\n".join(f"#   {printer.eqn(e, '')}" for e in k.cluster.eqns)
                parts += ["", f"# kernel {k.name}: {len(k.cluster.eqns)} equations over "
                          f"{list(k.cluster.shape)}"
                          + (f", reducing axes {k.cluster.reduce_axes}"
                             if k.cluster.reduce_axes is not None else "")
                          + (", in phases, a block per row" if k.cluster.phased else "")
                          + f" ({'parallel' if k.parallel else 'serial'})", body, k.source]
        return "\n".join(parts)

    def compile(self) -> "Lowered":
        """Compile every kernel now (otherwise each compiles on its first call).

        Raises:
            FunctxError: Numba (CPU) or CuPy (CUDA) is not installed.
        """
        try:
            for k in self.kernels:
                k.compile()
        except ImportError as err:
            raise FunctxError(f"Lowered.compile needs {'CuPy' if self.target == 'cuda' else 'Numba'} "
                              f"to compile kernels for {self.target} ({err}).") from err
        return self

    def __str__(self) -> str:
        return self.as_text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.as_text())
