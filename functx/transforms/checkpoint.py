"""Gradient checkpointing (rematerialisation): the ``checkpoint`` primitive and its rules,
``checkpoint``, ``checkpoint_sequential``, ``is_recomputing`` and the saved-residual listings
``saved_residuals`` / ``print_saved_residuals``.

``checkpoint(f)`` traces ``f`` and applies it as one ``checkpoint`` equation. Under ``grad``
the forward pass keeps only the checkpoint's inputs, outputs and what the policy saves; the
backward pass recomputes the rest, one checkpoint at a time, so the memory of the
intermediates of a checkpointed block is needed only while that block is differentiated.
Recomputation evaluates the same primitives on the same values in the same order, so the
gradients are bit-identical to those computed without checkpoint (where the cotangents
reaching a checkpoint's inputs from outside it are added in the same order, as for a chain
of blocks).

``checkpoint_p`` is a higher-order primitive: its equation holds a sub-trace (parameter
``trace``) whose inputs are the equation's inputs. :func:`checkpoint` traces the function,
turns the values it closed over into inputs, and chooses with :func:`saved_vars` the values
the policy lets the forward pass keep. Those values are appended to the sub-trace's outputs:
the last ``n_res`` outputs of the equation are its *residuals*, and the wrapper returns only
the others. The VJP rule declares every input and output as saved, so what the backward
pass keeps for a checkpoint is exactly its inputs, its outputs and the policy's residuals.
Its rules live here, beside the transform, because they are interpreters themselves:

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

The ``name`` primitive (``checkpoint_name``), which labels values for policies, is a plain
primitive: functx/primitives/checkpoint.py.

Decisions (JAX's ``jax.checkpoint`` semantics unless said otherwise):

* ``f`` is traced abstractly each time the checkpointed function is called, so Python
  control flow on array values inside ``f`` raises ConcretizationError: make such
  arguments static (``static_argnums``) or use ``functx.numpy.where``. ``f``'s Python code
  runs once per call; recomputation replays the trace, not the Python code. So
  :func:`is_recomputing` is seen by primitive implementations and rules (e.g. a
  user-defined primitive's impl) that run during the recomputation, not by Python code
  inside the checkpointed function.
* Arrays ``f`` closes over (including values being differentiated by an enclosing ``grad``)
  become inputs of the checkpoint equation, so gradients flow to them.
* Nested checkpoints recompute the inner one again inside the outer one's recomputation.
* ``prevent_cse`` is recorded in the equation for trace optimisers (a common-subexpression
  pass must not merge a checkpoint's recomputation with the forward computation).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from functx import tree
from functx.backends import format_bytes
from functx.checkpoint_policies import nothing_saveable
from functx.errors import DTypeError, FunctxError, ShapeError
from functx.ir import AbstractArray, Trace, Var
from functx.primitives.checkpoint import name_p
from functx.registry import Primitive
from functx.tracing import INEXACT_DTYPES, bind, trace_function, user_source
from functx.transforms._args import check_callable
from functx.transforms.interpret import eval_trace, walk, trace_has_effects
from functx.transforms.jvp import jvp
from functx.transforms.reverse import ConcreteTraceBuilder, backward_pass, vjp_record
from functx.transforms.vmap import running_axis_name, vmap

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
checkpoint_p.has_effects = lambda params: trace_has_effects(params["trace"])  # debug prints


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
    env = _Recomputed(zip(trace.in_vars, ins))
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
    flags = iter(zip(computed, relevant))  # the walk visits the equations in order

    def rule(eqn: Any, vals: list) -> Any:
        compute, build = next(flags)
        if compute:
            got = bind(eqn.prim, *vals, **eqn.params)
            if not eqn.prim.multiple_results:
                got = [got]
            outs = [env.get(v, x) for v, x in zip(eqn.outputs, got)]  # a kept value stays
        else:
            outs = [env[v] for v in eqn.outputs]
        records.append(vjp_record(eqn, vals, outs, active.__contains__) if build
                       else _empty_record(eqn))
        return outs if eqn.prim.multiple_results else outs[0]

    with _recomputing():
        walk(trace, env, rule, dying)
    env.clear()
    in_cts = backward_pass(trace, records, cts, consume=True)
    return tuple(c if need_ct else None for c, need_ct in zip(in_cts, needs))


class _Recomputed(dict):
    """The values of a checkpoint's recomputation. A variable neither kept nor recomputed
    reads as None: the walk reads every input of every equation, and the rule uses only
    those it needs (an equation's residuals, or the inputs of one it recomputes)."""

    def __missing__(self, var: Var) -> None:
        return None


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
    n = len(trace.outputs)

    axis_name = running_axis_name()  # collectives in the sub-trace map over the same axis

    def batched(*xs: Any) -> list:
        return vmap(lambda *ys: eval_trace(trace, *ys), in_axes=tuple(dims), out_axes=0,
                    axis_name=axis_name)(*xs)

    outs = checkpoint(batched, policy=policy, prevent_cse=prevent_cse, _name=name)(*args)
    return list(outs), [0] * n


# ----------------------------------------------------------------------------------------
# The transform


def checkpoint(f: Callable, *, policy: Callable | None = None,
               static_argnums: int | Sequence[int] = (), prevent_cse: bool = True,
               _name: str | None = None) -> Callable:
    """``f``, recomputed in the backward pass instead of keeping its intermediates.

    Under ``grad``/``vjp`` the forward pass keeps only the inputs and outputs of ``f`` and
    the values ``policy`` marks saveable; the backward pass recomputes everything else
    from them (exactly: the gradients are bit-identical to those without checkpoint).

    Args:
        f: a function of arrays (pytrees of arrays) returning arrays (a pytree of them).
        policy: which values to keep, a function ``policy(prim, *avals, **params) -> bool``
            (see :mod:`functx.checkpoint_policies`); default ``nothing_saveable``.
        static_argnums: positions of arguments passed to ``f`` as they are (not traced,
            not differentiated): ints, strings, flags that steer Python control flow.
        prevent_cse: recorded in the equation; tells trace optimisers not to merge the
            recomputation with the forward computation.

    Returns:
        A function with ``f``'s signature and results.

    Raises:
        ArgumentTypeError: ``f`` is not callable (raised by ``checkpoint`` itself).
        FunctxError: an argument or output is not an array, or a static argument number is
            out of range; ConcretizationError: ``f`` needs the value of a traced argument.

    Example:
        >>> block = fx.checkpoint(lambda w, x: fnp.tanh(x @ w) + x)
        >>> g = fx.grad(lambda w, x: block(w, x).sum())(w, x)   # block recomputed
    """
    check_callable(f, "checkpoint")
    if policy is None:
        policy = nothing_saveable
    if not callable(policy):
        raise TypeError(f"checkpoint: the policy must be a function of (prim, *avals, "
                        f"**params), not a {type(policy).__name__} ({policy!r:.40}). See "
                        "functx.checkpoint_policies.")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    fname = _name or getattr(f, "__name__", "f")
    where = f"checkpoint({fname})"

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        for i in static:
            if not isinstance(i, (int, np.integer)) or not -len(args) <= i < len(args):
                raise FunctxError(
                    f"{where}: static_argnums={static_argnums} but the function was called "
                    f"with {len(args)} positional argument(s). Pass static arguments "
                    "positionally, or fix static_argnums.")
        trace, out_tree, flat = trace_function(f, args, kwargs, where, static_argnums=static)
        # Closed-over values become inputs, so an enclosing transform sees them.
        closed = Trace(trace.in_vars + trace.const_vars, (), (), trace.eqns, trace.outputs)
        saved = saved_vars(closed, policy)
        full = Trace(closed.in_vars, (), (), closed.eqns, closed.outputs + saved)
        outs = bind(checkpoint_p, *flat.leaves, *trace.const_values, trace=full,
                    n_res=len(saved), policy=policy, prevent_cse=bool(prevent_cse), name=fname)
        return tree.unflatten(out_tree, outs[:len(trace.outputs)])

    return wrapped


remat = checkpoint


def checkpoint_sequential(functions: Sequence[Callable], segments: int, *,
                          policy: Callable | None = None) -> Callable:
    """A chain of functions split into ``segments`` checkpointed segments.

    ``checkpoint_sequential([f1, f2, ..., fn], segments)(x)`` computes ``fn(...f2(f1(x)))``.
    The functions are split into ``segments`` consecutive groups of (nearly) equal length,
    longer ones first; every group but the last is wrapped in :func:`checkpoint`. The last
    is not, as in PyTorch's ``torch.utils.checkpoint.checkpoint_sequential``: its backward
    pass follows its forward pass at once, so checkpointing it would only add work. The
    backward pass then keeps one value per segment boundary plus one segment's
    intermediates: with about ``sqrt(n)`` segments, memory grows as ``O(sqrt(n))``.

    Args:
        functions: callables of one argument (an array or a pytree), each taking the
            previous one's result; use closures or ``functools.partial`` for parameters.
        segments: the number of groups, between 1 and ``len(functions)``.
        policy: the checkpoint policy of each segment (default: save nothing).

    Returns:
        A function of one argument, the input of the first function.

    Raises:
        FunctxError: ``functions`` is empty or holds a non-callable, or ``segments`` is out
            of range.

    Example:
        >>> layers = [functools.partial(layer, p) for p in params]
        >>> y = fx.checkpoint_sequential(layers, segments=4)(x)
    """
    fns = list(functions)
    if not fns:
        raise FunctxError("checkpoint_sequential needs at least one function; got an empty "
                          "sequence.")
    for i, fn in enumerate(fns):
        if not callable(fn):
            raise FunctxError(f"checkpoint_sequential: functions[{i}] is a "
                              f"{type(fn).__name__}, not a callable. Pass functions of one "
                              "argument.")
    if isinstance(segments, bool) or not isinstance(segments, (int, np.integer)) \
            or not 1 <= segments <= len(fns):
        raise FunctxError(f"checkpoint_sequential: segments={segments!r} must be an integer "
                          f"between 1 and the number of functions ({len(fns)}).")
    segments = int(segments)
    size, extra = divmod(len(fns), segments)
    groups, start = [], 0
    for s in range(segments):
        stop = start + size + (s < extra)
        groups.append(fns[start:stop])
        start = stop

    def chain(group: list) -> Callable:
        def run(x: Any) -> Any:
            for fn in group:
                x = fn(x)
            return x
        return run

    stages = [checkpoint(chain(g), policy=policy, _name=f"segment{s}")
              for s, g in enumerate(groups[:-1])]
    stages.append(chain(groups[-1]))

    def sequential(x: Any) -> Any:
        for stage in stages:
            x = stage(x)
        return x

    return sequential


# ----------------------------------------------------------------------------------------
# What the backward pass keeps


class _SourceTraceBuilder(ConcreteTraceBuilder):
    """grad's concrete builder, also recording each equation's user source line (which
    grad's hot path skips)."""

    def process(self, prim: Any, args: tuple, params: dict) -> Any:
        n = len(self.eqns)
        out = super().process(prim, args, params)
        if len(self.eqns) > n and self.eqns[n].source is None:
            self.eqns[n] = self.eqns[n]._replace(source=user_source(2))
        return out


def _leaf_paths(f: Callable, args: tuple) -> list[str]:
    """A readable path (``params['w'][0]``) for each leaf of ``args``, in flatten order."""
    try:
        names = list(inspect.signature(f).bind(*args).arguments)
        names = names if len(names) == len(args) else None
    except (TypeError, ValueError):
        names = None
    paths: list[str] = []

    def walk(x: Any, path: str) -> None:
        if type(x) is dict:
            try:
                keys = sorted(x)
            except TypeError:  # as functx.tree orders keys that do not compare
                keys = sorted(x, key=lambda k: (type(k).__name__, repr(k)))
            for k in keys:
                walk(x[k], f"{path}[{k!r}]")
        elif type(x) in (list, tuple):
            for i, c in enumerate(x):
                walk(c, f"{path}[{i}]")
        elif x is not None:
            paths.append(path)

    for i, a in enumerate(args):
        start = len(paths)
        walk(a, names[i] if names else f"args[{i}]")
        if len(paths) - start != len(tree.leaves(a)):  # another node type: number the leaves
            del paths[start:]
            base = names[i] if names else f"args[{i}]"
            paths.extend(f"{base} (leaf {k})" for k in range(len(tree.leaves(a))))
    return paths


def _producers(trace: Trace) -> dict:
    return {v: (e, j) for e in trace.eqns for j, v in enumerate(e.outputs)}


def _describe_output(eqn: Any, index: int) -> str:
    """Where output ``index`` of ``eqn`` comes from, looking into checkpoints' residuals."""
    prim = eqn.prim
    if prim is checkpoint_p:
        p = eqn.params
        n_out = len(p["trace"].outputs) - p["n_res"]
        if index >= n_out:
            inner = p["trace"].outputs[index]
            e, j = _producers(p["trace"])[inner]
            return (f"{_describe_output(e, j)}, kept by checkpoint({p['name']}) with policy "
                    f"{p['policy']!r}")
        what = f"output of checkpoint({p['name']})"
    elif prim is name_p:
        what = f"output of name (named {eqn.params['name']!r})"
    else:
        what = f"output of {prim.name}"
    return f"{what} from {eqn.source}" if eqn.source is not None else what


def saved_residuals(f: Callable, *args: Any, **kwargs: Any) -> list[tuple[AbstractArray, str]]:
    """What the backward pass of ``f`` keeps, with shapes and where each value comes from.

    Runs ``f(*args, **kwargs)`` as ``grad`` does (differentiating every floating-point leaf
    of ``args``) and lists every value a VJP rule keeps for the backward pass, each once:
    arguments, closed-over constants, and outputs of primitives with the user's source line.
    A value kept twice (the same array under two names, as after ``checkpoint_name``) is
    listed once.
    Values a :func:`checkpoint` keeps under its policy are described by the primitive (and
    source line) inside the checkpointed function that produced them.

    Args:
        f: the function (as passed to ``grad``).
        *args, **kwargs: its arguments; ``kwargs`` are not differentiated.

    Returns:
        A list of ``(abstract value, description)``, arguments first, then in the order the
        forward pass computed them.

    Example:
        >>> for aval, what in fx.saved_residuals(loss, params, x): print(aval, what)
    """
    leaves, in_tree = tree.flatten(args)
    paths = _leaf_paths(f, args)
    with _SourceTraceBuilder("saved_residuals") as b:
        inputs = []
        for x in leaves:
            dtype = getattr(x, "dtype", None) or np.asarray(x).dtype
            inputs.append(b.new_input(x) if INEXACT_DTYPES[np.dtype(dtype)] else x)
        arg_vars = {t._var: p for t, p in zip(inputs, paths) if hasattr(t, "_var")}
        out = f(*tree.unflatten(in_tree, inputs), **kwargs)
        del out
        eqns = list(b.eqns)
        consts = set(b.const_vars)
    seen: set = set()
    seen_values: set = set()
    found: list[tuple[tuple, AbstractArray, str]] = []
    order = {v: k for k, v in enumerate(arg_vars)}
    made_by = {w: (k, e, j) for k, e in enumerate(eqns) for j, w in enumerate(e.outputs)}
    for k, (e, (ins, res_out, _)) in enumerate(zip(eqns, b.records)):
        held = {id(a): x for a, x in zip(e.inputs, ins)}
        outs = res_out if e.prim.multiple_results else [res_out]
        held.update((id(v), x) for v, x in zip(e.outputs, outs))
        for v in residual_vars(e):
            value = held[id(v)]
            if v in seen or id(value) in seen_values:  # an identity (name) keeps one array
                continue
            seen.add(v)
            seen_values.add(id(value))
            if v in arg_vars:
                found.append(((0, order[v]), v.aval, f"from the argument {arg_vars[v]}"))
            elif v in consts:
                found.append(((1, k), v.aval, "from a constant (a value the function closed "
                                              "over or computed without the arguments)"))
            else:
                i, pe, j = made_by[v]
                found.append(((2, i, j), v.aval, _describe_output(pe, j)))
    found.sort(key=lambda t: t[0])
    return [(aval, what) for _, aval, what in found]


def print_saved_residuals(f: Callable, *args: Any, **kwargs: Any) -> None:
    """Print what the backward pass of ``f`` keeps (see :func:`saved_residuals`): one line
    per value with its type and origin, then the count and total size.

    Example:
        >>> fx.print_saved_residuals(lambda x: fnp.sin(fnp.sin(x)).sum(), np.ones(3))
        f64[3] from the argument x
        f64[3] output of sin from <stdin>:1 (<lambda>)
        2 residuals, 48 bytes
    """
    res = saved_residuals(f, *args, **kwargs)
    for aval, what in res:
        print(f"{aval} {what}")
    total = sum(aval.size * np.dtype(aval.dtype).itemsize for aval, _ in res)
    print(f"{len(res)} residual{'s' if len(res) != 1 else ''}, {format_bytes(total)}")

