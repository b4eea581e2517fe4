"""Checks of the arguments the transforms take: the function, ``argnums``, static arguments.

Each check raises at the call that made the mistake (``fx.grad(3)`` fails at ``fx.grad``,
not when the gradient function is called) and names the argument. The transforms of
differentiation (``grad``, ``vjp``, ``jvp``, the Jacobians) raise :class:`GradError`; the
others (``jit``, ``vmap``, ``checkpoint``) raise :class:`ArgumentTypeError`. Both are
``FunctxError`` and ``TypeError``.
"""
from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, Sequence

import numpy as np

from functx.errors import ArgumentTypeError, FunctxError

__all__ = ["check_callable", "index_tuple", "resolve_argnums", "name_tuple", "signature_of"]


def check_callable(f: Any, transform: str, error: type[FunctxError] = ArgumentTypeError
                   ) -> None:
    """Raise ``error`` unless ``f`` is callable.

    Example:
        >>> check_callable(3, "grad")   # ArgumentTypeError: grad needs a callable ...
    """
    if not callable(f):
        raise error(f"{transform} needs a callable (the function to transform) as its first "
                    f"argument, but got {f!r:.60} (of type {type(f).__name__}). Pass the "
                    f"function itself, e.g. {transform}(f), not its result {transform}(f(x)).")


def _index(i: Any, what: str, value: Any, transform: str, error: type[FunctxError]) -> int:
    if isinstance(i, (bool, np.bool_)):
        raise error(f"{transform}: {what}={value!r} contains a bool; {what} takes argument "
                    "positions as ints (a bool here is usually a keyword argument passed "
                    "positionally, e.g. has_aux).")
    try:
        return operator.index(i)
    except TypeError:
        raise error(f"{transform}: {what} must be an int or a sequence of ints (argument "
                    f"positions), but got {value!r:.60} ({type(value).__name__}).") from None


def index_tuple(value: Any, what: str, transform: str,
                error: type[FunctxError] = ArgumentTypeError) -> tuple[int, ...]:
    """``value`` (an int or a sequence of ints, such as ``argnums``) as a tuple of ints.

    Raises:
        error: ``value`` holds something that is not an int (a bool, a float, a string).

    Example:
        >>> index_tuple(1, "argnums", "grad")
        (1,)
    """
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return (_index(value, what, value, transform, error),)
    return tuple(_index(i, what, value, transform, error) for i in value)


def resolve_argnums(nums: Sequence[int], nargs: int, what: str, transform: str,
                    error: type[FunctxError] = ArgumentTypeError,
                    shown: Any = None) -> tuple[int, ...]:
    """``nums`` made non-negative for a call with ``nargs`` positional arguments.

    Args:
        nums: argument positions (negative ones count from the end).
        nargs: the number of positional arguments of the call.
        what, transform: names for the message (``"argnums"``, ``"grad(f)"``).
        error: the exception type.
        shown: the value to show for ``what`` (default ``nums``).

    Raises:
        error: a position is out of range, or two positions name the same argument (their
            results would silently overwrite each other).
    """
    shown = nums if shown is None else shown
    out = []
    for i in nums:
        if not -nargs <= i < nargs:
            raise error(f"{transform}: {what}={shown} but the function was called with "
                        f"{nargs} positional argument(s), so there is no argument {i}. Pass "
                        f"the arguments positionally, or fix {what}.")
        j = i % nargs
        if j in out:
            raise error(f"{transform}: {what}={shown} names argument {j} more than once (for "
                        f"a call with {nargs} positional argument(s)). Each argument may "
                        "appear once; to use one value twice, pass it twice.")
        out.append(j)
    return tuple(out)


def name_tuple(value: Any, what: str, transform: str,
               error: type[FunctxError] = ArgumentTypeError) -> tuple[str, ...]:
    """``value`` (a string or a sequence of strings, such as ``static_argnames``) as a tuple.

    Raises:
        error: an entry is not a string.
    """
    names = (value,) if isinstance(value, str) or not hasattr(value, "__iter__") \
        else tuple(value)
    for n in names:
        if not isinstance(n, str):
            raise error(f"{transform}: {what} must be a string or a sequence of strings "
                        f"(argument names), but it contains {n!r:.60} ({type(n).__name__}).")
    return names


def signature_of(f: Callable) -> inspect.Signature | None:
    """``inspect.signature(f)``, or None where Python cannot tell it (builtins, C code)."""
    try:
        return inspect.signature(f)
    except (TypeError, ValueError):
        return None


def argnums_by_name(f: Callable, fname: str, nums: tuple, names: tuple, what: str,
                    given: tuple) -> dict | None:
    """Check positions ``nums`` and names ``names`` (``what`` = ``"static"`` or
    ``"donate"``, as in ``static_argnums``; ``given`` the user's two values, quoted in the
    errors) against ``f``'s signature where Python can tell it, and return its positional
    parameters that may also come by keyword, ``{position: name}`` (None without a
    signature). Negative positions count from the end.

    Raises:
        ArgumentTypeError: a position beyond the parameters of a function without ``*args``,
            or a name that is not a parameter of a function without ``**kwargs``.
    """
    sig = signature_of(f)
    if sig is None:
        return None
    params = list(sig.parameters.values())
    kinds = inspect.Parameter
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY,
                                                  kinds.POSITIONAL_OR_KEYWORD)]
    if not any(p.kind is kinds.VAR_POSITIONAL for p in params):
        for i in nums:
            if not -len(positional) <= i < len(positional):
                raise ArgumentTypeError(
                    f"{fname}: {what}_argnums={given[0]} but the function takes "
                    f"{len(positional)} positional argument(s) "
                    f"({', '.join(p.name for p in positional) or 'none'}), so there is no "
                    f"argument {i}{' to donate' if what == 'donate' else ''}. "
                    f"Fix {what}_argnums.")
    if not any(p.kind is kinds.VAR_KEYWORD for p in params):
        by_name = {p.name for p in params if p.kind in (kinds.POSITIONAL_OR_KEYWORD,
                                                        kinds.KEYWORD_ONLY)}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise ArgumentTypeError(
                f"{fname}: {what}_argnames={given[1]!r} names "
                f"{', '.join(map(repr, unknown))}, which the function does not take as a "
                f"keyword argument (its parameters: {', '.join(p.name for p in params)}). "
                f"Fix {what}_argnames.")
    return {i: p.name for i, p in enumerate(positional) if p.kind is kinds.POSITIONAL_OR_KEYWORD}
