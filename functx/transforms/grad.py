"""Reverse mode's user API: ``vjp``, ``grad`` and ``value_and_grad``.

The forward pass traces the function concretely (values are computed as equations are
recorded, so Python control flow works); the backward pass walks the equations in reverse,
calls each primitive's VJP rule with the residuals it declared, and drops them right after
(so each residual is freed after its last use). Rules bind functx operations, so when the
values are tracers of an outer transform, the backward pass is itself recorded:
``grad(grad(f))`` works. The machinery (the concrete builder, VJP records and the backward
pass) is in ``functx.transforms.reverse``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from functx import tree
from functx.backends import backend_of
from functx.errors import GradError
from functx.ir import Trace, abstractify
from functx.tracing import INEXACT_DTYPES, Tracer, attach_source, user_source
from functx.transforms.reverse import (ConcreteTraceBuilder, backward_pass, read_only, seed,
                                       snapshot_records, zeros)


_ONE_LEAF = tree.structure(0)  # the structure of a single array


def _as_input(x: Any, fname: str) -> Any:
    if type(x) is Tracer or isinstance(x, np.ndarray) or backend_of(x) is not None:
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.asarray(x)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    raise GradError(f"{fname}: an input leaf is a {type(x).__name__} ({x!r:.60}), not an "
                    "array. Differentiate only with respect to arrays: pass other values "
                    "through a closure or functools.partial.")


def _unwrap(x: Any, builder: ConcreteTraceBuilder) -> Any:
    return x._value if type(x) is Tracer and x._builder is builder else x


def _check_out_leaf(x: Any, fname: str) -> Any:
    if type(x) is Tracer or hasattr(x, "shape"):
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.asarray(x)
    raise GradError(f"{fname}: the function returned a {type(x).__name__} ({x!r:.60}) where "
                    "an array is needed. Return arrays (or pytrees of arrays); put other "
                    "values in the auxiliary output with has_aux=True.")


def _forward(f: Callable, primals: tuple, has_aux: bool, fname: str,
             argnums: Sequence[int] | None = None):
    """Run ``f`` under a concrete trace.

    With ``argnums`` (grad: the argument number of each primal), every input must be
    floating-point.

    Returns (trace, VJP records, outputs, out_tree, aux, in_tree, input leaves).
    """
    leaves, in_tree = tree.flatten(primals)
    leaves = [_as_input(x, fname) for x in leaves]
    if argnums is not None:
        for j, leaf in enumerate(leaves):
            if not INEXACT_DTYPES[leaf.dtype]:
                counts = [len(tree.leaves(p)) for p in primals]
                arg = argnums[int(np.searchsorted(np.cumsum(counts), j, side="right"))]
                raise GradError(
                    f"{fname}: argument {arg} has a leaf of dtype {leaf.dtype} "
                    f"({abstractify(leaf)}); grad differentiates only floating-point "
                    "inputs. Convert it with x.astype(float), or leave it out of argnums.")
    with ConcreteTraceBuilder(fname) as b:
        tracers = [b.new_input(x) for x in leaves]
        out = f(*tree.unflatten(in_tree, tracers))
        aux = None
        if has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise GradError(f"{fname} with has_aux=True needs the function to return a "
                                f"pair (output, aux) but it returned a "
                                f"{type(out).__name__}.")
            out, aux = out
        out_leaves, out_tree = tree.flatten(out)
        out_leaves = [_check_out_leaf(x, fname) for x in out_leaves]
        trace = b.build(out_leaves)
    outs = [read_only(_unwrap(x, b), leaves) for x in out_leaves]
    if has_aux:
        aux = tree.map(lambda x: read_only(_unwrap(x, b), leaves), aux)
    return trace, b.records, outs, out_tree, aux, in_tree, leaves


def _backward_fn(trace: Trace, records: list, out_tree: Any, outs: list, in_tree: Any,
                 leaves: list, fname: str, consume: bool) -> Callable:
    out_avals = [abstractify(o) for o in outs]

    def f_vjp(ct: Any) -> tuple:
        try:
            return pull_back(ct)
        except GradError as e:
            raise attach_source(e, user_source(1)) from None

    def pull_back(ct: Any) -> tuple:
        ct_leaves, ct_tree = tree.flatten(ct)
        if ct_tree != out_tree:
            raise GradError(f"The cotangent passed to the VJP function of {fname} has "
                            f"structure {ct_tree}, but the function's output has structure "
                            f"{out_tree}. Pass one cotangent per output leaf.")
        flat = []
        for c, a in zip(ct_leaves, out_avals):
            c = _as_input(c, fname)
            if tuple(c.shape) != tuple(a.shape):
                raise GradError(f"The cotangent passed to the VJP function of {fname} has "
                                f"shape {tuple(c.shape)} where the output has shape "
                                f"{a.shape} ({a}). Pass cotangents shaped like the outputs.")
            if c.dtype != a.dtype and a.dtype.kind in "fc" and c.dtype.kind in "biuf":
                c = c.astype(a.dtype)
            flat.append(c)
        in_cts = backward_pass(trace, records, flat, consume=consume)
        grads = [read_only(c, flat) if c is not None else zeros(v.aval, x)
                 for c, v, x in zip(in_cts, trace.in_vars, leaves)]
        return tuple(tree.unflatten(in_tree, grads))

    return f_vjp


def vjp(f: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """The outputs of ``f(*primals)`` and a function that pulls cotangents back.

    Args:
        f: a function of arrays (pytrees of arrays).
        *primals: the point to linearise at.
        has_aux: ``f`` returns ``(output, aux)``; ``aux`` is returned, not differentiated.

    Returns:
        ``(out, f_vjp)`` or, with ``has_aux``, ``(out, f_vjp, aux)``. ``f_vjp(ct)`` takes a
        cotangent shaped like ``out`` and returns a tuple with one cotangent per primal.
        ``f_vjp`` may be called many times.

    Aliasing: ``out`` shares no memory with a writeable argument, and ``f_vjp`` keeps a
    snapshot of what it needs: writing to the primals (or to arrays ``f`` closed over)
    after the call changes neither ``out`` nor what ``f_vjp`` returns. Only the caller's
    writeable NumPy arrays that the backward pass reads are copied (once each); functx's
    own results are read-only and kept as they are. CuPy arrays cannot be marked
    read-only and are not copied: do not write to them while ``f_vjp`` is alive.

    Raises:
        GradError: an input or output is not an array, or a cotangent does not match.

    Example:
        >>> out, f_vjp = fx.vjp(lambda x, y: x * y, 2.0, 3.0)
        >>> f_vjp(1.0)
        (array(3.), array(2.))
    """
    try:
        trace, res, outs, out_tree, aux, in_tree, leaves = _forward(f, primals, has_aux, "vjp")
    except GradError as e:
        raise attach_source(e, user_source(1)) from None
    snapshot_records(res)  # f_vjp outlives the call: it must not see later writes
    f_vjp = _backward_fn(trace, res, out_tree, outs, in_tree, leaves, "vjp", consume=False)
    out = tree.unflatten(out_tree, outs)
    return (out, f_vjp, aux) if has_aux else (out, f_vjp)


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """A function returning both ``f(*args)`` and its gradient with respect to ``argnums``.

    Args:
        f: a function returning a scalar float array (and aux, with ``has_aux``).
        argnums: which positional argument(s) to differentiate (an int or a tuple of ints).
        has_aux: ``f`` returns ``(value, aux)``.

    Returns:
        A function returning ``(value, grad)`` or ``((value, aux), grad)``; ``grad`` has the
        structure of the selected argument, or is a tuple of those for a tuple ``argnums``.

    Raises:
        GradError: the output is not a real scalar, or a differentiated input is not a
            floating-point array.

    Example:
        >>> fx.value_and_grad(lambda x: (x ** 2).sum())(np.array([1.0, 2.0]))
        (array(5.), array([2., 4.]))
    """
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    fname = f"grad({getattr(f, '__name__', 'f')})"

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return _value_and_grad(args, kwargs)
        except GradError as e:
            raise attach_source(e, user_source(1)) from None

    def _value_and_grad(args: tuple, kwargs: dict) -> Any:
        if any(not -len(args) <= i < len(args) for i in nums):
            raise GradError(f"{fname}: argnums={argnums} but the function was called with "
                            f"{len(args)} positional argument(s). Pass the arguments to "
                            "differentiate positionally.")
        idx = [i % len(args) for i in nums]
        diff = tuple(args[i] for i in idx)

        def f_diff(*d: Any) -> Any:
            full = list(args)
            for i, a in zip(idx, d):
                full[i] = a
            return f(*full, **kwargs)

        trace, res, outs, out_tree, aux, in_tree, leaves = _forward(f_diff, diff, has_aux, fname,
                                                                    argnums=nums)
        if len(outs) != 1 or out_tree != _ONE_LEAF:
            raise GradError(f"{fname} needs the function to return one scalar array, but it "
                            f"returned {tree.unflatten(out_tree, [abstractify(o) for o in outs])}"
                            ". Use vjp or jacrev for non-scalar outputs, or reduce the output "
                            "(e.g. .sum()).")
        value = outs[0]
        aval = abstractify(value)
        if aval.shape != () or aval.dtype.kind not in "f" and aval.dtype.name != "bfloat16":
            raise GradError(f"{fname} needs the function to return a real scalar (shape ()), "
                            f"but it returned {aval}. Use vjp or jacrev for non-scalar or "
                            "complex outputs, or reduce the output first (e.g. .sum()).")
        one = seed(aval, value)
        f_vjp = _backward_fn(trace, res, out_tree, outs, in_tree, leaves, fname, consume=True)
        grads = f_vjp(one)
        g = grads[0] if single else grads
        return ((value, aux) if has_aux else value), g

    return wrapped


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """The gradient of a scalar function with respect to its ``argnums`` argument(s).

    Args:
        f: a function returning a scalar float array (and aux, with ``has_aux``).
        argnums: which positional argument(s) to differentiate (an int or a tuple of ints).
        has_aux: ``f`` returns ``(value, aux)``; then the gradient function returns
            ``(grad, aux)``.

    Returns:
        A function with ``f``'s signature returning the gradient, shaped like the selected
        argument (a tuple of those for a tuple ``argnums``).

    Raises:
        GradError: see :func:`value_and_grad`.

    Example:
        >>> fx.grad(lambda x: fnp.sin(x).sum())(np.array([0.0, 1.0]))
        array([1.        , 0.54030231])
    """
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped
