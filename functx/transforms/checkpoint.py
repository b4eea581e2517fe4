"""Gradient checkpointing (rematerialisation): ``checkpoint``, ``checkpoint_sequential`` and
the saved-residual listings ``saved_residuals`` / ``print_saved_residuals``.

``checkpoint(f)`` traces ``f`` and applies it as one ``checkpoint`` equation (see
functx/primitives/checkpoint.py, where every rule of the primitive is defined). Under
``grad`` the forward pass keeps only the checkpoint's inputs, outputs and what the policy
saves; the backward pass recomputes the rest, one checkpoint at a time, so the memory of
the intermediates of a checkpointed block is needed only while that block is differentiated.
Recomputation evaluates the same primitives on the same values in the same order, so the
gradients are bit-identical to those computed without checkpoint (where the cotangents
reaching a checkpoint's inputs from outside it are added in the same order, as for a chain
of blocks).

Decisions (JAX's ``jax.checkpoint`` semantics unless said otherwise):

* ``f`` is traced abstractly each time the checkpointed function is called, so Python
  control flow on array values inside ``f`` raises ConcretizationError: make such
  arguments static (``static_argnums``) or use ``functx.numpy.where``. ``f``'s Python code
  runs once per call; recomputation replays the trace.
* Arrays ``f`` closes over (including values being differentiated by an enclosing ``grad``)
  become inputs of the checkpoint equation, so gradients flow to them.
* Nested checkpoints recompute the inner one again inside the outer one's recomputation.
* ``prevent_cse`` is recorded in the equation for trace optimisers (a common-subexpression
  pass must not merge a checkpoint's recomputation with the forward computation).
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from functx import tree
from functx.checkpoint_policies import nothing_saveable
from functx.errors import FunctxError
from functx.ir import AbstractArray, Trace
from functx.primitives.checkpoint import checkpoint_p, name_p, residual_vars, saved_vars
from functx.tracing import (
    INEXACT_DTYPES,
    ConcreteTraceBuilder,
    _check_leaf,
    _split_static,
    flat_function,
    bind,
    trace_flat,
    user_source,
)


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
        FunctxError: an argument or output is not an array, or a static argument number is
            out of range; ConcretizationError: ``f`` needs the value of a traced argument.

    Example:
        >>> block = fx.checkpoint(lambda w, x: fnp.tanh(x @ w) + x)
        >>> g = fx.grad(lambda w, x: block(w, x).sum())(w, x)   # block recomputed
    """
    if not callable(f):
        raise TypeError(f"checkpoint takes a function, not a {type(f).__name__} ({f!r:.40}).")
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
        dyn_idx, dyn_args = _split_static(args, static)
        leaves, in_tree = tree.flatten((dyn_args, kwargs))
        leaves = [_check_leaf(x, where, "an argument") for x in leaves]
        flat_f, out_tree_box = flat_function(f, args, dyn_idx, in_tree, where)

        trace, _ = trace_flat(flat_f, leaves, where)
        # Closed-over values become inputs, so an enclosing transform sees them.
        closed = Trace(trace.in_vars + trace.const_vars, (), (), trace.eqns, trace.outputs)
        saved = saved_vars(closed, policy)
        full = Trace(closed.in_vars, (), (), closed.eqns, closed.outputs + saved)
        outs = bind(checkpoint_p, *leaves, *trace.const_values, trace=full, n_res=len(saved),
                    policy=policy, prevent_cse=bool(prevent_cse), name=fname)
        return tree.unflatten(out_tree_box[0], outs[:len(trace.outputs)])

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
    print(f"{len(res)} residual{'s' if len(res) != 1 else ''}, {_bytes(total)}")


def _bytes(n: int) -> str:
    if n < 1 << 10:
        return f"{n} bytes"
    if n < 1 << 20:
        return f"{n / (1 << 10):.1f} KiB"
    return f"{n / (1 << 20):.1f} MiB"
