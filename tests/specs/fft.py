"""Specs of the FFT primitive (one per ``fft_type``) and the complex parts (real, imag, conj).

The rule tests need float64 arguments and outputs, so complex values enter as two real
arrays (``re + 1j * im``, built inside ``fn`` with ``convert_element_type``, ``mul``, ``add``)
and leave as their stacked real and imaginary parts (shape ``(2, *shape)``). The transform's
static parameters (type, lengths, leading shape) are drawn first and the arrays second; the
parameters travel as a last, empty int8 argument whose shape ``(0, i)`` holds their number
``i`` in a table (shapes stay concrete under tracing), as in tests/specs/structural.py.

References are explicit DFT matrices applied axis by axis (not numpy.fft, which the
implementation calls): ``exp(-2 pi i k n / N)`` forward, its conjugate over ``N`` inverse;
``irfft``'s reference weights the bins that stand for two (all but the zero-frequency and
Nyquist ones) by 2 and takes the real part.
"""
from __future__ import annotations

from types import SimpleNamespace as P
from typing import Any

import numpy as np
from hypothesis import strategies as st

from functx.primitives import complex as cx
from functx.primitives import elementwise as ew
from functx.primitives import fft as fp
from functx.primitives import shape as sh
from tests.specs import PrimSpec
from tests.strategies import array

C128 = np.dtype(np.complex128)


# -- building complex values from real arrays and back ------------------------------------------

def to_complex(re: Any, im: Any) -> Any:
    """``re + 1j * im`` from primitives (so that it traces and differentiates)."""
    im_c = ew.convert_element_type(im, new_dtype=C128)
    return ew.add(ew.convert_element_type(re, new_dtype=C128),
                  ew.mul(im_c, ew.scalar(im_c, 1j)))


def parts(z: Any) -> Any:
    """The real and imaginary parts of ``z`` stacked on a new first axis."""
    return sh.concatenate([sh.expand_dims(cx.real(z), (0,)), sh.expand_dims(cx.imag(z), (0,))],
                          0)


def np_parts(z: np.ndarray) -> np.ndarray:
    return np.stack([np.real(z), np.imag(z)])


# -- the reference: explicit DFT matrices -------------------------------------------------------

def _dft_axis(x: np.ndarray, axis: int, n_out: int, n: int, sign: float) -> np.ndarray:
    """``sum_j x[..., j, ...] exp(sign 2 pi i k j / n)`` for ``k < n_out`` along ``axis``."""
    k = np.arange(n_out)[:, None]
    j = np.arange(x.shape[axis])[None, :]
    w = np.exp(sign * 2j * np.pi * ((k * j) % n) / n)
    return np.moveaxis(np.tensordot(x, w, axes=([axis], [1])), -1, axis)


def ref_fft(x: np.ndarray, fft_type: str, lengths: tuple[int, ...]) -> np.ndarray:
    k = len(lengths)
    axes = range(x.ndim - k, x.ndim)
    y = x.astype(C128)
    if fft_type in ("fft", "ifft", "rfft"):
        sign = -1.0 if fft_type != "ifft" else 1.0
        for ax, n in zip(axes, lengths):
            y = _dft_axis(y, ax, n, n, sign)
        if fft_type == "ifft":
            y = y / np.prod(lengths)
        if fft_type == "rfft":
            y = y[..., : lengths[-1] // 2 + 1]
        return y
    # irfft: inverse DFTs over the leading transformed axes, then the Hermitian last axis.
    for ax, n in zip(list(axes)[:-1], lengths[:-1]):
        y = _dft_axis(y, ax, n, n, 1.0)
    n = lengths[-1]
    mask = np.full(n // 2 + 1, 2.0)
    mask[0] = 1.0
    if n % 2 == 0:
        mask[-1] = 1.0
    y = _dft_axis(y * mask, x.ndim - 1, n, n, 1.0)
    return np.real(y) / np.prod(lengths)


# -- parameters ---------------------------------------------------------------------------------

_PARAMS: list[P] = []
_NUMBERS: dict[str, int] = {}


def _handle(p: P) -> np.ndarray:
    """An empty int8 array standing for the parameters ``p``: its shape ``(0, i)`` holds
    their number ``i`` in a table (static under tracing)."""
    key = repr(p)
    if key not in _NUMBERS:
        _NUMBERS[key] = len(_PARAMS)
        _PARAMS.append(p)
    return np.zeros((0, _NUMBERS[key]), np.int8)


def _params(h: Any) -> P:
    return _PARAMS[h.shape[1]]


@st.composite
def _fft_params(draw, fft_type: str) -> P:
    k = draw(st.integers(1, 3))
    lengths = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4, 5, 6, 7]), min_size=k,
                                  max_size=k)))
    lead = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    if k == 3:
        lead = lead[:1]
    return P(fft_type=fft_type, lengths=lengths, lead=lead)


def _in_shape(p: P) -> tuple[int, ...]:
    return p.lead + fp._expected_in_shape(p.fft_type, p.lengths)


def _complex_in(p: P) -> st.SearchStrategy:
    return st.tuples(array(_in_shape(p)), array(_in_shape(p)), st.just(_handle(p)))


def _real_in(p: P) -> st.SearchStrategy:
    return st.tuples(array(_in_shape(p)), st.just(_handle(p)))


def _fft_spec(fft_type: str) -> PrimSpec:
    params = _fft_params(fft_type)
    if fft_type == "rfft":
        def fn(x, h):
            p = _params(h)
            return parts(fp.fft(x, "rfft", p.lengths))

        def ref(x, h):
            return np_parts(ref_fft(x, "rfft", _params(h).lengths))

        return PrimSpec("fft", fn, ref, params.flatmap(_real_in), diff_argnums=(0,),
                        rtol=1e-10, atol=1e-10, label="rfft")

    def fn(re, im, h):
        p = _params(h)
        y = fp.fft(to_complex(re, im), fft_type, p.lengths)
        return y if fft_type == "irfft" else parts(y)

    def ref(re, im, h):
        y = ref_fft(re + 1j * im, fft_type, _params(h).lengths)
        return y if fft_type == "irfft" else np_parts(y)

    return PrimSpec("fft", fn, ref, params.flatmap(_complex_in), diff_argnums=(0, 1),
                    rtol=1e-10, atol=1e-10, label=fft_type)


# -- complex parts ------------------------------------------------------------------------------

def _complex_args() -> st.SearchStrategy:
    from tests.strategies import shapes

    return shapes().flatmap(lambda s: st.tuples(array(s), array(s)))


SPECS = [_fft_spec(t) for t in fp.FFT_TYPES] + [
    # (The references hold for complex re and im too: tests/test_complex_rules.py.)
    PrimSpec("real", lambda re, im: cx.real(to_complex(re, im)),
             lambda re, im: np.real(re + 1j * im), _complex_args(), diff_argnums=(0, 1)),
    PrimSpec("imag", lambda re, im: cx.imag(to_complex(re, im)),
             lambda re, im: np.imag(re + 1j * im), _complex_args(), diff_argnums=(0, 1)),
    PrimSpec("conj", lambda re, im: parts(cx.conj(to_complex(re, im))),
             lambda re, im: np_parts(np.conj(re + 1j * im)), _complex_args(),
             diff_argnums=(0, 1)),
]
