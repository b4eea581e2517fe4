"""functx.debug: see actual values from inside ``jit``, ``vmap``, ``grad`` and loops.

Inside a transform, Python's ``print`` shows tracers (``Tracer<f64[2]>``) and runs once,
when the function is traced. ``functx.debug.print`` and ``functx.debug.callback`` are
primitives instead (``debug_callback``): they run with the actual values every time the
computation runs.

* ``jit``: at every call of the jitted function (never dropped as dead code);
* ``vmap``: once per batch member, in order, as JAX 0.10 does (unbatched arguments are the
  same at every member);
* ``grad``/``vjp``/``jvp``: in the forward pass only, with the primal values (nothing is
  printed by the backward pass; a ``checkpoint``'s recomputation does not print again);
* loops: at every iteration.

Values arrive as NumPy arrays (CUDA arrays are copied to the host).

Example:
    >>> @fx.jit
    ... def f(x):
    ...     fx.debug.print("x = {x}, sum = {}", fnp.sum(x), x=x)
    ...     return x * 2
    >>> f(np.arange(3.0))
    x = [0. 1. 2.], sum = 3.0
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

from functx.errors import ArgumentTypeError
from functx.lax._callback import debug_callback

__all__ = ["print", "callback"]


def callback(callback: Callable[..., Any], *args: Any, ordered: bool = False,
             partitioned: bool = False, **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` on the host with the actual values, from inside
    any transform, for its effect.

    Args:
        callback: the host function; its return value is ignored.
        *args: its arguments: pytrees whose array leaves arrive as read-only NumPy arrays
            (other leaves as they are).
        ordered: accepted for JAX compatibility. functx runs a trace's equations in
            program order on one stream, so calls are always ordered.
        partitioned: accepted for JAX compatibility (functx runs on one device).
        **kwargs: its keyword arguments (pytrees, as ``args``).

    Returns:
        None.

    Raises:
        ArgumentTypeError: ``callback`` is not callable.

    Example:
        >>> def check(x):
        ...     assert np.isfinite(x).all(), x
        >>> fx.jit(lambda x: (fx.debug.callback(check, x), fnp.log(x))[1])(np.ones(3))
    """
    debug_callback(callback, *args, **kwargs)


def print(fmt: str, *args: Any, ordered: bool = False, partitioned: bool = False,  # noqa: A001
          **kwargs: Any) -> None:
    """Print ``fmt.format(*args, **kwargs)`` with the actual values, from inside any
    transform (``jit``, ``vmap``, ``grad``, loops).

    Arrays are formatted as NumPy arrays (``str(np.ndarray)``); the line goes to
    ``sys.stdout`` as it is when the computation runs (so ``capsys`` and redirections see
    it). Under ``vmap`` one line is printed per batch member.

    Args:
        fmt: a ``str.format`` template (``"{}"``, ``"{x}"``, ``"{x:.3f}"`` for scalars).
        *args: positional values (pytrees of arrays, or Python values).
        ordered: accepted for JAX compatibility (calls are always in program order).
        partitioned: accepted for JAX compatibility (functx runs on one device).
        **kwargs: named values.

    Returns:
        None.

    Raises:
        ArgumentTypeError: ``fmt`` is not a string.

    Example:
        >>> fx.grad(lambda x: (fx.debug.print("x = {}", x), x ** 2)[1])(3.0)
        x = 3.0
        6.0
    """
    if not isinstance(fmt, str):
        raise ArgumentTypeError(f"debug.print: fmt must be a format string, but got "
                                f"{type(fmt).__name__} {fmt!r:.60}. Write "
                                "fx.debug.print('x = {}', x).")

    def show(*a: Any, **kw: Any) -> None:
        builtins.print(fmt.format(*a, **kw))

    show.__qualname__ = f"print({fmt!r})"
    debug_callback(show, *args, **kwargs)
