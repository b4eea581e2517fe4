"""Composite rules: a primitive's derivatives taken from the same computation in functx ops.

Some primitives compute in one kernel what a composite of other primitives computes in
many (``layer_norm_grad``, ``dot_product_attention_grad``, ``class_nll``'s weighted sum...).
Their values come from the kernel, and their derivatives -- needed only for second and
higher orders, or in the operands where the kernel has no transpose -- come from
differentiating the *composite*: the same formula written with functx operations. The VJP
of the primitive at ``(inputs, ct)`` is the VJP of ``composite(*inputs, **params)``, and its
JVP the composite's JVP.

Differentiating is the transforms' job, and the transforms sit above the primitives, so
these helpers call them through the ``vjp`` and ``jvp`` hooks (:mod:`functx.registry.hooks`)
that ``functx.transforms`` registers. This module holds the one implementation; a primitive
declares its composite with :meth:`functx.registry.Primitive.def_composite_rules`, or a
hand-written rule calls :func:`composite_vjp` / :func:`composite_jvp` for some operands only.

A composite takes the primitive's inputs positionally and its parameters as keywords, and
returns what the primitive returns (a tuple for a primitive with ``multiple_results``).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from functx.registry.hooks import HOOKS

__all__ = ["composite_vjp", "composite_jvp", "composite_rules"]


def _partial_in(composite: Callable, primals: Sequence, live: Sequence[int],
                params: dict) -> Callable:
    """``composite`` as a function of the inputs at positions ``live`` only (the other
    inputs fixed at their primal values)."""
    def f(*vals: Any) -> Any:
        args = list(primals)
        for i, v in zip(live, vals):
            args[i] = v
        return composite(*args, **params)

    return f


def composite_vjp(composite: Callable, primals: Sequence, ct: Any,
                  argnums: Iterable[int] | None = None, **params: Any) -> tuple:
    """The VJP of ``composite(*primals, **params)`` for the output cotangent ``ct``.

    Args:
        composite: the primitive's computation in functx operations.
        primals: the primitive's inputs (values or tracers).
        ct: the output cotangent (a sequence of them for a composite returning a tuple).
        argnums: the inputs to differentiate (default: all); the others are constants.
        **params: the primitive's parameters, passed to ``composite`` as keywords.

    Returns:
        One cotangent per input: the composite's where ``argnums`` names the input, else
        None (a zero cotangent).

    Raises:
        MissingHookError: ``functx.transforms`` has not registered the ``vjp`` hook.

    Example:
        >>> composite_vjp(lambda x, w, *, k: x * w * k, (x, w), ct, argnums=(1,), k=2.0)
        (None, ct * x * 2.0)
    """
    live = tuple(range(len(primals))) if argnums is None else tuple(argnums)
    f = _partial_in(composite, primals, live, params)
    _, pull = HOOKS.vjp(f, *(primals[i] for i in live))
    cts = pull(tuple(ct) if isinstance(ct, (list, tuple)) else ct)
    out: list = [None] * len(primals)
    for i, c in zip(live, cts):
        out[i] = c
    return tuple(out)


def composite_jvp(composite: Callable, primals: Sequence, tangents: Sequence,
                  **params: Any) -> Any:
    """The JVP of ``composite(*primals, **params)`` in the inputs whose tangent is not None.

    Args:
        composite: the primitive's computation in functx operations.
        primals: the primitive's inputs.
        tangents: one tangent per input, None for a zero tangent.
        **params: the primitive's parameters, passed to ``composite`` as keywords.

    Returns:
        The output tangent (a list for a composite returning a tuple), or None where every
        tangent is None.

    Raises:
        MissingHookError: ``functx.transforms`` has not registered the ``jvp`` hook.
    """
    live = [i for i, t in enumerate(tangents) if t is not None]
    if not live:
        return None
    f = _partial_in(composite, primals, live, params)
    _, t = HOOKS.jvp(f, tuple(primals[i] for i in live), tuple(tangents[i] for i in live))
    return list(t) if isinstance(t, tuple) else t


def composite_rules(composite: Callable, *, argnums: Iterable[int] | None = None,
                    zero_if: Callable[..., bool] | None = None) -> tuple[Callable, Callable]:
    """``(vjp_rule, jvp_rule)`` that differentiate ``composite`` (see
    :meth:`functx.registry.Primitive.def_composite_rules`, which registers them)."""
    argnums = None if argnums is None else tuple(argnums)

    def vjp_rule(ct: Any, ins: Sequence, out: Any, **params: Any) -> tuple:
        if zero_if is not None and zero_if(*ins, **params):
            return (None,) * len(ins)
        return composite_vjp(composite, ins, ct, argnums, **params)

    def jvp_rule(tangents: Sequence, primals: Sequence, out: Any, **params: Any) -> Any:
        if zero_if is not None and zero_if(*primals, **params):
            return None
        if argnums is not None:
            tangents = [t if i in argnums else None for i, t in enumerate(tangents)]
        return composite_jvp(composite, primals, tangents, **params)

    name = getattr(composite, "__name__", "composite")
    vjp_rule.__name__ = vjp_rule.__qualname__ = f"vjp_of_{name}"
    jvp_rule.__name__ = jvp_rule.__qualname__ = f"jvp_of_{name}"
    return vjp_rule, jvp_rule
