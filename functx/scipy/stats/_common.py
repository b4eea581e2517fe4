"""What the distribution modules of ``functx.scipy.stats`` share: the :class:`Family`
namespace that holds one distribution's functions (``norm.logpdf``...), and operand
promotion."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import functx.numpy as fnp
from functx.scipy._args import float_args

__all__ = ["Family", "float_args", "where_nan", "standardize"]


class Family:
    """The functions of one distribution, as attributes (``stats.norm.logpdf``), like the
    submodules of ``jax.scipy.stats``.

    Args:
        name: the distribution's name (``"norm"``).
        doc: a one-paragraph description (parameters, support).
        **fns: the functions, by their JAX names (``logpdf``, ``cdf``...).
    """

    def __init__(self, name: str, doc: str, **fns: Callable) -> None:
        self.__name__ = name
        self.__doc__ = doc
        self._names = tuple(fns)
        for attr, fn in fns.items():
            fn.__qualname__ = f"{name}.{attr}"
            fn.__module__ = "functx.scipy.stats"
            setattr(self, attr, fn)

    def __repr__(self) -> str:
        return f"<functx.scipy.stats.{self.__name__}: {', '.join(self._names)}>"

    def __dir__(self) -> list[str]:
        return list(self._names)


def where_nan(cond: Any, value: Any) -> Any:
    """``value`` with NaN where ``cond`` holds (invalid parameters)."""
    return fnp.where(cond, np.nan, value).astype(value.dtype)


def standardize(name: str, x: Any, loc: Any, scale: Any, *more: Any) -> list:
    """``[(x - loc) / scale, loc, scale, *more]`` promoted to one float dtype."""
    x, loc, scale, *more = float_args(name, x, loc, scale, *more)
    return [(x - loc) / scale, loc, scale, *more]
