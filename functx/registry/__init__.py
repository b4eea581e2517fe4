"""Primitives and the central registry of their rules.

A :class:`Primitive` holds, in one object, everything every transform needs to know about
one operation:

* ``abstract_eval(*avals, **params)``: the shape/dtype rule (returns an AbstractArray, or a
  tuple of them for a primitive with ``multiple_results``); it raises functx errors for bad
  input, so shapes are checked at trace time;
* ``impl``: implementations per backend. A ``"generic"`` rule ``fn(xp, *arrays, **params)`` is
  written once against the array-module interface and serves NumPy and CuPy alike; a backend
  may override it (``def_impl(fn, backend="cuda")``);
* ``vjp``: the reverse-mode rule ``fn(ct, ins, out, **params) -> tuple`` of one cotangent (or
  None for a zero) per input. It declares the residuals it needs (``save_inputs``,
  ``save_output``); ``ins[i]``/``out`` hold values where declared and only the abstract value
  (which has ``.shape``/``.dtype``/``.ndim``) elsewhere, so the backward pass keeps nothing else
  alive. Rules are written with functx operations, so they are differentiable themselves;
* ``jvp``: the forward-mode rule ``fn(tangents, primals, out, **params)``. ``tangents`` has
  one entry per input: an array shaped and typed like that input, or None for a zero tangent
  (always None for integer and bool inputs); ``primals`` are the input values and ``out`` the
  primal output (a list for ``multiple_results``). It returns the output tangent, shaped and
  typed like ``out`` (a list for ``multiple_results``), or None for a zero tangent. Optional:
  without it, forward mode transposes the VJP rule (``J t`` is the VJP of ``ct -> J^T ct``),
  which is exact but costs about twice as much;
* ``batch``: the batching rule ``fn(args, dims, **params) -> (out, out_dim)``. ``dims[i]`` is
  the axis of ``args[i]`` that carries the batch (a non-negative int), or None where
  ``args[i]`` is not batched (at least one is). ``out_dim`` says where the batch is in the
  result: an int, or None if the result is not batched (a list for ``multiple_results``).
  Rules move the batch axis only when they must (``functx.primitives._batching`` has the
  helpers). Optional: without it, ``vmap`` loops over the batch and stacks, with a warning.

Every rule is written with functx operations (primitives' ``bind``, or ``functx.numpy``
through the ``numpy`` hook below), never with raw NumPy on its arguments, so rules compose
with every transform: the values they get may be tracers of an enclosing transform.

Users define their own primitives with the same API the library uses::

    square_p = Primitive("square")
    square_p.def_abstract_eval(lambda x: x)
    square_p.def_impl(lambda xp, x: x * x)
    square_p.def_vjp(lambda ct, ins, out: (2 * ins[0] * ct,), save_inputs=(0,))
    square = square_p.bind

Effects. A primitive whose equations must run even when nothing reads their outputs (a
debug print, a host callback run for its effect) sets ``prim.has_effects = True``; the
transforms' dead-code elimination (``functx.transforms.interpret.prune``, used by ``jit``
and ``vmap``) keeps its equations. Such a primitive may have no outputs at all
(``multiple_results=True`` and an abstract-eval rule returning ``[]``). A higher-order
primitive whose equations have effects only when their sub-trace does sets
``has_effects`` to a function of the equation's params, such as
``lambda params: trace_has_effects(params["trace"])`` (``functx.transforms.interpret``).

Composite rules. Where a primitive computes in one kernel what a composite of other
primitives computes in many, its derivatives may come from differentiating that composite
(the same formula in functx operations): ``prim.def_composite_rules(composite)`` registers
the VJP rule ``ct -> vjp(composite)(ct)`` and the JVP rule ``t -> jvp(composite)(t)``, with
``composite(*inputs, **params)`` returning what the primitive returns. ``argnums`` limits
the derivatives to some inputs, ``zero_if(*inputs, **params)`` says where they are all
zero. A hand-written rule that needs the composite's derivative for some operands only calls
``composite_vjp(composite, ins, ct, argnums, **params)`` or ``composite_jvp(composite,
primals, tangents, **params)`` (``functx.registry.composite``: the one implementation)::

    layer_norm_grad_p.def_composite_rules(_ln_grad_composite, zero_if=_no_features)

Hooks. The registry and the primitives sit below the transforms and ``functx.numpy`` in the
layers (``errors``/``tree`` -> ``ir`` -> ``backends`` -> ``tracing`` + ``registry`` ->
``primitives`` -> ``transforms`` -> ``numpy`` -> ``nn``...) and never import them, not even
inside a function. The operations they need from above are *hooks* that the upper layer
registers when it is imported (``functx.registry.hooks``): ``HOOKS.vjp``, ``HOOKS.jvp`` and
``HOOKS.grad`` (registered by ``functx.transforms``; composite rules use them) and
``HOOKS.numpy`` (the ``functx.numpy`` module; tracer operators and methods use it, and the
few rules written with NumPy-style functions). A rule prefers other primitives' ``bind``
functions to ``HOOKS.numpy``. Using a hook nobody registered raises ``MissingHookError``.

Compiler rules (optional; ``jit``'s compiler reads them, never naming a primitive):
``prim.def_scalar(expr, operand_axes=...)`` / ``prim.def_scalar_reduction(...)`` say how one
output element is computed, as a typed expression tree any code generator renders
(:mod:`functx.registry.scalar`), and ``prim.def_simplify(rule)`` gives the primitive's
algebraic identities to the simplification pass (:mod:`functx.registry.rewrite`).
``prim.def_impl_out(fn, alias=...)`` gives an implementation that writes into preallocated
memory, so ``jit``'s memory planner (``functx.compiler.memory``) can hand the step a dead
buffer or a donated argument; ufunc primitives get one from ``unary``/``binary``.
``prim.def_accumulate(fn, backend=...)`` adds a result into given memory (a GEMM with
``beta = 1``), for a sum whose ``sums_operands`` primitive (``add``) reads it.
``prim.def_step_sum(fn)`` sums the primitive's results over a loop's steps from stacked
operands (``scan``'s VJP sums weight cotangents after the loop). ``prim.def_inline(fn)``
writes an opaque call (``custom_vjp_call``) as a trace that ``jit``'s optimiser inlines;
``prim.def_expand(fn)`` writes a fused primitive (``layer_norm``) as the trace of its
formula, which the CUDA compiler expands where it fuses it with its neighbours.

``python -m functx.registry`` prints which rules every primitive has.
"""
from __future__ import annotations

import functools
import sys
import warnings
from typing import Any, Callable, Iterable

from functx.errors import FunctxError, MissingRuleError
from functx.registry.composite import composite_jvp, composite_rules, composite_vjp
from functx.registry.hooks import HOOKS, MissingHookError, register_hook
from functx.registry.scalar import ScalarRule

__all__ = ["Primitive", "Registry", "REGISTRY", "RULE_KINDS", "HOOKS", "MissingHookError",
           "register_hook", "composite_vjp", "composite_jvp", "composite_rules"]

RULE_KINDS = ("abstract_eval", "impl[cpu]", "impl[cuda]", "vjp", "jvp", "batch")


class Primitive:
    """One operation of the IR with all of its rules. See the module docstring."""

    __slots__ = ("name", "multiple_results", "abstract_eval", "impls", "out_impls", "out_alias",
                 "vjp",
                 "save_inputs", "save_output", "vjp_selective", "has_zero_vjp", "none_cts", "jvp",
                 "batch", "dce", "cache_abstract_eval", "has_effects", "scalar", "simplify",
                 "cpu_arrays_impl", "accumulate_impls", "sums_operands", "step_sum",
                 "inline", "expand", "_impl_cache",
                 "__weakref__")

    def __init__(self, name: str, *, multiple_results: bool = False,
                 registry: "Registry | None" = None) -> None:
        """Create a primitive and register it (in the global registry unless given one).

        Raises:
            FunctxError: a primitive of that name is already registered.
        """
        self.name = name
        self.multiple_results = multiple_results
        self.abstract_eval: Callable | None = None
        self.impls: dict[str, Callable] = {}
        # optional: implementations that write into preallocated buffers (def_impl_out)
        self.out_impls: dict[str, Callable] = {}
        self.out_alias: str | Callable | None = None
        self.vjp: Callable | None = None
        self.save_inputs: tuple[int, ...] | bool = ()
        self.save_output = False
        self.vjp_selective = False
        self.has_zero_vjp = False  # the VJP rule is the zero rule (def_zero_vjp)
        # multiple_results only: the VJP rule takes None for outputs whose cotangent is zero
        # (instead of zeros made for it)
        self.none_cts = False
        self.jvp: Callable | None = None
        self.batch: Callable | None = None
        # optional, for primitives with several outputs: drop the outputs nothing reads
        # (a higher-order primitive prunes its sub-trace); see def_dce
        self.dce: Callable | None = None
        # Shape rules are memoised on (input types, params). A higher-order primitive whose
        # params are fresh objects at every call (a sub-trace, a closure) turns this off:
        # its entries would never hit again, and would keep their traces' constants alive.
        self.cache_abstract_eval = True
        # The primitive does something besides computing its outputs (prints, calls host
        # code for its effect): dead-code elimination keeps its equations even when nothing
        # reads their outputs (``functx.debug.print``: a primitive with no outputs at all).
        # True, False, or a function of an equation's params (a higher-order primitive:
        # whether its sub-trace has effects).
        self.has_effects: bool | Callable[[dict], bool] = False
        # compiler rules (functx.registry.scalar, functx.registry.rewrite); None: none
        self.scalar: ScalarRule | None = None
        self.simplify: Callable | None = None
        self._impl_cache: dict[str, Callable] = {}
        # optional: the CPU implementation for operands that are all NumPy arrays, called
        # without xp (see def_cpu_arrays_impl)
        self.cpu_arrays_impl: Callable | None = None
        # optional: implementations that add the result into a given array (def_accumulate)
        self.accumulate_impls: dict[str, Callable] = {}
        # the output is the sum of the two operands (``add``): an operand that is another
        # primitive's result may be accumulated by it instead (def_accumulate)
        self.sums_operands = False
        # optional: the sum over a loop's steps of the primitive's per-step results, from
        # the stacked operands (def_step_sum); "linear" for a primitive linear in its one
        # operand (the sum of its results is its result of the summed operand)
        self.step_sum: Callable | str | None = None
        # optional: the primitive as a trace of other primitives (def_inline)
        self.inline: Callable | None = None
        # optional: a composite a fusing compiler may expand the primitive into (def_expand)
        self.expand: Callable | None = None
        (REGISTRY if registry is None else registry).register(self)

    def __repr__(self) -> str:
        return self.name

    # -- rule registration (each returns the rule so it can be used as a decorator) --
    def def_abstract_eval(self, fn: Callable) -> Callable:
        self.abstract_eval = fn
        return fn

    def def_impl(self, fn: Callable | str | None = None, *, backend: str = "generic") -> Any:
        """Register an implementation: a rule ``fn(xp, *arrays, **params)``, or the name of
        an array-module function taking the arrays (``"sin"`` is ``xp.sin``, called with no
        Python frame of ours in between)."""
        if fn is None:
            return functools.partial(self.def_impl, backend=backend)
        self.impls[backend] = fn
        self.out_impls.pop(backend, None)  # (computed what the replaced rule computed)
        self._impl_cache.clear()
        if backend in ("cpu", "generic"):
            self.cpu_arrays_impl = None  # (it stood for the CPU implementation replaced)
        return fn

    def def_cpu_arrays_impl(self, fn: Callable) -> Callable:
        """Register a faster CPU implementation for the calls whose operands are all NumPy
        arrays (no Python scalars): ``fn(*arrays, **params)``, without ``xp``, computing
        what the CPU implementation computes for them; NumPy's ufunc itself, where the CPU
        rule wraps it only to handle Python scalars (a Python frame less per operation).
        Registering a CPU or generic implementation afterwards drops it.

        Example:
            >>> mul_p.def_cpu_arrays_impl(np.multiply)
        """
        self.cpu_arrays_impl = fn
        return fn

    def def_impl_out(self, fn: Callable, *, backend: str = "generic",
                     alias: str | Callable | None = None) -> Callable:
        """Register an implementation that writes its result into preallocated memory
        (optional; ``jit``'s memory planner, :mod:`functx.compiler.memory`, uses it to
        reuse dead buffers and donated arguments).

        Args:
            fn: ``fn(xp, *arrays, out, **params)``: computes exactly what the plain
                implementation computes, writes it into ``out`` and returns ``out``.
                ``out`` is a C-contiguous array of the output's shape and dtype (for a
                primitive with ``multiple_results``, a list with one such array or None
                per output; a None output is allocated by ``fn``). It never returns a
                view of an input.
            backend: as for :meth:`def_impl`. A backend with its own plain implementation
                uses only its own out-implementation (the generic one computes something
                else there).
            alias: which inputs ``out`` may share memory with (the planner then hands an
                input that dies at this equation as its output buffer): ``"any"`` (every
                input of the output's shape and dtype: NumPy ufuncs, which handle
                overlapping operands), a function ``alias(params) -> set of (input index,
                output index)`` pairs, or None (never an input: only buffers that are
                already dead).

        Returns:
            ``fn``.

        Example:
            >>> sin_p.def_impl_out(lambda xp, x, *, out: xp.sin(x, out=out), alias="any")
        """
        self.out_impls[backend] = fn
        self.out_alias = alias
        return fn

    def def_accumulate(self, fn: Callable, *, backend: str) -> Callable:
        """Register an implementation that adds the result into a given array in place
        (optional; ``jit``'s CUDA lowering writes ``add(c, dot_general(a, b))`` as one
        GEMM with ``beta = 1`` into ``c``'s memory, see ``functx.compiler.lowering``).

        Args:
            fn: ``fn(xp, *arrays, acc, **params)``: ``acc += result`` (``acc`` a
                C-contiguous array of the output's shape and dtype), returns ``acc``.
            backend: the backend it is for.

        Example:
            >>> dot_general_p.def_accumulate(gemm_plus, backend="cuda")
        """
        self.accumulate_impls[backend] = fn
        return fn

    def def_step_sum(self, fn: Callable | None = None, *, linear: bool = False) -> Any:
        """Say how the sum of this primitive's results over the steps of a loop is computed
        from the stacked operands (optional; ``functx.lax.scan``'s VJP takes the cotangent of
        a weight, ``sum_t x_t^T g_t``, as one product after the loop instead of one
        accumulating product per step).

        Args:
            fn: ``fn(stacked, *operands, **params)``: the sum over the steps of the
                primitive's result, written with ``bind``; ``stacked[i]`` says whether
                operand ``i`` has a leading axis of steps (the others are the same at every
                step; at least one is stacked).
            linear: instead of ``fn``: the primitive is linear in its one operand, so the
                sum of its results is its result of the summed operand (``transpose``).

        Example:
            >>> reduce_sum_p.def_step_sum(lambda stacked, x, *, axes:
            ...     reduce_sum(x, (0,) + tuple(a + 1 for a in axes)))
        """
        if linear:
            self.step_sum = "linear"
            return None
        self.step_sum = fn
        return fn

    def accumulate_for(self, backend_name: str) -> Callable | None:
        """The accumulating implementation (see :meth:`def_accumulate`) on a backend, or
        None."""
        return self.accumulate_impls.get(backend_name)

    def impl_out_for(self, backend: Any) -> Callable | None:
        """The out-implementation (see :meth:`def_impl_out`) on a backend, with its ``xp``
        bound, or None where there is none (or the backend overrides the plain
        implementation without one)."""
        rule = self.out_impls.get(backend.name)
        if rule is None:
            if backend.name in self.impls:
                return None
            rule = self.out_impls.get("generic")
            if rule is None or "generic" not in self.impls:
                return None
        return functools.partial(rule, backend.xp)

    def def_vjp(self, fn: Callable | None = None, *, save_inputs: Iterable[int] | bool | slice = (),
                save_output: bool = False, selective: bool = False) -> Any:
        """Register the VJP rule and the residuals it needs.

        Args:
            fn: ``fn(ct, ins, out, **params)``; returns a tuple with one entry per input.
            save_inputs: indices of the inputs whose values the rule reads: a tuple, True
                (all), or a slice such as ``slice(1, None)`` (all but the first; for
                variadic primitives).
            save_output: whether the rule reads the output value(s).
            selective: the rule takes ``needs=`` (one bool per input) and may skip the
                cotangents of inputs that need none (constants, data): worth it where a
                cotangent costs real work, as in ``dot_general``.
        """
        if fn is None:
            return functools.partial(self.def_vjp, save_inputs=save_inputs,
                                     save_output=save_output, selective=selective)
        self.vjp = fn
        self.has_zero_vjp = fn is _zero_vjp
        self.save_inputs = (save_inputs if isinstance(save_inputs, (bool, slice))
                            else tuple(dict.fromkeys(save_inputs)))  # (each index once)
        self.save_output = bool(save_output)
        self.vjp_selective = selective
        return fn

    def def_zero_vjp(self) -> None:
        """Declare that the output does not depend differentiably on any input."""
        self.def_vjp(_zero_vjp)

    def def_jvp(self, fn: Callable) -> Callable:
        """Register the forward-mode rule ``fn(tangents, primals, out, **params)`` (see the
        module docstring); returns ``fn`` so it can be used as a decorator."""
        self.jvp = fn
        return fn

    def def_composite_rules(self, composite: Callable, *,
                            argnums: Iterable[int] | None = None,
                            zero_if: Callable[..., bool] | None = None) -> Callable:
        """Declare that this primitive computes ``composite(*inputs, **params)`` (the same
        values, written in functx operations), and take its VJP and JVP rules from it: the
        VJP is the composite's VJP and the JVP the composite's JVP (through the transforms'
        hooks; see :mod:`functx.registry.composite`). The VJP rule keeps every input alive.

        Args:
            composite: the computation; inputs positional, parameters as keywords; returns
                a tuple for a primitive with ``multiple_results``.
            argnums: the inputs with derivatives (default: all); the others get a None
                (zero) cotangent and their tangents are ignored.
            zero_if: ``zero_if(*inputs, **params)`` (on values or abstract values) says where
                every derivative is zero and the composite must not run (an empty axis it
                would divide by, say).

        Returns:
            ``composite``, so this can be used as a decorator.

        Example:
            >>> ln_grad_p.def_composite_rules(_ln_grad_composite,
            ...                               zero_if=lambda x, w, g, *, eps: x.shape[-1] == 0)
        """
        vjp_rule, jvp_rule = composite_rules(composite, argnums=argnums, zero_if=zero_if)
        self.def_vjp(vjp_rule, save_inputs=True)
        self.def_jvp(jvp_rule)
        return composite

    def def_batch(self, fn: Callable) -> Callable:
        """Register the batching rule ``fn(args, dims, **params) -> (out, out_dim)`` (see the
        module docstring); returns ``fn`` so it can be used as a decorator."""
        self.batch = fn
        return fn

    def def_dce(self, fn: Callable) -> Callable:
        """Register the dead-code rule ``fn(eqn, used) -> Eqn | None`` of a primitive with
        several results: ``used[i]`` says whether anything reads output ``i`` (some do,
        some do not); it returns an equation of this primitive computing only (at least)
        the used outputs, with the same output variables for them, or None to keep
        ``eqn``. Dead-code elimination (``functx.transforms.interpret.prune``, which
        ``jit`` and ``vmap`` run) asks it; ``scan`` uses it to drop unused ``ys`` from its
        body. Returns ``fn``, so it can be used as a decorator."""
        self.dce = fn
        return fn

    def def_scalar(self, expr: Callable, *, operand_axes: Callable | None = None) -> Callable:
        """Register how one output element is computed (a fusible primitive; see
        :mod:`functx.registry.scalar`): ``expr(*inputs, out, **params) -> Expr | None`` on
        per-element expressions. ``operand_axes(in_avals, out, **params)`` gives, per input,
        the output axis of each input axis (default: NumPy broadcasting); a primitive that
        only maps indices (``broadcast_in_dim``) gives it and returns its input.

        Example:
            >>> sin_p.def_scalar(lambda x, *, out: call("sin", x))
        """
        self.scalar = ScalarRule("broadcast" if operand_axes else "elementwise", expr,
                                 operand_axes=operand_axes)
        return expr

    def def_scalar_reduction(self, combine: Callable, identity: Callable, axes: Callable,
                             accumulator: Callable | None = None) -> None:
        """Register a fusible reduction (see :mod:`functx.registry.scalar`): ``combine(acc,
        x) -> Expr | None`` folds an element into the accumulator, ``identity(dtype)`` is
        its start value, ``axes(**params)`` the reduced axes of the input and
        ``accumulator(dtype)`` the accumulator's dtype (default: the input's)."""
        self.scalar = ScalarRule("reduction", combine=combine, identity=identity, axes=axes,
                                 accumulator=accumulator)

    def def_inline(self, fn: Callable) -> Callable:
        """Say how an equation of this primitive is written as a trace of other primitives
        (optional; for an opaque call whose implementation runs the user's Python, such as
        ``custom_vjp_call``): ``jit``'s optimiser inlines it, so its operations are fused,
        shared with the rest of the step and run without Python (``functx.compiler.passes``).

        Args:
            fn: ``fn(*avals, **params) -> Trace | None``: a closed trace with one input per
                operand and the equation's outputs, or None to keep the equation.

        Example:
            >>> custom_vjp_call_p.def_inline(lambda *avals, call: trace_of(call.fwd, avals))
        """
        self.inline = fn
        return fn

    def def_expand(self, fn: Callable) -> Callable:
        """Say how an equation of this primitive is written as a trace of fusible
        primitives (optional; for a fused primitive, ``layer_norm`` say): where the
        compiler can fuse that trace with the equation's neighbours into one kernel (the
        CUDA row kernels of :mod:`functx.compiler.cuda`), it expands the equation, so that a
        layer norm, the elementwise operations after it and its gradient read memory once.

        Args:
            fn: ``fn(*avals, **params) -> Trace | None``: a closed trace with one input per
                operand and the equation's outputs, or None to keep the equation.

        Example:
            >>> layer_norm_p.def_expand(lambda *avals, eps: trace_of(formula, avals, eps))
        """
        self.expand = fn
        return fn

    def def_simplify(self, rule: Callable) -> Callable:
        """Register algebraic identities of this primitive for the trace optimisation
        passes: ``rule(args, out, **params) -> None | Operand | Rewrite`` (see
        :mod:`functx.registry.rewrite`). Rules accumulate: a later one (an identity across
        families, ``functx/primitives/_rewrites.py``) is tried first, then the earlier."""
        earlier = self.simplify
        self.simplify = rule if earlier is None else (
            lambda args, out, **params: rule(args, out, **params)
            or earlier(args, out, **params))
        return rule

    def saved_input_indices(self, n_inputs: int) -> tuple[int, ...] | range:
        """The indices of the inputs whose values the VJP rule reads."""
        s = self.save_inputs
        if type(s) is tuple:
            return s
        if s is True:
            return range(n_inputs)
        return range(*s.indices(n_inputs)) if type(s) is slice else ()

    def impl_for(self, backend: Any) -> Callable:
        """The implementation to run on a backend (its own rule, else the generic one), as a
        callable of the arrays and parameters (the rule with the backend's ``xp`` bound).

        Raises:
            MissingRuleError: the primitive has no implementation for that backend.
        """
        fn = self._impl_cache.get(backend.name)
        if fn is None:
            rule = self.impls.get(backend.name) or self.impls.get("generic")
            if rule is None:
                raise MissingRuleError(
                    f"Primitive {self.name} has no implementation for the {backend.name} "
                    f"backend. Register one with {self.name}_p.def_impl(fn, "
                    f"backend={backend.name!r}) or a generic one with def_impl(fn).")
            fn = (getattr(backend.xp, rule) if isinstance(rule, str)
                  else functools.partial(rule, backend.xp))
            adapt = getattr(backend, "adapt_impl", None)
            if adapt is not None:  # (CUDA: its bfloat16 guard)
                fn = adapt(fn, self)
            self._impl_cache[backend.name] = fn
        return fn

    def bind(self, *args: Any, **params: Any) -> Any:
        """Apply the primitive: run it eagerly, or record it in the active trace."""
        # tracing is this layer too, and imports this module (a same-layer cycle).
        from functx.tracing import bind

        return bind(self, *args, **params)


def _zero_vjp(ct: Any, ins: tuple, out: Any, **params: Any) -> tuple:
    return (None,) * len(ins)


class Registry:
    """Every primitive by name, and the table of which rules each one has."""

    def __init__(self) -> None:
        self.primitives: dict[str, Primitive] = {}
        # name -> (file, line, module) of the code that created the registered primitive
        self._origins: dict[str, tuple[str, int, str | None]] = {}

    def register(self, prim: Primitive) -> None:
        """Add ``prim`` under its name.

        A name may be registered again from the same place, so that re-running a
        definition (a notebook cell, ``importlib.reload``) works: the same file and line of
        the ``Primitive(...)`` call, or the same defining module (a notebook's cells all run
        in ``__main__``). The new primitive then replaces the old one, with a warning.

        Raises:
            FunctxError: the name is registered by a primitive defined elsewhere.
        """
        frame, level = sys._getframe(1), 2  # level: the frame's stacklevel for warnings
        while frame.f_back is not None and frame.f_locals.get("self") is prim:
            frame, level = frame.f_back, level + 1  # past Primitive.__init__: its caller
        origin = (frame.f_code.co_filename, frame.f_lineno, frame.f_globals.get("__name__"))
        old = self._origins.get(prim.name)
        if prim.name in self.primitives:
            where = (f"{old[0]}:{old[1]} (module {old[2]})" if old is not None
                     else "an unknown place")
            same = old is not None and (old[:2] == origin[:2]
                                        or (old[2] is not None and old[2] == origin[2]))
            if not same:
                raise FunctxError(
                    f"A primitive called {prim.name!r} is already registered, defined at "
                    f"{where}; the one defined at {origin[0]}:{origin[1]} (module "
                    f"{origin[2]}) cannot take its name. Choose another name for the new "
                    "primitive (re-running the same definition replaces the old one).")
            warnings.warn(f"Primitive {prim.name!r} is defined again (first at {where}); the "
                          "new definition replaces the old one in the registry. Code that "
                          "holds the old primitive object keeps using it.", stacklevel=level)
        self.primitives[prim.name] = prim
        self._origins[prim.name] = origin

    def __getitem__(self, name: str) -> Primitive:
        return self.primitives[name]

    def __iter__(self):
        return iter(self.primitives.values())

    def __len__(self) -> int:
        return len(self.primitives)

    def coverage(self) -> dict[str, dict[str, str]]:
        """For each primitive, each rule kind -> "yes", "generic", "zero" or "" (missing)."""
        table = {}
        for p in self.primitives.values():
            table[p.name] = {
                "abstract_eval": "yes" if p.abstract_eval else "",
                "impl[cpu]": "yes" if "cpu" in p.impls else ("generic" if "generic" in p.impls else ""),
                "impl[cuda]": "yes" if "cuda" in p.impls else ("generic" if "generic" in p.impls else ""),
                "vjp": ("zero" if p.has_zero_vjp else "yes") if p.vjp else "",
                "jvp": "yes" if p.jvp else ("zero" if p.has_zero_vjp else ""),
                "batch": "yes" if p.batch else "",
            }
        return table

    def missing(self, kinds: Iterable[str] = ("abstract_eval", "impl[cpu]", "vjp")) -> list[str]:
        """``"prim: rule"`` for every required rule that some primitive lacks."""
        return [f"{name}: {k}" for name, row in self.coverage().items() for k in kinds
                if not row[k]]

    def coverage_table(self) -> str:
        """The coverage table as aligned text, one primitive a row. A missing JVP rule shows
        as ``(vjp^T)`` (forward mode transposes the VJP rule) and a missing batching rule as
        ``(loop)`` (vmap loops over the batch)."""
        rows = self.coverage()
        width = max([len(n) for n in rows] + [9])
        head = f"{'primitive':<{width}}  " + "  ".join(f"{k:<13}" for k in RULE_KINDS)
        lines = [head, "-" * len(head)]
        for name in sorted(rows):
            cells = "  ".join(f"{(rows[name][k] or _FALLBACK.get(k, '-')):<13}"
                              for k in RULE_KINDS)
            lines.append(f"{name:<{width}}  {cells}")
        return "\n".join(lines)


# What a transform does where a primitive lacks an optional rule (shown in the table).
_FALLBACK = {"jvp": "(vjp^T)", "batch": "(loop)"}

REGISTRY = Registry()

