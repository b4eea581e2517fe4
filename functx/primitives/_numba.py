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
import types
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


def compile_loop(fn: Any, parallel: bool) -> Any:
    """``fn`` compiled with its module-level name ``_prange`` bound to ``numba.prange``
    (``parallel``: its loop spread over the cores) or ``range`` (one core).

    Kernel modules (``functx.primitives._lu_kernels``, ``..elementwise._erf32``) write their
    outer loop as ``for i in _prange(n)`` with ``_prange = range`` at module level, so the
    functions import no Numba and run as plain Python too; this makes the variant's copy
    (its own globals, its own disk-cache name) and compiles it.
    """
    numba = numba_or_none()
    glb = dict(fn.__globals__)
    glb["_prange"] = numba.prange if parallel else range
    copy = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__)
    copy.__module__ = fn.__module__
    copy.__qualname__ = fn.__qualname__
    return njit_variant(copy, "par" if parallel else "seq", parallel=parallel)
