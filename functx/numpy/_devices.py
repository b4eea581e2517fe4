"""Constants made on the device of the arrays they meet (shared by the extra modules).

A host constant that is not 0-d (a fill of zeros, an index array) meeting a CuPy array
makes a primitive raise DeviceError (functx never copies between devices silently), so
the functions that build such constants build them where their operands live. Under an
abstract trace the device is not known and the constants stay NumPy arrays (the trace's
constants are moved when it runs).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.numpy import _shape as _fshape

__all__ = ["filled", "joined"]


def filled(like: Any, value: Any, dtype: Any, shape: tuple) -> Any:
    """``value`` of ``dtype`` broadcast to ``shape``, on the device ``like`` lives on."""
    return _fshape.broadcast_to(_fshape.on_device_of(like, np.asarray(value, dtype)),
                                tuple(shape))


def joined(like: Any, v: Any) -> Any:
    """``v`` as an array; a 0-d host value (a Python or NumPy scalar) moves to ``like``'s
    device, as binary primitives move scalars. Other host arrays stay where they are."""
    v = _fshape.as_array(v)
    if type(v) is np.ndarray and v.ndim == 0:
        return _fshape.on_device_of(like, v)
    return v
