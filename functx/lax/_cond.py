"""``cond`` and ``switch``: run one of several branches, chosen by a value, as one equation.

``cond_p`` is a higher-order primitive whose parameter ``branches`` is a tuple of closed
sub-traces with the same inputs and outputs. Its operands are an integer index, then the
hoisted constants of every branch (each branch's trace takes all of them and reads its
own), then the operands. ``cond(pred, t, f)`` is ``switch(pred, (f, t))``.

The rules:

* ``abstract_eval``: the branches' common output types; the index must be an integer
  scalar;
* ``impl``: runs the branch the index selects (clamped to the valid range, as JAX does);
  on CUDA reading the index is a host synchronisation;
* ``vjp``: a ``cond`` over the branches' VJPs with the same index: only the taken branch
  is differentiated (and recomputed: nothing is stored for the untaken ones);
* ``jvp``: a ``cond`` over the branches' JVPs;
* ``batch``: with an unbatched index, a ``cond`` over the batched branches; with a batched
  index (a predicate that differs across the batch), every branch runs on the whole batch
  and each member takes its own branch's result (``where``), as JAX does.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from functx.transforms.interpret import trace_has_effects
from functx import tree
from functx.ir import Trace, Var, abstractify
from functx.primitives._batching import batch_size, moveaxis, zeros_like
from functx.registry import Primitive
from functx.tracing import Tracer, bind
from functx.transforms._args import check_callable
from functx.transforms.grad import vjp
from functx.transforms.jvp import jvp
from functx.transforms.vmap import running_axis_name, vmap
from functx.lax._common import (ControlFlowError, as_leaf, bind_loop, describe_tree, is_float,
                                run_closed, run_traced, strong, trace_closed, zeros_of)

import functx.numpy as fnp

__all__ = ["cond", "switch", "cond_p", "switch_leaves"]

cond_p = Primitive("cond", multiple_results=True)
cond_p.cache_abstract_eval = False  # params hold fresh sub-traces per call
cond_p.has_effects = lambda params: any(trace_has_effects(b) for b in params["branches"])


@cond_p.def_abstract_eval
def _cond_abstract_eval(index: Any, *avals: Any, branches: tuple, name: str) -> list:
    if index.shape != () or index.dtype.kind not in "iu":
        raise ControlFlowError(f"switch({name}): the index must be an integer scalar, not "
                               f"{index}.")
    for k, br in enumerate(branches):
        if len(br.in_vars) != len(avals) or any(
                tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype
                for a, b in zip(avals, br.in_avals)):
            raise ControlFlowError(f"switch({name}): branch {k} was traced for "
                                   f"{list(br.in_avals)} but got {list(avals)}.")
    return [strong(a) for a in branches[0].out_avals]


@cond_p.def_impl
def _cond_impl(xp: Any, index: Any, *args: Any, branches: tuple, name: str) -> list:
    i = min(max(int(index), 0), len(branches) - 1)  # (CUDA: a host read of the index)
    br = branches[i]
    outs = run_closed(br, args)
    return [o if hasattr(o, "dtype") and o.dtype == a.dtype else xp.asarray(o, a.dtype)
            for o, a in zip(outs, branches[0].out_avals)]


def _fit(x: Any, aval: Any, like: Any = None) -> Any:
    if x is None:  # zeros on the device of ``like`` (a value of type aval), if given
        return zeros_of(aval) if like is None else zeros_like(like)
    return x if x.dtype == aval.dtype else fnp.astype(x, aval.dtype)


def _cond_vjp(cts: list, ins: tuple, out: list, *, branches: tuple, name: str,
              needs: Sequence[bool] | None = None) -> tuple:
    index, ops = ins[0], list(ins[1:])
    avals = branches[0].in_avals
    out_avals = branches[0].out_avals
    needs = [True] * len(ins) if needs is None else list(needs)
    moving = [i for i in range(len(ops)) if needs[i + 1] and is_float(avals[i])]
    with_ct = [j for j, c in enumerate(cts) if c is not None]
    if not moving or not with_ct:
        return (None,) * len(ins)

    def backward(br: Trace) -> Callable:
        def f(args: list) -> list:
            x, c = args[:len(ops)], args[len(ops):]

            def g(*m: Any) -> list:
                full = list(x)
                for k, v in zip(moving, m):
                    full[k] = v
                outs = run_traced(br, full)
                return [outs[j] for j in with_ct]

            _, pull = vjp(g, *[x[i] for i in moving])
            got = pull([_fit(ct, out_avals[j]) for ct, j in zip(c, with_ct)])
            return [_fit(t, avals[i]) for t, i in zip(got, moving)]
        return f

    got = switch_leaves(index, [backward(br) for br in branches],
                        ops + [cts[j] for j in with_ct], f"{name}_bwd")
    result: list = [None] * len(ins)
    for i, c in zip(moving, got):
        result[i + 1] = c
    return tuple(result)


cond_p.def_vjp(_cond_vjp, save_inputs=True, selective=True)
cond_p.none_cts = True


@cond_p.def_jvp
def _cond_jvp(tangents: Sequence[Any], primals: Sequence[Any], out: Any, *, branches: tuple,
              name: str) -> list:
    index, ops = primals[0], list(primals[1:])
    t_ops = list(tangents[1:])
    moving = [i for i, t in enumerate(t_ops) if t is not None]
    out_avals = branches[0].out_avals
    fo = [j for j, a in enumerate(out_avals) if is_float(a)]
    if not moving or not fo:
        return [None] * len(out_avals)

    def forward(br: Trace) -> Callable:
        def f(args: list) -> list:
            x, tx = args[:len(ops)], args[len(ops):]

            def g(*m: Any) -> list:
                full = list(x)
                for k, v in zip(moving, m):
                    full[k] = v
                return [run_traced(br, full)[j] for j in fo]

            _, t_out = jvp(g, tuple(x[i] for i in moving), tuple(tx))
            return [_fit(t, out_avals[j]) for t, j in zip(t_out, fo)]
        return f

    got = switch_leaves(index, [forward(br) for br in branches],
                        ops + [t_ops[i] for i in moving], f"{name}_jvp")
    result: list = [None] * len(out_avals)
    for j, t in zip(fo, got):
        result[j] = t
    return result


@cond_p.def_batch
def _cond_batch(args: Sequence[Any], dims: Sequence[int | None], *, branches: tuple,
                name: str) -> tuple:
    size = batch_size(args, dims)
    index, ops = args[0], [a if d is None else moveaxis(a, d, 0)
                           for a, d in zip(args[1:], dims[1:])]
    axes = tuple(None if d is None else 0 for d in dims[1:])
    name_ = running_axis_name()  # collectives in the branches map over the batched axis
    batched = [vmap(lambda *a, br=br: run_traced(br, a), in_axes=axes, out_axes=0,
                    axis_size=size, axis_name=name_) for br in branches]
    n_out = len(branches[0].outputs)
    if dims[0] is None:  # one branch for the whole batch
        outs = switch_leaves(index, [lambda a, f=f: f(*a) for f in batched], ops, name)
        return outs, [0] * n_out
    # a batched index: run every branch, and let each member take its own branch's result
    idx = fnp.clip(moveaxis(index, dims[0], 0), 0, len(branches) - 1)
    results = [f(*ops) for f in batched]
    outs = []
    for j in range(n_out):
        o = results[0][j]
        for k in range(1, len(branches)):
            r = results[k][j]
            o = fnp.where(fnp.reshape(idx == k, (size,) + (1,) * (r.ndim - 1)), r, o)
        outs.append(o)
    return outs, [0] * n_out


def _join(traced: list) -> tuple[tuple, list]:
    """The branches as traces of every branch's constants and the operands, and the
    constants' values."""
    consts = [c for t in traced for c in t.consts]
    branches = []
    for k, t in enumerate(traced):
        ins = []
        for j, other in enumerate(traced):
            n_c = len(other.consts)
            ins.extend(t.trace.in_vars[:n_c] if j == k
                       else [Var(v.aval) for v in other.trace.in_vars[:n_c]])
        ins.extend(t.trace.in_vars[len(t.consts):])
        branches.append(Trace(tuple(ins), (), (), t.trace.eqns, t.trace.outputs))
    return tuple(branches), consts


def switch_leaves(index: Any, fns: Sequence[Callable], ops: Sequence[Any],
                  name: str = "f") -> list:
    """``switch`` on flat lists: each ``fn(list_of_ops) -> list`` (the rules' own
    branches; the outputs' types must agree)."""
    avals = [strong(abstractify(o)) for o in ops]
    traced = [trace_closed(lambda a, box, fn=fn: list(fn(list(a))), (avals,),
                           f"switch({name})") for fn in fns]
    branches, consts = _join(traced)
    return list(bind(cond_p, index, *consts, *ops, branches=branches, name=name))


def _index(index: Any, n: int, where: str, what: str) -> Any:
    a = abstractify(index) if hasattr(index, "dtype") or isinstance(index, (int, bool)) \
        else None
    if a is None or a.shape != () or np.dtype(a.dtype).kind not in "iub":
        raise ControlFlowError(
            f"{where}: {what} must be a scalar {'boolean' if n == 2 else 'integer'}, but it "
            f"is {a if a is not None else type(index).__name__}. "
            + ("Compare to get a boolean (x > 0), or reduce an array with .all()/.any()."
               if n == 2 else "Pass an integer scalar (cast a float with .astype(int))."))
    if type(index) is not Tracer and not hasattr(index, "shape"):
        index = np.asarray(index)
    return fnp.astype(index, np.int32)


def _switch(index: Any, branches: Sequence[Callable], operands: tuple, where: str,
            name: str) -> Any:
    leaves, in_tree = tree.flatten(operands)
    leaves = [as_leaf(x, where, "the operands") for x in leaves]
    avals = [strong(abstractify(x)) for x in leaves]
    arg = tree.unflatten(in_tree, avals)
    traced = []
    for k, fn in enumerate(branches):
        def body(*a: Any, fn: Callable = fn) -> list:
            box = a[-1]
            out = fn(*a[:-1])
            out_leaves, out_tree = tree.flatten(out)
            box.append(out_tree)
            return out_leaves
        traced.append(trace_closed(body, tuple(arg), where))
    first = traced[0]
    for k, t in enumerate(traced[1:], 1):
        a0 = [strong(a) for a in first.trace.out_avals]
        ak = [strong(a) for a in t.trace.out_avals]
        if t.box[0] != first.box[0] or [(a.shape, a.dtype) for a in a0] != \
                [(a.shape, a.dtype) for a in ak]:
            raise ControlFlowError(
                f"{where}: every branch must return the same structure, shapes and dtypes, "
                f"but branch 0 returns {describe_tree(a0, first.box[0])} and branch {k} "
                f"returns {describe_tree(ak, t.box[0])}. Cast with .astype() or broadcast "
                "so the branches agree.")
    joined, consts = _join(traced)
    out = bind_loop(cond_p, index, *consts, *leaves, branches=joined, name=name)
    return tree.unflatten(first.box[0], out)


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """Apply the branch ``index`` selects to ``operands``: ``jax.lax.switch``.

    ``index`` is clamped to ``[0, len(branches) - 1]``. Every branch is traced (once,
    abstractly); only the selected one runs. Under ``vmap`` with a batched index every
    branch runs on the whole batch and each member takes its own branch's result. Reverse
    and forward mode differentiate the branch taken.

    Args:
        index: an integer scalar.
        branches: a sequence of functions of ``*operands``, returning the same structure,
            shapes and dtypes.
        *operands: the branches' arguments (pytrees of arrays).

    Returns:
        The selected branch's output.

    Raises:
        ControlFlowError: ``index`` is not an integer scalar, ``branches`` is empty, or the
            branches' outputs differ in structure, shape or dtype.

    Example:
        >>> y = functx.lax.switch(k, [fnp.sin, fnp.cos, fnp.tanh], x)
    """
    branches = list(branches)
    where = "switch"
    if not branches:
        raise ControlFlowError("switch: branches is empty; pass at least one function.")
    for b in branches:
        check_callable(b, "switch")
    idx = _index(index, 0, where, "the index")
    return _switch(idx, branches, operands, where, "switch")


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``: ``jax.lax.cond``.

    Both functions are traced (once, abstractly); only the selected one runs. Under
    ``vmap`` with a batched predicate both run on the whole batch and each member takes its
    own result (as JAX does). Reverse and forward mode differentiate the branch taken.

    Args:
        pred: a boolean scalar (an integer scalar counts as ``pred != 0``, as in JAX).
        true_fun, false_fun: functions of ``*operands`` returning the same structure,
            shapes and dtypes.
        *operands: their arguments (pytrees of arrays).

    Returns:
        The selected function's output.

    Raises:
        ControlFlowError: ``pred`` is not a boolean (or integer) scalar, or the two
            functions' outputs differ in structure, shape or dtype.

    Example:
        >>> y = functx.lax.cond(x.sum() > 0, lambda x: x, lambda x: -x, x)
    """
    check_callable(true_fun, "cond")
    check_callable(false_fun, "cond")
    name = f"{getattr(true_fun, '__name__', 'f')}, {getattr(false_fun, '__name__', 'g')}"
    where = f"cond({name})"
    idx = _index(pred, 2, where, "the predicate")
    if np.dtype(abstractify(pred).dtype).kind != "b":
        idx = fnp.astype(idx != 0, np.int32)
    return _switch(idx, [false_fun, true_fun], operands, where, name)
