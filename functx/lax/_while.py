"""``while_loop``: a loop whose trip count is decided by the values, as one equation.

``while_p`` is a higher-order primitive with two closed sub-traces in its parameters:
``cond`` (``(cond consts, carry) -> boolean scalar``) and ``body`` (``(body consts, carry)
-> carry``). Its operands are the hoisted constants of both, then the initial carry.

The rules:

* ``abstract_eval``: the carry's types (checked against both sub-traces);
* ``impl``: a Python loop; each iteration runs ``cond`` and reads the predicate on the
  host (``bool(pred)``): on CUDA this is the one synchronisation per iteration a
  ``while_loop`` needs (``scan`` and ``fori_loop`` with static bounds have none);
* ``vjp``: none possible (the trip count is only known when it runs, so the forward pass
  cannot plan what to keep): it raises :class:`~functx.lax.ReverseModeError`, which says
  to use ``scan`` or ``fori_loop`` with static bounds;
* ``jvp``: a ``while`` of the body's JVP, the tangents carried beside the carry (the
  predicate reads the primal carry only);
* ``batch``: with any batched operand, the predicate is computed per member; the loop runs
  while any member's predicate holds, and members whose predicate is false keep their
  carry (``where``), as JAX does.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from functx.transforms.interpret import trace_has_effects
from functx import tree
from functx.ir import Trace, abstractify
from functx.primitives._batching import batch_size, moveaxis, zeros_like
from functx.registry import Primitive
from functx.tracing import bind
from functx.transforms._args import check_callable
from functx.transforms.jvp import jvp
from functx.transforms.vmap import running_axis_name, vmap
from functx.lax._common import (ControlFlowError, ReverseModeError, as_leaf, bind_loop,
                                describe_tree,
                                is_float, run_closed, run_traced, strong, trace_closed,
                                zeros_of, batch_front)

import functx.numpy as fnp

__all__ = ["while_loop", "while_p", "while_leaves"]

while_p = Primitive("while", multiple_results=True)
while_p.cache_abstract_eval = False  # params hold fresh sub-traces per call
while_p.has_effects = lambda params: (trace_has_effects(params["cond"])
                                      or trace_has_effects(params["body"]))


@while_p.def_abstract_eval
def _while_abstract_eval(*avals: Any, cond: Trace, body: Trace, n_cc: int, n_bc: int,
                         name: str) -> list:
    carry = avals[n_cc + n_bc:]
    if len(avals) != n_cc + len(body.in_vars) or len(cond.in_vars) != n_cc + len(carry):
        raise ControlFlowError(f"while_loop({name}) got {len(avals)} operands, which do not "
                               "match its cond and body traces.")
    for i, (a, b) in enumerate(zip(avals, cond.in_avals[:n_cc] + body.in_avals)):
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            raise ControlFlowError(f"while_loop({name}): operand {i} is {a} but the loop "
                                   f"was traced for {b}. Call while_loop again to retrace.")
    return [strong(a) for a in body.out_avals]


@while_p.def_impl
def _while_impl(xp: Any, *args: Any, cond: Trace, body: Trace, n_cc: int, n_bc: int,
                name: str) -> list:
    cc, bc, carry = list(args[:n_cc]), list(args[n_cc:n_cc + n_bc]), list(args[n_cc + n_bc:])
    while bool(run_closed(cond, cc + carry)[0]):  # (CUDA: one host read per iteration)
        carry = run_closed(body, bc + carry)
    return [c if hasattr(c, "dtype") and c.dtype == a.dtype else xp.asarray(c, a.dtype)
            for c, a in zip(carry, body.out_avals)]


def _while_vjp(cts: list, ins: tuple, out: list, *, cond: Trace, body: Trace, n_cc: int,
               n_bc: int, name: str) -> tuple:
    raise ReverseModeError(
        f"Reverse-mode differentiation (grad, vjp) reached while_loop({name}), whose number "
        "of iterations is only known when it runs, so the backward pass cannot be planned. "
        "Use functx.lax.scan, or functx.lax.fori_loop with bounds that are Python ints "
        "(it becomes a scan), for a loop you differentiate in reverse mode; forward mode "
        "(jvp, jacfwd) works through while_loop.")


while_p.def_vjp(_while_vjp)
while_p.none_cts = True


def while_leaves(cond_f: Callable, body_f: Callable, init: Sequence[Any],
                 name: str = "f") -> list:
    """``while_loop`` on a flat list carry: ``cond_f(list) -> bool scalar``,
    ``body_f(list) -> list`` of the same types (the rules' own loops)."""
    avals = [strong(abstractify(c)) for c in init]
    cond = trace_closed(lambda c, box: [cond_f(list(c))], (avals,), f"while_loop({name})")
    body = trace_closed(lambda c, box: list(body_f(list(c))), (avals,),
                        f"while_loop({name})")
    return list(bind(while_p, *cond.consts, *body.consts, *init, cond=cond.trace,
                     body=body.trace, n_cc=len(cond.consts), n_bc=len(body.consts),
                     name=name))


@while_p.def_jvp
def _while_jvp(tangents: Sequence[Any], primals: Sequence[Any], out: Any, *, cond: Trace,
               body: Trace, n_cc: int, n_bc: int, name: str) -> list:
    cc, bc = list(primals[:n_cc]), list(primals[n_cc:n_cc + n_bc])
    t_bc = list(tangents[n_cc:n_cc + n_bc])
    t_init = list(tangents[n_cc + n_bc:])
    n = len(t_init)
    if all(t is None for t in t_bc + t_init):
        return [None] * n
    c_avals = body.in_avals[n_bc:]
    fc = [i for i in range(n) if is_float(c_avals[i])]
    mb = [i for i, t in enumerate(t_bc) if t is not None]

    def cond_f(c: list) -> Any:
        return run_traced(cond, cc + c[:n])[0]

    def body_f(c: list) -> list:
        x, tx = c[:n], c[n:]

        def g(*m: Any) -> list:
            full = bc + list(x)
            for k, v in zip([*mb, *(n_bc + i for i in fc)], m):
                full[k] = v
            outs = run_traced(body, full)
            return [outs[i] for i in fc], outs

        _, t_out, outs = jvp(g, tuple([bc[i] for i in mb] + [x[i] for i in fc]),
                             tuple([t_bc[i] for i in mb] + list(tx)), has_aux=True)
        return list(outs) + [_fit(t, c_avals[i]) for t, i in zip(t_out, fc)]

    carry = list(primals[n_cc + n_bc:])
    init = carry + [_fit(t_init[i], c_avals[i], carry[i]) for i in fc]
    res = while_leaves(cond_f, body_f, init, f"{name}_jvp")
    result: list = [None] * n
    for i, t in zip(fc, res[n:]):
        result[i] = t
    return result


def _fit(x: Any, aval: Any, like: Any = None) -> Any:
    if x is None:  # zeros on the device of ``like`` (a value of type aval), if given
        return zeros_of(aval) if like is None else zeros_like(like)
    return x if x.dtype == aval.dtype else fnp.astype(x, aval.dtype)


@while_p.def_batch
def _while_batch(args: Sequence[Any], dims: Sequence[int | None], *, cond: Trace,
                 body: Trace, n_cc: int, n_bc: int, name: str) -> tuple:
    size = batch_size(args, dims)
    n_k = n_cc + n_bc
    consts = [a if d is None else moveaxis(a, d, 0) for a, d in zip(args[:n_k], dims[:n_k])]
    cc, bc = consts[:n_cc], consts[n_cc:]
    like = next(a for a, d in zip(args, dims) if d is not None)
    init = [batch_front(a, d, size, like) for a, d in zip(args[n_k:], dims[n_k:])]
    n = len(init)
    axes_c = tuple([None if d is None else 0 for d in dims[:n_cc]] + [0] * n)
    axes_b = tuple([None if d is None else 0 for d in dims[n_cc:n_k]] + [0] * n)
    name = running_axis_name()  # collectives in the bodies map over the axis being batched
    pred_b = vmap(lambda *a: run_traced(cond, a)[0], in_axes=axes_c, axis_size=size,
                  axis_name=name)
    body_b = vmap(lambda *a: run_traced(body, a), in_axes=axes_b, axis_size=size,
                  axis_name=name)

    def cond_f(c: list) -> Any:
        return fnp.any(pred_b(*cc, *c))

    def body_f(c: list) -> list:
        p = pred_b(*cc, *c)  # members whose predicate is false keep their carry
        new = body_b(*bc, *c)
        return [fnp.where(fnp.reshape(p, (size,) + (1,) * (x.ndim - 1)), y, x)
                for x, y in zip(c, new)]

    return while_leaves(cond_f, body_f, init, name), [0] * n


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """Run ``body_fun`` while ``cond_fun`` holds: ``jax.lax.while_loop``.

    Computes, as one equation (``cond_fun`` and ``body_fun`` are traced once)::

        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val

    Differentiable in forward mode (``jvp``, ``jacfwd``, ``linearize``); reverse mode
    raises :class:`~functx.lax.ReverseModeError`, because the number of iterations is only
    known at run time: use :func:`scan` or :func:`fori_loop` with static bounds there.
    Under ``vmap`` with a batched predicate the loop runs until every member is done;
    finished members keep their value. On CUDA each iteration reads the predicate on the
    host (one synchronisation per iteration).

    Args:
        cond_fun: ``cond_fun(val) -> boolean scalar``.
        body_fun: ``body_fun(val) -> val``, with the structure, shapes and dtypes of
            ``init_val``.
        init_val: the initial value (a pytree of arrays or Python scalars).

    Returns:
        The final value.

    Raises:
        ControlFlowError: ``cond_fun`` does not return a boolean scalar, or ``body_fun``
            changes the value's structure, shapes or dtypes.

    Example:
        >>> # Newton's method for sqrt(a)
        >>> x = functx.lax.while_loop(lambda x: fnp.abs(x * x - a) > 1e-12,
        ...                           lambda x: 0.5 * (x + a / x), a)
    """
    check_callable(cond_fun, "while_loop")
    check_callable(body_fun, "while_loop")
    fname = getattr(body_fun, "__name__", "f")
    where = f"while_loop({getattr(cond_fun, '__name__', 'cond')}, {fname})"
    leaves, treedef = tree.flatten(init_val)
    leaves = [as_leaf(x, where, "init_val") for x in leaves]
    avals = [strong(abstractify(c)) for c in leaves]
    arg = (tree.unflatten(treedef, avals),)

    def cond_t(v: Any, box: list) -> list:
        p = cond_fun(v)
        a = abstractify(p) if hasattr(p, "shape") or isinstance(p, (bool, int, float)) \
            else None
        if a is None or a.shape != () or a.dtype != np.bool_:
            raise ControlFlowError(
                f"{where}: cond_fun must return a boolean scalar, but it returned "
                f"{a if a is not None else type(p).__name__}. Compare to get one (x < n), "
                "and reduce arrays with .all() or .any().")
        return [p]

    def body_t(v: Any, box: list) -> list:
        new = body_fun(v)
        new_leaves, new_tree = tree.flatten(new)
        got = [abstractify(x) for x in new_leaves]
        if new_tree != treedef or any(tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype
                                      for g, w in zip(got, avals)):
            raise ControlFlowError(
                f"{where}: body_fun must return a value of the type of init_val, "
                f"{describe_tree(avals, treedef)}, but it returned "
                f"{describe_tree(got, new_tree)}. Keep the structure, shapes and dtypes "
                "fixed (cast with .astype() or fix init_val's dtype).")
        return new_leaves

    cond = trace_closed(cond_t, arg, where)
    body = trace_closed(body_t, arg, where)
    out = bind_loop(while_p, *cond.consts, *body.consts, *leaves, cond=cond.trace,
               body=body.trace, n_cc=len(cond.consts), n_bc=len(body.consts), name=fname)
    return tree.unflatten(treedef, out)
