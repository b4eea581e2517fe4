"""Identity-like primitives: stop_gradient."""
from __future__ import annotations

from typing import Any

from functx import tree
from functx.primitives._batching import unary_batch
from functx.registry import Primitive
from functx.tracing import bind

stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_impl(lambda xp, x: x)
stop_gradient_p.def_zero_vjp()
stop_gradient_p.def_jvp(lambda tangents, primals, out: None)  # a zero tangent
stop_gradient_p.def_batch(unary_batch(stop_gradient_p))


def stop_gradient(x: Any) -> Any:
    """``x`` unchanged, but gradients do not flow through it.

    Args:
        x: an array (or pytree of arrays).

    Returns:
        The same values; ``grad`` treats them as constants.

    Example:
        >>> fx.grad(lambda x: x * fx.stop_gradient(x))(3.0)   # 3.0, not 6.0
    """
    return tree.map(lambda leaf: bind(stop_gradient_p, leaf), x)
