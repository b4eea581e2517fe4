"""NumPy's OpenBLAS on one thread for small products.

NumPy's wheel bundles an OpenBLAS (``scipy_openblas``) whose thread pool has one thread per
core. A product of a few million multiply-adds takes tens of microseconds on one core; on a
16-core host, waking 16 threads for it costs about as much, and after the call they spin
for a while, taking the cores from Numba's kernel threads (and from other libraries' pools
in the same process). LeNet's ``jit`` gradient step on a 16-core Xeon took 15 ms with
OpenBLAS's 16 threads and 7 ms with one (benchmarks/README.md, "Session 10").

So :func:`run_small` runs a product of fewer than :data:`SMALL_MACS` multiply-adds with
OpenBLAS on one thread (the caller's), then gives the pool back its size; bigger products
use the pool as before. Where NumPy's OpenBLAS cannot be found (another BLAS, an unusual
build), nothing changes. The setting is process-wide, as OpenBLAS's is: a product another
Python thread runs meanwhile may run on one thread too (slower, never different).
"""
from __future__ import annotations

import ctypes
import glob
import os
from typing import Any, Callable

import numpy as np

__all__ = ["SMALL_MACS", "run_small", "blas_threads"]

# Products below this many multiply-adds run on one BLAS thread (about 40 us of float32
# work on one core of a current Xeon; the MLP benchmark's 128 x 784 x 256 stays threaded).
SMALL_MACS = 1 << 22

_NAMES = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
          "openblas_set_num_threads64_", "openblas_set_num_threads")


def _find() -> tuple[Callable | None, Callable | None]:
    """NumPy's OpenBLAS ``(set_num_threads, get_num_threads)``, or ``(None, None)``."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "*openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)  # already loaded by NumPy: the same library
        except OSError:
            continue
        for name in _NAMES:
            setter = getattr(lib, name, None)
            getter = getattr(lib, name.replace("set_", "get_"), None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None, None


_SET, _GET = _find() if os.environ.get("FUNCTX_BLAS_ONE_THREAD", "1") != "0" else (None, None)


def blas_threads() -> int | None:
    """The thread count of NumPy's OpenBLAS, or None where functx cannot see it."""
    return None if _GET is None else int(_GET())


def run_small(macs: int, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, a product of ``macs`` multiply-adds through NumPy's BLAS: on one
    BLAS thread when ``macs < SMALL_MACS`` (see the module docstring).

    Example:
        >>> run_small(64 * 400 * 120, np.matmul, np.ones((64, 400)), np.ones((400, 120))).shape
        (64, 120)
    """
    if macs >= SMALL_MACS or _SET is None:
        return fn(*args, **kwargs)
    n = _GET()
    if n <= 1:
        return fn(*args, **kwargs)
    _SET(1)
    try:
        return fn(*args, **kwargs)
    finally:
        _SET(n)
