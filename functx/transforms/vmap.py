"""Automatic batching: ``vmap``.

``vmap(f)`` traces ``f`` abstractly with the shapes of one example, then interprets the
trace on the whole batch: each equation whose inputs carry a batch axis is handed to its
primitive's batching rule (``Primitive.def_batch``), which returns the batched result and
where its batch axis is; equations with no batched input run as they are. Values may be
tracers of enclosing transforms, so ``vmap`` composes with ``grad``, ``jvp`` and itself.

``vmap(f, axis_name="batch")`` names the mapped axis: inside ``f`` the collectives of
``functx.lax`` (``psum``, ``all_gather``, ``axis_index``...) refer to it by that name. The
names in scope live in ``functx.named_axes`` (a thread-local stack of frames that ``vmap``
enters for as long as it runs); a collective's batching rule looks its axis up there, so
this module knows no collective by name. Primitives marked as collectives have their
batching rule called even where no input is batched.

A primitive without a batching rule is run in a Python loop over the batch and the results
are stacked (correct, slow); a warning names it once. ``python -m functx.registry`` shows
which primitives have rules.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Hashable, Sequence

from functx import named_axes, tracing, tree
from functx.backends import inputs_device_scope, owned_read_only
from functx.errors import FunctxError, VmapError
from functx.ir import AbstractArray, Literal, Trace, Var, abstractify
from functx.primitives import shape as _shape
from functx.primitives._batching import batch_size, to_axis, to_front
from functx.registry import Primitive
from functx.tracing import attach_source, bind, flatten_args, trace_function, user_source
from functx.transforms._args import check_callable
from functx.transforms.interpret import prune_with_last_uses, walk

AxisSpec = Any  # an int, None, or a pytree of them (a prefix of the arguments)


def _is_none(x: Any) -> bool:
    return x is None


def vmap(f: Callable, in_axes: AxisSpec = 0, out_axes: AxisSpec = 0,
         axis_size: int | None = None, axis_name: Hashable | None = None) -> Callable:
    """Vectorise ``f`` over a batch axis of its arguments.

    Args:
        f: a function of arrays (pytrees of arrays); it sees one example at a time.
        in_axes: where each positional argument's batch axis is: an int (every leaf), None
            (not batched: the same value for every example), or a tuple with one entry per
            positional argument, each itself an int, None or a pytree prefix of the
            argument (JAX's prefix semantics). Negative axes count from the end. Keyword
            arguments are always batched along axis 0.
        out_axes: where the batch axis goes in each output (an int, None, or a pytree
            prefix of the output). None is allowed only for outputs that do not depend on a
            batched input.
        axis_size: the batch size, needed only when no argument is batched.
        axis_name: a name for the mapped axis (any hashable but a tuple), so that
            collectives inside ``f`` (``functx.lax.psum(x, "batch")``, ``all_gather``,
            ``axis_index``...) can refer to it, as in ``jax.vmap``.

    Returns:
        The batched function. Outputs that do not depend on any batched input are broadcast
        along the batch axis (as in JAX).

    Raises:
        ArgumentTypeError: ``f`` is not callable (raised by ``vmap`` itself).
        VmapError: ``in_axes`` does not match the arguments, an axis is out of range,
            batched arguments have different sizes, or no argument is batched and there is
            no ``axis_size``.
        ConcretizationError: ``f`` needs the value of a batched argument (Python control
            flow on values): use ``functx.numpy.where`` instead.
        AxisNameError: ``axis_name`` is a tuple, or ``f`` uses a collective over an axis
            that no enclosing map names.

    Example:
        >>> fx.vmap(lambda x, y: x @ y, in_axes=(0, None))(np.ones((5, 3)), np.ones(3)).shape
        (5,)
        >>> fx.vmap(lambda x: x / fx.lax.psum(x, "i"), axis_name="i")(np.array([1., 3.]))
        array([0.25, 0.75])
    """
    check_callable(f, "vmap")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    fname = f"vmap({getattr(f, '__name__', 'f')})"

    @functools.wraps(f)
    def batched(*args: Any, **kwargs: Any) -> Any:
        try:
            return _vmap_call(f, fname, in_axes, out_axes, axis_size, axis_name, args,
                              kwargs)
        except VmapError as e:
            raise attach_source(e, user_source(1)) from None

    return batched


def _arg_name(i: int | str) -> str:
    return f"argument {i}" if isinstance(i, int) else f"keyword argument {i!r}"


def _vmap_call(f: Callable, fname: str, in_axes: AxisSpec, out_axes: AxisSpec,
               axis_size: int | None, axis_name: Hashable | None, args: tuple,
               kwargs: dict) -> Any:
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(args):
            raise VmapError(f"{fname}: in_axes has {len(in_axes)} entries but the function "
                            f"was called with {len(args)} positional arguments; give one "
                            "entry per positional argument (or a single int/None for all).")
        per_arg = in_axes
    elif in_axes is None or isinstance(in_axes, int):
        per_arg = (in_axes,) * len(args)
    else:
        raise VmapError(f"{fname}: in_axes must be an int, None, or a tuple with one entry "
                        f"per positional argument, but got {type(in_axes).__name__} "
                        f"{in_axes!r:.80}.")
    dims: list = []
    owners: list = []  # the argument each leaf belongs to, for error messages
    for i, (a, spec) in enumerate(zip(args, per_arg)):
        try:
            axes = tree.broadcast_prefix(spec, a, is_leaf=_is_none)
        except ValueError as e:
            raise VmapError(f"{fname}: the in_axes entry {spec!r:.80} for {_arg_name(i)} is "
                            f"not a pytree prefix of the argument ({e}). Give an int or None "
                            "for the whole argument, or a pytree of them shaped like it."
                            ) from None
        dims.extend(axes)
        owners.extend([i] * len(tree.leaves(a)))
    if kwargs:  # batched along axis 0; their leaves come in the pytree's order
        kw_owners = tree.leaves({k: tree.map(lambda _, k=k: k, v) for k, v in kwargs.items()})
        dims.extend([0] * len(kw_owners))
        owners.extend(kw_owners)
    flat = flatten_args(args, kwargs, fname)
    leaves = flat.leaves
    avals, dims, size = _example_avals(fname, leaves, dims, owners, axis_size)

    # The named axis is in scope while f is traced (collectives look up its size) and while
    # the trace is interpreted (their batching rules ask which axis this map is).
    with named_axes.axis_frame(axis_name, size) as frame:
        def f_in_frame(*a: Any, **k: Any) -> Any:
            # collectives of operands not traced at this level are recorded by this builder
            frame.builder = tracing.innermost_abstract_builder()
            return f(*a, **k)

        trace, out_tree, _ = trace_function(f_in_frame, args, kwargs, fname, flat=flat,
                                            in_avals=avals, device_scope=True)
        trace, dying = prune_with_last_uses(trace)
        # (constants a batching rule makes, such as axis_index's, go to the inputs' device)
        with inputs_device_scope(leaves):
            outs, out_dims = batch_trace(trace, leaves, dims, size, dying=dying)
    out_struct = tree.unflatten(out_tree, list(range(len(outs))))
    try:
        o_axes = tree.broadcast_prefix(out_axes, out_struct, is_leaf=_is_none)
    except ValueError as e:
        raise VmapError(f"{fname}: out_axes {out_axes!r:.80} is not a pytree prefix of the "
                        f"function's output ({e}).") from None
    final = []
    for k, (x, d, dst) in enumerate(zip(outs, out_dims, o_axes)):
        if dst is None:
            if d is not None:
                raise VmapError(f"{fname}: out_axes is None for output leaf {k}, but that "
                                "output depends on a batched input. Use an int out_axes for "
                                "it, or make it independent of the batched arguments.")
            final.append(x)
            continue
        nd = len(abstractify(x).shape) + (d is None)
        if not -nd <= dst < nd:
            raise VmapError(f"{fname}: out_axes {dst} is out of range for output leaf {k} "
                            f"with {nd} dimensions (batch included).")
        final.append(to_axis(x, d, dst % nd, size))
    # An argument or closed-over array passed through is not returned itself: a writeable
    # one is copied (functx's own results are read-only and returned as they are).
    return tree.unflatten(out_tree, [owned_read_only(x) for x in final])


def _example_avals(fname: str, leaves: list, dims: list, owners: list,
                   axis_size: int | None) -> tuple[list, list, int]:
    """One example's abstract value per leaf, the normalised batch axes, the batch size."""
    avals, norm = [], []
    sizes: dict[int, list] = {}
    for x, d, who in zip(leaves, dims, owners):
        aval = abstractify(x)
        if d is None:
            avals.append(aval)
            norm.append(None)
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise VmapError(f"{fname}: in_axes for {_arg_name(who)} contains {d!r}; axes must "
                            "be ints or None.")
        nd = len(aval.shape)
        if not -nd <= d < nd:
            raise VmapError(f"{fname}: in_axes={d} for {_arg_name(who)}, but that argument "
                            f"has a leaf {aval} with {nd} dimension(s). Use an axis in "
                            f"[{-nd}, {nd}) or None for unbatched.")
        d %= nd
        sizes.setdefault(aval.shape[d], []).append((who, aval, d))
        avals.append(AbstractArray(aval.shape[:d] + aval.shape[d + 1:], aval.dtype,
                                   aval.weak_type))
        norm.append(d)
    if len(sizes) > 1:
        lines = "; ".join(f"{_arg_name(w)} {a} has size {a.shape[d]} along axis {d}"
                          for group in sizes.values() for w, a, d in group[:2])
        raise VmapError(f"{fname}: the batched arguments have different sizes along their "
                        f"batch axes: {lines}. Every batched argument needs the same batch "
                        "size.")
    if sizes:
        size = next(iter(sizes))
        if axis_size is not None and axis_size != size:
            raise VmapError(f"{fname}: axis_size={axis_size} but the batched arguments have "
                            f"batch size {size}.")
    elif axis_size is None:
        raise VmapError(f"{fname}: no argument is batched (every in_axes is None), so the "
                        "batch size is unknown; pass axis_size=N.")
    else:
        size = int(axis_size)
    return avals, norm, size


def batch_trace(trace: Trace, args: Sequence[Any], dims: Sequence[int | None],
                size: int, dying: Sequence[tuple[Var, ...]] | None = None
                ) -> tuple[list, list]:
    """Interpret ``trace`` on batched ``args``.

    Args:
        trace: a trace of one example.
        args: one value per input variable, with its batch axis at ``dims[i]`` (None:
            the same value for every example).
        dims: the batch axis of each argument, or None.
        size: the batch size.
        dying: ``last_uses(trace)``, if the caller has it.

    Returns:
        ``(outputs, out_dims)``: the output values and the batch axis of each (None for an
        output that does not depend on a batched input).

    The caller enters the map's ``named_axes.axis_frame`` around it (``vmap`` does), so
    that collectives' batching rules know which axis this is.
    """
    env: dict[Var, tuple] = {v: (x, d) for v, x, d in zip(trace.in_vars, args, dims)}
    for v, c in zip(trace.const_vars, trace.const_values):
        env[v] = (c, None)

    def rule(eqn: Any, ins: list) -> Any:
        xs, ds = zip(*ins) if ins else ((), ())
        prim = eqn.prim
        # No batched input: run as it is (a collective, or a body calling one, still goes
        # to its rule: it depends on the mapped axis even then).
        if ds.count(None) == len(ds):
            if not named_axes.uses_named_axes(prim, eqn.params):
                out = bind(prim, *xs, **eqn.params)
                if prim.multiple_results:
                    return [(o, None) for o in out]
                return out, None
            if xs and not named_axes.is_collective(prim):
                # a body calling a collective: its rule batches the body over this axis,
                # which needs one batched operand to know the size
                xs = (to_front(xs[0], None, size),) + tuple(xs[1:])
                ds = (0,) + tuple(ds[1:])
        batch = prim.batch or _loop_rule(prim)
        try:
            out, od = batch(xs, ds, **eqn.params)
        except FunctxError as e:
            raise attach_source(e, eqn.source) from None
        if tracing.CHECK_TRACES:
            _check_batched(eqn, out, od, size)
        if prim.multiple_results:
            return list(zip(out, od))
        return out, od

    pairs = walk(trace, env, rule, dying, literal=_unbatched_literal)
    return [x for x, _ in pairs], [d for _, d in pairs]


def running_axis_name() -> Hashable | None:
    """The axis name of the innermost running map (None if anonymous or outside any).

    A higher-order primitive's batching rule that maps its sub-trace with ``vmap`` again
    (checkpoint's, custom_vjp's) passes it as ``axis_name``, so that collectives inside the
    sub-trace are carried out over the same axis.
    """
    frame = named_axes.innermost()
    return None if frame is None else frame.name


def _unbatched_literal(a: Literal) -> tuple:
    return a.value, None


def _check_batched(eqn: Any, out: Any, od: Any, size: int) -> None:
    """Check a batching rule's result against the example's abstract output (tests)."""
    outs = out if eqn.prim.multiple_results else [out]
    ods = od if eqn.prim.multiple_results else [od]
    for v, o, d in zip(eqn.outputs, outs, ods):
        got = abstractify(o)
        shape = tuple(got.shape)
        if d is not None:
            if not (0 <= d < len(shape)) or shape[d] != size:
                raise FunctxError(f"Internal check failed: {eqn.prim.name}'s batching rule "
                                  f"returned {got} with out_dim {d} for a batch of {size}.")
            shape = shape[:d] + shape[d + 1:]
        if shape != tuple(v.aval.shape) or got.dtype != v.aval.dtype:
            raise FunctxError(f"Internal check failed: {eqn.prim.name}'s batching rule "
                              f"returned {got} (batch axis {d}) for examples of type "
                              f"{v.aval}.")


_WARNED: set[str] = set()


def _loop_rule(prim: Primitive) -> Callable:
    """The fallback batching rule: a Python loop over the batch, results stacked on axis 0."""
    if prim.name not in _WARNED:
        _WARNED.add(prim.name)
        warnings.warn(f"vmap: primitive {prim.name} has no batching rule, so functx runs it "
                      "once per example in a Python loop and stacks the results (correct "
                      f"but slow). Register a rule with {prim.name}_p.def_batch(rule); see "
                      "functx.registry's docstring.", stacklevel=4)

    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple:
        n = batch_size(args, dims)
        results = []
        for b in range(n):
            example = [x if d is None else _take(x, d, b) for x, d in zip(args, dims)]
            results.append(bind(prim, *example, **params))
        if n == 0:
            raise FunctxError(f"vmap: primitive {prim.name} has no batching rule and the "
                              "batch is empty, so its output shape cannot be found by "
                              f"looping. Register a rule with {prim.name}_p.def_batch(rule).")

        def stack(xs: list) -> Any:
            return _shape.concatenate([_shape.expand_dims(x, (0,)) for x in xs], 0)

        if prim.multiple_results:
            outs = [stack([r[k] for r in results]) for k in range(len(results[0]))]
            return outs, [0] * len(outs)
        return stack(results), 0

    return rule


def _take(x: Any, d: int, b: int) -> Any:
    shape = tuple(abstractify(x).shape)
    start = [0] * len(shape)
    limit = list(shape)
    start[d], limit[d] = b, b + 1
    return _shape.squeeze(_shape.slice(x, tuple(start), tuple(limit), (1,) * len(shape)), (d,))


__all__ = ["vmap", "batch_trace", "running_axis_name", "VmapError"]
