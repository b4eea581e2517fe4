"""Gamma sampling: ``random_gamma`` and its implicit reparameterization gradient
``random_gamma_grad`` (the primitives behind ``functx.random.gamma``, ``loggamma``,
``beta``, ``dirichlet``, ``chisquare``, ``t``, ``f``, ``generalized_normal`` and ``ball``).

``random_gamma(keys, a, log_space)`` draws one Gamma(``a``, 1) value per element of ``a``
from that element's key (``keys`` has shape ``a.shape + (2,)``: ``functx.random.gamma``
passes ``split(key, a.size)``). The sampler is Marsaglia and Tsang's ("A simple method for
generating gamma variables", 2000) exactly as ``jax.random`` runs it for each element, with
the same key splits, so the values are JAX's to rounding; for ``a < 1`` it samples
Gamma(``a + 1``) and multiplies by ``u ** (1/a)`` (in log space with ``log_space``, where
tiny ``a`` would underflow). It is a primitive, not a composite, because its rejection loop
runs a data-dependent number of rounds: the implementation loops eagerly over the elements
still rejecting (vectorised, on NumPy or CuPy), so the primitive is one equation under
``jit`` and ``vmap``. The first round takes every element on whole arrays; the key splits
are one compiled loop per split on the CPU (``functx.primitives.bits.threefry_split``) and
compute only the keys that are read (the next round's key only for the elements that
reject, the next redraw key only for those redrawn).

Gradient (Figurnov et al., "Implicit reparameterization gradients", 2018, as JAX): holding
the sample's CDF fixed, ``dx/da = -(dP(a, x)/da) / (dP(a, x)/dx)``; ``random_gamma_grad``
computes it with the series of the regularized incomplete gamma function ``P`` (for
``x <= max(1, a)``) or the continued fraction of ``Q = 1 - P``, differentiated in ``a``
term by term (the algorithm of ``jax.lax.random_gamma_grad``). Its own derivatives are not
implemented in ``a`` (nor are they in JAX): differentiating it in ``a`` raises ``GradError``;
in ``x`` it has its closed form.
"""
from __future__ import annotations

from typing import Any

import types

import ml_dtypes
import numpy as np

from functx.backends import to_numpy
from functx.errors import DTypeError, GradError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives._batching import batch_size, elementwise_batch, to_front
from functx.primitives._util import fmt, is_extension_float
from functx.primitives.bits import threefry_split
from functx.primitives import special as _special_prims
from functx.primitives.elementwise._common import (check_dtype_class, make_binary_aval, scalar,
                                                   unbroadcast)
from functx.primitives.bits_normal import bits_to_normal_impl, unit_floats_from_bits
from functx.registry import Primitive
from functx.tracing import bind

_U32 = np.dtype(np.uint32)


def _special(xp: Any) -> Any:
    """SciPy's special functions for NumPy arrays, CuPy's for CuPy arrays."""
    import scipy.special as sp  # noqa: PLC0415  (a runtime dependency; imported when used)
    if xp is np:
        return sp
    try:
        import cupyx.scipy.special as csp  # noqa: PLC0415  (CuPy is optional)
        return csp
    except ImportError:  # another array module (the tests' fake device): SciPy on the host
        return types.SimpleNamespace(**{
            name: (lambda f: lambda *args: xp.asarray(f(*[to_numpy(v) for v in args])))(
                getattr(sp, name)) for name in ("gammaln", "digamma")})


# -- the per-element draws, vectorised over rows of keys -----------------------------------

# Keys are pairs ``(k1, k2)`` of 1-d uint32 arrays (key i is ``(k1[i], k2[i])``), so that
# every split writes contiguous words.

def _split(xp: Any, key: tuple, num: int, which: tuple | None = None) -> list:
    """``split(key_i, num)`` for every key of the pair: ``num`` pairs of arrays (or the
    ones in ``which``: a key nobody reads is not computed)."""
    y0, y1 = threefry_split(xp, key[0], key[1], num, which)
    return [(y0[r], y1[r]) for r in range(y0.shape[0])]


def _take(key: tuple, idx: Any) -> tuple:
    return key if idx is None else (key[0][idx], key[1][idx])


def _put(key: tuple, idx: Any, value: tuple) -> None:
    key[0][idx], key[1][idx] = value


def _bits_rows(xp: Any, key: tuple, dt: np.dtype) -> Any:
    """The bits ``random_bits(key_i, width, ())`` draws for a value of ``dt``, per key (the
    block function on the counters ``(0, 0)``: the first key of ``split(key_i, 1)``)."""
    y0, y1 = _split(xp, key, 1)[0]
    if dt == np.float64:
        return (y0.astype(np.uint64) << np.uint64(32)) | y1.astype(np.uint64)
    return y0 ^ y1


def unit_floats_rows(xp: Any, key: tuple, dt: np.dtype) -> Any:
    """``uniform(key_i, (), dt)`` in ``[0, 1)`` for every key (as functx.random)."""
    return unit_floats_from_bits(xp, _bits_rows(xp, key, dt), dt)


def normal_rows(xp: Any, key: tuple, dt: np.dtype) -> Any:
    """``normal(key_i, (), dt)`` for every key (as functx.random.normal)."""
    return bits_to_normal_impl(xp, _bits_rows(xp, key, dt), dtype=dt)


# -- random_gamma --------------------------------------------------------------------------

def _marsaglia_tsang(xp: Any, keys: Any, a: Any, log_space: bool) -> Any:
    dt = np.dtype(a.dtype)
    one, third = dt.type(1), dt.type(1.0 / 3.0)
    boost = a >= one
    alpha = xp.where(boost, a, a + one)
    d = alpha - third
    with np.errstate(invalid="ignore", divide="ignore"):
        c = third / xp.sqrt(d)
        key, subkey = _split(xp, (xp.ascontiguousarray(keys[:, 0]),
                                  xp.ascontiguousarray(keys[:, 1])), 2)
        # Rounds of every element still rejecting. The first round takes every element, so
        # it reads and writes whole arrays (no gathers, no scatters); the later ones, a few
        # percent of the elements, index them. The draws are the same either way.
        V = None
        active = None
        while active is None or active.size:
            # split(key, 3): the next round's key is computed after the test, only for the
            # elements that reject (most accept in their first round)
            round_key = _take(key, active)
            xkey, ukey = _split(xp, round_key, 3, (1, 2))
            ca = c if active is None else c[active]
            x = v = None
            inner = None
            while inner is None or inner.size:  # v = 1 + x c must be positive: redraw x
                if inner is None:
                    (k_draw,) = _split(xp, xkey, 2, (1,))
                    x = normal_rows(xp, k_draw, dt)
                    v = one + x * ca
                    inner = xp.nonzero(v <= 0)[0]  # (NaN parameters stop at once, as JAX)
                    if inner.size:  # the next keys of the few redrawn (split(xkey, 2)[0])
                        xkey = tuple(w.copy() for w in xkey)
                        _put(xkey, inner, _split(xp, _take(xkey, inner), 2, (0,))[0])
                    continue
                k_next, k_draw = _split(xp, _take(xkey, inner), 2)
                xi = normal_rows(xp, k_draw, dt)
                _put(xkey, inner, k_next)
                vi = one + xi * ca[inner]
                x[inner], v[inner] = xi, vi
                inner = inner[vi <= 0]
            X, Va = x * x, (v * v) * v
            U = unit_floats_rows(xp, ukey, dt)
            if active is None:
                V = Va
            else:
                V[active] = Va
            da = d if active is None else d[active]
            reject = ((U >= one - dt.type(0.0331) * (X * X))
                      & (xp.log(U) >= X * dt.type(0.5) + da * ((one - Va) + xp.log(Va))))
            rejected = xp.nonzero(reject)[0]
            if rejected.size:  # their next round's key: split(key, 3)[0]
                (next_key,) = _split(xp, _take(round_key, rejected), 3, (0,))
                if active is None:
                    key = tuple(w.copy() for w in key)
                    active = rejected
                else:
                    active = active[rejected]
                _put(key, active, next_key)
            else:
                active = rejected
        u = unit_floats_rows(xp, subkey, dt)
        if log_space:
            log_samples = xp.log1p(-u)  # -exponential(subkey)
            log_boost = xp.where(boost | (log_samples == 0), dt.type(0),
                                 log_samples * (one / a))
            return (xp.log(d) + xp.log(V)) + log_boost
        samples = one - u
        return (d * V) * xp.where(boost, one, samples ** (one / a))


def _gamma_impl(xp: Any, keys: Any, a: Any, *, log_space: bool) -> Any:
    a = xp.asarray(a)
    dt = np.dtype(a.dtype)
    if dt.itemsize < 4:  # float16, bfloat16: computed in float32, rounded once
        return _gamma_impl(xp, keys, a.astype(np.float32), log_space=log_space).astype(dt)
    flat_keys = xp.reshape(keys, (-1, 2))
    out = _marsaglia_tsang(xp, flat_keys, xp.reshape(a, (-1,)).copy(), log_space)
    return xp.reshape(out, a.shape)


random_gamma_p = Primitive("random_gamma")


@random_gamma_p.def_abstract_eval
def _gamma_aval(keys: AbstractArray, a: AbstractArray, *, log_space: bool) -> AbstractArray:
    dt = np.dtype(a.dtype)
    if np.dtype(keys.dtype) != _U32 or not (dt.kind == "f" or is_extension_float(dt)):
        raise DTypeError(f"random_gamma needs uint32 keys and a real float shape parameter "
                         f"but got {fmt((keys, a))}.")
    if tuple(keys.shape) != tuple(a.shape) + (2,):
        raise ShapeError(f"random_gamma needs one key per element of a: keys of shape "
                         f"{tuple(a.shape) + (2,)}, but got keys {fmt((keys,))} for a "
                         f"{fmt((a,))}. Pass functx.random.split(key, a.size) reshaped.")
    return AbstractArray(a.shape, a.dtype, False)


random_gamma_p.def_impl(_gamma_impl)


def _sample_grad(a: Any, out: Any, log_space: bool) -> Any:
    """d sample / d a from the sample (the log sample with ``log_space``)."""
    if not log_space:
        return random_gamma_grad(a, out)
    s = _ew.exp(out)
    s = _ew.select(_ew.eq(s, scalar(s, 0.0)), scalar(s, _finfo_tiny(s.dtype)), s)
    return _ew.div(random_gamma_grad(a, s), s)


def _finfo_tiny(dtype: Any) -> float:
    return float(ml_dtypes.finfo(np.dtype(dtype)).tiny)


@random_gamma_p.def_vjp(save_inputs=(1,), save_output=True)
def _gamma_vjp(ct, ins, out, *, log_space):
    return None, _ew.mul(ct, _sample_grad(ins[1], out, log_space))


@random_gamma_p.def_jvp
def _gamma_jvp(tangents, primals, out, *, log_space):
    ta = tangents[1]
    return None if ta is None else _ew.mul(ta, _sample_grad(primals[1], out, log_space))


@random_gamma_p.def_batch
def _gamma_batch(args, dims, *, log_space):
    size = batch_size(args, dims)
    keys, a = (to_front(x, d, size) for x, d in zip(args, dims))
    return bind(random_gamma_p, keys, a, log_space=log_space), 0


def random_gamma(keys: Any, a: Any, log_space: bool = False) -> Any:
    """Gamma(``a``, 1) samples (their logarithms with ``log_space``), one per element of
    ``a`` from the keys ``keys[..., :]`` of shape ``a.shape + (2,)``."""
    return bind(random_gamma_p, keys, a, log_space=bool(log_space))


# -- random_gamma_grad -----------------------------------------------------------------------

def _series(xp: Any, sp: Any, ax: Any, x: Any, a: Any, eps: float) -> Any:
    """JAX's ``_igamma_series`` in SAMPLE_DERIVATIVE mode, on the elements given."""
    r, c, ans = a.copy(), xp.ones_like(a), xp.ones_like(a)
    dc_da, dans_da = xp.zeros_like(a), xp.zeros_like(a)
    live = xp.arange(a.size)
    while live.size:
        rr, cc, xx = r[live] + 1, c[live], x[live]
        dc = dc_da[live] * (xx / rr) - (cc * xx) / (rr * rr)
        dans = dans_da[live] + dc
        cc = cc * (xx / rr)
        r[live], dc_da[live], dans_da[live], c[live] = rr, dc, dans, cc
        ans[live] = ans[live] + cc
        live = live[xp.abs(dc / dans) > eps]
    dlogax_da = xp.log(x) - sp.digamma(a + 1)
    return -(dans_da + ans * dlogax_da) * x / a


def _continued_fraction(xp: Any, sp: Any, ax: Any, x: Any, a: Any, eps: float) -> Any:
    """JAX's ``_igammac_continued_fraction`` in SAMPLE_DERIVATIVE mode (at most 2000
    rounds), on the elements given."""
    y = 1 - a
    z = x + y + 1
    pkm2, qkm2 = xp.ones_like(x), x.copy()
    pkm1, qkm1 = x + 1, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = (xp.zeros_like(x), xp.zeros_like(x), xp.zeros_like(x), -x)
    dans = (dpkm1 - ans * dqkm1) / qkm1
    live = xp.arange(x.size)
    big = 1 / eps
    for c in range(1, 2001):
        if not live.size:
            break
        y[live] += 1
        z[live] += 2
        yl, zl = y[live], z[live]
        yc = yl * c
        p1, q1, p2, q2 = pkm1[live], qkm1[live], pkm2[live], qkm2[live]
        d1, e1, d2, e2 = dpkm1[live], dqkm1[live], dpkm2[live], dqkm2[live]
        pk = p1 * zl - p2 * yc
        qk = q1 * zl - q2 * yc
        nz = qk != 0
        with np.errstate(invalid="ignore", divide="ignore"):
            r = pk / qk
            an = xp.where(nz, r, ans[live])
            dpk = d1 * zl - p1 - d2 * yc + p2 * c
            dqk = e1 * zl - q1 - e2 * yc + q2 * c
            dn = xp.where(nz, (dpk - an * dqk) / qk, dans[live])
        step = xp.where(nz, xp.abs(dn - dans[live]), 1)
        ans[live], dans[live] = an, dn
        scale = xp.where(xp.abs(pk) > big, eps, 1)
        pkm2[live], pkm1[live] = p1 * scale, pk * scale
        qkm2[live], qkm1[live] = q1 * scale, qk * scale
        dpkm2[live], dpkm1[live] = d1 * scale, dpk * scale
        dqkm2[live], dqkm1[live] = e1 * scale, dqk * scale
        live = live[step > eps]
    dlogax_da = xp.log(x) - sp.digamma(a)
    return -(dans + ans * dlogax_da) * x


def _gamma_grad_impl(xp: Any, a: Any, x: Any) -> Any:
    if type(a) in (int, float):  # a weak Python scalar takes the array's dtype (and device)
        a = xp.asarray(a, dtype=x.dtype)
    elif type(x) in (int, float):
        x = xp.asarray(x, dtype=a.dtype)
    a, x = xp.broadcast_arrays(xp.asarray(a), xp.asarray(x))
    dt = np.dtype(a.dtype)
    if dt.itemsize < 4:
        return _gamma_grad_impl(xp, a.astype(np.float32), x.astype(np.float32)).astype(dt)
    sp = _special(xp)
    eps = float(np.finfo(dt).eps)
    shape = a.shape
    a, x = xp.reshape(a, (-1,)).copy(), xp.reshape(x, (-1,)).copy()
    out = xp.zeros_like(a)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        is_nan = xp.isnan(a) | xp.isnan(x)
        x_zero = x == 0
        domain = (x < 0) | (a <= 0)
        ax = a * xp.log(x) - x - sp.gammaln(a)
        underflow = ax < -np.log(np.finfo(dt).max)
        enabled = ~(x_zero | domain | underflow | is_nan)
        use_cf = (x > 1) & (x > a)
        for sel, fn in ((enabled & ~use_cf, _series), (enabled & use_cf, _continued_fraction)):
            idx = xp.nonzero(sel)[0]
            if idx.size:
                sign = -1 if fn is _continued_fraction else 1  # as JAX: P = 1 - Q
                out[idx] = sign * fn(xp, sp, xp.exp(ax[idx]), x[idx], a[idx], eps)
    out = xp.where(domain | is_nan, dt.type(np.nan), out)
    return xp.reshape(out.astype(dt, copy=False), shape)


random_gamma_grad_p = Primitive("random_gamma_grad")
_grad_aval = make_binary_aval("random_gamma_grad", "float")


@random_gamma_grad_p.def_abstract_eval
def _gamma_grad_aval(a: AbstractArray, x: AbstractArray) -> AbstractArray:
    check_dtype_class("random_gamma_grad", "float", a, x)
    return _grad_aval(a, x)


random_gamma_grad_p.def_impl(_gamma_grad_impl)


def _no_a_derivative() -> GradError:
    return GradError(
        "random_gamma_grad (the derivative of gamma samples with respect to the shape "
        "parameter a) has no derivative in a in functx (nor in JAX): second derivatives of "
        "functx.random.gamma, beta, dirichlet, chisquare, t or f samples with respect to "
        "their shape parameters are not available. Differentiate once, or wrap the shape "
        "parameter in functx.stop_gradient where its second derivative is not needed.")


def _d_dx(a: Any, x: Any, g: Any) -> Any:
    """d g / d x for g = dx/da = -(dP/da) / (dP/dx): with p = dP/dx = x^(a-1) e^-x / Gamma(a),
    dP/(da dx) = p (log x - digamma(a)) and dp/dx = p ((a-1)/x - 1), so
    dg/dx = -(log x - digamma(a)) - g ((a-1)/x - 1)."""
    if type(a) in (int, float):  # a weak Python scalar: x's dtype and device
        a = scalar(x, a)
    one = scalar(x, 1.0)
    return _ew.sub(_ew.neg(_ew.sub(_ew.log(x), _special_prims.digamma(a))),
                   _ew.mul(g, _ew.sub(_ew.div(_ew.sub(a, one), x), one)))


@random_gamma_grad_p.def_vjp(save_inputs=(0, 1), save_output=True, selective=True)
def _gamma_grad_vjp(ct, ins, out, *, needs):
    if needs[0]:
        raise _no_a_derivative()
    a, x = ins
    return None, unbroadcast(_ew.mul(ct, _d_dx(a, x, out)), x)


@random_gamma_grad_p.def_jvp
def _gamma_grad_jvp(tangents, primals, out):
    ta, tx = tangents
    if ta is not None:
        raise _no_a_derivative()
    return None if tx is None else _ew.mul(tx, _d_dx(*primals, out))


random_gamma_grad_p.def_batch(elementwise_batch(random_gamma_grad_p))


def random_gamma_grad(a: Any, x: Any) -> Any:
    """``d x / d a`` for a Gamma(``a``, 1) sample ``x`` (implicit reparameterization)."""
    return bind(random_gamma_grad_p, a, x)
