"""The optimizer protocol (optax's): GradientTransformation, chain, apply_updates.

A gradient transformation is a pair of pure functions::

    init(params) -> state
    update(updates, state, params=None) -> (new_updates, new_state)

States are pytrees (NamedTuples of arrays), so whole steps run under ``functx.jit``,
``functx.vmap`` and on any device. This module also holds the small tree and counter
helpers the other modules of ``functx.optim`` build on (optax's ``optax.tree`` helpers and
``numerics.safe_increment``); arithmetic on arrays goes through ``functx.numpy`` so values
stay on their device and stay traceable.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np

import functx.numpy as fnp
from functx import tree
from functx.errors import ArgumentError

__all__ = [
    "GradientTransformation", "EmptyState", "Schedule", "ScalarOrSchedule", "Params",
    "Updates", "OptState", "chain", "apply_updates", "identity", "set_to_zero",
    "global_norm",
]

Params = Any  # a pytree of arrays
Updates = Any  # a pytree of arrays with the structure of the params
OptState = Any  # a pytree (usually NamedTuples) of arrays
Schedule = Callable[[Any], Any]  # step count (int32 array) -> value
ScalarOrSchedule = Union[float, Any, Schedule]

NO_PARAMS_MSG = ("needs the current parameters: call update(updates, state, params) with "
                 "params (it was called with params=None).")


class GradientTransformation(NamedTuple):
    """An optimizer or a piece of one: a pair of pure functions (optax's protocol).

    Attributes:
        init: ``init(params) -> state``; the state is a pytree of arrays.
        update: ``update(updates, state, params=None) -> (updates, state)``; ``updates``
            has the structure of ``params`` (gradients go in, the step to add comes out).

    Example:
        >>> opt = functx.optim.sgd(0.1)
        >>> state = opt.init(params)
        >>> updates, state = opt.update(grads, state, params)
        >>> params = functx.optim.apply_updates(params, updates)
    """

    init: Callable[[Params], OptState]
    update: Callable[..., tuple[Updates, OptState]]


class EmptyState(NamedTuple):
    """The state of a stateless transformation (a pytree with no leaves)."""


def init_empty_state(params: Params) -> EmptyState:
    """The ``init`` of stateless transformations: returns :class:`EmptyState`."""
    del params
    return EmptyState()


def identity() -> GradientTransformation:
    """A transformation that returns the updates unchanged.

    Returns:
        A :class:`GradientTransformation` with an empty state.

    Example:
        >>> updates, _ = identity().update(grads, identity().init(params))  # == grads
    """

    def update_fn(updates, state, params=None):
        del params
        return updates, state

    return GradientTransformation(init_empty_state, update_fn)


def set_to_zero() -> GradientTransformation:
    """A transformation that replaces every update by zeros (freezes parameters, e.g. as a
    branch of :func:`multi_transform`).

    Returns:
        A :class:`GradientTransformation` with an empty state.

    Example:
        >>> opt = multi_transform({"train": adam(1e-3), "freeze": set_to_zero()}, labels)
    """

    def update_fn(updates, state, params=None):
        del params
        return tree.map(fnp.zeros_like, updates), state

    return GradientTransformation(init_empty_state, update_fn)


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Applies transformations one after the other (the output updates of one are the
    input of the next); the state is the tuple of their states.

    Args:
        *transforms: the transformations, in the order they apply.

    Returns:
        A :class:`GradientTransformation` whose state is a tuple with one entry per
        transformation.

    Raises:
        ArgumentError: ``update`` gets a state with a different number of entries.

    Example:
        >>> opt = chain(clip_by_global_norm(1.0), scale_by_adam(), scale(-1e-3))
    """
    init_fns = tuple(t.init for t in transforms)
    update_fns = tuple(t.update for t in transforms)

    def init_fn(params):
        return tuple(fn(params) for fn in init_fns)

    def update_fn(updates, state, params=None):
        if len(update_fns) != len(state):
            raise ArgumentError(
                f"functx.optim.chain: the state has {len(state)} entries but the chain has "
                f"{len(update_fns)} transformations; pass the state returned by this "
                "chain's init (or its last update).")
        new_state = []
        for s, fn in zip(state, update_fns):
            updates, s = fn(updates, s, params)
            new_state.append(s)
        return updates, tuple(new_state)

    return GradientTransformation(init_fn, update_fn)


def apply_updates(params: Params, updates: Updates) -> Params:
    """``params + updates`` leafwise, each result in its parameter's dtype.

    Args:
        params: a pytree of arrays.
        updates: a pytree with the same structure (the output of an ``update``).

    Returns:
        The new parameters (same structure and dtypes as ``params``).

    Example:
        >>> apply_updates({"w": np.ones(2)}, {"w": np.full(2, -0.5)})
        {'w': array([0.5, 0.5])}
    """
    return tree.map(lambda p, u: fnp.astype(fnp.add(p, u), fnp.asarray(p).dtype),
                    params, updates)


def global_norm(updates: Updates) -> Any:
    """The L2 norm of all the leaves of a pytree taken together (optax's ``global_norm``).

    Args:
        updates: a pytree of arrays.

    Returns:
        A 0-d array: ``sqrt(sum over leaves of sum(|leaf|**2))``.

    Example:
        >>> global_norm({"a": np.array([3.0]), "b": np.array([4.0])})
        array(5.)
    """
    total = 0
    for leaf in tree.leaves(updates):
        total = fnp.add(total, fnp.sum(abs_sq(leaf)))
    return fnp.sqrt(total)


# ----------------------------------------------------------------------------------------
# helpers shared by the modules of functx.optim (optax.tree / optax numerics equivalents)


def abs_sq(x: Any) -> Any:
    """``|x|**2`` elementwise (``x * x`` for real arrays)."""
    if fnp.issubdtype(x.dtype, fnp.complexfloating):
        return fnp.real(fnp.multiply(fnp.conj(x), x))
    return fnp.multiply(x, x)


def first_leaf(params: Params) -> Any:
    """The first leaf of ``params`` (to place new arrays on its device), or None."""
    leaves = tree.leaves(params)
    return leaves[0] if leaves else None


def zero_count(params: Params) -> Any:
    """A step counter: a 0-d int32 zero on the device of ``params``."""
    return fnp.zeros((), fnp.int32, like=first_leaf(params))


def safe_increment(count: Any) -> Any:
    """``count + 1``, saturating at the largest value of the counter's dtype."""
    dt = np.dtype(count.dtype)
    top = np.iinfo(dt).max if dt.kind in "iu" else np.finfo(dt).max
    return fnp.where(fnp.less(count, top), fnp.add(count, 1), fnp.astype(top, dt))


def zeros_like_tree(params: Params, dtype: Any = None) -> Any:
    """Zeros with the structure, shapes and devices of ``params`` (dtype: theirs, or
    ``dtype``)."""
    return tree.map(lambda p: fnp.zeros_like(p, dtype=dtype), params)


def full_like_tree(params: Params, value: Any, dtype: Any = None) -> Any:
    """``value`` broadcast to each leaf of ``params`` (dtype: the leaf's, or ``dtype``)."""
    return tree.map(lambda p: fnp.full_like(p, value, dtype=dtype), params)


def cast_tree(t: Any, dtype: Any) -> Any:
    """Every leaf of ``t`` converted to ``dtype`` (``t`` itself when dtype is None)."""
    if dtype is None:
        return t
    return tree.map(lambda x: fnp.astype(x, dtype), t)


def cast_tree_like(t: Any, other: Any) -> Any:
    """Every leaf of ``t`` converted to the dtype of the matching leaf of ``other``."""
    return tree.map(lambda x, o: fnp.astype(x, o.dtype), t, other)


def update_moment(updates: Updates, moments: Any, decay: Any, order: int) -> Any:
    """``(1 - decay) * g**order + decay * m`` leafwise (an exponential moving average)."""
    def f(g, m):
        gk = g if order == 1 else (fnp.square(g) if order == 2 else fnp.power(g, order))
        return fnp.add(fnp.multiply(1 - decay, gk), fnp.multiply(decay, m))
    return tree.map(f, updates, moments)


def update_moment_per_elem_norm(updates: Updates, moments: Any, decay: Any,
                                order: int) -> Any:
    """As :func:`update_moment` with ``|g|**order`` (differs only for complex arrays)."""
    def f(g, m):
        if fnp.issubdtype(g.dtype, fnp.complexfloating):
            half = order / 2
            gk = fnp.power(abs_sq(g), int(half) if float(half).is_integer() else half)
        else:
            gk = g if order == 1 else (fnp.square(g) if order == 2 else fnp.power(g, order))
        return fnp.add(fnp.multiply(1 - decay, gk), fnp.multiply(decay, m))
    return tree.map(f, updates, moments)


def bias_correction(moment: Any, decay: Any, count: Any) -> Any:
    """``m / (1 - decay**count)`` leafwise (the correction in the leaf's dtype)."""
    correction = fnp.subtract(1, fnp.power(decay, count))
    return tree.map(lambda t: fnp.divide(t, fnp.astype(correction, t.dtype)), moment)


def as_schedule_value(value: Any, like: Any) -> Any:
    """A learning rate or schedule value as a 0-d array of ``like``'s dtype."""
    return fnp.asarray(value, dtype=like.dtype)


def check_params(name: str, params: Optional[Params]) -> None:
    """Raises ArgumentError when a transformation that needs ``params`` got None."""
    if params is None:
        raise ArgumentError(f"functx.optim.{name} {NO_PARAMS_MSG}")
