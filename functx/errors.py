"""The exception types of functx.

Every functx error is a :class:`FunctxError`. Messages are full sentences that name the
operation, the shapes/dtypes involved, the user's source line where one is known, and what
to do about it.
"""
from __future__ import annotations


class FunctxError(Exception):
    """Base class of every error functx raises on purpose.

    A message gets a last line naming the user's source line (the innermost stack frame
    outside functx) when it does not already have one.
    """

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str) and "Your code:" not in args[0]:
            from functx.tracing import user_source  # errors is imported by tracing

            source = user_source(2)
            if source is not None:
                args = (f"{args[0]}\n  Your code: {source}",)
        super().__init__(*args)


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


class VmapError(ShapeError):
    """A ``vmap`` specification does not fit the arguments (axes, sizes, structure)."""


class ArgumentError(FunctxError, ValueError):
    """An argument of a ``functx.nn`` function has a value it does not accept.

    For example an unknown ``reduction`` or ``mode``, a negative probability, or a class
    index out of range. It is a ``ValueError`` too, so code written for PyTorch's
    ``ValueError``/``RuntimeError`` checks can catch it as ``ValueError``.
    """
