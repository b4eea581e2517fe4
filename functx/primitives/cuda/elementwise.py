"""CUDA implementations of elementwise primitives (functx/primitives/elementwise.py).

* ``erf``: CUDA's ``erf`` (within 2 ulp; float16 and bfloat16 through float32, rounded
  once) instead of the generic
  table-driven polynomial, which indexes with boolean masks (a device synchronisation).

Each function here is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy,
registered next to its primitive with ``p.def_impl(fn, backend="cuda")``. Importing this
module needs no CuPy; kernels are compiled on first use and kept (functx/primitives/cuda/
_kernels.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.primitives.cuda._kernels import elementwise_kernel


def _erf_kernel(xp: Any) -> Any:
    return elementwise_kernel(xp, "functx_erf", "T x", "T y", "y = erf(x);")


def erf(xp: Any, x: Any) -> Any:
    """The error function with CUDA's ``erf`` (float16 and bfloat16 through float32)."""
    if x.dtype.itemsize == 2:  # float16, bfloat16 (erf takes floating-point operands only)
        return _erf_kernel(xp)(x.astype(np.float32)).astype(x.dtype)
    return _erf_kernel(xp)(x)
