"""``jax.scipy.special``'s functions over functx primitives.

Every function takes array-likes (Python scalars, lists, NumPy/CuPy arrays, tracers),
promotes them to one real floating-point dtype (integers and booleans to float64 as
SciPy's ufuncs do; complex operands raise a DTypeError), broadcasts them, and
works under every transform. float32 stays float32 and is computed natively.

The functions SciPy computes with care are primitives (``functx.primitives.special``:
``erfc``, ``erfinv``, ``erfcx``, ``gammaln``, ``gamma``, ``digamma``, ``zeta``, ``gammainc``,
``gammaincc``, ``betaln``, ``betainc``, ``ndtri``, ``log_ndtr``, ``i0e``, ``i1e``, and ``erf``
and ``expit`` from the elementwise family); the others are plain functions of primitives.

Derivatives follow JAX: ``betainc`` is differentiable in ``x`` only (asking for ``a`` or
``b`` raises a GradError, as JAX raises); ``gammainc``/``gammaincc`` in both (in ``a`` with
JAX's ``igamma_grad_a`` algorithm; its own derivative in ``a``, a second derivative, raises
a GradError); ``zeta`` in both (in ``x`` through the derivative of JAX's series);
``polygamma`` in ``x`` (``n`` must be of an integer dtype, as in JAX);
``xlogy``/``xlog1py`` have JAX's derivative rule (``log(y)`` for ``x``, ``x / y`` for
``y``, also at ``x = 0``).

Example:
    >>> import functx
    >>> from functx.scipy import special
    >>> functx.grad(lambda x: special.gammaln(x))(3.0)   # digamma(3) = 0.9227...
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ArgumentError, ArgumentTypeError
from functx.primitives import elementwise as _ew
from functx.primitives import fused as _fused
from functx.primitives import special as _sp
from functx.primitives.misc import stop_gradient
from functx.scipy._args import float_arg, float_args
from functx.transforms.custom import custom_jvp

__all__ = [
    "erf", "erfc", "erfinv", "erfcx", "gammaln", "gamma", "digamma", "polygamma", "betaln",
    "betainc", "gammainc", "gammaincc", "xlogy", "xlog1py", "logsumexp", "expit", "logit",
    "log_softmax", "softmax", "ndtr", "ndtri", "log_ndtr", "i0", "i0e", "i1", "i1e", "entr",
    "kl_div", "rel_entr", "zeta", "multigammaln",
]

_SQRT_HALF = math.sqrt(0.5)


def _unary(name: str, prim_fn: Any, doc: str) -> Any:
    def fn(x: Any) -> Any:
        return prim_fn(float_arg(name, x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + f"""

    Args:
        x: a real array-like (promoted to a float dtype).

    Returns:
        An array (or tracer) of ``x``'s float dtype and shape.

    Example:
        >>> special.{name}(np.array([0.5, 1.5]))
    """
    return fn


erf = _unary("erf", _ew.erf, "The error function ``2/sqrt(pi) int_0^x exp(-t^2) dt``.")
erfc = _unary("erfc", _sp.erfc, "The complementary error function ``1 - erf(x)`` (accurate "
              "where it is small).")
erfinv = _unary("erfinv", _sp.erf_inv, "The inverse of ``erf`` on [-1, 1] (``±inf`` at ``±1``, "
                "NaN outside).")
erfcx = _unary("erfcx", _sp.erfcx, "The scaled complementary error function "
               "``exp(x^2) erfc(x)``, without overflow.")
gammaln = _unary("gammaln", _sp.lgamma, "``log|Gamma(x)|`` (inf at the poles 0, -1, -2, ...). "
                 "Its derivative is ``digamma``.")
gamma = _unary("gamma", _sp.gamma, "The gamma function (signed; NaN or inf at the poles as "
               "in SciPy).")
digamma = _unary("digamma", _sp.digamma, "The digamma function ``d/dx log Gamma(x)``; its "
                 "derivative is the trigamma ``polygamma(1, x)``.")
ndtri = _unary("ndtri", _sp.ndtri, "The standard normal quantile, the inverse of ``ndtr`` on "
               "[0, 1] (``±inf`` at 0 and 1, NaN outside).")
i0e = _unary("i0e", _sp.i0e, "``exp(-|x|) I0(x)``: the exponentially scaled modified Bessel "
             "function of order 0.")
i1e = _unary("i1e", _sp.i1e, "``exp(-|x|) I1(x)``: the exponentially scaled modified Bessel "
             "function of order 1.")
expit = _unary("expit", _ew.logistic, "The logistic sigmoid ``1 / (1 + exp(-x))``, stable "
               "for large ``|x|``.")


def i0(x: Any) -> Any:
    """The modified Bessel function of order 0, ``exp(|x|) i0e(x)`` (inf past ~713).

    Example:
        >>> special.i0(np.array([0.0, 1.0]))   # [1., 1.2660...]
    """
    x = float_arg("i0", x)
    return _ew.mul(_ew.exp(_ew.abs(x)), _sp.i0e(x))


def i1(x: Any) -> Any:
    """The modified Bessel function of order 1, ``exp(|x|) i1e(x)``.

    Example:
        >>> special.i1(np.array([0.0, 1.0]))   # [0., 0.5651...]
    """
    x = float_arg("i1", x)
    return _ew.mul(_ew.exp(_ew.abs(x)), _sp.i1e(x))


def ndtr(x: Any) -> Any:
    """The standard normal CDF ``erfc(-x / sqrt(2)) / 2`` (accurate in both tails).

    Example:
        >>> special.ndtr(np.array([0.0]))   # [0.5]
    """
    x = float_arg("ndtr", x)
    return _ew.mul(_sp.erfc(_ew.mul(x, -_SQRT_HALF)), 0.5)


def log_ndtr(x: Any, series_order: int = 3) -> Any:
    """``log(ndtr(x))``, accurate far into both tails.

    Args:
        x: a real array-like.
        series_order: accepted for JAX compatibility (an int in [0, 30]); SciPy's algorithm
            is accurate everywhere and does not use it.

    Raises:
        ArgumentError: ``series_order`` outside [0, 30] (JAX's check).

    Example:
        >>> special.log_ndtr(np.array([-40.0]))   # about -804.6, not -inf
    """
    if not isinstance(series_order, int) or not 0 <= series_order <= 30:
        raise ArgumentError(f"functx.scipy.special.log_ndtr: series_order must be an int in "
                            f"[0, 30], not {series_order!r}.")
    return _sp.log_ndtr(float_arg("log_ndtr", x))


def logit(x: Any) -> Any:
    """``log(x / (1 - x))``, the inverse of ``expit``; derivative ``1 / (x (1 - x))``.

    Example:
        >>> special.logit(np.array([0.5]))   # [0.]
    """
    x = float_arg("logit", x)
    with np.errstate(divide="ignore", invalid="ignore"):  # logit(1) = inf, outside: NaN
        return _ew.sub(_ew.log(x), _ew.log1p(_ew.neg(x)))


def zeta(x: Any, q: Any = None) -> Any:
    """The Hurwitz zeta function ``sum_n (n + q)^-x`` (the Riemann zeta where ``q`` is None,
    which JAX does not implement). Differentiable in ``q`` and in ``x`` (JAX's series).

    Example:
        >>> special.zeta(2.0, 1.0)   # pi^2 / 6
    """
    x, q = float_args("zeta", x, 1.0 if q is None else q)
    return _sp.zeta(x, q)


def gammainc(a: Any, x: Any) -> Any:
    """The regularised lower incomplete gamma function ``P(a, x)``. Differentiable in ``x``
    (``x^(a-1) exp(-x) / Gamma(a)``) and in ``a`` (JAX's algorithm); the second derivative
    in ``a`` raises a GradError.

    Example:
        >>> special.gammainc(1.0, 1.0)   # 1 - exp(-1)
    """
    return _sp.igamma(*float_args("gammainc", a, x))


def gammaincc(a: Any, x: Any) -> Any:
    """The regularised upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, accurate
    where it is small. Differentiable in ``a`` and ``x`` (as ``gammainc``).

    Example:
        >>> special.gammaincc(1.0, 1.0)   # exp(-1)
    """
    return _sp.igammac(*float_args("gammaincc", a, x))


def betaln(a: Any, b: Any) -> Any:
    """``log|B(a, b)|``, accurate for large arguments; differentiable in both.

    Example:
        >>> special.betaln(1.0, 1.0)   # 0.
    """
    return _sp.lbeta(*float_args("betaln", a, b))


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularised incomplete beta function ``I_x(a, b)``. Differentiable in ``x`` only
    (as in JAX: the derivative in ``a`` or ``b`` raises a GradError).

    Example:
        >>> special.betainc(1.0, 1.0, 0.3)   # 0.3
    """
    return _sp.betainc(*float_args("betainc", a, b, x))


def polygamma(n: Any, x: Any) -> Any:
    """The ``n``-th derivative of ``digamma``: ``digamma`` for ``n = 0``, else
    ``(-1)^(n+1) n! zeta(n + 1, x)``. Differentiable in ``x``.

    Args:
        n: an array-like of an integer dtype (as in JAX), ``n >= 0``.
        x: a real array-like.

    Raises:
        ArgumentTypeError: ``n`` is not of an integer dtype.

    Example:
        >>> special.polygamma(1, 1.0)   # pi^2 / 6
    """
    n_arr = n if hasattr(n, "dtype") else fnp.asarray(n)
    if np.dtype(n_arr.dtype).kind not in "iu":
        raise ArgumentTypeError(f"functx.scipy.special.polygamma: n must be of an integer "
                                f"dtype (as in JAX), not {n_arr.dtype}.")
    x = float_arg("polygamma", x)
    nf = fnp.astype(n_arr, x.dtype)
    is0 = _ew.eq(nf, np.zeros((), x.dtype))
    nf1 = fnp.where(is0, np.ones((), x.dtype), nf)  # n = 0 takes the digamma branch
    one = np.ones((), x.dtype)
    sign = _ew.sub(one, _ew.mul(np.full((), 2, x.dtype), fnp.remainder(nf1, 2.0)))  # (-1)^n
    s = _ew.add(nf1, one)
    factorial = _ew.exp(_sp.lgamma(s))
    z = _sp.zeta(s, x)
    higher = _ew.mul(_ew.neg(sign), _ew.mul(factorial, z))
    return fnp.where(is0, _sp.digamma(x), higher)


def multigammaln(a: Any, d: int) -> Any:
    """The log of the multivariate gamma function,
    ``d(d-1)/4 log(pi) + sum_{j<d} gammaln(a - j/2)``.

    Args:
        a: a real array-like (``a > (d-1)/2``).
        d: the dimension, a concrete int.

    Raises:
        ArgumentTypeError: ``d`` is not an int.

    Example:
        >>> special.multigammaln(2.0, 1)   # gammaln(2) = 0
    """
    try:
        d = operator.index(d)
    except TypeError:
        raise ArgumentTypeError(f"functx.scipy.special.multigammaln: d must be a concrete "
                                f"int, not {d!r}.") from None
    a = float_arg("multigammaln", a)
    const = 0.25 * d * (d - 1) * math.log(math.pi)
    offsets = fnp.asarray(np.arange(d) / 2.0, dtype=a.dtype)
    terms = _sp.lgamma(_ew.sub(fnp.expand_dims(a, -1), offsets))
    return _ew.add(fnp.sum(terms, axis=-1), np.asarray(const, a.dtype))


# -- x log y and the entropies -------------------------------------------------------------------

@custom_jvp
def _xlogy(x: Any, y: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):  # the unused x == 0 branch
        return fnp.where(fnp.logical_or(x != 0, fnp.isnan(y)), x * fnp.log(y), 0.0)


@_xlogy.defjvp
def _xlogy_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x, y), (tx, ty) = primals, tangents
    with np.errstate(divide="ignore", invalid="ignore"):
        return _xlogy(x, y), tx * fnp.log(y) + ty * x / y


@custom_jvp
def _xlog1py(x: Any, y: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return fnp.where(fnp.logical_or(x != 0, fnp.isnan(y)), x * fnp.log1p(y), 0.0)


@_xlog1py.defjvp
def _xlog1py_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x, y), (tx, ty) = primals, tangents
    with np.errstate(divide="ignore", invalid="ignore"):
        return _xlog1py(x, y), tx * fnp.log1p(y) + ty * x / (1 + y)


def _broadcast_pair(name: str, x: Any, y: Any) -> list:
    x, y = float_args(name, x, y)
    return list(fnp.broadcast_arrays(x, y)) if fnp.shape(x) != fnp.shape(y) else [x, y]


def xlogy(x: Any, y: Any) -> Any:
    """``x * log(y)``, 0 where ``x == 0`` (NaN in ``y`` still propagates), with JAX's
    derivative rule: ``log(y)`` for ``x`` and ``x / y`` for ``y``.

    Example:
        >>> special.xlogy(0.0, 0.0)   # 0.
    """
    return _xlogy(*_broadcast_pair("xlogy", x, y))


def xlog1py(x: Any, y: Any) -> Any:
    """``x * log1p(y)``, 0 where ``x == 0``; derivatives ``log1p(y)`` and ``x / (1 + y)``.

    Example:
        >>> special.xlog1py(0.0, -1.0)   # 0.
    """
    return _xlog1py(*_broadcast_pair("xlog1py", x, y))


def _xlogx(x: Any) -> Any:
    return _xlogy(x, x)


def entr(x: Any) -> Any:
    """The elementwise entropy ``-x log(x)``: 0 at 0 and ``-inf`` below.

    Example:
        >>> special.entr(np.array([0.0, 0.5, -1.0]))   # [0., 0.3466, -inf]
    """
    x = float_arg("entr", x)
    return fnp.where(x < 0, -np.inf, -_xlogx(x))


def rel_entr(p: Any, q: Any) -> Any:
    """The relative entropy ``p log(p / q)`` for ``p, q > 0``; 0 where ``p == 0`` and
    ``q >= 0``; inf elsewhere (NaN where either is NaN, as in SciPy).

    Example:
        >>> special.rel_entr(1.0, 0.5)   # log 2
    """
    p, q = _broadcast_pair("rel_entr", p, q)
    both = fnp.logical_and(p > 0, q > 0)
    safe_p, safe_q = fnp.where(both, p, 1.0), fnp.where(both, q, 1.0)
    val = _xlogy(safe_p, safe_p / safe_q)  # SciPy's form (inf for p = inf, not NaN)
    return fnp.where(both, val, _off_domain(p, q, 0.0))


def _off_domain(p: Any, q: Any, at_p_zero: Any) -> Any:
    """The value of ``rel_entr``/``kl_div`` outside ``p, q > 0``: ``at_p_zero`` where
    ``p == 0 <= q``, NaN where either is NaN, inf elsewhere (no derivative)."""
    p, q = stop_gradient(p), stop_gradient(q)
    one_zero = fnp.logical_and(p == 0, q >= 0)
    nan = fnp.logical_or(fnp.isnan(p), fnp.isnan(q))
    inf = fnp.where(nan, np.nan, np.inf).astype(p.dtype)
    return fnp.where(one_zero, at_p_zero, inf)


def kl_div(p: Any, q: Any) -> Any:
    """``p log(p / q) - p + q`` for ``p, q > 0``; ``q`` where ``p == 0`` and ``q >= 0``; inf
    elsewhere (NaN where either is NaN, as in SciPy).

    Example:
        >>> special.kl_div(1.0, 1.0)   # 0.
    """
    p, q = _broadcast_pair("kl_div", p, q)
    both = fnp.logical_and(p > 0, q > 0)
    safe_p, safe_q = fnp.where(both, p, 1.0), fnp.where(both, q, 1.0)
    val = _xlogy(safe_p, safe_p / safe_q) - safe_p + safe_q
    return fnp.where(both, val, _off_domain(p, q, q))


# -- normalisation over axes -------------------------------------------------------------------

def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False, where: Any = None) -> Any:
    """``log(sum(b * exp(a), axis))``, stably (JAX's and SciPy's signature).

    Args:
        a: the array.
        axis: None (all axes), an int or a tuple of ints.
        b: weights broadcast against ``a`` (may be negative with ``return_sign``).
        keepdims: keep the reduced axes with size 1.
        return_sign: return ``(log|s|, sign(s))``; without it a negative sum gives NaN.
        where: a boolean mask of the entries to include (the others count as ``-inf``).

    Returns:
        The result, or the pair with ``return_sign``.

    Example:
        >>> special.logsumexp(np.array([1000.0, 1000.0]))   # 1000 + log 2
    """
    a = float_arg("logsumexp", a)
    if where is not None:
        a = fnp.where(where, a, -np.inf)
    return fnp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)


def _single_axis(axis: Any, ndim: int) -> int | None:
    if isinstance(axis, (tuple, list)) and len(axis) == 1:
        axis = axis[0]
    if isinstance(axis, (int, np.integer)) and ndim > 0:
        return int(axis)
    return None


def log_softmax(x: Any, /, *, axis: Any = None) -> Any:
    """``x - logsumexp(x, axis, keepdims=True)`` (over all axes where ``axis`` is None, as in
    ``jax.scipy.special``). A single axis uses the fused primitive.

    Example:
        >>> special.log_softmax(np.array([0.0, 0.0]))   # [-log 2, -log 2]
    """
    x = float_arg("log_softmax", x)
    ax = _single_axis(axis, fnp.ndim(x))
    if ax is not None:
        return _fused.log_softmax(x, axis=ax)
    return x - fnp.logsumexp(x, axis=axis, keepdims=True)


def softmax(x: Any, /, *, axis: Any = None) -> Any:
    """``exp(x) / sum(exp(x), axis)``, stably (over all axes where ``axis`` is None, as in
    ``jax.scipy.special``). A single axis uses the fused primitive.

    Example:
        >>> special.softmax(np.array([0.0, 0.0]))   # [0.5, 0.5]
    """
    x = float_arg("softmax", x)
    ax = _single_axis(axis, fnp.ndim(x))
    if ax is not None:
        return _fused.softmax(x, axis=ax)
    return fnp.exp(x - fnp.logsumexp(x, axis=axis, keepdims=True))
