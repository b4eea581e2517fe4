"""Discrete Fourier transforms with NumPy's ``numpy.fft`` API, differentiable and batchable.

``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``, ``ihfft`` (one axis), ``fft2``, ``ifft2``,
``rfft2``, ``irfft2``, ``fftn``, ``ifftn``, ``rfftn``, ``irfftn`` (several axes) take NumPy's
arguments (``n``/``axis``, ``s``/``axes``, ``norm`` = ``"backward"`` (None), ``"ortho"`` or
``"forward"``) and give NumPy's results for any lengths, not only powers of two. Each is one
``fft`` primitive (functx.primitives.fft) between shape operations: the transformed axes
move to the end (a transpose, when they are not there already), are zero-padded or cropped
to the requested lengths (``pad``), and the result is scaled for ``norm``. ``fftfreq``,
``rfftfreq``, ``fftshift`` and ``ifftshift`` are NumPy's helpers.

Dtypes follow NumPy 2: complex64 and complex128 keep their precision, float16/float32 become
complex64 (float32 for the real results of ``irfft2``/``irfftn``; NumPy's ``irfft``/``hfft``
of float16 give float16 and so do these), other real and integer dtypes complex128 (float64).
``rfft``/``ihfft``/``rfft2``/``rfftn`` of complex input raise a DTypeError (a TypeError, as
NumPy's).

Gradients follow JAX's convention for complex numbers (see functx.primitives.complex): the
gradient of a real loss ``L`` with respect to a complex input ``z = x + iy`` is
``dL/dx - i dL/dy``. To build real losses of spectra use ``functx.numpy.real``, ``imag`` and
``conj`` (e.g. the power ``real(z * conj(z))``).

Differences from NumPy:
    * ``out=`` raises TypeError (functx values are immutable).
    * ``s`` given without ``axes`` transforms the last ``len(s)`` axes, NumPy's behaviour, without
      its DeprecationWarning.
    * ``rfftn``/``irfftn`` with ``axes=()`` raise ValueError (NumPy raises IndexError);
      ``fftn``/``ifftn`` with ``axes=()`` return the input unchanged, as NumPy does.

Example:
    >>> import functx.numpy as fnp
    >>> fnp.fft.rfft(np.array([1.0, 2.0, 3.0]))        # array([ 6. +0.j, -1.5+0.866j])
    >>> fx.grad(lambda x: fnp.sum(fnp.real(fnp.fft.fft(x))))(np.ones(4))
"""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Sequence

import numpy as np

from functx.errors import DTypeError
from functx.numpy import _creation
from functx.numpy import _shape as _fshape
from functx.numpy._promotion import astype, check_no_out, is_tracer
from functx.primitives import complex as _cx
from functx.primitives import elementwise as _ew
from functx.primitives import fft as _fft
from functx.primitives import shape as _p

__all__ = [
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
    "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]

_NORMS = ("backward", "ortho", "forward")
_INVERSE = {"fft": False, "rfft": False, "ifft": True, "irfft": True}


# ----------------------------------------------------------------------------------------
# operands, lengths and normalisation


def _norm(name: str, norm: Any) -> str:
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f"functx.numpy.fft.{name}: invalid norm value {norm!r}; use "
                         "\"backward\" (or None), \"ortho\" or \"forward\".")
    return norm


def _swap_direction(norm: str) -> str:
    return {"backward": "forward", "forward": "backward"}.get(norm, norm)


def _to_complex(x: Any) -> Any:
    """``x`` in the complex dtype NumPy's FFTs compute it in."""
    dt = np.dtype(x.dtype)
    if dt.kind == "c":
        return x
    target = (np.complex64 if dt.kind == "f" and dt.itemsize <= 4 or dt.name == "bfloat16"
              else np.complex128)
    return astype(x, target)


def _to_real(name: str, x: Any) -> Any:
    """``x`` in the real dtype NumPy's real-input FFTs compute it in.

    Raises:
        DTypeError: ``x`` is complex (NumPy raises a TypeError too).
    """
    dt = np.dtype(x.dtype)
    if dt.kind == "c":
        raise DTypeError(f"functx.numpy.fft.{name} needs real input but got a {dt.name} "
                         f"array of shape {tuple(x.shape)}. Use functx.numpy.fft.fft (or "
                         "fftn) for complex input, or take its real part first.")
    if dt == np.float64 or dt == np.float32:
        return x
    small = dt.kind == "f" and dt.itemsize <= 4 or dt.name == "bfloat16"
    return astype(x, np.float32 if small else np.float64)


def _length(name: str, n: Any) -> int:
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"functx.numpy.fft.{name}: invalid number of FFT data points ({n}) "
                         "specified; every transform length must be at least 1 (pass n=/s= "
                         "or transform a non-empty axis).")
    return n


def _fit(x: Any, axes: Sequence[int], sizes: Sequence[int]) -> Any:
    """``x`` zero-padded or cropped at the end of each axis in ``axes`` to ``sizes``."""
    shape = tuple(x.shape)
    config = [(0, 0, 0)] * len(shape)
    for a, s in zip(axes, sizes):
        config[a] = (0, s - shape[a], 0)
    if all(c == (0, 0, 0) for c in config):
        return x
    return _p.pad(x, 0, config)


def _scaled(y: Any, fft_type: str, norm: str, total: int) -> Any:
    """``y`` scaled from the primitive's normalisation ("backward") to ``norm``'s."""
    if norm == "backward":
        return y
    if norm == "ortho":
        factor = math.sqrt(total) if _INVERSE[fft_type] else 1.0 / math.sqrt(total)
    else:  # "forward"
        factor = float(total) if _INVERSE[fft_type] else 1.0 / total
    return y if factor == 1.0 else _ew.mul(y, _ew.scalar(y, factor))


def _transform(x: Any, fft_type: str, axes: Sequence[int], lengths: Sequence[int],
               norm: str) -> Any:
    """One ``fft`` primitive over the distinct, normalised ``axes`` of ``x`` (the last of
    them is the halved axis of ``rfft``/``irfft``), with the signal lengths ``lengths``."""
    lengths = tuple(lengths)
    in_sizes = lengths[:-1] + (lengths[-1] // 2 + 1,) if fft_type == "irfft" else lengths
    x = _fit(x, axes, in_sizes)
    ndim = len(x.shape)
    perm = tuple(a for a in range(ndim) if a not in axes) + tuple(axes)
    y = _fft.fft(_p.transpose_if_needed(x, perm), fft_type, lengths)
    y = _p.transpose_if_needed(y, tuple(np.argsort(perm)))
    return _scaled(y, fft_type, norm, math.prod(lengths))


def _one_axis(name: str, fft_type: str, a: Any, n: Any, axis: Any, norm: Any,
              out: Any) -> Any:
    check_no_out(f"fft.{name}", out)
    norm = _norm(name, norm)
    a = _fshape.as_array(a)
    x = _to_real(name, a) if fft_type == "rfft" else _to_complex(a)
    ax = _fshape.norm_axis(axis, len(x.shape), f"fft.{name}")
    if n is None:
        n = 2 * (x.shape[ax] - 1) if fft_type == "irfft" else x.shape[ax]
    y = _transform(x, fft_type, (ax,), (_length(name, n),), norm)
    if fft_type == "irfft" and a.dtype == np.float16:
        y = astype(y, np.float16)  # NumPy's irfft (not irfftn) of float16 gives float16
    return y


def _nd_args(name: str, x: Any, s: Any, axes: Any, inverse_real: bool) -> tuple[list, list]:
    """NumPy's ``_cook_nd_args``: the lengths and (normalised) axes of an n-d transform."""
    ndim = len(x.shape)
    if axes is not None:
        axes = [_fshape.norm_axis(a, ndim, f"fft.{name}") for a in axes]
    if s is None:
        shapeless = True
        s = list(x.shape) if axes is None else [x.shape[a] for a in axes]
    else:
        shapeless = False
        s = [operator.index(d) for d in s]
    if axes is None:
        axes = [_fshape.norm_axis(a, ndim, f"fft.{name}") for a in range(-len(s), 0)]
    if len(s) != len(axes):
        raise ValueError(f"functx.numpy.fft.{name}: s has {len(s)} entries but axes has "
                         f"{len(axes)}; give one length per transformed axis.")
    if inverse_real and shapeless and s:
        s[-1] = (x.shape[axes[-1]] - 1) * 2
    s = [x.shape[a] if d == -1 else d for d, a in zip(s, axes)]
    return s, axes


def _n_axes(name: str, fft_type: str, a: Any, s: Any, axes: Any, norm: Any, out: Any) -> Any:
    check_no_out(f"fft.{name}", out)
    norm = _norm(name, norm)
    x = _fshape.as_array(a)
    x = _to_real(name, x) if fft_type == "rfft" else _to_complex(x)
    s, axes = _nd_args(name, x, s, axes, fft_type == "irfft")
    if not axes:
        if fft_type in ("rfft", "irfft"):
            raise ValueError(f"functx.numpy.fft.{name} needs at least one axis to transform; "
                             "got axes=().")
        return _fshape.unchanged(_fshape.as_array(a))
    s = [_length(name, d) for d in s]
    if len(set(axes)) == len(axes):
        return _transform(x, fft_type, axes, s, norm)
    # Repeated axes: one-axis transforms in NumPy's order (_raw_fftnd and its real variants).
    one = {"fft": fft, "ifft": ifft, "rfft": fft, "irfft": ifft}[fft_type]
    if fft_type == "rfft":
        x = rfft(x, s[-1], axes[-1], norm)
        for d, ax in zip(s[:-1], axes[:-1]):
            x = one(x, d, ax, norm)
        return x
    if fft_type == "irfft":
        for d, ax in zip(s[:-1], axes[:-1]):
            x = one(x, d, ax, norm)
        return irfft(x, s[-1], axes[-1], norm)
    for d, ax in reversed(list(zip(s, axes))):
        x = one(x, d, ax, norm)
    return x


# ----------------------------------------------------------------------------------------
# one axis


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
        out: Any = None) -> Any:
    """The one-dimensional discrete Fourier transform (NumPy's ``numpy.fft.fft``).

    Args:
        a: an array, tracer or array-like (real input is converted to complex).
        n: the length of the transformed axis: ``a`` is cropped or zero-padded to it
            (default: its length).
        axis: the axis to transform.
        norm: ``"backward"`` (None: unscaled), ``"ortho"`` (``1/sqrt(n)``) or
            ``"forward"`` (``1/n``).
        out: not supported (TypeError if given).

    Returns:
        The complex transform, with ``n`` entries along ``axis``.

    Raises:
        ValueError: ``n`` < 1, a bad ``norm`` or an out-of-range ``axis``.

    Example:
        >>> fft(np.array([1.0, 0.0, 0.0]))   # array([1.+0.j, 1.+0.j, 1.+0.j])
    """
    return _one_axis("fft", "fft", a, n, axis, norm, out)


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
         out: Any = None) -> Any:
    """The inverse of :func:`fft` (NumPy's ``numpy.fft.ifft``; ``1/n`` by default).

    Arguments, results and errors as for :func:`fft`.

    Example:
        >>> ifft(fft(np.array([1.0, 2.0])))   # array([1.+0.j, 2.+0.j])
    """
    return _one_axis("ifft", "ifft", a, n, axis, norm, out)


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
         out: Any = None) -> Any:
    """The discrete Fourier transform of real input (NumPy's ``numpy.fft.rfft``).

    Args:
        a: a real (or integer) array, tracer or array-like.
        n: the signal length used along ``axis`` (cropped or zero-padded to; default its
            length).
        axis, norm, out: as for :func:`fft`.

    Returns:
        The ``n // 2 + 1`` non-negative-frequency bins along ``axis`` (complex).

    Raises:
        DTypeError: ``a`` is complex (a TypeError). ValueError: as for :func:`fft`.

    Example:
        >>> rfft(np.array([1.0, 1.0, 1.0, 1.0]))   # array([4.+0.j, 0.+0.j, 0.+0.j])
    """
    return _one_axis("rfft", "rfft", a, n, axis, norm, out)


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
          out: Any = None) -> Any:
    """The inverse of :func:`rfft` (NumPy's ``numpy.fft.irfft``).

    Args:
        a: the non-negative-frequency bins of a Hermitian spectrum (real input is
            converted to complex); the imaginary parts of the zero-frequency and (for even
            ``n``) Nyquist bins are ignored.
        n: the length of the real output (default ``2 * (m - 1)`` for ``m`` input bins);
            the input is cropped or zero-padded to ``n // 2 + 1`` bins.
        axis, norm, out: as for :func:`fft`.

    Returns:
        The real signal, ``n`` entries along ``axis``.

    Raises:
        ValueError: ``n`` < 1 (also by default with a single input bin), a bad ``norm`` or
            ``axis``.

    Example:
        >>> irfft(rfft(np.array([1.0, 2.0, 3.0])), n=3)   # array([1., 2., 3.])
    """
    return _one_axis("irfft", "irfft", a, n, axis, norm, out)


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
         out: Any = None) -> Any:
    """The FFT of a signal with Hermitian symmetry, given by its first half (NumPy's
    ``numpy.fft.hfft``): ``irfft(conj(a), n)`` with the norm's direction swapped.

    Arguments as for :func:`irfft`; returns a real array with ``n`` entries along ``axis``.

    Example:
        >>> hfft(np.array([1.0, 0.0, 0.0]))   # array([1., 1., 1., 1.])
    """
    check_no_out("fft.hfft", out)
    norm = _swap_direction(_norm("hfft", norm))
    return _one_axis("hfft", "irfft", _cx.conj(_fshape.as_array(a)), n, axis, norm, None)


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None,
          out: Any = None) -> Any:
    """The inverse of :func:`hfft` (NumPy's ``numpy.fft.ihfft``): ``conj(rfft(a, n))`` with
    the norm's direction swapped.

    Arguments as for :func:`rfft`; returns the ``n // 2 + 1`` bins along ``axis``.

    Example:
        >>> ihfft(np.array([1.0, 1.0, 1.0, 1.0]))   # array([1.+0.j, 0.+0.j, 0.+0.j])
    """
    check_no_out("fft.ihfft", out)
    norm = _swap_direction(_norm("ihfft", norm))
    return _cx.conj(_one_axis("ihfft", "rfft", a, n, axis, norm, None))


# ----------------------------------------------------------------------------------------
# several axes


def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None, out: Any = None) -> Any:
    """The n-dimensional discrete Fourier transform (NumPy's ``numpy.fft.fftn``).

    Args:
        a: an array, tracer or array-like (real input is converted to complex).
        s: the lengths of the transformed axes (crop or zero-pad; -1 keeps an axis's
            length); default their lengths.
        axes: the axes to transform: default all axes, or the last ``len(s)`` if ``s`` is
            given. Repeated axes are transformed repeatedly, as in NumPy.
        norm: ``"backward"`` (None), ``"ortho"`` or ``"forward"``; the scale is the product
            of the lengths.
        out: not supported (TypeError if given).

    Returns:
        The complex transform.

    Raises:
        ValueError: a length < 1, ``s`` and ``axes`` of different lengths, a bad ``norm``
            or an out-of-range axis.

    Example:
        >>> fftn(np.ones((2, 3)))   # 6 at [0, 0], zeros elsewhere
    """
    return _n_axes("fftn", "fft", a, s, axes, norm, out)


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None, out: Any = None) -> Any:
    """The inverse of :func:`fftn` (NumPy's ``numpy.fft.ifftn``).

    Arguments, results and errors as for :func:`fftn`.

    Example:
        >>> ifftn(fftn(np.eye(2)))   # the identity, as complex numbers
    """
    return _n_axes("ifftn", "ifft", a, s, axes, norm, out)


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None, out: Any = None) -> Any:
    """The n-dimensional FFT of real input (NumPy's ``numpy.fft.rfftn``): the last axis in
    ``axes`` keeps its ``s[-1] // 2 + 1`` non-negative-frequency bins.

    Arguments as for :func:`fftn`, for real ``a``.

    Raises:
        DTypeError: ``a`` is complex. ValueError: as for :func:`fftn`, or ``axes=()``.

    Example:
        >>> rfftn(np.ones((2, 4))).shape   # (2, 3)
    """
    return _n_axes("rfftn", "rfft", a, s, axes, norm, out)


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None, out: Any = None) -> Any:
    """The inverse of :func:`rfftn` (NumPy's ``numpy.fft.irfftn``).

    Args:
        a: the spectrum, halved along the last axis in ``axes``.
        s: the lengths of the real output along ``axes`` (default: the input's lengths,
            and ``2 * (m - 1)`` along the last axis of ``m`` bins).
        axes, norm, out: as for :func:`fftn`.

    Returns:
        The real array.

    Raises:
        ValueError: as for :func:`fftn`, or ``axes=()``.

    Example:
        >>> irfftn(rfftn(np.ones((2, 4))), s=(2, 4))   # ones
    """
    return _n_axes("irfftn", "irfft", a, s, axes, norm, out)


def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None, out: Any = None) -> Any:
    """The two-dimensional FFT (NumPy's ``numpy.fft.fft2``): :func:`fftn` over ``axes``.

    Example:
        >>> fft2(np.ones((2, 2)))   # 4 at [0, 0], zeros elsewhere
    """
    return _n_axes("fft2", "fft", a, s, axes, norm, out)


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None, out: Any = None) -> Any:
    """The inverse of :func:`fft2` (NumPy's ``numpy.fft.ifft2``): :func:`ifftn` over ``axes``.

    Example:
        >>> ifft2(fft2(np.eye(2)))   # the identity, as complex numbers
    """
    return _n_axes("ifft2", "ifft", a, s, axes, norm, out)


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None, out: Any = None) -> Any:
    """The two-dimensional FFT of real input (NumPy's ``numpy.fft.rfft2``): :func:`rfftn`
    over ``axes``.

    Example:
        >>> rfft2(np.ones((3, 4))).shape   # (3, 3)
    """
    return _n_axes("rfft2", "rfft", a, s, axes, norm, out)


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None, out: Any = None) -> Any:
    """The inverse of :func:`rfft2` (NumPy's ``numpy.fft.irfft2``): :func:`irfftn` over
    ``axes``.

    Example:
        >>> irfft2(rfft2(np.ones((3, 4))), s=(3, 4))   # ones
    """
    return _n_axes("irfft2", "irfft", a, s, axes, norm, out)


# ----------------------------------------------------------------------------------------
# helpers


def _freq_ints(n: int, half: bool) -> np.ndarray:
    if half:
        return np.arange(0, n // 2 + 1, dtype=np.int64)
    m = (n - 1) // 2 + 1
    return np.concatenate([np.arange(0, m, dtype=np.int64),
                           np.arange(-(n // 2), 0, dtype=np.int64)])


def _freqs(name: str, n: Any, d: Any, device: Any, half: bool) -> Any:
    if not isinstance(n, (builtins.int, np.integer)) or isinstance(n, builtins.bool):
        raise ValueError(f"functx.numpy.fft.{name}: n should be an integer, not {n!r}.")
    n = builtins.int(n)
    if is_tracer(d):
        from functx.numpy import divide, multiply

        return multiply(_creation._placed(device, _freq_ints(n, half)), divide(1.0, d * n))
    host = np.fft.rfftfreq(n, d) if half else np.fft.fftfreq(n, d)
    return _creation._placed(device, np.asarray(host))


def fftfreq(n: int, d: Any = 1.0, device: Any = None) -> Any:
    """The sample frequencies of :func:`fft`'s bins (NumPy's ``numpy.fft.fftfreq``):
    ``[0, 1, ..., (n-1)//2, -(n//2), ..., -1] / (d * n)``.

    Args:
        n: the window length (an int).
        d: the sample spacing (a number, or a traced scalar: the result is then
            differentiable with respect to it).
        device: where to make the array (the default device if None).

    Returns:
        A float array of ``n`` frequencies.

    Raises:
        ValueError: ``n`` is not an integer.

    Example:
        >>> fftfreq(4, d=0.5)   # array([ 0. ,  0.5, -1. , -0.5])
    """
    return _freqs("fftfreq", n, d, device, False)


def rfftfreq(n: int, d: Any = 1.0, device: Any = None) -> Any:
    """The sample frequencies of :func:`rfft`'s bins (NumPy's ``numpy.fft.rfftfreq``):
    ``[0, 1, ..., n//2] / (d * n)``. Arguments as for :func:`fftfreq`.

    Example:
        >>> rfftfreq(4, d=0.5)   # array([0. , 0.5, 1. ])
    """
    return _freqs("rfftfreq", n, d, device, True)


def _shift(x: Any, axes: Any, sign: int) -> Any:
    from functx.numpy import roll

    x = _fshape.as_array(x)
    if axes is None:
        axes = tuple(range(len(x.shape)))
    if isinstance(axes, (builtins.int, np.integer)):
        return roll(x, sign * (x.shape[axes] // 2), axes)
    axes = tuple(axes)
    return roll(x, [sign * (x.shape[a] // 2) for a in axes], axes)


def fftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    """The zero-frequency bin moved to the centre (NumPy's ``numpy.fft.fftshift``): ``x``
    rolled by half its length along ``axes`` (default all axes).

    Example:
        >>> fftshift(fftfreq(4))   # array([-0.5 , -0.25,  0.  ,  0.25])
    """
    return _shift(x, axes, 1)


def ifftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    """The inverse of :func:`fftshift` (NumPy's ``numpy.fft.ifftshift``).

    Example:
        >>> ifftshift(fftshift(fftfreq(5)))   # fftfreq(5)
    """
    return _shift(x, axes, -1)
