"""Trace optimisation passes: each a small pure function ``Trace -> Trace``.

* :func:`inline`: the equations of opaque calls (a ``custom_vjp`` function's forward pass,
  which runs the user's Python) replaced by their traces (``prim.def_inline``; the pass
  names no primitive), so the passes below and the compiler see their operations;
* :func:`expand`: fused primitives written as their formulas where a compiler fuses the
  formula with its neighbours (``prim.expand``; the CUDA compiler's row kernels);
* :func:`cse`: common-subexpression elimination (equal primitive, parameters and inputs);
* :func:`fold_constants`: equations of known constants computed once, at compile time, when
  their result is small (:data:`FOLD_LIMIT` elements);
* :func:`simplify`: the algebraic identities each primitive registers with
  ``prim.def_simplify`` (``x * 1``, ``x + 0``, transpose of transpose, reshape chains,
  broadcast then reduce...; :mod:`functx.registry.rewrite`). The pass names no primitive;
* :func:`dce`: dead-code elimination.

:func:`optimize` runs them in order. Every pass keeps the trace's inputs, constants' order
and output types; the tests type-check the result of each. The CPU compiler
(:mod:`functx.compiler.cpu`) and the GPU compiler share them.

Example:
    >>> t = optimize(fx.make_trace(f)(x))
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from functx.compiler.partition import host_literal
from functx.ir import AbstractArray, Eqn, Literal, Trace, Var
from functx.registry.rewrite import Operand, Rewrite
from functx.tracing import bind
from functx.transforms.interpret import has_effects, prune

__all__ = ["inline", "expand", "cse", "fold_constants", "simplify", "dce", "optimize",
           "FOLD_LIMIT", "PASSES"]

# Constant folding computes results of at most this many elements (bigger ones, a zeros
# array broadcast to a large shape say, are cheaper recomputed than stored).
FOLD_LIMIT = 64


def _replace(trace: Trace, eqns: list, outputs: Any, consts: tuple | None = None) -> Trace:
    cv, vals = (trace.const_vars, trace.const_values) if consts is None else consts
    return Trace(trace.in_vars, tuple(cv), tuple(vals), tuple(eqns), tuple(outputs))


def _subst(atom: Any, env: dict) -> Any:
    return env.get(atom, atom) if type(atom) is Var else atom


def _atom_key(a: Any) -> Any:
    if type(a) is Var:
        return a
    v = host_literal(a)
    return ("lit", v.dtype.str, v.tobytes(), a.aval.weak_type)


def _has_subtrace(params: dict) -> bool:
    return any(isinstance(v, Trace) for v in params.values())


def dce(trace: Trace) -> Trace:
    """The trace without the equations none of whose outputs are used: the transforms'
    own dead-code elimination (``functx.transforms.interpret.prune``), which keeps
    equations with effects (``debug.print``) and asks a primitive's ``dce`` rule to drop
    the results nothing reads (``scan``'s unused ``ys``)."""
    return prune(trace)


def inline(trace: Trace) -> Trace:
    """The trace with each equation whose primitive writes it as a trace of others
    (``prim.inline``) replaced by that trace's equations (inlined again if they hold such
    equations themselves), its constants added to the trace's."""
    if not any(e.prim.inline is not None for e in trace.eqns):
        return trace
    return _splice(trace, lambda e, avals: e.prim.inline(*avals, **e.params)
                   if e.prim.inline else None, inline)


def expand(trace: Trace, want: Callable[[Eqn], bool]) -> Trace:
    """The trace with each equation ``e`` whose primitive has an expansion
    (``prim.expand``: a fused primitive's formula) and ``want(e)`` replaced by the
    expansion's equations (the CUDA compiler's choice: where they fuse with their
    neighbours). Run :func:`cse` after it: expansions share their common parts (a layer
    norm's statistics in the forward and backward passes)."""
    return _splice(trace, lambda e, avals: e.prim.expand(*avals, **e.params)
                   if e.prim.expand is not None and want(e) else None, lambda t: t)


def _splice(trace: Trace, sub_of: Callable, again: Callable) -> Trace:
    """The trace with each equation ``e`` for which ``sub_of(e, input avals)`` gives a
    trace replaced by that trace's equations (after ``again`` of it)."""
    env: dict = {}
    eqns: list = []
    cv, vals = list(trace.const_vars), list(trace.const_values)
    for e in trace.eqns:
        ins = tuple(_subst(a, env) for a in e.inputs)
        sub = sub_of(e, [a.aval for a in ins])
        if sub is None:
            eqns.append(e._replace(inputs=ins))
            continue
        sub = again(sub)
        senv = dict(zip(sub.in_vars, ins))
        cv += sub.const_vars
        vals += sub.const_values
        eqns += [se._replace(inputs=tuple(_subst(a, senv) for a in se.inputs))
                 for se in sub.eqns]
        env.update(zip(e.outputs, [_subst(a, senv) for a in sub.outputs]))
    return _replace(trace, eqns, [_subst(a, env) for a in trace.outputs], (cv, vals))


def cse(trace: Trace) -> Trace:
    """The trace with each repeated computation (same primitive, parameters and inputs)
    done once; later uses read the first result."""
    seen: dict = {}
    env: dict = {}
    eqns = []
    for e in trace.eqns:
        ins = tuple(_subst(a, env) for a in e.inputs)
        if has_effects(e):  # two prints print twice
            eqns.append(e._replace(inputs=ins))
            continue
        try:
            key = (e.prim, tuple(map(_atom_key, ins)), tuple(sorted(e.params.items())))
            hash(key)
        except TypeError:  # an unhashable parameter: keep the equation as it is
            key = None
        first = seen.get(key) if key is not None else None
        if first is not None:
            env.update(zip(e.outputs, first.outputs))
            continue
        e = e._replace(inputs=ins)
        if key is not None:
            seen[key] = e
        eqns.append(e)
    return _replace(trace, eqns, [_subst(a, env) for a in trace.outputs])


def _host_value(v: Any) -> Any:
    if isinstance(v, (bool, int, float, complex)):
        return np.asarray(v)
    return v if type(v) is np.ndarray or isinstance(v, np.generic) else None


def fold_constants(trace: Trace, limit: int = FOLD_LIMIT) -> Trace:
    """The trace with equations whose inputs are all known (literals, host constants)
    computed now, when the result has at most ``limit`` elements: a 0-d result becomes a
    literal, a bigger one a new constant of the trace (only where a host constant is among
    the inputs: literals alone follow the trace onto its device, a new host array would
    not)."""
    known: dict = {v: _host_value(c) for v, c in zip(trace.const_vars, trace.const_values)
                   if _host_value(c) is not None}
    env: dict = {}
    cvars, cvals = list(trace.const_vars), list(trace.const_values)
    eqns = []
    for e in trace.eqns:
        ins = tuple(_subst(a, env) for a in e.inputs)
        # a literal on a device (a 0-d CuPy value) is not folded: its result would be a
        # host constant where the trace computes on the device
        vals = [_host_value(a.value) if type(a) is Literal else known.get(a) for a in ins]
        if e.prim.multiple_results or not e.outputs or has_effects(e):
            eqns.append(e._replace(inputs=ins))  # (effects run when the program runs)
            continue
        out = e.outputs[0]
        if (_has_subtrace(e.params) or not ins
                or any(v is None for v in vals) or out.aval.size > limit):
            eqns.append(e._replace(inputs=ins))
            continue
        try:
            value = np.asarray(bind(e.prim, *[np.asarray(v) for v in vals], **e.params))
        except Exception:  # leave errors to run time, where they are explained
            eqns.append(e._replace(inputs=ins))
            continue
        if value.ndim and not any(type(a) is Var for a in ins):
            # from literals alone (which join whatever device the trace runs on): only a
            # 0-d result, itself a literal, keeps that; a host array would not
            eqns.append(e._replace(inputs=ins))
            continue
        if value.shape != out.aval.shape or value.dtype != out.aval.dtype:
            eqns.append(e._replace(inputs=ins))
            continue
        if value.ndim == 0:
            env[out] = Literal(value, out.aval)
        else:
            cvars.append(out)
            cvals.append(value)
            known[out] = value
    return _replace(trace, eqns, [_subst(a, env) for a in trace.outputs], (cvars, cvals))


def simplify(trace: Trace) -> Trace:
    """The trace with each primitive's registered identities applied (``prim.simplify``;
    see :mod:`functx.registry.rewrite`), in one forward sweep: an equation sees its inputs'
    producers already simplified, so chains (reshape of reshape of reshape) collapse."""
    known = {v: c for v, c in zip(trace.const_vars, trace.const_values)
             if _host_value(c) is not None}
    env: dict = {}
    producers: dict = {}  # var -> Rewrite of the equation that computed it
    eqns = []

    def operand(a: Any) -> Operand:
        if type(a) is Literal:
            return Operand(a.aval, host_literal(a), None, a)
        return Operand(a.aval, known.get(a), producers.get(a), a)

    source: list = [None]  # of the equation being simplified (for the ones a rule adds)

    def atom_of(op: Operand) -> Any:
        if op.atom is not None:
            return op.atom
        r = op.producer
        if op.value is None and r is not None:  # a new equation (Operand.of): emit it first
            ins = tuple(atom_of(a) for a in r.args)
            var = Var(r.prim.abstract_eval(*[a.aval for a in ins], **r.params))
            eqns.append(Eqn(r.prim, ins, dict(r.params), (var,), source[0]))
            producers[var] = Rewrite(r.prim, tuple(operand(a) for a in ins), r.params)
            return var
        value = np.asarray(op.value)
        return Literal(value, AbstractArray((), value.dtype))

    for e in trace.eqns:
        source[0] = e.source
        ins = tuple(_subst(a, env) for a in e.inputs)
        e = e._replace(inputs=ins)
        rule = e.prim.simplify
        result = None
        if rule is not None and not e.prim.multiple_results and e.outputs:
            try:
                result = rule([operand(a) for a in ins], e.outputs[0].aval, **e.params)
            except Exception:  # a rule that cannot judge these operands keeps the equation
                result = None
        out = e.outputs[0] if e.outputs else None
        if isinstance(result, Operand) and _same_type(result.aval, out.aval):
            env[out] = atom_of(result)
            continue
        if isinstance(result, Rewrite):
            new = _rewritten(result, out, e, atom_of)
            if new is not None:
                e = new
        eqns.append(e)
        if not e.prim.multiple_results and out is not None:
            producers[out] = Rewrite(e.prim, tuple(operand(a) for a in e.inputs), e.params)
    return dce(_replace(trace, eqns, [_subst(a, env) for a in trace.outputs]))


def _same_type(a: Any, b: Any) -> bool:
    return tuple(a.shape) == tuple(b.shape) and np.dtype(a.dtype) == np.dtype(b.dtype)


def _rewritten(r: Rewrite, out: Var, old: Eqn, atom_of: Callable) -> Eqn | None:
    """The equation ``r`` writing ``out``, or None where its type would differ."""
    ins = tuple(atom_of(op) for op in r.args)
    try:
        aval = r.prim.abstract_eval(*[a.aval for a in ins], **r.params)
    except Exception:
        return None
    if not _same_type(aval, out.aval):
        return None
    return Eqn(r.prim, ins, dict(r.params), (out,), old.source)


PASSES: tuple[Callable[[Trace], Trace], ...] = (inline, cse, fold_constants, simplify, cse,
                                                dce)


def optimize(trace: Trace, passes: tuple = PASSES) -> Trace:
    """``trace`` through every pass of ``passes`` in order (default :data:`PASSES`)."""
    for p in passes:
        trace = p(trace)
    return trace
