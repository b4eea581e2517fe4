"""The exception types of functx.

Every functx error is a :class:`FunctxError`. Messages are full sentences that name the
operation, the shapes/dtypes involved, the user's source line where one is known, and what
to do about it.
"""
from __future__ import annotations

import os
import sys
from typing import Any

# ----------------------------------------------------------------------------------------
# Where in the user's code are we? (Errors name it; traces record it per equation.)

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))

_internal_code: dict[int, bool] = {}  # id(code) -> whether it is functx's own code
_known_code: list = []  # the code objects _internal_code has seen, kept so ids stay unique


def _is_internal(code: Any) -> bool:
    r = _internal_code.get(id(code))
    if r is None:
        fn = code.co_filename
        r = _internal_code[id(code)] = (fn.startswith(_PKG_DIR) and "/tests/" not in fn) or \
            fn.startswith("<frozen")
        _known_code.append(code)
    return r


class SourceInfo:
    """Where, in the user's code, an equation was recorded (a code object and a line).

    Cheap to capture: the file and function names are read only when printed.
    """

    __slots__ = ("code", "lineno")

    def __init__(self, code: Any, lineno: int) -> None:
        self.code = code
        self.lineno = lineno

    @property
    def filename(self) -> str:
        return self.code.co_filename

    @property
    def function(self) -> str:
        return self.code.co_name

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} ({self.function})"

    __repr__ = __str__


def user_source(depth: int = 1) -> SourceInfo | None:
    """The innermost stack frame outside functx, as a SourceInfo (None if there is none)."""
    # Called for every traced equation: the memo lookup is inlined (a function call per
    # frame walked was a fifth of the cost of tracing), and keyed by the code object's id:
    # hashing a code object hashes its constants and names, 0.2-1.4 us per frame walked.
    f = sys._getframe(depth)
    known = _internal_code.get
    while f is not None:
        code = f.f_code
        internal = known(id(code))
        if internal is None:
            internal = _is_internal(code)
        if not internal:
            return SourceInfo(code, f.f_lineno)
        f = f.f_back
    return None


# ----------------------------------------------------------------------------------------
# The exception types


class FunctxError(Exception):
    """Base class of every error functx raises on purpose.

    A message gets a last line naming the user's source line (the innermost stack frame
    outside functx) when it does not already have one.
    """

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str) and "Your code:" not in args[0]:
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
    dtype are known there. Also raised by ``float()``, ``int()``, ``complex()``, ``.item()``,
    ``.tolist()`` and ``__index__`` on a floating-point or complex value that carries a
    derivative (under ``grad``, ``vjp``, ``jvp``, ``linearize``): the Python value would
    leave the trace and lose its derivative (see ``functx.tracing.Tracer``).
    """


class TracerLeakError(FunctxError, RuntimeError):
    """A tracer was used after the transform that created it had returned."""


class MissingRuleError(FunctxError, NotImplementedError):
    """A primitive lacks the rule (implementation, VJP, ...) a transform needs."""


class DeviceError(FunctxError, ValueError):
    """Operands live on different devices, or a device is unavailable."""


class MissingHookError(FunctxError, RuntimeError):
    """A lower layer needs an operation that the higher layer providing it has not
    registered (see ``functx.registry.hooks``): that layer's package was not imported."""


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


class ArgumentTypeError(FunctxError, TypeError):
    """A transform or a ``functx.numpy`` function got an argument of the wrong kind.

    For example a function that is not callable (``fx.vmap(3)``), ``static_argnums`` or an
    ``axis`` that is not an int, argument numbers that repeat or do not exist in the call,
    or ``static_argnames`` the function does not take. It is raised by the call that made
    the mistake and names the argument. (``grad``, ``vjp``, ``jvp`` and the Jacobians raise
    :class:`GradError` for the same mistakes.)
    """


def your_code() -> str:
    """`` Your code: file:line (function)`` for the innermost user frame, or ''."""
    source = user_source(2)
    return f"\n  Your code: {source}" if source is not None else ""


def attach_source(err: "FunctxError", source: SourceInfo | None) -> "FunctxError":
    """``err`` with a last line naming the user's source line (once; returns ``err``)."""
    if source is not None and err.args and isinstance(err.args[0], str) \
            and "Your code:" not in err.args[0]:
        err.args = (f"{err.args[0]}\n  Your code: {source}",) + err.args[1:]
    return err


def leak_error(t: Any) -> "TracerLeakError":
    """The error for a tracer ``t`` (a ``functx.tracing.Tracer``) used after its transform
    returned (its builder is inactive)."""
    b = t._builder
    return TracerLeakError(
        f"A traced {t.aval} value created inside {b.transform} (started at {b.source}) was "
        f"used after {b.transform} had returned. A traced value escaped its transform, for "
        "example through a global variable, a list or an attribute set inside the function."
        "\n  What to do: return the value from the transformed function instead, or "
        "compute it outside."
        + your_code())
