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
from functx.ir import AbstractArray, Trace, abstractify
from functx.tracing import (INEXACT_DTYPES, Tracer, attach_source, not_an_array_advice,
                            user_source)
from functx.transforms._args import check_callable, index_tuple, resolve_argnums
from functx.transforms.reverse import (ConcreteTraceBuilder, backward_pass, read_only, seed,
                                       snapshot_records, zeros)

__all__ = ["vjp", "grad", "value_and_grad", "float0", "float0_zeros"]

_ONE_LEAF = tree.structure(0)  # the structure of a single array

# The dtype of the gradient of an integer or boolean input (``grad(..., allow_int=True)``):
# JAX's ``jax.dtypes.float0``, a structured dtype of zero bytes, so a float0 array holds no
# data (the tangent space of an integer is trivial). The same NumPy dtype as JAX's, so
# functx and JAX results compare equal.
float0 = np.dtype([("float0", np.void, 0)])


def float0_zeros(shape: Sequence[int]) -> np.ndarray:
    """The (read-only, data-free) gradient of an integer input of ``shape``: a NumPy array
    of dtype :data:`float0`, whatever the device of the input (as in JAX)."""
    z = np.zeros(tuple(shape), float0)
    z.flags.writeable = False
    return z


def _is_python_scalar(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex))


def _as_input(x: Any, fname: str) -> Any:
    if type(x) is Tracer or isinstance(x, np.ndarray) or backend_of(x) is not None:
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.asarray(x)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    raise GradError(f"{fname}: an input leaf is a {type(x).__name__} ({x!r:.60}), not an "
                    "array. Differentiate only with respect to arrays: pass other values "
                    "through a closure or functools.partial. "
                    + not_an_array_advice(x, output=False))


def _unwrap(x: Any, builder: ConcreteTraceBuilder) -> Any:
    return x._value if type(x) is Tracer and x._builder is builder else x


def _check_out_leaf(x: Any, fname: str) -> Any:
    if type(x) is Tracer or hasattr(x, "shape"):
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return np.asarray(x)
    raise GradError(f"{fname}: the function returned a {type(x).__name__} ({x!r:.60}) where "
                    "an array is needed. " + not_an_array_advice(x, output=True)
                    + " Put other values in the auxiliary output with has_aux=True.")


def check_diff_inputs(leaves: Sequence[Any], owners: Sequence[int], fname: str,
                      holomorphic: bool = False, allow_int: bool = False,
                      complex_ok: bool = True) -> None:
    """Check the dtypes of the leaves a transform differentiates (as JAX's ``grad`` does).

    Args:
        leaves: the input leaves (arrays or tracers).
        owners: the argument number of each leaf, for the message.
        fname: the transform, for the message.
        holomorphic: every leaf must be complex.
        allow_int: integer and boolean leaves are allowed (their gradient is float0 zeros).
        complex_ok: complex leaves are allowed without ``holomorphic`` (reverse mode: the
            gradient is the conjugate Wirtinger form; ``jacfwd`` says no, as JAX does).

    Raises:
        GradError: naming the argument, its leaf's type and what to do.
    """
    for leaf, arg in zip(leaves, owners):
        aval = abstractify(leaf)
        kind = aval.dtype.kind
        if holomorphic and kind != "c":
            raise GradError(f"{fname} with holomorphic=True needs complex inputs, but argument "
                            f"{arg} has a leaf {aval}. Convert it with x.astype(complex), or "
                            "leave out holomorphic=True for a real input.")
        if INEXACT_DTYPES[aval.dtype]:
            if kind == "c" and not (holomorphic or complex_ok):
                raise GradError(f"{fname} needs real-valued inputs, but argument {arg} has a "
                                f"leaf {aval}. For a holomorphic function pass "
                                "holomorphic=True; for other functions of complex inputs use "
                                "jvp (or jacrev) directly.")
            continue
        if kind in "biu":
            if allow_int:
                continue
            raise GradError(f"{fname}: argument {arg} has a leaf of dtype {aval.dtype} "
                            f"({aval}); {fname.split('(')[0]} differentiates only "
                            "floating-point (or complex) inputs. Convert it with "
                            "x.astype(float), leave it out of argnums, or pass allow_int=True "
                            "to get a float0 zero gradient for it.")
        raise GradError(f"{fname}: argument {arg} has a leaf of dtype {aval.dtype} ({aval}), "
                        "which is not numeric; only floating-point and complex inputs are "
                        "differentiated.")


def check_diff_output(aval: AbstractArray, fname: str, holomorphic: bool, what: str,
                      expected: str = "real floating-point outputs") -> None:
    """Check the dtype of an output that reverse mode seeds (grad's value, jacrev's outputs).

    Args:
        aval: the output's type.
        fname, what: the transform and the output, for the message.
        holomorphic: the output must be complex (else real floating-point).
        expected: what the transform needs, for the message.

    Raises:
        GradError: a complex output without ``holomorphic`` (its gradient would depend on a
            convention: use vjp), a real one with it, or an integer/boolean output.
    """
    kind = aval.dtype.kind
    if holomorphic:
        if kind != "c":
            raise GradError(f"{fname} with holomorphic=True needs complex outputs, but {what} "
                            f"is {aval}. Leave out holomorphic=True for a real output.")
    elif kind == "c":
        raise GradError(f"{fname} needs {expected}, but {what} is {aval}. For a holomorphic "
                        "function pass holomorphic=True (the result is then the complex "
                        "derivative f'(z)); for other functions of complex values use vjp "
                        "directly, or return a real value (e.g. fnp.real(y) or "
                        "fnp.abs(y) ** 2).")
    elif not INEXACT_DTYPES[aval.dtype]:
        raise GradError(f"{fname} needs {expected}, but {what} is {aval}; an integer or "
                        "boolean output has no gradient. Compute it in floating point, or use "
                        "vjp directly.")


def _forward(f: Callable, primals: tuple, has_aux: bool, fname: str,
             check: Callable[[list], None] | None = None):
    """Run ``f`` under a concrete trace.

    ``check(leaves)``, if given, checks the input leaves first (grad: their dtypes).

    Returns (trace, VJP records, outputs, out_tree, aux, in_tree, input leaves).
    """
    leaves, in_tree = tree.flatten(primals)
    leaves = [_as_input(x, fname) for x in leaves]
    if check is not None:
        check(leaves)
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


def check_cotangents(ct_leaves: Sequence[Any], avals: Sequence[AbstractArray], where: str,
                     what: str = "cotangent", against: str = "output") -> list:
    """The cotangent (or tangent) leaves, checked against the types they must have.

    A leaf must have its ``aval``'s shape, and for a floating-point or complex ``aval`` its
    dtype (as in JAX: a float32 cotangent for a float64 output, an integer one, or a
    complex one for a real output would silently change the result's dtype or meaning).
    Python scalars are weakly typed and take the ``aval``'s dtype (a Python complex only
    for a complex ``aval``). Leaves for integer or boolean ``avals`` may have any dtype
    (their derivatives are zero; JAX's float0 is accepted too).

    Args:
        ct_leaves: the leaves passed.
        avals: the type each must match.
        where: the function they were passed to, for the message.
        what, against: names for the message (``"cotangent"`` leaves against the function's
            ``"output"``, ``"tangent"`` leaves against the ``"primal"``).

    Returns:
        The leaves, Python scalars converted to arrays.

    Raises:
        GradError: naming each leaf that does not match, with the expected and received
            shape and dtype.
    """
    flat, bad = [], []
    for k, (c, a) in enumerate(zip(ct_leaves, avals)):
        exact = INEXACT_DTYPES[a.dtype]
        if _is_python_scalar(c):
            if exact and (a.dtype.kind == "c" or not isinstance(c, complex)):
                c = np.asarray(c, a.dtype)
            else:
                c = np.asarray(c)
        else:
            c = _as_input(c, where)
        ca = abstractify(c)
        if tuple(ca.shape) != tuple(a.shape) or (exact and ca.dtype != a.dtype):
            bad.append(f"leaf {k} has shape {tuple(ca.shape)} and dtype {ca.dtype}, but "
                       f"the {against} has shape {tuple(a.shape)} and dtype {a.dtype}")
        flat.append(c)
    if bad:
        to_real = any(abstractify(c).dtype.kind == "c" and a.dtype.kind != "c"
                      for c, a in zip(flat, avals))
        hint = (f" A complex {what} for a real {against} would make the result complex."
                if to_real else "")
        raise GradError(f"The {what}s passed to {where} do not match the {against}s' shapes "
                        f"and dtypes: {'; '.join(bad)}.{hint} Pass one {what} per {against} "
                        f"leaf with its shape and dtype (convert with t.astype(x.dtype)); "
                        f"Python scalars take the {against}'s dtype, and {what}s of integer "
                        f"or boolean {against}s may have any dtype.")
    return flat


def _backward_fn(trace: Trace, records: list, out_tree: Any, outs: list, in_tree: Any,
                 leaves: list, fname: str, consume: bool, float0_ints: bool = False
                 ) -> Callable:
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
        flat = check_cotangents(ct_leaves, out_avals, f"the VJP function of {fname}",
                                "cotangent", "output")
        in_cts = backward_pass(trace, records, flat, consume=consume)
        grads = [read_only(c, flat) if c is not None
                 else float0_zeros(v.aval.shape) if float0_ints and not INEXACT_DTYPES[
                     v.aval.dtype]
                 else zeros(v.aval, x)
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
        ``f_vjp`` may be called many times. Each cotangent leaf must have its output leaf's
        shape and dtype (Python scalars take the output's dtype); for a complex ``f`` the
        result follows JAX's convention (``f_vjp(ct) = ct * f'(z)`` for holomorphic ``f``).

    Aliasing: ``out`` shares no memory with a writeable argument, and ``f_vjp`` keeps a
    snapshot of what it needs: writing to the primals (or to arrays ``f`` closed over)
    after the call changes neither ``out`` nor what ``f_vjp`` returns. Only the caller's
    writeable NumPy arrays that the backward pass reads are copied (once each); functx's
    own results are read-only and kept as they are. CuPy arrays cannot be marked
    read-only and are not copied: do not write to them while ``f_vjp`` is alive.

    Raises:
        GradError: ``f`` is not callable, an input or output is not an array, or a
            cotangent does not match the outputs' structure, shapes or dtypes.

    Example:
        >>> out, f_vjp = fx.vjp(lambda x, y: x * y, 2.0, 3.0)
        >>> f_vjp(1.0)
        (array(3.), array(2.))
    """
    check_callable(f, "vjp", GradError)
    try:
        trace, res, outs, out_tree, aux, in_tree, leaves = _forward(f, primals, has_aux, "vjp")
    except GradError as e:
        raise attach_source(e, user_source(1)) from None
    snapshot_records(res)  # f_vjp outlives the call: it must not see later writes
    f_vjp = _backward_fn(trace, res, out_tree, outs, in_tree, leaves, "vjp", consume=False)
    out = tree.unflatten(out_tree, outs)
    return (out, f_vjp, aux) if has_aux else (out, f_vjp)


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """A function returning both ``f(*args)`` and its gradient with respect to ``argnums``.

    Args:
        f: a function returning a scalar float array (and aux, with ``has_aux``).
        argnums: which positional argument(s) to differentiate (an int or a sequence of
            ints, each naming a different argument; negative ones count from the end).
        has_aux: ``f`` returns ``(value, aux)``.
        holomorphic: ``f`` is holomorphic, with complex inputs and a complex output; the
            gradient is the complex derivative ``f'(z)`` (as in JAX).
        allow_int: integer and boolean inputs are allowed; their gradient is a zero array
            of dtype :data:`float0` (JAX's ``float0``: no data), of the input's shape.

    Returns:
        A function returning ``(value, grad)`` or ``((value, aux), grad)``; ``grad`` has the
        structure of the selected argument, or is a tuple of those for a sequence
        ``argnums``. For a real ``f`` of complex inputs (``holomorphic=False``) the gradient
        is JAX's ``df/dx - i df/dy`` (``z = x + iy``): e.g. ``6 - 8j`` for ``|z|**2`` at
        ``3 + 4j``; step against it (``z - lr * conj(g)``) to descend.

    Raises:
        GradError: ``f`` is not callable or ``argnums`` is not ints (both when the gradient
            function is made); ``argnums`` is out of range or repeats an argument; the
            output is not a real scalar (complex needs ``holomorphic``); a differentiated
            input is an integer (without ``allow_int``) or real (with ``holomorphic``).

    Example:
        >>> fx.value_and_grad(lambda x: (x ** 2).sum())(np.array([1.0, 2.0]))
        (array(5.), array([2., 4.]))
    """
    fname = f"grad({getattr(f, '__name__', 'f')})"
    check_callable(f, "grad", GradError)
    single = not isinstance(argnums, (tuple, list)) and not hasattr(argnums, "__iter__")
    nums = index_tuple(argnums, "argnums", fname, GradError)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return _value_and_grad(args, kwargs)
        except GradError as e:
            raise attach_source(e, user_source(1)) from None

    def _value_and_grad(args: tuple, kwargs: dict) -> Any:
        idx = resolve_argnums(nums, len(args), "argnums", fname, GradError, shown=argnums)
        diff = tuple(args[i] for i in idx)

        def f_diff(*d: Any) -> Any:
            full = list(args)
            for i, a in zip(idx, d):
                full[i] = a
            return f(*full, **kwargs)

        def check(leaves: list) -> None:
            owners = [i for i, p in zip(idx, diff) for _ in tree.leaves(p)]
            check_diff_inputs(leaves, owners, fname, holomorphic, allow_int)

        trace, res, outs, out_tree, aux, in_tree, leaves = _forward(f_diff, diff, has_aux, fname,
                                                                    check)
        if len(outs) != 1 or out_tree != _ONE_LEAF:
            raise GradError(f"{fname} needs the function to return one scalar array, but it "
                            f"returned {tree.unflatten(out_tree, [abstractify(o) for o in outs])}"
                            ". Use vjp or jacrev for non-scalar outputs, or reduce the output "
                            "(e.g. .sum()).")
        value = outs[0]
        aval = abstractify(value)
        if aval.shape != ():
            raise GradError(f"{fname} needs the function to return a scalar (shape ()), "
                            f"but it returned {aval}. Use vjp or jacrev for non-scalar "
                            "outputs, or reduce the output first (e.g. .sum()).")
        check_diff_output(aval, fname, holomorphic, "the function's output",
                          "the function to return a real scalar (floating-point, shape ())")
        one = seed(aval, value)
        f_vjp = _backward_fn(trace, res, out_tree, outs, in_tree, leaves, fname, consume=True,
                             float0_ints=True)
        grads = f_vjp(one)
        g = grads[0] if single else grads
        return ((value, aux) if has_aux else value), g

    return wrapped


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """The gradient of a scalar function with respect to its ``argnums`` argument(s).

    Args:
        f: a function returning a scalar float array (and aux, with ``has_aux``).
        argnums: which positional argument(s) to differentiate (an int or a sequence of
            distinct ints).
        has_aux: ``f`` returns ``(value, aux)``; then the gradient function returns
            ``(grad, aux)``.
        holomorphic: ``f`` is holomorphic (complex inputs and output); the result is the
            complex derivative ``f'(z)``.
        allow_int: integer and boolean inputs get a :data:`float0` zero gradient instead of
            an error.

    Returns:
        A function with ``f``'s signature returning the gradient, shaped like the selected
        argument (a tuple of those for a sequence ``argnums``).

    Raises:
        GradError: see :func:`value_and_grad`.

    Example:
        >>> fx.grad(lambda x: fnp.sin(x).sum())(np.array([0.0, 1.0]))
        array([1.        , 0.54030231])
        >>> fx.grad(lambda z: z ** 2, holomorphic=True)(1.0 + 2.0j)
        array(2.+4.j)
    """
    vg = value_and_grad(f, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        value, g = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapped
