"""The exception types of functx.

Every functx error is a :class:`FunctxError`. Messages are full sentences that name the
operation, the shapes/dtypes involved, the user's source line where one is known, and what
to do about it.
"""
from __future__ import annotations


class FunctxError(Exception):
    """Base class of every error functx raises on purpose."""


class ShapeError(FunctxError, ValueError):
    """Operands of an operation have shapes it cannot accept."""


class DTypeError(FunctxError, TypeError):
    """Operands of an operation have dtypes it cannot accept."""


class ConcretizationError(FunctxError, TypeError):
    """A traced value was used where a concrete Python value is needed.

    Raised by ``bool()``, ``int()``, ``float()``, ``np.asarray`` and friends on a tracer of an
    abstract trace (``make_trace``, ``eval_shape``, ``vmap``, ``jit``): only its shape and
    dtype are known there.
    """


class TracerLeakError(FunctxError, RuntimeError):
    """A tracer was used after the transform that created it had returned."""


class MissingRuleError(FunctxError, NotImplementedError):
    """A primitive lacks the rule (implementation, VJP, ...) a transform needs."""


class DeviceError(FunctxError, ValueError):
    """Operands live on different devices, or a device is unavailable."""


class GradError(FunctxError, TypeError):
    """``grad``/``vjp`` was asked for something it cannot differentiate."""
