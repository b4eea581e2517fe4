"""Forward mode: ``jvp`` and ``linearize``.

Forward mode is an interpreter that runs alongside concrete tracing: a
:class:`JvpTraceBuilder` receives each equation as the user's function binds it, computes the
primal output with ``bind`` (so primal values are concrete and Python control flow on them
works, as in ``grad``) and the output tangent with the primitive's JVP rule. A primitive
without a JVP rule is differentiated by transposing its VJP rule (``J t`` is the VJP of the
linear map ``ct -> J^T ct``), so forward mode covers every primitive reverse mode covers.

Tangents are carried by the tracers of the builder; a value with a zero tangent is not
wrapped at all (symbolic zeros), so code that does not depend on the inputs costs nothing
extra. Because rules bind functx operations, primal and tangent values may be tracers of
enclosing transforms: ``jvp(grad(f))``, ``grad(jvp-based f)`` and nested ``jvp`` compose, and
levels keep perturbations of different transforms apart.

``linearize`` runs the same interpreter with abstract tangents, one level below: the tangent
computations are recorded into a trace of the linear map (its constants are the residuals),
and the primal computation runs once.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from functx import tracing, tree
from functx.backends import inputs_device_scope
from functx.errors import FunctxError, GradError, MissingRuleError
from functx.ir import Var, abstractify
from functx.primitives._batching import zeros_like
from functx.registry import Primitive
from functx.tracing import (INEXACT_DTYPES, TraceBuilder, Tracer, attach_source, aval_of_value,
                            bind, leak_error, not_an_array_advice, user_source)
from functx.transforms._args import check_callable
from functx.transforms.grad import check_cotangents, vjp
from functx.transforms.interpret import eval_trace, snapshot_constants
from functx.transforms.reverse import read_only


class JvpTraceBuilder(TraceBuilder):
    """The builder of forward mode: its tracers carry a primal value and a tangent.

    It records no equations: each one is interpreted as it is bound (see the module
    docstring), so intermediate values are freed as soon as the user's code drops them.
    """

    concrete = True

    def process(self, prim: Primitive, args: tuple, params: dict) -> Any:
        vals = []
        tans = []
        has_tangent = False
        for a in args:
            if type(a) is Tracer and a._builder is self:
                if not self.active:
                    raise leak_error(a)
                vals.append(a._value)
                t = a._tangent
                tans.append(t)
                if t is not None:
                    has_tangent = True
            else:
                vals.append(a)
                tans.append(None)
        out = bind(prim, *vals, **params)
        if not has_tangent:
            return out
        t_out = apply_jvp(prim, tuple(tans), tuple(vals), out, params)
        if prim.multiple_results:
            return [self._wrap(o, t) for o, t in zip(out, t_out or [None] * len(out))]
        return self._wrap(out, t_out)

    def _wrap(self, value: Any, tangent: Any) -> Any:
        if tangent is None:
            return value
        return Tracer(self, Var(aval_of_value(value)), value, tangent)


def apply_jvp(prim: Primitive, tangents: tuple, primals: tuple, out: Any, params: dict) -> Any:
    """The output tangent(s) of ``prim`` (None for zero): its JVP rule, else its VJP rule
    transposed.

    Raises:
        MissingRuleError: the primitive has neither rule.
    """
    try:
        if prim.jvp is not None:
            t_out = prim.jvp(tangents, primals, out, **params)
        elif prim.has_zero_vjp:
            return None
        elif prim.vjp is not None:
            t_out = jvp_from_vjp(prim, tangents, primals, out, params)
        else:
            raise MissingRuleError(
                f"Forward mode reached primitive {prim.name}, which has neither a JVP nor a "
                f"VJP rule. Register one with {prim.name}_p.def_jvp(rule) (or def_vjp), or "
                "wrap its inputs in functx.stop_gradient if no derivative should flow "
                "through it.")
    except FunctxError as e:
        raise attach_source(e, user_source(4)) from None
    if prim.multiple_results:
        if t_out is None:
            return None
        t_out = [t if t is not None and INEXACT_DTYPES[o.dtype] else None
                 for t, o in zip(t_out, out)]
    elif t_out is not None and not INEXACT_DTYPES[out.dtype]:
        t_out = None
    if tracing.CHECK_EAGER:
        _check_tangents(prim, out, t_out)
    return t_out


def _check_tangents(prim: Primitive, out: Any, t_out: Any) -> None:
    outs = out if prim.multiple_results else [out]
    ts = t_out if prim.multiple_results else [t_out]
    for o, t in zip(outs, ts or [None] * len(outs)):
        if t is None:
            continue
        if tuple(o.shape) != tuple(t.shape) or o.dtype != t.dtype:
            raise FunctxError(f"Internal check failed: {prim.name}'s JVP rule returned a "
                              f"tangent {abstractify(t)} for an output {abstractify(o)}; a "
                              "tangent must have its output's shape and dtype.")


def jvp_from_vjp(prim: Primitive, tangents: tuple, primals: tuple, out: Any,
                 params: dict) -> Any:
    """``J t`` from the VJP rule alone: the VJP of the linear map ``ct -> J^T ct``.

    The VJP rule is evaluated once under reverse mode (at a zero cotangent) and pulled back
    with the tangents as cotangents; exact, and about twice the cost of a JVP rule.
    """
    outs = list(out) if prim.multiple_results else [out]
    float_outs = [j for j, o in enumerate(outs) if INEXACT_DTYPES[o.dtype]]
    wanted = [i for i, t in enumerate(tangents) if t is not None]
    if not float_outs or not wanted:
        return None
    needs = tuple(t is not None for t in tangents)

    def cotangent_map(*cts: Any) -> list:
        it = iter(cts)
        full = [next(it) if j in float_outs else zeros_like(o) for j, o in enumerate(outs)]
        ct = full if prim.multiple_results else full[0]
        if prim.vjp_selective:
            in_cts = prim.vjp(ct, primals, out, needs=needs, **params)
        else:
            in_cts = prim.vjp(ct, primals, out, **params)
        return [in_cts[i] if in_cts[i] is not None else zeros_like(primals[i]) for i in wanted]

    ct0 = [zeros_like(outs[j]) for j in float_outs]
    _, pull = vjp(cotangent_map, *ct0)
    t_float = pull([tangents[i] for i in wanted])
    t_out: list = [None] * len(outs)
    for j, t in zip(float_outs, t_float):
        t_out[j] = t
    return t_out if prim.multiple_results else t_out[0]


# ----------------------------------------------------------------------------------------
# The public functions


def _as_array(x: Any, fname: str, what: str) -> Any:
    if type(x) is Tracer or hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.asarray(x)
    advice = not_an_array_advice(x, output=what == "the function's output")
    raise GradError(f"{fname}: {what} contains a {type(x).__name__} ({x!r:.60}), which is not "
                    f"an array. {advice}")


def _split_aux(out: Any, has_aux: bool, fname: str) -> tuple:
    if not has_aux:
        return out, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise GradError(f"{fname} with has_aux=True needs the function to return a pair "
                        f"(output, aux) but it returned a {type(out).__name__}.")
    return out[0], out[1]


def _run_forward(builder: JvpTraceBuilder, f: Callable, leaves: list, t_leaves: list,
                 in_tree: Any, has_aux: bool, fname: str) -> tuple:
    """Run ``f`` in ``builder`` with the primal leaves carrying ``t_leaves``.

    Returns (output leaves' values, their tangents (None for zero), out_tree, aux).
    """
    tracers = [Tracer(builder, Var(abstractify(x)), x, t) if t is not None else x
               for x, t in zip(leaves, t_leaves)]
    out, aux = _split_aux(f(*tree.unflatten(in_tree, tracers)), has_aux, fname)
    out_leaves, out_tree = tree.flatten(out)
    values, tangents = [], []
    for x in out_leaves:
        x = _as_array(x, fname, "the function's output")
        if type(x) is Tracer and x._builder is builder:
            values.append(x._value)
            tangents.append(x._tangent)
        else:
            values.append(x)
            tangents.append(None)

    def unwrap(x: Any) -> Any:
        return x._value if type(x) is Tracer and x._builder is builder else x

    if has_aux:
        aux = tree.map(unwrap, aux)
    return values, tangents, out_tree, aux


def _read_only(x: Any, owned: Sequence[Any]) -> Any:
    if isinstance(x, np.generic):  # NumPy scalars from user code: return arrays
        x = np.asarray(x)
    return read_only(x, owned)


def jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple:
    """The output of ``f(*primals)`` and its directional derivative along ``tangents``.

    Args:
        f: a function of arrays (pytrees of arrays).
        primals: a tuple (or list) of the arguments: the point to differentiate at.
        tangents: a tuple with the same structure as ``primals``: the direction, one array
            per primal leaf with the leaf's shape and dtype (ignored for integer leaves).
        has_aux: ``f`` returns ``(output, aux)``; ``aux`` is returned, not differentiated.

    Returns:
        ``(out, out_tangent)`` (``(out, out_tangent, aux)`` with ``has_aux``), where
        ``out_tangent`` has the structure of ``out``. Outputs that do not depend on the
        inputs get zero tangents.

    Raises:
        GradError: ``f`` is not callable; ``primals``/``tangents`` are not sequences of
            matching structure; a tangent does not have its primal's shape and (for a
            floating-point or complex primal) dtype, as in JAX (Python scalars take the
            primal's dtype); or an input/output is not an array.

    Example:
        >>> fx.jvp(fnp.sin, (0.5,), (1.0,))
        (array(0.47942554), array(0.87758256))
    """
    check_callable(f, "jvp", GradError)
    try:
        return _jvp(f, primals, tangents, has_aux)
    except GradError as e:
        raise attach_source(e, user_source(1)) from None


def _flatten_primals_tangents(primals: Any, tangents: Any, fname: str) -> tuple:
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise GradError(f"{fname} takes the primals and the tangents as tuples (one entry per "
                        f"argument of the function), but got {type(primals).__name__} and "
                        f"{type(tangents).__name__}. Write {fname}(f, (x,), (v,)).")
    leaves, in_tree = tree.flatten(tuple(primals))
    t_leaves, t_tree = tree.flatten(tuple(tangents))
    if t_tree != in_tree:
        raise GradError(f"{fname}: the tangents have structure {t_tree} but the primals have "
                        f"structure {in_tree}; pass one tangent per primal leaf.")
    leaves = [_as_array(x, fname, "the primals") for x in leaves]
    avals = [abstractify(x) for x in leaves]
    t_leaves = check_cotangents(t_leaves, avals, fname, "tangent", "primal")
    # integer and boolean primals have no tangent (their tangent is ignored)
    t_leaves = [t if INEXACT_DTYPES[a.dtype] else None for t, a in zip(t_leaves, avals)]
    return leaves, t_leaves, in_tree


def _jvp(f: Callable, primals: Any, tangents: Any, has_aux: bool) -> tuple:
    fname = f"jvp({getattr(f, '__name__', 'f')})"
    leaves, t_leaves, in_tree = _flatten_primals_tangents(primals, tangents, fname)
    with JvpTraceBuilder(fname) as b:
        values, t_out, out_tree, aux = _run_forward(b, f, leaves, t_leaves, in_tree,
                                                    has_aux, fname)
    values = [_read_only(v, leaves) for v in values]
    t_out = [_read_only(t, t_leaves) if t is not None else zeros_like(v)
             for t, v in zip(t_out, values)]
    out = tree.unflatten(out_tree, values)
    t = tree.unflatten(out_tree, t_out)
    return (out, t, aux) if has_aux else (out, t)


def linearize(f: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """The output of ``f(*primals)`` and its linearization, a function of tangents.

    The primal computation runs once; the returned ``f_lin`` evaluates only the linear map
    (a trace whose constants are the residuals it needs), so it is cheap to call for many
    tangents.

    Args:
        f: a function of arrays (pytrees of arrays).
        *primals: the point to linearise at.
        has_aux: ``f`` returns ``(output, aux)``.

    Returns:
        ``(out, f_lin)`` (``(out, f_lin, aux)`` with ``has_aux``); ``f_lin(*tangents)``
        takes one tangent per primal (same structure) and returns the output tangent.

    Aliasing: ``out`` shares no memory with a writeable argument, and ``f_lin``'s
    constants (the residuals of the linear map) are snapshots: writing to the primals (or
    to arrays ``f`` closed over) after the call changes neither ``out`` nor what ``f_lin``
    returns. Only the caller's writeable NumPy arrays among the constants are copied;
    functx's own results are read-only and kept as they are. CuPy arrays cannot be marked
    read-only and are not copied: do not write to them while ``f_lin`` is alive.

    Raises:
        GradError: ``f`` is not callable, an input or output is not an array; ``f_lin``
            got tangents that do not match the primals' structure, shapes or dtypes (as for
            :func:`jvp`).

    Example:
        >>> y, f_lin = fx.linearize(fnp.sin, 0.5)
        >>> f_lin(2.0)
        array(1.75516512)
    """
    fname = f"linearize({getattr(f, '__name__', 'f')})"
    check_callable(f, "linearize", GradError)
    try:
        leaves, in_tree = tree.flatten(tuple(primals))
        leaves = [_as_array(x, fname, "the primals") for x in leaves]
        floats = [INEXACT_DTYPES[abstractify(x).dtype] for x in leaves]
        with inputs_device_scope(leaves), TraceBuilder(fname) as lin:
            t_in = [lin.new_input(abstractify(x).update(weak_type=False)) if fl else None
                    for x, fl in zip(leaves, floats)]
            with JvpTraceBuilder(fname) as b:
                values, t_out, out_tree, aux = _run_forward(b, f, leaves, t_in, in_tree,
                                                            has_aux, fname)
            t_out = [t if t is not None else zeros_like(v) for t, v in zip(t_out, values)]
            lin_trace = snapshot_constants(lin.build(t_out))  # f_lin outlives the call
    except GradError as e:
        raise attach_source(e, user_source(1)) from None
    values = [_read_only(v, leaves) for v in values]
    out = tree.unflatten(out_tree, values)

    def f_lin(*tangents: Any) -> Any:
        try:
            _, ts, _ = _flatten_primals_tangents(tuple(primals), tangents, f"{fname}'s f_lin")
        except GradError as e:
            raise attach_source(e, user_source(1)) from None
        outs = eval_trace(lin_trace, *[t for t, fl in zip(ts, floats) if fl])
        return tree.unflatten(out_tree, outs)

    f_lin.__name__ = f"{fname}.f_lin"
    return (out, f_lin, aux) if has_aux else (out, f_lin)

