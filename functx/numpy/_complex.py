"""Complex-number helpers: angle, iscomplexobj, isrealobj, real_if_close.

They follow NumPy (and JAX) and are built from other functx.numpy functions, so ``angle``
(``arctan2(imag(z), real(z))``) is differentiable under every transform.

Differences from NumPy:
    * ``real_if_close`` returns a value whose dtype depends on the values, so it needs
      concrete values: inside ``make_trace``/``jit``/``vmap`` it raises
      ConcretizationError (use ``fnp.real(a)`` where the imaginary part is known to vanish).
    * ``iscomplexobj``/``isrealobj`` look only at the dtype (as NumPy), also of tracers;
      ``iscomplexobj(None)`` is False (as in JAX).
"""
from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

# The package itself: its public functions (arctan2, real, imag, abs, all) are looked up at
# call time, so this module does not depend on how the package splits them into modules.
import functx.numpy as _fnp
from functx.errors import ConcretizationError
from functx.numpy._promotion import asarray

__all__ = ["angle", "iscomplexobj", "isrealobj", "real_if_close"]


def iscomplexobj(x: Any) -> builtins.bool:
    """Whether ``x`` has a complex dtype (its values are not looked at).

    Args:
        x: an array, tracer, scalar or (nested) sequence of them.

    Returns:
        True for a complex dtype (``complex64``/``complex128``), else False.

    Example:
        >>> fnp.iscomplexobj(np.array([1.0, 2.0])), fnp.iscomplexobj([1, 2j])
        (False, True)
    """
    if x is None:
        return False
    if isinstance(x, (list, tuple)):  # as np.asarray(x) would be: complex if any entry is
        return builtins.any(iscomplexobj(e) for e in x)
    dt = getattr(x, "dtype", None)
    if not isinstance(dt, np.dtype):
        dt = np.asarray(x).dtype
    return issubclass(dt.type, np.complexfloating)


def isrealobj(x: Any) -> builtins.bool:
    """Whether ``x`` does not have a complex dtype (``not iscomplexobj(x)``).

    Args:
        x: an array, tracer, scalar or (nested) sequence of them.

    Returns:
        False for a complex dtype, else True (even where the imaginary parts are zero).

    Example:
        >>> fnp.isrealobj(np.array([1 + 0j]))
        False
    """
    return not iscomplexobj(x)


def angle(z: Any, deg: builtins.bool = False) -> Any:
    """The counterclockwise angle of complex ``z`` from the positive real axis.

    ``arctan2(imag(z), real(z))`` (so it is differentiable); a real ``z`` gives 0 or pi
    (``arctan2(0, z)``, so ``-0.0`` gives pi, as in NumPy). Result dtypes are NumPy's:
    the real dtype of a complex input, float64 for integers and booleans wider than int8.

    Args:
        z: an array, tracer or scalar, real or complex.
        deg: return degrees instead of radians.

    Returns:
        The angles, in ``(-pi, pi]`` (or ``(-180, 180]`` degrees).

    Example:
        >>> fnp.angle(np.array([1j, -1.0, 1 + 1j]), deg=True)
        array([ 90., 180.,  45.])
    """
    z = asarray(z)
    if iscomplexobj(z):
        a = _fnp.arctan2(_fnp.imag(z), _fnp.real(z))
    else:
        a = _fnp.arctan2(0, z)
    return a * (180 / math.pi) if deg else a


def real_if_close(a: Any, tol: float = 100) -> Any:
    """The real part of a complex ``a`` if every imaginary part is close to zero, else ``a``.

    Args:
        a: an array or scalar.
        tol: the bound on ``|imag(a)|``: in machine epsilons of ``a``'s dtype when above 1
            (the default, 100 eps), else absolute.

    Returns:
        ``real(a)`` where all ``|imag(a)| < tol``, else ``a`` unchanged (also for real
        input).

    Raises:
        ConcretizationError: inside a transform that has no values (make_trace, jit, vmap):
            the result's dtype depends on the values.

    Example:
        >>> fnp.real_if_close(np.array([2.1 + 4e-14j, 5.2 + 3e-15j]), tol=1000)
        array([2.1, 5.2])
    """
    a = asarray(a)
    if not iscomplexobj(a):
        return a
    if tol > 1:
        tol = float(np.finfo(a.dtype).eps) * tol
    try:
        close = builtins.bool(_fnp.all(_fnp.abs(_fnp.imag(a)) < tol))
    except ConcretizationError:
        raise ConcretizationError(
            "functx.numpy.real_if_close: whether the result is real depends on the values of "
            "a, which are not known inside make_trace/jit/vmap (the result's dtype would "
            "depend on them). Use fnp.real(a) where the imaginary part is known to vanish, "
            "or call real_if_close outside the transform.") from None
    return _fnp.real(a) if close else a
