"""User-defined derivatives: ``custom_vjp`` and ``custom_jvp``.

A decorated function runs as it is when no transform is active. Under a transform it binds a
higher-order primitive (``custom_vjp_call`` / ``custom_jvp_call``) whose parameter holds the
user's functions on flat lists of leaves; the primitives have every rule, so the functions
compose with all transforms:

* ``custom_vjp_call``'s outputs are the function's outputs followed by the residuals of
  ``fwd`` (the VJP record keeps exactly those). Its VJP calls ``bwd``; where an enclosing
  transform differentiates the backward pass itself (a Hessian), cotangents also reach the
  residuals and flow back through ``fwd``, so second derivatives are right as long as
  ``bwd`` is written with functx operations. Forward mode transposes the VJP rule.
* ``custom_jvp_call``'s JVP calls the user's rule; its VJP transposes that rule (the VJP
  of ``t -> jvp(primals, t)``), so reverse mode needs nothing more.
* Batching ``vmap``s the user's functions.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Sequence

import attrs

from functx import tree
from functx.backends import owned_read_only
from functx.errors import FunctxError, GradError
from functx.ir import AbstractArray, Trace, abstractify
from functx.primitives._batching import zeros_like
from functx.primitives.reduction import reduce_sum
from functx.registry import Primitive
from functx.tracing import INEXACT_DTYPES, Tracer, bind, eval_shape, trace_function


def _resolve_args(fun: Callable, args: tuple, kwargs: dict, name: str) -> tuple:
    """``args`` with ``kwargs`` bound into positions by ``fun``'s signature."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        raise FunctxError(f"{name}: the call does not match the function's signature: {e}."
                          ) from None
    if bound.kwargs:
        raise FunctxError(f"{name}: keyword-only arguments ({', '.join(bound.kwargs)}) are not "
                          "supported by custom derivatives; pass them positionally or close "
                          "over them.")
    return bound.args


def _split(args: tuple, nondiff_argnums: tuple[int, ...]) -> tuple[tuple, tuple, list]:
    n = len(args)
    nd = sorted({i % n for i in nondiff_argnums}) if n else []
    static = tuple(args[i] for i in nd)
    diff_idx = [i for i in range(n) if i not in nd]
    return static, tuple(args[i] for i in diff_idx), diff_idx


def _merge(static: tuple, diff: Sequence[Any], diff_idx: list, nondiff: tuple) -> list:
    n = len(static) + len(diff)
    full: list = [None] * n
    for i, a in zip(diff_idx, diff):
        full[i] = a
    for i, a in zip(sorted({j % n for j in nondiff}) if n else [], static):
        full[i] = a
    return full


def _has_tracer(leaves: list) -> bool:
    return any(type(x) is Tracer for x in leaves)


def _leaf_array(x: Any, name: str, what: str) -> Any:
    if isinstance(x, (bool, int, float, complex)):
        import numpy as np

        return np.asarray(x)
    if type(x) is Tracer or hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    raise FunctxError(f"{name}: {what} contains a {type(x).__name__} ({x!r:.60}), which is not "
                      "an array; custom derivative functions take and return arrays (pytrees "
                      "of arrays). Pass other values with nondiff_argnums or close over them.")


# ----------------------------------------------------------------------------------------
# custom_vjp


@attrs.frozen(eq=False)
class VjpCall:
    """One custom_vjp function on flat leaves (the parameter of ``custom_vjp_call``).

    ``fwd(*leaves) -> (out_leaves, res_leaves)``; ``bwd(res_leaves, out_cts) -> in_cts`` (one
    per input leaf, None for zero); ``fun(*leaves) -> out_leaves``.
    """

    name: str
    fun: Callable
    fwd: Callable
    bwd: Callable
    info: dict  # "n_out": the number of outputs (set when fwd first runs)

    @property
    def n_out(self) -> int:
        return self.info["n_out"]

    def __repr__(self) -> str:
        return self.name


custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)
custom_vjp_call_p.none_cts = True
custom_vjp_call_p.cache_abstract_eval = False  # params hold a fresh closure per call


@custom_vjp_call_p.def_abstract_eval
def _custom_vjp_aval(*avals: AbstractArray, call: VjpCall) -> list:
    outs, res = eval_shape(call.fwd, *avals)
    return list(outs) + list(res)


@custom_vjp_call_p.def_inline
def _custom_vjp_inline(*avals: AbstractArray, call: VjpCall) -> Trace:
    # jit's optimiser inlines the forward pass (outputs, then residuals), as JAX traces it
    return trace_function(lambda *xs: call.fwd(*xs), avals, {}, call.name)[0]


@custom_vjp_call_p.def_impl
def _custom_vjp_impl(xp: Any, *leaves: Any, call: VjpCall) -> list:
    outs, res = call.fwd(*leaves)
    # The user's function may return arrays of the caller's (closed over, or inputs): bind
    # must not mark those read-only, so writeable ones are copied.
    return [owned_read_only(x) for x in (*outs, *res)]


@functools.partial(custom_vjp_call_p.def_vjp, save_inputs=True, save_output=True)
def _custom_vjp_vjp(cts: list, ins: tuple, out: list, *, call: VjpCall) -> tuple:
    n = call.n_out
    out_cts = [c if c is not None else zeros_like(o) for c, o in zip(cts[:n], out[:n])]
    in_cts = list(call.bwd(list(out[n:]), out_cts))
    res_cts = cts[n:]
    if any(c is not None for c in res_cts):
        # Differentiating the backward pass (higher order): cotangents of the residuals
        # flow back through fwd.
        from functx.transforms.grad import vjp

        idx = [k for k, c in enumerate(res_cts) if c is not None]
        _, pull = vjp(lambda *xs: [call.fwd(*xs)[1][k] for k in idx], *ins)
        extra = pull([res_cts[k] for k in idx])
        in_cts = [e if c is None else (c if e is None else c + e)
                  for c, e in zip(in_cts, extra)]
    return tuple(in_cts)


@custom_vjp_call_p.def_jvp
def _custom_vjp_jvp(tangents: tuple, primals: tuple, out: list, *, call: VjpCall) -> Any:
    # Forward mode through a user VJP: transpose it (exact when bwd is linear in the
    # cotangent and written with functx operations, which a VJP is).
    from functx.transforms.jvp import jvp_from_vjp

    return jvp_from_vjp(custom_vjp_call_p, tangents, primals, out, {"call": call})


@custom_vjp_call_p.def_batch
def _custom_vjp_batch(args: tuple, dims: tuple, *, call: VjpCall) -> tuple:
    from functx.transforms.vmap import running_axis_name, vmap

    axes = tuple(dims)
    name = running_axis_name()  # collectives in the user's rules map over the same axis

    def fwd(*xs: Any) -> tuple:
        return vmap(lambda *x: tuple(map(list, call.fwd(*x))), in_axes=axes,
                    axis_name=name)(*xs)

    def bwd(res: list, cts: list) -> list:
        def one(r: list, c: list) -> list:
            return [g if g is not None else zeros_like(x_aval)
                    for g, x_aval in zip(call.bwd(r, c), example_avals)]
        cts_b = vmap(one, axis_name=name)(res, cts)
        return [reduce_sum(g, (0,)) if d is None else _move(g, d) for g, d in zip(cts_b, dims)]

    example_avals = [AbstractArray(tuple(s for k, s in enumerate(a.shape) if k != d), a.dtype)
                     if d is not None else abstractify(a) for a, d in zip(args, dims)]
    batched = VjpCall(f"vmap({call.name})", call.fun, fwd, bwd, call.info)
    outs = bind(custom_vjp_call_p, *args, call=batched)
    return outs, [0] * len(outs)


def _move(x: Any, d: int) -> Any:
    from functx.primitives._batching import moveaxis

    return moveaxis(x, 0, d)


class custom_vjp:
    """A function with a user-defined VJP (reverse-mode derivative).

    Args:
        fun: the function (of arrays / pytrees of arrays).
        nondiff_argnums: positions of arguments that are not differentiated (static values
            such as Python numbers or callables); they are passed first to ``bwd``.

    Use ``f.defvjp(fwd, bwd)``: ``fwd(*args) -> (out, residuals)`` and
    ``bwd(*nondiff_args, residuals, out_cotangent) -> tuple`` with one cotangent per
    differentiable argument (a pytree like the argument, or None for a zero cotangent).
    Writing ``bwd`` with functx operations makes the function twice differentiable.

    Raises:
        GradError: (when differentiated) ``bwd`` returns the wrong structure or shapes.

    Example:
        >>> @fx.custom_vjp
        ... def clip_gradient(lo, hi, x): return x
        >>> clip_gradient.defvjp(lambda lo, hi, x: (x, (lo, hi)),
        ...                      lambda res, g: (None, None, fnp.clip(g, *res)))
        >>> fx.grad(lambda x: 3.0 * clip_gradient(-1.0, 1.0, x))(2.0)
        array(1.)
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self._in_fwd = 0  # > 0 while this function's fwd runs

    def defvjp(self, fwd: Callable, bwd: Callable) -> "custom_vjp":
        """Set the forward function (returning ``(out, residuals)``) and the backward one."""
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "custom_vjp function")
        args = _resolve_args(self.fun, args, kwargs, name)
        if self.fwd is None:
            raise FunctxError(f"custom_vjp function {name} has no VJP: call "
                              f"{name}.defvjp(fwd, bwd) before using it.")
        static, diff, diff_idx = _split(args, self.nondiff_argnums)
        leaves, in_tree = tree.flatten(diff)
        if self._in_fwd or not _has_tracer(leaves):
            return self.fun(*args)
        leaves = [_leaf_array(x, name, "an argument") for x in leaves]
        in_avals = [abstractify(x) for x in leaves]
        user_fwd, user_bwd, fun, nondiff = self.fwd, self.bwd, self.fun, self.nondiff_argnums
        trees: dict = {}

        def rebuild(xs: Sequence[Any]) -> list:
            return _merge(static, tree.unflatten(in_tree, list(xs)), diff_idx, nondiff)

        def fun_flat(*xs: Any) -> list:
            out_leaves, trees["out"] = tree.flatten(fun(*rebuild(xs)))
            return [_leaf_array(x, name, "the output") for x in out_leaves]

        def fwd_flat(*xs: Any) -> tuple:
            # fwd usually calls the function itself: inside fwd that is the plain function
            self._in_fwd += 1
            try:
                res = user_fwd(*rebuild(xs))
            finally:
                self._in_fwd -= 1
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise GradError(f"{name}: fwd must return a pair (output, residuals) but "
                                f"returned a {type(res).__name__}.")
            out_leaves, trees["out"] = tree.flatten(res[0])
            res_leaves, trees["res"] = tree.flatten(res[1])
            trees["n_out"] = len(out_leaves)
            return ([_leaf_array(x, name, "fwd's output") for x in out_leaves],
                    [_leaf_array(x, name, "fwd's residuals") for x in res_leaves])

        def bwd_flat(res: list, cts: list) -> list:
            got = user_bwd(*static, tree.unflatten(trees["res"], res),
                           tree.unflatten(trees["out"], cts))
            return _check_bwd(name, got, diff, in_tree, in_avals)

        call = VjpCall(name, fun_flat, fwd_flat, bwd_flat, trees)
        outs = bind(custom_vjp_call_p, *leaves, call=call)  # runs fwd (or its shape rule)
        return tree.unflatten(trees["out"], outs[:trees["n_out"]])


def _check_bwd(name: str, got: Any, diff: tuple, in_tree: Any, in_avals: list) -> list:
    """Flatten what ``bwd`` returned to one cotangent (or None) per input leaf."""
    if not isinstance(got, (tuple, list)) or len(got) != len(diff):
        raise GradError(f"{name}: bwd must return a tuple with one cotangent per "
                        f"differentiable argument ({len(diff)}), but returned "
                        f"{type(got).__name__ if not isinstance(got, (tuple, list)) else len(got)}"
                        f"{'' if not isinstance(got, (tuple, list)) else ' entries'}. Use None "
                        "for a zero cotangent.")
    out: list = []
    for i, (g, a) in enumerate(zip(got, diff)):
        n_leaves = len(tree.leaves(a))
        if g is None:
            out.extend([None] * n_leaves)
            continue
        g_leaves, g_tree = tree.flatten(g, is_leaf=lambda x: x is None)
        a_tree = tree.structure(a)
        if len(g_leaves) != n_leaves or (n_leaves and g_tree != a_tree
                                         and tree.structure(g) != a_tree):
            raise GradError(f"{name}: bwd returned a cotangent with structure {g_tree} for "
                            f"argument {i}, which has structure {a_tree}. Return a pytree "
                            "like the argument (or None for a zero cotangent).")
        out.extend(g_leaves)
    for k, (g, aval) in enumerate(zip(out, in_avals)):
        if g is None:
            continue
        ga = abstractify(g)
        if tuple(ga.shape) != tuple(aval.shape):
            raise GradError(f"{name}: bwd returned a cotangent of shape {tuple(ga.shape)} for "
                            f"an input leaf of type {aval}; cotangents must have the inputs' "
                            "shapes.")
        if not INEXACT_DTYPES[aval.dtype]:
            out[k] = None
        elif ga.dtype != aval.dtype:
            out[k] = g.astype(aval.dtype)
    return out


# ----------------------------------------------------------------------------------------
# custom_jvp


@attrs.frozen(eq=False)
class JvpCall:
    """One custom_jvp function on flat leaves (the parameter of ``custom_jvp_call``).

    ``fun(*leaves) -> out_leaves``; ``jvp(primals, tangents) -> (out_leaves, tangent_leaves)``
    with tangents instantiated (zeros, never None).
    """

    name: str
    fun: Callable
    jvp: Callable

    def __repr__(self) -> str:
        return self.name


custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_jvp_call_p.cache_abstract_eval = False  # params hold a fresh closure per call


@custom_jvp_call_p.def_abstract_eval
def _custom_jvp_aval(*avals: AbstractArray, call: JvpCall) -> list:
    return list(eval_shape(call.fun, *avals))


@custom_jvp_call_p.def_inline
def _custom_jvp_inline(*avals: AbstractArray, call: JvpCall) -> Trace:
    return trace_function(lambda *xs: call.fun(*xs), avals, {}, call.name)[0]


@custom_jvp_call_p.def_impl
def _custom_jvp_impl(xp: Any, *leaves: Any, call: JvpCall) -> list:
    return [owned_read_only(x) for x in call.fun(*leaves)]  # (as in _custom_vjp_impl)


@custom_jvp_call_p.def_jvp
def _custom_jvp_jvp(tangents: tuple, primals: tuple, out: list, *, call: JvpCall) -> list:
    ts = [t if t is not None else zeros_like(p) for t, p in zip(tangents, primals)]
    return list(call.jvp(list(primals), ts)[1])


@functools.partial(custom_jvp_call_p.def_vjp, save_inputs=True)
def _custom_jvp_vjp(cts: list, ins: tuple, out: Any, *, call: JvpCall) -> tuple:
    from functx.transforms.grad import vjp

    idx = [k for k, x in enumerate(ins) if INEXACT_DTYPES[abstractify(x).dtype]]

    def push(*ts: Any) -> list:
        full = [zeros_like(x) for x in ins]
        for k, t in zip(idx, ts):
            full[k] = t
        return list(call.jvp(list(ins), full)[1])

    _, pull = vjp(push, *[zeros_like(ins[k]) for k in idx])
    got = pull(list(cts))
    in_cts: list = [None] * len(ins)
    for k, g in zip(idx, got):
        in_cts[k] = g
    return tuple(in_cts)


@custom_jvp_call_p.def_batch
def _custom_jvp_batch(args: tuple, dims: tuple, *, call: JvpCall) -> tuple:
    from functx.transforms.vmap import running_axis_name, vmap

    axes = tuple(dims)
    name = running_axis_name()  # collectives in the user's rules map over the same axis

    def fun(*xs: Any) -> list:
        return vmap(lambda *x: list(call.fun(*x)), in_axes=axes, axis_name=name)(*xs)

    def jvp_rule(primals: list, tangents: list) -> tuple:
        return vmap(lambda p, t: tuple(map(list, call.jvp(p, t))),
                    in_axes=(list(axes), list(axes)), axis_name=name)(primals, tangents)

    batched = JvpCall(f"vmap({call.name})", fun, jvp_rule)
    outs = bind(custom_jvp_call_p, *args, call=batched)
    return outs, [0] * len(outs)


class custom_jvp:
    """A function with a user-defined JVP (forward-mode derivative); reverse mode uses the
    same rule, transposed.

    Args:
        fun: the function (of arrays / pytrees of arrays).
        nondiff_argnums: positions of arguments that are not differentiated; they are
            passed first to the JVP rule.

    Use ``@f.defjvp`` on ``rule(primals, tangents) -> (out, out_tangent)`` (with
    ``nondiff_argnums``: ``rule(*nondiff_args, primals, tangents)``), where ``primals`` and
    ``tangents`` are tuples of the differentiable arguments. The rule must be linear in the
    tangents and written with functx operations.

    Example:
        >>> @fx.custom_jvp
        ... def log1pexp(x): return fnp.log1p(fnp.exp(x))
        >>> @log1pexp.defjvp
        ... def _(primals, tangents):
        ...     (x,), (t,) = primals, tangents
        ...     return log1pexp(x), t * fnp.where(x > 0, 1 / (1 + fnp.exp(-x)), fnp.exp(x) / (1 + fnp.exp(x)))
        >>> fx.grad(log1pexp)(100.0)
        array(1.)
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable | None = None

    def defjvp(self, jvp: Callable) -> Callable:
        """Set the JVP rule ``jvp(primals, tangents) -> (out, out_tangent)``; returns it."""
        self.jvp = jvp
        return jvp

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "custom_jvp function")
        args = _resolve_args(self.fun, args, kwargs, name)
        if self.jvp is None:
            raise FunctxError(f"custom_jvp function {name} has no JVP rule: decorate one "
                              f"with @{name}.defjvp before using it.")
        static, diff, diff_idx = _split(args, self.nondiff_argnums)
        leaves, in_tree = tree.flatten(diff)
        if not _has_tracer(leaves):
            return self.fun(*args)
        leaves = [_leaf_array(x, name, "an argument") for x in leaves]
        fun, user_jvp, nondiff = self.fun, self.jvp, self.nondiff_argnums
        trees: dict = {}

        def fun_flat(*xs: Any) -> list:
            full = _merge(static, tree.unflatten(in_tree, list(xs)), diff_idx, nondiff)
            out_leaves, trees["out"] = tree.flatten(fun(*full))
            return [_leaf_array(x, name, "the output") for x in out_leaves]

        def jvp_flat(primals: list, tangents: list) -> tuple:
            p = tuple(tree.unflatten(in_tree, list(primals)))
            t = tuple(tree.unflatten(in_tree, list(tangents)))
            res = user_jvp(*static, p, t)
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise GradError(f"{name}: the JVP rule must return a pair (out, out_tangent) "
                                f"but returned a {type(res).__name__}.")
            outs, o_tree = tree.flatten(res[0])
            t_outs, t_tree = tree.flatten(res[1])
            if t_tree != o_tree:
                raise GradError(f"{name}: the JVP rule returned a tangent of structure "
                                f"{t_tree} for an output of structure {o_tree}.")
            for o, t in zip(outs, t_outs):
                if tuple(abstractify(o).shape) != tuple(abstractify(t).shape):
                    raise GradError(f"{name}: the JVP rule returned a tangent of shape "
                                    f"{tuple(abstractify(t).shape)} for an output of shape "
                                    f"{tuple(abstractify(o).shape)}.")
            return outs, t_outs

        call = JvpCall(name, fun_flat, jvp_flat)
        outs = bind(custom_jvp_call_p, *leaves, call=call)  # runs fun (or its shape rule)
        return tree.unflatten(trees["out"], outs)
