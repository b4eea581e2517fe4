"""Specs of the sampling primitives: ``bits_to_normal`` (functx/primitives/bits_normal.py)
and ``random_gamma`` (functx/primitives/random_gamma.py).

References:

* ``bits_to_normal``: the mantissa bits made a uniform ``u`` in ``(-1, 1)`` with NumPy (in
  the dtype's arithmetic, as ``jax.random.uniform``), then ``sqrt(2) *
  scipy.special.erfinv(u)`` (SciPy's erfinv is within an ulp or two of exact; XLA's
  polynomial, which functx evaluates, within a few more: 3.1e-7 relative in float32 over
  the tails and a random sample, against this reference).
* ``random_gamma``: Marsaglia and Tsang's method written out one element at a time with
  ``functx.random``'s public ``split``, ``normal`` and ``uniform`` on that element's key (the
  primitive runs the same algorithm vectorised over the elements still rejecting). The
  gradient in ``a`` is checked against finite differences of the samples with the keys held
  fixed, which is what the implicit reparameterization gradient is.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import mpmath
import numpy as np
import scipy.special
from hypothesis import strategies as st

import functx.random as fxr
from functx.primitives import bits, bits_normal, random_gamma
from tests.specs import PrimSpec
from tests.specs.bits import _threefry_reference
from tests.strategies import array, shapes


def _bits(shape: tuple, dtype: type) -> st.SearchStrategy:
    def make(seed: int) -> np.ndarray:
        info = np.iinfo(dtype)
        return np.random.default_rng(seed).integers(0, info.max, size=shape, dtype=dtype,
                                                    endpoint=True)
    return st.integers(0, 2**32 - 1).map(make)


def _uniform_ref(bits: np.ndarray, dt: type) -> np.ndarray:
    """The top mantissa bits over 2**nmant, exactly (Python fractions are not needed: the
    quotient of an integer below 2**nmant by a power of two is exact in the dtype)."""
    nmant = np.finfo(dt).nmant
    m = bits >> np.array(np.dtype(dt).itemsize * 8 - nmant, bits.dtype)
    return (m.astype(np.float64) * 2.0 ** -nmant).astype(dt)


def _normal_ref(dt: type):
    def ref(bits: np.ndarray) -> np.ndarray:
        d = np.dtype(dt)
        nmant = np.finfo(d).nmant
        f = (bits >> np.array(d.itemsize * 8 - nmant, bits.dtype)).astype(np.float64) \
            * 2.0 ** -nmant
        # u in d's own arithmetic, rounded after the product and after the sum, as
        # jax.random.uniform computes it: in float32's tails one unit of u in the last place
        # moves x by up to 1% (|x| > 4.5), so u rounded once from float64 is another sample
        lo = d.type(np.nextafter(d.type(-1), d.type(0)))
        u = np.maximum(lo, f.astype(d) * (d.type(1) - lo) + lo).astype(np.float64)
        return (math.sqrt(2) * scipy.special.erfinv(u)).astype(d)
    return ref


def _gamma_one(key: np.ndarray, a: float, log_space: bool) -> float:
    """One Gamma(a) sample (its log with ``log_space``) as jax.random draws it."""
    boost = a >= 1
    alpha = a if boost else a + 1
    d = alpha - 1 / 3
    c = (1 / 3) / math.sqrt(d)
    key, subkey = np.asarray(fxr.split(key))
    X, V, U = 0.0, 1.0, 2.0
    while (U >= 1 - 0.0331 * (X * X)) and (math.log(U) >= X * 0.5 + d * ((1 - V) + math.log(V))):
        key, xkey, ukey = np.asarray(fxr.split(key, 3))
        x, v = 0.0, -1.0
        while v <= 0:
            xkey, sub = np.asarray(fxr.split(xkey))
            x = float(fxr.normal(sub))
            v = 1 + x * c
        X, V, U = x * x, (v * v) * v, float(fxr.uniform(ukey))
    u = float(fxr.uniform(subkey))
    if log_space:
        log_u = math.log1p(-u)
        boost_log = 0.0 if boost or log_u == 0 else log_u * (1 / a)
        return (math.log(d) + math.log(V)) + boost_log
    return (d * V) * (1.0 if boost else (1 - u) ** (1 / a))


def _gamma_ref(log_space: bool):
    def ref(keys: np.ndarray, a: np.ndarray, base: SimpleNamespace) -> np.ndarray:
        flat = [_gamma_one(k, float(x), log_space)
                for k, x in zip(keys.reshape(-1, 2), a.reshape(-1))]
        return np.array(flat, np.float64).reshape(a.shape)
    return ref


def _gamma_args(draw_shape: st.SearchStrategy) -> st.SearchStrategy:
    """(keys, a, base): ``base.a`` holds the drawn ``a`` (static), where ``_inverse_cdf``
    takes the quantile it holds fixed."""
    return draw_shape.flatmap(lambda s: st.tuples(_bits(s + (2,), np.uint32),
                                                  array(s, 0.3, 5.0))).map(
        lambda t: (t[0], t[1], SimpleNamespace(a=t[1].copy())))


def _inverse_cdf(log_space: bool):
    """The sample as a function of ``a`` with its quantile held at the one drawn at
    ``base.a``: ``gammaincinv(a, gammainc(base.a, x(base.a)))``. Its derivative is the
    implicit reparameterization gradient."""
    def fd_fn(keys: np.ndarray, a: np.ndarray, base: SimpleNamespace) -> np.ndarray:
        x0 = np.asarray(random_gamma.random_gamma(keys, base.a, log_space=log_space))
        q = scipy.special.gammainc(base.a, np.exp(x0) if log_space else x0)
        x = scipy.special.gammaincinv(np.asarray(a), q)
        return np.log(x) if log_space else x
    return fd_fn


def _random_bits_ref(width: int):
    """Element i of each key's draw: the block function of counter i (hi, lo words),
    xor-ed or concatenated."""
    def ref(k1: np.ndarray, k2: np.ndarray, shape: SimpleNamespace) -> np.ndarray:
        n = int(np.prod(shape.shape, dtype=np.int64))
        idx = np.arange(n, dtype=np.uint64)
        hi, lo = (idx >> np.uint64(32)).astype(np.uint32), idx.astype(np.uint32)
        y0, y1 = _threefry_reference(k1[..., None], k2[..., None], hi, lo)
        out = ((y0.astype(np.uint64) << np.uint64(32)) | y1.astype(np.uint64)
               if width == 64 else y0 ^ y1)
        return out.reshape(k1.shape + shape.shape)
    return ref


def _key_words(draw_shape: st.SearchStrategy) -> st.SearchStrategy:
    """(k1, k2, request): key words with leading batch axes, and the requested shape."""
    return st.tuples(shapes(max_rank=1, max_side=2), draw_shape).flatmap(
        lambda s: st.tuples(_bits(s[0], np.uint32), _bits(s[0], np.uint32),
                            st.just(SimpleNamespace(shape=s[1]))))


def _gamma_grad_ref(base: SimpleNamespace, x: np.ndarray) -> np.ndarray:
    """-(dP/da) / (dP/dx) with mpmath (dP/da by its numerical derivative at 30 digits)."""
    mpmath.mp.dps = 30
    a = mpmath.mpf(base.a)
    out = []
    for xi in x.ravel():
        xi = mpmath.mpf(float(xi))
        dp_da = mpmath.diff(lambda t: mpmath.gammainc(t, 0, xi, regularized=True), a)
        dp_dx = xi ** (a - 1) * mpmath.exp(-xi) / mpmath.gamma(a)
        out.append(float(-dp_da / dp_dx))
    return np.array(out, np.float64).reshape(x.shape)


def _gamma_grad_args(draw_shape: st.SearchStrategy) -> st.SearchStrategy:
    """(base holding a fixed shape parameter a, a Python float, so that it joins x's device
    and dtype; x): x on both sides of a and of 1 (the series and the continued fraction)."""
    return draw_shape.flatmap(lambda s: st.tuples(
        st.floats(0.3, 8.0).map(lambda a: SimpleNamespace(a=a)), array(s, 0.1, 12.0)))


SPECS = [
    PrimSpec("random_gamma_grad",
             lambda base, x: random_gamma.random_gamma_grad(base.a, x),
             _gamma_grad_ref, _gamma_grad_args(shapes(max_rank=2, max_side=3)),
             diff_argnums=(1,), rtol=1e-10, atol=1e-12, fd_rtol=1e-5, fd_atol=1e-7),
    *(PrimSpec("random_bits",
               lambda k1, k2, r, w=w: bits.random_bits(k1, k2, r.shape, w),
               _random_bits_ref(w), _key_words(shapes(max_rank=2, max_side=3)),
               diff_argnums=(), label=f"{w}") for w in (32, 64)),
    PrimSpec("bits_to_normal", lambda b: bits_normal.bits_to_normal(b, np.float64),
             _normal_ref(np.float64), shapes(max_side=3).flatmap(
                 lambda s: st.tuples(_bits(s, np.uint64))),
             diff_argnums=(), rtol=1e-13, atol=1e-15, label="float64"),
    PrimSpec("bits_to_normal", lambda b: bits_normal.bits_to_normal(b, np.float32),
             _normal_ref(np.float32), shapes(max_side=3).flatmap(
                 lambda s: st.tuples(_bits(s, np.uint32))),
             diff_argnums=(), rtol=1e-6, atol=1e-7, label="float32"),
    *(PrimSpec("bits_to_uniform", lambda b, d=d: bits_normal.bits_to_uniform(b, d),
               lambda b, d=d: _uniform_ref(b, d),
               shapes(max_side=3).flatmap(lambda s, u=u: st.tuples(_bits(s, u))),
               diff_argnums=(), rtol=0, atol=0, label=np.dtype(d).name)
      for d, u in ((np.float64, np.uint64), (np.float32, np.uint32),
                   (np.float16, np.uint16))),
    PrimSpec("random_gamma", lambda k, a, base: random_gamma.random_gamma(k, a),
             _gamma_ref(False), _gamma_args(shapes(max_rank=2, max_side=3)),
             diff_argnums=(1,), rtol=1e-13, atol=1e-14, fd_rtol=1e-5, fd_atol=1e-7,
             smooth=False, fd_fn=_inverse_cdf(False)),
    PrimSpec("random_gamma",
             lambda k, a, base: random_gamma.random_gamma(k, a, log_space=True),
             _gamma_ref(True), _gamma_args(shapes(max_rank=2, max_side=3)),
             diff_argnums=(1,), rtol=1e-13, atol=1e-14, fd_rtol=1e-5, fd_atol=1e-7,
             smooth=False, label="log_space", fd_fn=_inverse_cdf(True)),
]
