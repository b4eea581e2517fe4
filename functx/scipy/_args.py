"""Operand handling shared by ``functx.scipy.special`` and ``functx.scipy.stats``."""
from __future__ import annotations

from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import DTypeError

_PY_SCALARS = (bool, int, float)


def float_dtype(name: str, *args: Any) -> np.dtype:
    """The real floating-point dtype the operands of ``name`` promote to: NumPy 2's
    promotion (Python scalars weak), then booleans and integers to float64 (as
    ``scipy.special``'s ufuncs take them).

    Raises:
        DTypeError: a complex or non-numeric operand (the functions are real-only).
    """
    dt = fnp.result_type(*args)
    if dt.kind in "biu":
        dt = np.dtype(np.float64)
    if dt.kind != "f" and dt.name != "bfloat16":
        raise DTypeError(f"functx.scipy.{name} needs real operands but got dtype {dt}; "
                         "it has no complex form (as in JAX).")
    return np.dtype(dt)


def float_args(name: str, *args: Any) -> list:
    """``args`` as arrays (or tracers) of one real floating-point dtype
    (:func:`float_dtype`)."""
    args = [a if isinstance(a, _PY_SCALARS) or hasattr(a, "dtype") else fnp.asarray(a)
            for a in args]
    dt = float_dtype(name, *args)
    out = []
    for a in args:
        if isinstance(a, _PY_SCALARS):
            a = fnp.asarray(a, dtype=dt)
        elif a.dtype != dt:
            a = fnp.astype(a, dt)
        out.append(a)
    return out


def float_arg(name: str, x: Any) -> Any:
    """One operand as a real floating-point array or tracer (:func:`float_args`)."""
    return float_args(name, x)[0]
