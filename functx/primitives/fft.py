"""The FFT primitive: ``fft(x, fft_type, fft_lengths)``, as JAX's ``lax.fft``.

One primitive transforms the trailing ``len(fft_lengths)`` axes of its operand (functx.numpy.fft
moves axes there, and pads or crops them to the requested lengths). ``fft_type`` is one of

* ``"fft"``: complex -> complex, ``y[k] = sum_n x[n] exp(-2 pi i k n / N)`` (unnormalised);
* ``"ifft"``: complex -> complex, the inverse, ``1/N sum_k y[k] exp(+2 pi i k n / N)``;
* ``"rfft"``: real -> complex, the ``fft`` of a real operand keeping the ``N//2 + 1``
  non-redundant bins of the last axis (the others are their conjugates);
* ``"irfft"``: complex -> real, the inverse of ``rfft``: the last axis holds ``N//2 + 1``
  bins of a Hermitian spectrum whose real signal has length ``fft_lengths[-1]``. As in
  NumPy (and cuFFT), the imaginary parts of the bins that must be real (zero frequency and,
  for even ``N``, the Nyquist bin, along the last axis) are ignored.

``N`` is the product of ``fft_lengths`` (the "backward" normalisation of NumPy). The operand's
trailing shape must be ``fft_lengths`` (for ``"irfft"``: ``fft_lengths`` with the last entry
``N_last // 2 + 1``); any length is allowed, not only powers of two.

Dtypes: ``"fft"``/``"ifft"``/``"irfft"`` need complex64/complex128 and ``"rfft"`` needs
float32/float64 operands; results keep the precision (complex64 <-> float32, complex128 <->
float64). functx.numpy.fft converts other dtypes as NumPy does.

Rules (the primitive is linear, so they are exact):

* VJP, in JAX's cotangent convention (no conjugation; see functx.primitives.complex): the DFT
  matrix is symmetric, so the transpose of ``"fft"`` is ``"fft"`` and of ``"ifft"`` is
  ``"ifft"`` (the Hermitian adjoint ``N * ifft`` would be the rule of a conjugating
  convention). ``"rfft"`` is ``real -> complex -> fft -> keep the first N//2+1 bins``; its
  transpose is ``Re(fftn(zero-padded ct))``, computed as
  ``N * irfft(conj(ct) * w)`` with ``w = 1`` on the self-conjugate bins and ``1/2`` on the
  others (each stands for itself and its mirror image). ``"irfft"``'s transpose is
  ``conj(rfft(ct) * m / N)`` with ``m = 1`` on the self-conjugate bins and ``2`` elsewhere
  (JAX's rules, checked by the dot-product tests).
* JVP: the primitive applied to the tangent.
* Batching: a batch axis among the leading (untransformed) axes stays where it is; one
  among the transformed axes moves to the front.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np

from functx.errors import DTypeError, FunctxError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import _batching as _b
from functx.primitives import complex as _cx
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives._util import shape_of
from functx.primitives.cuda import fft as _cuda
from functx.registry import Primitive
from functx.tracing import bind

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}


def complex_dtype_of(dtype: Any) -> np.dtype:
    """The complex dtype of the same precision as a real one (float32 -> complex64)."""
    return _COMPLEX_OF[np.dtype(dtype)]


def _expected_in_shape(fft_type: str, fft_lengths: tuple[int, ...]) -> tuple[int, ...]:
    if fft_type == "irfft":
        return fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
    return fft_lengths


fft_p = Primitive("fft")


@fft_p.def_abstract_eval
def _fft_aval(x: AbstractArray, *, fft_type: str, fft_lengths: tuple[int, ...]) -> AbstractArray:
    if fft_type not in FFT_TYPES:
        raise FunctxError(f"fft: fft_type must be one of {FFT_TYPES}, not {fft_type!r}.")
    k = len(fft_lengths)
    if not 1 <= k <= x.ndim or any(n < 1 for n in fft_lengths):
        raise ShapeError(f"fft ({fft_type}) cannot transform {x} with fft_lengths="
                         f"{fft_lengths}: it needs 1 to {x.ndim} lengths (the operand's rank), "
                         "each at least 1.")
    dt = np.dtype(x.dtype)
    if fft_type == "rfft":
        if dt not in _COMPLEX_OF:
            raise DTypeError(f"fft (rfft) needs a float32 or float64 operand but got {x}. "
                             "Use functx.numpy.fft.fft for complex input, or convert with "
                             "x.astype(np.float64).")
    elif dt not in _cx._REAL_OF:
        raise DTypeError(f"fft ({fft_type}) needs a complex64 or complex128 operand but got "
                         f"{x}. functx.numpy.fft converts real input; at the primitive level "
                         "convert with x.astype(np.complex128).")
    want = _expected_in_shape(fft_type, tuple(fft_lengths))
    lead, trailing = tuple(x.shape[:x.ndim - k]), tuple(x.shape[x.ndim - k:])
    if trailing != want:
        raise ShapeError(f"fft ({fft_type}) with fft_lengths={fft_lengths} needs the last {k} "
                         f"axes of the operand to be {want}, but got {x}. Pad or crop first "
                         "(functx.numpy.fft does this for n=/s=).")
    if fft_type == "rfft":
        return AbstractArray(lead + want[:-1] + (want[-1] // 2 + 1,), complex_dtype_of(dt), False)
    if fft_type == "irfft":
        return AbstractArray(lead + tuple(fft_lengths), _cx.real_dtype_of(dt), False)
    return AbstractArray(tuple(x.shape), dt, False)


@fft_p.def_impl
def _fft_impl(xp, x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    # Eager calls skip abstract evaluation; xp.fft would accept (and convert) what the
    # primitive rejects, so check here (a few comparisons) and let the shape rule explain.
    dtype_ok = (x.dtype in _COMPLEX_OF) if fft_type == "rfft" else (x.dtype in _cx._REAL_OF)
    if (not dtype_ok or fft_type not in FFT_TYPES or not 1 <= k <= x.ndim
            or min(fft_lengths) < 1
            or tuple(x.shape[x.ndim - k:]) != _expected_in_shape(fft_type, fft_lengths)):
        _fft_aval(AbstractArray(tuple(x.shape), np.dtype(x.dtype), False), fft_type=fft_type,
                  fft_lengths=fft_lengths)
    axes = tuple(range(x.ndim - k, x.ndim))
    if fft_type == "fft":
        out, dt = (xp.fft.fft(x) if k == 1 else xp.fft.fftn(x, axes=axes)), x.dtype
    elif fft_type == "ifft":
        out, dt = (xp.fft.ifft(x) if k == 1 else xp.fft.ifftn(x, axes=axes)), x.dtype
    elif fft_type == "rfft":
        out = xp.fft.rfft(x) if k == 1 else xp.fft.rfftn(x, axes=axes)
        dt = complex_dtype_of(x.dtype)
    else:
        out = (xp.fft.irfft(x, n=fft_lengths[0]) if k == 1
               else xp.fft.irfftn(x, s=fft_lengths, axes=axes))
        dt = _cx.real_dtype_of(x.dtype)
    # NumPy < 2 computes single precision in double: keep the abstract-eval dtype.
    return out if out.dtype == dt else out.astype(dt)


# On CUDA, the generic implementation except where cuFFT differs from NumPy (an empty
# batch, irfft of length 1): functx/primitives/cuda/fft.py.
fft_p.def_impl(functools.partial(_cuda.fft, fallback=_fft_impl, abstract_eval=_fft_aval),
               backend="cuda")


def _bin_weights(like: Any, n: int, self_conjugate: float, other: float) -> Any:
    """A constant of ``like``'s dtype and device holding, for the ``n // 2 + 1`` bins of a
    real signal of length ``n``, ``self_conjugate`` at the bins equal to their own mirror
    image (0, and n/2 for even n) and ``other`` elsewhere."""
    m = n // 2 + 1
    w = np.full(m, other, dtype=np.dtype(like.dtype))
    w[0] = self_conjugate
    if n % 2 == 0:
        w[-1] = self_conjugate
    w.flags.writeable = False
    xp = _shape.array_module(like)
    return w if xp is np else xp.asarray(w)


@fft_p.def_vjp
def _fft_vjp(ct, ins, out, *, fft_type, fft_lengths):
    if fft_type in ("fft", "ifft"):
        return (fft(ct, fft_type, fft_lengths),)
    n_last, total = fft_lengths[-1], math.prod(fft_lengths)
    if fft_type == "rfft":
        # Re(fftn(pad(ct))) = N irfftn(conj(ct) * w): irfftn's 1/N and Hermitian doubling
        # undone by the weights N (self-conjugate bins) and N/2 (the others).
        w = _bin_weights(ct, n_last, float(total), total / 2.0)
        return (fft(_ew.mul(_cx.conj(ct), w), "irfft", fft_lengths),)
    y = fft(ct, "rfft", fft_lengths)
    m = _bin_weights(y, n_last, 1.0 / total, 2.0 / total)
    return (_cx.conj(_ew.mul(y, m)),)


fft_p.def_jvp(_b.linear_jvp(fft_p))


@fft_p.def_batch
def _fft_batch(args, dims, *, fft_type, fft_lengths):
    x, d = args[0], dims[0]
    if d >= len(shape_of(x)) - len(fft_lengths):
        x, d = _b.moveaxis(x, d, 0), 0
    return fft(x, fft_type, fft_lengths), d


def fft(x: Any, fft_type: str, fft_lengths: Sequence[int]) -> Any:
    """The FFT of type ``fft_type`` over the trailing ``len(fft_lengths)`` axes of ``x``.

    Args:
        x: complex64/complex128 (``"fft"``, ``"ifft"``, ``"irfft"``) or float32/float64
            (``"rfft"``) array or tracer; its trailing shape is ``fft_lengths`` (for
            ``"irfft"`` with the last entry ``fft_lengths[-1] // 2 + 1``).
        fft_type: ``"fft"``, ``"ifft"``, ``"rfft"`` or ``"irfft"``.
        fft_lengths: the lengths of the transformed axes (of the real signal for
            ``"rfft"``/``"irfft"``), each at least 1.

    Returns:
        The transform, unnormalised forward and scaled by ``1/prod(fft_lengths)`` inverse.

    Raises:
        ShapeError, DTypeError: the operand does not fit ``fft_type`` and ``fft_lengths``.

    Example:
        >>> fft(np.ones(4, np.complex128), "fft", (4,))   # array([4.+0.j, 0.+0.j, 0.+0.j, 0.+0.j])
    """
    return bind(fft_p, x, fft_type=str(fft_type), fft_lengths=tuple(int(n) for n in fft_lengths))
