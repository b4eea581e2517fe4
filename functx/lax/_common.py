"""What the control-flow primitives share: tracing a function of pytrees into a *closed*
sub-trace, running a sub-trace inside an implementation, and the errors.

A higher-order primitive (``scan``, ``while``, ``cond``) holds its body as a sub-trace in
its parameters. The body is traced once, abstractly, with the shapes of one iteration;
the arrays and outer tracers it closes over become the sub-trace's *first inputs* (they
are hoisted: the primitive's equation receives them as operands), so an enclosing
transform sees them and derivatives flow to them. Such a trace has no constants: it is
*closed*, and the same trace serves eager calls, ``jit`` and every rule.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from functx import tree
from functx.backends import CPU, backend_of, device_of, device_put
from functx.errors import FunctxError, GradError
from functx.ir import AbstractArray, Trace
from functx.primitives._batching import to_front
from functx.registry import Primitive
from functx.tracing import (INEXACT_DTYPES, Tracer, bind, innermost_abstract_builder,
                            trace_function)
from functx.transforms.interpret import eval_trace
from functx.transforms.jit import executor
from functx.transforms.reverse import ConcreteTraceBuilder

import functx.numpy as fnp

__all__ = ["ControlFlowError", "ReverseModeError", "Closed", "trace_closed", "run_closed",
           "bind_loop",
           "strong", "is_float", "as_leaf", "under_reverse_mode", "describe_tree",
           "zeros_of", "batch_front", "run_traced"]


class ControlFlowError(FunctxError, TypeError):
    """A control-flow function (``scan``, ``while_loop``, ``cond``...) was given a body
    or operands it cannot accept: a carry whose shape or dtype changes, ``xs`` of unequal
    lengths, a predicate that is not a boolean scalar, branches with different outputs."""


class ReverseModeError(GradError):
    """Reverse mode reached a loop whose trip count is only known at run time
    (``while_loop``, ``fori_loop`` with traced bounds), which it cannot differentiate."""


class Closed(NamedTuple):
    """A function traced into a closed sub-trace (see the module docstring)."""

    trace: Trace  # inputs: the hoisted constants, then the arguments' leaves
    consts: list  # the values of the hoisted constants (arrays or outer tracers)
    out_tree: Any  # the structure of the function's output
    box: list  # whatever the traced wrapper stored (the carry's structure, ...)


def strong(aval: AbstractArray) -> AbstractArray:
    """``aval`` without the weak-type flag (a loop carry has one fixed dtype)."""
    return AbstractArray(aval.shape, aval.dtype) if aval.weak_type else aval


def is_float(aval: Any) -> bool:
    """Whether values of this type carry derivatives."""
    return INEXACT_DTYPES[aval.dtype]


def as_leaf(x: Any, where: str, what: str) -> Any:
    """``x`` as an array leaf: tracers and arrays as they are, Python and NumPy scalars as
    0-d arrays (a carry needs a fixed dtype).

    Raises:
        ControlFlowError: ``x`` is not an array.
    """
    if type(x) is Tracer or isinstance(x, np.ndarray):
        return x
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return fnp.asarray(x)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    raise ControlFlowError(f"{where}: {what} contains a {type(x).__name__} ({x!r:.60}), "
                           "which is not an array. Pass arrays, Python scalars, or pytrees "
                           "(tuples, lists, dicts) of them.")


def describe_tree(avals: Sequence[Any], treedef: Any) -> str:
    """A pytree of abstract values as text, for error messages."""
    try:
        return str(tree.unflatten(treedef, [str(a) for a in avals]))
    except Exception:  # pragma: no cover - a structure that does not unflatten text
        return ", ".join(map(str, avals))


def trace_closed(f: Callable, args: tuple, where: str) -> Closed:
    """Trace ``f(*args)`` abstractly into a closed sub-trace.

    Args:
        f: the body; called once, with tracers shaped like ``args``.
        args: a tuple of pytrees of abstract values (or arrays: only their types count).
        where: the name for error messages (``"scan(step)"``).

    Returns:
        A :class:`Closed`: the trace's inputs are the hoisted constants followed by the
        leaves of ``args``; its outputs the leaves of ``f``'s result.

    Raises:
        ConcretizationError: ``f`` needs the value of its arguments (Python control flow
            on them): use ``cond``/``where`` inside the body.
    """
    box: list = []

    def body(*a: Any) -> Any:
        return f(*a, box)

    trace, out_tree, _ = trace_function(body, args, {}, where)
    closed = Trace(trace.const_vars + trace.in_vars, (), (), trace.eqns, trace.outputs)
    return Closed(closed, list(trace.const_values), out_tree, box)


def bind_loop(prim: Primitive, *args: Any, **params: Any) -> Any:
    """``bind(prim, *args, **params)`` for a loop or branch; where its sub-traces have effects
    (``functx.debug.print`` inside) and no operand is traced, the equation is recorded in the
    innermost abstract trace (``jit``, ``make_trace``) instead of running while it is
    traced: so its prints run at every call, in program order (as a debug print of
    constants only does; see ``functx.lax._callback``), not once at trace time."""
    effects = prim.has_effects
    if effects and not isinstance(effects, bool):
        effects = effects(params)
    if effects and not any(type(x) is Tracer for x in args):
        builder = innermost_abstract_builder()
        if builder is not None:
            return builder.process(prim, args, params)
    return bind(prim, *args, **params)


def zeros_of(aval: Any) -> Any:
    """Zeros of type ``aval`` (recorded as an equation when traced)."""
    return fnp.zeros(aval.shape, aval.dtype)


def run_closed(trace: Trace, args: Sequence[Any], donated: tuple | None = None) -> list:
    """The outputs of a closed sub-trace on concrete arrays (an implementation's body run):
    through jit's lean executor, planned once per trace and backend (``donated``: one bool
    per argument whose memory the run may reuse, see functx.compiler.memory)."""
    backend = CPU
    for a in args:
        b = backend_of(a)
        if b is not None:
            backend = b
            break
    return executor(trace, donated)(list(args), backend)


def run_traced(trace: Trace, args: Sequence[Any]) -> list:
    """The outputs of a closed sub-trace on values that may be tracers (rules)."""
    return eval_trace(trace, *args)


def under_reverse_mode(values: Sequence[Any]) -> bool:
    """Whether binding a primitive on ``values`` is recorded by reverse mode's concrete
    builder (``grad``, ``vjp``): the innermost builder owning one of them is one. There a
    loop keeps its residuals as it runs, instead of recomputing them in the backward pass.
    """
    best = None
    for v in values:
        if type(v) is Tracer:
            b = v._builder  # the builder bind would choose: the innermost one
            if best is None or b.level > best.level:
                best = b
    return isinstance(best, ConcreteTraceBuilder) and best.active


def batch_front(x: Any, d: int | None, size: int, like: Any) -> Any:
    """``x`` with its batch axis first; an unbatched ``x`` is broadcast to the batch on the
    device of ``like`` (a batched operand: a loop's carry joins the batch's device, where a
    host scalar such as a counter would otherwise stay on the host)."""
    out = to_front(x, d, size)
    if d is None and type(out) is not Tracer:
        dev = device_of(like)
        if dev is not None and device_of(out) != dev:
            out = device_put(out, dev)
    return out
