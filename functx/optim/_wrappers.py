"""Wrappers around transformations: masked, multi_transform, MultiSteps, apply_if_finite.

Names, signatures, defaults and semantics follow optax (``optax/transforms/_masking.py``,
``_combining.py``, ``_accumulation.py``, ``_conditionality.py``).

Where optax branches with ``jax.lax.cond`` (``apply_if_finite``, ``MultiSteps``'s
``should_skip_update_fn``), functx computes both branches and selects leafwise with
``functx.numpy.where``: the results are the same, and the step stays one straight-line
computation under ``functx.jit`` and ``functx.vmap`` (an ensemble may skip for some members
and not others).
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Mapping, NamedTuple, Optional, Union

import numpy as np

import functx.numpy as fnp
from functx import tree
from functx.errors import ArgumentError
from functx.optim._base import (GradientTransformation, cast_tree, cast_tree_like,
                                first_leaf, safe_increment, zero_count, zeros_like_tree)

__all__ = [
    "masked", "MaskedState", "MaskedNode", "multi_transform", "MultiTransformState",
    "partition", "PartitionState", "MultiSteps", "MultiStepsState", "skip_not_finite",
    "skip_large_updates", "apply_if_finite", "ApplyIfFiniteState",
]


def _map_prefix(f: Callable, prefix: Any, *trees: Any) -> Any:
    """``f(prefix_leaf, *subtrees)`` for each leaf of ``prefix``, whose structure is a
    prefix of every tree in ``trees`` (``jax.tree.map``'s semantics for a first tree)."""
    leaves, treedef = tree.flatten(prefix)
    columns = [tree.flatten_up_to(treedef, t) for t in trees]
    return tree.unflatten(treedef, [f(leaf, *xs) for leaf, *xs in zip(leaves, *columns)])


def _select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Leafwise ``where(pred, on_true, on_false)`` in ``on_false``'s dtypes."""
    return tree.map(lambda t, f: fnp.astype(fnp.where(pred, t, f), f.dtype), on_true, on_false)


# ----------------------------------------------------------------------------------------
# masked and multi_transform


class MaskedState(NamedTuple):
    """State of :func:`masked`: the inner transformation's state (over masked params)."""
    inner_state: Any


class MaskedNode(NamedTuple):
    """Stands in for a masked-out subtree in what the inner transformation of
    :func:`masked` sees (a pytree node with no leaves)."""


def masked(inner: GradientTransformation,
           mask: Union[Any, Callable[[Any], Any]]) -> GradientTransformation:
    """Applies ``inner`` only where ``mask`` is True; other updates pass through unchanged.

    The inner transformation never sees the masked-out leaves (they are replaced by an
    empty :class:`MaskedNode`), so its state holds nothing for them.

    Args:
        inner: the transformation to apply to the selected leaves.
        mask: a pytree of booleans with the structure of the params (or a prefix of it:
            a leaf then covers a whole subtree), or a function of the params (of the
            updates, in ``update``) returning one.

    Returns:
        A :class:`GradientTransformation` whose state is :class:`MaskedState`.

    Example:
        >>> decay = masked(add_decayed_weights(1e-4), {"w": True, "b": False})
    """

    def mask_tree_of(values):
        return mask(values) if callable(mask) else mask

    def mask_pytree(values, mask_tree):
        return _map_prefix(lambda m, p: p if m else MaskedNode(), mask_tree, values)

    def init_fn(params):
        return MaskedState(inner_state=inner.init(mask_pytree(params, mask_tree_of(params))))

    def update_fn(updates, state, params=None):
        mask_tree = mask_tree_of(updates)
        masked_params = None if params is None else mask_pytree(params, mask_tree)
        new_masked, inner_state = inner.update(mask_pytree(updates, mask_tree),
                                               state.inner_state, masked_params)
        new_updates = _map_prefix(lambda m, new, old: new if m else old,
                                  mask_tree, new_masked, updates)
        return new_updates, MaskedState(inner_state=inner_state)

    return GradientTransformation(init_fn, update_fn)


class MultiTransformState(NamedTuple):
    """State of :func:`multi_transform`: a dict from label to that group's state."""
    inner_states: Any


PartitionState = MultiTransformState


def multi_transform(transforms: Mapping[Hashable, GradientTransformation],
                    param_labels: Union[Any, Callable[[Any], Any]]) -> GradientTransformation:
    """Applies a different transformation to each group of parameters.

    Args:
        transforms: a mapping from label to transformation.
        param_labels: a pytree of labels with the structure of the params (or a prefix
            of it), or a function of the params returning one.

    Returns:
        A :class:`GradientTransformation` whose state is :class:`MultiTransformState`.

    Raises:
        ArgumentError: a label has no transformation (raised by ``init``).

    Example:
        >>> opt = multi_transform({"adam": adam(1e-3), "sgd": sgd(1e-2)},
        ...                       {"w": "adam", "b": "sgd"})
    """

    def labels_of(values):
        return param_labels(values) if callable(param_labels) else param_labels

    def group_tx(labels, group):
        return masked(transforms[group], tree.map(lambda label: label == group, labels))

    def init_fn(params):
        labels = labels_of(params)
        missing = set(tree.leaves(labels)) - set(transforms)
        if missing:
            raise ArgumentError(
                f"functx.optim.multi_transform: the labels {sorted(map(repr, missing))} have "
                f"no transformation (transforms has keys {sorted(map(repr, transforms))}); "
                "add one per label.")
        return MultiTransformState(
            {group: group_tx(labels, group).init(params) for group in transforms})

    def update_fn(updates, state, params=None):
        labels = labels_of(updates)
        new_inner = {}
        for group in transforms:
            updates, new_inner[group] = group_tx(labels, group).update(
                updates, state.inner_states[group], params)
        return updates, MultiTransformState(new_inner)

    return GradientTransformation(init_fn, update_fn)


partition = multi_transform


# ----------------------------------------------------------------------------------------
# gradient accumulation


class MultiStepsState(NamedTuple):
    """State of :class:`MultiSteps`.

    Attributes:
        mini_step: the micro-step within the current accumulation (0-d int32).
        gradient_step: how many inner-optimizer steps were taken (0-d int32).
        inner_opt_state: the inner optimizer's state.
        acc_grads: the accumulated gradients.
        skip_state: what ``should_skip_update_fn`` returned last.
    """
    mini_step: Any
    gradient_step: Any
    inner_opt_state: Any
    acc_grads: Any
    skip_state: Any = ()


def skip_not_finite(updates: Any, gradient_step: Any, params: Any) -> tuple[Any, Any]:
    """A ``should_skip_update_fn`` for :class:`MultiSteps`: skip when any update is not
    finite.

    Args:
        updates: the gradients of this micro-step.
        gradient_step: the inner optimizer's step count (unused).
        params: the params (unused).

    Returns:
        ``(should_skip, {"should_skip": ..., "num_not_finite": ...})``.

    Example:
        >>> opt = MultiSteps(adam(1e-3), 4, should_skip_update_fn=skip_not_finite)
    """
    del gradient_step, params
    num = 0
    for p in tree.leaves(updates):
        num = fnp.add(num, fnp.sum(fnp.logical_not(fnp.isfinite(p))))
    num = fnp.asarray(num) if not tree.leaves(updates) else num
    should_skip = fnp.greater(num, 0)
    return should_skip, {"should_skip": should_skip, "num_not_finite": num}


def skip_large_updates(updates: Any, gradient_step: Any, params: Any,
                       max_squared_norm: float) -> tuple[Any, Any]:
    """A ``should_skip_update_fn`` for :class:`MultiSteps` (bind ``max_squared_norm`` with
    ``functools.partial``): skip when the squared global norm is not below it.

    Args:
        updates: the gradients of this micro-step.
        gradient_step: the inner optimizer's step count (unused).
        params: the params (unused).
        max_squared_norm: the threshold on ``sum of squares``.

    Returns:
        ``(should_skip, {"should_skip": ..., "norm_squared": ...})``.

    Example:
        >>> skip = functools.partial(skip_large_updates, max_squared_norm=100.0)
        >>> opt = MultiSteps(adam(1e-3), 4, should_skip_update_fn=skip)
    """
    del gradient_step, params
    norm_sq = 0
    for p in tree.leaves(updates):
        norm_sq = fnp.add(norm_sq, fnp.sum(fnp.square(p)))
    should_skip = fnp.logical_not(fnp.less(norm_sq, max_squared_norm))
    return should_skip, {"should_skip": should_skip, "norm_squared": norm_sq}


class MultiSteps:
    """Gradient accumulation: calls the inner optimizer once every ``k`` micro-steps, on
    the mean (or sum) of the gradients of those ``k`` steps; the other micro-steps return
    zero updates.

    Use ``init``/``update`` like a :class:`GradientTransformation` (or
    :meth:`gradient_transformation`).

    Args:
        opt: the inner optimizer.
        every_k_schedule: ``k``, an int or a function of the inner step count.
        use_grad_mean: accumulate the mean (True) or the sum (False) of the gradients.
        should_skip_update_fn: optional ``fn(updates, gradient_step, params) ->
            (should_skip, skip_state)``; a skipped micro-step changes nothing but
            ``skip_state`` (see :func:`skip_not_finite`).
        accumulator_dtype: dtype of the stored accumulated gradients (float32, as in
            optax; pass ``numpy.float64`` to accumulate float64 gradients exactly).

    Example:
        >>> opt = MultiSteps(adam(1e-3), every_k_schedule=4)
        >>> state = opt.init(params)
        >>> updates, state = opt.update(grads, state, params)  # zeros 3 times out of 4
    """

    def __init__(self, opt: GradientTransformation,
                 every_k_schedule: Union[int, Callable[[Any], Any]],
                 use_grad_mean: bool = True,
                 should_skip_update_fn: Optional[Callable] = None,
                 accumulator_dtype: Any = np.float32) -> None:
        self._opt = opt
        if isinstance(every_k_schedule, int):
            self._every_k_schedule = lambda step: every_k_schedule
        else:
            self._every_k_schedule = every_k_schedule
        self._use_grad_mean = use_grad_mean
        self._accumulator_dtype = np.dtype(accumulator_dtype)
        self._should_skip_update_fn = should_skip_update_fn

    @property
    def inner_opt(self) -> GradientTransformation:
        """The wrapped optimizer."""
        return self._opt

    def _acc_update(self, grad: Any, acc: Any, n_acc: Any) -> Any:
        if self._use_grad_mean:
            return fnp.add(acc, fnp.divide(fnp.subtract(grad, acc), fnp.add(n_acc, 1)))
        return fnp.add(grad, acc)

    def init(self, params: Any) -> MultiStepsState:
        """The initial state for ``params``.

        Args:
            params: a pytree of arrays.

        Returns:
            A :class:`MultiStepsState`.
        """
        gradient_step = zero_count(params)
        skip_state = ()
        if self._should_skip_update_fn is not None:
            _, skip_state = self._should_skip_update_fn(zeros_like_tree(params),
                                                        gradient_step, params)
        return MultiStepsState(
            mini_step=zero_count(params), gradient_step=gradient_step,
            inner_opt_state=self._opt.init(params),
            acc_grads=zeros_like_tree(params, self._accumulator_dtype),
            skip_state=skip_state)

    def update(self, updates: Any, state: MultiStepsState,
               params: Optional[Any] = None) -> tuple[Any, MultiStepsState]:
        """One micro-step.

        Args:
            updates: the gradients of this micro-step.
            state: the current :class:`MultiStepsState`.
            params: the params (passed to the inner optimizer).

        Returns:
            ``(updates, new_state)``: the inner optimizer's updates on the last micro-step
            of each group of ``k``, zeros otherwise.

        Raises:
            ArgumentError: ``should_skip_update_fn`` did not return a boolean scalar.
        """
        k_steps = self._every_k_schedule(state.gradient_step)
        if self._should_skip_update_fn is not None:
            should_skip, skip_state = self._should_skip_update_fn(
                updates, state.gradient_step, params)
            if tuple(should_skip.shape) != () or should_skip.dtype != np.bool_:
                raise ArgumentError(
                    "functx.optim.MultiSteps: should_skip_update_fn must return a boolean "
                    f"scalar, but it returned an array of dtype {should_skip.dtype} and "
                    f"shape {tuple(should_skip.shape)}.")
            # a skipped micro-step's accumulation is discarded: run it on zeros (no NaNs)
            updates = tree.map(lambda g: fnp.where(should_skip, fnp.zeros_like(g), g),
                               updates)
        acc_grads = tree.map(lambda g, acc: self._acc_update(g, acc, state.mini_step),
                             updates, state.acc_grads)
        final_updates, new_inner = self._opt.update(cast_tree_like(acc_grads, updates),
                                                    state.inner_opt_state, params)
        emit = fnp.equal(state.mini_step, fnp.subtract(k_steps, 1))
        keep = fnp.logical_not(emit)
        mini_step = fnp.astype(fnp.remainder(safe_increment(state.mini_step), k_steps),
                               state.mini_step.dtype)
        gradient_step = fnp.where(emit, safe_increment(state.gradient_step),
                                  state.gradient_step)
        new_state = MultiStepsState(
            mini_step=mini_step, gradient_step=gradient_step,
            inner_opt_state=_select(emit, new_inner, state.inner_opt_state),
            acc_grads=cast_tree(tree.map(lambda ga: fnp.multiply(keep, ga), acc_grads),
                                self._accumulator_dtype),
            skip_state=state.skip_state)
        final_updates = tree.map(lambda u: fnp.multiply(emit, u), final_updates)
        if self._should_skip_update_fn is None:
            return final_updates, new_state

        kept = state._replace(skip_state=skip_state)
        new_state = new_state._replace(skip_state=skip_state)
        return (_select(should_skip, zeros_like_tree(final_updates), final_updates),
                _select(should_skip, kept, new_state))

    def has_updated(self, state: MultiStepsState) -> Any:
        """Whether the last :meth:`update` called the inner optimizer (a 0-d bool)."""
        return fnp.logical_and(fnp.equal(state.mini_step, 0),
                               fnp.greater(state.gradient_step, 0))

    def gradient_transformation(self) -> GradientTransformation:
        """This accumulator as a :class:`GradientTransformation` (``init``, ``update``)."""
        return GradientTransformation(init=self.init, update=self.update)


# ----------------------------------------------------------------------------------------
# apply_if_finite


class ApplyIfFiniteState(NamedTuple):
    """State of :func:`apply_if_finite`.

    Attributes:
        notfinite_count: consecutive non-finite steps so far (0-d int32).
        last_finite: whether the last step's updates were all finite (0-d bool).
        total_notfinite: all non-finite steps so far (0-d int32).
        inner_state: the inner transformation's state.
    """
    notfinite_count: Any
    last_finite: Any
    total_notfinite: Any
    inner_state: Any


def apply_if_finite(inner: GradientTransformation,
                    max_consecutive_errors: int) -> GradientTransformation:
    """Skips steps whose updates contain NaN or infinity: the updates become zeros and the
    inner state is kept, unless more than ``max_consecutive_errors`` such steps happened in
    a row (then the step is applied anyway, as in optax).

    Args:
        inner: the transformation to protect.
        max_consecutive_errors: how many non-finite steps in a row are skipped.

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ApplyIfFiniteState`.

    Example:
        >>> opt = apply_if_finite(adam(1e-3), max_consecutive_errors=5)
    """

    def init_fn(params):
        return ApplyIfFiniteState(
            notfinite_count=zero_count(params),
            last_finite=fnp.ones((), bool, like=first_leaf(params)),
            total_notfinite=zero_count(params), inner_state=inner.init(params))

    def update_fn(updates, state, params=None):
        isfinite = fnp.ones((), bool, like=first_leaf(updates))
        for p in tree.leaves(updates):
            isfinite = fnp.logical_and(isfinite, fnp.all(fnp.isfinite(p)))
        notfinite_count = fnp.where(isfinite, fnp.zeros_like(state.notfinite_count),
                                    safe_increment(state.notfinite_count))
        apply = fnp.logical_or(isfinite, fnp.greater(notfinite_count, max_consecutive_errors))
        # a skipped step's inner update is discarded: run it on zeros (no NaN warnings)
        fed = tree.map(lambda g: fnp.where(apply, g, fnp.zeros_like(g)), updates)
        new_updates, new_inner = inner.update(fed, state.inner_state, params)
        new_updates = tree.map(lambda u, g: fnp.where(apply, u, fnp.zeros_like(g)),
                               new_updates, updates)
        return new_updates, ApplyIfFiniteState(
            notfinite_count=notfinite_count, last_finite=isfinite,
            total_notfinite=fnp.where(isfinite, state.total_notfinite,
                                      safe_increment(state.total_notfinite)),
            inner_state=_select(apply, new_inner, state.inner_state))

    return GradientTransformation(init_fn, update_fn)
