"""Rematerialisation primitives: ``checkpoint`` (a sub-trace recomputed in the backward pass)
and ``name`` (an identity that labels a value for checkpoint policies).

``checkpoint_p`` is a higher-order primitive: its equation holds a sub-trace (parameter
``trace``) whose inputs are the equation's inputs. The user-facing wrapper is
:func:`functx.checkpoint` (functx/transforms/checkpoint.py), which traces the function,
turns the values it closed over into inputs, and chooses with :func:`saved_vars` the values
the policy lets the forward pass keep. Those values are appended to the sub-trace's outputs:
the last ``n_res`` outputs of the equation are its *residuals*, and the wrapper returns only
the others. The VJP rule declares every input and output as saved, so what the backward
pass keeps for a checkpoint is exactly its inputs, its outputs and the policy's residuals.

The rules:

* ``abstract_eval``: the sub-trace's output types (residuals included);
* ``impl``: evaluates the sub-trace with liveness-based freeing (each intermediate is dropped
  after its last use; only outputs and residuals survive);
* ``vjp``: recomputes, from the inputs and the residuals, only the values the sub-trace's
  own VJP rules read for the cotangents actually needed (skipping equations whose outputs
  were saved), with :func:`is_recomputing` true, then runs the backward pass over the
  sub-trace. It binds the same primitives with the same parameters on the same values as
  the forward pass, so recomputed values are bit-identical. Written with ``bind``, so
  ``grad(grad(checkpoint(f)))`` works;
* ``jvp``: forward mode through the sub-trace, itself checkpointed (same policy);
* ``batch``: the sub-trace batched with ``vmap``, in a new checkpoint equation.

Decision: the user's Python function runs once per call, when it is traced; recomputation
re-evaluates the trace, not the Python code. So :func:`is_recomputing` is seen by primitive
implementations and rules (e.g. a user-defined primitive's impl) that run during the
recomputation, not by Python code inside the checkpointed function.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, Sequence

from functx.errors import DTypeError, ShapeError
from functx.ir import Literal, Trace, Var
from functx.primitives._batching import linear_jvp, unary_batch
from functx.registry import Primitive
from functx.tracing import INEXACT_DTYPES, bind

# ----------------------------------------------------------------------------------------
# is_recomputing

_flags = threading.local()


def is_recomputing() -> bool:
    """Whether the current thread is inside a checkpoint's backward-pass recomputation.

    True while the VJP rule of a :func:`functx.checkpoint` re-evaluates the checkpointed
    trace. The checkpointed Python function itself runs only once (when it is traced), so
    this is for code that runs during the recomputation: implementations and rules of
    primitives (for example a user-defined logging primitive).

    Returns:
        True inside the recomputation, False elsewhere.

    Example:
        >>> fx.is_recomputing()
        False
    """
    return getattr(_flags, "recomputing", False)


@contextlib.contextmanager
def _recomputing() -> Iterator[None]:
    before = is_recomputing()
    _flags.recomputing = True
    try:
        yield
    finally:
        _flags.recomputing = before


# ----------------------------------------------------------------------------------------
# name: an identity that labels a value for policies

name_p = Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda xp, x, *, name: x)
name_p.def_vjp(lambda ct, ins, out, *, name: (ct,))
name_p.def_jvp(linear_jvp(name_p))
name_p.def_batch(unary_batch(name_p))


def checkpoint_name(x: Any, name: str) -> Any:
    """``x`` unchanged, labelled ``name`` for checkpoint policies.

    Policies such as ``functx.checkpoint_policies.save_only_these_names(name)`` match the
    label (the ``name`` primitive's parameter) to decide what the forward pass keeps.

    Args:
        x: an array (or a pytree of arrays).
        name: the label (a string).

    Returns:
        ``x`` (the same values).

    Raises:
        TypeError: ``name`` is not a string.

    Example:
        >>> h = fx.checkpoint_name(fnp.tanh(x @ w), "hidden")
    """
    from functx import tree

    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: the name must be a string, not "
                        f"{type(name).__name__} ({name!r:.40}).")
    return tree.map(lambda leaf: bind(name_p, leaf, name=name), x)


# ----------------------------------------------------------------------------------------
# Which values a checkpoint keeps, and which it recomputes


def _is_float(v: Any) -> bool:
    return INEXACT_DTYPES[v.aval.dtype]


def residual_vars(eqn: Any) -> list:
    """The variables whose values ``eqn``'s VJP rule reads (its declared residuals)."""
    prim = eqn.prim
    out = []
    if prim.vjp is not None:
        for i in prim.saved_input_indices(len(eqn.inputs)):
            a = eqn.inputs[i]
            if type(a) is Var:
                out.append(a)
    if prim.save_output:
        out.extend(eqn.outputs)
    return out


def _active(trace: Trace, active_inputs: Sequence[bool]) -> tuple[set, list]:
    """Forward activity: the variables that depend differentiably on the active inputs, and
    for each equation whether some input is active."""
    active = {v for v, a in zip(trace.in_vars, active_inputs) if a and _is_float(v)}
    eqn_active = []
    for e in trace.eqns:
        on = any(type(a) is Var and a in active for a in e.inputs)
        eqn_active.append(on)
        if on and not e.prim.has_zero_vjp:
            active.update(v for v in e.outputs if _is_float(v))
    return active, eqn_active


def saved_vars(trace: Trace, policy: Callable) -> tuple:
    """The values a checkpoint of ``trace`` keeps for its backward pass under ``policy``.

    A value is kept if the policy marks the equation producing it saveable and the backward
    pass needs it: either a VJP rule reads it, or it is an input of an equation that must be
    recomputed (not saveable) to produce a value a VJP rule reads. The input of a saveable
    ``checkpoint_name`` is provided by its output (the same array). Everything else is
    recomputed from the checkpoint's inputs. With a policy that saves everything this is the
    set of residuals the backward pass would keep without a checkpoint; with one that saves
    nothing it is empty.

    Returns:
        The kept variables, in the order the trace computes them.
    """
    _, eqn_active = _active(trace, [True] * len(trace.in_vars))
    avail = set(trace.in_vars) | set(trace.const_vars)
    need = set()
    for e, on in zip(trace.eqns, eqn_active):
        if on:
            need.update(v for v in residual_vars(e) if v not in avail)
    saveable = [bool(policy(e.prim, *[a.aval for a in e.inputs], **e.params))
                for e in trace.eqns]
    # checkpoint_name is an identity: keeping its output also provides its input.
    alias = {e.inputs[0]: e.outputs[0] for e, ok in zip(trace.eqns, saveable)
             if ok and e.prim is name_p and type(e.inputs[0]) is Var}
    keep = set()
    for e, ok in zip(reversed(trace.eqns), reversed(saveable)):
        wanted = [v for v in e.outputs if v in need]
        if not wanted:
            continue
        if ok or all(v in alias for v in wanted):
            keep.update(alias.get(v, v) for v in wanted)
        else:
            need.update(a for a in e.inputs if type(a) is Var and a not in avail)
    return tuple(v for e in trace.eqns for v in e.outputs if v in keep)


# ----------------------------------------------------------------------------------------
# checkpoint_p

checkpoint_p = Primitive("checkpoint", multiple_results=True)
checkpoint_p.cache_abstract_eval = False  # params hold a fresh sub-trace per call


@checkpoint_p.def_abstract_eval
def _checkpoint_abstract_eval(*avals: Any, trace: Trace, n_res: int, policy: Callable,
                              prevent_cse: bool, name: str) -> list:
    if len(avals) != len(trace.in_vars):
        raise ShapeError(f"checkpoint({name}) got {len(avals)} inputs but its trace takes "
                         f"{len(trace.in_vars)} ({', '.join(map(str, trace.in_avals))}).")
    for i, (a, b) in enumerate(zip(avals, trace.in_avals)):
        if tuple(a.shape) != tuple(b.shape):
            raise ShapeError(f"checkpoint({name}): input {i} has shape {tuple(a.shape)} but "
                             f"its trace was made for {b}. Trace the function again for "
                             "these shapes (call the checkpointed function itself).")
        if a.dtype != b.dtype:
            raise DTypeError(f"checkpoint({name}): input {i} has dtype {a.dtype} but its "
                             f"trace was made for {b}. Trace the function again for this "
                             "dtype (call the checkpointed function itself).")
    return list(trace.out_avals)


@checkpoint_p.def_impl
def _checkpoint_impl(xp: Any, *args: Any, trace: Trace, **params: Any) -> list:
    from functx.transforms.interpret import eval_trace

    return eval_trace(trace, *args)


def _reads(eqn: Any, computed: bool, relevant: bool) -> list:
    """The variables the recomputation reads at ``eqn``: its inputs where it is recomputed,
    and its residuals where its VJP record is built."""
    out = [a for a in eqn.inputs if type(a) is Var] if computed else []
    if relevant:
        out.extend(residual_vars(eqn))
    return out


def _checkpoint_vjp(cts: list, ins: tuple, out: list, *, trace: Trace, n_res: int,
                    policy: Callable, prevent_cse: bool, name: str,
                    needs: Sequence[bool] | None = None) -> tuple:
    from functx.transforms.grad import backward_pass, vjp_record

    eqns = trace.eqns
    n = len(eqns)
    n_out = len(trace.outputs) - n_res
    if needs is None:
        needs = [True] * len(ins)
    active, eqn_active = _active(trace, needs)

    # Which equations a cotangent reaches (their VJP records are needed).
    reach = {v for v, c in zip(trace.outputs, cts) if type(v) is Var and c is not None}
    relevant = [False] * n
    for k in range(n - 1, -1, -1):
        e = eqns[k]
        if eqn_active[k] and any(v in reach for v in e.outputs):
            relevant[k] = True
            reach.update(a for a in e.inputs if type(a) is Var and a in active)

    # Which equations must run again to produce the values those records read.
    env: dict[Var, Any] = dict(zip(trace.in_vars, ins))
    env.update(zip(trace.const_vars, trace.const_values))
    for v, x in zip(trace.outputs[n_out:], out[n_out:]):
        env[v] = x
    for e in eqns:  # checkpoint_name is an identity: a kept output is also its input
        if e.prim is name_p and e.outputs[0] in env and type(e.inputs[0]) is Var:
            env.setdefault(e.inputs[0], env[e.outputs[0]])
    need = {v for k in range(n) if relevant[k] for v in residual_vars(eqns[k])
            if v not in env}
    computed = [False] * n
    for k in range(n - 1, -1, -1):
        e = eqns[k]
        if any(v in need for v in e.outputs):
            computed[k] = True
            need.update(a for a in e.inputs if type(a) is Var and a not in env)

    # When each value is read for the last time, so it can be dropped right after.
    last: dict[Var, int] = {}
    for k in range(n):
        for v in _reads(eqns[k], computed[k], relevant[k]):
            last[v] = k
    dying: list[list] = [[] for _ in range(n)]
    for v, k in last.items():
        dying[k].append(v)
    for k in range(n):
        if computed[k]:
            dying[k].extend(v for v in eqns[k].outputs if last.get(v, -1) < k)

    records = []
    with _recomputing():
        for k in range(n):
            e = eqns[k]
            if computed[k]:
                vals = bind(e.prim, *[a.value if type(a) is Literal else env[a]
                                      for a in e.inputs], **e.params)
                if e.prim.multiple_results:
                    for v, x in zip(e.outputs, vals):
                        env.setdefault(v, x)
                else:
                    env.setdefault(e.outputs[0], vals)
            records.append(vjp_record(e, env, active.__contains__) if relevant[k]
                           else _empty_record(e))
            for v in dying[k]:
                env.pop(v, None)
    env.clear()
    in_cts = backward_pass(trace, records, cts, consume=True)
    return tuple(c if need_ct else None for c, need_ct in zip(in_cts, needs))


def _empty_record(e: Any) -> tuple:
    """A record for an equation no cotangent reaches (the backward pass skips it)."""
    out = [v.aval for v in e.outputs]
    return (tuple(a.aval for a in e.inputs), out if e.prim.multiple_results else out[0],
            (None,) * len(e.inputs))


checkpoint_p.def_vjp(_checkpoint_vjp, save_inputs=True, save_output=True, selective=True)
checkpoint_p.none_cts = True  # residual outputs get no cotangent: no zeros made for them


@checkpoint_p.def_jvp
def _checkpoint_jvp(tangents: Sequence[Any], primals: Sequence[Any], out: Any, *,
                    trace: Trace, n_res: int, policy: Callable, prevent_cse: bool,
                    name: str) -> list:
    from functx.transforms.checkpoint import checkpoint
    from functx.transforms.interpret import eval_trace
    from functx.transforms.jvp import jvp

    moving = [i for i, t in enumerate(tangents) if t is not None]
    if not moving:
        return [None] * len(trace.outputs)
    float_out = [i for i, v in enumerate(trace.outputs) if _is_float(v)]

    def tangent_out(ps: list, ts: list) -> list:
        def g(*xs: Any) -> list:
            full = list(primals)
            for i, x in zip(moving, xs):
                full[i] = x
            res = eval_trace(trace, *full)
            return [res[i] for i in float_out]
        return list(jvp(g, tuple(ps), tuple(ts))[1])

    t_float = checkpoint(tangent_out, policy=policy, prevent_cse=prevent_cse)(
        [primals[i] for i in moving], [tangents[i] for i in moving])
    result: list = [None] * len(trace.outputs)
    for i, t in zip(float_out, t_float):
        result[i] = t
    return result


@checkpoint_p.def_batch
def _checkpoint_batch(args: Sequence[Any], dims: Sequence[int | None], *, trace: Trace,
                      n_res: int, policy: Callable, prevent_cse: bool, name: str) -> tuple:
    from functx.transforms.checkpoint import checkpoint
    from functx.transforms.interpret import eval_trace
    from functx.transforms.vmap import vmap

    n = len(trace.outputs)

    def batched(*xs: Any) -> list:
        return vmap(lambda *ys: eval_trace(trace, *ys), in_axes=tuple(dims), out_axes=0)(*xs)

    outs = checkpoint(batched, policy=policy, prevent_cse=prevent_cse, _name=name)(*args)
    return list(outs), [0] * n
