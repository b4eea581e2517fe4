"""Which residuals a VJP rule reads for the cotangents that are needed.

A primitive's VJP rule declares the inputs it reads (``save_inputs``) and whether it reads
its output (``save_output``) for *all* of its cotangents. When some inputs need no
cotangent (constants, integers: the record's target is None), the rule often reads less:
in ``c * a3`` with ``c`` constant, only the cotangent of ``a3`` is needed, and it reads
``c``, not ``a3`` (``mul``'s rule saves both). Keeping ``a3`` alive until the backward pass
would waste its memory.

:func:`needed_residuals` finds out what the rule reads for the needed cotangents: it traces
the rule once abstractly with the same ``needs`` the backward pass will give it (declared
inputs as tracers, the others as abstract values, as the backward pass passes them) and
looks at which inputs (and output) its equations read, or it returns. Only reading an
input's shape or dtype records nothing, so such an input is not kept. Dead-code elimination
of that trace would be wrong here: the backward pass calls the rule eagerly, so every
operation the rule performs runs, whether or not a needed cotangent depends on it. (A rule
that is not selective computes all of its cotangents, so it reads what all of them read.)
The answer is memoised on (primitive, needed cotangents, input types, params), so each
distinct case is traced once.

Only rules that list their inputs explicitly (``save_inputs`` a tuple: the library's
elementwise, linear-algebra, reduction... rules) are analysed. Rules that declare every
input (``save_inputs=True`` or a slice: higher-order primitives, ``custom_vjp``, composite
rules) keep their declaration: they may call user code, which should not run an extra
time. Nor do multiple-result rules that take None cotangents (``none_cts``). Where the
analysis fails (a rule that needs concrete values), the declaration is kept; a second
trace checks that the rule runs with the dropped residuals as abstract values. Numerical
results never change: the rule is called with the same values for what it reads.
"""
from __future__ import annotations

from typing import Any, Sequence

from functx.ir import Var
from functx.registry import Primitive
from functx.tracing import TraceBuilder, Tracer

__all__ = ["needed_residuals", "CACHE_LIMIT"]

# The most memoised answers; the memo is cleared beyond it (each entry is small).
CACHE_LIMIT = 50_000
_CACHE: dict = {}


def needed_residuals(prim: Primitive, needs: Sequence[bool], in_avals: Sequence[Any],
                     out_avals: Sequence[Any], params: dict
                     ) -> tuple[tuple[int, ...], bool] | None:
    """The residuals ``prim``'s VJP rule reads when only the cotangents of the inputs with
    ``needs[i]`` true are wanted.

    Args:
        prim: the primitive (its VJP rule and declared residuals).
        needs: one bool per input: whether its cotangent is needed (or anything whose
            truth says it: grad passes the variables receiving cotangents, None elsewhere).
        in_avals: the abstract values of the inputs.
        out_avals: the abstract values of the outputs (one per output), or the output
            variables.
        params: the equation's parameters.

    Returns:
        ``(input indices, whether the output is read)``, a subset of the declaration; or
        None where the declaration must be kept as it is (the rule declares every input, a
        parameter is unhashable, or the rule cannot be traced abstractly).

    Example:
        >>> needed_residuals(mul_p, (False, True), (f32[3], f32[3]), (f32[3],), {})
        ((0,), False)      # the cotangent of the second factor reads the first only
    """
    declared = prim.save_inputs
    if type(declared) is not tuple or prim.vjp is None or prim.none_cts:
        return None
    if not declared and not prim.save_output:
        return (), False
    needs = tuple(map(bool, needs))  # (grad passes its targets: variables or None)
    try:
        key = (prim, needs, tuple(in_avals), tuple(params.items()) if params else ())
        hit = _CACHE.get(key)
    except TypeError:  # an unhashable parameter
        return None
    if hit is None:
        outs = [getattr(a, "aval", a) for a in out_avals]  # (variables: their types)
        hit = _analyse(prim, needs, list(in_avals), outs, params, declared)
        if len(_CACHE) >= CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = hit
    return None if hit is False else hit


def _trace_rule(prim: Primitive, needs: tuple, in_avals: list, out_avals: list,
                params: dict, saved: Sequence[int], save_out: bool) -> tuple:
    """``(trace, input tracers or avals, output tracers or avals)`` of the VJP rule traced
    abstractly, the inputs in ``saved`` (and the output if ``save_out``) as tracers, the
    others as abstract values (as the backward pass passes them)."""
    multiple = prim.multiple_results
    with TraceBuilder("the residual analysis of a VJP rule") as b:
        cts = [b.new_input(a) for a in out_avals]
        ins = [b.new_input(a) if i in saved else a for i, a in enumerate(in_avals)]
        outs = [b.new_input(a) for a in out_avals] if save_out else list(out_avals)
        ct = cts if multiple else cts[0]
        out = outs if multiple else outs[0]
        if prim.vjp_selective:
            res = prim.vjp(ct, ins, out, needs=needs, **params)
        else:
            res = prim.vjp(ct, ins, out, **params)
        trace = b.build([c for c in res if c is not None])
    return trace, ins, outs


def _analyse(prim: Primitive, needs: tuple, in_avals: list, out_avals: list, params: dict,
             declared: tuple) -> tuple[tuple[int, ...], bool] | bool:
    """Trace the VJP rule abstractly and see what it reads (the module docstring); False where
    that fails."""
    try:
        trace, ins, outs = _trace_rule(prim, needs, in_avals, out_avals, params, declared,
                                       prim.save_output)
    except Exception:  # a rule that needs values (or fails abstractly): keep the declaration
        return False
    # Every equation the rule recorded counts, not only those the needed cotangents depend
    # on: the backward pass runs the rule eagerly, so its dead code runs too, and needs
    # its operands' values (a composite's forward pass, say).
    read: set[int] = {id(a) for a in trace.outputs if type(a) is Var}
    for e in trace.eqns:
        read.update(id(a) for a in e.inputs if type(a) is Var)
    saved = tuple(i for i in declared
                  if type(ins[i]) is Tracer and id(ins[i]._var) in read)
    out_read = bool(prim.save_output and any(id(o._var) in read for o in outs))
    if saved != declared or out_read != prim.save_output:
        # check that the rule runs with the dropped residuals as abstract values (a rule
        # may take another path for an abstract value than for a tracer)
        try:
            _trace_rule(prim, needs, in_avals, out_avals, params, saved, out_read)
        except Exception:
            return False
    return saved, out_read
