"""The ``name`` primitive: an identity that labels a value for checkpoint policies
(``checkpoint_name``).

Policies such as ``functx.checkpoint_policies.save_only_these_names`` match the label to
decide what a checkpoint's forward pass keeps. The ``checkpoint`` primitive itself, a
higher-order primitive whose rules are interpreters, lives beside the transform in
functx/transforms/checkpoint.py.
"""
from __future__ import annotations

from typing import Any

from functx import tree
from functx.primitives._batching import linear_jvp, unary_batch
from functx.registry import Primitive
from functx.tracing import bind

name_p = Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda xp, x, *, name: x)
name_p.def_vjp(lambda ct, ins, out, *, name: (ct,))
name_p.def_jvp(linear_jvp(name_p))
name_p.def_batch(unary_batch(name_p))


def checkpoint_name(x: Any, name: str) -> Any:
    """``x`` unchanged, labelled ``name`` for checkpoint policies.

    Policies such as ``functx.checkpoint_policies.save_only_these_names(name)`` match the
    label (the ``name`` primitive's parameter) to decide what the forward pass keeps.

    Args:
        x: an array (or a pytree of arrays).
        name: the label (a string).

    Returns:
        ``x`` (the same values).

    Raises:
        TypeError: ``name`` is not a string.

    Example:
        >>> h = fx.checkpoint_name(fnp.tanh(x @ w), "hidden")
    """
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: the name must be a string, not "
                        f"{type(name).__name__} ({name!r:.40}).")
    return tree.map(lambda leaf: bind(name_p, leaf, name=name), x)
