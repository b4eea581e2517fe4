"""``jit``: trace once per argument signature, then replay the trace.

``jit(f)`` traces ``f`` abstractly the first time it sees a signature (the pytree structure
of the arguments, each leaf's shape, dtype and device, and the values of the static
arguments), removes the equations whose results nothing uses, and caches the trace. Later
calls with the same signature skip Python entirely except for one ``bind`` per primitive
(no tracing, no ``functx.numpy`` argument handling, no promotion): that is where eager
functx spends its time on small arrays. Calls with tracers (``grad(jit(f))``,
``vmap(jit(f))``, ``jit`` inside ``jit``) replay the same trace through ``bind``, so ``jit``
composes with every transform.

The compiler (``functx.compiler``; ``FUNCTX_JIT_COMPILER`` or
``functx.compiler.set_jit_compiler``, default ``"numba"``): each new signature's trace goes
through the optimisation passes (common subexpressions, constant folding, algebraic
simplification, dead code), and on the CPU its clusters of elementwise, broadcasting and
reduction operations run as fused, multi-threaded Numba kernels (compiled on the first call
of the signature, cached on disk). ``jitted.lower(*args).as_text()`` shows the optimised
trace, its clusters and the kernel sources. With ``"none"``, the trace is replayed as traced.
On CUDA the same clusters become generated CUDA C kernels
(:mod:`functx.compiler.cuda`, compiled with NVRTC through CuPy on the first call, cached on
disk by CuPy); matrix products and the other primitives run their own implementations, and
a signature's step replays as one CUDA graph where that pays
(:mod:`functx.compiler.cuda_graph`). Memory (``functx.compiler.memory``): steps that can
write into given memory reuse dead buffers of their output's type, and
``donate_argnums``/``donate_argnames`` let a call overwrite its donated arguments (a
training step updates its parameters in place).

As in JAX, the traced function must be pure: Python side effects run once per signature,
arrays it closes over are captured as constants when it is traced (later changes to a
global are not seen, and neither are later writes into a captured NumPy array: a
writeable one is copied once, when it is captured), and Python control flow on argument
values needs ``static_argnums`` or ``functx.numpy.where``.

Each jitted function keeps at most :data:`CACHE_SIZE` signatures (64 by default), evicting
the least recently used one: a function called with ever new shapes keeps bounded memory
(JAX bounds its compilation cache too). Set ``functx.transforms.jit.CACHE_SIZE`` before the
calls to change it for every jitted function.
"""
from __future__ import annotations

import functools
import warnings
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from functx import compiler as _compiler
from functx import config, tracing, tree
from functx.compiler.cuda_graph import CudaGraph, cuda_graphs_enabled
from functx.compiler.lowering import Lowered, fuse, numba_available
from functx.compiler.memory import (donated_leaves, donation_spec, finalize_outputs,
                                    plan_buffers, prepare_donated)
from functx.compiler.passes import optimize
from functx.backends import CPU as _CPU, backend_of, device_of, get_backend, get_default_device
from functx.errors import ArgumentTypeError, FunctxError
from functx.ir import Literal, Trace, abstractify, typecheck
from functx.tracing import FlatArgs, Tracer, bind, flatten_args, trace_function
from functx.transforms._args import argnums_by_name, check_callable, index_tuple, name_tuple
from functx.transforms.interpret import (eval_trace, prune_with_last_uses, snapshot_constants,
                                        walk)

__all__ = ["jit", "CACHE_SIZE", "Executor", "executor", "run_steps"]

# The most signatures (traces) one jitted function keeps; the least recently used one is
# evicted beyond it. Read at every new signature, so changing it affects existing jitted
# functions from their next trace on.
CACHE_SIZE = 64


class _Compiled:
    """One cached signature: the pruned trace, its liveness plan, the output tree and, per
    backend, the lean executor's step list (built on first use)."""

    __slots__ = ("trace", "dying", "out_tree", "plans", "closes_over_tracers", "compiler",
                 "_lowered", "graphs", "graph", "targets", "donated", "name")

    def __init__(self, trace: Trace, out_tree: Any, compiler: str = "none",
                 targets: tuple = ("cpu", "cuda")) -> None:
        # the constants are kept for later calls: snapshots of the caller's writeable arrays
        trace = snapshot_constants(trace)
        if compiler != "none" and "cpu" in targets:  # (else optimised when lowered)
            trace = optimize(trace)
            if tracing.CHECK_TRACES:  # tests: the passes keep every type
                typecheck(trace)
        self.trace, self.dying = prune_with_last_uses(trace)
        self.compiler = compiler
        self.targets = targets  # the backends whose clusters are compiled into kernels
        # CUDA graphs for a jitted signature (not for loop bodies: their steps are part of
        # the enclosing signature's graph)
        self.graphs = compiler != "none" and out_tree is not None and cuda_graphs_enabled()
        self.graph: CudaGraph | None = None
        self._lowered: dict[str, Lowered] = {}
        self.out_tree = out_tree
        self.plans: dict[str, Any] = {}
        self.donated: tuple | None = None  # per input: donated by the caller (memory plan)
        self.name = "jit"
        # f closed over a tracer of an enclosing transform: the trace is good for this
        # call only, and must run through bind
        self.closes_over_tracers = any(type(c) is Tracer for c in trace.const_values)

    def run(self, inputs: list, backend: Any) -> list:
        """Run on concrete ``inputs`` that all live on ``backend``:
        each step calls the primitive's implementation directly (no ``bind``: no tracer
        check, no backend resolution, no per-op lookups). Falls back to ``eval_trace`` where
        a constant lives elsewhere (``bind`` then explains the mix).

        This replay loop is jit's own, not the interpreters' ``walk``: it is the hot path of
        a jitted call, so values live in a list of slots and each step holds its slot
        numbers. The steps are planned by ``walk`` (see :func:`_plan`)."""
        plan = self.plan_for(backend)
        if plan is False:
            return eval_trace(self.trace, *inputs, dying=self.dying)
        if self.graphs and backend.name == "cuda":
            graph = self.graph
            if graph is None:
                graph = self.graph = CudaGraph(lambda ins: self.replay(plan, ins, backend),
                                               len(plan[1]), donated=any(self.donated or ()))
            if not graph.failed:
                return graph(inputs)
        return self.replay(plan, inputs, backend)

    def plan_for(self, backend: Any) -> tuple | bool:
        """The executor's plan on ``backend`` (see :func:`_plan`; made once, with its
        buffers planned), or False where a constant lives on another backend."""
        plan = self.plans.get(backend.name)
        if plan is None:
            trace, dying = self.trace, self.dying
            if self.compiler == "numba" and backend.name in self.targets:
                trace, dying = self.fused_trace(backend.name)
            plan = self.plans[backend.name] = plan_buffers(  # memory: functx.compiler.memory
                _plan(trace, dying, backend), trace.in_avals, backend, self.donated, self.name)
        return plan

    def replay(self, plan: tuple, inputs: list, backend: Any) -> list:
        """Run ``plan`` (see :func:`_plan`) on ``inputs``, one step per equation."""
        env, steps, out_slots = plan
        if self.donated:
            inputs = prepare_donated(inputs, self.donated, self.trace.const_values)
        env = list(env)
        env[:len(inputs)] = inputs
        on_cpu = backend is _CPU
        run_steps(steps, env, 0, len(steps), on_cpu)
        outs = [env[k] for k in out_slots]
        return finalize_outputs(outs, inputs, self.donated) if on_cpu else outs


    def lower(self, target: str = "cpu") -> Lowered:
        """The optimised trace with its clusters and kernel sources for ``target``
        (``"cpu"`` or ``"cuda"``; nothing compiled)."""
        lowered = self._lowered.get(target)
        if lowered is None:
            if self.compiler == "numba" and not self.closes_over_tracers:
                trace = self.trace if "cpu" in self.targets else optimize(self.trace)
                fused, kernels = fuse(trace, target)
            else:
                fused, kernels = self.trace, []
            if tracing.CHECK_TRACES:
                typecheck(fused)
            lowered = self._lowered[target] = Lowered(self.trace, fused, kernels,
                                                      self.compiler, target)
        return lowered

    def fused_trace(self, target: str) -> tuple[Trace, list]:
        """``(trace, dying)`` the executor runs on ``target``: the fused trace with its
        kernels compiled, or the optimised trace where the compiler (Numba on the CPU) is
        missing or a kernel fails to compile (with a warning naming it)."""
        if target == "cpu" and not numba_available():
            return self.trace, self.dying
        lowered = self.lower(target)
        for k in lowered.kernels:
            try:
                k.compile()
            except Exception as err:  # a generator bug must not break the user's program
                warnings.warn(f"functx.jit: the fused kernel {k.name} failed to compile "
                              f"for {target} ({type(err).__name__}: {str(err)[:300]}); this "
                              "signature runs unfused. Please report it with the output of "
                              "jit(f).lower(*args).as_text().", stacklevel=4)
                return self.trace, self.dying
        return prune_with_last_uses(lowered.fused)


def run_steps(steps: Sequence[tuple], env: list, start: int, stop: int, on_cpu: bool) -> None:
    """Run ``steps[start:stop]`` of a plan (see :func:`_plan`) on the slots ``env``."""
    check = tracing.CHECK_EAGER
    for impl, ins, params, outs, free, eqn in steps[start:stop]:
        args = [env[i] for i in ins]
        try:
            out = impl(*args, **params)
        except Exception:  # let bind raise its explained error (names the user's line)
            bind(eqn.prim, *args, **params)
            raise
        if type(outs) is int:
            env[outs] = np.asarray(out) if on_cpu and type(out) is not np.ndarray else out
        else:
            for k, o in zip(outs, out):
                env[k] = np.asarray(o) if on_cpu and type(o) is not np.ndarray else o
        if check:
            _check_step(eqn, [env[outs]] if type(outs) is int else [env[k] for k in outs])
        for k in free:
            env[k] = None


class Executor:
    """A trace with no constants of enclosing transforms, run by jit's lean replay loop.

    Higher-order primitives (``functx.lax``'s loops) run their bodies with it: the plan of
    the body (slots, steps, liveness) is made once per backend and replayed at every
    iteration, without ``bind`` or the interpreters' per-equation dictionaries.
    """

    __slots__ = ("_compiled",)

    def __init__(self, trace: Trace, donated: tuple | None = None) -> None:
        # On CUDA a body's clusters run as generated kernels (a loop of small steps is
        # launch-bound); on the CPU bodies replay as traced (a Numba compile per body would
        # cost eager loops seconds).
        self._compiled = _Compiled(trace, None, _compiler.jit_compiler(), targets=("cuda",))
        # inputs whose memory the caller gives to each run (a loop's carries: its steps
        # may update them in place), see functx.compiler.memory
        self._compiled.donated = donated
        self._compiled.name = None  # (no warning where a donated input goes unused)

    def __call__(self, inputs: list, backend: Any) -> list:
        """The outputs of the trace on concrete ``inputs`` (one per input variable) that
        all live on ``backend``."""
        return self._compiled.run(inputs, backend)

    def plan(self, backend: Any) -> tuple | bool:
        """``(env template, steps, output slots)`` on ``backend``, for callers that run the
        steps themselves (``pmap`` runs its members' plans in lockstep with
        :func:`run_steps`); False where a constant lives on another backend."""
        return self._compiled.plan_for(backend)


def executor(trace: Trace, donated: tuple | None = None) -> Executor:
    """The lean executor of ``trace`` (see :class:`Executor`), made once per trace object
    (and donation: one bool per input, see :mod:`functx.compiler.memory`): a loop body's
    plan is built once, not at every iteration. The most recently used
    :data:`EXECUTORS_KEPT` are cached (an executor holds its trace, so the cache is
    bounded rather than weak).

    Example:
        >>> run = executor(body_trace)
        >>> outs = run([c, x], CPU)
    """
    key = (id(trace), donated)
    hit = _EXECUTORS.get(key)
    if hit is not None and hit[0] is trace:
        _EXECUTORS.move_to_end(key)
        return hit[1]
    ex = Executor(trace, donated)
    _EXECUTORS[key] = (trace, ex)  # (the trace is held, so its id is not reused)
    while len(_EXECUTORS) > EXECUTORS_KEPT:
        _EXECUTORS.popitem(last=False)
    return ex


EXECUTORS_KEPT = 256
_EXECUTORS: "OrderedDict[tuple, tuple[Trace, Executor]]" = OrderedDict()


def _check_step(eqn: Any, results: list) -> None:
    """Tests (``CHECK_EAGER``): a step's results have the types its equation was traced with."""
    for v, r in zip(eqn.outputs, results):
        if tuple(r.shape) != tuple(v.aval.shape) or r.dtype != v.aval.dtype:
            raise FunctxError(f"Internal check failed: jit's step {eqn.prim.name} returned "
                              f"{abstractify(r)} but was traced as {v.aval}.")


def _plan(trace: Trace, dying: list, backend: Any) -> tuple | bool:
    """``(env template, steps, output slots)`` for the lean executor on ``backend``, or
    False when a constant lives on another backend.

    The plan is made by the interpreters' ``walk`` whose values are slot numbers: the rule
    of an equation gives its outputs new slots and appends its step; each step's slots to
    clear are its equation's dying variables.
    """
    template: list = []
    slot: dict = {}  # variable -> its slot (the walk's environment forgets dead ones)

    def new_slot(value: Any = None) -> int:
        template.append(value)
        return len(template) - 1

    for v in trace.in_vars:
        slot[v] = new_slot()
    for v, c in zip(trace.const_vars, trace.const_values):
        b = backend_of(c)
        if b is not None and b is not backend:
            return False
        slot[v] = new_slot(c)

    def literal(a: Literal) -> int:
        value = a.value  # a 0-d host array joins the device, as bind's resolve_mixed does
        if backend is not _CPU and backend_of(value) is _CPU:
            value = backend.scalar_from_host(value)
        return new_slot(value)

    planned: list = []

    def rule(eqn: Any, ins: list) -> Any:
        outs = [new_slot() for _ in eqn.outputs]
        slot.update(zip(eqn.outputs, outs))
        multiple = eqn.prim.multiple_results
        planned.append((eqn.prim.impl_for(backend), tuple(ins), eqn.params,
                        tuple(outs) if multiple else outs[0], eqn))
        return outs if multiple else outs[0]

    out_slots = walk(trace, dict(slot), rule, dying, literal=literal)
    steps = [(impl, ins, params, outs, tuple(slot[v] for v in gone), eqn)
             for (impl, ins, params, outs, eqn), gone in zip(planned, dying)]
    return template, steps, tuple(out_slots)


def _static_spec(f: Callable, fname: str, static_argnums: Any, static_argnames: Any
                 ) -> tuple[tuple[int, ...], frozenset, frozenset]:
    """``(static positions, static names, positions that may come by keyword)`` of ``jit``.

    As in JAX, when only one of ``static_argnums``/``static_argnames`` is given, the other
    is inferred from ``f``'s signature (an argument marked static by position is static by
    name too, and the reverse), and both are checked against the signature where Python
    can tell it.

    Raises:
        ArgumentTypeError: a position is not an int, a name is not a string, a position is
            beyond the parameters of a function without ``*args``, or a name is not a
            parameter of a function without ``**kwargs``.
    """
    nums = tuple(dict.fromkeys(index_tuple(static_argnums, "static_argnums", fname)))
    names = name_tuple(static_argnames, "static_argnames", fname)
    named = argnums_by_name(f, fname, nums, names, "static", (static_argnums, static_argnames))
    if named is None:
        return nums, frozenset(names), frozenset()
    both = bool(nums) and bool(names)
    if nums and not both:  # infer the names of the static positions
        names = names + tuple(named[i] for i in nums if i in named)
    elif names and not both:  # infer the positions of the static names
        nums = nums + tuple(i for i, n in named.items() if n in names)
    by_keyword = frozenset(i for i in nums if named.get(i) in names)
    return nums, frozenset(names), by_keyword


def jit(f: Callable, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), donate_argnums: int | Sequence[int] = (),
        donate_argnames: str | Sequence[str] = ()) -> Callable:
    """Cache the trace of ``f`` per argument signature and replay it on later calls.

    Args:
        f: a pure function of arrays (pytrees of arrays, Python scalars) returning arrays.
        static_argnums: positions of arguments passed to ``f`` as they are (not traced):
            Python values that steer control flow, shapes, flags. They must be hashable;
            each distinct value is a new signature (a new trace).
        static_argnames: the same for keyword arguments, by name. As in JAX, when only
            one of the two is given the other is inferred from ``f``'s signature, so a
            static argument may be passed by position or by name.
        donate_argnums: positions of arguments whose buffers the call may reuse (as in
            ``jax.jit``): every array leaf of a donated argument may be overwritten by the
            call, and a result may be that very memory, so a training step
            ``params = step(params, x)`` updates the parameters in place of their buffers.
            The caller must not read a donated array after the call (nor use anything that
            holds it: a ``vjp`` function, a jitted function that closed over it). Where
            no step can use a donated buffer (no result of its shape and dtype), ``jit``
            warns once per signature. A donated array also passed as another argument is
            copied first. Donation is ignored under an enclosing transform.
        donate_argnames: the same by keyword name (the other inferred, as for static
            arguments). An argument cannot be both static and donated.

    Returns:
        A function with ``f``'s signature and results. ``.cache_size()`` tells how many
        signatures are cached (at most :data:`CACHE_SIZE`, least recently used evicted
        first), ``.clear_cache()`` empties the cache, and ``.lower(*args)`` returns the
        optimised trace and generated kernels for those arguments (``.as_text()``).

    Aliasing: results never share memory with a writeable argument (an argument returned
    as it is, or a view of one, is copied), and the arrays ``f`` closes over are captured
    as snapshots when it is traced: writing into one afterwards does not change later
    results (only writeable NumPy arrays are copied, once per trace; functx's own results
    are read-only and kept as they are). CuPy arrays cannot be marked read-only and are
    not copied: do not write to an array a jitted function closed over.

    Raises:
        ArgumentTypeError: ``f`` is not callable, ``static_argnums`` is not ints,
            ``static_argnames`` not strings, or either names an argument ``f`` does not
            take (when ``jit`` is called, where the signature tells); at a call, a static
            position beyond the positional arguments passed. The same for
            ``donate_argnums``/``donate_argnames`` (a negative position too), and an
            argument both static and donated.
        FunctxError: a static argument is not hashable, or an argument is not an array.
        ConcretizationError: ``f`` needs the value of a traced argument (Python control
            flow on it): make that argument static, or use ``functx.numpy.where``.

    Example:
        >>> step = fx.jit(fx.grad(loss))
        >>> g = step(params, x, y)       # traced and cached
        >>> g = step(params, x2, y2)     # same shapes and dtypes: replayed, no tracing
        >>> update = fx.jit(sgd_step, donate_argnums=0)
        >>> params = update(params, x, y)  # new parameters in the old ones' memory
    """
    fname = f"jit({getattr(f, '__name__', 'f')})"
    check_callable(f, "jit")
    nums, names, by_keyword = _static_spec(f, fname, static_argnums, static_argnames)
    donate = donation_spec(f, fname, donate_argnums, donate_argnames, nums, names)
    cache: OrderedDict[Any, _Compiled] = OrderedDict()

    def static_positions(n: int) -> set[int]:
        pos = set()
        for i in nums:
            if -n <= i < n:
                pos.add(i % n)
            elif i not in by_keyword:  # (a static parameter may come by keyword instead)
                raise ArgumentTypeError(
                    f"{fname}: static_argnums={static_argnums} but the function was called "
                    f"with {n} positional argument(s), so argument {i} is missing. Pass "
                    "static arguments positionally, or fix static_argnums.")
        return pos

    def lookup(args: tuple, kwargs: dict) -> tuple:
        n = len(args)
        static_pos = static_positions(n) if nums else set()
        flat = flatten_args(args, kwargs, fname, static_pos, names)
        leaves = flat.leaves
        static = (tuple((i, args[i]) for i in sorted(static_pos)),
                  tuple(sorted(flat.static_kwargs.items())))
        avals = tuple(abstractify(x) for x in leaves)
        devices = tuple(None if type(x) is Tracer else device_of(x) for x in leaves)
        key = (flat.in_tree, avals, devices, static, get_default_device(),
               config.trace_context())  # (options read while tracing: matmul precision)
        try:
            compiled = cache.get(key)
        except TypeError:
            raise FunctxError(f"{fname}: a static argument is not hashable ({static!r:.120}). "
                              "Static arguments are cache keys: pass tuples instead of "
                              "lists, or make the argument an array (not static).") from None
        if compiled is None:
            compiled = _compile(f, fname, flat)
            compiled.name = fname
            if donate[0] or donate[1]:  # (memory: functx.compiler.memory)
                compiled.donated = donated_leaves(flat, kwargs, *donate)
            if not compiled.closes_over_tracers:
                cache[key] = compiled
                while len(cache) > max(int(CACHE_SIZE), 0):
                    cache.popitem(last=False)  # the least recently used signature
        else:
            cache.move_to_end(key)
        return compiled, leaves, avals, devices

    @functools.wraps(f)
    def jitted(*args: Any, **kwargs: Any) -> Any:
        compiled, leaves, avals, devices = lookup(args, kwargs)
        backends_in = {d.platform for d in devices if d is not None}
        if len(backends_in) <= 1 and not compiled.closes_over_tracers and \
                not any(type(x) is Tracer for x in leaves):
            backend = get_backend(backends_in.pop()) if backends_in else _CPU
            outs = compiled.run(_scalars_as_arrays(leaves, avals, backend.xp), backend)
        else:  # tracers of an outer transform (or mixed devices): replay through bind
            outs = eval_trace(compiled.trace, *_scalars_as_arrays(leaves, avals, np),
                              dying=compiled.dying)
        return tree.unflatten(compiled.out_tree, outs)

    def lower(*args: Any, **kwargs: Any) -> Lowered:
        """The optimised trace, clusters and generated kernel sources for these arguments
        (``.as_text()``; ``.compile()`` compiles the kernels now). Traces like a call."""
        compiled, _, _, devices = lookup(args, kwargs)
        platforms = {d.platform for d in devices if d is not None}
        return compiled.lower("cuda" if "cuda" in platforms else "cpu")

    jitted.lower = lower  # type: ignore[attr-defined]
    jitted.cache_size = lambda: len(cache)  # type: ignore[attr-defined]
    jitted.clear_cache = cache.clear  # type: ignore[attr-defined]
    return jitted


def _scalars_as_arrays(leaves: list, avals: tuple, xp: Any) -> list:
    """Python scalar arguments as 0-d arrays of their traced dtype, in ``xp``."""
    return [xp.asarray(x, dtype=a.dtype) if isinstance(x, (bool, int, float, complex)) else x
            for x, a in zip(leaves, avals)]


def _compile(f: Callable, fname: str, flat: FlatArgs) -> _Compiled:
    trace, out_tree, _ = trace_function(f, flat.args, {}, fname, flat=flat, device_scope=True)
    return _Compiled(trace, out_tree, _compiler.jit_compiler())
