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
