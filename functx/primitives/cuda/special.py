"""CUDA implementations of the special-function primitives (functx/primitives/special.py):
CuPy's ``cupyx.scipy.special`` ufuncs, which are elementwise kernels of their own.

* :func:`special_rule` makes the impl rule of a primitive computed by one
  ``cupyx.scipy.special`` function (``erfc``, ``erfinv``, ``erfcx``, ``gammaln``, ``gamma``,
  ``digamma``, ``zeta``, ``gammainc``, ``gammaincc``, ``betaln``, ``betainc``, ``ndtri``,
  ``log_ndtr``, ``i0e``, ``i1e``). float32 and float64 are computed in their own precision;
  float16 and bfloat16 are computed in float32 and rounded once (``cupyx.scipy.special``
  has no bfloat16 kernels, and its float16 ones compute in half precision).
* :func:`igamma_grad_a`: JAX's algorithm for ``d/da P(a, x)``, passed in as ``fallback``,
  with CuPy's ``gammaln`` and ``digamma``.

Each rule is ``fn(xp, *arrays)`` with ``xp`` = cupy, registered next to its primitive with
``p.def_impl(fn, backend="cuda")``. Importing this module needs no CuPy: ``cupyx.scipy.
special`` is imported when a rule first runs (CuPy compiles each ufunc on first use and
keeps it, so no functx compile cache is involved).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

import ml_dtypes
import numpy as np

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_MODULE: list = []  # cupyx.scipy.special, once imported


def _cupyx_special() -> Any:
    if not _MODULE:
        _MODULE.append(importlib.import_module("cupyx.scipy.special"))
    return _MODULE[0]


def special_rule(name: str) -> Callable:
    """The CUDA impl rule of a primitive computed by ``cupyx.scipy.special.<name>``.

    Args:
        name: the function's name in ``cupyx.scipy.special`` (e.g. ``"gammaln"``).

    Returns:
        ``rule(xp, *arrays)``: the function applied to the operands (one dtype), float16
        and bfloat16 through float32.

    Example:
        >>> lgamma_p.def_impl(special_rule("gammaln"), backend="cuda")
    """
    def rule(xp: Any, *args: Any) -> Any:
        fn = getattr(_cupyx_special(), name)
        dtype = next((np.dtype(a.dtype) for a in args if hasattr(a, "dtype")),
                     np.dtype(np.float64))
        if dtype == np.float16 or dtype == _BFLOAT16:
            args = tuple(a.astype(np.float32) if hasattr(a, "astype") else a for a in args)
            return fn(*args).astype(dtype)
        return fn(*args)
    rule.__name__ = rule.__qualname__ = f"cuda_{name}"
    return rule


def igamma_grad_a(xp: Any, a: Any, x: Any, *, fallback: Callable) -> Any:
    """``d/da P(a, x)`` on CUDA: the generic algorithm ``fallback`` (functx/primitives/
    _igamma.py) with ``cupyx.scipy.special``'s ``gammaln`` and ``digamma`` (its iterations
    index the unconverged entries, one device synchronisation per step)."""
    sp = _cupyx_special()
    return fallback(xp, a, x, lgamma=sp.gammaln, digamma=sp.digamma)
