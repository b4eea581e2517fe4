"""The interpreter skeleton of the transforms, and the plain interpreter ``eval_trace``.

Every transform that interprets a trace walks its equations the same way, in the spirit of
autodidax's one ``process_primitive`` per interpreter: :func:`walk` reads each equation's
inputs from an environment, runs the transform's per-equation *rule*, binds the outputs and
frees each value after its last use (:func:`last_uses`), so peak memory follows the live
set. The transforms are their rules:

* ``eval_trace`` (here): ``bind`` each equation (the default rule);
* ``vmap``'s ``batch_trace``: the batching rule, on (value, batch axis) pairs;
* the checkpoint's VJP rule: recompute what the backward pass reads, and build its records;
* ``jit``'s planning: give each value a slot and each equation a step (its replay loop is
  its own: see ``functx.transforms.jit``).

Reverse mode walks backwards with :func:`walk_reverse`: each equation's rule receives the
cotangent(s) of its outputs, complete by then, and its input cotangents are accumulated.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from functx.backends import finalize_cpu, owned_read_only
from functx.errors import FunctxError
from functx.ir import Eqn, Literal, Trace, Var
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


def has_effects(eqn: Eqn) -> bool:
    """Whether ``eqn`` must run even when nothing reads its outputs: its primitive declares
    effects (``Primitive.has_effects``: True, or a function of the equation's params)."""
    effects = eqn.prim.has_effects
    return effects is True or (effects is not False and bool(effects(eqn.params)))


def trace_has_effects(trace: Trace) -> bool:
    """Whether some equation of ``trace`` has effects (see :func:`has_effects`): what a
    higher-order primitive's ``has_effects`` asks of its sub-trace."""
    return any(has_effects(e) for e in trace.eqns)


def prune(trace: Trace) -> Trace:
    """``trace`` without the equations whose results neither an output nor a kept equation
    reads (dead code: e.g. the loss value inside a traced ``grad``). Primitives are pure,
    so removing them changes nothing else, except those that declare effects
    (``prim.has_effects``: ``functx.debug.print``), which are always kept. Inputs and
    constants are kept as they are. A primitive with several results some of which nothing
    reads is asked to drop those (its ``dce`` rule: ``scan`` drops unused ``ys`` from its
    body)."""
    return prune_with_last_uses(trace)[0]


def prune_with_last_uses(trace: Trace) -> tuple[Trace, list[tuple[Var, ...]]]:
    """``(prune(trace), last_uses(prune(trace)))`` in one backward walk (``vmap`` and
    ``jit`` need both, at every call for ``vmap``)."""
    seen = {id(v) for v in trace.outputs if type(v) is Var}  # read by a later kept eqn
    kept: list = []
    out: list[tuple[Var, ...]] = []
    changed = False
    for e in reversed(trace.eqns):
        dying = [v for v in e.outputs if id(v) not in seen]
        if len(dying) == len(e.outputs) and (e.prim.has_effects is False
                                             or not has_effects(e)):
            continue  # dead code: nothing reads any of its results
        if dying and e.prim.dce is not None:  # some results unread: the primitive's rule
            pruned = e.prim.dce(e, [id(v) in seen for v in e.outputs])
            if pruned is not None:
                e, changed = pruned, True
                dying = [v for v in e.outputs if id(v) not in seen]
        seen.update(id(v) for v in dying)
        for a in e.inputs:
            if type(a) is Var and id(a) not in seen:
                seen.add(id(a))
                dying.append(a)
        kept.append(e)
        out.append(tuple(dying))
    kept.reverse()
    out.reverse()
    if changed or len(kept) != len(trace.eqns):
        trace = Trace(trace.in_vars, trace.const_vars, trace.const_values, tuple(kept),
                      trace.outputs)
    return trace, out


Rule = Callable[[Any, list], Any]  # (eqn, input values) -> output value(s)


def walk(trace: Trace, env: dict, rule: Rule | None,
         dying: Sequence[Sequence[Var]] | None = None,
         literal: Callable[[Literal], Any] | None = None) -> list:
    """Walk ``trace``'s equations in order: the one equation loop of the interpreters.

    For each equation: read its inputs (``env[var]``, ``literal(lit)``), call
    ``rule(eqn, inputs)``, bind its result to the equation's outputs (a list for a
    multiple-results primitive, else one value), then drop the values whose last use this
    equation is.

    Args:
        trace: the trace to walk.
        env: the values of ``trace.in_vars`` and ``trace.const_vars`` (whatever the
            transform carries: arrays, tracers, (value, batch axis) pairs, slots); the walk
            adds and frees values in it.
        rule: the transform's per-equation rule; None for the plain interpreter's,
            ``bind(eqn.prim, *inputs, **eqn.params)``, which is written inline (a Python
            call per equation costs ``eval_trace``, and so every checkpoint's forward
            pass, 5-10%).
        dying: for each equation, the variables to drop after it (default:
            ``last_uses(trace)``).
        literal: the environment value of a literal (default, None: its value).

    Returns:
        The environment values of ``trace.outputs``.

    Example:
        >>> env = dict(zip(trace.in_vars, args))   # (+ trace.const_vars' values)
        >>> outs = walk(trace, env, lambda eqn, ins: bind(eqn.prim, *ins, **eqn.params))
    """
    for eqn, gone in zip(trace.eqns, last_uses(trace) if dying is None else dying):
        if literal is None:
            ins = [a.value if type(a) is Literal else env[a] for a in eqn.inputs]
        else:
            ins = [literal(a) if type(a) is Literal else env[a] for a in eqn.inputs]
        prim = eqn.prim
        out = bind(prim, *ins, **eqn.params) if rule is None else rule(eqn, ins)
        if prim.multiple_results:
            env.update(zip(eqn.outputs, out))
        else:
            env[eqn.outputs[0]] = out
        for v in gone:
            env.pop(v, None)
    if literal is None:
        return [a.value if type(a) is Literal else env[a] for a in trace.outputs]
    return [literal(a) if type(a) is Literal else env[a] for a in trace.outputs]


ReverseRule = Callable[[int, Any, Any], Any]  # (index, eqn, output cotangent(s)) -> see below


def walk_reverse(trace: Trace, cts: dict, rule: ReverseRule, add: Callable) -> dict:
    """Walk ``trace``'s equations last to first, accumulating cotangents (reverse mode).

    When an equation is reached every reader of its outputs has been, so their cotangents
    are complete: they are taken out of ``cts`` (and so freed) and passed to
    ``rule(index, eqn, ct)``: ``ct`` is a list with None for zero for a multiple-results
    primitive (None when all are zero), else the cotangent or None. The rule is called for
    every equation, so it can release per-equation state; it returns None (nothing flows
    back) or ``(targets, in_cts)``: for each input, the variable that receives a cotangent
    (or None) and the cotangent (or None). Cotangents reaching one variable are summed
    with ``add``, in the order they arrive.

    A rule should call the primitive's VJP rule itself rather than through a helper: under
    an enclosing abstract transform, every equation a VJP rule records looks up the user's
    source line through each Python frame in between.

    Args:
        trace: the trace to walk.
        cts: the cotangents of the outputs' variables; the walk updates it.
        rule: the transform's per-equation rule.
        add: the sum of two cotangents.

    Returns:
        ``cts``, holding at the end the cotangents of the variables no equation produces
        (the trace's inputs and constants).

    Example:
        >>> cts = walk_reverse(trace, {trace.outputs[0]: one}, vjp_rule, add)  # (reverse
        >>> # mode's backward_pass writes this walk out with its VJP rule call in the loop)
    """
    pop = cts.pop
    eqns = trace.eqns
    for k in range(len(eqns) - 1, -1, -1):
        eqn = eqns[k]
        if eqn.prim.multiple_results:
            ct: Any = [pop(v, None) for v in eqn.outputs]
            if all(c is None for c in ct):
                ct = None
        else:
            ct = pop(eqn.outputs[0], None)
        flows = rule(k, eqn, ct)
        if flows is None:
            continue
        for t, c in zip(*flows):
            if t is not None and c is not None:
                cts[t] = add(cts[t], c) if t in cts else c
    return cts


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
    consts = trace.const_values if consts is None else consts
    env.update(zip(trace.const_vars, consts))
    outs = walk(trace, env, None, dying)
    # An output that is an input or a constant is never the caller's array (a writeable one
    # is copied: the caller may write to it later).
    return [finalize_cpu(o, (*args, *consts)) if type(o) is np.ndarray else o for o in outs]


def snapshot_constants(trace: Trace) -> Trace:
    """``trace`` with its writeable NumPy constants (arrays the function closed over, which
    their owner may write to later) replaced by read-only copies (``trace`` itself if none).

    For transforms that keep a trace for later calls (``jit``'s cache, ``linearize``'s
    linear map). functx's own (read-only) results and CuPy arrays are not copied (see
    ``functx.backends.owned_read_only``); literals are snapshots already (``lift``).
    """
    values = trace.const_values
    if not any(type(c) is np.ndarray and c.flags.writeable for c in values):
        return trace
    return Trace(trace.in_vars, trace.const_vars,
                 tuple(owned_read_only(c) for c in values), trace.eqns, trace.outputs)
