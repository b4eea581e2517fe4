"""Checkpoint policies: which values a :func:`functx.checkpoint` keeps for the backward pass.

A policy is a plain function ``policy(prim, *avals, **params) -> bool`` called once per
equation of the checkpointed trace, with the equation's primitive (``prim.name`` is its
name), the abstract values of its inputs (``.shape``, ``.dtype``) and its parameters. True
means the equation's outputs are *saveable*: the forward pass keeps those the backward pass
needs instead of recomputing them. Anything else is recomputed from the checkpoint's inputs.
Write your own the same way::

    def save_matmuls_and_tanh(prim, *avals, **params):
        return prim.name in ("dot_general", "tanh")

    fx.checkpoint(block, policy=save_matmuls_and_tanh)

Values are labelled for the name-based policies with :func:`functx.checkpoint_name`.
The policies here print by name in traces.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = [
    "everything_saveable", "nothing_saveable", "dots_saveable", "checkpoint_dots",
    "dots_with_no_batch_dims_saveable", "checkpoint_dots_with_no_batch_dims",
    "save_only_these_names", "save_any_names_but_these", "save_from_both_policies",
]

Policy = Callable[..., bool]


class _Named:
    """A policy function with a readable repr (shown in traces and saved-residual listings)."""

    def __init__(self, fn: Callable[..., bool], label: str) -> None:
        self.fn = fn
        self.label = label

    def __call__(self, prim: Any, *avals: Any, **params: Any) -> bool:
        return bool(self.fn(prim, *avals, **params))

    def __repr__(self) -> str:
        return self.label


everything_saveable: Policy = _Named(lambda prim, *avals, **params: True, "everything_saveable")
everything_saveable.__doc__ = "Save every value the backward pass needs (no recomputation)."

nothing_saveable: Policy = _Named(lambda prim, *avals, **params: False, "nothing_saveable")
nothing_saveable.__doc__ = "Save nothing: recompute everything from the inputs (the default)."


def _is_dot(prim: Any, *avals: Any, **params: Any) -> bool:
    return prim.name == "dot_general"


def _is_dot_without_batch_dims(prim: Any, *avals: Any, **params: Any) -> bool:
    if prim.name != "dot_general":
        return False
    (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
    return not lhs_batch and not rhs_batch


dots_saveable: Policy = _Named(_is_dot, "dots_saveable")
dots_saveable.__doc__ = "Save the outputs of matrix products (dot_general); recompute the rest."
checkpoint_dots = dots_saveable

dots_with_no_batch_dims_saveable: Policy = _Named(_is_dot_without_batch_dims,
                                                  "dots_with_no_batch_dims_saveable")
dots_with_no_batch_dims_saveable.__doc__ = (
    "Save the outputs of matrix products without batch dimensions (plain matmuls, not "
    "batched ones such as attention scores); recompute the rest.")
checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def _check_names(fname: str, names: tuple) -> None:
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{fname} takes the names as strings, but got a "
                            f"{type(n).__name__} ({n!r:.40}).")


def save_only_these_names(*names: str) -> Policy:
    """A policy saving only the values labelled with one of ``names`` by checkpoint_name.

    Args:
        *names: labels given to :func:`functx.checkpoint_name`.

    Returns:
        The policy.

    Raises:
        TypeError: a name is not a string.

    Example:
        >>> policy = fx.checkpoint_policies.save_only_these_names("attn_out")
    """
    _check_names("save_only_these_names", names)
    wanted = frozenset(names)

    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return prim.name == "name" and params.get("name") in wanted

    return _Named(policy, f"save_only_these_names({', '.join(map(repr, names))})")


def save_any_names_but_these(*names: str) -> Policy:
    """A policy saving every value labelled by checkpoint_name except those in ``names``.

    Args:
        *names: labels not to save.

    Returns:
        The policy.

    Raises:
        TypeError: a name is not a string.

    Example:
        >>> policy = fx.checkpoint_policies.save_any_names_but_these("big_activation")
    """
    _check_names("save_any_names_but_these", names)
    unwanted = frozenset(names)

    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return prim.name == "name" and params.get("name") not in unwanted

    return _Named(policy, f"save_any_names_but_these({', '.join(map(repr, names))})")


def save_from_both_policies(policy_1: Policy, policy_2: Policy) -> Policy:
    """A policy saving what either of two policies saves.

    Args:
        policy_1, policy_2: policies (functions of ``(prim, *avals, **params)``).

    Returns:
        The policy.

    Raises:
        TypeError: an argument is not callable.

    Example:
        >>> p = fx.checkpoint_policies.save_from_both_policies(
        ...     fx.checkpoint_policies.dots_saveable,
        ...     fx.checkpoint_policies.save_only_these_names("attn_out"))
    """
    for p in (policy_1, policy_2):
        if not callable(p):
            raise TypeError(f"save_from_both_policies takes two policies (functions of "
                            f"(prim, *avals, **params)), but got a {type(p).__name__}.")

    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        return bool(policy_1(prim, *avals, **params)) or bool(policy_2(prim, *avals, **params))

    return _Named(policy, f"save_from_both_policies({policy_1!r}, {policy_2!r})")
