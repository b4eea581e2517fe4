"""Reverse mode's machinery: concrete tracing with VJP records, and the backward pass.

The forward pass traces the function with a :class:`ConcreteTraceBuilder`: values are
computed as equations are recorded (so Python control flow works), and next to each
equation the builder keeps its *VJP record*: exactly the residuals its primitive's VJP rule
declares. The backward pass (:func:`backward_pass`) walks the equations in reverse (as
``functx.transforms.interpret.walk_reverse`` does), calls each VJP rule with its record and
drops the record right after (so each residual is freed after its last use). Rules bind
functx operations, so when the values are tracers of an outer transform, the backward pass
is itself recorded: ``grad(grad(f))`` works.

The user-facing functions (``vjp``, ``grad``, ``value_and_grad``) are in
``functx.transforms.grad``; ``checkpoint``'s VJP rule builds records for a recomputed trace
with :func:`vjp_record` and runs the same backward pass.
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Sequence

import numpy as np

from functx import tracing
from functx.backends import backend_of, default_backend, finalize_cpu, owned_read_only
from functx.errors import MissingRuleError
from functx.ir import Eqn, Literal, Trace, Var, abstractify
from functx.primitives.elementwise import add
from functx.registry import Primitive
from functx.tracing import (INEXACT_DTYPES, TraceBuilder, Tracer, apply_eager, aval_of_value,
                            bind, leak_error, user_source)
from functx.transforms.residuals import CACHE_LIMIT, needed_residuals

__all__ = ["ConcreteTraceBuilder", "VjpRecord", "backward_pass", "vjp_record", "vjp_records",
           "is_float", "zeros", "seed", "read_only", "snapshot_records"]


# (ins, out, targets) of one equation, as the backward pass needs it: ``ins[i]`` is the
# value of input i where the VJP rule declared it reads it and its abstract value elsewhere;
# ``out`` likewise for the output(s); ``targets[i]`` is the variable that receives input i's
# cotangent, or None where none is needed (constants, literals, integers).
VjpRecord = tuple


class ConcreteTraceBuilder(TraceBuilder):
    """A builder whose tracers also carry their values (for grad and vjp).

    Output types come from the computed values (the eager implementation checks shapes, and
    explains a failure with the abstract-eval rule). Next to each equation it keeps the
    equation's *VJP record* (see :data:`VjpRecord`): exactly the residuals its VJP rule
    declared, and which inputs need a cotangent. Outputs that carry no derivative (of a
    primitive with a zero VJP rule, or integer and boolean outputs) are not recorded: they
    are returned as plain values, constants of the trace. A value no record holds is freed as soon as
    the user's code drops it; the backward pass drops each record once it has used it.
    """

    concrete = True

    def __init__(self, transform: str) -> None:
        super().__init__(transform)
        self.records: list[VjpRecord] = []

    def process(self, prim: Primitive, args: tuple, params: dict) -> Any:
        if not self.active:
            for a in args:
                if type(a) is Tracer and a._builder is self:
                    raise leak_error(a)
        # The common operands take no lists and no loop: one or two NumPy values, each this
        # builder's tracer or a constant it has seen (lift's memo); others take the loop.
        atoms = None
        n = len(args)
        if n == 1:
            a = args[0]
            if type(a) is Tracer and a._builder is self and type(a._value) is _ndarray:
                v = a._var
                atoms = (v,)
                targets = atoms if INEXACT_DTYPES[v.aval.dtype] else (None,)
                vals = (a._value,)
        elif n == 2:
            a, b = args
            if type(a) is Tracer and a._builder is self and type(a._value) is _ndarray:
                v = a._var
                if type(b) is _ndarray:
                    hit = self._const_ids.get(id(b))
                    if hit is not None:
                        atoms = (v, hit[1])
                        targets = (v if INEXACT_DTYPES[v.aval.dtype] else None, None)
                        vals = (a._value, b)
                elif type(b) is Tracer and b._builder is self and type(b._value) is _ndarray:
                    w = b._var
                    atoms = (v, w)
                    targets = (v if INEXACT_DTYPES[v.aval.dtype] else None,
                               w if INEXACT_DTYPES[w.aval.dtype] else None)
                    vals = (a._value, b._value)
            elif (type(a) is _ndarray and type(b) is Tracer and b._builder is self
                  and type(b._value) is _ndarray):
                hit = self._const_ids.get(id(a))
                if hit is not None:
                    w = b._var
                    atoms = (hit[1], w)
                    targets = (None, w if INEXACT_DTYPES[w.aval.dtype] else None)
                    vals = (a, b._value)
        plain = True  # no tracer of an enclosing transform among the values
        if atoms is not None:  # (a fast path's NumPy values: the CPU impl, inline below)
            impl = prim.cpu_arrays_impl
        else:
            impl = None
            atoms = []
            vals = []
            targets = []
            for a in args:
                if type(a) is Tracer and a._builder is self:
                    v = a._var
                    atoms.append(v)
                    targets.append(v if INEXACT_DTYPES[v.aval.dtype] else None)
                    a = a._value
                    if type(a) is Tracer:
                        plain = False
                elif type(a) is Tracer:
                    plain = False
                    atoms.append(self.atom_of(a))
                    targets.append(None)
                else:  # a constant: its atom (lift's memo, looked up here first)
                    hit = self._const_ids.get(id(a))
                    atoms.append(self.lift(a) if hit is None else hit[1])
                    targets.append(None)
                vals.append(a)
            atoms = tuple(atoms)
            targets = tuple(targets)
        multiple = prim.multiple_results
        if impl is not None and not multiple and not tracing.CHECK_EAGER:
            # One or two NumPy values: apply_eager's CPU path, without its frame and loop
            try:
                out = impl(*vals, **params) if params else impl(*vals)
            except Exception:  # (run again by apply_eager, which explains the error)
                out = apply_eager(prim, vals, params)
            if (type(out) is _ndarray and out.base is None and out is not vals[0]
                    and out is not vals[-1]):  # (a fresh result: read-only, as apply_eager)
                out.setflags(False)
            else:
                out = finalize_cpu(out, vals)
        else:
            out = apply_eager(prim, vals, params) if plain else bind(prim, *vals, **params)
        # An output with no derivative (a zero VJP rule: stop_gradient, floor, comparisons...;
        # or integer/boolean outputs only) is a constant of this trace, as in JAX: it is
        # returned as the value itself, with no equation or record (nothing flows back
        # through it), so Python code can convert it (float(fx.stop_gradient(x))).
        if multiple:
            if prim.has_zero_vjp or not any(INEXACT_DTYPES[o.dtype] for o in out):
                return out
            out_vars = tuple(Var(aval_of_value(o)) for o in out)
        else:
            if prim.has_zero_vjp:
                return out
            if type(out) is _ndarray:  # (abstractify's memo, with the dtype's kind beside)
                info = _ARRAY_INFO.get((out.shape, out.dtype)) or _array_info(out)
                if not info[1]:
                    return out
                var = _new_object(Var)  # Var(aval) without its __init__'s Python frame
                var.aval = info[0]
                out_vars = (var,)
            else:
                aval = aval_of_value(out)
                if not INEXACT_DTYPES[aval.dtype]:
                    return out
                out_vars = (Var(aval),)
        vjp = prim.vjp
        # Equations are recorded without their source line (grad's hot path), except where
        # the backward pass would need it for an error message. (tuple.__new__ makes the
        # Eqn named tuple without the Python frame of its __new__: this is grad's hot path.)
        self.eqns.append(_new_tuple(Eqn, (prim, atoms, params, out_vars,
                                          None if vjp is not None else user_source(3))))
        # The record's inputs: the values the VJP rule reads, abstract values elsewhere;
        # where some cotangents are unneeded, only what the needed ones read (memplan).
        if vjp is None:
            saved, save_out = (), prim.save_output
        else:
            saved, save_out = prim.save_inputs, prim.save_output
            if type(saved) is tuple and (saved or save_out) and None in targets:
                saved, save_out = _needed(prim, atoms, targets, out_vars, params, saved, save_out)
        if type(saved) is tuple and len(saved) == len(atoms):  # (every input: no copy)
            ins = tuple(vals)
        elif saved == ():  # (no input: their types)
            ins = tuple(map(_aval_of_atom, atoms))
        elif len(atoms) == 2 and type(saved) is tuple:  # (one of two: no list, no loop)
            ins = (vals[0], atoms[1].aval) if saved[0] == 0 else (atoms[0].aval, vals[1])
        else:
            ins = list(map(_aval_of_atom, atoms))  # (no list comprehension's frame)
            for i in (saved if type(saved) is tuple else prim.saved_input_indices(len(atoms))):
                ins[i] = vals[i]
            ins = tuple(ins)
        if save_out:
            res_out = out
        else:
            res_out = [v.aval for v in out_vars] if multiple else out_vars[0].aval
        self.records.append((ins, res_out, targets))
        if multiple:
            return [Tracer(self, v, x) for v, x in zip(out_vars, out)]
        t = _new_object(Tracer)  # Tracer(self, out_vars[0], out) without its __init__'s frame
        t._builder = self
        t._var = out_vars[0]
        t._value = out
        t._tangent = None
        return t


# (prim, input types, which targets are None) -> needed_residuals' answer, for equations
# without params (binary elementwise primitives with a constant operand: grad's hot path)
_NEEDED: dict = {}
_is_none = functools.partial(operator.is_, None)


def _needed(prim: Primitive, atoms: tuple, targets: tuple, out_vars: tuple, params: dict,
            saved: tuple, save_out: bool) -> tuple:
    """``(saved, save_out)``: what ``prim``'s VJP rule reads for the needed cotangents
    (:func:`needed_residuals`, else the declaration), memoised without building its key."""
    if params:
        hit = needed_residuals(prim, targets, list(map(_aval_of_atom, atoms)), out_vars,
                               params)
    else:
        # (keyed by the input types' ids, which the entry keeps alive: hashing an
        # AbstractArray is a Python call each; equal types that are distinct objects only
        # miss, abstractify memoises them)
        avals = tuple(map(_aval_of_atom, atoms))
        if len(atoms) == 2:
            key = (prim, id(avals[0]), id(avals[1]), targets[0] is None, targets[1] is None)
        else:
            key = (prim, tuple(map(id, avals)), tuple(map(_is_none, targets)))
        entry = _NEEDED.get(key)
        if entry is None:
            hit = needed_residuals(prim, targets, list(avals), out_vars, params)
            if len(_NEEDED) >= CACHE_LIMIT:
                _NEEDED.clear()
            _NEEDED[key] = entry = (hit, avals)
        hit = entry[0]
    return (saved, save_out) if hit is None else hit


# (shape, dtype) -> (the abstract value, whether values of it carry cotangents)
_ARRAY_INFO: dict = {}


def _array_info(x: np.ndarray) -> tuple:
    if len(_ARRAY_INFO) > 10_000:
        _ARRAY_INFO.clear()
    aval = abstractify(x)
    info = _ARRAY_INFO[(x.shape, x.dtype)] = (aval, INEXACT_DTYPES[aval.dtype])
    return info


_ndarray = np.ndarray
_new_tuple = tuple.__new__
_new_object = object.__new__
_aval_of_atom = operator.attrgetter("aval")


# ----------------------------------------------------------------------------------------
# Values the backward pass makes


def _backend_like(like: Any) -> Any:
    """The backend of ``like`` (tracers looked through); where that is unknown (an abstract
    tracer, a Python scalar) the default device's, which abstract transforms set to their
    inputs' device."""
    while type(like) is Tracer:
        like = like._value
    backend = backend_of(like)
    return default_backend() if backend is None else backend


def zeros(aval: Any, like: Any) -> Any:
    """A zero cotangent of type ``aval`` on the device of ``like`` (read-only on the CPU)."""
    backend = _backend_like(like)
    if backend.read_only_outputs:
        z = np.zeros(aval.shape, aval.dtype)
        z.flags.writeable = False
        return z
    return backend.xp.zeros(aval.shape, aval.dtype)


def staged_like(x: Any, like: Any) -> Any:
    """``x`` as a constant tracer of the abstract trace ``like`` belongs to (what is computed
    from it is recorded there, as JAX stages constants under ``jit``), else ``x``."""
    b = like._builder if type(like) is Tracer else None
    if b is None or b.concrete or not b.active:
        return x
    b.const_vars.append(Var(abstractify(x)))
    b.const_values.append(x)
    return Tracer(b, b.const_vars[-1])


def seed(aval: Any, value: Any) -> Any:
    """The cotangent 1 of a scalar output, on its device, so the cotangents the backward
    pass broadcasts from it live there too. Under an abstract trace (``jit``) it is staged
    into that trace: the broadcasts of the backward pass are then equations of the trace
    (fused by the compiler), not constants of the inputs' size held by the jitted function."""
    return staged_like(_backend_like(value).xp.ones((), aval.dtype), value)


def is_float(aval: Any) -> bool:
    """Whether values of this type carry cotangents (integers and booleans do not)."""
    return INEXACT_DTYPES[aval.dtype]


def read_only(x: Any, owned: Sequence[Any] = ()) -> Any:
    """``x`` as a read-only array for a transform's caller: a copy of a writeable NumPy
    array (the caller's own, or a closed-over one, which they may write to later), a view
    of one of the caller's read-only ``owned`` arrays (never the same object), else ``x``.
    """
    if type(x) is np.ndarray:
        if x.flags.writeable:
            return owned_read_only(x)
        for o in owned:
            if x is o:
                x = x.view()
                x.flags.writeable = False
                break
    return x


def snapshot_records(records: list) -> None:
    """Make the residuals of ``records`` that are writeable NumPy arrays (the caller's
    inputs and the arrays the function closed over) read-only copies, in place, so that a
    VJP function kept for later does not change when the caller writes to those arrays.
    Each array is copied once however many records hold it; functx's own results are
    read-only and kept as they are (see ``functx.backends.owned_read_only``)."""
    copies: dict[int, Any] = {}

    def snap(x: Any) -> Any:
        if type(x) is not np.ndarray or not x.flags.writeable:
            return x
        c = copies.get(id(x))
        if c is None:
            c = copies[id(x)] = owned_read_only(x)
        return c

    for k, (ins, out, targets) in enumerate(records):
        if any(type(x) is np.ndarray and x.flags.writeable for x in ins) or \
                type(out) is np.ndarray and out.flags.writeable or \
                type(out) is list and any(type(o) is np.ndarray for o in out):
            new_out = [snap(o) for o in out] if type(out) is list else snap(out)
            records[k] = (tuple(snap(x) for x in ins), new_out, targets)


# ----------------------------------------------------------------------------------------
# VJP records of traces evaluated some other way


def vjp_record(eqn: Any, ins: Sequence[Any], outs: Sequence[Any],
               receives: Callable[[Var], bool]) -> VjpRecord:
    """The VJP record of one equation, from the values of its inputs and outputs.

    Args:
        eqn: the equation.
        ins: one value per input; only those its VJP rule declared it reads are used.
        outs: one value per output; used where its primitive saves its output.
        receives: whether an input variable gets a cotangent.

    Returns:
        The record (see :data:`VjpRecord`).
    """
    prim = eqn.prim
    rec_ins = [a.aval for a in eqn.inputs]
    targets = tuple(a if type(a) is Var and receives(a) else None for a in eqn.inputs)
    save_out = prim.save_output
    if prim.vjp is not None:
        saved = prim.saved_input_indices(len(eqn.inputs))
        if None in targets:  # some cotangents unneeded: save what the others read
            hit = needed_residuals(prim, targets, rec_ins, eqn.outputs, eqn.params)
            if hit is not None:
                saved, save_out = hit
        for i in saved:
            rec_ins[i] = ins[i]
    out = list(outs) if save_out else [v.aval for v in eqn.outputs]
    return tuple(rec_ins), out if prim.multiple_results else out[0], targets


def vjp_records(trace: Trace, env: dict) -> list[VjpRecord]:
    """The VJP records of ``trace``'s equations from ``env``, a dict holding the values of
    (at least) the variables their VJP rules read (see :func:`vjp_record`); every
    floating-point variable but the constants receives a cotangent.

    ``grad``'s concrete tracing builds these as it goes; this serves traces evaluated some
    other way.
    """
    consts = set(trace.const_vars)

    def receives(a: Var) -> bool:
        return a not in consts and is_float(a.aval)

    def value(a: Any) -> Any:
        return a.value if type(a) is Literal else env.get(a)

    return [vjp_record(e, [value(a) for a in e.inputs], [env.get(v) for v in e.outputs],
                       receives) for e in trace.eqns]


# ----------------------------------------------------------------------------------------
# The backward pass


def _reaches(trace: Trace, eqn_index: int) -> bool:
    """Whether some input of equation ``eqn_index`` depends differentiably on the inputs.

    Used only to decide whether a missing VJP rule matters (it does not when everything
    flowing into the primitive is constant, e.g. behind stop_gradient).
    """
    live = set(trace.in_vars)
    for e in trace.eqns[:eqn_index]:
        if not e.prim.has_zero_vjp and any(type(a) is Var and a in live for a in e.inputs):
            live.update(e.outputs)
    return any(type(a) is Var and a in live for a in trace.eqns[eqn_index].inputs)


def backward_pass(trace: Trace, records: list, out_cts: Sequence[Any],
                  consume: bool = False) -> list:
    """Cotangents of ``trace``'s inputs given cotangents of its outputs.

    Args:
        trace: the forward trace.
        records: its VJP records, one per equation (from concrete tracing or
            :func:`vjp_records`).
        out_cts: one cotangent (or None for zero) per trace output.
        consume: drop each record once used, so residuals are freed as the backward pass
            goes (for a single use, as in ``grad``); ``records`` is emptied.

    Returns:
        One cotangent per input variable; None where it is zero.

    Raises:
        MissingRuleError: a cotangent reaches a primitive without a VJP rule.

    Example:
        >>> b = ConcreteTraceBuilder("vjp")
        >>> with b:
        ...     y = fnp.sin(b.new_input(np.ones(3))).sum()
        ...     trace = b.build([y])
        >>> backward_pass(trace, b.records, [np.ones(())])[0]   # cos(1), three times
    """
    cts: dict[Var, Any] = {}
    for v, ct in zip(trace.outputs, out_cts):
        if type(v) is Var and ct is not None and is_float(v.aval):
            cts[v] = add(cts[v], ct) if v in cts else ct
    # The walk of functx.transforms.interpret.walk_reverse, with the rule written into the
    # loop (eager grad's hot path: no rule frame, no tuple of flows per equation). Each
    # equation's record is dropped when the walk reaches it (consume), whether or not a
    # cotangent flows; cotangents reaching one variable are summed in the order they arrive.
    pop = cts.pop
    eqns = trace.eqns
    take = records.pop
    for k in range(len(eqns) - 1, -1, -1):
        eqn = eqns[k]
        ins, out, targets = take() if consume else records[k]
        prim = eqn.prim
        if prim.multiple_results:
            ct: Any = [pop(v, None) for v in eqn.outputs]
            if all(c is None for c in ct):
                continue
            if not prim.none_cts:
                some = next(c for c in ct if c is not None)
                ct = [c if c is not None else zeros(v.aval, some)
                      for c, v in zip(ct, eqn.outputs)]
        else:
            ct = pop(eqn.outputs[0], None)
            if ct is None:
                continue
        vjp = prim.vjp
        if vjp is None:
            if prim.has_zero_vjp or not _reaches(trace, k):
                continue
            raise MissingRuleError(
                f"grad reached primitive {prim.name} (recorded at {eqn.source}), which has no "
                f"VJP rule. Register one with {prim.name}_p.def_vjp(...), or wrap its inputs "
                "in functx.stop_gradient if no gradient should flow through it.")
        if prim.has_zero_vjp:
            continue
        # (the VJP rule is called here, not in a helper: see walk_reverse's docstring)
        params = eqn.params
        if prim.vjp_selective:
            if len(targets) == 2:  # (binary primitives: no list comprehension's frame)
                needs = (targets[0] is not None, targets[1] is not None)
            else:
                needs = tuple([t is not None for t in targets])
            in_cts = (vjp(ct, ins, out, needs=needs, **params) if params
                      else vjp(ct, ins, out, needs=needs))
        else:
            in_cts = vjp(ct, ins, out, **params) if params else vjp(ct, ins, out)
        if len(targets) == 1:  # (one input: no zip)
            t = targets[0]
            if t is not None:
                c = in_cts[0]
                if c is not None:
                    cts[t] = add(cts[t], c) if t in cts else c
            continue
        for t, c in zip(targets, in_cts):
            if t is not None and c is not None:
                cts[t] = add(cts[t], c) if t in cts else c
    return [cts.get(v) for v in trace.in_vars]
