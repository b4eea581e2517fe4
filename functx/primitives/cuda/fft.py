"""CUDA implementation of the ``fft`` primitive (functx/primitives/fft.py): CuPy's FFTs
(cuFFT), through the generic implementation, except where cuFFT differs from NumPy.

* cuFFT refuses an empty batch, where NumPy returns an empty result: zeros of the result's
  shape and dtype are returned instead.
* cuFFT's C2R transform of length 1 (``irfft`` with ``fft_lengths[-1] == 1``) is wrong; the
  irfft of one bin is its real part (after the inverse transforms of the other axes).

The function is an impl rule ``fn(xp, x, **params, fallback, abstract_eval)`` with ``xp``
= cupy, registered next to the primitive with its generic implementation as ``fallback``
and its shape rule as ``abstract_eval``. Importing this module needs no CuPy.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from functx.ir import AbstractArray


def fft(xp: Any, x: Any, *, fft_type: str, fft_lengths: tuple[int, ...], fallback: Callable,
        abstract_eval: Callable) -> Any:
    """The FFT of ``x`` on CUDA: ``fallback`` (the generic implementation) except for the
    cases of the module docstring, whose result dtype and shape come from
    ``abstract_eval`` (the primitive's shape rule)."""
    empty = x.size == 0
    if not empty and not (fft_type == "irfft" and fft_lengths[-1] == 1):
        return fallback(xp, x, fft_type=fft_type, fft_lengths=fft_lengths)
    out = abstract_eval(AbstractArray(tuple(x.shape), np.dtype(x.dtype), False),
                        fft_type=fft_type, fft_lengths=fft_lengths)
    if empty:
        return xp.zeros(out.shape, out.dtype)
    k = len(fft_lengths)
    y = x if k == 1 else xp.fft.ifftn(x, axes=tuple(range(x.ndim - k, x.ndim - 1)))
    return xp.ascontiguousarray(y.real).astype(out.dtype, copy=False)
