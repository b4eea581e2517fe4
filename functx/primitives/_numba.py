"""Numba, imported lazily, for the CPU kernels that earn a compiled loop.

Numba is optional (``pip install 'functx[jit]'``): :func:`numba_or_none` returns the module
when it imports and None otherwise, so every kernel keeps its NumPy path. Nothing here
imports Numba at ``import functx``; the first kernel that asks pays for it once. Kernels are
compiled with ``cache=True`` (on disk, beside this package's ``__pycache__``), so a second
process loads them instead of compiling.

``FUNCTX_NUMBA=0`` in the environment turns the compiled kernels off (the NumPy paths run);
the tests use it to check that both paths give the same bits.
"""
from __future__ import annotations

import os
from typing import Any

_state: dict[str, Any] = {}


def numba_or_none() -> Any:
    """The ``numba`` module, or None when it is not installed or ``FUNCTX_NUMBA=0``."""
    if os.environ.get("FUNCTX_NUMBA", "1") == "0":
        return None
    if "numba" not in _state:
        try:
            import numba  # noqa: PLC0415  (optional dependency, imported on first use)
        except ImportError:
            numba = None
        _state["numba"] = numba
    return _state["numba"]


def njit_variant(fn: Any, variant: str, **options: Any) -> Any:
    """``numba.njit(**options)(fn)``, cached on disk under a name of its own.

    Numba's disk cache is keyed by a function's qualified name and signature, so two
    kernels made by one factory (one thread and ``parallel=True``, or per dtype with the
    same argument types) would share an entry; ``variant`` makes the names distinct.
    """
    fn.__qualname__ = f"{fn.__qualname__}_{variant}"
    fn.__name__ = f"{fn.__name__}_{variant}"
    return numba_or_none().njit(cache=True, **options)(fn)
