"""Which residuals a VJP rule reads for the cotangents that are needed.

A primitive's VJP rule declares the inputs it reads (``save_inputs``) and whether it reads
its output (``save_output``) for *all* of its cotangents. When some inputs need no
cotangent (constants, integers: the record's target is None), the rule often reads less:
in ``c * a3`` with ``c`` constant, only the cotangent of ``a3`` is needed, and it reads
``c``, not ``a3`` (``mul``'s rule saves both). Keeping ``a3`` alive until the backward pass
would waste its memory.

:func:`needed_residuals` finds out what the rule reads for the needed cotangents: it traces
the rule once abstractly (declared inputs as tracers, the others as abstract values, as the
backward pass passes them), keeps only the needed cotangents as outputs, runs dead-code
elimination (``functx.transforms.interpret.prune``) and looks at which inputs (and output)
the remaining equations read. The answer is memoised on (primitive, needed cotangents,
input types, params), so each distinct case is traced once.

Only rules that list their inputs explicitly (``save_inputs`` a tuple: the library's
elementwise, linear-algebra, reduction... rules) are analysed. Rules that declare every
input (``save_inputs=True`` or a slice: higher-order primitives, ``custom_vjp``, composite
rules) keep their declaration: they may call user code, which should not run an extra
time. Nor do multiple-result rules that take None cotangents (``none_cts``). A rule that
is not selective (``def_vjp(selective=False)``) computes all of its cotangents in the
backward pass, so only what none of them reads (an input used for its shape) is dropped.
Where the analysis fails (a rule that needs concrete values), the declaration is kept. Numerical results never change: the rule is called with the same values for what it
reads.
"""
from __future__ import annotations

from typing import Any, Sequence

from functx.ir import Var
from functx.registry import Primitive
from functx.tracing import TraceBuilder, Tracer
from functx.transforms.interpret import prune

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
        needs: one bool per input: whether its cotangent is needed.
        in_avals: the abstract values of the inputs.
        out_avals: the abstract values of the outputs (one per output).
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
    needs = tuple(bool(n) for n in needs)
    try:
        key = (prim, needs, tuple(in_avals), tuple(params.items()))
        hit = _CACHE.get(key)
    except TypeError:  # an unhashable parameter
        return None
    if hit is None:
        hit = _analyse(prim, needs, list(in_avals), list(out_avals), params, declared)
        if len(_CACHE) >= CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = hit
    return None if hit is False else hit


def _analyse(prim: Primitive, needs: tuple, in_avals: list, out_avals: list, params: dict,
             declared: tuple) -> tuple[tuple[int, ...], bool] | bool:
    """Trace the VJP rule abstractly and prune it (see the module docstring); False where
    that fails."""
    multiple = prim.multiple_results
    try:
        with TraceBuilder("the residual analysis of a VJP rule") as b:
            cts = [b.new_input(a) for a in out_avals]
            ins = [b.new_input(a) if i in declared else a for i, a in enumerate(in_avals)]
            outs = [b.new_input(a) for a in out_avals] if prim.save_output else list(out_avals)
            ct = cts if multiple else cts[0]
            out = outs if multiple else outs[0]
            if prim.vjp_selective:
                res = prim.vjp(ct, ins, out, needs=needs, **params)
            else:
                res = prim.vjp(ct, ins, out, **params)
            # a rule that is not selective computes every cotangent in the backward pass
            # (and drops the unneeded ones), so everything it reads is needed
            wanted = [c for c, n in zip(res, needs)
                      if (n or not prim.vjp_selective) and c is not None]
            trace = b.build(wanted)
    except Exception:  # a rule that needs values (or fails abstractly): keep the declaration
        return False
    trace = prune(trace)
    read: set[int] = {id(a) for a in trace.outputs if type(a) is Var}
    for e in trace.eqns:
        read.update(id(a) for a in e.inputs if type(a) is Var)
    saved = tuple(i for i in declared
                  if type(ins[i]) is Tracer and id(ins[i]._var) in read)
    out_read = prim.save_output and any(id(o._var) in read for o in outs)
    return saved, bool(out_read)
