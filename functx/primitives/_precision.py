"""Half precision (float16, bfloat16) in derivative rules written as composites.

Implementations compute half-precision operands in float32 and round each result once
(``functx.primitives._util.in_compute_dtype``). Rules written in functx operations would
instead round after every operation; :func:`in_float32` evaluates such a formula in float32
too, so that the derivatives of a fused primitive keep its accuracy.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.primitives import elementwise as _ew
from functx.primitives._util import compute_dtype

__all__ = ["in_float32"]


def in_float32(fn: Any) -> Any:
    """``fn(*operands, **params)``, a formula in functx operations, evaluated in float32 when
    the first operand is half precision (float16, bfloat16): the operands of its dtype are
    converted up and each result is rounded back once. The derivative rules written as
    composites use it, so that second derivatives do not lose the accuracy the fused
    implementations keep (``1 - tanh^2`` near saturation, ``x - mean`` of a narrow row)."""
    def wrapped(*args: Any, **params: Any) -> Any:
        dt = np.dtype(args[0].dtype)
        wide = compute_dtype(dt)
        if wide == dt:
            return fn(*args, **params)
        up = [_ew.convert_element_type(a, new_dtype=wide)
              if getattr(a, "dtype", None) == dt else a for a in args]
        out = fn(*up, **params)
        down = [_ew.convert_element_type(o, new_dtype=dt)
                if getattr(o, "dtype", None) == wide else o
                for o in (out if isinstance(out, tuple) else (out,))]
        return tuple(down) if isinstance(out, tuple) else down[0]
    wrapped.__name__ = wrapped.__qualname__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped
