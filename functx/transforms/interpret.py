"""Evaluating a trace: the plain interpreter, with liveness-based freeing."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from functx.backends import finalize_cpu
from functx.errors import FunctxError
from functx.ir import Literal, Trace, Var
from functx.tracing import bind


def last_uses(trace: Trace) -> list[tuple[Var, ...]]:
    """For each equation, the variables whose last use (in program order) it is.

    Trace outputs are never freed. The interpreters drop these values right after the
    equation runs, so peak memory follows the live set, not the whole trace. An output that
    nothing reads (an unused result of a multiple-results primitive) dies at the equation
    that makes it.
    """
    keep = {id(v) for v in trace.outputs if type(v) is Var}
    seen: set[int] = set(keep)
    out: list[tuple[Var, ...]] = []
    for e in reversed(trace.eqns):
        dying = [v for v in e.outputs if id(v) not in seen]
        seen.update(id(v) for v in dying)
        for a in e.inputs:
            if type(a) is Var and id(a) not in seen:
                seen.add(id(a))
                dying.append(a)
        out.append(tuple(dying))
    out.reverse()
    return out


def prune(trace: Trace) -> Trace:
    """``trace`` without the equations whose results neither an output nor a kept equation
    reads (dead code: e.g. the loss value inside a traced ``grad``). Primitives are pure,
    so removing them changes nothing else. Inputs and constants are kept as they are."""
    return prune_with_last_uses(trace)[0]


def prune_with_last_uses(trace: Trace) -> tuple[Trace, list[tuple[Var, ...]]]:
    """``(prune(trace), last_uses(prune(trace)))`` in one backward walk (``vmap`` and
    ``jit`` need both, at every call for ``vmap``)."""
    seen = {id(v) for v in trace.outputs if type(v) is Var}  # read by a later kept eqn
    kept: list = []
    out: list[tuple[Var, ...]] = []
    for e in reversed(trace.eqns):
        dying = [v for v in e.outputs if id(v) not in seen]
        if len(dying) == len(e.outputs):
            continue  # dead code: nothing reads any of its results
        seen.update(id(v) for v in dying)
        for a in e.inputs:
            if type(a) is Var and id(a) not in seen:
                seen.add(id(a))
                dying.append(a)
        kept.append(e)
        out.append(tuple(dying))
    kept.reverse()
    out.reverse()
    if len(kept) != len(trace.eqns):
        trace = Trace(trace.in_vars, trace.const_vars, trace.const_values, tuple(kept),
                      trace.outputs)
    return trace, out


def eval_trace(trace: Trace, *args: Any, consts: Sequence[Any] | None = None,
               dying: Sequence[tuple[Var, ...]] | None = None) -> list:
    """Run ``trace`` on ``args`` (one per input variable) and return the flat outputs.

    Values may be arrays or tracers of an enclosing transform: each equation is applied with
    ``bind``, so evaluating a trace inside ``grad`` differentiates it.

    Args:
        trace: the trace to run.
        *args: one value per ``trace.in_vars``.
        consts: values for ``trace.const_vars`` (default: the values recorded in the trace).
        dying: ``last_uses(trace)``, when the caller has it already (``jit`` keeps it).

    Returns:
        The list of output values.

    Raises:
        FunctxError: the number of arguments does not match the trace.
    """
    if len(args) != len(trace.in_vars):
        raise FunctxError(f"eval_trace: the trace takes {len(trace.in_vars)} inputs "
                          f"({', '.join(map(str, trace.in_avals))}) but got {len(args)}.")
    env: dict[Var, Any] = dict(zip(trace.in_vars, args))
    env.update(zip(trace.const_vars, trace.const_values if consts is None else consts))
    for eqn, gone in zip(trace.eqns, last_uses(trace) if dying is None else dying):
        ins = [a.value if type(a) is Literal else env[a] for a in eqn.inputs]
        out = bind(eqn.prim, *ins, **eqn.params)
        if eqn.prim.multiple_results:
            env.update(zip(eqn.outputs, out))
        else:
            env[eqn.outputs[0]] = out
        for v in gone:
            env.pop(v, None)
    outs = [a.value if type(a) is Literal else env[a] for a in trace.outputs]
    # An output that is an input is returned as a read-only view, never the user's array.
    return [finalize_cpu(o, args) if type(o) is np.ndarray else o for o in outs]
