"""``scan``: a loop over the leading axis of arrays, carrying a state, as one equation.

``scan_p`` is a higher-order primitive. Its operands are the body's hoisted constants, the
initial carry and the stacked inputs ``xs``; its parameter ``body`` is the closed sub-trace
of one step, ``(consts, carry, x) -> (carry, y)``, traced once with the shapes of one step.
Its outputs are the final carry and the stacked ``ys``. The trace of a program with a scan
has the same size for any trip count, and ``jit`` plans the body's executor once.

Residuals. Reverse mode needs, for every step, the values the body's VJP rules read (its
declared residuals, see ``functx.transforms.checkpoint.residual_vars``). When the scan is
bound under reverse mode's concrete builder (``grad``, ``vjp``), :func:`scan_leaves` adds
exactly those to the body's outputs, as extra ``ys`` (the last ``n_res`` outputs), so the
forward pass stacks them as it runs; values the backward pass can read elsewhere are not
stacked again (the hoisted constants, the step's ``x``, ``ys`` the body returns
anyway, and carry outputs: the next step's carry input is stacked instead). Elsewhere (eager calls, ``jit``, a scan traced inside ``checkpoint``) the scan has
no residual outputs, and its VJP rule runs the forward scan once more to stack them.

The rules:

* ``abstract_eval``: the body's output types, ``ys`` stacked; operand types are checked;
* ``impl``: a Python loop running the body with jit's lean executor (``functx.transforms.
  jit.executor``, planned once per body) and writing each ``y`` into a preallocated
  buffer. Generic: runs on NumPy and CuPy, with no host synchronisation per step;
* ``vjp``: a reverse scan whose step is the body's backward pass, built from the step's
  residuals (the backward pass of a checkpoint whose residuals are all saved: the
  registered rule of ``checkpoint_p``); cotangents of the constants are accumulated in
  its carry. Written with ``bind``, so it is differentiable again (``grad(grad(f))``);
* ``jvp``: a scan of the body's JVP, carrying the tangents beside the carry;
* ``batch``: a scan of the body batched with ``vmap`` (the batch axis of ``ys`` is 1).
"""
from __future__ import annotations

import functools
import math
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from functx.transforms.interpret import trace_has_effects
from functx import tree
from functx.ir import AbstractArray, Trace, Var, abstractify
from functx.primitives._batching import batch_size, moveaxis, zeros_like
from functx.registry import Primitive
from functx.tracing import bind
from functx.transforms._args import check_callable
from functx.transforms.checkpoint import checkpoint as remat
from functx.transforms.checkpoint import checkpoint_p, residual_vars
from functx.transforms.jvp import jvp
from functx.transforms.vmap import running_axis_name, vmap
from functx.lax._scan_sums import sink_sums
from functx.lax._common import (ControlFlowError, as_leaf, bind_loop, describe_tree, is_float,
                                run_closed, run_traced, strong, trace_closed,
                                under_reverse_mode, zeros_of, batch_front)

import functx.numpy as fnp

__all__ = ["scan", "scan_p", "scan_leaves"]

scan_p = Primitive("scan", multiple_results=True)
scan_p.cache_abstract_eval = False  # params hold a fresh sub-trace per call
scan_p.has_effects = lambda params: trace_has_effects(params["body"])  # debug prints inside


def _split(seq: Sequence[Any], n_consts: int, n_carry: int) -> tuple[list, list, list]:
    seq = list(seq)
    return seq[:n_consts], seq[n_consts:n_consts + n_carry], seq[n_consts + n_carry:]


@scan_p.def_abstract_eval
def _scan_abstract_eval(*avals: Any, body: Trace, n_consts: int, n_carry: int, length: int,
                        reverse: bool, unroll: int, n_res: int, name: str) -> list:
    if len(avals) != len(body.in_vars):
        raise ControlFlowError(f"scan({name}) got {len(avals)} operands but its body takes "
                               f"{len(body.in_vars)}.")
    for i, (a, b) in enumerate(zip(avals, body.in_avals)):
        want = tuple(b.shape) if i < n_consts + n_carry else (length,) + tuple(b.shape)
        if tuple(a.shape) != want or a.dtype != b.dtype:
            raise ControlFlowError(
                f"scan({name}): operand {i} is {a} but the body was traced for "
                f"{AbstractArray(want, b.dtype)}. Call functx.lax.scan again to retrace it.")
    outs = body.out_avals
    return ([strong(a) for a in outs[:n_carry]]
            + [AbstractArray((length,) + tuple(a.shape), a.dtype) for a in outs[n_carry:]])


@scan_p.def_impl
def _scan_impl(xp: Any, *args: Any, body: Trace, n_consts: int, n_carry: int, length: int,
               reverse: bool, unroll: int, n_res: int, name: str) -> list:
    consts, carry, xs = _split(args, n_consts, n_carry)
    out_avals = body.out_avals
    carry_avals = out_avals[:n_carry]
    ys = [xp.empty((length,) + tuple(a.shape), a.dtype) for a in out_avals[n_carry:]]
    donated = None
    if length > 1 and n_carry and getattr(xp, "__name__", "") == "cupy":
        # On CUDA each step may update its carries in place (a gradient accumulated over
        # the steps becomes one GEMM with beta = 1 into it, functx.compiler.lowering): the
        # loop owns the carries its body computes, so their first values are copies of
        # the caller's (jit's executor copies a donated carry that shares memory with a
        # constant or another input). A carry the body passes on from an input (a slice
        # of xs, a constant) is not donated: it would be copied at every step.
        donated = (False,) * n_consts + _computed_carries(body, n_carry) + (False,) * len(xs)
        carry = [xp.array(c, copy=True) if d else c
                 for c, d in zip(carry, donated[n_consts:])]
    for k in range(length):
        i = length - 1 - k if reverse else k
        outs = run_closed(body, consts + carry + [x[i] for x in xs], donated)
        carry = outs[:n_carry]
        for buf, y in zip(ys, outs[n_carry:]):
            buf[i] = y
    carry = [c if hasattr(c, "dtype") and c.dtype == a.dtype else xp.asarray(c, a.dtype)
             for c, a in zip(carry, carry_avals)]
    return carry + ys


def _computed_carries(body: Trace, n_carry: int) -> tuple:
    """Per carry: whether the body computes it (not an input or constant passed on)."""
    made = {id(v) for e in body.eqns for v in e.outputs}
    return tuple(type(v) is Var and id(v) in made for v in body.outputs[:n_carry])


# ----------------------------------------------------------------------------------------
# Residuals


def _active_eqns(body: Trace) -> list:
    """For each equation, whether a derivative can reach it from the body's inputs."""
    live = {id(v) for v in body.in_vars if is_float(v.aval)}
    on = []
    for e in body.eqns:
        a = any(type(x) is Var and id(x) in live for x in e.inputs)
        on.append(a)
        if a and not e.prim.has_zero_vjp:
            live.update(id(v) for v in e.outputs if is_float(v.aval))
    return on


_PLANS: "weakref.WeakKeyDictionary[Trace, tuple]" = weakref.WeakKeyDictionary()


def residual_plan(body: Trace, n_consts: int, n_carry: int) -> tuple:
    """What the backward pass of one step reads, and where it finds it.

    Returns:
        ``(res_vars, ys_read, xs_read, co_read)``: the variables to stack as residuals (in
        order); the indices of the body's ``ys`` and of its ``x`` inputs that the backward
        pass reads (those are stacked already); and the indices of the carry outputs it
        reads: the carry a step returns is the carry the next step receives, so those are
        not stacked either: the carry input is, and the backward scan, which visits the
        steps in the opposite order, passes it on to the step before. The hoisted
        constants are never stacked.
    """
    plan = _PLANS.get(body)
    if plan is not None:
        return plan
    ins = body.in_vars
    const_ids = {id(v) for v in ins[:n_consts]}
    x_pos = {id(v): j for j, v in enumerate(ins[n_consts + n_carry:])}
    y_pos = {}
    for j, v in enumerate(body.outputs[n_carry:]):
        if type(v) is Var:
            y_pos.setdefault(id(v), j)
    in_ids = {id(v) for v in ins}
    co_pos = {}
    for i, v in enumerate(body.outputs[:n_carry]):
        if type(v) is Var and id(v) not in in_ids:
            co_pos.setdefault(id(v), i)
    res: dict[int, Var] = {}
    ys_read: set = set()
    xs_read: set = set()
    co_read: set = set()
    for e, on in zip(body.eqns, _active_eqns(body)):
        if not on:
            continue
        for v in residual_vars(e):
            k = id(v)
            if k in const_ids:
                continue
            if k in x_pos:
                xs_read.add(x_pos[k])
            elif k in y_pos:
                ys_read.add(y_pos[k])
            elif k in co_pos:
                co_read.add(co_pos[k])
            else:
                res.setdefault(k, v)
    for i in co_read:  # the carry input that the previous step's output becomes
        v = ins[n_consts + i]
        if id(v) in y_pos:
            ys_read.add(y_pos[id(v)])
        else:
            res.setdefault(id(v), v)
    plan = _PLANS[body] = (tuple(res.values()), tuple(sorted(ys_read)), tuple(sorted(xs_read)),
                           tuple(sorted(co_read)))
    return plan


def scan_bind(body: Trace, consts: Sequence[Any], init: Sequence[Any], xs: Sequence[Any], *,
              length: int, reverse: bool = False, unroll: int = 1, name: str = "f",
              sums: Sequence[int] = ()) -> tuple[list, list]:
    """Bind ``scan_p`` on flat operands; returns ``(final carry, ys)``. Under reverse mode
    the body's residuals are stacked as extra outputs (see the module docstring) and
    dropped from what is returned. The carries listed in ``sums`` that are sums of
    per-step products are computed after the loop (:func:`functx.lax._scan_sums.
    sink_sums`; the VJP's cotangents of the constants)."""
    sunk = sink_sums(body, consts, init, xs, sums, length) if sums else None
    if sunk is not None:
        body, small_init, finish = sunk
        carry, ys = scan_bind(body, consts, small_init, xs, length=length, reverse=reverse,
                              unroll=unroll, name=name)
        return finish(carry, ys)
    n_res = 0
    operands = [*consts, *init, *xs]
    if under_reverse_mode(operands):
        res = residual_plan(body, len(consts), len(init))[0]
        if res:
            n_res = len(res)
            body = Trace(body.in_vars, (), (), body.eqns, body.outputs + res)
    outs = bind_loop(scan_p, *operands, body=body, n_consts=len(consts), n_carry=len(init),
                     length=int(length), reverse=bool(reverse), unroll=unroll, n_res=n_res,
                     name=name)
    n_carry = len(init)
    return list(outs[:n_carry]), list(outs[n_carry:len(outs) - n_res])


def scan_leaves(f: Callable, init: Sequence[Any], xs: Sequence[Any], *, length: int,
                reverse: bool = False, name: str = "f", sums: Sequence[int] = ()
                ) -> tuple[list, list]:
    """``scan`` on flat lists: ``f(carry_list, x_list) -> (carry_list, y_list)`` (the
    rules' own loops; the carry types must not change; ``sums`` as :func:`scan_bind`)."""
    c_avals = [strong(abstractify(c)) for c in init]
    x_avals = [AbstractArray(abstractify(x).shape[1:], abstractify(x).dtype) for x in xs]

    def step(c: list, x: list, box: list) -> list:
        new_c, y = f(list(c), list(x))
        return list(new_c) + list(y)

    closed = trace_closed(step, (c_avals, x_avals), f"scan({name})")
    return scan_bind(closed.trace, closed.consts, init, xs, length=length, reverse=reverse,
                     name=name, sums=sums)


# ----------------------------------------------------------------------------------------
# VJP: a reverse scan over the stacked residuals


def _fit(x: Any, aval: Any, like: Any = None) -> Any:
    """``x`` as a value of type ``aval`` (zeros for None; a dtype cast where it differs)."""
    if x is None:  # zeros on the device of ``like`` (a value of type aval), if given
        return zeros_of(aval) if like is None else zeros_like(like)
    return x if x.dtype == aval.dtype else fnp.astype(x, aval.dtype)


def _scan_vjp(cts: list, ins: tuple, out: list, *, body: Trace, n_consts: int, n_carry: int,
              length: int, reverse: bool, unroll: int, n_res: int, name: str,
              needs: Sequence[bool] | None = None) -> tuple:
    n_ins = len(ins)
    needs = [True] * n_ins if needs is None else list(needs)
    # Residual outputs (n_res) are ys like the others: an enclosing reverse mode that read
    # them (grad of grad) sends them cotangents.
    n_y = len(body.outputs) - n_carry
    res_vars, ys_read, xs_read, co_read = residual_plan(body, n_consts, n_carry)
    consts, init, xs = _split(ins, n_consts, n_carry)
    in_avals = body.in_avals
    ct_carry, ct_ys = list(cts[:n_carry]), list(cts[n_carry:])
    if all(c is None for c in ct_carry + ct_ys):
        return (None,) * n_ins
    if not res_vars:  # none, or the forward pass stacked them (n_res)
        fin, ys_vals, res_vals = out[:n_carry], out[n_carry:], []
    else:  # run the forward scan again, keeping them
        full = Trace(body.in_vars, (), (), body.eqns, body.outputs + res_vars)
        outs = bind(scan_p, *ins, body=full, n_consts=n_consts, n_carry=n_carry,
                    length=length, reverse=reverse, unroll=unroll, n_res=n_res + len(res_vars),
                    name=name)
        fin, ys_vals = outs[:n_carry], outs[n_carry:n_carry + n_y]
        res_vals = outs[n_carry + n_y:]
    base = body
    fc = [i for i in range(n_carry) if is_float(in_avals[n_consts + i])]
    c_need = [i for i in range(n_consts) if needs[i] and is_float(in_avals[i])]
    x_need = [j for j in range(len(xs))
              if needs[n_consts + n_carry + j] and is_float(in_avals[n_consts + n_carry + j])]
    y_ct = [j for j in range(n_y) if ct_ys[j] is not None]
    # the backward step sees the body's residuals as outputs of a checkpoint whose
    # residuals are all saved, and runs that checkpoint's registered VJP rule
    tail = (tuple(base.outputs[n_carry + j] for j in ys_read)
            + tuple(base.outputs[i] for i in co_read) + res_vars)
    step_trace = Trace(base.in_vars, (), (), base.eqns, base.outputs + tail)
    n_saved = len(tail)
    c_in = [id(base.in_vars[n_consts + i]) for i in co_read]
    v_needs = ([i in c_need for i in range(n_consts)] + [True] * n_carry
               + [j in x_need for j in range(len(xs))])
    n_r, n_yr, n_xr = len(res_vars), len(ys_read), len(xs_read)

    def step(carry: list, xt: list) -> tuple[list, list]:
        acc, ct_c = carry[:len(c_need)], carry[len(c_need):len(c_need) + len(fc)]
        prev = carry[len(c_need) + len(fc):]  # the carry outputs, passed back
        r_t, yr_t = xt[:n_r], xt[n_r:n_r + n_yr]
        xr_t, cy_t = xt[n_r + n_yr:n_r + n_yr + n_xr], xt[n_r + n_yr + n_xr:]
        x_vals: list = [None] * len(xs)
        for j, v in zip(xs_read, xr_t):
            x_vals[j] = v
        c_cts: list = [None] * n_carry
        for i, c in zip(fc, ct_c):
            c_cts[i] = c
        y_cts: list = [None] * n_y
        for j, c in zip(y_ct, cy_t):
            y_cts[j] = c
        in_cts = checkpoint_p.vjp(
            c_cts + y_cts + [None] * n_saved, tuple(consts + [None] * n_carry + x_vals),
            [None] * (n_carry + n_y) + list(yr_t) + list(prev) + list(r_t), trace=step_trace,
            n_res=n_saved, policy=None, prevent_cse=True, name=name, needs=v_needs)
        new_acc = [a if in_cts[i] is None else fnp.add(a, _fit(in_cts[i], in_avals[i]))
                   for a, i in zip(acc, c_need)]
        new_c = [_fit(in_cts[n_consts + i], in_avals[n_consts + i]) for i in fc]
        ct_x = [_fit(in_cts[n_consts + n_carry + j], in_avals[n_consts + n_carry + j])
                for j in x_need]
        held = {id(v): x for v, x in zip(tail[:n_yr] + tail[n_yr + len(co_read):],
                                         list(yr_t) + list(r_t))}
        return new_acc + new_c + [held[k] for k in c_in], ct_x

    init_b = ([zeros_like(consts[i]) for i in c_need]
              + [_fit(ct_carry[i], in_avals[n_consts + i], init[i]) for i in fc]
              + [fin[i] for i in co_read])
    xs_b = (list(res_vals) + [ys_vals[j] for j in ys_read] + [xs[j] for j in xs_read]
            + [fnp.astype(ct_ys[j], body.out_avals[n_carry + j].dtype) for j in y_ct])
    carry_b, ys_b = scan_leaves(step, init_b, xs_b, length=length, reverse=not reverse,
                                name=f"{name}_bwd", sums=range(len(c_need)))
    result: list = [None] * n_ins
    for i, c in zip(c_need, carry_b[:len(c_need)]):
        result[i] = c
    for i, c in zip(fc, carry_b[len(c_need):]):
        result[n_consts + i] = c if needs[n_consts + i] else None
    for j, c in zip(x_need, ys_b):
        result[n_consts + n_carry + j] = c
    return tuple(result)


scan_p.def_vjp(_scan_vjp, save_inputs=True, save_output=True, selective=True)
scan_p.none_cts = True  # zero cotangents (residual outputs, unused ys) come as None


@scan_p.def_dce
def _scan_dce(eqn: Any, used: Sequence[bool]) -> Any:
    """Drop the ``ys`` nothing reads from the body (its executor then prunes what only they
    needed). Carries stay: the next step reads them."""
    p = eqn.params
    n_carry, body = p["n_carry"], p["body"]
    n_y = len(body.outputs) - n_carry
    keep = [j for j in range(n_y) if used[n_carry + j]]
    if len(keep) == n_y:
        return None
    first_res = n_y - p["n_res"]
    new_body = Trace(body.in_vars, (), (), body.eqns, body.outputs[:n_carry]
                     + tuple(body.outputs[n_carry + j] for j in keep))
    params = dict(p, body=new_body, n_res=sum(1 for j in keep if j >= first_res))
    return eqn._replace(params=params, outputs=eqn.outputs[:n_carry]
                        + tuple(eqn.outputs[n_carry + j] for j in keep))


# ----------------------------------------------------------------------------------------
# JVP and batching


@scan_p.def_jvp
def _scan_jvp(tangents: Sequence[Any], primals: Sequence[Any], out: Any, *, body: Trace,
              n_consts: int, n_carry: int, length: int, reverse: bool, unroll: int,
              n_res: int, name: str) -> list:
    consts, init, xs = _split(primals, n_consts, n_carry)
    t_consts, t_init, t_xs = _split(tangents, n_consts, n_carry)
    n_out = len(body.outputs)
    if all(t is None for t in tangents):
        return [None] * n_out
    in_avals, out_avals = body.in_avals, body.out_avals
    mc = [i for i, t in enumerate(t_consts) if t is not None]
    mx = [j for j, t in enumerate(t_xs) if t is not None]
    fc = [i for i in range(n_carry) if is_float(in_avals[n_consts + i])]
    fy = [j for j in range(n_carry, n_out) if is_float(out_avals[j])]
    n_x = len(xs)

    def step(carry: list, xt: list) -> tuple[list, list]:
        c, tc = carry[:n_carry], carry[n_carry:]
        x, tx = xt[:n_x], xt[n_x:]
        moving = [consts[i] for i in mc] + [c[i] for i in fc] + [x[j] for j in mx]
        mtan = [t_consts[i] for i in mc] + list(tc) + list(tx)

        def g(*m: Any) -> tuple:
            full = list(consts) + list(c) + list(x)
            for k, v in zip([*mc, *(n_consts + i for i in fc),
                             *(n_consts + n_carry + j for j in mx)], m):
                full[k] = v
            outs = run_traced(body, full)
            return [outs[k] for k in fc] + [outs[k] for k in fy], outs

        _, t_out, outs = jvp(g, tuple(moving), tuple(mtan), has_aux=True)
        t_c = [_fit(t, out_avals[i]) for t, i in zip(t_out[:len(fc)], fc)]
        t_y = [_fit(t, out_avals[k]) for t, k in zip(t_out[len(fc):], fy)]
        return list(outs[:n_carry]) + t_c, list(outs[n_carry:]) + t_y

    init_t = list(init) + [_fit(t_init[i], in_avals[n_consts + i], init[i]) for i in fc]
    carry, ys = scan_leaves(step, init_t, list(xs) + [t_xs[j] for j in mx], length=length,
                            reverse=reverse, name=f"{name}_jvp")
    result: list = [None] * n_out
    for i, t in zip(fc, carry[n_carry:]):
        result[i] = t
    for k, t in zip(fy, ys[n_out - n_carry:]):
        result[k] = t
    return result


@scan_p.def_batch
def _scan_batch(args: Sequence[Any], dims: Sequence[int | None], *, body: Trace,
                n_consts: int, n_carry: int, length: int, reverse: bool, unroll: int,
                n_res: int, name: str) -> tuple:
    size = batch_size(args, dims)
    consts, init, xs = _split(args, n_consts, n_carry)
    c_dims, _, x_dims = _split(dims, n_consts, n_carry)
    consts = [c if d is None else moveaxis(c, d, 0) for c, d in zip(consts, c_dims)]
    like = next(a for a, d in zip(args, dims) if d is not None)
    init = [batch_front(c, d, size, like)
            for c, d in zip(init, dims[n_consts:n_consts + n_carry])]
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, x_dims)]
    axes = tuple([None if d is None else 0 for d in c_dims] + [0] * n_carry
                 + [None if d is None else 0 for d in x_dims])
    # collectives in the body map over the axis being batched (the running map's name)
    batched = vmap(lambda *a: run_traced(body, a), in_axes=axes, out_axes=0, axis_size=size,
                   axis_name=running_axis_name())

    def step(c: list, x: list) -> tuple[list, list]:
        outs = batched(*consts, *c, *x)
        return outs[:n_carry], outs[n_carry:]

    carry, ys = scan_leaves(step, init, xs, length=length, reverse=reverse, name=name)
    return carry + ys, [0] * n_carry + [1] * len(ys)


# ----------------------------------------------------------------------------------------
# The user function


def _length_of(xs_leaves: list, length: int | None, where: str, xs_tree: Any) -> int:
    lengths = set()
    for x in xs_leaves:
        shape = abstractify(x).shape
        if not shape:
            raise ControlFlowError(
                f"{where}: every leaf of xs must have a leading axis to scan over, but one "
                f"is a 0-d {abstractify(x)} (xs: "
                f"{describe_tree([abstractify(v) for v in xs_leaves], xs_tree)}). Stack the "
                "values along a new first axis, or pass it through the carry or a closure.")
        lengths.add(shape[0])
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) \
                or length < 0:
            raise ControlFlowError(f"{where}: length={length!r} must be a non-negative "
                                   "Python int.")
        lengths.add(int(length))
    if len(lengths) > 1:
        raise ControlFlowError(
            f"{where}: the leading axes of xs (and length, if given) must all be equal, but "
            f"they are {sorted(lengths)} (xs: "
            f"{describe_tree([abstractify(v) for v in xs_leaves], xs_tree)}"
            f"{'' if length is None else f', length={length}'}). Slice the inputs to one "
            "length.")
    if not lengths:
        raise ControlFlowError(f"{where}: with no xs, pass length= (the number of steps).")
    return lengths.pop()


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: int | bool = 1, *,
         checkpoint: str | None = None) -> tuple[Any, Any]:
    """Loop ``f`` over the leading axis of ``xs``, carrying a state: ``jax.lax.scan``.

    Computes, as one equation whose trace does not grow with the number of steps::

        carry = init
        for x in xs:           # (from the end with reverse=True)
            carry, y = f(carry, x)
            ys.append(y)
        return carry, stack(ys)

    Args:
        f: ``f(carry, x) -> (carry, y)``; traced once, abstractly. The carry it returns must
            have the structure, shapes and dtypes of ``init``. It may close over arrays and
            over values of enclosing transforms (gradients flow to them).
        init: the initial carry (a pytree of arrays or Python scalars).
        xs: a pytree of arrays sharing a leading axis (or None, with ``length``).
        length: the number of steps (needed when ``xs`` is None; else checked).
        reverse: run from the last element to the first (``ys`` keep their positions).
        unroll: accepted for JAX compatibility; the loop runs one step per iteration.
        checkpoint: memory of reverse mode. None keeps, per step, the residuals the body's
            VJP rules declare. ``"body"`` checkpoints the body (``functx.checkpoint``):
            per step only the carry (and the body's outputs) are kept and each step is
            recomputed in the backward pass: O(carry) memory per step. ``"sqrt"`` splits
            the loop into about sqrt(length) checkpointed segments of about sqrt(length)
            steps: the backward pass keeps one carry per segment and one segment's
            residuals at a time, O(sqrt(length)) memory, for about twice the forward
            compute. A user's own ``functx.checkpoint(f, policy=...)`` works as well.

    Returns:
        ``(final carry, ys)``: ``ys`` has ``f``'s ``y`` structure with a leading axis of
        ``length``.

    Raises:
        ControlFlowError: ``xs`` leaves have no or unequal leading axes, ``f`` does not
            return a pair, or its carry differs from ``init`` in structure, shape or dtype.
        ConcretizationError: ``f`` needs the value of its arguments (Python control flow
            on them): use ``functx.lax.cond`` or ``functx.numpy.where``.

    Example:
        >>> def step(h, x):
        ...     h = fnp.tanh(h @ W + x @ U)
        ...     return h, h
        >>> h_T, hs = functx.lax.scan(step, h0, xs)        # xs: (T, batch, features)
    """
    check_callable(f, "scan")
    fname = getattr(f, "__name__", "f")
    where = f"scan({fname})"
    if checkpoint not in (None, "body", "sqrt"):
        raise ControlFlowError(f"{where}: checkpoint={checkpoint!r} must be None, 'body' or "
                               "'sqrt'.")
    init_leaves, init_tree = tree.flatten(init)
    init_leaves = [as_leaf(c, where, "init") for c in init_leaves]
    xs_leaves, xs_tree = tree.flatten(xs)
    xs_leaves = [as_leaf(x, where, "xs") for x in xs_leaves]
    n = _length_of(xs_leaves, length, where, xs_tree)
    if checkpoint == "sqrt":
        return _scan_sqrt(f, init, xs, n, reverse, unroll)
    body_f = _checkpointed(f) if checkpoint == "body" else f
    c_avals = [strong(abstractify(c)) for c in init_leaves]
    x_avals = [AbstractArray(abstractify(x).shape[1:], abstractify(x).dtype)
               for x in xs_leaves]

    def step(c: Any, x: Any, box: list) -> list:
        out = body_f(c, x)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            size = f" of length {len(out)}" if isinstance(out, (tuple, list)) else ""
            raise ControlFlowError(
                f"{where}: the body must return a pair (new carry, y), but it returned a "
                f"{type(out).__name__}{size}. Return `carry, y` (y may be None).")
        new_c, y = out
        c_leaves, c_tree = tree.flatten(new_c)
        if c_tree != init_tree:
            raise ControlFlowError(
                f"{where}: the body's new carry has structure {c_tree} but init has "
                f"{init_tree}. The carry must keep its structure from step to step.")
        for k, (got, want) in enumerate(zip(c_leaves, c_avals)):
            a = abstractify(got)
            if tuple(a.shape) != tuple(want.shape) or a.dtype != want.dtype:
                raise ControlFlowError(
                    f"{where}: the body's new carry is "
                    f"{describe_tree([abstractify(v) for v in c_leaves], c_tree)} but init "
                    f"is {describe_tree(c_avals, init_tree)} (leaf {k}: {a} instead of "
                    f"{want}). The carry must keep its shapes and dtypes from step to step: "
                    "cast with .astype() or fix the initial value's dtype or shape.")
        y_leaves, y_tree = tree.flatten(y)
        box.append(y_tree)
        return c_leaves + y_leaves

    closed = trace_closed(step, (tree.unflatten(init_tree, c_avals),
                                 tree.unflatten(xs_tree, x_avals)), where)
    carry, ys = scan_bind(closed.trace, closed.consts, init_leaves, xs_leaves, length=n,
                          reverse=reverse, unroll=unroll, name=fname)
    return tree.unflatten(init_tree, carry), tree.unflatten(closed.box[0], ys)


def _checkpointed(f: Callable) -> Callable:
    return remat(lambda c, x: f(c, x), _name=getattr(f, "__name__", "f"))


def _scan_sqrt(f: Callable, init: Any, xs: Any, n: int, reverse: bool, unroll: Any) -> tuple:
    """``scan`` in about sqrt(n) checkpointed segments of about sqrt(n) steps."""
    k = max(1, math.isqrt(max(n - 1, 0)) + 1) if n > 1 else 1
    m, r = divmod(n, k)
    main = tree.map(lambda x: fnp.reshape(x[:m * k], (m, k) + tuple(x.shape[1:])), xs)
    rest = tree.map(lambda x: x[m * k:], xs)

    @functools.partial(remat, _name=f"{getattr(f, '__name__', 'f')}_segment")
    def segment(c: Any, xseg: Any) -> tuple:
        return scan(f, c, xseg, length=k, reverse=reverse)

    def run_main(c: Any) -> tuple:
        c, ys = scan(segment, c, main, length=m, reverse=reverse)
        return c, tree.map(lambda y: fnp.reshape(y, (m * k,) + tuple(y.shape[2:])), ys)

    if r == 0:
        return run_main(init)
    if m == 0:
        return scan(f, init, rest, length=r, reverse=reverse)
    if not reverse:
        c, ys_main = run_main(init)
        c, ys_rest = scan(f, c, rest, length=r)
    else:
        c, ys_rest = scan(f, init, rest, length=r, reverse=True)
        c, ys_main = run_main(c)
    return c, tree.map(lambda a, b: fnp.concatenate([a, b], axis=0), ys_main, ys_rest)
