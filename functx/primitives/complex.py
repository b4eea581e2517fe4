"""Complex-number primitives: ``real``, ``imag``, ``conj``.

They let users build real-valued losses of complex intermediates (an FFT's power spectrum
``real(z * conj(z))``, ``real(z) ** 2 + imag(z) ** 2``...) and serve the FFT family's rules.

Each primitive needs a complex operand (complex64 or complex128); ``real``/``imag`` return
the matching real dtype (float32 or float64). The wrappers below are NumPy's ``np.real``,
``np.imag`` and ``np.conj`` (exported by ``functx.numpy``): on a real operand they return
it unchanged (``imag`` returns zeros) without binding anything.

Cotangent convention (JAX's, as in functx.primitives.elementwise): the cotangent of a
complex value ``z = x + iy`` is ``dL/dx - i dL/dy``, so that ``grad`` of a real function of
complex ``z`` is ``conj`` of the Wirtinger-style gradient ``dL/dx + i dL/dy`` and VJPs of
holomorphic and complex-linear maps are ``J^T ct`` without conjugation. Hence:
``real``'s VJP is ``ct -> ct + 0i``, ``imag``'s is ``ct -> -i ct``, ``conj``'s is
``ct -> conj(ct)`` (JAX's rules). All three are real-linear, so each JVP applies the
primitive to the tangent, and each applies elementwise, so batching leaves the batch axis
where it is.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.errors import DTypeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives._batching import linear_jvp, unary_batch
from functx.registry import Primitive
from functx.registry.hooks import HOOKS
from functx.tracing import Tracer, bind

_REAL_OF = {np.dtype(np.complex64): np.dtype(np.float32),
            np.dtype(np.complex128): np.dtype(np.float64)}


def real_dtype_of(dtype: Any) -> np.dtype:
    """The real dtype of the parts of a complex dtype (complex64 -> float32)."""
    return _REAL_OF[np.dtype(dtype)]


def _check_complex(name: str, x: AbstractArray) -> None:
    if np.dtype(x.dtype) not in _REAL_OF:
        raise DTypeError(f"{name} needs a complex64 or complex128 operand but got {x}. "
                         f"Use functx.numpy.{name}, which also accepts real arrays, or "
                         "convert with x.astype(np.complex128) first.")


def _parts_aval(name: str):
    def rule(x: AbstractArray) -> AbstractArray:
        _check_complex(name, x)
        return AbstractArray(x.shape, real_dtype_of(x.dtype), False)
    return rule


def _conj_aval(x: AbstractArray) -> AbstractArray:
    _check_complex("conj", x)
    return AbstractArray(x.shape, x.dtype, False)


def _as_complex(ct: Any, like: Any) -> Any:
    """A real cotangent as a complex array of ``like``'s (complex) dtype."""
    return _ew.convert_element_type(ct, new_dtype=np.dtype(like.dtype))


# -- real ------------------------------------------------------------------------------------

real_p = Primitive("real")
real_p.def_abstract_eval(_parts_aval("real"))
real_p.def_impl(lambda xp, x: xp.real(x))
real_p.def_vjp(lambda ct, ins, out: (_as_complex(ct, ins[0]),))
real_p.def_jvp(linear_jvp(real_p))
real_p.def_batch(unary_batch(real_p))

# -- imag ------------------------------------------------------------------------------------

imag_p = Primitive("imag")
imag_p.def_abstract_eval(_parts_aval("imag"))
imag_p.def_impl(lambda xp, x: xp.imag(x))


@imag_p.def_vjp
def _imag_vjp(ct, ins, out):
    c = _as_complex(ct, ins[0])
    return (_ew.mul(c, _ew.scalar(c, -1j)),)


imag_p.def_jvp(linear_jvp(imag_p))
imag_p.def_batch(unary_batch(imag_p))

# -- conj ------------------------------------------------------------------------------------

conj_p = Primitive("conj")
conj_p.def_abstract_eval(_conj_aval)
conj_p.def_impl(lambda xp, x: xp.conj(x))
conj_p.def_vjp(lambda ct, ins, out: (bind(conj_p, ct),))
conj_p.def_jvp(linear_jvp(conj_p))
conj_p.def_batch(unary_batch(conj_p))


# -- the user functions (NumPy's np.real, np.imag, np.conj) ----------------------------------

def _operand(x: Any) -> Any:
    """Tracers and arrays as they are; Python scalars, lists and NumPy scalars as arrays."""
    if type(x) is Tracer or (hasattr(x, "shape") and hasattr(x, "dtype")
                             and not isinstance(x, np.generic)):
        return x
    # Python scalars and (nested) sequences, which may hold tracers, convert as
    # functx.numpy.asarray does (NumPy's dtype rules); it is above this layer: the hook.
    return HOOKS.numpy.asarray(x)


def _unchanged(x: Any) -> Any:
    return x if type(x) is Tracer else _shape.reshape(x, tuple(x.shape))


def real(val: Any) -> Any:
    """The real part of ``val`` (NumPy's ``np.real``).

    Args:
        val: an array, tracer or array-like of any dtype.

    Returns:
        float32/float64 real parts for complex64/complex128 ``val``; ``val`` itself (as a
        read-only array) for any other dtype.

    Example:
        >>> real(np.array([1 + 2j, 3 - 1j]))   # array([1., 3.])
    """
    x = _operand(val)
    return bind(real_p, x) if np.dtype(x.dtype).kind == "c" else _unchanged(x)


def imag(val: Any) -> Any:
    """The imaginary part of ``val`` (NumPy's ``np.imag``).

    Args:
        val: an array, tracer or array-like of any dtype.

    Returns:
        float32/float64 imaginary parts for complex64/complex128 ``val``; zeros of
        ``val``'s shape and dtype for any other dtype (with no gradient).

    Example:
        >>> imag(np.array([1 + 2j, 3 - 1j]))   # array([ 2., -1.])
    """
    x = _operand(val)
    if np.dtype(x.dtype).kind == "c":
        return bind(imag_p, x)
    return _shape.constant(x, 0, tuple(x.shape), x.dtype)


def conj(x: Any) -> Any:
    """The complex conjugate of ``x`` (NumPy's ``np.conj``/``np.conjugate``).

    Args:
        x: an array, tracer or array-like of any dtype.

    Returns:
        ``real(x) - i imag(x)`` with ``x``'s dtype; ``x`` itself (read-only) if it is real.

    Example:
        >>> conj(np.array([1 + 2j]))   # array([1.-2.j])
    """
    x = _operand(x)
    return bind(conj_p, x) if np.dtype(x.dtype).kind == "c" else _unchanged(x)


conjugate = conj
